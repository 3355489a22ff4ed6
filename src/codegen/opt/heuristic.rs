//! Hand-coded optimizations for CPUs, after tinygrad's `hand_coded_optimizations`: register-tile
//! the output axes whose lanes can share loads, unroll the innermost reduce loop, and spread the
//! outermost output loop over the cores.

use std::collections::{HashMap, HashSet};

use super::{apply_opt, apply_opts, kernel_ranges, Opt};
use crate::dtype::DType;
use crate::helpers::getenv;
use crate::uop::Target;
use crate::uop::{Arg, AxisKind, Ops, UOp};

/// Kernels smaller than this many loop iterations stay on one thread.
pub const THREAD_MIN_WORK: usize = 1 << 16;
/// Elementwise kernels of at least this many iterations compute whole vectors (a 128x128
/// activation too: scalar, its 16K lanes took 5-10x longer).
const VECTOR_MIN_WORK: usize = 1 << 10;
/// Lanes per upcast axis; the innermost output axis (contiguous in the output, so its lanes
/// make one vector) takes the widest of a vector, half and a quarter of one (at least 4) that
/// divides it. At most `MAX_UPCAST` output lanes per iteration.
pub const UPCAST_AMOUNT: usize = 4;
const MAX_UPCAST: usize = 64;
const MAX_UPCAST_AXES: usize = 2;
/// An output axis this short that 4 does not divide (a 3 or 5 wide convolution window) is upcast
/// whole; a longer one by its largest divisor up to this.
const SMALL_AXIS_MAX: usize = 7;
/// Output columns one matmul tile computes on a CPU-like `target` (two vectors); the scheduler
/// lays large matmul right operands out in panels of this many columns (`schedule/layout.rs`). None on GPUs and targets
/// without vectors, whose tiles are not rows of vector registers.
pub fn matmul_panel(target: &Target) -> Option<usize> {
    (target.float_lanes() > 1 && !target.simd_workgroups()).then(|| 2 * target.float_lanes())
}
/// Vector registers of `target`'s ISA: 32 with AVX-512, 16 with AVX2 and SSE.
fn vector_registers(target: &Target) -> usize {
    match target.vector_bytes {
        64 => 32,
        _ => 16,
    }
}
/// Vector accumulators a register tile may hold: half the vector registers, the rest holding
/// the loaded operands.
fn max_accumulators(target: &Target) -> usize {
    vector_registers(target) / 2
}
/// Independent accumulators a core needs to keep its FMA units busy: 2 pipes by 4 cycles of
/// latency on current x86 cores.
const FMA_CHAINS: usize = 8;
/// Whether a register tile of `accumulators` vectors, doubled while at most `max` fit, gives
/// `FMA_CHAINS` independent sums.
fn fma_chains(accumulators: usize, max: usize) -> bool {
    let mut tile = accumulators.max(1);
    while 2 * tile <= max {
        tile *= 2;
    }
    tile >= FMA_CHAINS
}
/// An outer loop shorter than this many iterations per thread, that the threads do not divide,
/// gives the threads to an inner loop they divide.
const SHORT_LOOP_THREADS: usize = 8;
/// Output loops swap only when the outer one runs at least this often.
const SWAP_MIN_ITERS: usize = 16;
/// Reduce loops up to this size (a convolution window's row) are unrolled whole; longer ones by
/// their largest divisor up to `UNROLL_AMOUNT`.
const FULL_UNROLL_MAX: usize = 5;
/// Floats one core's L2 cache holds (1 MiB: current x86 server cores have 1 to 2).
const L2_FLOATS: usize = 1 << 18;
const UNROLL_AMOUNT: usize = 4;

/// For each load in a reduce, the loop ids its address depends on.
fn load_ranges(ast: &UOp) -> Vec<HashSet<usize>> {
    ast.toposort()
        .iter()
        .filter(|u| u.op() == Ops::Load)
        .map(|l| {
            l.src()[0]
                .toposort()
                .iter()
                .filter_map(|u| match u.arg() {
                    Arg::Range(id, _) if u.op() == Ops::Range => Some(*id),
                    _ => None,
                })
                .collect::<HashSet<usize>>()
        })
        .collect()
}

