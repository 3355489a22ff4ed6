//! Process-wide counters of work done (kernels run, FLOPs, bytes moved, time on devices) and of
//! device memory held by buffers (now and at the peak).

use std::sync::atomic::{AtomicU64, Ordering};

static KERNELS: AtomicU64 = AtomicU64::new(0);
static OPS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static TIME_NS: AtomicU64 = AtomicU64::new(0);
static MEM_USED: AtomicU64 = AtomicU64::new(0);
static PEAK_MEM: AtomicU64 = AtomicU64::new(0);

/// Read and reset the global counters (tinygrad's `GlobalCounters`).
pub struct GlobalCounters;

impl GlobalCounters {
    pub fn kernel_count() -> u64 {
        KERNELS.load(Ordering::Relaxed)
    }
    pub fn global_ops() -> u64 {
        OPS.load(Ordering::Relaxed)
    }
    pub fn global_mem() -> u64 {
        BYTES.load(Ordering::Relaxed)
    }
    pub fn time_sum_s() -> f64 {
        TIME_NS.load(Ordering::Relaxed) as f64 * 1e-9
    }
    /// Bytes of device memory that live buffers hold now (all devices; a memory-planned arena
    /// counts once, its views not at all; blocks on an allocator's free list not at all).
    pub fn mem_used() -> u64 {
        MEM_USED.load(Ordering::Relaxed)
    }
    /// The most `mem_used` has been since the process started or the last `reset`.
    pub fn peak_mem() -> u64 {
        PEAK_MEM.load(Ordering::Relaxed).max(Self::mem_used())
    }
    /// Zero the work counters and start a new peak from the memory in use now (`mem_used`
    /// itself is not reset: it is what live buffers hold).
    pub fn reset() {
        for c in [&KERNELS, &OPS, &BYTES, &TIME_NS] {
            c.store(0, Ordering::Relaxed);
        }
        PEAK_MEM.store(Self::mem_used(), Ordering::Relaxed);
    }
    /// Account `bytes` taken by a buffer's allocation.
    pub fn mem_allocated(bytes: u64) {
        let now = MEM_USED.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK_MEM.fetch_max(now, Ordering::Relaxed);
    }
    /// Account `bytes` a buffer's allocation gave back.
    pub fn mem_freed(bytes: u64) {
        MEM_USED.fetch_sub(bytes, Ordering::Relaxed);
    }
    /// Account one kernel run.
    pub fn record(ops: u64, bytes: u64, seconds: f64) {
        KERNELS.fetch_add(1, Ordering::Relaxed);
        OPS.fetch_add(ops, Ordering::Relaxed);
        BYTES.fetch_add(bytes, Ordering::Relaxed);
        TIME_NS.fetch_add((seconds * 1e9) as u64, Ordering::Relaxed);
    }
}

/// The process's peak resident memory in bytes (`VmHWM`), where the OS reports it (Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
