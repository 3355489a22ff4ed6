//! Vector lanes: one UPCAST loop of a STORE becomes the lanes of vector values.
//!
//! The loop variable is replaced by the vector `<0, 1, ..., w-1>`, and a rule table pushes the
//! vector through the graph: ops the target computes on vectors (float and int32 arithmetic)
//! become one vector op, every other op splits into one scalar op per lane (`GEP` picks a lane,
//! `VECTORIZE` gathers lanes back). Loads and stores whose lanes are consecutive addresses
//! become single vector loads and stores; others load lane by lane. The C renderer prints vector
//! values as GCC/Clang vector types, and the interpreter runs them lane by lane.

use std::sync::LazyLock;

use crate::dtype::{DType, Scalar};
use crate::uop::symbolic::{symbolic, Lin};
use crate::uop::{graph_rewrite, rule, Arg, Ops, PatternMatcher, UOp, UPat};

/// The widest vector in bytes (one AVX-512 register).
pub const MAX_VECTOR_BYTES: usize = 64;

/// Ops computed on whole vectors when their dtype is `vector_dtype`.
const VECTOR_OPS: &[Ops] = &[Ops::Add, Ops::Sub, Ops::Mul, Ops::Neg, Ops::FDiv, Ops::MulAcc];

/// Element types that vector values may have.
pub fn vector_dtype(d: DType) -> bool {
    !d.is_ptr() && matches!(d.scalar, Scalar::Float32 | Scalar::Float64 | Scalar::Int32)
}

/// Whether `w` lanes of `d` make one vector register.
pub fn fits_vector(d: DType, w: usize) -> bool {
    vector_dtype(d) && w.is_power_of_two() && w >= 2 && w * d.itemsize() <= MAX_VECTOR_BYTES
}

/// `u` as `w` lanes: itself when it is a vector, else `w` copies of the scalar.
pub fn broadcast(u: &UOp, w: usize) -> UOp {
    match u.dtype().count as usize == w {
        true => u.clone(),
        false => UOp::new(Ops::Vectorize, u.dtype().vec(w as u16), vec![u.clone(); w], Arg::None),
    }
}

/// Lane `k` of `u` (the scalar itself when `u` is not a vector).
fn lane(u: &UOp, k: usize) -> UOp {
    match (u.dtype().count, u.op()) {
        (1, _) => u.clone(),
        (_, Ops::Vectorize) => u.src()[k].clone(),
        _ => UOp::new(Ops::Gep, u.dtype().base(), vec![u.clone()], Arg::Int(k as i64)),
    }
}

/// The vector width of `u`'s widest source (1: all scalar).
fn width(u: &UOp) -> usize {
    u.src().iter().map(|s| s.dtype().count as usize).max().unwrap_or(1)
}

/// `u` computed lane by lane on scalars, gathered into one vector.
fn per_lane(u: &UOp, w: usize) -> UOp {
    let lanes = (0..w)
        .map(|k| UOp::new(u.op(), u.dtype().base(), u.src().iter().map(|s| lane(s, k)).collect(), u.arg().clone()));
    UOp::new(Ops::Vectorize, u.dtype().base().vec(w as u16), lanes.collect(), Arg::None)
}

/// An ALU op, CAST or BITCAST over vector sources: one vector op, or one op per lane.
fn vectorize_alu(u: &UOp) -> Option<UOp> {
    let w = width(u);
    let vector =
        VECTOR_OPS.contains(&u.op()) && u.src().iter().all(|s| vector_dtype(s.dtype())) && vector_dtype(u.dtype());
    let done = u.dtype().count as usize == w && u.src().iter().all(|s| s.dtype().count as usize == w);
    if w == 1 || (vector && done) {
        return None;
    }
    Some(match vector {
        true => UOp::new(u.op(), u.dtype().vec(w as u16), u.src().iter().map(|s| broadcast(s, w)).collect(), Arg::None),
        false => per_lane(u, w),
    })
}

/// The first lane of an INDEX's address when its lanes are consecutive elements and its gate (if
/// any) is the same for every lane.
fn consecutive(index: &UOp) -> Option<UOp> {
    let (idx, gate) = (&index.src()[1], index.src().get(2));
    if gate.is_some_and(|g| g.dtype().count > 1) {
        return None;
    }
    let first = Lin::of(&lane(idx, 0));
    let same_terms = |l: &Lin| l.terms.len() == first.terms.len() && l.terms.iter().all(|t| first.terms.contains(t));
    (1..idx.dtype().count as usize)
        .all(|k| {
            let l = Lin::of(&lane(idx, k));
            same_terms(&l) && l.k == first.k + k as i128
        })
        .then(|| lane(idx, 0))
}

/// INDEX(buf, lanes) as one INDEX per lane.
fn index_lanes(index: &UOp, w: usize) -> Vec<UOp> {
    (0..w).map(|k| index.replace_src(index.src().iter().map(|s| lane(s, k)).collect())).collect()
}

