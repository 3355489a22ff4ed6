//! A persistent pool of worker threads for running one kernel on several CPU cores.
//!
//! Kernels come back to back (a JIT'd step launches dozens of them), and waking a thread
//! blocked on a condition variable costs tens of microseconds on a virtual machine, more than
//! a small kernel runs. So between jobs the workers, and the caller waiting for them, spin for a
//! short while (`SPIN`) on an atomic before they block, and a realize wakes blocked workers when
//! it starts scheduling (`wake_workers`), so that its first kernel does not wait for them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

type Job = Arc<dyn Fn(usize) + Send + Sync>;

/// How long an idle worker (or the waiting caller) spins before it blocks: longer than a realize
/// takes to schedule a small graph (0.15-0.35 ms measured), so that workers woken when it starts
/// (`wake_workers`) are still spinning when its first kernel launches.
const SPIN: Duration = Duration::from_millis(1);

#[derive(Default)]
struct State {
    job: Option<Job>,
    /// Parts of the current job: `0..parts`; the caller runs part 0, and then each part no
    /// worker has claimed by the time it is done.
    parts: usize,
    next: usize,
    unfinished: usize,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    /// Jobs posted so far: a spinning worker watches it for the next one.
    posted: AtomicU64,
    /// Parts of the current job not finished yet (mirrors `State::unfinished` for spinning).
    remaining: AtomicUsize,
    /// Workers blocked on `work` (so that waking none costs no system call).
    sleeping: AtomicUsize,
    /// Times a blocked worker has returned from `work` (woken, or spuriously).
    woken: AtomicU64,
}

/// Spin until `ready()` or `SPIN` has passed; whether it became ready.
fn spin_until(ready: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > SPIN {
            return false;
        }
        std::hint::spin_loop();
    }
    true
}

/// Runs `parts` copies of a job, one per core, on threads started once.
pub struct Pool {
    shared: Arc<Shared>,
    /// Serializes launches: one job at a time.
    launch: Mutex<()>,
    /// Whether kernels run on more than one thread (`cpu_threads` when the pool started), so that
    /// waking the workers ahead of a launch can pay off.
    threaded: bool,
}

impl Pool {
    fn new(workers: usize, threaded: bool) -> Pool {
        let shared = Arc::new(Shared::default());
        for _ in 0..workers {
            let shared = shared.clone();
            std::thread::spawn(move || worker(&shared));
        }
        Pool { shared, launch: Mutex::new(()), threaded }
    }

    /// Wake the workers blocked waiting for a job: they spin for `SPIN` before blocking again.
    fn wake(&self) {
        if self.shared.sleeping.load(Ordering::Acquire) > 0 {
            self.shared.work.notify_all();
        }
    }

    /// Call `job(i)` for every `i` in `0..parts`, in parallel, and return when all are done; the
    /// caller runs part 0 and every part still unclaimed once it has.
    pub fn run(&self, parts: usize, job: Job) {
        if parts <= 1 {
            job(0);
            return;
        }
        let _one_at_a_time = self.launch.lock().unwrap_or_else(|e| e.into_inner());
        let sh = &self.shared;
        {
            let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
            *st = State { job: Some(job.clone()), parts, next: 1, unfinished: parts - 1 };
            sh.remaining.store(parts - 1, Ordering::Release);
            sh.posted.fetch_add(1, Ordering::Release);
        }
        sh.work.notify_all();
        job(0);
        // the parts no worker has claimed yet run here: a worker that has no core at the moment
        // (another process's load took it) would otherwise hold the launch until the scheduler
        // gives it one, a timer tick (1-2 ms) for a kernel of microseconds
        loop {
            let part = {
                let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
                if st.next >= st.parts {
                    break;
                }
                st.next += 1;
                st.next - 1
            };
            job(part);
            let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
            st.unfinished -= 1;
            sh.remaining.fetch_sub(1, Ordering::Release);
        }
        spin_until(|| sh.remaining.load(Ordering::Acquire) == 0);
        let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        while st.unfinished > 0 {
            st = sh.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        st.job = None;
    }
}

fn worker(shared: &Shared) {
    let mut seen = 0;
    let mut st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if let (Some(job), true) = (st.job.clone(), st.next < st.parts) {
            let part = st.next;
            st.next += 1;
            drop(st);
            job(part);
            st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
            st.unfinished -= 1;
            shared.remaining.fetch_sub(1, Ordering::Release);
            if st.unfinished == 0 {
                shared.done.notify_all();
            }
            continue;
        }
        seen = seen.max(shared.posted.load(Ordering::Acquire));
        drop(st);
        let posted = spin_until(|| shared.posted.load(Ordering::Acquire) != seen);
        st = shared.state.lock().unwrap_or_else(|e| e.into_inner());
        if posted {
            seen = shared.posted.load(Ordering::Acquire);
            continue;
        }
        // checked under the lock the poster takes, so a job posted meanwhile is not missed
        if st.job.is_none() || st.next >= st.parts {
            shared.sleeping.fetch_add(1, Ordering::AcqRel);
            st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
            shared.sleeping.fetch_sub(1, Ordering::AcqRel);
            shared.woken.fetch_add(1, Ordering::AcqRel);
        }
    }
}

use crate::helpers::cpu_threads;

static POOL: OnceLock<Pool> = OnceLock::new();

/// The process-wide pool, with one worker per core beyond the calling thread.
pub fn pool() -> &'static Pool {
    POOL.get_or_init(|| {
        let threads = cpu_threads();
        Pool::new(threads.saturating_sub(1).max(1), threads > 1)
    })
}

/// Wake the pool's sleeping workers (if it has started and kernels use more than one thread)
/// ahead of the kernels a realize is about to schedule: they then spin while it schedules, instead
/// of the first kernel's parts waiting the tens of microseconds a wake-up takes.
pub fn wake_workers() {
    if let Some(pool) = POOL.get().filter(|p| p.threaded) {
        pool.wake();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Poll `ready()` for up to a second.
    fn within_a_second(ready: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while !ready() && start.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_micros(100));
        }
        ready()
    }

    #[test]
    fn a_worker_blocks_when_idle_and_wakes_ahead_of_a_launch() {
        let pool = Pool::new(1, true);
        pool.run(2, Arc::new(|_| {}));
        let sleeping = || pool.shared.sleeping.load(Ordering::Acquire);
        assert!(within_a_second(|| sleeping() == 1), "the idle worker blocks after spinning");
        // counted rather than watched: on a busy machine this thread may miss the 1 ms it spins
        let woken = pool.shared.woken.load(Ordering::Acquire);
        pool.wake();
        assert!(within_a_second(|| pool.shared.woken.load(Ordering::Acquire) > woken), "the worker wakes");
        assert!(within_a_second(|| sleeping() == 1), "and blocks again when no job comes");
    }

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
