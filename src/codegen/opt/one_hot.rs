//! Register tiles for one-hot sums, `sum_t where(a == b, x, 0)`: an embedding's gradient, a gather
//! written as a one-hot reduction (not `where(a != b, x, 0)`, which selects nearly every step).
//! Their lowering (`lower.rs`, `gated_sum`) tests the condition once per step and loads and adds
//! the selected value only where it holds, when every lane of the sum shares the condition.

use std::collections::HashSet;

use super::{kernel_ranges, Opt};
use crate::codegen::lower::sparse_selection;
use crate::uop::{Arg, AxisKind, Ops, UOp};

/// The loop ids `u` depends on.
fn range_ids(u: &UOp) -> HashSet<usize> {
    let ids = u.toposort().into_iter().filter_map(|r| match (r.op(), r.arg()) {
        (Ops::Range, Arg::Range(id, _)) => Some(*id),
        _ => None,
    });
    ids.collect()
}

/// The opts of a kernel whose one reduce is a sum of a `sparse_selection` whose condition
/// changes along the sum: lanes of the innermost output loop that the selected value depends on
/// and the condition does not, whole vectors of `vl` lanes, as many as `max_accumulators` hold
/// (a 256-wide embedding's row: 16 AVX-512 vectors per tested token). The loops the condition
/// depends on keep one lane, and the sum is not unrolled, so that all lanes share one test per
/// step. None for any other kernel.
pub(super) fn one_hot_tile(ast: &UOp, vl: usize, max_accumulators: usize) -> Option<Vec<Opt>> {
    let reduces: Vec<UOp> = ast.toposort().into_iter().filter(|u| u.op() == Ops::Reduce).collect();
    let [red] = &reduces[..] else { return None };
    let (cond, _, x) = sparse_selection(&red.src()[0]).filter(|_| red.arg() == &Arg::Reduce(Ops::Add))?;
    let (tested, selected) = (range_ids(cond), range_ids(x));
    if range_ids(&UOp::sink(red.src()[1..].to_vec())).is_disjoint(&tested) {
        return None;
    }
    let ranges = kernel_ranges(ast);
    let lanes = |r: &&(usize, AxisKind, usize)| r.1 == AxisKind::Loop && r.2.is_multiple_of(vl);
    let &(id, _, size) = ranges.iter().rfind(|r| lanes(r) && selected.contains(&r.0) && !tested.contains(&r.0))?;
    let mut vectors = 1;
    while 2 * vectors <= max_accumulators && size.is_multiple_of(2 * vectors * vl) {
        vectors *= 2;
    }
    let upcasts = [vl, vectors].into_iter().filter(|amount| *amount > 1);
    Some(upcasts.map(|amount| Opt::Upcast { range: id, amount }).collect())
}
