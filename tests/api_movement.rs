//! Movement and indexing API: exact values on CPU and INTERP (identical results asserted), including
//! negative steps and indices, size-1 and size-0 dims, and non-contiguous (permuted) inputs.

use lazygrad::dtype::Element;
use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::{Idx, PadMode};
use lazygrad::{s, DType, Tensor};

/// Build with `f` on CPU and on INTERP; assert both agree and return (shape, data).
fn both<T: Element + PartialEq>(f: impl Fn() -> Tensor) -> (Vec<usize>, Vec<T>) {
    let mut out = vec![];
    for dev in ["CPU", "INTERP"] {
        let _g = DefaultDevice::scoped(dev);
        let t = f();
        let shape = t.shape();
        out.push((shape, t.to_vec::<T>()));
    }
    assert_eq!(out[0], out[1], "CPU and INTERP differ");
    out.swap_remove(0)
}

/// Assert `f` gives `shape` and `want` (int32) on both devices.
#[track_caller]
fn check(f: impl Fn() -> Tensor, shape: &[usize], want: &[i32]) {
    assert_eq!(both::<i32>(f), (shape.to_vec(), want.to_vec()));
}
#[track_caller]
fn check_f(f: impl Fn() -> Tensor, shape: &[usize], want: &[f32]) {
    assert_eq!(both::<f32>(f), (shape.to_vec(), want.to_vec()));
}
#[track_caller]
fn check_b(f: impl Fn() -> Tensor, shape: &[usize], want: &[bool]) {
    assert_eq!(both::<bool>(f), (shape.to_vec(), want.to_vec()));
}

/// Row-major values of `shape` from `f(multi_index)`: the reference computations.
fn grid(shape: &[usize], f: impl Fn(&[usize]) -> i32) -> Vec<i32> {
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut flat| {
            let mut idx = vec![0; shape.len()];
            for d in (0..shape.len()).rev() {
                (idx[d], flat) = (flat % shape[d], flat / shape[d]);
            }
            f(&idx)
        })
        .collect()
}

fn ar(shape: &[usize]) -> Tensor {
    Tensor::arange(shape.iter().product()).reshape(shape)
}
/// A non-contiguous view: `arange(24).reshape(2,3,4).permute(2,0,1)`, shape (4,2,3), `p[i,j,k] = 12j+4k+i`.
fn perm() -> Tensor {
    ar(&[2, 3, 4]).permute(&[2, 0, 1])
}
fn pv(i: &[usize]) -> i32 {
    (12 * i[1] + 4 * i[2] + i[0]) as i32
}

#[test]
fn reshape_unflatten_and_try_reshape() {
    check(|| perm().reshape(&[-1, 6]).unflatten(1, &[2, -1]), &[4, 2, 3], &grid(&[4, 2, 3], pv));
    check(|| ar(&[6]).unflatten(-1, &[1, 3, 2]).squeeze(Some(0)), &[3, 2], &[0, 1, 2, 3, 4, 5]);
    let t = ar(&[2, 3]);
    assert!(
        matches!(t.try_reshape(&[4, 2]), Err(lazygrad::Error::Shape { op: "reshape", shapes, .. }) if shapes == [[2, 3]])
    );
    assert!(t.try_reshape(&[-1, -1]).is_err());
    assert!(t.try_reshape(&[4, -1]).is_err());
    assert_eq!(t.try_reshape(&[3, -1]).unwrap().shape(), vec![3, 2]);
    assert_eq!(ar(&[0, 3]).reshape(&[3, 0, 5]).shape(), vec![3, 0, 5]);
}

/// Reference for every pad mode: output position `p` reads input `p - before`, mapped into range by `mode`
/// (circular crops negative pads first, as tinygrad and torch do).
fn pad_ref(x: &[i32], n: usize, (b, a): (isize, isize), mode: PadMode, value: i32) -> Vec<i32> {
    if mode == PadMode::Circular && (b < 0 || a < 0) {
        let c = &x[(-b).max(0) as usize..(n as isize + a.min(0)) as usize];
        return pad_ref(c, c.len(), (b.max(0), a.max(0)), mode, value);
    }
    let n = n as isize;
    (0..n + b + a)
        .map(|p| {
            let i = p - b;
            let j = match mode {
                _ if (0..n).contains(&i) => i,
                PadMode::Constant => return value,
                PadMode::Reflect if i < 0 => -i,
                PadMode::Reflect => 2 * (n - 1) - i,
                PadMode::Replicate => i.clamp(0, n - 1),
                PadMode::Circular => i.rem_euclid(n),
            };
            x[j as usize]
        })
        .collect()
}

