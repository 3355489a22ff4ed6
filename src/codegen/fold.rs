//! Reduce folding (tinygrad's "reduce collapse" / arange folding): a kernel-level `REDUCE` whose
//! sum over a range `k` has a closed form loses that range.
//!
//! `REDUCE(v, k, rest...)` is `REDUCE(Σ_k v, rest...)` (sums over distinct ranges commute), so
//! every rule computes `Σ_{k=0}^{N-1} v` for one range `k` of size `N >= 1` and keeps the REDUCE
//! over the other ranges (dropping it when none remain). The rules, in the table's order:
//!
//! 1. **Unparented range**: `v` does not depend on `k`. ADD: `Σ_k v = v·N`; MAX: `max_k v = v`.
//! 2. **Selection**: `v = WHERE(k == e ∧ C(k), x(k), 0)` with `e` independent of `k` (any
//!    integer equality whose difference is linear in `k` with coefficient ±1). Exactly the one
//!    term `k = e` survives when `0 <= e < N`, none otherwise:
//!    `Σ_k v = WHERE(0 <= e < N ∧ C(e), x(e), 0)`. Every load whose index depends on `k` gets
//!    `0 <= e < N` ANDed into its INDEX gate, so `x(e)` never reads out of bounds; where `x(e)`
//!    is such a load and `C` is empty, the load is the sum (a gated load reads 0).
//! 3. **Counting**: `v = WHERE(A ∧ B, x, 0)` with `x` and `A` independent of `k` and `B` a
//!    conjunction of bounds `k >= L_i`, `k < U_j` (each a comparison of integers whose difference
//!    is linear in `k` with coefficient ±1). Then `Σ_k v = WHERE(A, x·count, 0)` with
//!    `count = max(0, min(N, U_j...) - max(0, L_i...))`, the number of integers in
//!    `[max(0, L), min(N, U))`.
//!
//! `v` is recognized as `WHERE(cond, x, 0)` in the forms the tensor layer builds: `WHERE`,
//! `CAST(bool)` (`cond ? 1 : 0`), casts of such values and products `WHERE(c, y, 0) · z` when
//! `0 · z == 0` (integer or provably finite `z`). Comparisons are read exactly: the linear
//! decomposition only looks through integer ADD/SUB/NEG/MUL-by-const/CAST nodes whose vmin/vmax
//! prove they did not wrap, so the integer values compared are the mathematical ones.
//!
//! The table embeds `symbolic`, so inner folds are simplified before the reduces using them are
//! matched (an arange folded to `i` then feeds a one-hot selection) and the output is a symbolic
//! fixed point.

use std::collections::HashSet;
use std::sync::LazyLock;

use crate::dtype::DType;
use crate::rule;
use crate::uop::symbolic::symbolic;
use crate::uop::{Arg, ConstValue, Ops, PatternMatcher, UOp, UPat};

/// The reduce-folding rule table (followed by the symbolic rules): one rule per closed form,
/// each trying the REDUCE's ranges in order.
pub fn pm_reduce_fold() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        let reduce = |r| UPat::ops(&[Ops::Reduce]).named(r);
        PatternMatcher::new(vec![
            rule!("unparented range", |r| reduce(r) => Foldable::of(r)?.unparented()),
            rule!("selection", |r| reduce(r) => Foldable::of(r)?.masked(fold_select)),
            rule!("counting", |r| reduce(r) => Foldable::of(r)?.masked(fold_count)),
        ])
        .extend(symbolic())
    });
    &PM
}

/// A REDUCE the rules may fold: a scalar ADD or MAX of values of its own dtype.
struct Foldable<'a> {
    red: &'a UOp,
    op: Ops,
    d: DType,
}

