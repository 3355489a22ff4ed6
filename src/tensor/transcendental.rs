//! Transcendental functions, decomposed into the IR's EXP2, LOG2, SIN and SQRT and arithmetic so
//! that they stay accurate over their whole domain: argument reduction where a product would
//! round away digits (`exp`), `expm1` and `log1p` where a difference with 1 would cancel, the
//! exact `sin(2x)` where `pi/2 - x` cannot be represented (`cos`), and a second form where one
//! form overflows (`sinh`, `asinh`). `tests/precision.rs` states the bound of each in float32
//! ulps. Each is a CALL carrying its analytic derivative (`derivative`), so autograd never
//! differentiates the branches of a decomposition.

use std::f64::consts::{FRAC_2_SQRT_PI, FRAC_PI_2, LN_2, LOG2_E, PI};

use super::elementwise::polyn;
use super::Tensor;
use crate::dtype::DType;
use crate::uop::Call;

/// `2/sqrt(pi) * (-1)^n / (n! (2n + 1))`: erf's Taylor series in `x^2` after a factor `x`, highest
/// power first (fourteen terms reach float64's precision below 0.5: the next is below 1e-19 of
/// the sum; with nine, float64's erf was 2600 ulps off at 0.5).
const ERF_TAYLOR: [f64; 14] = [
    -FRAC_2_SQRT_PI / 168_129_561_600.0,
    FRAC_2_SQRT_PI / 11_975_040_000.0,
    -FRAC_2_SQRT_PI / 918_086_400.0,
    FRAC_2_SQRT_PI / 76_204_800.0,
    -FRAC_2_SQRT_PI / 6_894_720.0,
    FRAC_2_SQRT_PI / 685_440.0,
    -FRAC_2_SQRT_PI / 75_600.0,
    FRAC_2_SQRT_PI / 9_360.0,
    -FRAC_2_SQRT_PI / 1_320.0,
    FRAC_2_SQRT_PI / 216.0,
    -FRAC_2_SQRT_PI / 42.0,
    FRAC_2_SQRT_PI / 10.0,
    -FRAC_2_SQRT_PI / 3.0,
    FRAC_2_SQRT_PI,
];

/// Numerical Recipes' Chebyshev fit of `log(erfc(z) exp(z^2) / t) + 1.26551223` in `t = 1/(1 + z/2)`
/// (relative error under 1.2e-7 for all z >= 0), highest power first.
const ERFC_FIT: [f64; 10] = [
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
];

/// `erfc(z) exp(z^2)` on `0.5 <= z <= 1.5` as a polynomial in `z - 1`, highest power first (a
/// Chebyshev fit, relative error 5.5e-16 in float64; `tools/gen_erfc_fit.py` computes it).
const ERFC_MIDDLE: [f64; 17] = [
    1.2197620476570167e-07,
    -4.6688628352050496e-07,
    1.4489465796735838e-06,
    -4.660675246600818e-06,
    1.4748777529028624e-05,
    -4.5147522029915016e-05,
    0.00013366401443783588,
    -0.000381953963527294,
    0.0010502692549676134,
    -0.0027690648324336666,
    0.006970142387160581,
    -0.016661869087148597,
    0.0375722962147333,
    -0.07922696894141189,
    0.15437156137191776,
    -0.2732120147838981,
    0.42758357615580705,
];

/// Levels of erfc's continued fraction, `erfc(z) = e^(-z^2) / (sqrt(pi) (z + 1/2 / (z + 1 / (z +
/// 3/2 / ...))))`, evaluated from the last: 120 reach float64's precision from z = 1.5 on.
const ERFC_CF_LEVELS: usize = 120;

/// Abramowitz-Stegun 4.4.49: `atan(u) = u * p(u^2)` on `[0, 1]` (|error| < 2e-8), highest power first.
const ATAN_FIT: [f64; 9] = [
    0.0028662257,
    -0.0161657367,
    0.0429096138,
    -0.0752896400,
    0.1065626393,
    -0.1420889944,
    0.1999355085,
    -0.3333314528,
    1.0,
];

/// atan's Taylor series `(-1)^k / (2k + 1)` in `u^2` after a factor `u`, highest power first:
/// twelve terms reach float64's precision for `|u| <= tan(pi/16)` (the next is below 1e-19).
const ATAN_TAYLOR: [f64; 12] = [
    -1.0 / 23.0,
    1.0 / 21.0,
    -1.0 / 19.0,
    1.0 / 17.0,
    -1.0 / 15.0,
    1.0 / 13.0,
    -1.0 / 11.0,
    1.0 / 9.0,
    -1.0 / 7.0,
    1.0 / 5.0,
    -1.0 / 3.0,
    1.0,
];

