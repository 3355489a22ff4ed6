//! Reduce folding (`codegen::fold`): sums over a range with a closed form lose their loop.
//! Hand-built kernels check each rule against a reference computed here, on CPU and INTERP (which
//! bounds-checks every load, so a selection with an out-of-range index must stay gated); tensor
//! graphs check the device-side arange (a padded window sum) and one-hot gathers built from it.

use std::sync::Arc;

use lazygrad::codegen::fold::pm_reduce_fold;
use lazygrad::codegen::get_program;
use lazygrad::dtype::{AddrSpace, Element};
use lazygrad::engine::get_runner;
use lazygrad::engine::ScheduleItem;
use lazygrad::runtime::{Buffer, DefaultDevice};
use lazygrad::uop::symbolic::symbolic;
use lazygrad::uop::{graph_rewrite, Arg, AxisKind, ConstValue, Kernel, Ops, UOp};
use lazygrad::{DType, Tensor};

const DEVICES: [&str; 2] = ["CPU", "INTERP"];

// ---------------------------------------------------------------------------------------------
// building kernels by hand

fn param(slot: i64, d: DType) -> UOp {
    UOp::new(Ops::Param, d.ptr(AddrSpace::Global), vec![], Arg::Int(slot))
}
fn range(id: usize, n: i64, kind: AxisKind) -> UOp {
    UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(n)], Arg::Range(id, kind))
}
fn idx(p: &UOp, i: &UOp) -> UOp {
    UOp::new(Ops::Index, p.dtype(), vec![p.clone(), i.clone()], Arg::None)
}
fn load(p: &UOp, i: &UOp) -> UOp {
    UOp::new(Ops::Load, p.dtype().base(), vec![idx(p, i)], Arg::None)
}
fn c(v: i64) -> UOp {
    UOp::index_const(v)
}
fn cf(v: f64) -> UOp {
    UOp::const_float(DType::FLOAT32, v)
}
fn add(a: &UOp, b: &UOp) -> UOp {
    a.alu(Ops::Add, &[b])
}
fn mul(a: &UOp, b: &UOp) -> UOp {
    a.alu(Ops::Mul, &[b])
}
fn lt(a: &UOp, b: &UOp) -> UOp {
    a.alu(Ops::CmpLt, &[b])
}
fn and(a: &UOp, b: &UOp) -> UOp {
    a.alu(Ops::And, &[b])
}
fn not(a: &UOp) -> UOp {
    a.alu(Ops::Neg, &[])
}
/// `a == b` as the tensor layer builds it: `!(a != b)`.
fn eq(a: &UOp, b: &UOp) -> UOp {
    not(&a.alu(Ops::CmpNe, &[b]))
}
fn sel(cond: &UOp, x: &UOp) -> UOp {
    UOp::where_(cond, x, &UOp::constant(x.dtype(), ConstValue::Int(0)))
}
fn reduce(op: Ops, v: &UOp, ranges: &[&UOp]) -> UOp {
    let mut src = vec![v.clone()];
    src.extend(ranges.iter().map(|r| (*r).clone()));
    UOp::new(Ops::Reduce, v.dtype(), src, Arg::Reduce(op))
}
fn sum(v: &UOp, ranges: &[&UOp]) -> UOp {
    reduce(Ops::Add, v, ranges)
}
/// `SINK(STORE(out[i], value))` with `out` PARAM 0.
fn kernel(i: &UOp, value: &UOp) -> Kernel {
    let store = UOp::new(Ops::Store, DType::VOID, vec![idx(&param(0, value.dtype()), i), value.clone()], Arg::None);
    Kernel::new(UOp::new(Ops::Sink, DType::VOID, vec![store], Arg::None), "the test").unwrap()
}

/// Input buffers' contents (PARAM 1, 2, ... in order).
enum Data {
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
}

fn bytes<T: Element>(v: &[T]) -> Vec<u8> {
    let mut out = vec![];
    v.iter().for_each(|x| x.write_le(&mut out));
    out
}

