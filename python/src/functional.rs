//! The functional ops with tinygrad's arguments: convolutions and poolings (sizes as ints or
//! tuples), normalization, losses, attention, and the processing ops (sort, topk, einsum,
//! interpolate, gathers and scatters).

use ::lazygrad::tensor::{ConvOpts, PoolOpts, Reduction};
use ::lazygrad::Tensor;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{axes, number, or_ints, spatial, Rhs};
use crate::error::{checked, guard};
use crate::tensor::{tensor_result, tensors, PyTensor};

/// tinygrad's `reduction` argument.
fn reduction(name: &str) -> PyResult<Reduction> {
    match name {
        "mean" => Ok(Reduction::Mean),
        "sum" => Ok(Reduction::Sum),
        "none" => Ok(Reduction::None),
        other => Err(PyValueError::new_err(format!("reduction={other:?}: 'mean', 'sum' or 'none'"))),
    }
}

/// A convolution's options from tinygrad's arguments (each an int or a tuple; padding also
/// flat, last axis first).
pub(crate) fn conv_opts(
    groups: usize,
    stride: &Bound<PyAny>,
    dilation: &Bound<PyAny>,
    padding: &Bound<PyAny>,
) -> PyResult<ConvOpts> {
    Ok(ConvOpts {
        groups,
        stride: spatial(stride)?,
        dilation: spatial(dilation)?,
        padding: spatial(padding)?,
        ..ConvOpts::default()
    })
}

/// A pooling's options from tinygrad's arguments.
fn pool_opts(
    kernel_size: &Bound<PyAny>,
    stride: Option<&Bound<PyAny>>,
    dilation: &Bound<PyAny>,
    padding: &Bound<PyAny>,
    ceil_mode: bool,
) -> PyResult<PoolOpts> {
    Ok(PoolOpts {
        kernel: spatial(kernel_size)?,
        stride: stride.filter(|s| !s.is_none()).map(spatial).transpose()?,
        dilation: spatial(dilation)?,
        padding: spatial(padding)?,
        ceil_mode,
        ..PoolOpts::default()
    })
}

#[pymethods]
impl PyTensor {
    /// N-d convolution with `weight` `(cout, cin/groups, k...)`.
    #[pyo3(signature = (weight, bias=None, groups=1, stride=None, dilation=None, padding=None, dtype=None))]
    #[allow(clippy::too_many_arguments)]
    fn conv2d(
        &self,
        py: Python,
        weight: &PyTensor,
        bias: Option<&PyTensor>,
        groups: usize,
        stride: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        dtype: Option<&Bound<PyAny>>,
    ) -> PyResult<PyTensor> {
        let [stride, dilation, padding] = or_ints(py, [stride, dilation, padding], [1, 1, 0])?;
        let opts = conv_opts(groups, &stride, &dilation, &padding)?;
        let dtype = crate::convert::dtype_arg(dtype)?;
        tensor_result(|| {
            let out = self.0.conv2d(&weight.0, bias.map(|b| &b.0), &opts);
            dtype.map_or(out.clone(), |d| out.cast(d))
        })
    }
    /// Transposed convolution with `weight` `(cin, cout/groups, k...)`.
    #[pyo3(signature = (weight, bias=None, groups=1, stride=None, dilation=None, padding=None, output_padding=None))]
    #[allow(clippy::too_many_arguments)]
    fn conv_transpose2d(
        &self,
        py: Python,
        weight: &PyTensor,
        bias: Option<&PyTensor>,
        groups: usize,
        stride: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        output_padding: Option<&Bound<PyAny>>,
    ) -> PyResult<PyTensor> {
        let [stride, dilation, padding, output_padding] =
            or_ints(py, [stride, dilation, padding, output_padding], [1, 1, 0, 0])?;
        let opts =
            ConvOpts { output_padding: spatial(&output_padding)?, ..conv_opts(groups, &stride, &dilation, &padding)? };
        tensor_result(|| self.0.conv_transpose2d(&weight.0, bias.map(|b| &b.0), &opts))
    }
    #[pyo3(signature = (kernel_size=None, stride=None, dilation=None, padding=None, ceil_mode=false, count_include_pad=true))]
    #[allow(clippy::too_many_arguments)]
    fn avg_pool2d(
        &self,
        py: Python,
        kernel_size: Option<&Bound<PyAny>>,
        stride: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        ceil_mode: bool,
        count_include_pad: bool,
    ) -> PyResult<PyTensor> {
        let [k, d, p] = or_ints(py, [kernel_size, dilation, padding], [2, 1, 0])?;
        let opts = PoolOpts { count_include_pad, ..pool_opts(&k, stride, &d, &p, ceil_mode)? };
        tensor_result(|| self.0.avg_pool2d(&opts))
    }
    #[pyo3(signature = (kernel_size=None, stride=None, dilation=None, padding=None, ceil_mode=false))]
    fn max_pool2d(
        &self,
        py: Python,
        kernel_size: Option<&Bound<PyAny>>,
        stride: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        ceil_mode: bool,
    ) -> PyResult<PyTensor> {
        let [k, d, p] = or_ints(py, [kernel_size, dilation, padding], [2, 1, 0])?;
        let opts = pool_opts(&k, stride, &d, &p, ceil_mode)?;
        tensor_result(|| self.0.max_pool2d(&opts))
    }