#[test]
fn pad_modes() {
    let x: Vec<i32> = (0..5).map(|i| i * i).collect();
    for mode in [PadMode::Constant, PadMode::Reflect, PadMode::Replicate, PadMode::Circular] {
        let crop_only = if mode == PadMode::Constant { Some((-2, -1)) } else { None };
        for pads in [(2, 3), (0, 4), (-1, 2), (3, -2)].into_iter().chain(crop_only) {
            let want = pad_ref(&x, 5, pads, mode, 7);
            let xs = x.clone();
            check(|| Tensor::new(xs.clone()).pad_with(&[pads], mode, 7), &[want.len()], &want);
        }
    }
    // 2-D, permuted input: each axis padded independently; float fill value
    let rows = pad_ref(&[0, 1, 2], 3, (1, 2), PadMode::Reflect, 0);
    let cols = pad_ref(&[0, 1], 2, (-1, 1), PadMode::Reflect, 0);
    let want = grid(&[6, 2], |i| 3 * cols[i[1]] + rows[i[0]]);
    let base = || ar(&[2, 3]).T();
    check(|| base().pad_with(&[(1, 2), (-1, 1)], PadMode::Reflect, 0), &[6, 2], &want);
    let circ = grid(&[5, 4], |i| 3 * [1, 0, 1, 0][i[1]] + [2, 0, 1, 2, 0][i[0]]);
    check(|| base().pad_with(&[(1, 1), (1, 1)], PadMode::Circular, 0), &[5, 4], &circ);
    check_f(
        || ar(&[2, 1]).cast(DType::FLOAT32).pad_with(&[(0, 1), (1, 0)], PadMode::Constant, -1.5),
        &[3, 2],
        &[-1.5, 0.0, -1.5, 1.0, -1.5, -1.5],
    );
    check(|| ar(&[2]).pad_with(&[(1, 0)], PadMode::Constant, 0), &[3], &[0, 0, 1]);
    check(|| ar(&[2]).pad(&[(1, 0)]), &[3], &[0, 0, 1]);
    check_b(|| Tensor::new([true]).pad_with(&[(1, 1)], PadMode::Replicate, false), &[3], &[true; 3]);
    // size-0 axis: a constant pad can grow it; a circular pad of nothing stays empty
    check(|| ar(&[0, 2]).pad_with(&[(1, 0), (0, 0)], PadMode::Constant, 3), &[1, 2], &[3, 3]);
    check(|| ar(&[0, 2]).pad_with(&[(0, 0), (1, 1)], PadMode::Circular, 0), &[0, 4], &[]);
}

#[test]
#[should_panic(expected = "cat: shapes differ outside axis 0 (shapes [2, 2], [2, 3])")]
fn cat_mismatch_panics_with_shapes() {
    Tensor::cat(&[&ar(&[2, 2]), &ar(&[2, 3])], 0);
}

#[test]
#[should_panic(expected = "gather: the index's shape does not fit the tensor's outside axis 1 (shapes [2, 2], [3, 1])")]
fn gather_mismatch_panics_with_shapes() {
    ar(&[2, 2]).gather(1, &Tensor::new([[0], [1], [0]]));
}

#[test]
#[should_panic(expected = "index: index 2 out of bounds for axis 1 of size 2 (shape [3, 2])")]
fn index_out_of_bounds_panics_with_shape() {
    ar(&[3, 2]).index(&s![.., 2]);
}

#[test]
#[should_panic(expected = "reflect pads")]
fn pad_reflect_too_large_panics() {
    ar(&[3]).pad_with(&[(3, 0)], PadMode::Reflect, 0);
}

#[test]
fn index_slices_1d() {
    let cases: Vec<([Idx; 1], Vec<i32>)> = vec![
        (s![..], (0..7).collect()),
        (s![2..5], vec![2, 3, 4]),
        (s![-3..], vec![4, 5, 6]),
        (s![..-2], vec![0, 1, 2, 3, 4]),
        (s![1..;2], vec![1, 3, 5]),
        (s![..;3], vec![0, 3, 6]),
        (s![..;-1], vec![6, 5, 4, 3, 2, 1, 0]),
        (s![..;-2], vec![6, 4, 2, 0]),
        (s![5..1;-1], vec![5, 4, 3, 2]),
        (s![-1..-5;-2], vec![6, 4]),
        (s![-2..;-3], vec![5, 2]),
        (s![6..0;-4], vec![6, 2]),
        (s![-100..3], vec![0, 1, 2]),
        (s![..100;4], vec![0, 4]),
        (s![2..=4], vec![2, 3, 4]),
        (s![..=-1], (0..7).collect()),
        (s![5..1], vec![]),
        (s![1..5;-1], vec![]),
        (s![10..], vec![]),
        (s![4..2;2], vec![]),
        (s![..;10], vec![0]),
    ];
    for (idx, want) in cases {
        check(|| ar(&[7]).index(&idx), &[want.len()], &want);
    }
    check(|| ar(&[7]).index(&s![-1]), &[], &[6]);
    check(|| ar(&[7]).index(&s![0]), &[], &[0]);
    check(|| ar(&[1]).index(&s![..;-1]), &[1], &[0]);
    check(|| Tensor::new(5).index(&s![Idx::NewAxis, Idx::Ellipsis]), &[1], &[5]);
    check(|| Tensor::new(5).set(&[], 6), &[], &[6]);
}

