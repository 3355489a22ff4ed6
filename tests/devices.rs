//! Devices: the registry, copies between CPU, CL and INTERP both ways, targets in cache keys,
//! OpenCL programs checked against the interpreter, and the device a tensor of a graph is on
//! (none for constants only). `tools/setup.sh` installs PoCL, so CL opens on every machine that
//! runs the suites.

use lazygrad::codegen::get_program;
use lazygrad::codegen::opt::{hand_coded_optimizations, Opt};
use lazygrad::engine::ScheduleItem;
use lazygrad::runtime::{default_device, get_device, Buffer};
use lazygrad::schedule::layout::{pm_lay_out, Panels};
use lazygrad::uop::{graph_rewrite, ConstValue, Kernel, Ops, UOp};
use lazygrad::{DType, Error, Tensor};

fn kernel_ast(t: &Tensor) -> Kernel {
    Tensor::schedule(std::slice::from_ref(t))
        .into_iter()
        .find_map(|i| match i {
            ScheduleItem::Kernel { ast, .. } => Some(ast),
            ScheduleItem::Copy { .. } => None,
        })
        .expect("a kernel")
}

#[test]
fn copies_go_between_every_pair_of_devices_both_ways() {
    let devices = ["CPU", "CL", "INTERP"];
    let data: Vec<f32> = (0..100).map(|i| i as f32 * 0.5 - 7.0).collect();
    for from in devices {
        for to in devices {
            let a = Tensor::from_slice(&data, &[10, 10]).to(from);
            let b = (a.to(to) * 2.0).to(from) + 1.0;
            assert_eq!(b.device(), from);
            let want: Vec<f32> = data.iter().map(|x| x * 2.0 + 1.0).collect();
            assert_eq!(b.to_vec::<f32>(), want, "{from} -> {to} -> {from}");
        }
    }
}

#[test]
fn one_graph_gives_one_program_per_target() {
    let a = Tensor::rand(&[512, 512]).realize();
    let ast = kernel_ast(&(a.clone() * 3.0).relu().sum(1, false));
    let (cpu, cl) = (get_device("CPU").unwrap(), get_device("CL").unwrap());
    let (cpu_target, cl_target) = (cpu.target(), cl.target());
    assert_ne!(cpu_target, cl_target);
    let (on_cpu, on_cl) = (
        get_program(&ast, &*lazygrad::renderer::for_target(cpu.target())).unwrap(),
        get_program(&ast, &*lazygrad::renderer::for_target(cl.target())).unwrap(),
    );
    assert!(on_cpu.src.contains("_entry(void** bufs"), "{}", on_cpu.src);
    assert!(on_cl.src.contains("__kernel void") && on_cl.src.contains("get_group_id(0)"), "{}", on_cl.src);
    assert!(on_cpu.local_size.is_none() && on_cl.local_size.is_some());
    // the heuristics read the target: a CPU's threads, none on a device of workgroups
    let two_cores = lazygrad::uop::Target { threads: 2, ..cpu_target };
    let (cpu_opts, cl_opts) = (hand_coded_optimizations(&ast, &two_cores), hand_coded_optimizations(&ast, &cl_target));
    let threaded = |opts: &[Opt]| opts.iter().any(|o| matches!(o, Opt::Thread(_)));
    assert!(threaded(&cpu_opts) && !threaded(&cl_opts), "{cpu_opts:?} {cl_opts:?}");
    // and the program cache keeps them apart: the same graph realized on each device
    let want: Vec<f32> = (a.clone() * 3.0).relu().sum(1, false).to("INTERP").to_vec();
    for dev in ["CPU", "CL"] {
        let got: Vec<f32> = (a.to(dev) * 3.0).relu().sum(1, false).to_vec();
        for (w, g) in want.iter().zip(&got) {
            assert!((w - g).abs() <= 1e-5 * (1.0 + w.abs()), "{dev}: {w} vs {g}");
        }
    }
}

