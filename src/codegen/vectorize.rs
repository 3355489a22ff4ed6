//! Vector lanes: one UPCAST loop of a STORE becomes the lanes of vector values.
//!
//! The loop variable is replaced by the vector `<0, 1, ..., w-1>`, and a rule table pushes the
//! vector through the graph: ops the target computes on vectors (float and int32 arithmetic;
//! on float32 also max, comparisons into lane masks and selects) become one vector op, every other op splits into one scalar op per lane (`GEP` picks a lane,
//! `VECTORIZE` gathers lanes back). Loads and stores whose lanes are consecutive addresses
//! become single vector loads and stores; others load lane by lane. The C renderer prints vector
//! values as GCC/Clang vector types, and the interpreter runs them lane by lane.

use std::sync::LazyLock;

use crate::dtype::{DType, Scalar};
use crate::rule;
use crate::uop::symbolic::{symbolic, Lin};
use crate::uop::{graph_rewrite, Arg, Ops, PatternMatcher, UOp, UPat};

/// The most lanes of one vector: OpenCL's widest vector type (32 lanes of uint8 fit a C
/// register but name no OpenCL type).
const MAX_LANES: usize = 16;

/// Arithmetic computed on whole vectors of any `vector_dtype`.
const VECTOR_OPS: &[Ops] = &[Ops::Add, Ops::Sub, Ops::Mul, Ops::Neg, Ops::FDiv, Ops::MulAcc];

/// Whether ALU or CAST node `u` (its dtypes read as lanes) is one vector op: arithmetic; bitwise
/// ops and shifts of integers; on float32 also MAX, SQRT, comparisons into bool masks (of 32-bit
/// integers too), AND/OR/NOT of masks and WHERE on a mask; casts of masks to numbers, between integer types (loop indices
/// too) and of 32-bit integers to float32.
pub fn vector_op(u: &UOp) -> bool {
    let f32 = |s: &UOp| s.dtype().scalar == Scalar::Float32;
    let mask = |s: &UOp| s.dtype().is_bool();
    let int = |s: &UOp| is_vector_int(s.dtype().scalar);
    let int32 = |s: &UOp| matches!(s.dtype().scalar, Scalar::Int32 | Scalar::UInt32);
    let (src, d) = (u.src(), u.dtype());
    match u.op() {
        Ops::Neg if mask(u) => true,
        op if VECTOR_OPS.contains(&op) => vector_dtype(d) && src.iter().all(|s| vector_dtype(s.dtype())),
        Ops::Max | Ops::Sqrt => f32(u) && src.iter().all(f32),
        // masks have 32-bit lanes: float32's and 32-bit integers' comparisons make the same ones
        Ops::CmpLt | Ops::CmpNe | Ops::CmpEq => src.iter().all(f32) || src.iter().all(int32),
        Ops::And | Ops::Or => (mask(u) && src.iter().all(mask)) || (int(u) && src.iter().all(int)),
        Ops::Xor | Ops::Shl | Ops::Shr => int(u) && src.iter().all(int),
        Ops::Where => mask(&src[0]) && f32(&src[1]) && f32(&src[2]),
        // the same bits as another 32-bit lane type (float32 EXP2's exponent, `transcendental.rs`)
        Ops::Bitcast => [d, src[0].dtype()]
            .iter()
            .all(|t| matches!(t.scalar, Scalar::Float32 | Scalar::Int32 | Scalar::UInt32) && !t.is_ptr()),
        Ops::Cast => match (src[0].dtype().scalar, d.scalar) {
            (Scalar::Bool, Scalar::Float32 | Scalar::Int32) => true,
            (Scalar::Int32 | Scalar::UInt32, Scalar::Float32) => true,
            (from, to) => (is_vector_int(from) || from == Scalar::Index) && is_vector_int(to),
        },
        _ => false,
    }
}

/// Integer element types with vector arithmetic, bitwise ops and shifts.
fn is_vector_int(s: Scalar) -> bool {
    matches!(s, Scalar::Int8 | Scalar::UInt8 | Scalar::Int32 | Scalar::UInt32 | Scalar::Int64 | Scalar::UInt64)
}

