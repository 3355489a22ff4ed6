//! Rewrite ops a renderer does not list into ones it does, so a backend needs only a small core.

use std::collections::HashSet;

use crate::uop::{rule_ctx, ConstValue, Ops, PatternMatcher, UOp, UPat};

/// The ops the target renders.
pub struct Supported(pub HashSet<Ops>);

fn fallback(op: Ops, f: fn(&[UOp], &UOp) -> Option<UOp>) -> (UPat, crate::uop::pattern::RuleFn) {
    rule_ctx(UPat::ops(&[op]).named("x"), move |m, sup: &mut Supported| {
        let x = &m["x"];
        (!sup.0.contains(&op)).then(|| f(x.src(), x)).flatten()
    })
}

/// Fallbacks, each firing only when its op is unsupported.
pub fn pm_decompose() -> PatternMatcher {
    PatternMatcher::new(vec![
        fallback(Ops::Sub, |s, _| Some(s[0].alu(Ops::Add, &[&s[1].alu(Ops::Neg, &[])]))),
        fallback(Ops::Neg, |s, x| match x.dtype().is_bool() {
            true => Some(s[0].alu(Ops::Xor, &[&x.const_like(ConstValue::Bool(true))])),
            false => Some(s[0].alu(Ops::Mul, &[&x.const_like(ConstValue::Int(-1))])),
        }),
        fallback(Ops::CmpEq, |s, x| {
            Some(s[0].alu(Ops::CmpNe, &[&s[1]]).alu(Ops::Xor, &[&UOp::constant(x.dtype(), ConstValue::Bool(true))]))
        }),
        fallback(Ops::FDiv, |s, _| Some(s[0].alu(Ops::Mul, &[&s[1].alu(Ops::Recip, &[])]))),
        fallback(Ops::MulAcc, |s, _| Some(s[0].alu(Ops::Mul, &[&s[1]]).alu(Ops::Add, &[&s[2]]))),
        fallback(Ops::Max, |s, _| Some(UOp::where_(&s[1].alu(Ops::CmpLt, &[&s[0]]), &s[0], &s[1]))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::uop::graph_rewrite;

    #[test]
    fn unsupported_ops_become_supported_ones() {
        let a = UOp::const_int(DType::INT32, 7);
        let b = UOp::new(Ops::Param, DType::INT32, vec![], crate::uop::Arg::Int(0));
        let e = a.alu(Ops::Sub, &[&b]);
        let mut all: Supported = Supported([Ops::Add, Ops::Mul].into());
        let out = graph_rewrite(&e, &pm_decompose(), &mut all, "decompose", false);
        assert!(out.toposort().iter().all(|u| !u.op().is_alu() || [Ops::Add, Ops::Mul].contains(&u.op())));
        let mut with_sub = Supported([Ops::Sub].into());
        assert_eq!(graph_rewrite(&e, &pm_decompose(), &mut with_sub, "decompose", false), e);
    }
}
