//! `import lazygrad`: lazygrad's Tensor with tinygrad's Python names. Every method forwards to the
//! Rust API; what is here is only the conversion between Python values and tensors and the
//! mapping of Rust failures to Python exceptions.

mod convert;
mod creation;
mod device;
mod dtype;
mod error;
mod functional;
mod helpers;
mod jit;
mod math;
mod movement;
mod nn;
mod pytensor;
mod reduce;
mod schedule;
mod tensor;
mod uop;
mod variable;

use pyo3::prelude::*;

/// Registers `module` under its full name, so `import lazygrad.helpers` and
/// `from lazygrad.nn.optim import Adam` find it.
pub(crate) fn register(py: Python, name: &str, module: &Bound<PyModule>) -> PyResult<()> {
    py.import("sys")?.getattr("modules")?.set_item(name, module)
}

#[pymodule]
fn lazygrad(m: &Bound<PyModule>) -> PyResult<()> {
    let py = m.py();
    error::install_panic_hook();
    m.add("InvalidArgument", error::invalid_argument(py)?)?;
    m.add_class::<pytensor::PyTensor>()?;
    py.get_type::<pytensor::PyTensor>().setattr("stack", creation::Stack)?;
    m.add_class::<dtype::PyDType>()?;
    m.add("dtypes", dtype::PyDTypes)?;
    m.add_class::<jit::PyJit>()?;
    m.add_class::<variable::PyVariable>()?;
    m.add_class::<uop::PyUOp>()?;
    // tinygrad's `tinygrad.uop.ops` names lazygrad has
    let uop = PyModule::new(py, "uop")?;
    uop.add_class::<uop::PyUOp>()?;
    uop.add_class::<uop::PyBuffer>()?;
    uop.add("Ops", uop::PyOps)?;
    m.add_submodule(&uop)?;
    register(py, "lazygrad.uop", &uop)?;
    m.add("Device", device::PyDevices)?;
    let helpers = helpers::module(py)?;
    m.add("Context", helpers.getattr("Context")?)?;
    m.add("GlobalCounters", helpers.getattr("GlobalCounters")?)?;
    m.add_submodule(&helpers)?;
    register(py, "lazygrad.helpers", &helpers)?;
    // tinygrad's `tinygrad.dtype` and `tinygrad.tensor` names
    let dtype = PyModule::new(py, "dtype")?;
    dtype.add_class::<dtype::PyDType>()?;
    dtype.add("dtypes", dtype::PyDTypes)?;
    dtype.add("DTYPES_DICT", dtype::dtypes_dict())?;
    m.add_submodule(&dtype)?;
    register(py, "lazygrad.dtype", &dtype)?;
    let tensor = PyModule::new(py, "tensor")?;
    tensor.add_class::<pytensor::PyTensor>()?;
    tensor.add_function(wrap_pyfunction!(dtype::to_np_dtype, &tensor)?)?;
    tensor.add_function(wrap_pyfunction!(dtype::from_np_dtype, &tensor)?)?;
    m.add_submodule(&tensor)?;
    register(py, "lazygrad.tensor", &tensor)?;
    m.add_submodule(&nn::module(py)?)?;
    let engine = schedule::module(py)?;
    m.add_submodule(&engine)?;
    register(py, "lazygrad.engine", &engine)?;
    Ok(())
}
