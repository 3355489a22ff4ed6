//! How far an index reaches: the least and greatest value an INDEX's expression takes over its
//! ranges' and variables' values where its gate holds, for the launch check that keeps a kernel
//! inside its buffers. Interval bounds lose what terms share (a flipped, padded conv weight's
//! `(3a - b + 2) % 3` spans `[-2, 2]` though it never goes negative), so the index's terms and the
//! gate's clauses are split into groups that share no range or variable. A group small enough is
//! evaluated at every point; a larger one keeps its interval bounds under the gate
//! (`valid::bounds_given`). The groups are independent, so the index's bounds are the sums of
//! theirs, and a group whose clauses never hold means the access never happens.

use super::exec::{cast_value, exec_alu};
use super::ops::Ops;
use super::uop::{ConstValue, UOp, UOpMap};
use super::valid::{bounds_given, clauses};

/// The most points one group is evaluated at.
const MAX_POINTS: i128 = 1 << 14;

/// The least and greatest value of `idx` where `gate` holds; `None` when it never holds.
pub fn index_reach(idx: &UOp, gate: Option<&UOp>) -> Option<(i128, i128)> {
    let terms = add_terms(idx);
    let conds = gate.map_or(vec![], clauses);
    let groups = groups(&terms, &conds);
    let (mut lo, mut hi) = (0i128, 0i128);
    for group in &groups {
        let (l, h) = match exact_bounds(group) {
            Some(bounds) => bounds?,
            None => {
                let (lo, hi) = group.terms.iter().map(term_bounds).fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
                match gate {
                    Some(g) => {
                        let sum = group.terms.iter().skip(1).fold(group.terms[0].clone(), |s, t| s.alu(Ops::Add, &[t]));
                        let (glo, ghi) = bounds_given(&sum, g);
                        (lo.max(glo), hi.min(ghi))
                    }
                    None => (lo, hi),
                }
            }
        };
        if l > h {
            return None;
        }
        (lo, hi) = (lo + l, hi + h);
    }
    Some((lo, hi))
}

/// Bounds of one term of a group too large to evaluate: through multiplication, division and
/// remainder by constants, a sum inside is split into groups again (a remainder's dividend is often
/// a large linear part plus a small group that never goes negative), intersected with interval
/// bounds.
fn term_bounds(u: &UOp) -> (i128, i128) {
    let (ilo, ihi) = u.bounds();
    let by = u.src().get(1).and_then(UOp::const_int_value).map(i128::from);
    let (lo, hi) = match (u.op(), by) {
        (Ops::Add, _) => groups(&add_terms(u), &[])
            .iter()
            .map(|g| match exact_bounds(g) {
                Some(bounds) => bounds.unwrap_or((0, 0)),
                None => g.terms.iter().map(term_bounds).fold((0, 0), |(a, b), (c, d)| (a + c, b + d)),
            })
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d)),
        (Ops::Mul, Some(c)) => {
            let (a, b) = term_bounds(&u.src()[0]);
            ((a * c).min(b * c), (a * c).max(b * c))
        }
        (Ops::IDiv, Some(c)) if c > 0 => {
            let (a, b) = term_bounds(&u.src()[0]);
            (a / c, b / c)
        }
        (Ops::Mod, Some(c)) if c > 0 => match term_bounds(&u.src()[0]) {
            (a, b) if a >= 0 && b < c => (a, b),
            (a, _) if a >= 0 => (0, c - 1),
            (_, b) if b <= 0 => (1 - c, 0),
            _ => (1 - c, c - 1),
        },
        _ => (ilo, ihi),
    };
    (lo.max(ilo), hi.min(ihi))
}

/// The summands of an ADD tree.
fn add_terms(u: &UOp) -> Vec<UOp> {
    match u.op() {
        Ops::Add => u.src().iter().flat_map(add_terms).collect(),
        _ => vec![u.clone()],
    }
}

/// Terms and clauses that share ranges or variables, and those ranges and variables.
struct Group {
    terms: Vec<UOp>,
    conds: Vec<UOp>,
    symbols: Vec<UOp>,
}

/// The ranges and variables `u` is made of.
fn symbols(u: &UOp) -> Vec<UOp> {
    u.toposort().into_iter().filter(|s| matches!(s.op(), Ops::Range | Ops::DefineVar)).collect()
}

