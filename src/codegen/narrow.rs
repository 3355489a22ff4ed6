//! Reduce loops narrowed to where their terms can be nonzero.
//!
//! A sum whose every term is zero unless a clause `k < f·r + e` or `f·r + e < k` holds (a gated
//! load of a padded input, times anything), where `r` is one of its reduce loops and `e`
//! depends only on output loops, runs `r` over just the iterations where the clause holds (for
//! `f = 1`: from `max(0, k + 1 - e)` up to `min(n, k - e)`), a loop whose bounds depend on the
//! output position. The clause is then true throughout and drops out of the gate. A transposed
//! convolution (an input's gradient) over a gradient padded by the kernel's size less one skips
//! the padding's rows this way instead of multiplying their zeros (a sixth of the taps for
//! beautiful_mnist's 5x5 kernels over 20 rows). Only the sum changes: the terms it skips are
//! products with a zero (so an infinity in the other factor no longer makes a NaN there, as in
//! PyTorch's gradients).

use crate::dtype::DType;
use crate::uop::symbolic::Lin;
use crate::uop::valid::clauses;
use crate::uop::{substitute, Arg, AxisKind, ConstValue, Ops, UOp, UOpMap};

/// `ast` with the loops of its sums narrowed to where their terms' gates can hold.
pub fn narrow_reduces(ast: &UOp) -> UOp {
    let mut map: UOpMap<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Ops::Reduce && u.arg() == &Arg::Reduce(Ops::Add))
        .filter_map(|red| narrowed(&red).map(|n| (red, n)))
        .collect();
    match map.is_empty() {
        true => ast.clone(),
        false => substitute(ast, &mut map, "narrow gated reduces"),
    }
}

/// Clauses that are each true wherever `u` is nonzero: those of a `where(c, x, 0)`'s condition,
/// and of either factor of a product.
fn zero_unless(u: &UOp) -> Vec<UOp> {
    match u.op() {
        Ops::Mul => u.src().iter().flat_map(zero_unless).collect(),
        Ops::Cast => zero_unless(&u.src()[0]),
        Ops::Where if u.src()[2].const_value().is_some_and(|c| c.as_f64() == 0.0) => {
            let mut out = clauses(&u.src()[0]);
            out.extend(zero_unless(&u.src()[1]));
            out
        }
        _ => vec![],
    }
}

/// Where `clause` (a scalar comparison with a constant) bounds reduce loop `r` of `red`: the
/// first iteration it allows (`Lower`) or the one past the last (`Upper`), an expression of
/// output loops only. None for any other clause.
enum Bound {
    Lower(UOp),
    Upper(UOp),
}

fn bound(clause: &UOp, r: &UOp, red: &UOp) -> Option<Bound> {
    if clause.op() != Ops::CmpLt || clause.dtype().count != 1 {
        return None;
    }
    let (a, b) = (&clause.src()[0], &clause.src()[1]);
    // `e < k` or `k < e`, with `below` true for the first
    let (e, k, below) = match (a.const_int_value(), b.const_int_value()) {
        (None, Some(k)) => (a, k as i128, true),
        (Some(k), None) => (b, k as i128, false),
        _ => return None,
    };
    if e.dtype() != DType::INDEX {
        return None;
    }
    let lin = Lin::of(e);
    let (at, &(_, f)) = lin.terms.iter().enumerate().find(|(_, (t, _))| t == r)?;
    let mut rest = lin.terms.clone();
    rest.remove(at);
    if f == 0 || !rest.iter().all(|(t, _)| outer_only(t, red)) {
        return None;
    }
    // `e < k` is `f·r < k - c - rest`, `k < e` is `f·r >= k + 1 - c - rest` (c: e's constant);
    // for f < 0 both turn around on |f|·r: `|f|·r >= c + rest - k + 1`, `|f|·r < c + rest - k`
    let (upper, k) = match below {
        true => (f > 0, k),
        false => (f < 0, k + 1),
    };
    let limit = match f > 0 {
        true => lin.with(rest.iter().map(|(t, c)| (t.clone(), -c)).collect(), k - lin.k),
        false => lin.with(rest, lin.k - k + 1),
    };
    let first = ceil_div(&limit.build(), f.unsigned_abs() as i64);
    Some(match upper {
        true => Bound::Upper(first),
        false => Bound::Lower(first),
    })
}

