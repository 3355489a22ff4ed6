//! Step ordering: the schedule's kernels and copies as a graph, then in a row (tinygrad's kernel
//! graph and schedule linearizer).
//!
//! Pass `kernel graph` replaces each stored node of the tensor graph by its buffer's state once
//! stored, `AFTER(BUFFER, KERNEL)`. The KERNEL is the step that stores it (`Arg::Int`: its index
//! among the steps) and its sources are the buffer states the step reads: a BUFFER no step of
//! this schedule wrote, or the AFTER of the step that wrote it. So a read after a write is an
//! edge of the graph. `order steps` runs the steps in an order that keeps those edges and one
//! more kind: a step writing a buffer in place (an ASSIGN, whose sources hold the state it
//! overwrites) waits for the other steps reading that state, unless they read through it. Among
//! the steps ready to run, the one made first runs first.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use super::rangeify::Realized;
use super::realize::fused_region;
use crate::dtype::DType;
use crate::rule;
use crate::uop::{graph_rewrite, Arg, Ops, PatternMatcher, UOp, UPat};

/// What `kernel graph` reads: the slot each stored node went to, each slot's BUFFER node, and
/// the step that stored each node (none for an empty tensor: nothing to compute).
struct Stored {
    slots: HashMap<UOp, usize>,
    nodes: Vec<UOp>,
    steps: HashMap<UOp, usize>,
}

static PM_KERNEL_GRAPH: LazyLock<PatternMatcher<Stored>> = LazyLock::new(|| {
    PatternMatcher::new(vec![rule!("a stored node as its buffer's state", |u; s: &mut Stored| UPat::var(u) => {
        let buffer = s.nodes[*s.slots.get(u).filter(|_| u.op() != Ops::Buffer)?].clone();
        let Some(&step) = s.steps.get(u) else { return Some(buffer) };
        let (_, reads) = fused_region(u.src(), &|n| s.slots.contains_key(n));
        let kernel = UOp::new(Ops::Kernel, DType::VOID, reads, Arg::Int(step as i64));
        Some(UOp::new(Ops::After, buffer.dtype(), vec![buffer, kernel], Arg::None))
    })])
});

/// The kernel graph of the tensor graph `sink`: `realized` says where each stored node went,
/// `steps` which node each step stores.
pub(super) fn kernel_graph(sink: &UOp, realized: &Realized, steps: &[UOp]) -> UOp {
    let steps = steps.iter().enumerate().map(|(i, u)| (u.clone(), i)).collect();
    let nodes = (0..realized.slots.len()).map(|s| realized.slot_node(s)).collect();
    let mut stored = Stored { slots: realized.buffers.clone(), nodes, steps };
    graph_rewrite(sink, &PM_KERNEL_GRAPH, &mut stored, "kernel graph", true)
}

/// The order in which to run the steps of a kernel graph, and its KERNELs in that order (a SINK).
pub(super) fn order_steps(graph: &UOp) -> (Vec<usize>, UOp) {
    let nodes = graph.toposort();
    let mut kernels: Vec<&UOp> = nodes.iter().filter(|u| u.op() == Ops::Kernel).collect();
    kernels.sort_by_key(|k| step_of(k));
    assert!(kernels.iter().enumerate().all(|(i, k)| step_of(k) == i), "every step is in the kernel graph once");
    let order = linearize(&nodes, &kernels);
    let in_order = order.iter().map(|&i| kernels[i].clone()).collect();
    (order, UOp::sink(in_order))
}

/// Which step a KERNEL is.
fn step_of(kernel: &UOp) -> usize {
    match kernel.arg() {
        Arg::Int(i) => *i as usize,
        arg => unreachable!("KERNEL holds its step's index, not {arg:?}"),
    }
}

/// The buffer a state is of.
fn buffer_of(state: &UOp) -> &UOp {
    if state.op() == Ops::After {
        &state.src()[0]
    } else {
        state
    }
}

/// The steps of a kernel graph (its `nodes`, and its `kernels` by step) in an order keeping
/// every read after the write it reads and every in-place write after the other reads of the
/// state it overwrites.
fn linearize(nodes: &[UOp], kernels: &[&UOp]) -> Vec<usize> {
    let n = kernels.len();
    let mut after: Vec<Vec<usize>> = vec![vec![]; n];
    let mut readers: HashMap<&UOp, Vec<&UOp>> = HashMap::new();
    for k in kernels {
        for state in k.src() {
            readers.entry(state).or_default().push(k);
            if state.op() == Ops::After {
                after[step_of(&state.src()[1])].push(step_of(k));
            }
        }
    }
    for write in nodes.iter().filter(|u| u.op() == Ops::After) {
        let (buffer, writer) = (&write.src()[0], &write.src()[1]);
        for overwritten in writer.src().iter().filter(|s| buffer_of(s) == buffer) {
            for reader in readers.get(overwritten).into_iter().flatten().filter(|r| **r != writer) {
                if !reader.toposort().contains(writer) {
                    after[step_of(reader)].push(step_of(writer));
                }
            }
        }
    }
    let mut waiting: Vec<usize> = vec![0; n];
    after.iter().flatten().for_each(|&j| waiting[j] += 1);
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut order = vec![];
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &j in &after[i] {
            waiting[j] -= 1;
            if waiting[j] == 0 {
                ready.insert(j);
            }
        }
    }
    assert_eq!(order.len(), n, "schedule: reads and in-place writes form a cycle");
    order
}
