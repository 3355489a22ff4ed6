//! Reductions over any set of axes.

use super::movement::resolve_axis;
use super::Tensor;
use crate::dtype::DType;
use crate::uop::{Arg, Ops, UOp};

/// Which axes a reduction runs over: one axis, several, or `None` for all of them.
pub trait Axes {
    fn resolve(&self, op: &str, shape: &[usize]) -> Vec<usize>;
}

impl Axes for isize {
    fn resolve(&self, op: &str, shape: &[usize]) -> Vec<usize> {
        vec![resolve_axis(op, *self, shape.len(), shape)]
    }
}
impl Axes for i32 {
    fn resolve(&self, op: &str, shape: &[usize]) -> Vec<usize> {
        (*self as isize).resolve(op, shape)
    }
}
impl Axes for &[isize] {
    fn resolve(&self, op: &str, shape: &[usize]) -> Vec<usize> {
        let mut v: Vec<usize> = self.iter().map(|a| a.resolve(op, shape)[0]).collect();
        v.sort();
        v.dedup();
        v
    }
}
impl<const N: usize> Axes for [isize; N] {
    fn resolve(&self, op: &str, shape: &[usize]) -> Vec<usize> {
        self.as_slice().resolve(op, shape)
    }
}
impl Axes for Option<isize> {
    fn resolve(&self, op: &str, shape: &[usize]) -> Vec<usize> {
        match self {
            Some(a) => a.resolve(op, shape),
            None => (0..shape.len()).collect(),
        }
    }
}

/// The dtype sums accumulate in (tinygrad's `sum_acc_dtype`).
fn sum_acc_dtype(dtype: DType) -> DType {
    if dtype.is_unsigned() {
        DType::least_upper(dtype, DType::UINT32)
    } else if dtype.is_int() || dtype.is_bool() {
        DType::least_upper(dtype, DType::INT32)
    } else {
        DType::least_upper(dtype, DType::FLOAT32)
    }
}

impl Tensor {
    fn reduce(&self, op: Ops, axes: Vec<usize>, keepdim: bool) -> Tensor {
        let shape = self.shape();
        let axes: Vec<usize> = axes.into_iter().filter(|&a| shape[a] != 1 || !keepdim).collect();
        let reduced = if axes.is_empty() {
            self.clone()
        } else {
            let u = self.uop();
            self.lift(UOp::new(Ops::ReduceAxis, u.dtype(), vec![u], Arg::ReduceAxis(op, axes.clone())))
        };
        if keepdim {
            return reduced;
        }
        let new: Vec<isize> =
            shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, &d)| d as isize).collect();
        reduced.reshape(&new)
    }
    /// Sum over `axes`; ints accumulate in at least 32 bits, half floats in float32.
    pub fn sum(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        let axes = axes.resolve("sum", &self.shape());
        let acc = sum_acc_dtype(self.dtype());
        let out = self.cast(acc).reduce(Ops::Add, axes, keepdim);
        let half = [DType::FLOAT16, DType::BFLOAT16].contains(&self.dtype());
        if half {
            out.cast(self.dtype())
        } else {
            out
        }
    }
    pub fn max(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        let axes = axes.resolve("max", &self.shape());
        self.reduce(Ops::Max, axes, keepdim)
    }
    pub fn min(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.neg().max(axes, keepdim).neg()
    }
    /// Mean over `axes`, in float.
    pub fn mean(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        let shape = self.shape();
        let resolved = axes.resolve("mean", &shape);
        let count: usize = resolved.iter().map(|&a| shape[a]).product();
        let ax: Vec<isize> = resolved.iter().map(|&a| a as isize).collect();
        let s = self.sum(ax.as_slice(), keepdim);
        let f = s.cast(s.dtype().to_float());
        f.div(count.max(1) as f64).cast(if self.dtype().is_float() { self.dtype() } else { f.dtype() })
    }
}
