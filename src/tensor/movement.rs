//! Movement ops: they change how data is indexed, never the data. All lazy and free until a
//! kernel indexes through them.

use super::elementwise::Scalar;
use super::Tensor;
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::uop::variable::{length, symbolic_shrink};
use crate::uop::{Arg, Ops, Sint, UOp};

/// A possibly negative axis of a tensor of rank `ndim` (of shape `shape`) as an index, or
/// `Error::Axis` naming `op`. A 0-d tensor has one axis to name, `0` or `-1`, as in PyTorch.
pub fn resolve_axis(op: &'static str, axis: isize, ndim: usize, shape: &[usize]) -> Result<usize> {
    let n = (ndim as isize).max(1);
    let a = if axis < 0 { axis + n } else { axis };
    match (0..n).contains(&a) {
        true => Ok(a as usize),
        false => Err(Error::Axis { op, axis, shape: shape.to_vec() }),
    }
}

/// How `pad_with` fills the border: a constant, a mirror image, the edge value, or wrap-around.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    Reflect,
    Replicate,
    Circular,
}

/// `Err` (naming `op`) for a 0-d tensor, which has no axis to cut or join along.
pub(super) fn at_least_1d(op: &'static str, shape: &[usize]) -> Result<()> {
    ensure(!shape.is_empty(), || Error::shape(op, &[shape], "needs a tensor of at least 1 dimension"))
}

