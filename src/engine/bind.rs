//! A schedule over slots bound to buffers: the graph's own buffers for its inputs, a view of an
//! arena for each intermediate the memory plan placed, a new buffer for each other new slot
//! (memory comes at the first use).

use std::sync::Arc;

use super::memory::plan_slots;
use crate::dtype::DType;
use crate::helpers::color::pad_to;
use crate::helpers::debug;
use crate::runtime::{buffer_view, Buffer};
use crate::schedule::{Schedule, ScheduleStep, Slot};
use crate::uop::{Kernel, Ops, UOp, UOpMap};

/// One step of a schedule, bound to buffers.
pub enum ScheduleItem {
    /// Run the kernel `ast` with `bufs` bound to its PARAMs.
    Kernel { ast: Kernel, bufs: Vec<Arc<Buffer>> },
    /// Copy `src` into `dst` (across devices); with `ranks`, `dst` gets `src` combined with that
    /// op over every process of the job (an ALLREDUCE).
    Copy { dst: Arc<Buffer>, src: Arc<Buffer>, ranks: Option<Ops> },
}

/// What output `o`, realized into `buf`, becomes: an assignment its target (a view of the
/// buffer it wrote), anything else the buffer in `o`'s shape. `symbolic` says whether `o` has
/// symbolic sizes: a cached schedule knows, where asking `o` walks its whole graph.
fn became(o: &UOp, buf: &Arc<Buffer>, symbolic: bool) -> UOp {
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

/// The steps of `schedule` over buffers: the graph's input buffers (`inputs`, its BUFFER nodes by
/// position), a view of its device's arena for each slot the memory plan placed
/// (`engine/memory.rs`), and a new buffer for each other new slot; and what each of `outputs`
/// (the scheduled nodes) became.
pub fn bind(schedule: &Schedule, inputs: &[UOp], outputs: &[UOp]) -> (Vec<ScheduleItem>, UOpMap<UOp>) {
    let plan = plan_slots(schedule);
    let arenas: Vec<Arc<Buffer>> =
        plan.arenas.iter().map(|(device, bytes)| Arc::new(Buffer::new(device, *bytes, DType::UINT8))).collect();
    let bufs: Vec<Arc<Buffer>> = schedule
        .slots
        .iter()
        .enumerate()
        .map(|(i, s)| match (s, plan.at.get(&i)) {
            (Slot::Input { position, .. }, _) => {
                Buffer::of(&inputs[*position]).expect("a BUFFER node holds a runtime buffer")
            }
            (Slot::New { size, dtype, .. }, Some(&(arena, offset))) => {
                Arc::new(Buffer::view(&arenas[arena], offset, *size, *dtype).expect("the arena holds every offset"))
            }
            (Slot::New { device, size, dtype }, None) => Arc::new(Buffer::new(device, *size, *dtype)),
        })
        .collect();
    let items: Vec<ScheduleItem> = schedule
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
    if debug() >= 3 {
        print_schedule(&items);
    }
    let becomes = outputs
        .iter()
        .zip(&schedule.outputs)
        .filter_map(|(o, s)| s.map(|(slot, symbolic)| (o.clone(), became(o, &bufs[slot], symbolic))))
        .collect();
    (items, becomes)
}

/// The DEBUG=3 listing of a schedule: one line per kernel with its buffers, or per copy.
fn print_schedule(items: &[ScheduleItem]) {
    for (i, item) in items.iter().enumerate() {
        match item {
            ScheduleItem::Kernel { ast, bufs } => {
                let args: Vec<String> =
                    bufs.iter().map(|b| format!("#{}[{} x {}]", b.id(), b.size(), b.dtype().name())).collect();
                let name = crate::uop::KernelName::of(ast).for_debug();
                eprintln!("  {i:3} kernel {} {}", pad_to(&name, 24), args.join(" "));
            }
            ScheduleItem::Copy { dst, src, ranks } => {
                let across = ranks.map_or(String::new(), |op| format!(" {} over the ranks", op.name()));
                eprintln!("  {i:3} copy   {} -> {} ({} bytes){across}", src.device(), dst.device(), dst.nbytes())
            }
        }
    }
}