/// Whether a load inside the reduce (any load, without one) walks memory one element per step
/// of loop `id`: lanes of that loop are then one vector load even when no lane shares it.
fn load_contiguous(ast: &UOp, id: usize, reduce_ids: &HashSet<usize>) -> bool {
    let is_range =
        |u: &UOp, want: &dyn Fn(usize) -> bool| u.op() == Ops::Range && matches!(u.arg(), Arg::Range(i, _) if want(*i));
    ast.toposort().iter().filter(|u| u.op() == Ops::Load).any(|l| {
        let idx = &l.src()[0].src()[1];
        let nodes = idx.toposort();
        let lin = crate::uop::symbolic::Lin::of(idx);
        (reduce_ids.is_empty() || nodes.iter().any(|u| is_range(u, &|i| reduce_ids.contains(&i))))
            && lin.terms.iter().any(|(t, c)| *c == 1 && is_range(t, &|i| i == id))
            && lin
                .terms
                .iter()
                .all(|(t, _)| is_range(t, &|i| i == id) || !t.toposort().iter().any(|u| is_range(u, &|i| i == id)))
    })
}

/// The loops of `kind` of symbolic size (`kernel_ranges` leaves them out): id and largest size.
fn symbolic_ranges(ast: &UOp, kind: AxisKind) -> Vec<(usize, usize)> {
    ast.toposort()
        .iter()
        .filter_map(|u| match (u.op(), u.arg()) {
            (Ops::Range, Arg::Range(id, k)) if *k == kind && u.src()[0].const_int_value().is_none() => {
                Some((*id, u.src()[0].vmax().max(1) as usize))
            }
            _ => None,
        })
        .collect()
}

