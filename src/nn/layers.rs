//! Layers as plain structs, initialized as tinygrad initializes them. Each implements `Module`
//! (so its tensors have dotted names) and has a `forward`, and a `try_forward` that reports an
//! input the layer cannot take (its shape, its dtype) as an `Error` naming the layer.

use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::helpers::getenv;
use crate::module;
use crate::tensor::{ConvOpts, Padding, Spatial, Tensor};

/// A parameter filled with `v`: its own storage (constants alone would be shared between
/// equal tensors, and an in-place update of one would change the others).
fn filled(shape: &[usize], v: f64) -> Tensor {
    Tensor::full_dtype(shape, v, DType::FLOAT32).contiguous()
}

fn uniform_bound(shape: &[usize], fan_in: usize) -> Tensor {
    let bound = 1.0 / (fan_in as f64).sqrt();
    Tensor::uniform(shape, -bound, bound)
}

/// A convolution's kernel size: one for both axes of a 2-D layer (`3`), or one per spatial axis
/// (`[3]` for a 1-D layer, `[3, 5]`).
pub trait KernelSize {
    fn sizes(&self) -> Vec<usize>;
}
impl KernelSize for usize {
    fn sizes(&self) -> Vec<usize> {
        vec![*self; 2]
    }
}
impl KernelSize for &[usize] {
    fn sizes(&self) -> Vec<usize> {
        self.to_vec()
    }
}
impl<const N: usize> KernelSize for [usize; N] {
    fn sizes(&self) -> Vec<usize> {
        self.to_vec()
    }
}
impl KernelSize for Vec<usize> {
    fn sizes(&self) -> Vec<usize> {
        self.clone()
    }
}

/// tinygrad's `padding='same'` of a stride-1 convolution: each axis padded by `d*(k-1)`, the odd
/// one after, as flat `(before, after)` pairs, last axis first.
pub fn same_padding(kernel: &[usize], dilation: &Spatial) -> Padding {
    let d = |i: usize| if dilation.0.len() == 1 { dilation.0[0] } else { dilation.0[i] };
    let pads = (0..kernel.len()).rev().flat_map(|i| {
        let total = (d(i) * (kernel[i] - 1)) as isize;
        [total / 2, total - total / 2]
    });
    Padding(pads.collect())
}

/// Kaiming-uniform weight `[a, b, kernel...]` and optional uniform bias of a conv layer.
fn conv_params(a: usize, b: usize, kernel: &[usize], out_channels: usize, bias: bool) -> (Tensor, Option<Tensor>) {
    let shape: Vec<usize> = [a, b].into_iter().chain(kernel.iter().copied()).collect();
    let fan_in = shape[1..].iter().product();
    let weight = Tensor::kaiming_uniform(&shape, 5f64.sqrt());
    (weight, bias.then(|| uniform_bound(&[out_channels], fan_in)))
}

/// Panics (naming `layer`) unless `groups` splits both channel counts.
fn check_groups(layer: &str, in_channels: usize, out_channels: usize, groups: usize) {
    assert!(
        groups > 0 && in_channels.is_multiple_of(groups) && out_channels.is_multiple_of(groups),
        "{layer}: {in_channels} input and {out_channels} output channels do not split into {groups} groups"
    );
}

/// Shape `[1, -1, 1, ...]` of a per-channel vector broadcast against a rank-`ndim` input.
fn channel_view(t: &Tensor, ndim: usize) -> Tensor {
    let mut shape = vec![1isize, -1];
    shape.extend(std::iter::repeat_n(1, ndim.saturating_sub(2)));
    t.reshape(&shape)
}

/// `y = x W^T + b`.
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}
module!(Linear { weight, bias });

impl Linear {
    pub fn new(in_features: usize, out_features: usize, bias: bool) -> Linear {
        let weight = Tensor::kaiming_uniform(&[out_features, in_features], 5f64.sqrt());
        Linear { weight, bias: bias.then(|| uniform_bound(&[out_features], in_features)) }
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input that does not end in the weight's input features is `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let (xs, ws) = (x.shape(), self.weight.shape());
        ensure(xs.last() == Some(&ws[1]), || {
            Error::shape("Linear", &[&xs, &ws], format!("the input must end in {} features", ws[1]))
        })?;
        x.try_linear(&self.weight.T(), self.bias.as_ref())
    }
}

