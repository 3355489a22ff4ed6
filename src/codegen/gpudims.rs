//! GPU launch dims: a kernel with workgroups (LOCAL or GROUP parts, or NOLOCALS) becomes a grid
//! of workgroups of threads.
//!
//! A REDUCE over GROUP parts first reduces each thread's share, stores the partials in shared
//! memory (`DEFINE_LOCAL`), waits at a `BARRIER`, and combines them in a loop over the group.
//! Output stores that no group thread changes are made by the group's first thread only. Then
//! the output loops become the grid's dims (`gidx`) and the LOCAL and GROUP parts a workgroup's
//! thread dims (`lidx`): `SPECIAL`s the device launches, at most three of each, the innermost
//! loop in dim 0 (x). Where a kernel has more loops, the outermost share the last dim, each
//! recovered from it by division and remainder (tinygrad's `gpudims`).

use crate::dtype::{AddrSpace, DType};
use crate::uop::{graph_rewrite, rule_ctx, substitute, Arg, AxisKind, Ops, PatternMatcher, Special, UOp, UOpMap, UPat};

/// What the group-reduce rules share: the workgroup's thread dims (outer to inner) and the next
/// free ids.
struct GroupCtx {
    threads: Vec<UOp>,
    next_range: usize,
    next_local: i64,
}

/// The kernel launched as a grid of workgroups.
pub fn gpudims(ast: &UOp) -> UOp {
    let of_kind = |kinds: &[AxisKind]| -> Vec<UOp> {
        let mut rs: Vec<UOp> = ast
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Ops::Range && matches!(u.arg(), Arg::Range(_, k) if kinds.contains(k)))
            .collect();
        rs.sort_by_key(range_id);
        rs
    };
    let mut ctx = GroupCtx {
        threads: of_kind(&[AxisKind::Local, AxisKind::GroupReduce]),
        next_range: crate::codegen::opt::kernel_ranges(ast).last().map_or(0, |r| r.0 + 1),
        next_local: 0,
    };
    let grouped = graph_rewrite(ast, pm_group_reduce(), &mut ctx, "group reduce", false);
    let mut dims = UOpMap::default();
    launch_dims(&of_kind(&[AxisKind::Loop]), Special::Group, &mut dims);
    launch_dims(&ctx.threads, Special::Local, &mut dims);
    substitute(&grouped, &mut dims, "gpu dims")
}

/// Map `loops` (outer to inner) to at most three launch dims made by `dim`: the innermost loop
/// to dim 0, the next to dim 1, the rest to dim 2, each of them a digit of its mixed-radix index.
fn launch_dims(loops: &[UOp], dim: fn(usize) -> Special, out: &mut UOpMap<UOp>) {
    let inner_first: Vec<&UOp> = loops.iter().rev().collect();
    let groups: Vec<&[&UOp]> = match inner_first.len() {
        0..=3 => inner_first.chunks(1).collect(),
        _ => vec![&inner_first[..1], &inner_first[1..2], &inner_first[2..]],
    };
    for (d, group) in groups.into_iter().enumerate() {
        let size = match group.iter().map(|r| r.src()[0].const_int_value()).product::<Option<i64>>() {
            Some(n) => UOp::index_const(n),
            None => group.iter().map(|r| r.src()[0].clone()).reduce(|a, b| a.alu(Ops::Mul, &[&b])).expect("a loop"),
        };
        let special = UOp::new(Ops::Special, DType::INDEX, vec![size], Arg::Special(dim(d)));
        let mut stride = UOp::index_const(1);
        for (k, r) in group.iter().enumerate() {
            let digit = special.alu(Ops::IDiv, &[&stride]);
            let digit = match k + 1 == group.len() {
                true => digit,
                false => digit.alu(Ops::Mod, &[&r.src()[0]]),
            };
            stride = stride.alu(Ops::Mul, &[&r.src()[0]]);
            out.insert((*r).clone(), digit);
        }
    }
}

fn range_id(r: &UOp) -> usize {
    match r.arg() {
        Arg::Range(id, _) => *id,
        _ => usize::MAX,
    }
}

fn is_group(r: &UOp) -> bool {
    matches!(r.arg(), Arg::Range(_, AxisKind::GroupReduce))
}

