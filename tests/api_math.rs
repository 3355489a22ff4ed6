//! Known-value checks of the elementwise and functional Tensor API (unary math, binary ops, casts,
//! activations, layers, losses) on CPU and INTERP, plus gradients at the edges where a naive
//! composition would give NaN. PyTorch-generated fixtures check the same ops more broadly.

use std::f64::consts::{FRAC_2_SQRT_PI, PI};

use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::{Reduction, RoundingMode};
use lazygrad::{DType, Tensor};

const NAN: f32 = f32::NAN;
const INF: f32 = f32::INFINITY;

/// The dtype and values (as f64) of the tensor `f` builds on `device`.
fn run_on(device: &str, f: &dyn Fn() -> Tensor) -> (DType, Vec<f64>) {
    let _g = DefaultDevice::scoped(device);
    let t = f();
    (t.dtype(), t.cast(DType::FLOAT64).to_vec::<f64>())
}

/// `f` on CPU and on INTERP, which must agree exactly (NaN matching NaN).
fn run(f: impl Fn() -> Tensor) -> (DType, Vec<f64>) {
    let (cpu, interp) = (run_on("CPU", &f), run_on("INTERP", &f));
    assert_eq!(cpu.0, interp.0, "CPU and INTERP dtypes differ");
    let same =
        cpu.1.len() == interp.1.len() && cpu.1.iter().zip(&interp.1).all(|(a, b)| a == b || (a.is_nan() && b.is_nan()));
    assert!(same, "CPU and INTERP differ:\n  cpu    {:?}\n  interp {:?}", cpu.1, interp.1);
    cpu
}

/// `got` matches `want` rounded to f32: atol 1e-6 + rtol 1e-3, NaN matching NaN, infinities exact.
fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: {} values, expected {}", got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let w = w as f32 as f64;
        let ok = if w.is_nan() || w.is_infinite() {
            g == w || (g.is_nan() && w.is_nan())
        } else {
            (g - w).abs() <= 1e-6 + 1e-3 * w.abs()
        };
        assert!(ok, "{what}[{i}]: got {g}, expected {w}\n  got  {got:?}\n  want {want:?}");
    }
}

/// `f` on both devices gives a float tensor close to `want`.
fn check(what: &str, f: impl Fn() -> Tensor, want: &[f64]) {
    let (dtype, got) = run(f);
    assert!(dtype.is_float(), "{what}: dtype {dtype:?} is not float");
    assert_close(what, &got, want);
}

/// `f` on both devices gives exactly `want` in `dtype`.
fn check_exact(what: &str, f: impl Fn() -> Tensor, dtype: DType, want: &[f64]) {
    let (got_dtype, got) = run(f);
    assert_eq!(got_dtype, dtype, "{what}: dtype");
    assert_eq!(got, want, "{what}");
}

/// Unary functions checked against f64 references on shared inputs, all in one kernel (their
/// outputs stacked), since each distinct kernel costs a C compile.
struct Table<'a> {
    xs: &'a [f32],
    rows: Vec<Row<'a>>,
}

/// A function under test with its name and f64 reference.
type Row<'a> = (&'static str, fn(&Tensor) -> Tensor, Box<dyn Fn(f64) -> f64 + 'a>);

impl<'a> Table<'a> {
    fn new(xs: &'a [f32]) -> Table<'a> {
        Table { xs, rows: vec![] }
    }
    fn row(mut self, what: &'static str, f: fn(&Tensor) -> Tensor, reference: impl Fn(f64) -> f64 + 'a) -> Self {
        self.rows.push((what, f, Box::new(reference)));
        self
    }
    fn check(self) {
        let n = self.xs.len();
        let (dtype, got) = run(|| {
            let x = Tensor::new(self.xs.to_vec());
            let outs: Vec<Tensor> = self.rows.iter().map(|(_, f, _)| f(&x)).collect();
            Tensor::stack(&outs.iter().collect::<Vec<_>>(), 0)
        });
        assert!(dtype.is_float(), "table dtype {dtype:?} is not float");
        for (row, (what, _, reference)) in self.rows.iter().enumerate() {
            let want: Vec<f64> = self.xs.iter().map(|&x| reference(x as f64)).collect();
            assert_close(what, &got[row * n..(row + 1) * n], &want);
        }
    }
}

/// Bool-valued unary `f` on `xs` against `reference`.
fn predicate(what: &str, xs: &[f32], f: fn(&Tensor) -> Tensor, reference: fn(f32) -> bool) {
    let want: Vec<f64> = xs.iter().map(|&x| reference(x) as u8 as f64).collect();
    check_exact(what, || f(&Tensor::new(xs.to_vec())), DType::BOOL, &want);
}

/// One gradient check: the name, the points, the function and `d sum(f(x)) / dx` there.
type GradCase<'a> = (&'a str, &'a [f32], fn(&Tensor) -> Tensor, &'a [f64]);

/// Gradients of each case's `sum(f(x))` at its points, on both devices, from one backward pass
/// over the summed losses (so they share kernels).
fn check_grads(cases: &[GradCase]) {
    let got = run(|| {
        let xs: Vec<Tensor> = cases.iter().map(|c| Tensor::new(c.1.to_vec())).collect();
        let losses = cases.iter().zip(&xs).map(|(c, x)| (c.2)(x).sum(None::<isize>, false));
        let grads = losses.reduce(|a, b| a + b).expect("no cases").gradient(&xs.iter().collect::<Vec<_>>());
        Tensor::cat(&grads.iter().collect::<Vec<_>>(), 0)
    })
    .1;
    let mut at = 0;
    for (what, xs, _, want) in cases {
        assert_close(what, &got[at..at + xs.len()], want);
        at += xs.len();
    }
}

