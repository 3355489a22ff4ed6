//! Index simplification under a load's validity condition (tinygrad's `uop_given_valid`).
//!
//! A gated load `INDEX(buf, idx, valid)` only reads memory where `valid` holds, so `idx` may be
//! simplified as if every clause `X < c` / `c < X` of `valid` were true. Each bounded expression
//! `X` is swapped for a fresh variable with the tighter range, the index is simplified, and the
//! variables are swapped back. Padding-heavy movement (a convolution's backward pass through its
//! pooling windows) leaves `(…) // 125`-style terms that collapse this way.

use std::collections::HashSet;
use std::sync::LazyLock;

use super::symbolic::{may_wrap, simplify, Lin};
use super::{graph_rewrite, Arg, Ops, PatternMatcher, UOp, UPat};
use crate::rule;

/// An expression and the range a validity condition confines it to.
type Bound = (UOp, i128, i128);

/// The clauses of an AND tree.
pub(crate) fn clauses(valid: &UOp) -> Vec<UOp> {
    let (mut out, mut stack) = (vec![], vec![valid.clone()]);
    while let Some(c) = stack.pop() {
        match c.op() == Ops::And && c.dtype().is_bool() {
            true => stack.extend(c.src().iter().cloned()),
            false => out.push(c),
        }
    }
    out
}

/// The integer bounds that `clauses` (comparisons against constants) put on expressions.
fn clause_bounds(clauses: &[UOp]) -> Vec<Bound> {
    let mut bounds: Vec<Bound> = vec![];
    for c in clauses.iter().filter(|c| c.op() == Ops::CmpLt) {
        let (a, b) = (&c.src()[0], &c.src()[1]);
        let (x, lo, hi) = match (a.const_int_value(), b.const_int_value()) {
            (None, Some(k)) => (a.clone(), a.vmin(), k as i128 - 1),
            (Some(k), None) => (b.clone(), k as i128 + 1, b.vmax()),
            _ => continue,
        };
        match bounds.iter_mut().find(|(y, _, _)| *y == x) {
            Some((_, l, h)) => (*l, *h) = ((*l).max(lo), (*h).min(hi)),
            None => bounds.push((x, lo, hi)),
        }
    }
    bounds.retain(|(x, lo, hi)| {
        x.dtype().is_int() && !may_wrap(x) && x.op() != Ops::Const && lo <= hi && (*lo, *hi) != x.bounds()
    });
    bounds
}

/// `n` with `f·x` replaced by `f·v` when `n`'s linear form holds all of `x`'s terms scaled by
/// one factor `f` (`v` stands for `x`).
fn replace_scaled(n: &UOp, x: &Lin, v: &UOp) -> Option<UOp> {
    let l = Lin::of(n);
    let (t0, a0) = x.terms.first()?;
    let f = l.terms.iter().find(|(t, _)| t == t0).map(|(_, c)| *c)?;
    if f % a0 != 0 {
        return None;
    }
    let f = f / a0;
    let mut rest = l.terms.clone();
    for (t, a) in &x.terms {
        let i = rest.iter().position(|(u, c)| u == t && *c == f * a)?;
        rest.remove(i);
    }
    rest.push((v.clone(), f));
    let out = l.with(rest, l.k - f * x.k).build();
    Some(out)
}

/// `u` with each bounded expression swapped for a stand-in of its range (`lo + s`, `s` a fresh
/// variable in `[0, hi - lo]`), and the map that swaps the stand-ins back (empty when `u` holds
/// none of the expressions).
fn with_stand_ins(u: &UOp, mut bounds: Vec<Bound>) -> (UOp, super::UOpMap<UOp>) {
    // the stand-in rule: the context is (the expression as a linear form, its stand-in)
    static PM: LazyLock<PatternMatcher<(Lin, UOp)>> = LazyLock::new(|| {
        let term = |n| UPat::ops(&[Ops::Add, Ops::Mul]).named(n);
        PatternMatcher::new(vec![rule!("scaled terms as the stand-in", |n; ctx: &mut (Lin, UOp)| term(n)
            => replace_scaled(n, &ctx.0, &ctx.1))])
    });
    // later bounds' expressions get the earlier stand-ins too, so that they still match inside `u`
    let mut back = super::UOpMap::default();
    let mut cur = u.clone();
    for n in 0..bounds.len() {
        let (x, lo, hi) = bounds[n].clone();
        let d = x.dtype();
        let size = UOp::const_int(d, (hi - lo + 1) as i64);
        let s = UOp::new(Ops::Special, d, vec![size], Arg::Special(super::Special::StandIn(n)));
        let mut stand_in = (Lin::of(&x), s.alu(Ops::Add, &[&UOp::const_int(d, lo as i64)]));
        let mut replace = |u: &UOp| {
            let exact = super::substitute(
                u,
                &mut crate::uop::UOpMap::from_iter([(x.clone(), stand_in.1.clone())]),
                "valid stand-ins",
            );
            graph_rewrite(&exact, &PM, &mut stand_in, "valid stand-ins", false)
        };
        let before = cur.clone();
        cur = replace(&cur);
        for later in bounds[n + 1..].iter_mut() {
            later.0 = replace(&later.0);
        }
        if cur != before {
            back.insert(s, x.alu(Ops::Add, &[&UOp::const_int(d, -lo as i64)]));
        }
    }
    (cur, back)
}

