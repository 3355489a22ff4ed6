//! `TinyJit`: a Python function over tensors whose kernels lazygrad's `Jit` captures on the second
//! call and replays from the third, without running the function again (tinygrad's `TinyJit`).

use std::cell::RefCell;
use std::rc::Rc;

use ::lazygrad::{Jit, Tensor};
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::IntoPyObjectExt;

use crate::pytensor::PyTensor;

/// What the traced function left for the call that ran it: its error, and whether it returned
/// one tensor (rather than a tuple or list of them).
#[derive(Default)]
struct Outcome {
    error: Option<PyErr>,
    single: bool,
}

type Traced = Box<dyn FnMut(&[Tensor]) -> Vec<Tensor>>;

/// Wraps `fn`, whose arguments are tensors and whose result is a tensor or a tuple or list of
/// them; every call must pass the same shapes and dtypes.
#[pyclass(name = "TinyJit", module = "lazygrad", unsendable)]
pub struct PyJit {
    jit: Jit<Traced>,
    outcome: Rc<RefCell<Outcome>>,
}

/// The tensors a traced function returned.
fn returned(value: &Bound<PyAny>) -> PyResult<(Vec<Tensor>, bool)> {
    if let Ok(t) = value.cast::<PyTensor>() {
        return Ok((vec![t.get().0.clone()], true));
    }
    let items: Vec<PyTensor> =
        value.extract().map_err(|_| PyTypeError::new_err("TinyJit: return a Tensor or a tuple or list of Tensors"))?;
    Ok((items.into_iter().map(|t| t.0).collect(), false))
}

#[pymethods]
impl PyJit {
    #[new]
    fn new(f: Py<PyAny>) -> PyJit {
        let outcome = Rc::new(RefCell::new(Outcome::default()));
        let slot = outcome.clone();
        let traced: Traced = Box::new(move |inputs: &[Tensor]| {
            Python::attach(|py| {
                let args = inputs.iter().map(|t| PyTensor(t.clone()));
                let result = PyTuple::new(py, args).and_then(|args| f.bind(py).call1(args)).and_then(|r| returned(&r));
                let mut slot = slot.borrow_mut();
                match result {
                    Ok((tensors, single)) => {
                        slot.single = single;
                        tensors
                    }
                    Err(e) => {
                        slot.error = Some(e);
                        vec![]
                    }
                }
            })
        });
        PyJit { jit: Jit::new(traced), outcome }
    }

    #[pyo3(signature = (*args))]
    fn __call__(&mut self, py: Python, args: Vec<PyTensor>) -> PyResult<Py<PyAny>> {
        let inputs: Vec<Tensor> = args.into_iter().map(|t| t.0).collect();
        let outputs = crate::error::guard(|| self.jit.call(&inputs))?;
        if let Some(e) = self.outcome.borrow_mut().error.take() {
            return Err(e);
        }
        let outputs = outputs.map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let tensors = outputs.into_iter().map(PyTensor);
        match self.outcome.borrow().single {
            true => tensors.into_iter().next().expect("one output").into_py_any(py),
            false => PyTuple::new(py, tensors)?.into_py_any(py),
        }
    }
}
