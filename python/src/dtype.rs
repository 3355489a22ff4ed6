//! Element types as tinygrad's Python API names them (`dtypes.float`), numpy's names for them,
//! and `lazygrad.dtype` (tinygrad's `DTYPES_DICT`).

use std::collections::BTreeMap;

use ::lazygrad::DType;
use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

/// An element type, named as tinygrad names it (`dtypes.float`, `dtypes.int`).
#[pyclass(name = "DType", module = "lazygrad", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct PyDType(pub(crate) DType);

#[pymethods]
impl PyDType {
    #[getter]
    fn name(&self) -> &'static str {
        self.0.name()
    }
    #[getter]
    fn itemsize(&self) -> usize {
        self.0.itemsize()
    }
    /// How many elements a vector dtype holds (1 for the scalar dtypes tensors have).
    #[getter]
    fn count(&self) -> usize {
        self.0.count as usize
    }
    fn __repr__(&self) -> String {
        format!("dtypes.{}", self.0.name())
    }
    /// The smallest value (-inf for floats).
    #[getter]
    fn min(&self, py: Python) -> PyResult<Py<PyAny>> {
        PyDTypes::min(py, &PyDType(self.0).into_pyobject(py)?.into_any())
    }
    /// The largest value (inf for floats).
    #[getter]
    fn max(&self, py: Python) -> PyResult<Py<PyAny>> {
        PyDTypes::max(py, &PyDType(self.0).into_pyobject(py)?.into_any())
    }
}

/// tinygrad's name for each dtype alias (`float` is `float32`).
const ALIASES: [(&str, &str); 12] = [
    ("float", "float32"),
    ("double", "float64"),
    ("half", "float16"),
    ("int", "int32"),
    ("long", "int64"),
    ("short", "int16"),
    ("char", "int8"),
    ("uchar", "uint8"),
    ("ushort", "uint16"),
    ("uint", "uint32"),
    ("ulong", "uint64"),
    ("bfloat16", "bfloat16"),
];

/// numpy's names of the tensor dtypes, in `DType::ALL`'s order.
const NAMES: [&str; 13] = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32",
    "float64",
];

/// The dtype tinygrad or numpy calls `name` (`float`, `float32`, `int`, `uint8` ...).
fn named(name: &str) -> Option<DType> {
    let name = ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, full)| full);
    DType::from_name(name)
}

/// The element types, as attributes (`dtypes.float32`, `dtypes.float`, `dtypes.int32`, ...) and
/// tinygrad's questions about them (`dtypes.is_float(d)`, `dtypes.min(d)`).
#[pyclass(name = "dtypes", module = "lazygrad", frozen)]
pub(crate) struct PyDTypes;

#[pymethods]
impl PyDTypes {
    fn __getattr__(&self, name: &str) -> PyResult<PyDType> {
        named(name).map(PyDType).ok_or_else(|| PyAttributeError::new_err(format!("dtypes has no dtype named {name}")))
    }
    fn __dir__(&self) -> Vec<&'static str> {
        let mut names: Vec<&str> = NAMES.iter().copied().chain(ALIASES.iter().map(|(a, _)| *a)).collect();
        names.extend(["default_float", "default_int", "is_float", "is_int", "is_unsigned", "is_bool", "min", "max"]);
        names.extend(["fields", "all", "from_py"]);
        names.sort();
        names.dedup();
        names
    }
    /// The dtype of a float tensor made from Python floats.
    #[getter]
    fn default_float(&self) -> PyDType {
        PyDType(DType::FLOAT32)
    }
    /// The dtype of an int tensor made from Python ints.
    #[getter]
    fn default_int(&self) -> PyDType {
        PyDType(DType::INT32)
    }
    #[staticmethod]
    fn is_float(d: &Bound<PyAny>) -> PyResult<bool> {
        Ok(dtype_of(d)?.is_float())
    }
    #[staticmethod]
    fn is_int(d: &Bound<PyAny>) -> PyResult<bool> {
        Ok(dtype_of(d)?.is_int())
    }
    #[staticmethod]
    fn is_unsigned(d: &Bound<PyAny>) -> PyResult<bool> {
        Ok(dtype_of(d)?.is_unsigned())
    }
    #[staticmethod]
    fn is_bool(d: &Bound<PyAny>) -> PyResult<bool> {
        Ok(dtype_of(d)?.is_bool())
    }
    /// The smallest value of `d` (-inf for floats).
    #[staticmethod]
    fn min(py: Python, d: &Bound<PyAny>) -> PyResult<Py<PyAny>> {
        let d = dtype_of(d)?;
        match () {
            _ if d.is_float() => f64::NEG_INFINITY.into_py_any(py),
            _ if d.is_bool() => false.into_py_any(py),
            _ => (d.int_range().0 as i64).into_py_any(py),
        }
    }
    /// The largest value of `d` (inf for floats).
    #[staticmethod]
    fn max(py: Python, d: &Bound<PyAny>) -> PyResult<Py<PyAny>> {
        let d = dtype_of(d)?;
        match () {
            _ if d.is_float() => f64::INFINITY.into_py_any(py),
            _ if d.is_bool() => true.into_py_any(py),
            _ => d.int_range().1.into_py_any(py),
        }
    }
    /// Every dtype by its numpy name.
    #[staticmethod]
    fn fields() -> BTreeMap<&'static str, PyDType> {
        dtypes_dict()
    }
    /// Every tensor dtype.
    #[getter]
    fn all(&self) -> Vec<PyDType> {
        DType::ALL.into_iter().map(PyDType).collect()
    }
}

