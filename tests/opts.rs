//! Kernel optimizations: the heuristics register-tile reduces, and every optimized kernel computes
//! what the unoptimized one does (up to float reassociation), on CPU and INTERP.

#[path = "opts/narrow.rs"]
mod narrow;
#[path = "opts/one_hot.rs"]
mod one_hot;
#[path = "opts/padded.rs"]
mod padded;
#[path = "opts/storage.rs"]
mod storage;

use lazygrad::codegen::opt::{hand_coded_optimizations, kernel_ranges, Opt};
use lazygrad::engine::ScheduleItem;
use lazygrad::renderer::c::CRenderer;
use lazygrad::renderer::Renderer;
use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::{ConvOpts, PoolOpts};
use lazygrad::uop::KernelName;
use lazygrad::uop::Target;
use lazygrad::uop::{Arg, AxisKind, Ops};
use lazygrad::{Context, Tensor};

/// Tests here draw from the process-wide random stream: one at a time, so that a seed gives the
/// same tensors however the tests interleave. They expect the code for AVX-512 (64-byte vectors
/// of 16 floats, 32 registers), whatever this machine has: it is generated and run here all the
/// same (the C compiler splits vectors wider than the machine's).
fn serial() -> (std::sync::MutexGuard<'static, ()>, Context) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    (LOCK.lock().unwrap_or_else(|e| e.into_inner()), Context::new(&[("VECTOR_BYTES", 64)]))
}

/// The CPU target (as `serial` sets it) with `threads` threads.
fn cpu(threads: usize) -> Target {
    Target { threads, ..CRenderer.target() }
}

/// A float32 result against its float64 sum `exact` (sums of up to a few thousand terms).
fn assert_sum(what: String, got: f32, exact: f64) {
    assert!((got as f64 - exact).abs() <= 1e-4 * (1.0 + exact.abs()), "{what} = {got}, want {exact}");
}

fn kernel_asts(t: &Tensor) -> Vec<lazygrad::uop::Kernel> {
    Tensor::schedule(std::slice::from_ref(t))
        .into_iter()
        .filter_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            ScheduleItem::Copy { .. } => None,
        })
        .collect()
}

#[test]
fn matmul_is_register_tiled_within_the_vector_registers() {
    let _serial = serial();
    Tensor::manual_seed(3);
    let (a, b) = (Tensor::rand(&[64, 64]).realize(), Tensor::rand(&[64, 64]).realize());
    let asts = kernel_asts(&a.matmul(&b));
    assert_eq!(asts.len(), 1);
    let lanes = |opts: &[Opt], id: usize| -> usize {
        let amount = |o: &Opt| match o {
            Opt::Upcast { range, amount } if *range == id => *amount,
            _ => 1,
        };
        opts.iter().map(amount).product()
    };
    // AVX-512: an 8-row by 2x16-column tile (the columns are contiguous, so 16 of their lanes
    // make one vector): 16 accumulator registers and 10 operands per step (8 row broadcasts, 2
    // column vectors), so a second step unrolled (36) would not fit the 32 registers
    let opts = hand_coded_optimizations(&asts[0], &cpu(2));
    assert!(opts.contains(&Opt::Upcast { range: 1, amount: 16 }), "columns tiled by 16: {opts:?}");
    assert_eq!((lanes(&opts, 0), lanes(&opts, 1)), (8, 32), "rows tiled by 8, columns by two vectors: {opts:?}");
    assert!(!opts.iter().any(|o| matches!(o, Opt::Unroll { .. })), "reduce not unrolled: {opts:?}");
    assert!(opts.contains(&Opt::Thread(2)), "outer loop threaded: {opts:?}");
    // AVX2 (16 registers): 4 rows by 2 vectors of 8, the vectors doubled before the rows (6
    // operands per 8 FMAs against 9 for 8 rows by 1 vector)
    let avx2 = Target { vector_bytes: 32, register_bytes: 32, ..cpu(2) };
    let opts = hand_coded_optimizations(&asts[0], &avx2);
    assert_eq!((lanes(&opts, 0), lanes(&opts, 1)), (4, 16), "AVX2 tile: {opts:?}");
    assert!(!opts.iter().any(|o| matches!(o, Opt::Unroll { .. })), "reduce not unrolled: {opts:?}");
    let _noopt = Context::new(&[("NOOPT", 1)]);
    assert!(hand_coded_optimizations(&asts[0], &cpu(2)).is_empty());
}

#[test]
fn a_linear_layer_tiles_two_rows_by_four_columns_of_vector_sums() {
    // x @ w.T reads both operands along the reduce: its lanes are vectors of k, one accumulator
    // each; 4 columns alone are half of AVX2's FMA_CHAINS, 4 columns by 2 rows all of them
    // (BEAM's choice too: 74 -> 131 GFLOP/s on the benchmark's linear row); and the columns'
    // loop outside the rows': the 32 rows of x are streamed once per column tile, rather than
    // the 32x larger w (2 MB, past a core's L2) once per row pair (131 -> 166)
    let _serial = serial();
    Tensor::manual_seed(4);
    let (x, w) = (Tensor::rand(&[32, 512]).realize(), Tensor::rand(&[1024, 512]).realize());
    let asts = kernel_asts(&x.matmul(&w.transpose(0, 1)));
    let avx2 = Target { vector_bytes: 32, register_bytes: 32, ..cpu(2) };
    let opts = hand_coded_optimizations(&asts[asts.len() - 1], &avx2);
    for want in [
        Opt::Upcast { range: 1, amount: 4 },
        Opt::Upcast { range: 0, amount: 2 },
        Opt::Unroll { range: 2, amount: 8 },
        Opt::Swap { range: 0, with: 1 },
    ] {
        assert!(opts.contains(&want), "{want:?} in {opts:?}");
    }
}

