//! Activations, normalization, attention and losses: tinygrad's functional API, every one composed
//! from tensor ops (so each is differentiable through the primitive gradient rules).

use std::f64::consts::{FRAC_2_SQRT_PI, SQRT_2};

use super::elementwise::{broadcast_shape, Scalar};
use super::reduce::Axes;
use super::{check_devices, Tensor};
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};

/// How a loss reduces its per-element values (torch's and tinygrad's `reduction`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Keep the per-element losses.
    None,
    /// Their mean.
    #[default]
    Mean,
    /// Their sum.
    Sum,
}

/// `loss` reduced as asked.
fn reduce_loss(loss: &Tensor, reduction: Reduction) -> Tensor {
    match reduction {
        Reduction::None => loss.clone(),
        Reduction::Sum => loss.sum(None::<isize>, false),
        Reduction::Mean => loss.mean(None::<isize>, false),
    }
}

/// `y == class` for every class along a new axis `dim` of size `n` (tinygrad's `_one_hot_along_dim`).
fn class_mask(op: &'static str, y: &Tensor, n: usize, dim: usize, ignore: Option<i64>) -> Result<Tensor> {
    ensure(y.dtype().is_int(), || Error::DTypes {
        op,
        dtypes: vec![y.dtype()],
        reason: "class labels must be an integer tensor".into(),
    })?;
    super::indexing::check_indices(op, y, 0..n as i64, ignore)?;
    let y = y.unsqueeze(dim as isize);
    let mut shape = vec![1usize; y.ndim() - dim];
    shape[0] = n;
    Ok(y.eq(Tensor::arange(n).to(y.device()).reshape(&shape)))
}

impl Tensor {
    /// `Err` (naming `op`) unless the targets `y` broadcast with these predictions on one device.
    fn check_targets(&self, op: &'static str, y: &Tensor) -> Result<()> {
        let (p, t) = (self.shape(), y.shape());
        ensure(broadcast_shape(&p, &t).is_some(), || {
            Error::shape(op, &[&p, &t], "predictions and targets do not broadcast")
        })?;
        check_devices(op, &[self, y])
    }
}

/// All-true bool tensor shaped like `t`.
fn all_true(t: &Tensor) -> Tensor {
    t.const_tensor(Scalar::Bool(true), DType::BOOL).expand(&t.shape())
}

impl Tensor {
    // ***** activations *****
    // Each computes in at least float32 and rounds once to its input's dtype, as PyTorch does for
    // 16-bit floats: chained 16-bit roundings cost them several ulps.

