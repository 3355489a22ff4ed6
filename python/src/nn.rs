//! `lazygrad.nn`: layers, `nn.optim`'s optimizers and `nn.state.get_parameters`, with tinygrad's
//! names over lazygrad's `nn`.

use ::lazygrad::nn::datasets;
use ::lazygrad::nn::layers::{BatchNorm, Conv2d, Linear};
use ::lazygrad::nn::optim::{self, Optimizer, SGD};
use ::lazygrad::tensor::ConvOpts;
use ::lazygrad::Tensor;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::{guard, PyTensor};

/// `x @ weight.T + bias`, its weight and bias initialized as tinygrad's (and torch's) are.
#[pyclass(name = "Linear", module = "lazygrad.nn")]
pub struct PyLinear {
    #[pyo3(get, set)]
    weight: PyTensor,
    #[pyo3(get, set)]
    bias: Option<PyTensor>,
}

#[pymethods]
impl PyLinear {
    #[new]
    #[pyo3(signature = (in_features, out_features, bias=true))]
    fn new(in_features: usize, out_features: usize, bias: bool) -> PyResult<PyLinear> {
        let l = guard(|| Linear::new(in_features, out_features, bias))?;
        Ok(PyLinear { weight: PyTensor(l.weight), bias: l.bias.map(PyTensor) })
    }
    fn __call__(&self, x: &PyTensor) -> PyResult<PyTensor> {
        let layer = Linear { weight: self.weight.0.clone(), bias: self.bias.as_ref().map(|b| b.0.clone()) };
        guard(|| PyTensor(layer.forward(&x.0)))
    }
}

/// A 2-D convolution over `[N, C, H, W]`, initialized as tinygrad's is.
#[pyclass(name = "Conv2d", module = "lazygrad.nn")]
pub struct PyConv2d {
    #[pyo3(get, set)]
    weight: PyTensor,
    #[pyo3(get, set)]
    bias: Option<PyTensor>,
    opts: ConvOpts,
}

#[pymethods]
impl PyConv2d {
    #[new]
    #[pyo3(signature = (in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
        bias: bool,
    ) -> PyResult<PyConv2d> {
        let opts = ConvOpts {
            groups,
            stride: stride.into(),
            dilation: dilation.into(),
            padding: padding.into(),
            ..ConvOpts::default()
        };
        let c = guard(|| Conv2d::new(in_channels, out_channels, kernel_size, opts.clone(), bias))?;
        Ok(PyConv2d { weight: PyTensor(c.weight), bias: c.bias.map(PyTensor), opts })
    }
    fn __call__(&self, x: &PyTensor) -> PyResult<PyTensor> {
        let conv = Conv2d {
            weight: self.weight.0.clone(),
            bias: self.bias.as_ref().map(|b| b.0.clone()),
            opts: self.opts.clone(),
        };
        guard(|| PyTensor(conv.forward(&x.0)))
    }
}

/// Batch normalization over axis 1: batch statistics inside `Tensor.train()` (updating the
/// running ones), the running statistics outside.
#[pyclass(name = "BatchNorm", module = "lazygrad.nn")]
pub struct PyBatchNorm(BatchNorm);

#[pymethods]
impl PyBatchNorm {
    #[new]
    #[pyo3(signature = (sz, eps=1e-5, affine=true, track_running_stats=true, momentum=0.1))]
    fn new(sz: usize, eps: f64, affine: bool, track_running_stats: bool, momentum: f64) -> PyResult<PyBatchNorm> {
        guard(|| PyBatchNorm(BatchNorm::new(sz, eps, affine, track_running_stats, momentum)))
    }
    fn __call__(&self, x: &PyTensor) -> PyResult<PyTensor> {
        guard(|| PyTensor(self.0.forward(&x.0)))
    }
    #[getter]
    fn weight(&self) -> Option<PyTensor> {
        self.0.weight.clone().map(PyTensor)
    }
    #[getter]
    fn bias(&self) -> Option<PyTensor> {
        self.0.bias.clone().map(PyTensor)
    }
    #[getter]
    fn running_mean(&self) -> Option<PyTensor> {
        self.0.running_mean.clone().map(PyTensor)
    }
    #[getter]
    fn running_var(&self) -> Option<PyTensor> {
        self.0.running_var.clone().map(PyTensor)
    }
}

