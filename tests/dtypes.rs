//! float16 and bfloat16 against an independent reference, and integer dtypes against C semantics,
//! on CPU (generated C) and INTERP.
//!
//! The half-precision reference is the `half` crate. Each IR op on a half dtype computes in float32
//! and rounds the result once, to nearest with ties to even (`src/uop/exec.rs`), so `a + b` must be
//! `H::from_f32(a.to_f32() + b.to_f32())` bit for bit. A cast to float16 rounds once; one to
//! bfloat16 rounds to float32 first (as PyTorch's `c10::BFloat16`). A sum accumulates in float32
//! and rounds at the end, and a matmul rounds each product to the half dtype before summing
//! (tinygrad's `(x * w).sum()`). Transcendentals compute in float32 to within a few of its ulps,
//! so they are compared with the correctly rounded float64 result on inputs whose result is clear
//! of a rounding boundary.

mod common;

use half::{bf16, f16};
use lazygrad::dtype::Element;
use lazygrad::runtime::DefaultDevice;
use lazygrad::{DType, Tensor};

fn on<T>(device: &str, f: impl Fn() -> T) -> T {
    let _d = DefaultDevice::scoped(device);
    f()
}

/// A 16-bit float type of the `half` crate.
trait Half: Element + PartialEq {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
    fn to_bits(self) -> u16;
    fn from_bits(bits: u16) -> Self;
}

macro_rules! half_type {
    ($t:ty) => {
        impl Half for $t {
            fn from_f32(v: f32) -> Self {
                <$t>::from_f32(v)
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
            fn to_bits(self) -> u16 {
                <$t>::to_bits(self)
            }
            fn from_bits(bits: u16) -> Self {
                <$t>::from_bits(bits)
            }
        }
    };
}
half_type!(bf16);
half_type!(f16);

/// `x` rounded to `H` once, to nearest with ties to even. (`half`'s `from_f64` goes through f32,
/// rounding twice: the f32 rounding picks a neighbour of the answer, and the nearest of it and its
/// two neighbours is the answer.) Only for values whose f32 rounding is finite.
fn round_f64<H: Half>(x: f64) -> H {
    let near = H::from_f32(x as f32);
    if !x.is_finite() || !near.to_f32().is_finite() || x == 0.0 {
        return near;
    }
    let magnitude = near.to_bits() & 0x7fff;
    let sign = near.to_bits() & 0x8000;
    let neighbours = [magnitude.saturating_sub(1), magnitude, magnitude + 1].map(|m| H::from_bits(sign | m));
    let dist = |h: &H| (f64::from(h.to_f32()) - x).abs();
    let best = neighbours.iter().map(dist).fold(f64::INFINITY, f64::min);
    let mut ties = neighbours.into_iter().filter(|h| h.to_f32().is_finite() && dist(h) == best);
    let first = ties.next().expect("a nearest neighbour");
    ties.find(|h| h.to_bits() & 1 == 0).filter(|_| first.to_bits() & 1 == 1).unwrap_or(first)
}

/// `exact` rounded to `H` when it lies clear of a rounding boundary: moving it by 2^-16 of itself
/// (64 float32 ulps, more than the device's float32 error) rounds to the same value.
fn clear_rounding<H: Half>(exact: f64) -> Option<H> {
    let (lo, hi) = (round_f64::<H>(exact * (1.0 - 2f64.powi(-16))), round_f64::<H>(exact * (1.0 + 2f64.powi(-16))));
    (lo.to_bits() == hi.to_bits() || exact.is_nan() || exact.is_infinite()).then(|| round_f64::<H>(exact))
}

/// `f()` on CPU and on INTERP must equal `want` bit for bit (a NaN matches any NaN).
fn check<H: Half>(what: &str, want: &[H], f: impl Fn() -> Tensor) {
    for device in ["CPU", "INTERP"] {
        let got = on(device, || {
            let t = f();
            assert_eq!(t.dtype(), H::DTYPE, "{what}: dtype");
            t.to_vec::<H>()
        });
        assert_eq!(got.len(), want.len(), "{what} on {device}: length");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let same = g.to_bits() == w.to_bits() || (g.to_f32().is_nan() && w.to_f32().is_nan());
            assert!(
                same,
                "{what} on {device}: [{i}] is {g:?} ({:#06x}), want {w:?} ({:#06x})",
                g.to_bits(),
                w.to_bits()
            );
        }
    }
}

/// `n` values of `H` with random signs, mantissas and binary exponents in `exponents`.
fn randoms<H: Half>(seed: u64, n: usize, exponents: std::ops::Range<i32>) -> Vec<H> {
    let span = (exponents.end - exponents.start) as u64;
    common::xorshift(seed)
        .take(n)
        .map(|r| {
            let mantissa = 1.0 + ((r >> 8) % 4096) as f32 / 4096.0;
            let sign = if (r >> 40) & 1 == 1 { -1.0 } else { 1.0 };
            H::from_f32(sign * mantissa * 2f32.powi(exponents.start + (r % span) as i32))
        })
        .collect()
}