/// Element types that vector values may have.
pub fn vector_dtype(d: DType) -> bool {
    !d.is_ptr() && (matches!(d.scalar, Scalar::Float32 | Scalar::Float64) || is_vector_int(d.scalar))
}

/// Whether `w` lanes of `d` make one vector of a target whose vectors are `vector_bytes` wide.
pub fn fits_vector(d: DType, w: usize, vector_bytes: usize) -> bool {
    vector_dtype(d) && w.is_power_of_two() && (2..=MAX_LANES).contains(&w) && w * d.itemsize() <= vector_bytes
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
    let vector = vector_op(u);
    let done = u.dtype().count as usize == w && u.src().iter().all(|s| s.dtype().count as usize == w);
    if w == 1 || (vector && done) {
        return None;
    }
    Some(match vector {
        true => UOp::new(u.op(), u.dtype().vec(w as u16), u.src().iter().map(|s| broadcast(s, w)).collect(), Arg::None),
        false => offsets_below(u, w).unwrap_or_else(|| per_lane(u, w)),
    })
}

/// `base + o_k < b` over lanes `k` (index math: a padded loop's gate `r * w + k < n`) as one
/// vector compare of 32-bit integers, `o_k < b - base`, where `b` is the same in every lane and
/// the lanes' difference fits 32 bits: a mask of lanes instead of `w` scalar compares gathered.
fn offsets_below(u: &UOp, w: usize) -> Option<UOp> {
    let [a, b] = u.src() else { return None };
    if u.op() != Ops::CmpLt || a.dtype().base() != DType::INDEX || b.dtype().base() != DType::INDEX {
        return None;
    }
    let bound = lane(b, 0);
    let base = Lin::of(&lane(a, 0));
    let same_terms = |l: &Lin| l.terms.len() == base.terms.len() && l.terms.iter().all(|t| base.terms.contains(t));
    let offsets = (0..w)
        .map(|k| {
            let l = Lin::of(&lane(a, k));
            let offset = i32::try_from(l.k - base.k).ok()?;
            (same_terms(&l) && lane(b, k) == bound).then(|| UOp::const_int(DType::INT32, offset as i64))
        })
        .collect::<Option<Vec<UOp>>>()?;
    let room = bound.alu(Ops::Sub, &[&lane(a, 0)]);
    let fits = |v: i128| i32::try_from(v).is_ok();
    if !fits(room.vmin()) || !fits(room.vmax()) {
        return None;
    }
    let offsets = UOp::new(Ops::Vectorize, DType::INT32.vec(w as u16), offsets, Arg::None);
    Some(offsets.alu(Ops::CmpLt, &[&broadcast(&room.cast(DType::INT32), w)]))
}