/// erf in f64 by its Maclaurin series (|x| <= 4) or 1 beyond.
fn erf(x: f64) -> f64 {
    if x.is_nan() || x.abs() > 4.0 {
        return if x.is_nan() { x } else { x.signum() };
    }
    let (mut term, mut sum) = (x, x);
    for n in 1..120 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * FRAC_2_SQRT_PI
}
fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}
fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}
fn hardswish(x: f64) -> f64 {
    if x < -3.0 {
        0.0
    } else if x <= 3.0 {
        x * (x + 3.0) / 6.0
    } else {
        x
    }
}
fn sign(x: f64) -> f64 {
    if x == 0.0 {
        0.0
    } else {
        x.signum()
    }
}

const XS: [f32; 15] = [0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -3.7, 10.0, -10.0, 100.0, 1e4, -1e4, INF, -INF, NAN];
const ACT: [f32; 19] =
    [0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.5, 3.0, -3.0, 5.5, -6.0, 7.0, 20.0, -20.0, 100.0, -100.0, INF, -INF, NAN];
const UNIT: [f32; 13] = [-1.0, -0.9, -0.5, -1e-4, 0.0, 1e-4, 0.3, 0.7, 0.999, 1.0, 1.5, -2.0, NAN];

#[test]
fn unary_math_matches_std() {
    Table::new(&XS)
        .row("rsqrt", Tensor::rsqrt, |x| 1.0 / x.sqrt())
        .row("cos", Tensor::cos, f64::cos)
        .row("tan", Tensor::tan, f64::tan)
        .row("atan", Tensor::atan, f64::atan)
        .row("square", Tensor::square, |x| x * x)
        .row("sign", Tensor::sign, sign)
        .row("abs", Tensor::abs, f64::abs)
        .row("reciprocal", Tensor::reciprocal, f64::recip)
        .row("exp", Tensor::exp, f64::exp)
        .row("log", Tensor::log, f64::ln)
        .row("sqrt", Tensor::sqrt, f64::sqrt)
        .row("sin", Tensor::sin, f64::sin)
        .check();
    Table::new(&UNIT).row("asin", Tensor::asin, f64::asin).row("acos", Tensor::acos, f64::acos).check();
}

#[test]
fn rounding_truncates_floors_ceils_and_rounds_half_to_even() {
    let xs = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 2.7, -2.7, 0.49999997, 8388609.0, 1e30, -0.0, INF, -INF, NAN];
    Table::new(&xs)
        .row("trunc", Tensor::trunc, f64::trunc)
        .row("floor", Tensor::floor, f64::floor)
        .row("ceil", Tensor::ceil, f64::ceil)
        .row("round", Tensor::round, f64::round_ties_even)
        .check();
    // integers stay integers
    let ints = || Tensor::new([-3i32, 0, 7]);
    for (what, f) in
        [("floor", Tensor::floor as fn(&Tensor) -> Tensor), ("ceil", Tensor::ceil), ("round", Tensor::round)]
    {
        check_exact(what, || f(&ints()), DType::INT32, &[-3.0, 0.0, 7.0]);
    }
    check_exact("int abs", || ints().abs(), DType::INT32, &[3.0, 0.0, 7.0]);
    check_exact("int sign", || ints().sign(), DType::INT32, &[-1.0, 0.0, 1.0]);
    check_exact("int square", || ints().square(), DType::INT32, &[9.0, 0.0, 49.0]);
}

#[test]
fn float_predicates() {
    predicate("isinf", &XS, Tensor::isinf, f32::is_infinite);
    predicate("isnan", &XS, Tensor::isnan, f32::is_nan);
    predicate("isfinite", &XS, Tensor::isfinite, f32::is_finite);
    check_exact("int isfinite", || Tensor::new([1i32, -5]).isfinite(), DType::BOOL, &[1.0, 1.0]);
    check_exact("logical_not", || Tensor::new([0.0f32, 2.0, NAN]).logical_not(), DType::BOOL, &[1.0, 0.0, 0.0]);
}

#[test]
fn lerp_and_clamp() {
    let a = || Tensor::new([1.0f32, 2.0, -3.0]);
    let b = || Tensor::new([4.0f32, 2.0, 5.0]);
    check("lerp scalar", || a().lerp(&b(), 0.25), &[1.75, 2.0, -1.0]);
    check("lerp tensor", || a().lerp(&b(), Tensor::new([0.0f32, 1.0, 1.5])), &[1.0, 2.0, 9.0]);
    let x = || Tensor::new([-5.0f32, -1.0, 0.5, 3.0, INF, NAN]);
    check("clamp", || x().clamp(Some(-1.0), Some(2.0)), &[-1.0, -1.0, 0.5, 2.0, 2.0, f64::NAN]);
    check("clamp min", || x().clamp(Some(0.0), None), &[0.0, 0.0, 0.5, 3.0, f64::INFINITY, f64::NAN]);
    check("clamp max", || x().clamp(None, Some(0)), &[-5.0, -1.0, 0.0, 0.0, 0.0, f64::NAN]);
    check_exact("int clamp", || Tensor::new([-5i32, 1, 9]).clamp(Some(0), Some(4)), DType::INT32, &[0.0, 1.0, 4.0]);
    check("half clamp stays half", || Tensor::new([-5.0f32, 1.0]).half().clamp(Some(0.0), None).float(), &[0.0, 1.0]);
    assert_eq!(Tensor::new([1.0f32]).half().clamp(Some(0.0), None).dtype(), DType::FLOAT16);
}

#[test]
#[should_panic(expected = "clamp: at least one")]
fn clamp_needs_a_bound() {
    Tensor::new([1.0f32]).clamp(None::<f64>, None);
}

