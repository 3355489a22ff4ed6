//! Algebraic and integer-index simplification: constant folding, identities, vmin/vmax range
//! folding, linear term combining, div/mod folding and comparison normalization.
//!
//! Every rule is sound for C semantics: integers wrap, IDIV/MOD truncate toward zero, floats are
//! IEEE (so float rules are limited to exact identities). Integer rules apply to scalar integer
//! dtypes (`Index` included); rules that reason about exact integer values check with vmin/vmax
//! that nothing involved can have wrapped.

use std::sync::LazyLock;

use super::exec::{bitcast_value, cast_value, exec_alu};
use super::ops::Ops;
use super::pattern::{PatternMatcher, UPat};
use super::rewrite::graph_rewrite;
use super::uop::{Arg, ConstValue, UOp};
use crate::dtype::DType;
use crate::rule;

// ---------------------------------------------------------------------------------------------
// helpers

fn is_scalar(d: DType) -> bool {
    d.count == 1 && !d.is_ptr()
}
fn is_int(d: DType) -> bool {
    is_scalar(d) && d.is_int()
}
fn is_signed_int(d: DType) -> bool {
    is_int(d) && !d.is_unsigned()
}
fn is_intlike(d: DType) -> bool {
    is_scalar(d) && (d.is_int() || d.is_bool())
}

/// The value of an integer CONST (unsigned values read as unsigned).
fn cval(u: &UOp) -> Option<i128> {
    (u.op() == Ops::Const && is_int(u.dtype())).then(|| u.vmin())
}

/// `v` reduced modulo 2^bits into the value range of integer dtype `d`.
fn wrap(v: i128, d: DType) -> i128 {
    let (lo, hi) = d.int_range();
    // i128 wraps modulo 2^128, a multiple of 2^bits, so wrapping keeps the residue
    v.wrapping_sub(lo).rem_euclid(hi - lo + 1) + lo
}

fn iconst(d: DType, v: i128) -> UOp {
    UOp::const_int(d, wrap(v, d) as i64)
}

/// Whether `u`'s bounds are its dtype's whole range: the value may have wrapped somewhere.
/// Bounds never come from a wrapping ADD/MUL/SUB/NEG, so a value that is not `may_wrap` was
/// computed exactly through every such op feeding it.
pub(crate) fn may_wrap(u: &UOp) -> bool {
    u.bounds() == u.dtype().int_range()
}

