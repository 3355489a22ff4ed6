//! Indexing: numpy-style `index`/`set` with ranges, steps, new axes and integer tensors, and the ops built
//! on one-hot masks (`gather`, `scatter`, `one_hot`) or index comparisons (`tril`, `triu`, `masked_fill`).
//! No gather kernel: a tensor index becomes `where(index == arange, x, 0).sum()`, which fuses.

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

pub use super::join::SplitSizes;
pub use super::movement::PadMode;

use super::elementwise::{broadcast_shape, Operand, Scalar};
use super::movement::resolve_axis;
use super::{check_devices, Tensor};
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::runtime::DefaultDevice;

/// How `scatter_reduce` combines the values landing on one position (tinygrad's and torch's
/// `reduce` names: "sum", "prod", "mean", "amax", "amin"; `scatter`'s "add" and "multiply" are
/// `Sum` and `Prod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    Sum,
    Prod,
    Mean,
    Amax,
    Amin,
}

/// One entry of an index: `I` selects (and drops) a position, `R(start, stop, step)` is a Python slice,
/// `Full` is `:`, `NewAxis` is `None`, `Ellipsis` is `...`, `Tensor` is an integer-tensor (fancy) index.
#[derive(Clone, Debug)]
pub enum Idx {
    I(isize),
    R(Option<isize>, Option<isize>, isize),
    Full,
    NewAxis,
    Ellipsis,
    Tensor(Tensor),
}

/// `Err` (naming `op`) unless every value of integer tensor `index` lies in `range` or is `skip`
/// (an ignored label). The one-hot comparisons these ops are built on would read 0 for an index
/// outside or drop it; PyTorch raises, and so does this. The index is read on the host
/// (computed first if it is lazy).
pub(super) fn check_indices(op: &'static str, index: &Tensor, range: Range<i64>, skip: Option<i64>) -> Result<()> {
    let dtype = index.dtype();
    let bytes = index.raw_bytes()?;
    let values = bytes.chunks_exact(dtype.itemsize()).map(|c| {
        let mut le = [0u8; 16];
        le[..c.len()].copy_from_slice(c);
        let raw = i128::from_le_bytes(le);
        let unused = 128 - dtype.bits();
        match dtype.is_signed() {
            true => raw << unused >> unused,
            false => raw,
        }
    });
    let inside = |v: &i128| (range.start as i128..range.end as i128).contains(v) || skip.map(i128::from) == Some(*v);
    match values.into_iter().find(|v| !inside(v)) {
        None => Ok(()),
        Some(v) => Err(Error::Index {
            op,
            shape: index.shape(),
            reason: format!(
                "index {v} is out of range {}..{} (the shape is the index tensor's)",
                range.start, range.end
            ),
        }),
    }
}

impl Idx {
    /// This range (or `Full`) with step `step`; `s![a..b; step]` calls it.
    pub fn step(self, step: isize) -> Idx {
        match self {
            Idx::R(a, b, _) => Idx::R(a, b, step),
            Idx::Full => Idx::R(None, None, step),
            other => panic!("Idx::step: {other:?} is not a range"),
        }
    }
}

macro_rules! idx_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Idx {
            fn from(i: $t) -> Idx {
                Idx::I(i as isize)
            }
        }
        impl From<Range<$t>> for Idx {
            fn from(r: Range<$t>) -> Idx {
                Idx::R(Some(r.start as isize), Some(r.end as isize), 1)
            }
        }
        impl From<RangeFrom<$t>> for Idx {
            fn from(r: RangeFrom<$t>) -> Idx {
                Idx::R(Some(r.start as isize), None, 1)
            }
        }
        impl From<RangeTo<$t>> for Idx {
            fn from(r: RangeTo<$t>) -> Idx {
                Idx::R(None, Some(r.end as isize), 1)
            }
        }
        impl From<RangeInclusive<$t>> for Idx {
            fn from(r: RangeInclusive<$t>) -> Idx {
                let end = *r.end() as isize;
                Idx::R(Some(*r.start() as isize), if end == -1 { None } else { Some(end + 1) }, 1)
            }
        }
        impl From<RangeToInclusive<$t>> for Idx {
            fn from(r: RangeToInclusive<$t>) -> Idx {
                let end = r.end as isize;
                Idx::R(None, if end == -1 { None } else { Some(end + 1) }, 1)
            }
        }
    )*};
}
idx_from!(i32, i64, isize, usize);

