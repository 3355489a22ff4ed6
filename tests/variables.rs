//! Variables (symbolic shapes): one compiled program serves every value, results equal exact
//! math on both devices, and the JIT replays with new values.

mod common;

use common::devices;
use lazygrad::engine::realize::programs_made;
use lazygrad::{Jit, Sint, Tensor, Variable};

/// The tests run one at a time: they count the programs this process makes.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// 0, 1, ..., n-1 as float32 on `dev`.
fn ramp(n: usize, dev: &str) -> Tensor {
    Tensor::from_vec((0..n).map(|i| i as f32).collect(), &[n]).to(dev).realize()
}

#[test]
fn one_program_sums_every_length() {
    let _serial = serial();
    for dev in devices() {
        let x = ramp(100, dev);
        let n = Variable::new("n", 1, 100);
        let sum = |len: usize| x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(len)))]).sum(0, false);
        sum(1).realize();
        let made = programs_made();
        for len in 1..=100 {
            let got = sum(len).item::<f32>();
            assert_eq!(got, (len * (len - 1) / 2) as f32, "{dev}: sum of 0..{len}");
        }
        assert_eq!(programs_made(), made, "{dev}: a new length compiled a new program");
    }
}

#[test]
fn softmax_and_mean_over_a_variable_axis() {
    let _serial = serial();
    for dev in devices() {
        let x = Tensor::from_vec((0..64).map(|i| ((i * 7 % 13) as f32) * 0.25).collect(), &[2, 32]).to(dev).realize();
        let n = Variable::new("cols", 1, 32);
        for len in [1, 5, 17, 32] {
            let part = x.shrink_sym(&[(Sint::Int(0), Sint::Int(2)), (Sint::Int(0), Sint::from(&n.bind(len)))]);
            assert_eq!(part.dims()[1], Sint::from(&n.bind(len)));
            let soft = part.softmax(-1).sum(1, false).to_vec::<f32>();
            let mean = part.mean(1, false).to_vec::<f32>();
            let host: Vec<f32> = x.to_vec();
            for r in 0..2 {
                let row: Vec<f64> = (0..len).map(|c| host[r * 32 + c] as f64).collect();
                let expect_mean = row.iter().sum::<f64>() / len as f64;
                assert!((soft[r] - 1.0).abs() < 1e-6, "{dev} len {len}: softmax row sums to {}", soft[r]);
                assert!(
                    (mean[r] as f64 - expect_mean).abs() < 1e-6,
                    "{dev} len {len}: mean {} vs {expect_mean}",
                    mean[r]
                );
            }
        }
    }
}

/// Attention of one query over the first `len` rows of a key and value cache, as a decode step
/// computes it.
fn attend(q: &Tensor, k: &Tensor, v: &Tensor, len: &Sint) -> Tensor {
    let (k, v) = (
        k.shrink_sym(&[(Sint::Int(0), len.clone()), (Sint::Int(0), Sint::Int(4))]),
        v.shrink_sym(&[(Sint::Int(0), len.clone()), (Sint::Int(0), Sint::Int(4))]),
    );
    let scores = q.reshape(&[1, 4]).matmul(&k.T()).softmax(-1);
    scores.matmul(&v).reshape(&[4])
}

/// The same attention in f64 on the host.
fn attend_host(q: &[f32], k: &[f32], v: &[f32], len: usize) -> Vec<f64> {
    let scores: Vec<f64> = (0..len).map(|j| (0..4).map(|d| q[d] as f64 * k[j * 4 + d] as f64).sum()).collect();
    let top = scores.iter().cloned().fold(f64::MIN, f64::max);
    let e: Vec<f64> = scores.iter().map(|s| (s - top).exp()).collect();
    let total: f64 = e.iter().sum();
    (0..4).map(|d| (0..len).map(|j| e[j] / total * v[j * 4 + d] as f64).sum()).collect()
}

