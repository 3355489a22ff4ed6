//! Rust failures as the Python exceptions tinygrad raises: a broken precondition of the API (a
//! panic in the tensor or nn layer, or `Error::Invalid`) is a `ValueError`, a device, compiler or
//! file failure a `RuntimeError`, and a panic anywhere below the API a `RuntimeError` that says
//! it is lazygrad's bug. No `PanicException` and no panic report reaches Python.

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

/// `f()`, with a panic as a Python exception: a broken precondition of the API (a panic in the
/// tensor or nn layer: shapes that do not broadcast, a bad axis) a ValueError carrying its
/// message, a panic below it a RuntimeError naming it a lazygrad bug.
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
        let file = PANIC_FILE.take();
        if API_LAYERS.iter().any(|layer| file.starts_with(layer) || file.contains(&format!("/{layer}"))) {
            value_error(message)
        } else {
            PyRuntimeError::new_err(format!("internal error in lazygrad (a bug; please report it): {message}"))
        }
    })
}

/// `f()`'s error as a Python exception (see `error`).
pub(crate) fn checked<T>(f: impl FnOnce() -> ::lazygrad::Result<T>) -> PyResult<T> {
    guard(f)?.map_err(error)
}

/// An error of the Rust API as the exception tinygrad raises for it: a broken precondition
/// (`Error::Invalid`) a ValueError (an IndexError for an index out of range), what the world
/// broke (a device, a compiler, a file) a RuntimeError.
pub(crate) fn error(e: Error) -> PyErr {
    match e {
        Error::Invalid(message) => value_error(message),
        other => PyRuntimeError::new_err(other.to_string()),
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

/// A precondition's message as its exception: an index or axis out of range, or an index that is
/// no index, is an IndexError (so iteration stops), a range a dtype cannot hold an OverflowError;
/// the rest are InvalidArguments (tinygrad raises
/// RuntimeError for an integer op on floats, as for most broken preconditions).
fn value_error(message: String) -> PyErr {
    let index =
        ["out of range", "out of bounds", "too many indices", "have no axis", "single ellipsis", "used as indices"];
    if index.iter().any(|m| message.contains(m)) {
        PyIndexError::new_err(message)
    } else if message.contains("not representable") {
        PyOverflowError::new_err(message)
    } else if message.contains("only float tensors") {
        PyRuntimeError::new_err(message)
    } else {
        invalid(message)
    }
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