impl From<RangeFull> for Idx {
    fn from(_: RangeFull) -> Idx {
        Idx::Full
    }
}
impl From<Tensor> for Idx {
    fn from(t: Tensor) -> Idx {
        Idx::Tensor(t)
    }
}
impl From<&Tensor> for Idx {
    fn from(t: &Tensor) -> Idx {
        Idx::Tensor(t.clone())
    }
}

/// An index list, numpy style: `t.index(&s![1, 2..;2, ..;-1, Idx::NewAxis, &idx_tensor])`.
#[macro_export]
macro_rules! s {
    (@one $e:expr $(; $step:expr)?) => {{
        // Python slices: `5..1;-1` is a valid reversed range here
        #[allow(clippy::reversed_empty_ranges)]
        let i = $crate::tensor::Idx::from($e);
        i $(.step($step))?
    }};
    ($($e:expr $(; $step:expr)?),* $(,)?) => { [$($crate::s!(@one $e $(; $step)?)),*] };
}

/// One parsed index entry: `[lo, hi)` of the input axis (size `n`) taken every `|stride|` (reversed if
/// negative), giving `size` elements; `collapse` drops the axis (integer index); `new` is an inserted axis.
struct View {
    n: usize,
    size: usize,
    lo: usize,
    hi: usize,
    stride: isize,
    collapse: bool,
    new: bool,
    tensor: Option<Tensor>,
}

/// An index with its basic part applied: the views, the viewed tensor, and the tensor-indexed axes of it.
struct Basic {
    views: Vec<View>,
    x: Tensor,
    dims: Vec<usize>,
    tensors: Vec<Tensor>,
}

/// Python's `slice.indices` turned into `(lo, hi, count)` of the elements a slice visits.
fn slice_bounds(start: Option<isize>, stop: Option<isize>, step: isize, n: usize) -> (usize, usize, usize) {
    let n = n as isize;
    let (lo, hi) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let norm = |v: isize| (if v < 0 { v + n } else { v }).clamp(lo, hi);
    let start = start.map_or(if step > 0 { 0 } else { n - 1 }, norm);
    let stop = stop.map_or(if step > 0 { n } else { -1 }, norm);
    let (a, b) = match () {
        _ if step * (stop - start) < 0 => (0, 0),
        _ if step < 0 => (stop + 1, start + 1),
        _ => (start, stop),
    };
    (a as usize, b as usize, ((b - a) as usize).div_ceil(step.unsigned_abs()))
}

/// `a & b` for bool tensors.
fn and(a: &Tensor, b: &Tensor) -> Tensor {
    a.where_(b, false)
}

impl Tensor {
    /// `0..n` (int32) on this tensor's device.
    fn arange_here(&self, n: usize) -> Tensor {
        let _g = DefaultDevice::scoped(self.device());
        Tensor::arange(n)
    }
    /// A zero of this tensor's dtype, broadcastable to it.
    fn zero(&self) -> Tensor {
        self.const_tensor(Scalar::Int(0), self.dtype())
    }