#[test]
fn jit_replays_attention_at_every_length() {
    let _serial = serial();
    for dev in devices() {
        let data = |seed: usize, n: usize| -> Vec<f32> {
            (0..n).map(|i| (((i * 31 + seed * 17) % 23) as f32 - 11.0) / 8.0).collect()
        };
        let (qd, kd, vd) = (data(1, 4), data(2, 400), data(3, 400));
        let q = Tensor::from_vec(qd.clone(), &[4]).to(dev).realize();
        let k = Tensor::from_vec(kd.clone(), &[100, 4]).to(dev).realize();
        let v = Tensor::from_vec(vd.clone(), &[100, 4]).to(dev).realize();
        let pos = Variable::new("pos", 1, 100);
        let mut step = Jit::new(|inputs: &[Tensor]| {
            let len = Sint::from(&inputs[1].as_var().expect("a bound variable"));
            vec![attend(&inputs[0], &k, &v, &len)]
        });
        let made = programs_made();
        for len in 1..=100 {
            let out = step.call(&[q.clone(), Tensor::from_var(&pos.bind(len))]).unwrap().remove(0).to_vec::<f32>();
            let expect = attend_host(&qd, &kd, &vd, len);
            for d in 0..4 {
                assert!((out[d] as f64 - expect[d]).abs() < 1e-5, "{dev} len {len}: {out:?} vs {expect:?}");
            }
            if len == 1 {
                assert!(programs_made() > made, "{dev}: the first call compiles");
            }
        }
        let after_first = programs_made();
        step.call(&[q.clone(), Tensor::from_var(&pos.bind(7))]).unwrap();
        assert_eq!(programs_made(), after_first, "{dev}: a replay compiled");
    }
}

#[test]
fn a_variable_offset_writes_and_reads_one_row() {
    let _serial = serial();
    for dev in devices() {
        let cache = Tensor::zeros(&[8, 4]).to(dev).contiguous().realize();
        let table = ramp(32, dev).reshape(&[8, 4]);
        let pos = Variable::new("pos", 0, 7);
        for p in [3usize, 0, 7] {
            let at = |t: &Tensor| {
                t.shrink_sym(&[(Sint::from(&pos.bind(p)), &pos.bind(p) + 1), (Sint::Int(0), Sint::Int(4))])
            };
            let row = at(&table) * 2.0;
            at(&cache).assign(&row).realize();
        }
        let got = cache.to_vec::<f32>();
        for r in 0..8 {
            for c in 0..4 {
                let expect = if [0, 3, 7].contains(&r) { 2.0 * (r * 4 + c) as f32 } else { 0.0 };
                assert_eq!(got[r * 4 + c], expect, "{dev}: cache[{r}][{c}]");
            }
        }
    }
}

#[test]
fn symbolic_shapes_reject_what_they_cannot_do() {
    let _serial = serial();
    let n = Variable::new("n", 1, 10);
    let x = Tensor::zeros(&[10, 3]).shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(4))), (Sint::Int(0), Sint::Int(3))]);
    assert_eq!(x.shape(), vec![10, 3], "the shape holds the upper bound");
    assert!(x.try_reshape(&[30]).is_err(), "merging a symbolic axis");
    assert_eq!(x.reshape(&[10, 1, 3]).dims()[0], Sint::from(&n.bind(4)), "a unit axis keeps it");
    let pad = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| x.pad(&[(1, 0), (0, 0)])));
    assert!(pad.is_err(), "padding a symbolic axis");
    let bind = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| n.bind(11)));
    assert!(bind.is_err(), "a value outside the range");
}

#[test]
fn a_bound_variable_is_a_value_too() {
    let _serial = serial();
    let n = Variable::new("n", 0, 1000);
    for dev in devices() {
        let ramp = Tensor::arange(4).to(dev);
        for v in [0usize, 7, 1000] {
            let value = Tensor::from_var(&n.bind(v)).cast(lazygrad::DType::INT32).to(dev);
            assert_eq!((&ramp + &value).to_vec::<i32>(), (0..4).map(|i| i + v as i32).collect::<Vec<_>>(), "{dev}");
        }
    }
}