/// The first lane of an INDEX of `elem`s when its lanes are consecutive elements. A gate that
/// differs by lane (the last vector of a padded loop) is kept for float32, whose masked vector
/// loads and stores the renderers have; other element types then go lane by lane.
fn consecutive(index: &UOp, elem: DType) -> Option<UOp> {
    let (idx, gate) = (&index.src()[1], index.src().get(2));
    // one address for every lane (only the gate is a vector) is no run of elements
    if idx.dtype().count == 1 || gate.is_some_and(|g| g.dtype().count > 1) && elem != DType::FLOAT32 {
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
    // a vector load already (whose gate may still be a vector of lanes)
    if w == 1 || load.dtype().count > 1 {
        return None;
    }
    let dtype = load.dtype();
    if let Some(first) = consecutive(index, dtype).filter(|_| vector_dtype(dtype) && w <= MAX_LANES) {
        let mut src = index.src().to_vec();
        src[1] = first;
        return Some(UOp::new(Ops::Load, dtype.vec(w as u16), vec![index.replace_src(src)], Arg::None));
    }
    let lanes = index_lanes(index, w).into_iter().map(|i| UOp::new(Ops::Load, dtype, vec![i], Arg::None));
    Some(UOp::new(Ops::Vectorize, dtype.vec(w as u16), lanes.collect(), Arg::None))
}

/// A STORE of vector lanes to consecutive elements: one vector store. Other vector stores are
/// split into one store per lane once the rewrite is done (`vectorize`).
fn vectorize_store(store: &UOp) -> Option<UOp> {
    let (index, value) = (&store.src()[0], &store.src()[1]);
    let w = width(index).max(value.dtype().count as usize);
    if w == 1 || index.src()[1].dtype().count == 1 {
        return None;
    }
    let first = consecutive(index, value.dtype().base())?;
    let mut src = index.src().to_vec();
    src[1] = first;
    Some(store.replace_src(vec![index.replace_src(src), broadcast(value, w)]))
}

/// A sum or product over vector lanes (and on float32 a max) keeps a vector accumulator; other
/// reduces go lane by lane.
fn vectorize_reduce(red: &UOp) -> Option<UOp> {
    let w = red.src()[0].dtype().count as usize;
    if w == 1 || red.dtype().count > 1 {
        return None;
    }
    let vector = match red.arg() {
        Arg::Reduce(Ops::Add | Ops::Mul) => vector_dtype(red.dtype()),
        Arg::Reduce(Ops::Max) => red.dtype() == DType::FLOAT32,
        _ => false,
    };
    Some(match vector {
        true => UOp::new(Ops::Reduce, red.dtype().vec(w as u16), red.src().to_vec(), red.arg().clone()),
        false => per_lane(red, w),
    })
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
            rule!("lane of a vector", |g| UPat::ops(&[Ops::Gep]).named(g) => {
                let v = &g.src()[0];
                let Arg::Int(k) = g.arg() else { return None };
                (v.op() == Ops::Vectorize).then(|| v.src()[*k as usize].clone())
            }),
            rule!("regather lanes", |v| UPat::ops(&[Ops::Vectorize]).named(v) => regather(v)),
            rule!("vector alu", |u| UPat::ops(&alu).named(u) => vectorize_alu(u)),
            rule!("vector load", |u| UPat::ops(&[Ops::Load]).named(u) => vectorize_load(u)),
            rule!("vector store", |u| UPat::ops(&[Ops::Store]).named(u) => vectorize_store(u)),
            rule!("vector reduce", |u| UPat::ops(&[Ops::Reduce]).named(u) => vectorize_reduce(u)),
        ]))
    });
    &PM
}

/// The UPCAST loop of `store` to compute as vector lanes: one that fits one register of a
/// vector-friendly dtype, ungated along it unless float32 (masked), whose lanes store consecutive
/// elements; else one whose lanes
/// load consecutive elements when all the math has vector forms (the store then goes lane by
/// lane: a reduce over channels-last data into channels-first outputs).
pub fn vector_axis(store: &UOp, upcast: &[UOp], vector_bytes: usize) -> Option<UOp> {
    let index = &store.src()[0];
    let value_dtype = store.src()[1].dtype();
    let fits: Vec<&UOp> = upcast
        .iter()
        .filter(|r| fits_vector(value_dtype, r.src()[0].const_int_value().unwrap_or(0) as usize, vector_bytes))
        .filter(|r| value_dtype == DType::FLOAT32 || index.src().get(2).is_none_or(|g| !g.toposort().contains(r)))
        .collect();
    if let Some(r) = fits.iter().find(|r| stride_one_along(&index.src()[1], r)) {
        return Some((*r).clone());
    }
    if !vector_math(store) {
        return None;
    }
    let value = store.src()[1].toposort();
    let loads: Vec<&UOp> = value.iter().filter(|u| u.op() == Ops::Load).collect();
    fits.into_iter().find(|r| loads.iter().any(|l| stride_one_along(&l.src()[0].src()[1], r))).cloned()
}

/// float32 EXP2, which the CPU targets (the ones whose heuristics ask) compute with float32 and
/// 32-bit integer vector ops (`transcendental.rs`).
fn decomposed_into_vectors(u: &UOp) -> bool {
    u.dtype().scalar == Scalar::Float32 && u.src()[0].dtype().scalar == Scalar::Float32
}

