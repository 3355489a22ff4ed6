//! The CPU device: render C, compile it with the system C compiler into a shared object (kept in
//! the verified artifact cache, `helpers/cache.rs`), load it and call it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::allocator::{Allocator, HostAllocator, LruAllocator};
use super::device::{Compiler, Device, KernelArg, Program};
use crate::error::{Error, Result};
use crate::helpers::{cache::ArtifactCache, getenv_str};
use crate::uop::{DTypeSupport, Language, ProgramSpec, Target};

const FLAGS: &[&str] = &["-O2", "-march=native", "-ffp-contract=off", "-fPIC"];

/// Flags added with `SANITIZE=1`: AddressSanitizer and UndefinedBehaviorSanitizer (with
/// float-to-int overflow, which gcc's `undefined` leaves out), each report fatal. Generated code
/// must never trigger one; the test process needs the ASan runtime preloaded (`docs/env.md`).
const SANITIZE_FLAGS: &[&str] =
    &["-fsanitize=address,undefined,float-cast-overflow", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"];

/// Flags that depend on the source. gcc 12's own vectorizer miscompiles some kernels: selects on
/// AVX-512 mask registers (a `cond ? x : 0.0f` summed over an unrolled one-hot came out short),
/// reduction chains whose loads it permutes, and `(double)(_Float16)x`, which it turns into
/// `(double)x`. Kernels that codegen vectorized itself (explicit vector types) are left alone
/// by it, with all of AVX-512 for their vectors (if they have 64-byte ones); scalar kernels keep
/// it, limited to AVX2.
fn source_flags(src: &str) -> &'static [&'static str] {
    match (src.contains("vector_size("), src.contains("_Float16")) {
        // vectors narrower than AVX-512's (`VECTOR_BYTES`): the code of a machine without it
        (true, _) if !src.contains("vector_size(64)") => &["-mno-avx512f", "-fno-tree-vectorize"],
        (true, _) => &["-fno-tree-vectorize"],
        (false, true) => &["-mno-avx512f", "-fno-tree-vectorize"],
        (false, false) => &["-mno-avx512f"],
    }
}

/// Whether the AddressSanitizer runtime is in this process. A sanitized kernel loaded without it
/// makes the runtime abort the process: it must be loaded first, by `LD_PRELOAD`.
#[cfg(unix)]
fn asan_runtime_loaded() -> bool {
    // SAFETY: the symbol is only looked up, never called or read.
    unsafe { libloading::os::unix::Library::this().get::<*const u8>(b"__asan_init\0") }.is_ok()
}
#[cfg(not(unix))]
fn asan_runtime_loaded() -> bool {
    false
}

/// A C compiler found on this machine.
pub struct CCompiler {
    cc: String,
    /// `FLAGS`, then `SANITIZE_FLAGS` with `SANITIZE=1` (read when the device opens).
    flags: Vec<&'static str>,
    /// The compiler's runtime library (`-print-libgcc-file-name`) when `ld` links shared objects
    /// itself: linking through the compiler driver costs more than compiling a small kernel.
    /// Sanitized objects link through the driver, which adds the sanitizers' runtimes.
    direct_link: Option<String>,
    /// The compiler's `--version` and the host CPU (`-march=native` compiles for it).
    identity: String,
    cache: ArtifactCache,
}

impl CCompiler {
    /// `$CC` if set, else the first of clang, gcc, cc that runs (gcc, cc with `SANITIZE=1`).
    pub fn detect() -> Result<CCompiler> {
        let sanitize = crate::helpers::getenv("SANITIZE", 0) != 0;
        if sanitize && !asan_runtime_loaded() {
            return Err(Error::Device(
                "SANITIZE=1 needs gcc's ASan runtime preloaded: LD_PRELOAD=$(gcc -print-file-name=libasan.so) \
                 (docs/env.md#sanitized-kernels)"
                    .into(),
            ));
        }
        let flags = [FLAGS, if sanitize { SANITIZE_FLAGS } else { &[] }].concat();
        let candidates: Vec<String> = match getenv_str("CC") {
            Some(cc) => vec![cc],
            // the sanitizers' runtime that the process preloads is gcc's
            None if sanitize => vec!["gcc".into(), "cc".into()],
            None => vec!["clang".into(), "gcc".into(), "cc".into()],
        };
        let runs = |cmd: &mut Command| cmd.output().ok().filter(|o| o.status.success());
        for cc in &candidates {
            if let Some(version) = runs(Self::command(cc).arg("--version")) {
                let ld = !sanitize && runs(Self::command("ld").arg("--version")).is_some();
                let libgcc = runs(Self::command(cc).arg("-print-libgcc-file-name"))
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                    .filter(|p| ld && Path::new(p).exists());
                let identity = format!("{}\n{}", String::from_utf8_lossy(&version.stdout).trim(), host_cpu());
                return Ok(CCompiler {
                    cc: cc.clone(),
                    flags,
                    direct_link: libgcc,
                    identity,
                    cache: ArtifactCache::new("cpu"),
                });
            }
        }
        Err(Error::Device(format!(
            "no C compiler found (tried {}); install gcc or clang, or set CC",
            candidates.join(", ")
        )))
    }

