//! `lazygrad.nn.optim`: SGD, Adam and AdamW over lazygrad's optimizers.

use ::lazygrad::nn::optim::{self, Optimizer, SGD};
use ::lazygrad::Tensor;
use pyo3::prelude::*;

use crate::error::guard;
use crate::pytensor::PyTensor;

/// An optimizer over a list of tensors (`SGD`, `Adam` and `AdamW` make one): `zero_grad()`, then
/// after `backward()`, `step()` inside `Tensor.train()`.
#[pyclass(name = "Optimizer", module = "lazygrad.nn.optim")]
pub struct PyOptimizer(Box<dyn Optimizer + Send + Sync>);

#[pymethods]
impl PyOptimizer {
    fn zero_grad(&self) {
        self.0.zero_grad()
    }
    /// One step now: every parameter (and the optimizer's state) updated in place.
    fn step(&mut self) -> PyResult<()> {
        guard(|| self.0.step())
    }
    #[getter]
    fn lr(&self) -> PyResult<f64> {
        guard(|| self.0.lr())
    }
    #[setter]
    fn set_lr(&self, lr: f64) -> PyResult<()> {
        guard(|| self.0.set_lr(lr))
    }
    /// The lazy updates of one step, to realize with the loss in one schedule:
    /// `loss.realize(*opt.schedule_step())`.
    fn schedule_step(&mut self) -> PyResult<Vec<PyTensor>> {
        Ok(guard(|| self.0.schedule_step())?.into_iter().map(PyTensor).collect())
    }
    #[getter]
    fn params(&self) -> Vec<PyTensor> {
        self.0.state().params.iter().cloned().map(PyTensor).collect()
    }
}

fn tensors(params: Vec<PyTensor>) -> Vec<Tensor> {
    params.into_iter().map(|p| p.0).collect()
}

/// Stochastic gradient descent, with momentum, weight decay and Nesterov momentum.
#[pyfunction(name = "SGD")]
#[pyo3(signature = (params, lr=0.001, momentum=0.0, weight_decay=0.0, nesterov=false))]
pub(crate) fn sgd(
    params: Vec<PyTensor>,
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
) -> PyResult<PyOptimizer> {
    let params = tensors(params);
    guard(|| PyOptimizer(Box::new(SGD::new(&params, lr, momentum, weight_decay, nesterov))))
}

/// Adam (tinygrad's defaults: b1 0.9, b2 0.999, eps 1e-8).
#[pyfunction(name = "Adam")]
#[pyo3(signature = (params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8))]
pub(crate) fn adam(params: Vec<PyTensor>, lr: f64, b1: f64, b2: f64, eps: f64) -> PyResult<PyOptimizer> {
    adamw(params, lr, b1, b2, eps, 0.0)
}

/// Adam with decoupled weight decay.
#[pyfunction(name = "AdamW")]
#[pyo3(signature = (params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01))]
pub(crate) fn adamw(
    params: Vec<PyTensor>,
    lr: f64,
    b1: f64,
    b2: f64,
    eps: f64,
    weight_decay: f64,
) -> PyResult<PyOptimizer> {
    let params = tensors(params);
    guard(|| PyOptimizer(Box::new(optim::LAMB::new(&params, lr, b1, b2, eps, weight_decay, true))))
}
