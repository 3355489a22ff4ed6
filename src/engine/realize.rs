//! Run a schedule: compile (or fetch) each kernel's program and launch it, copy across devices.

use std::cell::RefCell;
use std::hash::BuildHasherDefault;
use std::ops::{Range, RangeInclusive};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::search::get_program_for;
use crate::engine::memory::{loads_output, param_reach};
use crate::engine::ScheduleItem;
use crate::error::{Error, Result};
use crate::helpers::color::pad_to;
use crate::helpers::lru::Lru;
use crate::helpers::{debug, GlobalCounters};
use crate::runtime::allocator::HostMemory;
use crate::runtime::{get_device, intern_device, Buffer, Device, Program};
use crate::schedule::VarVals;
use crate::uop::{Arg, FastHasher, Kernel, KernelName, Ops, ProgramSpec, StoreMode, UOp};

/// A compiled kernel, what DEBUG prints about it, and what a launch must give it to stay inside
/// its buffers. Made only from the AST it was lowered from, so its reach is the program's.
pub struct CompiledKernel {
    program: Arc<dyn Program>,
    pub name: KernelName,
    pub ops: u64,
    /// The kernel loads from its output buffer too (an in-place update), so the memory planner
    /// must not give that buffer memory whose contents it does not know.
    pub reads_output: bool,
    /// The variables it reads, by name, in the order a launch passes their values.
    pub vars: Vec<String>,
    /// The range each variable's value must lie in (`vars` order).
    var_ranges: Vec<RangeInclusive<i64>>,
    /// The bytes of each buffer slot the kernel can touch (`engine::memory::param_reach`).
    reach: Vec<Range<i128>>,
    /// It streams whole registers of its stores past the caches, which host memory takes only at
    /// `HostMemory::ALIGN` (as every buffer the library allocates is aligned; memory a caller
    /// lends, `Tensor::from_blob`, may not be).
    streams: bool,
}

impl CompiledKernel {
    /// The kernel `program`, compiled from `spec`, which was lowered from `ast`.
    pub fn new(ast: &UOp, spec: &ProgramSpec, program: Arc<dyn Program>) -> CompiledKernel {
        let var_ranges = crate::uop::variable::kernel_vars(&spec.uops)
            .iter()
            .map(|v| match v.arg() {
                Arg::Var(_, min, max) => *min..=*max,
                _ => unreachable!("kernel_vars returns DEFINE_VARs"),
            })
            .collect();
        CompiledKernel {
            program,
            name: spec.name.clone(),
            ops: spec.ops,
            reads_output: loads_output(ast),
            vars: spec.vars(),
            var_ranges,
            reach: param_reach(ast),
            streams: spec.uops.iter().any(|u| u.op() == Ops::Store && u.arg() == &Arg::Store(StoreMode::Stream)),
        }
    }

    /// `spec`, lowered from `ast`, compiled on `dev`.
    pub fn compile(dev: &dyn Device, ast: &UOp, spec: &ProgramSpec) -> Result<CompiledKernel> {
        Ok(CompiledKernel::new(ast, spec, dev.compile(spec)?))
    }

    /// Run it over `bufs` (in PARAM order) with `vals` its variables' values (`vars` order), after
    /// checking the launch stays inside `bufs`; returns the time it took.
    pub fn launch(&self, bufs: &[Arc<Buffer>], vals: &[i64]) -> Result<Duration> {
        self.check_launch(bufs, vals)?;
        // SAFETY: check_launch found every buffer holding the bytes the kernel reaches through
        // it and every variable inside the range that reach assumed
        unsafe { self.program.run(&Buffer::kernel_args(bufs)?, vals) }
    }