/// Runs `ast` on `device`, returning PARAM 0's `n` elements.
fn run<T: Element>(device: &str, ast: &Kernel, n: usize, inputs: &[Data]) -> Vec<T> {
    let out = Arc::new(Buffer::new(device, n, T::DTYPE));
    let mut bufs = vec![out.clone()];
    for d in inputs {
        let (b, len, dtype) = match d {
            Data::I32(v) => (bytes(v), v.len(), DType::INT32),
            Data::I64(v) => (bytes(v), v.len(), DType::INT64),
            Data::F32(v) => (bytes(v), v.len(), DType::FLOAT32),
        };
        let buf = Arc::new(Buffer::new(device, len, dtype));
        buf.copyin(&b).unwrap();
        bufs.push(buf);
    }
    get_runner(device, ast).unwrap().launch(&bufs, &[]).unwrap_or_else(|e| panic!("on {device}: {e}"));
    out.copyout().unwrap().chunks(T::DTYPE.itemsize()).map(T::read_le).collect()
}

/// How deeply the linearized program's loops nest.
fn loop_depth(ast: &Kernel) -> usize {
    let (mut depth, mut deepest) = (0, 0);
    for u in &get_program(ast, &lazygrad::renderer::listing::ListingRenderer).unwrap().uops {
        match u.op() {
            Ops::Range => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Ops::End => depth -= 1,
            _ => {}
        }
    }
    deepest
}

/// The reduce RANGEs still used after the symbolic and reduce-fold passes (before opts, which may
/// unroll small loops, so a test can tell "not folded" from "unrolled").
fn reduce_ranges_left(ast: &UOp) -> usize {
    let s = graph_rewrite(ast, symbolic(), &mut (), "symbolic", false);
    let f = graph_rewrite(&s, pm_reduce_fold(), &mut (), "reduce fold", false);
    f.toposort().iter().filter(|u| u.op() == Ops::Range && matches!(u.arg(), Arg::Range(_, AxisKind::Reduce))).count()
}

/// No reduce loop is left, and at most `out_dims` loops nest (the output's).
#[track_caller]
fn assert_folded(ast: &Kernel, out_dims: usize) {
    let spec = get_program(ast, &lazygrad::renderer::listing::ListingRenderer).unwrap();
    let reduce_ranges = spec.uops.iter().filter(|u| matches!(u.arg(), Arg::Range(_, AxisKind::Reduce))).count();
    assert_eq!(reduce_ranges, 0, "a reduce loop is left:\n{ast:?}");
    assert!(loop_depth(ast) <= out_dims, "nested loops are left:\n{ast:?}");
}

/// Deterministic pseudo-random values in `lo..hi`.
fn rand_ints(n: usize, lo: i64, hi: i64, seed: u64) -> Vec<i64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + ((s >> 33) % (hi - lo) as u64) as i64
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// rule 1: a range the value does not depend on

#[test]
fn unparented_ranges_become_a_multiply_or_vanish() {
    let (m, n, p) = (5, 4, 3);
    let i = range(0, m, AxisKind::Loop);
    let (k, j) = (range(1, n, AxisKind::Reduce), range(2, p, AxisKind::Reduce));
    let xs: Vec<f32> = (0..m).map(|v| v as f32 * 1.5 - 2.0).collect();
    let x = load(&param(1, DType::FLOAT32), &i);
    // Σ_k Σ_j x[i] = x[i]·n·p;  Σ_k Σ_j x[i]·j = x[i]·n·(0+1+2) keeps the j loop
    let both = kernel(&i, &sum(&x, &[&k, &j]));
    let partly = kernel(&i, &sum(&mul(&x, &j.cast(DType::FLOAT32)), &[&k, &j]));
    let maxed = kernel(&i, &reduce(Ops::Max, &x, &[&k, &j]));
    assert_folded(&both, 1);
    assert_folded(&maxed, 1);
    assert_eq!(reduce_ranges_left(&partly), 1, "the j loop stays, the k loop goes");
    for dev in DEVICES {
        let data = || vec![Data::F32(xs.clone())];
        let want: Vec<f32> = xs.iter().map(|x| x * (n * p) as f32).collect();
        assert_eq!(run::<f32>(dev, &both, m as usize, &data()), want, "on {dev}");
        let want: Vec<f32> = xs.iter().map(|x| x * n as f32 * 3.0).collect();
        assert_eq!(run::<f32>(dev, &partly, m as usize, &data()), want, "on {dev}");
        assert_eq!(run::<f32>(dev, &maxed, m as usize, &data()), xs, "on {dev}");
    }
}

// ---------------------------------------------------------------------------------------------
// rule 2: counting

