//! Metal's dialect (MSL) without a Mac: kernels rendered for `lazygrad::runtime::metal::target()` carry Metal's
//! spelling (buffers at `[[buffer(n)]]`, threadgroup arrays and barriers, half and bfloat,
//! `as_type`, `metal::` math) and pass the check that stands in for Metal's compiler
//! (`runtime::metal::msl_check`: clang++ against `tools/msl/metal_stdlib`, which `tools/setup.sh`
//! installs clang for); the check itself rejects a broken kernel and one using what Metal lacks.
//! The tensor-core kernel is in `tests/tensor_cores.rs`.

use std::path::Path;

use lazygrad::codegen::opt::Opt;
use lazygrad::codegen::{get_program, get_program_opts};
use lazygrad::renderer::metal::MetalRenderer;
use lazygrad::runtime::metal::msl_check;
use lazygrad::uop::{DTypeSupport, Kernel, Language, Target};
use lazygrad::{DType, Error, Sint, Tensor, Variable};

mod common;
use common::only_kernel;

/// The header the check reads.
fn header() -> &'static Path {
    Path::new("tools/msl")
}

fn metal() -> MetalRenderer {
    MetalRenderer { target: lazygrad::runtime::metal::target() }
}

/// Metal source of `ast` with `opts` (the heuristics' when `None`), which must pass the check.
fn checked_source(ast: &Kernel, renderer: &MetalRenderer, opts: Option<&[Opt]>) -> String {
    let spec = match opts {
        Some(opts) => get_program_opts(ast, renderer, opts, ""),
        None => get_program(ast, renderer),
    };
    let src = spec.unwrap_or_else(|e| panic!("{opts:?}: {e}")).src;
    msl_check(&src, header()).unwrap_or_else(|e| panic!("{e}"));
    src
}

fn assert_has(src: &str, parts: &[&str]) {
    for part in parts {
        assert!(src.contains(part), "no {part:?} in\n{src}");
    }
}

#[test]
fn the_metal_target_is_an_apple_gpu() {
    let t = lazygrad::runtime::metal::target();
    assert_eq!(t.language, Language::Metal);
    let w = t.workgroups.as_ref().expect("threadgroups");
    assert_eq!((w.max_threads, w.local_bytes, w.simd_threads), (1024, 32 << 10, true));
    assert!(t.gpu && t.vector_bytes == 0, "scalar code, as CUDA's");
    assert_eq!(t.dtypes, DTypeSupport { half: true, bfloat16: true, float64: false, int64: true });
    assert_eq!(lazygrad::renderer::for_target(t).language(), "metal");
}

#[test]
fn a_grouped_reduce_renders_threadgroup_memory_and_a_barrier() {
    let a = Tensor::rand(&[64, 256]).realize();
    let (ast, _) = only_kernel(&a.sum(1, false));
    for opts in [
        vec![Opt::Local { range: 0, amount: 4 }, Opt::Group { range: 1, amount: 16 }],
        vec![Opt::GroupTop { range: 1, amount: 32 }],
    ] {
        let src = checked_source(&ast, &metal(), Some(&opts));
        assert_has(
            &src,
            &[
                "#include <metal_stdlib>\nusing namespace metal;\n",
                "kernel void r_",
                "(device float* data0 [[buffer(0)]], const device float* data1 [[buffer(1)]], \
                 uint3 gid [[threadgroup_position_in_grid]], uint3 lid [[thread_position_in_threadgroup]])",
                "threadgroup float temp0[",
                "threadgroup_barrier(mem_flags::mem_threadgroup);",
                "(long)gid.x",
                "(long)lid.x",
            ],
        );
    }
    // the heuristics' choice for a GPU: a long reduce into few outputs is grouped
    let (ast, _) = only_kernel(&Tensor::rand(&[4, 4096]).realize().sum(1, false));
    assert_has(&checked_source(&ast, &metal(), None), &["threadgroup float temp0[", "threadgroup_barrier("]);
}

