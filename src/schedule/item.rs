//! A schedule: its steps (kernels and copies) over slots, the buffers it names by position (the
//! engine binds them, `engine/bind.rs`).

use crate::dtype::DType;
use crate::uop::{Kernel, Ops};

/// A buffer a schedule names: the graph's input buffer at `position` (in the order a walk of the
/// graph meets its BUFFERs), or a new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    Input { position: usize, size: usize, dtype: DType },
    New { device: String, size: usize, dtype: DType },
}

impl Slot {
    pub fn size(&self) -> usize {
        match self {
            Slot::Input { size, .. } | Slot::New { size, .. } => *size,
        }
    }
    pub fn dtype(&self) -> DType {
        match self {
            Slot::Input { dtype, .. } | Slot::New { dtype, .. } => *dtype,
        }
    }
}

/// One step of a schedule over slots (indices into `Schedule::slots`).
pub enum ScheduleStep {
    /// Run the kernel `ast` with `slots` bound to its PARAMs.
    Kernel { ast: Kernel, slots: Vec<usize> },
    /// Copy slot `src` into slot `dst`; with `ranks`, an ALLREDUCE over the job's processes.
    Copy { dst: usize, src: usize, ranks: Option<Ops> },
}

/// The steps computing a graph's outputs, in order, over slots: what the schedule cache keeps, so
/// that a graph with other input buffers of the same kinds takes the same schedule.
pub struct Schedule {
    pub steps: Vec<ScheduleStep>,
    pub slots: Vec<Slot>,
    /// Per output: the slot it was stored in, and whether it has symbolic sizes (none for an
    /// output nothing stores).
    pub outputs: Vec<Option<(usize, bool)>>,
}
