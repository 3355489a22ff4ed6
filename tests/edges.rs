//! Ordinary inputs that once crashed or computed wrong values, each checked on CPU and INTERP
//! against values computed here (in f64, or exact integer math).

mod common;

use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::{Reduction, RoundingMode};
use lazygrad::{Context, DType, Tensor};

/// The values (as f64) of the tensor `f` builds, on CPU and on INTERP, which must agree exactly.
fn both(f: impl Fn() -> Tensor) -> Vec<f64> {
    let on = |device: &str| {
        let _device = DefaultDevice::scoped(device);
        f().cast(DType::FLOAT64).to_vec::<f64>()
    };
    let (cpu, interp) = (on("CPU"), on("INTERP"));
    let same = cpu.len() == interp.len() && cpu.iter().zip(&interp).all(|(a, b)| a == b || a.is_nan() && b.is_nan());
    assert!(same, "CPU and INTERP differ:\n  cpu    {cpu:?}\n  interp {interp:?}");
    cpu
}

fn assert_close(what: &str, got: &[f64], want: &[f64], rtol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-6 + rtol * w.abs(), "{what}[{i}]: got {g}, want {w}");
    }
}

/// Deterministic values in [-1, 1) for host references.
fn values(n: usize, seed: u64) -> Vec<f32> {
    common::xorshift(seed).take(n).map(|x| (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0).collect()
}

/// The message `f` panics with (it must panic).
fn panic_message(f: impl FnOnce()) -> String {
    let err = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).expect_err("it panics");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// `a [m, k] @ b [k, n]` in f64.
fn matmul_ref(a: &[f32], b: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
        }
    }
    out
}

fn transpose(a: &[f32], (rows, cols): (usize, usize)) -> Vec<f32> {
    (0..cols).flat_map(|j| (0..rows).map(move |i| a[i * cols + j])).collect()
}

/// Reductions over a short last axis with 29-31 rows: the heuristics proposed padding the rows to
/// a 32-wide tile (two 16-float vectors), which does not apply to 30 rows, and the kernel panicked.
#[test]
fn reductions_over_a_few_rows_run_for_every_vector_width() {
    for bytes in [16, 32, 64] {
        let _width = Context::new(&[("VECTOR_BYTES", bytes)]);
        for rows in [29, 30, 31] {
            let (cols, x) = (10, values(rows * 10, rows as u64));
            let input = || Tensor::from_slice(&x, &[rows, cols]);
            let softmax: Vec<f64> = x
                .chunks(cols)
                .flat_map(|r| {
                    let m = r.iter().fold(f64::MIN, |m, &v| m.max(v as f64));
                    let e: Vec<f64> = r.iter().map(|&v| (v as f64 - m).exp()).collect();
                    let s: f64 = e.iter().sum();
                    e.into_iter().map(move |v| v / s)
                })
                .collect();
            assert_close("softmax", &both(|| input().softmax(-1)), &softmax, 1e-5);
            let sums: Vec<f64> = x.chunks(cols).map(|r| r.iter().map(|&v| v as f64).sum()).collect();
            assert_close("sum", &both(|| input().sum(1, false)), &sums, 1e-5);
            let norm: Vec<f64> = x
                .chunks(cols)
                .flat_map(|r| {
                    let mean = r.iter().map(|&v| v as f64).sum::<f64>() / cols as f64;
                    let var = r.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / cols as f64;
                    r.iter().map(move |&v| (v as f64 - mean) / (var + 1e-5).sqrt())
                })
                .collect();
            assert_close("layernorm", &both(|| input().layernorm(-1, 1e-5)), &norm, 1e-4);
            let labels: Vec<i32> = (0..rows as i32).map(|i| i % cols as i32).collect();
            let loss = -softmax.chunks(cols).zip(&labels).map(|(p, &l)| p[l as usize].ln()).sum::<f64>() / rows as f64;
            let ce = || input().sparse_categorical_crossentropy(&Tensor::new(labels.clone()), -1, 0.0, Reduction::Mean);
            assert_close("sparse cross-entropy", &both(ce), &[loss], 1e-5);
        }
        let (a, v) = (values(31 * 97, 1), values(97, 2));
        let want = matmul_ref(&a, &v, (31, 97, 1));
        assert_close(
            "[31,97] @ [97,1]",
            &both(|| Tensor::from_slice(&a, &[31, 97]).matmul(&Tensor::from_slice(&v, &[97, 1]))),
            &want,
            1e-5,
        );
        let want = matmul_ref(&v[..31], &a, (1, 31, 97));
        let vm = || Tensor::from_slice(&v[..31], &[31]).matmul(&Tensor::from_slice(&a, &[31, 97]));
        assert_close("v @ m", &both(vm), &want, 1e-5);
    }
}