/// A named graph builder; it is called once per setting, after the same seed.
type Workload = (&'static str, Box<dyn Fn() -> Vec<Tensor>>);

/// Graphs whose kernels get every kind of opt: tiled and unrolled reduces (odd sizes too), max
/// reduces, convolutions forward and backward, a pooled conv.
fn workloads() -> Vec<Workload> {
    let conv = ConvOpts::default();
    vec![
        ("matmul 24x36x20", Box::new(|| vec![Tensor::rand(&[24, 36]).matmul(&Tensor::rand(&[36, 20]))])),
        (
            "matmul 200x100x90 (columns padded to 96, column tiles to the threads)",
            Box::new(|| vec![Tensor::randn(&[200, 100]).matmul(&Tensor::randn(&[100, 90]))]),
        ),
        (
            "relu, max with NaNs, where on 128x512 (vector elementwise)",
            Box::new(|| {
                let (x, y) = (Tensor::randn(&[128, 512]), Tensor::randn(&[128, 512]));
                // log of the negative half is NaN: max must propagate it from either side
                let nan_left = x.log().maximum(&y);
                let nan_right = y.maximum(x.log());
                vec![(&x * &y + 1.0).relu(), nan_left, nan_right, x.lt(&y).where_(&x, &y)]
            }),
        ),
        (
            "x @ w.T 40x64x36 and 20x200x12 (a vector of partial sums per output, 8 lanes for 200)",
            Box::new(|| {
                let (x, w) = (Tensor::randn(&[40, 64]), Tensor::randn(&[36, 64]));
                let (x2, w2) = (Tensor::randn(&[20, 200]), Tensor::randn(&[12, 200]));
                vec![x.matmul(&w.transpose(0, 1)), x2.matmul(&w2.transpose(0, 1))]
            }),
        ),
        (
            "causal attention 2x2x64x32 and its gradients (the mask's int32 comparisons in vector lanes)",
            Box::new(|| {
                let [q, k, v] = [0; 3].map(|_| Tensor::randn(&[2, 2, 64, 32]));
                let out = q.scaled_dot_product_attention(&k, &v, None, true);
                let mut outs = out.sum(None, false).gradient(&[&q, &k, &v]);
                outs.push(out);
                outs
            }),
        ),
        (
            "rand and randn of 4096 (Threefry's uint32 rounds in vector lanes)",
            Box::new(|| {
                vec![
                    Tensor::rand(&[4096]),
                    Tensor::randn(&[4096]),
                    Tensor::randint(&[4096], -5, 9).cast(lazygrad::DType::FLOAT32),
                ]
            }),
        ),
        (
            "relu(matmul 64x48x64) and its sum",
            Box::new(|| {
                let y = Tensor::randn(&[64, 48]).matmul(&Tensor::randn(&[48, 64])).relu();
                vec![y.sum(1, false), y]
            }),
        ),
        (
            "sums and maxes along 8x2048 rows (vector reduce lanes)",
            Box::new(|| {
                let x = Tensor::randn(&[8, 2048]);
                vec![x.sum(1, false), x.max(1, false), (&x * 2.0).relu().sum(None, false)]
            }),
        ),
        (
            "sum and max of 7x5x9",
            Box::new(|| {
                let x = Tensor::randn(&[7, 5, 9]);
                vec![x.sum(2, false), x.max(1, false), x.sum(None, false)]
            }),
        ),
        (
            "conv2d forward and backward",
            Box::new(move || {
                let x = Tensor::randn(&[4, 3, 10, 10]).requires_grad(true);
                let w = Tensor::randn(&[8, 3, 3, 3]).requires_grad(true);
                let y = x.conv2d(&w, None, &conv).relu().max_pool2d(&PoolOpts::default());
                let g = y.sum(None, false).gradient(&[&x, &w]);
                vec![y, g[0].clone(), g[1].clone()]
            }),
        ),
        (
            "channels-last conv2d (32 channels): max pool, per-channel mean, backward",
            Box::new(|| {
                let x = Tensor::randn(&[2, 3, 8, 8]).requires_grad(true);
                let w = Tensor::randn(&[32, 3, 3, 3]).requires_grad(true);
                let y = x.conv2d(&w, None, &ConvOpts::default()).relu();
                let (pooled, mean) = (y.max_pool2d(&PoolOpts::default()), y.mean([0isize, 2, 3].as_slice(), false));
                let g = (pooled.sum(None, false) + mean.sum(None, false)).gradient(&[&x, &w]);
                vec![pooled, mean, g[0].clone(), g[1].clone()]
            }),
        ),
    ]
}

fn run(make: &dyn Fn() -> Vec<Tensor>, noopt: i64) -> Vec<Vec<f32>> {
    let _ctx = Context::new(&[("NOOPT", noopt)]);
    Tensor::manual_seed(7);
    let outs = make();
    Tensor::realize_all(&outs).unwrap();
    outs.iter().map(|t| t.to_vec::<f32>()).collect()
}

#[test]
fn optimized_kernels_compute_what_unoptimized_ones_do() {
    let _serial = serial();
    for device in ["CPU", "INTERP"] {
        let _dev = DefaultDevice::scoped(device);
        for (name, make) in workloads() {
            let (want, got) = (run(make.as_ref(), 1), run(make.as_ref(), 0));
            for (w, g) in want.iter().zip(&got) {
                assert_eq!(w.len(), g.len());
                for (i, (a, b)) in w.iter().zip(g).enumerate() {
                    let close = (a - b).abs() <= 1e-5 + 1e-5 * a.abs() || (a.is_nan() && b.is_nan());
                    assert!(close, "{device} {name}: [{i}] {a} vs {b}");
                }
            }
        }
    }
}

#[test]
fn vectorized_kernels_run_bit_identical_on_cpu_and_interp() {
    let _serial = serial();
    assert_workloads_bit_identical_on_cpu_and_interp("");
}

/// The same optimized programs (vector lanes, fused multiply-adds) of every workload give the
/// same bits on CPU and INTERP; `label` starts the failure message.
fn assert_workloads_bit_identical_on_cpu_and_interp(label: &str) {
    for (name, make) in workloads() {
        let on = |device: &str| {
            let _dev = DefaultDevice::scoped(device);
            run(make.as_ref(), 0)
        };
        let (cpu, interp) = (on("CPU"), on("INTERP"));
        for (c, i) in cpu.iter().zip(&interp) {
            // every NaN reads the same: C and Rust may give NaNs different sign bits
            let bits =
                |v: &[f32]| v.iter().map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() }).collect::<Vec<u32>>();
            assert_eq!(bits(c), bits(i), "{label}{name}");
        }
    }
}

