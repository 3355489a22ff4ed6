//! Tracking rewrites for VIZ (tinygrad's `track_rewrites`): the rewrite engine and the pipelines
//! record each pass into a [`Trace`] when VIZ is on, grouped by what ran them; `viz/` exports and
//! serves what was recorded.
//!
//! With `VIZ=1` (or `VIZ_EXPORT=path.json`) in the environment, every pass run anywhere in the
//! process is recorded into one global trace; [`capture`] records what one closure runs on this
//! thread, with or without `VIZ` (for tests and tools). Nothing is recorded otherwise: the cost
//! is one check of a cached flag ([`recording`]) per pass.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

use super::trace::{Rewrite, Trace};
use super::UOp;
use crate::helpers::getenv_str;

/// Whether the environment asks for recording (`VIZ>=1` or `VIZ_EXPORT` set), read once.
static FROM_ENV: LazyLock<bool> = LazyLock::new(|| {
    let viz = std::env::var("VIZ").ok().and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0);
    viz > 0 || getenv_str("VIZ_EXPORT").is_some()
});

/// How many threads are inside [`capture`] right now.
static CAPTURING: AtomicUsize = AtomicUsize::new(0);

/// The process-wide trace (when the environment turns VIZ on).
static GLOBAL: LazyLock<Mutex<Trace>> = LazyLock::new(Default::default);

thread_local! {
    /// This thread's [`capture`] trace, which takes this thread's records instead of the global one.
    static CAPTURED: RefCell<Option<Trace>> = const { RefCell::new(None) };
    /// The groups this thread is inside, innermost last (indices into the trace it writes to).
    static GROUPS: RefCell<Vec<usize>> = const { RefCell::new(vec![]) };
    /// How many passes this thread is inside.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// Whether anything may be recorded: the one check the rewrite engine makes per pass.
#[inline]
pub fn recording() -> bool {
    CAPTURING.load(Ordering::Relaxed) > 0 || *FROM_ENV
}

/// Run `f` on the trace this thread records into; `None` when this thread records nothing.
fn with_trace<R>(f: impl FnOnce(&mut Trace) -> R) -> Option<R> {
    if CAPTURED.with(|c| c.borrow().is_some()) {
        return CAPTURED.with(|c| c.borrow_mut().as_mut().map(f));
    }
    FROM_ENV.then(|| f(&mut GLOBAL.lock().unwrap_or_else(|e| e.into_inner())))
}

/// This thread's innermost group in `trace` (the trace's "other" group when there is none).
fn current_group(trace: &mut Trace) -> usize {
    GROUPS.with(|g| g.borrow().last().copied()).unwrap_or_else(|| trace.ungrouped())
}

/// Record everything `f` runs on this thread into a fresh trace, returned with `f`'s result.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Trace) {
    let outer_trace = CAPTURED.with(|c| c.borrow_mut().replace(Trace::default()));
    let outer_groups = GROUPS.with(|g| std::mem::take(&mut *g.borrow_mut()));
    CAPTURING.fetch_add(1, Ordering::Relaxed);
    let out = f();
    CAPTURING.fetch_sub(1, Ordering::Relaxed);
    GROUPS.with(|g| *g.borrow_mut() = outer_groups);
    let trace = CAPTURED.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer_trace)).unwrap_or_default();
    (out, trace)
}

/// A pass being recorded; [`PassRecorder::finish`] stores its result.
#[must_use = "finish the pass to record its rewrites"]
pub struct PassRecorder {
    slot: Option<(usize, usize)>,
    root: UOp,
}

/// Start recording the pass `name` on `root` (call only when [`recording`] is true).
pub fn start_pass(name: &str, root: &UOp) -> PassRecorder {
    let depth = DEPTH.get();
    DEPTH.set(depth + 1);
    let slot = with_trace(|t| {
        let g = current_group(t);
        (g, t.open_pass(g, name, depth, root))
    });
    PassRecorder { slot, root: root.clone() }
}

impl PassRecorder {
    /// Store the pass's result and the rewrites that fired, in order.
    pub fn finish(self, result: &UOp, rewrites: &[Rewrite]) {
        if let Some((g, i)) = self.slot {
            with_trace(|t| t.close_pass(g, i, result, rewrites, &self.root));
        }
    }
}

impl Drop for PassRecorder {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get() - 1);
    }
}

/// While alive, this thread's passes are recorded in its group.
#[must_use = "the group only holds while the guard is alive"]
pub struct GroupGuard {
    entered: bool,
}

/// Enter a new group (`name` is only built when recording); passes run until the guard drops
/// belong to it.
pub fn group(name: impl FnOnce() -> String) -> GroupGuard {
    if !recording() {
        return GroupGuard { entered: false };
    }
    let parent = GROUPS.with(|g| g.borrow().last().copied());
    let entered = with_trace(|t| t.add_group(name(), parent)).map(|g| GROUPS.with(|s| s.borrow_mut().push(g)));
    GroupGuard { entered: entered.is_some() }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.entered {
            GROUPS.with(|g| g.borrow_mut().pop());
        }
    }
}

/// Attach generated source to this thread's innermost group (`code` is only built when recording).
pub fn record_code(code: impl FnOnce() -> String) {
    if recording() && GROUPS.with(|g| !g.borrow().is_empty()) {
        let code = code();
        with_trace(|t| {
            let g = current_group(t);
            t.groups[g].code = Some(code)
        });
    }
}

/// Whether the environment turned VIZ on (read once).
pub fn enabled_by_env() -> bool {
    *FROM_ENV
}

/// The process-wide trace recorded so far, leaving an empty one.
pub fn take_global() -> Trace {
    std::mem::take(&mut *GLOBAL.lock().unwrap_or_else(|e| e.into_inner()))
}