/// Zeros, infinities, NaN, the largest and smallest normal and subnormal values, and 1.
fn specials<H: Half>() -> Vec<H> {
    [0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7f7f, 0x0080, 0x0001, 0x3f80, 0xbf80]
        .map(|bf16_bits| H::from_f32(bf16::from_bits(bf16_bits).to_f32()))
        .into_iter()
        .chain([0x7bff, 0x0400, 0x0001, 0x8001].map(|f16_bits| H::from_f32(f16::from_bits(f16_bits).to_f32())))
        .collect()
}

fn tensor<H: Half>(v: &[H]) -> Tensor {
    Tensor::from_slice(v, &[v.len()])
}

/// Binary ops, sqrt and max: one float32 operation rounded once.
fn arithmetic<H: Half>(exponents: std::ops::Range<i32>) {
    let s = specials::<H>();
    let a: Vec<H> =
        randoms::<H>(1, 200, exponents.clone()).into_iter().chain(s.iter().copied()).chain(s.clone()).collect();
    let b: Vec<H> =
        randoms::<H>(2, 200, exponents).into_iter().chain(s.iter().copied()).chain(s.iter().rev().copied()).collect();
    let binary = |f: fn(f32, f32) -> f32| {
        a.iter().zip(&b).map(|(x, y)| H::from_f32(f(x.to_f32(), y.to_f32()))).collect::<Vec<H>>()
    };
    let name = H::DTYPE.name();
    check(&format!("{name} add"), &binary(|x, y| x + y), || tensor(&a) + &tensor(&b));
    check(&format!("{name} sub"), &binary(|x, y| x - y), || tensor(&a) - &tensor(&b));
    check(&format!("{name} mul"), &binary(|x, y| x * y), || tensor(&a) * &tensor(&b));
    check(&format!("{name} div"), &binary(|x, y| x / y), || tensor(&a) / &tensor(&b));
    check(
        &format!("{name} maximum"),
        &binary(|x, y| if x.is_nan() || y.is_nan() { f32::NAN } else { x.max(y) }),
        || tensor(&a).maximum(tensor(&b)),
    );
    let roots: Vec<H> = a.iter().map(|x| H::from_f32(x.to_f32().sqrt())).collect();
    check(&format!("{name} sqrt"), &roots, || tensor(&a).sqrt());
}

#[test]
fn bfloat16_arithmetic_rounds_once_to_nearest_even() {
    // products and quotients overflow to infinity and underflow below the smallest subnormal
    arithmetic::<bf16>(-70..70);
}

#[test]
fn float16_arithmetic_rounds_once_to_nearest_even() {
    arithmetic::<f16>(-14..14);
}

/// float32 values that round to `H` in every way: ties to even (down and up), just above and
/// below ties, overflow, underflow to subnormals and zero, NaN and infinities.
fn f32_cases<H: Half>() -> Vec<f32> {
    // any float32 bits; then full float32 mantissas with exponents around the type's range
    let mut v: Vec<f32> =
        common::xorshift(3).take(100).map(|r| f32::from_bits(r as u32)).filter(|x| !x.is_nan()).collect();
    let exponents = if H::DTYPE == DType::FLOAT16 { 100..145 } else { 0..255 };
    let span = exponents.end - exponents.start;
    v.extend(common::xorshift(4).take(200).map(|r| {
        let exponent = (exponents.start + (r >> 32) as u32 % span) << 23;
        f32::from_bits((r as u32 & 0x807f_ffff) | exponent)
    }));
    for h in randoms::<H>(5, 40, -10..10) {
        let (x, next) = (h.to_f32(), H::from_bits(h.to_bits() + 1).to_f32());
        let mid = (x + next) / 2.0;
        v.extend([mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits() - 1)]);
    }
    v.extend([65504.0, 65519.0, 65520.0, 1e5, 3.0e38, f32::MAX, 1e-7, 3e-8, 2.9e-8, 1e-40, -0.0]);
    v.extend([f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.0 / 3.0, -2.5e-3]);
    v
}