#[test]
fn narrower_vector_targets_run_bit_identical_on_cpu_and_interp() {
    let _serial = serial();
    // the code for AVX2 (32-byte vectors) and SSE (16), generated and run on this machine
    for bytes in [32, 16] {
        let _width = Context::new(&[("VECTOR_BYTES", bytes)]);
        let (a, b) = (Tensor::rand(&[64, 64]).realize(), Tensor::rand(&[64, 64]).realize());
        let ast = kernel_asts(&a.matmul(&b)).remove(0);
        let spec = lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap();
        let lanes = bytes / 4;
        assert!(spec.src.contains(&format!("typedef float float{lanes} __attribute__((vector_size({bytes})))")));
        assert!(!spec.src.contains("vector_size(64)"), "{}", spec.src);
        // at most 8 accumulators: half of the 16 registers AVX2 and SSE have
        assert!(spec.src.matches(&format!("float{lanes} acc")).count() <= 8, "{}", spec.src);
        assert_workloads_bit_identical_on_cpu_and_interp(&format!("{bytes}-byte vectors: "));
    }
}

#[test]
fn matmul_computes_in_vector_registers() {
    let _serial = serial();
    Tensor::manual_seed(3);
    let (a, b) = (Tensor::rand(&[64, 64]).realize(), Tensor::rand(&[64, 64]).realize());
    let ast = kernel_asts(&a.matmul(&b)).remove(0);
    let spec = lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap();
    // 16-float accumulators updated by vector fused multiply-adds, stored whole
    assert!(spec.src.contains("typedef float float16 __attribute__((vector_size(64)))"), "{}", spec.src);
    assert!(spec.src.matches("lg_fma_float16(").count() >= 16, "{}", spec.src);
    assert!(spec.src.contains("__builtin_memcpy(&data0["), "{}", spec.src);
    // every multiply-add of the 64x64x64 matmul is counted
    assert_eq!(spec.ops, 2 * 64 * 64 * 64);
}

#[test]
fn large_matmuls_read_the_right_operand_in_column_panels() {
    let _serial = serial();
    Tensor::manual_seed(5);
    // one kernel lays the panels out, one multiplies; a width the panels do not divide is padded
    // to whole panels, whose padded columns the product reads unmasked and stores masked (no
    // third kernel cuts a padded product back)
    for (m, k, n) in [(64, 1024, 1024), (64, 300, 1000)] {
        let (x, w) = (Tensor::randn(&[m, k]).realize(), Tensor::randn(&[k, n]).realize());
        let y = x.matmul(&w);
        let asts = kernel_asts(&y);
        assert_eq!(asts.len(), 2, "{m}x{k} @ {k}x{n}");
        let product = lazygrad::codegen::get_program(&asts[1], &CRenderer).unwrap().src;
        assert!(!product.contains("lg_load_float16(&data"), "{product}");
        let (xv, wv, yv) = (x.to_vec::<f32>(), w.to_vec::<f32>(), y.to_vec::<f32>());
        for (i, j) in [(0, 0), (3, 31), (7, 32), (63, n - 1), (11, 517), (40, n - 9)] {
            let exact: f64 = (0..k).map(|t| xv[i * k + t] as f64 * wv[t * n + j] as f64).sum();
            assert_sum(format!("y[{i},{j}]"), yv[i * n + j], exact);
        }
        // the gradient is the matmul's as built (the layout is the scheduler's): d sum(x @ w) / dx[i, t] = sum_j w[t, j]
        let xg = x.requires_grad(true);
        let g = xg.matmul(&w).sum(None, false).gradient(&[&xg]).remove(0).to_vec::<f32>();
        for t in [0, 100, k - 1] {
            let exact: f64 = (0..n).map(|j| wv[t * n + j] as f64).sum();
            assert!((g[5 * k + t] as f64 - exact).abs() <= 1e-3 * (1.0 + exact.abs()), "grad[5,{t}]");
        }
    }
}

#[test]
fn the_column_tiles_of_a_batch_of_sequences_run_outside_its_row_tiles() {
    let _serial = serial();
    Tensor::manual_seed(11);
    // GPT 512 wide: x (4, 256, 512) @ w.T, w 2048 x 512: the row tiles of each sequence (the
    // outer loop over the 4 runs either way) stream x's 0.5 MB per column tile, where each row
    // tile streamed w's 4 MB from L3 (90 -> 200 GFLOP/s); a 512 x 512 w (1 MB) stays in the L2
    // and the order with it
    for (n, swapped) in [(2048, true), (512, false)] {
        let (x, w) = (Tensor::randn(&[4, 256, 512]).realize(), Tensor::randn(&[n, 512]).realize());
        let y = x.matmul(&w.transpose(0, 1));
        let product = kernel_asts(&y).pop().expect("the product kernel");
        let opts = hand_coded_optimizations(&product, &cpu(2));
        assert_eq!(opts.contains(&Opt::Swap { range: 1, with: 2 }), swapped, "w {n} x 512: {opts:?}");
        let (xv, wv, yv) = (x.to_vec::<f32>(), w.to_vec::<f32>(), y.to_vec::<f32>());
        for (i, j) in [(0, 0), (7, 31), (8, 32), (300, n - 1), (1023, 317)] {
            let exact: f64 = (0..512).map(|t| xv[i * 512 + t] as f64 * wv[j * 512 + t] as f64).sum();
            assert_sum(format!("y[{i},{j}]"), yv[i * n + j], exact);
        }
    }
}

