//! float32 EXP2 and LOG2 as float64 arithmetic, for targets that do not list them (tinygrad's
//! `xexp2`/`xlog2` idea with float64's headroom instead of double-float tricks): argument
//! reduction by exponent bits and a polynomial whose error is far below a float32 ulp, rounded
//! once to float32 at the end. Every device then computes the same bits from the same IEEE
//! additions, multiplications and divisions (a C compiler's libm and an OpenCL driver's builtins
//! differ by an ulp here and there, enough for two trainings to drift apart), and the CPU's
//! vectors compute them lane by lane in registers instead of one libm call per lane.
//! float64 EXP2 and LOG2 stay the renderer's own.

use std::f64::consts::{LN_2, LOG2_E, SQRT_2};

use super::decompose::fallback;
use crate::dtype::DType;
use crate::uop::{Ops, PatternMatcher, UOp};

/// Inputs past this are 2^x beyond float32's range either way (overflow above 128, 0 below -150).
const EXP2_CLAMP: f64 = 160.0;
/// Taylor terms of 2^f = e^(f ln 2) for |f| <= 1/2: the 11th is below 2^-42 of the sum.
const EXP2_TERMS: usize = 11;
/// Terms of atanh's series in t^2 for |t| <= 3 - 2 sqrt 2 (mantissas in [sqrt 1/2, sqrt 2]):
/// the 10th is below 2^-49 of the sum.
const LOG_TERMS: usize = 10;

/// The rewrite of float32 EXP2 and LOG2 where the target does not list them (`decompose`'s
/// fallbacks, with its `Supported` as the context). It runs before vectorization, so vectors of
/// float32 lanes compute the float64 arithmetic as vectors too.
pub fn pm_transcendental() -> &'static PatternMatcher {
    static PM: std::sync::LazyLock<PatternMatcher> = std::sync::LazyLock::new(|| {
        PatternMatcher::new(vec![
            fallback(Ops::Exp2, |s, x| (x.dtype() == DType::FLOAT32).then(|| exp2(&s[0]))),
            fallback(Ops::Log2, |s, x| (x.dtype() == DType::FLOAT32).then(|| log2(&s[0]))),
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

/// `sum c[k] y^k` by Horner's rule, the coefficients lowest power first.
fn horner(y: &UOp, coefficients: &[f64]) -> UOp {
    let (last, rest) = coefficients.split_last().expect("coefficients");
    rest.iter().rev().fold(f64c(*last), |acc, c| acc.alu(Ops::Mul, &[y]).alu(Ops::Add, &[&f64c(*c)]))
}

/// 2^x: x = n + f with n an integer and |f| <= 1/2, 2^f by its Taylor series, 2^n from its
/// exponent bits; the float64 product rounds to float32 once (overflow to inf, underflow through
/// the subnormals to 0). NaN stays NaN through the clamp.
fn exp2(x: &UOp) -> UOp {
    let d = x.cast(DType::FLOAT64);
    let clamped = d.alu(Ops::Max, &[&f64c(-EXP2_CLAMP)]).alu(Ops::Neg, &[]);
    let clamped = clamped.alu(Ops::Max, &[&f64c(-EXP2_CLAMP)]).alu(Ops::Neg, &[]);
    let half = UOp::where_(&clamped.alu(Ops::CmpLt, &[&f64c(0.0)]), &f64c(-0.5), &f64c(0.5));
    let n = clamped.alu(Ops::Add, &[&half]).alu(Ops::Trunc, &[]);
    let f = clamped.alu(Ops::Sub, &[&n]);
    let mut terms = vec![1.0; EXP2_TERMS];
    for k in 1..EXP2_TERMS {
        terms[k] = terms[k - 1] * LN_2 / k as f64;
    }
    let exponent = n.cast(DType::INT64).alu(Ops::Add, &[&i64c(1023)]).alu(Ops::Shl, &[&i64c(52)]);
    horner(&f, &terms).alu(Ops::Mul, &[&bitcast(&exponent, DType::FLOAT64)]).cast(DType::FLOAT32)
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
    let ln_m = horner(&t.alu(Ops::Mul, &[&t]), &series).alu(Ops::Mul, &[&t.alu(Ops::Mul, &[&f64c(2.0)])]);
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