/// Whether `m*q + [r.0, r.1]` stays inside `q`'s dtype for every value of `q`, and `q` is exact.
/// Together with `x ≡ m*q + r (mod 2^bits)` this proves `x == m*q + r` as integers.
fn exact_as(q: &UOp, m: i128, r: (i128, i128)) -> bool {
    let (lo, hi) = q.dtype().int_range();
    let (a, b) = (m.saturating_mul(q.vmin()), m.saturating_mul(q.vmax()));
    !may_wrap(q) && a.min(b).saturating_add(r.0) >= lo && a.max(b).saturating_add(r.1) <= hi
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// Sort key of terms in canonical sums and products: RANGEs by id first, then by content hash.
fn order(u: &UOp) -> (u8, u64) {
    match (u.op(), u.arg()) {
        (Ops::Range, Arg::Range(id, _)) => (0, *id as u64),
        (Ops::Const, _) => (2, u.key()),
        _ => (1, u.key()),
    }
}

fn mul_sorted(a: &UOp, b: &UOp) -> UOp {
    if order(a) <= order(b) {
        a.alu(Ops::Mul, &[b])
    } else {
        b.alu(Ops::Mul, &[a])
    }
}

// ---------------------------------------------------------------------------------------------
// linear forms: an integer expression as Σ coef·term + k (coefficients modulo 2^bits)

#[derive(Clone)]
pub(crate) struct Lin {
    pub(crate) dtype: DType,
    pub(crate) terms: Vec<(UOp, i128)>,
    pub(crate) k: i128,
}

impl Lin {
    pub(crate) fn of(u: &UOp) -> Lin {
        let mut l = Lin { dtype: u.dtype(), terms: vec![], k: 0 };
        l.add(u, 1);
        l.merge_divmod();
        l
    }

    pub(crate) fn with(&self, terms: Vec<(UOp, i128)>, k: i128) -> Lin {
        Lin { dtype: self.dtype, terms, k }
    }

    /// Adds `f * u`, descending through sums, scaling and (signed) negation.
    fn add(&mut self, u: &UOp, f: i128) {
        let d = self.dtype;
        let s = u.src();
        let signed = d.is_signed();
        match u.op() {
            Ops::Const => self.k = wrap(self.k.wrapping_add(f.wrapping_mul(u.vmin())), d),
            Ops::Add => {
                self.add(&s[0], f);
                self.add(&s[1], f);
            }
            // unsigned SUB/NEG stay opaque terms: as `+ b*(2^n-1)` they would lose their bounds
            Ops::Sub if signed => {
                self.add(&s[0], f);
                self.add(&s[1], wrap(-f, d));
            }
            Ops::Neg if signed => self.add(&s[0], wrap(-f, d)),
            Ops::Mul => match (cval(&s[0]), cval(&s[1])) {
                (_, Some(c)) => self.add(&s[0], wrap(f.wrapping_mul(c), d)),
                (Some(c), _) => self.add(&s[1], wrap(f.wrapping_mul(c), d)),
                _ => {
                    // pull constant coefficients out of a product: (a*2)*(b*3) -> (a*b)*6
                    let (ta, ca) = Lin::split_coef(&s[0]);
                    // a square splits its factor once (chains of squarings stay linear)
                    let (tb, cb) = if s[1] == s[0] { (ta.clone(), ca) } else { Lin::split_coef(&s[1]) };
                    self.term(mul_sorted(&ta, &tb), wrap(f.wrapping_mul(ca.wrapping_mul(cb)), d));
                }
            },
            _ => self.term(u.clone(), f),
        }
    }

    fn term(&mut self, t: UOp, f: i128) {
        let d = self.dtype;
        match self.terms.iter_mut().find(|(u, _)| *u == t) {
            Some((_, c)) => *c = wrap(c.wrapping_add(f), d),
            None => self.terms.push((t, f)),
        }
    }

    /// `u` as `term * coef` when it is a single scaled term, else `(u, 1)`.
    fn split_coef(u: &UOp) -> (UOp, i128) {
        let l = Lin::of(u);
        match l.terms.as_slice() {
            [(t, c)] if l.k == 0 && *c != 0 => (t.clone(), *c),
            _ => (u.clone(), 1),
        }
    }

    /// `g·c·(x // c) + g·(x % c)` is `g·x` for truncating division by any nonzero c.
    fn merge_divmod(&mut self) {
        while let Some((i, j)) = self.divmod_pair() {
            let (x, g) = (self.terms[i].0.src()[0].clone(), self.terms[j].1);
            self.terms.remove(i.max(j));
            self.terms.remove(i.min(j));
            self.add(&x, g);
        }
    }

    fn divmod_pair(&self) -> Option<(usize, usize)> {
        let d = self.dtype;
        self.terms.iter().enumerate().find_map(|(i, (t, f))| {
            let c = cval(t.src().get(1)?).filter(|c| *c != 0 && t.op() == Ops::IDiv)?;
            let j = self.terms.iter().position(|(u, g)| {
                u.op() == Ops::Mod && u.src() == t.src() && *g != 0 && wrap(g.wrapping_mul(c), d) == *f
            })?;
            Some((i, j))
        })
    }

    /// The canonical expression: terms sorted by `order`, coefficient 1 implicit, const last.
    pub(crate) fn build(&self) -> UOp {
        let d = self.dtype;
        let mut ts: Vec<&(UOp, i128)> = self.terms.iter().filter(|(_, c)| *c != 0).collect();
        ts.sort_by_key(|(t, _)| order(t));
        let mut acc: Option<UOp> = None;
        for (t, c) in ts {
            let tc = if *c == 1 { t.clone() } else { t.alu(Ops::Mul, &[&iconst(d, *c)]) };
            acc = Some(match acc {
                None => tc,
                Some(a) => a.alu(Ops::Add, &[&tc]),
            });
        }
        match acc {
            None => iconst(d, self.k),
            Some(a) if self.k == 0 => a,
            Some(a) => a.alu(Ops::Add, &[&iconst(d, self.k)]),
        }
    }

    /// gcd of the absolute coefficients (0 without terms).
    fn coef_gcd(&self) -> i128 {
        self.terms.iter().fold(0, |g, (_, c)| gcd(g, *c))
    }

    /// This form with every coefficient divided by `g` and no constant.
    fn div_coefs(&self, g: i128) -> Lin {
        self.with(self.terms.iter().map(|(t, c)| (t.clone(), c / g)).collect(), 0)
    }
}

// ---------------------------------------------------------------------------------------------
// rules with computed results

/// Any ALU op or CAST whose sources are all CONST becomes the CONST it computes.
fn fold_const(u: &UOp) -> Option<UOp> {
    if !is_scalar(u.dtype()) || u.src().is_empty() {
        return None;
    }
    let vals: Vec<ConstValue> = u.src().iter().map(UOp::const_value).collect::<Option<_>>()?;
    let sd = u.src()[0].dtype();
    let v = match u.op() {
        // C leaves integer division by zero undefined: keep the op rather than pick a value
        Ops::IDiv | Ops::Mod if !sd.is_float() && vals[1].as_i64() == 0 => return None,
        Ops::Cast => cast_value(vals[0], sd, u.dtype()),
        Ops::Bitcast if sd.itemsize() == u.dtype().itemsize() => bitcast_value(vals[0], sd, u.dtype()),
        Ops::Bitcast => return None,
        op => exec_alu(op, sd, &vals),
    };
    Some(UOp::constant(u.dtype(), v))
}

/// An integer or bool ALU node whose bounds allow one value is that value.
fn fold_bounds(u: &UOp) -> Option<UOp> {
    let (lo, hi) = u.bounds();
    match u.dtype() {
        d if lo != hi || !is_intlike(d) => None,
        d if d.is_bool() => Some(UOp::constant(d, ConstValue::Bool(lo == 1))),
        d => Some(iconst(d, lo)),
    }
}

/// `x // c` and `x % c` for a constant c > 0.
fn fold_divmod(u: &UOp) -> Option<UOp> {
    let (x, cn, d) = (&u.src()[0], &u.src()[1], u.dtype());
    let c = cval(cn).filter(|c| *c > 0)?;
    let is_div = u.op() == Ops::IDiv;
    let inner = x.src().get(1).and_then(cval).filter(|a| *a > 0);
    // (x // a) // c == x // (a*c), and (x % m) % c == x % c when c | m: true for truncation too
    if let (true, Ops::IDiv, Some(a)) = (is_div, x.op(), inner) {
        if let Some(ac) = a.checked_mul(c).filter(|ac| *ac <= d.int_range().1) {
            return Some(x.src()[0].alu(Ops::IDiv, &[&iconst(d, ac)]));
        }
    }
    if let (false, Ops::Mod, Some(m)) = (is_div, x.op(), inner) {
        if m % c == 0 {
            return Some(x.src()[0].alu(Ops::Mod, &[cn]));
        }
    }
    // the rest needs x >= 0 (so truncation is floor) and computed without wrapping
    let (lo, hi) = x.bounds();
    if lo < 0 || may_wrap(x) {
        return None;
    }
    if lo / c == hi / c {
        let q = lo / c;
        return Some(match (is_div, q) {
            (true, _) => iconst(d, q),
            (false, 0) => x.clone(),
            (false, _) => x.alu(Ops::Add, &[&iconst(d, -q * c)]),
        });
    }
    // x = c·Q + R with Q = Σ(a_i div c)·t_i + k div c, R = Σ(a_i mod c)·t_i + k mod c
    let l = Lin::of(x);
    let split = |f: fn(i128, i128) -> i128| {
        l.with(l.terms.iter().map(|(t, a)| (t.clone(), f(*a, c))).collect(), f(l.k, c)).build()
    };
    let (q, r) = (split(i128::div_euclid), split(i128::rem_euclid));
    let split_ok = r.vmin() >= 0 && !may_wrap(&r) && exact_as(&q, c, r.bounds());
    if split_ok && r.vmax() < c {
        return Some(if is_div { q } else { r });
    }
    // common factor g of every coefficient and c: x = g·Z + kr with 0 <= kr < g, so
    // x // c == Z // (c/g) and x % c == (Z % (c/g))·g + kr
    let g = gcd(l.coef_gcd(), c);
    if g > 1 {
        let (kq, kr) = (l.k.div_euclid(g), l.k.rem_euclid(g));
        let mut zl = l.div_coefs(g);
        zl.k = kq;
        let z = zl.build();
        if exact_as(&z, g, (kr, kr)) {
            let cg = iconst(d, c / g);
            return Some(if is_div {
                z.alu(Ops::IDiv, &[&cg])
            } else {
                z.alu(Ops::Mod, &[&cg]).alu(Ops::Mul, &[&iconst(d, g)]).alu(Ops::Add, &[&iconst(d, kr)])
            });
        }
    }
    // a factor g of c that divides every coefficient but a remainder R in [0, g): x = g·Z + R
    // (so Z >= 0), x // c == Z // (c/g) and x % c == (Z % (c/g))·g + R
    for a in l.terms.iter().map(|(_, a)| a.abs()) {
        let g = gcd(a, c);
        if g <= 1 {
            continue;
        }
        let (big, small): (Vec<_>, Vec<_>) = l.terms.iter().cloned().partition(|(_, a)| a % g == 0);
        if small.is_empty() {
            continue;
        }
        let z = l.with(big.into_iter().map(|(t, a)| (t, a / g)).collect(), 0).build();
        let r = l.with(small, l.k).build();
        if r.vmin() >= 0 && r.vmax() < g && !may_wrap(&r) && exact_as(&z, g, r.bounds()) {
            let cg = iconst(d, c / g);
            return Some(if is_div {
                z.alu(Ops::IDiv, &[&cg])
            } else {
                z.alu(Ops::Mod, &[&cg]).alu(Ops::Mul, &[&iconst(d, g)]).alu(Ops::Add, &[&r])
            });
        }
    }
    // partial split: x // c == Q + R // c and x % c == R % c whenever R >= 0
    if !split_ok {
        return None;
    }
    if is_div && q.const_int_value() != Some(0) {
        Some(q.alu(Ops::Add, &[&r.alu(Ops::IDiv, &[cn])]))
    } else if !is_div && r != *x {
        Some(r.alu(Ops::Mod, &[cn]))
    } else {
        None
    }
}

/// `Σ a_i·t_i + k < c` becomes `Σ (a_i/g)·t_i < ceil((c-k)/g)` (g the gcd of the a_i), and
/// `c < Σ a_i·t_i + k` becomes `floor((c-k)/g) < Σ (a_i/g)·t_i`, when nothing wraps.
fn fold_cmp(u: &UOp) -> Option<UOp> {
    let (a, b) = (&u.src()[0], &u.src()[1]);
    if !is_int(a.dtype()) {
        return None;
    }
    let (y, c, const_left) = match (cval(a), cval(b)) {
        (None, Some(c)) => (a, c, false),
        (Some(c), None) => (b, c, true),
        _ => return None,
    };
    if may_wrap(y) {
        return None;
    }
    let l = Lin::of(y);
    let g = l.coef_gcd();
    if g == 0 || (l.k == 0 && g == 1) {
        return None;
    }
    let z = l.div_coefs(g).build();
    if !exact_as(&z, g, (l.k, l.k)) {
        return None;
    }
    let c2 = c - l.k;
    let t = if const_left { c2.div_euclid(g) } else { (c2 + g - 1).div_euclid(g) };
    let (lo, hi) = y.dtype().int_range();
    if t < lo || t > hi {
        return None;
    }
    let t = iconst(y.dtype(), t);
    Some(if const_left { t.alu(Ops::CmpLt, &[&z]) } else { z.alu(Ops::CmpLt, &[&t]) })
}

/// Commutative ops get their operands in `order` (consts last). Integer ADD/MUL are ordered by
/// the linear canonicalization instead. A float MAX keeps its order: on a tie it takes its right
/// operand, so max(-0.0, +0.0) is +0.0 and max(+0.0, -0.0) is -0.0.
fn sort_commutative(u: &UOp) -> Option<UOp> {
    if is_int(u.dtype()) && matches!(u.op(), Ops::Add | Ops::Mul) || u.op() == Ops::Max && u.dtype().is_float() {
        return None;
    }
    let s = u.src();
    (order(&s[0]) > order(&s[1])).then(|| u.replace_src(vec![s[1].clone(), s[0].clone()]))
}

// ---------------------------------------------------------------------------------------------
// rule tables

fn v(name: &'static str) -> UPat {
    UPat::var(name)
}
fn bin(op: Ops, a: UPat, b: UPat) -> UPat {
    UPat::op(op, [a, b])
}
fn alu_ops() -> Vec<Ops> {
    let mut ops: Vec<Ops> = [Ops::UNARY, Ops::BINARY, Ops::TERNARY].concat();
    ops.push(Ops::Cast);
    ops
}
fn is_pos_zero(u: &UOp) -> bool {
    u.const_value().is_some_and(|c| c.as_f64() == 0.0 && !c.as_f64().is_sign_negative())
}

/// Constant folding, bounds folding and the exact identities (safe for any graph, floats too).
pub fn symbolic_simple() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        let mut fold_ops = alu_ops();
        fold_ops.retain(|o| *o != Ops::Where);
        fold_ops.push(Ops::Bitcast);
        let fb = |b: bool| UOp::constant(DType::BOOL, ConstValue::Bool(b));
        let k0 = |name| UPat::konst(0.0).named(name);
        PatternMatcher::new(vec![
            // ** constant folding **
            rule!("fold constants", |u| UPat::ops(&fold_ops).named(u).all_src(UPat::ops(&[Ops::Const]))
                => fold_const(u)),
            rule!("constant select", |c, a, b| UPat::cvar(c).where_(v(a), v(b)) => {
                Some(if c.const_value()?.as_bool() { a.clone() } else { b.clone() })
            }),
            // ** range-based folding **
            rule!("fold by bounds", |u| UPat::ops(&alu_ops()).named(u) => fold_bounds(u)),
            // ** identities **
            // x + 0: for floats only -0.0 is an identity (-0.0 + 0.0 is +0.0)
            rule!("x + 0", |x, c| v(x) + k0(c) => {
                let neg_zero = c.const_value()?.as_f64().is_sign_negative();
                (!x.dtype().is_float() || neg_zero).then(|| x.clone())
            }),
            rule!("x - 0", |x, c| bin(Ops::Sub, v(x), k0(c)) => {
                (!x.dtype().is_float() || is_pos_zero(c)).then(|| x.clone())
            }),
            rule!("x * 1", |x| v(x) * UPat::konst(1.0) => Some(x.clone())),
            rule!("x / 1", |x| bin(Ops::FDiv, v(x), UPat::konst(1.0)) => Some(x.clone())),
            // x * 0 is not 0 for a NaN or infinite float
            rule!("x * 0", |x, c| v(x) * k0(c) => is_intlike(x.dtype()).then(|| c.clone())),
            rule!("x // 1", |x| v(x).idiv(UPat::konst(1.0)) => is_int(x.dtype()).then(|| x.clone())),
            rule!("x % 1", |x| v(x) % UPat::konst(1.0) => is_int(x.dtype()).then(|| iconst(x.dtype(), 0))),
            rule!("max(x, x)", |x| v(x).max(v(x)) => Some(x.clone())),
            rule!("x < x", |x| v(x).lt(v(x)) => is_scalar(x.dtype()).then(|| fb(false))),
            rule!("x != x", |x| v(x).ne(v(x)) => is_intlike(x.dtype()).then(|| fb(false))),
            rule!("x == x", |x| UPat::comm(Ops::CmpEq, v(x), v(x)) => is_intlike(x.dtype()).then(|| fb(true))),
            rule!("c ? x : x", |c, x| v(c).where_(v(x), v(x)) => Some(x.clone())),
            rule!("--x", |x| v(x).neg().neg() => Some(x.clone())),
            rule!("x & x", |x| v(x).and(v(x)) => is_intlike(x.dtype()).then(|| x.clone())),
            rule!("x | x", |x| v(x).or(v(x)) => is_intlike(x.dtype()).then(|| x.clone())),
            rule!("x & c", |x, c| v(x).and(UPat::cvar(c)) => {
                let k = c.const_value()?;
                x.dtype().is_bool().then(|| if k.as_bool() { x.clone() } else { c.clone() })
            }),
            rule!("x | c", |x, c| v(x).or(UPat::cvar(c)) => {
                let k = c.const_value()?;
                x.dtype().is_bool().then(|| if k.as_bool() { c.clone() } else { x.clone() })
            }),
            rule!("c ? 1 : 0", |c, w| v(c).where_(UPat::konst(1.0), UPat::konst(0.0)).named(w) => {
                (w.dtype().is_bool() && c.dtype() == w.dtype()).then(|| c.clone())
            }),
            rule!("cast to its own dtype", |x, u| v(x).cast().named(u) => (x.dtype() == u.dtype()).then(|| x.clone())),
            // relu's select, `c < x or x is NaN ? x : c`, is exactly max(x, c): one op to render
            rule!("relu's select", |c, x| UPat::cvar(c).lt(v(x)).or(v(x).ne(v(x))).where_(v(x), UPat::cvar(c)) => {
                x.dtype().is_float().then(|| x.alu(Ops::Max, &[c]))
            }),
        ])
    });
    &PM
}

