//! Rust failures as the Python exceptions tinygrad raises, chosen by the error's kind: an index or
//! axis out of range an `IndexError`, a number a dtype cannot hold an `OverflowError`, another
//! broken precondition (shapes, dtypes, devices, values) a `lazygrad.InvalidArgument`, a device,
//! compiler or file failure a `RuntimeError`. A panicking op's error is recovered from the panic
//! (`Error::take_panicked`); any other panic in the tensor or nn layer is an `InvalidArgument`
//! with its message, and one below them a `RuntimeError` that says it is lazygrad's bug. No
//! `PanicException` and no panic report reaches Python.

use std::cell::{Cell, RefCell};

use ::lazygrad::Error;
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

thread_local! {
    /// Whether this thread is inside `guard`, whose panics become exceptions with their message.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// The source file of the last guarded panic on this thread (which layer broke).
    static PANIC_FILE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Files whose panics are the API's documented preconditions (a bad shape, axis or value).
const API_LAYERS: [&str; 2] = ["src/tensor/", "src/nn/"];

/// Quiets the panic report of a guarded call (its message travels in the exception) and notes
/// where it panicked; every other panic is reported as before.
pub(crate) fn install_panic_hook() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if GUARDED.get() {
            let file = info.location().map(|l| l.file().replace('\\', "/")).unwrap_or_default();
            PANIC_FILE.set(file);
        } else {
            report(info)
        }
    }));
}

/// `f()`, with a panic as a Python exception: a panicking op's error as its kind (`error`),
/// another panic in the tensor or nn layer (a precondition they assert) an InvalidArgument
/// carrying its message, a panic below them a RuntimeError naming it a lazygrad bug.
pub(crate) fn guard<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    let outer = GUARDED.replace(true);
    Error::take_panicked(); // left by a panic someone else caught
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    GUARDED.set(outer);
    result.map_err(|payload| {
        let file = PANIC_FILE.take();
        if let Some(e) = Error::take_panicked() {
            return error(e);
        }
        let message = match (payload.downcast_ref::<String>(), payload.downcast_ref::<&str>()) {
            (Some(s), _) => s.clone(),
            (_, Some(s)) => s.to_string(),
            _ => "lazygrad panicked".to_string(),
        };
        if API_LAYERS.iter().any(|layer| file.starts_with(layer) || file.contains(&format!("/{layer}"))) {
            invalid(message)
        } else {
            PyRuntimeError::new_err(format!("internal error in lazygrad (a bug; please report it): {message}"))
        }
    })
}

/// `f()`'s error as a Python exception (see `error`).
pub(crate) fn checked<T>(f: impl FnOnce() -> ::lazygrad::Result<T>) -> PyResult<T> {
    guard(f)?.map_err(error)
}

/// An error of the Rust API as the exception tinygrad raises for its kind: an index or axis out
/// of range an IndexError (so iteration stops), a number a dtype cannot hold an OverflowError,
/// another broken precondition an InvalidArgument, what the world broke (a device, a compiler,
/// a file) a RuntimeError.
pub(crate) fn error(e: Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::Index { .. } | Error::Axis { .. } => PyIndexError::new_err(message),
        Error::Unrepresentable { .. } => PyOverflowError::new_err(message),
        Error::Shape { .. }
        | Error::DTypes { .. }
        | Error::Devices { .. }
        | Error::Value { .. }
        | Error::Size { .. } => invalid(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// `lazygrad.InvalidArgument`: a broken precondition of the API (shapes that do not fit, a bad
/// axis or value). It is a ValueError, as Python users expect, and a RuntimeError, as tinygrad
/// and torch raise for the same mistakes, so `except` clauses written for either catch it.
pub(crate) fn invalid_argument(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let class = CLASS.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let bases = PyTuple::new(py, [py.get_type::<PyValueError>(), py.get_type::<PyRuntimeError>()])?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "lazygrad")?;
        let made = py.import("builtins")?.getattr("type")?.call1(("InvalidArgument", bases, namespace))?;
        Ok(made.cast_into::<PyType>()?.unbind())
    })?;
    Ok(class.bind(py))
}

/// `lazygrad.InvalidArgument(message)`: a broken precondition found in the conversion of
/// Python arguments (a negative size), raised as the API's own.
pub(crate) fn invalid(message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| match invalid_argument(py) {
        Ok(class) => PyErr::from_type(class.clone(), message),
        Err(e) => e,
    })
}