fn casts<H: Half>() {
    let (name, bfloat) = (H::DTYPE.name(), H::DTYPE == DType::BFLOAT16);
    let xs = f32_cases::<H>();
    let want: Vec<H> = xs.iter().map(|&x| H::from_f32(x)).collect();
    check(&format!("float32 -> {name}"), &want, || Tensor::from_slice(&xs, &[xs.len()]).cast(H::DTYPE));
    // float64 values just off a tie, which rounding to float32 first turns into the tie itself:
    // float16 rounds once (away from the tie), bfloat16 through float32 (to even), as the IR says
    let doubles: Vec<f64> = randoms::<H>(6, 64, -10..10)
        .into_iter()
        .flat_map(|h| {
            let (x, next) = (f64::from(h.to_f32()), f64::from(H::from_bits(h.to_bits() + 1).to_f32()));
            let mid = (x + next) / 2.0;
            let nudge = (next - x).abs() * 2f64.powi(-30);
            [mid + nudge, mid - nudge, mid, x + (next - x) * 0.3]
        })
        .collect();
    let want: Vec<H> = doubles.iter().map(|&x| if bfloat { H::from_f32(x as f32) } else { round_f64(x) }).collect();
    check(&format!("float64 -> {name}"), &want, || Tensor::from_slice(&doubles, &[doubles.len()]).cast(H::DTYPE));
    // back to float32 exactly; from int32 rounding to nearest even (to bfloat16 through float32:
    // 2^30 + 2^22 + 1 is a tie there), to int32 truncating
    let hs: Vec<H> = xs.iter().map(|&x| H::from_f32(x)).collect();
    let exact: Vec<f32> = hs.iter().map(|h| h.to_f32()).collect();
    for device in ["CPU", "INTERP"] {
        let got = on(device, || tensor(&hs).cast(DType::FLOAT32).to_vec::<f32>());
        let same = got.iter().zip(&exact).all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()));
        assert!(same, "{name} -> float32 on {device} is not exact");
    }
    const TIE_IN_F32: i32 = (1 << 30) + (1 << 22) + 1;
    let ints = [0, 1, -1, 255, 256, 257, 258, 259, -257, 2047, 2049, 4097, 65504, 65519, -65520, 1 << 20, 16_777_215];
    let ints: Vec<i32> = ints.into_iter().chain([TIE_IN_F32, -TIE_IN_F32, i32::MAX]).collect();
    let want: Vec<H> = ints.iter().map(|&i| H::from_f32(i as f32)).collect();
    check(&format!("int32 -> {name}"), &want, || Tensor::from_slice(&ints, &[ints.len()]).cast(H::DTYPE));
    let finite: Vec<H> = randoms::<H>(16, 64, -4..14);
    let truncated: Vec<i32> = finite.iter().map(|h| h.to_f32().trunc() as i32).collect();
    for device in ["CPU", "INTERP"] {
        let got = on(device, || tensor(&finite).cast(DType::INT32).to_vec::<i32>());
        assert_eq!(got, truncated, "{name} -> int32 on {device}");
    }
}

#[test]
fn bfloat16_casts_round_to_nearest_even() {
    casts::<bf16>();
}

#[test]
fn float16_casts_round_to_nearest_even() {
    casts::<f16>();
    // between the two half types: one rounding of an exact value
    let b: Vec<bf16> = randoms(7, 100, -20..20).into_iter().chain(specials()).collect();
    let want: Vec<f16> = b.iter().map(|x| f16::from_f32(x.to_f32())).collect();
    check("bfloat16 -> float16", &want, || tensor(&b).cast(DType::FLOAT16));
    let h: Vec<f16> = randoms(8, 100, -14..14).into_iter().chain(specials()).collect();
    let want: Vec<bf16> = h.iter().map(|x| bf16::from_f32(x.to_f32())).collect();
    check("float16 -> bfloat16", &want, || tensor(&h).cast(DType::BFLOAT16));
}

/// Row sums and a matmul whose float32 accumulation is exact in any order (values in [0.5, 4)):
/// only the final rounding (and the products' rounding) decide the result, and those are checked
/// to matter, so accumulating in the half dtype or keeping float32 products would fail.
fn reductions<H: Half>() {
    let name = H::DTYPE.name();
    let round_h = |x: f64| round_f64::<H>(x);
    let (rows, cols) = (4, 64);
    let x: Vec<H> = randoms(9, rows * cols, -1..2);
    let exact_sums: Vec<f64> = x.chunks(cols).map(|r| r.iter().map(|v| f64::from(v.to_f32())).sum()).collect();
    let want: Vec<H> = exact_sums.iter().map(|&s| round_h(s)).collect();
    let in_half: Vec<H> = x
        .chunks(cols)
        .map(|r| r.iter().fold(H::from_f32(0.0), |acc, v| H::from_f32(acc.to_f32() + v.to_f32())))
        .collect();
    assert_ne!(want, in_half, "the inputs tell a float32 accumulator from a {name} one");
    check(&format!("{name} sum"), &want, || Tensor::from_slice(&x, &[rows, cols]).sum(1isize, false));
    let total = round_h(exact_sums.iter().sum());
    check(&format!("{name} full sum"), &[total], || {
        Tensor::from_slice(&x, &[rows, cols]).sum(None, false).reshape(&[1])
    });

    let (m, k, n) = (5, 16, 3);
    let a: Vec<H> = randoms(10, m * k, -1..2);
    let b: Vec<H> = randoms(11, k * n, -1..2);
    let dot = |i: usize, j: usize, round_products: bool| -> f64 {
        (0..k)
            .map(|l| {
                let p = a[i * k + l].to_f32() * b[l * n + j].to_f32(); // exact in float32
                if round_products {
                    f64::from(H::from_f32(p).to_f32())
                } else {
                    f64::from(p)
                }
            })
            .sum()
    };
    let want: Vec<H> = (0..m * n).map(|e| round_h(dot(e / n, e % n, true))).collect();
    let unrounded: Vec<H> = (0..m * n).map(|e| round_h(dot(e / n, e % n, false))).collect();
    assert_ne!(want, unrounded, "the inputs tell rounded products from float32 ones");
    check(&format!("{name} matmul"), &want, || {
        Tensor::from_slice(&a, &[m, k]).matmul(&Tensor::from_slice(&b, &[k, n]))
    });
}

