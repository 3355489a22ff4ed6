//! Realize decisions: which tensor nodes are stored to memory, each kernel computing one of them
//! and fusing everything between. Five analyses over the tensor graph, in this order, each a
//! step of the schedule (`kernel.rs`) adding to one set of nodes to store:
//! - `realize_map`: the requested outputs, CONTIGUOUS, ASSIGN and COPY (and a COPY's computed
//!   source), every reduce whose result is broadcast, and every costly value that is broadcast
//!   (fusing either would recompute it once per broadcast element);
//! - `shared_reduces`: a reduce or a transcendental reading memory that several kernels would
//!   fuse is computed once;
//! - `shared_elementwise`: so is an elementwise value recomputed from more memory than storing
//!   it costs;
//! - `chain_breaks`: no kernel chains more than `MAX_FUSED_DEPTH` ALU ops;
//! - `wide_kernel_splits`: a kernel reading more buffers than its device binds
//!   (`Target::max_buffers`) stores part of its computation first.

use std::collections::{HashMap, HashSet};

use super::rangeify::{is_arange, reads_memory};
use crate::dtype::DType;
use crate::uop::{Ops, Target, UOp};

/// The most ALU ops a kernel chains one after another. A deeper chain (100,000 times `x = x + 1`)
/// is stored every this many ops: a C compiler given it as one kernel runs out of stack (gcc 12's
/// cc1 segfaults on 100,000) or takes minutes, where kernels of this depth compile in moments.
pub const MAX_FUSED_DEPTH: usize = 1000;

/// Broadcasts that multiply the element count by less than this recompute their source.
const BROADCAST_MIN_RATIO: usize = 4;
/// A broadcast source reading memory with at least this many ALU ops plus loads is stored first.
const BROADCAST_MIN_COST: usize = 3;

/// The first realize analysis: the requested outputs (but buffers), CONTIGUOUS, ASSIGN, COPY and
/// ALLREDUCE (and the computed source of a copy), every reduce whose result is broadcast, and the
/// costly source of a broadcast.
pub fn realize_map(sink: &UOp, nodes: &mut HashSet<UOp>) {
    nodes.extend(sink.src().iter().filter(|u| !u.is_buffer_view()).cloned());
    for u in sink.toposort() {
        match u.op() {
            Ops::Contiguous | Ops::Assign => {
                nodes.insert(u);
            }
            Ops::Copy | Ops::AllReduce => {
                if !u.src()[0].is_buffer_view() {
                    nodes.insert(u.src()[0].clone());
                }
                nodes.insert(u);
            }
            Ops::Expand => {
                mark_reduces_below(&u.src()[0], nodes);
                if let Some(src) = costly_broadcast_source(&u, nodes) {
                    nodes.insert(src);
                }
            }
            _ => {}
        }
    }
}

/// A `costly_to_share` value (a reduce, a transcendental reading memory) that `kernels_to_share`
/// kernels would fuse is stored once: a weight's gradient feeding both of Adam's moments,
/// attention's exp read by the forward and the backward.
pub fn shared_reduces(sink: &UOp, nodes: &mut HashSet<UOp>) {
    let mut uses: HashMap<UOp, usize> = HashMap::new();
    for u in sink.toposort().iter().filter(|u| nodes.contains(*u)) {
        let (inside, _) = fused_region(u.src(), &|n| nodes.contains(n));
        for n in inside.into_iter().filter(costly_to_share) {
            *uses.entry(n).or_default() += 1;
        }
    }
    let shared = uses.into_iter().filter(|(n, count)| *count >= kernels_to_share(n) && reads_memory(n));
    nodes.extend(shared.map(|(n, _)| n));
}

/// No kernel chains more than `MAX_FUSED_DEPTH` ALU ops: the node where a chain reaches it is
/// stored.
pub fn chain_breaks(sink: &UOp, nodes: &mut HashSet<UOp>) {
    let mut depth: HashMap<UOp, usize> = HashMap::new();
    for u in sink.toposort() {
        let chained = u.src().iter().map(|s| depth.get(s).copied().unwrap_or(0)).max().unwrap_or(0);
        let d = chained + usize::from(u.op().is_alu() || u.op() == Ops::Cast);
        let storable = u.dtype() != DType::INDEX && u.shape().is_some() && u.sym_dims().is_none();
        if d >= MAX_FUSED_DEPTH && storable {
            nodes.insert(u.clone());
        }
        let d = if nodes.contains(&u) { 0 } else { d };
        depth.insert(u, d);
    }
}

/// A value that several kernels should not each compute: a reduce, or a transcendental (exp's,
/// log's and sin's are tens of ops each once decomposed).
fn costly_to_share(n: &UOp) -> bool {
    n.op() == Ops::ReduceAxis || matches!(n.op(), Ops::Exp2 | Ops::Log2 | Ops::Sin) && storable(n)
}

/// How many kernels fusing a `costly_to_share` value store it instead: a reduce two; a
/// transcendental three, since writing it and reading it back costs about what computing it
/// once more does (a softmax's exp, read by its sum and its quotient, stays fused; attention's,
/// read by the backward too, is stored).
fn kernels_to_share(n: &UOp) -> usize {
    if n.op() == Ops::ReduceAxis {
        2
    } else {
        3
    }
}