/// REDUCE over GROUP parts -> a per-thread partial through shared memory; a global store whose
/// address does not depend on every group thread -> made by thread 0 of the groups it ignores.
fn pm_group_reduce() -> &'static PatternMatcher {
    static PM: std::sync::LazyLock<PatternMatcher> = std::sync::LazyLock::new(|| {
        PatternMatcher::new(vec![
            rule_ctx(UPat::ops(&[Ops::Reduce]).named("red"), |m, ctx: &mut GroupCtx| group_reduce(&m["red"], ctx)),
            rule_ctx(UPat::ops(&[Ops::Store]).named("st"), |m, ctx: &mut GroupCtx| first_thread_stores(&m["st"], ctx)),
        ])
    });
    &PM
}

fn group_reduce(red: &UOp, ctx: &mut GroupCtx) -> Option<UOp> {
    let groups: Vec<UOp> = red.src()[1..].iter().filter(|r| is_group(r)).cloned().collect();
    if groups.is_empty() {
        return None;
    }
    let rest: Vec<UOp> = red.src()[1..].iter().filter(|r| !is_group(r)).cloned().collect();
    let partial = match rest.is_empty() {
        true => red.src()[0].clone(),
        false => red.replace_src([vec![red.src()[0].clone()], rest].concat()),
    };
    // each thread's slot: its thread dims in mixed radix, a vector's lanes consecutive
    let lanes = red.dtype().count as i64;
    let slot =
        ctx.threads.iter().fold(UOp::index_const(0), |acc, r| acc.alu(Ops::Mul, &[&r.src()[0]]).alu(Ops::Add, &[r]));
    let size: i64 = ctx.threads.iter().map(|r| r.src()[0].const_int_value().unwrap_or(1)).product::<i64>() * lanes;
    let local = red.dtype().base().ptr(AddrSpace::Local);
    let smem = UOp::new(Ops::DefineLocal, local, vec![UOp::index_const(size)], Arg::Int(ctx.next_local));
    ctx.next_local += 1;
    let at = |buf: &UOp, slot: &UOp| {
        UOp::new(Ops::Index, local, vec![buf.clone(), slot.alu(Ops::Mul, &[&UOp::index_const(lanes)])], Arg::None)
    };
    let store = UOp::new(Ops::Store, DType::VOID, vec![at(&smem, &slot), partial], Arg::None);
    let barrier = UOp::new(Ops::Barrier, DType::VOID, vec![store], Arg::None);
    // the group's partials, read back in a loop over the group after the barrier
    let mut fresh = UOpMap::default();
    for g in &groups {
        let r =
            UOp::new(Ops::Range, DType::INDEX, vec![g.src()[0].clone()], Arg::Range(ctx.next_range, AxisKind::Reduce));
        ctx.next_range += 1;
        fresh.insert(g.clone(), r);
    }
    let read_slot = substitute(&slot, &mut fresh, "group reduce");
    let after = UOp::new(Ops::After, local, vec![smem, barrier], Arg::None);
    let load = UOp::new(Ops::Load, red.dtype(), vec![at(&after, &read_slot)], Arg::None);
    let mut src = vec![load];
    src.extend(groups.iter().map(|g| fresh[g].clone()));
    Some(UOp::new(Ops::Reduce, red.dtype(), src, red.arg().clone()))
}

fn first_thread_stores(st: &UOp, ctx: &mut GroupCtx) -> Option<UOp> {
    let target = &st.src()[0];
    if target.dtype().ptr != Some(AddrSpace::Global) {
        return None;
    }
    // the address no group thread changes: after the group's reduce, they all hold the value
    let nodes = target.toposort();
    let ignored: Vec<&UOp> = ctx.threads.iter().filter(|g| is_group(g) && !nodes.contains(g)).collect();
    let first =
        ignored.iter().map(|g| g.alu(Ops::CmpLt, &[&UOp::index_const(1)])).reduce(|a, b| a.alu(Ops::And, &[&b]))?;
    let gate = match target.src().get(2) {
        Some(g) => g.alu(Ops::And, &[&first]),
        None => first,
    };
    let index = target.replace_src(vec![target.src()[0].clone(), target.src()[1].clone(), gate]);
    Some(st.replace_src([vec![index], st.src()[1..].to_vec()].concat()))
}
