//! `Device`: the default device's name and, per device, what its renderer computes in
//! (tinygrad's `Device.DEFAULT` and `Device[name].renderer.supported_dtypes()`).

use ::lazygrad::runtime::{canonical_device, default_device, get_device};
use ::lazygrad::DType;
use pyo3::prelude::*;

use crate::dtype::PyDType;
use crate::error::error;

/// A device spec from Python: a name, or a tuple or list of names (a tensor on several devices).
pub(crate) fn device_spec(device: &Bound<PyAny>) -> PyResult<String> {
    match device.extract::<String>() {
        Ok(name) => Ok(name),
        Err(_) => Ok(device.extract::<Vec<String>>()?.join(",")),
    }
}

/// A device spec as Python sees it: the name, or a tuple of names for several devices.
pub(crate) fn device_value(py: Python, spec: &str) -> PyResult<Py<PyAny>> {
    let names = ::lazygrad::runtime::device_list(spec);
    Ok(match names[..] {
        [one] => one.into_pyobject(py)?.into_any().unbind(),
        _ => pyo3::types::PyTuple::new(py, names)?.into_any().unbind(),
    })
}

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