#[test]
fn division_modes_match_python_and_torch() {
    let (a, b) = ([7i32, -7, 7, -7, 6, 0], [2i32, 2, -2, -2, 3, 5]);
    let (ta, tb) = (|| Tensor::new(a), || Tensor::new(b));
    let py_floor = |x: i32, y: i32| x.div_euclid(y) - if y < 0 && x.rem_euclid(y) != 0 { 1 } else { 0 };
    let want = |f: &dyn Fn(i32, i32) -> i32| a.iter().zip(&b).map(|(&x, &y)| f(x, y) as f64).collect::<Vec<_>>();
    check_exact("int trunc div", || ta().div_mode(tb(), Some(RoundingMode::Trunc)), DType::INT32, &want(&|x, y| x / y));
    check_exact("int floor div", || ta().div_mode(tb(), Some(RoundingMode::Floor)), DType::INT32, &want(&py_floor));
    check_exact("int mod", || ta().mod_(tb()), DType::INT32, &want(&|x, y| x - py_floor(x, y) * y));
    check_exact("int fmod", || ta().fmod(tb()), DType::INT32, &want(&|x, y| x % y));
    check_exact("% operator", || ta() % 3, DType::INT32, &[1.0, 2.0, 1.0, 2.0, 0.0, 0.0]);
    check("int true div", || ta().div_mode(tb(), None), &[3.5, -3.5, -3.5, 3.5, 2.0, 0.0]);

    // floats: exact remainders (C fmod), Python's sign rule and floor quotient (1.0 // 0.1 == 9)
    let (fa, fb) = ([5.5f32, -5.5, 5.5, -5.5, 1.0, 0.3, -0.0, 3.0], [2.0f32, 2.0, -2.0, -2.0, 0.1, 0.1, 1.0, INF]);
    let (ta, tb) = (|| Tensor::new(fa), || Tensor::new(fb));
    let fwant = |f: &dyn Fn(f32, f32) -> f32| fa.iter().zip(&fb).map(|(&x, &y)| f(x, y) as f64).collect::<Vec<_>>();
    let py_mod = |x: f32, y: f32| {
        let r = x % y;
        if r != 0.0 && (r < 0.0) != (y < 0.0) {
            r + y
        } else {
            r
        }
    };
    check("float fmod", || ta().fmod(tb()), &fwant(&|x, y| x % y));
    check("float mod", || ta().mod_(tb()), &fwant(&py_mod));
    check("float trunc div", || ta().div_mode(tb(), Some(RoundingMode::Trunc)), &fwant(&|x, y| (x / y).trunc()));
    // torch's float floor division, in f32: 0.3f32 // 0.1f32 is 3 (0.1f32 * 3 < 0.3f32), 1 // 0.1 is 9
    let floor_div = |x: f32, y: f32| {
        let m = x % y;
        let d = (x - m) / y - if m != 0.0 && (y < 0.0) != (m < 0.0) { 1.0 } else { 0.0 };
        if d == 0.0 {
            0.0f32.copysign(x / y)
        } else {
            d.floor() + if d - d.floor() > 0.5 { 1.0 } else { 0.0 }
        }
    };
    let floor_want = fwant(&floor_div);
    assert_eq!(floor_want[4..6], [9.0, 3.0]);
    check("float floor div", || ta().div_mode(tb(), Some(RoundingMode::Floor)), &floor_want);
    check(
        "float floor div by 0",
        || Tensor::new([1.0f32, -1.0]).div_mode(0.0, Some(RoundingMode::Floor)),
        &[f64::INFINITY, f64::NEG_INFINITY],
    );
}

#[test]
fn pow_of_floats_and_ints() {
    let base = || Tensor::new([-2.0f32, -2.0, 0.0, 0.0, 2.0, 4.0, 10.0, 1.0, NAN]);
    let exp = || Tensor::new([3.0f32, 0.5, 0.0, -1.0, -2.0, 0.5, 38.0, NAN, 0.0]);
    let want = [-8.0, f64::NAN, 1.0, f64::INFINITY, 0.25, 2.0, 1e38, 1.0, 1.0];
    check("float pow", || base().pow(exp()), &want);
    check("float pow scalar", || base().pow(2.0), &[4.0, 4.0, 0.0, 0.0, 4.0, 16.0, 100.0, 1.0, f64::NAN]);
    check("int ** float", || Tensor::new([4i32, 9]).pow(0.5), &[2.0, 3.0]);
    let ib = || Tensor::new([3i32, -2, 2, 7, 1, -1, -1, 2, 0, 5]);
    let cube = [27.0, -8.0, 8.0, 343.0, 1.0, -1.0, -1.0, 8.0, 0.0, 125.0];
    check_exact("int pow const", || ib().pow(3), DType::INT32, &cube);
    check_exact("int pow 0", || ib().pow(0), DType::INT32, &[1.0; 10]);
    let negative = std::panic::catch_unwind(|| Tensor::new([1i32, -1, 2, 0]).pow(-1)).expect_err("int ** -1");
    let message = negative.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("negative integer powers"), "{message}");
    check_exact("uint8 pow wraps", || Tensor::new([3u8, 2]).pow(6), DType::UINT8, &[217.0, 64.0]);
    let (b8, e8) = (|| Tensor::new([3i8, -2, 2, 1, -1, 2]), || Tensor::new([4i8, 5, 7, -3, -3, -1]));
    check_exact("int8 pow tensor", || b8().pow(e8()), DType::INT8, &[81.0, -32.0, -128.0, 1.0, -1.0, 0.0]);
}

#[test]
fn pow_int32_exponent_tensor() {
    let ib = || Tensor::new([3i32, -2, 2, 7, 1, -1, -1, 2, 0, 5]);
    let ie = || Tensor::new([4i32, 5, 31, 0, -3, -3, -2, -1, 0, 13]);
    let want = [81.0, -32.0, i32::MIN as f64, 1.0, 1.0, -1.0, 1.0, 0.0, 1.0, 1220703125.0];
    check_exact("int pow", || ib().pow(ie()), DType::INT32, &want);
}