    /// `1 / (1 + e^-x)`, from `e^-|x|` so no exponential overflows (finite gradient everywhere).
    pub fn sigmoid(&self) -> Tensor {
        self.in_f32(|x| {
            let pos = x.ge(0.0);
            let e = pos.where_(x.neg(), x).exp();
            pos.where_(1.0, &e).div(e.add(1.0))
        })
    }
    /// `log(sigmoid(x))`, as `-softplus(-x)`.
    pub fn logsigmoid(&self) -> Tensor {
        self.in_f32(|x| x.neg().softplus().neg())
    }
    /// `clip(x / 6 + 1 / 2, 0, 1)` (torch's defaults `alpha = 1/6`, `beta = 0.5`).
    pub fn hardsigmoid(&self) -> Tensor {
        self.hardsigmoid_with(1.0 / 6.0, 0.5)
    }
    /// `clip(alpha * x + beta, 0, 1)`.
    pub fn hardsigmoid_with(&self, alpha: f64, beta: f64) -> Tensor {
        // `(x + beta/alpha) alpha`: near the lower corner, `x alpha + beta` cancels
        self.in_f32(|x| {
            let line = if alpha == 0.0 { x.zeros_like().add(beta) } else { x.add(beta / alpha).mul(alpha) };
            line.hardtanh_with(0.0, 1.0)
        })
    }
    /// Exponential linear unit with `alpha = 1`.
    pub fn elu(&self) -> Tensor {
        self.elu_with(1.0)
    }
    /// `x > 0 ? x : alpha * (e^x - 1)` (the exponential never sees a positive x, so no overflow).
    pub fn elu_with(&self, alpha: f64) -> Tensor {
        self.in_f32(|x| {
            let pos = x.gt(0);
            pos.where_(x, pos.where_(0.0, x).expm1().mul(alpha))
        })
    }
    /// Continuously differentiable ELU with `alpha = 1`.
    pub fn celu(&self) -> Tensor {
        self.celu_with(1.0)
    }
    /// `max(0, x) + min(0, alpha * (e^(x/alpha) - 1))`.
    pub fn celu_with(&self, alpha: f64) -> Tensor {
        self.in_f32(|x| x.div(alpha).elu().mul(alpha))
    }
    /// Scaled ELU with torch's constants (`alpha = 1.6732632...`, `scale = 1.0507009...`).
    pub fn selu(&self) -> Tensor {
        self.selu_with(1.673_263_242_354_377_3, 1.050_700_987_355_480_5)
    }
    /// `gamma * (x >= 0 ? x : alpha * (e^x - 1))`.
    pub fn selu_with(&self, alpha: f64, gamma: f64) -> Tensor {
        self.in_f32(|x| x.elu_with(alpha).mul(gamma))
    }
    /// `x * sigmoid(x)` (also called swish).
    pub fn silu(&self) -> Tensor {
        self.in_f32(|x| x.mul(x.sigmoid()))
    }
    /// `x * sigmoid(x)` (also called silu).
    pub fn swish(&self) -> Tensor {
        self.silu()
    }
    /// `clip(x, 0, 6)`.
    pub fn relu6(&self) -> Tensor {
        self.hardtanh_with(0.0, 6.0)
    }
    /// `x * relu6(x + 3) / 6`, written piecewise so the gradient is PyTorch's at -3 (0) and 3 (1).
    pub fn hardswish(&self) -> Tensor {
        self.in_f32(|x| {
            let mid = x.mul(x.add(3.0)).div(6.0);
            // NaN takes the last branch, itself
            x.gt(-3.0).bitwise_or(x.isnan()).where_(x.lt(3.0).where_(&mid, x), 0.0)
        })
    }
    /// `clip(x, -1, 1)`.
    pub fn hardtanh(&self) -> Tensor {
        self.hardtanh_with(-1.0, 1.0)
    }
    /// `clip(x, min_val, max_val)`, with gradient only strictly inside (as torch; NaN stays NaN).
    pub fn hardtanh_with(&self, min_val: f64, max_val: f64) -> Tensor {
        self.clamp(Some(min_val), Some(max_val))
    }
    /// GELU with tinygrad's default tanh approximation, `x (1 + tanh(u)) / 2`, computed as the
    /// equal `x sigmoid(2u)` (no cancellation for negative `x`).
    pub fn gelu(&self) -> Tensor {
        self.in_f32(|x| {
            let inner = x.add(x.mul(x).mul(x).mul(0.044715)).mul(FRAC_2_SQRT_PI * (0.5f64).sqrt());
            x.mul(inner.mul(2.0).sigmoid())
        })
    }
    /// GELU with the exact erf form, `x (1 + erf(x / sqrt(2))) / 2` (torch's default), computed as
    /// `x erfc(-x / sqrt(2)) / 2` (no cancellation for negative `x`).
    pub fn gelu_exact(&self) -> Tensor {
        self.in_f32(|x| x.mul(0.5).mul(x.div(-SQRT_2).erfc()))
    }
    /// `x * sigmoid(1.702 x)`.
    pub fn quick_gelu(&self) -> Tensor {
        self.in_f32(|x| x.mul(x.mul(1.702).sigmoid()))
    }
    /// `x > 0 ? x : 0.01 x`.
    pub fn leaky_relu(&self) -> Tensor {
        self.leaky_relu_with(0.01)
    }
    /// `x > 0 ? x : neg_slope * x`.
    pub fn leaky_relu_with(&self, neg_slope: f64) -> Tensor {
        self.in_f32(|x| x.gt(0).where_(x, x.mul(neg_slope)))
    }
    /// `x * tanh(softplus(x))`.
    pub fn mish(&self) -> Tensor {
        self.in_f32(|x| x.mul(x.softplus().tanh()))
    }
    /// `log(1 + e^x)`, stably.
    pub fn softplus(&self) -> Tensor {
        self.softplus_with(1.0)
    }
    /// `log(1 + e^(beta x)) / beta`, stably (as `logaddexp(beta x, 0)`).
    pub fn softplus_with(&self, beta: f64) -> Tensor {
        self.in_f32(|x| x.mul(beta).logaddexp(0.0).mul(1.0 / beta))
    }
    /// `x / (1 + |x|)`.
    pub fn softsign(&self) -> Tensor {
        self.in_f32(|x| x.div(x.abs().add(1)))
    }

