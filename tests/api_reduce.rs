//! Reductions, scans, processing (einsum, conv, pooling, interpolate, sort, select) and random
//! tensors: known values and naive f64 loops, each computed on CPU and on INTERP with matching results.

use std::sync::Mutex;

use lazygrad::dtype::Element;
use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::{ConvOpts, Padding, PoolOpts, Scalar};
use lazygrad::{Context, DType, Tensor};

#[path = "api_reduce/naive.rs"]
mod naive;
use naive::{naive_conv2d, naive_conv_transpose2d, naive_pool, source_index, ConvCase};

/// Serializes the tests that draw random numbers (the stream is global).
static RNG: Mutex<()> = Mutex::new(());

fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// Build with `f` on the default device (CPU) and on INTERP; shapes must match and values agree
/// under `same`. Returns the shape and the CPU values.
fn both<T: Element>(f: impl Fn() -> Tensor, same: impl Fn(T, T) -> bool) -> (Vec<usize>, Vec<T>) {
    let cpu = f();
    let (shape, a) = (cpu.shape(), cpu.to_vec::<T>());
    let _g = DefaultDevice::scoped("INTERP");
    let interp = f();
    assert_eq!(interp.device(), "INTERP");
    assert_eq!(interp.shape(), shape, "CPU and INTERP shapes differ");
    let b = interp.to_vec::<T>();
    assert!(a.iter().zip(&b).all(|(&x, &y)| same(x, y)), "CPU {a:?} != INTERP {b:?}");
    (shape, a)
}

fn near(a: f64, b: f64, tol: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs())
}

/// Float results on both devices.
fn bf(f: impl Fn() -> Tensor) -> (Vec<usize>, Vec<f32>) {
    both::<f32>(f, |a, b| near(a as f64, b as f64, 1e-5))
}
/// Int32 results on both devices (exact).
fn bi(f: impl Fn() -> Tensor) -> (Vec<usize>, Vec<i32>) {
    both::<i32>(f, |a, b| a == b)
}
/// Bool results on both devices (exact).
fn bb(f: impl Fn() -> Tensor) -> (Vec<usize>, Vec<bool>) {
    both::<bool>(f, |a, b| a == b)
}

fn assert_near(got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "lengths differ: got {got:?}, want {want:?}");
    let ok = got.iter().zip(want).all(|(&g, &w)| near(g as f64, w, tol));
    assert!(ok, "got {got:?}\nwant {want:?}");
}

/// Deterministic test data: small values with few exact ties (`(i*7 + salt) % 11 - 5`, scaled).
fn data(n: usize, salt: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7 + salt) % 11) as f32 - 5.0) * 0.5 + (i % 3) as f32 * 0.1).collect()
}

fn t2x3() -> Tensor {
    Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]])
}

#[test]
fn prod_any_all() {
    assert_eq!(bf(|| t2x3().prod(1, false)), (vec![2], vec![6.0, 120.0]));
    assert_eq!(bf(|| t2x3().prod(None::<isize>, true)), (vec![1, 1], vec![720.0]));
    assert_eq!(bi(|| Tensor::new([[2i32, -3], [4, 5]]).prod(0, false)), (vec![2], vec![8, -15]));
    assert_eq!(bb(|| t2x3().gt(5.0).any(1, false)), (vec![2], vec![false, true]));
    assert_eq!(bb(|| t2x3().gt(1.0).all(1, false)), (vec![2], vec![false, true]));
    assert_eq!(bb(|| Tensor::new([0i32, 0, 3]).any(0, true)), (vec![1], vec![true]));
    assert_eq!(bb(|| Tensor::new([[true, false], [true, true]]).all(-1, false)), (vec![2], vec![false, true]));
}

#[test]
fn min_and_argmin_are_exact_for_unsigned_and_extreme_ints() {
    assert_eq!(both::<u8>(|| Tensor::new([7u8, 0, 5]).min(0, false), |a, b| a == b).1, vec![0]);
    assert_eq!(bi(|| Tensor::new([3i32, i32::MIN, i32::MAX]).min(0, false)).1, vec![i32::MIN]);
    assert_eq!(bi(|| Tensor::new([3i32, i32::MIN, i32::MAX]).argmin(Some(0), false)).1, vec![1]);
    assert_eq!(bi(|| Tensor::new([3u8, 0, 255]).argmax(Some(0), false)).1, vec![2]);
}

