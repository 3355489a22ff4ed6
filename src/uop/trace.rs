//! The recorded trace: groups of passes, each pass a graph before, the rewrites that fired and
//! the graph after. Every UOp is stored once, under a small id, and passes refer to ids.

use std::collections::HashMap;

use super::pattern::RuleSite;
use super::print::arg_str;
use super::{Ops, UOp, WeakUOp};

/// Above this many node visits (rewrites × graph size), a pass keeps its before and after graphs
/// and its rewrites but not the whole graph after each rewrite.
const STEP_GRAPH_BUDGET: usize = 4_000_000;

/// One UOp as the page draws it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRecord {
    pub op: Ops,
    pub dtype: String,
    pub arg: String,
    /// Ids of the sources.
    pub src: Vec<u32>,
}

/// One rule firing: `before` became `after`.
#[derive(Clone, Debug)]
pub struct Step {
    pub before: u32,
    pub after: u32,
    /// Index into [`Trace::rules`].
    pub rule: u32,
    /// The root of the whole graph once this and all earlier rewrites are applied (`None` when
    /// the pass was too large to keep every intermediate graph).
    pub graph: Option<u32>,
}

/// One `graph_rewrite` call (or another named graph transformation, without steps).
#[derive(Clone, Debug)]
pub struct Pass {
    pub name: String,
    /// How many passes were running around this one (a rule may run a pass of its own).
    pub depth: u32,
    pub before: u32,
    pub after: u32,
    pub steps: Vec<Step>,
}

/// What caused a run of passes: the schedule, one kernel's codegen, a JIT capture ...
#[derive(Clone, Debug)]
pub struct Group {
    pub name: String,
    /// The group this one was entered in.
    pub parent: Option<usize>,
    pub passes: Vec<Pass>,
    /// The kernel's generated source (kernel groups only).
    pub code: Option<String>,
}

/// A rewrite as the engine reports it, before it is stored.
pub struct Rewrite {
    pub before: UOp,
    pub after: UOp,
    pub rule: RuleSite,
}

/// Everything recorded while VIZ was on.
#[derive(Default)]
pub struct Trace {
    pub nodes: Vec<NodeRecord>,
    /// Rule sites, `file:line` and the rule's name where it has one.
    pub rules: Vec<String>,
    pub groups: Vec<Group>,
    ids: HashMap<WeakUOp, u32>,
    rule_ids: HashMap<(&'static str, u32), u32>,
    ungrouped: Option<usize>,
}

impl Trace {
    /// The id of `u`, storing it and its sources the first time they are seen.
    pub fn node_id(&mut self, u: &UOp) -> u32 {
        if let Some(&id) = self.ids.get(&u.downgrade()) {
            return id;
        }
        let mut stack = vec![(u.clone(), false)];
        while let Some((n, sources_done)) = stack.pop() {
            let key = n.downgrade();
            if self.ids.contains_key(&key) {
                continue;
            }
            if !sources_done {
                stack.push((n.clone(), true));
                stack.extend(
                    n.src().iter().filter(|s| !self.ids.contains_key(&s.downgrade())).map(|s| (s.clone(), false)),
                );
                continue;
            }
            let src = n.src().iter().map(|s| self.ids[&s.downgrade()]).collect();
            let dtype = n.dtype().to_string();
            let record = NodeRecord {
                op: n.op(),
                dtype: dtype.trim_start_matches("dtypes.").to_string(),
                arg: arg_str(n.arg()),
                src,
            };
            self.ids.insert(key, self.nodes.len() as u32);
            self.nodes.push(record);
        }
        self.ids[&u.downgrade()]
    }

    fn rule_id(&mut self, site: RuleSite) -> u32 {
        let next = self.rules.len() as u32;
        let id = *self.rule_ids.entry((site.location.file(), site.location.line())).or_insert(next);
        if id == next {
            self.rules.push(site.to_string());
        }
        id
    }

    /// Open a new group named `name` inside `parent`; returns its index.
    pub fn add_group(&mut self, name: String, parent: Option<usize>) -> usize {
        self.groups.push(Group { name, parent, passes: vec![], code: None });
        self.groups.len() - 1
    }

    /// The group for passes that ran outside any group.
    pub fn ungrouped(&mut self) -> usize {
        match self.ungrouped {
            Some(g) => g,
            None => {
                let g = self.add_group("other".into(), None);
                self.ungrouped = Some(g);
                g
            }
        }
    }

    /// Start a pass on `root` in `group`: it is listed now (before any pass it runs inside), and
    /// filled in by [`Trace::close_pass`]. Returns its index in the group.
    pub fn open_pass(&mut self, group: usize, name: &str, depth: u32, root: &UOp) -> usize {
        let before = self.node_id(root);
        let pass = Pass { name: name.to_string(), depth, before, after: before, steps: vec![] };
        self.groups[group].passes.push(pass);
        self.groups[group].passes.len() - 1
    }

    /// Finish the pass at `(group, index)`: its result and the rewrites that fired, in order.
    /// Each step also gets the whole graph as it stands after it, by replaying the rewrites.
    pub fn close_pass(&mut self, group: usize, index: usize, result: &UOp, rewrites: &[Rewrite], root: &UOp) {
        let keep_graphs = rewrites.len().saturating_mul(root.toposort().len()) <= STEP_GRAPH_BUDGET;
        let mut current = root.clone();
        let mut steps = Vec::with_capacity(rewrites.len());
        for r in rewrites {
            let graph = keep_graphs.then(|| {
                current = replace_node(&current, &r.before, &r.after);
                self.node_id(&current)
            });
            steps.push(Step {
                before: self.node_id(&r.before),
                after: self.node_id(&r.after),
                rule: self.rule_id(r.rule),
                graph,
            });
        }
        let after = self.node_id(result);
        let pass = &mut self.groups[group].passes[index];
        pass.after = after;
        pass.steps = steps;
    }

    /// The ids of every node reachable from `root`, sources first.
    pub fn reachable(&self, root: u32) -> Vec<u32> {
        let mut seen = vec![false; self.nodes.len()];
        let mut order = vec![];
        let mut stack = vec![(root, false)];
        while let Some((id, sources_done)) = stack.pop() {
            if sources_done {
                order.push(id);
                continue;
            }
            if std::mem::replace(&mut seen[id as usize], true) {
                continue;
            }
            stack.push((id, true));
            stack.extend(self.nodes[id as usize].src.iter().rev().filter(|s| !seen[**s as usize]).map(|s| (*s, false)));
        }
        order
    }
}

/// `root` with every occurrence of `from` replaced by `to`.
fn replace_node(root: &UOp, from: &UOp, to: &UOp) -> UOp {
    let mut new: HashMap<UOp, UOp> = HashMap::new();
    for u in root.toposort() {
        let replaced = match &u == from {
            true => to.clone(),
            false => u.replace_src(u.src().iter().map(|s| new[s].clone()).collect()),
        };
        new.insert(u, replaced);
    }
    new[root].clone()
}
