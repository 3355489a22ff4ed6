//! `lazygrad.helpers`: settings (`getenv`, `Context`, `DEBUG`, `DEV`), `GlobalCounters`, and the
//! platform facts tinygrad's helpers give (`OSX`, `temp`, `mv_address`), over lazygrad's `helpers`.

use ::lazygrad::helpers::{getenv as int_setting, getenv_str};
use ::lazygrad::runtime::default_device;
use ::lazygrad::{Context, GlobalCounters};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt};
use pyo3::IntoPyObjectExt;

/// A setting from the environment (or a `Context` in scope), of `default`'s type: an int, else
/// the text.
#[pyfunction]
#[pyo3(signature = (key, default=None))]
pub(crate) fn getenv(py: Python, key: &str, default: Option<&Bound<PyAny>>) -> PyResult<Py<PyAny>> {
    match default {
        Some(d) if !d.is_instance_of::<PyInt>() => match getenv_str(key) {
            Some(text) => d.get_type().call1((text,)).map(Bound::unbind),
            None => Ok(d.clone().unbind()),
        },
        d => int_setting(key, d.map(|d| d.extract()).transpose()?.unwrap_or(0)).into_py_any(py),
    }
}

/// Settings for the scope of a `with` block (`with Context(DEBUG=2, BEAM=1):`).
#[pyclass(name = "Context", module = "lazygrad.helpers", unsendable)]
pub(crate) struct PyContext {
    settings: Vec<(String, i64)>,
    active: Vec<Context>,
}

#[pymethods]
impl PyContext {
    #[new]
    #[pyo3(signature = (**kwargs))]
    fn new(kwargs: Option<&Bound<PyDict>>) -> PyResult<PyContext> {
        let settings = match kwargs {
            Some(k) => k.iter().map(|(name, v)| Ok((name.extract()?, v.extract()?))).collect::<PyResult<_>>()?,
            None => vec![],
        };
        Ok(PyContext { settings, active: vec![] })
    }
    fn __enter__(&mut self) {
        let settings: Vec<(&str, i64)> = self.settings.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        self.active.push(Context::new(&settings));
    }
    fn __exit__(&mut self, _kind: &Bound<PyAny>, _value: &Bound<PyAny>, _traceback: &Bound<PyAny>) -> bool {
        self.active.pop();
        false
    }
}

/// The device `DEV` picks, as tinygrad's `DEV` describes it: its name, and (lazygrad has one
/// interface and renderer per device) no interface or renderer variant.
#[pyclass(name = "DEV", module = "lazygrad.helpers", frozen)]
pub(crate) struct PyDev;

#[pymethods]
impl PyDev {
    #[getter]
    fn device(&self) -> String {
        default_device().split(':').next().unwrap_or_default().to_string()
    }
    #[getter]
    fn interface(&self) -> &'static str {
        ""
    }
    #[getter]
    fn renderer(&self) -> &'static str {
        ""
    }
    #[getter]
    fn arch(&self) -> &'static str {
        ""
    }
}

/// What the kernels run so far did: their count, operations, bytes moved and time.
#[pyclass(name = "GlobalCounters", module = "lazygrad.helpers", frozen)]
pub(crate) struct PyGlobalCounters;

#[pymethods]
impl PyGlobalCounters {
    #[getter]
    fn kernel_count(&self) -> u64 {
        GlobalCounters::kernel_count()
    }
    #[getter]
    fn global_ops(&self) -> u64 {
        GlobalCounters::global_ops()
    }
    #[getter]
    fn global_mem(&self) -> u64 {
        GlobalCounters::global_mem()
    }
    #[getter]
    fn time_sum_s(&self) -> f64 {
        GlobalCounters::time_sum_s()
    }
    #[getter]
    fn mem_used(&self) -> u64 {
        GlobalCounters::mem_used()
    }
    fn reset(&self) {
        GlobalCounters::reset()
    }
}

/// A path named `name` in the system's temporary folder.
#[pyfunction]
#[pyo3(signature = (name, append_user=false))]
pub(crate) fn temp(name: &str, append_user: bool) -> String {
    let _ = append_user;
    std::env::temp_dir().join(name).to_string_lossy().into_owned()
}

/// The address of the memory behind a writable buffer object (a memoryview, a bytearray, a
/// numpy array), as `Tensor.from_blob` takes it.
#[pyfunction]
pub(crate) fn mv_address(mv: &Bound<PyAny>) -> PyResult<usize> {
    let ctypes = mv.py().import("ctypes")?;
    let first = ctypes.getattr("c_char")?.call_method1("from_buffer", (mv,))?;
    ctypes.call_method1("addressof", (first,))?.extract()
}

/// `lazygrad.helpers`.
pub(crate) fn module(py: Python) -> PyResult<Bound<PyModule>> {
    let m = PyModule::new(py, "helpers")?;
    m.add_function(wrap_pyfunction!(getenv, &m)?)?;
    m.add_function(wrap_pyfunction!(temp, &m)?)?;
    m.add_function(wrap_pyfunction!(mv_address, &m)?)?;
    m.add_class::<PyContext>()?;
    m.add("DEBUG", ::lazygrad::helpers::debug())?;
    m.add("IMAGE", int_setting("IMAGE", 0))?;
    m.add("OSX", cfg!(target_os = "macos"))?;
    m.add("DEV", PyDev)?;
    m.add("GlobalCounters", PyGlobalCounters)?;
    Ok(m)
}