/// `g.T @ g` reads one buffer through two views, and a loop's size was the only use of its
/// constant: the linearizer emitted the constant after the loop (`ridx2 < ;` in C, zero
/// iterations in INTERP).
#[test]
fn a_tensor_times_its_own_transpose() {
    for (rows, cols) in [(17, 2), (31, 17)] {
        let g = values(rows * cols, (rows * cols) as u64);
        let want = matmul_ref(&transpose(&g, (rows, cols)), &g, (cols, rows, cols));
        let gram = || {
            let t = Tensor::from_slice(&g, &[rows, cols]);
            t.T().matmul(&t)
        };
        assert_close("g.T @ g", &both(gram), &want, 1e-5);
        let einsum = || {
            let t = Tensor::from_slice(&g, &[rows, cols]);
            Tensor::einsum("ji,jk->ik", &[&t, &t])
        };
        assert_close("einsum ji,jk->ik", &both(einsum), &want, 1e-5);
    }
    let g = values(3 * 31 * 17, 5);
    let want: Vec<f64> = g.chunks(31 * 17).flat_map(|b| matmul_ref(&transpose(b, (31, 17)), b, (17, 31, 17))).collect();
    let batched = || {
        let t = Tensor::from_slice(&g, &[3, 31, 17]);
        t.transpose(-1, -2).matmul(&t)
    };
    assert_close("batched g.T @ g", &both(batched), &want, 1e-5);
}

/// Integer division and remainder by 0 and `MIN / -1` trapped (SIGFPE) on CPU. They are defined
/// as numpy computes them: `x / 0 = x % 0 = 0`, `MIN / -1 = MIN` (wrapping) and `MIN % -1 = 0`.
#[test]
fn integer_division_by_zero_and_min_by_minus_one_are_defined() {
    let a = [7i64, -7, 0, 5, i32::MIN as i64, i32::MIN as i64, 3];
    let b = [0i64, 0, 0, -1, -1, 0, 2];
    for dtype in [DType::INT32, DType::INT64] {
        let min = if dtype == DType::INT32 { i32::MIN as i64 } else { i64::MIN };
        let a: Vec<i64> = a.iter().map(|&x| if x == i32::MIN as i64 { min } else { x }).collect();
        let t = |v: &[i64]| Tensor::new(v.to_vec()).cast(dtype);
        let exact = |f: &dyn Fn(&Tensor, &Tensor) -> Tensor, want: Vec<i64>, what: &str| {
            let got: Vec<i64> = both(|| f(&t(&a), &t(&b))).into_iter().map(|v| v as i64).collect();
            assert_eq!(got, want, "{what} {dtype:?}");
        };
        let ((q, r), (fq, fr)) = (
            (vec![0, 0, 0, -5, min, 0, 1], vec![0, 0, 0, 0, 0, 0, 1]),
            (vec![0, 0, 0, -5, min, 0, 1], vec![0, 0, 0, 0, 0, 0, 1]),
        );
        exact(&|x, y| x.idiv(y), q, "idiv");
        exact(&|x, y| x.fmod(y), r, "fmod");
        exact(&|x, y| x.div_mode(y, Some(RoundingMode::Floor)), fq, "floor division");
        exact(&|x, y| x.mod_(y), fr, "mod");
    }
}

