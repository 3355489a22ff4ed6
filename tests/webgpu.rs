//! The WebGPU device and its WGSL dialect: rendered kernels validated by naga (the check itself
//! tested on broken kernels), 64-bit dtypes refused by name, and, on the WEBGPU device
//! (`tools/setup.sh` installs Mesa's lavapipe, so an adapter exists on every machine that runs
//! the suites), what WGSL makes hard: bytes packed into words, odd sizes, views at offsets,
//! variables in a uniform, NaN and infinities.

use lazygrad::codegen::get_program;
use lazygrad::codegen::opt::Opt;
use lazygrad::engine::ScheduleItem;
use lazygrad::renderer::for_target;
use lazygrad::runtime::webgpu::{baseline_target, validate};
use lazygrad::uop::ProgramSpec;
use lazygrad::{DType, Error, Sint, Tensor, Variable};

/// The kernels of `t`'s schedule rendered as WGSL for any WebGPU device.
fn wgsl(t: &Tensor) -> Vec<lazygrad::Result<ProgramSpec>> {
    let renderer = for_target(baseline_target());
    Tensor::schedule(std::slice::from_ref(t))
        .into_iter()
        .filter_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(get_program(&ast, renderer.as_ref())),
            ScheduleItem::Copy { .. } => None,
        })
        .collect()
}

/// The one WGSL kernel of `t`, validated.
fn valid_wgsl(t: &Tensor) -> String {
    let specs = wgsl(t);
    assert_eq!(specs.len(), 1, "one kernel");
    let src = specs.into_iter().next().unwrap().unwrap().src;
    validate(&src, false).unwrap_or_else(|e| panic!("{e}"));
    src
}

#[test]
fn every_narrow_dtype_packs_into_words_and_validates() {
    let on_cpu = Tensor::new([1i32, -2, 3, -4, 5, 6, -7]).realize();
    for dtype in [DType::BOOL, DType::INT8, DType::UINT8, DType::INT16, DType::UINT16, DType::FLOAT16, DType::BFLOAT16]
    {
        let x = on_cpu.cast(dtype).realize();
        let src = valid_wgsl(&(&x + &x));
        assert!(
            src.contains("array<atomic<u32>>") && src.contains("atomicLoad(&") && src.contains("atomicOr(&"),
            "{src}"
        );
    }
    let src = valid_wgsl(&(on_cpu.cast(DType::FLOAT32) * 2.0));
    assert!(src.contains("array<f32>") && !src.contains("atomic"), "{src}");
}

#[test]
fn workgroup_memory_barriers_variables_and_special_values_validate() {
    // a grouped reduce: its partial sums meet in workgroup memory behind a barrier
    let x = Tensor::rand(&[64, 256]).realize();
    let (ast, _) = {
        let mut items = Tensor::schedule(&[x.sum(1, false)]);
        match items.remove(0) {
            ScheduleItem::Kernel { ast, bufs } => (ast, bufs),
            ScheduleItem::Copy { .. } => panic!("a copy"),
        }
    };
    let renderer = for_target(baseline_target());
    let opts = [Opt::Group { range: 1, amount: 16 }];
    let spec = lazygrad::codegen::get_program_opts(&ast, renderer.as_ref(), &opts, "").unwrap();
    validate(&spec.src, false).unwrap_or_else(|e| panic!("{e}"));
    assert!(spec.src.contains("var<workgroup>") && spec.src.contains("workgroupBarrier();"), "{}", spec.src);
    // a variable-sized tensor: the size comes from a uniform struct bound after the buffers
    let n = Variable::new("n", 1, 10);
    let v = Tensor::rand(&[10]).realize().shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(4)))]);
    let src = valid_wgsl(&(&v * 2.0).sum(0, false));
    assert!(src.contains("var<uniform> vars: Vars;") && src.contains("vars.var_n"), "{src}");
    // infinities and NaN as bit patterns, C's pow and where
    let y = Tensor::new([1.0f32, -2.0, 0.0]).realize();
    let src = valid_wgsl(&y.isnan().where_(f32::NAN, y.pow(&y).maximum(f32::NEG_INFINITY)));
    assert!(src.contains("lg_pow(") && src.contains("bitcast<f32>(0x7fc00000u)"), "{src}");
}

#[test]
fn broken_kernels_fail_validation_with_the_line() {
    // plus one: a constant the kernel keeps (others are launch values, `schedule/unbind.rs`)
    let src = valid_wgsl(&(Tensor::new([1.0f32, 2.0]).realize() + 1.0));
    let broken = [
        src.replacen(';', "", 1),
        src.replace("data0[", "data7["),
        src.replace(" + 1.0f", " + 1i"),
        src.replace("array<f32>", "array<f64>"),
        src.replace("@compute", ""),
    ];
    for b in &broken {
        assert_ne!(b, &src, "the mutation changed nothing");
        match validate(b, false) {
            Err(Error::Compile(m)) => assert!(m.contains("WGSL") && m.contains("wgsl:"), "{m}"),
            other => panic!("a broken kernel passed: {other:?}\n{b}"),
        }
    }
    // f16 needs the adapter's shader-f16
    let half = valid_wgsl(&(Tensor::new([1.0f32]).realize().cast(DType::FLOAT16) * 2.0));
    assert!(!half.contains("enable f16"), "stored as bits on the baseline target: {half}");
}

