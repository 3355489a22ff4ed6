//! Op precision: every unary and binary float op, swept over edge values (signed zeros,
//! denormals, tiny and huge magnitudes, values near poles and zeros, infinities, NaN) and random
//! ones, in float32, float64, float16 and bfloat16, against float64 references (libm's, within an
//! ulp of float64 itself), with a bound per op in ulps of the result's format (or an absolute
//! error, for results that pass through zero). CPU and INTERP both meet every bound.
//!
//! `cargo test --test precision -- --nocapture` prints the largest error of every op and format.

mod common;

use lazygrad::runtime::DefaultDevice;
use lazygrad::{DType, Tensor};

/// A float format under test: its dtype, mantissa bits and smallest normal exponent.
#[derive(Clone, Copy)]
struct Format {
    dtype: DType,
    mantissa: i32,
    min_exp: i32,
}

const F32: Format = Format { dtype: DType::FLOAT32, mantissa: 23, min_exp: -126 };
const F64: Format = Format { dtype: DType::FLOAT64, mantissa: 52, min_exp: -1022 };
const F16: Format = Format { dtype: DType::FLOAT16, mantissa: 10, min_exp: -14 };
const BF16: Format = Format { dtype: DType::BFLOAT16, mantissa: 7, min_exp: -126 };

impl Format {
    /// `x` rounded to the format (to nearest, ties to even).
    fn round(self, x: f64) -> f64 {
        match self.dtype {
            DType::FLOAT32 => x as f32 as f64,
            DType::FLOAT16 => half::f16::from_f64(x).to_f64(),
            DType::BFLOAT16 => half::bf16::from_f64(x).to_f64(),
            _ => x,
        }
    }
    /// One ulp at the magnitude of `x` (the spacing of the format's values there).
    fn ulp(self, x: f64) -> f64 {
        let a = x.abs();
        let exp = if a < 2f64.powi(self.min_exp) { self.min_exp } else { a.log2().floor() as i32 };
        // powf: powi's 2^-1074 is 0 (it divides by 2^1074, which overflows)
        2f64.powf((exp - self.mantissa) as f64)
    }
    fn name(self) -> &'static str {
        self.dtype.name()
    }
}

/// How far a result may be from the float64 reference: `ulps` float32 ulps of the reference (plus
/// an ulp per unit of the op's condition number with `conditioned`), or `abs` in absolute terms,
/// whichever is larger.
#[derive(Clone, Copy)]
struct Bound {
    ulps: f64,
    abs: f64,
    conditioned: bool,
}

const fn ulps(ulps: f64) -> Bound {
    Bound { ulps, abs: 0.0, conditioned: false }
}

/// A product with a sigmoid (`x sigmoid(x)`): where the sigmoid is a denormal (x below -87) it has
/// lost digits already, so results below 1e-40 are held to an absolute bound.
const SUBNORMAL_PRODUCT: Bound = Bound { ulps: 4.0, abs: 1e-40, conditioned: false };

/// An exponentially small tail computed through a rounded argument (`sigmoid(1.702 x)`,
/// `erfc(-x / sqrt 2)`): the rounding of the argument and of its constant cost up to `kappa` ulps,
/// `kappa = |x f'(x) / f(x)|` the op's condition number, as in PyTorch's float32 forms of these ops.
const TAIL: Bound = Bound { ulps: 10.0, abs: 1e-40, conditioned: true };

/// `|x f'(x) / f(x)|` of `f` at `x`, by a central difference in float64.
fn condition(f: &dyn Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6 * x.abs().max(1e-300);
    let slope = (f(x + h) - f(x - h)) / (2.0 * h);
    (x * slope / f(x)).abs()
}

/// How many ulps of `format` `got` is from `want` (0 for matching NaNs and infinities, infinite
/// for a mismatch of them); a reference beyond the format's range must round to the same infinity.
fn error(got: f64, want: f64, format: Format) -> f64 {
    let rounded = format.round(want);
    match () {
        _ if want.is_nan() || got.is_nan() || rounded.is_infinite() || got.is_infinite() => {
            match got == rounded || got.is_nan() && want.is_nan() {
                true => 0.0,
                false => f64::INFINITY,
            }
        }
        _ => (got - want).abs() / format.ulp(want),
    }
}

