//! Expander: UPCAST and UNROLL loops become copies of the code that uses them, one per lane.
//!
//! A REDUCE over an UNROLL loop combines its lanes' values with the reduce op before they reach
//! the accumulator, or keeps them as a vector accumulator whose lanes are combined after the
//! loop; a STORE that depends on an UPCAST loop is duplicated with the loop variable a constant
//! in each copy. Hash-consing keeps whatever the lanes share (a load that does not depend on the
//! lane) computed once, which is the point of register tiling.

use std::sync::LazyLock;

use super::vectorize;
use crate::rule;
use crate::uop::symbolic::symbolic;
use crate::uop::{graph_rewrite, Arg, AxisKind, Ops, PatternMatcher, UOp, UPat};

/// `ast` with every UPCAST and UNROLL loop expanded into lanes: for each STORE, one UPCAST loop
/// becomes vector lanes where it can (`vectorize.rs`: vectors of up to `vector_bytes`), the others
/// copies of the code.
pub fn expand(ast: &UOp, vector_bytes: usize) -> UOp {
    let ast = graph_rewrite(ast, pm_unroll(), &mut { vector_bytes }, "expand unroll", false);
    let ast = graph_rewrite(&ast, symbolic(), &mut (), "symbolic", false);
    let stores = ast
        .src()
        .iter()
        .flat_map(|st| {
            let upcast = kind_ranges(st, AxisKind::Upcast);
            // a reduce keeps vector accumulators (`vector_reduce`): its outputs are combined
            // from them, a vector at a time along the output's contiguous axis
            if st.toposort().iter().any(|u| horizontal(u).is_some()) {
                return tile_of_accumulators(st, &upcast);
            }
            let vector = vectorize::vector_axis(st, &upcast, vector_bytes);
            let copied: Vec<UOp> = upcast.into_iter().filter(|r| Some(r) != vector.as_ref()).collect();
            let copies = lanes(st, &copied);
            copies
                .into_iter()
                .flat_map(|c| match &vector {
                    Some(r) => vectorize::vectorize(&c, r),
                    None => vec![c],
                })
                .collect()
        })
        .collect();
    ast.replace_src(stores)
}

/// A REDUCE of a vector's lanes (no loops: `vector_reduce`'s accumulator combined), as the
/// vector and the op.
fn horizontal(u: &UOp) -> Option<(&UOp, Ops)> {
    match (u.op(), u.arg(), u.src()) {
        (Ops::Reduce, Arg::Reduce(op), [v]) if v.dtype().count > 1 => Some((v, *op)),
        _ => None,
    }
}

/// The copies of `store` over its UPCAST loops, whose outputs are combined from vector
/// accumulators. Along the loop the output is contiguous in (if one is, and no wider than a
/// vector), the accumulators of its lanes are combined together into one vector of results and
/// stored at once: 4 accumulators of 16 lanes take 5 vector adds, where one at a time they take
/// 16; other combines go by halves (`combine_lanes` of one).
fn tile_of_accumulators(store: &UOp, upcast: &[UOp]) -> Vec<UOp> {
    let index = &store.src()[0];
    let gate_free = |r: &UOp| index.src().get(2).is_none_or(|g| !g.toposort().contains(r));
    let along = upcast.iter().find(|r| {
        let size = r.src()[0].const_int_value().unwrap_or(0) as usize;
        size.is_power_of_two() && vectorize::stride_one_along(&index.src()[1], r) && gate_free(r)
    });
    let copied: Vec<UOp> = upcast.iter().filter(|r| Some(*r) != along).cloned().collect();
    let stores = lanes(store, &copied).into_iter().flat_map(|c| match along {
        Some(r) => combined_together(&c, r).unwrap_or_else(|| lanes(&c, std::slice::from_ref(r))),
        None => vec![c],
    });
    stores.map(|st| graph_rewrite(&st, pm_combine_lanes(), &mut (), "combine lanes", false)).collect()
}

