//! Many devices: lowering MULTI before scheduling. A tensor on a tuple of devices is a MULTI over
//! one graph per device, sharded along an axis or replicated. The rule table here pushes MULTI
//! up through every op above it, so that the op runs once per device on that device's shard,
//! until only the outputs are MULTI and each device's graph is an ordinary one-device graph for
//! the scheduler. A reduce over the sharded axis ends in an all-reduce, which is itself graph
//! ops: COPYs between the devices and the reduce's op, scheduled like any kernel.

use std::collections::HashMap;
use std::sync::LazyLock;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::helpers::{debug, getenv};
use crate::rule;
use crate::uop::{graph_rewrite, Arg, Call, Ops, PatternMatcher, Rule, UOp, UPat};

/// All-reduces of more elements than this over more than two devices go round a ring.
const RING_THRESHOLD: usize = 256_000;

/// A MULTI of `shards` (one per device, in the tuple's order): split along `axis`, or
/// replicated when `None`.
pub fn multi(shards: Vec<UOp>, axis: Option<usize>) -> UOp {
    let dtype = shards[0].dtype();
    UOp::new(Ops::Multi, dtype, shards, axis.map_or(Arg::None, |a| Arg::Int(a as i64)))
}

/// The axis a MULTI is split along (`None`: replicated, or not a MULTI).
pub fn multi_axis(u: &UOp) -> Option<usize> {
    match (u.op(), u.arg()) {
        (Ops::Multi, Arg::Int(a)) => Some(*a as usize),
        _ => None,
    }
}

/// The device a tensor graph computes on: where the first COPY, device constant or buffer among
/// its sources puts it (depth first, not looking past a COPY), the tuple of a MULTI's devices;
/// `None` for a graph of device-free constants and variables.
pub fn graph_device(u: &UOp) -> Option<String> {
    let (mut stack, mut seen) = (vec![u.clone()], crate::uop::uop::UOpSet::default());
    while let Some(n) = stack.pop() {
        let device = own_device(&n, graph_device);
        if device.is_some() || n.op() == Ops::Multi {
            return device;
        }
        if seen.insert(n.clone()) {
            stack.extend(n.src().iter().rev().cloned());
        }
    }
    None
}

/// The device of every node of `order` (sources first) that has one, as `graph_device` gives
/// it, in one pass: a node without a device of its own is on its first source's with one.
pub fn graph_devices(order: &[UOp]) -> HashMap<UOp, String> {
    let mut devices: HashMap<UOp, String> = HashMap::new();
    for u in order {
        let device = own_device(u, |s| devices.get(s).cloned())
            .or_else(|| (u.op() != Ops::Multi).then(|| u.src().iter().find_map(|s| devices.get(s).cloned())).flatten());
        if let Some(d) = device {
            devices.insert(u.clone(), d);
        }
    }
    devices
}

/// The device `u` names itself: a COPY's or device constant's, a buffer's, or a MULTI's shards'
/// (each `device_of`) joined into a tuple.
fn own_device(u: &UOp, device_of: impl Fn(&UOp) -> Option<String>) -> Option<String> {
    match (u.op(), u.arg()) {
        (Ops::Copy | Ops::Device, Arg::Str(d)) => Some(d.clone()),
        (Ops::Multi, _) => u.src().iter().map(device_of).collect::<Option<Vec<String>>>().map(|d| d.join(",")),
        _ => u.device_buffer().map(|b| b.device().to_string()),
    }
}

/// `outputs` with every MULTI pushed up to the top: each output is a one-device graph or a MULTI
/// of them. A sharded tensor an op cannot keep sharded (a reshape moving items between shards,
/// padding or flipping the sharded axis) is an error naming the op.
pub fn lower_multi(outputs: &[UOp]) -> Result<Vec<UOp>> {
    let sink = UOp::new(Ops::Sink, DType::VOID, outputs.to_vec(), Arg::None);
    let mut failed: Option<Error> = None;
    let lowered = graph_rewrite(&sink, &PM_LOWER_MULTI, &mut failed, "lower multi", false);
    match failed {
        Some(e) => Err(e),
        None => Ok(lowered.src().to_vec()),
    }
}

