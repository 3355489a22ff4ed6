//! Reductions over any set of axes.

use super::elementwise::Scalar;
use super::movement::resolve_axis;
use super::{PadMode, Tensor};
use crate::dtype::DType;
use crate::error::{Error, OrPanic, Result};
use crate::uop::{Arg, Ops, Sint, UOp};

/// Which axes a reduction runs over: one axis, several, or `None` for all of them. A 0-d
/// tensor's one axis (`0` or `-1`, as in PyTorch) resolves to none: there is nothing to reduce.
pub trait Axes {
    /// The axes as sorted indices into `shape`, or `Error::Axis` naming `op`.
    fn resolve(&self, op: &'static str, shape: &[usize]) -> Result<Vec<usize>>;
}

impl Axes for isize {
    fn resolve(&self, op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
        let axis = resolve_axis(op, *self, shape.len(), shape)?;
        Ok(if shape.is_empty() { vec![] } else { vec![axis] })
    }
}
impl Axes for i32 {
    fn resolve(&self, op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
        (*self as isize).resolve(op, shape)
    }
}
impl Axes for &[isize] {
    fn resolve(&self, op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
        let mut v: Vec<usize> = self.iter().map(|a| a.resolve(op, shape)).collect::<Result<Vec<_>>>()?.concat();
        v.sort();
        v.dedup();
        Ok(v)
    }
}
impl<const N: usize> Axes for [isize; N] {
    fn resolve(&self, op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
        self.as_slice().resolve(op, shape)
    }
}
impl Axes for Option<isize> {
    fn resolve(&self, op: &'static str, shape: &[usize]) -> Result<Vec<usize>> {
        match self {
            Some(a) => a.resolve(op, shape),
            None => Ok((0..shape.len()).collect()),
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
        let (shape, dims) = (self.shape(), self.dims());
        // an axis of size 1 kept is already reduced; a variable one of size up to 1 may be 0
        let axes: Vec<usize> = axes.into_iter().filter(|&a| dims[a] != Sint::Int(1) || !keepdim).collect();
        let reduced = if axes.is_empty() {
            self.clone()
        } else {
            let u = self.uop();
            self.lift(UOp::new(Ops::ReduceAxis, u.dtype(), vec![u], Arg::ReduceAxis(op, axes.clone())))
        };
        if keepdim {
            return reduced;
        }
        reduced.keep_axes((0..shape.len()).filter(|i| !axes.contains(i)).map(Some).collect())
    }
    /// Sum over `axes`; ints accumulate in at least 32 bits, half floats in float32.
    pub fn sum(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_sum(axes, keepdim).or_panic()
    }
    /// `sum`; this and every reduction's `try_` form report an axis the tensor lacks as an error.
    pub fn try_sum(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("sum", &self.shape())?;
        let acc = sum_acc_dtype(self.dtype());
        let out = self.cast(acc).reduce(Ops::Add, axes, keepdim);
        let half = [DType::FLOAT16, DType::BFLOAT16].contains(&self.dtype());
        Ok(if half { out.cast(self.dtype()) } else { out })
    }
    /// Largest element over `axes`; over an empty axis the dtype's smallest value (`-inf` for
    /// floats), the identity of the maximum, as in tinygrad.
    pub fn max(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_max(axes, keepdim).or_panic()
    }
    pub fn try_max(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("max", &self.shape())?;
        Ok(self.reduce(Ops::Max, axes, keepdim))
    }
    /// Smallest element over `axes` (the max of the order-reversing `inverse`, exact for every
    /// dtype); over an empty axis the dtype's largest value (`inf` for floats).
    pub fn min(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_min(axes, keepdim).or_panic()
    }
    pub fn try_min(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("min", &self.shape())?;
        Ok(self.inverse().reduce(Ops::Max, axes, keepdim).inverse())
    }
    /// `axes`, after checking that none is empty: `op` (an index) has no value for nothing.
    fn nonempty(&self, op: &'static str, axes: Vec<usize>) -> Result<Vec<usize>> {
        let dims = self.dims();
        // a variable's axis counts at the value it is bound to
        if let Some(a) = axes.iter().find(|&&a| dims[a].value() == 0) {
            let bound = match &dims[*a] {
                crate::uop::Sint::Sym(_) => format!(", {} bound to 0", dims[*a]),
                crate::uop::Sint::Int(_) => String::new(),
            };
            return Err(Error::shape(op, &[&self.shape()], format!("cannot reduce axis {a} of size 0{bound}")));
        }
        Ok(axes)
    }
    /// Mean over `axes`, in float (NaN over an empty axis, as torch).
    pub fn mean(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_mean(axes, keepdim).or_panic()
    }
    pub fn try_mean(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let shape = self.shape();
        let resolved = axes.resolve("mean", &shape)?;
        let s = self.sum(isize_axes(&resolved).as_slice(), keepdim);
        let f = s.cast(s.dtype().to_float());
        let mean = f.div_by_count(&self.reduced_count(&resolved, 0));
        Ok(mean.cast(if self.dtype().is_float() { self.dtype() } else { f.dtype() }))
    }
    /// How many elements `axes` reduce over, less `correction` (0 at least): a number, or an
    /// expression where variables set the sizes.
    fn reduced_count(&self, axes: &[usize], correction: usize) -> Sint {
        let dims = self.dims();
        let count = axes.iter().fold(UOp::const_int(DType::INDEX, 1), |n, &a| n.alu(Ops::Mul, &[&dims[a].uop()]));
        let less = count.alu(Ops::Add, &[&UOp::const_int(DType::INDEX, -(correction as i64))]);
        Sint::from_uop(&less.alu(Ops::Max, &[&UOp::const_int(DType::INDEX, 0)]))
    }
    /// This float tensor divided by `count` (a count set by variables is a value of the graph).
    fn div_by_count(&self, count: &Sint) -> Tensor {
        match count {
            Sint::Int(n) => self.div(*n as f64),
            Sint::Sym(n) => self.div(self.lift(n.clone()).cast(self.dtype())),
        }
    }
    /// Product over `axes` (a MUL reduce), in this tensor's dtype.
    pub fn prod(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_prod(axes, keepdim).or_panic()
    }
    pub fn try_prod(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("prod", &self.shape())?;
        Ok(self.reduce(Ops::Mul, axes, keepdim))
    }
    /// Whether any element over `axes` is non-zero (bool).
    pub fn any(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_any(axes, keepdim).or_panic()
    }
    pub fn try_any(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("any", &self.shape())?;
        Ok(self.cast(DType::BOOL).reduce(Ops::Max, axes, keepdim))
    }
    /// Whether every element over `axes` is non-zero (bool).
    pub fn all(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_all(axes, keepdim).or_panic()
    }
    pub fn try_all(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("all", &self.shape())?;
        Ok(self.logical_not().reduce(Ops::Max, axes, keepdim).logical_not())
    }
    /// Variance over `axes`, dividing by `n - correction` (Bessel's correction is 1).
    pub fn var(&self, axes: impl Axes, keepdim: bool, correction: usize) -> Tensor {
        self.try_var(axes, keepdim, correction).or_panic()
    }
    pub fn try_var(&self, axes: impl Axes, keepdim: bool, correction: usize) -> Result<Tensor> {
        let resolved = axes.resolve("var", &self.shape())?;
        let ax = isize_axes(&resolved);
        let d = self.sub(self.mean(ax.as_slice(), true));
        Ok(d.square().sum(ax.as_slice(), keepdim).div_by_count(&self.reduced_count(&resolved, correction)))
    }
    /// Standard deviation over `axes` (the square root of `var`).
    pub fn std(&self, axes: impl Axes, keepdim: bool, correction: usize) -> Tensor {
        self.try_std(axes, keepdim, correction).or_panic()
    }
    pub fn try_std(&self, axes: impl Axes, keepdim: bool, correction: usize) -> Result<Tensor> {
        let ax = isize_axes(&axes.resolve("std", &self.shape())?);
        let var = self.var(ax.as_slice(), keepdim, correction);
        // PyTorch's gradient at a variance of 0 (equal values) is 0, where sqrt's would be 0 * inf:
        // there the root is taken of 1 and multiplied by 0, elsewhere of the variance times 1
        let zero = var.eq(0.0);
        Ok(var.add(zero.cast(var.dtype())).sqrt().mul(zero.logical_not().cast(var.dtype())))
    }
    /// `(var, mean)` over `axes`.
    pub fn var_mean(&self, axes: impl Axes, keepdim: bool, correction: usize) -> (Tensor, Tensor) {
        self.try_var_mean(axes, keepdim, correction).or_panic()
    }
    pub fn try_var_mean(&self, axes: impl Axes, keepdim: bool, correction: usize) -> Result<(Tensor, Tensor)> {
        let ax = isize_axes(&axes.resolve("var_mean", &self.shape())?);
        Ok((self.var(ax.as_slice(), keepdim, correction), self.mean(ax.as_slice(), keepdim)))
    }
    /// `(std, mean)` over `axes`.
    pub fn std_mean(&self, axes: impl Axes, keepdim: bool, correction: usize) -> (Tensor, Tensor) {
        self.try_std_mean(axes, keepdim, correction).or_panic()
    }
    pub fn try_std_mean(&self, axes: impl Axes, keepdim: bool, correction: usize) -> Result<(Tensor, Tensor)> {
        let ax = isize_axes(&axes.resolve("std_mean", &self.shape())?);
        Ok((self.std(ax.as_slice(), keepdim, correction), self.mean(ax.as_slice(), keepdim)))
    }
    /// `x - max`, `exp(x - max)` and its sum over `axis` (kept): the parts of (log-)softmax.
    fn softmax_parts(&self, op: &'static str, axis: isize) -> Result<(Tensor, Tensor, Tensor)> {
        let x = self.cast(self.dtype().to_float());
        // the reduce itself: an empty axis gives an empty softmax, not an error
        let m = x.sub(x.reduce(Ops::Max, axis.resolve(op, &x.shape())?, true).detach());
        let e = m.exp();
        let s = e.sum(axis, true);
        Ok((m, e, s))
    }
    /// `exp(x) / sum(exp(x))` along `axis`, computed stably.
    pub fn softmax(&self, axis: isize) -> Tensor {
        self.try_softmax(axis).or_panic()
    }
    pub fn try_softmax(&self, axis: isize) -> Result<Tensor> {
        let (_, e, s) = self.softmax_parts("softmax", axis)?;
        Ok(e.div(&s))
    }
    /// Lp normalization along `axis` (torch's `normalize`): `self` divided by its `p`-norm over
    /// the axis (the count of non-zeros for `p = 0`), at least `eps`.
    pub fn normalize(&self, p: f64, axis: isize, eps: f64) -> Tensor {
        self.try_normalize(p, axis, eps).or_panic()
    }
    pub fn try_normalize(&self, p: f64, axis: isize, eps: f64) -> Result<Tensor> {
        let norm = match p == 0.0 {
            true => self.ne(0).try_sum(axis, true),
            false => self.abs().pow(p).try_sum(axis, true).map(|n| n.pow(1.0 / p)),
        }
        .map_err(|e| e.for_op("normalize"))?;
        Ok(self.div(norm.maximum(eps)))
    }
    /// `softmax(-x)` along `axis`: the smallest values weigh most.
    pub fn softmin(&self, axis: isize) -> Tensor {
        self.neg().softmax(axis)
    }
    pub fn try_softmin(&self, axis: isize) -> Result<Tensor> {
        self.neg().try_softmax(axis)
    }
    /// `log(softmax(x))` along `axis`, computed stably.
    pub fn log_softmax(&self, axis: isize) -> Tensor {
        self.try_log_softmax(axis).or_panic()
    }
    pub fn try_log_softmax(&self, axis: isize) -> Result<Tensor> {
        let (m, _, s) = self.softmax_parts("log_softmax", axis)?;
        Ok(m.sub(s.log()))
    }
    /// `log(sum(exp(x)))` over `axes`, computed stably.
    pub fn logsumexp(&self, axes: impl Axes, keepdim: bool) -> Tensor {
        self.try_logsumexp(axes, keepdim).or_panic()
    }
    pub fn try_logsumexp(&self, axes: impl Axes, keepdim: bool) -> Result<Tensor> {
        let axes = axes.resolve("logsumexp", &self.shape())?;
        let x = self.cast(self.dtype().to_float());
        // the reduce itself: over an empty axis the sum is 0, its log -inf (as in PyTorch)
        let m = finite_or_zero(&x.reduce(Ops::Max, axes.clone(), true));
        let out = x.sub(&m).exp().sum(isize_axes(&axes).as_slice(), keepdim).log();
        Ok(out.add(&if keepdim { m } else { m.reshape(&out.shape()) }))
    }
    /// Index (int32) of the first largest element along `axis` (`None`: of the flattened tensor);
    /// the first NaN where there is one.
    pub fn argmax(&self, axis: Option<isize>, keepdim: bool) -> Tensor {
        self.try_argmax(axis, keepdim).or_panic()
    }
    /// `argmax`, reporting a bad axis or an axis of no elements as an error.
    pub fn try_argmax(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        let shape = self.shape();
        let Some(axis) = axis else {
            let out = self.flatten(0, -1).try_argmax(Some(0), false)?;
            return Ok(if keepdim { out.reshape(&vec![1; shape.len()]) } else { out });
        };
        let a = resolve_axis("argmax", axis, shape.len(), &shape)?;
        if shape.is_empty() {
            return Ok(self.full_like(0).cast(DType::INT32));
        }
        self.nonempty("argmax", vec![a])?;
        let n = shape[a];
        // a NaN is the largest value, as in PyTorch and numpy (the max is NaN then, equal to nothing)
        let hit = match self.dtype().is_float() {
            true => self.eq(self.max(axis, true)).bitwise_or(self.isnan()),
            false => self.eq(self.max(axis, true)),
        };
        let mut ramp_shape = vec![1; shape.len() - a];
        ramp_shape[0] = n;
        let rev = self.ramp(n).neg().add(n as i64).reshape(&ramp_shape);
        let idx = hit.where_(&rev, 0).max(axis, keepdim);
        Ok(idx.neg().add(n as i64).cast(DType::INT32))
    }
    /// Index (int32) of the first smallest element along `axis` (`None`: of the flattened tensor);
    /// the first NaN where there is one.
    pub fn argmin(&self, axis: Option<isize>, keepdim: bool) -> Tensor {
        self.try_argmin(axis, keepdim).or_panic()
    }
    /// `argmin`, reporting a bad axis or an axis of no elements as an error.
    pub fn try_argmin(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        if let Some(axis) = axis {
            self.nonempty("argmin", axis.resolve("argmin", &self.shape())?)?;
        }
        self.inverse().try_argmax(axis, keepdim)
    }
    /// Elementwise `|self - other| <= atol + rtol * |other|`; infinities must match exactly and NaNs
    /// count as close only with `equal_nan`.
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Tensor {
        self.try_isclose(other, rtol, atol, equal_nan).or_panic()
    }
    /// `isclose`, reporting shapes that do not broadcast or different devices as an error.
    pub fn try_isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<Tensor> {
        let dtype = DType::least_upper(self.dtype(), other.dtype()).to_float();
        let (a, b) = (self.cast(dtype), other.cast(dtype));
        let near = a.try_sub(&b).map_err(|e| e.for_op("isclose"))?.abs().le(b.abs().mul(rtol).add(atol));
        let finite_close = a.isfinite().bitwise_and(b.isfinite()).bitwise_and(&near);
        let inf_close = a.isinf().bitwise_or(b.isinf()).bitwise_and(a.eq(&b));
        let close = finite_close.bitwise_or(&inf_close);
        Ok(if equal_nan { close.bitwise_or(a.isnan().bitwise_and(b.isnan())) } else { close })
    }
    /// Whether every element `isclose` (realizes; returns a Rust bool).
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> bool {
        self.try_allclose(other, rtol, atol, equal_nan).or_panic()
    }
    /// `allclose`, reporting what `try_isclose` does or a failed realize as an error.
    pub fn try_allclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Result<bool> {
        self.try_isclose(other, rtol, atol, equal_nan)?.all(None::<isize>, false).try_item::<bool>()
    }
}

/// Helpers the composed ops share (private to the tensor module).
impl Tensor {
    /// An order-reversing bijection (tinygrad's `_inverse`): `-x` for floats, `!x` for ints and bools.
    pub(super) fn inverse(&self) -> Tensor {
        if self.dtype().is_float() {
            self.neg()
        } else {
            self.bitwise_not()
        }
    }
    /// `0..n` as int32 on this tensor's device.
    pub(super) fn ramp(&self, n: usize) -> Tensor {
        Tensor::arange(n).to(self.device())
    }
    /// Pad each axis by `(before, after)` filled with `value`; negative amounts crop.
    pub(super) fn pad_value(&self, pads: &[(isize, isize)], value: Scalar) -> Tensor {
        self.pad_with(pads, PadMode::Constant, value)
    }
}

/// Axes as `isize`, for passing resolved axes back into `impl Axes` APIs.
pub(super) fn isize_axes(axes: &[usize]) -> Vec<isize> {
    axes.iter().map(|&a| a as isize).collect()
}

/// The smallest value of `dtype` (`-inf` for floats), as tinygrad's `dtypes.min`.
pub(super) fn dtype_min(dtype: DType) -> Scalar {
    match dtype {
        d if d.is_float() => Scalar::Float(f64::NEG_INFINITY),
        d if d.is_bool() => Scalar::Bool(false),
        d => Scalar::Int(d.int_range().0.max(i64::MIN as i128) as i64),
    }
}

/// The largest value of `dtype` (`inf` for floats), as tinygrad's `dtypes.max`.
pub(super) fn dtype_max(dtype: DType) -> Scalar {
    match dtype {
        d if d.is_float() => Scalar::Float(f64::INFINITY),
        d if d.is_bool() => Scalar::Bool(true),
        d => Scalar::Int(d.int_range().1 as i64),
    }
}

/// The shift that keeps `exp` in range for a log-sum-exp: the maximum, or 0 where it is infinite
/// (all terms -inf, or one +inf: the sum is then 0 or inf, not `inf - inf`).
fn finite_or_zero(max: &Tensor) -> Tensor {
    max.isinf().where_(0.0, max)
}

/// The neutral element of a cumulative `op` for `dtype`.
fn identity(op: Ops, dtype: DType) -> Scalar {
    match op {
        Ops::Add => Scalar::Int(0),
        Ops::Mul => Scalar::Int(1),
        _ => dtype_min(dtype),
    }
}

/// Cumulative (scan) ops: each output is the reduce of a window that a pad + pool builds.
impl Tensor {
    /// Inclusive scan of `op` along `axis` as one windowed reduce (exclusive with `initial`).
    fn cumalu(&self, axis: usize, op: Ops, initial: bool) -> Tensor {
        let n = self.shape()[axis];
        let x = self.transpose(axis as isize, -1);
        let mut pads = vec![(0, 0); x.ndim()];
        *pads.last_mut().unwrap() = ((n - usize::from(!initial)) as isize, -isize::from(initial));
        let windows = x.pad_value(&pads, identity(op, self.dtype())).pool(&[n], &[1], &[1]);
        let out = match op {
            Ops::Add => windows.sum(-1isize, false),
            Ops::Mul => windows.prod(-1isize, false),
            _ => windows.max(-1isize, false),
        };
        out.transpose(axis as isize, -1)
    }
    /// A scan that splits long axes into blocks of 256: scan the blocks, then add their prefixes.
    fn split_cumalu(&self, axis: isize, op: Ops, name: &'static str) -> Result<Tensor> {
        let shape = self.shape();
        let a = resolve_axis(name, axis, shape.len(), &shape)?;
        if shape.is_empty() || shape.contains(&0) {
            return Ok(self.clone());
        }
        const SPLIT: usize = 256;
        let s = shape[a];
        if s <= 2 * SPLIT {
            return Ok(self.cumalu(a, op, false));
        }
        let padded = s.div_ceil(SPLIT) * SPLIT;
        let x = self.transpose(a as isize, -1);
        let mut pads = vec![(0, 0); x.ndim()];
        *pads.last_mut().unwrap() = ((padded - s) as isize, 0);
        let mut blocks: Vec<isize> = x.shape()[..x.ndim() - 1].iter().map(|&d| d as isize).collect();
        blocks.extend([(padded / SPLIT) as isize, SPLIT as isize]);
        let ret = x.pad_value(&pads, identity(op, self.dtype())).reshape(&blocks).cumalu(blocks.len() - 1, op, false);
        let nd = ret.ndim();
        let base = ret
            .shrink_dim(nd - 1, (SPLIT - 1, SPLIT))
            .squeeze(Some(-1))
            .cumalu(nd - 2, op, true)
            .unsqueeze(-1)
            .expand(&ret.shape());
        let fix = |t: &Tensor| t.flatten(-2, -1).shrink_dim(nd - 2, (padded - s, padded)).transpose(a as isize, -1);
        let (r, b) = (fix(&ret), fix(&base));
        Ok(match op {
            Ops::Add => r.add(&b),
            Ops::Mul => r.mul(&b),
            _ => r.maximum(&b),
        })
    }
    /// Running sum along `axis` (ints accumulate as in `sum`).
    pub fn cumsum(&self, axis: isize) -> Tensor {
        self.try_cumsum(axis).or_panic()
    }
    /// `cumsum`; this and every scan's `try_` form report an axis the tensor lacks as an error.
    pub fn try_cumsum(&self, axis: isize) -> Result<Tensor> {
        self.split_cumalu(axis, Ops::Add, "cumsum")
    }
    /// Running product along `axis`.
    pub fn cumprod(&self, axis: isize) -> Tensor {
        self.try_cumprod(axis).or_panic()
    }
    pub fn try_cumprod(&self, axis: isize) -> Result<Tensor> {
        self.split_cumalu(axis, Ops::Mul, "cumprod")
    }
    /// Running minimum along `axis` and the (last) index where it was attained (int32): the
    /// running maximum of the values in reversed order (negated, or bits inverted for unsigned
    /// integers and bools, where negation wraps).
    pub fn cummin(&self, axis: isize) -> (Tensor, Tensor) {
        self.try_cummin(axis).or_panic()
    }
    pub fn try_cummin(&self, axis: isize) -> Result<(Tensor, Tensor)> {
        let flip =
            |x: &Tensor| if self.dtype().is_unsigned() || self.dtype().is_bool() { x.bitwise_not() } else { x.neg() };
        let (values, indices) = flip(self).try_cummax(axis).map_err(|e| e.for_op("cummin"))?;
        Ok((flip(&values), indices))
    }
    /// Running maximum along `axis` and, as torch, the (last) index where it was attained (int32).
    pub fn cummax(&self, axis: isize) -> (Tensor, Tensor) {
        self.try_cummax(axis).or_panic()
    }
    pub fn try_cummax(&self, axis: isize) -> Result<(Tensor, Tensor)> {
        let shape = self.shape();
        let a = resolve_axis("cummax", axis, shape.len(), &shape)?;
        if shape.is_empty() || shape[a] == 0 {
            return Ok((self.clone(), self.full_like(0).cast(DType::INT32)));
        }
        let values = self.split_cumalu(axis, Ops::Max, "cummax")?;
        let n = shape[a];
        let (x, v) = (self.transpose(a as isize, -1), values.transpose(a as isize, -1));
        let (j, i) = (self.ramp(n).reshape(&[n, 1]), self.ramp(n).reshape(&[1, n]));
        let (xj, vi) = (x.unsqueeze(-1), v.unsqueeze(-2));
        let mut equal = xj.eq(&vi);
        if self.dtype().is_float() {
            equal = equal.bitwise_or(xj.isnan().bitwise_and(vi.isnan())); // a NaN is where NaN starts
        }
        let idx = equal.bitwise_and(j.le(&i)).where_(&j, 0).max(-2isize, false);
        let values = match self.dtype().is_float() {
            // the values read at those indices, so that a gradient reaches the element torch's
            // does (the last of equal values), not every element tied with it (a sum of the one
            // picked value and -0.0s)
            true => j.eq(idx.unsqueeze(-2)).where_(&xj, -0.0).sum(-2isize, false).transpose(-1, a as isize),
            false => values,
        };
        Ok((values, idx.cast(DType::INT32).transpose(-1, a as isize)))
    }
    /// `log(cumsum(exp(x)))` along `axis`, computed stably.
    pub fn logcumsumexp(&self, axis: isize) -> Tensor {
        self.try_logcumsumexp(axis).or_panic()
    }
    pub fn try_logcumsumexp(&self, axis: isize) -> Result<Tensor> {
        let shape = self.shape();
        let a = resolve_axis("logcumsumexp", axis, shape.len(), &shape)? as isize;
        if shape.is_empty() {
            return Ok(self.clone());
        }
        let x = self.cast(self.dtype().to_float()).transpose(a, -1);
        let n = shape[a as usize];
        let mut square = x.shape();
        square.push(n);
        let xs = x.unsqueeze(-2).expand(&square);
        let m = finite_or_zero(&x.cummax(-1).0);
        let upto = self.ramp(n).reshape(&[1, n]).le(self.ramp(n).reshape(&[n, 1]));
        let shifted = xs.sub(m.unsqueeze(-1));
        let terms = upto.where_(&shifted, dtype_min(shifted.dtype()));
        Ok(terms.exp().sum(-1isize, false).log().add(&m).transpose(-1, a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cummin_is_the_running_minimum_in_every_kind() {
        let (v, i) = Tensor::new([3.0f32, 1.0, 2.0, 0.5]).cummin(0);
        assert_eq!((v.to_vec::<f32>(), i.to_vec::<i32>()), (vec![3.0, 1.0, 1.0, 0.5], vec![0, 1, 1, 3]));
        let (v, _) = Tensor::new([200u8, 7, 9, 0]).cummin(0);
        assert_eq!(v.to_vec::<u8>(), [200, 7, 7, 0]);
        let (v, _) = Tensor::new([[5i32, -2], [1, 4]]).cummin(1);
        assert_eq!(v.to_vec::<i32>(), [5, -2, 1, 1]);
    }

    #[test]
    fn extrema_over_nothing_are_the_identities_and_scans_of_nothing_are_empty() {
        let empty = Tensor::zeros(&[2, 0]);
        assert_eq!(empty.max(1, false).to_vec::<f32>(), [f32::NEG_INFINITY; 2]);
        assert_eq!(empty.min(None, false).to_vec::<f32>(), [f32::INFINITY]);
        assert_eq!(Tensor::zeros(&[0]).cast(DType::INT32).max(0, false).to_vec::<i32>(), [i32::MIN]);
        let (v, i) = Tensor::zeros(&[2, 0, 3]).cummax(1);
        assert_eq!((v.shape(), i.shape(), i.dtype()), (vec![2, 0, 3], vec![2, 0, 3], DType::INT32));
        assert_eq!(Tensor::zeros(&[2, 0, 3]).cummin(1).0.shape(), [2, 0, 3]);
    }

    #[test]
    fn normalize_divides_by_the_norm_along_the_axis() {
        let x = Tensor::new([[3.0f32, 4.0], [0.0, 0.0]]);
        assert_eq!(x.normalize(2.0, 1, 1e-12).to_vec::<f32>(), [0.6, 0.8, 0.0, 0.0]);
        assert_eq!(x.normalize(1.0, 1, 1e-12).to_vec::<f32>(), [3.0 / 7.0, 4.0 / 7.0, 0.0, 0.0]);
        assert_eq!(x.normalize(0.0, 0, 1e-12).to_vec::<f32>(), [3.0, 4.0, 0.0, 0.0]);
    }

    #[test]
    fn softmin_weighs_the_smallest_most() {
        let got = Tensor::new([1.0f32, 2.0, 3.0]).softmin(0).to_vec::<f32>();
        let e: Vec<f64> = [-1.0f64, -2.0, -3.0].iter().map(|x| x.exp()).collect();
        let total: f64 = e.iter().sum();
        for (g, w) in got.iter().zip(&e) {
            assert!((f64::from(*g) - w / total).abs() < 1e-6, "{got:?}");
        }
    }
}