/// The optimizations hand-picked for `ast` on `target` (none with NOOPT).
pub fn hand_coded_optimizations(ast: &UOp, target: &Target) -> Vec<Opt> {
    if getenv("NOOPT", 0) != 0 {
        return vec![];
    }
    if let Some(opts) = super::tensor_core::tensor_core_opts(ast, target) {
        return opts;
    }
    if target.simd_workgroups() {
        return gpu_optimizations(ast, target);
    }
    if target.gpu {
        return core_optimizations(ast, target);
    }
    let (vl, threads, max_accumulators) = (target.float_lanes(), target.threads, max_accumulators(target));
    let unpadded = kernel_ranges(ast);
    // a reduce over a symbolic size is never split, but the kernel still runs it: its loads
    // share lanes of the output axes, and its largest size counts as work
    let symbolic = symbolic_ranges(ast, AxisKind::Reduce);
    let symbolic_loops = symbolic_ranges(ast, AxisKind::Loop);
    let reduce_ids: HashSet<usize> =
        unpadded.iter().filter(|r| r.1 == AxisKind::Reduce).map(|r| r.0).chain(symbolic.iter().map(|r| r.0)).collect();
    let reduce_vector = reduce_vector_width(ast, &unpadded, &symbolic, &reduce_ids, vl);
    let reduce_lanes = reduce_vector.map(|v| v.lanes);
    let work: usize = unpadded.iter().map(|r| r.2).chain(symbolic.iter().chain(&symbolic_loops).map(|r| r.1)).product();
    // a large elementwise kernel all of whose math has vector forms: one vector per iteration,
    // along the innermost output axis, else along the innermost axis some load walks (the
    // stores then go lane by lane: channels-last data read channels-first)
    let elementwise = reduce_ids.is_empty() && work >= VECTOR_MIN_WORK && crate::codegen::vectorize::all_vector(ast);
    let padded_vector = symbolic_loops
        .iter()
        .filter(|_| elementwise)
        .find_map(|r| Some(Opt::Padto { range: r.0, amount: vl }).filter(|_| stores_along(ast, r.0, &unpadded)))
        .or_else(|| {
            (elementwise && symbolic_loops.is_empty()).then(|| padded_row_vector(ast, &unpadded, vl)).flatten()
        });
    // the other opts are chosen for the kernel as padded
    let pad = match reduce_vector {
        Some(v) => v.pad,
        None => pad_innermost(ast, &unpadded, vl).or(padded_vector),
    };
    let padded = apply_opts(ast, pad.as_slice());
    let ast = &padded;
    let ranges = kernel_ranges(ast);
    let mut opts = vec![];
    // output loop id -> lanes it was upcast by
    let mut upcast: HashMap<usize, usize> = HashMap::new();
    // the innermost output loop: contiguous in the output, so its lanes make one vector
    let innermost = ranges.iter().filter(|r| r.1 == AxisKind::Loop).map(|r| r.0).max();
    if let Some(Opt::Padto { range, amount }) = padded_vector {
        opts.push(Opt::Upcast { range, amount });
        upcast.insert(range, amount);
        let walked = walked_loop_innermost(ast, range, &opts);
        opts.extend(walked);
    }
    let whole_vectors = |r: &&(usize, AxisKind, usize)| r.1 == AxisKind::Loop && r.2.is_multiple_of(vl) && r.2 > vl;
    let vector_axis = ranges
        .iter()
        .filter(whole_vectors)
        .filter(|r| Some(r.0) == innermost || load_contiguous(ast, r.0, &reduce_ids))
        .max_by_key(|r| (Some(r.0) == innermost, r.0));
    if let Some(&(id, _, _)) = vector_axis.filter(|_| elementwise && padded_vector.is_none()) {
        opts.push(Opt::Upcast { range: id, amount: vl });
        upcast.insert(id, vl);
        let walked = walked_loop_innermost(ast, id, &opts);
        opts.extend(walked);
    }
    if let Some(tile) = super::one_hot::one_hot_tile(ast, vl, max_accumulators) {
        for opt in &tile {
            if let Opt::Upcast { range, amount } = opt {
                *upcast.entry(*range).or_insert(1) *= amount;
            }
        }
        opts.extend(tile);
    } else if !reduce_ids.is_empty() {
        // loads inside the reduce loop; upcasting an output axis a load does not depend on lets
        // all its lanes share that load
        let loads: Vec<HashSet<usize>> = load_ranges(ast).into_iter().filter(|l| !l.is_disjoint(&reduce_ids)).collect();
        // else the largest of 3..=SMALL_AXIS_MAX that divides it (a 10-wide axis by 5)
        let small = |size: usize| (3..=SMALL_AXIS_MAX).rev().find(|a| size.is_multiple_of(*a));
        let amount = |id: usize, size: usize| {
            match Some(id) == innermost && reduce_lanes.is_none() {
                true => [vl, vl / 2, vl / 4].into_iter().find(|a| *a >= 4 && size.is_multiple_of(*a) && size > *a),
                false if size.is_multiple_of(UPCAST_AMOUNT) && size > UPCAST_AMOUNT => Some(UPCAST_AMOUNT),
                false => None,
            }
            .or_else(|| small(size))
        };
        let mut shared: HashSet<usize> = HashSet::new();
        for _ in 0..MAX_UPCAST_AXES {
            let lanes: usize = upcast.values().product();
            // a whole window axis, or lanes of an odd size (a 10-wide row by 5), may fill half the
            // accumulator registers; all of them where no other axis can be tiled (a 1-channel
            // conv's weight gradient: 8 output channels by a 5-wide window row, 4x as fast as 8)
            let pick_within = |small_accumulators: usize| {
                ranges
                    .iter()
                    .filter(|r| r.1 == AxisKind::Loop && !upcast.contains_key(&r.0))
                    .filter_map(|r| {
                        let small_or_odd =
                            |a: &usize| *a <= SMALL_AXIS_MAX && (*a == r.2 || !a.is_multiple_of(UPCAST_AMOUNT));
                        let cap = |a: &usize| match () {
                            // each lane is a whole vector accumulator
                            _ if reduce_lanes.is_some() => lanes * a <= max_accumulators,
                            _ if small_or_odd(a) => lanes * a <= vl * small_accumulators,
                            _ => lanes * a <= MAX_UPCAST,
                        };
                        // vector accumulators that 4 lanes would overfill take 2: `x @ w.T`'s
                        // 4 columns by 2 rows are FMA_CHAINS sums, twice the speed of 4 columns
                        let halved = || Some(2).filter(|_| reduce_lanes.is_some() && r.2 > 2 && r.2.is_multiple_of(2));
                        let amount = amount(r.0, r.2).filter(cap).or_else(|| halved().filter(cap))?;
                        let reused: HashSet<usize> = (0..loads.len()).filter(|&i| !loads[i].contains(&r.0)).collect();
                        Some((reused.difference(&shared).count(), reused.len(), r.0, amount, reused))
                    })
                    .filter(|c| c.1 > 0)
                    // of equal sharing, an amount whose tile (doubled while the accumulators
                    // fit) keeps enough FMAs in flight: a 3-tap window row by 2 vectors is 6
                    // chains on AVX2, and a conv's weight gradient ran at 60% of the FMA rate
                    .max_by_key(|c| (c.0, c.1, fma_chains(lanes / vl * c.3, max_accumulators), c.2))
            };
            let pick = pick_within(max_accumulators / 2).or_else(|| pick_within(max_accumulators));
            let Some((_, _, id, amount, reused)) = pick else { break };
            opts.push(Opt::Upcast { range: id, amount });
            upcast.insert(id, amount);
            shared.extend(reused);
        }
        // no lane shares a load, but the lanes of an axis along which a load walks memory still
        // read one vector: the innermost output axis if it is one, else (with no other upcast) the
        // innermost such axis (a per-channel statistic or max pool over channels-last data)
        let lanes: usize = upcast.values().product();
        let vector_load_axis = ranges
            .iter()
            .filter(|r| r.1 == AxisKind::Loop && !upcast.contains_key(&r.0) && r.2.is_multiple_of(vl))
            .filter(|r| lanes * vl <= MAX_UPCAST && load_contiguous(ast, r.0, &reduce_ids))
            .filter(|r| (upcast.is_empty() || Some(r.0) == innermost) && crate::codegen::vectorize::vector_math(ast))
            .max_by_key(|r| (Some(r.0) == innermost, r.0));
        if let Some(&(id, _, size)) = vector_load_axis {
            opts.push(Opt::Upcast { range: id, amount: vl });
            upcast.insert(id, vl);
            // two vectors of it when it has them: a channels-last pixel of 32 floats is read whole
            // in one pass instead of half a pixel per pass over the data
            if (size / vl).is_multiple_of(2) && lanes * 2 * vl <= MAX_UPCAST {
                opts.push(Opt::Upcast { range: id, amount: 2 });
                upcast.insert(id, 2 * vl);
            }
        }
        // a tile of whole vectors: when the contiguous axis takes a full vector and one more axis
        // is tiled, both double while the accumulators fit, the vectors first (8 rows by 2
        // vectors of 16 is 16 AVX-512 registers; with AVX2, 4 rows by 2 vectors of 8 load 6
        // operands per 8 FMAs against 9 for 8 rows by 1 vector)
        let vector_tile = innermost.is_some_and(|id| upcast.get(&id).is_some_and(|a| *a >= vl));
        if vector_tile && upcast.len() == 2 {
            for &(id, _, size) in ranges.iter().rev() {
                if 2 * upcast.values().product::<usize>() / vl > max_accumulators {
                    break;
                }
                if let Some(lanes) = upcast.get_mut(&id).filter(|a| (size / **a).is_multiple_of(2)) {
                    opts.push(Opt::Upcast { range: id, amount: 2 });
                    *lanes *= 2;
                }
            }
            // registers left: a third output axis that some load does not depend on takes two
            // lanes (a convolution's adjacent output rows share its weights: 8 accumulators -> 16)
            let third = ranges
                .iter()
                .filter(|r| r.1 == AxisKind::Loop && !upcast.contains_key(&r.0) && r.2.is_multiple_of(2) && r.2 > 2)
                .filter(|r| loads.iter().any(|l| !l.contains(&r.0)))
                .max_by_key(|r| r.0);
            if let Some(&(id, _, _)) = third.filter(|_| 2 * upcast.values().product::<usize>() / vl <= max_accumulators)
            {
                opts.push(Opt::Upcast { range: id, amount: 2 });
                upcast.insert(id, 2);
            }
        }
        // a reduce loop of symbolic size, padded to whole vectors, is split into them
        let symbolic_vector = reduce_vector.filter(|v| symbolic.iter().any(|r| r.0 == v.range));
        if let Some(v) = symbolic_vector {
            opts.push(Opt::Unroll { range: v.range, amount: v.lanes });
        } else if let Some(&(id, _, size)) = ranges.iter().rfind(|r| r.1 == AxisKind::Reduce) {
            // with no output lanes, a reduce loop its loads walk becomes vector lanes itself
            let vector = upcast.is_empty()
                && size.is_multiple_of(vl)
                && load_contiguous(ast, id, &reduce_ids)
                && crate::codegen::vectorize::vector_math(ast);
            // an unrolled step's operands (a vector per vector load, a broadcast per lane of
            // the others) stay live beside the accumulators; past the vector registers the
            // compiler reloads them per use, a memory operand in each FMA (a 4x16 AVX2 matmul
            // tile: 84 GFLOP/s a core not unrolled, 44-51 unrolled by 2 or 4)
            let accumulators = (upcast.values().product::<usize>() / vl).max(1);
            let operands: usize = loads
                .iter()
                .map(|l| {
                    let lanes = |(id, amount): (&usize, &usize)| match Some(*id) == innermost && *amount >= vl {
                        true => amount / vl,
                        false => *amount,
                    };
                    upcast.iter().filter(|(id, _)| l.contains(id)).map(lanes).product::<usize>()
                })
                .sum();
            let fits = |a: &usize| accumulators + a * operands <= vector_registers(target);
            let amount = match reduce_lanes {
                Some(lanes) => lanes,
                None if vector => vl,
                None if size <= FULL_UNROLL_MAX && fits(&size) => size,
                None => (2..=UNROLL_AMOUNT).rev().filter(fits).find(|a| size.is_multiple_of(*a)).unwrap_or(1),
            };
            if amount > 1 && size.is_multiple_of(amount) {
                opts.push(Opt::Unroll { range: id, amount });
            }
        }
    }
    // of two register-tiled output loops, the one whose order streams fewer inputs runs
    // outermost (below). The loops between keep their order inside the outer one (a conv's input
    // gradient: channel halves, then images, then pixels, each image's gradient in cache while
    // its pixels run; pixels outside the images streamed all images per pixel, 30 ms -> 11)
    // A loop upcast whole (a matmul's column panel) is tiled by the output loop outside it that
    // the same loads walk (the loop over the panels). GPT 512 wide: 4 sequences' row tiles each
    // streamed the 4 MB of panels from L3 (90 GFLOP/s); each panel now serves a sequence's rows
    // (200).
    let (loaded, size_of) = (load_ranges(ast), ranges.iter().map(|r| (r.0, r.2)).collect::<HashMap<_, _>>());
    let walkers = |id: usize| -> Vec<usize> { (0..loaded.len()).filter(|&i| loaded[i].contains(&id)).collect() };
    let tiled: Vec<(usize, usize)> = ranges
        .iter()
        .filter(|r| r.1 == AxisKind::Loop && upcast.contains_key(&r.0))
        .map(|r| match r.2 == upcast[&r.0] {
            true => ranges
                .iter()
                .filter(|q| q.1 == AxisKind::Loop && q.0 < r.0 && !upcast.contains_key(&q.0))
                .filter(|q| walkers(q.0) == walkers(r.0))
                .map(|q| (q.0, q.2))
                .next_back()
                .unwrap_or((r.0, 1)),
            false => (r.0, r.2 / upcast[&r.0]),
        })
        .collect();
    if let [(outer, outer_iters), (inner, inner_iters)] = tiled[..] {
        // elements the loads that walk loop `a` and not loop `b` touch per iteration of the loops
        // outside both (a batch of matmuls streams each one's operands in turn)
        let size_of: HashMap<usize, usize> = size_of.into_iter().filter(|r| r.0 >= outer).collect();
        let footprint = |a: usize, b: usize| -> usize {
            let walks = loaded.iter().filter(|l| l.contains(&a) && !l.contains(&b));
            walks.map(|l| l.iter().map(|id| size_of.get(id).copied().unwrap_or(1)).product::<usize>()).sum()
        };
        // the inner loop's inputs are streamed once per outer iteration: the order that streams
        // less (`x @ w.T`: 256 rows of x streamed once per 4-column tile of the 3x larger w, rather
        // than w once per 2 rows: 131 -> 166 GFLOP/s)
        let streamed = |o: usize, o_iters: usize, i: usize| o_iters.saturating_mul(footprint(i, o));
        let less = streamed(inner, inner_iters, outer) < streamed(outer, outer_iters, inner);
        // what the inner loop streams in each outer iteration, when the L2 holds it, is read
        // from there in either order, and the order stays (GPT's 1 MB weights streamed per row
        // tile ran 15% faster than the rows per column tile)
        let cached = footprint(inner, outer) <= L2_FLOATS;
        if inner_iters >= 2 && less && !cached && outer_iters >= SWAP_MIN_ITERS {
            let tiles = apply_opts(ast, &opts);
            let between: Vec<usize> = kernel_ranges(&tiles)
                .iter()
                .filter(|r| r.1 == AxisKind::Loop && (outer..=inner).contains(&r.0))
                .map(|r| r.0)
                .collect();
            opts.extend(between.windows(2).rev().map(|w| Opt::Swap { range: w[0], with: w[1] }));
        }
    }
    // the outer loop as the opts so far leave it, padded to a multiple of the cores when no
    // count divides it
    let planned = apply_opts(ast, &opts);
    let loops: Vec<(usize, AxisKind, usize)> =
        kernel_ranges(&planned).into_iter().filter(|r| r.1 == AxisKind::Loop).collect();
    // an outer loop too short for the cores to share evenly (attention's 3 KV heads on 2 cores:
    // padded to 4, a quarter of the work is masked lanes) gives way to an inner one they divide
    let short = |size: usize| !size.is_multiple_of(threads) && size < SHORT_LOOP_THREADS * threads;
    let divided = loops.iter().skip(1).find(|r| r.2.is_multiple_of(threads));
    if let (Some(&(outer, _, size)), Some(&(inner, _, _))) = (loops.first(), divided) {
        if work >= THREAD_MIN_WORK && threads > 1 && short(size) {
            opts.extend([Opt::Swap { range: outer, with: inner }, Opt::Thread(threads)]);
            return pad.into_iter().chain(opts).collect();
        }
    }
    if let Some(&(id, _, size)) = loops.first() {
        match (2..=threads).rev().find(|n| size.is_multiple_of(*n)) {
            _ if work < THREAD_MIN_WORK => {}
            Some(n) => opts.push(Opt::Thread(n)),
            None if threads > 1 && apply_opt(&planned, Opt::Padto { range: id, amount: threads }).is_some() => {
                opts.extend([Opt::Padto { range: id, amount: threads }, Opt::Thread(threads)])
            }
            None => {}
        }
    }
    pad.into_iter().chain(opts).collect()
}