    fn parse_index(&self, idx: &[Idx]) -> Result<Vec<View>> {
        let shape = self.shape();
        let err = |reason: String| Err(Error::Index { op: "index", shape: shape.clone(), reason });
        let ellipses = idx.iter().filter(|i| matches!(i, Idx::Ellipsis)).count();
        let real = idx.len() - ellipses - idx.iter().filter(|i| matches!(i, Idx::NewAxis)).count();
        if ellipses > 1 {
            return err(format!("an index can only have a single ellipsis ('...'), got {ellipses}"));
        }
        if real > shape.len() {
            return err(format!("too many indices: {real} indices for {} dims", shape.len()));
        }
        let fill = idx.iter().position(|i| matches!(i, Idx::Ellipsis)).unwrap_or(idx.len());
        let full = vec![Idx::Full; shape.len() - real];
        let idx = idx[..fill].iter().chain(&full).chain(idx[fill..].iter().filter(|i| !matches!(i, Idx::Ellipsis)));
        let (mut out, mut dim) = (vec![], 0);
        for i in idx {
            let n = if matches!(i, Idx::NewAxis) { 1 } else { shape[dim] };
            let mut v = View { n, size: n, lo: 0, hi: n, stride: 1, collapse: false, new: false, tensor: None };
            match i {
                Idx::NewAxis => v.new = true,
                Idx::Full | Idx::Ellipsis => {}
                &Idx::I(k) => {
                    if k >= n as isize || k < -(n as isize) {
                        return err(format!("index {k} out of bounds for axis {dim} of size {n}"));
                    }
                    let b = if k < 0 { k + n as isize } else { k } as usize;
                    (v.lo, v.hi, v.size, v.collapse) = (b, b + 1, 1, true);
                }
                &Idx::R(start, stop, step) => {
                    if step == 0 {
                        return Err(Error::value("index", format!("slice step of 0 for axis {dim}")));
                    }
                    (v.lo, v.hi, v.size) = slice_bounds(start, stop, step, n);
                    v.stride = step;
                }
                Idx::Tensor(t) => {
                    if !t.dtype().is_int() || t.device() != self.device() {
                        return err(format!(
                            "tensors used as indices must be int tensors on {}, got {t:?}",
                            self.device()
                        ));
                    }
                    check_indices("index", t, -(n as i64)..n as i64, None)?;
                    v.tensor = Some(t.lt(0).where_(t.add(n), t));
                }
            }
            dim += usize::from(!v.new);
            out.push(v);
        }
        Ok(out)
    }

    /// Shrink, flip and stride `self` as the non-new `views` say.
    fn apply_views(&self, views: &[&View]) -> Tensor {
        let x = self.shrink(&views.iter().map(|v| (v.lo, v.hi)).collect::<Vec<_>>());
        let flips: Vec<isize> = (0..views.len()).filter(|&i| views[i].stride < 0).map(|i| i as isize).collect();
        let x = x.flip(&flips);
        let strides: Vec<usize> = views.iter().map(|v| v.stride.unsigned_abs()).collect();
        if strides.iter().all(|&s| s == 1) {
            return x;
        }
        // pad each axis to a multiple of its stride, split it into (count, stride) and keep column 0
        let shape = x.shape();
        let pads: Vec<(usize, usize)> =
            shape.iter().zip(&strides).map(|(&s, &st)| (0, s.next_multiple_of(st) - s)).collect();
        let split: Vec<usize> = shape.iter().zip(&strides).flat_map(|(&s, &st)| [s.div_ceil(st), st]).collect();
        let keep: Vec<(usize, usize)> = split.chunks(2).flat_map(|c| [(0, c[0]), (0, 1)]).collect();
        x.pad(&pads).reshape(&split).shrink(&keep).reshape(&views.iter().map(|v| v.size).collect::<Vec<_>>())
    }

