//! `import lazygrad`: lazygrad's Tensor with tinygrad's Python names. Every method forwards to the
//! Rust API; what is here is only the conversion between Python values and tensors.

mod convert;
mod dtype;
mod jit;
mod nn;
mod tensor;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

thread_local! {
    /// Whether this thread is inside `guard`, whose panics become exceptions with their message.
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()`, a panic (a programmer error: shapes that do not broadcast, a bad axis) as a ValueError
/// carrying its message (Python code catches it as an Exception, which pyo3's PanicException is
/// not).
pub(crate) fn guard<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    let outer = GUARDED.replace(true);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.set(outer);
    result.map_err(|payload| {
        let message = match (payload.downcast_ref::<String>(), payload.downcast_ref::<&str>()) {
            (Some(s), _) => s.clone(),
            (_, Some(s)) => s.to_string(),
            _ => "lazygrad panicked".to_string(),
        };
        PyValueError::new_err(message)
    })
}

#[pymodule]
fn lazygrad(m: &Bound<PyModule>) -> PyResult<()> {
    // a guarded panic's message travels in the exception; printed as well, it would be noise
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !GUARDED.get() {
            report(info)
        }
    }));
    m.add_class::<tensor::PyTensor>()?;
    m.add_class::<dtype::PyDType>()?;
    m.add("dtypes", dtype::PyDTypes)?;
    m.add_class::<jit::PyJit>()?;
    m.add_submodule(&nn::module(m.py())?)?;
    Ok(())
}
