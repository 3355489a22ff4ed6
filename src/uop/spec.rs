//! The IR's spec (tinygrad's `spec.py`): for each stage a rule table that accepts exactly the
//! well-formed UOps of that stage (op, dtype, sources, argument). A stage is entered with
//! `check_stage`; while it is active every `graph_rewrite` pass checks its result, and the first
//! node a pass left malformed becomes an error naming the pass and the node, instead of a panic
//! deep in a later pass or the renderer. On with `SPEC=1`, and by default in debug builds (tests).

use std::sync::LazyLock;

use super::ops::Ops;
use super::pattern::{rule, PatternMatcher, Rule, UPat};
use super::print::arg_str;
use super::uop::{Arg, UOp};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// The three forms the one IR takes on its way to a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// What Tensor ops build and the scheduler reads: buffers, movement ops with their
    /// arguments, REDUCE_AXIS, COPY, ASSIGN, ALU over shaped values; and the kernel graph the
    /// scheduler orders its steps by (KERNEL, AFTER).
    Tensor,
    /// A kernel from rangeify to the last codegen pass: a SINK of STOREs into INDEXed PARAMs
    /// over RANGEs, with REDUCEs, vectors, SPECIAL launch dims, registers and local memory.
    Kernel,
    /// The linearized program a renderer reads: the kernel's ops in an order where every source
    /// comes before its user, without REDUCE, and with each RANGE closed by an END.
    Program,
}

/// Whether passes are checked: `SPEC=1`, or a debug build unless `SPEC=0`.
pub fn enabled() -> bool {
    crate::helpers::getenv("SPEC", cfg!(debug_assertions) as i64) != 0
}

/// A rule that accepts the nodes `pat` matches for which `ok` holds.
#[track_caller]
fn accept(pat: UPat, ok: fn(&UOp) -> bool) -> Rule {
    rule(pat.named("node"), move |m| ok(&m["node"]).then(|| m["node"].clone()))
}

fn all_dtype(u: &UOp, pred: impl Fn(DType) -> bool) -> bool {
    u.src().iter().all(|s| pred(s.dtype()))
}

/// ALU, CAST and BITCAST: the dtype rules every stage shares.
fn alu_rules() -> Vec<Rule> {
    vec![
        // comparisons give bool (lane for lane) from two operands of one dtype
        accept(UPat::ops(Ops::COMPARISON), |u| {
            u.src().len() == 2
                && u.src()[0].dtype() == u.src()[1].dtype()
                && u.dtype().base() == DType::BOOL
                && u.dtype().count == u.src()[0].dtype().count
        }),
        // a shift's amount may be any integer of the shifted value's width
        accept(UPat::ops(&[Ops::Shl, Ops::Shr]), |u| {
            u.src().len() == 2 && u.src()[0].dtype() == u.dtype() && u.src()[1].dtype().count == u.dtype().count
        }),
        accept(UPat::ops(Ops::UNARY), |u| u.src().len() == 1 && all_dtype(u, |d| d == u.dtype())),
        accept(UPat::ops(Ops::BINARY), |u| u.src().len() == 2 && all_dtype(u, |d| d == u.dtype())),
        accept(UPat::ops(&[Ops::MulAcc]), |u| u.src().len() == 3 && all_dtype(u, |d| d == u.dtype())),
        accept(UPat::ops(&[Ops::Where]), |u| {
            u.src().len() == 3
                && u.src()[0].dtype().base() == DType::BOOL
                && u.src()[1].dtype() == u.dtype()
                && u.src()[2].dtype() == u.dtype()
        }),
        accept(UPat::ops(&[Ops::Cast]), |u| u.src().len() == 1),
        accept(UPat::ops(&[Ops::Bitcast]), |u| {
            u.src().len() == 1
                && u.src()[0].dtype().itemsize() * u.src()[0].dtype().count as usize
                    == u.dtype().itemsize() * u.dtype().count as usize
        }),
    ]
}

/// Nodes every stage may hold: SINK, NOOP, CONST, DEFINE_VAR.
fn shared_rules() -> Vec<Rule> {
    vec![
        accept(UPat::ops(&[Ops::Sink]), |u| u.dtype() == DType::VOID),
        accept(UPat::ops(&[Ops::Noop]), |_| true),
        accept(UPat::ops(&[Ops::DefineVar]), |u| {
            u.src().is_empty() && matches!(u.arg(), Arg::Var(_, lo, hi) if lo <= hi) && u.dtype().is_int()
        }),
    ]
}