    /// Tensor-index `x` (axes `dims` of it, by `tensors`) with one-hot masks. Returns the result, the mask
    /// (x's shape with the broadcast index shape inserted), where those index axes start, and their count.
    fn fancy(x: &Tensor, dims: &[usize], tensors: &[Tensor]) -> Result<(Tensor, Tensor, usize, usize)> {
        let shapes: Vec<Vec<usize>> = tensors.iter().map(|t| t.shape()).collect();
        let Some(big) = shapes.iter().try_fold(vec![], |acc, s| broadcast_shape(&acc, s)) else {
            let reason = format!("index tensors of shapes {shapes:?} do not broadcast");
            return Err(Error::Index { op: "index", shape: x.shape(), reason });
        };
        let (xs, d0, nb) = (x.shape(), dims[0], big.len());
        let pre: Vec<usize> = [&xs[..d0], &big, &xs[d0..]].concat();
        let mut mask: Option<Tensor> = None;
        for (&d, t) in dims.iter().zip(tensors) {
            let i = t.reshape(&[t.shape(), vec![1; xs.len() - d0]].concat()).broadcast_to(&pre);
            let m = i.eq(x.arange_here(xs[d]).reshape(&[vec![xs[d]], vec![1; xs.len() - d - 1]].concat()));
            mask = Some(mask.map_or(m.clone(), |a| and(&a, &m)));
        }
        let mask = mask.expect("at least one tensor index");
        let xr = x.reshape(&[&xs[..d0], &vec![1; nb], &xs[d0..]].concat());
        let axes: Vec<isize> = dims.iter().map(|&d| (d + nb) as isize).collect();
        let out = mask.where_(&xr, xr.zero()).sum(axes.as_slice(), false).cast(x.dtype());
        // separated index axes go first (numpy's rule)
        if d0 != 0 && dims.len() > 1 && dims.windows(2).any(|w| w[1] != w[0] + 1) {
            let perm =
                |n: usize| -> Vec<isize> { (d0..d0 + nb).chain(0..d0).chain(d0 + nb..n).map(|i| i as isize).collect() };
            return Ok((out.permute(&perm(out.ndim())), mask.permute(&perm(mask.ndim())), 0, nb));
        }
        Ok((out, mask, d0, nb))
    }

    /// Parse `idx` and apply its basic part: the views, the viewed tensor (new axes in, int-indexed axes out),
    /// and which of its axes tensor indices select, with those (normalized) tensors.
    fn basic_index(&self, idx: &[Idx]) -> Result<Basic> {
        let views = self.parse_index(idx)?;
        let x = self.apply_views(&views.iter().filter(|v| !v.new).collect::<Vec<_>>());
        let kept: Vec<&View> = views.iter().filter(|v| !v.collapse).collect();
        let x = x.reshape(&kept.iter().map(|v| v.size).collect::<Vec<_>>());
        let (dims, tensors) = kept.iter().enumerate().filter_map(|(d, v)| v.tensor.clone().map(|t| (d, t))).unzip();
        Ok(Basic { views, x, dims, tensors })
    }

    /// Numpy-style indexing: ranges with steps, negative indices, new axes, ellipsis, integer tensors.
    pub fn index(&self, idx: &[Idx]) -> Tensor {
        self.try_index(idx).or_panic()
    }
    /// `index`, reporting bad indices (out of bounds, zero step, too many, non-int tensors) as an error.
    pub fn try_index(&self, idx: &[Idx]) -> Result<Tensor> {
        let Basic { x, dims, tensors, .. } = self.basic_index(idx)?;
        if dims.is_empty() {
            return Ok(x);
        }
        Ok(Tensor::fancy(&x, &dims, &tensors)?.0)
    }