#[test]
fn a_stored_elementwise_weight_is_computed_into_its_panels() {
    let _serial = serial();
    Tensor::manual_seed(8);
    // `x @ (w * 0.5 + 1).contiguous().T`, as a dequantized weight is multiplied: the panels are
    // the weight's one store (its value computed into them), so one kernel lays them out and one
    // multiplies, against three with the weight stored first; a reduce reading data stays stored
    let (m, k, n) = (64, 256, 512);
    let (x, w) = (Tensor::randn(&[m, k]).realize(), Tensor::randn(&[n, k]).realize());
    let y = x.matmul(&(&w * 0.5 + 1.0).contiguous().T());
    assert_eq!(kernel_asts(&y).len(), 2);
    let summed = (&w * 0.5 + 1.0).sum(1, true).contiguous().expand(&[n, k]);
    assert_eq!(kernel_asts(&x.matmul(&summed.T())).len(), 3, "the row sums are stored, then laid out");
    let (xv, wv, yv) = (x.to_vec::<f32>(), w.to_vec::<f32>(), y.to_vec::<f32>());
    for (i, j) in [(0, 0), (5, 31), (17, 32), (63, n - 1), (40, 300)] {
        let exact: f64 = (0..k).map(|t| xv[i * k + t] as f64 * (wv[j * k + t] as f64 * 0.5 + 1.0)).sum();
        assert_sum(format!("y[{i},{j}]"), yv[i * n + j], exact);
    }
}

#[test]
fn a_weight_gradient_is_a_matmul_reading_the_output_gradient_in_panels() {
    let _serial = serial();
    Tensor::manual_seed(9);
    // d sum((x @ w) * r) / dw = x.T @ r over the 2 x 128 rows, as a forward product (summed over
    // batch and rows in place): the narrower of x and r is laid out in column panels, the other
    // copied transposed so the product reads its rows along the sum (read in place, each step of
    // the sum was a row further on). w 512 x 256: x.T copied, r in panels, the product. w 256 x
    // 512: r.T copied, x in panels, the product dw.T, its stores transposed into dw.
    for (k, n) in [(512, 256), (256, 512)] {
        let (x, r) = (Tensor::randn(&[2, 128, k]).realize(), Tensor::randn(&[2, 128, n]).realize());
        let w = Tensor::randn(&[k, n]).realize().requires_grad(true);
        let dw = (x.matmul(&w) * &r).sum(None, false).gradient(&[&w]).remove(0);
        let asts = kernel_asts(&dw);
        let names: Vec<String> = asts.iter().map(|a| KernelName::of(a.root()).to_string()).collect();
        assert_eq!(names.len(), 3, "w {k} x {n}: {names:?}");
        assert_eq!(names[1], format!("E_{}_256_32", k.min(n) / 32), "the narrower operand in panels: {names:?}");
        // the product reads its left operand along the sum with stride 1 (an index `t + ...`), the
        // panels `t * 32 + ...`
        let steps_by_one = |u: &lazygrad::uop::UOp| {
            u.op() == Ops::Add && u.src().iter().any(|s| matches!(s.arg(), Arg::Range(_, AxisKind::Reduce)))
        };
        assert!(asts[2].toposort().iter().any(steps_by_one), "{:?}", asts[2].root());
        let (xv, rv, dv) = (x.to_vec::<f32>(), r.to_vec::<f32>(), dw.to_vec::<f32>());
        for (i, j) in [(0, 0), (5, 31), (17, 32), (k - 1, n - 1), (40, 70)] {
            let exact: f64 = (0..256).map(|t| xv[t * k + i] as f64 * rv[t * n + j] as f64).sum();
            assert_sum(format!("dw[{i},{j}]"), dv[i * n + j], exact);
        }
    }
}

#[test]
fn rows_run_inside_the_panel_loop_when_the_panels_are_past_the_l2_cache() {
    let _serial = serial();
    Tensor::manual_seed(11);
    // a product read from a weight already in panels of 32 columns (a quantized matrix's panel
    // copy, dequantized): [128, k] @ panels [p, k, 32] summed over k into [128, p, 32]. Each
    // panel's 32 columns are one register tile, so its loop no longer iterates: the rows (16
    // tiles of 8) pair with the panel loop. Past the L2 cache (16 panels of 576: 1.2 MB), the
    // smaller x is the one streamed again, rows inside; 4 panels of 64 (32 KB) stay in cache
    // while the rows stream past them
    for (p, k, swapped) in [(16, 576, true), (4, 64, false)] {
        let m = 128;
        let (x, w) = (Tensor::randn(&[m, k]).realize(), Tensor::randn(&[p, k, 32]).realize());
        let y = (x.reshape(&[m, 1, k, 1]) * w.reshape(&[1, p, k, 32])).sum(2, false);
        let opts = hand_coded_optimizations(&kernel_asts(&y).remove(0), &cpu(2));
        assert_eq!(opts.contains(&Opt::Swap { range: 0, with: 1 }), swapped, "{p} panels of {k}: {opts:?}");
        let (xv, wv, yv) = (x.to_vec::<f32>(), w.to_vec::<f32>(), y.to_vec::<f32>());
        for (i, panel, j) in [(0, 0, 0), (7, 1, 31), (64, 2, 5), (127, p - 1, 31), (33, 3, 16)] {
            let exact: f64 = (0..k).map(|t| xv[i * k + t] as f64 * wv[(panel * k + t) * 32 + j] as f64).sum();
            assert_sum(format!("y[{i},{panel},{j}]"), yv[(i * p + panel) * 32 + j], exact);
        }
    }
}