    /// Whether a launch on `bufs` with the variables' values `vals` stays inside `bufs`: each
    /// buffer holds the bytes the kernel reaches through it, each value lies in its variable's
    /// range (the reach assumes it does).
    fn check_launch(&self, bufs: &[Arc<Buffer>], vals: &[i64]) -> Result<()> {
        // the name is formatted only for an error: this runs on every launch
        let kernel = || self.name.for_debug();
        if bufs.len() < self.reach.len() || vals.len() != self.vars.len() {
            return Err(Error::value(
                "launch",
                format!(
                    "kernel {} takes {} buffers and {} variable values, given {} and {}",
                    kernel(),
                    self.reach.len(),
                    self.vars.len(),
                    bufs.len(),
                    vals.len()
                ),
            ));
        }
        for ((name, range), v) in self.vars.iter().zip(&self.var_ranges).zip(vals) {
            if !range.contains(v) {
                return Err(Error::value(
                    "launch",
                    format!(
                        "kernel {} launched with {name} = {v}, outside its range {}..={}",
                        kernel(),
                        range.start(),
                        range.end()
                    ),
                ));
            }
        }
        for (slot, (reach, b)) in self.reach.iter().zip(bufs).enumerate() {
            let bytes = b.nbytes();
            if !reach.is_empty() && (reach.start < 0 || reach.end > bytes as i128) {
                return Err(Error::OutOfBounds { kernel: kernel(), slot, reach: reach.clone(), bytes });
            }
            let misaligned = |p: *mut u8| !(p as usize).is_multiple_of(HostMemory::ALIGN);
            if self.streams && b.host_ptr().is_ok_and(misaligned) {
                let reason = format!(
                    "kernel {} streams its stores, which needs {}-byte aligned memory; buffer {slot} is not",
                    kernel(),
                    HostMemory::ALIGN
                );
                return Err(Error::value("launch", reason));
            }
        }
        Ok(())
    }
}

/// Programs by device, kernel AST and the settings the opts read (`codegen::opt::settings`); the
/// 4096 used last (a JIT holds its own). Hashed with `FastHasher`: every eager op looks one up.
type CacheKey = (&'static str, UOp, (i64, usize, crate::uop::Target));
type Cache = Mutex<Lru<CacheKey, Arc<CompiledKernel>, BuildHasherDefault<FastHasher>>>;

fn program_cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Seconds spent in each phase of one `run_schedule`, and how many of its kernels needed codegen
/// (`generated`) or were in the program cache (`reused`).
#[derive(Default)]
struct Phases {
    generated: usize,
    reused: usize,
    codegen: f64,
    compile: f64,
    run: f64,
}

/// The program for `ast` on `device`, compiled once per process (and cached on disk by source).
pub fn get_runner(device: &str, ast: &Kernel) -> Result<Arc<CompiledKernel>> {
    get_runner_timed(intern_device(device), ast, &mut Phases::default())
}

fn get_runner_timed(device: &'static str, ast: &Kernel, phases: &mut Phases) -> Result<Arc<CompiledKernel>> {
    let dev = get_device(device)?;
    let key = program_key(device, dev.as_ref(), ast);
    if let Some(k) = program_cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        phases.reused += 1;
        return Ok(k.clone());
    }
    let spec = codegen(dev.as_ref(), ast, phases)?;
    if debug() >= 4 && !spec.src.is_empty() {
        eprintln!("{}", spec.src);
    }
    let start = Instant::now();
    let program = dev.compile(&spec)?;
    phases.compile += start.elapsed().as_secs_f64();
    Ok(cache_program(key, ast, &spec, program))
}

/// The program cache's key of `ast` on `dev` (named `device`).
fn program_key(device: &'static str, dev: &dyn Device, ast: &Kernel) -> CacheKey {
    (device, ast.root().clone(), crate::codegen::opt::settings(dev.target()))
}

/// The program spec of `ast` for `dev`, timed as codegen.
fn codegen(dev: &dyn Device, ast: &Kernel, phases: &mut Phases) -> Result<ProgramSpec> {
    phases.generated += 1;
    if debug() >= 5 {
        eprintln!("kernel AST {}:\n{ast:?}", KernelName::of(ast).for_debug());
    }
    let start = Instant::now();
    let spec = get_program_for(ast, dev)?;
    phases.codegen += start.elapsed().as_secs_f64();
    super::check::render_checks(ast)?;
    Ok(spec)
}

