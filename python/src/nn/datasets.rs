//! `lazygrad.nn.datasets.mnist`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

use crate::pytensor::PyTensor;

/// MNIST digits (or Fashion-MNIST with `fashion`) as tinygrad returns them: uint8 images
/// `[N, 1, 28, 28]` and labels `[N]`, train then test (`tools/setup.sh --demo` installs them).
#[pyfunction]
#[pyo3(signature = (fashion=false))]
pub(crate) fn mnist(fashion: bool) -> PyResult<(PyTensor, PyTensor, PyTensor, PyTensor)> {
    let m = ::lazygrad::nn::datasets::mnist(fashion).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok((PyTensor(m.x_train), PyTensor(m.y_train), PyTensor(m.x_test), PyTensor(m.y_test)))
}