#[test]
fn index_nd_basic() {
    let t = || ar(&[3, 4]);
    check(|| t().index(&s![1]), &[4], &[4, 5, 6, 7]);
    check(|| t().index(&s![.., -1]), &[3], &[3, 7, 11]);
    check(|| t().index(&s![..;-1, 1..;2]), &[3, 2], &[9, 11, 5, 7, 1, 3]);
    check(|| t().index(&s![Idx::NewAxis, .., Idx::NewAxis, 0]), &[1, 3, 1], &[0, 4, 8]);
    check(|| t().index(&s![Idx::Ellipsis, 2]), &[3], &[2, 6, 10]);
    check(|| t().index(&s![-1, Idx::Ellipsis]), &[4], &[8, 9, 10, 11]);
    check(|| t().index(&s![2, 3]), &[], &[11]);
    check(|| t().index(&s![1..1]), &[0, 4], &[]);
    check(|| t().index(&[]), &[3, 4], &(0..12).collect::<Vec<_>>());
    check(|| ar(&[3, 1]).index(&s![.., 0]), &[3], &[0, 1, 2]);
    // permuted input: i in {1,3}, j = 1, k reversed
    check(|| perm().index(&s![1..;2, -1, ..;-1]), &[2, 3], &[21, 17, 13, 23, 19, 15]);
    check(
        || perm().index(&s![Idx::Ellipsis, Idx::NewAxis, 1..]),
        &[4, 2, 1, 2],
        &grid(&[4, 2, 1, 2], |i| pv(&[i[0], i[1], i[3] + 1])),
    );
}

#[test]
fn index_errors() {
    let t = ar(&[3, 4]);
    let err = |idx: &[Idx]| match t.try_index(idx) {
        Err(e @ (lazygrad::Error::Index { op: "index", .. } | lazygrad::Error::Value { op: "index", .. })) => {
            e.to_string()
        }
        other => panic!("expected an error, got {other:?}"),
    };
    assert!(err(&s![3]).contains("out of bounds"));
    assert!(err(&s![.., -5]).contains("out of bounds"));
    assert!(err(&s![..;0]).contains("step of 0"));
    assert!(err(&s![0, 0, 0]).contains("3 indices"));
    assert!(err(&[Idx::Ellipsis, Idx::Ellipsis]).contains("single ellipsis"));
    assert!(err(&s![Tensor::new([0.5f32])]).contains("must be int tensors"));
    assert!(err(&s![Tensor::new([0, 1]), Tensor::new([0, 1, 2])]).contains("do not broadcast"));
    assert!(t.try_index(&s![Idx::NewAxis, 0, 0, Idx::NewAxis]).is_ok());
}