/// Whether everything `u` computes has a vector form: index math, vector ops, loads and stores of
/// vector dtypes, and reduces that keep vector accumulators (`vectorize_reduce`).
pub fn vector_math(u: &UOp) -> bool {
    u.toposort().iter().all(|n| match n.op() {
        Ops::Load => vector_dtype(n.dtype()),
        Ops::Store => vector_dtype(n.src()[1].dtype()),
        Ops::Reduce => match n.arg() {
            Arg::Reduce(Ops::Add | Ops::Mul) => vector_dtype(n.dtype()),
            Arg::Reduce(Ops::Max) => n.dtype() == DType::FLOAT32,
            _ => false,
        },
        Ops::Exp2 => decomposed_into_vectors(n),
        // index math, and gates computed from it
        op if op.is_alu() => n.src().iter().all(|s| s.dtype() == DType::INDEX) || vector_op(n),
        Ops::Cast | Ops::Bitcast => vector_op(n),
        _ => n.op() != Ops::Wmma,
    })
}

/// The loop a `vectorize` pass computes as lanes, and the vector of its lane numbers.
struct Lanes {
    range: UOp,
    iota: UOp,
}

/// `u` (a reduce's source over its UNROLL loop, or a store) with loop `r` computed as vector
/// lanes, in one pass: the loop becomes the vector `(0, 1, .., w-1)` and each user of it a vector
/// op as it is rebuilt, so that no node is left scalar over a vector source.
pub fn vectorize_value(u: &UOp, r: &UOp) -> UOp {
    static PM: LazyLock<PatternMatcher<Lanes>> = LazyLock::new(|| {
        let range = |r| UPat::ops(&[Ops::Range]).named(r);
        PatternMatcher::new(vec![rule!("the loop as lanes", |r; lanes: &mut Lanes| range(r)
            => (*r == lanes.range).then(|| lanes.iota.clone()))])
        .extend(&pm_vectorize().with_context())
    });
    let w = r.src()[0].const_int_value().expect("vector loops have constant size");
    let iota = UOp::new(Ops::Vectorize, DType::INDEX.vec(w as u16), (0..w).map(UOp::index_const).collect(), Arg::None);
    graph_rewrite(u, &PM, &mut Lanes { range: r.clone(), iota }, "vectorize", false)
}

/// Whether some load in `value` reads consecutive elements along loop `r`.
pub fn loads_along(value: &UOp, r: &UOp) -> bool {
    value.toposort().iter().filter(|u| u.op() == Ops::Load).any(|l| stride_one_along(&l.src()[0].src()[1], r))
}

/// Whether some load in `value` depends on loop `r` other than by reading consecutive elements
/// along it (its lanes would be gathered one by one).
pub fn gathers_along(value: &UOp, r: &UOp) -> bool {
    value.toposort().iter().filter(|u| u.op() == Ops::Load).any(|l| {
        let index = &l.src()[0].src()[1];
        index.toposort().contains(r) && !stride_one_along(index, r)
    })
}

/// Whether `index` steps by one element per step of loop `r`, and by nothing else that `r` drives.
pub fn stride_one_along(index: &UOp, r: &UOp) -> bool {
    let lin = Lin::of(index);
    lin.terms.iter().any(|(t, c)| t == r && *c == 1)
        && lin.terms.iter().all(|(t, _)| t == r || !t.toposort().contains(r))
}

/// Lane `k` of `u`.
pub fn gep(u: &UOp, k: usize) -> UOp {
    lane(u, k)
}

/// `store` with loop `r` computed as vector lanes: one store, or one per lane where the lanes'
/// addresses are not consecutive.
pub fn vectorize(store: &UOp, r: &UOp) -> Vec<UOp> {
    let w = r.src()[0].const_int_value().expect("vector loops have constant size");
    let store = vectorize_value(store, r);
    let (index, value) = (&store.src()[0], &store.src()[1]);
    if index.src()[1].dtype().count == 1 {
        return vec![store];
    }
    let scattered =
        index_lanes(index, w as usize).into_iter().enumerate().map(|(k, i)| store.replace_src(vec![i, lane(value, k)]));
    scattered.map(|st| graph_rewrite(&st, pm_vectorize(), &mut (), "vectorize", false)).collect()
}