/// `store`'s lanes along loop `r` as one vector store, their accumulators combined together; `None`
/// when a lane's value has other than one vector accumulator, or more lanes than it.
fn combined_together(store: &UOp, r: &UOp) -> Option<Vec<UOp>> {
    let stores = lanes(store, std::slice::from_ref(r));
    // each lane's one REDUCE of a vector's lanes
    let reduces: Vec<UOp> = stores
        .iter()
        .map(|st| match &st.src()[1].toposort().into_iter().filter(|u| horizontal(u).is_some()).collect::<Vec<_>>()[..]
        {
            [one] => Some(one.clone()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let accumulators: Vec<UOp> = reduces.iter().map(|h| h.src()[0].clone()).collect();
    let (dtype, arg) = (accumulators[0].dtype(), reduces[0].arg());
    let Arg::Reduce(op) = *arg else { return None };
    let alike = reduces.iter().all(|h| h.arg() == arg && h.src()[0].dtype() == dtype);
    if stores.len() > dtype.count as usize || !alike {
        return None;
    }
    let results = combine_lanes(&accumulators, op);
    let values: Vec<UOp> = stores
        .iter()
        .zip(&reduces)
        .enumerate()
        .map(|(k, (st, h))| {
            crate::uop::substitute(
                &st.src()[1],
                &mut crate::uop::UOpMap::from_iter([(h.clone(), vectorize::gep(&results, k))]),
                "combine",
            )
        })
        .collect();
    // the results themselves when the lanes store them as they are
    let value = match values.iter().enumerate().all(|(k, v)| *v == vectorize::gep(&results, k)) {
        true => results,
        false => UOp::new(Ops::Vectorize, values[0].dtype().vec(values.len() as u16), values, Arg::None),
    };
    Some(vec![stores[0].replace_src(vec![stores[0].src()[0].clone(), value])])
}

/// Every remaining REDUCE of a vector's lanes combined by halves.
fn pm_combine_lanes() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(vec![rule!("horizontal lanes combined", |h| UPat::ops(&[Ops::Reduce]).named(h) => {
            let (v, op) = horizontal(h)?;
            Some(combine_lanes(std::slice::from_ref(v), op))
        })])
    });
    &PM
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
                (0..n).map(move |i| {
                    crate::uop::substitute(
                        c,
                        &mut crate::uop::UOpMap::from_iter([(r.clone(), UOp::index_const(i))]),
                        "expand",
                    )
                })
            })
            .collect()
    })
}

/// A sum (or float32 max) over one UNROLL loop along which its loads are consecutive: the loop's
/// lanes become one vector, accumulated whole, and combined across lanes once after the reduce
/// (by halves: 16 lanes take 4 vector ops). Beside UPCAST loops that no load walks, whose copies
/// then each keep a vector accumulator (a register tile of `x @ w.T`), when no load gathers
/// along the loop.
fn vector_reduce(red: &UOp, op: Ops, unrolled: &[UOp], kept: &[UOp], vector_bytes: usize) -> Option<UOp> {
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
        || !vectorize::fits_vector(red.dtype(), w, vector_bytes)
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
    // its lanes combined once the UPCAST copies exist (`tile_of_accumulators`)
    Some(UOp::new(Ops::Reduce, red.dtype(), vec![acc], red.arg().clone()))
}

/// The lanes of each of the `m` vectors `accs` (`w` lanes each, `m <= w`, both powers of two)
/// combined with `op`: a vector of the `m` results (a scalar for one). Adjacent vectors pair up,
/// the first half of each one's partial results beside the other's, combined with the second
/// halves; once one vector is left, it combines its halves within each result until one lane
/// per result is left.
fn combine_lanes(accs: &[UOp], op: Ops) -> UOp {
    let w = accs[0].dtype().count as usize;
    let gather = |lanes: Vec<UOp>| match &lanes[..] {
        [one] => one.clone(),
        _ => UOp::new(Ops::Vectorize, lanes[0].dtype().vec(lanes.len() as u16), lanes, Arg::None),
    };
    // lanes `[first, first + n)` of every group of `per` lanes of each of `vs`, in order
    let halves = |vs: &[UOp], per: usize, first: usize| {
        let n = per / 2;
        let lanes = vs.iter().flat_map(|v| {
            let groups = v.dtype().count as usize / per;
            (0..groups).flat_map(move |g| (g * per + first..g * per + first + n).map(move |k| vectorize::gep(v, k)))
        });
        gather(lanes.collect())
    };
    let (mut vs, mut per) = (accs.to_vec(), w);
    while per > 1 {
        vs = vs
            .chunks(if vs.len() > 1 { 2 } else { 1 })
            .map(|pair| halves(pair, per, 0).alu(op, &[&halves(pair, per, per / 2)]))
            .collect();
        per /= 2;
    }
    vs.remove(0)
}

/// REDUCE(v, r..., unroll...) -> REDUCE(v[lane 0] op v[lane 1] op ..., r...). The context is the
/// target's vector width.
fn pm_unroll() -> &'static PatternMatcher<usize> {
    static PM: LazyLock<PatternMatcher<usize>> = LazyLock::new(|| {
        let reduce = |red| UPat::ops(&[Ops::Reduce]).named(red);
        PatternMatcher::new(vec![rule!("unrolled lanes", |red; vector_bytes: &mut usize| reduce(red) => {
            let Arg::Reduce(op) = red.arg() else { return None };
            let is_unroll = |r: &&UOp| matches!(r.arg(), Arg::Range(_, AxisKind::Unroll));
            let unrolled: Vec<UOp> = red.src()[1..].iter().filter(is_unroll).cloned().collect();
            if unrolled.is_empty() {
                return None;
            }
            let kept: Vec<UOp> = red.src()[1..].iter().filter(|r| !is_unroll(r)).cloned().collect();
            if let Some(reduced) = vector_reduce(red, *op, &unrolled, &kept, *vector_bytes) {
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
