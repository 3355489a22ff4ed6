//! Workgroup opts (LOCAL, GROUP, GROUPTOP, NOLOCALS): the device under test (`DEV`, when it has
//! workgroups, as CL does; else INTERP) runs their kernels as a grid of workgroups whose threads
//! share local memory and meet at barriers, and every such kernel computes what the unoptimized
//! one does; a target without local memory (the C renderer) rejects them, and BEAM tries them
//! only on targets that have it.

use std::sync::Arc;

use lazygrad::codegen::get_program_opts;
use lazygrad::codegen::opt::{apply_opt, search::actions, Opt};
use lazygrad::engine::CompiledKernel;
use lazygrad::renderer::c::CRenderer;
use lazygrad::renderer::listing::ListingRenderer;
use lazygrad::renderer::Renderer;
use lazygrad::runtime::{get_device, Buffer};
use lazygrad::uop::ProgramSpec;
use lazygrad::uop::{Arg, Kernel, LinearProgram, Ops, UOp};
use lazygrad::uop::{Target, Workgroups};
use lazygrad::Tensor;

mod common;
use common::only_kernel;

fn program(ast: &Kernel, opts: &[Opt]) -> ProgramSpec {
    get_program_opts(ast, &ListingRenderer, opts, "").unwrap_or_else(|e| panic!("{opts:?}: {e}"))
}

/// The kernel's output after running it with `opts` on the device its buffers are on, or INTERP
/// for a CPU's (host memory, which INTERP reads too), a CPU having no workgroups.
fn run(ast: &Kernel, bufs: &[Arc<Buffer>], opts: &[Opt]) -> Vec<f32> {
    let dev = match get_device(bufs[0].device()).unwrap() {
        d if d.target().has_local() => d,
        _ => get_device("INTERP").unwrap(),
    };
    let spec = get_program_opts(ast, &*lazygrad::renderer::for_target(dev.target()), opts, "")
        .unwrap_or_else(|e| panic!("{opts:?}: {e}"));
    CompiledKernel::compile(&*dev, ast, &spec).unwrap().launch(bufs, &[]).unwrap_or_else(|e| panic!("{opts:?}: {e}"));
    bufs[0].copyout().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect()
}

/// Equal up to float reassociation: `tol` relative to the magnitude of the result (sums of
/// thousands of terms reassociate to ~1e-5 of their terms' size).
fn assert_close(want: &[f32], got: &[f32], tol: f32, what: &str) {
    assert_eq!(want.len(), got.len(), "{what}");
    for (i, (a, b)) in want.iter().zip(got).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + a.abs()), "{what}: [{i}] {a} vs {b}");
    }
}

fn matmul(m: usize, k: usize, n: usize) -> (Tensor, Tensor, Tensor) {
    let (a, b) = (Tensor::randn(&[m, k]).realize(), Tensor::randn(&[k, n]).realize());
    let c = a.matmul(&b);
    (a, b, c)
}

/// `a @ b` of an (m, k) and a (k, n) matrix, summed in float64.
fn exact_product(a: &Tensor, b: &Tensor) -> Vec<f64> {
    let (&[m, k], &[_, n]) = (a.shape().as_slice(), b.shape().as_slice()) else { panic!("two matrices") };
    let (av, bv) = (a.to_vec::<f32>(), b.to_vec::<f32>());
    (0..m * n).map(|o| (0..k).map(|t| av[o / n * k + t] as f64 * bv[t * n + o % n] as f64).sum()).collect()
}

