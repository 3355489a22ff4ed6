//! Reductions over `axis` (None: every axis; an int; or a tuple), keeping the reduced axes as
//! size 1 with `keepdim`, and the scans along one axis.

use ::lazygrad::DType;
use pyo3::prelude::*;

use crate::convert::{axes, dtype_arg};
use crate::error::guard;
use crate::pytensor::{tensor_result, PyTensor};

/// Reductions over axes with `keepdim`.
macro_rules! reduce {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(#[pyo3(signature = (axis=None, keepdim=false))]
            fn $name(&self, axis: Option<&Bound<PyAny>>, keepdim: bool) -> PyResult<PyTensor> {
                let axes = axes(&self.0, axis)?;
                tensor_result(|| self.0.$name(&axes[..], keepdim))
            })*
        }
    };
}

reduce!(max, min, any, all, logsumexp);

/// Reductions that also take the dtype to compute in.
macro_rules! reduce_in {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(#[pyo3(signature = (axis=None, keepdim=false, dtype=None))]
            fn $name(
                &self,
                axis: Option<&Bound<PyAny>>,
                keepdim: bool,
                dtype: Option<&Bound<PyAny>>,
            ) -> PyResult<PyTensor> {
                let (axes, dtype) = (axes(&self.0, axis)?, dtype_arg(dtype)?);
                tensor_result(|| {
                    let x = match dtype {
                        Some(d) => self.0.cast(d),
                        None => self.0.clone(),
                    };
                    x.$name(&axes[..], keepdim)
                })
            })*
        }
    };
}

reduce_in!(sum, mean, prod);

/// Statistics with a `correction` (Bessel's, 1 by default).
macro_rules! statistic {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(#[pyo3(signature = (axis=None, keepdim=false, correction=1))]
            fn $name(&self, axis: Option<&Bound<PyAny>>, keepdim: bool, correction: usize) -> PyResult<PyTensor> {
                let axes = axes(&self.0, axis)?;
                tensor_result(|| self.0.$name(&axes[..], keepdim, correction))
            })*
        }
    };
}

statistic!(var, std);

/// Running scans along one axis.
macro_rules! scan {
    ($($name:ident),* $(,)?) => {
        #[pymethods]
        impl PyTensor {
            $(#[pyo3(signature = (axis=0))]
            fn $name(&self, axis: isize) -> PyResult<PyTensor> {
                tensor_result(|| self.0.$name(axis))
            })*
        }
    };
}

scan!(cumsum, cumprod, logcumsumexp);

#[pymethods]
impl PyTensor {
    /// `(var, mean)` in one call.
    #[pyo3(signature = (axis=None, keepdim=false, correction=1))]
    fn var_mean(
        &self,
        axis: Option<&Bound<PyAny>>,
        keepdim: bool,
        correction: usize,
    ) -> PyResult<(PyTensor, PyTensor)> {
        let axes = axes(&self.0, axis)?;
        let (v, m) = guard(|| self.0.var_mean(&axes[..], keepdim, correction))?;
        Ok((PyTensor(v), PyTensor(m)))
    }
    /// `(std, mean)` in one call.
    #[pyo3(signature = (axis=None, keepdim=false, correction=1))]
    fn std_mean(
        &self,
        axis: Option<&Bound<PyAny>>,
        keepdim: bool,
        correction: usize,
    ) -> PyResult<(PyTensor, PyTensor)> {
        let axes = axes(&self.0, axis)?;
        let (s, m) = guard(|| self.0.std_mean(&axes[..], keepdim, correction))?;
        Ok((PyTensor(s), PyTensor(m)))
    }
    #[pyo3(signature = (axis=-1, dtype=None))]
    fn softmax(&self, axis: isize, dtype: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let dtype = dtype_arg(dtype)?;
        tensor_result(|| cast_to(&self.0, dtype).softmax(axis))
    }
    #[pyo3(signature = (axis=-1, dtype=None))]
    fn softmin(&self, axis: isize, dtype: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let dtype = dtype_arg(dtype)?;
        tensor_result(|| cast_to(&self.0, dtype).softmin(axis))
    }
    #[pyo3(signature = (axis=-1, dtype=None))]
    fn log_softmax(&self, axis: isize, dtype: Option<&Bound<PyAny>>) -> PyResult<PyTensor> {
        let dtype = dtype_arg(dtype)?;
        tensor_result(|| cast_to(&self.0, dtype).log_softmax(axis))
    }
    #[pyo3(signature = (axis=None, keepdim=false))]
    fn argmax(&self, axis: Option<isize>, keepdim: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.argmax(axis, keepdim))
    }
    #[pyo3(signature = (axis=None, keepdim=false))]
    fn argmin(&self, axis: Option<isize>, keepdim: bool) -> PyResult<PyTensor> {
        tensor_result(|| self.0.argmin(axis, keepdim))
    }
    /// Running maximum along `axis` and the index where it was attained.
    #[pyo3(signature = (axis=0))]
    fn cummax(&self, axis: isize) -> PyResult<(PyTensor, PyTensor)> {
        let (v, i) = guard(|| self.0.cummax(axis))?;
        Ok((PyTensor(v), PyTensor(i)))
    }
    /// Running minimum along `axis` and the index where it was attained.
    #[pyo3(signature = (axis=0))]
    fn cummin(&self, axis: isize) -> PyResult<(PyTensor, PyTensor)> {
        let (v, i) = guard(|| self.0.cummin(axis))?;
        Ok((PyTensor(v), PyTensor(i)))
    }
    /// Whether each element is within `atol + rtol * |other|` of `other`.
    #[pyo3(signature = (other, rtol=1e-05, atol=1e-08, equal_nan=false))]
    fn isclose(&self, other: &Bound<PyAny>, rtol: f64, atol: f64, equal_nan: bool) -> PyResult<PyTensor> {
        let other = crate::convert::Rhs::of(other)?;
        tensor_result(|| self.0.isclose(&other.tensor(&self.0), rtol, atol, equal_nan))
    }
}

fn cast_to(t: &::lazygrad::Tensor, dtype: Option<DType>) -> ::lazygrad::Tensor {
    match dtype {
        Some(d) => t.cast(d),
        None => t.clone(),
    }
}
