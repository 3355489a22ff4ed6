//! Element types as tinygrad's Python API names them (`dtypes.float`), and numpy's names.

use ::lazygrad::DType;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// An element type, named as tinygrad names it (`dtypes.float`, `dtypes.int`).
#[pyclass(name = "DType", module = "lazygrad", frozen, eq)]
#[derive(Clone, PartialEq)]
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
    fn __repr__(&self) -> String {
        format!("dtypes.{}", self.0.name())
    }
}

/// The element types, as attributes (`dtypes.float32`, `dtypes.float`, `dtypes.int32`, ...).
#[pyclass(name = "dtypes", module = "lazygrad", frozen)]
pub(crate) struct PyDTypes;

#[pymethods]
impl PyDTypes {
    fn __getattr__(&self, name: &str) -> PyResult<PyDType> {
        let alias = match name {
            "float" => "float32",
            "double" => "float64",
            "half" => "float16",
            "int" => "int32",
            "long" => "int64",
            "char" => "int8",
            "uchar" => "uint8",
            other => other,
        };
        DType::from_name(alias).map(PyDType).ok_or_else(|| PyValueError::new_err(format!("no dtype named {name}")))
    }
}

/// numpy's name of `dtype` (bfloat16, which numpy lacks, as float32: `tolist` gives its values).
pub(crate) fn numpy_name(dtype: DType) -> &'static str {
    const NAMES: [&str; 13] = [
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
        "float32", "float64",
    ];
    match NAMES.into_iter().find(|n| DType::from_name(n) == Some(dtype)) {
        Some("bfloat16") | None => "float32",
        Some(name) => name,
    }
}

/// A dtype argument: a `DType` or its name (`"float32"`).
pub(crate) fn dtype_of(d: &Bound<PyAny>) -> PyResult<DType> {
    if let Ok(d) = d.cast::<PyDType>() {
        return Ok(d.get().0);
    }
    let name: String = d.extract()?;
    PyDTypes.__getattr__(&name).map(|d| d.0)
}