#[test]
fn workgroup_matmuls_compute_the_exact_products() {
    Tensor::manual_seed(21);
    // loops: 0 rows (32), 1 columns (40), 2 the reduce (48)
    let (m, k, n) = (32, 48, 40);
    let (a, b, c) = matmul(m, k, n);
    let (ast, bufs) = only_kernel(&c);
    let exact = exact_product(&a, &b);
    let cases: Vec<Vec<Opt>> = vec![
        vec![Opt::Local { range: 0, amount: 4 }, Opt::Local { range: 1, amount: 8 }],
        vec![Opt::Group { range: 2, amount: 8 }],
        vec![Opt::GroupTop { range: 2, amount: 16 }],
        // threads in both kinds, register tiles and an unrolled reduce in each thread
        vec![
            Opt::Local { range: 0, amount: 4 },
            Opt::Group { range: 2, amount: 8 },
            Opt::Upcast { range: 1, amount: 4 },
            Opt::Unroll { range: 2, amount: 2 },
        ],
        vec![
            Opt::GroupTop { range: 2, amount: 4 },
            Opt::Group { range: 2, amount: 3 },
            Opt::Local { range: 1, amount: 5 },
        ],
        vec![Opt::NoLocals, Opt::Upcast { range: 1, amount: 8 }, Opt::Unroll { range: 2, amount: 4 }],
    ];
    for opts in cases {
        let got = run(&ast, &bufs, &opts);
        for (i, (g, e)) in got.iter().zip(&exact).enumerate() {
            assert!((*g as f64 - e).abs() <= 1e-4 * (1.0 + e.abs()), "{opts:?}: c[{i}] = {g}, want {e}");
        }
    }
}

#[test]
fn grouped_reduces_combine_partials_through_local_memory() {
    Tensor::manual_seed(22);
    let x = Tensor::randn(&[8, 512]).realize();
    for (t, what) in
        [(x.sum(1, false), "row sums"), (x.max(1, false), "row maxes"), (x.sum(None, false), "the full sum")]
    {
        let (ast, bufs) = only_kernel(&t);
        let want = run(&ast, &bufs, &[]);
        let reduce = lazygrad::codegen::opt::kernel_ranges(&ast)
            .iter()
            .rfind(|r| r.1 == lazygrad::uop::AxisKind::Reduce)
            .unwrap()
            .0;
        for opts in [
            vec![Opt::Group { range: reduce, amount: 16 }],
            vec![Opt::GroupTop { range: reduce, amount: 16 }],
            // each thread's share summed as vector lanes: its partial is a vector in local memory
            vec![Opt::Group { range: reduce, amount: 8 }, Opt::Unroll { range: reduce, amount: 16 }],
        ] {
            let spec = program(&ast, &opts);
            let ops: Vec<Ops> = spec.uops.iter().map(UOp::op).collect();
            assert!(ops.contains(&Ops::DefineLocal) && ops.contains(&Ops::Barrier), "{what} {opts:?}");
            // the output is stored by the group's first thread only
            let store = spec.uops.iter().rfind(|u| u.op() == Ops::Store).unwrap();
            assert_eq!(store.src()[0].src().len(), 3, "{what} {opts:?}: the output store is gated");
            assert_close(&want, &run(&ast, &bufs, &opts), 1e-4, &format!("{what} {opts:?}"));
        }
    }
}

#[test]
fn more_than_three_loops_share_the_last_launch_dim() {
    Tensor::manual_seed(27);
    let a = Tensor::rand(&[2, 3, 4, 5]).realize();
    let b = a.permute(&[3, 1, 2, 0]).add(1.0);
    let (ast, bufs) = only_kernel(&b);
    let spec = program(&ast, &[Opt::NoLocals]);
    let mut dims: Vec<(String, i64)> = spec
        .uops
        .iter()
        .filter(|u| u.op() == Ops::Special)
        .map(|u| (u.arg().clone(), u.src()[0].const_int_value().unwrap()))
        .map(|(arg, n)| (lazygrad::uop::print::arg_str(&arg), n))
        .collect();
    dims.sort();
    // loops (5, 3, 4, 2), inner first: 2 and 4 own a dim, 3 and 5 share the third
    assert_eq!(dims, [("gidx0".to_string(), 2), ("gidx1".to_string(), 4), ("gidx2".to_string(), 15)]);
    let want: Vec<f32> = b.to_vec();
    assert_eq!(run(&ast, &bufs, &[Opt::NoLocals]), want);
}