/// The rule lowering a node `node` matches, over a MULTI source, to a MULTI of that node on each
/// device: `lower` gets the node, its first MULTI source and how many devices it spans. The
/// first error is kept in the context (the rule rewrites nothing then).
#[track_caller]
fn lower_rule(
    name: &'static str,
    node: UPat,
    lower: fn(&UOp, &UOp, usize) -> Result<Option<UOp>>,
) -> Rule<Option<Error>> {
    rule!(name, |u; failed: &mut Option<Error>| node.named(u) => {
        let first = u.src().iter().find(|s| s.op() == Ops::Multi)?;
        lower(u, first, first.src().len()).unwrap_or_else(|e| {
            failed.get_or_insert(e);
            None
        })
    })
}

/// Multi lowering, one rule per kind of op over a MULTI: elementwise ops per shard (another
/// operand cut or gathered to match), ASSIGN into each shard of its target, COPY gathered or
/// spread, a reduce per shard (and all-reduced across them over the split axis), each movement op
/// per shard keeping or moving the split, a matmul or conv CALL per device where its parts
/// compose; any other op over a MULTI is an error naming it.
static PM_LOWER_MULTI: LazyLock<PatternMatcher<Option<Error>>> = LazyLock::new(|| {
    let elementwise: Vec<Ops> = [
        Ops::UNARY,
        Ops::BINARY,
        Ops::TERNARY,
        &[Ops::Cast, Ops::Bitcast, Ops::Contiguous, Ops::Detach, Ops::AllReduce],
    ]
    .concat();
    let mut rules = vec![
        lower_rule("elementwise per device", UPat::ops(&elementwise), lower_elementwise),
        lower_rule("assign per device", UPat::ops(&[Ops::Assign]), lower_assign),
        lower_rule("copy to the devices", UPat::ops(&[Ops::Copy]), |u, first, _| match u.arg() {
            Arg::Str(spec) => copy_multi(first, spec).map(Some),
            _ => Ok(None),
        }),
        lower_rule("reduce per device", UPat::ops(&[Ops::ReduceAxis]), lower_reduce),
        lower_rule("call per device", UPat::ops(&[Ops::Call]), lower_call),
    ];
    rules.extend(Ops::MOVEMENT.iter().map(|&op| lower_rule("movement per device", UPat::ops(&[op]), lower_movement)));
    // the outputs' SINK holds MULTIs as they are
    rules.push(lower_rule("nothing else", UPat::any(), |u, _, _| match u.op() {
        Ops::Sink => Ok(None),
        op => Err(devices_error(op_name(op), u)),
    }));
    PatternMatcher::new(rules)
});

fn lower_elementwise(u: &UOp, _: &UOp, n: usize) -> Result<Option<UOp>> {
    let axis = u.src().iter().find_map(multi_axis);
    let per_src = u.src().iter().map(|s| shards_along(s, axis, n, op_name(u.op()))).collect::<Result<Vec<_>>>()?;
    let shards = (0..n).map(|i| u.replace_src(per_src.iter().map(|s| s[i].clone()).collect()));
    Ok(Some(multi(shards.collect(), axis)))
}

fn lower_assign(u: &UOp, _: &UOp, n: usize) -> Result<Option<UOp>> {
    let target = &u.src()[0];
    if target.op() != Ops::Multi {
        return Err(devices_error(op_name(u.op()), u));
    }
    let axis = multi_axis(target);
    let value = shards_along(&u.src()[1], axis, n, op_name(u.op()))?;
    let shards = target.src().iter().zip(value).map(|(t, v)| {
        let mut src = vec![t.clone(), v];
        src.extend(u.src()[2..].iter().cloned());
        u.replace_src(src)
    });
    Ok(Some(multi(shards.collect(), axis)))
}

