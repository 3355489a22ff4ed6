//! A schedule: its steps (kernels and copies) over slots, the buffers it names by position, and
//! the same steps bound to buffers; and the BUFFER nodes a tensor graph names its buffers by.

use std::sync::Arc;

use crate::dtype::DType;
use crate::runtime::Buffer;
use crate::uop::{Arg, Ops, UOp, UOpMap};

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
    Kernel { ast: UOp, slots: Vec<usize> },
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

impl Schedule {
    /// The steps over buffers, the graph's input buffers (`inputs`, its BUFFER nodes by position)
    /// and a new buffer for each new slot, and what each of `outputs` (the scheduled nodes) became.
    pub fn bind(&self, inputs: &[UOp], outputs: &[UOp]) -> (Vec<ScheduleItem>, UOpMap<UOp>) {
        let bufs: Vec<Arc<Buffer>> = self
            .slots
            .iter()
            .map(|s| match s {
                Slot::Input { position, .. } => {
                    Buffer::of(&inputs[*position]).expect("a BUFFER node holds a runtime buffer")
                }
                Slot::New { device, size, dtype } => Arc::new(Buffer::new(device, *size, *dtype)),
            })
            .collect();
        let items = self
            .steps
            .iter()
            .map(|step| match step {
                ScheduleStep::Kernel { ast, slots } => {
                    ScheduleItem::Kernel { ast: ast.clone(), bufs: slots.iter().map(|&s| bufs[s].clone()).collect() }
                }
                ScheduleStep::Copy { dst, src, ranks } => {
                    ScheduleItem::Copy { dst: bufs[*dst].clone(), src: bufs[*src].clone(), ranks: *ranks }
                }
            })
            .collect();
        let becomes = outputs
            .iter()
            .zip(&self.outputs)
            .filter_map(|(o, s)| s.map(|(slot, symbolic)| (o.clone(), became(o, &bufs[slot], symbolic))))
            .collect();
        (items, becomes)
    }
}

/// One step of a schedule, bound to buffers.
pub enum ScheduleItem {
    /// Run the kernel `ast` with `bufs` bound to its PARAMs.
    Kernel { ast: UOp, bufs: Vec<Arc<Buffer>> },
    /// Copy `src` into `dst` (across devices); with `ranks`, `dst` gets `src` combined with that
    /// op over every process of the job (an ALLREDUCE).
    Copy { dst: Arc<Buffer>, src: Arc<Buffer>, ranks: Option<Ops> },
}

/// What output `o`, realized into `buf`, becomes: an assignment its target (a view of the
/// buffer it wrote), anything else the buffer in `o`'s shape. `symbolic` says whether `o` has
/// symbolic sizes: a cached schedule knows, where asking `o` walks its whole graph.
pub fn became(o: &UOp, buf: &Arc<Buffer>, symbolic: bool) -> UOp {
    if o.op() == Ops::Assign {
        return o.src()[0].clone();
    }
    match symbolic.then(|| o.sym_dims()).flatten() {
        None => buffer_view(buf, o.sh()),
        // the buffer holds the largest shape; the view keeps the symbolic sizes
        Some(sym) => {
            let end = |(s, &d): (&Option<UOp>, &usize)| s.clone().unwrap_or_else(|| UOp::index_const(d as i64));
            let bounds: Vec<(UOp, UOp)> = sym.iter().zip(o.sh()).map(|a| (UOp::index_const(0), end(a))).collect();
            crate::uop::variable::symbolic_shrink(&buffer_view(buf, o.sh()), &bounds)
        }
    }
}

/// The buffer behind a BUFFER or reshaped BUFFER node.
pub fn view_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    match u.op() {
        Ops::Buffer => Buffer::of(u),
        _ if u.is_buffer_view() => Buffer::of(&u.src()[0]),
        _ => None,
    }
}

/// A BUFFER node for `buf`, reshaped to `shape` when that differs from `[size]`.
pub fn buffer_view(buf: &Arc<Buffer>, shape: &[usize]) -> UOp {
    let b = UOp::new(Ops::Buffer, buf.dtype(), vec![], Buffer::arg(buf));
    if shape == [buf.size()] {
        b
    } else {
        UOp::new(Ops::Reshape, buf.dtype(), vec![b], Arg::Shape(shape.to_vec()))
    }
}
