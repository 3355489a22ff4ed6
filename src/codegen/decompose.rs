//! Late rewrites for the target: ops a renderer does not list become ones it does, so a backend
//! needs only a small core; where it lists `MulAcc`, float multiply-adds are fused into it.

use std::collections::HashSet;

use crate::dtype::{DType, Scalar};
use crate::uop::{rule_ctx, ConstValue, Ops, PatternMatcher, UOp, UPat};

/// What the target renders: its ops, and whether it has bfloat16 arithmetic.
pub struct Supported {
    pub ops: HashSet<Ops>,
    pub bf16_math: bool,
}

#[track_caller]
fn fallback(op: Ops, f: fn(&[UOp], &UOp) -> Option<UOp>) -> crate::uop::pattern::Rule {
    rule_ctx(UPat::ops(&[op]).named("x"), move |m, sup: &mut Supported| {
        let x = &m["x"];
        (!sup.ops.contains(&op)).then(|| f(x.src(), x)).flatten()
    })
}

/// bfloat16 without bfloat16 arithmetic: compute in float32 and round back, so the result is the
/// same as on a target that has it. Loads, stores and selects move the raw 16 bits.
fn emulate_bf16(x: &UOp) -> Option<UOp> {
    let bf16 = DType::BFLOAT16;
    let f32 = |u: &UOp| u.cast(DType::FLOAT32);
    match x.op() {
        Ops::Cast if x.dtype() == bf16 && x.src()[0].dtype() != DType::FLOAT32 => Some(f32(&x.src()[0]).cast(bf16)),
        Ops::Cast if x.src()[0].dtype() == bf16 && x.dtype() != DType::FLOAT32 => {
            Some(f32(&x.src()[0]).cast(x.dtype()))
        }
        op if op.is_alu() && op != Ops::Where && x.src().iter().any(|s| s.dtype() == bf16) => {
            let src: Vec<UOp> = x.src().iter().map(|s| if s.dtype() == bf16 { f32(s) } else { s.clone() }).collect();
            let out = UOp::new(op, if x.dtype() == bf16 { DType::FLOAT32 } else { x.dtype() }, src, x.arg().clone());
            Some(if x.dtype() == bf16 { out.cast(bf16) } else { out })
        }
        _ => None,
    }
}

/// `a*b + c` in float32 or float64 as one fused multiply-add (one rounding, one instruction).
#[track_caller]
fn fuse_mulacc() -> crate::uop::pattern::Rule {
    let product = UPat::op(Ops::Mul, [UPat::var("a"), UPat::var("b")]);
    let float = |d: DType| matches!(d.scalar, Scalar::Float32 | Scalar::Float64);
    rule_ctx(UPat::comm(Ops::Add, product, UPat::var("c")).dtype(float), |m, sup: &mut Supported| {
        sup.ops.contains(&Ops::MulAcc).then(|| m["a"].alu(Ops::MulAcc, &[&m["b"], &m["c"]]))
    })
}

/// Fallbacks, each firing only when the target lacks what it replaces, and the multiply-add
/// fusion where it has `MulAcc`.
pub fn pm_decompose() -> PatternMatcher {
    PatternMatcher::new(vec![
        fuse_mulacc(),
        rule_ctx(UPat::var("x"), |m, sup: &mut Supported| if sup.bf16_math { None } else { emulate_bf16(&m["x"]) }),
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
    use crate::uop::graph_rewrite;

    #[test]
    fn unsupported_ops_become_supported_ones() {
        let a = UOp::const_int(DType::INT32, 7);
        let b = UOp::new(Ops::Param, DType::INT32, vec![], crate::uop::Arg::Int(0));
        let e = a.alu(Ops::Sub, &[&b]);
        let mut all = Supported { ops: [Ops::Add, Ops::Mul].into(), bf16_math: true };
        let out = graph_rewrite(&e, &pm_decompose(), &mut all, "decompose", false);
        assert!(out.toposort().iter().all(|u| !u.op().is_alu() || [Ops::Add, Ops::Mul].contains(&u.op())));
        let mut with_sub = Supported { ops: [Ops::Sub].into(), bf16_math: true };
        assert_eq!(graph_rewrite(&e, &pm_decompose(), &mut with_sub, "decompose", false), e);
    }
}