#[test]
fn copysign_logaddexp_minimum() {
    let a = || Tensor::new([3.0f32, 3.0, -2.0, 0.0, NAN]);
    let b = || Tensor::new([-1.0f32, -0.0, 0.0, -5.0, 1.0]);
    check("copysign", || a().copysign(b()), &[-3.0, -3.0, 2.0, 0.0, f64::NAN]);
    let x = || Tensor::new([0.0f32, 1000.0, INF, -INF, 1.0, -INF, NAN]);
    let y = || Tensor::new([0.0f32, 1000.0, INF, -INF, 2.0, 0.0, 0.0]);
    let want =
        [2f64.ln(), 1000.0 + 2f64.ln(), f64::INFINITY, f64::NEG_INFINITY, 2.0 + (-1f64).exp().ln_1p(), 0.0, f64::NAN];
    check("logaddexp", || x().logaddexp(y()), &want);
    check_exact(
        "uint8 minimum",
        || Tensor::new([0u8, 200, 7]).minimum(Tensor::new([5u8, 100, 7])),
        DType::UINT8,
        &[0.0, 100.0, 7.0],
    );
    check_exact("int32 minimum", || Tensor::new([i32::MIN, 4]).minimum(0), DType::INT32, &[i32::MIN as f64, 0.0]);
    check("float minimum", || Tensor::new([1.0f32, -INF, NAN]).minimum(0.0), &[0.0, f64::NEG_INFINITY, f64::NAN]);
}

#[test]
fn bitwise_ops_and_shifts() {
    let a = || Tensor::new([12i32, -1, 5, 0]);
    let b = || Tensor::new([10i32, 7, 3, -8]);
    check_exact("and", || a().bitwise_and(b()), DType::INT32, &[8.0, 7.0, 1.0, 0.0]);
    check_exact("or", || a() | &b(), DType::INT32, &[14.0, -1.0, 7.0, -8.0]);
    check_exact("xor", || a() ^ &b(), DType::INT32, &[6.0, -8.0, 6.0, -8.0]);
    check_exact("not", || !a(), DType::INT32, &[-13.0, 0.0, -6.0, -1.0]);
    check_exact("uint8 not", || Tensor::new([0u8, 2, 255]).bitwise_not(), DType::UINT8, &[255.0, 253.0, 0.0]);
    check_exact("lshift", || a() << 2, DType::INT32, &[48.0, -4.0, 20.0, 0.0]);
    check_exact("rshift", || a().rshift(Tensor::new([2i32, 1, 0, 3])), DType::INT32, &[3.0, -1.0, 5.0, 0.0]);
    check_exact("uint8 shifts", || Tensor::new([1u8, 3, 31]).lshift(3).rshift(1), DType::UINT8, &[4.0, 12.0, 124.0]);
    let p = || Tensor::new([true, true, false, false]);
    let q = || Tensor::new([true, false, true, false]);
    check_exact("bool and", || p() & &q(), DType::BOOL, &[1.0, 0.0, 0.0, 0.0]);
    check_exact("bool or", || p().bitwise_or(q()), DType::BOOL, &[1.0, 1.0, 1.0, 0.0]);
    check_exact("bool xor", || p().bitwise_xor(q()), DType::BOOL, &[0.0, 1.0, 1.0, 0.0]);
    check_exact("bool not", || !p(), DType::BOOL, &[0.0, 0.0, 1.0, 1.0]);
}

#[test]
#[should_panic(expected = "bitwise_and: needs integer or bool operands")]
fn bitwise_rejects_floats() {
    Tensor::new([1.0f32]).bitwise_and(1);
}

#[test]
#[should_panic(expected = "lshift: needs integer operands")]
fn shift_rejects_floats() {
    Tensor::new([1.0f32]).lshift(1);
}

#[test]
fn casts_and_bitcast() {
    // (out-of-range float -> int casts are left out: C leaves them undefined, see uop::exec)
    let x = || Tensor::new([2.7f32, -2.7, 0.0, 1e9]);
    check_exact("int", || x().int(), DType::INT32, &[2.0, -2.0, 0.0, 1e9]);
    check_exact("long", || (x() * 100.0).long(), DType::INT64, &[270.0, -270.0, 0.0, 99999997952.0]);
    check_exact("bool", || x().bool(), DType::BOOL, &[1.0, 1.0, 0.0, 1.0]);
    check_exact("bfloat16", || x().bfloat16(), DType::BFLOAT16, &[2.703125, -2.703125, 0.0, 998244352.0]);
    check_exact("double", || x().double(), DType::FLOAT64, &[2.7f32 as f64, -2.7f32 as f64, 0.0, 1e9]);
    check_exact("float", || Tensor::new([3i64, -4]).float(), DType::FLOAT32, &[3.0, -4.0]);
    let bits = || Tensor::new([1.0f32, -2.0, 0.0]).bitcast(DType::INT32);
    check_exact("bitcast f32->i32", bits, DType::INT32, &[1065353216.0, -1073741824.0, 0.0]);
    check_exact(
        "bitcast i32->u32",
        || Tensor::new([-1i32, 5]).bitcast(DType::UINT32),
        DType::UINT32,
        &[4294967295.0, 5.0],
    );
    check_exact("bitcast round trip", || bits().bitcast(DType::FLOAT32), DType::FLOAT32, &[1.0, -2.0, 0.0]);
    check_exact("bitcast f16->i16", || Tensor::new([1.0f32]).half().bitcast(DType::INT16), DType::INT16, &[15360.0]);
}

#[test]
fn cast_to_half_rounds() {
    let x = || Tensor::new([2.7f32, -2.7, 0.0, 1e9]);
    check_exact("half", || x().half(), DType::FLOAT16, &[2.69921875, -2.69921875, 0.0, f64::INFINITY]);
}

#[test]
#[should_panic(expected = "bitcast: the dtypes differ in size (dtypes [dtypes.float, dtypes.short])")]
fn bitcast_needs_equal_itemsize() {
    Tensor::new([1.0f32]).bitcast(DType::INT16);
}