fn lower_reduce(u: &UOp, first: &UOp, _: usize) -> Result<Option<UOp>> {
    let Arg::ReduceAxis(op, axes) = u.arg() else { return Ok(None) };
    // a reduce over axes a shard has one element along is the shard itself
    let reduce = |s: &UOp| match axes.iter().all(|&a| s.sh()[a] == 1) && s.dtype() == u.dtype() {
        true => s.clone(),
        false => u.replace_src(vec![s.clone()]),
    };
    let shards: Vec<UOp> = first.src().iter().map(reduce).collect();
    Ok(Some(match multi_axis(first) {
        Some(a) if axes.contains(&a) => multi(all_reduce(*op, shards)?, None),
        axis => multi(shards, axis),
    }))
}

fn lower_movement(u: &UOp, first: &UOp, n: usize) -> Result<Option<UOp>> {
    let (arg, axis) = movement_arg(u, first)?;
    let sizes = symbolic_sizes(u, axis, n)?;
    let shard = |s: &UOp| {
        let src = std::iter::once(s.clone()).chain(sizes.iter().cloned()).collect();
        UOp::new(u.op(), u.dtype(), src, arg.clone())
    };
    Ok(Some(multi(first.src().iter().map(shard).collect(), axis)))
}

/// A matmul or conv whose parts compose (rows of x with all of w, all of x with columns of w, a
/// conv's batch with all of its weight) stays one per device, for its device's layout; any other
/// named function is its value.
fn lower_call(u: &UOp, _: &UOp, n: usize) -> Result<Option<UOp>> {
    Ok(Some(match per_shard_call(u) {
        Some(axis) => {
            let shards = (0..n).map(|i| u.replace_src(u.src().iter().map(|s| s.src()[i].clone()).collect()));
            multi(shards.collect(), axis)
        }
        None => u.src()[0].clone(),
    }))
}

/// The axis a matmul or conv CALL (value, x, w; all on the devices) is split along when each
/// device's part is its own parts' function: a matmul's x split along a row axis and w whole, or x
/// whole and w split along its columns; a conv's x split along the batch and its weight whole; or
/// all three whole. `None` inside the option: replicated.
fn per_shard_call(u: &UOp) -> Option<Option<usize>> {
    let [value, x, w] = u.src() else { return None };
    if [value, x, w].iter().any(|s| s.op() != Ops::Multi) {
        return None;
    }
    let last = x.sh().len() - 1;
    let axes = (multi_axis(x), multi_axis(w), multi_axis(value));
    match (u.arg(), axes) {
        (Arg::Call(_, _), (None, None, None)) => Some(None),
        (Arg::Call(Call::Matmul, _), (Some(a), None, Some(v))) if a < last && a == v => Some(Some(a)),
        (Arg::Call(Call::Matmul, _), (None, Some(1), Some(v))) if v == last => Some(Some(v)),
        (Arg::Call(Call::Conv, _), (Some(0), None, Some(0))) => Some(Some(0)),
        _ => None,
    }
}

fn op_name(op: Ops) -> &'static str {
    match op {
        Ops::Reshape => "reshape",
        Ops::Permute => "permute",
        Ops::Expand => "expand",
        Ops::Pad => "pad",
        Ops::Shrink => "shrink",
        Ops::Flip => "flip",
        Ops::Copy => "to",
        Ops::Assign => "assign",
        Ops::ReduceAxis => "reduce",
        _ => "multi-device op",
    }
}

fn devices_error(op: &'static str, u: &UOp) -> Error {
    Error::Devices { op, devices: u.src().iter().filter_map(graph_device).collect() }
}