#[test]
fn opencl_kernels_match_the_interpreter() {
    Tensor::manual_seed(31);
    let x = Tensor::randn(&[33, 70]);
    let w = Tensor::randn(&[70, 50]);
    let run = |dev: &str| -> Vec<Vec<f32>> {
        let (x, w) = (x.to(dev), w.to(dev));
        let y = x.matmul(&w).relu();
        let outs = [y.clone(), y.softmax(-1), y.max(0, false), y.sum(None, false).reshape(&[1]), y.T().contiguous()];
        outs.iter().map(|t| t.to_vec::<f32>()).collect()
    };
    let (cl, interp) = (run("CL"), run("INTERP"));
    for (i, (a, b)) in cl.iter().zip(&interp).enumerate() {
        assert_eq!(a.len(), b.len());
        for (p, q) in a.iter().zip(b) {
            assert!((p - q).abs() <= 1e-4 * (1.0 + q.abs()), "output {i}: {p} vs {q}");
        }
    }
}

#[test]
fn the_tensor_graph_is_one_for_every_device_and_the_scheduler_lays_it_out() {
    // a large matmul's right operand in column panels and a conv channels last pay where one
    // core runs a tile of vector registers, not on a target without vectors: the Tensor layer
    // builds the same graph on every device and the scheduler lays it out for the target
    Tensor::manual_seed(7);
    let (x, w) = (Tensor::rand(&[64, 1024]).realize(), Tensor::rand(&[1024, 1024]).realize());
    let (img, filt) = (Tensor::rand(&[2, 3, 9, 9]).realize(), Tensor::rand(&[16, 3, 3, 3]).realize());
    let build = |dev: &str| {
        let conv = img.to(dev).realize().conv2d(&filt.to(dev).realize(), None, &lazygrad::tensor::ConvOpts::default());
        [x.to(dev).realize().matmul(&w.to(dev).realize()), conv]
    };
    let graph = |t: &Tensor| -> Vec<(Ops, Vec<usize>)> {
        t.uop().toposort().iter().map(|u| (u.op(), u.sh().to_vec())).collect()
    };
    let cpu = get_device("CPU").unwrap().target();
    let scalar = lazygrad::uop::Target { vector_bytes: 0, ..cpu.clone() };
    // the copies a layout adds: CONTIGUOUS nodes of the weight's size
    let layout_copies = |t: &Tensor, target: &lazygrad::uop::Target, weight: &Tensor| {
        let sink = UOp::sink(vec![t.uop()]);
        let mut panels = Panels::find(&sink, &mut |_| Some(target.clone()));
        let nodes = graph_rewrite(&sink, pm_lay_out(), &mut panels, "lay out", true).toposort();
        nodes.iter().filter(|u| u.op() == Ops::Contiguous && u.sh().iter().product::<usize>() == weight.numel()).count()
    };
    let (on_cpu, on_cl) = (build("CPU"), build("CL"));
    for ((c, l), weight) in on_cpu.iter().zip(&on_cl).zip([&w, &filt]) {
        assert_eq!(graph(c), graph(l));
        assert_eq!((layout_copies(c, &cpu, weight), layout_copies(c, &scalar, weight)), (1, 0), "{:?}", weight.shape());
        let (want, got) = (l.to_vec::<f32>(), c.to_vec::<f32>());
        for (w, g) in want.iter().zip(&got) {
            assert!((w - g).abs() <= 1e-4 * (1.0 + w.abs()), "{w} vs {g}");
        }
    }
}

