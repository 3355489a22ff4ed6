//! `graph_rewrite`: apply a rule table to a whole graph until nothing more matches.

use std::panic::Location;
use std::sync::LazyLock;

use super::pattern::{PatternMatcher, RuleSite, UPat};
use super::trace::Rewrite;
use super::track;
use super::uop::{UOp, UOpMap, SMALL_GRAPH};
use crate::rule;

/// Rewrite every node reachable from `root` with `pm` to a fixed point and return the new root.
///
/// Sources are rewritten before their users; a node whose rewrite produces a new node has that
/// node rewritten again (sources first) until no rule fires. With `bottom_up`, each node is
/// offered to the rules *before* its sources are rewritten, as the scheduler needs when rules
/// look at original subgraphs. `name` labels the pass for DEBUG and VIZ.
pub fn graph_rewrite<C>(root: &UOp, pm: &PatternMatcher<C>, ctx: &mut C, name: &str, bottom_up: bool) -> UOp {
    run_pass(root, name, bottom_up, &|_| false, &mut |_, u| {
        pm.rewrite_by_rule(u, ctx).map(|(r, rule)| (r, rule.site()))
    })
}

/// The substitution rule: a node found in the context map becomes what it maps to.
static PM_SUBSTITUTE: LazyLock<PatternMatcher<UOpMap<UOp>>> = LazyLock::new(|| {
    PatternMatcher::new(vec![rule!("substitute", |x; map: &mut UOpMap<UOp>| UPat::var(x) => map.get(x).cloned())])
});

/// `root` with every node that is a key of `map` replaced by its value (checked before the
/// node's sources, so a replaced subgraph is not walked).
pub fn substitute(root: &UOp, map: &mut UOpMap<UOp>, name: &str) -> UOp {
    substitute_outside(root, map, name, &|_| false)
}

/// `substitute` that leaves alone, without walking them, the subgraphs whose roots `settled`
/// says hold no key of `map`.
pub fn substitute_outside(root: &UOp, map: &mut UOpMap<UOp>, name: &str, settled: &dyn Fn(&UOp) -> bool) -> UOp {
    run_pass(root, name, true, settled, &mut |_, u| {
        PM_SUBSTITUTE.rewrite_by_rule(u, map).map(|(r, rule)| (r, rule.site()))
    })
}

/// `root` with `k` replaced by `e`, where each node that depended on `k` is rebuilt over its
/// sources' new forms and passed, after its original, to `rebuilt`, which returns its
/// replacement or None to keep it. For substitutions that change more than the sources (fold.rs
/// gates every INDEX that read `k`); `e` must not hold `k`.
#[track_caller]
pub fn substitute_rebuilt(
    root: &UOp,
    k: &UOp,
    e: &UOp,
    name: &str,
    rebuilt: &mut dyn FnMut(&UOp, &UOp) -> Option<UOp>,
) -> UOp {
    let here = RuleSite { location: Location::caller(), name: None };
    run_pass(root, name, false, &|_| false, &mut |original, new| match original == k {
        true => Some((e.clone(), here)),
        false if new == original => None,
        false => rebuilt(original, new).map(|r| (r, here)),
    })
}

/// What a pass offers each node to, as its original and its form rebuilt over its sources' new
/// forms: its replacement, if any, and the rule that made it.
type Offer<'a> = dyn FnMut(&UOp, &UOp) -> Option<(UOp, RuleSite)> + 'a;

/// One rewrite pass over the graph of `root`, recorded for VIZ when it is on; nodes `settled`
/// says are final are neither offered nor walked.
fn run_pass(root: &UOp, name: &str, bottom_up: bool, settled: &dyn Fn(&UOp) -> bool, offer: &mut Offer) -> UOp {
    let mut map = UOpMap::with_capacity_and_hasher(2 * SMALL_GRAPH, Default::default());
    match track::recording() {
        false => {
            rewrite_into(root, name, settled, offer, bottom_up, &mut map, None);
            map[root].clone()
        }
        true => {
            let pass = track::start_pass(name, root);
            let mut rewrites = vec![];
            rewrite_into(root, name, settled, offer, bottom_up, &mut map, Some(&mut rewrites));
            let result = map[root].clone();
            pass.finish(&result, &rewrites);
            result
        }
    }
}

enum Step {
    /// Visit: try the rules (bottom-up only), else schedule the sources.
    Enter(UOp),
    /// All sources are done: rebuild with the new sources and offer to the rules.
    Rebuild(UOp),
    /// `n` was rewritten to `to`; once `to` is done, `n` maps to what `to` became.
    Link(UOp, UOp),
}

/// Rewrites waiting for their results at once past which a pass is taken to loop: a rule whose
/// every result is a new node for it to rewrite again (tinygrad stops at a quarter million too).
const MAX_PENDING: usize = 1 << 18;

