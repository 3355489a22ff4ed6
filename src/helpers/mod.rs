//! Settings, counters, the on-disk cache, bounded in-memory caches and DEBUG output's colors.

pub mod cache;
pub mod color;
pub mod context;
pub mod counters;
pub mod fetch;
pub mod lru;

pub use context::{debug, getenv, getenv_str, Context};
pub use counters::{peak_rss_bytes, GlobalCounters};
