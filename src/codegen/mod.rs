//! Kernel AST -> linear program: an ordered list of named passes, each a `graph_rewrite`.

pub mod decompose;
pub mod expand;
pub mod fold;
pub mod gpudims;
pub mod linearize;
pub mod lower;
pub mod opt;
pub mod replay;
pub mod transcendental;
pub mod vectorize;

use std::collections::HashSet;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::color::stderr_is_terminal;
use crate::helpers::debug;
use crate::renderer::Renderer;
use crate::uop::spec::{self, Stage};
use crate::uop::symbolic::symbolic;
use crate::uop::uop::UOpSet;
use crate::uop::Target;
use crate::uop::{graph_rewrite, Arg, Ops, Special, UOp};
use crate::uop::{KernelName, ProgramSpec};

use opt::Opt;

/// Gated loads' indices simplified under their gates (before opts, so that heuristics see which
/// loops an address really depends on, and after them, for the split loops).
fn simplify_valid(ast: &UOp) -> UOp {
    graph_rewrite(ast, crate::uop::valid::pm_simplify_valid(), &mut HashSet::<UOp>::new(), "simplify valid", false)
}

/// The kernel AST the opts apply to: `kernel` simplified (symbolic, gated loads, reduce folds).
pub fn optimizable(kernel: &UOp) -> UOp {
    let ast = graph_rewrite(kernel, symbolic(), &mut (), "symbolic", false);
    let ast = simplify_valid(&ast);
    graph_rewrite(&ast, fold::pm_reduce_fold(), &mut (), "reduce fold", false)
}

/// Run the codegen passes on a kernel AST (a SINK of STOREs) for `renderer` and its target, with
/// the heuristics' opts. With `PROCESS_REPLAY` set, the rendered source is also captured
/// (`replay.rs`); failing to write it is the error.
pub fn get_program(kernel: &UOp, renderer: &dyn Renderer) -> Result<ProgramSpec> {
    let _viz = crate::viz::group(|| format!("kernel {}", KernelName::of(kernel)));
    checked(kernel, || {
        let (ast, target) = (optimizable(kernel), renderer.target());
        let opts = opt::hand_coded_optimizations(&ast, &target);
        finish(kernel, &ast, &opts, renderer, &target, "")
    })
}

/// `codegen` with every pass's result checked against the kernel spec (`uop/spec.rs`) when
/// checks are on: a malformed node is the error, before whatever a later pass made of it.
fn checked(kernel: &UOp, codegen: impl FnOnce() -> Result<ProgramSpec>) -> Result<ProgramSpec> {
    let Some(check) = spec::check_stage(Stage::Kernel) else { return codegen() };
    spec::verify(kernel, Stage::Kernel, "rangeify")?;
    let result = codegen();
    check.finish()?;
    result
}

/// `get_program` with `opts` (chosen for `optimizable(kernel)`, e.g. by BEAM search) instead of
/// the heuristics'; `note` ends the DEBUG=3 line of applied opts.
pub fn get_program_opts(kernel: &UOp, renderer: &dyn Renderer, opts: &[Opt], note: &str) -> Result<ProgramSpec> {
    let _viz = crate::viz::group(|| format!("kernel {}", KernelName::of(kernel)));
    checked(kernel, || finish(kernel, &optimizable(kernel), opts, renderer, &renderer.target(), note))
}

fn finish(
    kernel: &UOp,
    ast: &UOp,
    opts: &[Opt],
    renderer: &dyn Renderer,
    target: &Target,
    note: &str,
) -> Result<ProgramSpec> {
    if let Some(opt) = opts.iter().find(|o| o.needs_local() && !target.has_local()) {
        return Err(Error::value(
            "opt",
            format!("{opt} needs workgroups with local memory, which the {} target lacks", target.name),
        ));
    }
    let missing_tc = opts.iter().find(|o| matches!(o, Opt::TensorCore { tc, .. } if !target.tensor_cores.contains(tc)));
    if let Some(opt) = missing_tc {
        return Err(Error::value("opt", format!("{opt} needs a tensor core the {} target lacks", target.name)));
    }
    let ast = opt::apply_opts(ast, opts);
    if debug() >= 3 {
        let line = opt::applied_opts_line(&KernelName::of(kernel), &KernelName::of(&ast), opts, stderr_is_terminal());
        eprintln!("{line}{note}");
    }
    let spec = lower(&ast, renderer, target)?;
    if let Some(dir) = replay::capture_dir() {
        let key = replay::capture_key(kernel, &opt::settings(target));
        replay::capture(&dir, &spec.name.to_string(), key, renderer.language(), &spec.src)?;
    }
    Ok(spec)
}

