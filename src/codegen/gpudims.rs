//! GPU launch dims: a kernel with workgroups (LOCAL or GROUP parts, or NOLOCALS) becomes a grid
//! of workgroups of threads.
//!
//! A REDUCE over GROUP parts first reduces each thread's share, stores the partials in shared
//! memory (`DEFINE_LOCAL`), waits at a `BARRIER`, and combines them in a loop over the group.
//! Output stores that no group thread changes are made by the group's first thread only. Then
//! the output loops become the grid's dims (`gidx`) and the LOCAL and GROUP parts a workgroup's
//! thread dims (`lidx`): `SPECIAL`s the device launches, at most three of each, the innermost
//! loop in dim 0 (x), a tensor core's warp lanes innermost of all. Where a kernel has more loops,
//! the outermost share the last dim, each recovered from it by division and remainder; where a
//! dim would pass the device's limit, the loops fill the dims in turn, one split over two where it
//! must (tinygrad's `gpudims`).

use crate::dtype::{AddrSpace, DType};
use crate::rule;
use crate::uop::{graph_rewrite, substitute, Arg, AxisKind, Ops, PatternMatcher, Special, UOp, UOpMap, UPat};

/// What the group-reduce rules share: the workgroup's thread dims (outer to inner) and the next
/// free ids.
struct GroupCtx {
    threads: Vec<UOp>,
    next_range: usize,
    next_local: i64,
}

/// The kernel launched as a grid of workgroups within the device's `limits` (none: unbounded).
pub fn gpudims(ast: &UOp, limits: Option<&crate::uop::Workgroups>) -> crate::Result<UOp> {
    let of_kind = |kinds: &[AxisKind]| -> Vec<UOp> {
        let mut rs: Vec<UOp> = ast
            .toposort()
            .into_iter()
            .filter(|u| u.op() == Ops::Range && matches!(u.arg(), Arg::Range(_, k) if kinds.contains(k)))
            .collect();
        // a warp's lanes innermost: consecutive threads
        rs.sort_by_key(|r| (matches!(r.arg(), Arg::Range(_, AxisKind::Warp)), range_id(r)));
        rs
    };
    let mut ctx = GroupCtx {
        threads: of_kind(&[AxisKind::Local, AxisKind::GroupReduce, AxisKind::Warp]),
        next_range: crate::codegen::opt::kernel_ranges(ast).last().map_or(0, |r| r.0 + 1),
        next_local: 0,
    };
    let grouped = graph_rewrite(ast, pm_group_reduce(), &mut ctx, "group reduce", false);
    let mut dims = UOpMap::default();
    let (groups, locals) = limits.map_or(([usize::MAX; 3], [usize::MAX; 3]), |w| (w.max_groups, w.max_local));
    launch_dims(&of_kind(&[AxisKind::Loop]), Special::Group, groups, &mut dims)?;
    launch_dims(&ctx.threads, Special::Local, locals, &mut dims)?;
    Ok(substitute(&grouped, &mut dims, "gpu dims"))
}

/// One launch dim's share of a loop: a digit of `size` values worth `scale` each in the loop's
/// index (a loop too long for one dim is split over two, its inner part worth 1).
struct Share {
    lp: usize,
    size: i64,
    scale: i64,
}

