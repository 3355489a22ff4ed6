//! BEAM search (`BEAM=n`), after tinygrad's `beam_search`, in the engine because it compiles and
//! times candidates on the device (the actions it tries are codegen's, `codegen/opt/search.rs`): starting from the unoptimized kernel,
//! each round applies every action of a fixed list to every member of the beam, compiles the new
//! kernels in parallel, times each on scratch buffers and keeps the `n` fastest, until a round
//! brings no improvement. The chosen opts are cached in memory and on disk
//! (`<cache_dir>/beam/<key>`, keyed by the kernel, the device, the width, the thread count and
//! the vector width).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::codegen::opt::search::{actions, beam_width, lanes, MAX_LANES};
use crate::codegen::opt::{apply_opt, Opt};
use crate::codegen::{lower, optimizable};
use crate::dtype::DType;
use crate::engine::memory::param_reach;
use crate::error::{Error, Result};
use crate::helpers::lru::Lru;
use crate::helpers::{cache::cache_dir, debug, Context};
use crate::runtime::{Buffer, Device, Program};
use crate::uop::print::render_tree;
use crate::uop::uop::stable_hash;
use crate::uop::variable::kernel_vars;
use crate::uop::Target;
use crate::uop::UOp;
use crate::uop::{Kernel, KernelName, ProgramSpec};

/// The program for `kernel` on `dev`: with BEAM search's opts when `BEAM` is on and `dev` times
/// its kernels (INTERP keeps the heuristics: there is nothing to time), else `get_program`'s.
pub fn get_program_for(kernel: &Kernel, dev: &dyn Device) -> Result<ProgramSpec> {
    let renderer = crate::renderer::for_target(dev.target());
    let width = beam_width();
    if width > 0 && dev.times_kernels() {
        if let Some(beam) = beam_opts(kernel, dev, width)? {
            return crate::codegen::get_program_opts(kernel, &*renderer, &beam.opts, beam.note());
        }
    }
    crate::codegen::get_program(kernel, &*renderer)
}

/// Timed runs per candidate (the fastest counts): at least `RUNS`, and more (up to `MAX_RUNS`)
/// until they took `MIN_TIMING` seconds, so that short kernels are timed over many runs; a run
/// `EARLY_STOP` times slower than the best time so far ends its candidate's runs.
const RUNS: usize = 3;
const MAX_RUNS: usize = 100;
const MIN_TIMING: f64 = 2e-3;
const EARLY_STOP: f64 = 3.0;
/// A round continues the search only if it beats the best time so far by this fraction.
const MIN_PROGRESS: f64 = 0.01;
/// At the end, the winner and the heuristics' choice are timed in turn this many times and the
/// faster is kept: on a busy machine one noisy timing could otherwise crown a slower kernel.
const CONFIRM_ROUNDS: usize = 5;
/// Candidates with more linearized UOps than this are not compiled (the C compiler would take
/// seconds on them).
const MAX_UOPS: usize = 6000;
/// Candidates doing this many times the arithmetic of the leanest one are not timed (an opt that
/// undid a fold; tinygrad skips 1000x).
const MAX_OPS_RATIO: u64 = 10;
/// Kernels whose scratch buffers would take more bytes than this are not searched.
const MAX_SCRATCH_BYTES: usize = 1 << 31;
/// The first line of a cache file.
const CACHE_HEADER: &str = "lazygrad beam opts v1";

/// Where a kernel's BEAM opts came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Searched,
    Memory,
    Disk,
}

/// The opts BEAM chose for a kernel.
#[derive(Clone, Debug)]
pub struct Beam {
    pub opts: Vec<Opt>,
    pub found: Found,
}

impl Beam {
    /// What the DEBUG=3 line of applied opts says about them.
    pub fn note(&self) -> &'static str {
        match self.found {
            Found::Searched => " (BEAM)",
            Found::Memory => " (BEAM, searched before)",
            Found::Disk => " (BEAM, disk cache hit)",
        }
    }
}

