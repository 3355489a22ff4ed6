//! Shapes of tensor-level UOps, derived from their sources and arguments.

use super::ops::Ops;
use super::uop::{Arg, UOp};

/// The shape of `u`, or `None` for kernel-level nodes (and for nodes whose sources have none).
pub fn derive_shape(u: &UOp) -> Option<Vec<usize>> {
    let src_shape = || u.src().first().and_then(|s| s.shape()).map(<[usize]>::to_vec);
    match (u.op(), u.arg()) {
        (Ops::Buffer, Arg::Buffer(b)) => Some(vec![b.0.size()]),
        (Ops::Const, _) => Some(vec![]),
        (Ops::Reshape | Ops::Expand, Arg::Shape(shape)) => Some(shape.clone()),
        (Ops::Permute, Arg::Axes(order)) => src_shape().map(|s| order.iter().map(|&i| s[i]).collect()),
        (Ops::Flip, _) => src_shape(),
        (Ops::Pad, Arg::Pairs(pads)) => src_shape().map(|s| s.iter().zip(pads).map(|(d, (b, a))| d + b + a).collect()),
        (Ops::Shrink, Arg::Pairs(bounds)) => Some(bounds.iter().map(|(s, e)| e - s).collect()),
        (Ops::ReduceAxis, Arg::ReduceAxis(_, axes)) => {
            src_shape().map(|s| s.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect())
        }
        (Ops::Sink | Ops::Param | Ops::Range | Ops::Index | Ops::Load | Ops::Store | Ops::End, _) => None,
        (Ops::Reduce | Ops::DefineReg | Ops::After | Ops::Special, _) => None,
        _ => u.src().iter().find_map(|s| s.shape()).map(<[usize]>::to_vec),
    }
}
