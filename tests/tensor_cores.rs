//! Tensor cores (the TC opt, `codegen/opt/tensor_core.rs`): on INTERP with `EMULATE_CUDA=1`,
//! which runs each WMMA warp by warp from the fragment layouts of `uop/wmma.rs` (or with
//! `DEV=CUDA` on the GPU's own tensor cores), float16 and
//! bfloat16 matmuls computed by tensor cores give the exact products (summed in float64, rounded
//! as the instruction rounds), alone and with the opts that may follow TC; with `EMULATE_METAL=1`
//! Metal's `simdgroup_matrix` layout does the same for float16 and float32 matmuls; the
//! heuristics and BEAM offer TC where the target has tensor cores; the CUDA renderer emits
//! `mma.sync`, which NVRTC builds for sm_90 under `NVRTC_CHECK`, and the Metal renderer
//! `simdgroup_multiply_accumulate`, which passes the MSL check (clang++ against `tools/msl`).

use std::sync::Arc;

use lazygrad::codegen::opt::{hand_coded_optimizations, search::actions, Opt};
use lazygrad::codegen::{get_program, get_program_opts, optimizable};
use lazygrad::dtype::DType;
use lazygrad::engine::CompiledKernel;
use lazygrad::renderer::cuda::CudaRenderer;
use lazygrad::renderer::listing::ListingRenderer;
use lazygrad::renderer::metal::MetalRenderer;
use lazygrad::renderer::Renderer;
use lazygrad::runtime::{get_device, Buffer};
use lazygrad::uop::wmma::{
    TensorCore, MMA_M16N8K16_BF16_F32, MMA_M16N8K16_F16_F32, MMA_M16N8K8_TF32_F32, SIMDGROUP_8X8X8_F16_F32,
    SIMDGROUP_8X8X8_F32_F32,
};
use lazygrad::uop::{Kernel, Ops};
use lazygrad::{Context, Tensor};

mod common;
use common::only_kernel;

/// The kernel's float32 output after running it with `opts` on the device its buffers are on
/// when that has tensor cores (`DEV=CUDA` on a GPU), else on INTERP (host memory, which INTERP
/// reads too).
fn run(ast: &Kernel, bufs: &[Arc<Buffer>], opts: &[Opt]) -> Vec<f32> {
    let dev = match get_device(bufs[0].device()).unwrap() {
        d if !d.target().tensor_cores.is_empty() => d,
        _ => get_device("INTERP").unwrap(),
    };
    let spec = get_program_opts(ast, &*lazygrad::renderer::for_target(dev.target()), opts, "")
        .unwrap_or_else(|e| panic!("{opts:?}: {e}"));
    assert!(spec.uops.iter().any(|u| u.op() == Ops::Wmma), "{opts:?}: no tensor core in the program");
    CompiledKernel::compile(&*dev, ast, &spec).unwrap().launch(bufs, &[]).unwrap_or_else(|e| panic!("{opts:?}: {e}"));
    bufs[0].copyout().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// `[batch, m, k] @ [batch, k, n]` of values exact in `dtype`, as float32 (from `dtype`), and the
/// exact products rounded to float32.
fn inputs(shape: [usize; 4], dtype: DType, seed: u64) -> (Tensor, Tensor, Vec<f32>) {
    let [batch, m, k, n] = shape;
    Tensor::manual_seed(seed);
    let a = Tensor::randn(&[batch, m, k]).cast(dtype).realize();
    let b = Tensor::randn(&[batch, k, n]).cast(dtype).realize();
    let (av, bv) = (a.cast(DType::FLOAT32).to_vec::<f32>(), b.cast(DType::FLOAT32).to_vec::<f32>());
    let exact = (0..batch * m * n)
        .map(|o| {
            let (p, i, j) = (o / (m * n), o / n % m, o % n);
            let dot: f64 = (0..k).map(|t| av[(p * m + i) * k + t] as f64 * bv[(p * k + t) * n + j] as f64).sum();
            dot as f32
        })
        .collect();
    (a, b, exact)
}

/// Within float32 rounding of the partial sums (one per `k` step of 16).
fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{what}: [{i}] {g}, want {w}");
    }
}

