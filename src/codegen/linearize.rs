//! Linearize: turn a lowered kernel graph into a flat list with RANGE ... END brackets.
//!
//! Every node is placed in the innermost loop among the ranges it depends on (so loop-invariant
//! work is hoisted for free). Range ids grow from outer to inner loops — the scheduler creates
//! them consumer-first — so in any node's range set the largest id is the innermost loop. Each
//! loop body is then ordered topologically, a nested loop counting as one item.

use std::collections::{BTreeSet, BinaryHeap, HashMap};

use super::lower::open_ranges;
use crate::dtype::DType;
use crate::uop::{Arg, AxisKind, Ops, UOp};

/// A loop body: the root (`None`) or a RANGE's loop.
type Scope = Option<UOp>;

/// One thing to emit in a scope: a node, or a whole nested loop.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Item {
    Node(UOp),
    Loop(UOp),
}

/// The kernel as a flat, ordered program.
pub fn linearize(sink: &UOp) -> Vec<UOp> {
    let order = sink.toposort();
    let position: HashMap<UOp, usize> = order.iter().enumerate().map(|(i, u)| (u.clone(), i)).collect();
    let mut memo = HashMap::new();
    open_ranges(sink, &mut memo);
    let scope_of: HashMap<UOp, Scope> = order
        .iter()
        .filter(|u| u.op() != Ops::Range)
        .map(|u| (u.clone(), memo[u].values().next_back().cloned()))
        .collect();
    // Output loops nest in id order; a reduce's loops nest, in id order, inside the innermost
    // loop its accumulator is defined under.
    let mut parent: HashMap<UOp, Scope> = HashMap::new();
    let by_id = |rs: &mut Vec<UOp>| rs.sort_by_key(|r| if let Arg::Range(id, _) = r.arg() { *id } else { 0 });
    let mut outputs: Vec<UOp> =
        order.iter().filter(|u| matches!(u.arg(), Arg::Range(_, AxisKind::Loop))).cloned().collect();
    by_id(&mut outputs);
    for (i, r) in outputs.iter().enumerate() {
        parent.insert(r.clone(), i.checked_sub(1).map(|p| outputs[p].clone()));
    }
    for u in order.iter().filter(|u| u.op() == Ops::Assign) {
        let mut reduce: Vec<UOp> = u.src()[2..].to_vec();
        by_id(&mut reduce);
        let mut outer = scope_of[&u.src()[0]].clone();
        for r in reduce {
            parent.insert(r.clone(), outer);
            outer = Some(r);
        }
    }
    // the path of scopes from the root to `s`
    let path = |s: &Scope| {
        let mut p = vec![s.clone()];
        while let Some(Some(r)) = p.last() {
            p.push(parent.get(r).cloned().flatten());
        }
        p.reverse();
        p
    };
    // the scopes from the root to where `u` is emitted: a node in its scope, a RANGE as the
    // loop it opens (so a loop waits for its size, which nothing else may use)
    let place = |u: &UOp| match u.op() {
        Ops::Range => path(&Some(u.clone())),
        _ => path(&scope_of[u]),
    };
    // the item representing `u` inside `scope` (an ancestor of where it is emitted)
    let item_in = |u: &UOp, scope: &Scope| -> Item {
        let p = place(u);
        let depth = path(scope).len();
        if p.len() == depth {
            Item::Node(u.clone())
        } else {
            Item::Loop(p[depth].clone().expect("nested scope is a range"))
        }
    };

    let mut items: HashMap<Scope, Vec<Item>> = HashMap::new();
    let mut deps: HashMap<(Scope, Item), Vec<Item>> = HashMap::new();
    for (r, p) in &parent {
        items.entry(p.clone()).or_default().push(Item::Loop(r.clone()));
    }
    for u in &order {
        if let Some(scope) = scope_of.get(u) {
            items.entry(scope.clone()).or_default().push(Item::Node(u.clone()));
        }
        for s in u.src().iter().filter(|s| s.op() != Ops::Range) {
            let (pu, ps) = (place(u), place(s));
            let common = pu.iter().zip(&ps).take_while(|(a, b)| a == b).count();
            let lca = pu[common - 1].clone();
            let (from, to) = (item_in(s, &lca), item_in(u, &lca));
            if from != to {
                deps.entry((lca, to)).or_default().push(from);
            }
        }
    }

    let priority = |it: &Item| match it {
        Item::Node(u) => position[u],
        Item::Loop(r) => position[r],
    };
    let mut out = vec![];
    emit(&None, &items, &deps, &priority, &mut out);
    out
}

fn emit(
    scope: &Scope,
    items: &HashMap<Scope, Vec<Item>>,
    deps: &HashMap<(Scope, Item), Vec<Item>>,
    priority: &dyn Fn(&Item) -> usize,
    out: &mut Vec<UOp>,
) {
    let mine = items.get(scope).cloned().unwrap_or_default();
    let mut waiting: HashMap<Item, usize> = HashMap::new();
    let mut users: HashMap<Item, Vec<Item>> = HashMap::new();
    for it in &mine {
        let mut ds = BTreeSet::new();
        for d in deps.get(&(scope.clone(), it.clone())).into_iter().flatten() {
            if ds.insert(priority(d)) {
                users.entry(d.clone()).or_default().push(it.clone());
            }
        }
        waiting.insert(it.clone(), ds.len());
    }
    let mut ready: BinaryHeap<std::cmp::Reverse<(usize, usize)>> = BinaryHeap::new();
    let index: Vec<Item> = mine.clone();
    for (i, it) in index.iter().enumerate() {
        if waiting[it] == 0 {
            ready.push(std::cmp::Reverse((priority(it), i)));
        }
    }
    let slot: HashMap<Item, usize> = index.iter().enumerate().map(|(i, it)| (it.clone(), i)).collect();
    let mut emitted = 0;
    while let Some(std::cmp::Reverse((_, i))) = ready.pop() {
        emitted += 1;
        let it = &index[i];
        match it {
            Item::Node(u) => out.push(u.clone()),
            Item::Loop(r) => {
                out.push(r.clone());
                emit(&Some(r.clone()), items, deps, priority, out);
                out.push(UOp::new(Ops::End, DType::VOID, vec![r.clone()], Arg::None));
            }
        }
        for user in users.get(it).into_iter().flatten() {
            let w = waiting.get_mut(user).expect("user is in this scope");
            *w -= 1;
            if *w == 0 {
                ready.push(std::cmp::Reverse((priority(user), slot[user])));
            }
        }
    }
    assert_eq!(emitted, mine.len(), "linearize: a dependency cycle left items unplaced");
}
