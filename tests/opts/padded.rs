//! PADTO over loops it grows and over loops of symbolic size: a softmax's rows, attention's keys
//! over a KV cache, padded to whole vectors whose padded terms take the reduce's identity.

use lazygrad::{Sint, Variable};

use super::*;

/// The first `len` columns of the rows of `x` (its keys), `len` bound to the variable `keys`: a
/// view of symbolic size, as attention reads a KV cache.
fn first_keys(x: &Tensor, keys: &Variable, len: usize) -> Tensor {
    let rows = Sint::Int(x.shape()[0]);
    x.shrink_sym(&[(Sint::Int(0), rows), (Sint::Int(0), Sint::from(&keys.bind(len)))])
}

#[test]
fn padto_applies_to_loops_it_grows_and_reduces_whose_extra_terms_take_the_identity() {
    let _serial = serial();
    let (a, b) = (Tensor::rand(&[20, 30]).realize(), Tensor::rand(&[30, 40]).realize());
    let ast = kernel_asts(&a.matmul(&b)).remove(0);
    let pad = |range: usize, amount: usize| lazygrad::codegen::opt::apply_opt(&ast, Opt::Padto { range, amount });
    let sizes = |u: Option<lazygrad::uop::UOp>| {
        lazygrad::codegen::opt::kernel_ranges(&u.expect("the pad applies")).iter().map(|r| r.2).collect::<Vec<_>>()
    };
    assert_eq!(sizes(pad(1, 16)), vec![20, 48, 30], "40 columns grow to 48");
    assert_eq!(sizes(pad(0, 3)), vec![21, 40, 30]);
    assert!(pad(1, 8).is_none(), "40 is a multiple of 8 already");
    assert!(pad(0, 32).is_none(), "a pad past twice the size");
    // the reduce loop: its padded terms are products of loads that read 0 there
    assert_eq!(sizes(pad(2, 16)), vec![20, 40, 32], "30 summed terms grow to 32");
    assert!(pad(5, 16).is_none(), "no such loop");
    // a sum of exponentials would add exp(0) = 1 for each padded term, and a max of loads that
    // read 0 there could be 0: their padded terms are selected to be 0 and -inf instead
    for t in [a.exp().sum(1, false), a.max(1, false)] {
        let ast = kernel_asts(&t).remove(0);
        let padded = lazygrad::codegen::opt::apply_opt(&ast, Opt::Padto { range: 1, amount: 16 });
        let wheres =
            |u: &lazygrad::uop::UOp| u.toposort().iter().filter(|n| n.op() == lazygrad::uop::Ops::Where).count();
        assert_eq!(wheres(&padded.expect("the pad applies")), wheres(&ast) + 1, "the terms selected by the gate");
    }
}

/// Row `r` of a row-major matrix of `cols` columns, in float64.
fn host_row(host: &[f32], r: usize, cols: usize) -> Vec<f64> {
    host[r * cols..(r + 1) * cols].iter().map(|x| *x as f64).collect()
}

/// `exp(x - max(row))` for each `x` of `row`: a softmax's numerators.
fn exps_from_max(row: &[f64]) -> Vec<f64> {
    let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    row.iter().map(|x| (x - max).exp()).collect()
}

#[test]
fn sums_of_exponentials_and_maxes_pad_their_rows_to_whole_vectors() {
    let _serial = serial();
    Tensor::manual_seed(2);
    // 130 columns: two masked lanes short of 9 vectors of 16; the padded terms of the sum are
    // exp(x) for x = 0 unless selected away, and of the max 0 (above every row's max here)
    let a = (Tensor::rand(&[20, 130]) - 2.0).realize();
    let host: Vec<f32> = a.to_vec();
    for (t, reduce) in [(a.exp().sum(1, false), "sum"), (a.max(1, false), "max")] {
        let opts = hand_coded_optimizations(&kernel_asts(&t).remove(0), &cpu(2));
        assert_eq!(opts.first(), Some(&Opt::Padto { range: 1, amount: 16 }), "{reduce}: {opts:?}");
        assert!(opts.contains(&Opt::Unroll { range: 1, amount: 16 }), "{reduce}: {opts:?}");
        for dev in ["CPU", "INTERP"] {
            let x = a.to(dev);
            let got = if reduce == "sum" { x.exp().sum(1, false) } else { x.max(1, false) }.to_vec::<f32>();
            for (r, g) in got.iter().enumerate() {
                let row = host_row(&host, r, 130);
                let want = match reduce {
                    "sum" => row.iter().map(|x| x.exp()).sum(),
                    _ => row.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
                };
                assert!((*g as f64 - want).abs() <= 1e-5 * want.abs(), "{dev} {reduce} row {r}: {g} vs {want}");
            }
        }
    }
}