/// Edge values of float32, both signs.
fn edges32() -> Vec<f32> {
    let edges = [
        0.0f32,
        1e-45,
        1e-40,
        f32::MIN_POSITIVE,
        1e-30,
        1e-20,
        1e-10,
        1e-8,
        3e-8,
        1e-7,
        1e-6,
        1e-5,
        1e-4,
        1e-3,
        0.01,
        0.1,
        0.25,
        0.4999,
        0.5,
        0.5001,
        0.7,
        0.9,
        0.99,
        0.999,
        0.9999,
        1.0 - f32::EPSILON / 2.0,
        1.0,
        1.0 + f32::EPSILON,
        1.0001,
        1.5,
        // float32 pi/2 and the floats around it, pi, 3pi/2 and 2pi
        std::f32::consts::FRAC_PI_2,
        f32::from_bits(std::f32::consts::FRAC_PI_2.to_bits() - 1),
        f32::from_bits(std::f32::consts::FRAC_PI_2.to_bits() + 1),
        2.0,
        3.0,
        f32::from_bits(std::f32::consts::PI.to_bits() - 1),
        std::f32::consts::PI,
        3.0 * std::f32::consts::FRAC_PI_2,
        std::f32::consts::TAU,
        10.0,
        15.0,
        20.0,
        30.0,
        50.0,
        87.0,
        88.0,
        88.7,
        89.0,
        89.4,
        100.0,
        1000.0,
        1e4,
        1e6,
        1e10,
        1e20,
        1e30,
        3.4e38,
        f32::INFINITY,
        f32::NAN,
    ];
    edges.iter().flat_map(|&x| [x, -x]).collect()
}

/// Edge values of `format`, both signs: float32's, and for float64 its own beyond float32's
/// range and precision.
fn edges(format: Format) -> Vec<f64> {
    let mut v: Vec<f64> = edges32().into_iter().map(f64::from).collect();
    if format.dtype == DType::FLOAT64 {
        let wide =
            [5e-324, 1e-310, f64::MIN_POSITIVE, 1e-300, 1e-100, 0.1, 1.0 - f64::EPSILON / 2.0, 1.0 + f64::EPSILON];
        let wide = wide.into_iter().chain([709.0, 709.78, 710.0, 1e100, 1e300, f64::MAX]);
        v.extend(wide.flat_map(|x| [x, -x]));
    }
    v
}

/// The edge values, then random ones: log-uniform magnitudes over the whole range and uniform
/// ones in [-10, 10] (float32 values, except in float64, which gets its full precision and range).
fn inputs(format: Format) -> Vec<f64> {
    let mut v = edges(format);
    let mut random = common::xorshift(20);
    let mut unit = || (random.next().unwrap() >> 11) as f64 / (1u64 << 53) as f64;
    let (decades, narrow) = match format.dtype == DType::FLOAT64 {
        true => (600.0, F64),
        false => (60.0, F32),
    };
    for _ in 0..1500 {
        let magnitude = 10f64.powf(unit() * decades - decades / 2.0);
        let sign = if unit() < 0.5 { -1.0 } else { 1.0 };
        v.push(narrow.round(sign * magnitude));
        v.push(narrow.round(unit() * 20.0 - 10.0));
    }
    v
}

/// `f` of `x` (rounded to `format`, computed in it) on `device`, read back exactly as float64.
fn run(device: &str, x: &[f64], format: Format, f: &dyn Fn(&Tensor) -> Tensor) -> Vec<f64> {
    let _device = DefaultDevice::scoped(device);
    f(&Tensor::from_slice(x, &[x.len()]).cast(format.dtype)).cast(DType::FLOAT64).to_vec::<f64>()
}

/// The devices held to these bounds: the ones whose every op is our own arithmetic or libm's.
/// The GPU APIs' builtins have their own, looser accuracy (OpenCL allows sin 4 ulps; WGSL gives
/// sin an absolute error and may flush subnormals), which these bounds do not describe.
const DEVICES: [&str; 2] = ["CPU", "INTERP"];

