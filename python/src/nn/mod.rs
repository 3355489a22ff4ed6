//! `lazygrad.nn`: layers, with `optim`, `state` and `datasets` beside them, as tinygrad's Python
//! package has them, over lazygrad's `nn`.

mod datasets;
mod optim;
mod state;

use ::lazygrad::nn::layers::{BatchNorm, Conv2d, Embedding, LayerNorm, Linear, RMSNorm};
use ::lazygrad::nn::state::Module;
use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;

use crate::convert::conv_opts;
use crate::guard;
use crate::tensor::PyTensor;

/// A layer of lazygrad's `nn::layers` as a Python object: called on a tensor, with its tensors
/// as attributes under their state-dict names (`bn.running_mean`).
pub(crate) trait Wrapped {
    fn module(&self) -> &dyn Module;
}

macro_rules! layer {
    ($py:ident, $rust:ty, $name:literal) => {
        #[pyclass(name = $name, module = "lazygrad.nn")]
        pub struct $py(pub(crate) $rust);

        impl Wrapped for $py {
            fn module(&self) -> &dyn Module {
                &self.0
            }
        }

        #[pymethods]
        impl $py {
            fn __call__(&self, x: &PyTensor) -> PyResult<PyTensor> {
                guard(|| PyTensor(self.0.forward(&x.0)))
            }
            fn __getattr__(&self, name: &str) -> PyResult<PyTensor> {
                let found = self.0.named_tensors().into_iter().find(|(n, _)| n == name);
                found
                    .map(|(_, t)| PyTensor(t))
                    .ok_or_else(|| PyAttributeError::new_err(format!("{} has no {name}", $name)))
            }
        }
    };
}

/// `weight` and an optional `bias`, to read and to replace, for the layers that have them so.
macro_rules! weight_and_bias {
    ($py:ident) => {
        #[pymethods]
        impl $py {
            #[getter]
            fn weight(&self) -> PyTensor {
                PyTensor(self.0.weight.clone())
            }
            #[setter]
            fn set_weight(&mut self, weight: PyTensor) {
                self.0.weight = weight.0;
            }
            #[getter]
            fn bias(&self) -> Option<PyTensor> {
                self.0.bias.clone().map(PyTensor)
            }
            #[setter]
            fn set_bias(&mut self, bias: Option<PyTensor>) {
                self.0.bias = bias.map(|b| b.0);
            }
        }
    };
}

layer!(PyLinear, Linear, "Linear");
layer!(PyConv2d, Conv2d, "Conv2d");
weight_and_bias!(PyLinear);
weight_and_bias!(PyConv2d);
layer!(PyBatchNorm, BatchNorm, "BatchNorm");
layer!(PyLayerNorm, LayerNorm, "LayerNorm");
layer!(PyRMSNorm, RMSNorm, "RMSNorm");
layer!(PyEmbedding, Embedding, "Embedding");

/// `x @ weight.T + bias`, its weight and bias initialized as tinygrad's (and torch's) are.
#[pymethods]
impl PyLinear {
    #[new]
    #[pyo3(signature = (in_features, out_features, bias=true))]
    fn new(in_features: usize, out_features: usize, bias: bool) -> PyResult<PyLinear> {
        guard(|| PyLinear(Linear::new(in_features, out_features, bias)))
    }
}

/// A 2-D convolution over `[N, C, H, W]`, initialized as tinygrad's is.
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
        let opts = conv_opts(groups, stride, dilation, padding);
        guard(|| PyConv2d(Conv2d::new(in_channels, out_channels, kernel_size, opts, bias)))
    }
}

/// Batch normalization over axis 1: batch statistics inside `Tensor.train()` (updating the
/// running ones), the running statistics outside.
#[pymethods]
impl PyBatchNorm {
    #[new]
    #[pyo3(signature = (sz, eps=1e-5, affine=true, track_running_stats=true, momentum=0.1))]
    fn new(sz: usize, eps: f64, affine: bool, track_running_stats: bool, momentum: f64) -> PyResult<PyBatchNorm> {
        guard(|| PyBatchNorm(BatchNorm::new(sz, eps, affine, track_running_stats, momentum)))
    }
}

/// Normalization over the last axes (`normalized_shape`), with a learned scale and shift.
#[pymethods]
impl PyLayerNorm {
    #[new]
    #[pyo3(signature = (normalized_shape, eps=1e-5, elementwise_affine=true))]
    fn new(normalized_shape: &Bound<PyAny>, eps: f64, elementwise_affine: bool) -> PyResult<PyLayerNorm> {
        let shape: Vec<usize> = match normalized_shape.extract::<usize>() {
            Ok(n) => vec![n],
            Err(_) => normalized_shape.extract()?,
        };
        guard(|| PyLayerNorm(LayerNorm::new(&shape, eps, elementwise_affine)))
    }
}

/// Root-mean-square normalization over the last axis, with a learned scale.
#[pymethods]
impl PyRMSNorm {
    #[new]
    #[pyo3(signature = (dim, eps=1e-6, elementwise_affine=true))]
    fn new(dim: usize, eps: f64, elementwise_affine: bool) -> PyResult<PyRMSNorm> {
        guard(|| PyRMSNorm(RMSNorm::new(dim, eps, elementwise_affine)))
    }
}

/// A table of `vocab_size` learned vectors, looked up by integer index.
#[pymethods]
impl PyEmbedding {
    #[new]
    fn new(vocab_size: usize, embed_size: usize) -> PyResult<PyEmbedding> {
        guard(|| PyEmbedding(Embedding::new(vocab_size, embed_size)))
    }
}

/// `lazygrad.nn` with its `optim`, `state` and `datasets` submodules.
pub fn module(py: Python) -> PyResult<Bound<PyModule>> {
    let nn = PyModule::new(py, "nn")?;
    nn.add_class::<PyLinear>()?;
    nn.add_class::<PyConv2d>()?;
    nn.add_class::<PyBatchNorm>()?;
    nn.add_class::<PyLayerNorm>()?;
    nn.add_class::<PyRMSNorm>()?;
    nn.add_class::<PyEmbedding>()?;
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