impl Tensor {
    /// `f` of this tensor in its float dtype (computed in at least float32), as the function
    /// `call`, whose derivative autograd takes from `derivative`.
    fn transcendental(&self, call: Call, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
        let x = self.promote_float();
        x.in_f32(f).call(call, vec![], &[&x])
    }
    /// `f(|x|)` with the sign of `x`, for an odd `f`.
    fn odd_part(&self, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
        let r = f(&self.abs());
        self.lt(0).where_(r.neg(), &r)
    }

    /// `e^self` as `2^y (1 + d ln 2)`, `y = x log2(e)` rounded and `d` what the rounding dropped:
    /// the product's error, exact as a fused multiply-add (`fuse_mulacc` makes `x*c - y` one),
    /// and the constant's. `2^y` alone is 50 ulps off near 88. One `exp2`, as fast as that form.
    pub fn exp(&self) -> Tensor {
        self.transcendental(Call::Exp, |x| {
            let (hi, lo, low, high) = match x.dtype() == DType::FLOAT64 {
                true => (LOG2_E, 2.035_527_374_093_103_3e-17, -746.0, 710.0),
                false => (1.442_695_021_629_333_5, 1.925_962_991_126_617_5e-8, -104.0, 89.0),
            };
            // beyond these the result is 0 or infinite, and `d` stays small up to them
            let x = x.clamp(Some(low), Some(high));
            let y = x.mul(hi);
            let dropped = x.mul(hi).sub(&y).add(x.mul(lo));
            y.exp2().mul(dropped.mul(LN_2).add(1.0))
        })
    }
    /// `e^self - 1`, accurate near 0: Kahan's `(u - 1) x / ln u` for `u = e^x` rounded (the
    /// rounding cancels), `u - 1` away from 0.
    pub fn expm1(&self) -> Tensor {
        self.transcendental(Call::Expm1, |x| {
            let u = x.exp();
            let near_zero = u.eq(1.0).where_(x, u.sub(1.0).mul(x).div(u.log()));
            x.abs().lt(0.5).where_(&near_zero, u.sub(1.0))
        })
    }
    /// `ln(1 + self)`, accurate near 0: `ln(u) x / (u - 1)` for `u = 1 + x` rounded.
    pub fn log1p(&self) -> Tensor {
        self.transcendental(Call::Log1p, |x| {
            let u = x.add(1.0);
            let near_zero = u.eq(1.0).where_(x, u.log().mul(x).div(u.sub(1.0)));
            x.abs().lt(0.5).where_(&near_zero, u.log())
        })
    }
    /// Cosine, as `sin(2x) / (2 sin x)`: both sines are of exact arguments, so it stays accurate
    /// where cos is near 0 (`sin(pi/2 - x)` is not: `pi/2 - x` is rounded). Beyond half the
    /// format's largest float, where `2x` overflows, `1 - 2 sin^2(x/2)`.
    pub fn cos(&self) -> Tensor {
        self.transcendental(Call::Cos, |x| {
            let s = x.sin();
            let ratio = x.eq(0.0).where_(1.0, x.mul(2.0).sin().div(s.mul(2.0)));
            let h = x.mul(0.5).sin();
            let doubles = if x.dtype() == DType::FLOAT64 { 8e307 } else { 1e38 };
            x.abs().lt(doubles).where_(&ratio, h.mul(&h).mul(-2.0).add(1.0))
        })
    }
    /// Tangent, `sin / cos`.
    pub fn tan(&self) -> Tensor {
        self.transcendental(Call::Tan, |x| x.sin().div(x.cos()))
    }
    /// Arcsine, as `atan(x / sqrt(1 - x^2))` (exact at 0 and at ±1).
    pub fn asin(&self) -> Tensor {
        self.transcendental(Call::Asin, |x| x.div(x.neg().add(1.0).mul(x.add(1.0)).sqrt()).atan())
    }
    /// Arccosine, as `2 atan(sqrt((1 - x) / (1 + x)))`: no cancellation near 1, unlike `pi/2 - asin`.
    pub fn acos(&self) -> Tensor {
        self.transcendental(Call::Acos, |x| x.neg().add(1.0).div(x.add(1.0)).sqrt().atan().mul(2.0))
    }
    /// Arctangent on `[0, 1]`, `pi/2 - atan(1/x)` above: in float32 by Abramowitz-Stegun 4.4.49;
    /// in float64 (whose precision that fit's 2e-8 misses) the argument is halved twice,
    /// `atan(u) = 2 atan(u / (1 + sqrt(1 + u^2)))`, to at most `tan(pi/16)`, where its Taylor
    /// series converges within twelve terms.
    pub fn atan(&self) -> Tensor {
        self.transcendental(Call::Atan, |x| {
            x.odd_part(|y| {
                let big = y.gt(1.0);
                let u = big.where_(y.reciprocal(), y);
                let p = match u.dtype() == DType::FLOAT64 {
                    // below 1e-9, atan(u) = u to float64's precision (and halving a subnormal
                    // would round it away)
                    true => {
                        let half = |v: &Tensor| v.div(v.square().add(1.0).sqrt().add(1.0));
                        let q = half(&half(&u));
                        u.lt(1e-9).where_(&u, q.mul(polyn(&q.square(), &ATAN_TAYLOR)).mul(4.0))
                    }
                    false => u.mul(polyn(&u.mul(&u), &ATAN_FIT)),
                };
                big.where_(p.neg().add(FRAC_PI_2), &p)
            })
        })
    }
    /// Hyperbolic sine: `(e + e / (e + 1)) / 2` with `e = expm1(|x|)`, and from 20 on (where
    /// `e^-x` no longer counts) `(e^(x/2) / 2) e^(x/2)`, which reaches the largest floats.
    pub fn sinh(&self) -> Tensor {
        self.transcendental(Call::Sinh, |x| {
            x.odd_part(|y| {
                let e = y.expm1();
                let h = y.mul(0.5).exp();
                y.lt(20.0).where_(e.add(e.div(e.add(1.0))).mul(0.5), h.mul(0.5).mul(&h))
            })
        })
    }
    /// Hyperbolic cosine: `(u + 1/u) / 2` with `u = e^|x|`, and from 20 on `(e^(x/2) / 2) e^(x/2)`.
    pub fn cosh(&self) -> Tensor {
        self.transcendental(Call::Cosh, |x| {
            let y = x.abs();
            let u = y.exp();
            let h = y.mul(0.5).exp();
            y.lt(20.0).where_(u.add(u.reciprocal()).mul(0.5), h.mul(0.5).mul(&h))
        })
    }
    /// Hyperbolic tangent, `-e / (2 + e)` with `e = expm1(-2|x|)`, sign restored: exact near 0,
    /// where `2 sigmoid(2x) - 1` cancels.
    pub fn tanh(&self) -> Tensor {
        self.transcendental(Call::Tanh, |x| {
            x.odd_part(|y| {
                let e = y.mul(-2.0).expm1();
                e.neg().div(e.add(2.0))
            })
        })
    }
    /// Inverse hyperbolic sine: `log1p(y + y^2 / (1 + sqrt(1 + y^2)))` for `y = |x|`, and
    /// `ln(2y)` from `asymptotic_from` on (where `y^2` would overflow first), sign restored.
    pub fn asinh(&self) -> Tensor {
        self.transcendental(Call::Asinh, |x| {
            x.odd_part(|y| {
                let y2 = y.square();
                let small = y.add(y2.div(y2.add(1.0).sqrt().add(1.0))).log1p();
                y.gt(asymptotic_from(y.dtype())).where_(y.log().add(LN_2), &small)
            })
        })
    }
    /// Inverse hyperbolic cosine: `log1p((x - 1) + sqrt(x - 1) sqrt(x + 1))` (NaN below 1), and
    /// `ln(2x)` from `asymptotic_from` on.
    pub fn acosh(&self) -> Tensor {
        self.transcendental(Call::Acosh, |x| {
            let d = x.sub(1.0);
            let small = d.add(d.sqrt().mul(x.add(1.0).sqrt())).log1p();
            x.gt(asymptotic_from(x.dtype())).where_(x.log().add(LN_2), &small)
        })
    }
    /// Inverse hyperbolic tangent, `log1p(2y / (1 - y)) / 2` for `y = |x|`, sign restored.
    pub fn atanh(&self) -> Tensor {
        self.transcendental(Call::Atanh, |x| x.odd_part(|y| y.mul(2.0).div(y.neg().add(1.0)).log1p().mul(0.5)))
    }
    /// The error function: its Taylor series below 0.5, `1 - erfc(|x|)` above, sign restored.
    pub fn erf(&self) -> Tensor {
        self.transcendental(Call::Erf, |x| {
            x.odd_part(|y| {
                let series = y.mul(polyn(&y.square(), &ERF_TAYLOR));
                y.lt(0.5).where_(&series, erfc_of_nonnegative(y).neg().add(1.0))
            })
        })
    }
    /// The complementary error function `1 - erf(x)`, accurate where it is small (large `x`).
    pub fn erfc(&self) -> Tensor {
        self.transcendental(Call::Erfc, |x| {
            let tail = erfc_of_nonnegative(&x.abs());
            x.lt(0.0).where_(tail.neg().add(2.0), &tail)
        })
    }
}

