//! Settings read from the environment, overridable in a scope with `Context`.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex};

use super::hasher::FastHasher;

/// Settings by name, hashed with `FastHasher`: a small eager op asks for a few dozen of them, and
/// SipHash over each name was a twentieth of its time. The names are the program's and the
/// environment's own.
type Settings<V> = HashMap<String, V, BuildHasherDefault<FastHasher>>;

thread_local! {
    static OVERRIDES: RefCell<Settings<i64>> = RefCell::new(Settings::default());
}

/// How many `Context`s are alive, on all threads.
static CONTEXTS: AtomicUsize = AtomicUsize::new(0);

/// An environment variable's value: parsed as an integer, else kept as text, to warn when a
/// setting asked for as an integer is not one.
enum EnvValue {
    Integer(i64),
    Text(String),
}

/// The environment variables, read once (as tinygrad's cached `getenv`): each `std::env::var`
/// locks and copies the environment.
struct Environment {
    values: Settings<EnvValue>,
    /// The settings warned about.
    warned: Mutex<HashSet<String>>,
}

static ENVIRONMENT: LazyLock<Environment> = LazyLock::new(|| {
    let values = std::env::vars_os()
        .filter_map(|(k, v)| {
            let (k, v) = (k.into_string().ok()?, v.to_str()?.to_string());
            Some((k, v.trim().parse().map_or(EnvValue::Text(v), EnvValue::Integer)))
        })
        .collect();
    Environment { values, warned: Mutex::default() }
});

/// An integer setting: a scoped `Context` override if one is active, else the env var (as the
/// process started with it), else `default`. An env value that is not an integer counts as the
/// default, with a warning the first time it is asked for.
pub fn getenv(key: &str, default: i64) -> i64 {
    // most reads happen with no Context alive on any thread: then the thread's own are not read
    if CONTEXTS.load(Ordering::Relaxed) > 0 {
        if let Some(v) = OVERRIDES.with(|o| o.borrow().get(key).copied()) {
            return v;
        }
    }
    match ENVIRONMENT.values.get(key) {
        Some(EnvValue::Integer(v)) => *v,
        Some(EnvValue::Text(text)) if !text.trim().is_empty() => {
            if ENVIRONMENT.warned.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string()) {
                eprintln!("lazygrad: {key}={text:?} is not an integer; using {default}");
            }
            default
        }
        _ => default,
    }
}

/// A string setting from the environment.
pub fn getenv_str(key: &str) -> Option<String> {
    std::env::var(key).ok().filter(|v| !v.is_empty())
}

/// The DEBUG level.
pub fn debug() -> i64 {
    getenv("DEBUG", 0)
}

/// Scoped settings: `let _ctx = Context::new(&[("DEBUG", 2)]);` sets them on this thread until
/// the guard drops, then restores what was there before.
#[must_use = "the settings only hold while the Context is alive"]
pub struct Context {
    saved: Vec<(String, Option<i64>)>,
}

impl Context {
    pub fn new(settings: &[(&str, i64)]) -> Context {
        let saved = OVERRIDES.with(|o| {
            let mut o = o.borrow_mut();
            settings.iter().map(|(k, v)| (k.to_string(), o.insert(k.to_string(), *v))).collect()
        });
        CONTEXTS.fetch_add(1, Ordering::Relaxed);
        Context { saved }
    }
    /// The settings every `Context` alive on this thread sets, for a thread that works on its
    /// behalf (`Context::inherit` there).
    pub fn current() -> Vec<(String, i64)> {
        OVERRIDES.with(|o| o.borrow().iter().map(|(k, v)| (k.clone(), *v)).collect())
    }
    /// Set `settings` (from `Context::current` on another thread) on this one.
    pub fn inherit(settings: &[(String, i64)]) -> Context {
        Context::new(&settings.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        OVERRIDES.with(|o| {
            let mut o = o.borrow_mut();
            for (k, prev) in self.saved.drain(..).rev() {
                match prev {
                    Some(v) => o.insert(k, v),
                    None => o.remove(&k),
                };
            }
        });
        CONTEXTS.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_overrides_and_restores() {
        let before = getenv("LAZYGRAD_TEST_KNOB", 7);
        {
            let _a = Context::new(&[("LAZYGRAD_TEST_KNOB", 3)]);
            assert_eq!(getenv("LAZYGRAD_TEST_KNOB", 7), 3);
            {
                let _b = Context::new(&[("LAZYGRAD_TEST_KNOB", 5)]);
                assert_eq!(getenv("LAZYGRAD_TEST_KNOB", 7), 5);
            }
            assert_eq!(getenv("LAZYGRAD_TEST_KNOB", 7), 3);
        }
        assert_eq!(getenv("LAZYGRAD_TEST_KNOB", 7), before);
    }
}
