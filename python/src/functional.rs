//! The functional ops with tinygrad's arguments: convolutions and poolings (sizes as ints or
//! tuples), normalization, losses, attention, and the processing ops (sort, topk, einsum,
//! interpolate, gathers and scatters).

use ::lazygrad::tensor::{ConvOpts, PoolOpts, Reduction, Scalar, ScatterReduce};
use ::lazygrad::Tensor;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

use crate::convert::{axes, number, or_ints, spatial, Rhs};
use crate::error::{checked, guard};
use crate::pytensor::{tensor_result, tensors, PyTensor};

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
        padding: crate::convert::padding(padding)?,
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
        padding: crate::convert::padding(padding)?,
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
    /// The maxima over windows, and with `return_indices` the flat index of each (a tuple).
    #[pyo3(signature = (kernel_size=None, stride=None, dilation=None, padding=None, ceil_mode=false, return_indices=false))]
    #[allow(clippy::too_many_arguments)]
    fn max_pool2d(
        &self,
        py: Python,
        kernel_size: Option<&Bound<PyAny>>,
        stride: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        ceil_mode: bool,
        return_indices: bool,
    ) -> PyResult<Py<PyAny>> {
        let [k, d, p] = or_ints(py, [kernel_size, dilation, padding], [2, 1, 0])?;
        let opts = pool_opts(&k, stride, &d, &p, ceil_mode)?;
        if return_indices {
            let (values, indices) = guard(|| self.0.max_pool2d_with_indices(&opts))?;
            return (PyTensor(values), PyTensor(indices)).into_py_any(py);
        }
        tensor_result(|| self.0.max_pool2d(&opts))?.into_py_any(py)
    }
    /// The partial inverse of `max_pool2d(return_indices=True)`: values put back at `indices`.
    #[pyo3(signature = (indices, kernel_size=None, stride=None, dilation=None, padding=None, output_size=None))]
    #[allow(clippy::too_many_arguments)]
    fn max_unpool2d(
        &self,
        py: Python,
        indices: &PyTensor,
        kernel_size: Option<&Bound<PyAny>>,
        stride: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        output_size: Option<Vec<usize>>,
    ) -> PyResult<PyTensor> {
        let [k, d, p] = or_ints(py, [kernel_size, dilation, padding], [2, 1, 0])?;
        let opts = pool_opts(&k, stride, &d, &p, false)?;
        tensor_result(|| self.0.max_unpool2d(&indices.0, &opts, output_size.as_deref()))
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
    /// One-hot vectors of `num_classes` (as jax's, no -1 to infer it: a ValueError).
    fn one_hot(&self, num_classes: isize) -> PyResult<PyTensor> {
        let n = crate::convert::size(num_classes)?;
        checked(|| self.0.try_one_hot(n)).map(PyTensor)
    }
    /// Attention of this query over `key` and `value`; `enable_gqa` repeats their heads to the
    /// query's (grouped-query attention).
    #[pyo3(signature = (key, value, attn_mask=None, dropout_p=0.0, is_causal=false, enable_gqa=false))]
    #[allow(clippy::too_many_arguments)]
    fn scaled_dot_product_attention(
        &self,
        key: &PyTensor,
        value: &PyTensor,
        attn_mask: Option<&PyTensor>,
        dropout_p: f64,
        is_causal: bool,
        enable_gqa: bool,
    ) -> PyResult<PyTensor> {
        let mask = attn_mask.map(|m| &m.0);
        tensor_result(|| {
            let heads = |t: &Tensor| match enable_gqa {
                true => t.repeat_heads(self.0.shape()[self.0.ndim().saturating_sub(3)]),
                false => t.clone(),
            };
            let out = self.0.scaled_dot_product_attention(&heads(&key.0), &heads(&value.0), mask, is_causal);
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
    /// The elements where `mask` is true; `size` fixes their count (padded with `fill_value`).
    #[pyo3(signature = (mask, size=None, fill_value=None))]
    fn masked_select(
        &self,
        mask: &PyTensor,
        size: Option<isize>,
        fill_value: Option<&Bound<PyAny>>,
    ) -> PyResult<PyTensor> {
        let (size, fill) = (size.map(crate::convert::size).transpose()?, fill(fill_value)?);
        tensor_result(|| self.0.masked_select_sized(&mask.0, size, fill))
    }
    /// The coordinates of the non-zero elements, one row each; `size` fixes the row count.
    #[pyo3(signature = (size=None, fill_value=None))]
    fn nonzero(&self, size: Option<isize>, fill_value: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let (size, fill) = (size.map(crate::convert::size).transpose()?, fill(fill_value)?);
        tensor_result(|| self.0.nonzero(size, fill))
    }
    /// Lp normalization along `dim`.
    #[pyo3(signature = (p=2.0, dim=1, eps=1e-12))]
    fn normalize(&self, p: f64, dim: isize, eps: f64) -> PyResult<PyTensor> {
        tensor_result(|| self.0.normalize(p, dim, eps))
    }
    #[pyo3(signature = (num_samples=1, replacement=false))]
    fn multinomial(&self, num_samples: usize, replacement: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.multinomial(num_samples, replacement))
    }
    /// Values along `dim` at `index` (tinygrad's and torch's `gather`).
    fn gather(&self, dim: isize, index: &PyTensor) -> PyResult<PyTensor> {
        checked(|| self.0.try_gather(dim, &index.0)).map(PyTensor)
    }
    /// This tensor with `src` (a tensor or a number) written along `dim` at `index`; a number
    /// may be added or multiplied in instead (`reduce` "add" or "multiply").
    #[pyo3(signature = (dim, index, src, reduce=None))]
    fn scatter(&self, dim: isize, index: &PyTensor, src: &Bound<PyAny>, reduce: Option<&str>) -> PyResult<PyTensor> {
        let reduce = match reduce {
            None => None,
            Some("add") => Some(ScatterReduce::Sum),
            Some("multiply") => Some(ScatterReduce::Prod),
            Some(other) => {
                return Err(PyTypeError::new_err(format!("reduce={other:?} must be one of None, 'multiply', or 'add'")))
            }
        };
        match (Rhs::of(src)?, reduce) {
            (Rhs::Tensor(t), None) => tensor_result(|| self.0.scatter(dim, &index.0, &t)),
            (Rhs::Tensor(_), Some(_)) => {
                Err(PyTypeError::new_err("non-scalar src is not supported with reduce arg. use scatter_reduce"))
            }
            (Rhs::Scalar(s), None) => tensor_result(|| self.0.scatter_value(dim, &index.0, s)),
            (Rhs::Scalar(s), Some(r)) => tensor_result(|| self.0.scatter_value_reduce(dim, &index.0, s, r)),
        }
    }
    /// `src` reduced into this tensor along `dim` at `index` with `reduce` ("sum", "prod",
    /// "mean", "amax", "amin"), this tensor's values included unless `include_self` is False.
    #[pyo3(signature = (dim, index, src, reduce, include_self=true))]
    fn scatter_reduce(
        &self,
        dim: isize,
        index: &PyTensor,
        src: &PyTensor,
        reduce: &str,
        include_self: bool,
    ) -> PyResult<PyTensor> {
        let reduce = match reduce {
            "sum" => ScatterReduce::Sum,
            "prod" => ScatterReduce::Prod,
            "mean" => ScatterReduce::Mean,
            "amax" => ScatterReduce::Amax,
            "amin" => ScatterReduce::Amin,
            other => {
                let message = format!("reduce={other:?} must be one of 'sum', 'prod', 'mean', 'amax', 'amin'");
                return Err(crate::error::invalid(message));
            }
        };
        tensor_result(|| self.0.scatter_reduce(dim, &index.0, &src.0, reduce, include_self))
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

/// tinygrad's `fill_value` argument (0 when not given).
fn fill(value: Option<&Bound<PyAny>>) -> PyResult<Scalar> {
    value.filter(|v| !v.is_none()).map(|v| number(v, "fill_value")).transpose().map(|v| v.unwrap_or(Scalar::Int(0)))
}
