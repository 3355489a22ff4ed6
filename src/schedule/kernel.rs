//! The schedule: realized nodes become kernels (or copies), in dependency order.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::rangeify::{is_buffer_view, realize_points, KernelBuilder};
use crate::helpers::debug;
use crate::runtime::Buffer;
use crate::uop::{Arg, BufferRef, Ops, UOp};

/// One step of a schedule.
pub enum ScheduleItem {
    /// Run the kernel `ast` with `bufs` bound to its PARAMs.
    Kernel { ast: UOp, bufs: Vec<Arc<Buffer>> },
    /// Copy `src` into `dst` (across devices).
    Copy { dst: Arc<Buffer>, src: Arc<Buffer> },
}

/// The kernels and copies that compute `outputs`, and what each output node became (a BUFFER,
/// reshaped to the node's shape).
pub fn create_schedule(outputs: &[UOp], device_of: &dyn Fn(&UOp) -> String) -> (Vec<ScheduleItem>, HashMap<UOp, UOp>) {
    let start = Instant::now();
    let points = realize_points(outputs);
    let mut realized: HashMap<UOp, Arc<Buffer>> = HashMap::new();
    let mut items = vec![];
    for u in &points {
        let size = u.sh().iter().product();
        let buf = Arc::new(Buffer::new(&device_of(u), size, u.dtype()));
        if u.op() == Ops::Copy {
            let src = &u.src()[0];
            let src_buf = match realized.get(src) {
                Some(b) => b.clone(),
                None => view_buffer(src).expect("COPY source is realized or a buffer").clone(),
            };
            items.push(ScheduleItem::Copy { dst: buf.clone(), src: src_buf });
        } else {
            let (ast, bufs) = KernelBuilder::new(&realized).build(u, &buf);
            items.push(ScheduleItem::Kernel { ast, bufs });
        }
        realized.insert(u.clone(), buf);
    }
    let becomes = outputs
        .iter()
        .filter_map(|o| realized.get(o).map(|b| (o.clone(), buffer_view(b, o.sh()))))
        .collect::<HashMap<_, _>>();
    if debug() >= 3 {
        for (i, item) in items.iter().enumerate() {
            match item {
                ScheduleItem::Kernel { ast, bufs } => {
                    let args: Vec<String> =
                        bufs.iter().map(|b| format!("#{}[{} x {}]", b.id(), b.size(), b.dtype().name())).collect();
                    eprintln!("  {i:3} kernel {:<24} {}", crate::codegen::kernel_name(ast), args.join(" "));
                }
                ScheduleItem::Copy { dst, src } => {
                    eprintln!("  {i:3} copy   {} -> {} ({} bytes)", src.device(), dst.device(), dst.nbytes())
                }
            }
        }
    }
    if debug() >= 1 {
        let kernels = items.iter().filter(|i| matches!(i, ScheduleItem::Kernel { .. })).count();
        eprintln!(
            "scheduled {kernels} kernels and {} copies in {:.2} ms",
            items.len() - kernels,
            start.elapsed().as_secs_f64() * 1e3
        );
    }
    (items, becomes)
}

/// The buffer behind a BUFFER or reshaped BUFFER node.
pub fn view_buffer(u: &UOp) -> Option<&Arc<Buffer>> {
    match u.op() {
        Ops::Buffer => u.buffer(),
        _ if is_buffer_view(u) => u.src()[0].buffer(),
        _ => None,
    }
}

/// A BUFFER node for `buf`, reshaped to `shape` when that differs from `[size]`.
pub fn buffer_view(buf: &Arc<Buffer>, shape: &[usize]) -> UOp {
    let b = UOp::new(Ops::Buffer, buf.dtype(), vec![], Arg::Buffer(BufferRef(buf.clone())));
    if shape == [buf.size()] {
        b
    } else {
        UOp::new(Ops::Reshape, buf.dtype(), vec![b], Arg::Shape(shape.to_vec()))
    }
}
