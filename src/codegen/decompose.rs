//! Late rewrites for the target: ops a renderer does not list become ones it does, so a backend
//! needs only a small core; where it lists `MulAcc`, float multiply-adds are fused into it.

use std::collections::HashSet;

use crate::dtype::{DType, Scalar};
use crate::uop::{rule, rule_ctx, ConstValue, Ops, PatternMatcher, UOp, UPat};

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

/// Integer division and remainder are total in the IR (`uop/exec.rs`, as numpy computes them):
/// by 0 both are 0, and `MIN / -1` wraps to MIN with remainder 0. Hardware traps there (x86) or
/// returns what it likes, so a divisor that may be 0 or -1 is replaced by 1 and the quotient
/// fixed up; divisors known to avoid both (index arithmetic's constants) are left alone.
#[track_caller]
fn total_division() -> crate::uop::pattern::Rule {
    let int = |d: DType| d.is_int() && d.count == 1;
    rule(UPat::ops(&[Ops::IDiv, Ops::Mod]).dtype(int).named("d"), |m| {
        let d = &m["d"];
        let (x, y) = (&d.src()[0], &d.src()[1]);
        let (lo, hi) = y.bounds();
        let minus_one = d.dtype().is_signed() && lo <= -1 && -1 <= hi;
        let replaced = y.op() == Ops::Where && y.src()[2].const_int_value() == Some(1);
        if replaced || !((lo..=hi).contains(&0) || minus_one) {
            return None;
        }
        let zero = y.const_like(ConstValue::Int(0));
        let nonzero = y.alu(Ops::CmpNe, &[&zero]);
        let usable = match minus_one {
            true => nonzero.alu(Ops::And, &[&y.alu(Ops::CmpNe, &[&y.const_like(ConstValue::Int(-1))])]),
            false => nonzero.clone(),
        };
        let q = d.replace_src(vec![x.clone(), UOp::where_(&usable, y, &y.const_like(ConstValue::Int(1)))]);
        Some(match d.op() {
            // x % 1 is 0: the remainder by 0 and by -1
            Ops::Mod => q,
            _ => UOp::where_(&usable, &q, &UOp::where_(&nonzero, &x.alu(Ops::Neg, &[]), &zero)),
        })
    })
}

/// Shifts are total in the IR as well: by a negative amount or by at least the width, a left
/// shift and an unsigned right shift give 0 and a signed right shift the sign bit's fill
/// (`uop/exec.rs`). C leaves those undefined, so an amount that may fall outside `0..bits` is
/// replaced by `bits - 1` (which a signed right shift needs) and the result selected.
#[track_caller]
fn total_shift() -> crate::uop::pattern::Rule {
    let int = |d: DType| d.is_int() && d.count == 1;
    rule(UPat::ops(&[Ops::Shl, Ops::Shr]).dtype(int).named("s"), |m| {
        let s = &m["s"];
        let (x, n) = (&s.src()[0], &s.src()[1]);
        let last = s.dtype().bits() as i64 - 1;
        let (lo, hi) = n.bounds();
        let replaced = n.op() == Ops::Where && n.src()[2].const_int_value() == Some(last);
        if replaced || (0..=last as i128).contains(&lo) && (0..=last as i128).contains(&hi) {
            return None;
        }
        let konst = |v: i64| n.const_like(ConstValue::Int(v));
        let below = n.alu(Ops::CmpLt, &[&konst(last + 1)]);
        let fits = match n.dtype().is_signed() {
            true => below.alu(Ops::And, &[&konst(-1).alu(Ops::CmpLt, &[n])]),
            false => below,
        };
        let shifted = s.replace_src(vec![x.clone(), UOp::where_(&fits, n, &konst(last))]);
        Some(match s.op() == Ops::Shr && s.dtype().is_signed() {
            true => shifted,
            false => UOp::where_(&fits, &shifted, &x.const_like(ConstValue::Int(0))),
        })
    })
}

/// Fallbacks, each firing only when the target lacks what it replaces, the multiply-add fusion
/// where it has `MulAcc`, and integer division and shifts made total.
pub fn pm_decompose() -> PatternMatcher {
    PatternMatcher::new(vec![
        total_division(),
        total_shift(),
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
