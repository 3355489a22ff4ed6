//! One-hot sums, `sum_t where(ids[t] == v, x[t], 0)`: an embedding's gradient, a gather written as
//! a one-hot reduction. A tile of selected lanes shares one test of the condition per step, and
//! its loads and adds run only where the condition holds.

use super::*;

/// How a one-hot sum selects `x[t]` for row `v`.
#[derive(Clone, Copy, Debug)]
enum Select {
    /// `where(ids[t] == v, x[t], 0)`
    Equal,
    /// `where(ids[t] != v, 0, x[t])`: the same, negated
    NotDifferent,
    /// `where(ids[t] != v, x[t], 0)`: every token but the row's own
    Different,
}

/// `out[v, e] = sum_t select(ids[t], v, x[t, e])` over `vocab` rows.
fn one_hot_sum(ids: &Tensor, x: &Tensor, vocab: usize, select: Select) -> Tensor {
    let (tokens, dim) = (x.shape()[0], x.shape()[1]);
    let rows = Tensor::arange(vocab).reshape(&[vocab, 1, 1]);
    let ids = ids.reshape(&[1, tokens, 1]);
    let (x, zeros) = (x.reshape(&[1, tokens, dim]), Tensor::zeros(&[1, tokens, dim]));
    let selected = match select {
        Select::Equal => ids.eq(&rows).where_(&x, &zeros),
        Select::NotDifferent => ids.ne(&rows).where_(&zeros, &x),
        Select::Different => ids.ne(&rows).where_(&x, &zeros),
    };
    selected.sum(1, false)
}

/// In float64: each token's row of `x` added into row `ids[t]` (PyTorch's `index_add`), or with
/// `into_others`, into every row but that one.
fn index_add(ids: &[i32], x: &[f32], vocab: usize, dim: usize, into_others: bool) -> Vec<f64> {
    let mut out = vec![0.0f64; vocab * dim];
    for (t, &id) in ids.iter().enumerate() {
        for v in (0..vocab).filter(|v| (*v == id as usize) != into_others) {
            for e in 0..dim {
                out[v * dim + e] += x[t * dim + e] as f64;
            }
        }
    }
    out
}

/// Token ids below `picked` of `vocab` (the rows past it stay 0), and their gradient rows, one
/// token's holding a NaN and another's an infinity: each must reach its own row and no other.
fn tokens(tokens: usize, picked: i64, dim: usize) -> (Tensor, Tensor) {
    let ids = Tensor::randint(&[tokens], 0, picked).realize();
    let mut x = Tensor::randn(&[tokens, dim]).to_vec::<f32>();
    x[5 * dim + dim - 1] = f32::NAN;
    x[9 * dim] = f32::INFINITY;
    (ids, Tensor::from_vec(x, &[tokens, dim]).realize())
}

fn assert_index_add(what: &str, got: &[f32], ids: &Tensor, x: &Tensor, vocab: usize, into_others: bool) {
    let want = index_add(&ids.to_vec::<i32>(), &x.to_vec::<f32>(), vocab, x.shape()[1], into_others);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = (*g as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()) || (g.is_nan() && w.is_nan()) || *g as f64 == *w;
        assert!(same, "{what}: [{i}] = {g}, want {w}");
    }
}

