//! `lazygrad.nn.state`: the tensors a Python object holds, by name (tinygrad's walk: attributes,
//! list and tuple positions, dict keys, joined by dots), and safetensors files, over lazygrad's
//! `nn::state`.

use std::collections::BTreeMap;

use ::lazygrad::nn::state::{self, Module};
use ::lazygrad::{Error, Tensor};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use super::{
    PyBatchNorm, PyConv2d, PyConvTranspose2d, PyEmbedding, PyGroupNorm, PyLSTMCell, PyLayerNorm, PyLayerNorm2d,
    PyLinear, PyRMSNorm, Wrapped,
};
use crate::pytensor::PyTensor;

/// Tensors by dotted name, as a `Module` for lazygrad's state functions.
struct Named(Vec<(String, Tensor)>);

impl Module for Named {
    fn visit_tensors(&self, prefix: &str, f: &mut dyn FnMut(String, &Tensor)) {
        self.0.iter().for_each(|(name, t)| f(state::join_name(prefix, name), t));
    }
}

/// Objects nested deeper than this are not searched (a structure that holds itself ends here).
const MAX_DEPTH: usize = 32;

/// Adds the tensors of a layer of one kind to the list, if `obj` is one.
type Layer = fn(&Bound<PyAny>, &str, &mut Vec<(String, Tensor)>) -> bool;

const LAYERS: [Layer; 10] = [
    wrapped::<PyLinear>,
    wrapped::<PyConv2d>,
    wrapped::<PyConvTranspose2d>,
    wrapped::<PyGroupNorm>,
    wrapped::<PyLSTMCell>,
    wrapped::<PyBatchNorm>,
    wrapped::<PyLayerNorm>,
    wrapped::<PyLayerNorm2d>,
    wrapped::<PyRMSNorm>,
    wrapped::<PyEmbedding>,
];

/// The walk's state: the tensors found so far, and the objects being walked (an object met again
/// inside itself is a cycle, not walked twice).
#[derive(Default)]
struct Walk {
    out: Vec<(String, Tensor)>,
    open: Vec<usize>,
}

/// The tensors under `obj`, named from `prefix`.
fn named(obj: &Bound<PyAny>, prefix: &str, walk: &mut Walk) -> PyResult<()> {
    let id = obj.as_ptr() as usize;
    if walk.open.len() > MAX_DEPTH
        || walk.open.contains(&id)
        || LAYERS.iter().any(|layer| layer(obj, prefix, &mut walk.out))
    {
        return Ok(());
    }
    walk.open.push(id);
    if let Ok(t) = obj.cast::<PyTensor>() {
        walk.out.push((prefix.to_string(), t.get().0.clone()));
    } else if let Ok(d) = obj.cast::<PyDict>() {
        for (k, v) in d.iter() {
            named(&v, &state::join_name(prefix, &k.str()?.to_string()), walk)?;
        }
    } else if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        for (i, item) in obj.try_iter()?.enumerate() {
            named(&item?, &state::join_name(prefix, &i.to_string()), walk)?;
        }
    } else if let Ok(attrs) = obj.getattr("__dict__") {
        named(&attrs, prefix, walk)?;
    }
    walk.open.pop();
    Ok(())
}

/// Whether `obj` is a `T`, whose tensors (named under `prefix`) then join `out`.
fn wrapped<T: pyo3::PyClass + Wrapped>(obj: &Bound<PyAny>, prefix: &str, out: &mut Vec<(String, Tensor)>) -> bool {
    let Ok(layer) = obj.cast::<T>() else { return false };
    layer.borrow().module().visit_tensors(prefix, &mut |name, t| out.push((name, t.clone())));
    true
}

fn named_of(obj: &Bound<PyAny>) -> PyResult<Named> {
    let mut walk = Walk::default();
    named(obj, "", &mut walk)?;
    Ok(Named(walk.out))
}

fn runtime(e: Error) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

/// The tensors `obj` holds in order, each realized one once (tinygrad's `get_parameters`).
#[pyfunction]
pub(crate) fn get_parameters(obj: &Bound<PyAny>) -> PyResult<Vec<PyTensor>> {
    Ok(state::get_parameters(&named_of(obj)?).into_iter().map(PyTensor).collect())
}

/// The tensors `obj` holds by dotted name (`layers.0.weight`).
#[pyfunction]
pub(crate) fn get_state_dict(obj: &Bound<PyAny>) -> PyResult<BTreeMap<String, PyTensor>> {
    Ok(named_of(obj)?.0.into_iter().map(|(k, t)| (k, PyTensor(t))).collect())
}

/// Write `state_dict` into the tensors of `obj` in place; with `strict`, missing and extra keys
/// are errors (a ValueError naming them all, before anything is written).
#[pyfunction]
#[pyo3(signature = (obj, state_dict, strict=true))]
pub(crate) fn load_state_dict(
    obj: &Bound<PyAny>,
    state_dict: BTreeMap<String, PyTensor>,
    strict: bool,
) -> PyResult<()> {
    let state: BTreeMap<String, Tensor> = state_dict.into_iter().map(|(k, t)| (k, t.0)).collect();
    let model = named_of(obj)?;
    crate::error::checked(|| state::load_state_dict(&model, &state, strict))
}

/// Save tensors by name to a safetensors file.
#[pyfunction]
pub(crate) fn safe_save(tensors: BTreeMap<String, PyTensor>, path: &str) -> PyResult<()> {
    let tensors: BTreeMap<String, Tensor> = tensors.into_iter().map(|(k, t)| (k, t.0)).collect();
    crate::error::guard(|| state::safe_save(&tensors, path))?.map_err(runtime)
}

/// The tensors of a safetensors file by name (a corrupt file is a RuntimeError naming it).
#[pyfunction]
pub(crate) fn safe_load(path: &str) -> PyResult<BTreeMap<String, PyTensor>> {
    let loaded = crate::error::guard(|| state::safe_load(path))?.map_err(runtime)?;
    Ok(loaded.into_iter().map(|(k, t)| (k, PyTensor(t))).collect())
}