#[test]
fn activations_match_reference_formulas() {
    let sq = (2.0 / PI).sqrt();
    let (alpha, scale) = (1.673_263_242_354_377_3, 1.050_700_987_355_480_5);
    Table::new(&ACT)
        .row("sigmoid", Tensor::sigmoid, sigmoid)
        .row("logsigmoid", Tensor::logsigmoid, |x| -softplus(-x))
        .row("hardsigmoid", Tensor::hardsigmoid, |x| (x / 6.0 + 0.5).clamp(0.0, 1.0))
        .row("elu", Tensor::elu, |x| if x > 0.0 { x } else { x.exp_m1() })
        .row("celu", Tensor::celu, |x| if x > 0.0 { x } else { x.exp_m1() })
        .row("selu", Tensor::selu, |x| scale * if x > 0.0 { x } else { alpha * x.exp_m1() })
        .row("silu", Tensor::silu, |x| x * sigmoid(x))
        .row("swish", Tensor::swish, |x| x * sigmoid(x))
        .row("relu", Tensor::relu, |x| if x.is_nan() { x } else { x.max(0.0) })
        .row("relu6", Tensor::relu6, |x| x.clamp(0.0, 6.0))
        .row("hardswish", Tensor::hardswish, hardswish)
        .row("tanh", Tensor::tanh, f64::tanh)
        .row("sinh", Tensor::sinh, f64::sinh)
        .row("cosh", Tensor::cosh, f64::cosh)
        .row("asinh", Tensor::asinh, f64::asinh)
        .row("hardtanh", Tensor::hardtanh, |x| x.clamp(-1.0, 1.0))
        .row("erf", Tensor::erf, erf)
        .row("gelu", Tensor::gelu, |x| 0.5 * x * (1.0 + (sq * (x + 0.044715 * x * x * x)).tanh()))
        .row("gelu_exact", Tensor::gelu_exact, |x| 0.5 * x * (1.0 + erf(x / 2f64.sqrt())))
        .row("quick_gelu", Tensor::quick_gelu, |x| x * sigmoid(1.702 * x))
        .row("leaky_relu", Tensor::leaky_relu, |x| if x > 0.0 { x } else { 0.01 * x })
        .row("mish", Tensor::mish, |x| x * softplus(x).tanh())
        .row("softplus", Tensor::softplus, softplus)
        .row("softsign", Tensor::softsign, |x| x / (1.0 + x.abs()))
        .check();
    let atanh_xs = [-0.99, -0.5, 0.0, 1e-4, 0.3, 0.9, 1.0, -1.0, 1.5, NAN];
    Table::new(&atanh_xs).row("atanh", Tensor::atanh, f64::atanh).check();
    let acosh_xs = [1.0, 1.5, 2.0, 10.0, 100.0, 1e4, 0.5, INF, NAN];
    Table::new(&acosh_xs).row("acosh", Tensor::acosh, f64::acosh).check();
}

/// The bits of the float32 tensor `f` builds on `device`.
fn bits_on(device: &str, f: &dyn Fn() -> Tensor) -> Vec<u32> {
    let _g = DefaultDevice::scoped(device);
    f().to_vec::<f32>().iter().map(|v| v.to_bits()).collect()
}

/// relu and a maximum against a constant become one max instruction on the CPU, which must keep
/// max's exact rules: NaN from either side and, on a tie, the right operand (so relu(-0.0) is
/// +0.0 and maximum(+0.0, -0.0) is -0.0). Both a scalar kernel (10 values) and a vectorized one
/// (65536).
#[test]
fn relu_and_maximum_with_a_constant_are_exact_to_the_sign_of_zero() {
    let special = [-0.0f32, 0.0, NAN, -INF, INF, -1.5, 2.5, 1e-40, -1e-40, 7.0];
    let spec = |a: f32, b: f32| if a.is_nan() || a > b { a } else { b };
    for n in [10, 1 << 16] {
        let xs: Vec<f32> = special.iter().cycle().take(n).copied().collect();
        let want = |c: f32| xs.iter().map(|&a| spec(a, c).to_bits()).collect::<Vec<_>>();
        let first_difference = |got: Vec<u32>, want: &[u32]| {
            let i = got.iter().zip(want).position(|(g, w)| g != w)?;
            Some(format!("x = {:e}: got {:e}, want {:e}", xs[i], f32::from_bits(got[i]), f32::from_bits(want[i])))
        };
        // `None` is relu, which is a maximum against +0.0
        for c in [None, Some(0.0f32), Some(-0.0), Some(2.5), Some(-1.5), Some(NAN)] {
            let f = || {
                let x = Tensor::from_slice(&xs, &[n]);
                c.map_or_else(|| x.relu(), |c| x.maximum(c))
            };
            let what = c.map_or("relu".to_string(), |c| format!("maximum(x, {c:?})"));
            for device in ["CPU", "INTERP"] {
                let wrong = first_difference(bits_on(device, &f), &want(c.unwrap_or(0.0)));
                assert!(wrong.is_none(), "{what} on {device}, {n} values: {}", wrong.unwrap_or_default());
            }
        }
    }
}

