//! Settings, counters, the on-disk cache, bounded in-memory caches and DEBUG output's colors.

pub mod cache;
pub mod color;
pub mod context;
pub mod counters;
pub mod fetch;
pub mod hasher;
pub mod lru;

pub use context::{debug, getenv, getenv_str, Context};
pub use counters::{peak_rss_bytes, GlobalCounters};

/// How many CPU threads kernels use: `NUM_CPU_THREADS`, else the available cores.
pub fn cpu_threads() -> usize {
    // asked once: it is a system call, and kernels' cache keys read the thread count
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let default = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    getenv("NUM_CPU_THREADS", default as i64).clamp(1, MAX_THREADS as i64) as usize
}

/// The most threads a kernel is split over (`NUM_CPU_THREADS` beyond it counts as this): each is a
/// worker the pool spawns, and the system refuses thousands.
pub const MAX_THREADS: usize = 256;

/// What a program's `main` returns for `result`: success, or the error on one line of stderr
/// (`error: ...`, no backtrace) and a failing exit code. The examples open their device first
/// (`runtime::get_device`), so an unavailable one ends them here.
/// Set when the program is ending with an error (`exit_code` of an error, or a panic in an MPI
/// job): the other ranks of a job must then be stopped, not waited for.
pub static FAILING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn exit_code(result: crate::error::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            FAILING.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