/// `terms` and `conds` split into groups sharing no symbol (a group of terms holds one at least;
/// clauses sharing nothing with the terms form groups of their own, which only say whether the
/// access happens).
fn groups(terms: &[UOp], conds: &[UOp]) -> Vec<Group> {
    let mut groups: Vec<Group> = vec![];
    let items = terms.iter().map(|t| (t, true)).chain(conds.iter().map(|c| (c, false)));
    for (u, is_term) in items {
        let syms = symbols(u);
        let (mut joined, rest): (Vec<Group>, Vec<Group>) =
            groups.drain(..).partition(|g| g.symbols.iter().any(|s| syms.contains(s)));
        groups = rest;
        let mut g = Group { terms: vec![], conds: vec![], symbols: syms };
        for other in joined.drain(..) {
            g.terms.extend(other.terms);
            g.conds.extend(other.conds);
            g.symbols.extend(other.symbols.into_iter().filter(|s| !g.symbols.contains(s)).collect::<Vec<_>>());
        }
        match is_term {
            true => g.terms.push(u.clone()),
            false => g.conds.push(u.clone()),
        }
        groups.push(g);
    }
    for g in groups.iter_mut().filter(|g| g.terms.is_empty()) {
        g.terms.push(UOp::index_const(0));
    }
    groups
}

/// The group's least and greatest sum of terms over the points where its clauses hold (`Some(None)`
/// when they hold nowhere), found by evaluating at every point; `None` when there are too many
/// points or an op it cannot evaluate, or when interval bounds are exact already (one linear term
/// and no clause).
fn exact_bounds(group: &Group) -> Option<Option<(i128, i128)>> {
    let nodes: Vec<UOp> = {
        let sink: Vec<&UOp> = group.terms.iter().chain(&group.conds).collect();
        let mut seen = UOpMap::default();
        let mut order = vec![];
        for root in sink {
            for n in root.toposort() {
                if seen.insert(n.clone(), ()).is_none() {
                    order.push(n);
                }
            }
        }
        order
    };
    let linear = |n: &UOp| matches!(n.op(), Ops::Add | Ops::Mul | Ops::Const | Ops::Range | Ops::DefineVar);
    if group.conds.is_empty() && group.terms.len() == 1 && nodes.iter().all(linear) {
        return None;
    }
    let spans: Vec<(i128, i128)> = group.symbols.iter().map(|s| s.bounds()).collect();
    let points = spans.iter().try_fold(1i128, |n, (lo, hi)| n.checked_mul(hi - lo + 1).filter(|n| *n <= MAX_POINTS))?;
    if points == 0 {
        return Some(None);
    }
    let slot = |u: &UOp| nodes.iter().position(|n| n == u).expect("a node of the group");
    let srcs: Vec<Vec<usize>> = nodes.iter().map(|n| n.src().iter().map(slot).collect()).collect();
    let (terms, conds): (Vec<usize>, Vec<usize>) =
        (group.terms.iter().map(slot).collect(), group.conds.iter().map(slot).collect());
    // for each node, which symbol it is
    let symbol_of: Vec<Option<usize>> = nodes.iter().map(|n| group.symbols.iter().position(|s| s == n)).collect();
    let mut point: Vec<i128> = spans.iter().map(|s| s.0).collect();
    let mut values = vec![ConstValue::Int(0); nodes.len()];
    let mut found: Option<(i128, i128)> = None;
    for _ in 0..points {
        for (i, n) in nodes.iter().enumerate() {
            let arg = |k: usize| values[srcs[i][k]];
            values[i] = match (n.op(), symbol_of[i]) {
                (_, Some(s)) => ConstValue::Int(point[s] as i64),
                (Ops::Const, _) => n.const_value()?,
                (Ops::Cast, _) if !n.dtype().is_float() && !n.src()[0].dtype().is_float() => {
                    cast_value(arg(0), n.src()[0].dtype(), n.dtype())
                }
                (op, _) if op.is_alu() && !n.dtype().is_float() && n.src().iter().all(|s| !s.dtype().is_float()) => {
                    exec_alu(op, n.dtype(), &(0..srcs[i].len()).map(arg).collect::<Vec<_>>())
                }
                _ => return None,
            };
        }
        if conds.iter().all(|c| values[*c] == ConstValue::Bool(true)) {
            let sum: i128 = terms.iter().map(|t| int_of(values[*t])).sum();
            found = Some(found.map_or((sum, sum), |(lo, hi)| (lo.min(sum), hi.max(sum))));
        }
        // the next point, the first symbol counting fastest
        for (p, (lo, hi)) in point.iter_mut().zip(&spans) {
            *p = if *p < *hi { *p + 1 } else { *lo };
            if *p != *lo {
                break;
            }
        }
    }
    Some(found)
}