static PROGRAMS_MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many programs this process has generated and compiled (or taken from the disk cache) so
/// far: a kernel found in the program cache does not count.
pub fn programs_made() -> usize {
    PROGRAMS_MADE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Put the compiled `program` of `ast` in the program cache under `key`.
fn cache_program(key: CacheKey, ast: &UOp, spec: &ProgramSpec, program: Arc<dyn Program>) -> Arc<CompiledKernel> {
    PROGRAMS_MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let kernel = Arc::new(CompiledKernel::new(ast, spec, program));
    program_cache().lock().unwrap_or_else(|e| e.into_inner()).insert(key, kernel.clone());
    kernel
}

/// What runs for one schedule step.
#[derive(Clone)]
pub enum Runner {
    Kernel(Arc<CompiledKernel>),
    /// A copy; with `ranks`, an all-reduce over the job's processes with that op.
    Copy {
        ranks: Option<Ops>,
    },
}

/// A step ready to run: compiled, with its buffers and its variables' values bound (what the JIT
/// captures and replays).
#[derive(Clone)]
pub struct ExecItem {
    pub runner: Runner,
    pub bufs: Vec<Arc<Buffer>>,
    pub vals: Vec<i64>,
}

impl Runner {
    /// The values of the variables it reads, taken from `vals`; an error names one it lacks.
    pub fn var_vals(&self, vals: &VarVals) -> Result<Vec<i64>> {
        let Runner::Kernel(k) = self else { return Ok(vec![]) };
        k.vars
            .iter()
            .map(|n| {
                vals.get(n).copied().ok_or_else(|| {
                    Error::value(
                        "launch",
                        format!("kernel {} reads variable {n}, which is not bound", k.name.for_debug()),
                    )
                })
            })
            .collect()
    }
}

impl ExecItem {
    /// Run it, account it in `GlobalCounters`, print its DEBUG=2 line; returns seconds taken.
    pub fn run(&self) -> Result<f64> {
        let Some(first) = self.bufs.first() else { return Err(Error::value("run", "a step given no buffers")) };
        let bytes: u64 = self.bufs.iter().map(|b| b.nbytes() as u64).sum();
        let (name, ops, elapsed) = match &self.runner {
            Runner::Kernel(k) => (Some(&k.name), k.ops, k.launch(&self.bufs, &self.vals)?.as_secs_f64()),
            Runner::Copy { ranks } => {
                let [dst, src] = &self.bufs[..] else {
                    return Err(Error::value("run", format!("a copy takes 2 buffers, given {}", self.bufs.len())));
                };
                let start = Instant::now();
                match ranks {
                    None => dst.copy_from(src)?,
                    Some(op) => dst.all_reduce_ranks_from(src, *op)?,
                }
                (None, 0, start.elapsed().as_secs_f64())
            }
        };
        GlobalCounters::record(ops, bytes, elapsed);
        if debug() >= 2 {
            let name = name.map_or("copy".to_string(), KernelName::for_debug);
            eprintln!(
                "*** {:<7} {:>4} {} arg {:2} mem {:8.2} MB tm {:9.2}us/{:9.2}ms ({:8.2} GFLOPS {:7.2} GB/s)",
                first.device(),
                GlobalCounters::kernel_count(),
                pad_to(&name, 26),
                self.bufs.len(),
                GlobalCounters::mem_used() as f64 * 1e-6,
                elapsed * 1e6,
                GlobalCounters::time_sum_s() * 1e3,
                ops as f64 / elapsed.max(1e-9) * 1e-9,
                bytes as f64 / elapsed.max(1e-9) * 1e-9,
            );
        }
        Ok(elapsed)
    }
}

thread_local! {
    /// While the JIT captures, every step run on this thread is recorded here.
    static CAPTURE: RefCell<Option<Vec<ExecItem>>> = const { RefCell::new(None) };
}

/// Whether the JIT is capturing on this thread.
pub fn capturing() -> bool {
    CAPTURE.with(|c| c.borrow().is_some())
}

/// Record every step `f` runs on this thread (nested captures are not supported). The recording
/// ends when `f` returns or panics: a failed capture leaves nothing recording.
pub fn capture<T>(f: impl FnOnce() -> T) -> (T, Vec<ExecItem>) {
    struct Recording;
    impl Drop for Recording {
        fn drop(&mut self) {
            CAPTURE.with(|c| c.borrow_mut().take());
        }
    }
    CAPTURE.with(|c| *c.borrow_mut() = Some(vec![]));
    let recording = Recording;
    let out = f();
    let items = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    drop(recording);
    (out, items)
}

/// Compile the schedule's new kernels together: codegen on every core at once, then each
/// device's `compile_all` (the CPU compiles them in one batch per core). Below DEBUG=3 and
/// without VIZ only: there the per-kernel output follows the schedule's order; and not with BEAM,
/// whose search compiles on every core itself and times its candidates on an idle machine.
fn precompile(items: &[ScheduleItem]) -> Result<Phases> {
    let mut phases = Phases::default();
    // a schedule of one kernel (an eager op) has nothing to compile in parallel
    let kernels = items.iter().filter(|i| matches!(i, ScheduleItem::Kernel { .. })).count();
    if kernels < 2 || debug() >= 3 || crate::viz::recording() || crate::codegen::opt::search::beam_width() > 0 {
        return Ok(phases);
    }
    let mut todo: Vec<(CacheKey, &Kernel)> = vec![];
    for item in items {
        if let ScheduleItem::Kernel { ast, bufs } = item {
            let key = program_key(bufs[0].device(), get_device(bufs[0].device())?.as_ref(), ast);
            if !program_cache().lock().unwrap_or_else(|e| e.into_inner()).contains_key(&key)
                && !todo.iter().any(|(k, _)| *k == key)
            {
                todo.push((key, ast));
            }
        }
    }
    let workers = crate::helpers::cpu_threads().min(todo.len());
    if workers < 2 {
        return Ok(phases);
    }
    let (next, settings) = (std::sync::atomic::AtomicUsize::new(0), crate::helpers::Context::current());
    let specs: Mutex<Vec<Option<ProgramSpec>>> = Mutex::new(vec![None; todo.len()]);
    let results: Vec<Result<Phases>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let _ctx = crate::helpers::Context::inherit(&settings);
                    let mut mine = Phases::default();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(((device, ..), ast)) = todo.get(i) else { return Ok(mine) };
                        let spec = codegen(get_device(device)?.as_ref(), ast, &mut mine)?;
                        specs.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(spec);
                    }
                })
            })
            .collect();
        // a codegen bug panics with its own message, which reaches the caller unchanged
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    for r in results {
        let r = r?;
        phases.generated += r.generated;
        phases.codegen += r.codegen;
    }
    let specs: Vec<ProgramSpec> = specs
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|s| s.expect("every kernel was generated"))
        .collect();
    let start = Instant::now();
    let mut devices: Vec<&str> = todo.iter().map(|(k, _)| k.0).collect();
    devices.sort_unstable();
    devices.dedup();
    for device in devices {
        let mine: Vec<usize> = (0..todo.len()).filter(|&i| todo[i].0 .0 == device).collect();
        let programs = get_device(device)?.compile_all(&mine.iter().map(|&i| &specs[i]).collect::<Vec<_>>())?;
        for (i, program) in mine.into_iter().zip(programs) {
            cache_program(todo[i].0.clone(), todo[i].1, &specs[i], program);
        }
    }
    phases.compile += start.elapsed().as_secs_f64();
    Ok(phases)
}

