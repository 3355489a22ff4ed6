//! Kernel optimizations as RANGE splits, chosen by heuristics (`heuristic.rs`) or by BEAM search
//! (`search.rs`).
//!
//! Every opt splits one loop `r` of size `N` into an outer loop and an inner part of `amount`:
//! `r -> outer * amount + inner`. THREAD makes the outer part the CPU core id; UPCAST and UNROLL
//! make the inner part a constant-size axis the expander (`codegen/expand.rs`) turns into copies
//! of the code, so one iteration computes several outputs (registers reuse loaded values) or
//! several steps of a reduction. LOCAL, GROUP and GROUPTOP make a part the threads of a GPU
//! workgroup (`codegen/gpudims.rs`); they need a target with local memory (`Renderer::has_local`;
//! INTERP emulates one), as in tinygrad, whose CPU backend rejects them too.

pub mod heuristic;
mod one_hot;
pub mod search;
pub mod tensor_core;

pub use heuristic::{hand_coded_optimizations, matmul_panel};

use std::fmt;

use crate::dtype::DType;
use crate::uop::wmma::TensorCore;
use crate::uop::KernelName;
use crate::uop::Target;
use crate::uop::{Arg, AxisKind, Ops, Special, UOp, UOpMap};

/// One optimization action on the range with id `range`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opt {
    /// Compute `amount` consecutive outputs of an output loop per iteration.
    Upcast { range: usize, amount: usize },
    /// Do `amount` consecutive steps of a reduce loop per iteration.
    Unroll { range: usize, amount: usize },
    /// Run the outermost output loop on `n` threads: `r -> core_id * (N/n) + r'`.
    Thread(usize),
    /// Exchange the nesting of output loops `range` and `with` (the loop with the smaller id
    /// runs outside): the other loop's data then stays in cache while the inner one streams.
    Swap { range: usize, with: usize },
    /// Round loop `range` up to a multiple of `amount`: the extra iterations store nothing and
    /// read no memory outside the buffers (every access whose address depends on the loop is
    /// gated by `r < size`, but an output loop's loads that stay inside their buffer), so a
    /// loop of odd size still splits into whole vectors, tiles and threads. In a reduce loop the
    /// extra terms are the reduce's identity: a sum's terms that are 0 already stay as they are
    /// (`padded_terms_vanish`), others are selected by the gate. A loop of symbolic size `n`
    /// (a KV cache's keys) takes `ceil(n / amount) * amount` steps, which UPCAST and UNROLL by
    /// `amount` then split.
    Padto { range: usize, amount: usize },
    /// Spread `amount` consecutive outputs of output loop `range` over the threads of a
    /// workgroup: `r -> outer * amount + lidx`.
    Local { range: usize, amount: usize },
    /// Spread reduce loop `range` over `amount` threads of a workgroup that take every
    /// `amount`-th step (`r -> outer * amount + lidx`), their partial results combined through
    /// shared memory.
    Group { range: usize, amount: usize },
    /// GROUP with each thread taking a contiguous `1/amount` of the steps:
    /// `r -> lidx * (N / amount) + inner`.
    GroupTop { range: usize, amount: usize },
    /// Launch the kernel without local dims: each workgroup is one thread, and no LOCAL or GROUP
    /// may follow.
    NoLocals,
    /// Compute the matmul-shaped reduce with tensor core `tc`: output loops `m` and `n` and reduce
    /// loop `k` split into the instruction's tiles, one warp of threads per tile
    /// (`tensor_core.rs`). It comes first, before any other opt.
    TensorCore { tc: &'static TensorCore, m: usize, n: usize, k: usize },
}

impl Opt {
    /// Whether the opt needs a target with workgroups and local memory.
    pub fn needs_local(&self) -> bool {
        matches!(
            self,
            Opt::Local { .. } | Opt::Group { .. } | Opt::GroupTop { .. } | Opt::NoLocals | Opt::TensorCore { .. }
        )
    }
}

