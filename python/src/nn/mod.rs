//! `lazygrad.nn`: layers, with `optim`, `state` and `datasets` beside them, as tinygrad's Python
//! package has them, over lazygrad's `nn`.

mod datasets;
mod optim;
mod state;

use ::lazygrad::nn::layers::{
    same_padding, BatchNorm, Conv2d, ConvTranspose2d, Embedding, GroupNorm, LSTMCell, LayerNorm, LayerNorm2d, Linear,
    RMSNorm,
};
use ::lazygrad::nn::state::Module;
use ::lazygrad::tensor::ConvOpts;
use ::lazygrad::Tensor;
use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::convert::{or_ints, shape_of, spatial};
use crate::error::{checked, guard};
use crate::functional::conv_opts;
use crate::pytensor::PyTensor;

/// A layer of lazygrad's `nn::layers` as a Python object: called on a tensor, with its tensors
/// as attributes under their state-dict names (`bn.running_mean`).
pub(crate) trait Wrapped {
    fn module(&self) -> &dyn Module;
}

/// A tensor field of a layer, read and replaced from Python: always there, or optional (None).
trait Slot {
    fn get(&self) -> Option<PyTensor>;
    fn put(&mut self, value: Option<PyTensor>, name: &str) -> PyResult<()>;
}

impl Slot for Tensor {
    fn get(&self) -> Option<PyTensor> {
        Some(PyTensor(self.clone()))
    }
    fn put(&mut self, value: Option<PyTensor>, name: &str) -> PyResult<()> {
        *self = value.ok_or_else(|| PyTypeError::new_err(format!("{name} is a tensor the layer cannot do without")))?.0;
        Ok(())
    }
}

impl Slot for Option<Tensor> {
    fn get(&self) -> Option<PyTensor> {
        self.clone().map(PyTensor)
    }
    fn put(&mut self, value: Option<PyTensor>, _: &str) -> PyResult<()> {
        *self = value.map(|t| t.0);
        Ok(())
    }
}

/// A layer type as a Python class: its tensors, the fields listed, read and assigned as
/// attributes (`bn.weight = Tensor.ones(4)`, None for a missing optional one), called with the
/// layer's `try_forward`; `@class` leaves the call to the class.
macro_rules! layer {
    ($py:ident, $rust:ty, $name:literal, [$($field:ident),*]) => {
        layer!(@class $py, $rust, $name, [$($field),*]);
        #[pymethods]
        impl $py {
            fn __call__(&self, x: &PyTensor) -> PyResult<PyTensor> {
                checked(|| self.0.try_forward(&x.0)).map(PyTensor)
            }
        }
    };
    (@class $py:ident, $rust:ty, $name:literal, [$($field:ident),*]) => {
        #[pyclass(name = $name, module = "lazygrad.nn")]
        pub struct $py(pub(crate) $rust);

        impl Wrapped for $py {
            fn module(&self) -> &dyn Module {
                &self.0
            }
        }

        #[pymethods]
        impl $py {
            fn __getattr__(&self, name: &str) -> PyResult<Option<PyTensor>> {
                match name {
                    $(stringify!($field) => Ok(Slot::get(&self.0.$field)),)*
                    _ => Err(PyAttributeError::new_err(format!("{} has no {name}", $name))),
                }
            }
            fn __setattr__(&mut self, name: &str, value: Option<PyTensor>) -> PyResult<()> {
                match name {
                    $(stringify!($field) => Slot::put(&mut self.0.$field, value, name),)*
                    _ => Err(PyAttributeError::new_err(format!("{} has no tensor {name} to set", $name))),
                }
            }
        }
    };
}

layer!(PyLinear, Linear, "Linear", [weight, bias]);
layer!(PyConv2d, Conv2d, "Conv2d", [weight, bias]);
layer!(PyConvTranspose2d, ConvTranspose2d, "ConvTranspose2d", [weight, bias]);
layer!(PyGroupNorm, GroupNorm, "GroupNorm", [weight, bias]);
layer!(PyBatchNorm, BatchNorm, "BatchNorm", [weight, bias, running_mean, running_var, num_batches_tracked]);
layer!(PyLayerNorm, LayerNorm, "LayerNorm", [weight, bias]);
layer!(@class PyLayerNorm2d, LayerNorm2d, "LayerNorm2d", [weight, bias]);
layer!(PyRMSNorm, RMSNorm, "RMSNorm", [weight]);
layer!(PyEmbedding, Embedding, "Embedding", [weight]);
layer!(@class PyLSTMCell, LSTMCell, "LSTMCell", [weight_ih, weight_hh, bias_ih, bias_hh]);

#[pymethods]
impl PyLayerNorm2d {
    fn __call__(&self, x: &PyTensor) -> PyResult<PyTensor> {
        checked(|| self.0.try_forward_2d(&x.0)).map(PyTensor)
    }
}

/// `x @ weight.T + bias`, its weight and bias initialized as tinygrad's (and torch's) are.
#[pymethods]
impl PyLinear {
    #[new]
    #[pyo3(signature = (in_features, out_features, bias=true))]
    fn new(in_features: usize, out_features: usize, bias: bool) -> PyResult<PyLinear> {
        guard(|| PyLinear(Linear::new(in_features, out_features, bias)))
    }
}

