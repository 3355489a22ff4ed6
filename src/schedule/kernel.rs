//! The schedule: `SCHEDULE`, the declared steps by which a tensor graph's stored nodes become
//! kernels (or copies) over slots, in dependency order; `create_schedule` runs it on a miss of the
//! schedule cache.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Instant;

use super::item::{Schedule, ScheduleStep};
use super::layout::{self, Panels};
use super::multi::graph_device;
use super::order::{kernel_graph, order_steps};
use super::rangeify::{storage_order, Realized};
use super::realize;
use super::split_reduce::{self, Partials};
use crate::error::Result;
use crate::helpers::debug;
use crate::uop::pipeline::{Pipeline, Step};
use crate::uop::stage::TensorStage;
use crate::uop::{graph_rewrite, Arg, Ops, Target, TensorGraph, UOp};

/// The schedule computing `outputs` on `devices` (one per output; every node under them in
/// `order`, sources first; `runtime` answers what it asks of devices) over slots, and the graph's
/// input BUFFERs its input slots name by position (`engine::bind` binds them). With spec checks on
/// (`uop/spec.rs`), a malformed tensor graph is the error.
pub fn create_schedule(
    outputs: &[UOp],
    devices: &[&'static str],
    order: &[UOp],
    runtime: Devices,
) -> Result<(Arc<Schedule>, Vec<UOp>)> {
    // timed for the DEBUG line only, not on every eager op
    let start = (debug() >= 1).then(Instant::now);
    let inputs: Vec<UOp> = order.iter().filter(|u| u.op() == Ops::Buffer).cloned().collect();
    let cached = super::cache::lookup(outputs, devices, order);
    let hit = cached.is_some();
    let schedule = match cached {
        Some(cached) => cached,
        None => {
            let schedule = Arc::new(schedule_graph(outputs, devices, runtime, &inputs)?);
            if let Some(k) = super::cache::key(outputs, devices, order) {
                super::cache::insert(k, schedule.clone());
            }
            schedule
        }
    };
    if let Some(start) = start {
        let kernels = schedule.steps.iter().filter(|s| matches!(s, ScheduleStep::Kernel { .. })).count();
        eprintln!(
            "scheduled {kernels} kernels and {} copies in {:.2} ms (schedule cache {})",
            schedule.steps.len() - kernels,
            start.elapsed().as_secs_f64() * 1e3,
            if hit { "hit" } else { "miss" }
        );
    }
    Ok((schedule, inputs))
}

/// What scheduling asks of the devices, which the runtime answers (the tensor layer passes it
/// on): a device's target (None where it does not open), and the device a node with none of its
/// own is computed on (asked only for such a node: choosing the default opens devices).
pub struct Devices {
    pub target_of: fn(&str) -> Option<Target>,
    pub default: fn() -> String,
}

/// What the schedule's steps read and decide.
pub struct Scheduling {
    /// The device of each output (the SINK's sources), in order, and where the rest are.
    devices: Vec<&'static str>,
    runtime: Devices,
    /// Each device's target, as asked so far.
    targets: HashMap<String, Option<Target>>,
    /// The nodes to store, as the realize analyses find them.
    store: HashSet<UOp>,
    /// The outputs as `rangeify` found them (laid out, reduces split).
    outputs: Vec<UOp>,
    /// The slots, and what each stored node was stored into.
    realized: Realized,
    /// The steps, as `rangeify` made them, with the node each stores.
    steps: Vec<(UOp, ScheduleStep)>,
    /// The order to run them in.
    order: Vec<usize>,
}

/// The device node `u` is computed on: an output's own (`devices` are the `outputs`'), else
/// where its sources put it, else `default`.
fn device_of(devices: &[&str], default: fn() -> String, outputs: &[UOp], u: &UOp) -> String {
    let output = outputs.iter().position(|o| o == u).map(|i| devices[i].to_string());
    output.or_else(|| graph_device(u)).unwrap_or_else(default)
}

impl Scheduling {
    /// The target of each node's device in `sink`'s graph (None where it does not open).
    fn targets_of<'a>(&'a mut self, sink: &'a UOp) -> impl FnMut(&UOp) -> Option<Target> + 'a {
        let (devices, runtime, targets) = (&self.devices, &self.runtime, &mut self.targets);
        move |u: &UOp| {
            let device = device_of(devices, runtime.default, sink.src(), u);
            targets.entry(device).or_insert_with_key(|d| (runtime.target_of)(d)).clone()
        }
    }
}

/// Tensor graph -> ordered kernels and copies: lay out, split large reduces, decide what is
/// stored (five analyses), rangeify every stored node into a kernel (the kernel graph), order.
pub static SCHEDULE: Pipeline<Scheduling, TensorStage> = Pipeline {
    stage: PhantomData,
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
        let device = || device_of(&s.devices, s.runtime.default, &outputs, u);
        let realized = &mut s.realized;
        let new_slot = |realized: &mut Realized| realized.new_slot(device(), u.sh().iter().product(), u.dtype());
        let slot = match u.op() {
            Ops::Copy | Ops::AllReduce => {
                let src = &u.src()[0];
                let src = match realized.buffers.get(src) {
                    Some(&slot) => slot,
                    // a view of a buffer
                    None => realized.input(&src.base()),
                };
                let dst = new_slot(realized);
                let ranks = match u.arg() {
                    Arg::Reduce(op) => Some(*op),
                    _ => None,
                };
                s.steps.push((u.clone(), ScheduleStep::Copy { dst, src, ranks }));
                dst
            }
            Ops::Assign => {
                // the target is a view of a buffer
                let target = realized.input(&u.src()[0].base());
                // a view of no elements writes nothing (its kernel's empty loop would fold away)
                if u.sh().contains(&0) {
                    realized.buffers.insert(u.clone(), target);
                    continue;
                }
                let (mut ast, mut slots) = realized.build(u, target, None)?;
                if reads_other_elements(&ast) {
                    // the value reads the target at other positions: compute it aside first
                    let value = &u.src()[1];
                    let tmp = new_slot(realized);
                    let (tmp_ast, tmp_slots) = realized.build(value, tmp, None)?;
                    s.steps.push((value.clone(), ScheduleStep::Kernel { ast: tmp_ast, slots: tmp_slots }));
                    realized.buffers.insert(value.clone(), tmp);
                    (ast, slots) = realized.build(u, target, None)?;
                }
                s.steps.push((u.clone(), ScheduleStep::Kernel { ast, slots }));
                target
            }
            // nothing to compute for an empty tensor
            _ if u.sh().contains(&0) => new_slot(realized),
            _ => {
                let out = new_slot(realized);
                let (mut ast, mut slots) = realized.build(u, out, None)?;
                // an intermediate (never a requested output) may be stored in another order
                let sizes: Vec<usize> = slots.iter().map(|&s| realized.slots[s].size()).collect();
                if let Some(order) = (!requested.contains(u)).then(|| storage_order(u, &ast, &sizes)).flatten() {
                    (ast, slots) = realized.build(u, out, Some(&order))?;
                    realized.orders.insert(u.clone(), order);
                }
                s.steps.push((u.clone(), ScheduleStep::Kernel { ast, slots }));
                out
            }
        };
        s.realized.buffers.insert(u.clone(), slot);
    }
    let nodes: Vec<UOp> = s.steps.iter().map(|(u, _)| u.clone()).collect();
    let graph = kernel_graph(sink, &s.realized, &nodes);
    s.outputs = outputs;
    Ok(graph)
}

