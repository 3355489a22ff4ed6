//! `Device`: the default device's name and, per device, what its renderer computes in
//! (tinygrad's `Device.DEFAULT` and `Device[name].renderer.supported_dtypes()`).

use ::lazygrad::runtime::{canonical_device, default_device, get_device};
use ::lazygrad::DType;
use pyo3::prelude::*;

use crate::dtype::PyDType;
use crate::error::error;

/// The devices by name.
#[pyclass(name = "Device", module = "lazygrad", frozen)]
pub(crate) struct PyDevices;

#[pymethods]
impl PyDevices {
    /// The device tensors go to unless told otherwise (`DEV`, else the first available).
    #[getter(DEFAULT)]
    fn default(&self) -> String {
        default_device()
    }
    /// A device's canonical name (`cpu` is `CPU`).
    fn canonicalize(&self, name: &str) -> String {
        canonical_device(name)
    }
    /// The device called `name`, opened (a RuntimeError if it cannot be).
    fn __getitem__(&self, name: &str) -> PyResult<PyDevice> {
        let device = get_device(name).map_err(error)?;
        let target = device.target();
        let dtypes = DType::ALL.into_iter().filter(|&d| target.computes_in(d)).map(PyDType).collect();
        Ok(PyDevice { name: canonical_device(name), renderer: PyRenderer { dtypes } })
    }
}

/// One device: its name and its renderer.
#[pyclass(name = "Compiled", module = "lazygrad", frozen)]
pub(crate) struct PyDevice {
    #[pyo3(get)]
    name: String,
    #[pyo3(get)]
    renderer: PyRenderer,
}

/// What a device's renderer can compute in.
#[pyclass(name = "Renderer", module = "lazygrad", frozen)]
#[derive(Clone)]
pub(crate) struct PyRenderer {
    dtypes: Vec<PyDType>,
}

#[pymethods]
impl PyRenderer {
    fn supported_dtypes(&self) -> Vec<PyDType> {
        self.dtypes.clone()
    }
}
