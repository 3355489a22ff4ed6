//! Metal: no Metal runtime exists here. Metal is Apple's; this platform has neither its framework
//! nor its compiler, so no METAL device opens, and Mac users run lazygrad on their GPU through
//! `WEBGPU` (whose wgpu back end there is Metal). What lives here is the check standing in for
//! Metal's compiler: MSL rendered for `metal::target()` (`renderer/metal.rs`) is type-checked by
//! clang++ against a small `metal_stdlib` header written for the tests (`tools/msl`), which CI
//! does for every new kernel with `MSL_CHECK=tools/msl`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::helpers::cache::ArtifactCache;
use crate::uop::{DTypeSupport, Language, Target, Workgroups};

/// Why no METAL device opens: there is no Metal runtime in lazygrad.
const NO_RUNTIME: &str =
    "lazygrad has no Metal runtime (Metal's kernels are only rendered and type-checked); on a Mac, DEV=WEBGPU runs them on the GPU through wgpu's Metal back end";

/// Opening a METAL device: always the error saying where Mac GPUs are.
pub fn open(_ordinal: usize) -> Result<std::sync::Arc<dyn super::device::Device>> {
    Err(Error::Device(NO_RUNTIME.into()))
}

/// METAL is never a default device.
pub fn available() -> std::result::Result<(), String> {
    Err("no Metal runtime (WEBGPU reaches Mac GPUs)".into())
}

/// The clang++ versions the check looks for on `PATH`, as `clang++-N`: 15 and newer compile
/// `_Float16` (the header's `half`) on x86-64.
const CLANG_VERSIONS: std::ops::RangeInclusive<u32> = 15..=19;

/// The clang++ that checks MSL: its path and the first line of its `--version`.
struct Clang {
    path: PathBuf,
    version: String,
}

/// The newest `clang++-N` on `PATH` (looked for once).
fn clang() -> Result<&'static Clang> {
    static FOUND: OnceLock<Option<Clang>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let dirs = std::env::var_os("PATH")?;
        let path = CLANG_VERSIONS.rev().find_map(|v| {
            std::env::split_paths(&dirs).map(|dir| dir.join(format!("clang++-{v}"))).find(|p| p.is_file())
        })?;
        let out = Command::new(&path).arg("--version").output().ok().filter(|o| o.status.success())?;
        let version = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().to_string();
        Some(Clang { path, version })
    });
    found.as_ref().ok_or_else(|| {
        Error::Compile(format!(
            "MSL check: no clang++-{}..{} that runs on PATH (tools/setup.sh installs Debian's clang-16)",
            CLANG_VERSIONS.start(),
            CLANG_VERSIONS.end()
        ))
    })
}

/// Type-checks MSL source `src` with clang++ (`-fsyntax-only` as C++17) against the
/// `metal_stdlib` header in folder `include`: `Ok` when clang accepts it, else `Error::Compile`
/// with clang's diagnostics and the source. A misspelt attribute is an error too. A source that
/// passed is remembered in the artifact cache (`<cache>/msl/`, keyed by clang's version, the
/// header and the source), so each kernel is checked once.
pub fn msl_check(src: &str, include: &Path) -> Result<()> {
    let clang = clang()?;
    let header_path = include.join("metal_stdlib");
    let header = std::fs::read_to_string(&header_path)
        .map_err(|e| Error::Compile(format!("MSL check: no header {}: {e}", header_path.display())))?;
    let cache = ArtifactCache::new("msl");
    let inputs = [clang.version.as_str(), header.as_str(), src];
    if cache.load(&inputs).is_some() {
        return Ok(());
    }
    let mut child = Command::new(&clang.path)
        .args(["-fsyntax-only", "-x", "c++", "-std=c++17", "-Werror=unknown-attributes", "-Wno-parentheses-equality"])
        .arg("-I")
        .arg(include)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Compile(format!("MSL check: {} did not start: {e}", clang.path.display())))?;
    child.stdin.take().expect("stdin is piped").write_all(src.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(Error::Compile(format!(
            "MSL check ({} against {}) failed:\n{}\n--- source ---\n{src}",
            clang.path.display(),
            header_path.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    cache.store(&inputs, &[])?;
    Ok(())
}

/// An Apple-silicon GPU as Metal describes it (tinygrad's Metal target): threadgroups of up
/// to 1024 threads running in SIMD groups of 32, 32 KiB of threadgroup memory, grids of up to
/// 2^32-1 threadgroups a dim (`gid` is a `uint3`). Scalar code, as CUDA's: the GPU's threads
/// fill its SIMD lanes. float16 and bfloat16 (MSL 3.1's `bfloat`) are computed in, int64 too;
/// Metal has no float64. Its tensor cores are the `simdgroup_matrix` products (M1 and newer).
pub fn target() -> Target {
    let groups = (1 << 32) - 1;
    Target {
        name: "METAL",
        language: Language::Metal,
        vector_bytes: 0,
        register_bytes: 4,
        threads: 1,
        workgroups: Some(Workgroups {
            max_threads: 1024,
            max_local: [1024; 3],
            max_groups: [groups; 3],
            local_bytes: 32 << 10,
            simd_threads: true,
        }),
        gpu: true,
        dtypes: DTypeSupport { half: true, bfloat16: true, float64: false, int64: true },
        tensor_cores: crate::uop::wmma::apple_simdgroup(),
        // a kernel's buffer argument table
        max_buffers: Some(31),
    }
}
