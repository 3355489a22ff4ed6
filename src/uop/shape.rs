//! Shapes of tensor-level UOps, derived from their sources and arguments.

use super::ops::Ops;
use super::uop::{Arg, UOp};

/// The shape of `u`, or `None` for kernel-level nodes (and for nodes whose sources have none).
pub fn derive_shape(u: &UOp) -> Option<Vec<usize>> {
    let src_shape = || u.src().first().and_then(|s| s.shape()).map(<[usize]>::to_vec);
    match (u.op(), u.arg()) {
        (Ops::Buffer, Arg::Buffer(b)) => Some(vec![b.0.numel()]),
        (Ops::Const | Ops::DefineVar | Ops::Bind, _) => Some(vec![]),
        (Ops::Reshape | Ops::Expand, Arg::Shape(shape)) => Some(shape.clone()),
        (Ops::Permute, Arg::Axes(order)) => src_shape().map(|s| order.iter().map(|&i| s[i]).collect()),
        (Ops::Flip, _) => src_shape(),
        (Ops::Pad, Arg::Pairs(pads)) => src_shape().map(|s| s.iter().zip(pads).map(|(d, (b, a))| d + b + a).collect()),
        (Ops::Shrink, Arg::Pairs(bounds)) => Some(bounds.iter().map(|(s, e)| e - s).collect()),
        (Ops::ReduceAxis, Arg::ReduceAxis(_, axes)) => {
            src_shape().map(|s| s.iter().enumerate().map(|(i, &d)| if axes.contains(&i) { 1 } else { d }).collect())
        }
        (Ops::Multi, arg) => src_shape().map(|mut s| {
            if let Arg::Int(axis) = arg {
                s[*axis as usize] *= u.src().len();
            }
            s
        }),
        (Ops::Sink | Ops::Param | Ops::Range | Ops::Index | Ops::Load | Ops::Store | Ops::End, _) => None,
        (Ops::Reduce | Ops::DefineReg | Ops::After | Ops::Special, _) => None,
        _ => u.src().iter().find_map(|s| s.shape()).map(<[usize]>::to_vec),
    }
}

/// The symbolic sizes of `u`'s axes (see `UOp::sym_dims`). Symbolic sizes enter through the
/// extra sources of a SHRINK (a start and an end per axis) and of a RESHAPE or EXPAND (one size
/// per axis), and flow through everything else axis by axis. The frontend keeps PAD, FLIP and a
/// numeric SHRINK off symbolic axes.
pub fn derive_sym_dims(u: &UOp) -> Option<Vec<Option<UOp>>> {
    let rank = u.shape()?.len();
    let of = |s: &UOp| s.sym_dims().map(<[Option<UOp>]>::to_vec);
    let symbolic = |d: UOp| d.const_int_value().is_none().then_some(d);
    let dims: Vec<Option<UOp>> = match (u.op(), u.arg()) {
        (Ops::Shrink, _) if u.src().len() > 1 => {
            let inner = of(&u.src()[0]).unwrap_or_else(|| vec![None; rank]);
            let pairs = u.src()[1..].chunks(2);
            pairs.zip(inner).map(|(p, d)| symbolic(super::variable::length(&p[0], &p[1])).or(d)).collect()
        }
        (Ops::Reshape | Ops::Expand, _) if u.src().len() > 1 => u.src()[1..].iter().cloned().map(symbolic).collect(),
        (Ops::Reshape | Ops::Buffer | Ops::Const | Ops::DefineVar | Ops::Bind, _) => return None,
        // a CALL's inputs need not be shaped as its value
        (Ops::Shrink | Ops::Pad | Ops::Flip | Ops::Expand | Ops::Call, _) => of(&u.src()[0])?,
        (Ops::Permute, Arg::Axes(order)) => {
            let inner = of(&u.src()[0])?;
            order.iter().map(|&a| inner[a].clone()).collect()
        }
        (Ops::ReduceAxis, Arg::ReduceAxis(_, axes)) => {
            let mut inner = of(&u.src()[0])?;
            axes.iter().for_each(|&a| inner[a] = None);
            inner
        }
        _ => {
            let same_rank = u.src().iter().filter(|s| s.shape().map(<[usize]>::len) == Some(rank));
            let inner: Vec<Vec<Option<UOp>>> = same_rank.filter_map(of).collect();
            (0..rank).map(|a| inner.iter().find_map(|d| d[a].clone())).collect()
        }
    };
    dims.iter().any(Option::is_some).then_some(dims)
}