    #[pyo3(signature = (weight, bias=None))]
    fn linear(&self, weight: &PyTensor, bias: Option<&PyTensor>) -> PyResult<PyTensor> {
        tensor_result(|| self.0.linear(&weight.0, bias.map(|b| &b.0)))
    }
    /// Normalized over `axis` (the last one by default).
    #[pyo3(signature = (axis=None, eps=1e-5))]
    fn layernorm(&self, axis: Option<&Bound<PyAny>>, eps: f64) -> PyResult<PyTensor> {
        let axes = match axis {
            None => vec![-1],
            Some(a) => axes(&self.0, Some(a))?,
        };
        tensor_result(|| self.0.layernorm(&axes[..], eps))
    }
    /// `(x - mean) * invstd * weight + bias` with the statistics along `axis` (1 by default).
    #[pyo3(signature = (weight, bias, mean, invstd, axis=None))]
    fn batchnorm(
        &self,
        weight: Option<&PyTensor>,
        bias: Option<&PyTensor>,
        mean: &PyTensor,
        invstd: &PyTensor,
        axis: Option<&Bound<PyAny>>,
    ) -> PyResult<PyTensor> {
        let axes = match axis {
            None => vec![1],
            Some(a) => axes(&self.0, Some(a))?,
        };
        tensor_result(|| self.0.batchnorm_axes(weight.map(|w| &w.0), bias.map(|b| &b.0), &mean.0, &invstd.0, &axes[..]))
    }
    #[pyo3(signature = (p=0.5))]
    fn dropout(&self, p: f64) -> PyResult<PyTensor> {
        tensor_result(|| self.0.dropout(p))
    }
    /// One-hot vectors (`num_classes` -1: one more than the largest value).
    #[pyo3(signature = (num_classes=-1))]
    fn one_hot(&self, num_classes: isize) -> PyResult<PyTensor> {
        let n = match usize::try_from(num_classes) {
            Ok(n) => n,
            Err(_) => PyTensor(guard(|| self.0.max(None::<isize>, false))?).item_usize()? + 1,
        };
        checked(|| self.0.try_one_hot(n)).map(PyTensor)
    }
    #[pyo3(signature = (key, value, attn_mask=None, dropout_p=0.0, is_causal=false))]
    fn scaled_dot_product_attention(
        &self,
        key: &PyTensor,
        value: &PyTensor,
        attn_mask: Option<&PyTensor>,
        dropout_p: f64,
        is_causal: bool,
    ) -> PyResult<PyTensor> {
        let mask = attn_mask.map(|m| &m.0);
        tensor_result(|| {
            let out = self.0.scaled_dot_product_attention(&key.0, &value.0, mask, is_causal);
            if dropout_p > 0.0 {
                out.dropout(dropout_p)
            } else {
                out
            }
        })
    }

    #[pyo3(signature = (y, reduction="mean"))]
    fn binary_crossentropy(&self, y: &PyTensor, reduction: &str) -> PyResult<PyTensor> {
        let r = self::reduction(reduction)?;
        tensor_result(|| self.0.binary_crossentropy(&y.0, r))
    }
    #[pyo3(signature = (y, reduction="mean", pos_weight=None))]
    fn binary_crossentropy_logits(
        &self,
        y: &PyTensor,
        reduction: &str,
        pos_weight: Option<&PyTensor>,
    ) -> PyResult<PyTensor> {
        let r = self::reduction(reduction)?;
        tensor_result(|| self.0.binary_crossentropy_logits(&y.0, r, pos_weight.map(|p| &p.0)))
    }
    /// Cross-entropy of these logits (classes last) against integer labels `y`.
    #[pyo3(signature = (y, ignore_index=-1, label_smoothing=0.0, reduction="mean"))]
    fn sparse_categorical_crossentropy(
        &self,
        y: &PyTensor,
        ignore_index: i64,
        label_smoothing: f64,
        reduction: &str,
    ) -> PyResult<PyTensor> {
        let r = self::reduction(reduction)?;
        tensor_result(|| self.0.sparse_categorical_crossentropy(&y.0, ignore_index, label_smoothing, r))
    }
    /// Cross-entropy of logits (classes on axis 1) against class indices or probabilities.
    #[pyo3(signature = (y, reduction="mean", label_smoothing=0.0))]
    fn cross_entropy(&self, y: &PyTensor, reduction: &str, label_smoothing: f64) -> PyResult<PyTensor> {
        let r = self::reduction(reduction)?;
        tensor_result(|| self.0.cross_entropy(&y.0, r, label_smoothing))
    }
    /// Negative log-likelihood of log-probabilities (classes on axis 1) at class indices `y`.
    #[pyo3(signature = (y, weight=None, ignore_index=None, reduction="mean"))]
    fn nll_loss(
        &self,
        y: &PyTensor,
        weight: Option<&PyTensor>,
        ignore_index: Option<i64>,
        reduction: &str,
    ) -> PyResult<PyTensor> {
        let r = self::reduction(reduction)?;
        tensor_result(|| self.0.nll_loss(&y.0, weight.map(|w| &w.0), ignore_index, r))
    }

