//! Where lazygrad keeps what it may reuse across runs, and the verified cache of compiled
//! programs kept there.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

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

/// SHA-256 of `bytes` in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The first line of every record.
const RECORD_MAGIC: &str = "lazygrad compiled artifact v1";

/// Compiled programs on disk, one folder per device kind. An entry is two files named by the
/// SHA-256 of what determines the program (compiler, flags, target, source: the `inputs`):
/// `<key>.bin`, the artifact, and `<key>.rec`, a record of those inputs and of the artifact's
/// SHA-256. A lookup checks both, so an entry that was damaged, cut short or built from other
/// inputs under a colliding name is a miss (and is rebuilt), never a wrong program.
pub struct ArtifactCache {
    dir: PathBuf,
}

impl ArtifactCache {
    /// The cache of device kind `kind` (`cpu`, `cl`) under `cache_dir()`.
    pub fn new(kind: &str) -> ArtifactCache {
        ArtifactCache { dir: cache_dir().join(kind) }
    }

    /// Create the cache's folder if need be; an error names it (and `LAZYGRAD_CACHE`, which moves
    /// it).
    pub fn create(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| {
            std::io::Error::new(e.kind(), format!("kernel cache folder {} (LAZYGRAD_CACHE): {e}", self.dir.display()))
        })
    }

    /// The inputs as one byte string (each part's length before it, so parts cannot run together).
    fn joined(inputs: &[&str]) -> String {
        inputs.iter().map(|p| format!("{}:{p}", p.len())).collect::<Vec<_>>().join("\n")
    }

    /// The artifact's path for `inputs`, whether or not it exists.
    pub fn path(&self, inputs: &[&str]) -> PathBuf {
        self.dir.join(format!("{}.bin", &sha256_hex(Self::joined(inputs).as_bytes())[..32]))
    }

    /// The path and bytes of the artifact built from `inputs`, if the cache holds it intact.
    pub fn load(&self, inputs: &[&str]) -> Option<(PathBuf, Vec<u8>)> {
        let bin = self.path(inputs);
        let record = std::fs::read_to_string(bin.with_extension("rec")).ok()?;
        let (magic, rest) = record.split_once('\n')?;
        let (digest, built_from) = rest.split_once('\n')?;
        if magic != RECORD_MAGIC || built_from != Self::joined(inputs) {
            return None;
        }
        let bytes = std::fs::read(&bin).ok()?;
        (sha256_hex(&bytes) == digest).then_some((bin, bytes))
    }

    /// Whether the cache has an entry for `inputs` (not checked: `load` does that), so that a
    /// batch compiles only what is missing without reading every artifact twice.
    pub fn contains(&self, inputs: &[&str]) -> bool {
        self.path(inputs).with_extension("rec").exists()
    }

    /// Store `artifact` as the one built from `inputs`, and return its cached path. Written aside
    /// and renamed, the artifact first and its record last, so a reader sees a whole entry or a
    /// miss, even with other processes storing the same one.
    pub fn store(&self, inputs: &[&str], artifact: &[u8]) -> std::io::Result<PathBuf> {
        self.create()?;
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let unique = format!("{}.{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let bin = self.path(inputs);
        let (tmp_bin, tmp_rec) =
            (bin.with_extension(format!("{unique}.bin")), bin.with_extension(format!("{unique}.rec")));
        std::fs::write(&tmp_bin, artifact)?;
        std::fs::rename(&tmp_bin, &bin)?;
        let record = format!("{RECORD_MAGIC}\n{}\n{}", sha256_hex(artifact), Self::joined(inputs));
        std::fs::write(&tmp_rec, record)?;
        std::fs::rename(&tmp_rec, bin.with_extension("rec"))?;
        Ok(bin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The path of the entry for `inputs`, if intact.
    fn lookup(cache: &ArtifactCache, inputs: &[&str]) -> Option<PathBuf> {
        cache.load(inputs).map(|(path, _)| path)
    }

    #[test]
    fn entries_are_verified_against_their_inputs_and_bytes() {
        let dir = std::env::temp_dir().join(format!("lazygrad-artifacts-{}", std::process::id()));
        let cache = ArtifactCache { dir: dir.clone() };
        let inputs = ["cc -O2", "int f() { return 1; }"];
        assert_eq!(lookup(&cache, &inputs), None);
        assert!(!cache.contains(&inputs));
        let path = cache.store(&inputs, b"artifact bytes").unwrap();
        assert_eq!(lookup(&cache, &inputs), Some(path.clone()));
        assert_eq!(std::fs::read(&path).unwrap(), b"artifact bytes");
        // other inputs are another entry; parts cannot run together
        assert_eq!(lookup(&cache, &["cc -O2 int", "f() { return 1; }"]), None);
        // damaged, truncated or emptied artifacts and records are misses
        std::fs::write(&path, b"artifact bytez").unwrap();
        assert_eq!(lookup(&cache, &inputs), None);
        cache.store(&inputs, b"artifact bytes").unwrap();
        std::fs::write(&path, b"artifact").unwrap();
        assert_eq!(lookup(&cache, &inputs), None);
        cache.store(&inputs, b"artifact bytes").unwrap();
        let record = path.with_extension("rec");
        let text = std::fs::read_to_string(&record).unwrap();
        std::fs::write(&record, text.replace("return 1", "return 2")).unwrap();
        assert_eq!(lookup(&cache, &inputs), None, "a record of other inputs under this name");
        std::fs::write(&record, "").unwrap();
        assert_eq!(lookup(&cache, &inputs), None);
        cache.store(&inputs, b"artifact bytes").unwrap();
        assert_eq!(lookup(&cache, &inputs), Some(path));
        let _ = std::fs::remove_dir_all(dir);
    }
}