/// The argument a movement op `u` of MULTI `m` takes on each shard, and the axis the result is
/// split along.
fn movement_arg(u: &UOp, m: &UOp) -> Result<(Arg, Option<usize>)> {
    let (full, op) = (m.sh(), op_name(u.op()));
    let Some(axis) = multi_axis(m) else { return Ok((u.arg().clone(), None)) };
    let n = m.src().len();
    let shapes = [full, u.sh()];
    let refuse = |why: &str| Err(Error::shape(op, &shapes, format!("{why} (the tensor is split along axis {axis})")));
    let per_shard = |mut shape: Vec<usize>, a: usize| {
        shape[a] /= n;
        shape
    };
    match u.arg() {
        Arg::Shape(new) if u.op() == Ops::Reshape => {
            // the split survives where the axes before it keep their element count and the
            // new axis there still divides into the shards
            let before: usize = full[..axis].iter().product();
            let mut acc = 1;
            let mut found = None;
            for (a, &d) in new.iter().enumerate() {
                if acc == before && d.is_multiple_of(n) && d > 0 {
                    found = Some(a);
                }
                acc *= d;
            }
            let Some(a) = found else { return refuse("the reshape moves items between shards") };
            Ok((Arg::Shape(per_shard(new.clone(), a)), Some(a)))
        }
        Arg::Shape(new) => Ok((Arg::Shape(per_shard(new.clone(), axis)), Some(axis))),
        Arg::Axes(order) if u.op() == Ops::Permute => {
            Ok((u.arg().clone(), Some(order.iter().position(|&a| a == axis).expect("a permutation"))))
        }
        Arg::Axes(flipped) => match flipped.contains(&axis) {
            true => refuse("flipping the sharded axis"),
            false => Ok((u.arg().clone(), Some(axis))),
        },
        Arg::Pairs(pairs) if u.op() == Ops::Pad => match pairs[axis] {
            (0, 0) => Ok((u.arg().clone(), Some(axis))),
            _ => refuse("padding the sharded axis"),
        },
        Arg::Pairs(pairs) => match pairs[axis] {
            (0, end) if end == full[axis] => {
                let mut pairs = pairs.clone();
                pairs[axis] = (0, full[axis] / n);
                Ok((Arg::Pairs(pairs), Some(axis)))
            }
            _ => refuse("shrinking the sharded axis"),
        },
        _ => refuse("an argument this op does not take"),
    }
}

/// The symbolic sizes a movement op `u` takes beyond its source (a RESHAPE's or EXPAND's size per
/// axis, a SHRINK's start and end per axis), as each of `n` shards takes them when the result is
/// split along `axis`: the split axis's own must be numbers, and become the shard's.
fn symbolic_sizes(u: &UOp, axis: Option<usize>, n: usize) -> Result<Vec<UOp>> {
    let mut sizes = u.src()[1..].to_vec();
    let Some(a) = axis.filter(|_| !sizes.is_empty()) else { return Ok(sizes) };
    let per_axis = if u.op() == Ops::Shrink { 2 } else { 1 };
    let mine = &mut sizes[a * per_axis..(a + 1) * per_axis];
    let numbers: Option<Vec<i64>> = mine.iter().map(UOp::const_int_value).collect();
    let full = u.sh()[a] as i64;
    match (numbers.as_deref(), per_axis) {
        (Some([size]), 1) => mine[0] = UOp::index_const(size / n as i64),
        (Some([0, end]), 2) if *end == full => mine[1] = UOp::index_const(full / n as i64),
        _ => {
            let reason = format!("a symbolic size on the split axis {a}");
            return Err(Error::shape(op_name(u.op()), &[u.sh()], reason));
        }
    }
    Ok(sizes)
}