/// A tensor of variable shape read back (`to_vec`, `raw_bytes`) panicked, "a realized tensor is
/// a buffer": it is stored laid out for its largest shape. Its data is read at the sizes its
/// variables are bound to, at every bound from the smallest to the largest.
#[test]
fn tensors_of_variable_shape_read_back_at_their_bound_sizes() {
    let _serial = serial();
    for dev in devices() {
        let x = ramp(8, dev);
        let n = Variable::new("n", 0, 8);
        for len in [0, 1, 3, 8] {
            let part = x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(len)))]) * 2.0;
            let want: Vec<f32> = (0..len).map(|i| 2.0 * i as f32).collect();
            assert_eq!(part.to_vec::<f32>(), want, "{dev}: n = {len}");
        }
        let m = ramp(24, dev).reshape(&[4, 6]);
        let (rows, cols) = (Variable::new("rows", 1, 4), Variable::new("cols", 0, 6));
        for (r, c) in [(1, 0), (1, 6), (4, 0), (4, 6), (2, 3)] {
            let bounds = [(Sint::Int(0), Sint::from(&rows.bind(r))), (Sint::Int(0), Sint::from(&cols.bind(c)))];
            let part = m.shrink_sym(&bounds) + 1.0;
            let want: Vec<f32> = (0..r).flat_map(|i| (0..c).map(move |j| (i * 6 + j) as f32 + 1.0)).collect();
            assert_eq!(part.to_vec::<f32>(), want, "{dev}: {r} x {c}");
        }
    }
}

/// A symbolic axis cut to a plain number within its bound value (tinygrad's test_tiny
/// `test_symbolic`: `t[:i.bind(s)]` realized, then `[:s]`) was refused: its bounds were checked
/// against the variable's range, not the value it is bound to.
#[test]
fn a_symbolic_axis_shrinks_to_numbers_within_its_bound_value() {
    let _serial = serial();
    for dev in devices() {
        let i = Variable::new("i", 1, 10);
        let ones = Tensor::ones(&[10]).to(dev).contiguous().realize();
        for s in [2usize, 5] {
            let ret = ones.shrink_sym(&[(Sint::Int(0), Sint::from(&i.bind(s)))]) + 1.0;
            let cut = ret.contiguous().shrink_sym(&[(Sint::Int(0), Sint::Int(s))]);
            assert_eq!((cut.shape(), cut.to_vec::<f32>()), (vec![s], vec![2.0; s]), "{dev}: {s}");
            let middle = ret.contiguous().shrink_sym(&[(Sint::Int(1), Sint::Int(2))]);
            assert_eq!(middle.to_vec::<f32>(), [2.0], "{dev}: {s}");
        }
        let past = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let part = ones.shrink_sym(&[(Sint::Int(0), Sint::from(&i.bind(3)))]);
            part.shrink_sym(&[(Sint::Int(0), Sint::Int(4))])
        }));
        assert!(past.is_err(), "{dev}: 4 elements of an axis bound to 3");
    }
}

/// argmax over an axis whose variable was bound to 0 returned an index into nothing: reducing it
/// is the error reducing an empty axis is; summing it gives the sum of nothing.
#[test]
fn an_axis_bound_to_zero_reduces_as_an_empty_one() {
    let _serial = serial();
    for dev in devices() {
        let x = ramp(5, dev);
        let n = Variable::new("n", 0, 5);
        let empty = x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(0)))]);
        assert_eq!(empty.sum(0, false).to_vec::<f32>(), [0.0], "{dev}");
        for (op, reduce) in
            [("argmax", Tensor::argmax as fn(&Tensor, Option<isize>, bool) -> Tensor), ("argmin", Tensor::argmin)]
        {
            let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reduce(&empty, Some(0), false)));
            let message = panic.expect_err(op).downcast_ref::<String>().cloned().unwrap_or_default();
            assert!(message.contains("size 0") && message.contains("bound to 0"), "{dev}: {message}");
        }
        let one = x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(1)))]);
        assert_eq!(one.argmax(Some(0), false).to_vec::<i32>(), [0], "{dev}: n = 1");
        let all = x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(5)))]);
        assert_eq!(all.argmax(Some(0), false).to_vec::<i32>(), [4], "{dev}: n = 5");
    }
}

/// tinygrad's `Tensor.empty(2, v, 4)`: a shape with an unbound variable is storage for its
/// largest size, and `shape` says that size (tinygrad's `max_shape`).
#[test]
fn an_empty_tensor_of_symbolic_shape_holds_its_largest() {
    let v = Variable::new("v", 1, 32);
    let t = Tensor::empty_sym(&[Sint::Int(2), Sint::from(&v), Sint::Int(4)], lazygrad::DType::FLOAT32);
    assert_eq!((t.shape(), t.numel()), (vec![2, 32, 4], 256));
    assert_eq!(t.dims()[1], Sint::from(&v));
    assert_eq!(Tensor::empty_sym(&[Sint::Int(2), Sint::Int(3)], lazygrad::DType::INT32).dims(), [2, 3].map(Sint::Int));
}