/// The largest error of `got` against `reference` in ulps of `format`, beyond what the condition
/// number of the op at each input (`kappa`) allows, and where.
fn worst(
    got: &[f64],
    reference: &dyn Fn(usize) -> f64,
    kappa: &dyn Fn(usize) -> f64,
    bound: Bound,
    format: Format,
) -> (f64, usize) {
    let mut worst = (0.0, 0);
    for (i, &g) in got.iter().enumerate() {
        let want = reference(i);
        let err = error(g, want, format);
        let within_abs = err.is_finite() && (g - want).abs() <= bound.abs;
        let allowance = if bound.conditioned && want.is_finite() { kappa(i) } else { 0.0 };
        let err = if within_abs { 0.0 } else { (err - allowance).max(0.0) };
        if err > worst.0 || err.is_nan() {
            worst = (err, i);
        }
    }
    worst
}

fn sigmoid(x: f64) -> f64 {
    match x >= 0.0 {
        true => 1.0 / (1.0 + (-x).exp()),
        false => x.exp() / (1.0 + x.exp()),
    }
}

fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// Python's float `%`: the remainder with the sign of the divisor.
fn python_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

type UnaryOp = (&'static str, fn(&Tensor) -> Tensor, fn(f64) -> f64, Bound);

#[rustfmt::skip]
fn unary_ops() -> Vec<UnaryOp> {
    const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    vec![
        ("neg", |t| t.neg(), |x| -x, ulps(0.0)),
        ("abs", |t| t.abs(), f64::abs, ulps(0.0)),
        ("square", |t| t.square(), |x| x * x, ulps(0.5)),
        ("sqrt", |t| t.sqrt(), f64::sqrt, ulps(0.5)),
        ("rsqrt", |t| t.rsqrt(), |x| 1.0 / x.sqrt(), ulps(1.5)),
        ("reciprocal", |t| t.reciprocal(), |x| 1.0 / x, ulps(0.5)),
        ("exp", |t| t.exp(), f64::exp, ulps(2.0)),
        ("exp2", |t| t.exp2(), f64::exp2, ulps(1.0)),
        ("log", |t| t.log(), f64::ln, ulps(2.0)),
        ("log2", |t| t.log2(), f64::log2, ulps(1.0)),
        ("sin", |t| t.sin(), f64::sin, ulps(1.0)),
        ("cos", |t| t.cos(), f64::cos, ulps(2.0)),
        ("tan", |t| t.tan(), f64::tan, ulps(3.0)),
        ("asin", |t| t.asin(), f64::asin, ulps(3.0)),
        ("acos", |t| t.acos(), f64::acos, ulps(3.0)),
        ("atan", |t| t.atan(), f64::atan, ulps(3.0)),
        ("sinh", |t| t.sinh(), f64::sinh, ulps(3.0)),
        ("cosh", |t| t.cosh(), f64::cosh, ulps(3.0)),
        ("tanh", |t| t.tanh(), f64::tanh, ulps(3.0)),
        ("asinh", |t| t.asinh(), libm::asinh, ulps(3.0)),
        ("acosh", |t| t.acosh(), |x| if x < 1.0 { f64::NAN } else { libm::acosh(x) }, ulps(3.0)),
        ("atanh", |t| t.atanh(), libm::atanh, ulps(3.0)),
        ("erf", |t| t.erf(), libm::erf, ulps(3.0)),
        ("erfc", |t| t.erfc(), libm::erfc, ulps(5.0)),
        ("expm1", |t| t.expm1(), f64::exp_m1, ulps(3.0)),
        ("log1p", |t| t.log1p(), f64::ln_1p, ulps(3.0)),
        ("sigmoid", |t| t.sigmoid(), sigmoid, ulps(3.0)),
        ("logsigmoid", |t| t.logsigmoid(), |x| -softplus(-x), ulps(4.0)),
        ("softplus", |t| t.softplus(), softplus, ulps(4.0)),
        ("silu", |t| t.silu(), |x| x * sigmoid(x), SUBNORMAL_PRODUCT),
        ("quick_gelu", |t| t.quick_gelu(), |x| x * sigmoid(1.702 * x), TAIL),
        ("gelu", |t| t.gelu(), |x| x * sigmoid(2.0 * SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)), TAIL),
        ("gelu_exact", |t| t.gelu_exact(), |x| 0.5 * x * libm::erfc(-x / std::f64::consts::SQRT_2), TAIL),
        ("mish", |t| t.mish(), |x| x * softplus(x).tanh(), Bound { ulps: 5.0, ..SUBNORMAL_PRODUCT }),
        ("elu", |t| t.elu(), |x| if x > 0.0 { x } else { x.exp_m1() }, ulps(3.0)),
        ("celu", |t| t.celu(), |x| if x > 0.0 { x } else { x.exp_m1() }, ulps(3.0)),
        ("selu", |t| t.selu(), |x| 1.050_700_987_355_480_5 * if x > 0.0 { x } else { 1.673_263_242_354_377_3 * x.exp_m1() }, ulps(3.0)),
        ("softsign", |t| t.softsign(), |x| x / (1.0 + x.abs()), ulps(1.5)),
        ("relu", |t| t.relu(), |x| if x.is_nan() { x } else { x.max(0.0) }, ulps(0.0)),
        ("relu6", |t| t.relu6(), |x| x.clamp(0.0, 6.0), ulps(0.0)),
        ("leaky_relu", |t| t.leaky_relu(), |x| if x > 0.0 { x } else { 0.01 * x }, ulps(1.0)),
        ("hardtanh", |t| t.hardtanh(), |x| x.clamp(-1.0, 1.0), ulps(0.0)),
        ("hardsigmoid", |t| t.hardsigmoid(), |x| ((x + 3.0) / 6.0).clamp(0.0, 1.0), ulps(1.5)),
        ("hardswish", |t| t.hardswish(), |x| if x <= -3.0 { 0.0 } else if x >= 3.0 { x } else { x * (x + 3.0) / 6.0 }, ulps(2.0)),
        ("floor", |t| t.floor(), f64::floor, ulps(0.0)),
        ("ceil", |t| t.ceil(), f64::ceil, ulps(0.0)),
        ("trunc", |t| t.trunc(), f64::trunc, ulps(0.0)),
        ("round", |t| t.round(), f64::round_ties_even, ulps(0.0)),
        ("sign", |t| t.sign(), |x| if x == 0.0 || x.is_nan() { x } else { x.signum() }, ulps(0.0)),
    ]
}

