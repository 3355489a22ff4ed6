//! `lazygrad.nn`: layers, with `optim`, `state` and `datasets` beside them, as tinygrad's Python
//! package has them, over lazygrad's `nn`.

mod datasets;
mod optim;
mod state;

use ::lazygrad::nn::layers::{BatchNorm, Conv2d, Linear};
use ::lazygrad::tensor::ConvOpts;
use pyo3::prelude::*;

use crate::guard;
use crate::tensor::PyTensor;

/// `x @ weight.T + bias`, its weight and bias initialized as tinygrad's (and torch's) are.
#[pyclass(name = "Linear", module = "lazygrad.nn")]
pub struct PyLinear {
    #[pyo3(get, set)]
    pub(crate) weight: PyTensor,
    #[pyo3(get, set)]
    pub(crate) bias: Option<PyTensor>,
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
    pub(crate) weight: PyTensor,
    #[pyo3(get, set)]
    pub(crate) bias: Option<PyTensor>,
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

/// `lazygrad.nn` with its `optim`, `state` and `datasets` submodules.
pub fn module(py: Python) -> PyResult<Bound<PyModule>> {
    let nn = PyModule::new(py, "nn")?;
    nn.add_class::<PyLinear>()?;
    nn.add_class::<PyConv2d>()?;
    nn.add_class::<PyBatchNorm>()?;
    let optim = PyModule::new(py, "optim")?;
    optim.add_class::<optim::PyOptimizer>()?;
    optim.add_function(wrap_pyfunction!(optim::sgd, &optim)?)?;
    optim.add_function(wrap_pyfunction!(optim::adam, &optim)?)?;
    optim.add_function(wrap_pyfunction!(optim::adamw, &optim)?)?;
    let state = PyModule::new(py, "state")?;
    state.add_function(wrap_pyfunction!(state::get_parameters, &state)?)?;
    state.add_function(wrap_pyfunction!(state::get_state_dict, &state)?)?;
    state.add_function(wrap_pyfunction!(state::load_state_dict, &state)?)?;
    state.add_function(wrap_pyfunction!(state::safe_save, &state)?)?;
    state.add_function(wrap_pyfunction!(state::safe_load, &state)?)?;
    let data = PyModule::new(py, "datasets")?;
    data.add_function(wrap_pyfunction!(datasets::mnist, &data)?)?;
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