/// A convolution's kernel sizes: an int for each of `dims` axes, or a tuple of one each.
fn kernel_sizes(kernel_size: &Bound<PyAny>, dims: usize) -> PyResult<Vec<usize>> {
    let k = shape_of(kernel_size)?;
    Ok(if kernel_size.is_instance_of::<pyo3::types::PyInt>() { vec![k[0]; dims] } else { k })
}

/// A convolution layer's options: `padding` an int, a tuple, or 'same' (stride 1 only).
fn layer_opts(
    kernel: &[usize],
    groups: usize,
    stride: &Bound<PyAny>,
    dilation: &Bound<PyAny>,
    padding: &Bound<PyAny>,
) -> PyResult<ConvOpts> {
    if !padding.is_instance_of::<PyString>() {
        return conv_opts(groups, stride, dilation, padding);
    }
    let text: String = padding.extract()?;
    if text.to_lowercase() != "same" {
        return Err(PyValueError::new_err(format!("Invalid padding string {text}, only 'same' is supported")));
    }
    if shape_of(stride)?.iter().any(|&s| s != 1) {
        return Err(PyValueError::new_err("padding='same' is not supported for strided convolutions"));
    }
    let zero = 0usize.into_pyobject(padding.py())?.into_any();
    let opts = conv_opts(groups, stride, dilation, &zero)?;
    Ok(ConvOpts { padding: same_padding(kernel, &opts.dilation), ..opts })
}

/// A convolution over `[N, C, spatial...]` (2-D for an int kernel size), initialized as
/// tinygrad's is.
#[pymethods]
impl PyConv2d {
    #[new]
    #[pyo3(signature = (in_channels, out_channels, kernel_size, stride=None, padding=None, dilation=None, groups=1, bias=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python,
        in_channels: usize,
        out_channels: usize,
        kernel_size: &Bound<PyAny>,
        stride: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        groups: usize,
        bias: bool,
    ) -> PyResult<PyConv2d> {
        let kernel = kernel_sizes(kernel_size, 2)?;
        conv_layer(py, in_channels, out_channels, kernel, [stride, padding, dilation], groups, bias)
    }
}

/// A transposed convolution over `[N, C, spatial...]`, initialized as tinygrad's is.
#[pymethods]
impl PyConvTranspose2d {
    #[new]
    #[pyo3(signature = (in_channels, out_channels, kernel_size, stride=None, padding=None, output_padding=None, dilation=None, groups=1, bias=true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python,
        in_channels: usize,
        out_channels: usize,
        kernel_size: &Bound<PyAny>,
        stride: Option<&Bound<PyAny>>,
        padding: Option<&Bound<PyAny>>,
        output_padding: Option<&Bound<PyAny>>,
        dilation: Option<&Bound<PyAny>>,
        groups: usize,
        bias: bool,
    ) -> PyResult<PyConvTranspose2d> {
        let kernel = kernel_sizes(kernel_size, 2)?;
        let args = [stride, padding, output_padding, dilation];
        conv_transpose_layer(py, in_channels, out_channels, kernel, args, groups, bias)
    }
}

/// A `Conv2d` of `kernel` sizes with tinygrad's arguments `[stride, padding, dilation]` (ints or
/// tuples, `None` their defaults): `Conv2d` and `Conv1d` both.
fn conv_layer(
    py: Python,
    in_channels: usize,
    out_channels: usize,
    kernel: Vec<usize>,
    args: [Option<&Bound<PyAny>>; 3],
    groups: usize,
    bias: bool,
) -> PyResult<PyConv2d> {
    let [stride, padding, dilation] = or_ints(py, args, [1, 0, 1])?;
    let opts = layer_opts(&kernel, groups, &stride, &dilation, &padding)?;
    guard(|| PyConv2d(Conv2d::new(in_channels, out_channels, kernel, opts, bias)))
}

/// A `ConvTranspose2d` of `kernel` sizes with tinygrad's arguments `[stride, padding,
/// output_padding, dilation]`: `ConvTranspose2d` and `ConvTranspose1d` both.
fn conv_transpose_layer(
    py: Python,
    in_channels: usize,
    out_channels: usize,
    kernel: Vec<usize>,
    args: [Option<&Bound<PyAny>>; 4],
    groups: usize,
    bias: bool,
) -> PyResult<PyConvTranspose2d> {
    let [stride, padding, output_padding, dilation] = or_ints(py, args, [1, 0, 0, 1])?;
    let opts =
        ConvOpts { output_padding: spatial(&output_padding)?, ..conv_opts(groups, &stride, &dilation, &padding)? };
    guard(|| PyConvTranspose2d(ConvTranspose2d::new(in_channels, out_channels, kernel, opts, bias)))
}