#[test]
fn counting_with_constant_bounds_folds_to_index_arithmetic() {
    // out[i] = Σ_{k<8} (2 < i+k && i+k < 9 ? 3 : 0), the validity of a two-sided PAD
    let (m, n) = (10, 8);
    let i = range(0, m, AxisKind::Loop);
    let k = range(1, n, AxisKind::Reduce);
    let ik = add(&i, &k);
    let v = sel(&and(&lt(&c(2), &ik), &lt(&ik, &c(9))), &UOp::const_int(DType::INT32, 3));
    let ast = kernel(&i, &sum(&v, &[&k]));
    assert_folded(&ast, 1);
    let want: Vec<i32> = (0..m).map(|i| (0..n).filter(|k| 2 < i + k && i + k < 9).count() as i32 * 3).collect();
    for dev in DEVICES {
        assert_eq!(run::<i32>(dev, &ast, m as usize, &[]), want, "on {dev}");
    }
}

#[test]
fn counting_with_loaded_bounds_and_negations() {
    // bounds that are data: Σ_k [!(k < lo[i])] · [k - 1 < hi[i]] · 2.5, as cast(bool) * x and
    // with the comparison operands either way round
    let (m, n) = (16, 6);
    let i = range(0, m, AxisKind::Loop);
    let k = range(1, n, AxisKind::Reduce);
    let lo = load(&param(1, DType::INT32), &i);
    let hi = load(&param(2, DType::INT32), &i);
    let kk = k.cast(DType::INT32);
    let above = not(&lt(&kk, &lo));
    let below = lt(&add(&kk, &UOp::const_int(DType::INT32, -1)), &hi);
    let forms = [
        sel(&and(&above, &below), &cf(2.5)),
        mul(&and(&above, &below).cast(DType::FLOAT32), &cf(2.5)),
        mul(&cf(2.5), &sel(&above, &sel(&below, &cf(1.0)))),
    ];
    let los = rand_ints(m as usize, -3, 9, 1);
    let his = rand_ints(m as usize, -3, 9, 2);
    let want: Vec<f32> =
        los.iter().zip(&his).map(|(&l, &h)| (0..n).filter(|&k| k >= l && k - 1 < h).count() as f32 * 2.5).collect();
    for v in forms {
        let ast = kernel(&i, &sum(&v, &[&k]));
        assert_folded(&ast, 1);
        for dev in DEVICES {
            let data = [
                Data::I32(los.iter().map(|&v| v as i32).collect()),
                Data::I32(his.iter().map(|&v| v as i32).collect()),
            ];
            assert_eq!(run::<f32>(dev, &ast, m as usize, &data), want, "on {dev}:\n{ast:?}");
        }
    }
}

#[test]
fn counting_keeps_a_float_value_that_may_be_infinite_exact() {
    // Σ_k (k < e[i] ? x[i] : 0): with x = inf and no k below e, the sum is 0, not inf·0 = NaN
    let (m, n) = (4, 5);
    let i = range(0, m, AxisKind::Loop);
    let k = range(1, n, AxisKind::Reduce);
    let e = load(&param(1, DType::INT32), &i).cast(DType::INDEX);
    let x = load(&param(2, DType::FLOAT32), &i);
    let ast = kernel(&i, &sum(&sel(&lt(&k, &e), &x), &[&k]));
    assert_folded(&ast, 1);
    for dev in DEVICES {
        let data = [Data::I32(vec![0, 3, -2, 7]), Data::F32(vec![f32::INFINITY, f32::INFINITY, 2.0, 0.5])];
        assert_eq!(run::<f32>(dev, &ast, 4, &data), vec![0.0, f32::INFINITY, 0.0, 2.5], "on {dev}");
    }
}