/// The opts BEAM found in this process, by `cache_key` (the 4096 used last).
fn memory() -> &'static Mutex<Lru<u64, Vec<Opt>>> {
    static MEMORY: OnceLock<Mutex<Lru<u64, Vec<Opt>>>> = OnceLock::new();
    MEMORY.get_or_init(Default::default)
}

fn cache_key(kernel: &UOp, target: &Target, width: usize) -> u64 {
    stable_hash(&("beam", render_tree(kernel), target, width))
}

/// The disk cache file of `kernel`'s BEAM opts on `target` at `width`.
pub fn cache_path(kernel: &UOp, target: &Target, width: usize) -> PathBuf {
    cache_dir().join("beam").join(format!("{:016x}", cache_key(kernel, target, width)))
}

/// `beam_search`, once per process for each kernel, target and width.
pub fn beam_opts(kernel: &Kernel, dev: &dyn Device, width: usize) -> Result<Option<Beam>> {
    let key = cache_key(kernel, &dev.target(), width);
    if let Some(opts) = memory().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(Some(Beam { opts: opts.clone(), found: Found::Memory }));
    }
    let beam = beam_search(kernel, dev, width)?;
    if let Some(b) = &beam {
        memory().lock().unwrap_or_else(|e| e.into_inner()).insert(key, b.opts.clone());
    }
    Ok(beam)
}

/// The opts BEAM search of `width` picks for `kernel` (opts of `codegen::optimizable(kernel)`) on
/// `dev`, from the disk cache when it has them. `None` when the kernel cannot be timed (its
/// indices are unbounded, or its buffers too large).
pub fn beam_search(kernel: &Kernel, dev: &dyn Device, width: usize) -> Result<Option<Beam>> {
    let ast = optimizable(kernel)?;
    let path = cache_path(kernel, &dev.target(), width);
    if let Some(opts) = read_cache(&path, &ast) {
        return Ok(Some(Beam { opts, found: Found::Disk }));
    }
    let Some(bufs) = scratch_buffers(&ast, dev.name()) else {
        if debug() >= 2 {
            eprintln!(
                "BEAM {}: not searched (its buffers are unbounded or too large)",
                KernelName::of(kernel).for_debug()
            );
        }
        return Ok(None);
    };
    let opts = search(&ast, dev, &bufs, width.max(1), &KernelName::of(kernel))?;
    write_cache(&path, &opts);
    Ok(Some(Beam { opts, found: Found::Searched }))
}

/// A kernel reached by a list of opts, and its time in seconds (infinite: not timed).
struct Member {
    opts: Vec<Opt>,
    ast: UOp,
    time: f64,
}

