//! A trace as JSON (what the explorer page loads, and for scripts) and graphs as Graphviz DOT.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::uop::trace::{NodeRecord, Trace};
use crate::uop::Ops;

/// Fill color of a node by its op's family (the page and DOT use the same colors).
pub fn op_color(op: Ops) -> &'static str {
    match op {
        Ops::Sink | Ops::Noop | Ops::After | Ops::End => "#d0d0d0",
        Ops::Const => "#eeeeee",
        Ops::Buffer | Ops::Param | Ops::DefineReg => "#a8d0f0",
        Ops::Copy | Ops::Assign | Ops::Contiguous | Ops::Detach | Ops::Call | Ops::Kernel => "#c8b8f0",
        Ops::Range | Ops::Special => "#d8a8f8",
        Ops::Index => "#f8d8a8",
        Ops::Load => "#f8b8b8",
        Ops::Store => "#f08888",
        Ops::ReduceAxis | Ops::Reduce => "#f0b070",
        Ops::Cast | Ops::Bitcast => "#d8e8a0",
        op if op.is_movement() => "#a8e0a8",
        _ => "#fff4b0",
    }
}

/// The trace as compact JSON:
///
/// ```text
/// { "rules":  ["file:line", ...],
///   "colors": {"OP": "#rrggbb", ...},
///   "nodes":  [[op, dtype, arg, [src ids]], ...],              // a node's id is its index
///   "groups": [{"name", "parent": index|null, "code": text|null,
///               "passes": [{"name", "depth", "before": id, "after": id,
///                           "steps": [[before id, after id, rule index, graph root id|null], ...]}]}] }
/// ```
pub fn to_json(trace: &Trace) -> String {
    let ops: BTreeSet<Ops> = trace.nodes.iter().map(|n| n.op).collect();
    let colors: serde_json::Map<String, Value> = ops.into_iter().map(|op| (op.name(), json!(op_color(op)))).collect();
    let nodes: Vec<Value> = trace.nodes.iter().map(|n| json!([n.op.name(), n.dtype, n.arg, n.src])).collect();
    let groups: Vec<Value> = trace
        .groups
        .iter()
        .map(|g| {
            let passes: Vec<Value> = g
                .passes
                .iter()
                .map(|p| {
                    let steps: Vec<Value> =
                        p.steps.iter().map(|s| json!([s.before, s.after, s.rule, s.graph])).collect();
                    json!({"name": p.name, "depth": p.depth, "before": p.before, "after": p.after, "steps": steps})
                })
                .collect();
            json!({"name": g.name, "parent": g.parent, "code": g.code, "passes": passes})
        })
        .collect();
    json!({"rules": trace.rules, "colors": colors, "nodes": nodes, "groups": groups}).to_string()
}

/// The nodes of the graph at `root` that the graph at `prev` does not have (what a rewrite added).
pub fn changed_nodes(trace: &Trace, root: u32, prev: u32) -> HashSet<u32> {
    let old: HashSet<u32> = trace.reachable(prev).into_iter().collect();
    trace.reachable(root).into_iter().filter(|n| !old.contains(n)).collect()
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The node's label: op, dtype and argument on separate lines.
fn node_label(n: &NodeRecord) -> String {
    let mut lines = vec![n.op.name(), n.dtype.clone()];
    if !n.arg.is_empty() {
        lines.push(n.arg.clone());
    }
    lines.iter().map(|l| dot_escape(l)).collect::<Vec<_>>().join("\\n")
}

/// The graph at `root` as a DOT `digraph` titled `title`, sources above their users, nodes
/// colored by op, `highlight`ed nodes outlined in red.
pub fn graph_to_dot(trace: &Trace, root: u32, title: &str, highlight: &HashSet<u32>) -> String {
    let mut out = format!(
        "digraph \"{}\" {{\n  node [shape=box, style=\"rounded,filled\", fontname=\"monospace\", fontsize=10];\n",
        dot_escape(title)
    );
    for id in trace.reachable(root) {
        let n = &trace.nodes[id as usize];
        let outline = if highlight.contains(&id) { ", color=\"#e02020\", penwidth=3" } else { "" };
        let _ = writeln!(out, "  n{id} [label=\"{}\", fillcolor=\"{}\"{outline}];", node_label(n), op_color(n.op));
        for s in &n.src {
            let _ = writeln!(out, "  n{s} -> n{id};");
        }
    }
    out.push_str("}\n");
    out
}

/// Graphs with more nodes than this are left out of [`to_dot`] (a comment says so).
pub const DOT_MAX_NODES: usize = 1000;

/// Every pass that changed its graph, as two digraphs (before, and after with the new nodes
/// outlined), one after the other. Passes with a graph over [`DOT_MAX_NODES`] nodes are left out.
pub fn to_dot(trace: &Trace) -> String {
    let mut out = String::new();
    for (gi, g) in trace.groups.iter().enumerate() {
        for (pi, p) in g.passes.iter().enumerate().filter(|(_, p)| p.before != p.after) {
            let title = format!("group {gi} {} / pass {pi} {}", g.name, p.name);
            let size = trace.reachable(p.before).len().max(trace.reachable(p.after).len());
            if size > DOT_MAX_NODES {
                let _ = writeln!(out, "// {title}: left out, its graph has {size} nodes (over {DOT_MAX_NODES})");
                continue;
            }
            out.push_str(&graph_to_dot(trace, p.before, &format!("{title} (before)"), &HashSet::new()));
            let changed = changed_nodes(trace, p.after, p.before);
            out.push_str(&graph_to_dot(trace, p.after, &format!("{title} (after)"), &changed));
        }
    }
    out
}

/// Write the trace as JSON to `path` and its changed graphs as DOT beside it (`path` with the
/// extension `.dot`); returns the DOT file's path.
pub fn write_files(trace: &Trace, path: &Path) -> io::Result<PathBuf> {
    let mut dot_path = path.with_extension("dot");
    if dot_path == path {
        dot_path = PathBuf::from(format!("{}.dot", path.display()));
    }
    std::fs::write(path, to_json(trace))?;
    std::fs::write(&dot_path, to_dot(trace))?;
    Ok(dot_path)
}