impl fmt::Display for Opt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Opt::Upcast { range, amount } => write!(f, "UPCAST(range={range}, amount={amount})"),
            Opt::Unroll { range, amount } => write!(f, "UNROLL(range={range}, amount={amount})"),
            Opt::Thread(n) => write!(f, "THREAD(threads={n})"),
            Opt::Swap { range, with } => write!(f, "SWAP(range={range}, with={with})"),
            Opt::Padto { range, amount } => write!(f, "PADTO(range={range}, amount={amount})"),
            Opt::Local { range, amount } => write!(f, "LOCAL(range={range}, amount={amount})"),
            Opt::Group { range, amount } => write!(f, "GROUP(range={range}, amount={amount})"),
            Opt::GroupTop { range, amount } => write!(f, "GROUPTOP(range={range}, amount={amount})"),
            Opt::NoLocals => write!(f, "NOLOCALS"),
            Opt::TensorCore { tc, m, n, k } => write!(f, "TC({}, m={m}, n={n}, k={k})", tc.name),
        }
    }
}

/// The DEBUG=3 line for a kernel's opts: `r_64_64_64 -> r_2_32_16_16_4_4: applied opts [...]`
/// (`before` is the name the schedule listed, `after` the name it runs under; one name when they
/// read the same).
pub fn applied_opts_line(before: &KernelName, after: &KernelName, opts: &[Opt], color: bool) -> String {
    let opts: Vec<String> = opts.iter().map(Opt::to_string).collect();
    let names = match before.to_string() == after.to_string() {
        true => after.render(color),
        false => format!("{} -> {}", before.render(color), after.render(color)),
    };
    format!("{names}: applied opts [{}]", opts.join(", "))
}

/// A kernel's loops: (id, kind, size), in id order (outer to inner).
pub fn kernel_ranges(ast: &UOp) -> Vec<(usize, AxisKind, usize)> {
    let mut ranges: Vec<(usize, AxisKind, usize)> = ast
        .toposort()
        .iter()
        .filter_map(|u| match u.arg() {
            Arg::Range(id, kind) if u.op() == Ops::Range => Some((*id, *kind, u.src()[0].const_int_value()? as usize)),
            _ => None,
        })
        .collect();
    ranges.sort();
    ranges
}

/// An id no loop of `ast` has, symbolic ones included.
pub(super) fn next_range_id(ast: &UOp) -> usize {
    let ids = ast.toposort().into_iter().filter_map(|u| match u.arg() {
        Arg::Range(id, _) if u.op() == Ops::Range => Some(id + 1),
        _ => None,
    });
    ids.max().unwrap_or(0)
}

pub(super) fn find_range(ast: &UOp, id: usize) -> Option<UOp> {
    ast.toposort().into_iter().find(|u| u.op() == Ops::Range && matches!(u.arg(), Arg::Range(i, _) if *i == id))
}

/// Replace `range` with `outer * amount + inner`; a REDUCE over `range` reduces over both parts.
fn split(ast: &UOp, range: &UOp, outer: UOp, amount: usize, inner: UOp) -> UOp {
    let reduces: Vec<UOp> =
        ast.toposort().into_iter().filter(|u| u.op() == Ops::Reduce && u.src()[1..].contains(range)).collect();
    let mut parts: UOpMap<UOp> = reduces
        .into_iter()
        .map(|red| {
            let mut src = vec![red.src()[0].clone()];
            for r in &red.src()[1..] {
                match r == range {
                    true => src.extend([&outer, &inner].into_iter().filter(|p| p.op() == Ops::Range).cloned()),
                    false => src.push(r.clone()),
                }
            }
            (red.clone(), red.replace_src(src))
        })
        .collect();
    parts.insert(range.clone(), outer.alu(Ops::Mul, &[&UOp::index_const(amount as i64)]).alu(Ops::Add, &[&inner]));
    crate::uop::substitute(ast, &mut parts, "split ranges")
}

/// A loop of `size` (the constant 0 for a single iteration).
pub(super) fn new_range(size: usize, id: usize, kind: AxisKind) -> UOp {
    if size == 1 {
        return UOp::index_const(0);
    }
    UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(size as i64)], Arg::Range(id, kind))
}