fn emulate() -> Context {
    Context::new(&[("EMULATE_CUDA", 1)])
}

#[test]
fn tensor_core_matmuls_give_the_exact_products() {
    let _tc = emulate();
    for (dtype, tc) in [(DType::FLOAT16, &MMA_M16N8K16_F16_F32), (DType::BFLOAT16, &MMA_M16N8K16_BF16_F32)] {
        // loops: 0 rows (32), 1 columns (16), 2 the reduce (48)
        let (a, b, exact) = inputs([1, 32, 48, 16], dtype, 41);
        let (a, b) = (a.reshape(&[32, 48]), b.reshape(&[48, 16]));
        let (ast, bufs) = only_kernel(&a.cast(DType::FLOAT32).matmul(&b.cast(DType::FLOAT32)));
        let tc_opt = |m, n| Opt::TensorCore { tc, m, n, k: 2 };
        let cases: Vec<Vec<Opt>> = vec![
            vec![tc_opt(0, 1)],
            // the transposed product: B's factor as A
            vec![tc_opt(1, 0)],
            // two tiles per warp along the columns, two along the rows with the k steps unrolled
            vec![tc_opt(0, 1), Opt::Upcast { range: 1, amount: 2 }],
            vec![tc_opt(0, 1), Opt::Upcast { range: 0, amount: 2 }, Opt::Unroll { range: 2, amount: 3 }],
            // two warps to a workgroup
            vec![tc_opt(0, 1), Opt::Local { range: 0, amount: 2 }, Opt::Unroll { range: 2, amount: 3 }],
        ];
        for opts in cases {
            assert_close(&run(&ast, &bufs, &opts), &exact, &format!("{dtype:?} {opts:?}"));
        }
    }
}

#[test]
fn tensor_cores_take_batches_half_outputs_and_single_k_steps() {
    let _tc = emulate();
    let tc = &MMA_M16N8K16_F16_F32;
    // a batch of 2 (loop 0) of 16x16 @ 16x24: k is one tile, so no reduce loop is left
    let (a, b, exact) = inputs([2, 16, 16, 24], DType::FLOAT16, 42);
    let (ast, bufs) = only_kernel(&a.matmul(&b).cast(DType::FLOAT32));
    let opts = hand_coded_optimizations(&optimizable(&ast).unwrap(), &ListingRenderer.target());
    assert!(matches!(opts[0], Opt::TensorCore { tc: t, .. } if std::ptr::eq(t, tc)), "{opts:?}");
    // the float16 output rounds the float32 sums once more
    let want: Vec<f32> = exact.iter().map(|x| half::f16::from_f32(*x).to_f32()).collect();
    assert_close(&run(&ast, &bufs, &opts), &want, &format!("{opts:?}"));
}

#[test]
fn the_heuristics_and_beam_offer_tensor_cores_only_where_the_target_has_them() {
    let (a, b, _) = inputs([1, 64, 32, 32], DType::FLOAT16, 43);
    let (a, b) = (a.reshape(&[64, 32]), b.reshape(&[32, 32]));
    let (ast, _) = only_kernel(&a.matmul(&b));
    let ast = optimizable(&ast).unwrap();
    let is_tc = |o: &Opt| matches!(o, Opt::TensorCore { .. });
    let plain = ListingRenderer.target();
    assert!(!hand_coded_optimizations(&ast, &plain).iter().any(is_tc));
    assert!(!actions(&ast, &plain).iter().any(is_tc));
    let err = get_program_opts(
        &ast,
        &ListingRenderer,
        &[Opt::TensorCore { tc: &MMA_M16N8K16_F16_F32, m: 0, n: 1, k: 2 }],
        "",
    );
    assert!(err.unwrap_err().to_string().contains("tensor core"), "a target without tensor cores refuses TC");
    let _tc = emulate();
    let with = ListingRenderer.target();
    let opts = hand_coded_optimizations(&ast, &with);
    assert!(is_tc(&opts[0]), "{opts:?}");
    let offered: Vec<Opt> = actions(&ast, &with).into_iter().filter(is_tc).collect();
    // m and n each of the two loops, the float16 tensor core only (the inputs are float16)
    let tc: &'static TensorCore = &MMA_M16N8K16_F16_F32;
    assert_eq!(
        offered,
        [Opt::TensorCore { tc, m: 0, n: 1, k: 2 }, Opt::TensorCore { tc, m: 1, n: 0, k: 2 }],
        "the innermost loop as n first"
    );
    // a float32 matmul and a reduce that is no product get none
    let f = Tensor::rand(&[32, 32]).realize();
    for t in [f.matmul(&f), a.cast(DType::FLOAT32).sum(1, false)] {
        let (ast, _) = only_kernel(&t);
        assert!(!actions(&optimizable(&ast).unwrap(), &with).iter().any(is_tc));
    }
}