type BinaryOp = (&'static str, fn(&Tensor, &Tensor) -> Tensor, fn(f64, f64) -> f64, Bound);

#[rustfmt::skip]
fn binary_ops() -> Vec<BinaryOp> {
    vec![
        ("add", |a, b| a + b, |a, b| a + b, ulps(0.5)),
        ("sub", |a, b| a - b, |a, b| a - b, ulps(0.5)),
        ("mul", |a, b| a * b, |a, b| a * b, ulps(0.5)),
        ("div", |a, b| a / b, |a, b| a / b, ulps(0.5)),
        ("maximum", |a, b| a.maximum(b), |a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.max(b) }, ulps(0.0)),
        ("minimum", |a, b| a.minimum(b), |a, b| if a.is_nan() || b.is_nan() { f64::NAN } else { a.min(b) }, ulps(0.0)),
        ("pow", |a, b| a.pow(b), f64::powf, ulps(2.0)),
        ("fmod", |a, b| a.fmod(b), |a, b| a % b, ulps(0.0)),
        ("mod", |a, b| a.mod_(b), python_mod, ulps(0.5)),
        ("copysign", |a, b| a.copysign(b), f64::copysign, ulps(0.0)),
        // the maximum plus a positive correction: results near 0 cancel, within ulps of 1
        ("logaddexp", |a, b| a.logaddexp(b), |a, b| { let m = a.max(b); if m.is_infinite() && a == b { m } else { m + (-(a - b).abs()).exp().ln_1p() } }, Bound { ulps: 3.0, abs: 3.0 * f32::EPSILON as f64, conditioned: false }),
    ]
}