/// A kept reduction over a variable axis at most 1 wide was skipped as one over an axis of size
/// 1: bound to 0, the sum read back as nothing instead of zeros, and max as nothing instead of
/// its identity.
#[test]
fn a_kept_reduction_over_a_variable_axis_at_most_one_wide_reduces_it() {
    let _serial = serial();
    for dev in devices() {
        let x = ramp(2, dev).reshape(&[2, 1]);
        let n = Variable::new("n", 0, 1);
        let part = |len: usize| x.shrink_sym(&[(Sint::Int(0), Sint::Int(2)), (Sint::Int(0), Sint::from(&n.bind(len)))]);
        assert_eq!(part(0).sum(1, true).to_vec::<f32>(), [0.0, 0.0], "{dev}: n = 0");
        assert_eq!(part(1).sum(1, true).to_vec::<f32>(), [0.0, 1.0], "{dev}: n = 1");
        assert_eq!(part(1).max(1, true).to_vec::<f32>(), [0.0, 1.0], "{dev}: n = 1");
        // a max over nothing is its identity, as over an axis of size 0 (tinygrad's)
        assert_eq!(part(0).max(1, true).to_vec::<f32>(), [f32::NEG_INFINITY; 2], "{dev}: n = 0");
    }
}

/// `unsqueeze` went through a reshape, which cannot tell which axis of size 1 a variable axis at
/// most 1 wide went to: on `[1, n]` it moved the variable to the new axis. `squeeze` dropped it
/// as an axis of size 1 (bound to 0 it holds nothing).
#[test]
fn new_and_squeezed_axes_leave_a_variable_axis_where_it_is() {
    let _serial = serial();
    for dev in devices() {
        let x = Tensor::new([[5.0f32]]).to(dev).realize();
        let n = Variable::new("n", 0, 1);
        let part = |len: usize| x.shrink_sym(&[(Sint::Int(0), Sint::Int(1)), (Sint::Int(0), Sint::from(&n.bind(len)))]);
        let wide = part(0).unsqueeze(0);
        assert_eq!(wide.dims(), [Sint::Int(1), Sint::Int(1), Sint::from(&n.bind(0))], "{dev}");
        assert_eq!(wide.sum(2, true).to_vec::<f32>(), [0.0], "{dev}: n = 0");
        assert_eq!(part(1).unsqueeze(0).sum(2, true).to_vec::<f32>(), [5.0], "{dev}: n = 1");
        assert_eq!(part(0).squeeze(None).dims(), [Sint::from(&n.bind(0))], "{dev}");
        assert_eq!(part(0).squeeze(None).to_vec::<f32>(), [] as [f32; 0], "{dev}: n = 0");
        assert_eq!(part(1).squeeze(None).to_vec::<f32>(), [5.0], "{dev}: n = 1");
        // a reduction dropping its axis reshapes the rest the same way: [1, 1, n, 3] summed over 3
        let summed = wide.unsqueeze(3).expand_sym(&[Sint::Int(1), Sint::Int(1), Sint::from(&n.bind(0)), Sint::Int(3)]);
        assert_eq!(summed.sum(3, false).dims(), wide.dims(), "{dev}");
    }
}

/// A jitted function returning a tensor of variable shape could not be captured ("output of
/// shape [6] is not a realized buffer"), so every call after the first failed. Each replay's
/// output is read at that call's binding, from the largest to 0.
#[test]
fn a_jit_output_of_variable_shape_is_read_at_each_calls_binding() {
    let _serial = serial();
    for dev in devices() {
        let x = ramp(6, dev);
        let n = Variable::new("n", 0, 6);
        let mut jit = Jit::new(|inputs: &[Tensor]| {
            let len = Sint::from(&inputs[1].as_var().expect("a bound variable"));
            vec![inputs[0].shrink_sym(&[(Sint::Int(0), len)]) * 2.0]
        });
        for len in [1, 2, 6, 0, 3, 6] {
            let out = jit.call(&[x.clone(), Tensor::from_var(&n.bind(len))]).unwrap().remove(0);
            let want: Vec<f32> = (0..len).map(|i| 2.0 * i as f32).collect();
            assert_eq!(out.to_vec::<f32>(), want, "{dev}: n = {len}");
        }
    }
}

