//! Kernel AST -> linear program -> source: the declared lists `SIMPLIFY` and `LOWER`
//! (`uop/pipeline.rs`), the opts between them, then linearize and render.

pub mod decompose;
pub mod expand;
pub mod fold;
pub mod gpudims;
pub mod linearize;
pub mod lower;
pub mod narrow;
pub mod opt;
pub mod replay;
pub mod transcendental;
pub mod vectorize;

use std::collections::HashSet;
use std::marker::PhantomData;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::color::stderr_is_terminal;
use crate::helpers::debug;
use crate::renderer::Renderer;
use crate::uop::pipeline::{Pipeline, Step};
use crate::uop::stage::KernelStage;
use crate::uop::symbolic::symbolic;
use crate::uop::uop::UOpSet;
use crate::uop::valid::pm_simplify_valid;
use crate::uop::{graph_rewrite, Arg, Kernel, KernelName, LinearProgram, Ops, ProgramSpec, Special, Target, UOp};

use opt::Opt;

/// Gated loads' indices simplified under their gates, each once.
fn simplify_valid<C>(ast: &UOp, _: &mut C, pass: &'static str) -> UOp {
    graph_rewrite(ast, pm_simplify_valid(), &mut HashSet::new(), pass, false)
}

/// A kernel AST made ready for the opts (and what the heuristics and BEAM look at): index
/// arithmetic simplified, gated loads' indices simplified under their gates (so that the opts see
/// which loops an address really depends on), reduces of known closed forms folded.
pub static SIMPLIFY: Pipeline<(), KernelStage> = Pipeline {
    stage: PhantomData,
    steps: &[
        Step::table("symbolic", symbolic),
        Step::rules("simplify valid", simplify_valid),
        Step::table("reduce fold", fold::pm_reduce_fold),
    ],
};

/// What lowering a kernel reads: its target, the ops its renderer supports, the opts to apply,
/// and what the `plan launch` analysis finds.
pub struct Lowering {
    target: Target,
    supported: decompose::Supported,
    opts: Vec<Opt>,
    /// The optimized kernel's name (before expanding turns its upcast loops into vectors).
    name: Option<KernelName>,
    /// It streams its stores past the caches (a CPU kernel writing whole vectors of a large output).
    stream: bool,
    /// It launches as workgroups (every GPU kernel; a CPU kernel with LOCAL or GROUP opts).
    workgroups: bool,
}

impl Lowering {
    /// Lowering for `renderer`'s `target`, applying `opts` first.
    fn new(renderer: &dyn Renderer, target: &Target, opts: &[Opt]) -> Lowering {
        let alu = [Ops::UNARY, Ops::BINARY, Ops::TERNARY].concat();
        let supported = decompose::Supported {
            ops: alu.into_iter().filter(|o| renderer.supports(*o)).collect(),
            storage_only: [(DType::BFLOAT16, target.dtypes.bfloat16), (DType::FLOAT16, target.dtypes.half)]
                .into_iter()
                .filter_map(|(d, native)| (!native).then_some(d))
                .collect(),
        };
        Lowering {
            target: target.clone(),
            supported,
            opts: opts.to_vec(),
            name: None,
            stream: false,
            workgroups: false,
        }
    }
}

/// The kernel's name and launch: a GPU-like target launches every kernel as workgroups, its
/// output loops the grid, and has no stores around the caches.
fn plan_launch(ast: &UOp, c: &mut Lowering) {
    c.name = Some(KernelName::of(ast));
    c.stream = !c.target.gpu && vectorize::streams_output(ast);
    c.workgroups = c.target.gpu || opt::workgroups(ast);
}

/// An optimizable kernel AST -> the kernel as its renderer's ops, over loops, accumulators and
/// vectors: the opts applied, upcast loops expanded into vectors, launch dims for workgroups,
/// reduces lowered to accumulators, what the target lacks decomposed.
pub static LOWER: Pipeline<Lowering, KernelStage> = Pipeline {
    stage: PhantomData,
    steps: &[
        Step::walk("apply opts", |ast, c| Ok(opt::apply_opts(ast, &c.opts))),
        Step::analysis("plan launch", plan_launch),
        Step::walk("narrow gated reduces", |ast, _| Ok(narrow::narrow_reduces(ast))),
        Step::rules("transcendental", |ast, c, pass| {
            graph_rewrite(ast, transcendental::pm_transcendental(), &mut c.supported, pass, false)
        }),
        Step::walk("expand", |ast, c| Ok(expand::expand(ast, c.target.vector_bytes))),
        Step::walk("gpu dims", |ast, c: &mut Lowering| gpudims::gpudims(ast, c.target.workgroups.as_ref()))
            .when(|c| c.workgroups),
        Step::table("symbolic", symbolic),
        Step::rules("simplify valid", simplify_valid),
        Step::rules("stream stores", |ast, c: &mut Lowering, pass| {
            graph_rewrite(ast, vectorize::pm_stream_stores(), &mut { c.target.vector_bytes }, pass, false)
        })
        .when(|c| c.stream),
        Step::rules("lower reduce", |ast, c, pass| {
            graph_rewrite(ast, lower::pm_lower_reduce(), &mut lower::LowerCtx::new(ast, &c.target), pass, false)
        }),
        Step::rules("decompose", |ast, c, pass| {
            graph_rewrite(ast, decompose::pm_decompose(), &mut c.supported, pass, false)
        }),
    ],
};

