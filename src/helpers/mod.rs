//! Settings, counters and the on-disk cache.

pub mod cache;
pub mod context;
pub mod counters;
pub mod fetch;

pub use context::{debug, getenv, getenv_str, Context};
pub use counters::{peak_rss_bytes, GlobalCounters};