/// `x` rounded to TF32: 10 mantissa bits, ties away from zero.
fn tf32(x: f32) -> f32 {
    f32::from_bits(x.to_bits().wrapping_add(1 << 12) & !((1 << 13) - 1))
}

#[test]
fn float32_matmuls_take_tf32_tensor_cores_only_when_allowed() {
    let _tc = emulate();
    Tensor::manual_seed(45);
    let (a, b) = (Tensor::randn(&[32, 48]).realize(), Tensor::randn(&[48, 16]).realize());
    let (ast, bufs) = only_kernel(&a.matmul(&b));
    let is_tc = |o: &Opt| matches!(o, Opt::TensorCore { .. });
    assert!(
        !hand_coded_optimizations(&optimizable(&ast).unwrap(), &ListingRenderer.target()).iter().any(is_tc),
        "off by default"
    );
    let _tf32 = Context::new(&[("ALLOW_TF32", 1)]);
    let opts = hand_coded_optimizations(&optimizable(&ast).unwrap(), &ListingRenderer.target());
    assert!(matches!(opts[0], Opt::TensorCore { tc, .. } if std::ptr::eq(tc, &MMA_M16N8K8_TF32_F32)), "{opts:?}");
    let (av, bv) = (a.to_vec::<f32>(), b.to_vec::<f32>());
    let product = |round: fn(f32) -> f32| -> Vec<f32> {
        let dot = |i: usize, j: usize| {
            (0..48).map(|t| round(av[i * 48 + t]) as f64 * round(bv[t * 16 + j]) as f64).sum::<f64>()
        };
        (0..32 * 16).map(|o| dot(o / 16, o % 16) as f32).collect()
    };
    let got = run(&ast, &bufs, &opts);
    assert_close(&got, &product(tf32), &format!("{opts:?}"));
    let float32 = product(|x| x);
    assert!(got.iter().zip(&float32).any(|(g, f)| (g - f).abs() > 1e-4), "the inputs were read as TF32");
}

#[test]
fn cuda_renders_mma_sync_and_nvrtc_builds_it() {
    let sm_90 = || CudaRenderer::for_arch("sm_90").unwrap();
    assert_eq!(sm_90().target().tensor_cores.len(), 2, "sm_90 has the float16 and bfloat16 mma, TF32 when allowed");
    assert!(CudaRenderer::for_arch("sm_75").unwrap().target().tensor_cores.is_empty());
    let _tf32 = Context::new(&[("ALLOW_TF32", 1)]);
    // a target is read when its renderer is made
    let renderer = sm_90();
    assert_eq!(renderer.target().tensor_cores.len(), 3);
    for (dtype, mma) in [
        (DType::FLOAT16, "m16n8k16.row.col.f32.f16.f16.f32"),
        (DType::BFLOAT16, "m16n8k16.row.col.f32.bf16.bf16.f32"),
        (DType::FLOAT32, "m16n8k8.row.col.f32.tf32.tf32.f32"),
    ] {
        let (a, b, _) = inputs([1, 64, 64, 64], dtype, 44);
        let (a, b) = (a.reshape(&[64, 64]), b.reshape(&[64, 64]));
        let (ast, _) = only_kernel(&a.matmul(&b));
        let spec = get_program(&ast, &renderer).unwrap();
        let src = &spec.src;
        assert!(src.contains(&format!("mma.sync.aligned.{mma}")), "{src}");
        let threads: usize = spec.local_size.unwrap().iter().product();
        assert!(threads.is_multiple_of(32), "whole warps: {:?}", spec.local_size);
        if std::env::var("NVRTC_CHECK").is_ok() {
            let cubin = lazygrad::runtime::cuda::nvrtc_compile(src, "sm_90").unwrap_or_else(|e| panic!("{e}\n{src}"));
            assert_eq!(&cubin[..4], b"\x7fELF", "a cubin is an ELF image");
        }
    }
}

