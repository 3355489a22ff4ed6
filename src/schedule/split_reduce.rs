//! Large reductions become two (tinygrad's `split_reduceop`).
//!
//! A reduce of many elements into few outputs (a BatchNorm mean, a conv weight's gradient, a
//! full sum) would be one long serial loop per output: one core does all the work and a float
//! accumulator drifts over ~10^5 additions. Splitting one reduced axis `s` into `(d, s/d)` and
//! reducing everything but `d` first gives `d` times more outputs, which the heuristics then
//! spread over threads, and partial sums of shorter runs. The partials are stored and a second
//! kernel reduces the `d` axis.

use std::sync::LazyLock;

use super::rangeify::is_arange;
use crate::helpers::{debug, getenv};
use crate::rule;
use crate::uop::pattern::{PatternMatcher, UPat};
use crate::uop::{Arg, Ops, UOp};

/// Split when a reduce combines at least this many inputs per output. Each part also reads a
/// chunk of the input small enough to stay in cache while every output is computed from it (a
/// 3x3 conv's weight gradient over 512 maps of 6x6 ran 4x faster split).
const SPLIT_MIN_RATIO: usize = 1 << 13;
/// Largest split; the search goes down from it to `SPLIT_MIN_PARTS`.
const SPLIT_MAX_PARTS: usize = 256;
const SPLIT_MIN_PARTS: usize = 8;
/// Cap on the partial-sum buffer (elements): 8M lets the weight gradient of beautiful_mnist's
/// 32x32 5x5 conv over 512 images split into parts of 2 images, whose inputs stay in a core's
/// L2 (1.4x as fast as parts of 4).
const SPLIT_MAX_OUTPUT: usize = 1 << 23;

/// Whether large reduces are split (`SPLIT_REDUCEOP`, on by default).
pub fn enabled() -> bool {
    getenv("SPLIT_REDUCEOP", 1) != 0
}

/// Every large reduce split in two (see the module doc), with the `Partials` made so far.
pub fn pm_split_reduce() -> &'static PatternMatcher<Partials> {
    static PM: LazyLock<PatternMatcher<Partials>> = LazyLock::new(|| {
        let reduce = |r| UPat::ops(&[Ops::ReduceAxis]).named(r);
        PatternMatcher::new(vec![
            rule!("a large reduce in two", |r; partials: &mut Partials| reduce(r) => split(r, partials)),
        ])
    });
    &PM
}

/// The partial reduces made by splits: they are not split again, since splitting a partial's
/// contiguous run would make each part read short runs far apart.
pub type Partials = std::collections::HashSet<UOp>;

fn split(reduce: &UOp, partials: &mut Partials) -> Option<UOp> {
    // a reduce of a symbolic size runs as it is written: its length is known only at launch
    if partials.contains(reduce) || reduce.src()[0].sym_dims().is_some() {
        return None;
    }
    let Arg::ReduceAxis(op, axes) = reduce.arg() else { return None };
    let x = &reduce.src()[0];
    let (shape, out_shape) = (x.sh().to_vec(), reduce.sh().to_vec());
    let outputs: usize = out_shape.iter().product();
    if outputs == 0 || shape.iter().product::<usize>() / outputs < SPLIT_MIN_RATIO {
        return None;
    }
    // an arange (a reduce over constants) and a gather (a one-hot against one) are folded into
    // index math by codegen; split, they could not be
    if is_arange(reduce) || uses_arange(x) {
        return None;
    }
    let max_parts = SPLIT_MAX_PARTS.min(SPLIT_MAX_OUTPUT / outputs);
    let (axis, parts) = axes.iter().find_map(|&a| {
        let fits = (SPLIT_MIN_PARTS..=max_parts).rev().find(|d| shape[a].is_multiple_of(*d))?;
        (!is_broadcast(x, a)).then_some((a, fits))
    })?;
    // axis `a` becomes (parts, rest) and `parts` moves first: the partials' innermost axis stays
    // the reduce's (a conv weight gradient's output channels keep filling whole vectors) and the
    // second reduce sums whole rows
    let mut split_shape = shape.clone();
    split_shape.splice(axis..=axis, [parts, shape[axis] / parts]);
    let order: Vec<usize> = std::iter::once(axis).chain((0..split_shape.len()).filter(|&i| i != axis)).collect();
    if debug() >= 3 {
        eprintln!("split reduce {shape:?} -> {out_shape:?}: axis {axis} into {parts} parts");
    }
    let split = x.movement(Ops::Reshape, Arg::Shape(split_shape)).movement(Ops::Permute, Arg::Axes(order));
    let shifted: Vec<usize> = axes.iter().map(|a| a + 1).collect();
    let partial = UOp::new(Ops::ReduceAxis, reduce.dtype(), vec![split], Arg::ReduceAxis(*op, shifted));
    partials.insert(partial.clone());
    // a negative id never collides with `Tensor::contiguous`'s counter; equal splits share it
    let stored = UOp::new(Ops::Contiguous, reduce.dtype(), vec![partial], Arg::Int(-1));
    let total = UOp::new(Ops::ReduceAxis, reduce.dtype(), vec![stored], Arg::ReduceAxis(*op, vec![0]));
    Some(total.movement(Ops::Reshape, Arg::Shape(out_shape)))
}

/// Whether axis `axis` of `x` is a broadcast (an EXPAND of size 1) on every path to memory, so
/// splitting it would only repeat the same partial sums.
fn is_broadcast(x: &UOp, axis: usize) -> bool {
    let (mut paths, mut seen) = (vec![(x.clone(), axis)], std::collections::HashSet::new());
    while let Some((n, axis)) = paths.pop() {
        if !seen.insert((n.clone(), axis)) {
            continue;
        }
        match (n.op(), n.arg()) {
            (Ops::Expand, _) if n.src()[0].sh()[axis] == 1 => {}
            (Ops::Expand, _) => paths.push((n.src()[0].clone(), axis)),
            (Ops::Permute, Arg::Axes(order)) => paths.push((n.src()[0].clone(), order[axis])),
            (Ops::Const, _) => {}
            (op, _) if op.is_alu() || op == Ops::Cast => paths.extend(n.src().iter().map(|s| (s.clone(), axis))),
            _ => return false,
        }
    }
    true
}

/// Whether `x`'s elementwise region (not looking inside other reduces or stored values) uses an
/// arange.
fn uses_arange(x: &UOp) -> bool {
    let (mut stack, mut seen) = (vec![x.clone()], std::collections::HashSet::new());
    while let Some(n) = stack.pop() {
        if !seen.insert(n.clone())
            || matches!(n.op(), Ops::Buffer | Ops::Contiguous | Ops::Assign | Ops::Copy | Ops::AllReduce)
        {
            continue;
        }
        if is_arange(&n) {
            return true;
        }
        if n.op() == Ops::ReduceAxis {
            continue;
        }
        stack.extend(n.src().iter().cloned());
    }
    false
}