    /// A copy with `self.index(idx)` replaced by `value` (broadcast, cast to self's dtype); later duplicates win.
    pub fn set(&self, idx: &[Idx], value: impl Operand) -> Tensor {
        self.try_set(idx, value).or_panic()
    }
    /// `set`, reporting bad indices or a value that does not broadcast as an error.
    pub fn try_set(&self, idx: &[Idx], value: impl Operand) -> Result<Tensor> {
        let mut v = value.with(self).0.cast(self.dtype());
        let Basic { views, x, dims, tensors } = self.basic_index(idx)?;
        let mops: Vec<&View> = views.iter().filter(|v| !v.new).collect();
        let fancy = if dims.is_empty() { None } else { Some(Tensor::fancy(&x, &dims, &tensors)?) };
        let ts = fancy.as_ref().map_or(x.shape(), |f| f.0.shape());
        v = v.squeeze_leading_to(ts.len());
        let vs = v.shape();
        if broadcast_shape(&ts, &vs).as_deref() != Some(&ts[..]) {
            return Err(Error::shape("set", &[&vs, &ts], "the value does not broadcast to the indexed shape"));
        }
        let mut vb = v.broadcast_to(&ts);
        if let Some((_, mask, start, nb)) = fancy {
            // put the summed-away index axes back, then pick one value per target element
            if v.numel() != 1 {
                for &d in &dims {
                    vb = vb.unsqueeze((d + nb) as isize);
                }
            }
            vb = masked_merge(&x, if v.numel() == 1 { &v } else { &vb }, &mask, start, nb);
        }
        // back to self's rank, then undo stride, flip and shrink on both the values and a `true` mask
        let vb = vb.reshape(&mops.iter().map(|v| if v.collapse { 1 } else { v.size }).collect::<Vec<_>>());
        let (mut vb, mut mask) = (vb.clone(), vb.ones_mask());
        for (d, m) in mops.iter().enumerate() {
            let st = m.stride.unsigned_abs();
            if st != 1 {
                let unstride = |t: &Tensor| {
                    let t = t.unsqueeze(d as isize + 1).pad_dim(d + 1, (0, st - 1)).flatten(d as isize, d as isize + 1);
                    t.shrink_dim(d, (0, m.hi - m.lo))
                };
                (vb, mask) = (unstride(&vb), unstride(&mask));
            }
        }
        let flips: Vec<isize> = (0..mops.len()).filter(|&d| mops[d].stride < 0).map(|d| d as isize).collect();
        let pads: Vec<(usize, usize)> = mops.iter().map(|m| (m.lo, m.n - m.hi)).collect();
        if mops.iter().all(|m| m.lo == 0 && m.hi == m.n && m.stride.abs() == 1) {
            return Ok(vb.flip(&flips)); // every element is written
        }
        let (vb, mask) = (vb.flip(&flips).pad(&pads), mask.flip(&flips).pad(&pads));
        Ok(mask.where_(&vb, self))
    }

    /// numpy's `t[idx] = value`, in place and at once: basic indices write `value` (broadcast,
    /// cast to self's dtype) through the view they make; with tensor indices, which make no view,
    /// `set`'s result is assigned to the whole tensor.
    pub fn setitem(&self, idx: &[Idx], value: &Tensor) {
        self.try_setitem(idx, value).or_panic()
    }
    /// `setitem`, reporting bad indices, a value that does not broadcast, or a failed realize as
    /// an error.
    pub fn try_setitem(&self, idx: &[Idx], value: &Tensor) -> Result<()> {
        let written = if idx.iter().any(|i| matches!(i, Idx::Tensor(_))) {
            self.try_assign(&self.try_set(idx, value)?)?
        } else {
            let view = self.try_index(idx)?;
            let value = value.squeeze_leading_to(view.ndim()).cast(view.dtype());
            view.try_assign(&value.try_broadcast_to(&view.shape()).map_err(|e| e.for_op("setitem"))?)?
        };
        written.try_realize().map(|_| ())
    }

    /// This tensor without leading axes of size 1 past rank `rank` (a value written into fewer
    /// axes, as numpy allows).
    fn squeeze_leading_to(&self, rank: usize) -> Tensor {
        let mut v = self.clone();
        while v.ndim() > rank && v.shape()[0] == 1 {
            v = v.reshape(&v.shape()[1..]);
        }
        v
    }