/// `shape` with `dim` replaced by `size`.
fn with_dim(shape: &[usize], dim: usize, size: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s[dim] = size;
    s
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
dim!(i32, i64, isize, u32);
/// A size past `isize::MAX` (an underflowed `n - 1`) stays an invalid size instead of wrapping
/// to `-1`, which `reshape` would infer.
impl Dim for usize {
    fn dim(self) -> isize {
        isize::try_from(self).unwrap_or(isize::MIN)
    }
}

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
        self.try_reshape(shape).or_panic()
    }
    /// `reshape`, reporting a shape of the wrong size as an error.
    pub fn try_reshape<D: Dim>(&self, shape: &[D]) -> Result<Tensor> {
        let shape: Vec<isize> = shape.iter().map(|d| d.dim()).collect();
        let (old, numel) = (self.shape(), self.numel());
        let err = |m: String| Err(Error::shape("reshape", &[&old], m));
        if shape.iter().filter(|&&d| d == -1).count() > 1 || shape.iter().any(|&d| d < -1) {
            return err(format!("bad shape {shape:?} (only one -1 allowed)"));
        }
        let Some(known) = shape.iter().filter(|&&d| d >= 0).try_fold(1usize, |n, &d| n.checked_mul(d as usize)) else {
            return err(format!("shape {shape:?} has more elements than usize holds"));
        };
        if shape.contains(&-1) && (known == 0 || !numel.is_multiple_of(known)) {
            return err(format!("cannot infer -1 in {shape:?}"));
        }
        let new: Vec<usize> = shape.iter().map(|&d| if d == -1 { numel / known } else { d as usize }).collect();
        if new.iter().product::<usize>() != numel {
            return err(format!("{new:?} differs in size"));
        }
        if new == old {
            return Ok(self.clone());
        }
        if let Some(sym) = self.uop().sym_dims() {
            return Ok(self.sym_movement(Ops::Reshape, Arg::Shape(new.clone()), carry_sym_dims(&old, sym, &new)?));
        }
        Ok(self.movement(Ops::Reshape, Arg::Shape(new)))
    }
    /// A RESHAPE or EXPAND to `shape` whose symbolic sizes are `sym`.
    fn sym_movement(&self, op: Ops, shape: Arg, sym: Vec<Option<UOp>>) -> Tensor {
        let Arg::Shape(bounds) = &shape else { unreachable!("reshape and expand take a shape") };
        let dims = sym.into_iter().zip(bounds).map(|(s, &d)| s.unwrap_or_else(|| UOp::index_const(d as i64)));
        let u = self.uop();
        self.lift(UOp::new(op, u.dtype(), std::iter::once(u.clone()).chain(dims).collect(), shape))
    }
    /// Broadcast size-1 dimensions to `shape`, whose sizes may be symbolic (same rank).
    pub fn expand_sym(&self, shape: &[Sint]) -> Tensor {
        self.try_expand_sym(shape).or_panic()
    }
    /// `expand_sym`, reporting sizes it cannot expand to as an error.
    pub fn try_expand_sym(&self, shape: &[Sint]) -> Result<Tensor> {
        let old = self.dims();
        let bounds: Vec<usize> = shape.iter().map(Sint::max).collect();
        ensure(old.len() == shape.len() && old.iter().zip(shape).all(|(o, n)| o == n || *o == Sint::Int(1)), || {
            Error::shape("expand", &[&self.shape(), &bounds], format!("cannot expand to {}", show_dims(shape)))
        })?;
        if shape.iter().all(|d| d.as_int().is_some()) {
            return self.try_expand(&bounds);
        }
        super::checked_numel("expand", &bounds, self.dtype())?;
        let sym = shape.iter().map(|d| d.as_int().is_none().then(|| d.uop())).collect();
        Ok(self.sym_movement(Ops::Expand, Arg::Shape(bounds), sym))
    }
    /// Keep `[start, end)` of each axis, where the bounds may be symbolic: `end - start` becomes
    /// the axis' size (its shape holds the largest) and `start` an offset computed when it runs.
    /// An axis of symbolic size is kept whole, or cut to numbers within the size its variables
    /// are bound to now (`t[:i.bind(5)][:2]`).
    pub fn shrink_sym(&self, bounds: &[(Sint, Sint)]) -> Tensor {
        self.try_shrink_sym(bounds).or_panic()
    }
    /// `shrink_sym`, reporting bounds that do not fit as an error.
    pub fn try_shrink_sym(&self, bounds: &[(Sint, Sint)]) -> Result<Tensor> {
        let shape = self.shape();
        let dims = self.dims();
        let length = |(s, e): &(Sint, Sint)| length(&s.uop(), &e.uop());
        let numbers = |(s, e): &(Sint, Sint)| s.as_int().zip(e.as_int());
        let fits = bounds.len() == shape.len()
            && bounds.iter().zip(&dims).all(|(b, d)| {
                let whole = b.0.as_int() == Some(0) && b.1 == *d;
                let numeric = d.as_int().is_some() && b.1.max() <= d.max() && length(b).vmin() >= 0;
                let within_bound = d.as_int().is_none() && numbers(b).is_some_and(|(s, e)| s <= e && e <= d.value());
                whole || numeric || within_bound
            });
        let shown: Vec<String> = bounds.iter().map(|(s, e)| format!("({s}, {e})")).collect();
        ensure(fits, || {
            Error::shape("shrink", &[&shape], format!("bounds [{}] do not fit {}", shown.join(", "), show_dims(&dims)))
        })?;
        // a symbolic axis cut to numbers: the other axes first, then these picked out
        let picked: Vec<(usize, (usize, usize))> = (0..dims.len())
            .filter(|&a| dims[a].as_int().is_none() && bounds[a].1 != dims[a])
            .filter_map(|a| numbers(&bounds[a]).map(|b| (a, b)))
            .collect();
        if !picked.is_empty() {
            let mut rest = bounds.to_vec();
            picked.iter().for_each(|&(a, _)| rest[a] = (Sint::Int(0), dims[a].clone()));
            let kept = self.try_shrink_sym(&rest)?;
            return Ok(picked.iter().fold(kept, |x, &(a, b)| x.pick_from_symbolic(a, b)));
        }
        if bounds.iter().all(|b| numbers(b).is_some()) {
            let fixed: Vec<(usize, usize)> = bounds.iter().map(|(s, e)| (s.max(), e.max())).collect();
            return self.try_shrink(&fixed);
        }
        let bounds: Vec<(UOp, UOp)> = bounds.iter().map(|(s, e)| (s.uop(), e.uop())).collect();
        Ok(self.lift(symbolic_shrink(&self.uop(), &bounds)))
    }
    /// Elements `[start, end)` of `axis`, whose size is symbolic, as an axis of that number of
    /// elements: each picked by a one-hot sum over the axis (a SHRINK would keep the variable as
    /// the axis' size).
    fn pick_from_symbolic(&self, axis: usize, (start, end): (usize, usize)) -> Tensor {
        let (shape, dims, n) = (self.shape(), self.dims(), end - start);
        let at = |len: usize, axis: usize| -> Vec<usize> {
            (0..=shape.len()).map(|i| if i == axis { len } else { 1 }).collect()
        };
        // the positions along the axis (symbolic), and the n wanted (numbers), on axes axis and axis + 1
        let positions = self.ramp(shape[axis]).shrink_sym(&[(Sint::Int(0), dims[axis].clone())]);
        let positions = positions.reshape(&at(shape[axis], axis));
        let wanted = self.ramp(n).add(start as i64).reshape(&at(n, axis + 1));
        let x = self.unsqueeze(axis as isize + 1);
        let zero = x.const_tensor(Scalar::Int(0), x.dtype());
        positions.eq(&wanted).where_(&x, &zero).sum(axis as isize, false).cast(self.dtype())
    }
    /// `Err` (naming `op`) if any of `axes` has a symbolic size.
    fn numeric_axes(&self, op: &'static str, axes: impl IntoIterator<Item = usize>) -> Result<()> {
        let u = self.uop();
        let Some(sym) = u.sym_dims() else { return Ok(()) };
        match axes.into_iter().find(|&a| sym[a].is_some()) {
            Some(a) => {
                Err(Error::shape(op, &[&self.shape()], format!("axis {a} of {} is symbolic", show_dims(&self.dims()))))
            }
            None => Ok(()),
        }
    }
    /// Broadcast size-1 dimensions to `shape` (same rank).
    pub fn expand(&self, shape: &[usize]) -> Tensor {
        self.try_expand(shape).or_panic()
    }
    /// `expand`, reporting a shape it cannot expand to as an error.
    pub fn try_expand(&self, shape: &[usize]) -> Result<Tensor> {
        let old = self.shape();
        ensure(old.len() == shape.len() && old.iter().zip(shape).all(|(&o, &n)| o == n || o == 1), || {
            Error::shape("expand", &[&old, shape], "cannot expand the first to the second")
        })?;
        if old == shape {
            return Ok(self.clone());
        }
        super::checked_numel("expand", shape, self.dtype())?;
        Ok(self.movement(Ops::Expand, Arg::Shape(shape.to_vec())))
    }
    /// Reorder the axes: output axis `i` is input axis `order[i]`.
    pub fn permute(&self, order: &[isize]) -> Tensor {
        self.try_permute(order).or_panic()
    }
    /// `permute`, reporting an order that is no permutation of the axes as an error.
    pub fn try_permute(&self, order: &[isize]) -> Result<Tensor> {
        let shape = self.shape();
        let order: Vec<usize> =
            order.iter().map(|&a| resolve_axis("permute", a, shape.len(), &shape)).collect::<Result<_>>()?;
        let mut sorted = order.clone();
        sorted.sort();
        ensure(sorted == (0..shape.len()).collect::<Vec<_>>(), || {
            Error::shape("permute", &[&shape], format!("{order:?} is not a permutation of the axes"))
        })?;
        if order.iter().enumerate().all(|(i, &o)| i == o) {
            return Ok(self.clone());
        }
        // moving only axes of size 1 keeps the elements in order: a reshape (not for a variable
        // axis at most 1 long, which a reshape may not move)
        let dims = self.dims();
        let moved: Vec<usize> = order.iter().copied().filter(|&a| dims[a] != Sint::Int(1)).collect();
        if moved.windows(2).all(|w| w[0] < w[1]) {
            return self.try_reshape(&order.iter().map(|&a| shape[a]).collect::<Vec<_>>());
        }
        Ok(self.movement(Ops::Permute, Arg::Axes(order)))
    }
    /// Pad each axis with `(before, after)` zeros.
    pub fn pad(&self, pads: &[(usize, usize)]) -> Tensor {
        self.try_pad(pads).or_panic()
    }
    /// `pad`, reporting pads that do not fit the shape as an error.
    pub fn try_pad(&self, pads: &[(usize, usize)]) -> Result<Tensor> {
        let shape = self.shape();
        ensure(pads.len() == shape.len(), || Error::shape("pad", &[&shape], format!("{} pairs of pads", pads.len())))?;
        if pads.iter().all(|&p| p == (0, 0)) {
            return Ok(self.clone());
        }
        self.numeric_axes("pad", (0..pads.len()).filter(|&a| pads[a] != (0, 0)))?;
        let padded: Option<Vec<usize>> =
            shape.iter().zip(pads).map(|(&s, &(b, a))| s.checked_add(b)?.checked_add(a)).collect();
        let padded = padded.ok_or_else(|| Error::shape("pad", &[&shape], format!("pads {pads:?} overflow")))?;
        super::checked_numel("pad", &padded, self.dtype())?;
        Ok(self.movement(Ops::Pad, Arg::Pairs(pads.to_vec())))
    }
    /// Keep `[start, end)` of each axis.
    pub fn shrink(&self, bounds: &[(usize, usize)]) -> Tensor {
        self.try_shrink(bounds).or_panic()
    }
    /// `shrink`, reporting bounds that do not fit the shape as an error.
    pub fn try_shrink(&self, bounds: &[(usize, usize)]) -> Result<Tensor> {
        let shape = self.shape();
        ensure(bounds.len() == shape.len() && bounds.iter().zip(&shape).all(|(&(s, e), &d)| s <= e && e <= d), || {
            Error::shape("shrink", &[&shape], format!("bounds {bounds:?} do not fit"))
        })?;
        if bounds.iter().zip(&shape).all(|(&(s, e), &d)| s == 0 && e == d) {
            return Ok(self.clone());
        }
        self.numeric_axes("shrink", (0..bounds.len()).filter(|&a| bounds[a] != (0, shape[a])))?;
        Ok(self.movement(Ops::Shrink, Arg::Pairs(bounds.to_vec())))
    }
    /// Reverse the given axes (each at most once).
    pub fn flip(&self, axes: &[isize]) -> Tensor {
        self.try_flip(axes).or_panic()
    }
    /// `flip`, reporting a bad or repeated axis as an error.
    pub fn try_flip(&self, axes: &[isize]) -> Result<Tensor> {
        let shape = self.shape();
        let mut axes: Vec<usize> =
            axes.iter().map(|&a| resolve_axis("flip", a, shape.len(), &shape)).collect::<Result<_>>()?;
        axes.sort();
        ensure(axes.windows(2).all(|w| w[0] != w[1]), || {
            Error::shape("flip", &[&shape], format!("an axis is given twice in {axes:?}"))
        })?;
        axes.retain(|&a| shape.get(a).is_some_and(|&n| n > 1)); // flipping 0 or 1 elements changes nothing
        if axes.is_empty() {
            return Ok(self.clone());
        }
        self.numeric_axes("flip", axes.iter().copied())?;
        Ok(self.movement(Ops::Flip, Arg::Axes(axes)))
    }
    /// Swap two axes.
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        self.try_transpose(a, b).or_panic()
    }
    /// `transpose`, reporting a bad axis as an error.
    pub fn try_transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        let shape = self.shape();
        let (a, b) =
            (resolve_axis("transpose", a, shape.len(), &shape)?, resolve_axis("transpose", b, shape.len(), &shape)?);
        if shape.is_empty() {
            return Ok(self.clone());
        }
        let mut order: Vec<isize> = (0..shape.len() as isize).collect();
        order.swap(a, b);
        self.try_permute(&order)
    }
    /// The matrix transpose (last two axes swapped); tinygrad's `.T`.
    #[allow(non_snake_case)]
    pub fn T(&self) -> Tensor {
        self.transpose(-2, -1)
    }
    /// Merge axes `start..=end` into one.
    pub fn flatten(&self, start: isize, end: isize) -> Tensor {
        self.try_flatten(start, end).or_panic()
    }
    /// `flatten`, reporting bad or misordered axes as an error.
    pub fn try_flatten(&self, start: isize, end: isize) -> Result<Tensor> {
        let shape = self.shape();
        if shape.is_empty() {
            return self.try_reshape(&[1]);
        }
        let (s, e) =
            (resolve_axis("flatten", start, shape.len(), &shape)?, resolve_axis("flatten", end, shape.len(), &shape)?);
        ensure(s <= e, || {
            Error::shape("flatten", &[&shape], format!("start axis {start} comes after end axis {end}"))
        })?;
        let mut new: Vec<isize> = shape[..s].iter().map(|&d| d as isize).collect();
        new.push(shape[s..=e].iter().product::<usize>() as isize);
        new.extend(shape[e + 1..].iter().map(|&d| d as isize));
        self.try_reshape(&new)
    }
    /// Remove axis `axis` if it has size 1 (`None`: every size-1 axis). A variable axis stays,
    /// whatever its largest size.
    pub fn squeeze(&self, axis: Option<isize>) -> Tensor {
        self.try_squeeze(axis).or_panic()
    }
    /// `squeeze`, reporting a bad axis as an error.
    pub fn try_squeeze(&self, axis: Option<isize>) -> Result<Tensor> {
        let (shape, dims) = (self.shape(), self.dims());
        let axis = axis.map(|a| resolve_axis("squeeze", a, shape.len(), &shape)).transpose()?;
        let kept: Vec<usize> =
            (0..shape.len()).filter(|&i| dims[i] != Sint::Int(1) || axis.is_some_and(|a| a != i)).collect();
        Ok(self.keep_axes(kept.iter().map(|&i| Some(i)).collect()))
    }
    /// Insert a size-1 axis at `axis`.
    pub fn unsqueeze(&self, axis: isize) -> Tensor {
        self.try_unsqueeze(axis).or_panic()
    }
    /// `unsqueeze`, reporting a bad axis as an error.
    pub fn try_unsqueeze(&self, axis: isize) -> Result<Tensor> {
        let shape = self.shape();
        let a = resolve_axis("unsqueeze", axis, shape.len() + 1, &shape)?;
        let mut axes: Vec<Option<usize>> = (0..shape.len()).map(Some).collect();
        axes.insert(a, None);
        Ok(self.keep_axes(axes))
    }
    /// A reshape to this tensor's axes `axes` in order (each of them, or `None` for a new one of
    /// size 1, and leaving out only axes of size 1), carrying each variable size with its axis:
    /// a reshape alone cannot tell which of several axes of size 1 a variable one went to.
    pub(super) fn keep_axes(&self, axes: Vec<Option<usize>>) -> Tensor {
        let shape = self.shape();
        if axes.len() == shape.len() && axes.iter().enumerate().all(|(i, a)| *a == Some(i)) {
            return self.clone();
        }
        let new: Vec<usize> = axes.iter().map(|a| a.map_or(1, |a| shape[a])).collect();
        match self.uop().sym_dims() {
            Some(sym) => {
                let sym = axes.iter().map(|a| a.and_then(|a| sym[a].clone())).collect();
                self.sym_movement(Ops::Reshape, Arg::Shape(new), sym)
            }
            None => self.reshape(&new),
        }
    }
    /// tinygrad's `pad_to`: each axis padded at its end to the size `shape` gives (`None` keeps
    /// it), filled with `value`; `shape` has one entry per axis and none may be smaller.
    pub fn pad_to(&self, shape: &[Option<usize>], value: impl Into<Scalar>) -> Tensor {
        self.try_pad_to(shape, value).or_panic()
    }
    /// `pad_to`, reporting sizes that do not fit as an error.
    pub fn try_pad_to(&self, shape: &[Option<usize>], value: impl Into<Scalar>) -> Result<Tensor> {
        let old = self.shape();
        ensure(shape.len() == old.len() && shape.iter().zip(&old).all(|(n, &o)| n.is_none_or(|n| n >= o)), || {
            Error::shape("pad_to", &[&old], format!("{shape:?} is not a size at least as large for each axis"))
        })?;
        let pads: Vec<(isize, isize)> =
            shape.iter().zip(&old).map(|(n, &o)| (0, (n.unwrap_or(o) - o) as isize)).collect();
        self.try_pad_with(&pads, PadMode::Constant, value)
    }
    /// tinygrad's `shrink_to`: the first `shape[i]` elements of each axis (`None` keeps it);
    /// `shape` has one entry per axis.
    pub fn shrink_to(&self, shape: &[Option<usize>]) -> Tensor {
        self.try_shrink_to(shape).or_panic()
    }
    /// `shrink_to`, reporting sizes that do not fit as an error.
    pub fn try_shrink_to(&self, shape: &[Option<usize>]) -> Result<Tensor> {
        let old = self.shape();
        ensure(shape.len() == old.len(), || {
            Error::shape("shrink_to", &[&old], format!("{shape:?} has not one size for each axis"))
        })?;
        let bounds: Vec<(usize, usize)> = shape.iter().zip(&old).map(|(n, &o)| (0, n.unwrap_or(o))).collect();
        self.try_shrink(&bounds)
    }
    /// Force the data into its own contiguous buffer at the next realize.
    pub fn contiguous(&self) -> Tensor {
        // a fresh id per call: two tensors made contiguous separately never share storage, so
        // assigning into one can't change the other
        static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
        self.movement(Ops::Contiguous, Arg::Int(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
    }

    /// Keep `[start, end)` of axis `dim` only.
    pub(crate) fn shrink_dim(&self, dim: usize, (start, end): (usize, usize)) -> Tensor {
        let mut bounds: Vec<(usize, usize)> = self.shape().iter().map(|&d| (0, d)).collect();
        bounds[dim] = (start, end);
        self.shrink(&bounds)
    }
    /// Zero-pad axis `dim` only, with `(before, after)`.
    pub(crate) fn pad_dim(&self, dim: usize, pad: (usize, usize)) -> Tensor {
        let mut pads = vec![(0, 0); self.ndim()];
        pads[dim] = pad;
        self.pad(&pads)
    }
    /// A `true` mask of this tensor's shape.
    pub(crate) fn ones_mask(&self) -> Tensor {
        self.const_tensor(Scalar::Bool(true), DType::BOOL).expand(&self.shape())
    }

    /// Pad each axis by `(before, after)` (negative values crop) with `mode`; `value` is used by `Constant`.
    pub fn pad_with(&self, pads: &[(isize, isize)], mode: PadMode, value: impl Into<Scalar>) -> Tensor {
        self.try_pad_with(pads, mode, value).or_panic()
    }
    /// `pad_with`, reporting pads that do not fit the shape or the mode as an error.
    pub fn try_pad_with(&self, pads: &[(isize, isize)], mode: PadMode, value: impl Into<Scalar>) -> Result<Tensor> {
        let shape = self.shape();
        let bad = |reason: String| Err(Error::shape("pad_with", &[&shape], reason));
        if pads.len() != shape.len() {
            return bad(format!("{} pairs of pads", pads.len()));
        }
        let crop = |x: &Tensor| {
            let bounds: Vec<(isize, isize)> =
                pads.iter().zip(x.shape()).map(|(&(b, a), s)| ((-b).max(0), s as isize + a.min(0))).collect();
            ensure(bounds.iter().all(|&(s, e)| s <= e), || {
                Error::shape("pad_with", &[&shape], format!("pads {pads:?} crop more than the shape"))
            })?;
            x.try_shrink(&bounds.iter().map(|&(s, e)| (s as usize, e as usize)).collect::<Vec<_>>())
        };
        let pos: Vec<(usize, usize)> = pads.iter().map(|&(b, a)| (b.max(0) as usize, a.max(0) as usize)).collect();
        match mode {
            PadMode::Constant => {
                let (x, v) = (crop(self)?, value.into());
                if x.numel() == 0 {
                    let out: Vec<usize> = x.shape().iter().zip(&pos).map(|(s, (b, a))| s + b + a).collect();
                    return x.const_tensor(v, x.dtype()).try_expand(&out);
                }
                let base = x.try_pad(&pos)?;
                if matches!(v, Scalar::Int(0) | Scalar::Bool(false))
                    || matches!(v, Scalar::Float(f) if f.to_bits() == 0)
                {
                    return Ok(base);
                }
                Ok(x.ones_mask().pad(&pos).where_(&base, x.const_tensor(v, x.dtype())))
            }
            PadMode::Circular => {
                let x = crop(self)?;
                let xs = x.shape();
                if !pos.iter().zip(&xs).all(|(&(b, a), &s)| b <= s && a <= s) {
                    return bad(format!("circular pads {pads:?} wrap more than once around the cropped {xs:?}"));
                }
                let reps: Vec<usize> = pos.iter().map(|&(b, a)| 1 + usize::from(b > 0) + usize::from(a > 0)).collect();
                let r = x.try_repeat(&reps)?;
                let bounds = pos
                    .iter()
                    .zip(xs.iter().zip(r.shape()))
                    .map(|(&(b, a), (&s, rs))| (if b == 0 { 0 } else { s - b }, if a == 0 { rs } else { rs - s + a }));
                r.try_shrink(&bounds.collect::<Vec<_>>())
            }
            PadMode::Reflect | PadMode::Replicate => {
                let mut x = self.clone();
                for (d, &(b, a)) in pos.iter().enumerate().filter(|(_, &p)| p != (0, 0)) {
                    let s = shape[d];
                    let (before, after) = if mode == PadMode::Reflect {
                        if b >= s || a >= s {
                            return bad(format!("reflect pads {pads:?} must be smaller than the shape"));
                        }
                        (
                            x.shrink_dim(d, (1, b + 1)).flip(&[d as isize]),
                            x.shrink_dim(d, (s - 1 - a, s - 1)).flip(&[d as isize]),
                        )
                    } else {
                        if s == 0 {
                            return bad(format!("cannot replicate-pad empty axis {d}"));
                        }
                        (
                            x.shrink_dim(d, (0, 1)).try_expand(&with_dim(&x.shape(), d, b))?,
                            x.shrink_dim(d, (s - 1, s)).try_expand(&with_dim(&x.shape(), d, a))?,
                        )
                    };
                    x = Tensor::try_cat(&[&before, &x, &after], d as isize)?;
                }
                crop(&x)
            }
        }
    }

    /// Split axis `dim` into `sizes` (one may be `-1`); the inverse of `flatten`.
    pub fn unflatten(&self, dim: isize, sizes: &[isize]) -> Tensor {
        self.try_unflatten(dim, sizes).or_panic()
    }
    /// `unflatten`, reporting a bad axis or sizes that do not fill it as an error.
    pub fn try_unflatten(&self, dim: isize, sizes: &[isize]) -> Result<Tensor> {
        let shape = self.shape();
        let d = resolve_axis("unflatten", dim, shape.len(), &shape)?;
        at_least_1d("unflatten", &shape)?;
        let mut new: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
        new.splice(d..=d, sizes.iter().copied());
        self.try_reshape(&new)
            .map_err(|_| Error::shape("unflatten", &[&shape], format!("axis {d} does not split into sizes {sizes:?}")))
    }
    /// Tile the tensor `repeats[i]` times along axis `i` (`repeats` may add leading axes).
    pub fn repeat(&self, repeats: &[usize]) -> Tensor {
        self.try_repeat(repeats).or_panic()
    }
    /// `repeat`, reporting too few repeats or a result too large as an error.
    pub fn try_repeat(&self, repeats: &[usize]) -> Result<Tensor> {
        let shape = self.shape();
        ensure(repeats.len() >= shape.len(), || {
            Error::shape("repeat", &[&shape], format!("{repeats:?} has fewer entries than the shape"))
        })?;
        let base: Vec<usize> = [vec![1; repeats.len() - shape.len()], shape].concat();
        let unsq: Vec<usize> =
            base.iter().zip(repeats).flat_map(|(&s, &r)| if r == 1 { vec![s] } else { vec![1, s] }).collect();
        let exp: Vec<usize> =
            base.iter().zip(repeats).flat_map(|(&s, &r)| if r == 1 { vec![s] } else { vec![r, s] }).collect();
        let fin: Vec<usize> = base.iter().zip(repeats).map(|(&s, &r)| s * r).collect();
        self.try_reshape(&unsq)?.try_expand(&exp)?.try_reshape(&fin)
    }
    /// Repeat each element `repeats` times along `dim` (`None`: of the flattened tensor).
    pub fn repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> Tensor {
        self.try_repeat_interleave(repeats, dim).or_panic()
    }
    /// `repeat_interleave`, reporting a bad axis or a result too large as an error.
    pub fn try_repeat_interleave(&self, repeats: usize, dim: Option<isize>) -> Result<Tensor> {
        let (x, d) = match dim {
            Some(d) if self.ndim() > 0 => {
                (self.clone(), resolve_axis("repeat_interleave", d, self.ndim(), &self.shape())?)
            }
            Some(d) => (self.reshape(&[1]), resolve_axis("repeat_interleave", d, 0, &[])?),
            None => (self.flatten(0, -1), 0),
        };
        let shape = x.shape();
        let mut unsq = shape.clone();
        unsq.insert(d + 1, 1);
        let mut exp = shape.clone();
        exp.insert(d + 1, repeats);
        x.reshape(&unsq).try_expand(&exp)?.try_reshape(&with_dim(&shape, d, shape[d] * repeats))
    }
    /// Shift elements circularly by `shifts[i]` along `dims[i]` (empty `dims`: over the flattened tensor).
    pub fn roll(&self, shifts: &[isize], dims: &[isize]) -> Tensor {
        self.try_roll(shifts, dims).or_panic()
    }
    /// `roll`, reporting bad axes or a shift per axis missing as an error.
    pub fn try_roll(&self, shifts: &[isize], dims: &[isize]) -> Result<Tensor> {
        let shape = self.shape();
        if dims.is_empty() {
            ensure(shifts.len() == 1, || {
                Error::value("roll", format!("without dims give exactly one shift, got {shifts:?}"))
            })?;
            return self.flatten(0, -1).try_roll(shifts, &[0])?.try_reshape(&shape);
        }
        ensure(shifts.len() == dims.len(), || {
            Error::value("roll", format!("{shifts:?} and dims {dims:?} differ in length"))
        })?;
        let dims: Vec<usize> =
            dims.iter().map(|&d| resolve_axis("roll", d, shape.len(), &shape)).collect::<Result<_>>()?;
        if shape.is_empty() || shape.contains(&0) {
            return Ok(self.clone());
        }
        let mut reps = vec![1; shape.len()];
        let mut bounds: Vec<(usize, usize)> = shape.iter().map(|&s| (0, s)).collect();
        for (&s, &d) in shifts.iter().zip(&dims) {
            let delta = shape[d] - s.rem_euclid(shape[d] as isize) as usize;
            (reps[d], bounds[d]) = (2, (delta, delta + shape[d]));
        }
        Ok(self.repeat(&reps).shrink(&bounds))
    }
    /// Sliding windows of `size` every `step` along `dim`: that axis becomes (windows), a new last axis (size).
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Tensor {
        self.try_unfold(dim, size, step).or_panic()
    }
    /// `unfold`, reporting a bad axis or windows that do not fit it as an error.
    pub fn try_unfold(&self, dim: isize, size: usize, step: usize) -> Result<Tensor> {
        let shape = self.shape();
        let d = resolve_axis("unfold", dim, shape.len(), &shape)?;
        at_least_1d("unfold", &shape)?;
        ensure(step > 0 && size <= shape[d], || {
            Error::shape("unfold", &[&shape], format!("size {size} step {step} do not fit axis {d}"))
        })?;
        let mut perm: Vec<isize> = (0..shape.len() as isize).filter(|&i| i != d as isize).collect();
        perm.push(d as isize);
        let mut back: Vec<isize> =
            (0..shape.len() as isize).map(|i| perm.iter().position(|&p| p == i).unwrap() as isize).collect();
        back.push(shape.len() as isize);
        let x = self.permute(&perm);
        let (n, k) = (shape[d], size);
        let o = (n - k) / step + 1;
        let lead = &x.shape()[..shape.len() - 1];
        let out: Vec<usize> = [lead, &[o, k]].concat();
        if out.contains(&0) {
            return Ok(x.shrink_dim(shape.len() - 1, (0, 0)).reshape(&out).permute(&back));
        }
        // repeat the row so that window w, offset j sits at flat position j*(n*f+1) + w*step (no padding needed)
        let f = (o * step - 1).div_ceil(n).max(1);
        let l = n * f + 1;
        let reps: Vec<usize> = [vec![1; lead.len()], vec![(k * l).div_ceil(n)]].concat();
        let x = x.repeat(&reps).shrink_dim(lead.len(), (0, k * l)).reshape(&[lead, &[k, l]].concat());
        let x = x.shrink_dim(lead.len() + 1, (0, o * step)).reshape(&[lead, &[k, o, step]].concat());
        let x = x.shrink_dim(lead.len() + 2, (0, 1)).reshape(&[lead, &[k, o]].concat());
        Ok(x.transpose(-1, -2).permute(&back))
    }
    /// A square matrix with this 1-D tensor on its diagonal.
    pub fn diag(&self) -> Tensor {
        self.try_diag().or_panic()
    }
    /// `diag`, reporting a tensor that is not 1-D as an error.
    pub fn try_diag(&self) -> Result<Tensor> {
        let shape = self.shape();
        ensure(shape.len() == 1, || Error::shape("diag", &[&shape], "expected a 1-D tensor"))?;
        let n = shape[0];
        self.unsqueeze(-1).pad(&[(0, 0), (0, n)]).flatten(0, -1).shrink(&[(0, n * n)]).try_reshape(&[n, n])
    }
    /// The diagonal of axes `dim1`, `dim2` (above it for `offset > 0`), as a new last axis.
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Tensor {
        self.try_diagonal(offset, dim1, dim2).or_panic()
    }
    /// `diagonal`, reporting bad or equal axes as an error.
    pub fn try_diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Tensor> {
        let shape = self.shape();
        let (a, b) = (
            resolve_axis("diagonal", dim1, shape.len(), &shape)?,
            resolve_axis("diagonal", dim2, shape.len(), &shape)?,
        );
        ensure(a != b, || Error::shape("diagonal", &[&shape], format!("dim1 and dim2 are both axis {a}")))?;
        let mut perm: Vec<isize> = (0..shape.len()).filter(|&i| i != a && i != b).map(|i| i as isize).collect();
        perm.extend([a as isize, b as isize]);
        let x = self.permute(&perm);
        let r = x.ndim();
        let (rows, cols) = (shape[a], shape[b]);
        let x = match offset {
            o if o >= 0 => x.shrink_dim(r - 1, ((o as usize).min(cols), cols)),
            o => x.shrink_dim(r - 2, (((-o) as usize).min(rows), rows)),
        };
        let xs = x.shape();
        let lead = &xs[..r - 2];
        let d = xs[r - 2].min(xs[r - 1]);
        let x = x.shrink_dim(r - 2, (0, d)).shrink_dim(r - 1, (0, d)).flatten(-2, -1);
        Ok(x.pad_dim(r - 2, (0, d))
            .reshape(&[lead, &[d, d + 1]].concat())
            .shrink_dim(r - 1, (0, 1))
            .reshape(&[lead, &[d]].concat()))
    }
}

/// `dims` as a shape in a message: `[4, (pos+1), 64]`.
pub(crate) fn show_dims(dims: &[Sint]) -> String {
    let shown: Vec<String> = dims.iter().map(Sint::to_string).collect();
    format!("[{}]", shown.join(", "))
}

/// The symbolic sizes of a reshape from `old` (symbolic where `sym` says) to `new`: each symbolic
/// axis must stay one axis, with the same elements before it (unit axes may come and go around
/// it, and numeric axes merge and split).
fn carry_sym_dims(old: &[usize], sym: &[Option<UOp>], new: &[usize]) -> Result<Vec<Option<UOp>>> {
    let before = |shape: &[usize], a: usize| shape[..a].iter().product::<usize>();
    let mut out = vec![None; new.len()];
    for (a, s) in sym.iter().enumerate() {
        let Some(s) = s else { continue };
        let Some(j) = (0..new.len()).find(|&j| new[j] == old[a] && before(new, j) == before(old, a)) else {
            return Err(Error::shape(
                "reshape",
                &[old, new],
                format!("merges or splits symbolic axis {a} ({})", Sint::Sym(s.clone())),
            ));
        };
        out[j] = Some(s.clone());
    }
    Ok(out)
}