#[test]
fn a_softmax_over_a_symbolic_number_of_keys_stores_whole_vectors() {
    let _serial = serial();
    Tensor::manual_seed(4);
    // its probabilities, an elementwise kernel whose innermost loop (the keys) has a variable
    // size: padded to whole vectors, each iteration loads and stores 16 keys (the last vector's
    // lanes past the end masked), rather than 16 rows gathered key by key
    let x = Tensor::randn(&[32, 64]).realize();
    let keys = Variable::new("keys", 1, 64);
    let host: Vec<f32> = x.to_vec();
    for len in [1, 37, 64] {
        let part = first_keys(&x, &keys, len);
        let (max, sum) = (part.max(1, true).realize(), (&part - &part.max(1, true)).exp().sum(1, true).realize());
        let probs = (&part - &max).exp() / &sum;
        let asts = kernel_asts(&probs);
        let opts = hand_coded_optimizations(&asts[0], &cpu(2));
        let range = opts.iter().find_map(|o| match o {
            Opt::Padto { range, amount: 16 } => Some(*range),
            _ => None,
        });
        assert!(range.is_some_and(|range| opts.contains(&Opt::Upcast { range, amount: 16 })), "{opts:?}");
        // the last vector's mask is one compare of the lanes' offsets with the keys left
        let spec = lazygrad::codegen::get_program(&asts[0], &CRenderer).unwrap();
        let offsets = format!("(int16){{{}}}", (0..16).map(|k| k.to_string()).collect::<Vec<_>>().join(", "));
        assert!(spec.src.contains(&offsets), "{}", spec.src);
        let got = probs.to_vec::<f32>();
        for r in 0..32 {
            let exps = exps_from_max(&host_row(&host, r, 64)[..len]);
            let total: f64 = exps.iter().sum();
            for (c, e) in exps.iter().enumerate() {
                let want = e / total;
                let g = got[r * len + c] as f64;
                assert!((g - want).abs() <= 1e-5 * want.max(1e-3), "{len} keys [{r},{c}]: {g} vs {want}");
            }
        }
    }
}

#[test]
fn a_softmax_over_a_symbolic_number_of_keys_reduces_whole_vectors() {
    let _serial = serial();
    Tensor::manual_seed(3);
    // attention's softmax over a KV cache: the key loop's size is a variable; padded to whole
    // vectors of 16 (the last one masked), the max and the sum of exponentials are vector
    // accumulators instead of a scalar `exp` per key
    let x = Tensor::randn(&[6, 40]).realize();
    let keys = Variable::new("keys", 1, 40);
    let host: Vec<f32> = x.to_vec();
    for len in [1, 16, 37, 40] {
        let part = first_keys(&x, &keys, len);
        let sums = (&part - &part.max(1, true)).exp().sum(1, false);
        if len == 37 {
            let vectorized = kernel_asts(&sums)
                .iter()
                .filter(|ast| {
                    let opts = hand_coded_optimizations(ast, &cpu(2));
                    opts.iter().any(|o| matches!(o, Opt::Padto { amount: 16, .. }))
                        && opts.iter().any(|o| matches!(o, Opt::Unroll { amount: 16, .. }))
                })
                .count();
            assert_eq!(vectorized, 2, "the max and the sum each pad the key loop to vectors");
        }
        for (r, got) in sums.to_vec::<f32>().iter().enumerate() {
            let want: f64 = exps_from_max(&host_row(&host, r, 40)[..len]).iter().sum();
            assert!((*got as f64 - want).abs() <= 1e-5 * want, "{len} keys, row {r}: {got} vs {want}");
        }
    }
}