/// An optimized kernel AST -> program: expand, launch dims for workgroups, lower reduces,
/// decompose for `renderer`, linearize, render, all for `target`.
pub(crate) fn lower(ast: &UOp, renderer: &dyn Renderer, target: &Target) -> Result<ProgramSpec> {
    let name = KernelName::of(ast);
    // a GPU-like target launches every kernel as workgroups, its output loops the grid, and has
    // no stores around the caches
    let stream = !target.gpu && vectorize::streams_output(ast);
    let workgroups = target.gpu || opt::workgroups(ast);
    let alu = [Ops::UNARY, Ops::BINARY, Ops::TERNARY].concat();
    let mut sup = decompose::Supported {
        ops: alu.into_iter().filter(|o| renderer.supports(*o)).collect(),
        storage_only: [(DType::BFLOAT16, target.dtypes.bfloat16), (DType::FLOAT16, target.dtypes.half)]
            .into_iter()
            .filter_map(|(d, native)| (!native).then_some(d))
            .collect(),
    };
    let ast = graph_rewrite(ast, transcendental::pm_transcendental(), &mut sup, "transcendental", false);
    let ast = expand::expand(&ast, target.vector_bytes);
    let ast = match workgroups {
        true => gpudims::gpudims(&ast, target.workgroups.as_ref())?,
        false => ast,
    };
    let ast = simplify_valid(&graph_rewrite(&ast, symbolic(), &mut (), "symbolic", false));
    let ast = match stream {
        true => {
            graph_rewrite(&ast, vectorize::pm_stream_stores(), &mut { target.vector_bytes }, "stream stores", false)
        }
        false => ast,
    };
    let mut lower_ctx = lower::LowerCtx::new(&ast, target);
    let ast = graph_rewrite(&ast, &lower::pm_lower_reduce(), &mut lower_ctx, "lower reduce", false);
    let ast = graph_rewrite(&ast, &decompose::pm_decompose(), &mut sup, "decompose", false);
    let uops = linearize::linearize(&ast);
    if let Some(dtype) = uops.iter().map(|u| u.dtype().base()).find(|d| !target.computes_in(*d)) {
        return Err(Error::DType { device: target.name.clone(), dtype, kernel: name.to_string() });
    }
    if spec::enabled() {
        spec::verify_program(&uops, "linearize")?;
    }
    if debug() >= 6 {
        eprintln!("linearized {}: {} uops", name.for_debug(), uops.len());
        eprint!("{}", crate::renderer::listing::listing(&uops));
    }
    let src = renderer.render(&name.to_string(), &uops);
    crate::viz::record_code(|| src.clone());
    let (global_size, local_size) = launch_size(&uops, workgroups);
    Ok(ProgramSpec { ops: count_ops(&uops), global_size, local_size, name, uops, src })
}

/// The launch dims of a linear program: the sizes of its SPECIALs (1 where it has none), the
/// largest where a size is symbolic.
fn launch_size(uops: &[UOp], workgroups: bool) -> ([usize; 3], Option<[usize; 3]>) {
    let (mut global, mut local) = ([1; 3], [1; 3]);
    for u in uops.iter().filter(|u| u.op() == Ops::Special) {
        let size = u.src()[0].vmax().max(1) as usize;
        match u.arg() {
            Arg::Special(Special::Group(d)) => global[*d] = size,
            Arg::Special(Special::Local(d)) => local[*d] = size,
            Arg::Special(Special::Core) => global[0] = size,
            _ => {}
        }
    }
    (global, workgroups.then_some(local))
}

/// ALU ops executed by one run: each ALU node weighted by its enclosing loops' trip counts. As
/// tinygrad's estimate, what computes an address or a gate (anything an INDEX depends on) is
/// indexing, not arithmetic, and does not count.
fn count_ops(uops: &[UOp]) -> u64 {
    let indexes = uops.iter().filter(|u| u.op() == Ops::Index).cloned().collect();
    let indexing: UOpSet = UOp::new(Ops::Sink, DType::VOID, indexes, Arg::None).toposort().into_iter().collect();
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
            Ops::Wmma => {
                if let Arg::Wmma(tc) = u.arg() {
                    // one thread's share of the warp's multiply-adds
                    let [m, n, k] = tc.dims;
                    total += trips.last().unwrap() * (2 * m * n * k / crate::uop::wmma::WARP) as u64;
                }
            }
            op if op.is_alu() && u.dtype().base() != DType::INDEX && !indexing.contains(u) => {
                // a fused multiply-add is two operations
                let flops = if op == Ops::MulAcc { 2 } else { 1 };
                total += trips.last().unwrap() * u.dtype().count as u64 * flops
            }
            _ => {}
        }
    }
    total
}