/// var and std over a variable axis divide by the bound count less the correction (they divided
/// by the largest size), and `tolist` nests at the bound sizes (it nested at the largest), with
/// the variable at its minimum (0 included) and maximum.
#[test]
fn var_std_and_tolist_over_a_variable_axis_use_the_bound_size() {
    let _serial = serial();
    for dev in devices() {
        let x = Tensor::from_vec((0..12).map(|i| (i * i) as f32).collect(), &[6, 2]).to(dev).realize();
        let n = Variable::new("n", 0, 6);
        for len in [0usize, 1, 2, 6] {
            let part = x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(len))), (Sint::Int(0), Sint::Int(2))]);
            let rows: Vec<[f64; 2]> =
                (0..len).map(|r| [(4 * r * r) as f64, ((2 * r + 1) * (2 * r + 1)) as f64]).collect();
            for col in 0..2 {
                let values: Vec<f64> = rows.iter().map(|r| r[col]).collect();
                let mean = values.iter().sum::<f64>() / len as f64;
                let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
                let var = squares / len.saturating_sub(1) as f64;
                let got = part.var(0, false, 1).to_vec::<f32>()[col] as f64;
                let same = (got.is_nan() && var.is_nan()) || (got - var).abs() <= 1e-4 * var.abs().max(1.0);
                assert!(same, "{dev} n = {len} column {col}: var {got}, want {var}");
                let std = part.std(0, false, 1).to_vec::<f32>()[col] as f64;
                assert!((std.is_nan() && var.is_nan()) || (std - var.sqrt()).abs() <= 1e-4 * var.sqrt().max(1.0));
            }
            let nested = (part * 1.0).tolist::<f32>();
            let lazygrad::tensor::Nested::List(got_rows) = nested else { panic!("{dev}: a list") };
            assert_eq!(got_rows.len(), len, "{dev}: tolist rows at n = {len}");
        }
    }
}

/// A permute that moves a variable axis at most 1 long is a permute: it was taken for a reshape
/// (only axes of size 1 move), which a variable axis refuses, so `t.T @ t` over rows `[0, i)`
/// with `i` in `0..=1` failed while `0..=5` worked. Bound at its min and max.
#[test]
fn a_variable_axis_at_most_one_long_permutes() {
    let _serial = serial();
    for dev in devices() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[1, 3]).to(dev).realize();
        let i = Variable::new("i", 0, 1);
        for (len, want) in [(0, vec![0.0f32; 9]), (1, vec![1.0, 2.0, 3.0, 2.0, 4.0, 6.0, 3.0, 6.0, 9.0])] {
            let rows = x.shrink_sym(&[(Sint::Int(0), Sint::from(&i.bind(len))), (Sint::Int(0), Sint::Int(3))]);
            let gram = rows.transpose(0, 1).matmul(&rows);
            assert_eq!(gram.to_vec::<f32>(), want, "{dev}: i = {len}");
        }
    }
}

/// A tensor of variable shape (a symbolic view of a buffer) is a JIT input, as in tinygrad: each
/// call replays at the length it is bound to, at the variable's min (0 included) and max. It was
/// refused as "not a realized buffer".
#[test]
fn a_jit_takes_an_input_of_variable_shape() {
    let _serial = serial();
    for dev in devices() {
        let data = Tensor::from_vec((0..12).map(|i| i as f32).collect(), &[4, 3]).to(dev).realize();
        let n = Variable::new("rows", 0, 4);
        let mut jit = Jit::new(|x: &[Tensor]| vec![(&x[0] * 2.0).sum(0, false)]);
        for len in [4usize, 0, 4, 1, 0, 3, 4] {
            let rows = data.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(len))), (Sint::Int(0), Sint::Int(3))]);
            let out = jit.call(&[rows.contiguous().realize()]).unwrap().remove(0).to_vec::<f32>();
            let want: Vec<f32> = (0..3).map(|c| (0..len).map(|r| 2.0 * (r * 3 + c) as f32).sum()).collect();
            assert_eq!(out, want, "{dev}: rows = {len}");
        }
    }
}