    // ***** layers *****

    /// `self @ weight + bias` with `weight` as (in, out) as in tinygrad (a 1-D weight scales elementwise).
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
        self.try_linear(weight, bias).or_panic()
    }
    /// `linear`, reporting shapes that do not fit or different devices as an error.
    pub fn try_linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let x = if weight.ndim() == 1 { self.try_mul(weight) } else { self.try_matmul(weight) };
        let x = x.map_err(|e| e.for_op("linear"))?;
        bias.map_or(Ok(x.clone()), |b| x.try_add(b)).map_err(|e| e.for_op("linear"))
    }
    /// Normalize to zero mean and unit variance over `axes` (no affine part).
    pub fn layernorm(&self, axes: impl Axes, eps: f64) -> Tensor {
        self.try_layernorm(axes, eps).or_panic()
    }
    /// `layernorm`, reporting an axis the tensor lacks as an error.
    pub fn try_layernorm(&self, axes: impl Axes, eps: f64) -> Result<Tensor> {
        let ax: Vec<isize> = axes.resolve("layernorm", &self.shape())?.into_iter().map(|a| a as isize).collect();
        let y = self.sub(self.mean(ax.as_slice(), true));
        Ok(y.mul(y.mul(&y).mean(ax.as_slice(), true).add(eps).rsqrt()))
    }
    /// `(x - mean) * weight * invstd + bias` over channel axis 1 (tinygrad's `batchnorm`).
    pub fn batchnorm(&self, weight: Option<&Tensor>, bias: Option<&Tensor>, mean: &Tensor, invstd: &Tensor) -> Tensor {
        self.batchnorm_axes(weight, bias, mean, invstd, 1)
    }
    /// `batchnorm` with the statistics' axes given: `mean`, `weight`, `bias` (and `invstd`, if it
    /// has one dim per axis) are shaped like those axes of `self`.
    pub fn batchnorm_axes(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axes: impl Axes,
    ) -> Tensor {
        self.try_batchnorm_axes(weight, bias, mean, invstd, axes).or_panic()
    }
    /// `batchnorm_axes`, reporting an axis the tensor lacks or statistics that do not fit it as an
    /// error.
    pub fn try_batchnorm_axes(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axes: impl Axes,
    ) -> Result<Tensor> {
        let (sh, ax) = (self.shape(), axes.resolve("batchnorm", &self.shape())?);
        let shape: Vec<usize> = sh.iter().enumerate().map(|(i, &d)| if ax.contains(&i) { d } else { 1 }).collect();
        let n: usize = shape.iter().product();
        for t in [Some(mean), weight, bias].into_iter().flatten() {
            ensure(t.numel() == n, || {
                Error::shape("batchnorm", &[&sh, &t.shape()], format!("statistics that do not fit axes {ax:?}"))
            })?;
        }
        let x = self.try_sub(mean.reshape(&shape))?;
        let x = weight.map_or(Ok(x.clone()), |w| x.try_mul(w.reshape(&shape)))?;
        let x = x.try_mul(&if invstd.ndim() == ax.len() { invstd.try_reshape(&shape)? } else { invstd.clone() })?;
        bias.map_or(Ok(x.clone()), |b| x.try_add(b.reshape(&shape)))
    }
    /// A key or value `[..., heads, S, E]` with each head repeated to `heads` heads, the copies
    /// of one next to each other: grouped-query attention, tinygrad's and torch's `enable_gqa`
    /// (`heads` must be a multiple of this tensor's).
    pub fn repeat_heads(&self, heads: usize) -> Tensor {
        self.try_repeat_heads(heads).or_panic()
    }
    /// `repeat_heads`, reporting a tensor without a heads axis or a count of heads that is no
    /// multiple of its own as an error.
    pub fn try_repeat_heads(&self, heads: usize) -> Result<Tensor> {
        let shape = self.shape();
        ensure(shape.len() >= 3, || Error::shape("repeat_heads", &[&shape], "no heads axis ([..., heads, S, E])"))?;
        let own = shape[shape.len() - 3];
        ensure(own > 0 && heads.is_multiple_of(own), || {
            Error::shape("repeat_heads", &[&shape], format!("{heads} query heads are no multiple of the tensor's"))
        })?;
        self.try_repeat_interleave(heads / own, Some(-3))
    }
    /// `softmax(q k^T / sqrt(d) + mask) v` with `self` as the query. A bool mask keeps where true;
    /// `is_causal` masks the upper triangle. No dropout (apply `dropout` to the result's weights
    /// yourself if needed).
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Tensor {
        self.try_scaled_dot_product_attention(key, value, attn_mask, is_causal).or_panic()
    }
    /// `scaled_dot_product_attention`, reporting shapes that do not fit, a mask that does not
    /// broadcast, a mask with `is_causal`, or different devices as an error.
    pub fn try_scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        attn_mask: Option<&Tensor>,
        is_causal: bool,
    ) -> Result<Tensor> {
        const OP: &str = "scaled_dot_product_attention";
        let acc = DType::least_upper(DType::least_upper(self.dtype(), key.dtype()), DType::FLOAT32);
        let (qs, ks, vs) = (self.shape(), key.shape(), value.shape());
        let fits = qs.len() >= 2
            && ks.len() >= 2
            && vs.len() >= 2
            && qs.last() == ks.last()
            && ks[ks.len() - 2] == vs[vs.len() - 2];
        ensure(fits, || {
            Error::shape(
                OP,
                &[&qs, &ks, &vs],
                "query, key and value do not fit ([..., L, E], [..., S, E], [..., S, Ev])",
            )
        })?;
        ensure(!is_causal || attn_mask.is_none(), || Error::value(OP, "attn_mask and is_causal are exclusive"))?;
        let d = qs[qs.len() - 1];
        let qk = self.cast(acc).try_matmul(&key.cast(acc).transpose(-2, -1))?.div((d as f64).sqrt());
        let mask = if is_causal {
            let (l, s) = (qk.shape()[qk.ndim() - 2], qk.shape()[qk.ndim() - 1]);
            let rows = Tensor::arange(l).to(self.device()).reshape(&[l, 1]);
            Some(rows.ge(Tensor::arange(s).to(self.device()).reshape(&[1, s])))
        } else {
            attn_mask.cloned()
        };
        let qk = match mask {
            Some(m) if m.dtype().is_bool() => qk.try_add(m.where_(0.0, f64::NEG_INFINITY)),
            Some(m) => qk.try_add(&m),
            None => Ok(qk),
        }
        .map_err(|e| e.for_op(OP))?;
        qk.cast(self.promote_float().dtype()).softmax(-1).try_matmul(value)
    }

    // ***** losses: each `try_` form reports predictions and targets that do not fit, a
    // label out of range (read from the labels' data) or an argument out of its domain as an
    // error *****

    /// Binary cross-entropy of probabilities `self` against targets `y` (logs clamped at -100, as torch).
    pub fn binary_crossentropy(&self, y: &Tensor, reduction: Reduction) -> Tensor {
        self.try_binary_crossentropy(y, reduction).or_panic()
    }
    pub fn try_binary_crossentropy(&self, y: &Tensor, reduction: Reduction) -> Result<Tensor> {
        self.check_targets("binary_crossentropy", y)?;
        let (lp, lq) = (self.log().maximum(-100.0), self.neg().add(1.0).log().maximum(-100.0));
        let loss = y.mul(&lp).add(y.neg().add(1.0).mul(&lq)).neg();
        Ok(reduce_loss(&loss, reduction))
    }
    /// Binary cross-entropy of logits `self` against targets `y`, optionally weighting positives.
    pub fn binary_crossentropy_logits(&self, y: &Tensor, reduction: Reduction, pos_weight: Option<&Tensor>) -> Tensor {
        self.try_binary_crossentropy_logits(y, reduction, pos_weight).or_panic()
    }
    pub fn try_binary_crossentropy_logits(
        &self,
        y: &Tensor,
        reduction: Reduction,
        pos_weight: Option<&Tensor>,
    ) -> Result<Tensor> {
        self.check_targets("binary_crossentropy_logits", y)?;
        let pos = y.mul(self.logsigmoid());
        let pos = pos_weight.map_or(Ok(pos.clone()), |w| pos.try_mul(w))?;
        let loss = pos.try_add(y.neg().add(1.0).mul(self.neg().logsigmoid()))?.neg();
        Ok(reduce_loss(&loss, reduction))
    }
    /// Cross-entropy of logits `self` (classes on the last axis) against integer labels `y`.
    /// Labels equal to `ignore_index` count for nothing (`-1` ignores none, as tinygrad).
    pub fn sparse_categorical_crossentropy(
        &self,
        y: &Tensor,
        ignore_index: i64,
        label_smoothing: f64,
        reduction: Reduction,
    ) -> Tensor {
        self.try_sparse_categorical_crossentropy(y, ignore_index, label_smoothing, reduction).or_panic()
    }
    pub fn try_sparse_categorical_crossentropy(
        &self,
        y: &Tensor,
        ignore_index: i64,
        label_smoothing: f64,
        reduction: Reduction,
    ) -> Result<Tensor> {
        const OP: &str = "sparse_categorical_crossentropy";
        check_smoothing(OP, label_smoothing)?;
        let sh = self.shape();
        let Some(&n) = sh.last() else { return Err(Error::shape(OP, &[&sh], "the logits need a class axis")) };
        ensure(y.shape() == sh[..sh.len() - 1], || {
            Error::shape(OP, &[&sh, &y.shape()], "logits and labels do not match")
        })?;
        check_devices(OP, &[self, y])?;
        let log_probs = self.log_softmax(-1);
        let keep = if ignore_index != -1 { y.ne(ignore_index) } else { all_true(y) };
        let hit = class_mask(OP, y, n, y.ndim(), Some(ignore_index))?.bitwise_and(keep.unsqueeze(-1));
        let picked = hit.where_(&log_probs, 0.0).sum(-1, false);
        let smooth = log_probs.mean(-1, false).mul(&keep).mul(label_smoothing);
        let unreduced = picked.mul(1.0 - label_smoothing).add(&smooth);
        Ok(match reduction {
            Reduction::Mean => unreduced.sum(None::<isize>, false).neg().div(keep.sum(None::<isize>, false)),
            r => reduce_loss(&unreduced, r).neg(),
        })
    }
    /// Cross-entropy of logits `self` (classes on axis 1, or 0 for 1-D) against class indices or
    /// class probabilities `y`.
    pub fn cross_entropy(&self, y: &Tensor, reduction: Reduction, label_smoothing: f64) -> Tensor {
        self.try_cross_entropy(y, reduction, label_smoothing).or_panic()
    }
    pub fn try_cross_entropy(&self, y: &Tensor, reduction: Reduction, label_smoothing: f64) -> Result<Tensor> {
        check_smoothing("cross_entropy", label_smoothing)?;
        check_devices("cross_entropy", &[self, y])?;
        let (xs, ys) = (self.shape(), y.shape());
        ensure(!xs.is_empty(), || Error::shape("cross_entropy", &[&xs, &ys], "the logits need a class axis"))?;
        let cd = if self.ndim() == 1 { 0 } else { 1 };
        let n = xs[cd];
        let y = if xs == ys {
            y.clone()
        } else {
            let mut expect = xs.clone();
            expect.remove(cd);
            ensure(expect == ys, || Error::shape("cross_entropy", &[&xs, &ys], "logits and targets do not match"))?;
            class_mask("cross_entropy", y, n, cd, None)?
        };
        let y = y.mul(1.0 - label_smoothing).add(label_smoothing / n as f64);
        let loss = self.log_softmax(cd as isize).mul(&y).sum(cd as isize, false).neg();
        Ok(reduce_loss(&loss, reduction))
    }
    /// Negative log-likelihood of log-probabilities `self` (classes on axis 1, or 0 for 1-D) at the
    /// integer labels `y`, optionally weighted per class and ignoring one label.
    pub fn nll_loss(
        &self,
        y: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: Option<i64>,
        reduction: Reduction,
    ) -> Tensor {
        self.try_nll_loss(y, weight, ignore_index, reduction).or_panic()
    }
    pub fn try_nll_loss(
        &self,
        y: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: Option<i64>,
        reduction: Reduction,
    ) -> Result<Tensor> {
        let (xs, ys) = (self.shape(), y.shape());
        ensure(!xs.is_empty(), || Error::shape("nll_loss", &[&xs, &ys], "the log-probabilities need a class axis"))?;
        check_devices("nll_loss", &[self, y])?;
        let cd = if self.ndim() == 1 { 0 } else { 1 };
        let mut expect = xs.clone();
        let n = expect.remove(cd);
        ensure(expect == ys, || Error::shape("nll_loss", &[&xs, &ys], "log-probabilities and targets do not match"))?;
        let hit = class_mask("nll_loss", y, n, cd, ignore_index)?;
        let w = match weight {
            None => y.const_tensor(Scalar::Int(1), DType::INT32).expand(&y.shape()),
            Some(w) => {
                ensure(w.numel() == n, || Error::shape("nll_loss", &[&xs, &w.shape()], "a weight per class"))?;
                let ws: Vec<usize> = [vec![n], vec![1; self.ndim() - cd - 1]].concat();
                hit.try_where(w.reshape(&ws), 0.0)?.sum(cd as isize, false)
            }
        };
        let w = ignore_index.map_or(w.clone(), |i| w.mul(y.ne(i)));
        let nll = hit.where_(self, 0.0).sum(cd as isize, false).neg().mul(&w);
        Ok(match reduction {
            Reduction::Mean => nll.sum(None::<isize>, false).div(w.sum(None::<isize>, false)),
            r => reduce_loss(&nll, r),
        })
    }
}

/// `Err` (naming `op`) unless `label_smoothing` lies in `[0, 1]`.
fn check_smoothing(op: &'static str, label_smoothing: f64) -> Result<()> {
    ensure((0.0..=1.0).contains(&label_smoothing), || {
        Error::value(op, format!("label_smoothing must be in [0, 1], got {label_smoothing}"))
    })
}