/// `u` simplified assuming each bounded expression lies in its range.
fn simplify_within(u: &UOp, bounds: Vec<Bound>) -> UOp {
    let (cur, mut back) = with_stand_ins(u, bounds);
    if back.is_empty() {
        return u.clone();
    }
    let simplified = simplify(&cur);
    simplify(&super::substitute(&simplified, &mut back, "valid stand-ins back"))
}

/// `valid` with each comparison's expression simplified assuming the other clauses hold.
pub fn simplify_valid(valid: &UOp) -> UOp {
    let mut cs = clauses(valid);
    if cs.len() < 2 {
        return valid.clone();
    }
    for i in 0..cs.len() {
        let others: Vec<UOp> = cs.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| c.clone()).collect();
        let c = &cs[i];
        let side = match (c.op(), c.src().first().and_then(UOp::const_int_value)) {
            (Ops::CmpLt, None) => 0,
            (Ops::CmpLt, Some(_)) => 1,
            _ => continue,
        };
        let mut src = c.src().to_vec();
        src[side] = simplify_within(&src[side], clause_bounds(&others));
        cs[i] = simplify(&c.replace_src(src));
    }
    simplify(&cs[1..].iter().fold(cs[0].clone(), |a, c| a.alu(Ops::And, &[c])))
}

/// `idx` simplified assuming `valid` holds.
pub fn simplify_given(idx: &UOp, valid: &UOp) -> UOp {
    simplify_within(idx, clause_bounds(&clauses(valid)))
}

/// Lower and upper bound of `idx` where `valid` holds (`idx`'s own bounds where it bounds
/// nothing `idx` is made of): the elements a gated load or store can reach.
pub(super) fn bounds_given(idx: &UOp, valid: &UOp) -> (i128, i128) {
    let (within, _) = with_stand_ins(idx, clause_bounds(&clauses(valid)));
    let (a, b) = (simplify(&within).bounds(), simplify(&simplify_given(idx, valid)).bounds());
    (a.0.max(b.0), a.1.min(b.1))
}

/// The rule table: every gated INDEX gets its gate's clauses simplified against each other and
/// its index simplified under the gate, once (the context holds the INDEXes already made, since
/// clauses simplified against each other need not reach a fixed point).
pub fn pm_simplify_valid() -> &'static PatternMatcher<HashSet<UOp>> {
    static PM: LazyLock<PatternMatcher<HashSet<UOp>>> = LazyLock::new(|| {
        let index = |i| UPat::ops(&[Ops::Index]).named(i);
        PatternMatcher::new(vec![rule!("gated index simplified", |i; done: &mut HashSet<UOp>| index(i) => {
            let [buf, idx, valid] = i.src() else { return None };
            if done.contains(i) {
                return None;
            }
            let valid2 = simplify_valid(valid);
            let idx2 = simplify_given(idx, &valid2);
            let out = i.replace_src(vec![buf.clone(), idx2, valid2]);
            done.insert(out.clone());
            (out != *i).then_some(out)
        })])
    });
    &PM
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::symbolic::tests::{add, c, div, mul, rem, rng};

    #[test]
    fn a_clause_bounds_the_index() {
        // r in [0, 143]; valid says r < 125, so r // 125 is 0
        let r = add(&mul(&rng(1, 6), &c(24)), &rng(2, 24));
        let valid = r.alu(Ops::CmpLt, &[&c(125)]);
        assert_eq!(simplify_given(&add(&div(&r, &c(125)), &rng(0, 4)), &valid), rng(0, 4));
    }

    #[test]
    fn a_bounded_remainder_drops_out_of_a_division() {
        // (20·ci + r % 25) // 640 with r % 25 < 20: ci < 32, so it is 0
        let m = rem(&add(&mul(&rng(1, 6), &c(24)), &rng(2, 24)), &c(25));
        let valid = m.alu(Ops::CmpLt, &[&c(20)]);
        let idx = div(&add(&mul(&rng(0, 32), &c(20)), &m), &c(640));
        assert_eq!(simplify_given(&simplify(&idx), &valid), c(0));
    }

    #[test]
    fn clauses_simplify_each_other() {
        // (a + b // 125) % 25 < 20 given b < 125 is a % 25 < 20
        let (a, b) = (rng(0, 130), rng(1, 140));
        let inner = rem(&add(&a, &div(&b, &c(125))), &c(25)).alu(Ops::CmpLt, &[&c(20)]);
        let valid = b.alu(Ops::CmpLt, &[&c(125)]).alu(Ops::And, &[&inner]);
        let want = simplify(&rem(&a, &c(25)).alu(Ops::CmpLt, &[&c(20)]));
        assert!(clauses(&simplify_valid(&valid)).contains(&want));
    }
}