/// Shifts by a negative amount or by the width or more were undefined in C; the IR defines them
/// (0 for a left shift and an unsigned right shift, the sign's fill for a signed right shift).
#[test]
fn shifts_by_the_width_or_more_are_defined() {
    let x = || Tensor::new([-8i32, 8, -8, 8, 1]);
    let by = || Tensor::new([32i32, 40, 33, -1, 31]);
    let got: Vec<i64> = both(|| x().lshift(by())).into_iter().map(|v| v as i64).collect();
    assert_eq!(got, [0, 0, 0, 0, i32::MIN as i64], "<<");
    let got: Vec<i64> = both(|| x().rshift(by())).into_iter().map(|v| v as i64).collect();
    assert_eq!(got, [-1, 0, -1, 0, 0], ">>");
    let got: Vec<i64> =
        both(|| x().cast(DType::UINT32).rshift(by().cast(DType::UINT32))).into_iter().map(|v| v as i64).collect();
    assert_eq!(got, [0, 0, 0, 0, 0], ">> unsigned");
}

/// Signed overflow wraps, as in the IR (C's own arithmetic leaves it undefined).
#[test]
fn signed_arithmetic_wraps() {
    let max = || Tensor::new([i32::MAX, i32::MIN, 65535]);
    let got: Vec<i64> = both(|| max() + 1).into_iter().map(|v| v as i64).collect();
    assert_eq!(got, [i32::MIN as i64, i32::MIN as i64 + 1, 65536]);
    let got: Vec<i64> = both(|| -max()).into_iter().map(|v| v as i64).collect();
    assert_eq!(got, [-(i32::MAX as i64), i32::MIN as i64, -65535]);
    let got: Vec<i64> = both(|| max().cast(DType::UINT16) * Tensor::new([65535u16, 65535, 65535]))
        .into_iter()
        .map(|v| v as i64)
        .collect();
    assert_eq!(got, [1, 0, 1], "uint16 products wrap to 16 bits");
}

/// A chain of 50,000 lazy adds was deeper than the scheduler's recursion could go.
#[test]
fn a_chain_of_fifty_thousand_lazy_ops_schedules() {
    let _device = DefaultDevice::scoped("INTERP");
    let one = Tensor::new([1.0f32, 2.0]).realize();
    let mut t = one.clone();
    for _ in 0..50_000 {
        t = &t + &one;
    }
    assert_eq!(t.to_vec::<f32>(), [50_001.0, 100_002.0]);
}

/// Gradients flow through a loss that was read (`item`) or realized before `backward`, and through
/// a realized intermediate, as in PyTorch.
#[test]
fn gradients_survive_realize() {
    for device in ["CPU", "INTERP"] {
        let _device = DefaultDevice::scoped(device);
        let w = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]).requires_grad(true);
        let x = Tensor::new([[1.0f32, 1.0]]);
        let h = x.matmul(&w).relu().realize();
        let loss = (&h * &h).sum(None, false);
        assert_eq!(loss.item::<f32>(), 52.0);
        loss.backward();
        assert_eq!(w.grad().expect("w has a gradient").to_vec::<f32>(), [8.0, 12.0, 8.0, 12.0], "{device}");
        assert_eq!(h.grad().expect("h has a gradient").to_vec::<f32>(), [8.0, 12.0], "{device}");
        // a second loss over the realized h, the realized tensor h itself gone
        w.set_grad(None);
        let loss = h.sum(None, false) * 3.0;
        drop(h);
        loss.realize();
        loss.backward();
        assert_eq!(w.grad().expect("w has a gradient").to_vec::<f32>(), [3.0, 3.0, 3.0, 3.0], "{device}");
    }
}