#[test]
fn index_with_tensors() {
    let t = || ar(&[3, 4]);
    let rows = [8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11];
    check(|| t().index(&s![Tensor::new([2, 0, -1])]), &[3, 4], &rows);
    check(|| t().index(&s![Tensor::new([2, 0, 1]), Tensor::new([1, 2, 3])]), &[3], &[9, 2, 7]);
    check(|| t().index(&s![.., Tensor::new([3i64, 0])]), &[3, 2], &[3, 0, 7, 4, 11, 8]);
    check(|| t().index(&s![Tensor::new([[0], [2]]), Tensor::new([1, 3])]), &[2, 2], &[1, 3, 9, 11]);
    // non-contiguous index tensor: [[0,2],[1,0]]
    check(|| t().index(&s![1, Tensor::new([[0, 1], [2, 0]]).T()]), &[2, 2], &[4, 6, 5, 4]);
    // out-of-range indices are an error, as in PyTorch
    for bad in [[4, 1], [-4, 1]] {
        let err = ar(&[3]).try_index(&s![Tensor::new(bad)]).expect_err("out of range");
        assert!(err.to_string().contains(&format!("index: index {} is out of range -3..3", bad[0])), "{err}");
    }
    // separated tensor indices at axis 0: no reordering
    check(|| ar(&[2, 3, 4]).index(&s![Tensor::new([0, 1]), .., Tensor::new([3, 0])]), &[2, 3], &[3, 7, 11, 12, 16, 20]);
    // separated tensor indices after a slice: the index axis moves to the front (numpy's rule)
    let (i0, i1) = ([0i32, 1], [3i32, 0]);
    let want = grid(&[2, 2, 3], |i| 24 * i[1] as i32 + 12 * i0[i[0]] + 4 * i[2] as i32 + i1[i[0]]);
    check(|| ar(&[2, 2, 3, 4]).index(&s![.., Tensor::new(i0), .., Tensor::new(i1)]), &[2, 2, 3], &want);
    // permuted input, a tensor index between a full axis and a stepped one
    let idx = [1i32, 0, 1];
    check(
        || perm().index(&s![.., Tensor::new(idx), ..;2]),
        &[4, 3, 2],
        &grid(&[4, 3, 2], |i| pv(&[i[0], idx[i[1]] as usize, 2 * i[2]])),
    );
    check_f(|| Tensor::new([1.5f32, -2.0, 4.0]).index(&s![Tensor::new([2, 2, 0])]), &[3], &[4.0, 4.0, 1.5]);
    check(|| t().index(&s![Tensor::new([0i32; 0])]), &[0, 4], &[]);
}

#[test]
fn set_basic() {
    let t = || ar(&[3, 4]);
    check(|| t().set(&s![1, ..;2], -1), &[3, 4], &[0, 1, 2, 3, -1, 5, -1, 7, 8, 9, 10, 11]);
    check(
        || t().set(&s![..;-1, 3], Tensor::new([100, 200, 300])),
        &[3, 4],
        &[0, 1, 2, 300, 4, 5, 6, 200, 8, 9, 10, 100],
    );
    check(
        || t().set(&s![Idx::NewAxis, 1..3, 1..3], Tensor::new([[7, 8]])),
        &[3, 4],
        &[0, 1, 2, 3, 4, 7, 8, 7, 8, 7, 8, 11],
    );
    check(|| ar(&[7]).set(&s![..;-3], Tensor::new([10, 20, 30])), &[7], &[30, 1, 2, 20, 4, 5, 10]);
    check(|| ar(&[5]).set(&s![2..4;3], 9), &[5], &[0, 1, 9, 3, 4]);
    check(|| ar(&[3]).set(&s![1..1], 5), &[3], &[0, 1, 2]);
    check(|| ar(&[2, 2]).set(&s![-1, -1], Tensor::new([[[9]]])), &[2, 2], &[0, 1, 2, 9]);
    let want = grid(&[4, 2, 3], |i| if i[0] == 0 && i[2] == 1 { -5 - i[1] as i32 } else { pv(i) });
    check(|| perm().set(&s![0, .., 1], Tensor::new([-5, -6])), &[4, 2, 3], &want);
    check_f(|| Tensor::ones(&[2, 2]).set(&s![.., 0], 2.5), &[2, 2], &[2.5, 1.0, 2.5, 1.0]);
    assert!(ar(&[2, 3]).try_set(&s![0], Tensor::new([1, 2])).is_err());
}

#[test]
fn set_with_tensors() {
    // duplicate index 4: the last value wins
    check(|| ar(&[5]).set(&s![Tensor::new([4, 0, 4])], Tensor::new([7, 8, 9])), &[5], &[8, 1, 2, 3, 9]);
    check(|| ar(&[5]).set(&s![Tensor::new([-1, 1])], 0), &[5], &[0, 0, 2, 3, 0]);
    check(
        || ar(&[3, 4]).set(&s![Tensor::new([2, 0]), 1..3], Tensor::new([[-1, -2], [-3, -4]])),
        &[3, 4],
        &[0, -3, -4, 3, 4, 5, 6, 7, 8, -1, -2, 11],
    );
    let want = grid(&[4, 2, 3], |i| if i[1] == 1 && [(3, 0), (0, 1)].contains(&(i[0], i[2])) { 50 } else { pv(i) });
    check(|| perm().set(&s![Tensor::new([3, 0]), 1, Tensor::new([0, 1])], 50), &[4, 2, 3], &want);
}