#[test]
fn a_one_hot_sum_tests_its_condition_once_per_token_and_adds_only_the_selected_rows() {
    let _serial = serial();
    Tensor::manual_seed(21);
    let (vocab, dim) = (48, 64);
    let (ids, x) = tokens(96, 40, dim);
    for select in [Select::Equal, Select::NotDifferent, Select::Different] {
        let sum = one_hot_sum(&ids, &x, vocab, select);
        let ast = lazygrad::codegen::optimizable(&kernel_asts(&sum).remove(0)).unwrap();
        let opts = hand_coded_optimizations(&ast, &cpu(2));
        let program = lazygrad::codegen::get_program(&ast, &CRenderer).unwrap().src;
        let src = &program[program.find("static void r_").expect("the kernel")..];
        let gate = src.find("< ((long long)(");
        let into_others = matches!(select, Select::Different);
        if into_others {
            // nearly every token is selected: a test per step would only add to the work
            assert!(gate.is_none(), "{select:?}: {src}");
        } else {
            // the 64 selected lanes (4 vectors) share each token's test: no lanes along the rows
            // and no unrolled tokens, whose tests differ
            assert!(!opts.iter().any(|o| matches!(o, Opt::Unroll { .. })), "{opts:?}");
            let lanes: usize =
                opts.iter().map(|o| if let Opt::Upcast { range: 1, amount } = o { *amount } else { 1 }).product();
            assert_eq!(lanes, dim, "{opts:?}");
            // the test opens a loop of one step where it holds and none where it fails, and the
            // selected rows' loads and adds sit inside it: nothing is selected lane by lane
            let gate = gate.unwrap_or_else(|| panic!("{select:?}: no gated loop: {src}"));
            assert!(!src.contains("lg_where"), "{src}");
            let loads: Vec<usize> = src.match_indices("__builtin_memcpy(&val").map(|m| m.0).collect();
            assert_eq!(loads.len(), dim / 16, "{src}");
            assert!(loads.iter().all(|&l| l > gate), "the loads run where the test holds: {src}");
        }
        for device in ["CPU", "CL", "INTERP"] {
            let _dev = DefaultDevice::scoped(device);
            let got = one_hot_sum(&ids.to(device), &x.to(device), vocab, select).to_vec::<f32>();
            assert_index_add(&format!("{device}, {select:?}"), &got, &ids, &x, vocab, into_others);
        }
    }
}

#[test]
fn embedding_gradients_add_each_token_into_its_row_at_any_width() {
    let _serial = serial();
    Tensor::manual_seed(22);
    // 64 columns take whole vectors, 40 two and a half, 5 none; 1024 rows are the model's
    for (vocab, dim, picked) in [(48, 64, 40), (30, 40, 30), (7, 5, 6), (1024, 32, 1000)] {
        let (ids, upstream) = tokens(64, picked, dim);
        for device in ["CPU", "CL", "INTERP"] {
            let _dev = DefaultDevice::scoped(device);
            let table = lazygrad::nn::layers::Embedding { weight: Tensor::zeros(&[vocab, dim]).realize() };
            assert_eq!(table.weight.device(), device);
            let looked_up = table.forward(&ids.to(device).reshape(&[1, 64]));
            let loss = (looked_up * upstream.to(device).reshape(&[1, 64, dim])).sum(None, false);
            let got = loss.gradient(&[&table.weight])[0].to_vec::<f32>();
            assert_index_add(&format!("{device}: {vocab} rows of {dim}"), &got, &ids, &upstream, vocab, false);
        }
    }
}

/// A one-hot sum whose selected value reads the ids its condition reads (a scatter's) adds each
/// into its row, with and without opts. (The gated sum's looping substitution of such a read
/// showed on WebGPU's scalar kernels: DEV=WEBGPU torch_ref's scatter and setitem cases.)
#[test]
fn a_one_hot_sum_of_values_read_with_the_ids_adds_them_into_their_rows() {
    let _serial = serial();
    Tensor::manual_seed(23);
    let vocab = 12;
    let (ids, x) = tokens(40, 10, 1);
    let scaled = (ids.cast(lazygrad::DType::FLOAT32) * x.reshape(&[40])).reshape(&[40, 1]).realize();
    for noopt in [0, 1] {
        let _noopt = Context::new(&[("NOOPT", noopt)]);
        for device in ["CPU", "CL", "INTERP"] {
            let _dev = DefaultDevice::scoped(device);
            let (ids_here, x_here) = (ids.to(device), x.to(device));
            let value = (ids_here.cast(lazygrad::DType::FLOAT32) * x_here.reshape(&[40])).reshape(&[40, 1]);
            let got = one_hot_sum(&ids_here, &value, vocab, Select::Equal).to_vec::<f32>();
            assert_index_add(&format!("{device}, NOOPT={noopt}"), &got, &ids, &scaled, vocab, false);
        }
    }
}
