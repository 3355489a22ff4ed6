//! Linear program -> source text, the target description codegen reads, and the program a
//! device compiles (`ProgramSpec`).

pub mod c;
pub mod cstyle;
pub mod cuda;
pub mod listing;
pub mod name;
pub mod opencl;
pub mod program;
pub mod target;

pub use name::KernelName;
pub use program::{LaunchGrid, ProgramSpec};
pub use target::{DTypeSupport, Target, TensorCore, Workgroups};

use crate::uop::{Ops, UOp};

/// A source renderer for one family of devices, and the target it renders for.
pub trait Renderer: Send + Sync {
    /// The source language (`c`); also the file extension of process-replay captures.
    fn language(&self) -> &'static str;
    /// What codegen may assume about the device (read afresh: settings such as
    /// `NUM_CPU_THREADS` may change it within a scope).
    fn target(&self) -> Target;
    /// Ops this target renders directly; others are decomposed before rendering.
    fn supports(&self, op: Ops) -> bool;
    /// The source of kernel `name` from its linearized UOps.
    fn render(&self, name: &str, uops: &[UOp]) -> String;
}