/// An assignment through a view (a transpose, a slice) writes into the storage it views, as in
/// PyTorch: it wrote a private copy and left the viewed tensor as it was.
#[test]
fn assign_through_a_view_writes_the_viewed_tensor() {
    for device in ["CPU", "INTERP"] {
        let _device = DefaultDevice::scoped(device);
        let data: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let x = Tensor::from_slice(&data, &[3, 4]).realize();
        let y: Vec<f32> = (0..12).map(|i| 100.0 + i as f32).collect();
        x.T().assign(&Tensor::from_slice(&y, &[4, 3])).realize();
        let want: Vec<f32> = (0..12).map(|i| y[(i % 4) * 3 + i / 4]).collect();
        assert_eq!(x.to_vec::<f32>(), want, "{device}: transposed");

        let x = Tensor::from_slice(&data, &[3, 4]).realize();
        x.shrink(&[(1, 2), (1, 3)]).assign(&Tensor::new([[-1.0f32, -2.0]])).realize();
        let mut want = data.clone();
        (want[5], want[6]) = (-1.0, -2.0);
        assert_eq!(x.to_vec::<f32>(), want, "{device}: a slice");

        // the value reads the target at other positions: an in-place transpose
        let x = Tensor::from_slice(&data[..9], &[3, 3]).realize();
        x.T().assign(&x).realize();
        assert_eq!(x.to_vec::<f32>(), [0.0, 3.0, 6.0, 1.0, 4.0, 7.0, 2.0, 5.0, 8.0], "{device}: x.T = x");

        // a lazy tensor is stored first, and the view writes into it
        let z = Tensor::zeros(&[2, 3]);
        z.T().assign(&Tensor::new([[1.0f32, 4.0], [2.0, 5.0], [3.0, 6.0]])).realize();
        assert_eq!(z.to_vec::<f32>(), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "{device}: a view of zeros");
    }
}

/// An assignment to a tensor neither stored nor a view computes the value from the tensor's
/// graph in one kernel, as tinygrad's: `a += z` with `a = x * y` is `x * y + z`, one fused
/// multiply-add on CPU, bit for bit what `x * y + z` gives. It stored `x * y` first (rounded)
/// and then added, which lost the low bit: (1 + 2^-12)^2 - 1 is 2^-11 + 2^-24, and 2^-11 once
/// the product is rounded to float32.
#[test]
fn assign_to_a_lazy_tensor_computes_the_value_from_its_graph() {
    let _device = DefaultDevice::scoped("CPU");
    let x = Tensor::new([1.0f32 + 2f32.powi(-12)]).realize();
    let z = Tensor::new([-1.0f32]).realize();
    let fused = (&x * &x + &z).to_vec::<f32>();
    assert_eq!(fused, [2f32.powi(-11) + 2f32.powi(-24)]);
    let a = &x * &x;
    let before = &a * 1.0;
    a.assign(&(&a + &z));
    assert_eq!(a.to_vec::<f32>(), fused);
    assert!(a.buffer().is_some(), "the assignment is stored");
    assert_eq!(before.to_vec::<f32>(), [1.0 + 2f32.powi(-11)], "a tensor built from the old value keeps it");
}

/// Writing 12 values into a broadcast of 4 stored elements was accepted (and kept the last write).
#[test]
#[should_panic(expected = "several of its elements are one memory location (shapes [1, 4], [3, 4])")]
fn assign_into_an_expanded_view_of_storage_panics() {
    let x = Tensor::new([1.0f32, 2.0, 3.0, 4.0]).realize();
    x.reshape(&[1, 4]).expand(&[3, 4]).assign(&Tensor::ones(&[3, 4]));
}

/// argmax and argmin of a row with a NaN gave an index past its end; sort dropped the NaN and
/// repeated a value. NaN is the largest value, as in PyTorch and numpy.
#[test]
fn nan_is_the_largest_value_for_argmax_and_sort() {
    const NAN: f32 = f32::NAN;
    let x = || Tensor::new([[1.0f32, NAN, 3.0, NAN], [2.0, 5.0, -1.0, 0.0]]);
    assert_eq!(both(|| x().argmax(Some(1), false)), [1.0, 1.0]);
    assert_eq!(both(|| x().argmin(Some(1), false)), [1.0, 2.0]);
    assert_eq!(both(|| x().argmax(None, false)), [1.0]);
    let v = || Tensor::new([3.0f32, NAN, 1.0, 2.0, NAN]);
    let up = both(|| v().sort(0, false).0);
    assert_eq!(up[..3], [1.0, 2.0, 3.0]);
    assert!(up[3].is_nan() && up[4].is_nan(), "{up:?}");
    assert_eq!(both(|| v().sort(0, false).1), [2.0, 3.0, 0.0, 1.0, 4.0]);
    let down = both(|| v().sort(0, true).0);
    assert!(down[0].is_nan() && down[1].is_nan(), "{down:?}");
    assert_eq!(down[2..], [3.0, 2.0, 1.0]);
    assert_eq!(both(|| v().sort(0, true).1), [1.0, 4.0, 0.0, 3.0, 2.0]);
}