    /// `out[i][j] = self[index[i][j]][j]` for `dim = 0` (and so on): values picked along `dim` by `index`.
    pub fn gather(&self, dim: isize, index: &Tensor) -> Tensor {
        self.try_gather(dim, index).or_panic()
    }
    /// `gather`, reporting a bad axis, an index of the wrong shape or dtype, or index values out
    /// of range (read from the index's data) as an error.
    pub fn try_gather(&self, dim: isize, index: &Tensor) -> Result<Tensor> {
        let (shape, is) = (self.shape(), index.shape());
        let d = resolve_axis("gather", dim, shape.len(), &shape)?;
        let err = |reason: String| Err(Error::shape("gather", &[&shape, &is], reason));
        if shape.is_empty() {
            return err("needs a tensor of at least 1 dimension".into());
        }
        if is.len() != shape.len() || is.iter().zip(&shape).enumerate().any(|(i, (a, b))| i != d && a > b) {
            return err(format!("the index's shape does not fit the tensor's outside axis {d}"));
        }
        check_index_dtype("gather", index)?;
        check_devices("gather", &[self, index])?;
        check_indices("gather", index, 0..shape[d] as i64, None)?;
        let bounds: Vec<(usize, usize)> =
            shape.iter().zip(&is).enumerate().map(|(i, (&s, &n))| (0, if i == d { s } else { n })).collect();
        let x = self.shrink(&bounds).unsqueeze(-1).transpose(-1, d as isize);
        let mask = index.unsqueeze(-1).eq(self.arange_here(shape[d]));
        Ok(mask.where_(&x, x.zero()).sum(-1isize, false).cast(self.dtype()))
    }

