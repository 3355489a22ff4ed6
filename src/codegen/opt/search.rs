//! BEAM search's action space (`BEAM=n`): the opts the search (`engine/search.rs`, which times
//! candidates on the device) tries on a kernel, and the width setting.

use super::{kernel_ranges, Opt};
use crate::helpers::getenv;
use crate::uop::{AxisKind, Target, UOp};

/// The most lanes (product of UPCAST and UNROLL sizes) a candidate may have (tinygrad's
/// `BEAM_UPCAST_MAX`).
pub const MAX_LANES: usize = 256;
/// Split amounts tried on every output loop (UPCAST) and reduce loop (UNROLL), as tinygrad's
/// `actions`; the whole loop is tried too. Small steps compose over rounds (4 then 4 is 16).
const UPCAST_AMOUNTS: [usize; 8] = [2, 3, 4, 5, 7, 8, 16, 32];
const UNROLL_AMOUNTS: [usize; 4] = [2, 4, 7, 8];
/// Thread counts tried, up to the core count (which is always tried).
const THREADS: [usize; 9] = [2, 3, 4, 5, 8, 12, 16, 24, 32];
/// Multiples loops are padded to (a vector, a matmul tile's columns; a reduce loop only where its
/// padded terms vanish).
const PADTO_AMOUNTS: [usize; 2] = [16, 32];
/// On targets with workgroups: threads per LOCAL part of an output loop, and per GROUP or
/// GROUPTOP part of a reduce loop (tinygrad's lists).
const LOCAL_AMOUNTS: [usize; 7] = [2, 3, 4, 8, 13, 16, 29];
const GROUP_AMOUNTS: [usize; 3] = [4, 8, 16];
/// The BEAM width: `BEAM`, 0 when unset or under `NOOPT`.
pub fn beam_width() -> usize {
    match getenv("NOOPT", 0) {
        0 => getenv("BEAM", 0).max(0) as usize,
        _ => 0,
    }
}

/// Every single opt tried on `ast`: UPCAST of each output loop, UNROLL of each reduce loop and
/// PADTO of each loop by each amount, SWAP of each pair of output loops; on a target with
/// workgroups LOCAL, GROUP and GROUPTOP by each amount and NOLOCALS, else THREAD by each thread
/// count up to the target's (`apply_opt` rejects those that do not fit); and each way the target's
/// tensor cores apply (on a kernel no opt has touched yet).
pub fn actions(ast: &UOp, target: &Target) -> Vec<Opt> {
    let (threads, has_local) = (target.threads, target.has_local());
    let mut out = vec![];
    for tc in &target.tensor_cores {
        let ways = super::tensor_core::candidates(ast, tc).into_iter();
        out.extend(ways.map(|(m, n, k)| Opt::TensorCore { tc, m, n, k }));
    }
    let ranges = kernel_ranges(ast);
    let loops: Vec<usize> = ranges.iter().filter(|r| r.1 == AxisKind::Loop).map(|r| r.0).collect();
    for (i, &range) in loops.iter().enumerate() {
        out.extend(loops[i + 1..].iter().map(|&with| Opt::Swap { range, with }));
    }
    for (range, kind, size) in ranges {
        let amounts =
            |list: &[usize]| list.iter().copied().chain((!list.contains(&size)).then_some(size)).collect::<Vec<_>>();
        match kind {
            AxisKind::Loop => {
                out.extend(amounts(&UPCAST_AMOUNTS).into_iter().map(|amount| Opt::Upcast { range, amount }));
                out.extend(PADTO_AMOUNTS.map(|amount| Opt::Padto { range, amount }));
                if has_local {
                    out.extend(LOCAL_AMOUNTS.map(|amount| Opt::Local { range, amount }));
                }
            }
            AxisKind::Reduce => {
                out.extend(amounts(&UNROLL_AMOUNTS).into_iter().map(|amount| Opt::Unroll { range, amount }));
                out.extend(PADTO_AMOUNTS.map(|amount| Opt::Padto { range, amount }));
                if has_local {
                    out.extend(GROUP_AMOUNTS.map(|amount| Opt::Group { range, amount }));
                    out.extend(GROUP_AMOUNTS.map(|amount| Opt::GroupTop { range, amount }));
                }
            }
            AxisKind::Upcast | AxisKind::Unroll | AxisKind::Local | AxisKind::GroupReduce | AxisKind::Warp => {}
        }
    }
    match has_local {
        true => out.push(Opt::NoLocals),
        false if threads > 1 => {
            out.extend(THREADS.into_iter().filter(|n| *n < threads).chain([threads]).map(Opt::Thread))
        }
        false => {}
    }
    out
}

/// Lanes per iteration: the product of the kernel's UPCAST and UNROLL axes.
pub fn lanes(ast: &UOp) -> usize {
    kernel_ranges(ast).iter().filter(|r| matches!(r.1, AxisKind::Upcast | AxisKind::Unroll)).map(|r| r.2).product()
}