#[test]
fn launch_dims_name_the_grid_and_the_threads() {
    Tensor::manual_seed(23);
    let (_, _, c) = matmul(16, 24, 16);
    let (ast, _) = only_kernel(&c);
    let specials = |opts: &[Opt]| -> Vec<String> {
        let spec = program(&ast, opts);
        let mut names: Vec<String> = spec
            .uops
            .iter()
            .filter(|u| u.op() == Ops::Special)
            .map(|u| match u.arg() {
                Arg::Special(s) => format!("{s}:{}", u.src()[0].const_int_value().unwrap()),
                _ => panic!("a SPECIAL is named"),
            })
            .collect();
        names.sort();
        names
    };
    // the innermost loop is dim 0 (x)
    assert_eq!(specials(&[Opt::Local { range: 1, amount: 4 }]), ["gidx0:4", "gidx1:16", "lidx0:4"]);
    assert_eq!(specials(&[Opt::Group { range: 2, amount: 8 }]), ["gidx0:16", "gidx1:16", "lidx0:8"]);
    assert_eq!(specials(&[Opt::NoLocals]), ["gidx0:16", "gidx1:16"]);
    // a CPU kernel keeps its loops and splits the outer one over cores
    assert_eq!(specials(&[Opt::Thread(2)]), ["core_id:2"]);
    // kernel names show workgroup threads after the output loops
    assert_eq!(
        program(&ast, &[Opt::Local { range: 1, amount: 4 }, Opt::Group { range: 2, amount: 8 }]).name.to_string(),
        "r_16_4_4_8_3"
    );
}

#[test]
fn workgroup_opts_apply_only_where_they_are_legal() {
    Tensor::manual_seed(24);
    let (_, _, c) = matmul(32, 48, 40);
    let (ast, _) = only_kernel(&c);
    let after = |opts: &[Opt]| opts.iter().try_fold(ast.root().clone(), |a, o| apply_opt(&a, *o));
    assert!(after(&[Opt::Local { range: 2, amount: 4 }]).is_none(), "LOCAL splits output loops only");
    assert!(after(&[Opt::Group { range: 0, amount: 4 }]).is_none(), "GROUP splits reduce loops only");
    assert!(after(&[Opt::GroupTop { range: 2, amount: 5 }]).is_none(), "5 does not divide 48");
    assert!(after(&[Opt::NoLocals, Opt::Local { range: 0, amount: 4 }]).is_none(), "no locals after NOLOCALS");
    assert!(after(&[Opt::Group { range: 2, amount: 4 }, Opt::NoLocals]).is_none(), "NOLOCALS after a GROUP");
    assert!(after(&[Opt::NoLocals, Opt::NoLocals]).is_none());
    assert!(after(&[Opt::Local { range: 0, amount: 4 }, Opt::Thread(2)]).is_none(), "THREAD in a workgroup kernel");
    assert!(after(&[Opt::Thread(2), Opt::Group { range: 2, amount: 4 }]).is_none(), "GROUP in a threaded kernel");
    // 32 x 40 threads are more than a workgroup holds
    assert!(after(&[Opt::Local { range: 0, amount: 32 }, Opt::Local { range: 1, amount: 40 }]).is_none());
    assert!(after(&[
        Opt::Local { range: 0, amount: 32 },
        Opt::Local { range: 1, amount: 8 },
        Opt::Group { range: 2, amount: 4 }
    ])
    .is_some());
}

