//! Kernel AST -> linear program: an ordered list of named passes, each a `graph_rewrite`.

pub mod decompose;
pub mod expand;
pub mod fold;
pub mod linearize;
pub mod lower;
pub mod name;
pub mod opt;
pub mod replay;
pub mod vectorize;

use std::collections::HashSet;

use crate::error::Result;
use crate::helpers::color::stderr_is_terminal;
use crate::helpers::debug;
use crate::renderer::Renderer;
use crate::uop::symbolic::symbolic;
use crate::uop::{graph_rewrite, Ops, UOp};

pub use name::KernelName;

/// A kernel ready for a device: its linearized UOps and, for compiled devices, its source.
#[derive(Clone, Debug)]
pub struct ProgramSpec {
    /// Named after the loops left after opts; rendered plain, it is the C function's name.
    pub name: KernelName,
    pub uops: Vec<UOp>,
    pub src: String,
    /// Arithmetic ops one run performs (for DEBUG=2 GFLOP/s).
    pub ops: u64,
    /// How many threads run it, each with its own `core_id`.
    pub threads: usize,
}

/// Gated loads' indices simplified under their gates (before opts, so that heuristics see which
/// loops an address really depends on, and after them, for the split loops).
fn simplify_valid(ast: &UOp) -> UOp {
    graph_rewrite(ast, crate::uop::valid::pm_simplify_valid(), &mut HashSet::<UOp>::new(), "simplify valid", false)
}

/// Run the codegen passes on a kernel AST (a SINK of STOREs) for `renderer` (None: INTERP).
/// With `PROCESS_REPLAY` set, the rendered source is also captured (`replay.rs`); failing to write
/// it is the error.
pub fn get_program(kernel: &UOp, renderer: Option<&dyn Renderer>) -> Result<ProgramSpec> {
    let _viz = crate::viz::group(|| format!("kernel {}", KernelName::of(kernel)));
    let settings = opt::settings();
    let ast = graph_rewrite(kernel, symbolic(), &mut (), "symbolic", false);
    let ast = simplify_valid(&ast);
    let ast = graph_rewrite(&ast, fold::pm_reduce_fold(), &mut (), "reduce fold", false);
    let opts = opt::hand_coded_optimizations(&ast, settings.1);
    let ast = opt::apply_opts(&ast, &opts);
    let name = KernelName::of(&ast);
    if debug() >= 3 {
        eprintln!("{}", opt::applied_opts_line(&KernelName::of(kernel), &name, &opts, stderr_is_terminal()));
    }
    let stream = vectorize::streams_output(kernel);
    let ast = expand::expand(&ast);
    let ast = simplify_valid(&graph_rewrite(&ast, symbolic(), &mut (), "symbolic", false));
    let ast = match stream {
        true => graph_rewrite(&ast, vectorize::pm_stream_stores(), &mut (), "stream stores", false),
        false => ast,
    };
    let ast = graph_rewrite(&ast, &lower::pm_lower_reduce(), &mut lower::LowerCtx::default(), "lower reduce", false);
    // the interpreter executes every op, fused multiply-adds included, so that it computes
    // exactly what the compiled C computes
    let alu = [Ops::UNARY, Ops::BINARY, Ops::TERNARY].concat();
    let mut sup = match renderer {
        Some(r) => {
            decompose::Supported { ops: alu.into_iter().filter(|o| r.supports(*o)).collect(), bf16_math: r.bf16_math() }
        }
        None => decompose::Supported { ops: alu.into_iter().collect(), bf16_math: true },
    };
    let ast = graph_rewrite(&ast, &decompose::pm_decompose(), &mut sup, "decompose", false);
    let uops = linearize::linearize(&ast);
    if debug() >= 6 {
        eprintln!("linearized {}: {} uops", name.for_debug(), uops.len());
        eprint!("{}", linear_listing(&uops));
    }
    let src = match renderer {
        Some(r) => {
            let src = r.render(&name.to_string(), &uops);
            if let Some(dir) = replay::capture_dir() {
                let key = replay::capture_key(kernel, settings, r.language());
                replay::capture(&dir, &name.to_string(), key, r.language(), &src)?;
            }
            src
        }
        None => String::new(),
    };
    crate::viz::record_code(|| match src.is_empty() {
        true => linear_listing(&uops),
        false => src.clone(),
    });
    Ok(ProgramSpec { ops: count_ops(&uops), threads: opt::thread_count(&uops), name, uops, src })
}

/// A linearized program, one line per UOp: index, op, dtype, arg (DEBUG=6, and VIZ's code pane
/// for devices without source).
fn linear_listing(uops: &[UOp]) -> String {
    let lines = uops
        .iter()
        .enumerate()
        .map(|(i, u)| format!("{i:4} {:<12} {:?} {}\n", u.op().name(), u.dtype(), crate::uop::print::arg_str(u.arg())));
    lines.collect()
}

/// ALU ops executed by one run: each ALU node weighted by its enclosing loops' trip counts.
fn count_ops(uops: &[UOp]) -> u64 {
    let mut trips: Vec<u64> = vec![1];
    let mut total = 0u64;
    for u in uops {
        match u.op() {
            Ops::Range | Ops::Special => {
                let n = u.src()[0].const_int_value().unwrap_or(1).max(0) as u64;
                trips.push(trips.last().unwrap() * n);
            }
            Ops::End => {
                trips.pop();
            }
            op if op.is_alu() && u.dtype().base() != crate::dtype::DType::INDEX => {
                // a fused multiply-add is two operations
                let flops = if op == Ops::MulAcc { 2 } else { 1 };
                total += trips.last().unwrap() * u.dtype().count as u64 * flops
            }
            _ => {}
        }
    }
    total
}
