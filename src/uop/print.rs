//! Readable text forms of a UOp graph (DEBUG=5/6 and `{:?}`).

use std::collections::HashMap;
use std::fmt::Write;

use super::uop::{Arg, UOp};

/// The argument as a short string (empty for none).
pub fn arg_str(arg: &Arg) -> String {
    match arg {
        Arg::None => String::new(),
        Arg::Const(c) => c.to_string(),
        Arg::Int(i) => i.to_string(),
        Arg::Shape(s) | Arg::Axes(s) => format!("{s:?}"),
        Arg::Pairs(p) => format!("{p:?}"),
        Arg::ReduceAxis(op, axes) => format!("({}, {axes:?})", op.name()),
        Arg::Reduce(op) => op.name(),
        Arg::Range(id, kind) => format!("({id}, {kind:?})"),
        Arg::Buffer(b) => format!("{b:?}"),
        Arg::Str(s) => s.clone(),
        Arg::Special(s) => s.to_string(),
        Arg::Store(mode) => format!("{mode:?}"),
        Arg::Call(call, params) => format!("{call:?}{params:?}"),
        Arg::NoLocals => "NOLOCALS".into(),
        Arg::Wmma(tc) => tc.name.into(),
        Arg::Var(name, lo, hi) => format!("{name}[{lo}-{hi}]"),
        Arg::Function(f) => format!("{f:?}"),
    }
}

/// One line per node, sources before users, each naming its sources by line number.
pub fn render_tree(root: &UOp) -> String {
    let order = root.toposort();
    let ids: HashMap<&UOp, usize> = order.iter().enumerate().map(|(i, u)| (u, i)).collect();
    let mut out = String::new();
    for (i, u) in order.iter().enumerate() {
        let src: Vec<String> = u.src().iter().map(|s| ids[s].to_string()).collect();
        let _ = writeln!(
            out,
            "{i:4} {:<12} {:<22} [{}] {}",
            u.op().name(),
            format!("{:?}", u.dtype()),
            src.join(", "),
            arg_str(u.arg())
        );
    }
    out
}