    /// The compiler (or linker) `program` as a command. It runs without `LD_PRELOAD`: the ASan
    /// runtime that a sanitized test process preloads doubles the cost of each compile.
    fn command(program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_remove("LD_PRELOAD");
        cmd
    }

    /// Compile `kernel.c` in folder `dir` into `kernel.so` there: to an object, then linked by
    /// `ld` with the compiler's runtime library and libm, or in one driver call where that is not
    /// possible. The files are named alike in every folder, so the shared object holds no
    /// folder's name: two compiles of one source give the same bytes, whichever of them the
    /// cache keeps.
    fn build(&self, dir: &Path, extra: &[&str]) -> Result<std::process::Output> {
        let run = |mut cmd: Command| cmd.current_dir(dir).output();
        let Some(libgcc) = &self.direct_link else {
            let mut cmd = Self::command(&self.cc);
            cmd.args(&self.flags).args(extra).args(["-shared", "-o", "kernel.so", "kernel.c", "-lm"]);
            return Ok(run(cmd)?);
        };
        let mut cmd = Self::command(&self.cc);
        cmd.args(&self.flags).args(extra).args(["-c", "-o", "kernel.o", "kernel.c"]);
        let compiled = run(cmd)?;
        if !compiled.status.success() {
            return Ok(compiled);
        }
        let mut cmd = Self::command("ld");
        cmd.args(["-shared", "-o", "kernel.so", "kernel.o"]).arg(libgcc).arg("-lm");
        Ok(run(cmd)?)
    }
}

impl CCompiler {
    /// What decides `src`'s shared object: the compiler, the host CPU, the flags, how it links,
    /// the source.
    fn inputs<'a>(&'a self, src: &'a str, flags: &'a str) -> [&'a str; 4] {
        [&self.identity, flags, self.direct_link.as_deref().unwrap_or("driver link"), src]
    }

    /// Every flag `src` compiles with, after the compiler's name.
    fn all_flags(&self, src: &str) -> String {
        [self.cc.clone(), self.flags.join(" "), source_flags(src).join(" ")].join(" ")
    }

    /// Whether the cache has an entry for `src` (checked when it is loaded).
    fn is_cached(&self, src: &str) -> bool {
        self.cache.contains(&self.inputs(src, &self.all_flags(src)))
    }

    /// The cached shared object of `src` (its path and bytes), if the cache holds it intact.
    fn cached(&self, src: &str) -> Option<(PathBuf, Vec<u8>)> {
        self.cache.load(&self.inputs(src, &self.all_flags(src)))
    }

    /// The shared object of `src` (its path and bytes): from the cache, else compiled now.
    fn shared_object(&self, src: &str) -> Result<(PathBuf, Vec<u8>)> {
        if let Some(so) = self.cached(src) {
            return Ok(so);
        }
        self.compile_batch(&[src])?;
        self.cached(src).ok_or_else(|| Error::Device("the kernel cache lost a shared object as it was stored".into()))
    }

    /// Compile `srcs` (kernels with distinct names and the same `source_flags`, none cached) as
    /// one translation unit, and link the shared object under every member's cache name: the
    /// compiler's start-up costs more than a small kernel, so a batch of kernels compiles in
    /// about the time of its largest ones. A failing batch is compiled again kernel by kernel,
    /// so that the others are still cached and the error shows the kernel that broke it.
    fn compile_batch(&self, srcs: &[&str]) -> Result<()> {
        // where the result goes is checked first: a compile that cannot be kept is wasted
        self.cache.create()?;
        // a folder of its own: concurrent compiles of one kernel are safe
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = std::env::temp_dir().join(format!("lazygrad-{}-{seq}", std::process::id()));
        std::fs::create_dir_all(&tmp)?;
        let built = std::fs::write(tmp.join("kernel.c"), srcs.concat())
            .map_err(Error::from)
            .and_then(|_| self.build(&tmp, source_flags(srcs[0])))
            .map(|out| (out, std::fs::read(tmp.join("kernel.so"))));
        let _ = std::fs::remove_dir_all(&tmp);
        let (out, so) = built?;
        if !out.status.success() {
            if srcs.len() > 1 {
                let each: Vec<Result<()>> = srcs.iter().map(|s| self.compile_batch(&[s])).collect();
                return each.into_iter().collect();
            }
            return Err(Error::Compile(format!(
                "{} failed:\n{}\n--- source ---\n{}",
                self.cc,
                String::from_utf8_lossy(&out.stderr),
                srcs[0]
            )));
        }
        let so = so?;
        for s in srcs {
            self.cache.store(&self.inputs(s, &self.all_flags(s)), &so)?;
        }
        Ok(())
    }
}