/// The rewrite loop of pass `name`; with `trace`, every rewrite that happens is appended to it.
/// A rule that loops (rewriting a node through others back to itself, or growing its results
/// without end) panics naming the pass and the rule: it is a bug in the rule table, which would
/// otherwise hang.
fn rewrite_into(
    root: &UOp,
    name: &str,
    settled: &dyn Fn(&UOp) -> bool,
    rules: &mut Offer,
    bottom_up: bool,
    map: &mut UOpMap<UOp>,
    mut trace: Option<&mut Vec<Rewrite>>,
) {
    // rewrites whose results are not final yet (their `Link`s on the stack)
    let mut pending = 0usize;
    let mut offer = |original: &UOp, u: &UOp, pending: usize| {
        let (r, rule) = rules(original, u)?;
        if let Some(t) = trace.as_deref_mut() {
            t.push(Rewrite { before: u.clone(), after: r.clone(), rule });
        }
        if pending >= MAX_PENDING {
            let (from, to) = (u.op().name(), r.op().name());
            panic!(
                "rewrite pass {name:?}: the rule at {rule} loops: its results keep being rewritten ({from} -> {to})"
            );
        }
        Some(r)
    };
    let mut stack = Vec::with_capacity(SMALL_GRAPH);
    stack.push(Step::Enter(root.clone()));
    while let Some(step) = stack.pop() {
        match step {
            Step::Enter(n) => {
                if map.contains_key(&n) {
                    continue;
                }
                if settled(&n) {
                    map.insert(n.clone(), n);
                    continue;
                }
                if bottom_up {
                    if let Some(r) = offer(&n, &n, pending) {
                        pending += 1;
                        stack.push(Step::Link(n, r.clone()));
                        stack.push(Step::Enter(r));
                        continue;
                    }
                }
                stack.push(Step::Rebuild(n.clone()));
                for s in n.src().iter().rev() {
                    if !map.contains_key(s) {
                        stack.push(Step::Enter(s.clone()));
                    }
                }
            }
            Step::Rebuild(n) => {
                if map.contains_key(&n) {
                    continue;
                }
                let new = n.replace_src(n.src().iter().map(|s| map[s].clone()).collect());
                match offer(&n, &new, pending) {
                    Some(r) => {
                        pending += 1;
                        stack.push(Step::Link(n, r.clone()));
                        stack.push(Step::Enter(r));
                    }
                    None => {
                        // sources final and no rule fires: `new` is final too
                        map.insert(new.clone(), new.clone());
                        map.insert(n, new);
                    }
                }
            }
            Step::Link(n, to) => {
                let done = map[&to].clone();
                pending -= 1;
                map.insert(n, done);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::uop::pattern::{rule, UPat};
    use crate::uop::Ops;

    #[test]
    fn rewrites_reach_a_fixed_point() {
        // x*1 -> x and x+0 -> x applied to ((3*1)+0)*1 must give 3 in one call.
        let pm = PatternMatcher::new(vec![
            rule(UPat::var("x") * UPat::konst(1.0), |m| Some(m["x"].clone())),
            rule(UPat::var("x") + UPat::konst(0.0), |m| Some(m["x"].clone())),
        ]);
        let (one, zero, three) = (UOp::index_const(1), UOp::index_const(0), UOp::index_const(3));
        let e = three.alu(Ops::Mul, &[&one]).alu(Ops::Add, &[&zero]).alu(Ops::Mul, &[&one]);
        assert_eq!(graph_rewrite(&e, &pm, &mut (), "test", false), three);
    }

    #[test]
    fn a_rule_that_loops_panics_naming_the_pass_and_the_rule() {
        let e = UOp::index_const(3).alu(Ops::Add, &[&UOp::index_const(4)]);
        // a + b -> b + a -> a + b ...
        let swapping = PatternMatcher::new(vec![rule(UPat::var("x") + UPat::var("y"), |m| {
            Some(m["y"].alu(Ops::Add, &[&m["x"]]))
        })]);
        // x -> x + 0 -> (x + 0) + 0 ...
        let growing = PatternMatcher::new(vec![rule(UPat::var("x"), |m| {
            (m["x"].op() == Ops::Add).then(|| m["x"].alu(Ops::Add, &[&UOp::index_const(0)]))
        })]);
        for pm in [&swapping, &growing] {
            let rewrite = std::panic::AssertUnwindSafe(|| graph_rewrite(&e, pm, &mut (), "looping", false));
            let panic = std::panic::catch_unwind(rewrite).unwrap_err();
            let message = panic.downcast_ref::<String>().cloned().unwrap_or_default();
            let named = message.contains("rewrite pass \"looping\": the rule at src/uop/rewrite.rs:");
            assert!(named && message.contains("loops"), "{message}");
        }
    }

    #[test]
    fn substitute_outside_leaves_settled_subgraphs_unwalked() {
        let (x, y, z) = (UOp::index_const(5), UOp::index_const(6), UOp::index_const(7));
        let inner = x.alu(Ops::Add, &[&y]);
        let outer = inner.alu(Ops::Mul, &[&x]);
        let mut map = UOpMap::from_iter([(x.clone(), z.clone())]);
        let everywhere = z.alu(Ops::Add, &[&y]).alu(Ops::Mul, &[&z]);
        assert_eq!(substitute(&outer, &mut map, "test"), everywhere);
        // `inner` is settled: its x stays, the x directly under `outer` is replaced
        let pruned = substitute_outside(&outer, &mut map, "test", &|u| *u == inner);
        assert_eq!(pruned, inner.alu(Ops::Mul, &[&z]));
    }
}