/// The first `r >= 0` with `g·r >= b` (0 where every one has): `ceil(b / g)` for `b > 0`.
fn ceil_div(b: &UOp, g: i64) -> UOp {
    match g {
        1 => b.clone(),
        g => (b + (g - 1)).alu(Ops::Max, &[&UOp::index_const(0)]).idiv(g),
    }
}

/// Whether `u` depends on no loop but output loops (none of `red`'s, no upcast lanes).
fn outer_only(u: &UOp, red: &UOp) -> bool {
    u.toposort().iter().all(|n| match (n.op(), n.arg()) {
        (Ops::Range, Arg::Range(_, AxisKind::Loop)) => !red.src()[1..].contains(n),
        (Ops::Range, _) => false,
        _ => true,
    })
}

/// `red` with each reduce loop that gates bound narrowed to the iterations they allow; None
/// where none does.
fn narrowed(red: &UOp) -> Option<UOp> {
    let value = &red.src()[0];
    let gates = zero_unless(value);
    if gates.is_empty() {
        return None;
    }
    let mut map: UOpMap<UOp> = UOpMap::default();
    let mut loops = red.src()[1..].to_vec();
    for r in loops.iter_mut() {
        let (Arg::Range(_, AxisKind::Reduce), Some(n)) = (r.arg(), r.src()[0].const_int_value()) else { continue };
        let (mut start, mut end) = (UOp::index_const(0), UOp::index_const(n));
        let mut used = vec![];
        for g in &gates {
            match bound(g, r, red) {
                Some(Bound::Lower(lo)) => start = start.alu(Ops::Max, &[&lo]),
                Some(Bound::Upper(hi)) => end = min(&end, &hi),
                None => continue,
            }
            used.push(g.clone());
        }
        if used.is_empty() {
            continue;
        }
        let count = (&end + &neg(&start)).alu(Ops::Max, &[&UOp::index_const(0)]);
        let narrow = r.replace_src(vec![count]);
        map.insert(r.clone(), &narrow + &start);
        map.extend(used.into_iter().map(|g| (g, UOp::constant(DType::BOOL, ConstValue::Bool(true)))));
        *r = narrow;
    }
    if map.is_empty() {
        return None;
    }
    let value = substitute(&ungated(value, &map), &mut map, "narrow gated reduce");
    Some(red.replace_src([vec![value], loops].concat()))
}

/// `value` with the clauses that `map` makes true (to `true`) left out of its loads' gates, and
/// a gate of no other clause dropped, so that those loads are plain ones.
fn ungated(value: &UOp, map: &UOpMap<UOp>) -> UOp {
    let mut gates: UOpMap<UOp> = UOpMap::default();
    for index in value.toposort().into_iter().filter(|u| u.op() == Ops::Index && u.src().len() == 3) {
        let all = clauses(&index.src()[2]);
        let kept: Vec<&UOp> = all.iter().filter(|c| !map.contains_key(c)).collect();
        if kept.len() == all.len() {
            continue;
        }
        let mut src = index.src()[..2].to_vec();
        src.extend(
            kept.split_first().map(|(first, rest)| rest.iter().fold((*first).clone(), |g, c| g.alu(Ops::And, &[c]))),
        );
        gates.insert(index.clone(), index.replace_src(src));
    }
    match gates.is_empty() {
        true => value.clone(),
        false => substitute(value, &mut gates, "loads ungated"),
    }
}

/// `min(a, b)` as the ops have it: `-max(-a, -b)`.
fn min(a: &UOp, b: &UOp) -> UOp {
    neg(&neg(a).alu(Ops::Max, &[&neg(b)]))
}

/// `-u` of an index, as a product by -1 (as tinygrad negates an index).
fn neg(u: &UOp) -> UOp {
    u * -1
}
