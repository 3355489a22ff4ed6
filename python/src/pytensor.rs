//! The Python `Tensor` class over a Rust `Tensor`: its methods live in `tensor.rs` and one file per
//! group of ops; the conversions from Python values (`convert.rs`) build it too.

use ::lazygrad::Tensor;
use pyo3::prelude::*;

use crate::error::guard;

/// A lazy tensor: operations build a graph, and `realize`, `tolist`, `numpy` or `item` run it.
#[pyclass(name = "Tensor", module = "lazygrad", frozen)]
#[derive(Clone)]
pub(crate) struct PyTensor(pub(crate) Tensor);

/// The tensor `f` builds, a panic in it as its exception.
pub(crate) fn tensor_result(f: impl FnOnce() -> Tensor) -> PyResult<PyTensor> {
    guard(f).map(PyTensor)
}

/// The tensors of a list of them.
pub(crate) fn tensors(all: &[PyTensor]) -> Vec<&Tensor> {
    all.iter().map(|t| &t.0).collect()
}