#[test]
fn gather_and_scatter() {
    check(|| Tensor::new([[1, 2], [3, 4]]).gather(1, &Tensor::new([[0, 0], [1, 0]])), &[2, 2], &[1, 1, 4, 3]);
    // permuted input, index smaller than self outside the gathered axis, negative dim
    let idx = [[[1i32, 0], [0, 0]], [[2, 1], [1, 1]], [[0, 2], [2, 0]]];
    let want = grid(&[3, 2, 2], |i| pv(&[i[0], i[1], idx[i[0]][i[1]][i[2]] as usize]));
    check(|| perm().gather(-1, &Tensor::new(idx)), &[3, 2, 2], &want);
    check_f(|| Tensor::new([[0.5f32, -1.0, 8.0]]).gather(0, &Tensor::new([[0, 0, 0]])), &[1, 3], &[0.5, -1.0, 8.0]);

    let src = || (ar(&[2, 5]) + 1).cast(DType::INT32);
    let z = || Tensor::full_dtype(&[3, 5], 0, DType::INT32);
    check(
        || z().scatter(0, &Tensor::new([[0, 1, 2, 0]]), &src()),
        &[3, 5],
        &[1, 0, 0, 4, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0],
    );
    check(
        || z().scatter(1, &Tensor::new([[0, 1, 2], [0, 1, 4]]), &src()),
        &[3, 5],
        &[1, 2, 3, 0, 0, 6, 7, 0, 0, 8, 0, 0, 0, 0, 0],
    );
    // duplicates: the last source position wins; a permuted destination keeps untouched values
    check(|| ar(&[1, 3]).scatter(1, &Tensor::new([[1, 1]]), &Tensor::new([[5, 6]])), &[1, 3], &[0, 6, 2]);
    let want = grid(&[4, 2, 3], |i| if (i[0] == 0 && i[2] == 2) || (i[0] == 1 && i[2] == i[1]) { -1 } else { pv(i) });
    check(
        || perm().scatter_value(2, &Tensor::new([[[2], [2]], [[2], [2]], [[0], [1]]]).index(&s![..;2]), -1),
        &[4, 2, 3],
        &want,
    );
    check_f(|| Tensor::zeros(&[3]).scatter_value(0, &Tensor::new([2]), 1.5), &[3], &[0.0, 0.0, 1.5]);
}

#[test]
fn pad_to_and_shrink_to_and_flip_each_axis_once() {
    check(|| Tensor::new([[1, 2]]).pad_to(&[None, Some(3)], 0), &[1, 3], &[1, 2, 0]);
    check(|| Tensor::new([1, 2]).pad_to(&[Some(4)], 2), &[4], &[1, 2, 2, 2]);
    check(|| Tensor::new([[1, 2]]).pad_to(&[Some(2), Some(3)], -1), &[2, 3], &[1, 2, -1, -1, -1, -1]);
    check(|| Tensor::new([1, 2]).pad_to(&[None], 5), &[2], &[1, 2]);
    check(|| ar(&[4, 8]).shrink_to(&[Some(2), Some(2)]), &[2, 2], &[0, 1, 8, 9]);
    check(|| ar(&[4, 8]).shrink_to(&[None, Some(1)]), &[4, 1], &[0, 8, 16, 24]);
    let fails = |f: fn() -> Tensor| std::panic::catch_unwind(f).is_err();
    assert!(fails(|| Tensor::new([1, 2]).pad_to(&[Some(2), Some(3)], 0)), "a size per axis");
    assert!(fails(|| Tensor::new([1, 2, 3]).pad_to(&[Some(2)], 0)), "no smaller");
    assert!(fails(|| ar(&[3, 4]).flip(&[0, 0])), "an axis twice");
    assert!(fails(|| ar(&[3, 4]).flip(&[1, -1])), "an axis twice, once negative");
}

#[test]
fn cat_and_stack() {
    check(|| Tensor::cat(&[&ar(&[1, 2]), &(ar(&[2, 2]) + 10)], 0), &[3, 2], &[0, 1, 10, 11, 12, 13]);
    check(|| Tensor::cat(&[&ar(&[2, 1]), &ar(&[2, 0]), &ar(&[2, 2]).T()], -1), &[2, 3], &[0, 0, 2, 1, 1, 3]);
    check(|| Tensor::cat(&[&ar(&[0, 2]), &ar(&[0, 2])], 0), &[0, 2], &[]);
    let want = grid(&[4, 2, 5], |i| if i[2] < 3 { pv(i) } else { 100 });
    check(|| Tensor::cat(&[&perm(), &Tensor::full_dtype(&[4, 2, 2], 100, DType::INT32)], 2), &[4, 2, 5], &want);
    check_b(
        || Tensor::cat(&[&Tensor::new([true, false]), &Tensor::new([false, true, true])], 0),
        &[5],
        &[true, false, false, true, true],
    );
    check_f(|| Tensor::cat(&[&Tensor::new([1i32]), &Tensor::new([2.5f32])], 0), &[2], &[1.0, 2.5]);
    check(|| Tensor::stack(&[&ar(&[2]), &(ar(&[2]) + 5)], 1), &[2, 2], &[0, 5, 1, 6]);
    check(|| Tensor::stack(&[&ar(&[2]), &(ar(&[2]) + 5)], -2), &[2, 2], &[0, 1, 5, 6]);
    assert!(Tensor::try_cat(&[&ar(&[2, 2]), &ar(&[3, 3])], 0).is_err());
    assert!(Tensor::try_cat(&[], 0).is_err());
    assert!(matches!(Tensor::try_cat(&[&ar(&[2])], 1), Err(lazygrad::Error::Axis { op: "cat", axis: 1, .. })));
}