#[test]
fn threads_share_an_inner_loop_when_the_outer_one_is_too_short_to_split_evenly() {
    let _serial = serial();
    Tensor::manual_seed(10);
    // 3 heads of 128 x 64 @ 64 x 128 on 2 threads: padded to 4 heads, a quarter of the work
    // would be masked; the 128 rows run outermost and split in halves instead
    let (q, k) = (Tensor::randn(&[3, 128, 64]).realize(), Tensor::randn(&[3, 64, 128]).realize());
    let scores = q.matmul(&k);
    let opts = hand_coded_optimizations(&kernel_asts(&scores).remove(0), &cpu(2));
    assert!(opts.ends_with(&[Opt::Thread(2)]), "{opts:?}");
    assert!(opts.iter().any(|o| matches!(o, Opt::Swap { range: 0, .. })), "{opts:?}");
    assert!(!opts.iter().any(|o| matches!(o, Opt::Padto { range: 0, .. })), "{opts:?}");
    let (qv, kv, sv) = (q.to_vec::<f32>(), k.to_vec::<f32>(), scores.to_vec::<f32>());
    for (h, i, j) in [(0, 0, 0), (1, 63, 64), (2, 127, 127), (2, 5, 90)] {
        let exact: f64 = (0..64).map(|t| qv[h * 8192 + i * 64 + t] as f64 * kv[h * 8192 + t * 128 + j] as f64).sum();
        assert_sum(format!("s[{h},{i},{j}]"), sv[h * 16384 + i * 128 + j], exact);
    }
}

#[test]
fn elementwise_kernels_compute_whole_vectors_and_stream_large_outputs() {
    let _serial = serial();
    let program = |t: &Tensor| {
        let ast = kernel_asts(t).remove(0);
        lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap().src
    };
    let (a, b) = (Tensor::rand(&[256, 512]).realize(), Tensor::rand(&[256, 512]).realize());
    // relu is a max against zero: one max instruction, not masks and a select
    let src = program(&(&a * &b + 1.0).relu());
    assert!(src.contains("lg_max_over_float16(") && src.contains("lg_fma_float16("), "{src}");
    assert!(!src.contains("lg_where_float16(alu"), "{src}");
    assert!(!src.contains("lg_stream_float16(&"), "a 512 KB output stays in cache: {src}");
    // a 32 MB output is written around the caches, then fenced
    let big = Tensor::rand(&[1 << 23]).realize();
    let src = program(&big.neg());
    assert!(src.contains("lg_stream_float16(&data0[") && src.contains("sfence"), "{src}");
    // reads gated by padding are masked vector loads
    let padded = a.pad(&[(0, 0), (3, 13)]) * 2.0;
    let src = program(&padded);
    assert!(src.contains("float16 val0 = lg_load_float16(&data1["), "{src}");
    let (av, got) = (a.to_vec::<f32>(), padded.to_vec::<f32>());
    for (i, j) in [(0, 0), (0, 2), (0, 3), (5, 514), (5, 515), (255, 527)] {
        let want = if (3..515).contains(&j) { 2.0 * av[i * 512 + j - 3] } else { 0.0 };
        assert_eq!(got[i * 528 + j], want, "padded[{i},{j}]");
    }
}

#[test]
fn small_elementwise_kernels_and_square_roots_compute_whole_vectors() {
    let _serial = serial();
    Tensor::manual_seed(6);
    // Adam's update divides by a square root: over a 128x128 weight (one thread's worth of work)
    // it still computes 16 lanes at a time, the root with one vector instruction
    let (m, v) = (Tensor::randn(&[128, 128]).realize(), Tensor::rand(&[128, 128]).realize());
    let update = &m / (v.sqrt() + 1e-8);
    let ast = kernel_asts(&update).remove(0);
    assert!(hand_coded_optimizations(&ast, &cpu(2)).contains(&Opt::Upcast { range: 1, amount: 16 }));
    let src = lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap().src;
    assert!(src.contains("lg_sqrt_float16(val"), "{src}");
    // IEEE square root, add and divide are correctly rounded: the result is exact in f32
    let (mv, vv, got) = (m.to_vec::<f32>(), v.to_vec::<f32>(), update.to_vec::<f32>());
    for i in 0..got.len() {
        let want = mv[i] / (vv[i].sqrt() + 1e-8);
        assert_eq!(got[i].to_bits(), want.to_bits(), "update[{i}] = {}, want {want}", got[i]);
    }
}

#[test]
fn swapping_two_loops_twice_is_the_same_kernel() {
    let _serial = serial();
    // equal sizes too: the renamed loops are each other's old selves
    for (m, n) in [(64, 64), (32, 96)] {
        let (a, b) = (Tensor::rand(&[m, 48]).realize(), Tensor::rand(&[48, n]).realize());
        let ast = kernel_asts(&a.matmul(&b)).remove(0);
        let swap = Opt::Swap { range: 0, with: 1 };
        let once = lazygrad::codegen::opt::apply_opt(&ast, swap).expect("two output loops swap");
        assert_ne!(&once, ast.root());
        assert_eq!(lazygrad::codegen::opt::apply_opt(&once, swap).as_ref(), Some(ast.root()));
    }
}

