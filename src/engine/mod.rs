//! Running schedules (and, later, the JIT).

pub mod realize;

pub use realize::{get_runner, run_schedule};
