//! Movement ops: they change how data is indexed, never the data. All lazy and free until a
//! kernel indexes through them.

use super::Tensor;
use crate::uop::{Arg, Ops, UOp};

/// Normalize a possibly negative axis for a tensor of rank `ndim`, naming `op` on failure.
pub fn resolve_axis(op: &str, axis: isize, ndim: usize, shape: &[usize]) -> usize {
    let n = ndim as isize;
    let a = if axis < 0 { axis + n } else { axis };
    assert!((0..n.max(1)).contains(&a), "{op}: axis {axis} out of range for shape {shape:?}");
    a as usize
}

/// A dimension in a shape argument: any integer type; `-1` asks `reshape` to infer it.
pub trait Dim: Copy {
    fn dim(self) -> isize;
}
macro_rules! dim {
    ($($t:ty),*) => {$(impl Dim for $t {
        fn dim(self) -> isize {
            self as isize
        }
    })*};
}
dim!(i32, i64, isize, usize, u32);

impl Tensor {
    fn movement(&self, op: Ops, arg: Arg) -> Tensor {
        let mut u = self.uop();
        // a reshape of a reshape is one reshape (and none if it restores the original shape)
        if let (Ops::Reshape, Ops::Reshape, Arg::Shape(new)) = (op, u.op(), &arg) {
            u = u.src()[0].clone();
            if u.sh() == new.as_slice() {
                return self.lift(u);
            }
        }
        self.lift(UOp::new(op, u.dtype(), vec![u], arg))
    }