/// A LOAD through a vector address: one vector load of consecutive elements, else a gather.
fn vectorize_load(load: &UOp) -> Option<UOp> {
    let index = &load.src()[0];
    let w = width(index);
    if w == 1 {
        return None;
    }
    let dtype = load.dtype();
    if let Some(first) = consecutive(index).filter(|_| vector_dtype(dtype)) {
        let mut src = index.src().to_vec();
        src[1] = first;
        return Some(UOp::new(Ops::Load, dtype.vec(w as u16), vec![index.replace_src(src)], Arg::None));
    }
    let lanes = index_lanes(index, w).into_iter().map(|i| UOp::new(Ops::Load, dtype, vec![i], Arg::None));
    Some(UOp::new(Ops::Vectorize, dtype.vec(w as u16), lanes.collect(), Arg::None))
}

/// A STORE of vector lanes to consecutive elements (the vector axis is chosen so they are).
fn vectorize_store(store: &UOp) -> Option<UOp> {
    let (index, value) = (&store.src()[0], &store.src()[1]);
    let w = width(index).max(value.dtype().count as usize);
    if w == 1 || index.src()[1].dtype().count == 1 {
        return None;
    }
    let Some(first) = consecutive(index) else { panic!("not consecutive: {:?}", index.src()[1]) };
    let mut src = index.src().to_vec();
    src[1] = first;
    Some(store.replace_src(vec![index.replace_src(src), broadcast(value, w)]))
}

/// A sum or product over vector lanes keeps a vector accumulator; other reduces go lane by lane.
fn vectorize_reduce(red: &UOp) -> Option<UOp> {
    let w = red.src()[0].dtype().count as usize;
    if w == 1 || red.dtype().count > 1 {
        return None;
    }
    match (red.arg(), vector_dtype(red.dtype())) {
        (Arg::Reduce(Ops::Add | Ops::Mul), true) => {
            Some(UOp::new(Ops::Reduce, red.dtype().vec(w as u16), red.src().to_vec(), red.arg().clone()))
        }
        _ => Some(per_lane(red, w)),
    }
}

/// VECTORIZE(GEP(v, 0), ..., GEP(v, w-1)) is `v` again.
fn regather(u: &UOp) -> Option<UOp> {
    let v = u.src().first().filter(|s| s.op() == Ops::Gep)?.src()[0].clone();
    let whole = v.dtype().count as usize == u.src().len()
        && u.src()
            .iter()
            .enumerate()
            .all(|(k, s)| s.op() == Ops::Gep && s.src()[0] == v && s.arg() == &Arg::Int(k as i64));
    whole.then_some(v)
}

/// The vector rules, with symbolic simplification so each lane's index math folds.
fn pm_vectorize() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        let mut alu: Vec<Ops> = [Ops::UNARY, Ops::BINARY, Ops::TERNARY].concat();
        alu.extend([Ops::Cast, Ops::Bitcast]);
        symbolic().extend(&PatternMatcher::new(vec![
            rule(UPat::ops(&[Ops::Gep]).named("g"), |m| {
                let (g, v) = (&m["g"], &m["g"].src()[0]);
                let Arg::Int(k) = g.arg() else { return None };
                (v.op() == Ops::Vectorize).then(|| v.src()[*k as usize].clone())
            }),
            rule(UPat::ops(&[Ops::Vectorize]).named("v"), |m| regather(&m["v"])),
            rule(UPat::ops(&alu).named("u"), |m| vectorize_alu(&m["u"])),
            rule(UPat::ops(&[Ops::Load]).named("u"), |m| vectorize_load(&m["u"])),
            rule(UPat::ops(&[Ops::Store]).named("u"), |m| vectorize_store(&m["u"])),
            rule(UPat::ops(&[Ops::Reduce]).named("u"), |m| vectorize_reduce(&m["u"])),
        ]))
    });
    &PM
}

/// The UPCAST loop of `store` to compute as vector lanes: one whose lanes store consecutive
/// elements of a vector-friendly dtype, ungated, and fit one register.
pub fn vector_axis(store: &UOp, upcast: &[UOp]) -> Option<UOp> {
    let index = &store.src()[0];
    let value_dtype = store.src()[1].dtype();
    let lin = Lin::of(&index.src()[1]);
    upcast
        .iter()
        .filter(|r| fits_vector(value_dtype, r.src()[0].const_int_value().unwrap_or(0) as usize))
        .filter(|r| index.src().get(2).is_none_or(|g| !g.toposort().contains(r)))
        .find(|r| {
            lin.terms.iter().any(|(t, c)| t == *r && *c == 1)
                && lin.terms.iter().all(|(t, _)| t == *r || !t.toposort().contains(r))
        })
        .cloned()
}

/// `store` with loop `r` computed as vector lanes.
pub fn vectorize(store: &UOp, r: &UOp) -> UOp {
    let w = r.src()[0].const_int_value().expect("vector loops have constant size");
    let lanes: Vec<UOp> = (0..w).map(UOp::index_const).collect();
    let iota = UOp::new(Ops::Vectorize, DType::INDEX.vec(w as u16), lanes, Arg::None);
    let store = crate::uop::substitute(store, &mut [(r.clone(), iota)].into(), "vector lanes");
    graph_rewrite(&store, pm_vectorize(), &mut (), "vectorize", false)
}
