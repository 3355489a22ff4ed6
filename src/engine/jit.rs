//! The JIT's replay (tinygrad's CapturedJit): the kernels and copies one call ran, captured with
//! their buffers, replayed on new input buffers and variable values without scheduling or
//! codegen. The intermediate buffers share memory where their lifetimes allow. `tensor/jit.rs`
//! calls a function over tensors through it.

use std::collections::HashSet;
use std::sync::Arc;

use super::realize::{ExecItem, Runner};
use crate::engine::memory::{plan_memory, replace_planned, Step};
use crate::error::{Error, Result};
use crate::runtime::Buffer;
use crate::schedule::VarVals;

/// Where a captured kernel's buffer comes from on replay.
enum Slot {
    /// The buffer of the call's `i`-th input.
    Input(usize),
    /// A buffer the captured call allocated or used (weights, intermediates, outputs).
    Fixed(Arc<Buffer>),
}

/// The kernels and copies of one call, each with where its buffers come from.
pub struct CapturedJit {
    items: Vec<(ExecItem, Vec<Slot>)>,
    outputs: Vec<Slot>,
    /// The memory the replay writes besides its inputs (outputs, intermediates): the id of each
    /// written buffer's base (a view's, or its own).
    written: HashSet<u64>,
    /// Which inputs shared memory in the captured call (`aliasing`).
    aliasing: Vec<usize>,
}

/// For each buffer of `inputs`, the first input sharing its memory: the pattern of inputs that
/// are one tensor given twice.
fn aliasing(inputs: &[Arc<Buffer>]) -> Vec<usize> {
    let ids: Vec<u64> = inputs.iter().map(memory_id).collect();
    ids.iter().map(|id| ids.iter().position(|other| other == id).expect("itself")).collect()
}

/// The id of the buffer whose memory `b` is (its base's, for a view).
fn memory_id(b: &Arc<Buffer>) -> u64 {
    b.base().map_or(b.id(), |(base, _)| base.id())
}

/// The captured items with their intermediate buffers (not inputs or outputs, nothing held
/// outside the capture) sharing memory where their lifetimes allow (`engine/memory.rs`).
fn plan_items(mut items: Vec<ExecItem>, keep: &HashSet<u64>) -> Vec<ExecItem> {
    let plan = {
        let steps: Vec<Step> = items
            .iter()
            .map(|e| Step {
                bufs: e.bufs.iter().collect(),
                reads_output: matches!(&e.runner, Runner::Kernel(k) if k.reads_output),
            })
            .collect();
        plan_memory(&steps, keep, "JIT ")
    };
    items.iter_mut().for_each(|e| replace_planned(&mut e.bufs, &plan));
    items
}

impl CapturedJit {
    /// Capture `items`, run by a call on `inputs` that produced `outputs`: a buffer of an input
    /// is replaced by the new call's on replay, every other one is kept.
    pub fn new(items: Vec<ExecItem>, inputs: &[Arc<Buffer>], outputs: &[Arc<Buffer>]) -> CapturedJit {
        let keep = inputs.iter().chain(outputs).map(|b| b.id()).collect();
        let slot = |b: &Arc<Buffer>| match inputs.iter().position(|i| Arc::ptr_eq(i, b)) {
            Some(i) => Slot::Input(i),
            None => Slot::Fixed(b.clone()),
        };
        let items: Vec<(ExecItem, Vec<Slot>)> = plan_items(items, &keep)
            .into_iter()
            .map(|e| {
                let slots = e.bufs.iter().map(slot).collect();
                (e, slots)
            })
            .collect();
        // every kernel and copy writes its first buffer
        let written = items
            .iter()
            .filter_map(|(_, slots)| match slots.first() {
                Some(Slot::Fixed(b)) => Some(memory_id(b)),
                _ => None,
            })
            .collect();
        CapturedJit { items, outputs: outputs.iter().map(slot).collect(), written, aliasing: aliasing(inputs) }
    }

    /// Whether a replay on `inputs` computes what the function would: their memory is shared
    /// among them as it was in the captured call (a tensor given for two inputs, where the
    /// capture had two, may be written through one and read through the other).
    pub fn replays(&self, inputs: &[Arc<Buffer>]) -> bool {
        aliasing(inputs) == self.aliasing
    }

    /// How many kernels and copies a replay runs.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the capture ran nothing.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Run the captured items on `inputs` (in the captured call's order) with the variables'
    /// values `vals` (a variable not among them keeps the value it was captured with); returns
    /// the output buffers and the seconds the items took.
    ///
    /// An input whose memory the replay writes (an output of the last call fed back in, `x =
    /// jit(x)`) is copied first, so that the kernels read what the call was given, as an eager
    /// call would.
    pub fn replay(&self, inputs: &[Arc<Buffer>], vals: &VarVals) -> Result<(Vec<Arc<Buffer>>, f64)> {
        if inputs.len() != self.aliasing.len() {
            return Err(Error::value(
                "JIT",
                format!("the capture took {} inputs, the replay was given {}", self.aliasing.len(), inputs.len()),
            ));
        }
        let mut seconds = 0.0;
        let mut own = Vec::with_capacity(inputs.len());
        for b in inputs {
            if !self.written.contains(&memory_id(b)) {
                own.push(b.clone());
                continue;
            }
            let copy = Arc::new(Buffer::new(b.device(), b.size(), b.dtype()));
            seconds +=
                ExecItem { runner: Runner::Copy { ranks: None }, bufs: vec![copy.clone(), b.clone()], vals: vec![] }
                    .run()?;
            own.push(copy);
        }
        let inputs = &own;
        let resolve = |s: &Slot| match s {
            Slot::Input(i) => inputs[*i].clone(),
            Slot::Fixed(b) => b.clone(),
        };
        for (item, slots) in &self.items {
            let vals = match &item.runner {
                Runner::Kernel(k) => {
                    k.vars.iter().zip(&item.vals).map(|(n, &v)| vals.get(n).copied().unwrap_or(v)).collect()
                }
                Runner::Copy { .. } => vec![],
            };
            let bufs = slots.iter().map(resolve).collect();
            seconds += ExecItem { runner: item.runner.clone(), bufs, vals }.run()?;
        }
        Ok((self.outputs.iter().map(resolve).collect(), seconds))
    }
}