/// Adjacent SWAPs that make innermost the output loop along which a load walks memory, in a kernel
/// (`ast` after `opts`) whose vector lanes along loop `vector` gather that load instead: channels-
/// last data stored channels-first. Each cache line its lanes gather then serves its next elements
/// in the next iterations, where a sweep over the other loops came between and fetched it again
/// (a convolution's 16x64x32x32 output transposed to NCHW: 0.62 -> 0.36 ms, BEAM's order).
fn walked_loop_innermost(ast: &UOp, vector: usize, opts: &[Opt]) -> Vec<Opt> {
    let none = HashSet::new();
    let walked = kernel_ranges(ast)
        .iter()
        .filter(|r| r.1 == AxisKind::Loop && r.0 != vector && load_contiguous(ast, r.0, &none))
        .map(|r| r.0)
        .max();
    let Some(walked) = walked.filter(|_| !load_contiguous(ast, vector, &none)) else { return vec![] };
    let loops: Vec<usize> = kernel_ranges(&apply_opts(ast, opts))
        .iter()
        .filter(|r| r.1 == AxisKind::Loop && r.0 >= walked)
        .map(|r| r.0)
        .collect();
    loops.windows(2).map(|w| Opt::Swap { range: w[0], with: w[1] }).collect()
}

/// An elementwise kernel's innermost loop of constant size longer than a vector that whole
/// vectors do not divide, along which its float32 stores walk memory (a convolution's input
/// zero-padded to 34-wide rows): padded to a multiple of a vector, its lanes are masked vector
/// loads and stores, where it ran lane by lane.
fn padded_row_vector(ast: &UOp, ranges: &[(usize, AxisKind, usize)], vl: usize) -> Option<Opt> {
    let &(id, _, size) = ranges.iter().filter(|r| r.1 == AxisKind::Loop).max_by_key(|r| r.0)?;
    let pad = Opt::Padto { range: id, amount: vl };
    (vl > 1 && size > vl && !size.is_multiple_of(vl) && stores_along(ast, id, ranges) && apply_opt(ast, pad).is_some())
        .then_some(pad)
}