#[test]
fn cpu_like_devices_compute_the_same_bits() {
    // OpenCL on a CPU takes the CPU's opts, layouts, float64 sums and float32 exp2 and log2 (from
    // the same arithmetic, not each device's libm): a conv, a matmul, the statistics of a batch
    // norm and a log-softmax come out bit for bit as on the CPU
    Tensor::manual_seed(32);
    let x = Tensor::rand(&[16, 8, 20, 20]);
    let w = Tensor::rand(&[16, 8, 3, 3]);
    let v = Tensor::rand(&[324, 96]);
    let run = |dev: &str| -> Vec<Vec<u32>> {
        let y = x.to(dev).conv2d(&w.to(dev), None, &lazygrad::tensor::ConvOpts::default());
        let mean = y.mean(&[0isize, 2, 3][..], true);
        let var = (&y - &mean).square().mean(&[0isize, 2, 3][..], true);
        let m = y.reshape(&[256, 324]).matmul(&v.to(dev));
        let logits = m.log_softmax(-1);
        [y, mean, var, m, logits].iter().map(|t| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect()).collect()
    };
    let cpu = run("CPU");
    for dev in ["CL", "INTERP"] {
        for (i, (a, b)) in cpu.iter().zip(&run(dev)).enumerate() {
            assert!(a == b, "output {i} on {dev} differs from the CPU's");
        }
    }
}

#[test]
fn half_and_bfloat16_are_stored_where_a_device_cannot_compute_in_them() {
    let data = [1.5f32, -2.25, 65504.0, 1e-3, 3.0e-8, -0.0];
    for dtype in [DType::FLOAT16, DType::BFLOAT16] {
        let want: Vec<f32> =
            Tensor::from_slice(&data, &[6]).to("INTERP").cast(dtype).add(1.0).cast(DType::FLOAT32).to_vec();
        let got: Vec<f32> = Tensor::from_slice(&data, &[6]).to("CL").cast(dtype).add(1.0).cast(DType::FLOAT32).to_vec();
        assert_eq!(
            got.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|f| f.to_bits()).collect::<Vec<_>>(),
            "{dtype:?}"
        );
    }
}

#[test]
fn device_names_parse_and_unavailable_devices_are_errors() {
    assert!(std::sync::Arc::ptr_eq(&get_device("cl").unwrap(), &get_device("CL:0").unwrap()));
    let cases = [
        ("CL:99", "no device 99"),
        ("CL:x", "bad device number"),
        ("NPU", "unknown device"),
        ("METAL", "DEV=WEBGPU runs them on the GPU"),
        ("WEBGPU:99", "no adapter 99"),
    ];
    for (name, says) in cases {
        let Err(e) = get_device(name) else { panic!("{name} opened") };
        assert!(matches!(&e, Error::Device(m) if m.contains(says)), "{name}: {e}");
    }
}

#[test]
fn views_of_opencl_memory_read_and_write_their_own_bytes() {
    let dev = get_device("CL").unwrap();
    let align = dev.allocator().view_alignment();
    let base = std::sync::Arc::new(Buffer::new("CL", 3 * align / 4, DType::FLOAT32));
    base.copyin(&vec![0u8; base.nbytes()]).unwrap();
    let view = Buffer::view(&base, align, align / 4, DType::FLOAT32).unwrap();
    let ones: Vec<u8> = (0..align / 4).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    view.copyin(&ones).unwrap();
    let all = base.copyout().unwrap();
    assert!(
        all[..align].iter().all(|&b| b == 0)
            && all[align..2 * align] == ones[..]
            && all[2 * align..].iter().all(|&b| b == 0)
    );
    assert_eq!(view.copyout().unwrap(), ones);
}

