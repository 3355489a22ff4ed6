//! The IR: one hash-consed `UOp` graph for tensors, kernels and programs, and the rewrite engine.

pub mod bounds;
pub mod exec;
pub mod function;
pub mod math;
pub mod name;
pub mod ops;
pub mod pattern;
pub mod pipeline;
pub mod print;
pub mod program;
pub mod reach;
pub mod rewrite;
pub mod shape;
pub mod spec;
pub mod stage;
pub mod symbolic;
pub mod target;
pub mod trace;
pub mod track;
#[allow(clippy::module_inception)]
pub mod uop;
pub mod valid;
pub mod variable;
pub mod wmma;

pub use name::KernelName;
pub use ops::Ops;
pub use pattern::{rule, rule_ctx, Captures, PatternMatcher, Rule, RuleSite, UPat};
pub use program::{LaunchGrid, ProgramSpec};
pub use rewrite::{graph_rewrite, substitute, substitute_outside};
pub use stage::{Kernel, LinearProgram, Staged, TensorGraph};
pub use target::{DTypeSupport, Language, Target, TensorCore, Workgroups};
pub use uop::{
    Arg, AxisKind, BufferRef, Call, ConstValue, DeviceBuffer, FastHasher, Identified, Shared, Special, StoreMode, UOp,
    UOpMap, WeakUOp,
};
pub use variable::{BoundVar, Sint, Variable};