/// Whether loop `id` is an elementwise kernel's innermost loop (none of `ranges` is inner to it),
/// along which its float32 stores walk memory (attention's probabilities over a KV cache's keys):
/// padded to whole vectors, its lanes are vector loads and masked vector stores.
fn stores_along(ast: &UOp, id: usize, ranges: &[(usize, AxisKind, usize)]) -> bool {
    let Some(range) = super::find_range(ast, id) else { return false };
    let innermost = ranges.iter().all(|r| r.0 <= id);
    let stores: Vec<UOp> = ast.toposort().into_iter().filter(|u| u.op() == Ops::Store).collect();
    innermost
        && !stores.is_empty()
        && stores.iter().all(|st| {
            st.src()[1].dtype() == DType::FLOAT32
                && crate::codegen::vectorize::stride_one_along(&st.src()[0].src()[1], &range)
        })
}

/// A reduce loop computed as vector lanes (`reduce_vector_width`).
#[derive(Clone, Copy)]
struct ReduceVector {
    range: usize,
    lanes: usize,
    /// The PADTO to apply first.
    pad: Option<Opt>,
}

/// Lanes of a vector accumulator along the innermost reduce loop, when every load that loop
/// drives walks it element by element but no output loop has such a load: `x @ w.T`, whose
/// operands are both contiguous along the reduction. Gathering a vector of outputs there would
/// cost a scalar load per lane; each output keeps a vector of partial sums instead, combined
/// once at the end. A whole vector, padding the loop to a multiple of one when that adds at most
/// an eighth (float32, whose padded lanes are masked loads; half a vector took 1.7x as long),
/// else half of one. A loop of symbolic size (attention's softmax over a KV cache's keys) is
/// always padded to whole vectors when its loads are float32: its `exp` per key, scalar, took
/// 4x as long.
fn reduce_vector_width(
    ast: &UOp,
    ranges: &[(usize, AxisKind, usize)],
    symbolic: &[(usize, usize)],
    reduce_ids: &HashSet<usize>,
    vl: usize,
) -> Option<ReduceVector> {
    let constant = ranges.iter().rfind(|r| r.1 == AxisKind::Reduce).map(|r| (r.0, Some(r.2)));
    let (id, size) = symbolic.iter().map(|r| (r.0, None)).chain(constant).max_by_key(|r| r.0)?;
    let outputs_walked = ranges.iter().any(|r| r.1 == AxisKind::Loop && load_contiguous(ast, r.0, reduce_ids));
    let range = super::find_range(ast, id)?;
    let walked =
        crate::codegen::vectorize::loads_along(ast, &range) && !crate::codegen::vectorize::gathers_along(ast, &range);
    if outputs_walked || !walked || !crate::codegen::vectorize::vector_math(ast) {
        return None;
    }
    let pad = Opt::Padto { range: id, amount: vl };
    let float32 = ast.toposort().iter().filter(|u| u.op() == Ops::Load).all(|l| l.dtype() == DType::FLOAT32);
    let padded = || float32 && apply_opt(ast, pad).is_some();
    let (lanes, pad) = match size {
        None => padded().then_some((vl, Some(pad)))?,
        Some(size) if size.is_multiple_of(vl) => (vl, None),
        Some(size) if size >= 8 * vl && padded() => (vl, Some(pad)),
        Some(size) => (vl >= 8 && size.is_multiple_of(vl / 2)).then_some((vl / 2, None))?,
    };
    Some(ReduceVector { range: id, lanes, pad })
}