/// Check the NCHW convolution `z` at `points` (n, co, oy, ox) against float64 sums over the
/// channels-last `h`x`h` images `x`, each value first passed through `input` with its channel,
/// and the `k`x`k` weights `w` from `cin` to `cout` channels.
fn assert_nhwc_conv(
    (x, h, input): (&Tensor, usize, impl Fn(f32, usize) -> f32),
    (w, cin, cout, k): (&Tensor, usize, usize, usize),
    z: &Tensor,
    points: &[(usize, usize, usize, usize)],
) {
    let (x, wv, got) = (x.to_vec::<f32>(), w.to_vec::<f32>(), z.to_vec::<f32>());
    let o = h - k + 1;
    for &(n, co, oy, ox) in points {
        let mut want = 0f64;
        for ci in 0..cin {
            for (ky, kx) in (0..k).flat_map(|ky| (0..k).map(move |kx| (ky, kx))) {
                let v = input(x[((n * h + oy + ky) * h + ox + kx) * cin + ci], ci) as f64;
                want += v * wv[((co * cin + ci) * k + ky) * k + kx] as f64;
            }
        }
        let got = got[((n * cout + co) * o + oy) * o + ox] as f64;
        assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "z[{n},{co},{oy},{ox}] = {got}, want {want}");
    }
}

/// A `k`x`k` convolution from `cin` to `cout` channels over random channels-last `h`x`h` images (two
/// of them): the heuristics' opts for its kernel; its result is checked against float64 sums at a
/// few output points.
fn channels_last_conv_opts(seed: u64, h: usize, (cin, cout, k): (usize, usize, usize)) -> Vec<Opt> {
    Tensor::manual_seed(seed);
    let nhwc = Tensor::randn(&[2, h, h, cin]).realize();
    let w = Tensor::randn(&[cout, cin, k, k]).realize();
    let z = nhwc.permute(&[0, 3, 1, 2]).conv2d(&w, None, &ConvOpts::default());
    // the one kernel that reduces (the others lay out the weights and the result)
    let ast = kernel_asts(&z).into_iter().find(|a| KernelName::of(a).to_string().starts_with("r_")).expect("a conv");
    let opts = hand_coded_optimizations(&ast, &cpu(2));
    let o = h - k + 1;
    let points = [(0, 0, 0, 0), (1, cout - 1, o - 1, o - 1), (0, cout / 2, 1, o - 2), (1, 5, o / 2, 3)];
    assert_nhwc_conv((&nhwc, h, |v, _| v), (&w, cin, cout, k), &z, &points);
    opts
}

#[test]
fn convolution_tiles_take_a_second_output_row_when_registers_are_left() {
    let _serial = serial();
    // beautiful_mnist's second convolution, 32 -> 32 channels 5x5 over 24x24 images: 4 output
    // columns (20 is no multiple of 8) by two vectors of channels fill 8 of the 16 accumulator
    // registers, so two output rows share every weight load
    let opts = channels_last_conv_opts(9, 24, (32, 32, 5));
    assert!(opts.contains(&Opt::Upcast { range: 1, amount: 2 }), "output rows tiled by 2: {opts:?}");
    let lanes: usize = opts.iter().map(|o| if let Opt::Upcast { amount, .. } = o { *amount } else { 1 }).product();
    assert_eq!(lanes, 16 * 16, "16 accumulator vectors: {opts:?}");
}

#[test]
fn a_one_channel_convolution_is_computed_channels_last() {
    let _serial = serial();
    Tensor::manual_seed(10);
    // beautiful_mnist's first convolution, 1 -> 32 channels 5x5: with one input channel the
    // windows' permute is a reshape; computed channels last, its output channels are two vectors
    // sharing each input load (its NCHW kernel, lanes along the output rows, took 4x as long)
    let nhwc = Tensor::randn(&[2, 12, 12, 1]).realize();
    let w = Tensor::randn(&[32, 1, 5, 5]).realize();
    let z = nhwc.permute(&[0, 3, 1, 2]).conv2d(&w, None, &ConvOpts::default());
    let names: Vec<String> = kernel_asts(&z).iter().map(|a| KernelName::of(a).to_string()).collect();
    assert!(names.contains(&"r_2_8_8_32_5_5".to_string()), "output channels innermost: {names:?}");
    assert_nhwc_conv((&nhwc, 12, |v, _| v), (&w, 1, 32, 5), &z, &[(0, 0, 0, 0), (1, 31, 7, 7), (0, 16, 3, 5)]);
}

#[test]
fn a_ten_wide_output_row_is_tiled_by_five_next_to_a_channel_vector() {
    let _serial = serial();
    // 64 -> 32 channels 3x3 into 10x10 outputs: the output columns share input loads across the
    // window, so they are tiled (by 5, then 2) rather than the images (10-20% slower)
    let opts = channels_last_conv_opts(4, 12, (64, 32, 3));
    assert!(opts.contains(&Opt::Upcast { range: 2, amount: 5 }), "output columns tiled by 5: {opts:?}");
    assert!(!opts.iter().any(|o| matches!(o, Opt::Upcast { range: 0, .. })), "images not tiled: {opts:?}");
}

#[test]
fn reduce_loops_longer_than_a_window_row_unroll_by_a_divisor_up_to_four() {
    let _serial = serial();
    Tensor::manual_seed(5);
    // the weight gradient of a 3x3 convolution with 8x8 outputs reduces over the 8 output columns
    // innermost: unrolled whole, its 12-accumulator tile ran 5-15% slower than unrolled by 4
    let (x, g) = conv_weight_gradient(&[4, 32, 10, 10], &[64, 32, 3, 3]);
    let mut by_part = 0;
    for ast in kernel_asts(&g) {
        let ranges = kernel_ranges(&ast);
        for opt in hand_coded_optimizations(&ast, &cpu(2)) {
            if let Opt::Unroll { range, amount } = opt {
                let size = ranges.iter().find(|r| r.0 == range).expect("an unrolled loop").2;
                // whole up to 5, else a divisor up to 4, less where the registers run out
                let most = if size <= 5 { size } else { 4 };
                assert!(
                    size % amount == 0 && amount <= most,
                    "{amount} of a loop of {size} in {}",
                    KernelName::of(&ast)
                );
                by_part += usize::from(size == 8 && (amount == 2 || amount == 4));
            }
        }
    }
    assert!(by_part > 0, "the 8 output columns are unrolled in part");
    assert_tap_sums(&x, &g, 3, &[(0, 0, 0, 0), (63, 31, 2, 2), (5, 17, 1, 0), (40, 3, 0, 2)], 1e-4);
}

