//! Where realized buffers came from, so that gradients flow through tensors realized before
//! `backward` (a loss read with `item()` first, a realized intermediate), as in PyTorch.
//!
//! Realizing replaces a graph by its buffer. When that graph depends on a tensor that asked for
//! gradients (`requires_grad(true)`, which optimizers set on their parameters), the buffer keeps
//! it as its origin for as long as the buffer's node lives, and `backward` walks from the buffer
//! into it. Graphs over other tensors keep nothing: a loop realizing `x = x + 1` holds no
//! history (PyTorch builds that chain only for tensors that require gradients too). Gradients
//! `backward` stores are detached, and an in-place `assign` forgets the origin it overwrites.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::uop::uop::WeakUOp;
use crate::uop::{Ops, UOp, UOpMap};

#[derive(Default)]
struct Origins {
    /// Nodes of tensors that asked for gradients (their BUFFER once they have storage).
    wanted: HashSet<WeakUOp>,
    /// BUFFER node -> the graph realized into it.
    from: HashMap<WeakUOp, UOp>,
    /// Entries after the last sweep of dead nodes: the next sweep comes at twice as many.
    swept: usize,
}

fn origins() -> std::sync::MutexGuard<'static, Origins> {
    static ORIGINS: OnceLock<Mutex<Origins>> = OnceLock::new();
    ORIGINS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

impl Origins {
    /// Drop the entries of dead nodes (their origins hold graphs, and the graphs buffers) once
    /// the entries have doubled since the last sweep.
    fn sweep(&mut self) {
        if self.wanted.len() + self.from.len() < 2 * self.swept.max(32) {
            return;
        }
        self.wanted.retain(WeakUOp::alive);
        self.from.retain(|k, _| k.alive());
        self.swept = self.wanted.len() + self.from.len();
    }

    /// Whether gradients can reach a wanted tensor from `graph` (not through a DETACH).
    fn carries_gradient(&self, graph: &UOp) -> bool {
        let mut stack = vec![graph.clone()];
        let mut seen = crate::uop::uop::UOpSet::default();
        while let Some(u) = stack.pop() {
            if !seen.insert(u.clone()) || u.op() == Ops::Detach {
                continue;
            }
            let weak = u.downgrade();
            if self.wanted.contains(&weak) || self.from.contains_key(&weak) {
                return true;
            }
            stack.extend(u.src().iter().cloned());
        }
        false
    }
}

/// `node` (a tensor's gradient key) asked for gradients.
pub(super) fn want(node: &UOp) {
    let mut o = origins();
    o.wanted.insert(node.downgrade());
    o.sweep();
}

/// The BUFFER node under a view of it.
fn base(view: &UOp) -> &UOp {
    let mut base = view;
    while base.op().is_movement() {
        base = &base.src()[0];
    }
    base
}

/// After a realize: remember what each realized graph (a key of `becomes`, realized into the
/// buffer view it maps to) was computed from, where gradients can flow through it. Nothing is
/// kept while the JIT captures: its replays overwrite these buffers.
pub(super) fn record(becomes: &UOpMap<UOp>) {
    let mut o = origins();
    if o.wanted.is_empty() {
        return;
    }
    let capturing = crate::engine::capturing();
    for (graph, view) in becomes {
        let buffer = base(view).downgrade();
        if graph.op() == Ops::Assign {
            o.from.remove(&buffer);
        } else if o.wanted.contains(&graph.downgrade()) {
            o.wanted.insert(buffer);
        } else if !capturing && graph.dtype().is_float() && o.carries_gradient(graph) {
            o.from.insert(buffer, graph.clone());
        }
    }
    o.sweep();
}

/// The graph realized into BUFFER node `buffer`, if gradients flow through it.
pub(super) fn origin_of(buffer: &UOp) -> Option<UOp> {
    if buffer.op() != Ops::Buffer {
        return None;
    }
    origins().from.get(&buffer.downgrade()).cloned()
}
