//! Running schedules, and the JIT that captures and replays them.

pub mod jit;
pub mod realize;

pub use jit::Jit;
pub use realize::{capture, capturing, get_runner, run_schedule, ExecItem, Runner};