static TENSOR_SPEC: LazyLock<PatternMatcher> = LazyLock::new(|| {
    let mut rules = shared_rules();
    rules.extend([
        // a schedule's new buffer is a BUFFER of its slot in the kernel graph
        accept(UPat::ops(&[Ops::Buffer]), |u| u.src().is_empty() && matches!(u.arg(), Arg::Buffer(_) | Arg::Int(_))),
        accept(UPat::ops(&[Ops::Device]), |u| u.src().is_empty() && matches!(u.arg(), Arg::Str(_))),
        // a tensor's constant is on a device; an index constant (a shape, an offset) is not
        // (nor is a variable, unless it holds a constant: a scalar parameter, `schedule/unbind.rs`)
        accept(UPat::ops(&[Ops::DefineVar]), |u| {
            matches!(u.src(), [d] if d.op() == Ops::Device) && matches!(u.arg(), Arg::Var(_, lo, hi) if lo <= hi)
        }),
        accept(UPat::ops(&[Ops::Const]), |u| {
            matches!(u.arg(), Arg::Const(_)) && u.src().iter().all(|s| s.op() == Ops::Device)
        }),
        accept(UPat::ops(&[Ops::Reshape, Ops::Expand]), |u| !u.src().is_empty() && matches!(u.arg(), Arg::Shape(_))),
        accept(UPat::ops(&[Ops::Permute]), |u| {
            u.src().len() == 1 && matches!(u.arg(), Arg::Axes(p) if is_permutation(p))
        }),
        accept(UPat::ops(&[Ops::Flip]), |u| u.src().len() == 1 && matches!(u.arg(), Arg::Axes(_))),
        accept(UPat::ops(&[Ops::Pad, Ops::Shrink]), |u| !u.src().is_empty() && matches!(u.arg(), Arg::Pairs(_))),
        accept(UPat::ops(&[Ops::ReduceAxis]), |u| {
            u.src().len() == 1
                && matches!(u.arg(), Arg::ReduceAxis(op, _) if [Ops::Add, Ops::Mul, Ops::Max].contains(op))
        }),
        accept(UPat::ops(&[Ops::Contiguous, Ops::Detach]), |u| !u.src().is_empty()),
        accept(UPat::ops(&[Ops::Copy]), |u| u.src().len() == 1 && matches!(u.arg(), Arg::Str(_))),
        accept(UPat::ops(&[Ops::Assign]), |u| u.src().len() >= 2 && u.src()[0].dtype() == u.dtype()),
        accept(UPat::ops(&[Ops::AllReduce]), |u| {
            u.src().len() == 1 && matches!(u.arg(), Arg::Reduce(Ops::Add | Ops::Mul | Ops::Max))
        }),
        accept(UPat::ops(&[Ops::Multi]), |u| {
            let rank = u.src().first().and_then(UOp::shape).map_or(0, <[usize]>::len);
            let same = u.src().iter().all(|s| s.dtype() == u.dtype() && s.shape() == u.src()[0].shape());
            let axis = match u.arg() {
                Arg::None => true,
                Arg::Int(a) => (*a as usize) < rank,
                _ => false,
            };
            !u.src().is_empty() && same && axis
        }),
        accept(UPat::ops(&[Ops::Call]), |u| !u.src().is_empty() && matches!(u.arg(), Arg::Call(..) | Arg::Function(_))),
        accept(UPat::ops(&[Ops::Bind]), |u| {
            u.src().len() == 2 && u.src()[0].op() == Ops::DefineVar && u.src()[1].op() == Ops::Const
        }),
        // the kernel graph: a step reads buffer states, and a buffer's state after the step
        // that wrote it is an AFTER
        accept(UPat::ops(&[Ops::Kernel]), |u| {
            u.dtype() == DType::VOID
                && matches!(u.arg(), Arg::Int(_))
                && u.src().iter().all(|s| matches!(s.op(), Ops::Buffer | Ops::After))
        }),
        accept(UPat::ops(&[Ops::After]), |u| {
            let s = u.src();
            s.len() == 2 && s[0].op() == Ops::Buffer && s[1].op() == Ops::Kernel && u.dtype() == s[0].dtype()
        }),
    ]);
    rules.extend(alu_rules());
    PatternMatcher::new(rules)
});

fn is_permutation(p: &[usize]) -> bool {
    let mut seen = vec![false; p.len()];
    p.iter().all(|&a| a < p.len() && !std::mem::replace(&mut seen[a], true))
}

/// Whether `u` is memory an INDEX may address: a PARAM, a register or local array, or one of
/// them after the stores it must follow.
fn is_memory(u: &UOp) -> bool {
    match u.op() {
        Ops::Param | Ops::DefineReg | Ops::DefineLocal => true,
        Ops::After => is_memory(&u.src()[0]),
        _ => false,
    }
}