/// Store each elementwise value that several kernels would recompute from more memory than
/// storing it once and reading it back costs: fused into `k` kernels and loading `reads`
/// buffers' worth of its own elements (a broadcast bias is a small fraction of one), it is stored
/// when `k * reads > reads + 1 + k`. A transformer's residual stream, `x + attn + mlp` summed
/// over the layers, was otherwise recomputed from every earlier layer's outputs by each
/// LayerNorm, forward and backward: 13 buffers read per row statistic at 4 layers, 1.3 ms each.
/// Values over a reduce stay fused (the reduce passes decide those); sources are decided first,
/// so that a value over a stored one counts that one as a single read.
pub fn shared_elementwise(sink: &UOp, nodes: &mut HashSet<UOp>) {
    let order = sink.toposort();
    let mut uses: HashMap<UOp, usize> = HashMap::new();
    for u in order.iter().filter(|u| nodes.contains(*u)) {
        for n in fused_region(u.src(), &|n| nodes.contains(n)).0 {
            *uses.entry(n).or_default() += 1;
        }
    }
    let numel = |u: &UOp| u.shape().map(|s| s.iter().product::<usize>().max(1));
    for n in order {
        let kernels = uses.get(&n).copied().unwrap_or(0);
        if kernels < 2 || nodes.contains(&n) || !n.op().is_alu() || !n.dtype().is_float() || !storable(&n) {
            continue;
        }
        let Some(size) = numel(&n) else { continue };
        let (inside, loaded) = fused_region(std::slice::from_ref(&n), &|m| nodes.contains(m));
        if inside.iter().any(|m| m.op() == Ops::ReduceAxis) {
            continue;
        }
        let reads: f64 = loaded.iter().map(|b| numel(b).map_or(1.0, |e| (e as f64 / size as f64).min(1.0))).sum();
        let k = kernels as f64;
        if k * reads > reads + 1.0 + k {
            nodes.insert(n);
        }
    }
}

/// Whether a node can be stored as a kernel's output: a value with a fixed shape.
fn storable(u: &UOp) -> bool {
    u.dtype() != DType::INDEX && u.shape().is_some() && u.sym_dims().is_none() && !u.op().is_movement()
}

/// Store part of every kernel that would bind more buffers (its output and what it loads) than
/// its device allows: the node of its region loading the most buffers that still fit, else the
/// one loading the most, until the kernel fits; each node stored so is checked in turn.
pub fn wide_kernel_splits(sink: &UOp, nodes: &mut HashSet<UOp>, target_of: &mut dyn FnMut(&UOp) -> Option<Target>) {
    let mut todo: Vec<UOp> = sink.toposort().into_iter().filter(|u| nodes.contains(u)).collect();
    while let Some(u) = todo.pop() {
        let Some(limit) = target_of(&u).and_then(|t| t.max_buffers) else { continue };
        loop {
            let stored = |n: &UOp| nodes.contains(n);
            let (inside, loaded) = fused_region(u.src(), &stored);
            if loaded.len() < limit {
                break;
            }
            let reads = |n: &UOp| fused_region(n.src(), &stored).1.len();
            let candidates: Vec<(usize, UOp)> =
                inside.into_iter().filter(storable).map(|n| (reads(&n), n)).filter(|(r, _)| *r > 1).collect();
            let fitting = candidates.iter().filter(|(r, _)| *r < limit).max_by_key(|(r, _)| *r);
            let Some((_, part)) = fitting.or_else(|| candidates.iter().max_by_key(|(r, _)| *r)).cloned() else {
                break;
            };
            nodes.insert(part.clone());
            todo.push(part);
        }
    }
}

/// What a kernel computing `roots` fuses: the nodes it computes, and the stored nodes (those
/// `stored` says are realized, and buffers) it loads.
pub(super) fn fused_region(roots: &[UOp], stored: &dyn Fn(&UOp) -> bool) -> (Vec<UOp>, Vec<UOp>) {
    let (mut inside, mut loaded) = (vec![], vec![]);
    let mut stack = roots.to_vec();
    let mut seen = HashSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if stored(&n) || n.op() == Ops::Buffer {
            loaded.push(n);
            continue;
        }
        stack.extend(n.src().iter().cloned());
        inside.push(n);
    }
    (inside, loaded)
}

fn mark_reduces_below(u: &UOp, realize: &mut HashSet<UOp>) {
    let mut stack = vec![u.clone()];
    let mut seen = HashSet::new();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.clone()) || realize.contains(&n) || n.op() == Ops::Buffer {
            continue;
        }
        // an arange is recomputed where it is used: the reduce-folding pass turns it into index
        // arithmetic there
        if is_arange(&n) {
            continue;
        }
        if n.op() == Ops::ReduceAxis {
            realize.insert(n);
            continue;
        }
        stack.extend(n.src().iter().cloned());
    }
}

/// The computed value under the broadcast `expand` if recomputing it per broadcast element costs
/// more than storing it once: it reads memory and has a few ops (a conv's backward chain, say).
/// Index values (integers, masks) and values built on an arange stay fused: the reduce-folding
/// pass turns them into index math.
fn costly_broadcast_source(expand: &UOp, realize: &HashSet<UOp>) -> Option<UOp> {
    let numel = |u: &UOp| u.sh().iter().product::<usize>();
    let mut src = expand.src()[0].clone();
    while src.op().is_movement() && !realize.contains(&src) {
        src = src.src()[0].clone();
    }
    if realize.contains(&src) || !src.dtype().is_float() || numel(expand) < BROADCAST_MIN_RATIO * numel(&src).max(1) {
        return None;
    }
    let (inside, loaded) = fused_region(std::slice::from_ref(&src), &|n| realize.contains(n));
    // an arange (a causal mask's) becomes index arithmetic, not a reduce
    if inside.iter().any(|n| n.op() == Ops::ReduceAxis && !is_arange(n)) {
        return None;
    }
    let alus = inside.iter().filter(|n| n.op().is_alu() || n.op() == Ops::Cast).count();
    (!loaded.is_empty() && alus + loaded.len() >= BROADCAST_MIN_COST).then_some(src)
}