#[test]
fn cuda_kernels_render_for_blocks_of_threads_and_nvrtc_builds_them() {
    // no GPU needed: a matmul with a reduce and a gated elementwise kernel rendered for sm_90;
    // with NVRTC_CHECK set (.ci/run, NVRTC from PyPI on the library path) NVRTC builds them
    use lazygrad::renderer::cuda::CudaRenderer;
    let renderer = CudaRenderer::for_arch("sm_90").expect("sm_90 parses");
    assert_eq!(renderer.target.language, lazygrad::uop::Language::Cuda(9, 0));
    assert!(CudaRenderer::for_arch("90").is_none() && CudaRenderer::for_arch("sm_x0").is_none());
    let (a, b) = (Tensor::rand(&[64, 48]).realize(), Tensor::rand(&[48, 40]).realize());
    let half = Tensor::rand(&[124]).realize().cast(DType::FLOAT16).realize();
    for t in [a.matmul(&b), (half.cast(DType::FLOAT32) * 3.0).pad(&[(1, 3)]).exp()] {
        let spec = get_program(&kernel_ast(&t), &renderer).unwrap();
        let src = &spec.src;
        assert!(src.contains("extern \"C\" __global__ void __launch_bounds__("), "{src}");
        assert!(src.contains("blockIdx.x") && src.contains("threadIdx.x"), "{src}");
        assert!(spec.local_size.is_some_and(|l| l.iter().product::<usize>() > 1), "{src}");
        if std::env::var("NVRTC_CHECK").is_ok() {
            let cubin = lazygrad::runtime::cuda::nvrtc_compile(src, "sm_90").unwrap();
            assert_eq!(&cubin[..4], b"\x7fELF", "a cubin is an ELF image");
        }
    }
    // a machine without the driver gets an error value naming CUDA, never a panic
    if lazygrad::runtime::cuda::available().is_err() {
        let err = get_device("CUDA").err().expect("no CUDA device here");
        assert!(err.to_string().contains("CUDA unavailable"), "{err}");
    }
}

#[test]
fn equal_constant_graphs_on_two_devices_stay_on_their_devices() {
    // equal constant graphs built on CPU and on INTERP: their constants carry the device, so
    // they are two graphs, and realizing one never hands the other a buffer of the wrong device
    use lazygrad::runtime::view_buffer;
    use lazygrad::runtime::DefaultDevice;
    let build = |dev: &str| {
        let _on = DefaultDevice::scoped(dev);
        Tensor::full(&[4], 2.5) * 2.0
    };
    let (cpu, interp) = (build("CPU"), build("INTERP"));
    assert_ne!(cpu.uop(), interp.uop(), "one graph per device");
    cpu.realize();
    assert_eq!(cpu.to_vec::<f32>(), vec![5.0; 4]);
    assert_eq!(interp.device(), "INTERP");
    assert_eq!(interp.to_vec::<f32>(), vec![5.0; 4]);
    for (t, dev) in [(&cpu, "CPU"), (&interp, "INTERP")] {
        assert_eq!(view_buffer(&t.uop()).expect("realized").device(), dev);
    }
}

#[test]
fn a_graph_of_constants_is_a_deviceless_tensor_and_a_graph_with_storage_is_on_its_device() {
    let c = UOp::constant(DType::FLOAT32, ConstValue::Float(2.0));
    let t = Tensor::from_graph(c.clone());
    assert_eq!((t.placed_device(), t.device()), (None, default_device().as_str()));
    t.realize();
    assert_eq!(t.uop(), c, "nowhere to store it: realize leaves it");
    let sum = &t + 1.0;
    assert_eq!((sum.placed_device(), sum.to_vec::<f32>()), (Some(default_device().as_str()), vec![3.0]));
    assert_eq!(t.to_vec::<f32>(), [2.0]);
    let deviceless = Tensor::from_graph(c.clone());
    deviceless.assign(&Tensor::new(5.0f32)).realize();
    assert_eq!((deviceless.placed_device(), deviceless.item::<f32>()), (Some(default_device().as_str()), 5.0));
    for device in ["CPU", "CL", "INTERP"] {
        let stored = Tensor::from_slice(&[1.0f32, 2.0], &[2]).to(device).realize();
        let lazy = (&stored * 3.0).uop();
        let on = Tensor::from_graph(lazy);
        assert_eq!((on.placed_device(), on.to_vec::<f32>()), (Some(device), vec![3.0, 6.0]));
    }
}