/// How the loops (inner first, of these sizes) share at most three launch dims of at most `max`
/// each: the innermost loop in dim 0, the next in dim 1, the rest in dim 2 (tinygrad's order);
/// where that passes a limit, each dim filled in turn, a loop split over two dims by its largest
/// factor that fits. With a symbolic size the plain order, unchecked; None where no split fits
/// (a prime too large for any dim).
fn plan_dims(sizes: &[Option<i64>], max: [usize; 3]) -> Option<Vec<Vec<Share>>> {
    let whole = |lp: usize| Share { lp, size: sizes[lp].unwrap_or(1), scale: 1 };
    let plain: Vec<Vec<Share>> = match sizes.len() {
        0..=3 => (0..sizes.len()).map(|lp| vec![whole(lp)]).collect(),
        n => vec![vec![whole(0)], vec![whole(1)], (2..n).map(whole).collect()],
    };
    let Some(sizes) = sizes.iter().copied().collect::<Option<Vec<i64>>>() else { return Some(plain) };
    let max = max.map(|m| i64::try_from(m).unwrap_or(i64::MAX));
    let fits = |d: usize, shares: &Vec<Share>| shares.iter().fold(1i64, |p, s| p.saturating_mul(s.size)) <= max[d];
    if plain.iter().enumerate().all(|(d, shares)| fits(d, shares)) {
        return Some(plain);
    }
    let mut dims: Vec<Vec<Share>> = vec![vec![]];
    let mut room = max[0];
    for (lp, &size) in sizes.iter().enumerate() {
        let (mut left, mut scale) = (size, 1);
        while left > 1 {
            if left <= room {
                dims.last_mut()?.push(Share { lp, size: left, scale });
                room /= left;
                break;
            }
            if let Some(f) = (2..=room.min(left)).rev().find(|f| left % f == 0) {
                dims.last_mut()?.push(Share { lp, size: f, scale });
                (left, scale) = (left / f, scale * f);
            }
            if dims.len() == 3 {
                return None;
            }
            room = max[dims.len()];
            dims.push(vec![]);
        }
    }
    Some(dims)
}

/// Map `loops` (outer to inner) to at most three launch dims made by `dim`, each at most `max`
/// (`plan_dims`), each loop the sum of its shares' digits of the dims' mixed-radix indices; a
/// device error where no split fits the limits.
fn launch_dims(loops: &[UOp], dim: fn(usize) -> Special, max: [usize; 3], out: &mut UOpMap<UOp>) -> crate::Result<()> {
    let inner_first: Vec<&UOp> = loops.iter().rev().collect();
    let sizes: Vec<Option<i64>> = inner_first.iter().map(|r| r.src()[0].const_int_value()).collect();
    let symbolic = sizes.iter().any(Option::is_none);
    let plan = plan_dims(&sizes, max).ok_or_else(|| {
        let sizes: Vec<i64> = sizes.iter().flatten().copied().collect();
        crate::Error::Device(format!("launch dims: loops of {sizes:?} do not fit the device's limits {max:?}"))
    })?;
    let mut values: Vec<Option<UOp>> = vec![None; inner_first.len()];
    for (d, shares) in plan.iter().enumerate() {
        let bound = |s: &Share| match symbolic {
            true => inner_first[s.lp].src()[0].clone(),
            false => UOp::index_const(s.size),
        };
        // a dim the loops skipped (its limit smaller than their factors) is not launched
        let Some(size) = shares.iter().map(bound).reduce(|a, b| a.alu(Ops::Mul, &[&b])) else { continue };
        let size = crate::uop::symbolic::simplify(&size);
        let special = UOp::new(Ops::Special, DType::INDEX, vec![size], Arg::Special(dim(d)));
        let mut stride = UOp::index_const(1);
        for (k, share) in shares.iter().enumerate() {
            let digit = special.alu(Ops::IDiv, &[&stride]);
            let digit = match k + 1 == shares.len() {
                true => digit,
                false => digit.alu(Ops::Mod, &[&bound(share)]),
            };
            stride = stride.alu(Ops::Mul, &[&bound(share)]);
            let part = match share.scale {
                1 => digit,
                scale => digit.alu(Ops::Mul, &[&UOp::index_const(scale)]),
            };
            values[share.lp] = Some(match values[share.lp].take() {
                Some(v) => v.alu(Ops::Add, &[&part]),
                None => part,
            });
        }
    }
    for (r, value) in inner_first.into_iter().zip(values) {
        out.insert(r.clone(), value.unwrap_or_else(|| UOp::index_const(0)));
    }
    Ok(())
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
fn pm_group_reduce() -> &'static PatternMatcher<GroupCtx> {
    static PM: std::sync::LazyLock<PatternMatcher<GroupCtx>> = std::sync::LazyLock::new(|| {
        PatternMatcher::new(vec![
            rule!("reduce across the group", |red; ctx: &mut GroupCtx| UPat::ops(&[Ops::Reduce]).named(red)
                => group_reduce(red, ctx)),
            rule!("first thread stores", |st; ctx: &mut GroupCtx| UPat::ops(&[Ops::Store]).named(st)
                => first_thread_stores(st, ctx)),
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