/// A reduce kernel's innermost output loop (contiguous in the output) that whole vectors do not
/// divide, padded to a multiple of a matmul tile's columns, else of a vector, when that adds at
/// most an eighth: a 1000-column matmul then computes 32-column tiles with masked edges instead
/// of scalar lanes.
fn pad_innermost(ast: &UOp, ranges: &[(usize, AxisKind, usize)], vl: usize) -> Option<Opt> {
    if !ranges.iter().any(|r| r.1 == AxisKind::Reduce) {
        return None;
    }
    let &(id, _, size) = ranges.iter().filter(|r| r.1 == AxisKind::Loop).max_by_key(|r| r.0)?;
    if size <= vl || size.is_multiple_of(vl) || !crate::codegen::vectorize::vector_math(ast) {
        return None;
    }
    [2 * vl, vl]
        .into_iter()
        .filter(|a| (size.next_multiple_of(*a) - size) * 8 <= size)
        .map(|amount| Opt::Padto { range: id, amount })
        .find(|pad| apply_opt(ast, *pad).is_some())
}

/// A GPU-like target's opts, after tinygrad's for devices with local memory: a long reduce into
/// few outputs spread over a workgroup's threads (GROUPTOP); the output loops spread over
/// workgroups of up to `MAX_LOCAL` threads (LOCAL), the innermost first, so that neighbouring
/// threads touch neighbouring elements; then in a reduce the two innermost output loops
/// register-tiled (UPCAST: each thread computes a tile, its loads shared by the tile's copies of
/// the code) and the innermost reduce loop unrolled.
fn gpu_optimizations(ast: &UOp, target: &Target) -> Vec<Opt> {
    const MAX_LOCAL: usize = 128;
    let max_local = target.workgroups.as_ref().map_or(1, |w| w.max_threads).min(MAX_LOCAL);
    let mut opts = vec![];
    let mut cur = ast.clone();
    let push = |opts: &mut Vec<Opt>, cur: &mut UOp, opt: Opt| match apply_opt(cur, opt) {
        Some(next) => {
            *cur = next;
            opts.push(opt);
            true
        }
        None => false,
    };
    let ranges = kernel_ranges(ast);
    let outputs: usize = ranges.iter().filter(|r| r.1 == AxisKind::Loop).map(|r| r.2).product();
    let reduces: Vec<(usize, usize)> = ranges.iter().filter(|r| r.1 == AxisKind::Reduce).map(|r| (r.0, r.2)).collect();
    if let Some(&(id, size)) = reduces.first() {
        if outputs <= 2048 && size >= 256 {
            [16, 8, 4].into_iter().find(|&amount| push(&mut opts, &mut cur, Opt::GroupTop { range: id, amount }));
        }
    }
    let grouped = !opts.is_empty();
    // each output loop keeps a multiple of the tile it is upcast by below
    let tile = if reduces.is_empty() || grouped { 1 } else { 4 };
    let mut threads =
        kernel_ranges(&cur).iter().filter(|r| r.1 == AxisKind::GroupReduce).map(|r| r.2).product::<usize>();
    let loops: Vec<(usize, usize)> = ranges.iter().filter(|r| r.1 == AxisKind::Loop).map(|r| (r.0, r.2)).collect();
    for &(id, size) in loops.iter().rev() {
        let fits = |amount: usize| threads * amount <= max_local && size.is_multiple_of(amount * tile);
        if let Some(amount) = [32, 16, 8, 4, 2]
            .into_iter()
            .filter(|&a| fits(a))
            .find(|&amount| push(&mut opts, &mut cur, Opt::Local { range: id, amount }))
        {
            threads *= amount;
        }
    }
    if tile > 1 {
        for &(id, _) in loops.iter().rev().take(2) {
            push(&mut opts, &mut cur, Opt::Upcast { range: id, amount: tile });
        }
        if let Some(&(id, size)) = reduces.last() {
            if size > 4 {
                push(&mut opts, &mut cur, Opt::Unroll { range: id, amount: 4 });
            }
        }
    }
    opts
}

