//! Kernel optimizations as RANGE splits, chosen by heuristics (BEAM search comes later).
//!
//! Today one opt exists: THREAD, which splits the outermost output loop across CPU cores. UPCAST,
//! UNROLL, LOCAL and GROUP will be further splits of the same kind.

use crate::dtype::DType;
use crate::helpers::getenv;
use crate::uop::{Arg, AxisKind, Ops, UOp};

/// One optimization action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opt {
    /// Run the outermost output loop on `n` threads: `r -> core_id * (N/n) + r'`.
    Thread(usize),
}

/// Kernels smaller than this many loop iterations stay on one thread.
const THREAD_MIN_WORK: i64 = 1 << 16;

/// The outermost output loop of a kernel and the total loop iterations.
fn outer_loop(ast: &UOp) -> (Option<UOp>, i64) {
    let ranges: Vec<UOp> = ast.toposort().into_iter().filter(|u| u.op() == Ops::Range).collect();
    let work = ranges.iter().map(|r| r.src()[0].const_int_value().unwrap_or(1)).product();
    let outer = ranges.into_iter().filter(|r| matches!(r.arg(), Arg::Range(_, AxisKind::Loop))).min_by_key(|r| {
        if let Arg::Range(id, _) = r.arg() {
            *id
        } else {
            usize::MAX
        }
    });
    (outer, work)
}

/// The optimizations hand-picked for `ast` on a machine with `threads` cores (none with NOOPT).
pub fn hand_coded_optimizations(ast: &UOp, threads: usize) -> Vec<Opt> {
    if getenv("NOOPT", 0) != 0 || threads < 2 {
        return vec![];
    }
    let (Some(outer), work) = outer_loop(ast) else { return vec![] };
    let size = outer.src()[0].const_int_value().unwrap_or(0) as usize;
    let n = (2..=threads).rev().find(|n| size.is_multiple_of(*n)).unwrap_or(1);
    if n > 1 && work >= THREAD_MIN_WORK {
        vec![Opt::Thread(n)]
    } else {
        vec![]
    }
}

/// `ast` with `opts` applied.
pub fn apply_opts(ast: &UOp, opts: &[Opt]) -> UOp {
    opts.iter().fold(ast.clone(), |ast, opt| match *opt {
        Opt::Thread(n) => {
            let Some(outer) = outer_loop(&ast).0 else { return ast };
            let Arg::Range(id, kind) = *outer.arg() else { return ast };
            let size = outer.src()[0].const_int_value().expect("loop sizes are constant");
            let chunk = size / n as i64;
            let core =
                UOp::new(Ops::Special, DType::INDEX, vec![UOp::index_const(n as i64)], Arg::Str("core_id".into()));
            let inner = UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(chunk)], Arg::Range(id, kind));
            let split = core.alu(Ops::Mul, &[&UOp::index_const(chunk)]).alu(Ops::Add, &[&inner]);
            crate::uop::substitute(&ast, &mut [(outer, split)].into(), "apply opts")
        }
    })
}

/// How many threads the program runs on (the size of its `core_id` SPECIAL, else 1).
pub fn thread_count(uops: &[UOp]) -> usize {
    uops.iter().find(|u| u.op() == Ops::Special).and_then(|u| u.src()[0].const_int_value()).map_or(1, |n| n as usize)
}
