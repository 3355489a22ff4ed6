//! Run a schedule: compile (or fetch) each kernel's program and launch it, copy across devices.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::codegen::{get_program, ProgramSpec};
use crate::error::Result;
use crate::helpers::{debug, GlobalCounters};
use crate::runtime::{get_device, Program};
use crate::schedule::ScheduleItem;
use crate::uop::UOp;

/// A compiled kernel and what DEBUG prints about it.
pub struct CompiledKernel {
    pub program: Arc<dyn Program>,
    pub name: String,
    pub ops: u64,
}

type Cache = Mutex<HashMap<(String, UOp), Arc<CompiledKernel>>>;

fn program_cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Seconds spent in each phase of one `run_schedule`.
#[derive(Default)]
struct Phases {
    codegen: f64,
    compile: f64,
    run: f64,
}

/// The program for `ast` on `device`, compiled once per process (and cached on disk by source).
pub fn get_runner(device: &str, ast: &UOp) -> Result<Arc<CompiledKernel>> {
    get_runner_timed(device, ast, &mut Phases::default())
}

fn get_runner_timed(device: &str, ast: &UOp, phases: &mut Phases) -> Result<Arc<CompiledKernel>> {
    let key = (device.to_string(), ast.clone());
    if let Some(k) = program_cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(k.clone());
    }
    let dev = get_device(device)?;
    if debug() >= 5 {
        eprintln!("{ast:?}");
    }
    let start = Instant::now();
    let spec: ProgramSpec = get_program(ast, dev.renderer());
    phases.codegen += start.elapsed().as_secs_f64();
    if debug() >= 4 && !spec.src.is_empty() {
        eprintln!("{}", spec.src);
    }
    let start = Instant::now();
    let program = dev.compile(&spec)?;
    phases.compile += start.elapsed().as_secs_f64();
    let kernel = Arc::new(CompiledKernel { program, name: spec.name, ops: spec.ops });
    program_cache().lock().unwrap_or_else(|e| e.into_inner()).insert(key, kernel.clone());
    Ok(kernel)
}

/// Execute `items` in order. Each item is dropped after it runs, so intermediate buffers are
/// freed at their last use.
pub fn run_schedule(items: Vec<ScheduleItem>) -> Result<()> {
    let mut phases = Phases::default();
    for item in items {
        match item {
            ScheduleItem::Kernel { ast, bufs } => {
                let device = bufs[0].device().to_string();
                let kernel = get_runner_timed(&device, &ast, &mut phases)?;
                let elapsed = kernel.program.run(&bufs)?.as_secs_f64();
                phases.run += elapsed;
                let bytes: u64 = bufs.iter().map(|b| b.nbytes() as u64).sum();
                GlobalCounters::record(kernel.ops, bytes, elapsed);
                if debug() >= 2 {
                    eprintln!(
                        "*** {device:<7} {:>4} {:<24} arg {:2} mem {:8.2} MB tm {:9.2}us/{:9.2}ms ({:8.2} GFLOPS {:7.2} GB/s)",
                        GlobalCounters::kernel_count(),
                        kernel.name,
                        bufs.len(),
                        GlobalCounters::global_mem() as f64 * 1e-6,
                        elapsed * 1e6,
                        GlobalCounters::time_sum_s() * 1e3,
                        kernel.ops as f64 / elapsed.max(1e-9) * 1e-9,
                        bytes as f64 / elapsed.max(1e-9) * 1e-9,
                    );
                }
            }
            ScheduleItem::Copy { dst, src } => {
                let start = Instant::now();
                dst.copyin(&src.copyout()?)?;
                if debug() >= 2 {
                    eprintln!(
                        "*** copy {} -> {} {} bytes in {:.2}us",
                        src.device(),
                        dst.device(),
                        dst.nbytes(),
                        start.elapsed().as_secs_f64() * 1e6
                    );
                }
            }
        }
    }
    if debug() >= 1 {
        eprintln!(
            "realize: codegen {:.2} ms, compile {:.2} ms, run {:.2} ms",
            phases.codegen * 1e3,
            phases.compile * 1e3,
            phases.run * 1e3
        );
    }
    Ok(())
}
