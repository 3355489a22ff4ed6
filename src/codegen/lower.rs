//! Reduce lowering: a kernel-level REDUCE becomes an accumulator register.
//!
//! `REDUCE(val, r...)` turns into `acc = DEFINE_REG(identity, outer ranges...)`, an update
//! `ASSIGN(acc, AFTER(acc, r...) <op> val, r...)` inside the reduce loops (the AFTER over the
//! ranges is the accumulator's value in the current iteration), and `AFTER(acc, update)`, the
//! accumulator read once the loops have ended. The outer ranges on DEFINE_REG place it (and so
//! its reset) inside every loop the result depends on.

use std::collections::{BTreeMap, HashMap};

use super::vectorize::{broadcast, gep};
use crate::dtype::DType;
use crate::rule;
use crate::uop::uop::UOpMap;
use crate::uop::{substitute, Arg, AxisKind, ConstValue, Ops, PatternMatcher, UOp, UPat};

/// Open RANGEs by id: ids grow from outer to inner loops, so the last entry is the innermost.
pub type Ranges = BTreeMap<usize, UOp>;

/// Counts accumulators and remembers the open ranges of nodes already seen.
#[derive(Default)]
pub struct LowerCtx {
    accs: i64,
    ranges: HashMap<UOp, Ranges>,
    /// For each reduce loop, the loops every accumulator reduced in it is defined under: the
    /// union of the open ranges of all REDUCEs over it (or over a loop one of them shares).
    /// Upcast lanes share their reduce loops, and where one lane's value depends on fewer loops
    /// than another's (a lane constant simplified a dependence away), its accumulator must still
    /// be reset inside all of them, or the shared loop would have two places to be.
    shared_outer: HashMap<UOp, Ranges>,
    /// float64 lanes in one of the target's vectors (0: the target has no float64).
    f64_lanes: usize,
    /// The loop of each `gated_sum`'s condition (one per condition, shared by the sums it gates).
    gates: HashMap<UOp, UOp>,
    /// An id no loop of the kernel has yet.
    next_range: usize,
}

impl LowerCtx {
    /// The context for lowering `ast` on `target`.
    pub fn new(ast: &UOp, target: &crate::uop::Target) -> LowerCtx {
        let nodes = ast.toposort();
        let ids = nodes.iter().filter_map(|u| match (u.op(), u.arg()) {
            (Ops::Range, Arg::Range(id, _)) => Some(id + 1),
            _ => None,
        });
        let mut ctx =
            LowerCtx { f64_lanes: f64_lanes(target), next_range: ids.max().unwrap_or(0), ..LowerCtx::default() };
        let reduces: Vec<UOp> = nodes.into_iter().filter(|u| u.op() == Ops::Reduce).collect();
        let opens: Vec<Ranges> = reduces.iter().map(|r| open_ranges(r, &mut ctx.ranges)).collect();
        loop {
            let mut changed = false;
            for (red, open) in reduces.iter().zip(&opens) {
                let union = ctx.with_shared_outer(red, open.clone());
                for r in &red.src()[1..] {
                    let entry = ctx.shared_outer.entry(r.clone()).or_default();
                    if entry.len() != union.len() {
                        *entry = union.clone();
                        changed = true;
                    }
                }
            }
            if !changed {
                return ctx;
            }
        }
    }

    /// `open` together with the shared outer loops of every reduce loop of `red`.
    fn with_shared_outer(&self, red: &UOp, mut open: Ranges) -> Ranges {
        for r in &red.src()[1..] {
            open.extend(self.shared_outer.get(r).into_iter().flatten().map(|(k, v)| (*k, v.clone())));
        }
        open
    }
}

/// The RANGEs `u`'s value depends on, minus those closed by reduces (an AFTER depends only on
/// the ranges its accumulator was defined under). `memo` ends up holding every node below `u`.
pub fn open_ranges(u: &UOp, memo: &mut HashMap<UOp, Ranges>) -> Ranges {
    if let Some(r) = memo.get(u) {
        return r.clone();
    }
    for n in u.toposort() {
        if memo.contains_key(&n) {
            continue;
        }
        let union = |srcs: &mut dyn Iterator<Item = &UOp>| srcs.flat_map(|s| memo[s].clone()).collect::<Ranges>();
        let set = match (n.op(), n.arg()) {
            (Ops::Range, Arg::Range(id, _)) => [(*id, n.clone())].into(),
            // reading an accumulator: inside its loops (sources are ranges), or after them (the
            // source is the final update, whose loops are closed)
            (Ops::After, _) => union(&mut n.src().iter().filter(|s| s.op() != Ops::Assign)),
            (Ops::Reduce, _) => {
                let mut open = memo[&n.src()[0]].clone();
                open.retain(|_, r| !n.src()[1..].contains(r));
                open
            }
            _ => union(&mut n.src().iter()),
        };
        memo.insert(n, set);
    }
    memo[u].clone()
}