#[test]
fn repeat_split_chunk() {
    check(|| Tensor::new([1, 2, 3]).repeat(&[2, 2]), &[2, 6], &[1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3]);
    check(|| ar(&[2, 2]).T().repeat(&[1, 2]), &[2, 4], &[0, 2, 0, 2, 1, 3, 1, 3]);
    check(|| ar(&[2, 0]).repeat(&[3, 1]), &[6, 0], &[]);
    check(|| ar(&[2, 2]).T().repeat_interleave(2, Some(0)), &[4, 2], &[0, 2, 0, 2, 1, 3, 1, 3]);
    check(|| ar(&[2, 2]).repeat_interleave(2, None), &[8], &[0, 0, 1, 1, 2, 2, 3, 3]);
    let parts = || ar(&[5, 2]).split(2, 0);
    assert_eq!(parts().iter().map(|t| t.shape()).collect::<Vec<_>>(), vec![vec![2, 2], vec![2, 2], vec![1, 2]]);
    check(|| parts()[2].clone(), &[1, 2], &[8, 9]);
    check(|| perm().split([1, 2], -1)[1].clone(), &[4, 2, 2], &grid(&[4, 2, 2], |i| pv(&[i[0], i[1], i[2] + 1])));
    let chunks = ar(&[11]).chunk(6, 0);
    assert_eq!(chunks.iter().map(|t| t.shape()[0]).collect::<Vec<_>>(), vec![2, 2, 2, 2, 2, 1]);
    check(|| ar(&[11]).chunk(6, 0)[5].clone(), &[1], &[10]);
    assert_eq!(ar(&[13]).chunk(6, 0).len(), 5);
    assert_eq!(ar(&[0, 2]).chunk(3, 0).iter().map(|t| t.shape()).collect::<Vec<_>>(), vec![vec![0, 2]; 3]);
}

#[test]
fn unfold_windows() {
    check(|| ar(&[8]).unfold(0, 2, 2), &[4, 2], &[0, 1, 2, 3, 4, 5, 6, 7]);
    check(|| ar(&[5]).unfold(0, 3, 1), &[3, 3], &[0, 1, 2, 1, 2, 3, 2, 3, 4]);
    check(
        || ar(&[3, 3, 3]).unfold(-1, 2, 3),
        &[3, 3, 1, 2],
        &grid(&[3, 3, 1, 2], |i| (9 * i[0] + 3 * i[1] + i[3]) as i32),
    );
    // axis 0 of the permuted input: windows of 3 every 2 -> (1, 2, 3, 3)
    check(|| perm().unfold(0, 3, 2), &[1, 2, 3, 3], &grid(&[1, 2, 3, 3], |i| pv(&[2 * i[0] + i[3], i[1], i[2]])));
    check(|| ar(&[4]).unfold(0, 4, 5), &[1, 4], &[0, 1, 2, 3]);
    check(|| ar(&[3]).unfold(0, 0, 1), &[4, 0], &[]);
}

