//! A schedule's steps (kernels and copies over buffers), and the BUFFER nodes a tensor graph
//! names its buffers by.

use std::sync::Arc;

use super::rangeify::is_buffer_view;
use crate::runtime::Buffer;
use crate::uop::{Arg, Ops, UOp};

/// One step of a schedule.
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

/// The buffer under the target of ASSIGN `u`: a BUFFER, or a view of one (RESHAPE, PERMUTE,
/// SHRINK, FLIP, PAD).
pub fn assigned_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    let mut target = &u.src()[0];
    while matches!(target.op(), Ops::Reshape | Ops::Permute | Ops::Shrink | Ops::Flip | Ops::Pad) {
        target = &target.src()[0];
    }
    Buffer::of(target)
}

/// The buffer behind a BUFFER or reshaped BUFFER node.
pub fn view_buffer(u: &UOp) -> Option<Arc<Buffer>> {
    match u.op() {
        Ops::Buffer => Buffer::of(u),
        _ if is_buffer_view(u) => Buffer::of(&u.src()[0]),
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
