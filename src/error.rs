//! The one error type: what the world can break (compilers, devices, files) and the caller's
//! mistakes that a `try_` form reports instead of panicking, each as a variant whose fields say
//! what went wrong (the op, the shapes, the axis, the dtypes) so that a caller can match on it.

use std::cell::RefCell;
use std::fmt;

use crate::dtype::DType;

/// Everything a caller may want to recover from.
#[derive(Debug)]
pub enum Error {
    /// The device's compiler rejected generated source (includes its message).
    Compile(String),
    /// A device could not be opened or failed to run a program.
    Device(String),
    /// A file or process operation failed.
    Io(std::io::Error),
    /// A file's contents break its format (corrupt or truncated safetensors, IDX, gzip ...).
    Format(String),
    /// A compiler pass left a malformed graph (`uop/spec.rs`): names the pass and the node.
    Spec(String),
    /// A kernel computes in a dtype its device lacks (int64 or float64 on WebGPU).
    DType { device: String, dtype: DType, kernel: String },
    /// A launch gave a kernel a buffer smaller than the bytes it reaches through that parameter
    /// (the half-open byte range `reach`).
    OutOfBounds { kernel: String, slot: usize, reach: std::ops::Range<i128>, bytes: usize },
    /// An access of `bytes` bytes (`op`: a copy, a view, a kernel argument) into memory that
    /// holds `capacity`.
    Size { op: &'static str, bytes: usize, capacity: usize },
    /// Operands whose shapes do not fit `op`: they do not broadcast, hold the wrong number of
    /// elements, or have the wrong rank. `shapes` are the operands' shapes.
    Shape { op: &'static str, shapes: Vec<Vec<usize>>, reason: String },
    /// `axis` names no axis of a tensor of shape `shape`.
    Axis { op: &'static str, axis: isize, shape: Vec<usize> },
    /// An index that does not fit the tensor of shape `shape` it indexes (out of range, too many
    /// indices, a tensor index that is no integer tensor).
    Index { op: &'static str, shape: Vec<usize>, reason: String },
    /// Operand dtypes `op` does not take (a float to a bitwise op, the wrong element type asked
    /// of `to_vec`, a gradient of integers).
    DTypes { op: &'static str, dtypes: Vec<DType>, reason: String },
    /// `value` does not fit `dtype` (a Python int past int64, NaN as an integer, a range past
    /// int32).
    Unrepresentable { op: &'static str, value: String, dtype: DType },
    /// Operands on different devices.
    Devices { op: &'static str, devices: Vec<String> },
    /// An argument outside what `op` accepts (a step of 0, a negative count, a probability
    /// above 1, a JIT called with other inputs than it captured).
    Value { op: &'static str, reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Compile(m) => write!(f, "compile error: {m}"),
            Error::Device(m) => write!(f, "device error: {m}"),
            Error::Io(e) => write!(f, "io error: {e}"),
            Error::Format(m) => write!(f, "format error: {m}"),
            Error::Spec(m) => write!(f, "IR spec violation {m}"),
            Error::DType { device, dtype, kernel } => {
                write!(f, "{device} cannot compute in {dtype} (kernel {kernel})")
            }
            Error::OutOfBounds { kernel, slot, reach, bytes } => write!(
                f,
                "kernel {kernel} reaches bytes {}..{} of its buffer {slot}, which holds {bytes}",
                reach.start, reach.end
            ),
            Error::Size { op, bytes, capacity } => write!(f, "{op} of {bytes} bytes into {capacity} bytes"),
            Error::Shape { op, shapes, reason } => {
                let shown: Vec<String> = shapes.iter().map(|s| format!("{s:?}")).collect();
                write!(f, "{op}: {reason} (shapes {})", shown.join(", "))
            }
            Error::Axis { op, axis, shape } => write!(f, "{op}: axis {axis} out of range for shape {shape:?}"),
            Error::Index { op, shape, reason } => write!(f, "{op}: {reason} (shape {shape:?})"),
            Error::DTypes { op, dtypes, reason } => write!(f, "{op}: {reason} (dtypes {dtypes:?})"),
            Error::Unrepresentable { op, value, dtype } => write!(f, "{op}: {value} is not representable in {dtype:?}"),
            Error::Devices { op, devices } => write!(f, "{op}: operands on different devices {devices:?}"),
            Error::Value { op, reason } => write!(f, "{op}: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The error with the file it is about named in front of its message (I/O and format errors;
    /// the others as they are).
    pub fn at(self, path: &std::path::Path) -> Error {
        match self {
            Error::Format(m) => Error::Format(format!("{}: {m}", path.display())),
            Error::Io(e) => Error::Io(std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            e => e,
        }
    }

    /// This error as `op`'s: an op built from others reports their broken preconditions under
    /// its own name (an `unflatten` whose sizes do not fill the axis, not its `reshape`).
    pub fn for_op(self, op: &'static str) -> Error {
        match self {
            Error::Shape { shapes, reason, .. } => Error::Shape { op, shapes, reason },
            Error::Axis { axis, shape, .. } => Error::Axis { op, axis, shape },
            Error::Index { shape, reason, .. } => Error::Index { op, shape, reason },
            Error::DTypes { dtypes, reason, .. } => Error::DTypes { op, dtypes, reason },
            Error::Unrepresentable { value, dtype, .. } => Error::Unrepresentable { op, value, dtype },
            Error::Devices { devices, .. } => Error::Devices { op, devices },
            Error::Value { reason, .. } => Error::Value { op, reason },
            e => e,
        }
    }

    /// `Error::Shape` for `op`.
    pub fn shape(op: &'static str, shapes: &[&[usize]], reason: impl Into<String>) -> Error {
        Error::Shape { op, shapes: shapes.iter().map(|s| s.to_vec()).collect(), reason: reason.into() }
    }

    /// `Error::Value` for `op`.
    pub fn value(op: &'static str, reason: impl Into<String>) -> Error {
        Error::Value { op, reason: reason.into() }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())`, or `Err(error())` when `holds` is false: a precondition of a `try_` form.
pub(crate) fn ensure(holds: bool, error: impl FnOnce() -> Error) -> Result<()> {
    match holds {
        true => Ok(()),
        false => Err(error()),
    }
}

thread_local! {
    /// The error this thread's last panicking form panicked with (`Error::take_panicked`).
    static PANICKED: RefCell<Option<Error>> = const { RefCell::new(None) };
}

impl Error {
    /// The error a panicking form (`reshape`, not `try_reshape`) last panicked with on this
    /// thread, taken: a binding that catches the panic (the Python package) raises it as its
    /// kind, not as text.
    pub fn take_panicked() -> Option<Error> {
        PANICKED.take()
    }
}

/// The panicking form of a `try_` op: its error's message as the panic's.
pub(crate) trait OrPanic<T> {
    fn or_panic(self) -> T;
}

impl<T> OrPanic<T> for Result<T> {
    #[track_caller]
    fn or_panic(self) -> T {
        match self {
            Ok(t) => t,
            Err(e) => {
                let message = e.to_string();
                PANICKED.set(Some(e));
                panic!("{message}")
            }
        }
    }
}