/// The schedule of `outputs` on `devices` over a graph whose input BUFFERs are `inputs`,
/// computed (`create_schedule` without the cache).
fn schedule_graph(outputs: &[UOp], devices: &[&'static str], runtime: Devices, inputs: &[UOp]) -> Result<Schedule> {
    let _viz = crate::uop::track::group(|| "schedule".into());
    let mut s = Scheduling {
        devices: devices.to_vec(),
        runtime,
        targets: HashMap::new(),
        store: HashSet::new(),
        outputs: vec![],
        realized: Realized::new(inputs),
        steps: vec![],
        order: vec![],
    };
    SCHEDULE.run(&TensorGraph::new(UOp::sink(outputs.to_vec()), "tensor ops")?, &mut s)?;
    let stored = outputs.iter().zip(&s.outputs);
    let outputs = stored.map(|(o, stored)| s.realized.buffers.get(stored).map(|&slot| (slot, o.sym_dims().is_some())));
    let outputs = outputs.collect();
    let mut steps: Vec<Option<ScheduleStep>> = s.steps.into_iter().map(|(_, step)| Some(step)).collect();
    let steps = s.order.iter().map(|&i| steps[i].take().expect("each step runs once")).collect();
    Ok(Schedule { steps, slots: s.realized.slots, outputs })
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