#[test]
fn activation_parameters() {
    let xs = [-3.0f32, -0.5, 0.0, 0.5, 3.0];
    let x = || Tensor::new(xs);
    let want = |f: &dyn Fn(f64) -> f64| xs.iter().map(|&v| f(v as f64)).collect::<Vec<_>>();
    check("elu 0.5", || x().elu_with(0.5), &want(&|v| if v > 0.0 { v } else { 0.5 * v.exp_m1() }));
    check("celu 2", || x().celu_with(2.0), &want(&|v| if v > 0.0 { v } else { 2.0 * (v / 2.0).exp_m1() }));
    check("selu", || x().selu_with(2.0, 3.0), &want(&|v| 3.0 * if v > 0.0 { v } else { 2.0 * v.exp_m1() }));
    check("hardsigmoid", || x().hardsigmoid_with(0.25, 0.25), &want(&|v| (0.25 * v + 0.25).clamp(0.0, 1.0)));
    check("hardtanh", || x().hardtanh_with(-0.25, 2.0), &want(&|v| v.clamp(-0.25, 2.0)));
    check("leaky_relu", || x().leaky_relu_with(0.42), &want(&|v| if v > 0.0 { v } else { 0.42 * v }));
    check("softplus beta", || x().softplus_with(2.0), &want(&|v| softplus(2.0 * v) / 2.0));
    check_exact("int relu stays int", || Tensor::new([-2i32, 3]).relu(), DType::INT32, &[0.0, 3.0]);
    check("int sigmoid is float", || Tensor::new([0i32]).sigmoid(), &[0.5]);
}

#[test]
fn linear_layernorm_batchnorm() {
    let x = || Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let w = || Tensor::new([[1.0f32, 0.0], [0.0, 1.0], [1.0, -1.0]]);
    check("linear", || x().linear(&w(), Some(&Tensor::new([0.5f32, -0.5]))), &[4.5, -1.5, 10.5, -1.5]);
    check("linear 1-D weight", || x().linear(&Tensor::new([2.0f32, 0.0, 1.0]), None), &[2.0, 0.0, 3.0, 8.0, 0.0, 6.0]);
    let ln = |v: [f64; 3]| {
        let m = v.iter().sum::<f64>() / 3.0;
        let var = v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / 3.0;
        v.map(|a| (a - m) / (var + 1e-5).sqrt())
    };
    check("layernorm", || x().layernorm(-1, 1e-5), &[ln([1.0, 2.0, 3.0]), ln([4.0, 5.0, 6.0])].concat());
    let all = {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let m = 3.5;
        let var = v.iter().map(|a: &f64| (a - m).powi(2)).sum::<f64>() / 6.0;
        v.map(|a| (a - m) / (var + 0.1f64).sqrt())
    };
    check("layernorm all axes", || x().layernorm([0, 1], 0.1), &all);
    // (N=2, C=2, L=1): per channel (x - mean) * weight * invstd + bias
    let bx = || Tensor::new([[[1.0f32], [10.0]], [[3.0], [20.0]]]);
    let (mean, invstd) = (|| Tensor::new([2.0f32, 15.0]), || Tensor::new([1.0f32, 0.2]));
    let (wt, bias) = (|| Tensor::new([2.0f32, 1.0]), || Tensor::new([0.0f32, 100.0]));
    check("batchnorm", || bx().batchnorm(Some(&wt()), Some(&bias()), &mean(), &invstd()), &[-2.0, 99.0, 2.0, 101.0]);
    check("batchnorm bare", || bx().batchnorm(None, None, &mean(), &invstd()), &[-1.0, -1.0, 1.0, 1.0]);
    let two = || Tensor::new([[1.0f32, 4.0], [3.0, 8.0]]);
    check(
        "batchnorm axis 0",
        || two().batchnorm_axes(None, None, &Tensor::new([1.0f32, 3.0]), &Tensor::new([1.0f32, 2.0]), 0),
        &[0.0, 3.0, 0.0, 10.0],
    );
}

/// Reference attention for one batch: `softmax(q k^T / sqrt(d) + mask) v`.
fn attention_ref(q: &[[f64; 2]], k: &[[f64; 2]], v: &[[f64; 2]], mask: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut out = vec![];
    for (i, qi) in q.iter().enumerate() {
        let s: Vec<f64> =
            k.iter().enumerate().map(|(j, kj)| (qi[0] * kj[0] + qi[1] * kj[1]) / 2f64.sqrt() + mask(i, j)).collect();
        let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        out.extend((0..2).map(|c| e.iter().zip(v).map(|(w, vj)| w * vj[c]).sum::<f64>() / z));
    }
    out
}

#[test]
fn scaled_dot_product_attention_with_masks() {
    let (q, k, v) =
        ([[1.0, 0.0], [0.5, -1.0]], [[1.0, 1.0], [0.0, 2.0], [-1.0, 0.5]], [[1.0, 2.0], [3.0, -1.0], [0.0, 5.0]]);
    let t = |a: &[[f64; 2]]| Tensor::new(a.iter().map(|r| r.map(|x| x as f32)).collect::<Vec<_>>()).unsqueeze(0);
    check(
        "sdpa",
        || t(&q).scaled_dot_product_attention(&t(&k), &t(&v), None, false),
        &attention_ref(&q, &k, &v, |_, _| 0.0),
    );
    let causal = attention_ref(&q, &k, &v, |i, j| if j <= i { 0.0 } else { f64::NEG_INFINITY });
    check("sdpa causal", || t(&q).scaled_dot_product_attention(&t(&k), &t(&v), None, true), &causal);
    let keep = [[true, false, true], [false, true, true]];
    let bool_mask = attention_ref(&q, &k, &v, |i, j| if keep[i][j] { 0.0 } else { f64::NEG_INFINITY });
    let m = || Tensor::new(keep);
    check("sdpa bool mask", || t(&q).scaled_dot_product_attention(&t(&k), &t(&v), Some(&m()), false), &bool_mask);
    let add = [[0.5, -1.0, 0.0], [2.0, 0.0, -0.5]];
    let float_mask = attention_ref(&q, &k, &v, |i, j| add[i][j]);
    let fm = || Tensor::new(add.map(|r| r.map(|x| x as f32)));
    check("sdpa float mask", || t(&q).scaled_dot_product_attention(&t(&k), &t(&v), Some(&fm()), false), &float_mask);
}

/// Reference log-softmax of each row.
fn log_softmax_rows(x: &[Vec<f64>]) -> Vec<Vec<f64>> {
    x.iter()
        .map(|r| {
            let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let lse = m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
            r.iter().map(|v| v - lse).collect()
        })
        .collect()
}