    /// View with a new shape of the same size; one dimension may be `-1` (inferred).
    pub fn reshape<D: Dim>(&self, shape: &[D]) -> Tensor {
        let shape: Vec<isize> = shape.iter().map(|d| d.dim()).collect();
        let old = self.shape();
        let known: usize = shape.iter().filter(|&&d| d >= 0).map(|&d| d as usize).product();
        assert!(shape.iter().filter(|&&d| d == -1).count() <= 1, "reshape: more than one -1 in {shape:?}");
        assert!(shape.iter().all(|&d| d >= -1), "reshape: bad dimension in {shape:?}");
        let numel = self.numel();
        let new: Vec<usize> = shape
            .iter()
            .map(|&d| match d {
                -1 => {
                    assert!(
                        known != 0 && numel.is_multiple_of(known),
                        "reshape: cannot infer -1 in {shape:?} from {old:?}"
                    );
                    numel / known
                }
                d => d as usize,
            })
            .collect();
        assert_eq!(new.iter().product::<usize>(), numel, "reshape: {old:?} and {new:?} differ in size");
        if new == old {
            return self.clone();
        }
        self.movement(Ops::Reshape, Arg::Shape(new))
    }
    /// Broadcast size-1 dimensions to `shape` (same rank).
    pub fn expand(&self, shape: &[usize]) -> Tensor {
        let old = self.shape();
        assert!(
            old.len() == shape.len() && old.iter().zip(shape).all(|(&o, &n)| o == n || o == 1),
            "expand: cannot expand {old:?} to {shape:?}"
        );
        if old == shape {
            return self.clone();
        }
        self.movement(Ops::Expand, Arg::Shape(shape.to_vec()))
    }
    /// Reorder the axes: output axis `i` is input axis `order[i]`.
    pub fn permute(&self, order: &[isize]) -> Tensor {
        let shape = self.shape();
        let order: Vec<usize> = order.iter().map(|&a| resolve_axis("permute", a, shape.len(), &shape)).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert!(
            sorted == (0..shape.len()).collect::<Vec<_>>(),
            "permute: {order:?} is not a permutation for {shape:?}"
        );
        if order.iter().enumerate().all(|(i, &o)| i == o) {
            return self.clone();
        }
        self.movement(Ops::Permute, Arg::Axes(order))
    }
    /// Pad each axis with `(before, after)` zeros.
    pub fn pad(&self, pads: &[(usize, usize)]) -> Tensor {
        let shape = self.shape();
        assert_eq!(pads.len(), shape.len(), "pad: {} pairs for shape {shape:?}", pads.len());
        if pads.iter().all(|&p| p == (0, 0)) {
            return self.clone();
        }
        self.movement(Ops::Pad, Arg::Pairs(pads.to_vec()))
    }
    /// Keep `[start, end)` of each axis.
    pub fn shrink(&self, bounds: &[(usize, usize)]) -> Tensor {
        let shape = self.shape();
        assert!(
            bounds.len() == shape.len() && bounds.iter().zip(&shape).all(|(&(s, e), &d)| s <= e && e <= d),
            "shrink: bounds {bounds:?} do not fit shape {shape:?}"
        );
        if bounds.iter().zip(&shape).all(|(&(s, e), &d)| s == 0 && e == d) {
            return self.clone();
        }
        self.movement(Ops::Shrink, Arg::Pairs(bounds.to_vec()))
    }
    /// Reverse the given axes.
    pub fn flip(&self, axes: &[isize]) -> Tensor {
        let shape = self.shape();
        let mut axes: Vec<usize> = axes.iter().map(|&a| resolve_axis("flip", a, shape.len(), &shape)).collect();
        axes.sort();
        axes.dedup();
        if axes.is_empty() {
            return self.clone();
        }
        self.movement(Ops::Flip, Arg::Axes(axes))
    }
    /// Swap two axes.
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        let shape = self.shape();
        let (a, b) =
            (resolve_axis("transpose", a, shape.len(), &shape), resolve_axis("transpose", b, shape.len(), &shape));
        let mut order: Vec<isize> = (0..shape.len() as isize).collect();
        order.swap(a, b);
        self.permute(&order)
    }
    /// The matrix transpose (last two axes swapped); tinygrad's `.T`.
    #[allow(non_snake_case)]
    pub fn T(&self) -> Tensor {
        self.transpose(-2, -1)
    }
    /// Merge axes `start..=end` into one.
    pub fn flatten(&self, start: isize, end: isize) -> Tensor {
        let shape = self.shape();
        if shape.is_empty() {
            return self.reshape(&[1]);
        }
        let (s, e) =
            (resolve_axis("flatten", start, shape.len(), &shape), resolve_axis("flatten", end, shape.len(), &shape));
        let mut new: Vec<isize> = shape[..s].iter().map(|&d| d as isize).collect();
        new.push(shape[s..=e].iter().product::<usize>() as isize);
        new.extend(shape[e + 1..].iter().map(|&d| d as isize));
        self.reshape(&new)
    }
    /// Remove axis `axis` if it has size 1 (`None`: every size-1 axis).
    pub fn squeeze(&self, axis: Option<isize>) -> Tensor {
        let shape = self.shape();
        let keep: Vec<isize> = match axis {
            None => shape.iter().filter(|&&d| d != 1).map(|&d| d as isize).collect(),
            Some(a) => {
                let a = resolve_axis("squeeze", a, shape.len(), &shape);
                shape.iter().enumerate().filter(|&(i, &d)| i != a || d != 1).map(|(_, &d)| d as isize).collect()
            }
        };
        self.reshape(&keep)
    }
    /// Insert a size-1 axis at `axis`.
    pub fn unsqueeze(&self, axis: isize) -> Tensor {
        let shape = self.shape();
        let a = resolve_axis("unsqueeze", axis, shape.len() + 1, &shape);
        let mut new: Vec<isize> = shape.iter().map(|&d| d as isize).collect();
        new.insert(a, 1);
        self.reshape(&new)
    }
    /// Force the data into its own contiguous buffer at the next realize.
    pub fn contiguous(&self) -> Tensor {
        // a fresh id per call: two tensors made contiguous separately never share storage, so
        // assigning into one can't change the other
        static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
        self.movement(Ops::Contiguous, Arg::Int(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
    }
}