/// Every tensor dtype by its numpy name (tinygrad's `DTYPES_DICT`).
pub(crate) fn dtypes_dict() -> BTreeMap<&'static str, PyDType> {
    NAMES.into_iter().zip(DType::ALL).map(|(n, d)| (n, PyDType(d))).collect()
}

/// numpy's name of `dtype`, or None where numpy has none (bfloat16).
pub(crate) fn numpy_dtype(dtype: DType) -> Option<&'static str> {
    NAMES.into_iter().find(|n| DType::from_name(n) == Some(dtype)).filter(|&n| n != "bfloat16")
}

/// The dtype of a numpy dtype object (a TypeError for kinds tensors lack: complex, objects).
pub(crate) fn from_numpy(d: &Bound<PyAny>) -> PyResult<DType> {
    let name: String = d.getattr("name")?.extract()?;
    DType::from_name(&name)
        .ok_or_else(|| PyTypeError::new_err(format!("Tensor: numpy dtype {name} has no tensor dtype")))
}

/// A dtype argument: a `DType`, its name (`"float32"`), or a numpy dtype.
pub(crate) fn dtype_of(d: &Bound<PyAny>) -> PyResult<DType> {
    if let Ok(d) = d.cast::<PyDType>() {
        return Ok(d.get().0);
    }
    if let Ok(name) = d.extract::<String>() {
        return named(&name.to_lowercase())
            .ok_or_else(|| PyAttributeError::new_err(format!("dtypes has no dtype named {name}")));
    }
    match d.getattr("name").and_then(|n| n.extract::<String>()) {
        Ok(name) if d.hasattr("itemsize")? => named(&name),
        _ => None,
    }
    .ok_or_else(|| {
        PyAttributeError::new_err(format!(
            "dtypes has no dtype {d}: give a dtypes attribute, its name or a numpy dtype"
        ))
    })
}

/// numpy's dtype for a tensor dtype (tinygrad's `_to_np_dtype`), or None where numpy has none.
#[pyfunction]
#[pyo3(name = "_to_np_dtype")]
pub(crate) fn to_np_dtype(py: Python, dtype: &Bound<PyAny>) -> PyResult<Option<Py<PyAny>>> {
    match numpy_dtype(dtype_of(dtype)?) {
        Some(name) => Ok(Some(py.import("numpy")?.getattr("dtype")?.call1((name,))?.unbind())),
        None => Ok(None),
    }
}

/// The tensor dtype of a numpy dtype (tinygrad's `_from_np_dtype`).
#[pyfunction]
#[pyo3(name = "_from_np_dtype")]
pub(crate) fn from_np_dtype(dtype: &Bound<PyAny>) -> PyResult<PyDType> {
    let d = dtype.py().import("numpy")?.getattr("dtype")?.call1((dtype,))?;
    from_numpy(&d).map(PyDType)
}