/// The neutral element of a reduce op.
pub fn identity(op: Ops, dtype: DType) -> ConstValue {
    match op {
        Ops::Add => ConstValue::Int(0),
        Ops::Mul => ConstValue::Int(1),
        Ops::Max if dtype.is_float() => ConstValue::Float(f64::NEG_INFINITY),
        Ops::Max => ConstValue::Int(dtype.int_range().0.max(i64::MIN as i128) as i64),
        _ => panic!("REDUCE: {} is not a reduce op", op.name()),
    }
}

/// `acc op val`; for a vector sum, a chain of adds in `val` (unrolled steps) is folded into the
/// accumulator one term at a time: `((acc + a) + b) + c` rather than `acc + ((a + b) + c)`, so
/// each step of a sum of products is one vector multiply-add into the accumulator. Each term is
/// cast to the accumulator's dtype.
fn accumulate(acc: &UOp, op: Ops, val: &UOp) -> UOp {
    match val.op() == op && op == Ops::Add && acc.dtype().count > 1 {
        true => accumulate(&accumulate(acc, op, &val.src()[0]), op, &val.src()[1]),
        false => acc.alu(op, &[&val.cast(acc.dtype())]),
    }
}

/// `val`'s lanes `lanes` as `dtype`: along a vector sum's chain of adds each term is picked and
/// cast on its own, so that `accumulate` still folds the terms in one at a time.
fn part_of(val: &UOp, lanes: &[usize], dtype: DType) -> UOp {
    match val.op() == Ops::Add && lanes.len() > 1 {
        true => part_of(&val.src()[0], lanes, dtype).alu(Ops::Add, &[&part_of(&val.src()[1], lanes, dtype)]),
        false => pick(val, lanes).cast(dtype.vec(lanes.len() as u16)),
    }
}

/// Lanes `lanes` of vector `u` (`u` itself when they are all of its lanes).
fn pick(u: &UOp, lanes: &[usize]) -> UOp {
    if lanes.len() == u.dtype().count as usize {
        return u.clone();
    }
    let picked: Vec<UOp> = lanes.iter().map(|&k| gep(u, k)).collect();
    UOp::new(Ops::Vectorize, u.dtype().base().vec(lanes.len() as u16), picked, Arg::None)
}

/// The terms of a sum: `val` split along its chain of adds.
fn terms(val: &UOp) -> Vec<&UOp> {
    match val.op() {
        Ops::Add => val.src().iter().flat_map(terms).collect(),
        _ => vec![val],
    }
}

/// float64 lanes in one of `target`'s vectors, 0 where its sums accumulate in float32: a GPU's
/// float64 units are few, so its sums accumulate in float32, as tinygrad's do; a CPU's (OpenCL
/// on one too, so that both compute the same) in float64.
fn f64_lanes(target: &crate::uop::Target) -> usize {
    match target.dtypes.float64 && !target.simd_workgroups() {
        true => (target.vector_bytes / 8).max(1),
        false => 0,
    }
}

/// Whether `u` is a zero constant (a vector of them too).
fn is_zero(u: &UOp) -> bool {
    match u.op() {
        Ops::Vectorize => u.src().iter().all(is_zero),
        _ => u.const_value().is_some_and(|c| c.as_f64() == 0.0),
    }
}

/// Whether `c` is an equality (`a == b` or `a != b`), negated or not (a vector of them too).
fn is_equality(c: &UOp) -> bool {
    match c.op() {
        Ops::Vectorize => c.src().iter().all(is_equality),
        Ops::Neg => is_equality(&c.src()[0]),
        op => matches!(op, Ops::CmpNe | Ops::CmpEq),
    }
}