#[test]
fn zero_padded_rows_that_vectors_do_not_divide_are_stored_as_masked_vectors() {
    let _serial = serial();
    Tensor::manual_seed(6);
    // a convolution's input zero-padded by one pixel: 34-wide rows, padded to 48 lanes (three
    // vectors, the last one's 14 lanes past the row masked) instead of 34 scalar gated loads
    let x = Tensor::rand(&[2, 3, 32, 32]).realize();
    let padded = x.pad(&[(0, 0), (0, 0), (1, 1), (1, 1)]);
    let asts = kernel_asts(&padded);
    assert_eq!(asts.len(), 1);
    let opts = hand_coded_optimizations(&asts[0], &cpu(2));
    assert_eq!(opts.first(), Some(&Opt::Padto { range: 3, amount: 16 }), "{opts:?}");
    assert!(opts.contains(&Opt::Upcast { range: 3, amount: 16 }), "{opts:?}");
    let host: Vec<f32> = x.to_vec();
    for dev in ["CPU", "INTERP"] {
        let got: Vec<f32> = x.to(dev).pad(&[(0, 0), (0, 0), (1, 1), (1, 1)]).to_vec();
        for (i, g) in got.iter().enumerate() {
            let (plane, y, c) = (i / (34 * 34), i / 34 % 34, i % 34);
            let inside = (1..=32).contains(&y) && (1..=32).contains(&c);
            let want = if inside { host[plane * 1024 + (y - 1) * 32 + c - 1] } else { 0.0 };
            assert_eq!(*g, want, "{dev} [{plane},{y},{c}]");
        }
    }
}

#[test]
fn an_output_loops_padded_lanes_load_ungated_where_their_buffer_holds_them() {
    let _serial = serial();
    Tensor::manual_seed(6);
    let gated = |u: &lazygrad::uop::UOp| {
        u.toposort().iter().filter(|n| n.op() == Ops::Load && n.src()[0].src().len() > 2).count()
    };
    // the first 40 of 48 columns, plus 1: padded to 48 lanes, every row's loads stay in the
    // buffer (one unmasked vector load per row of 3); the stores past column 40 stay masked
    let x = Tensor::rand(&[30, 48]).realize();
    let y = x.shrink(&[(0, 30), (0, 40)]) + 1.0;
    let ast = kernel_asts(&y).remove(0);
    let padded = lazygrad::codegen::opt::apply_opt(&ast, Opt::Padto { range: 1, amount: 16 }).unwrap();
    assert_eq!(gated(&padded), 0, "the loads read whole rows of the 48-wide buffer");
    let spec = lazygrad::codegen::get_program(&ast, &CRenderer).unwrap();
    assert!(
        !spec.src.contains("lg_load_float16(&data") && spec.src.contains("lg_store_float16(&data0"),
        "{}",
        spec.src
    );
    let (host, got) = (x.to_vec::<f32>(), y.to_vec::<f32>());
    for (r, c) in [(0, 0), (0, 39), (17, 23), (29, 39)] {
        assert_eq!(got[r * 40 + c], host[r * 48 + c] + 1.0, "[{r},{c}]");
    }
    // 40 columns of a 40-wide `b` padded to 48: row 29's lanes 40.. lie past the buffer's end,
    // so the load keeps its gate
    let (a, b) = (Tensor::rand(&[20, 30]).realize(), Tensor::rand(&[30, 40]).realize());
    let ast = kernel_asts(&a.matmul(&b)).remove(0);
    let padded = lazygrad::codegen::opt::apply_opt(&ast, Opt::Padto { range: 1, amount: 16 }).unwrap();
    assert_eq!(gated(&padded), 1, "b's loads stay gated");
}