#[test]
fn counting_inside_a_multi_range_reduce_keeps_the_other_range() {
    // out[i] = Σ_j Σ_k (k < j ? 1 : 0) · x[j] = Σ_j j·x[j]
    let (n, p) = (6, 7);
    let i = range(0, 2, AxisKind::Loop);
    let k = range(1, n, AxisKind::Reduce);
    let j = range(2, p, AxisKind::Reduce);
    let x = load(&param(1, DType::INT32), &j);
    let v = mul(&sel(&lt(&k, &j), &UOp::const_int(DType::INT32, 1)), &x);
    let ast = kernel(&i, &sum(&v, &[&k, &j]));
    assert_eq!(reduce_ranges_left(&ast), 1, "only the j loop remains");
    let xs: Vec<i32> = (0..p as i32).map(|v| v * 3 - 5).collect();
    let total: i32 = xs.iter().enumerate().map(|(j, x)| j.min(n as usize) as i32 * x).sum();
    for dev in DEVICES {
        assert_eq!(run::<i32>(dev, &ast, 2, &[Data::I32(xs.clone())]), vec![total; 2], "on {dev}");
    }
}

// ---------------------------------------------------------------------------------------------
// rule 3: selection

#[test]
fn selection_becomes_a_gated_load_in_every_equality_form() {
    // out[i] = Σ_k (k + 2 == e[i] ? x[k] : 0) = x[e[i] - 2] when 0 <= e[i] - 2 < n
    let (m, n) = (24, 8);
    let i = range(0, m, AxisKind::Loop);
    let k = range(1, n, AxisKind::Reduce);
    let e = load(&param(1, DType::INT32), &i);
    let x = load(&param(2, DType::FLOAT32), &k);
    let k2 = add(&k.cast(DType::INT32), &UOp::const_int(DType::INT32, 2));
    let forms = [
        sel(&eq(&k2, &e), &x),
        sel(&eq(&e, &k2), &x),
        sel(&k2.alu(Ops::CmpEq, &[&e]), &x),
        UOp::where_(&k2.alu(Ops::CmpNe, &[&e]), &cf(0.0), &x),
        mul(&eq(&k2, &e).cast(DType::FLOAT32), &x.cast(DType::INT32).cast(DType::FLOAT32)),
    ];
    let es: Vec<i32> = rand_ints(m as usize, -20, 20, 3).into_iter().map(|v| v as i32).collect();
    let xs: Vec<f32> = (0..n).map(|v| v as f32 * 10.0 + 1.0).collect();
    let want: Vec<f32> =
        es.iter().map(|&e| if (2..n as i32 + 2).contains(&e) { xs[e as usize - 2] } else { 0.0 }).collect();
    for v in forms {
        let ast = kernel(&i, &sum(&v, &[&k]));
        assert_folded(&ast, 1);
        for dev in DEVICES {
            assert_eq!(
                run::<f32>(dev, &ast, m as usize, &[Data::I32(es.clone()), Data::F32(xs.clone())]),
                want,
                "on {dev}"
            );
        }
    }
}

#[test]
fn selection_of_rows_with_extra_conditions_gates_every_dependent_load() {
    // out[i, j] = Σ_k (k == e[i] && mask[k] > 0 ? w[k, j] : 0): an embedding lookup whose rows
    // can be masked; the mask load depends on k too and must be gated as well
    let (m, n, d) = (12, 5, 3);
    let i = range(0, m, AxisKind::Loop);
    let j = range(1, d, AxisKind::Loop);
    let k = range(2, n, AxisKind::Reduce);
    let e = load(&param(1, DType::INT32), &i).cast(DType::INDEX);
    let mask = load(&param(2, DType::INT32), &k);
    let w = load(&param(3, DType::FLOAT32), &add(&mul(&k, &c(d)), &j));
    let cond = and(&eq(&k, &e), &lt(&UOp::const_int(DType::INT32, 0), &mask));
    let out = add(&mul(&i, &c(d)), &j);
    let ast = kernel(&out, &sum(&sel(&cond, &w), &[&k]));
    assert_folded(&ast, 2);
    let es: Vec<i32> = rand_ints(m as usize, -4, 9, 4).into_iter().map(|v| v as i32).collect();
    let masks = vec![1, 0, 1, 1, 0];
    let ws: Vec<f32> = (0..n * d).map(|v| v as f32 - 0.5).collect();
    let mut want = vec![];
    for &e in &es {
        for j in 0..d {
            let ok = (0..n as i32).contains(&e) && masks[e as usize] > 0;
            want.push(if ok { ws[(e as i64 * d + j) as usize] } else { 0.0 });
        }
    }
    for dev in DEVICES {
        let data = [Data::I32(es.clone()), Data::I32(masks.clone()), Data::F32(ws.clone())];
        assert_eq!(run::<f32>(dev, &ast, (m * d) as usize, &data), want, "on {dev}");
    }
}