#[test]
fn var_std_and_means() {
    let x = || Tensor::new([[1.0f32, 2.0, 3.0, 4.0], [2.0, 2.0, 2.0, 2.0]]);
    let (s, v) = bf(|| x().var(1, false, 1));
    assert_eq!(s, vec![2]);
    assert_near(&v, &[5.0 / 3.0, 0.0], 1e-6);
    assert_near(&bf(|| x().var(1, true, 0)).1, &[1.25, 0.0], 1e-6);
    assert_near(&bf(|| x().std(None::<isize>, false, 1)).1, &[(5.5f64 / 7.0).sqrt()], 1e-6);
    let (v, m) = x().var_mean(0, false, 0);
    assert_near(&v.to_vec::<f32>(), &[0.25, 0.0, 0.25, 1.0], 1e-6);
    assert_near(&m.to_vec::<f32>(), &[1.5, 2.0, 2.5, 3.0], 1e-6);
    let (sd, m) = x().std_mean(-1, true, 1);
    assert_eq!(sd.shape(), vec![2, 1]);
    assert_near(&sd.to_vec::<f32>(), &[(5.0f64 / 3.0).sqrt(), 0.0], 1e-6);
    assert_near(&m.to_vec::<f32>(), &[2.5, 2.0], 1e-6);
    assert_near(&bf(|| Tensor::new([1i32, 2, 3, 6]).var(0, false, 1)).1, &[14.0 / 3.0], 1e-6);
}

#[test]
fn softmax_family() {
    let rows = [[1.0f64, 2.0, 3.0], [-1.0, 0.0, 100.0]];
    let x = || Tensor::new([[1.0f32, 2.0, 3.0], [-1.0, 0.0, 100.0]]);
    let lse: Vec<f64> = rows
        .iter()
        .map(|r| {
            let m = r.iter().cloned().fold(f64::MIN, f64::max);
            m + r.iter().map(|v| (v - m).exp()).sum::<f64>().ln()
        })
        .collect();
    let soft: Vec<f64> = rows.iter().zip(&lse).flat_map(|(r, l)| r.iter().map(move |v| (v - l).exp())).collect();
    let logsoft: Vec<f64> = rows.iter().zip(&lse).flat_map(|(r, l)| r.iter().map(move |v| v - l)).collect();
    assert_near(&bf(|| x().softmax(-1)).1, &soft, 1e-6);
    assert_near(&bf(|| x().log_softmax(1)).1, &logsoft, 1e-6);
    assert_near(&bf(|| x().logsumexp(1, false)).1, &lse, 1e-6);
    assert_eq!(bf(|| x().logsumexp(1, true)).0, vec![2, 1]);
    let all = bf(|| x().logsumexp(None::<isize>, false));
    assert_eq!(all.0, Vec::<usize>::new());
    assert_near(&all.1, &[100.0], 1e-6);
    let col = bf(|| x().softmax(0)).1;
    assert_near(&col[..1], &[1.0 / (1.0 + (-2.0f64).exp())], 1e-6);
}

#[test]
fn argmax_argmin_take_the_first_of_ties() {
    let x = || Tensor::new([[1.0f32, 5.0, 5.0, 0.0], [7.0, -2.0, 7.0, -2.0]]);
    assert_eq!(bi(|| x().argmax(Some(1), false)), (vec![2], vec![1, 0]));
    assert_eq!(bi(|| x().argmin(Some(-1), true)), (vec![2, 1], vec![3, 1]));
    assert_eq!(bi(|| x().argmax(Some(0), false)), (vec![4], vec![1, 0, 1, 0]));
    assert_eq!(bi(|| x().argmax(None, false)), (vec![], vec![4]));
    assert_eq!(bi(|| x().argmin(None, true)), (vec![1, 1], vec![5]));
}