/// The graphs of `u` on each of `n` devices, split along `axis` (each whole when `None`). A
/// MULTI split otherwise is gathered and split again; a graph on no device (constants) is the
/// same on every device.
fn shards_along(u: &UOp, axis: Option<usize>, n: usize, op: &'static str) -> Result<Vec<UOp>> {
    if u.op() != Ops::Multi {
        if graph_device(u).is_some() {
            return Err(Error::Devices { op, devices: vec![graph_device(u).unwrap_or_default()] });
        }
        return split(vec![u.clone(); n], axis, op);
    }
    if u.src().len() != n {
        return Err(Error::Devices { op, devices: vec![graph_device(u).unwrap_or_default()] });
    }
    match (multi_axis(u), axis) {
        (have, want) if have == want => Ok(u.src().to_vec()),
        (None, want) => split(u.src().to_vec(), want, op),
        (Some(_), want) => split(all_gather(u)?, want, op),
    }
}

/// Each device's part of `whole` (one full copy per device) along `axis`.
fn split(whole: Vec<UOp>, axis: Option<usize>, op: &'static str) -> Result<Vec<UOp>> {
    let Some(a) = axis else { return Ok(whole) };
    let (n, full) = (whole.len(), whole[0].sh().to_vec());
    if full.is_empty() {
        return Ok(whole);
    }
    if !full[a].is_multiple_of(n) {
        return Err(Error::shape(op, &[&full], format!("axis {a} does not split evenly over {n} devices")));
    }
    let size = full[a] / n;
    let part = |(i, w): (usize, UOp)| {
        let mut bounds: Vec<(usize, usize)> = full.iter().map(|&d| (0, d)).collect();
        bounds[a] = (i * size, (i + 1) * size);
        w.movement(Ops::Shrink, Arg::Pairs(bounds))
    };
    Ok(whole.into_iter().enumerate().map(part).collect())
}

/// A copy of `u` on `device`, or `u` itself where it is there already.
fn copy_to(u: &UOp, device: &str) -> UOp {
    match graph_device(u).as_deref() == Some(device) {
        true => u.clone(),
        false => UOp::new(Ops::Copy, u.dtype(), vec![u.clone()], Arg::Str(device.to_string())),
    }
}

/// Each shard's device, in the tuple's order.
fn shard_devices(m: &UOp) -> Result<Vec<String>> {
    let devices: Option<Vec<String>> = m.src().iter().map(graph_device).collect();
    devices.ok_or_else(|| Error::value("to", "a shard on no device"))
}

/// `pieces` (on one device, each with where it starts along `axis`) joined along `axis` into
/// one tensor `total` long there: each padded to its place, and the paddings' zeros added.
fn assemble(pieces: Vec<(UOp, usize)>, axis: usize, total: usize) -> UOp {
    let combine = if pieces[0].0.dtype().is_bool() { Ops::Or } else { Ops::Add };
    let placed = pieces.into_iter().map(|(p, start)| {
        let mut pads = vec![(0, 0); p.sh().len()];
        pads[axis] = (start, total - start - p.sh()[axis]);
        p.movement(Ops::Pad, Arg::Pairs(pads))
    });
    placed.reduce(|acc, p| acc.alu(combine, &[&p])).expect("at least one piece")
}

/// Equal `pieces` (one per shard, on one device) joined along `axis` into the whole tensor.
fn join(pieces: Vec<UOp>, axis: usize) -> UOp {
    let (n, size) = (pieces.len(), pieces[0].sh()[axis]);
    assemble(pieces.into_iter().enumerate().map(|(i, p)| (p, i * size)).collect(), axis, n * size)
}

/// A whole copy of MULTI `m` on each of its devices: every shard copied to every other device
/// and the pieces joined.
fn all_gather(m: &UOp) -> Result<Vec<UOp>> {
    let Some(axis) = multi_axis(m) else { return Ok(m.src().to_vec()) };
    let devices = shard_devices(m)?;
    Ok(devices.iter().map(|d| join(m.src().iter().map(|s| copy_to(s, d)).collect(), axis)).collect())
}