/// `x` and the weight gradient of `sum(conv2d(x, w))`, both random, `w` of shape `ws`.
fn conv_weight_gradient(xs: &[usize], ws: &[usize]) -> (Tensor, Tensor) {
    let x = Tensor::randn(xs).realize();
    let w = Tensor::randn(ws).realize().requires_grad(true);
    let g = x.conv2d(&w, None, &ConvOpts::default()).sum(None, false).gradient(&[&w]).remove(0);
    (x, g)
}

/// `dw[co, ci, ky, kx]` of `sum(conv2d(x, w))` for a square `k`-wide kernel at each of `taps` is
/// the sum of the inputs that tap meets, within `tol` relative.
fn assert_tap_sums(x: &Tensor, dw: &Tensor, k: usize, taps: &[(usize, usize, usize, usize)], tol: f64) {
    let &[batch, cin, h, w] = x.shape().as_slice() else { panic!("a 4-d input") };
    let (oh, ow) = (h - k + 1, w - k + 1);
    let (xv, got) = (x.to_vec::<f32>(), dw.to_vec::<f32>());
    for &(co, ci, ky, kx) in taps {
        let want: f64 = (0..batch)
            .flat_map(|b| (0..oh).flat_map(move |oy| (0..ow).map(move |ox| (b, oy, ox))))
            .map(|(b, oy, ox)| xv[((b * cin + ci) * h + oy + ky) * w + ox + kx] as f64)
            .sum();
        let got = got[((co * cin + ci) * k + ky) * k + kx] as f64;
        assert!((got - want).abs() <= tol * (1.0 + want.abs()), "dw[{co},{ci},{ky},{kx}] = {got}, want {want}");
    }
}

#[test]
fn a_ten_wide_output_axis_is_upcast_by_five() {
    let _serial = serial();
    // a classifier head: 10 outputs, which neither 4 nor a vector divides
    let (ast, check) = random_matmul(12, (64, 576, 10));
    let opts = hand_coded_optimizations(&ast, &cpu(2));
    assert!(opts.contains(&Opt::Upcast { range: 1, amount: 5 }), "{opts:?}");
    check();
}

#[test]
fn a_matmul_with_a_transposed_weight_keeps_a_vector_of_partial_sums_per_output() {
    let _serial = serial();
    Tensor::manual_seed(13);
    // `x @ w.T` (a linear layer): both operands are contiguous along the reduction and neither
    // along an output, so a vector of outputs would be gathered a lane at a time (~100 GFLOP/s,
    // against ~200 for this tile)
    let (m, k, n) = (48, 64, 40);
    let (x, w) = (Tensor::randn(&[m, k]).realize(), Tensor::randn(&[n, k]).realize());
    let y = x.matmul(&w.transpose(0, 1));
    let ast = kernel_asts(&y).remove(0);
    let opts = hand_coded_optimizations(&ast, &cpu(2));
    let vl = cpu(2).float_lanes();
    assert!(opts.contains(&Opt::Unroll { range: 2, amount: vl }), "the reduction in vector lanes: {opts:?}");
    for range in [0, 1] {
        assert!(opts.contains(&Opt::Upcast { range, amount: 4 }), "a 4x4 tile of outputs: {opts:?}");
    }
    let spec = lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap();
    let accumulators = spec.src.matches(&format!("float{vl} acc")).count();
    assert_eq!(accumulators, 16, "a vector accumulator per output: {}", spec.src);
    // held in registers where one holds them (the vectors are split on a machine without AVX-512)
    let pinned = if cpu(2).register_bytes == 64 { 8 } else { 0 };
    assert_eq!(spec.src.matches("LG_IN_REGISTER(val").count(), pinned, "4 + 4 loads held in registers: {}", spec.src);
    // each row's 4 accumulators are combined together and stored as one vector of 4 results
    assert_eq!(spec.src.matches("__builtin_memcpy(&data0[").count(), 4, "{}", spec.src);
    assert!(spec.src.contains("float4 "), "{}", spec.src);
    assert_matches_x_wt(&x, &w, &y);
    // a 1000-long reduction is padded to whole vectors (8 lanes ran at 60%), its last one masked
    let (x, w) = (Tensor::randn(&[8, 1000]).realize(), Tensor::randn(&[4, 1000]).realize());
    let y = x.matmul(&w.transpose(0, 1));
    let opts = hand_coded_optimizations(&kernel_asts(&y).remove(0), &cpu(2));
    assert!(opts.contains(&Opt::Padto { range: 2, amount: vl }), "{opts:?}");
    assert!(opts.contains(&Opt::Unroll { range: 2, amount: vl }), "{opts:?}");
    assert_matches_x_wt(&x, &w, &y);
}

/// Every entry of `y = x @ w.T` against the float64 dot product of a row of `x` and one of `w`.
fn assert_matches_x_wt(x: &Tensor, w: &Tensor, y: &Tensor) {
    let (k, n) = (x.shape()[1], w.shape()[0]);
    let (xv, wv, yv) = (x.to_vec::<f32>(), w.to_vec::<f32>(), y.to_vec::<f32>());
    for (i, row) in xv.chunks(k).enumerate() {
        for (j, col) in wv.chunks(k).enumerate() {
            let exact: f64 = row.iter().zip(col).map(|(a, b)| *a as f64 * *b as f64).sum();
            assert_sum(format!("y[{i},{j}]"), yv[i * n + j], exact);
        }
    }
}