impl PyBatchNorm {
    /// Its tensors in tinygrad's state order: the learned ones, then the running statistics.
    fn tensors(&self) -> Vec<PyTensor> {
        let b = &self.0;
        [&b.weight, &b.bias, &b.running_mean, &b.running_var]
            .into_iter()
            .flatten()
            .chain([&b.num_batches_tracked])
            .cloned()
            .map(PyTensor)
            .collect()
    }
}

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
fn sgd(params: Vec<PyTensor>, lr: f64, momentum: f64, weight_decay: f64, nesterov: bool) -> PyResult<PyOptimizer> {
    let params = tensors(params);
    guard(|| PyOptimizer(Box::new(SGD::new(&params, lr, momentum, weight_decay, nesterov))))
}

/// Adam (tinygrad's defaults: b1 0.9, b2 0.999, eps 1e-8).
#[pyfunction(name = "Adam")]
#[pyo3(signature = (params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8))]
fn adam(params: Vec<PyTensor>, lr: f64, b1: f64, b2: f64, eps: f64) -> PyResult<PyOptimizer> {
    let params = tensors(params);
    guard(|| PyOptimizer(Box::new(optim::LAMB::new(&params, lr, b1, b2, eps, 0.0, true))))
}

/// Adam with decoupled weight decay.
#[pyfunction(name = "AdamW")]
#[pyo3(signature = (params, lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01))]
fn adamw(params: Vec<PyTensor>, lr: f64, b1: f64, b2: f64, eps: f64, weight_decay: f64) -> PyResult<PyOptimizer> {
    let params = tensors(params);
    guard(|| PyOptimizer(Box::new(optim::LAMB::new(&params, lr, b1, b2, eps, weight_decay, true))))
}

/// The tensors an object holds, as tinygrad's `get_parameters` finds them: the object itself, a
/// layer's weight and bias, and what lists, tuples, dicts and other objects' attributes hold, in
/// order.
#[pyfunction]
fn get_parameters(obj: &Bound<PyAny>) -> PyResult<Vec<PyTensor>> {
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

/// MNIST digits (or Fashion-MNIST with `fashion`) as tinygrad returns them: uint8 images
/// `[N, 1, 28, 28]` and labels `[N]`, train then test (`tools/setup.sh --demo` installs them).
#[pyfunction]
#[pyo3(signature = (fashion=false))]
fn mnist(fashion: bool) -> PyResult<(PyTensor, PyTensor, PyTensor, PyTensor)> {
    let m = datasets::mnist(fashion).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok((PyTensor(m.x_train), PyTensor(m.y_train), PyTensor(m.x_test), PyTensor(m.y_test)))
}

/// `lazygrad.nn` with its `optim`, `state` and `datasets` submodules.
pub fn module(py: Python) -> PyResult<Bound<PyModule>> {
    let nn = PyModule::new(py, "nn")?;
    nn.add_class::<PyLinear>()?;
    nn.add_class::<PyConv2d>()?;
    nn.add_class::<PyBatchNorm>()?;
    let optim = PyModule::new(py, "optim")?;
    optim.add_class::<PyOptimizer>()?;
    optim.add_function(wrap_pyfunction!(sgd, &optim)?)?;
    optim.add_function(wrap_pyfunction!(adam, &optim)?)?;
    optim.add_function(wrap_pyfunction!(adamw, &optim)?)?;
    let state = PyModule::new(py, "state")?;
    state.add_function(wrap_pyfunction!(get_parameters, &state)?)?;
    let data = PyModule::new(py, "datasets")?;
    data.add_function(wrap_pyfunction!(mnist, &data)?)?;
    nn.add_submodule(&optim)?;
    nn.add_submodule(&state)?;
    nn.add_submodule(&data)?;
    // `from lazygrad.nn.optim import Adam` looks the submodules up by their full names
    let modules = py.import("sys")?.getattr("modules")?;
    modules.set_item("lazygrad.nn", &nn)?;
    modules.set_item("lazygrad.nn.optim", &optim)?;
    modules.set_item("lazygrad.nn.state", &state)?;
    modules.set_item("lazygrad.nn.datasets", &data)?;
    Ok(nn)
}