/// A convolution over `[N, C, spatial...]` inputs (2-D for one kernel size, else one axis per size).
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub opts: ConvOpts,
}
module!(Conv2d { weight, bias });

impl Conv2d {
    pub fn new(in_channels: usize, out_channels: usize, kernel: impl KernelSize, opts: ConvOpts, bias: bool) -> Conv2d {
        check_groups("Conv2d", in_channels, out_channels, opts.groups);
        let kernel = kernel.sizes();
        let (weight, bias) = conv_params(out_channels, in_channels / opts.groups, &kernel, out_channels, bias);
        Conv2d { weight, bias, opts }
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input of the wrong rank, channels or size is `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        x.try_conv2d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// The transpose (gradient) of a 2-D convolution.
pub struct ConvTranspose2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub opts: ConvOpts,
}
module!(ConvTranspose2d { weight, bias });

impl ConvTranspose2d {
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        kernel: impl KernelSize,
        opts: ConvOpts,
        bias: bool,
    ) -> ConvTranspose2d {
        check_groups("ConvTranspose2d", in_channels, out_channels, opts.groups);
        let kernel = kernel.sizes();
        let (weight, bias) = conv_params(in_channels, out_channels / opts.groups, &kernel, out_channels, bias);
        ConvTranspose2d { weight, bias, opts }
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input of the wrong rank or channels is `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        x.try_conv_transpose2d(&self.weight, self.bias.as_ref(), &self.opts)
    }
}

/// Batch normalization over every axis but the channel axis 1 (1-D and 2-D alike). In
/// training mode (`TRAINING=1`) it uses batch statistics and updates the running ones.
pub struct BatchNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub running_mean: Option<Tensor>,
    pub running_var: Option<Tensor>,
    pub num_batches_tracked: Tensor,
    pub eps: f64,
    pub momentum: f64,
}
module!(BatchNorm { weight, bias, running_mean, running_var, num_batches_tracked });

/// tinygrad's `BatchNorm2d` and `BatchNorm1d` are the same layer.
pub type BatchNorm2d = BatchNorm;

impl BatchNorm {
    pub fn new(size: usize, eps: f64, affine: bool, track_running_stats: bool, momentum: f64) -> BatchNorm {
        let stat = |v: f64| filled(&[size], v).requires_grad(false);
        BatchNorm {
            weight: affine.then(|| filled(&[size], 1.0)),
            bias: affine.then(|| filled(&[size], 0.0)),
            running_mean: track_running_stats.then(|| stat(0.0)),
            running_var: track_running_stats.then(|| stat(1.0)),
            num_batches_tracked: Tensor::full_dtype(&[1], 0, DType::INT32).contiguous().requires_grad(false),
            eps,
            momentum,
        }
    }
    /// tinygrad's defaults: eps 1e-5, affine, running statistics, momentum 0.1.
    pub fn with_size(size: usize) -> BatchNorm {
        BatchNorm::new(size, 1e-5, true, true, 0.1)
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input that is not `[N, C, ...]` with this layer's channels is `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let size = self.weight.as_ref().or(self.running_mean.as_ref()).map(Tensor::numel);
        let xs = x.shape();
        ensure(xs.len() >= 2 && size.is_none_or(|n| xs[1] == n), || {
            let channels = size.map_or("C".into(), |n| n.to_string());
            Error::shape("BatchNorm", &[&xs], format!("the input must be [N, {channels}, ...]"))
        })?;
        let training = getenv("TRAINING", 0) != 0;
        // a batch split over n devices: each device's own statistics (tinygrad's unsynced
        // batchnorm), over the axes of `x` as [n, N/n, C, ...], unless SYNCBN=1 asks for the whole
        // batch's (which a reduce over the split axis all-reduces)
        let devices = x.devices().len();
        let per_device = training && devices > 1 && getenv("SYNCBN", 0) == 0 && x.shard_axis() == Some(0);
        let (x_stats, channel) = match per_device {
            true => {
                let split: Vec<isize> =
                    [devices, xs[0] / devices].iter().chain(&xs[1..]).map(|&d| d as isize).collect();
                (x.reshape(&split), 2)
            }
            false => (x.clone(), 1),
        };
        let axes: Vec<isize> =
            (0..x_stats.ndim() as isize).filter(|&a| a != channel && !(per_device && a == 0)).collect();
        let (mean, var) = match (&self.running_mean, &self.running_var, training) {
            (Some(m), Some(v), false) => (m.clone(), v.clone()),
            _ => {
                let mean = x_stats.mean(axes.as_slice(), per_device);
                // the variance's gradient does not flow into the mean
                let centered = match per_device {
                    true => &x_stats - &mean.detach(),
                    false => &x_stats - &channel_view(&mean.detach(), x.ndim()),
                };
                (mean, (&centered * &centered).mean(axes.as_slice(), per_device))
            }
        };
        if let (Some(rm), Some(rv), true) = (&self.running_mean, &self.running_var, training) {
            let n = (x.numel() / if per_device { devices } else { 1 }) as f64;
            let unbiased = n / (n - x.shape()[1] as f64).max(1.0);
            // per device, the running statistics follow the devices' average
            let across = |s: &Tensor| if per_device { s.mean(0, false).reshape(&[xs[1] as isize]) } else { s.clone() };
            rm.assign(&(rm * (1.0 - self.momentum) + &(across(&mean.detach()) * self.momentum)));
            rv.assign(&(rv * (1.0 - self.momentum) + &(across(&var.detach()) * (self.momentum * unbiased))));
            self.num_batches_tracked.assign(&(&self.num_batches_tracked + 1));
        }
        if per_device {
            let normalized = (&x_stats - &mean) * (var + self.eps).rsqrt();
            let out = normalized.reshape(&xs.iter().map(|&d| d as isize).collect::<Vec<_>>());
            let out = self.weight.as_ref().map_or(out.clone(), |w| &out * &channel_view(w, x.ndim()));
            return Ok(self.bias.as_ref().map_or(out.clone(), |b| &out + &channel_view(b, x.ndim())));
        }
        Ok(x.batchnorm(self.weight.as_ref(), self.bias.as_ref(), &mean, &(var + self.eps).rsqrt()))
    }
}