/// The beam search proper, on `ast` (already `optimizable`), timing on `bufs`.
fn search(ast: &UOp, dev: &dyn Device, bufs: &[Arc<Buffer>], width: usize, name: &KernelName) -> Result<Vec<Opt>> {
    let start = Instant::now();
    let target = dev.target();
    let mut beam = vec![Member { opts: vec![], ast: ast.clone(), time: f64::INFINITY }];
    let (mut seen_asts, mut seen_srcs) = (HashSet::from([ast.clone()]), HashSet::new());
    let (mut round, mut least_ops) = (0, lower_quietly(ast, dev)?.ops);
    let heuristic_opts = crate::codegen::opt::hand_coded_optimizations(ast, &target);
    loop {
        round += 1;
        // the heuristics' choice competes in the first round, so the search ends no worse
        let heuristic = (round == 1).then(|| Member {
            ast: crate::codegen::opt::apply_opts(ast, &heuristic_opts),
            opts: heuristic_opts.clone(),
            time: f64::INFINITY,
        });
        let candidates: Vec<Member> = beam
            .iter()
            .flat_map(|m| {
                actions(&m.ast, &target).into_iter().filter_map(|opt| {
                    let ast = apply_opt(&m.ast, opt).filter(|a| lanes(a) <= MAX_LANES)?;
                    Some(Member { opts: [m.opts.as_slice(), &[opt]].concat(), ast, time: f64::INFINITY })
                })
            })
            .chain(heuristic)
            .filter(|c| seen_asts.insert(c.ast.clone()))
            .collect();
        let tried = candidates.len();
        let compiled = compile_all(dev, &candidates);
        let mut timed: Vec<Member> = vec![];
        for (mut c, compiled) in candidates.into_iter().zip(compiled) {
            let program = match compiled {
                Ok(c) if c.ops > least_ops.saturating_mul(MAX_OPS_RATIO) || !seen_srcs.insert(c.src) => continue,
                Ok(c) => {
                    least_ops = least_ops.min(c.ops);
                    c
                }
                Err(e) => {
                    if debug() >= 3 {
                        let opts: Vec<String> = c.opts.iter().map(Opt::to_string).collect();
                        eprintln!("BEAM {}: skipping [{}]: {e}", name.for_debug(), opts.join(", "));
                    }
                    continue;
                }
            };
            let best = timed.iter().map(|t| t.time).fold(beam[0].time, f64::min);
            c.time = time_program(&program, bufs, best * EARLY_STOP)?;
            timed.push(c);
        }
        let timed_now = timed.len();
        timed.sort_by(|a, b| a.time.total_cmp(&b.time));
        let improved = timed.first().is_some_and(|t| t.time < beam[0].time * (1.0 - MIN_PROGRESS));
        if improved {
            timed.truncate(width);
            beam = timed;
        } else if timed.first().is_some_and(|t| t.time < beam[0].time) {
            timed.truncate(1);
            beam = timed;
        }
        if debug() >= 2 {
            let opts: Vec<String> = beam[0].opts.iter().map(Opt::to_string).collect();
            eprintln!(
                "BEAM {} round {round}: {:10.2} us best, {tried:3} candidates ({timed_now} timed), {:6.2} s [{}]",
                name.for_debug(),
                beam[0].time * 1e6,
                start.elapsed().as_secs_f64(),
                opts.join(", ")
            );
        }
        if !improved {
            return confirm(ast, dev, bufs, beam.swap_remove(0).opts, heuristic_opts, name);
        }
    }
}

/// Of the search's `winner` and the heuristics' opts, the faster when timed in turn
/// (`CONFIRM_ROUNDS`); the winner if the two are one or one does not compile.
fn confirm(
    ast: &UOp,
    dev: &dyn Device,
    bufs: &[Arc<Buffer>],
    winner: Vec<Opt>,
    heuristic: Vec<Opt>,
    name: &KernelName,
) -> Result<Vec<Opt>> {
    if winner == heuristic {
        return Ok(winner);
    }
    let members: Vec<Member> = [&winner, &heuristic]
        .map(|opts| Member { ast: crate::codegen::opt::apply_opts(ast, opts), opts: opts.clone(), time: f64::INFINITY })
        .into();
    let compiled = compile_all(dev, &members);
    let [Ok(w), Ok(h)] = &compiled[..] else { return Ok(winner) };
    let (mut tw, mut th) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..CONFIRM_ROUNDS {
        tw = tw.min(time_program(w, bufs, f64::INFINITY)?);
        th = th.min(time_program(h, bufs, f64::INFINITY)?);
    }
    if debug() >= 2 {
        eprintln!("BEAM {}: confirmed {:.2} us vs the heuristics' {:.2} us", name.for_debug(), tw * 1e6, th * 1e6);
    }
    Ok(if th <= tw { heuristic } else { winner })
}

/// A candidate's program spec, lowered without its DEBUG lines and VIZ records (they would drown
/// the search's).
fn lower_quietly(ast: &UOp, dev: &dyn Device) -> Result<ProgramSpec> {
    let _quiet = Context::new(&[("DEBUG", 0)]);
    let target = dev.target();
    let renderer = crate::renderer::for_target(target.clone());
    match crate::viz::recording() {
        true => crate::viz::capture(|| lower(ast, &*renderer, &target)).0,
        false => lower(ast, &*renderer, &target),
    }
}

