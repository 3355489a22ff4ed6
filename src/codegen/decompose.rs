//! Late rewrites for the target: ops a renderer does not list become ones it does, so a backend
//! needs only a small core; where it lists `MulAcc`, float multiply-adds are fused into it.

use std::collections::HashSet;

use crate::dtype::{DType, Scalar};
use crate::rule;
use crate::uop::exec::cast_value;
use crate::uop::{ConstValue, Ops, PatternMatcher, UOp, UPat};

/// What the target renders: its ops, and the 16-bit float dtypes it only stores (bfloat16, or
/// float16 on a device without half arithmetic), computing them in float32.
#[derive(Clone)]
pub struct Supported {
    pub ops: HashSet<Ops>,
    pub storage_only: Vec<DType>,
}

/// The rule rewriting `op` by `f` (its sources, itself) where the target does not list `op`.
#[track_caller]
pub(super) fn fallback(
    name: &'static str,
    op: Ops,
    f: fn(&[UOp], &UOp) -> Option<UOp>,
) -> crate::uop::pattern::Rule<Supported> {
    rule!(name, |x; sup: &mut Supported| UPat::ops(&[op]).named(x)
        => (!sup.ops.contains(&op)).then(|| f(x.src(), x)).flatten())
}

/// A 16-bit float `bf16` (bfloat16 or float16) the target has no arithmetic for: computed in
/// float32 and rounded back, so the result is the same as on a target that has it. Loads, stores
/// and selects move the raw 16 bits.
fn emulate_16bit(x: &UOp, bf16: DType) -> Option<UOp> {
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
fn fuse_mulacc() -> crate::uop::pattern::Rule<Supported> {
    let product = |a, b| UPat::op(Ops::Mul, [UPat::var(a), UPat::var(b)]);
    let float = |d: DType| matches!(d.scalar, Scalar::Float32 | Scalar::Float64);
    let sum = |a, b, c| UPat::comm(Ops::Add, product(a, b), UPat::var(c)).dtype(float);
    rule!("fused multiply-add", |a, b, c; sup: &mut Supported| sum(a, b, c)
        => sup.ops.contains(&Ops::MulAcc).then(|| a.alu(Ops::MulAcc, &[b, c])))
}

/// `c + WMMA(a, b, 0)` as `WMMA(a, b, c)`: a tensor core adds into its accumulator itself.
#[track_caller]
fn fuse_wmma_accumulate() -> crate::uop::pattern::Rule<Supported> {
    let wmma = |a, b, zero, w| UPat::op(Ops::Wmma, [UPat::var(a), UPat::var(b), UPat::var(zero)]).named(w);
    rule!("tensor core accumulates", |a, b, zero, w, c| UPat::comm(Ops::Add, wmma(a, b, zero, w), UPat::var(c)) => {
        let lanes = match zero.op() {
            Ops::Vectorize => zero.src().to_vec(),
            _ => vec![zero.clone()],
        };
        let zeros = lanes.iter().all(|l| l.const_value().is_some_and(|v| v.as_f64() == 0.0));
        zeros.then(|| w.replace_src(vec![a.clone(), b.clone(), c.clone()]))
    })
}

/// A scalar integer dtype: what the total-arithmetic rules below rewrite.
fn scalar_int(d: DType) -> bool {
    d.is_int() && d.count == 1
}

/// Integer division and remainder are total in the IR (`uop/exec.rs`, as numpy computes them):
/// by 0 both are 0, and `MIN / -1` wraps to MIN with remainder 0. Hardware traps there (x86) or
/// returns what it likes, so a divisor that may be 0 or -1 is replaced by 1 and the quotient
/// fixed up; divisors known to avoid both (index arithmetic's constants) are left alone.
#[track_caller]
fn total_division() -> crate::uop::pattern::Rule<Supported> {
    rule!("total division", |d| UPat::ops(&[Ops::IDiv, Ops::Mod]).dtype(scalar_int).named(d) => {
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
fn total_shift() -> crate::uop::pattern::Rule<Supported> {
    rule!("total shift", |s| UPat::ops(&[Ops::Shl, Ops::Shr]).dtype(scalar_int).named(s) => {
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

/// The bounds of the values whose truncation integer dtype `to` holds, as floats: the integer
/// range is `lo <= trunc(x) < end`, for `lo` 0 or -2^(bits-1) and `end` 2^bits or 2^(bits-1).
/// Powers of two are exact in every float dtype but float16, where those past its range become
/// ±inf: still the right bounds, as every finite float16 fits those integer types.
fn int_span(to: DType) -> (f64, f64) {
    let (lo, hi) = to.int_range();
    (lo as f64, (hi + 1) as f64)
}

/// Whether float `x` is above `lo` and below `end` (`int_span` of the cast's dtype): both hold
/// for the values C casts; NaN is neither, `x <= lo` gives the min and `x >= end` the max.
fn inside(x: &UOp, (lo, end): (f64, f64)) -> (UOp, UOp) {
    let above = x.const_like(ConstValue::Float(lo)).alu(Ops::CmpLt, &[x]);
    (above, x.alu(Ops::CmpLt, &[&x.const_like(ConstValue::Float(end))]))
}

/// Whether every value float `x` takes truncates into `span` (`int_span`): constants, integers
/// that round into it, and selects of those.
fn fits(x: &UOp, (lo, end): (f64, f64)) -> bool {
    let s = x.src();
    match x.op() {
        Ops::Const => x.const_value().is_some_and(|c| lo - 1.0 < c.as_f64() && c.as_f64() < end),
        Ops::Cast if !s[0].dtype().is_float() => {
            // rounding is monotone: the rounded ends bound the rounded values
            let (vmin, vmax) = s[0].bounds();
            let round = |v: i128| cast_value(ConstValue::Int(v as i64), s[0].dtype(), x.dtype()).as_f64();
            lo <= round(vmin) && round(vmax) < end
        }
        Ops::Where => fits(&s[1], (lo, end)) && fits(&s[2], (lo, end)),
        _ => false,
    }
}

/// Float-to-integer casts are total in the IR (`uop/exec.rs`): they truncate toward zero, NaN
/// gives 0 and a value past the integer range the range's min or max. C leaves a value whose
/// truncation the type cannot hold undefined (x86 gives INT_MIN; `(uchar)-1.0f` is 255), so a
/// cast whose source may fall outside casts 0 in its place and selects the ends; sources proved
/// to fit (`fits`) keep the plain cast. Float-to-integer casts are never vectors (`vector_op`).
#[track_caller]
fn total_cast() -> crate::uop::pattern::Rule<Supported> {
    rule!("total float-to-int cast", |c| UPat::ops(&[Ops::Cast]).dtype(scalar_int).named(c) => {
        let (x, span) = (&c.src()[0], int_span(c.dtype()));
        if !x.dtype().is_float() || fits(x, span) {
            return None;
        }
        let zero = x.const_like(ConstValue::Float(0.0));
        let inside_and = |y: &UOp| {
            let (above, below) = inside(y, span);
            above.alu(Ops::And, &[&below])
        };
        // the cast of the stand-in this rule made, `where(inside(y), y, 0)`, stays
        if x.op() == Ops::Where && x.src()[2] == zero && x.src()[0] == inside_and(&x.src()[1]) {
            return None;
        }
        let (above, below) = inside(x, span);
        let cast = UOp::where_(&inside_and(x), x, &zero).cast(c.dtype());
        let (lo, hi) = c.dtype().int_range();
        let (min, max) = (c.const_like(ConstValue::Int(lo as i64)), c.const_like(ConstValue::Int(hi as i64)));
        // NaN is neither above nor below: the cast of 0
        Some(UOp::where_(&above, &UOp::where_(&below, &cast, &max), &UOp::where_(&below, &min, &cast)))
    })
}

/// Fallbacks, each firing only when the target lacks what it replaces, the multiply-add fusion
/// where it has `MulAcc`, and integer division, shifts and float-to-integer casts made total.
pub fn pm_decompose() -> &'static PatternMatcher<Supported> {
    static PM: std::sync::LazyLock<PatternMatcher<Supported>> = std::sync::LazyLock::new(|| {
        PatternMatcher::new(vec![
            total_division(),
            total_shift(),
            fuse_mulacc(),
            fuse_wmma_accumulate(),
            rule!("16-bit float in float32", |x; sup: &mut Supported| UPat::var(x)
                => sup.storage_only.iter().find_map(|d| emulate_16bit(x, *d))),
            // after the 16-bit float emulation, which casts through float32
            total_cast(),
            fallback("a - b as a + -b", Ops::Sub, |s, _| Some(s[0].alu(Ops::Add, &[&s[1].alu(Ops::Neg, &[])]))),
            fallback("-x as x * -1", Ops::Neg, |s, x| match x.dtype().is_bool() {
                true => Some(s[0].alu(Ops::Xor, &[&x.const_like(ConstValue::Bool(true))])),
                false => Some(s[0].alu(Ops::Mul, &[&x.const_like(ConstValue::Int(-1))])),
            }),
            fallback("a == b as !(a != b)", Ops::CmpEq, |s, x| {
                Some(s[0].alu(Ops::CmpNe, &[&s[1]]).alu(Ops::Xor, &[&UOp::constant(x.dtype(), ConstValue::Bool(true))]))
            }),
            fallback("a / b as a * (1 / b)", Ops::FDiv, |s, _| Some(s[0].alu(Ops::Mul, &[&s[1].alu(Ops::Recip, &[])]))),
            fallback("a * b + c unfused", Ops::MulAcc, |s, _| {
                Some(s[0].alu(Ops::Mul, &[&s[1]]).alu(Ops::Add, &[&s[2]]))
            }),
            fallback("max as a select", Ops::Max, |s, _| {
                Some(UOp::where_(&s[1].alu(Ops::CmpLt, &[&s[0]]), &s[0], &s[1]))
            }),
        ])
    });
    &PM
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::graph_rewrite;

    #[test]
    fn float_to_int_casts_are_guarded_unless_they_fit() {
        let ops = [Ops::UNARY, Ops::BINARY, Ops::TERNARY].concat().into_iter().collect();
        let mut sup = Supported { ops, storage_only: vec![] };
        let param = |d: DType| UOp::new(Ops::Param, d, vec![], crate::uop::Arg::Int(0));
        let lower = |e: &UOp, sup: &mut Supported| graph_rewrite(e, pm_decompose(), sup, "decompose", false);
        // an int16 in float32 fits int32: a plain cast
        let small = param(DType::INT16).cast(DType::FLOAT32).cast(DType::INT32);
        assert_eq!(lower(&small, &mut sup), small);
        // 2^31 - 1 rounds to 2^31 in float32, past int32; any float may be NaN or infinite
        for x in [param(DType::INT32).cast(DType::FLOAT32), param(DType::FLOAT16)] {
            let out = lower(&x.cast(DType::INT32), &mut sup);
            assert_eq!(out.op(), Ops::Where);
            let casts: Vec<UOp> =
                out.toposort().into_iter().filter(|u| u.op() == Ops::Cast && u.dtype().is_int()).collect();
            assert_eq!(casts.len(), 1);
            assert_eq!(casts[0].src()[0].op(), Ops::Where, "the cast takes an in-range stand-in");
            assert_eq!(lower(&out, &mut sup), out, "a guarded cast is left alone");
        }
    }

    #[test]
    fn unsupported_ops_become_supported_ones() {
        let a = UOp::const_int(DType::INT32, 7);
        let b = UOp::new(Ops::Param, DType::INT32, vec![], crate::uop::Arg::Int(0));
        let e = a.alu(Ops::Sub, &[&b]);
        let mut all = Supported { ops: [Ops::Add, Ops::Mul].into(), storage_only: vec![] };
        let out = graph_rewrite(&e, pm_decompose(), &mut all, "decompose", false);
        assert!(out.toposort().iter().all(|u| !u.op().is_alu() || [Ops::Add, Ops::Mul].contains(&u.op())));
        let mut with_sub = Supported { ops: [Ops::Sub].into(), storage_only: vec![] };
        assert_eq!(graph_rewrite(&e, pm_decompose(), &mut with_sub, "decompose", false), e);
    }
}