/// Normalization over the last `normalized_shape.len()` axes, with an elementwise affine part.
pub struct LayerNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub axes: usize,
    pub eps: f64,
}
module!(LayerNorm { weight, bias });

impl LayerNorm {
    pub fn new(normalized_shape: &[usize], eps: f64, affine: bool) -> LayerNorm {
        LayerNorm {
            weight: affine.then(|| filled(normalized_shape, 1.0)),
            bias: affine.then(|| filled(normalized_shape, 0.0)),
            axes: normalized_shape.len(),
            eps,
        }
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input that does not end in the normalized shape is `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let xs = x.shape();
        let normalized = self.weight.as_ref().map(Tensor::shape);
        ensure(
            xs.len() >= self.axes && normalized.as_ref().is_none_or(|n| xs[xs.len() - self.axes..] == n[..]),
            || {
                let want = normalized.map_or(format!("({} axes)", self.axes), |n| format!("{n:?}"));
                Error::shape("LayerNorm", &[&xs], format!("the input must end in the normalized shape {want}"))
            },
        )?;
        let axes: Vec<isize> = (0..self.axes as isize).map(|i| -1 - i).collect();
        let y = x.try_layernorm(axes.as_slice(), self.eps)?;
        Ok(match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => &y * w + b,
            _ => y,
        })
    }
}

/// tinygrad's `LayerNorm2d`: a `LayerNorm` over the channels of `[N, C, H, W]` (`LayerNorm::new(&[C], ..)`).
pub type LayerNorm2d = LayerNorm;

impl LayerNorm {
    /// `forward` over axis 1, the channels of `[N, C, H, W]` (tinygrad's `LayerNorm2d`).
    pub fn forward_2d(&self, x: &Tensor) -> Tensor {
        self.try_forward_2d(x).or_panic()
    }
    /// `forward_2d`; an input that is not `[N, C, H, W]` with this layer's channels is
    /// `Error::Shape`.
    pub fn try_forward_2d(&self, x: &Tensor) -> Result<Tensor> {
        let xs = x.shape();
        ensure(xs.len() == 4, || Error::shape("LayerNorm2d", &[&xs], "the input must be [N, C, H, W]"))?;
        let channels_last = x.permute(&[0, 2, 3, 1]);
        Ok(self.try_forward(&channels_last).map_err(|e| e.for_op("LayerNorm2d"))?.permute(&[0, 3, 1, 2]))
    }
}

/// Root-mean-square normalization over the last axis.
pub struct RMSNorm {
    pub weight: Option<Tensor>,
    pub eps: f64,
}
module!(RMSNorm { weight });

impl RMSNorm {
    pub fn new(dim: usize, eps: f64, affine: bool) -> RMSNorm {
        RMSNorm { weight: affine.then(|| filled(&[dim], 1.0)), eps }
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input without a feature axis, or not ending in this layer's features, is
    /// `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let xs = x.shape();
        let features = self.weight.as_ref().map(Tensor::numel);
        ensure(!xs.is_empty() && features.is_none_or(|d| xs.last() == Some(&d)), || {
            let want = features.map_or("a feature axis".into(), |d| format!("{d} features"));
            Error::shape("RMSNorm", &[&xs], format!("the input must end in {want}"))
        })?;
        let y = x * &(x * x).mean(-1isize, true).add(self.eps).rsqrt();
        Ok(match &self.weight {
            Some(w) => &y * w,
            None => y,
        })
    }
}