/// A one-hot selection `where(a == b, x, 0)` (either branch zero, the condition an equality,
/// negated or not): the product with a one-hot mask that an embedding's lookup and its gradient
/// are (as tinygrad writes them; a select rather than a multiply, so that a NaN in one row does
/// not spread to the others, as with PyTorch's index_add). Its condition, whether `x` is selected
/// where the condition fails (`where(c, 0, x)`), and `x`.
fn one_hot_selection(t: &UOp) -> Option<(&UOp, bool, &UOp)> {
    let [c, a, b] = t.src() else { return None };
    match (t.op() == Ops::Where && is_equality(c), is_zero(b), is_zero(a)) {
        (true, true, _) => Some((c, false, a)),
        (true, false, true) => Some((c, true, b)),
        _ => None,
    }
}

/// Whether equality `c` holds where its operands are equal (`a == b`, `!(a != b)`) rather than
/// where they differ.
fn holds_where_equal(c: &UOp) -> bool {
    match c.op() {
        Ops::Vectorize => holds_where_equal(&c.src()[0]),
        Ops::Neg => !holds_where_equal(&c.src()[0]),
        op => op == Ops::CmpEq,
    }
}

/// A `one_hot_selection` that selects `x` where the equality's operands are equal (one step of
/// the many, as a token's row), not where they differ (all steps but one).
pub fn sparse_selection(t: &UOp) -> Option<(&UOp, bool, &UOp)> {
    one_hot_selection(t).filter(|(c, negated, _)| holds_where_equal(c) != *negated)
}

/// Whether a sum's term is a product: a multiply (-add, tensor cores' too), or a
/// `one_hot_selection`.
fn product_term(t: &UOp) -> bool {
    matches!(t.op(), Ops::Mul | Ops::MulAcc | Ops::Wmma) || one_hot_selection(t).is_some()
}

/// Whether `red` is a float32 sum of anything but products, which accumulates in float64 on a
/// target with float64 lanes (`f64_lanes`): a float32 accumulator drifts by about one rounding
/// per addition (a sum of 2^26 values of 0.1 was off by 2.6e-4), while a float64 one is exact to
/// float32 in the end. Dot products (matmul, convolution, one-hot selections) keep float32
/// multiply-adds, as PyTorch's do.
fn plain_sum(op: Ops, red: &UOp) -> bool {
    op == Ops::Add && red.dtype().base() == DType::FLOAT32 && !terms(&red.src()[0]).into_iter().any(product_term)
}

/// The dtype a reduce accumulates in, and how many lanes of it one accumulator holds: float64
/// for a `plain_sum` where the target has `f64_lanes`, in as many accumulators as its lanes fill
/// vector registers (a long sum is bound by the latency of its accumulator chain, which the
/// float64 halves of a vector split in two, so it costs no speed); else the reduce's own dtype.
fn accumulator(op: Ops, red: &UOp, f64_lanes: usize) -> (DType, usize) {
    let lanes = red.dtype().count as usize;
    match plain_sum(op, red) && f64_lanes > 0 {
        true => (DType::FLOAT64, lanes.min(f64_lanes)),
        false => (red.dtype().base(), lanes),
    }
}

/// A float32 `plain_sum` on a target with `f64_lanes`: float64 sums of its lanes, as many as
/// fill a vector register each, cast back.
fn widen_plain_sum(red: &UOp, ctx: &mut LowerCtx) -> Option<UOp> {
    let Arg::Reduce(op) = red.arg() else { return None };
    let (scalar, per_acc) = accumulator(*op, red, ctx.f64_lanes);
    if scalar == red.dtype().base() {
        return None;
    }
    let lanes: Vec<usize> = (0..red.dtype().count as usize).collect();
    let parts: Vec<UOp> = lanes
        .chunks(per_acc)
        .map(|part| {
            let mut src = vec![part_of(&red.src()[0], part, scalar)];
            src.extend(red.src()[1..].iter().cloned());
            UOp::new(Ops::Reduce, scalar.vec(part.len() as u16), src, red.arg().clone())
                .cast(red.dtype().base().vec(part.len() as u16))
        })
        .collect();
    Some(match &parts[..] {
        [one] => one.clone(),
        parts => {
            let lanes = parts.iter().flat_map(|p| (0..p.dtype().count as usize).map(|k| gep(p, k)));
            UOp::new(Ops::Vectorize, red.dtype(), lanes.collect(), Arg::None)
        }
    })
}