#[test]
fn half_bfloat_bitcasts_math_and_variables_render_as_metals() {
    let x = Tensor::rand(&[300]).realize();
    let (h, bf) = (x.cast(DType::FLOAT16).realize(), x.cast(DType::BFLOAT16).realize());
    // half and bfloat computed in (math functions in float32, then rounded back)
    let (ast, _) = only_kernel(&((&h * &h).exp() + 1.0));
    assert_has(
        &checked_source(&ast, &metal(), None),
        &["device half* data0", "half val0 = data1[", "half alu", "metal::precise::exp2("],
    );
    let (ast, _) = only_kernel(&((&bf * &bf).sqrt() * 3.0));
    let native = checked_source(&ast, &metal(), None);
    assert_has(&native, &["device bfloat* data0", "bfloat alu", "metal::precise::sqrt((float)"]);
    // without MSL 3.1's bfloat, bfloat16 is stored as its bits and computed in float32
    let old = MetalRenderer {
        target: Target {
            dtypes: DTypeSupport { bfloat16: false, ..lazygrad::runtime::metal::target().dtypes },
            ..lazygrad::runtime::metal::target()
        },
    };
    let stored = checked_source(&ast, &old, None);
    assert_has(&stored, &["device ushort* data0", "lg_bf16_to_f32(", "lg_f32_to_bf16(", "as_type<float>("]);
    assert!(!stored.contains("bfloat"), "{stored}");
    // bitcasts, integer wrapping in unsigned types, 64-bit integers, sin
    let i = (x.bitcast(DType::INT32) * 3 + 7).cast(DType::INT64) * 5;
    let (ast, _) = only_kernel(&(i.cast(DType::FLOAT32) + x.sin()));
    assert_has(&checked_source(&ast, &metal(), None), &["as_type<int>(", "(uint)", "long alu", "metal::precise::sin("]);
    // a kernel's variable is a constant reference after its buffers
    let n = Variable::new("n", 1, 300);
    let part = x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(100)))]);
    let (ast, _) = only_kernel(&(&part + &part));
    assert_has(
        &checked_source(&ast, &metal(), None),
        &["const device float* data1 [[buffer(1)]], constant long& var_n [[buffer(2)]]"],
    );
}

#[test]
fn metal_has_no_float64() {
    let x = Tensor::rand(&[16]).realize().cast(DType::FLOAT64).realize();
    let (ast, _) = only_kernel(&(&x * &x));
    match get_program(&ast, &metal()) {
        Err(lazygrad::Error::DType { device, dtype, .. }) => {
            assert_eq!((device.as_str(), dtype), ("METAL", DType::FLOAT64))
        }
        other => panic!("a float64 kernel for Metal: {other:?}"),
    }
}

/// The check of the check: a kernel that compiles passes, and breaking it in one place, or using
/// what the header (Metal) lacks, fails with clang's diagnostic.
#[test]
fn the_msl_check_rejects_broken_kernels() {
    let a = Tensor::rand(&[64, 256]).realize();
    let (ast, _) = only_kernel(&a.sum(1, false));
    let good = checked_source(&ast, &metal(), Some(&[Opt::Group { range: 1, amount: 16 }]));
    let broken = |from: &str, to: &str| {
        assert!(good.contains(from), "{from:?} in\n{good}");
        let src = good.replacen(from, to, 1);
        match msl_check(&src, header()) {
            Err(Error::Compile(log)) => log,
            other => panic!("{from:?} -> {to:?} passed the check: {other:?}\n{src}"),
        }
    };
    // syntax: a missing semicolon
    assert!(broken(
        "threadgroup_barrier(mem_flags::mem_threadgroup);",
        "threadgroup_barrier(mem_flags::mem_threadgroup)"
    )
    .contains("error: expected ';'"));
    // what other dialects say instead of Metal: CUDA's barrier, C's memcpy, a double, a typo'd attribute
    assert!(broken("threadgroup_barrier(mem_flags::mem_threadgroup);", "__syncthreads();").contains("__syncthreads"));
    assert!(broken("float acc0", "double acc0").contains("double"));
    assert!(broken("[[buffer(1)]]", "[[bufer(1)]]").contains("unknown attribute"));
    assert!(broken("using namespace metal;", "").contains("error"));
    // a Metal function the header does not declare
    let body = good.rfind('}').expect("the kernel's end");
    let mut uses_simd_sum = good.clone();
    uses_simd_sum.insert_str(body, "  data0[0] = simd_sum(data0[0]);\n");
    let log = msl_check(&uses_simd_sum, header()).expect_err("simd_sum is not in the header");
    assert!(log.to_string().contains("simd_sum"), "{log}");
    // as_type between types of different sizes
    assert!(msl_check(&good.replacen("(long)gid.x", "as_type<long>(gid.x)", 1), header()).is_err());
    // no header, no check
    let err = msl_check(&good, Path::new("tools/no-such-folder")).expect_err("a missing header");
    assert!(err.to_string().contains("metal_stdlib"), "{err}");
}
