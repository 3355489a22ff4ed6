//! The tensor-core opt (tinygrad's TC): a kernel whose reduce is a sum of products of two
//! `input`-typed values into `accumulate` (a matmul, a convolution's GEMM) computes each
//! `m x n` output tile with one warp running the instruction once per `k` step.
//!
//! Output loops `m` and `n` and reduce loop `k` become loops over tiles, and a WARP loop of 32
//! threads takes their place inside a tile: each thread builds its fragments of A and B as
//! vectors (the product's operands at the coordinates its fragment layout gives, `uop/wmma.rs`),
//! the WMMA op multiplies them into a vector accumulator, and each thread stores the outputs of
//! its fragment of C.

use super::{find_range, kernel_ranges, new_range, threaded, workgroups, Opt};
use crate::codegen::vectorize::{broadcast, gep};
use crate::helpers::getenv;
use crate::uop::wmma::{Fragment, TensorCore, WARP};
use crate::uop::Target;
use crate::uop::{substitute, Arg, AxisKind, ConstValue, Ops, UOp, UOpMap};

/// The kernel's one REDUCE when it is a sum into `tc.accumulate` of a product of two `tc.input`
/// values (each maybe cast up, or the product cast), with those two values.
fn product_reduce(ast: &UOp, tc: &TensorCore) -> Option<(UOp, UOp, UOp)> {
    let reduces: Vec<UOp> = ast.toposort().into_iter().filter(|u| u.op() == Ops::Reduce).collect();
    let [red] = &reduces[..] else { return None };
    if red.arg() != &Arg::Reduce(Ops::Add) || red.dtype() != tc.accumulate {
        return None;
    }
    let uncast = |u: &UOp| match u.op() {
        Ops::Cast => u.src()[0].clone(),
        _ => u.clone(),
    };
    let product = uncast(&red.src()[0]);
    if product.op() != Ops::Mul {
        return None;
    }
    let (x, y) = (uncast(&product.src()[0]), uncast(&product.src()[1]));
    (x.dtype() == tc.input && y.dtype() == tc.input).then(|| (red.clone(), x, y))
}

/// Whether `u` depends on loop `r`.
fn uses(u: &UOp, r: &UOp) -> bool {
    u.toposort().contains(r)
}

/// The `(m, n, k)` loop ids `tc` applies to in `ast`, the one whose `n` is the innermost output
/// loop first (C's fragments hold neighbouring columns, so the stores then fall close together).
pub fn candidates(ast: &UOp, tc: &'static TensorCore) -> Vec<(usize, usize, usize)> {
    let ranges = kernel_ranges(ast);
    let ids = |kind: AxisKind| ranges.iter().filter(move |r| r.1 == kind).map(|r| r.0);
    let mut out: Vec<(usize, usize, usize)> = ids(AxisKind::Loop)
        .flat_map(|m| ids(AxisKind::Loop).flat_map(move |n| ids(AxisKind::Reduce).map(move |k| (m, n, k))))
        .filter(|&(m, n, k)| m != n && apply(ast, tc, m, n, k).is_some())
        .collect();
    out.sort_by_key(|&(m, n, k)| std::cmp::Reverse((n, m, k)));
    out
}

