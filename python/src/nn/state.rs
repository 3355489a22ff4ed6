//! `lazygrad.nn.state.get_parameters`.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::{PyBatchNorm, PyConv2d, PyLinear};
use crate::tensor::PyTensor;

/// The tensors an object holds, as tinygrad's `get_parameters` finds them: the object itself, a
/// layer's weight and bias, and what lists, tuples, dicts and other objects' attributes hold, in
/// order.
#[pyfunction]
pub(crate) fn get_parameters(obj: &Bound<PyAny>) -> PyResult<Vec<PyTensor>> {
    let mut found = vec![];
    collect(obj, &mut found, 0)?;
    Ok(found)
}

/// Objects nested deeper than this are not searched (a structure that holds itself ends here).
const MAX_DEPTH: usize = 32;

fn collect(obj: &Bound<PyAny>, found: &mut Vec<PyTensor>, depth: usize) -> PyResult<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    if let Ok(t) = obj.cast::<PyTensor>() {
        found.push(t.get().clone());
    } else if let Ok(l) = obj.cast::<PyLinear>() {
        let l = l.borrow();
        found.push(l.weight.clone());
        found.extend(l.bias.clone());
    } else if let Ok(c) = obj.cast::<PyConv2d>() {
        let c = c.borrow();
        found.push(c.weight.clone());
        found.extend(c.bias.clone());
    } else if let Ok(b) = obj.cast::<PyBatchNorm>() {
        found.extend(b.borrow().tensors());
    } else if let Ok(d) = obj.cast::<PyDict>() {
        for v in d.values() {
            collect(&v, found, depth + 1)?;
        }
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        for item in obj.try_iter()? {
            collect(&item?, found, depth + 1)?;
        }
    } else if let Ok(attrs) = obj.getattr("__dict__") {
        collect(&attrs, found, depth + 1)?;
    }
    Ok(())
}
