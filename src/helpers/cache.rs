//! Where lazygrad keeps what it may reuse across runs (compiled kernels).

use std::path::PathBuf;

/// The cache directory: `$LAZYGRAD_CACHE`, else `$XDG_CACHE_HOME/lazygrad`, else
/// `~/.cache/lazygrad`, else a folder under the system temp dir.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = super::getenv_str("LAZYGRAD_CACHE") {
        return PathBuf::from(dir);
    }
    let base = super::getenv_str("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| super::getenv_str("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("lazygrad")
}