/// The symbolic rule table: `symbolic_simple` plus canonical ordering, bounds decisions, linear
/// term combining, div/mod folding and comparison normalization for integer index math.
pub fn symbolic() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        symbolic_simple().extend(&PatternMatcher::new(vec![
            rule!("sort commutative sources", |u| UPat::ops(Ops::COMMUTATIVE).named(u) => sort_commutative(u)),
            // max(x, y) is x when x >= y everywhere
            rule!("max by bounds", |x, y| v(x).max(v(y)).dtype(is_int) => (x.vmin() >= y.vmax()).then(|| x.clone())),
            rule!("fold div and mod", |u| UPat::ops(&[Ops::IDiv, Ops::Mod]).named(u).dtype(is_int) => fold_divmod(u)),
            rule!("fold comparison", |u| UPat::ops(&[Ops::CmpLt]).named(u) => fold_cmp(u)),
            // linear canonical form of sums, scalings and products of signed integers (indices);
            // unsigned ones are data (hashes, random bits): a linear form per use of a shared sum
            // repeats its terms (Threefry's ~110 ops per number became ~240)
            rule!("linear form", |u| UPat::ops(&[Ops::Add, Ops::Mul, Ops::Neg, Ops::Sub]).named(u).dtype(is_signed_int)
                => Some(Lin::of(u).build())),
        ]))
    });
    &PM
}