    /// Einstein summation over `operands` (tensors as arguments or one list).
    #[staticmethod]
    #[pyo3(signature = (formula, *operands))]
    fn einsum(formula: &str, operands: &Bound<pyo3::types::PyTuple>) -> PyResult<PyTensor> {
        let all: Vec<PyTensor> = match operands.len() {
            1 if operands.get_item(0)?.cast::<PyTensor>().is_err() => operands.get_item(0)?.extract()?,
            _ => operands.extract()?,
        };
        tensor_result(|| Tensor::einsum(formula, &tensors(&all)))
    }
    /// Resize the last `len(size)` axes (`mode` "linear", "nearest" or "nearest-exact").
    #[pyo3(signature = (size, mode="linear", align_corners=false))]
    fn interpolate(&self, size: Vec<usize>, mode: &str, align_corners: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.interpolate(&size, mode, align_corners))
    }
    /// `(values, indices)` sorted along `dim`.
    #[pyo3(signature = (dim=-1, descending=false))]
    fn sort(&self, dim: isize, descending: bool) -> PyResult<(PyTensor, PyTensor)> {
        let (v, i) = guard(|| self.0.sort(dim, descending))?;
        Ok((PyTensor(v), PyTensor(i)))
    }
    #[pyo3(signature = (dim=-1, descending=false))]
    fn argsort(&self, dim: isize, descending: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.argsort(dim, descending))
    }
    /// The `k` largest (or smallest) values along `dim` and their indices.
    #[pyo3(signature = (k, dim=-1, largest=true, sorted_=true))]
    fn topk(&self, k: usize, dim: isize, largest: bool, sorted_: bool) -> PyResult<(PyTensor, PyTensor)> {
        let _ = sorted_;
        let (v, i) = guard(|| self.0.topk(k, dim, largest))?;
        Ok((PyTensor(v), PyTensor(i)))
    }
    fn masked_select(&self, mask: &PyTensor) -> PyResult<PyTensor> {
        tensor_result(|| self.0.masked_select(&mask.0))
    }
    #[pyo3(signature = (num_samples=1, replacement=false))]
    fn multinomial(&self, num_samples: usize, replacement: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.multinomial(num_samples, replacement))
    }
    /// Values along `dim` at `index` (tinygrad's and torch's `gather`).
    fn gather(&self, dim: isize, index: &PyTensor) -> PyResult<PyTensor> {
        checked(|| self.0.try_gather(dim, &index.0)).map(PyTensor)
    }
    /// This tensor with `src` (a tensor or a number) written along `dim` at `index`.
    fn scatter(&self, dim: isize, index: &PyTensor, src: &Bound<PyAny>) -> PyResult<PyTensor> {
        match Rhs::of(src)? {
            Rhs::Tensor(t) => tensor_result(|| self.0.scatter(dim, &index.0, &t)),
            Rhs::Scalar(s) => tensor_result(|| self.0.scatter_value(dim, &index.0, s)),
        }
    }
    /// `value` where `mask` is true.
    fn masked_fill(&self, mask: &PyTensor, value: &Bound<PyAny>) -> PyResult<PyTensor> {
        let value = number(value, "masked_fill")?;
        tensor_result(|| self.0.masked_fill(&mask.0, value))
    }
    #[pyo3(signature = (diagonal=0))]
    fn tril(&self, diagonal: isize) -> PyResult<PyTensor> {
        tensor_result(|| self.0.tril(diagonal))
    }
    #[pyo3(signature = (diagonal=0))]
    fn triu(&self, diagonal: isize) -> PyResult<PyTensor> {
        tensor_result(|| self.0.triu(diagonal))
    }
}

impl PyTensor {
    /// The value of a one-element integer tensor as a size.
    fn item_usize(&self) -> PyResult<usize> {
        let v = checked(|| self.0.cast(::lazygrad::DType::INT64).try_to_vec::<i64>())?;
        usize::try_from(v[0]).map_err(|_| PyValueError::new_err(format!("{} is not a size", v[0])))
    }
}