#[test]
fn selection_with_64_bit_indices_clamps_instead_of_gating() {
    // e is any i64, so e·d could wrap: the selection substitutes a clamped index instead
    let (m, n, d) = (8, 5, 4);
    let i = range(0, m, AxisKind::Loop);
    let j = range(1, d, AxisKind::Loop);
    let k = range(2, n, AxisKind::Reduce);
    let e = load(&param(1, DType::INT64), &i);
    let w = load(&param(2, DType::FLOAT32), &add(&mul(&k, &c(d)), &j));
    let out = add(&mul(&i, &c(d)), &j);
    let ast = kernel(&out, &sum(&sel(&eq(&k.cast(DType::INT64), &e), &w), &[&k]));
    assert_folded(&ast, 2);
    let es = vec![0, 4, 5, -1, i64::MIN, i64::MAX, 2, 1 << 62];
    let ws: Vec<f32> = (0..n * d).map(|v| v as f32 * 0.25).collect();
    let mut want = vec![];
    for &e in &es {
        for j in 0..d {
            want.push(if (0..n).contains(&e) { ws[(e * d + j) as usize] } else { 0.0 });
        }
    }
    for dev in DEVICES {
        assert_eq!(
            run::<f32>(dev, &ast, (m * d) as usize, &[Data::I64(es.clone()), Data::F32(ws.clone())]),
            want,
            "on {dev}"
        );
    }
}

#[test]
fn non_unit_coefficients_and_float_comparisons_are_left_alone() {
    let i = range(0, 4, AxisKind::Loop);
    let k = range(1, 6, AxisKind::Reduce);
    let e = load(&param(1, DType::INT32), &i).cast(DType::INDEX);
    // 2k == e has no ±1 coefficient; a float equality is not read as an integer one
    let twice = kernel(&i, &sum(&sel(&eq(&mul(&k, &c(2)), &e), &cf(1.0)), &[&k]));
    let float = kernel(&i, &sum(&sel(&eq(&k.cast(DType::FLOAT32), &e.cast(DType::FLOAT32)), &cf(1.0)), &[&k]));
    for ast in [&twice, &float] {
        assert_eq!(reduce_ranges_left(ast), 1, "folded unexpectedly:\n{ast:?}");
    }
    for dev in DEVICES {
        let data = || [Data::I32(vec![4, 3, -2, 10])];
        assert_eq!(run::<f32>(dev, &twice, 4, &data()), vec![1.0, 0.0, 0.0, 1.0], "on {dev}");
        assert_eq!(run::<f32>(dev, &float, 4, &data()), vec![1.0, 1.0, 0.0, 0.0], "on {dev}");
    }
}

// ---------------------------------------------------------------------------------------------
// tensors: arange as a padded window sum, one-hot gathers built from it

/// `out[..., i] = Σ_{k<w} p[..., i + k]` for `i < L - w + 1`, with reshape/expand/shrink only:
/// repeat `p` `o + 1` times, flatten, and read rows of `L + 1`: row i starts at `p[i]`.
fn window_sum(p: &Tensor, w: usize) -> Tensor {
    let sh = p.shape();
    let (lead, l) = (&sh[..sh.len() - 1], sh[sh.len() - 1]);
    let o = l - w + 1;
    let dims = |tail: &[usize]| -> Vec<usize> { lead.iter().chain(tail).copied().collect() };
    let keep = |tail: &[(usize, usize)]| -> Vec<(usize, usize)> {
        lead.iter().map(|&d| (0, d)).chain(tail.iter().copied()).collect()
    };
    p.reshape(&dims(&[1, l]))
        .expand(&dims(&[o + 1, l]))
        .reshape(&dims(&[(o + 1) * l]))
        .shrink(&keep(&[(0, o * (l + 1))]))
        .reshape(&dims(&[o, l + 1]))
        .shrink(&keep(&[(0, o), (0, w)]))
        .sum(-1isize, false)
}

/// `0, 1, ..., n-1` in every row of a `lead + [n]` tensor, computed on the device as tinygrad
/// does: the cumulative sum of ones (a window sum of ones padded with n-1 zeros in front), - 1.
fn device_arange(lead: &[usize], n: usize, dtype: DType) -> Tensor {
    let shape: Vec<usize> = lead.iter().copied().chain([n]).collect();
    let pads: Vec<(usize, usize)> = lead.iter().map(|_| (0, 0)).chain([(n - 1, 0)]).collect();
    window_sum(&Tensor::full_dtype(&shape, 1, dtype).pad(&pads), n) - 1
}