const LOGITS: [[f32; 4]; 3] = [[1.0, 2.0, 0.5, -1.0], [0.0, 0.0, 3.0, 1.0], [-2.0, 4.0, 1.0, 0.0]];

fn logits_f64() -> Vec<Vec<f64>> {
    LOGITS.iter().map(|r| r.iter().map(|&v| v as f64).collect()).collect()
}

#[test]
fn binary_crossentropies() {
    let (p, y) = ([0.1f32, 0.9, 0.2, 0.0, 1.0, 0.5], [0.0f32, 1.0, 0.0, 0.0, 1.0, 1.0]);
    let per: Vec<f64> = p
        .iter()
        .zip(&y)
        .map(|(&p, &y)| {
            let (p, y) = (p as f64, y as f64);
            -(y * p.ln().max(-100.0) + (1.0 - y) * (1.0 - p).ln().max(-100.0))
        })
        .collect();
    let mean = per.iter().sum::<f64>() / per.len() as f64;
    check("bce", || Tensor::new(p).binary_crossentropy(&Tensor::new(y), Reduction::Mean), &[mean]);
    check("bce none", || Tensor::new(p).binary_crossentropy(&Tensor::new(y), Reduction::None), &per);
    let (x, y) = ([-1.0f32, 2.0, -3.0, 0.0, 50.0, -50.0], [0.0f32, 1.0, 0.0, 1.0, 0.0, 1.0]);
    let logits = |pw: f64| -> Vec<f64> {
        x.iter()
            .zip(&y)
            .map(|(&x, &y)| pw * y as f64 * softplus(-x as f64) + (1.0 - y as f64) * softplus(x as f64))
            .collect()
    };
    let sum: f64 = logits(1.0).iter().sum();
    check("bce logits", || Tensor::new(x).binary_crossentropy_logits(&Tensor::new(y), Reduction::Sum, None), &[sum]);
    let pw = || Tensor::new([3.0f32]);
    let weighted = logits(3.0);
    check(
        "bce logits pos_weight",
        || Tensor::new(x).binary_crossentropy_logits(&Tensor::new(y), Reduction::None, Some(&pw())),
        &weighted,
    );
}

#[test]
fn categorical_crossentropies() {
    let lp = log_softmax_rows(&logits_f64());
    let labels = [1usize, 3, 0];
    let x = || Tensor::new(LOGITS);
    let y = || Tensor::new(labels.map(|l| l as i32));
    let nll: Vec<f64> = labels.iter().enumerate().map(|(i, &l)| -lp[i][l]).collect();
    let mean = nll.iter().sum::<f64>() / 3.0;
    check("sparse cce", || x().sparse_categorical_crossentropy(&y(), -1, 0.0, Reduction::Mean), &[mean]);
    check("sparse cce none", || x().sparse_categorical_crossentropy(&y(), -1, 0.0, Reduction::None), &nll);
    // ignore label 3, smooth by 0.1: (0.9 * -lp[y] - 0.1 * mean(lp row)) averaged over kept rows
    let smooth: Vec<f64> = (0..3).map(|i| 0.9 * nll[i] - 0.1 * lp[i].iter().sum::<f64>() / 4.0).collect::<Vec<_>>();
    check(
        "sparse cce ignore+smooth",
        || x().sparse_categorical_crossentropy(&y(), 3, 0.1, Reduction::Mean),
        &[(smooth[0] + smooth[2]) / 2.0],
    );
    check("cross_entropy indices", || x().cross_entropy(&y(), Reduction::Sum, 0.0), &[nll.iter().sum()]);
    let probs = [[0.5f32, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.25, 0.25, 0.25, 0.25]];
    let soft: Vec<f64> =
        (0..3).map(|i| -(0..4).map(|c| probs[i][c] as f64 * lp[i][c]).sum::<f64>()).collect::<Vec<_>>();
    check("cross_entropy probs", || x().cross_entropy(&Tensor::new(probs), Reduction::None, 0.0), &soft);
    let smoothed: Vec<f64> = (0..3).map(|i| 0.8 * nll[i] - 0.2 * lp[i].iter().sum::<f64>() / 4.0).collect();
    check("cross_entropy smoothing", || x().cross_entropy(&y(), Reduction::None, 0.2), &smoothed);
    let one = || Tensor::new([1.0f32, 2.0, 0.5, -1.0]);
    check("cross_entropy 1-D", || one().cross_entropy(&Tensor::new(1i32), Reduction::Mean, 0.0), &[nll[0]]);
}

#[test]
fn nll_loss_weights_and_ignore_index() {
    let lp = log_softmax_rows(&logits_f64());
    let x = || Tensor::new(LOGITS).log_softmax(-1);
    let y = || Tensor::new([1i32, 3, 0]);
    let picked = [-lp[0][1], -lp[1][3], -lp[2][0]];
    check("nll mean", || x().nll_loss(&y(), None, None, Reduction::Mean), &[picked.iter().sum::<f64>() / 3.0]);
    check("nll none", || x().nll_loss(&y(), None, None, Reduction::None), &picked);
    let w = [1.0, 2.0, 0.5, 4.0];
    let wt = || Tensor::new(w.map(|v| v as f32));
    let weighted = picked[0] * w[1] + picked[1] * w[3] + picked[2] * w[0];
    check(
        "nll weighted mean",
        || x().nll_loss(&y(), Some(&wt()), None, Reduction::Mean),
        &[weighted / (w[1] + w[3] + w[0])],
    );
    let kept = picked[0] * w[1] + picked[2] * w[0];
    check("nll weighted ignore sum", || x().nll_loss(&y(), Some(&wt()), Some(3), Reduction::Sum), &[kept]);
    check("nll ignore mean", || x().nll_loss(&y(), None, Some(3), Reduction::Mean), &[(picked[0] + picked[2]) / 2.0]);
    check(
        "nll 1-D",
        || Tensor::new([-0.5f32, -1.5, -2.0]).nll_loss(&Tensor::new(2i32), None, None, Reduction::Mean),
        &[2.0],
    );
    // (N=1, C=2, d=3): classes on axis 1
    let spatial = || Tensor::new([[[-1.0f32, -2.0, -3.0], [-4.0, -5.0, -6.0]]]);
    let ys = || Tensor::new([[0i32, 1, 1]]);
    check("nll spatial", || spatial().nll_loss(&ys(), None, None, Reduction::None), &[1.0, 5.0, 6.0]);
}

