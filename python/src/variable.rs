//! `Variable`: a symbolic integer with a range, bound to a value for a run (tinygrad's
//! `Variable('i', 1, 10).bind(5)`), which slices a tensor to a length that changes from run to
//! run without recompiling.

use ::lazygrad::uop::{BoundVar, Sint, Variable};
use pyo3::prelude::*;
use pyo3::types::{PyList, PySlice, PyTuple};

/// A symbolic integer named `name` taking values in `min..=max`.
#[pyclass(name = "Variable", module = "lazygrad", frozen)]
pub(crate) struct PyVariable(Variable);

#[pymethods]
impl PyVariable {
    #[new]
    pub(crate) fn new(name: &str, min: usize, max: usize) -> PyResult<PyVariable> {
        crate::error::checked(|| Variable::try_new(name, min, max)).map(PyVariable)
    }
    /// This variable with `value` for the next run.
    fn bind(&self, value: usize) -> PyResult<PyBoundVar> {
        crate::error::checked(|| self.0.try_bind(value)).map(PyBoundVar)
    }
    #[getter]
    fn expr(&self) -> String {
        self.0.name().to_string()
    }
    #[getter]
    fn vmin(&self) -> usize {
        self.0.range().0
    }
    #[getter]
    fn vmax(&self) -> usize {
        self.0.range().1
    }
}

/// A variable bound to a value.
#[pyclass(name = "BoundVariable", module = "lazygrad", frozen)]
pub(crate) struct PyBoundVar(pub(crate) BoundVar);

#[pymethods]
impl PyBoundVar {
    /// The variable and its value.
    fn unbind(&self) -> (PyVariable, usize) {
        (PyVariable(self.0.variable()), self.0.value())
    }
}

/// An int, a variable or a bound variable as a size.
fn sint(x: &Bound<PyAny>) -> Option<Sint> {
    if let Ok(v) = x.cast::<PyBoundVar>() {
        return Some(Sint::from(&v.get().0));
    }
    if let Ok(v) = x.cast::<PyVariable>() {
        return Some(Sint::from(&v.get().0));
    }
    x.extract::<usize>().ok().map(Sint::Int)
}

/// A shape given as sizes (numbers or one sequence) of which some are variables
/// (`empty(2, v, 4)`); None for a shape of numbers only.
pub(crate) fn symbolic_shape(shape: &Bound<PyTuple>) -> PyResult<Option<Vec<Sint>>> {
    let items: Vec<Bound<PyAny>> = match shape.len() {
        1 if shape.get_item(0)?.cast::<PyTuple>().is_ok() || shape.get_item(0)?.cast::<PyList>().is_ok() => {
            shape.get_item(0)?.try_iter()?.collect::<PyResult<_>>()?
        }
        _ => shape.iter().collect(),
    };
    if !items.iter().any(|d| d.cast::<PyVariable>().is_ok() || d.cast::<PyBoundVar>().is_ok()) {
        return Ok(None);
    }
    let dims: Option<Vec<Sint>> = items.iter().map(sint).collect();
    dims.map(Some).ok_or_else(|| crate::error::invalid(format!("shape: sizes or variables, got {shape}")))
}

/// The `[start, end)` bounds per axis of an index of step-1 slices (or one) where a bound is a
/// bound variable (`t[:i.bind(3)]`) or an axis of `dims` is symbolic (`t[:2]` of a tensor of
/// shape `(i,)`), for `shrink_sym`; None for any other index.
pub(crate) fn symbolic_slices(index: &Bound<PyAny>, dims: &[Sint]) -> Option<Vec<(Sint, Sint)>> {
    let parts: Vec<Bound<PyAny>> = match index.cast::<PyTuple>() {
        Ok(t) => t.iter().collect(),
        Err(_) => vec![index.clone()],
    };
    let mut symbolic = dims.iter().any(|d| d.as_int().is_none());
    let mut bounds = vec![];
    for (part, n) in parts.iter().zip(dims) {
        let s = part.cast::<PySlice>().ok()?;
        let mut bound = |name: &str, default: &Sint| -> Option<Sint> {
            let b = s.getattr(name).ok()?;
            if b.is_none() {
                return Some(default.clone());
            }
            symbolic |= b.cast::<PyBoundVar>().is_ok();
            sint(&b)
        };
        let step = s.getattr("step").ok()?;
        if !(step.is_none() || step.extract::<usize>().ok() == Some(1)) {
            return None;
        }
        bounds.push((bound("start", &Sint::Int(0))?, bound("stop", n)?));
    }
    if !symbolic || parts.len() > dims.len() {
        return None;
    }
    bounds.extend(dims[parts.len()..].iter().map(|n| (Sint::Int(0), n.clone())));
    Some(bounds)
}
