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
