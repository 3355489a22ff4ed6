//! The schedule: realized nodes become kernels (or copies), in dependency order.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::item::{assigned_buffer, became, view_buffer, ScheduleItem};
use super::layout::{self, Panels};
use super::multi::graph_device;
use super::order::{kernel_graph, order_steps};
use super::rangeify::{storage_order, Realized};
use super::realize;
use super::split_reduce::{self, Partials};
use crate::error::Result;
use crate::helpers::color::pad_to;
use crate::helpers::debug;
use crate::runtime::{default_device, get_device, Buffer};
use crate::uop::pipeline::{Pipeline, Step};
use crate::uop::spec::Stage;
use crate::uop::{graph_rewrite, Arg, Ops, Target, UOp, UOpMap};

/// The kernels and copies that compute `outputs` on `devices` (one per output; every node under
/// them in `order`, sources first), and what each output node became (a BUFFER, reshaped to the
/// node's shape). With spec checks on (`uop/spec.rs`), a malformed tensor graph is the error.
pub fn create_schedule(outputs: &[UOp], devices: &[String], order: &[UOp]) -> Result<(Vec<ScheduleItem>, UOpMap<UOp>)> {
    let start = Instant::now();
    let key = super::cache::key(outputs, devices, order);
    let cached = key.as_ref().and_then(|(k, inputs)| super::cache::lookup(k, inputs, outputs));
    let hit = cached.is_some();
    let (items, becomes) = match cached {
        Some(cached) => cached,
        None => {
            let (items, becomes) = schedule_graph(outputs, devices)?;
            if let Some((k, inputs)) = key {
                super::cache::insert(k, &inputs, outputs, &items, &becomes);
            }
            (items, becomes)
        }
    };
    if debug() >= 3 {
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
    if debug() >= 1 {
        let kernels = items.iter().filter(|i| matches!(i, ScheduleItem::Kernel { .. })).count();
        eprintln!(
            "scheduled {kernels} kernels and {} copies in {:.2} ms (schedule cache {})",
            items.len() - kernels,
            start.elapsed().as_secs_f64() * 1e3,
            if hit { "hit" } else { "miss" }
        );
    }
    Ok((items, becomes))
}

/// What the schedule's steps read and decide.
pub struct Scheduling {
    /// The device of each output (the SINK's sources), in order.
    devices: Vec<String>,
    /// Each device's target (None where it does not open).
    targets: HashMap<String, Option<Target>>,
    /// The nodes to store, as the realize analyses find them.
    store: HashSet<UOp>,
    /// The outputs as `rangeify` found them (laid out, reduces split).
    outputs: Vec<UOp>,
    /// What each stored node was stored into.
    realized: Realized,
    /// The steps, as `rangeify` made them, with the node each stores.
    steps: Vec<(UOp, ScheduleItem)>,
    /// The order to run them in.
    order: Vec<usize>,
}

/// The device node `u` is computed on: an output's own (`devices` are the `outputs`'), else
/// where its sources put it.
fn device_of(devices: &[String], outputs: &[UOp], u: &UOp) -> String {
    let output = outputs.iter().position(|o| o == u).map(|i| devices[i].clone());
    output.or_else(|| graph_device(u)).unwrap_or_else(default_device)
}

impl Scheduling {
    /// The target of each node's device in `sink`'s graph (None where it does not open).
    fn targets_of<'a>(&'a mut self, sink: &'a UOp) -> impl FnMut(&UOp) -> Option<Target> + 'a {
        let (devices, targets) = (&self.devices, &mut self.targets);
        move |u: &UOp| {
            let device = device_of(devices, sink.src(), u);
            targets.entry(device).or_insert_with_key(|d| get_device(d).ok().map(|d| d.target())).clone()
        }
    }
}

/// Tensor graph -> ordered kernels and copies: lay out, split large reduces, decide what is
/// stored (five analyses), rangeify every stored node into a kernel (the kernel graph), order.
pub static SCHEDULE: Pipeline<Scheduling> = Pipeline {
    stage: Stage::Tensor,
    steps: &[
        Step::rules("lay out", |sink, s, pass| {
            let mut panels = Panels::find(sink, &mut s.targets_of(sink));
            graph_rewrite(sink, layout::pm_lay_out(), &mut panels, pass, true)
        }),
        Step::rules("split reduce", |sink, _, pass| {
            graph_rewrite(sink, split_reduce::pm_split_reduce(), &mut Partials::default(), pass, false)
        })
        .when(|_| split_reduce::enabled()),
        Step::analysis("realize map", |sink, s| realize::realize_map(sink, &mut s.store)),
        Step::analysis("shared reduces", |sink, s| realize::shared_reduces(sink, &mut s.store)),
        Step::analysis("shared elementwise", |sink, s| realize::shared_elementwise(sink, &mut s.store)),
        Step::analysis("chain breaks", |sink, s| realize::chain_breaks(sink, &mut s.store)),
        Step::analysis("wide kernel splits", |sink, s| {
            let mut store = std::mem::take(&mut s.store);
            realize::wide_kernel_splits(sink, &mut store, &mut s.targets_of(sink));
            s.store = store;
        }),
        Step::walk("rangeify", rangeify),
        Step::walk("order steps", |graph, s| {
            let (order, in_order) = order_steps(graph);
            s.order = order;
            Ok(in_order)
        }),
    ],
};

/// Every stored node becomes a step: a kernel computing it into a new buffer (or into its
/// target, for an ASSIGN), or a copy; returns the kernel graph the steps make.
fn rangeify(sink: &UOp, s: &mut Scheduling) -> Result<UOp> {
    let outputs = sink.src().to_vec();
    let points: Vec<UOp> = sink.toposort().into_iter().filter(|u| s.store.contains(u)).collect();
    let requested: HashSet<&UOp> = outputs.iter().collect();
    for u in &points {
        let devices = &s.devices;
        let new_buffer = || Arc::new(Buffer::new(&device_of(devices, &outputs, u), u.sh().iter().product(), u.dtype()));
        let realized = &mut s.realized;
        let buf = match u.op() {
            Ops::Copy | Ops::AllReduce => {
                let src = &u.src()[0];
                let src_buf = match realized.buffers.get(src) {
                    Some(b) => b.clone(),
                    None => view_buffer(src).expect("COPY source is realized or a buffer").clone(),
                };
                let buf = new_buffer();
                let ranks = match u.arg() {
                    Arg::Reduce(op) => Some(*op),
                    _ => None,
                };
                s.steps.push((u.clone(), ScheduleItem::Copy { dst: buf.clone(), src: src_buf, ranks }));
                buf
            }
            Ops::Assign => {
                let target = assigned_buffer(u).expect("ASSIGN target is a view of a buffer").clone();
                // a view of no elements writes nothing (its kernel's empty loop would fold away)
                if u.sh().contains(&0) {
                    realized.buffers.insert(u.clone(), target);
                    continue;
                }
                let (mut ast, mut bufs) = realized.build(u, &target, None)?;
                if reads_other_elements(&ast) {
                    // the value reads the target at other positions: compute it aside first
                    let value = &u.src()[1];
                    let tmp = new_buffer();
                    let (tmp_ast, tmp_bufs) = realized.build(value, &tmp, None)?;
                    s.steps.push((value.clone(), ScheduleItem::Kernel { ast: tmp_ast, bufs: tmp_bufs }));
                    realized.buffers.insert(value.clone(), tmp);
                    (ast, bufs) = realized.build(u, &target, None)?;
                }
                s.steps.push((u.clone(), ScheduleItem::Kernel { ast, bufs }));
                target
            }
            // nothing to compute for an empty tensor
            _ if u.sh().contains(&0) => new_buffer(),
            _ => {
                let buf = new_buffer();
                let (mut ast, mut bufs) = realized.build(u, &buf, None)?;
                // an intermediate (never a requested output) may be stored in another order
                if let Some(order) = (!requested.contains(u)).then(|| storage_order(u, &ast, &bufs)).flatten() {
                    (ast, bufs) = realized.build(u, &buf, Some(&order))?;
                    realized.orders.insert(u.clone(), order);
                }
                s.steps.push((u.clone(), ScheduleItem::Kernel { ast, bufs }));
                buf
            }
        };
        s.realized.buffers.insert(u.clone(), buf);
    }
    let nodes: Vec<UOp> = s.steps.iter().map(|(u, _)| u.clone()).collect();
    let graph = kernel_graph(sink, s.realized.buffers.clone(), &nodes);
    s.outputs = outputs;
    Ok(graph)
}

/// The schedule of `outputs` on `devices`, computed (`create_schedule` without the cache).
fn schedule_graph(outputs: &[UOp], devices: &[String]) -> Result<(Vec<ScheduleItem>, UOpMap<UOp>)> {
    let _viz = crate::uop::track::group(|| "schedule".into());
    let mut s = Scheduling {
        devices: devices.to_vec(),
        targets: HashMap::new(),
        store: HashSet::new(),
        outputs: vec![],
        realized: Realized::default(),
        steps: vec![],
        order: vec![],
    };
    SCHEDULE.run(&UOp::sink(outputs.to_vec()), &mut s, "tensor ops")?;
    let becomes = outputs
        .iter()
        .zip(&s.outputs)
        .filter_map(|(o, s2)| s.realized.buffers.get(s2).map(|b| (o.clone(), became(o, b, o.sym_dims().is_some()))))
        .collect::<UOpMap<_>>();
    let mut items: Vec<Option<ScheduleItem>> = s.steps.into_iter().map(|(_, item)| Some(item)).collect();
    let items = s.order.iter().map(|&i| items[i].take().expect("each step runs once")).collect();
    Ok((items, becomes))
}

/// Whether a kernel loads its output buffer at an index other than the one it stores to.
fn reads_other_elements(ast: &UOp) -> bool {
    let store_index = &ast.src()[0].src()[0];
    ast.toposort().iter().any(|u| {
        u.op() == Ops::Load
            && u.src()[0].src()[0] == store_index.src()[0]
            && u.src()[0].src()[1] != store_index.src()[1]
    })
}
