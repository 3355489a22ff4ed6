//! VIZ: browse the passes `uop/track.rs` records (every `graph_rewrite` and every pipeline step)
//! in a local web page, or export them as JSON and DOT.
//!
//! With `VIZ=1` (or `VIZ_EXPORT=path.json`) in the environment, every pass run anywhere in the
//! process is recorded into one global [`Trace`]: its name, the graph before, each rewrite as
//! before → after with the rule that fired (its `file:line`), and the graph after. Passes are
//! grouped by what ran them ([`group`]: the schedule, one kernel's codegen, a JIT capture), and a
//! kernel's group keeps its generated source ([`record_code`]). [`capture`] records what one
//! closure runs on this thread, with or without `VIZ` (for tests and tools).
//!
//! Rust has no sound at-exit hook for running a server, so a program calls [`serve_if_enabled`]
//! where it is done (the examples do, as their last line): it writes `VIZ_EXPORT` and, with
//! `VIZ=1`, serves the explorer on `127.0.0.1:VIZ_PORT` until the process is stopped.

pub mod export;
pub mod server;

pub use crate::uop::trace::{Group, NodeRecord, Pass, Rewrite, Step, Trace};
pub use crate::uop::track::{capture, group, record_code, recording, GroupGuard};

use crate::helpers::getenv_str;
use crate::uop::track::{enabled_by_env, take_global};

/// At the end of a program: write `VIZ_EXPORT` (JSON, and DOT beside it) when set, then with
/// `VIZ>=1` serve the explorer on `127.0.0.1:VIZ_PORT` (default 8000) until the process is
/// stopped. Problems (unwritable path, port in use) are reported on stderr, never fatal.
pub fn serve_if_enabled() {
    if !enabled_by_env() {
        return;
    }
    let trace = take_global();
    if let Some(path) = getenv_str("VIZ_EXPORT") {
        match export::write_files(&trace, path.as_ref()) {
            Ok(dot) => eprintln!("VIZ: wrote {path} and {}", dot.display()),
            Err(e) => eprintln!("VIZ: could not write {path}: {e}"),
        }
    }
    if crate::helpers::getenv("VIZ", 0) > 0 {
        let port = crate::helpers::getenv("VIZ_PORT", 8000);
        match server::bind(port) {
            Ok(listener) => {
                let port = listener.local_addr().map_or(port, |a| a.port().into());
                eprintln!("VIZ: serving the rewrite explorer at http://127.0.0.1:{port}/ (Ctrl-C to stop)");
                server::serve(listener, trace);
            }
            Err(e) => eprintln!("VIZ: cannot serve on 127.0.0.1:{port}: {e}"),
        }
    }
}