#[test]
fn cumsum_cumprod_short_and_split() {
    let x = || t2x3();
    assert_eq!(bf(|| x().cumsum(1)).1, vec![1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
    assert_eq!(bf(|| x().cumsum(0)).1, vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
    assert_eq!(bf(|| x().cumprod(-1)).1, vec![1.0, 2.0, 6.0, 4.0, 20.0, 120.0]);
    assert_eq!(bi(|| Tensor::new([true, false, true, true]).cumsum(0)).1, vec![1, 1, 2, 3]);
    // long axes take the two-level path: blocks of 256, then a scan over the block totals
    let n = 700;
    let v: Vec<i32> = (0..n as i32).map(|i| i % 5 - 2).collect();
    let (shape, got) = bi(|| Tensor::new(v.clone()).reshape(&[1, n]).cumsum(1));
    assert_eq!(shape, vec![1, n]);
    let want: Vec<i32> = v
        .iter()
        .scan(0, |s, &x| {
            *s += x;
            Some(*s)
        })
        .collect();
    assert_eq!(got, want);
    let p: Vec<f32> = (0..n).map(|i| if i % 97 == 0 { 2.0 } else { 1.0 }).collect();
    let got = bf(|| Tensor::new(p.clone()).cumprod(0)).1;
    assert_eq!((got[0], got[96], got[97], got[n - 1]), (2.0, 2.0, 4.0, 256.0));
}

#[test]
fn cummax_values_indices_and_logcumsumexp() {
    let x = || Tensor::new([[1.0f32, 3.0, 2.0, 3.0, 5.0], [0.0, -1.0, 4.0, 4.0, 1.0]]);
    let (s, v) = bf(|| x().cummax(1).0);
    assert_eq!(s, vec![2, 5]);
    assert_eq!(v, vec![1.0, 3.0, 3.0, 3.0, 5.0, 0.0, 0.0, 4.0, 4.0, 4.0]);
    // as torch: on ties the index moves to the latest equal element
    assert_eq!(bi(|| x().cummax(1).1).1, vec![0, 1, 1, 3, 4, 0, 0, 2, 3, 3]);
    assert_eq!(bi(|| x().cummax(0).1).1, vec![0, 0, 0, 0, 0, 0, 0, 1, 1, 0]);
    let rows = [[1.0f64, 3.0, 2.0, 3.0, 5.0], [0.0, -1.0, 4.0, 4.0, 1.0]];
    let want: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            r.iter()
                .scan(0.0, |s, v| {
                    *s += f64::exp(*v);
                    Some(s.ln())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_near(&bf(|| x().logcumsumexp(1)).1, &want, 1e-6);
}

#[test]
fn isclose_and_allclose() {
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    let a = || Tensor::new([1.0f32, 1.0, inf, inf, nan, 0.0, 100.0]);
    let b = || Tensor::new([1.0f32 + 1e-7, 1.1, inf, -inf, nan, 1e-9, 100.0005]);
    let want = vec![true, false, true, false, false, true, true];
    assert_eq!(bb(|| a().isclose(&b(), 1e-5, 1e-8, false)).1, want);
    let mut with_nan = want.clone();
    with_nan[4] = true;
    assert_eq!(bb(|| a().isclose(&b(), 1e-5, 1e-8, true)).1, with_nan);
    assert!(t2x3().allclose(&t2x3().add(1e-6), 1e-5, 1e-8, false));
    assert!(!t2x3().allclose(&t2x3().add(1e-2), 1e-5, 1e-8, false));
    assert!(Tensor::new([1i32, 2]).allclose(&Tensor::new([1.0f32, 2.0]), 0.0, 0.0, false));
}

#[test]
fn einsum_forms() {
    let a = || Tensor::new([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let b = || Tensor::new([[1.0f32, 0.0], [2.0, 1.0], [0.0, 3.0]]);
    assert_eq!(bf(|| Tensor::einsum("ij,jk->ik", &[&a(), &b()])), (vec![2, 2], vec![5.0, 11.0, 14.0, 23.0]));
    assert_eq!(bf(|| Tensor::einsum("ij,jk", &[&a(), &b()])).1, vec![5.0, 11.0, 14.0, 23.0]);
    assert_eq!(bf(|| Tensor::einsum("ij->ji", &[&a()])), (vec![3, 2], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]));
    assert_eq!(bf(|| Tensor::einsum("ij->", &[&a()])), (vec![], vec![21.0]));
    assert_eq!(
        bf(|| Tensor::einsum("i, j -> ij", &[&Tensor::new([1.0f32, 2.0]), &Tensor::new([3.0f32, 4.0, 5.0])])).1,
        vec![3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
    );
    let sq = || Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]);
    assert_eq!(bf(|| Tensor::einsum("ii->", &[&sq()])), (vec![], vec![5.0]));
    assert_eq!(bf(|| Tensor::einsum("ii->i", &[&sq()])), (vec![2], vec![1.0, 4.0]));
    let x = || Tensor::arange(12).cast(DType::FLOAT32).reshape(&[2, 2, 3]);
    let (s, v) = bf(|| Tensor::einsum("bij,bjk->bik", &[&x(), &x().permute(&[0, 2, 1])]));
    assert_eq!(s, vec![2, 2, 2]);
    assert_eq!(v, vec![5.0, 14.0, 14.0, 50.0, 149.0, 212.0, 212.0, 302.0]);
    assert_eq!(bf(|| Tensor::einsum("...ij->...ji", &[&x()])).0, vec![2, 3, 2]);
    assert_eq!(
        bf(|| Tensor::einsum("...j,j", &[&x(), &Tensor::new([1.0f32, 0.0, -1.0])])),
        (vec![2, 2], vec![-2.0; 4])
    );
}

#[test]
fn conv2d_matches_naive_loops() {
    let cases: [ConvCase<bool>; 4] = [
        ([1, 1, 5, 5], [1, 1, 3, 3], 1, [1, 1], [1, 1], [0, 0], false),
        ([2, 2, 5, 6], [3, 2, 2, 3], 1, [2, 1], [1, 1], [1, 2], true),
        ([1, 4, 6, 6], [4, 2, 3, 3], 2, [1, 2], [2, 1], [1, 1], true),
        ([1, 2, 7, 5], [2, 1, 3, 2], 2, [3, 2], [1, 2], [2, 0], false),
    ];
    for (i, (xs, ws, g, s, d, p, with_bias)) in cases.into_iter().enumerate() {
        let x = data(xs.iter().product(), i);
        let w = data(ws.iter().product(), i + 3);
        let b = data(ws[0], i + 5);
        let opts = ConvOpts::default().groups(g).stride(s).dilation(d).padding(p);
        let (shape, got) = bf(|| {
            let bias = Tensor::from_slice(&b, &[ws[0]]);
            Tensor::from_slice(&x, &xs).conv2d(&Tensor::from_slice(&w, &ws), with_bias.then_some(&bias), &opts)
        });
        let (want_shape, want) = naive_conv2d(&x, xs, &w, ws, with_bias.then_some(&b[..]), g, s, d, p);
        assert_eq!(shape, want_shape, "case {i}");
        assert_near(&got, &want, 1e-5);
    }
    // conv1d through the same function; torch's flat padding order (left, right) for one dim
    let x = [1.0f32, 2.0, 3.0, 4.0];
    let (s, v) =
        bf(|| Tensor::new([[x]]).conv2d(&Tensor::new([[[1.0f32, -1.0]]]), None, &ConvOpts::default().padding([1, 0])));
    assert_eq!((s, v), (vec![1, 1, 4], vec![-1.0, -1.0, -1.0, -1.0]));
    // negative padding crops, as tinygrad's: the naive conv of the input without that border
    // (padding -1: rows and columns 1..5 of 6; flat (-1, 0, -1, 0): 1..6)
    let (x, w) = (data(36, 7), data(9, 8));
    for (padding, rows, want_rows) in [(Padding(vec![-1]), 1..5, 4), (Padding(vec![-1, 0, -1, 0]), 1..6, 5)] {
        let inner: Vec<f32> =
            rows.clone().flat_map(|i| rows.clone().map(move |j| (i, j))).map(|(i, j)| x[i * 6 + j]).collect();
        let (want_shape, want) =
            naive_conv2d(&inner, [1, 1, want_rows, want_rows], &w, [1, 1, 3, 3], None, 1, [1, 1], [1, 1], [0, 0]);
        let opts = ConvOpts { padding, ..ConvOpts::default() };
        let (shape, got) =
            bf(|| Tensor::from_slice(&x, &[1, 1, 6, 6]).conv2d(&Tensor::from_slice(&w, &[1, 1, 3, 3]), None, &opts));
        assert_eq!(shape, want_shape, "{:?}", opts.padding);
        assert_near(&got, &want, 1e-5);
    }
}

#[test]
fn conv_transpose2d_matches_naive_loops() {
    let cases: [ConvCase<[usize; 2]>; 3] = [
        ([1, 1, 3, 3], [1, 1, 2, 2], 1, [1, 1], [1, 1], [0, 0], [0, 0]),
        ([2, 2, 3, 4], [2, 3, 3, 2], 1, [2, 3], [1, 1], [1, 0], [1, 2]),
        ([1, 4, 3, 3], [4, 1, 2, 3], 2, [2, 1], [2, 1], [1, 2], [1, 0]),
    ];
    for (i, (xs, ws, g, s, d, p, op)) in cases.into_iter().enumerate() {
        let x = data(xs.iter().product(), i + 1);
        let w = data(ws.iter().product(), i + 4);
        let opts = ConvOpts::default().groups(g).stride(s).dilation(d).padding(p).output_padding(op);
        let (shape, got) =
            bf(|| Tensor::from_slice(&x, &xs).conv_transpose2d(&Tensor::from_slice(&w, &ws), None, &opts));
        let (want_shape, want) = naive_conv_transpose2d(&x, xs, &w, ws, g, s, d, p, op);
        assert_eq!(shape, want_shape, "case {i}");
        assert_near(&got, &want, 1e-5);
    }
    let bias = || Tensor::new([10.0f32]);
    let (_, v) = bf(|| {
        Tensor::ones(&[1, 1, 2, 2]).conv_transpose2d(&Tensor::ones(&[1, 1, 2, 2]), Some(&bias()), &ConvOpts::default())
    });
    assert_eq!(v, vec![11.0, 12.0, 11.0, 12.0, 14.0, 12.0, 11.0, 12.0, 11.0]);
}

#[test]
fn pooling_matches_naive_loops() {
    let cases = [
        PoolOpts::default(),
        PoolOpts::kernel(3).stride(1),
        PoolOpts::kernel([2, 3]).stride([2, 1]).padding(1),
        PoolOpts::kernel(3).stride(2).padding(1).count_include_pad(false),
        PoolOpts::kernel(2).stride(2).ceil_mode(true),
        PoolOpts::kernel(3).stride(2).padding(1).ceil_mode(true),
        PoolOpts::kernel(3).stride(2).padding(1).ceil_mode(true).count_include_pad(false),
    ];
    let (h, w) = (5, 6);
    let x = data(2 * h * w, 2);
    for (i, o) in cases.iter().enumerate() {
        for max in [false, true] {
            let (shape, got) = bf(|| {
                let t = Tensor::from_slice(&x, &[1, 2, h, w]);
                if max {
                    t.max_pool2d(o)
                } else {
                    t.avg_pool2d(o)
                }
            });
            let mut want = vec![];
            let mut dims = (0, 0);
            for c in 0..2 {
                let (oh, ow, v) = naive_pool(&x[c * h * w..(c + 1) * h * w], h, w, o, max);
                dims = (oh, ow);
                want.extend(v);
            }
            assert_eq!(shape, vec![1, 2, dims.0, dims.1], "case {i} max={max}");
            assert_near(&got, &want, 1e-5);
        }
    }
    // dilation (max pooling; torch's avg_pool2d has none)
    let o = PoolOpts::kernel(2).stride(1).dilation(2);
    let (shape, got) = bf(|| Tensor::from_slice(&x[..h * w], &[1, 1, h, w]).max_pool2d(&o));
    let (oh, ow, want) = naive_pool(&x[..h * w], h, w, &o, true);
    assert_eq!(shape, vec![1, 1, oh, ow]);
    assert_near(&got, &want, 0.0);
}

#[test]
fn interpolate_matches_torch_formulas() {
    let (h, w) = (3, 4);
    let x = data(h * w, 1);
    for (mode, align, (oh, ow)) in
        [("nearest", false, (5, 2)), ("linear", false, (5, 7)), ("linear", true, (2, 6)), ("linear", false, (1, 3))]
    {
        let (shape, got) = bf(|| Tensor::from_slice(&x, &[1, h, w]).interpolate(&[oh, ow], mode, align));
        assert_eq!(shape, vec![1, oh, ow]);
        let (ry, rx) = (source_index(h, oh, mode, align), source_index(w, ow, mode, align));
        let at = |y: usize, xx: usize| x[y * w + xx] as f64;
        let mut want = vec![];
        for &(y0, y1, fy) in &ry {
            for &(x0, x1, fx) in &rx {
                let top = at(y0, x0) * (1.0 - fx) + at(y0, x1) * fx;
                let bottom = at(y1, x0) * (1.0 - fx) + at(y1, x1) * fx;
                want.push(top * (1.0 - fy) + bottom * fy);
            }
        }
        assert_near(&got, &want, 1e-5);
    }
    // only the last axis, and ints stay exact under nearest
    let (s, v) = bi(|| Tensor::new([[1i32, 2, 3]]).interpolate(&[6], "nearest", false));
    assert_eq!((s, v), (vec![1, 6], vec![1, 1, 2, 2, 3, 3]));
    assert_eq!(bi(|| Tensor::new([10i32, 20]).interpolate(&[3], "nearest-exact", false)).1, vec![10, 20, 20]);
}

/// uint8 resizes in tinygrad's 7-bit fixed point (`lerp`), to its values bit for bit (computed
/// by tinygrad at the pinned commit; torch's uint8 kernel differs from both by one in two places).
#[test]
fn interpolate_uint8_as_tinygrad() {
    let x = || Tensor::new([[[[0u8, 5, 10, 30], [10, 20, 3, 4], [9, 6, 28, 7]]]]);
    let got = x().interpolate(&[5, 7], "linear", false).to_vec::<u8>();
    let want = [
        0, 2, 5, 8, 11, 23, 30, 4, 7, 11, 10, 8, 15, 20, 10, 14, 19, 12, 3, 4, 4, 9, 10, 11, 15, 17, 11, 6, 9, 8, 6,
        17, 27, 15, 7,
    ];
    assert_eq!(got, want);
    let lerped = Tensor::new([10u8, 200]).lerp(&Tensor::new([20u8, 100]), Tensor::new([0.25f32, 0.5]));
    assert_eq!(lerped.to_vec::<u8>(), [13, 150]);
}

#[test]
fn sort_argsort_topk() {
    let v = [3.0f32, -1.0, 2.0, 5.0, 2.0, 0.5, -7.0];
    let (s, got) = bf(|| Tensor::new(v).sort(0, false).0);
    assert_eq!((s, got), (vec![7], vec![-7.0, -1.0, 0.5, 2.0, 2.0, 3.0, 5.0]));
    // ties keep their input order in both directions
    assert_eq!(bi(|| Tensor::new(v).sort(-1, false).1).1, vec![6, 1, 5, 2, 4, 0, 3]);
    assert_eq!(bi(|| Tensor::new(v).argsort(0, true)).1, vec![3, 0, 2, 4, 5, 1, 6]);
    let m = || Tensor::new([[4i32, 1, 3], [2, 9, 0], [7, 5, 8], [1, 6, 2]]);
    assert_eq!(bi(|| m().sort(0, false).0), (vec![4, 3], vec![1, 1, 0, 2, 5, 2, 4, 6, 3, 7, 9, 8]));
    assert_eq!(bi(|| m().argsort(0, false)).1, vec![3, 0, 1, 1, 2, 3, 0, 3, 0, 2, 1, 2]);
    assert_eq!(bi(|| m().sort(1, true).0).1, vec![4, 3, 1, 9, 2, 0, 8, 7, 5, 6, 2, 1]);
    let (tv, ti) = m().topk(2, -1, true);
    assert_eq!(tv.shape(), vec![4, 2]);
    assert_eq!(tv.to_vec::<i32>(), vec![4, 3, 9, 2, 8, 7, 6, 2]);
    assert_eq!(ti.to_vec::<i32>(), vec![0, 2, 1, 0, 2, 0, 1, 2]);
    assert_eq!(bi(|| m().topk(1, 0, false).1), (vec![1, 3], vec![3, 0, 1]));
    assert_eq!(bf(|| Tensor::new([2.0f32]).sort(0, true).0).1, vec![2.0]);
}

/// Values from torch 2.9.1's `scatter_reduce`, with and without the tensor's own values.
#[test]
fn scatter_reduce_every_reduction() {
    use lazygrad::tensor::ScatterReduce::*;
    let (base, index, src) =
        (Tensor::new([1.0f32, 2.0, 3.0, 4.0]), Tensor::new([0, 0, 2, 2, 2]), Tensor::new([5.0f32, 6.0, 7.0, 8.0, 9.0]));
    let cases = [
        (Sum, [12.0, 2.0, 27.0, 4.0], [11.0, 2.0, 24.0, 4.0]),
        (Prod, [30.0, 2.0, 1512.0, 4.0], [30.0, 2.0, 504.0, 4.0]),
        (Mean, [4.0, 2.0, 6.75, 4.0], [5.5, 2.0, 8.0, 4.0]),
        (Amax, [6.0, 2.0, 9.0, 4.0], [6.0, 2.0, 9.0, 4.0]),
        (Amin, [1.0, 2.0, 3.0, 4.0], [5.0, 2.0, 7.0, 4.0]),
    ];
    for (reduce, with_self, without) in cases {
        assert_eq!(base.scatter_reduce(0, &index, &src, reduce, true).to_vec::<f32>(), with_self, "{reduce:?}");
        assert_eq!(base.scatter_reduce(0, &index, &src, reduce, false).to_vec::<f32>(), without, "{reduce:?}");
    }
    // scatter's reduce= adds (or multiplies) a number once per time a position is named
    let twice = Tensor::new([0, 0, 2]);
    assert_eq!(base.scatter_value_reduce(0, &twice, 1.5, Sum).to_vec::<f32>(), [4.0, 2.0, 4.5, 4.0]);
    assert_eq!(base.scatter_value_reduce(0, &twice, 1.5, Prod).to_vec::<f32>(), [2.25, 2.0, 4.5, 4.0]);
    let half = base.half().try_scatter(0, &twice, &Tensor::new([1.0f32, 2.0, 3.0]));
    let Err(lazygrad::Error::DTypes { op: "scatter", dtypes, .. }) = half else { panic!("float32 src into float16") };
    assert_eq!(dtypes, [DType::FLOAT16, DType::FLOAT32]);
}

#[test]
fn masked_select_and_nonzero_of_a_fixed_size() {
    let t = Tensor::new([0i32, 1, 2, 3, 4, 5, 6, 7, 8]);
    let mask = Tensor::new([true, false, true, false, true, false, false, false, true]);
    assert_eq!(t.masked_select_sized(&mask, Some(4), Scalar::Int(0)).to_vec::<i32>(), [0, 2, 4, 8]);
    assert_eq!(t.masked_select_sized(&mask, Some(6), Scalar::Int(-1)).to_vec::<i32>(), [0, 2, 4, 8, -1, -1]);
    assert_eq!(t.masked_select_sized(&mask, Some(2), Scalar::Int(0)).to_vec::<i32>(), [0, 2]);
    let m = Tensor::new([[1.0f32, 0.0], [0.0, 2.0]]);
    let rows = m.nonzero(None, Scalar::Int(0));
    assert_eq!((rows.shape(), rows.to_vec::<i32>()), (vec![2, 2], vec![0, 0, 1, 1]));
    assert_eq!(m.nonzero(Some(3), Scalar::Int(-1)).to_vec::<i32>(), [0, 0, 1, 1, -1, -1]);
    assert_eq!(Tensor::new([1, 0, 2, 0, 3]).nonzero(None, Scalar::Int(0)).to_vec::<i32>(), [0, 2, 4]);
    assert_eq!(Tensor::new(5.0f32).nonzero(None, Scalar::Int(0)).shape(), [1, 0]);
    assert_eq!(Tensor::new(0.0f32).nonzero(None, Scalar::Int(0)).shape(), [0, 0]);
}

/// Values and indices from torch 2.9.1's `max_pool2d(return_indices=True)` and `max_unpool2d`.
#[test]
fn max_pool_indices_and_unpool() {
    let t = Tensor::new([[[[3.0f32, 1.0, 4.0, 1.0, 5.0], [9.0, 2.0, 6.0, 5.0, 3.0], [5.0, 8.0, 9.0, 7.0, 9.0]]]]);
    let opts = PoolOpts::kernel(3).stride(2).padding(1);
    let (values, indices) = t.max_pool2d_with_indices(&opts);
    assert_eq!(values.to_vec::<f32>(), [9.0, 6.0, 5.0, 9.0, 9.0, 9.0]);
    assert_eq!(indices.to_vec::<i32>(), [5, 7, 4, 5, 12, 14]);
    assert_eq!(values.max_unpool2d(&indices, &opts, None).shape(), [1, 1, 3, 5]);
    // ties give the first position
    let (v, i) = Tensor::ones(&[1, 1, 2, 4]).max_pool2d_with_indices(&PoolOpts::kernel(2));
    assert_eq!(i.to_vec::<i32>(), [0, 2]);
    let back = v.max_unpool2d(&i, &PoolOpts::kernel(2), None);
    assert_eq!(back.to_vec::<f32>(), [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
    assert_eq!(v.max_unpool2d(&i, &PoolOpts::kernel(2), Some(&[3, 4])).shape(), [1, 1, 3, 4]);
}

#[test]
fn masked_select_realizes_the_count() {
    let (s, v) = bf(|| t2x3().masked_select(&t2x3().gt(2.5)));
    assert_eq!((s, v), (vec![4], vec![3.0, 4.0, 5.0, 6.0]));
    let (s, v) = bi(|| Tensor::new([[1i32, 2, 3], [4, 5, 6]]).masked_select(&Tensor::new([true, false, true])));
    assert_eq!((s, v), (vec![4], vec![1, 3, 4, 6]));
    assert_eq!(t2x3().masked_select(&t2x3().gt(100.0)).shape(), vec![0]);
}

#[test]
fn linspace_and_eye_values() {
    assert_eq!(bf(|| Tensor::linspace(0.0, 1.0, 5)), (vec![5], vec![0.0, 0.25, 0.5, 0.75, 1.0]));
    assert_eq!(bf(|| Tensor::linspace(3.0, -3.0, 4)).1, vec![3.0, 1.0, -1.0, -3.0]);
    assert_eq!(bf(|| Tensor::linspace(2.0, 9.0, 1)).1, vec![2.0]);
    assert_eq!(Tensor::linspace(0.0, 1.0, 0).shape(), vec![0]);
    assert_eq!(bf(|| Tensor::eye_rect(2, 3)), (vec![2, 3], vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0]));
    assert_eq!(bf(|| Tensor::eye_rect(3, 1)).1, vec![1.0, 0.0, 0.0]);
}

fn mean_std(v: &[f32]) -> (f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().map(|&x| x as f64).sum::<f64>() / n;
    (m, (v.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / n).sqrt())
}

#[test]
fn random_is_reproducible_and_has_the_right_moments() {
    let _l = rng_lock();
    let seeded = |seed: u64, f: &dyn Fn() -> Tensor| {
        Tensor::manual_seed(seed);
        f()
    };
    // same seed, same values on both devices; a new seed changes them
    let (_, a) = bf(|| seeded(5, &|| Tensor::randn(&[64])));
    assert_eq!(seeded(5, &|| Tensor::randn(&[64])).to_vec::<f32>(), a);
    assert_ne!(seeded(6, &|| Tensor::randn(&[64])).to_vec::<f32>(), a);
    let n = 10_000;
    type Check = (&'static str, Box<dyn Fn() -> Tensor>, f64, f64);
    let checks: [Check; 6] = [
        ("rand", Box::new(move || Tensor::rand(&[n])), 0.5, (1.0f64 / 12.0).sqrt()),
        ("randn", Box::new(move || Tensor::randn(&[100, 100])), 0.0, 1.0),
        ("normal", Box::new(move || Tensor::normal(&[n], 3.0, 0.5)), 3.0, 0.5),
        ("uniform", Box::new(move || Tensor::uniform(&[n], -2.0, 4.0)), 1.0, 6.0 / 12f64.sqrt()),
        ("kaiming_normal", Box::new(move || Tensor::kaiming_normal(&[n, 4], 0.0)), 0.0, (2.0f64 / 4.0).sqrt()),
        (
            "glorot_uniform",
            Box::new(move || Tensor::glorot_uniform(&[n, 5])),
            0.0,
            (6.0f64 / (n + 5) as f64).sqrt() / 3f64.sqrt(),
        ),
    ];
    for (name, f, mean, std) in checks {
        Tensor::manual_seed(1);
        let v = f().to_vec::<f32>();
        let (m, s) = mean_std(&v);
        assert!((m - mean).abs() < 0.05 * std.max(0.2), "{name}: mean {m}, want {mean}");
        assert!((s - std).abs() < 0.05 * std, "{name}: std {s}, want {std}");
    }
    Tensor::manual_seed(2);
    let u = Tensor::uniform(&[n], -2.0, 4.0).to_vec::<f32>();
    assert!(u.iter().all(|&x| (-2.0..4.0).contains(&x)));
    let r = Tensor::rand(&[n]).to_vec::<f32>();
    assert!(r.iter().all(|&x| (0.0..1.0).contains(&x)));
    let bound = 3f32.sqrt() * (2.0f32 / (1.0 + 0.01)).sqrt() / 3.0;
    let k = Tensor::kaiming_uniform(&[50, 9], 0.1).to_vec::<f32>();
    assert!(k.iter().all(|&x| x.abs() <= bound) && k.iter().any(|&x| x.abs() > 0.8 * bound));
    let su = Tensor::scaled_uniform(&[10, 10]).to_vec::<f32>();
    assert!(su.iter().all(|&x| x.abs() <= 0.1) && su.iter().any(|&x| x.abs() > 0.08));
    let ri = Tensor::randint(&[n], -3, 4).to_vec::<i32>();
    assert!(ri.iter().all(|&x| (-3..4).contains(&x)));
    for want in -3..4 {
        let c = ri.iter().filter(|&&x| x == want).count() as f64 / n as f64;
        assert!((c - 1.0 / 7.0).abs() < 0.02, "randint: {want} drawn with frequency {c}");
    }
    let like = Tensor::zeros(&[3, 4]).cast(DType::FLOAT16);
    assert_eq!((like.rand_like().dtype(), like.randn_like().shape()), (DType::FLOAT16, vec![3, 4]));
}

#[test]
fn randperm_multinomial_dropout() {
    let _l = rng_lock();
    let (_, p) = bi(|| {
        Tensor::manual_seed(3);
        Tensor::randperm(20)
    });
    let mut sorted = p.clone();
    sorted.sort();
    assert_eq!(sorted, (0..20).collect::<Vec<_>>());
    assert_ne!(p, (0..20).collect::<Vec<_>>());
    // inverse-CDF sampling: frequencies follow the weights; zero weight is never drawn
    let (s, draws) = bi(|| {
        Tensor::manual_seed(4);
        Tensor::new([1.0f32, 0.0, 3.0, 4.0]).multinomial(4000, true)
    });
    assert_eq!(s, vec![4000]);
    for (cat, w) in [(0, 0.125), (1, 0.0), (2, 0.375), (3, 0.5)] {
        let f = draws.iter().filter(|&&d| d == cat).count() as f64 / 4000.0;
        assert!((f - w).abs() < 0.03, "multinomial: category {cat} frequency {f}, want {w}");
    }
    let two = Tensor::new([[0.0f32, 1.0], [1.0, 0.0]]).multinomial(3, true);
    assert_eq!((two.shape(), two.to_vec::<i32>()), (vec![2, 3], vec![1, 1, 1, 0, 0, 0]));
    // dropout only acts while TRAINING is set
    let x = Tensor::ones(&[1000]);
    assert_eq!(x.dropout(0.5).to_vec::<f32>(), vec![1.0; 1000]);
    let _train = Context::new(&[("TRAINING", 1)]);
    Tensor::manual_seed(5);
    let d = x.dropout(0.25).to_vec::<f32>();
    assert!(d.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    let kept = d.iter().filter(|&&v| v != 0.0).count();
    assert!((700..800).contains(&kept), "dropout kept {kept} of 1000");
    assert_eq!(x.dropout(1.0).to_vec::<f32>(), vec![0.0; 1000]);
}