/// Whether `u` is index math or a gate computed from it (a bool of index or bool operands).
fn index_math(u: &UOp) -> bool {
    u.dtype() == DType::INDEX
        || u.dtype() == DType::BOOL && u.src().iter().all(|s| matches!(s.dtype(), DType::INDEX | DType::BOOL))
}

/// Whether every value `ast` computes can be one vector op per lane group: float32 loads (gated
/// ones masked), loads of other vector dtypes without gates, vector ops, and index math. Such a kernel is worth vectorizing without a reduce.
pub fn all_vector(ast: &UOp) -> bool {
    ast.toposort().iter().all(|u| match u.op() {
        Ops::Load => vector_dtype(u.dtype()) && (u.src()[0].src().len() == 2 || u.dtype() == DType::FLOAT32),
        Ops::Store => u.src()[1].dtype().scalar == Scalar::Float32 && u.src()[0].src().len() == 2,
        Ops::Const => true,
        Ops::Exp2 => decomposed_into_vectors(u),
        op if op.is_alu() || op == Ops::Cast || op == Ops::Bitcast => index_math(u) || vector_op(u),
        _ => !matches!(u.op(), Ops::Reduce | Ops::Gep | Ops::Vectorize),
    })
}

/// Whole-register float32 vector stores whose address is a multiple of the register (64-byte aligned, as
/// buffers are) bypass the caches (`STORE` arg `stream`): an output too large to stay in cache
/// would otherwise be read into it before each write. The context is the target's vector width.
pub fn pm_stream_stores() -> &'static PatternMatcher<usize> {
    static PM: LazyLock<PatternMatcher<usize>> = LazyLock::new(|| {
        let store = |st| UPat::ops(&[Ops::Store]).named(st);
        PatternMatcher::new(vec![rule!("stream a store", |st; bytes: &mut usize| store(st) => stream(st, *bytes))])
    });
    &PM
}

/// `st` as a streamed store, if it writes a whole aligned register of `vector_bytes`.
fn stream(st: &UOp, vector_bytes: usize) -> Option<UOp> {
    let (index, value) = (&st.src()[0], &st.src()[1]);
    let lanes = value.dtype().count as i128;
    let register = DType::FLOAT32.vec((vector_bytes / 4) as u16);
    if st.arg() != &Arg::None || value.dtype() != register || index.src().len() != 2 {
        return None;
    }
    let lin = Lin::of(&index.src()[1]);
    let aligned = lin.k % lanes == 0 && lin.terms.iter().all(|(_, c)| c % lanes == 0) && index.src()[1].vmin() >= 0;
    aligned.then(|| UOp::new(Ops::Store, st.dtype(), st.src().to_vec(), Arg::Store(crate::uop::StoreMode::Stream)))
}

/// Elementwise kernels writing at least this much float32 stream their stores
/// (`pm_stream_stores`, which takes float32 stores only).
const STREAM_MIN_BYTES: usize = 32 << 20;

/// Whether `ast` is an elementwise kernel whose output is too large for the caches: its loops and
/// threads (SPECIALs) run that many times, none of them a reduce.
pub fn streams_output(ast: &UOp) -> bool {
    let nodes = ast.toposort();
    let size = |u: &UOp| u.src()[0].const_int_value().unwrap_or(1).max(1) as usize;
    let core = |u: &UOp| u.op() == Ops::Special && u.arg() == &Arg::Special(crate::uop::Special::Core);
    let loops = nodes.iter().filter(|u| u.op() == Ops::Range || core(u));
    let elements: usize = loops.clone().map(size).product();
    let reduce =
        |u: &UOp| matches!(u.arg(), Arg::Range(_, crate::uop::AxisKind::Reduce | crate::uop::AxisKind::Unroll));
    !loops.into_iter().any(reduce) && elements * 4 >= STREAM_MIN_BYTES
}
