//! Expander: UPCAST and UNROLL loops become copies of the code that uses them, one per lane.
//!
//! A REDUCE over an UNROLL loop combines its lanes' values with the reduce op before they reach
//! the accumulator; a STORE that depends on an UPCAST loop is duplicated with the loop variable
//! a constant in each copy. Hash-consing keeps whatever the lanes share (a load that does not
//! depend on the lane) computed once, which is the point of register tiling.

use std::sync::LazyLock;

use super::vectorize;
use crate::uop::symbolic::symbolic;
use crate::uop::{graph_rewrite, rule, Arg, AxisKind, Ops, PatternMatcher, UOp, UPat};

/// `ast` with every UPCAST and UNROLL loop expanded into lanes: for each STORE, one UPCAST loop
/// becomes vector lanes where it can (`vectorize.rs`), the others copies of the code.
pub fn expand(ast: &UOp) -> UOp {
    let ast = graph_rewrite(ast, pm_unroll(), &mut (), "expand unroll", false);
    let ast = graph_rewrite(&ast, symbolic(), &mut (), "symbolic", false);
    let stores = ast
        .src()
        .iter()
        .flat_map(|st| {
            let upcast = kind_ranges(st, AxisKind::Upcast);
            // a reduce already computes vectors (`vector_reduce`): the UPCAST loops become copies
            let has_vectors = st.toposort().iter().any(|u| u.dtype().count > 1);
            let vector = vectorize::vector_axis(st, &upcast).filter(|_| !has_vectors);
            let copied: Vec<UOp> = upcast.into_iter().filter(|r| Some(r) != vector.as_ref()).collect();
            let copies = lanes(st, &copied);
            copies.into_iter().flat_map(move |c| match &vector {
                Some(r) => vectorize::vectorize(&c, r),
                None => vec![c],
            })
        })
        .collect();
    ast.replace_src(stores)
}

fn kind_ranges(u: &UOp, kind: AxisKind) -> Vec<UOp> {
    u.toposort()
        .into_iter()
        .filter(|r| r.op() == Ops::Range && matches!(r.arg(), Arg::Range(_, k) if *k == kind))
        .collect()
}

/// Copies of `u`, one per combination of values of `ranges`, the first range varying slowest.
fn lanes(u: &UOp, ranges: &[UOp]) -> Vec<UOp> {
    ranges.iter().fold(vec![u.clone()], |copies, r| {
        let n = r.src()[0].const_int_value().expect("expanded loops have constant size");
        copies
            .iter()
            .flat_map(|c| {
                (0..n).map(move |i| crate::uop::substitute(c, &mut [(r.clone(), UOp::index_const(i))].into(), "expand"))
            })
            .collect()
    })
}

/// A sum (or float32 max) over one UNROLL loop along which its loads are consecutive: the loop's
/// lanes become one vector, accumulated whole, and combined across lanes once after the reduce
/// (by halves: 16 lanes take 4 vector ops). Beside UPCAST loops that no load walks, whose copies
/// then each keep a vector accumulator (a register tile of `x @ w.T`), when no load gathers
/// along the loop.
fn vector_reduce(red: &UOp, op: Ops, unrolled: &[UOp], kept: &[UOp]) -> Option<UOp> {
    let [u] = unrolled else { return None };
    let src = &red.src()[0];
    let w = u.src()[0].const_int_value()? as usize;
    let reducible = match op {
        Ops::Add => vectorize::vector_dtype(red.dtype()),
        Ops::Max => red.dtype() == crate::dtype::DType::FLOAT32,
        _ => false,
    };
    let upcast = kind_ranges(src, AxisKind::Upcast);
    // beside UPCAST lanes only where vectors of them would be gathered: no load walks them, and
    // every load walks `u`
    let tile_of_vectors = upcast.is_empty()
        || (!vectorize::gathers_along(src, u) && !upcast.iter().any(|r| vectorize::loads_along(src, r)));
    if !reducible
        || !tile_of_vectors
        || !vectorize::fits_vector(red.dtype(), w)
        || !vectorize::vector_math(src)
        || !vectorize::loads_along(src, u)
    {
        return None;
    }
    let lanes = vectorize::vectorize_value(src, u);
    let lanes = vectorize::broadcast(&lanes, w);
    let acc = match kept.is_empty() {
        true => lanes,
        false => {
            UOp::new(Ops::Reduce, red.dtype().vec(w as u16), [vec![lanes], kept.to_vec()].concat(), red.arg().clone())
        }
    };
    Some(combine_halves(acc, op, w))
}

/// The `w` lanes of `acc` combined with `op`: its low half with its high half, until one is left.
fn combine_halves(acc: UOp, op: Ops, w: usize) -> UOp {
    let half = |v: &UOp, first: usize, n: usize| match n {
        1 => vectorize::gep(v, first),
        _ => UOp::new(
            Ops::Vectorize,
            v.dtype().base().vec(n as u16),
            (first..first + n).map(|k| vectorize::gep(v, k)).collect(),
            Arg::None,
        ),
    };
    let mut n = w;
    let mut acc = acc;
    while n > 1 {
        n /= 2;
        acc = half(&acc, 0, n).alu(op, &[&half(&acc, n, n)]);
    }
    acc
}

/// REDUCE(v, r..., unroll...) -> REDUCE(v[lane 0] op v[lane 1] op ..., r...).
fn pm_unroll() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(vec![rule(UPat::ops(&[Ops::Reduce]).named("red"), |m| {
            let red = &m["red"];
            let Arg::Reduce(op) = red.arg() else { return None };
            let is_unroll = |r: &&UOp| matches!(r.arg(), Arg::Range(_, AxisKind::Unroll));
            let unrolled: Vec<UOp> = red.src()[1..].iter().filter(is_unroll).cloned().collect();
            if unrolled.is_empty() {
                return None;
            }
            let kept: Vec<UOp> = red.src()[1..].iter().filter(|r| !is_unroll(r)).cloned().collect();
            if let Some(reduced) = vector_reduce(red, *op, &unrolled, &kept) {
                return Some(reduced);
            }
            let values = lanes(&red.src()[0], &unrolled);
            let combined = values[1..].iter().fold(values[0].clone(), |acc, v| acc.alu(*op, &[v]));
            if kept.is_empty() {
                return Some(combined);
            }
            Some(red.replace_src([vec![combined], kept].concat()))
        })])
    });
    &PM
}
