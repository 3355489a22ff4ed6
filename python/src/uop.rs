//! `UOp`: a node of the graph behind a tensor (tinygrad's `Tensor.uop`), to read: its op (a name
//! `Ops` gives), the node it views (`base`), its device and the device buffer it is (`buffer`);
//! constants and casts to make a tensor of, and `UOp.variable`, tinygrad's way to make a
//! `Variable`.

use std::sync::Arc;

use ::lazygrad::runtime::view_buffer;
use ::lazygrad::runtime::Buffer;
use ::lazygrad::UOp;
use pyo3::exceptions::{PyAttributeError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

use crate::variable::PyVariable;

/// A node of the graph: tinygrad's `UOp`, read-only. One Python object per node while it is
/// referenced (`PyUOp::of`), so `is` tells whether two tensors stand for one node.
#[pyclass(name = "UOp", module = "lazygrad", frozen, weakref)]
pub(crate) struct PyUOp(pub(crate) UOp);

/// The live `UOp` objects by node serial (a `weakref.WeakValueDictionary`).
static LIVE_UOPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl PyUOp {
    /// The one `UOp` object of node `uop`.
    pub(crate) fn of(py: Python, uop: UOp) -> PyResult<Py<PyUOp>> {
        one_object(py, &LIVE_UOPS, uop.serial(), || PyUOp(uop))
    }
}

/// The one live Python object of `key` in `table` (a `weakref.WeakValueDictionary`, made at first
/// use), else `make()`'s, registered there: so that `is` holds between two reads of one thing.
fn one_object<T: pyo3::PyClass + Into<PyClassInitializer<T>>>(
    py: Python,
    table: &PyOnceLock<Py<PyAny>>,
    key: u64,
    make: impl FnOnce() -> T,
) -> PyResult<Py<T>> {
    let live = table.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
        Ok(py.import("weakref")?.getattr("WeakValueDictionary")?.call0()?.unbind())
    })?;
    let live = live.bind(py);
    if let Ok(found) = live.call_method1("get", (key,))?.cast::<T>() {
        return Ok(found.clone().unbind());
    }
    let made = Py::new(py, make())?;
    live.set_item(key, &made)?;
    Ok(made)
}

#[pymethods]
impl PyUOp {
    /// A symbolic integer in `min..=max` (tinygrad's `UOp.variable`): lazygrad's `Variable`.
    #[staticmethod]
    fn variable(name: &str, min: usize, max: usize) -> PyResult<PyVariable> {
        PyVariable::new(name, min, max)
    }
    /// A constant (of the value's dtype: float32, int32 or bool), put on the default device when a
    /// tensor is made of it (`Tensor(UOp.const(2.0))`).
    #[staticmethod]
    fn r#const(py: Python, value: &Bound<PyAny>) -> PyResult<Py<PyUOp>> {
        let v = crate::convert::number(value, "UOp.const")?;
        PyUOp::of(py, UOp::constant(v.default_dtype(), v.value()))
    }
    /// This node cast to `dtype`.
    fn cast(&self, py: Python, dtype: &Bound<PyAny>) -> PyResult<Py<PyUOp>> {
        let dtype = crate::convert::dtype_arg(Some(dtype))?.unwrap_or(self.0.dtype());
        PyUOp::of(py, self.0.cast(dtype))
    }
    /// The device the node's graph names (a buffer's, a copy's, a device constant's; a tuple of
    /// names on several devices), or None for a graph of constants only (tinygrad's `device`).
    #[getter]
    fn device(&self, py: Python) -> PyResult<Py<PyAny>> {
        match ::lazygrad::schedule::graph_device(&self.0) {
            Some(device) => crate::device::device_value(py, &device),
            None => Ok(py.None()),
        }
    }
    /// The op's name (`"BUFFER"`, `"ADD"`, ...), the very string `Ops` gives for it, so
    /// `uop.op is Ops.SINK` holds as in tinygrad.
    #[getter]
    fn op<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        PyString::intern(py, &self.0.op().name())
    }
    /// The axis a tensor on several devices is split along (None: replicated, or on one device).
    #[getter]
    fn axis(&self) -> Option<usize> {
        ::lazygrad::schedule::multi_axis(&self.0)
    }
    /// The node under the movement ops: what this node views.
    #[getter]
    fn base(&self, py: Python) -> PyResult<Py<PyUOp>> {
        PyUOp::of(py, self.0.base())
    }
    /// Whether this node is a device buffer (or a reshape of one).
    fn has_buffer_identity(&self) -> bool {
        view_buffer(&self.0).is_some()
    }
    /// The device buffer this node is; a RuntimeError for a node that is none (not stored yet).
    #[getter]
    fn buffer(&self, py: Python) -> PyResult<Py<PyBuffer>> {
        match view_buffer(&self.0) {
            Some(buffer) => PyBuffer::of(py, buffer),
            None => Err(PyRuntimeError::new_err(format!("a {} node is no buffer", self.0.op().name()))),
        }
    }
    pub(crate) fn __repr__(&self) -> String {
        match self.0.shape() {
            Some(shape) => format!("<UOp {} {shape:?}>", self.0.op().name()),
            None => format!("<UOp {}>", self.0.op().name()),
        }
    }
}

/// tinygrad's `Ops`: `Ops.SINK` is the name `"SINK"` (interned, as `UOp.op` gives it).
#[pyclass(name = "Ops", module = "lazygrad", frozen)]
pub(crate) struct PyOps;

#[pymethods]
impl PyOps {
    fn __getattr__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyString>> {
        let is_name = name.starts_with(|c: char| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        match is_name {
            true => Ok(PyString::intern(py, name)),
            false => Err(PyAttributeError::new_err(format!("Ops has no {name}: op names are upper case"))),
        }
    }
}

/// A device buffer: one Python object per buffer while it is referenced, so `is` tells whether
/// two tensors share storage.
#[pyclass(name = "Buffer", module = "lazygrad", frozen, weakref)]
pub(crate) struct PyBuffer(Arc<Buffer>);

/// The live `Buffer` objects by buffer id (a `weakref.WeakValueDictionary`).
static LIVE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

impl PyBuffer {
    /// The one `Buffer` object of `buffer`.
    fn of(py: Python, buffer: Arc<Buffer>) -> PyResult<Py<PyBuffer>> {
        one_object(py, &LIVE, buffer.id(), || PyBuffer(buffer))
    }
}

#[pymethods]
impl PyBuffer {
    #[getter]
    fn device(&self) -> &str {
        self.0.device()
    }
    /// Number of elements.
    #[getter]
    fn size(&self) -> usize {
        self.0.size()
    }
    #[getter]
    fn nbytes(&self) -> usize {
        self.0.nbytes()
    }
    fn __repr__(&self) -> String {
        format!("<buf {} size:{} {:?}>", self.0.device(), self.0.size(), self.0.dtype())
    }
}