/// logsumexp of a row of -inf, or with a +inf, and logcumsumexp after a leading -inf gave NaN
/// (`inf - inf`).
#[test]
fn logsumexp_of_infinities() {
    const INF: f32 = f32::INFINITY;
    let rows = || Tensor::new([[-INF, -INF], [INF, 1.0], [-INF, 0.0]]);
    let want = [f64::NEG_INFINITY, f64::INFINITY, 0.0];
    assert_eq!(both(|| rows().logsumexp(1, false)), want);
    let cum = both(|| Tensor::new([-INF, 0.0, 0.0]).logcumsumexp(0));
    assert_eq!(cum[0], f64::NEG_INFINITY);
    assert_close("logcumsumexp", &cum[1..], &[0.0, 2f64.ln()], 1e-6);
    // over an empty axis: the log of an empty sum
    assert_eq!(both(|| Tensor::zeros(&[2, 0]).logsumexp(1, false)), [f64::NEG_INFINITY; 2]);
    assert_eq!(both(|| Tensor::zeros(&[2, 0]).softmax(-1)), Vec::<f64>::new());
}

/// Indices outside their axis read 0 or were dropped; PyTorch raises, and so does this.
#[test]
fn out_of_range_indices_are_errors() {
    let x = || Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let panics = |what: &str, f: &dyn Fn()| {
        let msg = panic_message(f);
        assert!(msg.contains(what) && msg.contains("out of range"), "{what}: {msg}");
    };
    panics("gather", &|| {
        x().gather(1, &Tensor::new([[0, 3], [1, 1]]));
    });
    panics("gather", &|| {
        x().gather(1, &Tensor::new([[0, -1], [1, 1]]));
    });
    panics("scatter", &|| {
        x().scatter(0, &Tensor::new([[2, 0, 0]]), &Tensor::ones(&[1, 3]));
    });
    panics("one_hot", &|| {
        Tensor::new([0, 3]).one_hot(3);
    });
    let logits = || Tensor::zeros(&[2, 3]);
    panics("nll_loss", &|| {
        logits().nll_loss(&Tensor::new([0, 3]), None, None, Reduction::Mean);
    });
    panics("sparse_categorical_crossentropy", &|| {
        logits().sparse_categorical_crossentropy(&Tensor::new([5, 1]), -1, 0.0, Reduction::Mean);
    });
    panics("cross_entropy", &|| {
        logits().cross_entropy(&Tensor::new([-2, 1]), Reduction::Mean, 0.0);
    });
    // an ignored label is not an index
    let ignored = logits().nll_loss(&Tensor::new([-100, 1]), None, Some(-100), Reduction::Mean);
    assert_close("nll_loss with an ignored label", &both(|| ignored.clone()), &[0.0], 0.0);
    let err = x().try_index(&[lazygrad::tensor::Idx::Tensor(Tensor::new([0, 2]))]).expect_err("row 2 of 2");
    assert!(err.to_string().contains("index 2 is out of range -2..2"), "{err}");
}

/// The argmax and argmin of nothing returned INT_MIN: there is no index to give. The max and min
/// of nothing are the identities, as in tinygrad (-inf and inf for floats).
#[test]
fn extrema_of_nothing() {
    let empty = || Tensor::zeros(&[0, 3]);
    let messages = [
        ("argmax", panic_message(|| drop(empty().argmax(Some(0), false)))),
        ("argmin", panic_message(|| drop(empty().argmin(Some(0), false)))),
    ];
    for (what, msg) in messages {
        assert!(msg.starts_with(what) && msg.contains("size 0"), "{what}: {msg}");
    }
    assert_eq!(both(|| empty().max(0, false)), [f64::NEG_INFINITY; 3]);
    assert_eq!(both(|| empty().min(None, false)), [f64::INFINITY]);
    assert_eq!(both(|| empty().max(1, false)), Vec::<f64>::new(), "reducing a non-empty axis of nothing");
}