/// Where `asinh(y)` and `acosh(y)` are `ln(2y)` to the dtype's precision: the next term, `1/(4y^2)`,
/// is below its ulp of the result from 4096 on in float32 and from 2^28 on in float64.
fn asymptotic_from(dtype: DType) -> f64 {
    match dtype == DType::FLOAT64 {
        true => (1u64 << 28) as f64,
        false => 4096.0,
    }
}

/// `erfc(z)` for `z >= 0`. In float32 by Numerical Recipes' fit, `t exp(-z^2 + fit(t))`; in
/// float64 (whose precision that fit's 1.2e-7 misses) as `1 - erf(z)` by erf's Taylor series
/// below 0.5, and `e^(-z^2)` times `ERFC_MIDDLE` up to 1.5 and times the continued fraction
/// above. `z^2` is split as `zh^2 + (z - zh)(z + zh)` with `zh` z to 1/16, whose square is
/// exact: a rounded `z^2` near 9 would cost 60 ulps of the result.
fn erfc_of_nonnegative(z: &Tensor) -> Tensor {
    // erfc is 0 in every float format from 28 on (float64's smallest subnormal is 5e-324)
    let z = z.clamp(None::<f64>, Some(28.0));
    let zh = z.mul(16.0).trunc().div(16.0);
    let split = z.sub(&zh).mul(z.add(&zh)).neg();
    if z.dtype() != DType::FLOAT64 {
        let t = z.mul(0.5).add(1.0).reciprocal();
        return t.mul(zh.square().neg().exp()).mul(split.add(polyn(&t, &ERFC_FIT)).exp());
    }
    let gauss = zh.square().neg().exp().mul(split.exp());
    let fraction = (1..=ERFC_CF_LEVELS).rev().fold(z.clone(), |f, k| z.add(f.reciprocal().mul(k as f64 / 2.0)));
    let scaled = z.lt(1.5).where_(polyn(&z.sub(1.0), &ERFC_MIDDLE), fraction.mul(PI.sqrt()).reciprocal());
    let series = z.mul(polyn(&z.square(), &ERF_TAYLOR));
    z.lt(0.5).where_(series.neg().add(1.0), gauss.mul(scaled))
}

