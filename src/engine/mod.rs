//! Running schedules, and the JIT's capture and replay of them.

pub mod bind;
pub mod check;
pub mod jit;
pub mod memory;
pub mod realize;
pub mod search;

pub use bind::{bind, ScheduleItem};
pub use jit::CapturedJit;
pub use realize::{capture, capturing, get_runner, run_schedule, CompiledKernel, ExecItem, Runner};
