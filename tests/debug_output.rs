//! DEBUG output: kernel names by loop kind (colored only on a terminal), the DEBUG=3 opts line,
//! and the DEBUG=1 realize and JIT lines.

use std::process::Command;

use lazygrad::codegen::opt::{applied_opts_line, apply_opts, Opt};
use lazygrad::engine::ScheduleItem;
use lazygrad::runtime::DefaultDevice;
use lazygrad::uop::KernelName;
use lazygrad::{Jit, Tensor};

/// The one kernel of a 64x64 matmul.
fn matmul_ast() -> lazygrad::uop::Kernel {
    let (a, b) = (Tensor::ones(&[64, 64]).contiguous().realize(), Tensor::ones(&[64, 64]).contiguous().realize());
    match Tensor::schedule(&[a.matmul(&b)]).as_slice() {
        [ScheduleItem::Kernel { ast, .. }] => ast.clone(),
        other => panic!("expected one kernel, got {}", other.len()),
    }
}

const MATMUL_OPTS: [Opt; 3] =
    [Opt::Upcast { range: 1, amount: 4 }, Opt::Unroll { range: 2, amount: 4 }, Opt::Thread(2)];

#[test]
fn kernel_names_list_loops_by_kind_and_color_them_by_kind() {
    let ast = matmul_ast();
    assert_eq!(KernelName::of(&ast).to_string(), "r_64_64_64");
    // threads, output loops, reduce loops, upcast lanes, unrolled steps
    let tiled = KernelName::of(&apply_opts(&ast, &MATMUL_OPTS));
    assert_eq!(tiled.to_string(), "r_2_32_16_16_4_4");
    assert_eq!(tiled.render(false), "r_2_32_16_16_4_4");
    // bright blue threads, blue loops, red reduce, yellow upcast, magenta unroll
    let sizes = [("94", 2), ("34", 32), ("34", 16), ("31", 16), ("33", 4), ("35", 4)];
    let colored: String = sizes.iter().map(|(sgr, n)| format!("_\x1b[{sgr}m{n}\x1b[0m")).collect();
    assert_eq!(tiled.render(true), format!("r{colored}"));
}

#[test]
fn applied_opts_line_names_the_kernel_before_and_after() {
    let ast = matmul_ast();
    let (before, after) = (KernelName::of(&ast), KernelName::of(&apply_opts(&ast, &MATMUL_OPTS)));
    assert_eq!(
        applied_opts_line(&before, &after, &MATMUL_OPTS, false),
        "r_64_64_64 -> r_2_32_16_16_4_4: applied opts \
         [UPCAST(range=1, amount=4), UNROLL(range=2, amount=4), THREAD(threads=2)]"
    );
    assert_eq!(applied_opts_line(&before, &before, &[], false), "r_64_64_64: applied opts []");
}

/// Runs in a child process (below) with DEBUG set: one kernel realized, then JIT'd three times.
#[test]
fn debug_workload() {
    let _cpu = DefaultDevice::scoped("CPU");
    let w = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]).realize();
    let mut jit = Jit::new(|x: &[Tensor]| vec![x[0].matmul(&w).relu()]);
    for i in 0..3 {
        let out = jit.call(&[Tensor::new([[i as f32, 1.0]])]).unwrap();
        assert_eq!(out[0].to_vec::<f32>(), vec![i as f32 + 3.0, 2.0 * i as f32 + 4.0]);
    }
}

#[test]
fn debug_output_is_plain_in_a_pipe_and_counts_programs_and_jit_calls() {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "debug_workload", "--nocapture"])
        .env("DEBUG", "3")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&child.stderr);
    assert!(child.status.success(), "the child failed:\n{stderr}");
    assert!(!stderr.contains('\x1b'), "no color codes in a pipe:\n{stderr}");
    for line in ["opened device CPU", "realize: programs 1 new, 0 cached", "applied opts [", "*** CPU "] {
        assert!(stderr.contains(line), "`{line}` in:\n{stderr}");
    }
    assert!(stderr.contains("JIT call 2: captured 1 kernels with 1 inputs"), "{stderr}");
    assert!(stderr.contains("JIT call 3: replayed 1 kernels in "), "{stderr}");
}