/// `ast` with one opt applied; `None` if it does not apply (no such loop, size not divisible, a
/// second THREAD, a pad of a loop already a multiple or shorter than the amount, or one whose
/// extra iterations could fault, THREAD and workgroups in one kernel, LOCAL or GROUP after
/// NOLOCALS, a workgroup over `MAX_WORKGROUP` threads).
pub fn apply_opt(ast: &UOp, opt: Opt) -> Option<UOp> {
    let next_id = next_range_id(ast);
    match opt {
        Opt::Upcast { range, amount } | Opt::Unroll { range, amount } => {
            let r = find_range(ast, range)?;
            let Arg::Range(id, kind) = r.arg() else { return None };
            let want = if matches!(opt, Opt::Upcast { .. }) { AxisKind::Loop } else { AxisKind::Reduce };
            if *kind != want || amount < 2 {
                return None;
            }
            let inner_kind = if want == AxisKind::Loop { AxisKind::Upcast } else { AxisKind::Unroll };
            let outer = match r.src()[0].const_int_value() {
                Some(size) if size % amount as i64 == 0 => new_range(size as usize / amount, *id, *kind),
                Some(_) => return None,
                None => symbolic_range(&divided(&r.src()[0], amount)?, *id, *kind),
            };
            Some(split(ast, &r, outer, amount, new_range(amount, next_id, inner_kind)))
        }
        Opt::Swap { range, with } => {
            let (a, b) = (find_range(ast, range)?, find_range(ast, with)?);
            let loop_size = |r: &UOp| match r.arg() {
                Arg::Range(_, AxisKind::Loop) => r.src()[0].const_int_value(),
                _ => None,
            };
            let (size_a, size_b) = (loop_size(&a)?, loop_size(&b)?);
            if range == with || size_a < 2 || size_b < 2 {
                return None;
            }
            // through fresh ids: with equal sizes, `a` renamed is `b`, and one substitution would
            // map the two onto each other
            let (size_a, size_b) = (size_a as usize, size_b as usize);
            let parked = [new_range(size_a, next_id, AxisKind::Loop), new_range(size_b, next_id + 1, AxisKind::Loop)];
            let mut first = UOpMap::from_iter([(a, parked[0].clone()), (b, parked[1].clone())]);
            let ast = crate::uop::substitute(ast, &mut first, "split ranges");
            let [pa, pb] = parked;
            let mut second = UOpMap::from_iter([
                (pa, new_range(size_a, with, AxisKind::Loop)),
                (pb, new_range(size_b, range, AxisKind::Loop)),
            ]);
            Some(crate::uop::substitute(&ast, &mut second, "split ranges"))
        }
        Opt::Padto { range, amount } => {
            let r = find_range(ast, range)?;
            let Arg::Range(id, kind @ (AxisKind::Loop | AxisKind::Reduce)) = r.arg() else { return None };
            let size = &r.src()[0];
            let padded = match size.const_int_value() {
                Some(n) if amount < 2 || amount as i64 > n || n % amount as i64 == 0 => return None,
                Some(n) => new_range((n as usize).next_multiple_of(amount), *id, *kind),
                // a loop of symbolic size `n`: `((n + amount - 1) / amount) * amount` steps
                None if amount < 2 || divided(size, amount).is_some() => return None,
                None => {
                    let a = UOp::index_const(amount as i64);
                    let vectors = size.alu(Ops::Add, &[&UOp::index_const(amount as i64 - 1)]).alu(Ops::IDiv, &[&a]);
                    symbolic_range(&vectors.alu(Ops::Mul, &[&a]), *id, *kind)
                }
            };
            // the loop := its padded self, every access that depends on it gated by `r < size`
            let gate = padded.alu(Ops::CmpLt, &[size]);
            let out = crate::codegen::fold::substitution(ast, &r, &padded, Some(&gate))?;
            Some(match *kind {
                AxisKind::Loop => ungated_loads(&out, &gate),
                _ if padded_terms_vanish(&out, &padded, &gate) => out,
                _ => padded_terms_identity(&out, &padded, &gate),
            })
        }
        Opt::Thread(n) => {
            let (id, _, size) = *kernel_ranges(ast).iter().find(|r| r.1 == AxisKind::Loop)?;
            if n < 2 || size % n != 0 || threaded(ast) || workgroups(ast) {
                return None;
            }
            let r = find_range(ast, id)?;
            let core =
                UOp::new(Ops::Special, DType::INDEX, vec![UOp::index_const(n as i64)], Arg::Special(Special::Core));
            Some(split(ast, &r, core, size / n, new_range(size / n, id, AxisKind::Loop)))
        }
        Opt::Local { range, amount } | Opt::Group { range, amount } | Opt::GroupTop { range, amount } => {
            let r = find_range(ast, range)?;
            let (Arg::Range(id, kind), Some(size)) = (r.arg(), r.src()[0].const_int_value()) else { return None };
            let (size, local) = (size as usize, matches!(opt, Opt::Local { .. }));
            let want = if local { AxisKind::Loop } else { AxisKind::Reduce };
            let no_locals = ast.arg() == &Arg::NoLocals;
            let threads: usize = kernel_ranges(ast)
                .iter()
                .filter(|r| matches!(r.1, AxisKind::Local | AxisKind::GroupReduce | AxisKind::Warp))
                .map(|r| r.2)
                .product();
            // a tensor core's warps reduce on their own
            let warps = kernel_ranges(ast).iter().any(|r| r.1 == AxisKind::Warp);
            if *kind != want
                || (warps && !local)
                || amount < 2
                || !size.is_multiple_of(amount)
                || threads * amount > MAX_WORKGROUP
                || no_locals
                || threaded(ast)
            {
                return None;
            }
            let part = new_range(amount, next_id, if local { AxisKind::Local } else { AxisKind::GroupReduce });
            let rest = new_range(size / amount, *id, *kind);
            Some(match opt {
                Opt::GroupTop { .. } => split(ast, &r, part, size / amount, rest),
                _ => split(ast, &r, rest, amount, part),
            })
        }
        Opt::TensorCore { tc, m, n, k } => tensor_core::apply(ast, tc, m, n, k),
        Opt::NoLocals => {
            if ast.arg() == &Arg::NoLocals || workgroups(ast) || threaded(ast) {
                return None;
            }
            Some(UOp::new(Ops::Sink, ast.dtype(), ast.src().to_vec(), Arg::NoLocals))
        }
    }
}