/// The formats swept, with the bound of an op in each: float32's as the op table says; float64's
/// where it differs (`F64_ULPS`); float16's and bfloat16's half an ulp, as each op computes in
/// float32 and rounds once, plus a tenth for the float32 error carried into a rounding tie.
const FORMATS: [Format; 4] = [F32, F64, F16, BF16];

/// float64 bounds that differ from float32's, in float64 ulps (the references, libm's, are within
/// an ulp themselves).
const F64_ULPS: [(&str, f64); 8] = [
    ("exp", 3.0),
    ("sinh", 5.0),
    ("cosh", 5.0),
    ("erfc", 6.0),
    ("asin", 4.0),
    ("acos", 4.0),
    ("atanh", 5.0),
    ("mish", 6.0),
];

fn bound_in(name: &str, bound: Bound, format: Format) -> Bound {
    match format.dtype {
        DType::FLOAT32 => bound,
        DType::FLOAT64 => {
            let ulps = F64_ULPS.iter().find(|(n, _)| *n == name).map_or(bound.ulps, |(_, u)| *u);
            Bound { ulps, ..bound }
        }
        _ => Bound { ulps: bound.ulps.min(0.6), ..bound },
    }
}

#[test]
fn unary_ops_are_within_their_bounds_in_every_format() {
    let mut failures = vec![];
    for format in FORMATS {
        let x = inputs(format);
        let held: Vec<f64> = x.iter().map(|&v| format.round(v)).collect();
        for (name, f, reference, bound) in unary_ops() {
            let bound = bound_in(name, bound, format);
            for device in DEVICES {
                let got = run(device, &x, format, &f);
                let (err, at) =
                    worst(&got, &|i| reference(held[i]), &|i| condition(&reference, held[i]), bound, format);
                let fmt = format.name();
                println!(
                    "{name:<12} {fmt:<8} {device:<6} max {err:>10.3} ulps (bound {:>4}) at x = {:e}: got {:e}",
                    bound.ulps, held[at], got[at]
                );
                if err > bound.ulps {
                    failures.push(format!(
                        "{name} in {fmt} on {device}: {err} ulps at x = {:e} (got {:e}, want {:e})",
                        held[at],
                        got[at],
                        reference(held[at])
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn binary_ops_are_within_their_bounds_in_every_format() {
    let mut failures = vec![];
    for format in FORMATS {
        let edge = edges(format);
        let random = inputs(format)[edge.len()..].to_vec();
        let (mut a, mut b) = (vec![], vec![]);
        for &p in &edge {
            for &q in &edge {
                a.push(p);
                b.push(q);
            }
        }
        a.extend(&random);
        b.extend(random.iter().rev());
        let (ha, hb): (Vec<f64>, Vec<f64>) =
            (a.iter().map(|&v| format.round(v)).collect(), b.iter().map(|&v| format.round(v)).collect());
        for (name, f, reference, bound) in binary_ops() {
            let bound = bound_in(name, bound, format);
            for device in DEVICES {
                let _device = DefaultDevice::scoped(device);
                let t = |v: &[f64]| Tensor::from_slice(v, &[v.len()]).cast(format.dtype);
                let got = f(&t(&a), &t(&b)).cast(DType::FLOAT64).to_vec::<f64>();
                let (err, at) = worst(&got, &|i| reference(ha[i], hb[i]), &|_| 0.0, bound, format);
                let fmt = format.name();
                println!(
                    "{name:<12} {fmt:<8} {device:<6} max {err:>10.3} ulps (bound {:>4}) at ({:e}, {:e}): got {:e}",
                    bound.ulps, ha[at], hb[at], got[at]
                );
                if err > bound.ulps {
                    failures.push(format!(
                        "{name} in {fmt} on {device}: {err} ulps at ({:e}, {:e}) (got {:e}, want {:e})",
                        ha[at],
                        hb[at],
                        got[at],
                        reference(ha[at], hb[at])
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