/// A 1-D convolution (tinygrad's `Conv1d`: a `Conv2d` with one kernel size).
#[pyfunction(name = "Conv1d")]
#[pyo3(signature = (in_channels, out_channels, kernel_size, stride=None, padding=None, dilation=None, groups=1, bias=true))]
#[allow(clippy::too_many_arguments)]
fn conv1d(
    py: Python,
    in_channels: usize,
    out_channels: usize,
    kernel_size: &Bound<PyAny>,
    stride: Option<&Bound<PyAny>>,
    padding: Option<&Bound<PyAny>>,
    dilation: Option<&Bound<PyAny>>,
    groups: usize,
    bias: bool,
) -> PyResult<PyConv2d> {
    let kernel = kernel_sizes(kernel_size, 1)?;
    conv_layer(py, in_channels, out_channels, kernel, [stride, padding, dilation], groups, bias)
}

/// A 1-D transposed convolution (tinygrad's `ConvTranspose1d`).
#[pyfunction(name = "ConvTranspose1d")]
#[pyo3(signature = (in_channels, out_channels, kernel_size, stride=None, padding=None, output_padding=None, dilation=None, groups=1, bias=true))]
#[allow(clippy::too_many_arguments)]
fn conv_transpose1d(
    py: Python,
    in_channels: usize,
    out_channels: usize,
    kernel_size: &Bound<PyAny>,
    stride: Option<&Bound<PyAny>>,
    padding: Option<&Bound<PyAny>>,
    output_padding: Option<&Bound<PyAny>>,
    dilation: Option<&Bound<PyAny>>,
    groups: usize,
    bias: bool,
) -> PyResult<PyConvTranspose2d> {
    let kernel = kernel_sizes(kernel_size, 1)?;
    let args = [stride, padding, output_padding, dilation];
    conv_transpose_layer(py, in_channels, out_channels, kernel, args, groups, bias)
}

/// Normalization of each group of channels, with a learned scale and shift per channel.
#[pymethods]
impl PyGroupNorm {
    #[new]
    #[pyo3(signature = (num_groups, num_channels, eps=1e-5, affine=true))]
    fn new(num_groups: usize, num_channels: usize, eps: f64, affine: bool) -> PyResult<PyGroupNorm> {
        guard(|| PyGroupNorm(GroupNorm::new(num_groups, num_channels, eps, affine)))
    }
}

/// Normalization of each channel of each sample (tinygrad's `InstanceNorm`: one group per
/// channel).
#[pyfunction(name = "InstanceNorm")]
#[pyo3(signature = (num_features, eps=1e-5, affine=true))]
fn instance_norm(num_features: usize, eps: f64, affine: bool) -> PyResult<PyGroupNorm> {
    guard(|| PyGroupNorm(GroupNorm::instance(num_features, eps, affine)))
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

/// Layer normalization over the channels of `[N, C, H, W]`.
#[pymethods]
impl PyLayerNorm2d {
    #[new]
    #[pyo3(signature = (channels, eps=1e-5, elementwise_affine=true))]
    fn new(channels: usize, eps: f64, elementwise_affine: bool) -> PyResult<PyLayerNorm2d> {
        guard(|| PyLayerNorm2d(LayerNorm2d::new(&[channels], eps, elementwise_affine)))
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

/// One step of a long short-term memory cell: `cell(x, (h, c))` gives the new `(h, c)`.
#[pymethods]
impl PyLSTMCell {
    #[new]
    #[pyo3(signature = (input_size, hidden_size, bias=true))]
    fn new(input_size: usize, hidden_size: usize, bias: bool) -> PyResult<PyLSTMCell> {
        guard(|| PyLSTMCell(LSTMCell::new(input_size, hidden_size, bias)))
    }
    #[pyo3(signature = (x, hc=None))]
    fn __call__(&self, x: &PyTensor, hc: Option<(PyTensor, PyTensor)>) -> PyResult<(PyTensor, PyTensor)> {
        let (h, c) = checked(|| self.0.try_forward(&x.0, hc.as_ref().map(|(h, c)| (&h.0, &c.0))))?;
        Ok((PyTensor(h), PyTensor(c)))
    }
}

/// `lazygrad.nn` with its `optim`, `state` and `datasets` submodules.
pub fn module(py: Python) -> PyResult<Bound<PyModule>> {
    let nn = PyModule::new(py, "nn")?;
    nn.add_class::<PyLinear>()?;
    nn.add_class::<PyConv2d>()?;
    nn.add_class::<PyConvTranspose2d>()?;
    nn.add_class::<PyGroupNorm>()?;
    nn.add_class::<PyLSTMCell>()?;
    nn.add_function(wrap_pyfunction!(conv1d, &nn)?)?;
    nn.add_function(wrap_pyfunction!(conv_transpose1d, &nn)?)?;
    nn.add_function(wrap_pyfunction!(instance_norm, &nn)?)?;
    nn.add_class::<PyBatchNorm>()?;
    nn.add_class::<PyLayerNorm>()?;
    nn.add_class::<PyLayerNorm2d>()?;
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
    for (name, module) in [("nn", &nn), ("nn.optim", &optim), ("nn.state", &state), ("nn.datasets", &data)] {
        crate::register(py, &format!("lazygrad.{name}"), module)?;
    }
    Ok(nn)
}
