//! float32 EXP2 and LOG2 for targets that do not list them (tinygrad's `xexp2`/`xlog2`): EXP2 in
//! float32 with the exponent built from integer bits, so that every op of it has a vector form
//! and a CPU computes 16 lanes at once; LOG2 in float64, whose headroom makes a short series
//! exact to float32. Every device then computes the same bits from the same IEEE additions,
//! multiplications and divisions (a C compiler's libm and an OpenCL driver's builtins differ by an
//! ulp here and there, enough for two trainings to drift apart). float64 EXP2 and LOG2 stay the
//! renderer's own.

use std::f64::consts::{LN_2, LOG2_E, SQRT_2};

use super::decompose::fallback;
use crate::dtype::DType;
use crate::uop::{Ops, PatternMatcher, UOp};

/// 2^x for x below this is below half the smallest float32 subnormal (0), above the next 2^128
/// (inf).
const EXP2_LO: f64 = -150.0;
const EXP2_HI: f64 = 128.0;
/// Exponents past +-this are scaled by 2^-+64 first: the bits of 2^n stay those of a normal float.
const EXP2_SPLIT: f64 = 100.0;
/// `y + 1.5·2^23` rounds `y` (|y| < 2^22) to an integer and holds it in the low mantissa bits.
const ROUNDER: f64 = 12582912.0;
/// Taylor terms of 2^f = e^(f ln 2) for |f| <= 1/2: the 8th is below 2^-27 of the sum.
const EXP2_TERMS: usize = 8;
/// Terms of atanh's series in t^2 for |t| <= 3 - 2 sqrt 2 (mantissas in [sqrt 1/2, sqrt 2]):
/// the 10th is below 2^-49 of the sum.
const LOG_TERMS: usize = 10;

/// The rewrite of float32 EXP2 and LOG2 where the target does not list them (`decompose`'s
/// fallbacks, with its `Supported` as the context). It runs before vectorization, so vectors of
/// float32 lanes compute the float64 arithmetic as vectors too.
pub fn pm_transcendental() -> &'static PatternMatcher<super::decompose::Supported> {
    static PM: std::sync::LazyLock<PatternMatcher<super::decompose::Supported>> = std::sync::LazyLock::new(|| {
        PatternMatcher::new(vec![
            fallback("exp2 computed", Ops::Exp2, |s, x| (x.dtype() == DType::FLOAT32).then(|| exp2(&s[0]))),
            fallback("log2 computed", Ops::Log2, |s, x| (x.dtype() == DType::FLOAT32).then(|| log2(&s[0]))),
        ])
    });
    &PM
}

fn f64c(v: f64) -> UOp {
    UOp::const_float(DType::FLOAT64, v)
}

fn i64c(v: i64) -> UOp {
    UOp::const_int(DType::INT64, v)
}

fn bitcast(x: &UOp, dtype: DType) -> UOp {
    UOp::new(Ops::Bitcast, dtype, vec![x.clone()], crate::uop::Arg::None)
}

/// `sum c[k] y^k` by Horner's rule, the coefficients lowest power first, made constants of `y`'s
/// dtype by `konst`.
fn horner(y: &UOp, coefficients: &[f64], konst: impl Fn(f64) -> UOp) -> UOp {
    let (last, rest) = coefficients.split_last().expect("coefficients");
    rest.iter().rev().fold(konst(*last), |acc, c| acc.alu(Ops::Mul, &[y]).alu(Ops::Add, &[&konst(*c)]))
}

/// 2^x in float32: x clamped to [-150, 128] is n + f with n an integer and |f| <= 1/2, 2^f by
/// its Taylor series and 2^n from exponent bits. An |n| past 100 is moved 64 closer to 0 first
/// and its 2^+-64 multiplied in last, so the one rounding happens there (overflow to inf,
/// underflow through the subnormals to 0). At the bottom of the clamp the factor is 0 in place
/// of 2^-64: the product that rounds 2^-150 to 0 underflows, and an x86 core takes ~100 cycles
/// for each vector that does so (a causal softmax's masked lanes, half of them: 3x the kernel's
/// time). NaN stays NaN.
fn exp2(x: &UOp) -> UOp {
    let (f32c, i32c) = (|v: f64| UOp::const_float(DType::FLOAT32, v), |v: i64| UOp::const_int(DType::INT32, v));
    let clamped = x.alu(Ops::Max, &[&f32c(EXP2_LO)]).alu(Ops::Neg, &[]);
    let clamped = clamped.alu(Ops::Max, &[&f32c(-EXP2_HI)]).alu(Ops::Neg, &[]);
    let (big, small) = (f32c(EXP2_SPLIT).alu(Ops::CmpLt, &[&clamped]), clamped.alu(Ops::CmpLt, &[&f32c(-EXP2_SPLIT)]));
    let pick = |b: f64, s: f64, other: f64| UOp::where_(&big, &f32c(b), &UOp::where_(&small, &f32c(s), &f32c(other)));
    let y = clamped.alu(Ops::Sub, &[&pick(64.0, -64.0, 0.0)]);
    let rounded = bitcast(&y.alu(Ops::Add, &[&f32c(ROUNDER)]), DType::INT32);
    let n = rounded.alu(Ops::Sub, &[&bitcast(&f32c(ROUNDER), DType::INT32)]);
    let f = y.alu(Ops::Sub, &[&n.cast(DType::FLOAT32)]);
    let mut terms = vec![1.0; EXP2_TERMS];
    for k in 1..EXP2_TERMS {
        terms[k] = terms[k - 1] * LN_2 / k as f64;
    }
    let powers = horner(&f, &terms, f32c);
    // in unsigned arithmetic, which wraps where a NaN's bits would overflow a signed shift
    let exponent =
        n.alu(Ops::Add, &[&i32c(127)]).cast(DType::UINT32).alu(Ops::Shl, &[&UOp::const_int(DType::UINT32, 23)]);
    let above_zero = f32c(EXP2_LO).alu(Ops::CmpLt, &[&clamped]);
    let factor = UOp::where_(&above_zero, &pick(2f64.powi(64), 2f64.powi(-64), 1.0), &f32c(0.0));
    let scaled = powers.alu(Ops::Mul, &[&bitcast(&exponent, DType::FLOAT32)]).alu(Ops::Mul, &[&factor]);
    UOp::where_(&x.alu(Ops::CmpNe, &[x]), x, &scaled)
}