/// Normalization of each group of channels (`InstanceNorm` is one group per channel).
pub struct GroupNorm {
    pub weight: Option<Tensor>,
    pub bias: Option<Tensor>,
    pub groups: usize,
    pub eps: f64,
}
module!(GroupNorm { weight, bias });

/// tinygrad's `InstanceNorm`: a `GroupNorm` with one group per channel.
pub type InstanceNorm = GroupNorm;

impl GroupNorm {
    pub fn new(groups: usize, channels: usize, eps: f64, affine: bool) -> GroupNorm {
        assert!(
            groups > 0 && channels.is_multiple_of(groups),
            "GroupNorm: {channels} channels do not split into {groups} groups"
        );
        GroupNorm {
            weight: affine.then(|| filled(&[channels], 1.0)),
            bias: affine.then(|| filled(&[channels], 0.0)),
            groups,
            eps,
        }
    }
    /// One group per channel.
    pub fn instance(channels: usize, eps: f64, affine: bool) -> GroupNorm {
        GroupNorm::new(channels, channels, eps, affine)
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        self.try_forward(x).or_panic()
    }
    /// `forward`; an input that is not `[N, C, ...]` with this layer's channels in its groups is
    /// `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let shape = x.shape();
        let channels = self.weight.as_ref().map(Tensor::numel);
        ensure(
            shape.len() >= 2 && shape[1].is_multiple_of(self.groups) && channels.is_none_or(|c| shape[1] == c),
            || {
                let c = channels.map_or("channels".into(), |c| c.to_string());
                Error::shape(
                    "GroupNorm",
                    &[&shape],
                    format!("the input must be [N, C, ...] with C {c} in {} groups", self.groups),
                )
            },
        )?;
        let y = x.reshape(&[shape[0] as isize, self.groups as isize, -1]).layernorm(-1isize, self.eps).reshape(&shape);
        Ok(match (&self.weight, &self.bias) {
            (Some(w), Some(b)) => &y * &channel_view(w, shape.len()) + &channel_view(b, shape.len()),
            _ => y,
        })
    }
}

/// A lookup table of `vocab_size` vectors of size `embed_size`.
pub struct Embedding {
    pub weight: Tensor,
}
module!(Embedding { weight });

impl Embedding {
    pub fn new(vocab_size: usize, embed_size: usize) -> Embedding {
        Embedding { weight: Tensor::glorot_uniform(&[vocab_size, embed_size]) }
    }
    /// Rows of the table for integer indices of any shape (output shape: `[..., embed_size]`).
    /// As in tinygrad, nothing is read on the host: an index outside the table gives a row of
    /// zeros. The lookup is tinygrad's sum over the rows of `where(row == idx, weight, 0)`,
    /// which reduce folding turns into a gather (one read per element, no arithmetic).
    pub fn forward(&self, idx: &Tensor) -> Tensor {
        self.try_forward(idx).or_panic()
    }
    /// `forward`; indices that are not integers are `Error::DTypes`.
    pub fn try_forward(&self, idx: &Tensor) -> Result<Tensor> {
        let vocab = self.weight.shape()[0];
        ensure(idx.dtype().is_int(), || Error::DTypes {
            op: "Embedding",
            dtypes: vec![idx.dtype()],
            reason: format!("indices into {vocab} rows must be an integer tensor (shape {:?})", idx.shape()),
        })?;
        let rows = Tensor::arange(vocab).to(idx.device());
        let selected = idx.unsqueeze(-1).eq(&rows).unsqueeze(-1);
        Ok(selected.where_(&self.weight, 0.0).sum(-2isize, false))
    }
}