/// The derivative of the transcendental function `call` at `x`, where its value is `y`.
pub(super) fn derivative(call: Call, x: &Tensor, y: &Tensor) -> Tensor {
    let one_minus_square = || x.neg().add(1.0).mul(x.add(1.0));
    match call {
        Call::Exp => y.clone(),
        Call::Expm1 => y.add(1.0),
        Call::Log1p => x.add(1.0).reciprocal(),
        Call::Cos => x.sin().neg(),
        Call::Tan => y.square().add(1.0),
        Call::Asin => one_minus_square().rsqrt(),
        Call::Acos => one_minus_square().rsqrt().neg(),
        Call::Atan => x.square().add(1.0).reciprocal(),
        Call::Sinh => x.cosh(),
        Call::Cosh => x.sinh(),
        Call::Tanh => y.square().neg().add(1.0),
        Call::Asinh => x.square().add(1.0).rsqrt(),
        Call::Acosh => x.sub(1.0).mul(x.add(1.0)).rsqrt(),
        Call::Atanh => one_minus_square().reciprocal(),
        Call::Erf => x.square().neg().exp().mul(FRAC_2_SQRT_PI),
        Call::Erfc => x.square().neg().exp().mul(-FRAC_2_SQRT_PI),
        Call::Conv | Call::Matmul => panic!("gradient: a {call:?} CALL has its own rule"),
    }
}
