//! Kernel names that say what a kernel is, as tinygrad's do: `E_` (elementwise) or `r_` (reduces),
//! then the sizes of its loops grouped by kind: threads, output loops, workgroup output and
//! reduce threads, reduce loops, upcast lanes, unrolled reduce steps. DEBUG output colors each
//! size by its kind when stderr is a terminal.

use std::fmt;

use crate::helpers::color::{colored, stderr_is_terminal, Color};
use crate::uop::{Arg, AxisKind, Ops, UOp};

/// The kind of a loop in a kernel name, in name order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum NameAxis {
    /// The CPU core id the THREAD opt splits the outer loop by (bright blue).
    Thread,
    /// An output loop (blue).
    Loop,
    /// Output threads of a workgroup (cyan).
    Local,
    /// Reduce threads of a workgroup (green).
    GroupReduce,
    /// A reduce loop (red).
    Reduce,
    /// Output lanes computed together (yellow).
    Upcast,
    /// Reduce steps done together (magenta).
    Unroll,
}

impl NameAxis {
    fn color(self) -> Color {
        match self {
            NameAxis::Thread => Color::BrightBlue,
            NameAxis::Loop => Color::Blue,
            NameAxis::Local => Color::Cyan,
            NameAxis::GroupReduce => Color::Green,
            NameAxis::Reduce => Color::Red,
            NameAxis::Upcast => Color::Yellow,
            NameAxis::Unroll => Color::Magenta,
        }
    }
}

impl From<AxisKind> for NameAxis {
    fn from(kind: AxisKind) -> NameAxis {
        match kind {
            AxisKind::Loop => NameAxis::Loop,
            AxisKind::Reduce => NameAxis::Reduce,
            AxisKind::Upcast => NameAxis::Upcast,
            AxisKind::Unroll => NameAxis::Unroll,
            AxisKind::Local | AxisKind::Warp => NameAxis::Local,
            AxisKind::GroupReduce => NameAxis::GroupReduce,
        }
    }
}

/// A kernel's name: the kind and size of each of its loops, in name order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelName {
    axes: Vec<(NameAxis, usize)>,
}

impl KernelName {
    /// The name of kernel `ast`, before or after opts (after them it shows the split loops).
    pub fn of(ast: &UOp) -> KernelName {
        let mut axes: Vec<(NameAxis, usize, usize)> = ast
            .toposort()
            .iter()
            .filter_map(|u| {
                let size = u.src().first()?.const_int_value()? as usize;
                match (u.op(), u.arg()) {
                    (Ops::Range, Arg::Range(id, kind)) => Some(((*kind).into(), *id, size)),
                    (Ops::Special, Arg::Special(crate::uop::Special::Core)) => Some((NameAxis::Thread, 0, size)),
                    _ => None,
                }
            })
            .collect();
        axes.sort();
        KernelName { axes: axes.into_iter().map(|(kind, _, size)| (kind, size)).collect() }
    }

    /// The name, with each size colored by its loop's kind when `color` (plain, it is the
    /// kernel's C identifier).
    pub fn render(&self, color: bool) -> String {
        let reduces = self
            .axes
            .iter()
            .any(|(kind, _)| matches!(kind, NameAxis::GroupReduce | NameAxis::Reduce | NameAxis::Unroll));
        let mut name = String::from(if reduces { "r" } else { "E" });
        for (kind, size) in &self.axes {
            name.push('_');
            name.push_str(&colored(&size.to_string(), kind.color(), color));
        }
        name
    }

    /// The name as DEBUG prints it: colored when stderr is a terminal.
    pub fn for_debug(&self) -> String {
        self.render(stderr_is_terminal())
    }
}

impl fmt::Display for KernelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}