#[test]
fn metal_simdgroup_matmuls_match_the_plain_matmul() {
    let _tc = Context::new(&[("EMULATE_METAL", 1)]);
    for (dtype, tc) in [(DType::FLOAT16, &SIMDGROUP_8X8X8_F16_F32), (DType::FLOAT32, &SIMDGROUP_8X8X8_F32_F32)] {
        // loops: 0 rows (32), 1 columns (16), 2 the reduce (48)
        let (a, b, exact) = inputs([1, 32, 48, 16], dtype, 46);
        let (a, b) = (a.reshape(&[32, 48]).cast(DType::FLOAT32), b.reshape(&[48, 16]).cast(DType::FLOAT32));
        // the plain matmul on the CPU, which has no tensor cores
        let plain = a.matmul(&b).to_vec::<f32>();
        assert_close(&plain, &exact, "the plain matmul");
        let (ast, bufs) = only_kernel(&a.matmul(&b));
        let opts = hand_coded_optimizations(&optimizable(&ast).unwrap(), &ListingRenderer.target());
        assert!(matches!(opts[0], Opt::TensorCore { tc: t, .. } if std::ptr::eq(t, tc)), "{dtype:?}: {opts:?}");
        let tc_opt = |m, n| Opt::TensorCore { tc, m, n, k: 2 };
        let cases: Vec<Vec<Opt>> = vec![
            opts,
            vec![tc_opt(0, 1)],
            vec![tc_opt(1, 0)],
            vec![tc_opt(0, 1), Opt::Upcast { range: 1, amount: 2 }, Opt::Unroll { range: 2, amount: 3 }],
            vec![tc_opt(0, 1), Opt::Local { range: 0, amount: 4 }],
        ];
        for opts in cases {
            assert_close(&run(&ast, &bufs, &opts), &plain, &format!("{dtype:?} {opts:?}"));
        }
    }
}

#[test]
fn metal_renders_simdgroup_matrices_and_the_msl_check_passes() {
    let renderer = MetalRenderer { target: lazygrad::runtime::metal::target() };
    assert_eq!(renderer.target().tensor_cores, [&SIMDGROUP_8X8X8_F16_F32, &SIMDGROUP_8X8X8_F32_F32]);
    for (dtype, matrix) in [(DType::FLOAT16, "simdgroup_half8x8"), (DType::FLOAT32, "simdgroup_float8x8")] {
        let (a, b, _) = inputs([1, 64, 64, 64], dtype, 47);
        let (a, b) = (a.reshape(&[64, 64]), b.reshape(&[64, 64]));
        let (ast, _) = only_kernel(&a.cast(DType::FLOAT32).matmul(&b.cast(DType::FLOAT32)));
        let spec = get_program(&ast, &renderer).unwrap();
        let src = &spec.src;
        assert!(spec.uops.iter().any(|u| u.op() == Ops::Wmma), "{dtype:?}: no tensor core\n{src}");
        for part in [matrix, "simdgroup_float8x8 mat_c", "thread_elements()[1]", "simdgroup_multiply_accumulate("] {
            assert!(src.contains(part), "{dtype:?}: no {part:?} in\n{src}");
        }
        let threads: usize = spec.local_size.unwrap().iter().product();
        assert!(threads.is_multiple_of(32), "whole SIMD groups: {:?}", spec.local_size);
        lazygrad::runtime::metal::msl_check(src, std::path::Path::new("tools/msl")).unwrap_or_else(|e| panic!("{e}"));
    }
}