fn kernels(t: &Tensor) -> Vec<Kernel> {
    Tensor::schedule(std::slice::from_ref(t))
        .into_iter()
        .filter_map(|it| match it {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            _ => None,
        })
        .collect()
}

#[test]
fn device_arange_folds_to_the_loop_index() {
    for dev in DEVICES {
        let _g = DefaultDevice::scoped(dev);
        for n in [2, 7, 16] {
            let ar = device_arange(&[], n, DType::INT32) + 1;
            let ks = kernels(&ar);
            assert_eq!(ks.len(), 1);
            assert_folded(&ks[0], 1);
            assert_eq!(ar.to_vec::<i32>(), (1..=n as i32).collect::<Vec<_>>(), "n={n} on {dev}");
            let arf = window_sum(&Tensor::ones(&[n]).pad(&[(n - 1, 0)]), n);
            assert_folded(&kernels(&arf)[0], 1);
            assert_eq!(arf.to_vec::<f32>(), (1..=n).map(|v| v as f32).collect::<Vec<_>>(), "n={n} on {dev}");
        }
    }
}

#[test]
fn window_sums_of_padded_ones_count_the_valid_positions() {
    for dev in DEVICES {
        let _g = DefaultDevice::scoped(dev);
        for (len, before, after, w) in [(5, 2, 3, 4), (3, 0, 6, 3), (4, 5, 0, 2), (6, 1, 1, 8), (2, 4, 4, 9)] {
            let s = window_sum(&Tensor::full_dtype(&[len], 1, DType::INT32).pad(&[(before, after)]), w);
            assert_folded(&kernels(&s)[0], 1);
            let total = before + len + after;
            let want: Vec<i32> = (0..total - w + 1)
                .map(|i| (i..i + w).filter(|&p| p >= before && p < before + len).count() as i32)
                .collect();
            assert_eq!(s.to_vec::<i32>(), want, "len {len} pad ({before}, {after}) window {w} on {dev}");
        }
    }
}

#[test]
fn one_hot_gather_from_a_device_arange_is_one_gated_load() {
    let (m, n) = (10, 8);
    let ids = vec![3, 0, 7, 9, -1, 5, 7, 2, 8, -8];
    let xs: Vec<f32> = (0..n).map(|v| v as f32 * 10.0 + 0.5).collect();
    let want: Vec<f32> = ids.iter().map(|&e| if (0..n as i32).contains(&e) { xs[e as usize] } else { 0.0 }).collect();
    for dev in DEVICES {
        let _g = DefaultDevice::scoped(dev);
        let x = Tensor::from_vec(xs.clone(), &[n]);
        let idx = Tensor::from_vec(ids.clone(), &[m]);
        // the arange is built per row, so no reduce is broadcast and everything is one kernel
        let ar = device_arange(&[m], n, DType::INT32);
        let g = idx.unsqueeze(-1).eq(&ar).where_(x.unsqueeze(0).expand(&[m, n]), 0.0).sum(-1isize, false);
        let ks = kernels(&g);
        assert_eq!(ks.len(), 1);
        assert_folded(&ks[0], 1);
        assert_eq!(g.to_vec::<f32>(), want, "on {dev}");
        // the count of matches (one_hot summed) is the in-range test
        let hits = idx.unsqueeze(-1).eq(&ar).cast(DType::INT32).sum(-1isize, false);
        assert_folded(&kernels(&hits)[0], 1);
        let want_hits: Vec<i32> = ids.iter().map(|&e| (0..n as i32).contains(&e) as i32).collect();
        assert_eq!(hits.to_vec::<i32>(), want_hits, "on {dev}");
        // in range, it is what gather computes
        let ok = Tensor::from_vec(vec![3, 0, 7, 1, 5, 5, 7, 2, 6, 4], &[m]);
        let g2 = ok.unsqueeze(-1).eq(&ar).where_(x.unsqueeze(0).expand(&[m, n]), 0.0).sum(-1isize, false);
        assert_eq!(g2.to_vec::<f32>(), x.gather(0, &ok).to_vec::<f32>(), "on {dev}");
    }
}