/// `ast` with tensor core `tc` computing its product reduce over output loops `m`, `n` and
/// reduce loop `k`; `None` where it does not apply: another opt came first, the reduce is not a
/// product of two `tc.input` values, one factor does not depend on `m` and `k` only of the
/// three (A) and the other on `k` and `n` (B), or a loop's size is not a multiple of the tile's.
pub fn apply(ast: &UOp, tc: &'static TensorCore, m: usize, n: usize, k: usize) -> Option<UOp> {
    let optimized = kernel_ranges(ast).iter().any(|r| !matches!(r.1, AxisKind::Loop | AxisKind::Reduce));
    if optimized || workgroups(ast) || threaded(ast) || m == n {
        return None;
    }
    let (red, x, y) = product_reduce(ast, tc)?;
    let [store] = ast.src() else { return None };
    let (rm, rn, rk) = (find_range(ast, m)?, find_range(ast, n)?, find_range(ast, k)?);
    let [tm, tn, tk] = tc.dims;
    let tiles = |r: &UOp, kind: AxisKind, tile: usize| match (r.arg(), r.src()[0].const_int_value()) {
        (Arg::Range(id, kd), Some(size)) if *kd == kind && (size as usize).is_multiple_of(tile) => {
            Some(new_range(size as usize / tile, *id, kind))
        }
        _ => None,
    };
    let mo = tiles(&rm, AxisKind::Loop, tm)?;
    let no = tiles(&rn, AxisKind::Loop, tn)?;
    let ko = tiles(&rk, AxisKind::Reduce, tk)?;
    if !red.src()[1..].contains(&rk) || uses(&store.src()[0], &rk) {
        return None;
    }
    let (a, b) = match [&x, &y].map(|f| (uses(f, &rm), uses(f, &rn), uses(f, &rk))) {
        [(true, false, true), (false, true, true)] => (x, y),
        [(false, true, true), (true, false, true)] => (y, x),
        _ => return None,
    };
    let next_id = super::next_range_id(ast);
    let lane = new_range(WARP, next_id, AxisKind::Warp);
    // loop `r` at tile `outer`, offset `coord` within it
    let at = |outer: &UOp, tile: usize, coord: UOp| {
        outer.alu(Ops::Mul, &[&UOp::index_const(tile as i64)]).alu(Ops::Add, &[&coord])
    };
    // this thread's fragment of `value` as a vector: its rows walk `rows`, its columns `cols`
    let fragment = |value: &UOp, f: &Fragment, rows: (&UOp, &UOp, usize), cols: (&UOp, &UOp, usize)| {
        let lanes: Vec<UOp> = (0..f.elements())
            .map(|e| {
                let (row, col) = f.coord_of(&lane, e);
                let mut map = UOpMap::from_iter([
                    (rows.0.clone(), at(rows.1, rows.2, row)),
                    (cols.0.clone(), at(cols.1, cols.2, col)),
                ]);
                substitute(value, &mut map, "tensor core")
            })
            .collect();
        UOp::new(Ops::Vectorize, value.dtype().vec(lanes.len() as u16), lanes, Arg::None)
    };
    let frag_a = fragment(&a, &tc.a, (&rm, &mo, tm), (&rk, &ko, tk));
    let frag_b = fragment(&b, &tc.b, (&rk, &ko, tk), (&rn, &no, tn));
    let acc_dtype = tc.accumulate.vec(tc.c.elements() as u16);
    let zero = broadcast(&UOp::constant(tc.accumulate, ConstValue::Int(0)), tc.c.elements());
    let wmma = UOp::new(Ops::Wmma, acc_dtype, vec![frag_a, frag_b, zero], Arg::Wmma(tc));
    // the sum goes on over the tiles of `k` and the reduce's other loops
    let mut over: Vec<UOp> = vec![];
    for r in &red.src()[1..] {
        match r == &rk {
            true => over.extend((ko.op() == Ops::Range).then(|| ko.clone())),
            false => over.push(r.clone()),
        }
    }
    let acc = match over.is_empty() {
        true => wmma,
        false => UOp::new(Ops::Reduce, acc_dtype, [vec![wmma], over].concat(), red.arg().clone()),
    };
    let stores: Vec<UOp> = (0..tc.c.elements())
        .map(|e| {
            let (row, col) = tc.c.coord_of(&lane, e);
            let mut map = UOpMap::from_iter([
                (red.clone(), gep(&acc, e)),
                (rm.clone(), at(&mo, tm, row)),
                (rn.clone(), at(&no, tn, col)),
            ]);
            substitute(store, &mut map, "tensor core")
        })
        .collect();
    Some(ast.replace_src(stores))
}

/// The heuristics' opts for a kernel `target` runs on tensor cores (unless `USE_TC=0`): the
/// first candidate of the first of its tensor cores that applies, then each warp given a 2x2
/// block of tiles (its fragments of A and B each feed two instructions) and four warps to a
/// workgroup where the output loops divide. `None` where no tensor core applies.
pub fn tensor_core_opts(ast: &UOp, target: &Target) -> Option<Vec<Opt>> {
    if getenv("USE_TC", 1) == 0 {
        return None;
    }
    let (tc, (m, n, k)) =
        target.tensor_cores.iter().find_map(|tc| candidates(ast, tc).first().map(|&mnk| (*tc, mnk)))?;
    let mut opts = vec![Opt::TensorCore { tc, m, n, k }];
    let mut cur = apply(ast, tc, m, n, k)?;
    for opt in [
        Opt::Upcast { range: n, amount: 2 },
        Opt::Upcast { range: m, amount: 2 },
        Opt::Local { range: m, amount: 4 },
        Opt::Local { range: m, amount: 2 },
    ] {
        if let Some(next) = super::apply_opt(&cur, opt) {
            opts.push(opt);
            cur = next;
            if matches!(opt, Opt::Local { .. }) {
                break;
            }
        }
    }
    Some(opts)
}