#[test]
fn targets_without_local_memory_reject_workgroup_opts() {
    Tensor::manual_seed(25);
    let (_, _, c) = matmul(16, 24, 16);
    let (ast, _) = only_kernel(&c);
    for opt in [Opt::Local { range: 0, amount: 4 }, Opt::Group { range: 2, amount: 4 }, Opt::NoLocals] {
        let err = get_program_opts(&ast, &CRenderer, &[opt], "").unwrap_err().to_string();
        assert!(err.contains(&opt.to_string()) && err.contains("the CPU target"), "{err}");
    }
    assert!(get_program_opts(&ast, &CRenderer, &[Opt::Thread(2)], "").is_ok());
}

#[test]
fn every_beam_action_for_workgroup_targets_computes_the_same_result() {
    Tensor::manual_seed(26);
    let (_, _, c) = matmul(16, 24, 16);
    let (ast, bufs) = only_kernel(&c);
    let want = run(&ast, &bufs, &[]);
    let cpu_target = Target { threads: 2, ..CRenderer.target() };
    let gpu_target = Target { threads: 1, ..ListingRenderer.target() };
    let cpu = actions(&ast, &cpu_target);
    assert!(!cpu.iter().any(Opt::needs_local) && cpu.contains(&Opt::Thread(2)), "{cpu:?}");
    let gpu = actions(&ast, &gpu_target);
    assert!(!gpu.iter().any(|o| matches!(o, Opt::Thread(_))), "{gpu:?}");
    let mut applied = 0;
    for first in gpu.iter().filter(|o| o.needs_local()) {
        let Some(one) = apply_opt(&ast, *first) else { continue };
        // each workgroup opt, then each action that applies after it
        for second in actions(&one, &gpu_target) {
            if apply_opt(&one, second).is_none() {
                continue;
            }
            applied += 1;
            let opts = [*first, second];
            assert_close(&want, &run(&ast, &bufs, &opts), 1e-5, &format!("{opts:?}"));
        }
    }
    assert!(applied > 100, "{applied} pairs of opts ran");
}

/// A GPU as the heuristics see it: workgroups of threads side by side, scalar code.
fn simd_gpu() -> Target {
    let workgroups = Workgroups {
        max_threads: 1024,
        max_local: [1024, 1024, 64],
        max_groups: [1 << 31, 65535, 65535],
        local_bytes: 48 << 10,
        simd_threads: true,
    };
    Target {
        name: "GPU",
        vector_bytes: 0,
        threads: 1,
        workgroups: Some(workgroups),
        gpu: true,
        ..ListingRenderer.target()
    }
}

#[test]
fn gpu_heuristics_spread_outputs_over_workgroup_threads() {
    Tensor::manual_seed(23);
    let (m, k, n) = (32, 48, 40);
    let (a, b, c) = matmul(m, k, n);
    let (ast, bufs) = only_kernel(&c);
    let opts = lazygrad::codegen::opt::hand_coded_optimizations(&ast, &simd_gpu());
    assert!(opts.iter().any(|o| matches!(o, Opt::Local { .. })), "output loops over a workgroup's threads: {opts:?}");
    assert!(opts.iter().any(|o| matches!(o, Opt::Upcast { .. })), "each thread a register tile: {opts:?}");
    let exact: Vec<f32> = exact_product(&a, &b).into_iter().map(|v| v as f32).collect();
    assert_close(&exact, &run(&ast, &bufs, &opts), 1e-5, &format!("{opts:?}"));
    // a long reduce into few outputs: each workgroup's threads share it
    let x = Tensor::randn(&[8, 4096]).realize();
    let (ast, bufs) = only_kernel(&x.sum(1, false));
    let opts = lazygrad::codegen::opt::hand_coded_optimizations(&ast, &simd_gpu());
    assert!(opts.iter().any(|o| matches!(o, Opt::GroupTop { .. })), "{opts:?}");
    let xv = x.to_vec::<f32>();
    let sums: Vec<f32> = xv.chunks(4096).map(|r| r.iter().map(|&v| v as f64).sum::<f64>() as f32).collect();
    assert_close(&sums, &run(&ast, &bufs, &opts), 1e-4, &format!("{opts:?}"));
}