#[test]
fn one_hot_row_gather_with_int64_indices() {
    // embedding lookup: out[i, j] = w[idx[i], j] through a one-hot over the rows
    let (m, n, d) = (6, 5, 3);
    let ids: Vec<i64> = vec![4, 0, 2, 5, -1, 1];
    let ws: Vec<f32> = (0..n * d).map(|v| v as f32).collect();
    for dev in DEVICES {
        let _g = DefaultDevice::scoped(dev);
        let w = Tensor::from_vec(ws.clone(), &[n, d]);
        let idx = Tensor::from_vec(ids.clone(), &[m]);
        // an arange broadcast after its reduce would be stored by its own kernel: build it in
        // the full [m, n, d] shape instead (along the last axis, then permuted)
        let ar = device_arange(&[m, d], n, DType::INT32).permute(&[0, 2, 1]);
        let mask = idx.reshape(&[m, 1, 1]).eq(&ar);
        let g = mask.where_(w.unsqueeze(0).expand(&[m, n, d]), 0.0).sum(1isize, false);
        let ks = kernels(&g);
        assert_eq!(ks.len(), 1);
        assert_folded(&ks[0], 2);
        let mut want = vec![];
        for &e in &ids {
            want.extend((0..d).map(|j| if (0..n as i64).contains(&e) { ws[e as usize * d + j] } else { 0.0 }));
        }
        assert_eq!(g.to_vec::<f32>(), want, "on {dev}");
    }
}

#[test]
fn one_hot_gather_of_int8_values_sums_in_int32() {
    // sum casts int8 to its int32 accumulator: the value is CAST(WHERE(eq, x, 0))
    let (m, n) = (5, 6);
    let ids = vec![5, -3, 0, 6, 2];
    let xs: Vec<i8> = vec![-7, 3, 100, -128, 9, 127];
    for dev in DEVICES {
        let _g = DefaultDevice::scoped(dev);
        let x = Tensor::from_vec(xs.clone(), &[n]);
        let idx = Tensor::from_vec(ids.clone(), &[m]);
        let ar = device_arange(&[m], n, DType::INT32);
        let g = idx.unsqueeze(-1).eq(&ar).where_(x.unsqueeze(0).expand(&[m, n]), 0).sum(-1isize, false);
        assert_folded(&kernels(&g)[0], 1);
        let want: Vec<i32> =
            ids.iter().map(|&e| if (0..n as i32).contains(&e) { xs[e as usize] as i32 } else { 0 }).collect();
        assert_eq!(g.to_vec::<i32>(), want, "on {dev}");
    }
}

#[test]
fn an_embedding_lookup_is_one_gather_kernel_without_arithmetic() {
    // tinygrad's Embedding: Σ_rows where(row == idx, weight, 0), folded to weight[idx] gated by
    // 0 <= idx < vocab (tinygrad's test_embedding_one_kernel_fused_noopt counts 0 ops)
    let (vocab, dim) = (5, 3);
    let ws: Vec<f32> = (0..vocab * dim).map(|v| v as f32 * 0.5 - 2.0).collect();
    let ids = [[4, 0, 7], [-1, 2, 4]];
    let row = |e: i32| {
        (0..dim)
            .map(move |j| if (0..vocab as i32).contains(&e) { (e as usize * dim + j) as f32 * 0.5 - 2.0 } else { 0.0 })
    };
    let want: Vec<f32> = ids.iter().flatten().flat_map(|&e| row(e)).collect();
    for dev in DEVICES {
        let _g = DefaultDevice::scoped(dev);
        let _noopt = lazygrad::Context::new(&[("NOOPT", 1)]);
        let table = lazygrad::nn::layers::Embedding { weight: Tensor::from_vec(ws.clone(), &[vocab, dim]).realize() };
        let rows = table.forward(&Tensor::new(ids).realize());
        let ks = kernels(&rows);
        assert_eq!(ks.len(), 1, "on {dev}");
        assert_folded(&ks[0], 3);
        let spec = get_program(&ks[0], &lazygrad::renderer::listing::ListingRenderer).unwrap();
        assert_eq!(spec.ops, 0, "on {dev}:\n{}", spec.src);
        assert_eq!(rows.to_vec::<f32>(), want, "on {dev}");
    }
}