impl Compiler for CCompiler {
    /// The shared object for `src`, compiled now or taken from the disk cache.
    fn compile(&self, src: &str) -> Result<Vec<u8>> {
        Ok(self.shared_object(src)?.1)
    }
}

/// The host CPU as `/proc/cpuinfo` names it (model and flags), for the cache of code compiled for
/// it; empty where that file is missing.
fn host_cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| info.lines().find(|l| l.starts_with(name)).unwrap_or("").to_string();
    format!("{}\n{}", field("model name"), field("flags"))
}

/// The ABI every generated kernel's entry point has: buffer pointers, the variables' values and
/// the thread's core id.
type Entry = unsafe extern "C" fn(*const *mut u8, *const i64, i32);

/// A loaded kernel.
pub struct CpuProgram {
    entry: Entry,
    // Keeps the shared object mapped for as long as `entry` may be called.
    _lib: libloading::Library,
    nbufs: usize,
    nvars: usize,
    threads: usize,
}

impl CpuProgram {
    fn load(path: &Path, name: &str, nbufs: usize, nvars: usize, threads: usize) -> Result<CpuProgram> {
        let load_err = |e: libloading::Error| Error::Device(format!("loading {}: {e}", path.display()));
        // SAFETY: the library is one we just compiled from generated C; it has no initializers
        // with side effects.
        let lib = unsafe { libloading::Library::new(path) }.map_err(load_err)?;
        // SAFETY: the renderer emits `void <name>_entry(void**, const long long*, int)`, matching
        // `Entry`.
        let entry = unsafe { *lib.get::<Entry>(format!("{name}_entry\0").as_bytes()).map_err(load_err)? };
        Ok(CpuProgram { entry, _lib: lib, nbufs, nvars, threads })
    }
}

impl Program for CpuProgram {
    unsafe fn run(&self, bufs: &[KernelArg], vals: &[i64]) -> Result<Duration> {
        if vals.len() != self.nvars {
            return Err(Error::Device(format!("kernel reads {} variables, got {}", self.nvars, vals.len())));
        }
        if bufs.len() < self.nbufs {
            return Err(Error::Device(format!(
                "kernel uses buffer slots up to {}, got {} buffers",
                self.nbufs,
                bufs.len()
            )));
        }
        // pointers travel to the worker threads as integers; `bufs` keeps them alive until the
        // pool returns, which is after every part has finished
        let ptrs = bufs.iter().map(|b| b.host_ptr().map(|p| p as usize)).collect::<Result<Vec<_>>>()?;
        let entry = self.entry;
        // SAFETY: every pointer is the live allocation of a buffer held in `bufs` for the whole
        // launch, holding every byte the kernel reaches through it (`Program::run`'s contract);
        // each core writes a disjoint part of the output; `vals` holds one value per variable the
        // entry reads.
        let part = move |ptrs: &[usize], vals: &[i64], core: usize| unsafe {
            entry(ptrs.as_ptr() as *const *mut u8, vals.as_ptr(), core as i32)
        };
        let start = Instant::now();
        match self.threads {
            // one part runs here, with no job for the pool to share
            0 | 1 => part(&ptrs, vals, 0),
            threads => {
                let vals = vals.to_vec();
                super::pool::pool().run(threads, Arc::new(move |core| part(&ptrs, &vals, core)))
            }
        }
        Ok(start.elapsed())
    }
}

/// The kernel's machine code as `objdump` shows it (DEBUG=7), or why it can't be shown.
fn disassemble(so: &Path, name: &str) -> String {
    let out =
        Command::new("objdump").args(["-d", "--no-show-raw-insn", &format!("--disassemble={name}")]).arg(so).output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => format!("objdump failed: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => format!("no disassembly: objdump not available ({e})"),
    }
}

/// Kernels compiled as one translation unit: same compiler flags, distinct names.
struct Batch<'a> {
    flags: &'static [&'static str],
    names: Vec<String>,
    srcs: Vec<&'a str>,
    bytes: usize,
}