/// randint scaled a 24-bit float: `randint(0, 2^25)` was always even, and the whole int32 range
/// gave 0 half the time and never a positive number.
#[test]
fn randint_draws_every_bit() {
    Tensor::manual_seed(7);
    let wide: Vec<i32> = Tensor::randint(&[4096], 0, 1 << 25).to_vec();
    assert!(wide.iter().all(|v| (0..1 << 25).contains(v)));
    assert!(wide.iter().filter(|v| *v % 2 == 1).count() > 1800, "odd values are drawn");
    let all: Vec<i32> = Tensor::randint(&[4096], i32::MIN as i64, i32::MAX as i64 + 1).to_vec();
    let (pos, zero) = (all.iter().filter(|v| **v > 0).count(), all.iter().filter(|v| **v == 0).count());
    assert!((1800..2300).contains(&pos) && zero < 4, "{pos} positive, {zero} zero of 4096");
    let small: Vec<i32> = Tensor::randint(&[4096], -3, 2).to_vec();
    for v in -3..2 {
        let n = small.iter().filter(|x| **x == v).count();
        assert!((700..950).contains(&n), "{v} drawn {n} times of 4096");
    }
}

/// Values the decompositions of transcendental functions got wrong: cancellation near 0 (tanh,
/// sinh, atanh, asinh of tiny values, asin(0)), overflow on the way to a finite result (sinh and
/// cosh of 89) and `pi/2 - x` rounded (the sign of tan just above pi/2). Within 3 float32 ulps of
/// the float64 values here; `tests/precision.rs` sweeps every op.
#[test]
fn transcendentals_at_the_edges() {
    type Case = (&'static str, fn(&Tensor) -> Tensor, f32, f64);
    let cases: [Case; 10] = [
        ("tanh", |t| t.tanh(), 1e-8, 1e-8f32 as f64),
        ("tanh", |t| t.tanh(), 1e-4, (1e-4f32 as f64).tanh()),
        ("sinh", |t| t.sinh(), 1e-8, 1e-8f32 as f64),
        ("sinh", |t| t.sinh(), 89.0, 89f64.sinh()),
        ("cosh", |t| t.cosh(), 89.0, 89f64.cosh()),
        ("asin", |t| t.asin(), 0.0, 0.0),
        ("atanh", |t| t.atanh(), 1e-6, (1e-6f32 as f64).atanh()),
        ("asinh", |t| t.asinh(), 1e-6, (1e-6f32 as f64).asinh()),
        ("tan", |t| t.tan(), 1.5707964, (1.5707964f32 as f64).tan()),
        ("cos", |t| t.cos(), 1.5707964, (1.5707964f32 as f64).cos()),
    ];
    for (name, f, x, want) in cases {
        let got = both(|| f(&Tensor::new([x])))[0];
        let ulp = (want as f32).abs().max(f32::MIN_POSITIVE) * f32::EPSILON;
        assert!((got - want).abs() <= 3.0 * ulp as f64, "{name}({x}): got {got:e}, want {want:e}");
    }
}

/// A float32 sum drifted by a rounding per addition: 2^26 copies of 0.1 summed to 1.00026 times
/// their value. Plain float32 sums accumulate in float64.
#[test]
fn long_sums_are_exact_to_float32() {
    for (device, n) in [("CPU", 1usize << 26), ("INTERP", 1 << 18)] {
        let _device = DefaultDevice::scoped(device);
        let got = Tensor::full(&[n], 0.1f32).contiguous().realize().sum(None, false).item::<f32>();
        assert_eq!(got, (n as f64 * 0.1f32 as f64) as f32, "{device}: {n} x 0.1");
    }
}

/// Found by the fuzzer: a padded matmul whose left operand is one broadcast element per row,
/// under a square root, had (with 4-lane vectors) a load whose address was the same for every
/// lane and only its gate a vector; it was taken for a run of 4 elements and read past the end
/// of a 2-element buffer.
#[test]
fn a_lane_invariant_gated_load_is_no_vector_load() {
    let _width = Context::new(&[("VECTOR_BYTES", 16)]);
    let x = [-1.0f32, -6.0];
    let y: Vec<f32> = (0..16).map(|i| (i % 7) as f32 - 3.0).collect();
    let padded = |r: usize, c: usize| match (r, c) {
        (1.., 2..=9) => (0..2).map(|k| x[(2 * (r - 1) + k) / 4] as f64 * y[k * 8 + c - 2] as f64).sum(),
        _ => 0.0,
    };
    let want: Vec<f64> =
        (0..5).flat_map(|r| (0..11).map(move |c| ((c as f64 - padded(r, c)).abs() as f32).sqrt() as f64)).collect();
    let f = || {
        let e = Tensor::from_slice(&x, &[2, 1, 1, 1]).expand(&[2, 2, 1, 2]).reshape(&[4, 2]);
        let p = e.matmul(&Tensor::from_slice(&y, &[2, 8])).pad(&[(1, 0), (2, 1)]);
        (Tensor::arange(11).float().reshape(&[1, 11]).realize() - p).abs().sqrt()
    };
    for device in ["CPU", "INTERP"] {
        let _device = DefaultDevice::scoped(device);
        let got: Vec<f64> = f().to_vec::<f32>().into_iter().map(f64::from).collect();
        assert_eq!(got, want, "{device}");
    }
}

/// gcc merged the negation of a fused multiply-add, even across a loop, into one `fnmsub`: the
/// negated dot product `-(1 * -1 + -1 * 1)`... of a sum that is +0 came out +0 on the CPU; IEEE
/// negation (and INTERP) give -0 (found by the fuzzer).
#[test]
fn negating_a_dot_product_that_sums_to_zero_gives_negative_zero() {
    let a: Vec<f32> = [-1.0, 1.0].repeat(11);
    let b = [-1.0f32, 1.0, -1.0, 1.0, 1.0, 0.0, -1.0, -1.0, -1.0, 1.0];
    for device in ["CPU", "INTERP"] {
        for noopt in [0, 1] {
            let _device = DefaultDevice::scoped(device);
            let _opts = Context::new(&[("NOOPT", noopt)]);
            let out = Tensor::from_slice(&a, &[11, 2]).matmul(&Tensor::from_slice(&b, &[2, 5])).neg().to_vec::<f32>();
            // column 2: (-1)(-1) + (1)(-1) = +0, negated
            assert!(out[2] == 0.0 && out[2].is_sign_negative(), "{device} NOOPT={noopt}: {}", out[2]);
        }
    }
}

/// An assignment through a flipped or step-sliced view (`t[::-1]`, `t[::2]` on an odd length)
/// wrote a private copy and left the tensor as it was: the view's FLIP and PAD were not walked
/// down to the storage. Each view writes the elements it shows; one reaching into padding is an
/// error at the realize.
#[test]
fn assign_through_flips_and_step_slices_writes_the_tensor() {
    use lazygrad::tensor::Idx;
    for device in common::devices() {
        let _device = DefaultDevice::scoped(device);
        let five = || Tensor::new([0.0f32, 1.0, 2.0, 3.0, 4.0]).realize();
        let x = five();
        x.flip(&[0]).assign(&Tensor::new([10.0f32, 11.0, 12.0, 13.0, 14.0])).realize();
        assert_eq!(x.to_vec::<f32>(), [14.0, 13.0, 12.0, 11.0, 10.0], "{device}: t.flip(0) = v");

        let x = five();
        x.index(&[Idx::R(None, None, 2)]).assign(&Tensor::new([-1.0f32, -2.0, -3.0])).realize();
        assert_eq!(x.to_vec::<f32>(), [-1.0, 1.0, -2.0, 3.0, -3.0], "{device}: t[::2] = v");

        let x = five();
        x.index(&[Idx::R(None, None, -2)]).assign(&Tensor::new([-1.0f32, -2.0, -3.0])).realize();
        assert_eq!(x.to_vec::<f32>(), [-3.0, 1.0, -2.0, 3.0, -1.0], "{device}: t[::-2] = v");

        let x = five();
        x.index(&[Idx::R(Some(1), None, 3)]).assign(&Tensor::new([7.0f32, 8.0])).realize();
        assert_eq!(x.to_vec::<f32>(), [0.0, 7.0, 2.0, 3.0, 8.0], "{device}: t[1::3] = v");

        // two axes, one reversed and one stepped, and a value reading the target elsewhere
        let m = Tensor::new((0..15).map(|i| i as f32).collect::<Vec<_>>()).reshape(&[3, 5]).realize();
        let view = m.index(&[Idx::R(None, None, -1), Idx::R(None, None, 2)]);
        view.assign(&(&view * 10.0).flip(&[0, 1])).realize();
        let mut want: Vec<f32> = (0..15).map(|i| i as f32).collect();
        for r in 0..3 {
            for c in 0..3 {
                // view[r][c] is m[2 - r][2c]; the value there is 10 * view[2 - r][2 - c] = 10 * m[r][4 - 2c]
                want[(2 - r) * 5 + 2 * c] = 10.0 * (r * 5 + 4 - 2 * c) as f32;
            }
        }
        assert_eq!(m.to_vec::<f32>(), want, "{device}: m[::-1, ::2] = (10 * m[::-1, ::2]).flip()");

        // a view reaching into padding has no memory to write
        let x = five();
        let err = x.pad(&[(1, 0)]).assign(&Tensor::ones(&[6])).try_realize().unwrap_err();
        assert!(err.to_string().contains("padding"), "{device}: {err}");
    }
}

/// A view of no elements (an empty slice, a step slice visiting nothing, padding shrunk away to
/// nothing) writes nothing. Its kernel's empty loop folded to one pass: the CPU stored a value
/// at the view's first position (an element outside the view, or before the buffer: index -2
/// through the padding) and the padded one was refused as reaching into padding.
#[test]
fn assigning_through_a_view_of_no_elements_writes_nothing() {
    use lazygrad::tensor::Idx;
    for device in common::devices() {
        let _device = DefaultDevice::scoped(device);
        type View = fn(&Tensor) -> Tensor;
        let views: [(&str, View); 3] = [
            ("t[1:1]", |t| t.shrink(&[(1, 1)])),
            ("t[3:1]", |t| t.index(&[Idx::R(Some(3), Some(1), 1)])),
            ("t.pad(2, 2)[None, -7:-7]", |t| t.pad(&[(2, 2)]).index(&[Idx::NewAxis, Idx::R(Some(-7), Some(-7), 1)])),
        ];
        for (what, view) in views {
            let x = Tensor::new([1.0f32, 2.0]).realize();
            let v = view(&x);
            assert_eq!(v.numel(), 0, "{device}: {what}");
            let value = &v.flip(&(0..v.ndim() as isize).collect::<Vec<_>>()) + 1.0;
            v.assign(&value).try_realize().unwrap_or_else(|e| panic!("{device}: {what}: {e}"));
            assert_eq!(x.to_vec::<f32>(), [1.0, 2.0], "{device}: {what}");
        }
    }
}

#[test]
fn views_of_an_empty_axis_under_padding_are_all_padding() {
    // a flip, a shrink or a pad of a zero-length axis, padded out again: every element is padding,
    // and the moved index of the empty source (whose last element is at -1) is never read
    for dev in common::devices() {
        let empty = Tensor::zeros(&[0]).to(dev).realize();
        let views = [empty.flip(&[0]), empty.pad(&[(0, 0)]), empty.reshape(&[0, 1]).flip(&[1]).reshape(&[0])];
        for (i, view) in views.iter().enumerate() {
            let padded = view.pad(&[(2, 1)]) + 1.0;
            assert_eq!(padded.to_vec::<f32>(), [1.0; 3], "{dev} view {i}");
        }
    }
}