/// A candidate's program.
struct Compiled {
    /// The hash of its source (two candidates with one source are timed once).
    src: u64,
    /// Arithmetic ops one run performs.
    ops: u64,
    program: Arc<dyn Program>,
    /// The values its variables are timed at: their largest.
    vals: Vec<i64>,
}

/// Render and compile every candidate on `dev`, on one thread per core.
fn compile_all(dev: &dyn Device, candidates: &[Member]) -> Vec<Result<Compiled>> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Compiled>>>> = Mutex::new((0..candidates.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        // compiles in parallel on the host's cores, whatever the target
        for _ in 0..crate::helpers::cpu_threads().min(candidates.len()) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(c) = candidates.get(i) else { break };
                let compiled = lower_quietly(&c.ast, dev).and_then(|spec| match spec.uops.len() {
                    n if n > MAX_UOPS => Err(Error::value("BEAM", format!("{n} uops, over {MAX_UOPS}"))),
                    _ => dev.compile(&spec).map(|program| Compiled {
                        src: stable_hash(&spec.src),
                        ops: spec.ops,
                        program,
                        vals: kernel_vars(&spec.uops).iter().map(|v| v.vmax() as i64).collect(),
                    }),
                });
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(compiled);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.into_iter().map(|r| r.expect("every candidate is compiled")).collect()
}

/// The fastest run of `c` on `bufs`, in seconds (`RUNS` says how many run); a run slower than
/// `stop` ends them.
fn time_program(c: &Compiled, bufs: &[Arc<Buffer>], stop: f64) -> Result<f64> {
    let (mut best, mut total) = (f64::INFINITY, 0.0);
    for run in 1..=MAX_RUNS {
        // SAFETY: every candidate is lowered from the AST `bufs` were sized for by
        // `scratch_buffers` (each holds the kernel's reach through it), at its variables' maxima
        let t = unsafe { c.program.run(&Buffer::kernel_args(bufs)?, &c.vals)? }.as_secs_f64();
        (best, total) = (best.min(t), total + t);
        if t > stop || (run >= RUNS && total >= MIN_TIMING) {
            break;
        }
    }
    Ok(best)
}

/// Fresh buffers to time `ast` on, one per PARAM slot, each holding the bytes the kernel reaches
/// through it (`param_reach`); `None` when a reach is unbounded or they would take over
/// `MAX_SCRATCH_BYTES`. The schedule's own buffers are never written.
fn scratch_buffers(ast: &UOp, device: &str) -> Option<Vec<Arc<Buffer>>> {
    let sizes: Vec<usize> = param_reach(ast)
        .iter()
        .map(|r| if r.start < 0 { None } else { usize::try_from(r.end.max(1)).ok() })
        .collect::<Option<_>>()?;
    if sizes.iter().try_fold(0usize, |acc, n| acc.checked_add(*n))? > MAX_SCRATCH_BYTES {
        return None;
    }
    sizes
        .into_iter()
        .map(|bytes| {
            let buf = Arc::new(Buffer::new(device, bytes, DType::UINT8));
            // touch every page now, so that no candidate's first run pays for it
            buf.copyin(&vec![0; bytes]).ok()?;
            Some(buf)
        })
        .collect()
}

/// Opts as cache file text: the header, then one opt a line (`UPCAST 1 16`, `UNROLL 2 4`,
/// `SWAP 0 1`, `PADTO 1 32`, `THREAD 8`, `LOCAL 0 8`, `GROUP 2 16`, `GROUPTOP 2 16`, `NOLOCALS`).
fn format_opts(opts: &[Opt]) -> String {
    let lines = opts.iter().map(|o| match o {
        Opt::Upcast { range, amount } => format!("UPCAST {range} {amount}\n"),
        Opt::Unroll { range, amount } => format!("UNROLL {range} {amount}\n"),
        Opt::Thread(n) => format!("THREAD {n}\n"),
        Opt::Swap { range, with } => format!("SWAP {range} {with}\n"),
        Opt::Padto { range, amount } => format!("PADTO {range} {amount}\n"),
        Opt::Local { range, amount } => format!("LOCAL {range} {amount}\n"),
        Opt::Group { range, amount } => format!("GROUP {range} {amount}\n"),
        Opt::GroupTop { range, amount } => format!("GROUPTOP {range} {amount}\n"),
        Opt::NoLocals => "NOLOCALS\n".to_string(),
        Opt::TensorCore { tc, m, n, k } => format!("TC {} {m} {n} {k}\n", tc.name),
    });
    format!("{CACHE_HEADER}\n{}", lines.collect::<String>())
}

/// `format_opts`'s text back as opts; `None` if it is not that.
fn parse_opts(text: &str) -> Option<Vec<Opt>> {
    let mut lines = text.lines();
    if lines.next()? != CACHE_HEADER {
        return None;
    }
    lines
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| words.get(i)?.parse::<usize>().ok();
            match (words.first().copied(), words.len()) {
                (Some("UPCAST"), 3) => Some(Opt::Upcast { range: num(1)?, amount: num(2)? }),
                (Some("UNROLL"), 3) => Some(Opt::Unroll { range: num(1)?, amount: num(2)? }),
                (Some("THREAD"), 2) => Some(Opt::Thread(num(1)?)),
                (Some("SWAP"), 3) => Some(Opt::Swap { range: num(1)?, with: num(2)? }),
                (Some("PADTO"), 3) => Some(Opt::Padto { range: num(1)?, amount: num(2)? }),
                (Some("LOCAL"), 3) => Some(Opt::Local { range: num(1)?, amount: num(2)? }),
                (Some("GROUP"), 3) => Some(Opt::Group { range: num(1)?, amount: num(2)? }),
                (Some("GROUPTOP"), 3) => Some(Opt::GroupTop { range: num(1)?, amount: num(2)? }),
                (Some("NOLOCALS"), 1) => Some(Opt::NoLocals),
                (Some("TC"), 5) => Some(Opt::TensorCore {
                    tc: crate::uop::wmma::by_name(words[1])?,
                    m: num(2)?,
                    n: num(3)?,
                    k: num(4)?,
                }),
                _ => None,
            }
        })
        .collect()
}