    /// A copy with `src` values written along `dim` at `index` (`self[index[i][j]][j] = src[i][j]` for dim 0);
    /// `src` must have this tensor's dtype.
    pub fn scatter(&self, dim: isize, index: &Tensor, src: &Tensor) -> Tensor {
        self.try_scatter(dim, index, src).or_panic()
    }
    /// `scatter`; this and the other scatters' `try_` forms report a bad axis, an index or `src`
    /// that does not fit, index values out of range (read from its data), dtypes or devices that
    /// differ as an error.
    pub fn try_scatter(&self, dim: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let (src, mask) = self.pre_scatter("scatter", dim, index, src)?;
        Ok(masked_merge(self, &src, &mask, self.ndim(), 1))
    }
    /// `scatter` of one scalar value at every position `index` names.
    pub fn scatter_value(&self, dim: isize, index: &Tensor, value: impl Into<Scalar>) -> Tensor {
        self.try_scatter_value(dim, index, value).or_panic()
    }
    pub fn try_scatter_value(&self, dim: isize, index: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        let v = self.const_tensor(value.into(), self.dtype());
        let (_, mask) = self.pre_scatter("scatter", dim, index, &v.broadcast_to(&index.shape()))?;
        Ok(masked_merge(self, &v, &mask, self.ndim(), 1))
    }
    /// `src` values reduced into this tensor along `dim` at `index` (tinygrad's and torch's
    /// `scatter_reduce`): every value landing on a position is combined with `reduce`, and with
    /// the position's own value when `include_self` (else a position nothing lands on keeps it).
    pub fn scatter_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Tensor {
        self.try_scatter_reduce(dim, index, src, reduce, include_self).or_panic()
    }
    pub fn try_scatter_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Tensor> {
        let (src, mask) = self.pre_scatter("scatter_reduce", dim, index, src)?;
        let hit = mask.any(-1isize, false);
        // this tensor's values where they take part, `empty` where they do not
        let own = |empty: Scalar| {
            if include_self {
                self.clone()
            } else {
                hit.where_(self.const_tensor(empty, self.dtype()), self)
            }
        };
        let (lowest, highest) = (super::reduce::dtype_min(self.dtype()), super::reduce::dtype_max(self.dtype()));
        Ok(match reduce {
            ScatterReduce::Sum => {
                mask.where_(&src, src.zero()).sum(-1isize, false).cast(self.dtype()).add(own(Scalar::Int(0)))
            }
            ScatterReduce::Prod => mask
                .where_(&src, src.const_tensor(Scalar::Int(1), src.dtype()))
                .prod(-1isize, false)
                .mul(own(Scalar::Int(1))),
            ScatterReduce::Amax => {
                mask.where_(&src, src.const_tensor(lowest, src.dtype())).max(-1isize, false).maximum(own(lowest))
            }
            ScatterReduce::Amin => {
                mask.where_(&src, src.const_tensor(highest, src.dtype())).min(-1isize, false).minimum(own(highest))
            }
            ScatterReduce::Mean => {
                let total =
                    mask.where_(&src, src.zero()).sum(-1isize, false).cast(self.dtype()).add(own(Scalar::Int(0)));
                let count = mask.where_(1, 0).sum(-1isize, false).add(if include_self {
                    hit.ones_like().cast(DType::INT32)
                } else {
                    hit.logical_not().cast(DType::INT32)
                });
                total.div(&count)
            }
        })
    }
    /// tinygrad's `scatter(reduce=)`: one scalar `value` added at (or multiplied into) every
    /// position `index` names, once per time it is named.
    pub fn scatter_value_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        value: impl Into<Scalar>,
        reduce: ScatterReduce,
    ) -> Tensor {
        self.try_scatter_value_reduce(dim, index, value, reduce).or_panic()
    }
    pub fn try_scatter_value_reduce(
        &self,
        dim: isize,
        index: &Tensor,
        value: impl Into<Scalar>,
        reduce: ScatterReduce,
    ) -> Result<Tensor> {
        let v = self.const_tensor(value.into(), self.dtype()).broadcast_to(&index.shape());
        ensure(matches!(reduce, ScatterReduce::Sum | ScatterReduce::Prod), || {
            Error::value("scatter", format!("reduce must be 'add' or 'multiply', got {reduce:?}"))
        })?;
        self.try_scatter_reduce(dim, index, &v, reduce, true)
    }
    /// The checks and layout scatters share: `src` shrunk to the index's shape and repeated along
    /// a new last axis of `self.shape()[dim]` positions, moved to `dim`, with the mask of where
    /// each value lands; both padded to `self`'s shape (plus that axis).
    fn pre_scatter(&self, op: &'static str, dim: isize, index: &Tensor, src: &Tensor) -> Result<(Tensor, Tensor)> {
        let (shape, is, ss) = (self.shape(), index.shape(), src.shape());
        let d = resolve_axis(op, dim, shape.len(), &shape)?;
        ensure(!shape.is_empty(), || Error::shape(op, &[&shape], "needs a tensor of at least 1 dimension"))?;
        let fits = is.len() == shape.len()
            && ss.len() == shape.len()
            && (0..shape.len()).all(|i| is[i] <= ss[i] && (i == d || is[i] <= shape[i]));
        ensure(fits, || {
            Error::shape(
                op,
                &[&shape, &is, &ss],
                format!("the index (second) does not fit src (third) and self (first) at axis {d}"),
            )
        })?;
        check_index_dtype(op, index)?;
        ensure(src.dtype() == self.dtype(), || Error::DTypes {
            op,
            dtypes: vec![self.dtype(), src.dtype()],
            reason: "src must have self's dtype".into(),
        })?;
        check_devices(op, &[self, index, src])?;
        let n = shape[d];
        check_indices(op, index, 0..n as i64, None)?;
        let src = src.shrink(&is.iter().map(|&s| (0, s)).collect::<Vec<_>>());
        let src = src.unsqueeze(-1).expand(&[is.clone(), vec![n]].concat()).transpose(-1, d as isize);
        let mask = index.unsqueeze(-1).eq(self.arange_here(n)).transpose(-1, d as isize);
        let pads: Vec<(usize, usize)> =
            (0..=shape.len()).map(|i| (0, if i == d || i == shape.len() { 0 } else { shape[i] - is[i] })).collect();
        Ok((src.pad(&pads), mask.pad(&pads)))
    }

    /// `value` where `mask` is true, else `self` (broadcasting).
    pub fn masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Tensor {
        self.try_masked_fill(mask, value).or_panic()
    }
    /// `masked_fill`, reporting a mask that does not broadcast or is on another device as an error.
    pub fn try_masked_fill(&self, mask: &Tensor, value: impl Into<Scalar>) -> Result<Tensor> {
        mask.cast(DType::BOOL)
            .try_where(self.const_tensor(value.into(), self.dtype()), self)
            .map_err(|e| e.for_op("masked_fill"))
    }
    /// One-hot encode integer classes: a new last axis of `num_classes` 0/1 values (int32).
    pub fn one_hot(&self, num_classes: usize) -> Tensor {
        self.try_one_hot(num_classes).or_panic()
    }
    /// `one_hot`, reporting a non-integer tensor or class values out of range (read from its
    /// data) as an error.
    pub fn try_one_hot(&self, num_classes: usize) -> Result<Tensor> {
        check_index_dtype("one_hot", self)?;
        check_indices("one_hot", self, 0..num_classes as i64, None)?;
        Ok(self.unsqueeze(-1).eq(self.arange_here(num_classes)).where_(1, 0))
    }
    /// `arange(r)[:, None] + diagonal <= arange(c)`: true on and above the `diagonal`-th diagonal.
    fn tri_mask(&self, op: &'static str, diagonal: isize) -> Result<Tensor> {
        let shape = self.shape();
        ensure(shape.len() >= 2, || Error::shape(op, &[&shape], "expected at least 2 dims"))?;
        let (r, c) = (shape[shape.len() - 2], shape[shape.len() - 1]);
        Ok(self.arange_here(r).reshape(&[r, 1]).add(diagonal as i64).le(self.arange_here(c).reshape(&[1, c])))
    }
    /// The upper triangle: elements below the `diagonal`-th diagonal set to 0 (positive: above the main one).
    pub fn triu(&self, diagonal: isize) -> Tensor {
        self.try_triu(diagonal).or_panic()
    }
    /// `triu`, reporting a tensor of fewer than 2 dims as an error.
    pub fn try_triu(&self, diagonal: isize) -> Result<Tensor> {
        Ok(self.tri_mask("triu", diagonal)?.where_(self, self.zero()))
    }
    /// The lower triangle: elements above the `diagonal`-th diagonal set to 0.
    pub fn tril(&self, diagonal: isize) -> Tensor {
        self.try_tril(diagonal).or_panic()
    }
    /// `tril`, reporting a tensor of fewer than 2 dims as an error.
    pub fn try_tril(&self, diagonal: isize) -> Result<Tensor> {
        Ok(self.tri_mask("tril", diagonal + 1)?.where_(self.zero(), self))
    }
}