/// The kernel-level rules (the program stage shares them, less REDUCE).
fn kernel_rules() -> Vec<Rule> {
    let mut rules = shared_rules();
    rules.extend([
        accept(UPat::ops(&[Ops::Const]), |u| u.src().is_empty() && matches!(u.arg(), Arg::Const(_))),
        // a buffer, with its size in elements where the schedule knows it
        accept(UPat::ops(&[Ops::Param]), |u| {
            u.src().iter().all(|s| s.const_int_value().is_some())
                && u.src().len() <= 1
                && u.dtype().is_ptr()
                && matches!(u.arg(), Arg::Int(_))
        }),
        // an accumulator: its dtype, its initial value, and the loops it is reset outside of
        accept(UPat::ops(&[Ops::DefineReg]), |u| !u.src().is_empty() && matches!(u.arg(), Arg::Int(_))),
        accept(UPat::ops(&[Ops::DefineLocal]), |u| u.dtype().is_ptr()),
        accept(UPat::ops(&[Ops::Range]), |u| {
            !u.src().is_empty() && u.dtype() == DType::INDEX && matches!(u.arg(), Arg::Range(..))
        }),
        accept(UPat::ops(&[Ops::Special]), |u| u.src().len() == 1 && matches!(u.arg(), Arg::Special(_))),
        // memory, an index, and optionally a bool gate
        accept(UPat::ops(&[Ops::Index]), move |u| {
            let s = u.src();
            (2..=3).contains(&s.len())
                && is_memory(&s[0])
                && (s[1].dtype().base() == DType::INDEX || s[1].dtype().is_int())
                && s.get(2).is_none_or(|g| g.dtype().base() == DType::BOOL)
        }),
        accept(UPat::ops(&[Ops::Load]), |u| !u.src().is_empty() && !u.dtype().is_ptr()),
        accept(UPat::ops(&[Ops::Store]), |u| u.src().len() >= 2 && u.dtype() == DType::VOID),
        // an accumulator's update inside its loops
        accept(UPat::ops(&[Ops::Assign]), |u| {
            u.src().len() >= 2 && u.src()[0].op() == Ops::DefineReg && u.src()[1].dtype() == u.dtype()
        }),
        accept(UPat::ops(&[Ops::End]), |u| !u.src().is_empty()),
        accept(UPat::ops(&[Ops::After, Ops::Barrier]), |u| !u.src().is_empty() || u.op() == Ops::Barrier),
        accept(UPat::ops(&[Ops::Vectorize]), |u| {
            u.src().len() == u.dtype().count as usize && all_dtype(u, |d| d == u.dtype().base())
        }),
        accept(UPat::ops(&[Ops::Gep]), |u| u.src().len() == 1 && matches!(u.arg(), Arg::Int(_) | Arg::Axes(_))),
        accept(UPat::ops(&[Ops::Wmma]), |u| u.src().len() == 3 && matches!(u.arg(), Arg::Wmma(_))),
    ]);
    rules.extend(alu_rules());
    rules
}

static KERNEL_SPEC: LazyLock<PatternMatcher> = LazyLock::new(|| {
    let mut rules = kernel_rules();
    rules.push(accept(UPat::ops(&[Ops::Reduce]), |u| !u.src().is_empty() && matches!(u.arg(), Arg::Reduce(_))));
    PatternMatcher::new(rules)
});

static PROGRAM_SPEC: LazyLock<PatternMatcher> = LazyLock::new(|| PatternMatcher::new(kernel_rules()));

/// The rule table of `stage`.
pub fn spec(stage: Stage) -> &'static PatternMatcher {
    match stage {
        Stage::Tensor => &TENSOR_SPEC,
        Stage::Kernel => &KERNEL_SPEC,
        Stage::Program => &PROGRAM_SPEC,
    }
}

/// One line naming a node: op, dtype, argument and its sources' ops.
fn describe(u: &UOp) -> String {
    let src: Vec<String> = u.src().iter().map(|s| format!("{} {:?}", s.op().name(), s.dtype())).collect();
    format!("{} {:?} ({}) of [{}]", u.op().name(), u.dtype(), arg_str(u.arg()), src.join(", "))
}

fn violation(stage: Stage, pass: &str, u: &UOp, why: &str) -> Error {
    Error::Spec(format!("after pass `{pass}`: {why} in the {stage:?} stage: {}", describe(u)))
}

/// Check every node of `root`'s graph against `stage`'s spec.
pub fn verify(root: &UOp, stage: Stage, pass: &str) -> Result<()> {
    let pm = spec(stage);
    match root.toposort().into_iter().find(|u| !pm.accepts(u)) {
        Some(u) => Err(violation(stage, pass, &u, "malformed node")),
        None => Ok(()),
    }
}

/// Check a linearized program: each node well formed, after its sources, and its RANGEs closed.
pub(super) fn verify_program(uops: &[UOp], pass: &str) -> Result<()> {
    let pm = spec(Stage::Program);
    let mut placed = std::collections::HashSet::new();
    let mut open = vec![];
    for u in uops {
        if !pm.accepts(u) {
            return Err(violation(Stage::Program, pass, u, "malformed node"));
        }
        if let Some(s) = u.src().iter().find(|s| !placed.contains(*s)) {
            return Err(violation(Stage::Program, pass, u, &format!("source {} not placed before", describe(s))));
        }
        match u.op() {
            Ops::Range => open.push(u.clone()),
            Ops::End => {
                let closed: Vec<&UOp> = u.src().iter().filter(|s| s.op() == Ops::Range).collect();
                for r in closed {
                    if open.pop().as_ref() != Some(r) {
                        return Err(violation(
                            Stage::Program,
                            pass,
                            u,
                            "END of a RANGE that is not the innermost open",
                        ));
                    }
                }
            }
            _ => {}
        }
        placed.insert(u.clone());
    }
    match open.last() {
        Some(r) => Err(violation(Stage::Program, pass, r, "RANGE never closed")),
        None => Ok(()),
    }
}