#[test]
fn bfloat16_sums_and_matmuls_round_at_the_end() {
    reductions::<bf16>();
}

#[test]
fn float16_sums_and_matmuls_round_at_the_end() {
    reductions::<f16>();
}

/// exp, log, exp2 and log2 within float32's error of the exact result, so exactly the correctly
/// rounded value on inputs clear of a rounding boundary (at least 90% of them).
fn transcendentals<H: Half>(exp_inputs: Vec<H>, log_inputs: Vec<H>) {
    let name = H::DTYPE.name();
    type Op = (&'static str, fn(f64) -> f64, fn(&Tensor) -> Tensor);
    let ops: [(Op, &[H]); 4] = [
        (("exp", f64::exp, Tensor::exp), &exp_inputs),
        (("exp2", f64::exp2, Tensor::exp2), &exp_inputs),
        (("log", f64::ln, Tensor::log), &log_inputs),
        (("log2", f64::log2, Tensor::log2), &log_inputs),
    ];
    for ((op, exact, apply), inputs) in ops {
        let clear: Vec<(H, H)> =
            inputs.iter().filter_map(|&x| clear_rounding::<H>(exact(f64::from(x.to_f32()))).map(|y| (x, y))).collect();
        assert!(
            clear.len() * 10 >= inputs.len() * 9,
            "{name} {op}: only {} of {} inputs usable",
            clear.len(),
            inputs.len()
        );
        let (xs, want): (Vec<H>, Vec<H>) = clear.into_iter().unzip();
        check(&format!("{name} {op}"), &want, || apply(&tensor(&xs)));
    }
}

#[test]
fn bfloat16_exp_and_log_round_correctly() {
    let exp_inputs: Vec<bf16> =
        randoms(12, 150, -8..6).into_iter().chain([0.0, 1.0, -1.0, 100.0, -100.0].map(bf16::from_f32)).collect();
    let log_inputs: Vec<bf16> = randoms::<bf16>(13, 150, -100..100)
        .into_iter()
        .map(|x| bf16::from_f32(x.to_f32().abs()))
        .chain([1.0, 2.0, 0.0, -1.0].map(bf16::from_f32))
        .collect();
    transcendentals(exp_inputs, log_inputs);
}

#[test]
fn float16_exp_and_log_round_correctly() {
    // exp reaches float16's subnormals below -9.7 and overflows above 11.09
    let exp_inputs: Vec<f16> = randoms(14, 150, -6..4)
        .into_iter()
        .chain([0.0, 1.0, -1.0, 11.0, 12.0, -12.0, -20.0].map(f16::from_f32))
        .collect();
    let log_inputs: Vec<f16> = randoms::<f16>(15, 150, -24..16)
        .into_iter()
        .map(|x| f16::from_f32(x.to_f32().abs()))
        .chain([1.0, 2.0, 0.0, -1.0].map(f16::from_f32))
        .collect();
    transcendentals(exp_inputs, log_inputs);
}

#[test]
fn integers_wrap_and_divide_like_c() {
    for device in ["CPU", "INTERP"] {
        let (wrapped, q, u) = on(device, || {
            let a = Tensor::new([127i32, -7, 7, -128]).cast(DType::INT8);
            let wrapped = (&a + 1).cast(DType::INT32).to_vec::<i32>();
            let q = Tensor::new([-7i32, 7, -8]).idiv(2).to_vec::<i32>();
            let u = (Tensor::new([250i32, 5]).cast(DType::UINT8) + 10).cast(DType::INT32).to_vec::<i32>();
            (wrapped, q, u)
        });
        assert_eq!(wrapped, vec![-128, -6, 8, -127], "{device}");
        assert_eq!(q, vec![-3, 3, -4], "{device}");
        assert_eq!(u, vec![4, 15], "{device}");
    }
}