/// An evaluated index or bool as an integer.
fn int_of(v: ConstValue) -> i128 {
    match v {
        ConstValue::Int(i) => i as i128,
        ConstValue::Bool(b) => b as i128,
        ConstValue::Float(f) => f as i128,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::symbolic::tests::{add, c, div, mul, rem, rng};

    /// A flipped 3 x 3 conv weight read as the scheduler writes it (its input gradient):
    /// `so·o + si·i + (2kx + 2) % 3 + 3 ((do·o + di·i - ky - kx + (2kx + 2) // 3 + 2) % 3)`, with
    /// `[so, si, do, di]` the layout's strides. `-kx + (2kx + 2) // 3` is 0 for every kx, so the
    /// remainder's dividend is never negative, which interval bounds cannot see.
    fn flipped_weight_read(outs: i64, ins: i64, [so, si, d_o, di]: [i64; 4]) -> UOp {
        let (o, i, ky, kx) = (rng(0, outs), rng(1, ins), rng(2, 3), rng(3, 3));
        let two_kx = add(&mul(&kx, &c(2)), &c(2));
        let dividend = [mul(&i, &c(di)), mul(&ky, &c(-1)), mul(&kx, &c(-1)), div(&two_kx, &c(3)), c(2)]
            .iter()
            .fold(mul(&o, &c(d_o)), |s, t| add(&s, t));
        [mul(&i, &c(si)), rem(&two_kx, &c(3)), mul(&rem(&dividend, &c(3)), &c(3))]
            .iter()
            .fold(mul(&o, &c(so)), |s, t| add(&s, t))
    }

    #[test]
    fn terms_sharing_a_range_are_evaluated_together() {
        // w[o, i, 2 - ky, 2 - kx] of 8 x 3 x 3 x 3 (o and i as the gradient's loops run them)
        let idx = flipped_weight_read(3, 8, [9, 27, 3, 9]);
        assert!(idx.bounds().0 < 0, "the interval bounds are loose: {:?}", idx.bounds());
        assert_eq!(index_reach(&idx, None), Some((0, 215)));
    }

    #[test]
    fn a_remainders_dividend_is_split_into_groups_again() {
        // 64 x 64 channels, 36,864 points (too many to evaluate), wrapped in % 36864 as the
        // scheduler writes it: the small group inside the remainder bounds its dividend
        let idx = rem(&flipped_weight_read(64, 64, [576, 9, 192, 3]), &c(36864));
        assert!(idx.bounds().0 < 0, "the interval bounds are loose: {:?}", idx.bounds());
        assert_eq!(index_reach(&idx, None), Some((0, 36863)));
    }

    #[test]
    fn a_gate_confines_its_group_and_independent_groups_add() {
        // (a + b - 1) * 10 + c for a + b >= 1 and a + b < 5, a and b in [0, 3], c in [0, 9]
        let (a, b, r) = (rng(0, 4), rng(1, 4), rng(2, 10));
        let ab = add(&a, &b);
        let idx = add(&mul(&add(&ab, &c(-1)), &c(10)), &r);
        let gate = c(0).alu(Ops::CmpLt, &[&ab]).alu(Ops::And, &[&ab.alu(Ops::CmpLt, &[&c(5)])]);
        assert_eq!(index_reach(&idx, Some(&gate)), Some((0, 39)));
        assert_eq!(index_reach(&idx, None), Some((-10, 59)));
    }

    #[test]
    fn an_access_whose_gate_never_holds_reaches_nothing() {
        let a = rng(0, 4);
        assert_eq!(index_reach(&a, Some(&a.alu(Ops::CmpLt, &[&c(0)]))), None);
        assert_eq!(index_reach(&c(-1), Some(&c(0).alu(Ops::CmpLt, &[&c(0)]))), None);
    }

    #[test]
    fn groups_too_large_to_evaluate_keep_their_interval_bounds() {
        let (a, b) = (rng(0, 1 << 10), rng(1, 1 << 10));
        let idx = rem(&add(&a, &b), &c(7));
        assert_eq!(index_reach(&idx, None), Some(idx.bounds()));
    }
}