/// A loop of symbolic size `size`.
fn symbolic_range(size: &UOp, id: usize, kind: AxisKind) -> UOp {
    UOp::new(Ops::Range, DType::INDEX, vec![size.clone()], Arg::Range(id, kind))
}

/// Symbolic loop size `size` divided by `amount`, when it is a product with a constant that
/// `amount` divides (as PADTO leaves one).
fn divided(size: &UOp, amount: usize) -> Option<UOp> {
    let (x, c) = match (size.op(), size.src()) {
        (Ops::Mul, [x, c]) => (x, c.const_int_value()?),
        _ => return None,
    };
    match c % amount as i64 == 0 {
        true if c == amount as i64 => Some(x.clone()),
        true => Some(x.alu(Ops::Mul, &[&UOp::index_const(c / amount as i64)])),
        false => None,
    }
}

/// `ast` with each reduce over the padded loop `padded` taking its identity in the padded
/// iterations (where `gate` fails): `max(x)` of `where(gate, x, -inf)`, `sum(exp(x))` of
/// `where(gate, exp(x), 0)`.
fn padded_terms_identity(ast: &UOp, padded: &UOp, gate: &UOp) -> UOp {
    let mut masked: UOpMap<UOp> = ast
        .toposort()
        .into_iter()
        .filter(|u| u.op() == Ops::Reduce && u.src()[1..].contains(padded))
        .map(|red| {
            let Arg::Reduce(op) = red.arg() else { unreachable!("a REDUCE's arg is its op") };
            let identity = UOp::constant(red.dtype(), crate::codegen::lower::identity(*op, red.dtype()));
            let mut src = red.src().to_vec();
            src[0] = UOp::where_(gate, &src[0], &identity);
            (red.clone(), red.replace_src(src))
        })
        .collect();
    crate::uop::substitute(ast, &mut masked, "padded terms")
}

