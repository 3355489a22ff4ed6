//! A persistent pool of worker threads for running one kernel on several CPU cores.

use std::sync::{Arc, Condvar, Mutex, OnceLock};

type Job = Arc<dyn Fn(usize) + Send + Sync>;

#[derive(Default)]
struct State {
    job: Option<Job>,
    /// Parts of the current job: `0..parts`; the caller runs part 0.
    parts: usize,
    next: usize,
    unfinished: usize,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
}

/// Runs `parts` copies of a job, one per core, on threads started once.
pub struct Pool {
    shared: Arc<Shared>,
    /// Serializes launches: one job at a time.
    launch: Mutex<()>,
}

impl Pool {
    fn new(workers: usize) -> Pool {
        let shared =
            Arc::new(Shared { state: Mutex::new(State::default()), work: Condvar::new(), done: Condvar::new() });
        for _ in 0..workers {
            let shared = shared.clone();
            std::thread::spawn(move || worker(&shared));
        }
        Pool { shared, launch: Mutex::new(()) }
    }

    /// Call `job(i)` for every `i` in `0..parts`, in parallel, and return when all are done.
    pub fn run(&self, parts: usize, job: Job) {
        if parts <= 1 {
            job(0);
            return;
        }
        let _one_at_a_time = self.launch.lock().unwrap_or_else(|e| e.into_inner());
        {
            let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
            *st = State { job: Some(job.clone()), parts, next: 1, unfinished: parts - 1 };
        }
        self.shared.work.notify_all();
        job(0);
        let mut st = self.shared.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.unfinished > 0 {
            st = self.shared.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.job = None;
    }
}

fn worker(shared: &Shared) {
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let (Some(job), true) = (st.job.clone(), st.next < st.parts) {
            let part = st.next;
            st.next += 1;
            drop(st);
            job(part);
            st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.unfinished -= 1;
            if st.unfinished == 0 {
                shared.done.notify_all();
            }
            continue;
        }
        st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
    }
}

/// How many CPU threads kernels use: `NUM_CPU_THREADS`, else the available cores.
pub fn cpu_threads() -> usize {
    let default = std::thread::available_parallelism().map_or(1, |n| n.get());
    (crate::helpers::getenv("NUM_CPU_THREADS", default as i64).max(1)) as usize
}

/// The process-wide pool, with one worker per core beyond the calling thread.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(cpu_threads().saturating_sub(1).max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_part_runs_exactly_once() {
        for parts in [1, 2, 3, 8] {
            let hits: Arc<Vec<AtomicUsize>> = Arc::new((0..parts).map(|_| AtomicUsize::new(0)).collect());
            let h = hits.clone();
            pool().run(
                parts,
                Arc::new(move |i| {
                    h[i].fetch_add(1, Ordering::SeqCst);
                }),
            );
            assert!(hits.iter().all(|c| c.load(Ordering::SeqCst) == 1), "parts {parts}");
        }
    }
}