#[test]
fn sixty_four_bit_dtypes_are_errors_naming_the_dtype() {
    let x = Tensor::new([1i64, 2]).realize();
    match &wgsl(&(&x + 1i64))[..] {
        [Err(Error::DType { device, dtype, .. })] => assert_eq!((device.as_str(), *dtype), ("WEBGPU", DType::INT64)),
        other => panic!("{other:?}"),
    }
    let y = Tensor::new([1.0f64]).realize();
    assert!(matches!(&wgsl(&(&y * 2.0))[..], [Err(Error::DType { dtype: DType::FLOAT64, .. })]));
}

/// A tensor on the WEBGPU device.
fn gpu(t: &Tensor) -> Tensor {
    t.to("WEBGPU")
}

#[test]
fn neighbouring_threads_write_bytes_of_one_word() {
    // 4099 bytes: every word shared by four threads, the last one partly outside the tensor
    let data: Vec<i32> = (0..4099).map(|i| (i * 37 % 256) - 128).collect();
    let x = gpu(&Tensor::new(data.clone()));
    for (dtype, wrap) in [(DType::INT8, 256), (DType::UINT8, 256), (DType::INT16, 65536), (DType::UINT16, 65536)] {
        let y = (x.cast(dtype) * 3 + 1).cast(DType::INT32);
        let want: Vec<i32> = data
            .iter()
            .map(|v| {
                let m = (((v * 3 + 1) % wrap) + wrap) % wrap;
                match dtype.is_signed() && m >= wrap / 2 {
                    true => m - wrap,
                    false => m,
                }
            })
            .collect();
        assert_eq!(y.to_vec::<i32>(), want, "{dtype:?}");
    }
    let flags = x.gt(0);
    assert_eq!(flags.to_vec::<bool>(), data.iter().map(|v| *v > 0).collect::<Vec<_>>());
}

#[test]
fn copies_of_odd_sizes_and_views_round_trip() {
    for n in [1usize, 3, 5, 7, 4097] {
        let bytes: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
        let t = Tensor::from_bytes(&bytes, &[n], DType::UINT8, "WEBGPU");
        assert_eq!(t.to_vec::<u8>(), bytes, "{n} bytes");
        assert_eq!((&t + 1u8).to("CPU").to_vec::<u8>(), bytes.iter().map(|b| b + 1).collect::<Vec<_>>());
    }
    // a chain whose intermediates the memory planner places at offsets in one arena
    let x = gpu(&Tensor::new((0..1000).map(|i| i as f32).collect::<Vec<_>>()));
    let y = ((&x + 1.0).contiguous() * 2.0).contiguous().sum(None::<isize>, false);
    assert_eq!(y.item::<f32>(), (0..1000).map(|i| (i as f32 + 1.0) * 2.0).sum::<f32>());
}

#[test]
fn nan_and_infinities_compare_as_ieee_says() {
    let x = gpu(&Tensor::new([0.0f32, -0.0, 1.5, f32::NAN, f32::INFINITY, f32::NEG_INFINITY]));
    assert_eq!(x.isnan().to_vec::<bool>(), [false, false, false, true, false, false]);
    assert_eq!(x.isinf().to_vec::<bool>(), [false, false, false, false, true, true]);
    assert_eq!(x.cast(DType::BOOL).to_vec::<bool>(), [false, false, true, true, true, true]);
    assert_eq!(x.ne(&x).to_vec::<bool>(), [false, false, false, true, false, false]);
    let m: Vec<f32> = x.maximum(0.0).to_vec();
    assert!(m[3].is_nan() && m[4] == f32::INFINITY && m[5] == 0.0, "{m:?}");
}

#[test]
fn a_sixty_four_bit_tensor_on_webgpu_is_an_error_not_a_crash() {
    let x = gpu(&Tensor::new([1i64, 2, 3]));
    match (&x + 1i64).try_realize() {
        Err(e) => assert!(e.to_string().contains("WEBGPU cannot compute in dtypes.long"), "{e}"),
        Ok(_) => panic!("an int64 kernel ran on WebGPU"),
    }
}

#[test]
fn kernels_wider_than_the_adapters_bindings_are_split() {
    let limit = lazygrad::runtime::get_device("WEBGPU").unwrap().target().max_buffers.expect("WebGPU limits bindings");
    // one elementwise sum of more tensors than the adapter binds storage buffers
    let n = limit + 8;
    let terms: Vec<Tensor> = (0..n).map(|i| gpu(&Tensor::full(&[1000], i as f32))).collect();
    let sum = terms.iter().skip(1).fold(terms[0].clone(), |acc, t| &acc + t);
    let kernels = Tensor::schedule(std::slice::from_ref(&sum));
    assert!(kernels.len() > 1, "{n} inputs in one kernel, past the limit of {limit}");
    for item in &kernels {
        if let ScheduleItem::Kernel { bufs, ast } = item {
            let used = lazygrad::uop::UOp::toposort(ast).iter().filter(|u| u.op() == lazygrad::uop::Ops::Param).count();
            assert!(used <= limit, "a kernel binds {used} of {} buffers, past {limit}", bufs.len());
        }
    }
    let want = (0..n).map(|i| i as f32).sum::<f32>();
    assert_eq!(sum.to_vec::<f32>(), vec![want; 1000]);
}