#[test]
#[should_panic(expected = "cross_entropy: logits and targets do not match (shapes [3, 4], [2])")]
fn cross_entropy_checks_shapes() {
    Tensor::new(LOGITS).cross_entropy(&Tensor::new([0i32, 1]), Reduction::Mean, 0.0);
}

#[test]
fn gradients_stay_finite_at_the_edges() {
    let s = |x: f64| sigmoid(x) * (1.0 - sigmoid(x));
    let (e1, r34) = (FRAC_2_SQRT_PI / 1f64.exp(), 1.0 / 0.75f64.sqrt());
    let (scale, alpha_scale) = (1.050_700_987_355_480_5, 1.758_099_340_847_376_7);
    let clamp: fn(&Tensor) -> Tensor = |x| x.clamp(Some(-1.0), Some(1.0));
    check_grads(&[
        ("sigmoid'", &[-100.0, 0.0, 100.0], Tensor::sigmoid, &[s(-100.0), 0.25, 0.0]),
        ("tanh'", &[0.0, -50.0], Tensor::tanh, &[1.0, 0.0]),
        ("logsigmoid'", &[-100.0, 0.0, 100.0], Tensor::logsigmoid, &[1.0, 0.5, 0.0]),
        ("softplus'", &[-100.0, 0.0, 100.0], Tensor::softplus, &[0.0, 0.5, 1.0]),
        ("erf'", &[0.0, 1.0, -1.0], Tensor::erf, &[FRAC_2_SQRT_PI, e1, e1]),
        ("atan'", &[0.0, 0.5, -1e4, 1e4], Tensor::atan, &[1.0, 0.8, 1e-8, 1e-8]),
        ("asin'", &[0.0, 0.5, -0.5], Tensor::asin, &[1.0, r34, r34]),
        ("asinh'", &[0.0, -3.0], Tensor::asinh, &[1.0, 1.0 / 10f64.sqrt()]),
        ("cos'", &[0.0, 1.0], Tensor::cos, &[0.0, -(1f64.sin())]),
        ("selu'", &[100.0, -100.0, 0.0], Tensor::selu, &[scale, 0.0, alpha_scale]),
        ("elu'", &[100.0, -1.0], Tensor::elu, &[1.0, (-1f64).exp()]),
        ("relu'", &[-1.0, 0.0, 2.0], Tensor::relu, &[0.0, 0.0, 1.0]),
        ("relu6'", &[0.0, 3.0, 6.0, 7.0], Tensor::relu6, &[0.0, 1.0, 0.0, 0.0]),
        ("hardtanh'", &[-1.0, 0.0, 1.0, 2.0], Tensor::hardtanh, &[0.0, 1.0, 0.0, 0.0]),
        // PyTorch 2.15's (tools/requirements-torch.txt): 0 at -3, 1 at 3
        ("hardswish'", &[-4.0, -3.0, 0.0, 3.0, 4.0], Tensor::hardswish, &[0.0, 0.0, 0.5, 1.0, 1.0]),
        ("leaky_relu'", &[-1.0, 0.0, 1.0], Tensor::leaky_relu, &[0.01, 0.01, 1.0]),
        ("abs'", &[-2.0, 0.0, 3.0], Tensor::abs, &[-1.0, 0.0, 1.0]),
        // 0 at the bounds, as PyTorch 2.15's
        ("clamp'", &[-2.0, -1.0, 0.0, 1.0, 2.0], clamp, &[0.0, 0.0, 1.0, 0.0, 0.0]),
    ]);
}

#[test]
fn remainder_and_division_gradients() {
    let both = |f: fn(&Tensor, &Tensor) -> Tensor| {
        let wrt = |i: usize| {
            run(|| {
                let (a, b) = (Tensor::new([5.5f32, -5.5, 7.0]), Tensor::new([2.0f32, 2.0, -3.0]));
                f(&a, &b).sum(None::<isize>, false).gradient(&[&a, &b]).remove(i)
            })
            .1
        };
        [wrt(0), wrt(1)].concat()
    };
    assert_close("mod grads", &both(|a, b| a.mod_(b)), &[1.0, 1.0, 1.0, -2.0, 3.0, 3.0]);
    assert_close("fmod grads", &both(|a, b| a.fmod(b)), &[1.0, 1.0, 1.0, -2.0, 2.0, 2.0]);
    let floor = both(|a, b| a.div_mode(b, Some(RoundingMode::Floor)));
    assert_close("floor div grads", &floor, &[0.0; 6]);
}

#[test]
fn cross_entropy_gradient_is_softmax_minus_onehot() {
    let got = run(|| {
        let x = Tensor::new(LOGITS);
        x.cross_entropy(&Tensor::new([1i32, 3, 0]), Reduction::Mean, 0.0).gradient(&[&x]).remove(0)
    })
    .1;
    let lp = log_softmax_rows(&logits_f64());
    let want: Vec<f64> = (0..3)
        .flat_map(|i| {
            let lp = &lp[i];
            (0..4).map(move |c| (lp[c].exp() - if c == [1, 3, 0][i] { 1.0 } else { 0.0 }) / 3.0)
        })
        .collect();
    assert_close("d cross_entropy / d logits", &got, &want);
}