/// `u` simplified with the symbolic rules.
pub fn simplify(u: &UOp) -> UOp {
    graph_rewrite(u, symbolic(), &mut (), "symbolic", false)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::uop::AxisKind;

    pub(crate) fn rng(id: usize, end: i64) -> UOp {
        UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(end)], Arg::Range(id, AxisKind::Loop))
    }
    pub(crate) fn c(v: i64) -> UOp {
        UOp::index_const(v)
    }
    pub(crate) fn add(a: &UOp, b: &UOp) -> UOp {
        a.alu(Ops::Add, &[b])
    }
    pub(crate) fn mul(a: &UOp, b: &UOp) -> UOp {
        a.alu(Ops::Mul, &[b])
    }
    pub(crate) fn div(a: &UOp, b: &UOp) -> UOp {
        a.alu(Ops::IDiv, &[b])
    }
    pub(crate) fn rem(a: &UOp, b: &UOp) -> UOp {
        a.alu(Ops::Mod, &[b])
    }
    fn fb(b: bool) -> UOp {
        UOp::constant(DType::BOOL, ConstValue::Bool(b))
    }
    /// Simplifies `e`, checks the result is `want` and a fixed point.
    #[track_caller]
    fn check(e: &UOp, want: &UOp) {
        let s = simplify(e);
        assert_eq!(&s, want, "\n{e:?}\nsimplified to\n{s:?}\nwanted\n{want:?}");
        assert_eq!(simplify(&s), s, "not idempotent");
    }

    #[test]
    fn reshape_of_two_dims_collapses() {
        let (i, j) = (rng(0, 5), rng(1, 7));
        let flat = add(&mul(&i, &c(7)), &j);
        check(&div(&flat, &c(7)), &i);
        check(&rem(&flat, &c(7)), &j);
        check(&add(&mul(&div(&flat, &c(7)), &c(7)), &rem(&flat, &c(7))), &flat);
        check(&flat, &flat);
    }

    #[test]
    fn reshape_of_three_dims_collapses() {
        let (i, j, k) = (rng(0, 2), rng(1, 3), rng(2, 4));
        let flat = add(&add(&mul(&i, &c(12)), &mul(&j, &c(4))), &k);
        check(&rem(&div(&flat, &c(4)), &c(3)), &j);
        check(&div(&flat, &c(12)), &i);
        check(&rem(&flat, &c(4)), &k);
        check(&div(&rem(&flat, &c(12)), &c(4)), &j);
        // and in another association order
        let flat2 = add(&k, &add(&mul(&c(4), &j), &mul(&i, &c(12))));
        check(&flat2, &flat);
    }

    #[test]
    fn unaligned_reshape_round_trips() {
        // (2,3,4) -> (4,6) -> (2,3,4): the split at 6 does not fall on a dim boundary
        let (i, j, k) = (rng(0, 2), rng(1, 3), rng(2, 4));
        let flat = add(&add(&mul(&i, &c(12)), &mul(&j, &c(4))), &k);
        let jk = add(&mul(&j, &c(4)), &k);
        check(&div(&flat, &c(6)), &add(&mul(&i, &c(2)), &div(&jk, &c(6))));
        check(&rem(&flat, &c(6)), &rem(&jk, &c(6)));
        check(&add(&mul(&div(&flat, &c(6)), &c(6)), &rem(&flat, &c(6))), &flat);
        let back = add(&mul(&div(&flat, &c(6)), &c(6)), &rem(&flat, &c(6)));
        check(&rem(&div(&back, &c(4)), &c(3)), &j);
    }

    #[test]
    fn partial_division_splits() {
        let (i, j) = (rng(0, 10), rng(1, 4));
        check(&div(&add(&mul(&i, &c(4)), &j), &c(2)), &add(&mul(&i, &c(2)), &div(&j, &c(2))));
        check(&rem(&add(&mul(&i, &c(4)), &j), &c(2)), &rem(&j, &c(2)));
        // (i*3 + j + 1) % 3 -> (j + 1) % 3
        let (a, b) = (rng(0, 4), rng(1, 3));
        check(&rem(&add(&add(&mul(&a, &c(3)), &b), &c(1)), &c(3)), &rem(&add(&b, &c(1)), &c(3)));
    }

    #[test]
    fn gcd_and_nested_divmod() {
        let (a, b) = (rng(0, 10), rng(1, 10));
        let e = add(&add(&mul(&a, &c(4)), &mul(&b, &c(8))), &c(2));
        check(&div(&e, &c(4)), &add(&a, &mul(&b, &c(2))));
        let e = add(&mul(&a, &c(6)), &mul(&b, &c(4)));
        check(&div(&e, &c(8)), &div(&add(&mul(&a, &c(3)), &mul(&b, &c(2))), &c(4)));
        let x = rng(0, 100);
        check(&div(&div(&x, &c(2)), &c(3)), &div(&x, &c(6)));
        check(&rem(&rem(&x, &c(12)), &c(4)), &rem(&x, &c(4)));
        check(&div(&rem(&x, &c(4)), &c(4)), &c(0));
        // (x // c) * c + x % c == x even when x is not linear
        let p = mul(&a, &b);
        check(&add(&mul(&div(&p, &c(5)), &c(5)), &rem(&p, &c(5))), &p);
        check(&add(&rem(&p, &c(5)), &mul(&div(&p, &c(5)), &c(5))), &p);
    }

    #[test]
    fn bounds_decide() {
        let i = rng(0, 5);
        check(&add(&i, &c(2)).alu(Ops::CmpLt, &[&c(2)]), &fb(false));
        check(&i.alu(Ops::CmpLt, &[&c(5)]), &fb(true));
        check(&div(&i, &c(5)), &c(0));
        check(&rem(&i, &c(5)), &i);
        check(&rem(&add(&i, &c(10)), &c(10)), &i);
        check(&i.alu(Ops::Max, &[&c(0)]), &i);
        check(&c(7).alu(Ops::Max, &[&i]), &c(7));
        check(&rng(1, 1), &rng(1, 1));
        // mixed sign numerators are left alone
        let neg = add(&i, &c(-3));
        check(&div(&neg, &c(2)), &div(&neg, &c(2)));
    }

    #[test]
    fn comparisons_normalize() {
        let (i, j) = (rng(0, 10), rng(1, 10));
        check(&add(&i, &c(3)).alu(Ops::CmpLt, &[&c(7)]), &i.alu(Ops::CmpLt, &[&c(4)]));
        let e = add(&mul(&i, &c(2)), &mul(&j, &c(4)));
        check(&e.alu(Ops::CmpLt, &[&c(7)]), &add(&i, &mul(&j, &c(2))).alu(Ops::CmpLt, &[&c(4)]));
        check(&c(7).alu(Ops::CmpLt, &[&e]), &c(3).alu(Ops::CmpLt, &[&add(&i, &mul(&j, &c(2)))]));
    }

    #[test]
    fn terms_combine() {
        let (x, y) = (rng(0, 100), rng(1, 100));
        check(&add(&add(&x, &c(3)), &c(5)), &add(&x, &c(8)));
        check(&mul(&mul(&x, &c(2)), &c(3)), &mul(&x, &c(6)));
        check(&add(&mul(&x, &c(2)), &mul(&c(3), &x)), &mul(&x, &c(5)));
        check(&add(&x, &x), &mul(&x, &c(2)));
        check(&add(&add(&y, &x), &c(1)), &add(&add(&x, &y), &c(1)));
        check(&add(&x, &x.alu(Ops::Neg, &[])), &c(0));
        check(&x.alu(Ops::Sub, &[&y]), &add(&x, &mul(&y, &c(-1))));
        check(&mul(&mul(&y, &c(2)), &mul(&x, &c(3))), &mul(&mul(&x, &y), &c(6)));
        check(&mul(&add(&x, &c(1)), &c(3)), &add(&mul(&x, &c(3)), &c(3)));
    }

    #[test]
    fn constants_fold() {
        check(&mul(&add(&c(3), &c(4)), &c(2)), &c(14));
        check(&div(&c(-7), &c(2)), &c(-3));
        check(&rem(&c(-7), &c(2)), &c(-1));
        check(&div(&c(7), &c(0)), &div(&c(7), &c(0)));
        let f = |v: f64| UOp::const_float(DType::FLOAT32, v);
        check(&f(1.5).alu(Ops::Add, &[&f(2.0)]), &f(3.5));
        check(&f(2.5).cast(DType::INT32), &UOp::const_int(DType::INT32, 2));
        check(&UOp::where_(&fb(true), &c(1), &c(2)), &c(1));
        check(&c(3).alu(Ops::CmpLt, &[&c(4)]), &fb(true));
    }

    #[test]
    fn identities() {
        let x = rng(0, 100);
        let fx = x.cast(DType::FLOAT32);
        let f = |v: f64| UOp::const_float(DType::FLOAT32, v);
        check(&add(&x, &c(0)), &x);
        check(&mul(&x, &c(1)), &x);
        check(&mul(&x, &c(0)), &c(0));
        check(&div(&x, &c(1)), &x);
        check(&rem(&x, &c(1)), &c(0));
        check(&x.alu(Ops::Sub, &[&c(0)]), &x);
        check(&mul(&fx, &f(1.0)), &fx);
        check(&fx.alu(Ops::Sub, &[&f(0.0)]), &fx);
        check(&fx.alu(Ops::Add, &[&f(-0.0)]), &fx);
        // not identities for IEEE floats
        check(&mul(&fx, &f(0.0)), &mul(&fx, &f(0.0)));
        check(&fx.alu(Ops::Add, &[&f(0.0)]), &fx.alu(Ops::Add, &[&f(0.0)]));
        check(&fx.alu(Ops::CmpNe, &[&fx]), &fx.alu(Ops::CmpNe, &[&fx]));
        check(&f(2.0).alu(Ops::Add, &[&fx]), &fx.alu(Ops::Add, &[&f(2.0)]));
        let y = fx.alu(Ops::Max, &[&fx]);
        check(&y, &fx);
        check(&fx.alu(Ops::Neg, &[]).alu(Ops::Neg, &[]), &fx);
        check(&x.alu(Ops::CmpLt, &[&x]), &fb(false));
        check(&x.alu(Ops::CmpNe, &[&x]), &fb(false));
        let b = fx.alu(Ops::CmpLt, &[&f(1.0)]);
        check(&UOp::where_(&b, &x, &x), &x);
        check(&b.alu(Ops::And, &[&fb(true)]), &b);
        check(&b.alu(Ops::And, &[&fb(false)]), &fb(false));
        check(&b.alu(Ops::Or, &[&fb(false)]), &b);
        check(&b.alu(Ops::Or, &[&fb(true)]), &fb(true));
        check(&b.alu(Ops::And, &[&b]), &b);
        check(&UOp::where_(&b, &fb(true), &fb(false)), &b);
    }
}