#[test]
fn a_cpu_opencl_device_gets_a_cores_tiles_in_each_workgroup() {
    Tensor::manual_seed(24);
    let (_, _, c) = matmul(64, 64, 64);
    let (ast, _) = only_kernel(&c);
    let workgroups = Workgroups { simd_threads: false, ..simd_gpu().workgroups.unwrap() };
    let cl_cpu = Target { vector_bytes: 32, workgroups: Some(workgroups), ..simd_gpu() };
    let core = Target { vector_bytes: 32, threads: 1, workgroups: None, gpu: false, ..ListingRenderer.target() };
    // the CPU heuristics for its vector registers, without threads: the device runs workgroups
    // on its cores
    let opts = lazygrad::codegen::opt::hand_coded_optimizations(&ast, &cl_cpu);
    assert_eq!(opts, lazygrad::codegen::opt::hand_coded_optimizations(&ast, &core));
    assert!(opts.iter().all(|o| matches!(o, Opt::Upcast { .. } | Opt::Unroll { .. } | Opt::Swap { .. })), "{opts:?}");
}

/// The listing renderer (so INTERP runs its programs) for a target with other workgroup limits.
struct Limited(Target);

impl Renderer for Limited {
    fn language(&self) -> &'static str {
        ListingRenderer.language()
    }
    fn target(&self) -> Target {
        self.0.clone()
    }
    fn supports(&self, op: Ops) -> bool {
        ListingRenderer.supports(op)
    }
    fn render(&self, name: &str, uops: &LinearProgram) -> String {
        ListingRenderer.render(name, uops)
    }
}

#[test]
fn launch_dims_past_a_device_limit_split_over_the_next_dims() {
    Tensor::manual_seed(25);
    // on INTERP, whose listing the limited renderer renders, whatever the device under test
    let x = Tensor::rand(&[2, 3, 4, 5]).to("INTERP").realize();
    let want = (&x + &x + 1.0).to_vec::<f32>();
    let (ast, bufs) = only_kernel(&(&x + &x + 1.0));
    let interp = get_device("INTERP").unwrap();
    // loops of 5, 4, 3 and 2 (inner first): one per dim, the outer two sharing dim 2 (5, 4, 6)
    // where that fits; else the dims fill in turn: all in dim 0 under [120, 1, 1], and under
    // [10, 12, 3] the 4-wide loop split 2 x 2 over dims 0 and 1; under [6, 1, 100] dim 1 is skipped
    let limits =
        [([120, 1, 1], [120, 1, 1]), ([6, 4, 8], [5, 4, 6]), ([10, 12, 3], [10, 12, 1]), ([6, 1, 100], [5, 1, 24])];
    for (groups, want_grid) in limits {
        let workgroups = Workgroups { max_groups: groups, ..simd_gpu().workgroups.unwrap() };
        let target = Target { workgroups: Some(workgroups), ..simd_gpu() };
        let spec = get_program_opts(&ast, &Limited(target), &[], "").unwrap();
        assert_eq!(spec.global_size, want_grid, "limits {groups:?}");
        assert!((0..3).all(|d| spec.global_size[d] <= groups[d]), "{:?} within {groups:?}", spec.global_size);
        CompiledKernel::compile(&*interp, &ast, &spec).unwrap().launch(&bufs, &[]).unwrap();
        let got: Vec<f32> =
            bufs[0].copyout().unwrap().chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(got, want, "limits {groups:?}");
    }
    // a loop longer than every dim and prime: no split fits
    let long = Tensor::rand(&[131]).realize();
    let (ast, _) = only_kernel(&(&long + 1.0));
    let workgroups = Workgroups { max_groups: [100, 100, 100], ..simd_gpu().workgroups.unwrap() };
    let target = Target { workgroups: Some(workgroups), ..simd_gpu() };
    let err = get_program_opts(&ast, &Limited(target), &[], "").map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("do not fit the device's limits"), "{err}");
}
