//! Process replay capture (tinygrad's `[pr]` process replay). With `PROCESS_REPLAY=<dir>` set,
//! every kernel's rendered source is written to `<dir>/<kernel name>-<key>.<language>`, where
//! `key` is a stable hash of what decides the source: the kernel AST's text form, the settings the
//! opts read and the renderer. `tools/process_replay.sh` runs a fixed workload at two revisions
//! and diffs the two captures, matching files by key.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Result;
use crate::helpers::getenv_str;
use crate::uop::print::render_tree;
use crate::uop::uop::stable_hash;
use crate::uop::UOp;

/// The environment variable that turns capture on and names its directory.
pub const PROCESS_REPLAY: &str = "PROCESS_REPLAY";

/// Where to capture kernel sources, if capture is on.
pub fn capture_dir() -> Option<PathBuf> {
    getenv_str(PROCESS_REPLAY).map(PathBuf::from)
}

/// The capture key of a kernel: the same on every run and every revision whose codegen sees the
/// same AST, settings and renderer (the AST is hashed through its printed form, so the key does not
/// depend on how `Ops` happens to be numbered). `settings` are `opt::settings`' (BEAM's choices
/// depend on timings, so code BEAM chose is not something to replay).
pub fn capture_key(ast: &UOp, settings: &(i64, usize, crate::uop::Target)) -> u64 {
    stable_hash(&(render_tree(ast), settings))
}

/// Write one kernel's source into `dir` as `<name>-<key>.<language>`. The file appears whole or not
/// at all (written aside, then renamed), so threads and processes capturing the same kernel at once
/// do not interleave.
pub fn capture(dir: &Path, name: &str, key: u64, language: &str, src: &str) -> Result<()> {
    static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{name}-{key:016x}.{language}"));
    let temp =
        dir.join(format!(".{name}-{key:016x}.{}.{}.tmp", std::process::id(), TEMP_SEQ.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&temp, src)?;
    std::fs::rename(&temp, &path)?;
    Ok(())
}