/// Opts for workgroups whose threads one core loops over (OpenCL on a CPU): the CPU heuristics'
/// tiles for the device's vector registers, without threads (the device spreads workgroups over
/// its cores), each workgroup one thread computing what a core would (on PoCL a 1024 matmul ran
/// at 176 GFLOP/s against 69 with 32-wide scalar tiles, and the beautiful_mnist step in 0.4 s
/// against 3.8 with GPU-style workgroups).
fn core_optimizations(ast: &UOp, target: &Target) -> Vec<Opt> {
    let core = Target { threads: 1, workgroups: None, gpu: false, ..target.clone() };
    fill_workgroup(ast, hand_coded_optimizations(ast, &core))
}

/// Iterations a workgroup runs at least (and, when this adds lanes, at most twice as many) where
/// one core loops over each workgroup: every workgroup is a trip through the device's scheduler
/// (on PoCL, a pad copy in 12.8M one-element workgroups took 77 ms, 2 ms in rows of 28).
const MIN_CORE_ITERATIONS: usize = 16;

/// `opts` and upcasts of the innermost output loops until each workgroup runs
/// `MIN_CORE_ITERATIONS`: a loop whole where it fits, else by its largest divisor that does.
fn fill_workgroup(ast: &UOp, mut opts: Vec<Opt>) -> Vec<Opt> {
    let mut cur = apply_opts(ast, &opts);
    loop {
        let ranges = kernel_ranges(&cur);
        let work: usize = ranges.iter().filter(|r| r.1 != AxisKind::Loop).map(|r| r.2).product();
        let Some(&(id, _, size)) = ranges.iter().rfind(|r| r.1 == AxisKind::Loop && r.2 > 1) else { break };
        if work >= MIN_CORE_ITERATIONS {
            break;
        }
        let Some(amount) = (2..=size).rev().find(|a| size.is_multiple_of(*a) && work * a <= 2 * MIN_CORE_ITERATIONS)
        else {
            break;
        };
        let Some(next) = apply_opt(&cur, Opt::Upcast { range: id, amount }) else { break };
        opts.push(Opt::Upcast { range: id, amount });
        cur = next;
    }
    opts
}