/// The cached opts in `path`, if it holds opts that apply to `ast` (anything else is ignored,
/// with a DEBUG note).
fn read_cache(path: &Path, ast: &UOp) -> Option<Vec<Opt>> {
    let text = std::fs::read_to_string(path).ok()?;
    let opts = parse_opts(&text).filter(|opts| opts.iter().try_fold(ast.clone(), |a, o| apply_opt(&a, *o)).is_some());
    if opts.is_none() && debug() >= 1 {
        eprintln!("BEAM: ignoring the corrupt cache file {}", path.display());
    }
    opts
}

/// Store `opts` in `path` (written aside, then renamed); failing is only a DEBUG note.
fn write_cache(path: &Path, opts: &[Opt]) {
    let temp = path.with_extension(format!("{}.tmp", std::process::id()));
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(&temp, format_opts(opts)))
        .and_then(|_| std::fs::rename(&temp, path));
    if let (Err(e), true) = (written, debug() >= 1) {
        eprintln!("BEAM: could not write the cache file {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_text_round_trips() {
        let opts = vec![Opt::Upcast { range: 1, amount: 16 }, Opt::Unroll { range: 2, amount: 4 }, Opt::Thread(8)];
        assert_eq!(parse_opts(&format_opts(&opts)), Some(opts));
        let gpu = vec![
            Opt::NoLocals,
            Opt::Local { range: 0, amount: 8 },
            Opt::Group { range: 2, amount: 16 },
            Opt::GroupTop { range: 3, amount: 4 },
        ];
        assert_eq!(parse_opts(&format_opts(&gpu)), Some(gpu));
        assert_eq!(parse_opts(&format_opts(&[])), Some(vec![]));
        for bad in ["", "garbage", "lazygrad beam opts v1\nUPCAST 1", "lazygrad beam opts v1\nTHREAD x"] {
            assert_eq!(parse_opts(bad), None, "{bad:?}");
        }
    }
}
