//! Errors from what the world can break: compilers, devices, files.

use std::fmt;

/// Everything a caller may want to recover from.
#[derive(Debug)]
pub enum Error {
    /// The device's compiler rejected generated source (includes its message).
    Compile(String),
    /// A device could not be opened or failed to run a program.
    Device(String),
    /// A file or process operation failed.
    Io(std::io::Error),
    /// A user-facing precondition that a `try_` API reports instead of panicking.
    Invalid(String),
    /// A file's contents break its format (corrupt or truncated safetensors, IDX, gzip ...).
    Format(String),
    /// A compiler pass left a malformed graph (`uop/spec.rs`): names the pass and the node.
    Spec(String),
    /// A kernel computes in a dtype its device lacks (int64 or float64 on WebGPU).
    DType { device: String, dtype: crate::dtype::DType, kernel: String },
    /// A launch gave a kernel a buffer smaller than the bytes it reaches through that parameter
    /// (the half-open byte range `reach`).
    OutOfBounds { kernel: String, slot: usize, reach: std::ops::Range<i128>, bytes: usize },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Compile(m) => write!(f, "compile error: {m}"),
            Error::Device(m) => write!(f, "device error: {m}"),
            Error::Io(e) => write!(f, "io error: {e}"),
            Error::Invalid(m) => write!(f, "{m}"),
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
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::Io(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;