/// One step of a long short-term memory cell.
pub struct LSTMCell {
    pub weight_ih: Tensor,
    pub weight_hh: Tensor,
    pub bias_ih: Option<Tensor>,
    pub bias_hh: Option<Tensor>,
}
module!(LSTMCell { weight_ih, weight_hh, bias_ih, bias_hh });

impl LSTMCell {
    pub fn new(input_size: usize, hidden_size: usize, bias: bool) -> LSTMCell {
        let std = 1.0 / (hidden_size as f64).sqrt();
        LSTMCell {
            weight_ih: Tensor::uniform(&[hidden_size * 4, input_size], -std, std),
            weight_hh: Tensor::uniform(&[hidden_size * 4, hidden_size], -std, std),
            bias_ih: bias.then(|| filled(&[hidden_size * 4], 0.0)),
            bias_hh: bias.then(|| filled(&[hidden_size * 4], 0.0)),
        }
    }
    /// The new `(h, c)` from input `x` `[batch, input]` and the previous state (zeros if none).
    pub fn forward(&self, x: &Tensor, hc: Option<(&Tensor, &Tensor)>) -> (Tensor, Tensor) {
        self.try_forward(x, hc).or_panic()
    }
    /// `forward`; an input that is not `[batch, input]`, or a state that is not `[batch,
    /// hidden]`, is `Error::Shape`.
    pub fn try_forward(&self, x: &Tensor, hc: Option<(&Tensor, &Tensor)>) -> Result<(Tensor, Tensor)> {
        let (hidden, input) = (self.weight_hh.shape()[1], self.weight_ih.shape()[1]);
        let xs = x.shape();
        ensure(xs.len() == 2 && xs[1] == input, || {
            Error::shape("LSTMCell", &[&xs], format!("the input must be [batch, {input}]"))
        })?;
        let zeros = Tensor::zeros(&[xs[0], hidden]);
        let (h, c) = hc.unwrap_or((&zeros, &zeros));
        let state = [xs[0], hidden];
        ensure(h.shape() == state && c.shape() == state, || {
            Error::shape("LSTMCell", &[&xs, &h.shape(), &c.shape()], format!("the state h and c must be {state:?}"))
        })?;
        let gates =
            x.linear(&self.weight_ih.T(), self.bias_ih.as_ref()) + h.linear(&self.weight_hh.T(), self.bias_hh.as_ref());
        let batch = gates.shape()[0];
        let gate = |k: usize| gates.shrink(&[(0, batch), (k * hidden, (k + 1) * hidden)]);
        let (i, f, g, o) = (gate(0).sigmoid(), gate(1).sigmoid(), gate(2).tanh(), gate(3).sigmoid());
        let c = &f * c + &(&i * &g);
        let h = &o * &c.tanh();
        Ok((h.contiguous(), c.contiguous()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_padding_splits_the_odd_pad_after_last_axis_first() {
        // kernel (3, 4): height pads 2 as (1, 1), width 3 as (1, 2); listed width first
        assert_eq!(same_padding(&[3, 4], &Spatial(vec![1])).0, [1, 2, 1, 1]);
        assert_eq!(same_padding(&[3], &Spatial(vec![2])).0, [2, 2]);
        let conv = Conv2d::new(
            1,
            1,
            [3, 4],
            ConvOpts { padding: same_padding(&[3, 4], &1.into()), ..Default::default() },
            false,
        );
        assert_eq!(conv.forward(&Tensor::ones(&[1, 1, 5, 7])).shape(), [1, 1, 5, 7]);
    }

    #[test]
    fn an_embedding_gives_zeros_outside_its_table() {
        let table = Embedding { weight: Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]) };
        let rows = table.forward(&Tensor::new([1, 5, -1, 0]));
        assert_eq!(rows.to_vec::<f32>(), [3.0, 4.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0]);
    }

    #[test]
    fn layernorm_2d_normalizes_each_pixel_over_its_channels() {
        let norm = LayerNorm2d::new(&[2], 0.0, false);
        let x = Tensor::new([[[[1.0f32, 5.0]], [[3.0, 7.0]]]]); // [1, 2, 1, 2]
        assert_eq!(norm.forward_2d(&x).to_vec::<f32>(), [-1.0, -1.0, 1.0, 1.0]);
    }
}