#[test]
fn meshgrid_roll_diag() {
    let (x, y) = (|| Tensor::new([1, 2, 3]), || Tensor::new([4, 5]));
    check(|| Tensor::meshgrid(&[&x(), &y()], "ij")[0].clone(), &[3, 2], &[1, 1, 2, 2, 3, 3]);
    check(|| Tensor::meshgrid(&[&x(), &y()], "ij")[1].clone(), &[3, 2], &[4, 5, 4, 5, 4, 5]);
    check(|| Tensor::meshgrid(&[&x(), &y()], "xy")[0].clone(), &[2, 3], &[1, 2, 3, 1, 2, 3]);
    check(|| Tensor::meshgrid(&[&x(), &y()], "xy")[1].clone(), &[2, 3], &[4, 4, 4, 5, 5, 5]);
    check(|| Tensor::meshgrid(&[&x(), &y(), &Tensor::new([7])], "xy")[2].clone(), &[2, 3, 1], &[7; 6]);

    check(|| ar(&[4]).roll(&[1], &[0]), &[4], &[3, 0, 1, 2]);
    check(|| ar(&[4]).roll(&[-5], &[-1]), &[4], &[1, 2, 3, 0]);
    check(|| ar(&[2, 3]).roll(&[1], &[]), &[2, 3], &[5, 0, 1, 2, 3, 4]);
    let want = grid(&[4, 2, 3], |i| pv(&[(i[0] + 4 - 2) % 4, i[1], (i[2] + 1) % 3]));
    check(|| perm().roll(&[2, -1], &[0, 2]), &[4, 2, 3], &want);
    check(|| ar(&[0, 2]).roll(&[1], &[1]), &[0, 2], &[]);

    check(|| Tensor::new([1, 2, 3]).diag(), &[3, 3], &[1, 0, 0, 0, 2, 0, 0, 0, 3]);
    check(|| ar(&[4]).index(&s![..;-2]).diag(), &[2, 2], &[3, 0, 0, 1]);
    check(|| ar(&[3, 3]).diagonal(0, 0, 1), &[3], &[0, 4, 8]);
    check(|| ar(&[3, 4]).diagonal(1, 0, 1), &[3], &[1, 6, 11]);
    check(|| ar(&[3, 4]).diagonal(-1, -2, -1), &[2], &[4, 9]);
    check(|| ar(&[3, 4]).diagonal(0, 1, 0), &[3], &[0, 5, 10]);
    check(|| ar(&[2, 2]).diagonal(5, 0, 1), &[0], &[]);
    check(|| perm().diagonal(0, 0, 2), &[2, 3], &grid(&[2, 3], |i| pv(&[i[1], i[0], i[1]])));
}

#[test]
fn tri_masked_fill_one_hot() {
    let t = || ar(&[3, 4]) + 1;
    check(|| t().triu(0), &[3, 4], &[1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12]);
    check(|| t().triu(1), &[3, 4], &[0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12]);
    check(|| t().triu(-1), &[3, 4], &[1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12]);
    check(|| t().tril(0), &[3, 4], &[1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0]);
    check(|| t().tril(-1), &[3, 4], &[0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0]);
    check(|| t().tril(2), &[3, 4], &[1, 2, 3, 0, 5, 6, 7, 8, 9, 10, 11, 12]);
    check(|| perm().tril(0), &[4, 2, 3], &grid(&[4, 2, 3], |i| if i[2] <= i[1] { pv(i) } else { 0 }));
    check_f(|| Tensor::ones(&[2, 2]).triu(0), &[2, 2], &[1.0, 1.0, 0.0, 1.0]);

    let mask = || Tensor::new([[true, false, true]]);
    check(|| ar(&[2, 3]).masked_fill(&mask(), -7), &[2, 3], &[-7, 1, -7, -7, 4, -7]);
    check_f(|| Tensor::zeros(&[2, 1]).masked_fill(&mask(), 0.25), &[2, 3], &[0.25, 0.0, 0.25, 0.25, 0.0, 0.25]);
    check(
        || perm().masked_fill(&perm().lt(10), 0),
        &[4, 2, 3],
        &grid(&[4, 2, 3], |i| if pv(i) < 10 { 0 } else { pv(i) }),
    );

    check(
        || Tensor::new([0, 1, 3, 3, 4]).one_hot(5),
        &[5, 5],
        &grid(&[5, 5], |i| ([0, 1, 3, 3, 4][i[0]] == i[1]) as i32),
    );
    check(|| Tensor::new([[2i64, 0]]).T().one_hot(3), &[2, 1, 3], &[0, 0, 1, 1, 0, 0]);
    check(|| Tensor::new(Vec::<i32>::new()).one_hot(0), &[0, 0], &[]);
}

#[test]
fn every_op_on_a_size_one_input() {
    let one = || ar(&[1, 1]);
    check(|| one().index(&s![..;-1, 0]), &[1], &[0]);
    check(|| one().set(&s![0, 0], 4), &[1, 1], &[4]);
    check(|| one().pad_with(&[(1, 1), (0, 0)], PadMode::Replicate, 0), &[3, 1], &[0, 0, 0]);
    check(|| one().gather(1, &Tensor::new([[0, 0]]).index(&s![.., ..1])), &[1, 1], &[0]);
    check(|| one().scatter_value(0, &Tensor::new([[0]]), 3), &[1, 1], &[3]);
    check(|| one().unfold(1, 1, 1), &[1, 1, 1], &[0]);
    check(|| one().diagonal(0, 0, 1), &[1], &[0]);
    check(|| one().roll(&[3], &[0]), &[1, 1], &[0]);
    check(|| one().triu(0), &[1, 1], &[0]);
}