/// `ast`, an output loop padded with its accesses gated by `gate`, with the loads that stay
/// inside their buffer (a PARAM of known size) over the padded loop reading without `gate`: what
/// they read past the loop's end only reaches the stores `gate` masks, and an AVX-512 masked
/// load takes a port the FMAs need (a 1000-column matmul's panel loads, masked: 10% slower). A
/// load whose address depends on a loaded value keeps it.
fn ungated_loads(ast: &UOp, gate: &UOp) -> UOp {
    let ungated = |load: &UOp| {
        let index = &load.src()[0];
        let (buf, idx, gated) = (&index.src()[0], &index.src()[1], index.src().get(2)?);
        let rest = match gated {
            g if g == gate => None,
            g if g.op() == Ops::And && &g.src()[0] == gate => Some(g.src()[1].clone()),
            _ => return None,
        };
        let size = buf.src().first().filter(|_| buf.op() == Ops::Param)?.const_int_value()? as i128;
        let (lo, hi) = crate::uop::reach::index_reach(idx, rest.as_ref())?;
        if lo < 0 || hi >= size || idx.toposort().iter().any(|u| u.op() == Ops::Load) {
            return None;
        }
        let index = UOp::new(
            Ops::Index,
            index.dtype(),
            [buf.clone(), idx.clone()].into_iter().chain(rest).collect(),
            index.arg().clone(),
        );
        Some((load.clone(), load.replace_src([&[index][..], &load.src()[1..]].concat())))
    };
    let mut loads: UOpMap<UOp> = ast.toposort().iter().filter(|u| u.op() == Ops::Load).filter_map(ungated).collect();
    crate::uop::substitute(ast, &mut loads, "ungated loads")
}

/// Whether every reduce over the padded loop `padded` is a sum whose terms are 0 in the padded
/// iterations, where the loads gated by `gate` read 0: found by folding the terms with those
/// loads set to 0 (a product of them folds; an `exp` of one, or one times an ungated load that
/// might be infinite, does not).
fn padded_terms_vanish(ast: &UOp, padded: &UOp, gate: &UOp) -> bool {
    let gated_load =
        |l: &UOp| l.op() == Ops::Load && l.src()[0].src().get(2).is_some_and(|g| g.toposort().contains(gate));
    ast.toposort().iter().filter(|u| u.op() == Ops::Reduce && u.src()[1..].contains(padded)).all(|red| {
        let zeros = red.src()[0].toposort().into_iter().filter(gated_load).map(|l| {
            let zero = UOp::constant(l.dtype(), crate::uop::ConstValue::Int(0));
            (l, zero)
        });
        let terms = crate::uop::substitute(&red.src()[0], &mut zeros.collect(), "padded terms");
        let terms = crate::uop::graph_rewrite(&terms, crate::uop::symbolic::symbolic(), &mut (), "padded terms", false);
        red.arg() == &Arg::Reduce(Ops::Add) && terms.const_value().is_some_and(|c| c.as_f64() == 0.0)
    })
}

/// The most threads a workgroup may have (the product of its LOCAL and GROUP parts).
pub const MAX_WORKGROUP: usize = 1024;

/// Whether THREAD split the kernel over CPU cores.
pub(super) fn threaded(ast: &UOp) -> bool {
    ast.toposort().iter().any(|u| u.op() == Ops::Special && u.arg() == &Arg::Special(Special::Core))
}

/// Whether the kernel is launched as GPU workgroups: it has LOCAL or GROUP parts, or NOLOCALS.
pub fn workgroups(ast: &UOp) -> bool {
    ast.arg() == &Arg::NoLocals
        || kernel_ranges(ast).iter().any(|r| matches!(r.1, AxisKind::Local | AxisKind::GroupReduce | AxisKind::Warp))
}

/// `ast` with `opts` applied in order (an opt that does not apply is a bug in whoever chose it).
pub fn apply_opts(ast: &UOp, opts: &[Opt]) -> UOp {
    opts.iter().fold(ast.clone(), |ast, opt| {
        apply_opt(&ast, *opt).unwrap_or_else(|| panic!("opt {opt:?} does not apply to this kernel"))
    })
}

/// What decides a kernel's program besides its AST: NOOPT, the BEAM width, and the target.
pub fn settings(target: Target) -> (i64, usize, Target) {
    (crate::helpers::getenv("NOOPT", 0), search::beam_width(), target)
}