/// The kernel AST the opts apply to: `kernel` through `SIMPLIFY`. With spec checks on, a
/// malformed step is the error.
pub fn optimizable(kernel: &Kernel) -> Result<Kernel> {
    SIMPLIFY.run(kernel, &mut ())
}

/// Codegen of a kernel AST (a SINK of STOREs) for `renderer` and its target, with the
/// heuristics' opts: `SIMPLIFY`, the opts, `LOWER`, linearize, render. With `PROCESS_REPLAY` set,
/// the rendered source is also captured (`replay.rs`); failing to write it is the error.
pub fn get_program(kernel: &Kernel, renderer: &dyn Renderer) -> Result<ProgramSpec> {
    let _viz = crate::uop::track::group(|| format!("kernel {}", KernelName::of(kernel)));
    let (ast, target) = (optimizable(kernel)?, renderer.target());
    let opts = opt::hand_coded_optimizations(&ast, &target);
    finish(kernel, &ast, &opts, renderer, &target, "")
}

/// `get_program` with `opts` (chosen for `optimizable(kernel)`, e.g. by BEAM search) instead of
/// the heuristics'; `note` ends the DEBUG=3 line of applied opts.
pub fn get_program_opts(kernel: &Kernel, renderer: &dyn Renderer, opts: &[Opt], note: &str) -> Result<ProgramSpec> {
    let _viz = crate::uop::track::group(|| format!("kernel {}", KernelName::of(kernel)));
    finish(kernel, &optimizable(kernel)?, opts, renderer, &renderer.target(), note)
}

fn finish(
    kernel: &Kernel,
    ast: &Kernel,
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
    let spec = lower_with(ast, renderer, Lowering::new(renderer, target, opts), |name| {
        if debug() >= 3 {
            let line = opt::applied_opts_line(&KernelName::of(kernel), name, opts, stderr_is_terminal());
            eprintln!("{line}{note}");
        }
    })?;
    if let Some(dir) = replay::capture_dir() {
        let key = replay::capture_key(kernel, &opt::settings(target.clone()));
        replay::capture(&dir, &spec.name.to_string(), key, renderer.language(), &spec.src)?;
    }
    Ok(spec)
}

/// An optimized kernel AST (its opts applied, as BEAM search applies them) -> program for
/// `renderer` and `target`. With `SPEC` on, a malformed AST is the error.
pub(crate) fn lower(ast: &UOp, renderer: &dyn Renderer, target: &Target) -> Result<ProgramSpec> {
    let ast = Kernel::new(ast.clone(), "apply opts")?;
    lower_with(&ast, renderer, Lowering::new(renderer, target, &[]), |_| {})
}

/// `LOWER`, then linearize and render; `named` is given the kernel's name once its opts apply.
fn lower_with(
    ast: &Kernel,
    renderer: &dyn Renderer,
    mut c: Lowering,
    named: impl FnOnce(&KernelName),
) -> Result<ProgramSpec> {
    let ast = LOWER.run(ast, &mut c)?;
    let name = c.name.expect("LOWER plans the launch");
    named(&name);
    let uops = LinearProgram::new(linearize::linearize(&ast), "linearize")?;
    if let Some(dtype) = uops.iter().map(|u| u.dtype().base()).find(|d| !c.target.computes_in(*d)) {
        return Err(Error::DType { device: c.target.name.to_string(), dtype, kernel: name.to_string() });
    }
    if debug() >= 6 {
        eprintln!("linearized {}: {} uops", name.for_debug(), uops.len());
        eprint!("{}", crate::renderer::listing::listing(&uops));
    }
    let src = renderer.render(&name.to_string(), &uops);
    crate::uop::track::record_code(|| src.clone());
    let (global_size, local_size) = launch_size(&uops, c.workgroups);
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

/// How many times a loop of size `size` is counted to run: its constant size; for a loop whose
/// size depends on the loops it runs in (one `narrow.rs` narrowed), the most it can, as though
/// it were not narrowed; 1 for a loop of symbolic size.
fn loop_trips(size: &UOp) -> u64 {
    match size.const_int_value() {
        Some(n) => n.max(0) as u64,
        None if size.toposort().iter().any(|n| n.op() == Ops::DefineVar) => 1,
        None => size.vmax().max(0) as u64,
    }
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
                trips.push(trips.last().unwrap() * loop_trips(&u.src()[0]));
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
