//! Bad input at every public entry that takes user data: shapes, axes, indices, dtypes, state
//! dicts, files and environment settings. A panic must name the op and the shapes or values at
//! fault, a `try_` form or a loader must return `Err` with a clear message, and a compiler's or
//! a codegen thread's failure must reach the caller with its own message. Almost everything here
//! fails while the graph is built, so nothing compiles and the suite takes seconds.

mod common;

#[path = "bad_input/env.rs"]
mod env;
#[path = "bad_input/files.rs"]
mod files;
#[path = "bad_input/nn.rs"]
mod nn;
#[path = "bad_input/tensor.rs"]
mod tensor;
#[path = "bad_input/variants.rs"]
mod variants;

use std::cell::Cell;
use std::sync::Once;

use lazygrad::runtime::DefaultDevice;
use lazygrad::Error;

thread_local! {
    /// Whether this thread is inside `panic_message`, whose panics are expected.
    static EXPECTING_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// The panic hook, quiet for the panics `panic_message` expects (each would print a backtrace).
fn quiet_expected_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !EXPECTING_PANIC.with(Cell::get) {
                default(info)
            }
        }));
    });
}

/// The message `f` panics with; fails the test if it returns.
pub fn panic_message<R>(f: impl FnOnce() -> R) -> String {
    quiet_expected_panics();
    EXPECTING_PANIC.with(|e| e.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    EXPECTING_PANIC.with(|e| e.set(false));
    let payload = match result {
        Ok(_) => panic!("expected a panic, but it returned"),
        Err(payload) => payload,
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "<a panic without a message>".into())
}

/// `f` panics with a message holding every one of `needles`.
#[track_caller]
pub fn panics_with<R>(needles: &[&str], f: impl FnOnce() -> R) {
    let message = panic_message(f);
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} is missing from the panic message:\n  {message}");
    }
    assert!(!message.contains("left == right"), "an assert_eq without context:\n  {message}");
}

/// The error `r` holds, whose message holds every one of `needles`; fails the test on `Ok`.
#[track_caller]
pub fn err_with<T: std::fmt::Debug>(needles: &[&str], r: lazygrad::Result<T>) -> Error {
    let e = match r {
        Ok(v) => panic!("expected an error holding {needles:?}, got Ok({v:?})"),
        Err(e) => e,
    };
    let message = e.to_string();
    for needle in needles {
        assert!(message.contains(needle), "{needle:?} is missing from the error:\n  {message}");
    }
    e
}

/// Tensors on the reference interpreter for the rest of the test: what little realizes here
/// needs no C compiler.
pub fn interp() -> DefaultDevice {
    DefaultDevice::scoped("INTERP")
}