/// Execute `items` in order, with `vals` the values of the variables their kernels read. Each
/// item is dropped after it runs, so a buffer the memory plan left alone (`engine/bind.rs`) is
/// freed at its last use.
pub fn run_schedule(items: Vec<ScheduleItem>, vals: &VarVals) -> Result<()> {
    let mut phases = precompile(&items)?;
    // the loop below finds the precompiled programs in the cache: they are not reuses
    let precompiled = phases.generated;
    for item in items {
        let exec = match item {
            ScheduleItem::Kernel { ast, bufs } => {
                let runner = Runner::Kernel(get_runner_timed(bufs[0].device(), &ast, &mut phases)?);
                ExecItem { vals: runner.var_vals(vals)?, runner, bufs }
            }
            ScheduleItem::Copy { dst, src, ranks } => {
                ExecItem { runner: Runner::Copy { ranks }, bufs: vec![dst, src], vals: vec![] }
            }
        };
        phases.run += exec.run()?;
        CAPTURE.with(|c| c.borrow_mut().as_mut().map(|v| v.push(exec)));
    }
    phases.reused -= precompiled;
    if debug() >= 1 {
        eprintln!(
            "realize: programs {} new, {} cached; codegen {:.2} ms, compile {:.2} ms, run {:.2} ms",
            phases.generated,
            phases.reused,
            phases.codegen * 1e3,
            phases.compile * 1e3,
            phases.run * 1e3
        );
    }
    Ok(())
}