/// When codegen folds away every load of an input buffer (here `where(true, 4, x)`), the program takes fewer
/// buffers than the schedule passes: "kernel takes 1 buffers, got 2". A bug outside this API.
#[test]
fn folded_away_input_buffer() {
    check(|| Tensor::full(&[2], true).where_(4, Tensor::new([0, 1])), &[2], &[4, 4]);
}

fn kernels(t: &Tensor) -> usize {
    let items = Tensor::schedule(std::slice::from_ref(t));
    items.iter().filter(|i| matches!(i, lazygrad::engine::ScheduleItem::Kernel { .. })).count()
}

#[test]
fn movement_and_indexing_fuse_into_one_kernel() {
    let x = Tensor::new([[1.0f32, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]);
    let idx = Tensor::new([[2, 0, 1, 1]]);
    let cases: Vec<(&str, Tensor)> = vec![
        ("slice", x.index(&s![..;-2, 1..])),
        ("fancy index", x.index(&s![Tensor::new([2, 0]), 1..;2])),
        ("set", x.set(&s![1, ..;-3], 0.5)),
        ("cat", Tensor::cat(&[&x, &x.flip(&[0]), &x.T().reshape(&[3, 4])], 0)),
        ("pad reflect", x.pad_with(&[(1, 2), (2, 1)], PadMode::Reflect, 0)),
        ("pad circular", x.pad_with(&[(1, 2), (2, 1)], PadMode::Circular, 0)),
        ("pad constant", x.pad_with(&[(1, -1), (0, 2)], PadMode::Constant, 2.5)),
        ("gather", x.gather(0, &idx)),
        ("one_hot", idx.one_hot(3)),
        ("unfold", x.unfold(1, 2, 1)),
        ("roll", x.roll(&[1, -1], &[0, 1])),
        ("tril", x.tril(0)),
        ("diagonal", x.diagonal(1, 0, 1)),
        ("repeat_interleave", x.repeat_interleave(2, Some(1))),
    ];
    for (name, t) in cases {
        assert_eq!(kernels(&t), 1, "{name} took {} kernels", kernels(&t));
    }
    // a scatter resolves duplicate indices with a max-reduce first
    assert!(kernels(&x.scatter(0, &idx, &x)) <= 2);
}

/// `d/dx sum(w * f(x))` with `w = 1, 2, 3, ...`: shows where each output element came from.
fn grad_of(x: &[f32], f: impl Fn(&Tensor) -> Tensor) -> Vec<f32> {
    let mut out = vec![];
    for dev in ["CPU", "INTERP"] {
        let _g = DefaultDevice::scoped(dev);
        let t = Tensor::new(x.to_vec());
        let y = f(&t);
        let w = (Tensor::arange(y.numel()) + 1).cast(DType::FLOAT32).reshape(&y.shape());
        out.push(y.mul(&w).sum(None, false).gradient(&[&t])[0].to_vec::<f32>());
    }
    assert_eq!(out[0], out[1], "CPU and INTERP gradients differ");
    out.swap_remove(0)
}

#[test]
fn gradients_flow_through_indexing() {
    let x6 = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
    let x3 = [1.0f32, 2.0, 3.0];
    assert_eq!(grad_of(&x6, |x| x.index(&s![..;-2])), vec![0.0, 3.0, 0.0, 2.0, 0.0, 1.0]);
    assert_eq!(grad_of(&x3, |x| x.index(&s![Tensor::new([1, 1, 0])])), vec![3.0, 3.0, 0.0]);
    assert_eq!(grad_of(&x3, |x| x.gather(0, &Tensor::new([2, 2, 0]))), vec![3.0, 0.0, 3.0]);
    assert_eq!(grad_of(&x3, |x| Tensor::cat(&[x, &x.flip(&[0])], 0)), vec![7.0, 7.0, 7.0]);
    assert_eq!(grad_of(&x3, |x| x.pad_with(&[(2, 1)], PadMode::Reflect, 0)), vec![3.0, 12.0, 6.0]);
    assert_eq!(grad_of(&x3, |x| x.set(&s![1], 10.0)), vec![1.0, 0.0, 3.0]);
    assert_eq!(grad_of(&x3, |x| x.unfold(0, 2, 1)), vec![1.0, 5.0, 4.0]);
    assert_eq!(grad_of(&x3, |x| x.roll(&[1], &[0])), vec![2.0, 3.0, 1.0]);
    assert_eq!(grad_of(&x3[..2], |x| Tensor::zeros(&[3]).scatter(0, &Tensor::new([2, 0]), x)), vec![3.0, 1.0]);
}