/// A random `m×k @ k×n` matmul's kernel, and a check of every entry of its result against the
/// float64 dot product.
fn random_matmul(seed: u64, (m, k, n): (usize, usize, usize)) -> (lazygrad::uop::Kernel, impl Fn()) {
    Tensor::manual_seed(seed);
    let (a, b) = (Tensor::randn(&[m, k]).realize(), Tensor::randn(&[k, n]).realize());
    let c = a.matmul(&b);
    let ast = kernel_asts(&c).remove(0);
    let check = move || {
        let (av, bv, cv) = (a.to_vec::<f32>(), b.to_vec::<f32>(), c.to_vec::<f32>());
        assert_eq!(cv.len(), m * n);
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k).map(|t| av[i * k + t] as f64 * bv[t * n + j] as f64).sum();
                assert!((cv[i * n + j] as f64 - exact).abs() <= 1e-4 * (1.0 + exact.abs()), "c[{i},{j}]");
            }
        }
    };
    (ast, check)
}

#[test]
fn odd_sized_matmuls_pad_to_whole_vector_tiles_and_threads() {
    let _serial = serial();
    let (ast, check) = random_matmul(11, (200, 100, 90));
    let opts = hand_coded_optimizations(&ast, &cpu(2));
    // 90 columns pad to 96 (tiles of two 16-float vectors, the last one masked); the 3 column
    // tiles run outside the 25 row tiles, padded to 4 for 2 threads
    assert_eq!(opts.first(), Some(&Opt::Padto { range: 1, amount: 32 }), "{opts:?}");
    assert!(opts.contains(&Opt::Upcast { range: 1, amount: 16 }), "{opts:?}");
    assert!(opts.ends_with(&[Opt::Padto { range: 0, amount: 2 }, Opt::Thread(2)]), "{opts:?}");
    let spec = lazygrad::codegen::get_program(&ast, &lazygrad::renderer::c::CRenderer).unwrap();
    assert!(
        spec.src.contains("lg_load_float16(&data2[") && spec.src.contains("lg_store_float16(&data0["),
        "{}",
        spec.src
    );
    assert_eq!(spec.name.to_string().split('_').nth(1), Some("2"), "threaded: {}", spec.name);
    // padded iterations compute nothing that lands: every entry is the float64 dot product
    check();
}

#[test]
fn upcast_lanes_that_share_a_reduce_loop_share_where_it_runs() {
    let _serial = serial();
    // an indexed set: nested reduces in one kernel; with the 4-wide output axis upcast, some
    // lanes' counts simplify to depend on fewer loops than others', yet all lanes share the loops
    let ar = Tensor::arange(24).reshape(&[2, 3, 4]).cast(lazygrad::DType::INT32).permute(&[2, 0, 1]);
    let (rows, cols) = (Tensor::new([3, 0]).realize(), Tensor::new([0, 1]).realize());
    let t = ar.set(&lazygrad::s![rows, 1, cols], 50);
    let mut items = Tensor::schedule(std::slice::from_ref(&t));
    assert_eq!(items.len(), 1);
    let ScheduleItem::Kernel { ast, bufs } = items.remove(0) else { panic!("a kernel") };
    let opts = [Opt::Upcast { range: 0, amount: 4 }, Opt::Unroll { range: 5, amount: 3 }];
    for device in ["CPU", "INTERP"] {
        let dev = lazygrad::runtime::get_device(device).unwrap();
        let spec = lazygrad::codegen::get_program_opts(&ast, &*lazygrad::renderer::for_target(dev.target()), &opts, "")
            .unwrap();
        lazygrad::engine::CompiledKernel::compile(&*dev, &ast, &spec).unwrap().launch(&bufs, &[]).unwrap();
        let got: Vec<i32> =
            bufs[0].copyout().unwrap().chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
        // out[i, j, k] = ar value 12j + 4k + i, but 50 at j = 1 and (i, k) in {(3, 0), (0, 1)}
        for (n, v) in got.iter().enumerate() {
            let (i, j, k) = (n / 6, n / 3 % 2, n % 3);
            let want = if j == 1 && [(3, 0), (0, 1)].contains(&(i, k)) { 50 } else { (12 * j + 4 * k + i) as i32 };
            assert_eq!(*v, want, "{device} [{i},{j},{k}]");
        }
    }
}

#[test]
fn a_one_channel_convs_weight_gradient_tiles_its_window_row_when_nothing_else_tiles() {
    let _serial = serial();
    Tensor::manual_seed(6);
    // dw[co, 0, ky, kx]: with one input channel the only axes besides the output channels'
    // vector are the 5-wide window's; a row of it (5 accumulators of 8 on AVX2) shares each load
    // of the output gradient
    let (x, g) = conv_weight_gradient(&[8, 1, 12, 12], &[32, 1, 5, 5]);
    let avx2 = Target { vector_bytes: 32, register_bytes: 32, ..cpu(2) };
    let tiled = kernel_asts(&g).iter().any(|ast| {
        let opts = hand_coded_optimizations(ast, &avx2);
        opts.iter().any(|o| matches!(o, Opt::Upcast { amount: 5, .. }))
            && opts.iter().any(|o| matches!(o, Opt::Upcast { amount: 8, .. }))
    });
    assert!(tiled, "a kernel tiles 8 channels by 5 window taps");
    assert_tap_sums(&x, &g, 5, &[(0, 0, 0, 0), (31, 0, 4, 4), (7, 0, 2, 1)], 1e-3);
}