/// log2(x): x = m 2^e with m in [sqrt 1/2, sqrt 2] from its float64 bits (float32 subnormals are
/// normal there), log m = 2 atanh(t) with t = (m - 1) / (m + 1) by its series; 0 gives -inf, inf
/// gives inf, negatives and NaN give NaN.
fn log2(x: &UOp) -> UOp {
    let d = x.cast(DType::FLOAT64);
    let bits = bitcast(&d, DType::INT64);
    let e = bits.alu(Ops::Shr, &[&i64c(52)]).cast(DType::FLOAT64).alu(Ops::Sub, &[&f64c(1023.0)]);
    let mantissa = bits.alu(Ops::And, &[&i64c((1 << 52) - 1)]).alu(Ops::Or, &[&i64c(1023 << 52)]);
    let m = bitcast(&mantissa, DType::FLOAT64);
    let big = f64c(SQRT_2).alu(Ops::CmpLt, &[&m]);
    let m = UOp::where_(&big, &m.alu(Ops::Mul, &[&f64c(0.5)]), &m);
    let e = UOp::where_(&big, &e.alu(Ops::Add, &[&f64c(1.0)]), &e);
    let t = m.alu(Ops::Sub, &[&f64c(1.0)]).alu(Ops::FDiv, &[&m.alu(Ops::Add, &[&f64c(1.0)])]);
    let series: Vec<f64> = (0..LOG_TERMS).map(|k| 1.0 / (2 * k + 1) as f64).collect();
    let ln_m = horner(&t.alu(Ops::Mul, &[&t]), &series, f64c).alu(Ops::Mul, &[&t.alu(Ops::Mul, &[&f64c(2.0)])]);
    let r = ln_m.alu(Ops::Mul, &[&f64c(LOG2_E)]).alu(Ops::Add, &[&e]);
    let inf = f64c(f64::INFINITY);
    let finite_positive = f64c(0.0).alu(Ops::CmpLt, &[&d]).alu(Ops::And, &[&d.alu(Ops::CmpLt, &[&inf])]);
    let edge = UOp::where_(
        &d.alu(Ops::CmpEq, &[&f64c(0.0)]),
        &f64c(f64::NEG_INFINITY),
        &UOp::where_(&d.alu(Ops::CmpEq, &[&inf]), &inf, &f64c(f64::NAN)),
    );
    UOp::where_(&finite_positive, &r, &edge).cast(DType::FLOAT32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::exec::{bitcast_value, cast_value, exec_alu};
    use crate::uop::{ConstValue, UOpMap};

    /// EXP2's rewrite at float32 `x`, evaluated node by node with the generated code's scalar
    /// semantics, and whether a float32 product on the way underflowed (a nonzero exact value
    /// below the smallest normal float).
    fn exp2_at(x: f64) -> (f64, bool) {
        let out = exp2(&UOp::const_float(DType::FLOAT32, x));
        let (mut vals, mut underflow): (UOpMap<ConstValue>, bool) = (UOpMap::default(), false);
        for u in out.toposort() {
            let src: Vec<ConstValue> = u.src().iter().map(|s| vals[s]).collect();
            let from = |i: usize| u.src()[i].dtype();
            let v = match u.op() {
                Ops::Const => u.const_value().expect("a constant"),
                Ops::Bitcast => bitcast_value(src[0], from(0), u.dtype()),
                Ops::Cast => cast_value(src[0], from(0), u.dtype()),
                Ops::Where => exec_alu(Ops::Where, u.dtype(), &src),
                op => exec_alu(op, from(0), &src),
            };
            if u.op() == Ops::Mul && u.dtype() == DType::FLOAT32 {
                let exact = src[0].as_f64() * src[1].as_f64();
                underflow |= exact != 0.0 && exact.abs() < f32::MIN_POSITIVE as f64;
            }
            vals.insert(u.clone(), v);
        }
        (vals[&out].as_f64(), underflow)
    }

    #[test]
    fn exp2_reaches_zero_below_the_subnormals_without_underflowing() {
        for x in [f64::NEG_INFINITY, -1e30, -200.0, -150.0] {
            assert_eq!(exp2_at(x), (0.0, false), "2^{x}");
        }
        // above the bottom the subnormals still come from the rounding of the last product
        assert_eq!(exp2_at(-149.5).0, 2f64.powi(-149));
        assert_eq!(exp2_at(-140.0).0, 2f64.powi(-140));
        assert_eq!(exp2_at(-20.0), (2f64.powi(-20), false));
    }
}