/// The CPU device.
pub struct CpuDevice {
    compiler: CCompiler,
    allocator: LruAllocator<HostAllocator>,
}

impl CpuDevice {
    pub fn open() -> Result<CpuDevice> {
        Ok(CpuDevice {
            compiler: CCompiler::detect()?,
            allocator: LruAllocator::new(HostAllocator, LruAllocator::<HostAllocator>::default_cap()),
        })
    }
}

impl Device for CpuDevice {
    fn name(&self) -> &str {
        "CPU"
    }
    fn allocator(&self) -> &dyn Allocator {
        &self.allocator
    }
    fn target(&self) -> Target {
        host_target("CPU")
    }
    fn compile(&self, spec: &ProgramSpec) -> Result<Arc<dyn Program>> {
        let start = Instant::now();
        let (so, _) = self.compiler.shared_object(&spec.src)?;
        if crate::helpers::debug() >= 3 {
            eprintln!("compiled {} in {:.2} ms", spec.name.for_debug(), start.elapsed().as_secs_f64() * 1e3);
        }
        if crate::helpers::debug() >= 7 {
            eprintln!("{}", disassemble(&so, &format!("{}_entry", spec.name)));
        }
        // codegen may fold away every read of a buffer, so count slots, not PARAMs
        let nbufs = spec
            .uops
            .iter()
            .filter_map(|u| match (u.op(), u.arg()) {
                (crate::uop::Ops::Param, crate::uop::Arg::Int(slot)) => Some(*slot as usize + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let nvars = spec.vars().len();
        Ok(Arc::new(CpuProgram::load(&so, &spec.name.to_string(), nbufs, nvars, spec.global_size[0])?))
    }

    /// The kernels not in the disk cache compiled in batches, one per core for each set of
    /// `source_flags` (largest sources first, each to the lightest batch without a kernel of its
    /// name), a batch per core at a time; then each kernel loaded as `compile` does.
    fn compile_all(&self, specs: &[&ProgramSpec]) -> Result<Vec<Arc<dyn Program>>> {
        let mut todo: Vec<&ProgramSpec> = specs.iter().copied().filter(|s| !self.compiler.is_cached(&s.src)).collect();
        todo.sort_by(|a, b| b.src.len().cmp(&a.src.len()).then_with(|| a.src.cmp(&b.src)));
        todo.dedup_by(|a, b| a.src == b.src);
        let cores = crate::helpers::cpu_threads();
        let mut batches: Vec<Batch> = vec![];
        for spec in todo {
            let (flags, name) = (source_flags(&spec.src), spec.name.to_string());
            let peers = batches.iter().filter(|b| b.flags == flags).count();
            let fits =
                batches.iter_mut().filter(|b| b.flags == flags && !b.names.contains(&name)).min_by_key(|b| b.bytes);
            match fits.filter(|_| peers >= cores) {
                Some(b) => {
                    b.names.push(name);
                    b.srcs.push(&spec.src);
                    b.bytes += spec.src.len();
                }
                None => batches.push(Batch { flags, names: vec![name], srcs: vec![&spec.src], bytes: spec.src.len() }),
            }
        }
        // one compiler run per core at a time (kernels of one name can make more batches)
        let next = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..cores.min(batches.len()))
                .map(|_| {
                    scope.spawn(|| -> Result<()> {
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(b) = batches.get(i) else { return Ok(()) };
                            self.compiler.compile_batch(&b.srcs)?;
                        }
                    })
                })
                .collect();
            workers.into_iter().try_for_each(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
        })?;
        specs.iter().map(|s| self.compile(s)).collect()
    }
}

/// This machine's CPU: its widest vector registers (or `VECTOR_BYTES`, 16, 32 or 64, to
/// generate code for another width) and `NUM_CPU_THREADS` threads (else every core).
pub fn host_target(name: &'static str) -> Target {
    let native = host_vector_bytes();
    let vector_bytes = match crate::helpers::getenv("VECTOR_BYTES", native as i64) {
        v @ (16 | 32 | 64) => v as usize,
        _ => native,
    };
    Target {
        name,
        language: Language::C,
        vector_bytes,
        register_bytes: native,
        threads: crate::helpers::cpu_threads(),
        workgroups: None,
        gpu: false,
        dtypes: DTypeSupport { half: true, bfloat16: false, float64: true, int64: true },
        tensor_cores: vec![],
        max_buffers: None,
    }
}

/// The width of this machine's vector registers in bytes: 64 with AVX-512, 32 with AVX2 and
/// FMA, else 16.
fn host_vector_bytes() -> usize {
    static NATIVE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *NATIVE.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return 64;
            }
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return 32;
            }
        }
        16
    })
}