impl<'a> Foldable<'a> {
    fn of(red: &'a UOp) -> Option<Foldable<'a>> {
        let Arg::Reduce(op) = red.arg() else { return None };
        let d = red.dtype();
        let scalar = d.count == 1 && !d.is_ptr() && red.src()[0].dtype() == d;
        (scalar && matches!(op, Ops::Add | Ops::Max)).then_some(Foldable { red, op: *op, d })
    }

    /// The ranges a rule may fold, with their positions: `N >= 1`, and `N` (so any count) finite
    /// in the dtype (an f16 infinity would turn `0·N` into NaN).
    fn ranges(&self) -> impl Iterator<Item = (usize, &'a UOp)> + '_ {
        let finite = |n: &UOp| self.d != DType::FLOAT16 || n.vmax() < 65504;
        let red: &'a UOp = self.red;
        red.src()[1..]
            .iter()
            .enumerate()
            .filter(move |(_, k)| k.op() == Ops::Range && k.src()[0].vmin() >= 1 && finite(&k.src()[0]))
    }

    /// `x` reduced over every range but the one at `skip` (`x` itself when none remain).
    fn over_rest(&self, x: UOp, skip: usize) -> UOp {
        let mut src = vec![x];
        src.extend(self.red.src()[1..].iter().enumerate().filter(|(j, _)| *j != skip).map(|(_, r)| r.clone()));
        match src.len() {
            1 => src.pop().expect("x"),
            _ => UOp::new(Ops::Reduce, self.d, src, self.red.arg().clone()),
        }
    }

    /// Rule 1 (unparented range): `v` does not depend on `k`. ADD: `Σ_k v = v·N`; MAX:
    /// `max_k v = v`.
    fn unparented(&self) -> Option<UOp> {
        let v = &self.red.src()[0];
        let (i, k) = self.ranges().find(|(_, k)| !depends(v, k))?;
        match self.op {
            Ops::Max => Some(self.over_rest(v.clone(), i)),
            _ if self.d.is_bool() => None,
            _ => Some(self.over_rest(v.clone(), i).alu(Ops::Mul, &[&k.src()[0].cast(self.d)])),
        }
    }

    /// Rules 2 and 3, on a sum of a masked value `WHERE(AND(atoms), x, 0)`: `fold` of the atoms,
    /// `x`, a range and the dtype, on the first range it folds.
    fn masked(&self, fold: fn(&[UOp], &UOp, &UOp, DType) -> Option<UOp>) -> Option<UOp> {
        if self.op != Ops::Add || self.d.is_bool() {
            return None;
        }
        let (atoms, x) = as_masked(&self.red.src()[0])?;
        self.ranges().find_map(|(i, k)| Some(self.over_rest(fold(&atoms, &x, k, self.d)?, i)))
    }
}

/// Rule 2 (selection): `Σ_k WHERE(k == e ∧ C(k), x(k), 0)` with `e` free of `k` is
/// `WHERE(0 <= e < N ∧ C(e), x(e), 0)`.
///
/// The equality holds for at most one `k`, namely `k = e`, and only if `e ∈ [0, N)`; every other
/// term is 0 (WHERE selects, so even a NaN or infinite `x(k)` there contributes 0), and the sum
/// of one term `t` and zeros is `t`. `x(e)`, `C(e)` are `x`, `C` with `e` substituted for `k`;
/// every INDEX that depended on `k` gets `0 <= e < N` ANDed into its gate, so for an `e` out of
/// range no load happens (a gated-off load yields 0) and the value is discarded by the WHERE.
/// For `e` in range every index is one the original loop computed.
///
/// An out-of-range `e` must not reach anything else that could fault or overflow. When `k`
/// reaches a divisor, a shift amount or a float-to-integer cast, or the substitution could make
/// exact integer arithmetic wrap (a 64-bit index times a stride), `e` is clamped into `[0, N)`
/// instead, `k := min(max(e, 0), N-1)`, so `x` and `C` only ever see values `k` took (no gates
/// needed).
fn fold_select(atoms: &[UOp], x: &UOp, k: &UOp, d: DType) -> Option<UOp> {
    let (pos, e) = atoms.iter().enumerate().find_map(|(i, a)| match depends(a, k).then(|| classify(a, k))?? {
        Atom::Eq(e) => Some((i, e)),
        _ => None,
    })?;
    let others: Vec<&UOp> = atoms.iter().enumerate().filter(|(i, _)| *i != pos).map(|(_, a)| a).collect();
    let n = &k.src()[0];
    let valid = UOp::index_const(-1).alu(Ops::CmpLt, &[&e]).alu(Ops::And, &[&e.alu(Ops::CmpLt, &[n])]);
    // x(e) and every other atom's C(e), from one substitution over all of them
    let substitute = |e: &UOp, gate: Option<&UOp>| -> Option<UOp> {
        let roots = [vec![x.clone()], others.iter().map(|a| (*a).clone()).collect()].concat();
        let done = substitution(&UOp::new(Ops::Sink, DType::VOID, roots, Arg::None), k, e, gate)?;
        let (x, cs) = done.src().split_first().expect("x is the first root");
        if cs.is_empty() && reads_zero_unless(x, &valid) {
            return Some(x.clone());
        }
        let cond = cs.iter().fold(valid.clone(), |cond, c| cond.alu(Ops::And, &[c]));
        Some(UOp::where_(&cond, x, &zero(d)))
    };
    substitute(&e, Some(&valid)).or_else(|| {
        // min(y, N-1) as -max(-y, 1-N) with y = max(e, 0) >= 0, so no negation overflows
        let neg_y = e.alu(Ops::Max, &[&UOp::index_const(0)]).alu(Ops::Neg, &[]);
        let one_minus_n = UOp::index_const(1).alu(Ops::Add, &[&n.alu(Ops::Neg, &[])]);
        let clamped = neg_y.alu(Ops::Max, &[&one_minus_n]).alu(Ops::Neg, &[]);
        substitute(&clamped, None)
    })
}

/// Whether `x` is a load gated by `gate` (alone or as the first conjunct, as `substitution`
/// gates it): a gated load reads 0 where its gate fails, so `WHERE(gate, x, 0)` is `x`.
fn reads_zero_unless(x: &UOp, gate: &UOp) -> bool {
    let load_gate = (x.op() == Ops::Load).then(|| x.src()[0].src().get(2)).flatten();
    load_gate.is_some_and(|g| g == gate || (g.op() == Ops::And && &g.src()[0] == gate))
}

/// Rule 3 (counting): `Σ_k WHERE(A ∧ B(k), x, 0)` with `x`, `A` free of `k` and `B` bounds on `k`
/// is `WHERE(A, x · #{k ∈ [0, N) : B(k)}, 0)`.
///
/// With `B = ∧ (k >= L_i) ∧ (k < U_j)` the satisfying `k` are exactly the integers of
/// `[lo, hi)`, `lo = max(0, L_i...)`, `hi = min(N, U_j...)`, so the count is `max(0, hi - lo)`.
/// Summing `x` that many times is `x·count` for integers (both wrap modulo 2^bits) and up to
/// rounding for floats; a float `x` that may be infinite or NaN is guarded with `count > 0`
/// (the empty sum is 0, but `inf·0` is NaN).
fn fold_count(atoms: &[UOp], x: &UOp, k: &UOp, d: DType) -> Option<UOp> {
    if depends(x, k) {
        return None;
    }
    let (mut lo, mut hi) = (UOp::index_const(0), k.src()[0].clone());
    let mut indep = vec![];
    for a in atoms {
        if !depends(a, k) {
            indep.push(a.clone());
            continue;
        }
        match classify(a, k)? {
            Atom::Lo(l) => lo = lo.alu(Ops::Max, &[&l]),
            Atom::Hi(u) => hi = imin(&hi, &u),
            Atom::Eq(e) => {
                lo = lo.alu(Ops::Max, &[&e]);
                hi = imin(&hi, &e.alu(Ops::Add, &[&UOp::index_const(1)]));
            }
        }
    }
    let diff = hi.alu(Ops::Add, &[&lo.alu(Ops::Neg, &[])]);
    if may_wrap(&diff) {
        return None;
    }
    let count = diff.alu(Ops::Max, &[&UOp::index_const(0)]);
    let mut value = x.alu(Ops::Mul, &[&count.cast(d)]);
    if !annihilates_zero(x) {
        value = UOp::where_(&UOp::index_const(0).alu(Ops::CmpLt, &[&count]), &value, &zero(d));
    }
    Some(match and_all(&indep) {
        Some(c) => UOp::where_(&c, &value, &zero(d)),
        None => value,
    })
}

/// `k := e` in `root`, through the shared rewrite engine (`substitute_rebuilt`). With a `gate`,
/// every INDEX that depended on `k` gets it ANDed into its gate, and the substitution is refused
/// (None) where an `e` failing the gate could fault or wrap: `k` reaching a divisor, a shift
/// amount or a float-to-integer cast, or exact integer arithmetic that could not wrap before and
/// could after. Without one, `e` must take only values `k` takes. PADTO pads a loop with it.
pub(crate) fn substitution(root: &UOp, k: &UOp, e: &UOp, gate: Option<&UOp>) -> Option<UOp> {
    let mut refused = false;
    let out = crate::uop::rewrite::substitute_rebuilt(root, k, e, "substitute", &mut |n, new| {
        let gate = gate?;
        let partial = matches!(n.op(), Ops::IDiv | Ops::Mod | Ops::Shl | Ops::Shr);
        // a float too large for the integer type is undefined in C
        let float_to_int = n.op() == Ops::Cast && n.src()[0].dtype().is_float() && !n.dtype().is_float();
        let arith = matches!(n.op(), Ops::Add | Ops::Sub | Ops::Mul | Ops::Neg) && n.dtype().is_int();
        if (partial && new.src()[1] != n.src()[1]) || float_to_int || (arith && !may_wrap(n) && may_wrap(new)) {
            refused = true;
            return None;
        }
        (n.op() == Ops::Index).then(|| {
            let mut src = new.src()[..2].to_vec();
            src.push(match new.src().get(2) {
                Some(g) => gate.alu(Ops::And, &[g]),
                None => gate.clone(),
            });
            UOp::new(Ops::Index, new.dtype(), src, new.arg().clone())
        })
    });
    (!refused).then_some(out)
}

// ---------------------------------------------------------------------------------------------
// recognizing WHERE(cond, x, 0)

/// `v` as `WHERE(AND(atoms), x, 0)`, if it has one of the forms listed in the module docs.
fn as_masked(v: &UOp) -> Option<(Vec<UOp>, UOp)> {
    let s = v.src();
    // cond ? x : 0, merging a masked x: c1 ? (c2 ? y : 0) : 0 == (c1 && c2) ? y : 0
    let merge = |mut atoms: Vec<UOp>, x: &UOp| match as_masked(x) {
        Some((more, y)) => {
            atoms.extend(more);
            (atoms, y)
        }
        None => (atoms, x.clone()),
    };
    match v.op() {
        Ops::Where if is_zero(&s[2]) => Some(merge(and_atoms(&s[0]), &s[1])),
        Ops::Where if is_zero(&s[1]) => Some(merge(and_atoms(&not(&s[0])), &s[2])),
        // a bool cast to a number is cond ? 1 : 0
        Ops::Cast if s[0].dtype().is_bool() && !v.dtype().is_bool() => {
            Some((and_atoms(&s[0]), UOp::constant(v.dtype(), ConstValue::Int(1))))
        }
        // cast(c ? y : 0) == c ? cast(y) : 0, as every cast maps 0 to 0
        Ops::Cast if !v.dtype().is_bool() => {
            let (atoms, y) = as_masked(&s[0])?;
            Some((atoms, y.cast(v.dtype())))
        }
        // (c ? y : 0) * z == c ? y*z : 0*z, and 0*z == 0 unless z is a float that may be inf/NaN
        Ops::Mul => [(0, 1), (1, 0)].into_iter().find_map(|(a, b)| {
            let (atoms, y) = as_masked(&s[a])?;
            annihilates_zero(&s[b])
                .then(|| (atoms, if a == 0 { y.alu(Ops::Mul, &[&s[b]]) } else { s[b].alu(Ops::Mul, &[&y]) }))
        }),
        _ => None,
    }
}

/// The conjuncts of a bool (ANDs flattened, double negations dropped).
fn and_atoms(c: &UOp) -> Vec<UOp> {
    match c.op() {
        Ops::And if c.dtype().is_bool() => c.src().iter().flat_map(and_atoms).collect(),
        Ops::Neg if c.dtype().is_bool() && c.src()[0].op() == Ops::Neg => and_atoms(&c.src()[0].src()[0]),
        _ => vec![c.clone()],
    }
}

fn and_all(atoms: &[UOp]) -> Option<UOp> {
    atoms.iter().cloned().reduce(|a, b| a.alu(Ops::And, &[&b]))
}

fn not(c: &UOp) -> UOp {
    match c.op() {
        Ops::Neg => c.src()[0].clone(),
        _ => c.alu(Ops::Neg, &[]),
    }
}

fn is_zero(u: &UOp) -> bool {
    u.const_value().is_some_and(|c| c.as_f64() == 0.0)
}

fn zero(d: DType) -> UOp {
    UOp::constant(d, ConstValue::Int(0))
}

/// Whether `0 · z == 0` for every value `z` takes: integers, and floats proved finite.
fn annihilates_zero(z: &UOp) -> bool {
    let d = z.dtype();
    if !d.is_float() {
        return true;
    }
    let s = z.src();
    match z.op() {
        Ops::Const => z.const_value().is_some_and(|c| c.as_f64().is_finite()),
        Ops::Cast if s[0].dtype().is_bool() => true,
        // every 64-bit integer is finite in f32/f64/bf16; f16 overflows past 65504
        Ops::Cast if s[0].dtype().is_int() => d != DType::FLOAT16 || (s[0].vmin() > -65504 && s[0].vmax() < 65504),
        Ops::Where => annihilates_zero(&s[1]) && annihilates_zero(&s[2]),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// comparisons linear in k

/// What a comparison says about `k`: `k >= L`, `k < U` or `k == e` (all index expressions).
enum Atom {
    Lo(UOp),
    Hi(UOp),
    Eq(UOp),
}

/// Reads `a` (a comparison of integers, maybe negated) as a bound or an equation for `k`.
fn classify(a: &UOp, k: &UOp) -> Option<Atom> {
    let (neg, c) = match a.op() {
        Ops::Neg if a.dtype().is_bool() => (true, &a.src()[0]),
        _ => (false, a),
    };
    if !matches!(c.op(), Ops::CmpLt | Ops::CmpNe | Ops::CmpEq) || !c.src()[0].dtype().is_int() {
        return None;
    }
    // lhs - rhs == s·k + r exactly, with s = ±1
    let (s, r) = KLin::of(&c.src()[0], k)?.sub(&KLin::of(&c.src()[1], k)?)?.split()?;
    let one = KLin::konst(1);
    Some(match (c.op(), neg, s) {
        // s·k + r == 0  <=>  k == -s·r
        (Ops::CmpNe, true, _) | (Ops::CmpEq, false, _) => Atom::Eq(r.scale(-s)?.build()?),
        // k + r < 0  <=>  k < -r;   -k + r < 0  <=>  k >= r + 1
        (Ops::CmpLt, false, 1) => Atom::Hi(r.scale(-1)?.build()?),
        (Ops::CmpLt, false, _) => Atom::Lo(r.add(&one)?.build()?),
        // k + r >= 0  <=>  k >= -r;   -k + r >= 0  <=>  k < r + 1
        (Ops::CmpLt, true, 1) => Atom::Lo(r.scale(-1)?.build()?),
        (Ops::CmpLt, true, _) => Atom::Hi(r.add(&one)?.build()?),
        _ => return None,
    })
}

/// An exact integer value `coef·k + Σ c_i·leaf_i + konst`, leaves being integer nodes free of `k`.
#[derive(Clone)]
struct KLin {
    coef: i128,
    terms: Vec<(UOp, i128)>,
    konst: i128,
}

impl KLin {
    fn konst(c: i128) -> KLin {
        KLin { coef: 0, terms: vec![], konst: c }
    }

    /// The decomposition of integer node `u`, if every `k`-dependent node on the way is an ADD,
    /// SUB, NEG, MUL by a constant or value-preserving integer CAST that provably did not wrap.
    fn of(u: &UOp, k: &UOp) -> Option<KLin> {
        if !u.dtype().is_int() || u.dtype().count != 1 {
            return None;
        }
        if u == k {
            return Some(KLin { coef: 1, terms: vec![], konst: 0 });
        }
        if !depends(u, k) {
            return Some(match u.const_value() {
                Some(_) => KLin::konst(u.vmin()),
                None => KLin { coef: 0, terms: vec![(u.clone(), 1)], konst: 0 },
            });
        }
        let s = u.src();
        let exact = !may_wrap(u);
        match u.op() {
            Ops::Add if exact => KLin::of(&s[0], k)?.add(&KLin::of(&s[1], k)?),
            Ops::Sub if exact => KLin::of(&s[0], k)?.sub(&KLin::of(&s[1], k)?),
            Ops::Neg if exact => KLin::of(&s[0], k)?.scale(-1),
            Ops::Mul if exact => match (s[0].const_value(), s[1].const_value()) {
                (_, Some(_)) => KLin::of(&s[0], k)?.scale(s[1].vmin()),
                (Some(_), _) => KLin::of(&s[1], k)?.scale(s[0].vmin()),
                _ => None,
            },
            Ops::Cast => {
                let (lo, hi) = u.dtype().int_range();
                (s[0].vmin() >= lo && s[0].vmax() <= hi).then(|| KLin::of(&s[0], k))?
            }
            _ => None,
        }
    }

    fn add(&self, o: &KLin) -> Option<KLin> {
        let mut terms = self.terms.clone();
        terms.extend(o.terms.iter().cloned());
        Some(KLin { coef: self.coef.checked_add(o.coef)?, terms, konst: self.konst.checked_add(o.konst)? })
    }

    fn sub(&self, o: &KLin) -> Option<KLin> {
        self.add(&o.scale(-1)?)
    }

    fn scale(&self, f: i128) -> Option<KLin> {
        let terms = self.terms.iter().map(|(t, c)| Some((t.clone(), c.checked_mul(f)?))).collect::<Option<_>>()?;
        Some(KLin { coef: self.coef.checked_mul(f)?, terms, konst: self.konst.checked_mul(f)? })
    }

    /// `(s, rest)` with `self == s·k + rest`, when `s` is ±1.
    fn split(self) -> Option<(i128, KLin)> {
        matches!(self.coef, 1 | -1).then(|| (self.coef, KLin { coef: 0, ..self }))
    }

    /// The `k`-free part as an index expression that computes the exact value: refused when a
    /// term or a partial sum could leave the 64-bit range.
    fn build(&self) -> Option<UOp> {
        if self.coef != 0 {
            return None;
        }
        let limit = i64::MAX as i128;
        let mut acc: Option<UOp> = None;
        let mut mag = self.konst.abs();
        for (leaf, c) in &self.terms {
            if *c == 0 {
                continue;
            }
            let idx = leaf.cast(DType::INDEX);
            let (lo, hi) = (leaf.vmin(), leaf.vmax());
            if hi > limit {
                return None; // a u64 value past i64::MAX: the cast to index would change it
            }
            if lo < -limit {
                // only an unscaled i64 leaf alone may reach i64::MIN
                if self.terms.len() != 1 || *c != 1 || self.konst != 0 {
                    return None;
                }
                return Some(idx);
            }
            mag = mag.checked_add(c.checked_mul(lo.abs().max(hi.abs()))?.abs())?;
            let term = if *c == 1 { idx } else { idx.alu(Ops::Mul, &[&UOp::index_const(i64::try_from(*c).ok()?)]) };
            acc = Some(match acc {
                None => term,
                Some(a) => a.alu(Ops::Add, &[&term]),
            });
        }
        if mag > limit {
            return None;
        }
        let k = UOp::index_const(self.konst as i64);
        Some(match acc {
            None => k,
            Some(a) if self.konst == 0 => a,
            Some(a) => a.alu(Ops::Add, &[&k]),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// helpers

/// Whether `k` is reachable from `u`.
fn depends(u: &UOp, k: &UOp) -> bool {
    let mut seen = HashSet::new();
    let mut stack = vec![u.clone()];
    while let Some(n) = stack.pop() {
        if n == *k {
            return true;
        }
        if seen.insert(n.clone()) {
            stack.extend(n.src().iter().cloned());
        }
    }
    false
}

/// Whether `u`'s bounds are its dtype's whole range, i.e. it may have wrapped.
fn may_wrap(u: &UOp) -> bool {
    u.bounds() == u.dtype().int_range()
}

/// `min(a, b) = -max(-a, -b)` on index values (exact while neither is the 64-bit minimum).
fn imin(a: &UOp, b: &UOp) -> UOp {
    a.alu(Ops::Neg, &[]).alu(Ops::Max, &[&b.alu(Ops::Neg, &[])]).alu(Ops::Neg, &[])
}