/// `Err` (naming `op`) unless `index` is an integer tensor.
fn check_index_dtype(op: &'static str, index: &Tensor) -> Result<()> {
    ensure(index.dtype().is_int(), || Error::DTypes {
        op,
        dtypes: vec![index.dtype()],
        reason: "the index must be an integer tensor".into(),
    })
}

/// `where(any(mask), values, base)` over the `nb` mask axes from `start`; where several are set the last wins.
/// `mask` is `base`'s shape with those axes inserted; `values` broadcasts to it, or is one value for all.
fn masked_merge(base: &Tensor, values: &Tensor, mask: &Tensor, start: usize, nb: usize) -> Tensor {
    let ms = mask.shape();
    let b: usize = ms[start..start + nb].iter().product();
    if b == 0 {
        return base.clone();
    }
    let axes: Vec<isize> = (start..start + nb).map(|a| a as isize).collect();
    if values.numel() == 1 {
        let any = mask.where_(1, 0).max(axes.as_slice(), false).ne(0);
        return any.where_(values.reshape(&[0usize; 0]), base);
    }
    let flat: Vec<usize> = [&ms[..start], &[b], &ms[start + nb..]].concat();
    let (mask, values) = (mask.reshape(&flat), values.broadcast_to(&ms).reshape(&flat));
    let order = base.arange_here(b).reshape(&[vec![b], vec![1; flat.len() - start - 1]].concat());
    let last = mask.where_(&order, -1).max(start as isize, true);
    let picked = order.eq(&last).where_(&values, values.zero()).sum(start as isize, false).cast(base.dtype());
    last.ge(0).squeeze(Some(start as isize)).where_(&picked, base)
}