/// MULTI `m` copied to `spec`: one device gets the whole tensor (gathered from the shards, or
/// the replica already there); a tuple of as many devices gets shard `i` on device `i`.
fn copy_multi(m: &UOp, spec: &str) -> Result<UOp> {
    // a tuple of devices is their names joined by commas
    let targets: Vec<&str> = spec.split(',').collect();
    let devices = shard_devices(m)?;
    if let [one] = targets[..] {
        return Ok(match multi_axis(m) {
            Some(axis) => join(m.src().iter().map(|s| copy_to(s, one)).collect(), axis),
            None => {
                let here = devices.iter().position(|d| d == one);
                copy_to(&m.src()[here.unwrap_or(0)], one)
            }
        });
    }
    if targets.len() != devices.len() {
        return Err(Error::Devices { op: "to", devices: vec![devices.join(","), spec.to_string()] });
    }
    Ok(multi(m.src().iter().zip(&targets).map(|(s, d)| copy_to(s, d)).collect(), multi_axis(m)))
}

/// Every device's `shards` combined with `op` (ADD, MUL or MAX), the result on each device. Over
/// two devices, or few elements, each device reads every other shard (n(n-1) copies); otherwise
/// round a ring, as a reduce-scatter then an all-gather over `n` chunks (2n(n-1) copies, each a
/// chunk). `RING=0` never uses the ring, `RING=2` always.
fn all_reduce(op: Ops, shards: Vec<UOp>) -> Result<Vec<UOp>> {
    let n = shards.len();
    let devices = shards.iter().map(graph_device).collect::<Option<Vec<String>>>();
    let devices = devices.ok_or_else(|| Error::value("reduce", "a shard on no device"))?;
    let numel: usize = shards[0].sh().iter().product();
    let ring =
        n > 1 && numel >= n && (getenv("RING", 1) >= 2 || (getenv("RING", 1) >= 1 && n > 2 && numel > RING_THRESHOLD));
    if debug() >= 2 {
        let kind = if ring { "ring" } else { "naive" };
        eprintln!(
            "all-reduce ({kind}) {} of {numel} {} over {}",
            op.name(),
            shards[0].dtype().name(),
            devices.join(",")
        );
    }
    let combine = |a: UOp, b: UOp| a.alu(op, &[&b]);
    if !ring {
        let on = |(i, d): (usize, &String)| {
            let others = (0..n).filter(|&j| j != i).map(|j| copy_to(&shards[j], d));
            others.fold(shards[i].clone(), &combine)
        };
        return Ok(devices.iter().enumerate().map(on).collect());
    }
    // each shard flat and cut into n chunks differing in length by at most one
    let shape = shards[0].sh().to_vec();
    let bounds = |k: usize| k * numel / n..(k + 1) * numel / n;
    let flat: Vec<UOp> = shards.iter().map(|s| s.movement(Ops::Reshape, Arg::Shape(vec![numel]))).collect();
    let piece = |s: &UOp, k: usize| s.movement(Ops::Shrink, Arg::Pairs(vec![(bounds(k).start, bounds(k).end)]));
    // reduce-scatter: chunk k starts on device k and takes in each next device's part of it
    let mut chunks_on: Vec<Vec<(UOp, usize)>> = vec![Vec::with_capacity(n); n];
    for k in 0..n {
        let mut acc = piece(&flat[k], k);
        for step in 1..n {
            let d = (k + step) % n;
            acc = combine(copy_to(&acc, &devices[d]), piece(&flat[d], k));
        }
        // all-gather: the reduced chunk passes on round the ring to every other device
        let owner = (k + n - 1) % n;
        chunks_on[owner].push((acc.clone(), bounds(k).start));
        for step in 1..n {
            let d = (owner + step) % n;
            acc = copy_to(&acc, &devices[d]);
            chunks_on[d].push((acc.clone(), bounds(k).start));
        }
    }
    let whole = |chunks| assemble(chunks, 0, numel).movement(Ops::Reshape, Arg::Shape(shape.clone()));
    Ok(chunks_on.into_iter().map(whole).collect())
}