/// A sum of a `sparse_selection` whose condition is the same in all its lanes: the selected
/// value and the loop it is summed in, the innermost of the sum, of one iteration where the
/// condition holds and none where it fails, with every load of the value inside it. The condition
/// is tested once per step and the loads and adds of its lanes skipped where it fails (an
/// embedding's gradient: of 1024 tokens one selects a row; the compares, selects and adds of
/// every token for every row were its whole time). Exact: a skipped term is a zero, and a sum
/// from +0 is never -0, the one value adding +0 changes.
fn gated_sum(red: &UOp, ctx: &mut LowerCtx) -> Option<(UOp, UOp)> {
    let (cond, negated, x) = sparse_selection(&red.src()[0]).filter(|_| red.arg() == &Arg::Reduce(Ops::Add))?;
    let lane = match cond.op() {
        Ops::Vectorize => &cond.src()[0],
        _ => cond,
    };
    let uniform = cond.dtype().count == 1 || (cond.op() == Ops::Vectorize && cond.src().iter().all(|l| l == lane));
    if !uniform || x.toposort().iter().any(|u| matches!(u.op(), Ops::Reduce | Ops::DefineReg)) {
        return None;
    }
    let holds = if negated { lane.alu(Ops::Neg, &[]) } else { lane.clone() };
    let next = &mut ctx.next_range;
    let gate = ctx.gates.entry(holds.clone()).or_insert_with(|| {
        *next += 1;
        UOp::new(Ops::Range, DType::INDEX, vec![holds.cast(DType::INDEX)], Arg::Range(*next - 1, AxisKind::Reduce))
    });
    // a read the condition makes too (a scatter's index) stays before the gate, which needs it
    let tested = lane.toposort();
    let reads = x.toposort().into_iter().filter(|u| u.op() == Ops::Index && u.src()[0].op() == Ops::Param);
    let reads: Vec<UOp> = reads.filter(|u| !tested.contains(u)).collect();
    let inside_gate = |index: UOp| {
        let mut src = index.src().to_vec();
        src[0] = UOp::new(Ops::After, src[0].dtype(), vec![src[0].clone(), gate.clone()], Arg::None);
        (index.clone(), index.replace_src(src))
    };
    let mut inside: UOpMap<UOp> = reads.into_iter().map(inside_gate).collect();
    Some((substitute(x, &mut inside, "gated loads"), gate.clone()))
}

/// A REDUCE: its accumulator (DEFINE_REG, reset inside every loop the result depends on), the
/// update inside its loops (ASSIGN) and the read after them (AFTER).
fn to_accumulator(red: &UOp, ctx: &mut LowerCtx) -> Option<UOp> {
    let Arg::Reduce(op) = red.arg() else { return None };
    let open = open_ranges(red, &mut ctx.ranges);
    let mut outer = ctx.with_shared_outer(red, open);
    outer.retain(|_, r| !red.src()[1..].contains(r));
    let mut acc_src =
        vec![broadcast(&UOp::constant(red.dtype().base(), identity(*op, red.dtype())), red.dtype().count as usize)];
    acc_src.extend(outer.into_values());
    let acc = UOp::new(Ops::DefineReg, red.dtype(), acc_src, Arg::Int(ctx.accs));
    ctx.accs += 1;
    let (val, loops) = match gated_sum(red, ctx) {
        Some((x, gate)) => (x, [&red.src()[1..], &[gate]].concat()),
        None => (red.src()[0].clone(), red.src()[1..].to_vec()),
    };
    let current = UOp::new(Ops::After, red.dtype(), [std::slice::from_ref(&acc), &loops].concat(), Arg::None);
    let updated = accumulate(&current, *op, &val);
    let update = UOp::new(Ops::Assign, red.dtype(), [&[acc.clone(), updated], &loops[..]].concat(), Arg::None);
    Some(UOp::new(Ops::After, red.dtype(), vec![acc, update], Arg::None))
}

/// The reduce-to-accumulator rules: plain sums widened first, then every REDUCE lowered.
pub fn pm_lower_reduce() -> &'static PatternMatcher<LowerCtx> {
    static PM: std::sync::LazyLock<PatternMatcher<LowerCtx>> = std::sync::LazyLock::new(|| {
        let reduce = |red| UPat::ops(&[Ops::Reduce]).named(red);
        PatternMatcher::new(vec![
            rule!("plain sum widened", |red; ctx: &mut LowerCtx| reduce(red) => widen_plain_sum(red, ctx)),
            rule!("reduce to accumulator", |red; ctx: &mut LowerCtx| reduce(red) => to_accumulator(red, ctx)),
        ])
    });
    &PM
}
