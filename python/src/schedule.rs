//! Schedules as tinygrad's tests inspect them: `Tensor.linear_with_vars` gives the kernels and
//! copies that compute tensors (a `Linear` of calls, each with its device and its AST, a SINK for
//! a kernel), and `run_linear` runs them (`lazygrad.engine`, tinygrad's `tinygrad.engine.realize`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use ::lazygrad::engine::ScheduleItem;
use ::lazygrad::schedule::VarVals;
use ::lazygrad::uop::{Arg, Ops};
use ::lazygrad::{Tensor, UOp};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::error::checked;
use crate::pytensor::PyTensor;
use crate::uop::PyUOp;

/// The items of a schedule, to run once, and the values of its variables.
#[pyclass(name = "Linear", module = "lazygrad", frozen)]
pub(crate) struct PyLinear {
    items: Mutex<Option<Vec<ScheduleItem>>>,
    calls: Py<PyTuple>,
    vals: VarVals,
}

/// One item of a schedule: the device it runs on and its AST (`src[0]`: a SINK for a kernel, a
/// COPY for a copy).
#[pyclass(name = "Call", module = "lazygrad", frozen)]
pub(crate) struct PyCall {
    #[pyo3(get)]
    device: String,
    #[pyo3(get)]
    src: Py<PyTuple>,
}

impl PyCall {
    fn of(py: Python, item: &ScheduleItem) -> PyResult<PyCall> {
        let (device, ast) = match item {
            ScheduleItem::Kernel { ast, bufs } => {
                (bufs.first().map_or(String::new(), |b| b.device().to_string()), ast.root().clone())
            }
            // an all-reduce over the ranks is a copy through the job's collective
            ScheduleItem::Copy { dst, src, ranks } => {
                let copy = match ranks {
                    None => UOp::new(Ops::Copy, dst.dtype(), vec![], Arg::Str(src.device().to_string())),
                    Some(op) => UOp::new(Ops::AllReduce, dst.dtype(), vec![], Arg::Reduce(*op)),
                };
                (dst.device().to_string(), copy)
            }
        };
        Ok(PyCall { device, src: PyTuple::new(py, [PyUOp(ast)])?.unbind() })
    }
}

#[pymethods]
impl PyLinear {
    /// The calls, in the order they run.
    #[getter]
    fn src(&self, py: Python) -> Py<PyTuple> {
        self.calls.clone_ref(py)
    }
}

#[pymethods]
impl PyTensor {
    /// The schedule that computes this tensor and `others` (tinygrad's `linear_with_vars`): a
    /// `Linear` and the values of the variables bound in the graph. The tensors point at the
    /// buffers it fills, so `run_linear` realizes them.
    #[pyo3(signature = (*others))]
    fn linear_with_vars(&self, py: Python, others: Vec<PyTensor>) -> PyResult<(PyLinear, BTreeMap<String, i64>)> {
        let tensors: Vec<Tensor> = std::iter::once(self.0.clone()).chain(others.into_iter().map(|t| t.0)).collect();
        let (items, vals) = checked(|| Tensor::linear_with_vars(&tensors))?;
        let calls: Vec<PyCall> = items.iter().map(|item| PyCall::of(py, item)).collect::<PyResult<_>>()?;
        let calls = PyTuple::new(py, calls)?.unbind();
        Ok((PyLinear { items: Mutex::new(Some(items)), calls, vals: vals.clone() }, vals))
    }
}

/// Run a schedule's items once (tinygrad's `run_linear`), its variables at `var_vals` when given.
#[pyfunction]
#[pyo3(signature = (linear, var_vals=None))]
fn run_linear(linear: &PyLinear, var_vals: Option<VarVals>) -> PyResult<()> {
    let items = linear.items.lock().unwrap_or_else(|e| e.into_inner()).take();
    let items = items.ok_or_else(|| PyRuntimeError::new_err("run_linear: this schedule has run already"))?;
    checked(|| Tensor::run_linear(items, var_vals.as_ref().unwrap_or(&linear.vals)))
}

/// tinygrad's `compile_linear`: the schedule itself, since lazygrad compiles each kernel (once,
/// then from its cache) when it runs.
#[pyfunction]
fn compile_linear(linear: Bound<PyLinear>) -> Bound<PyLinear> {
    linear
}

/// `lazygrad.engine`: `run_linear` and `compile_linear`.
pub(crate) fn module(py: Python) -> PyResult<Bound<PyModule>> {
    let m = PyModule::new(py, "engine")?;
    m.add_function(wrap_pyfunction!(run_linear, &m)?)?;
    m.add_function(wrap_pyfunction!(compile_linear, &m)?)?;
    m.add_class::<PyLinear>()?;
    m.add_class::<PyCall>()?;
    Ok(m)
}
