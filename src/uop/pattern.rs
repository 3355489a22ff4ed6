//! `UPat` patterns and the `PatternMatcher` rule table every pass is written as.

use std::ops;
use std::panic::Location;
use std::sync::Arc;

use super::ops::Ops;
use super::uop::{Arg, UOp};
use crate::dtype::DType;

/// What a pattern says about a node's sources.
#[derive(Clone)]
enum SrcPat {
    Any,
    /// Exactly these, in order.
    Exact(Vec<UPat>),
    /// These in any order (commutative ops).
    Perms(Vec<UPat>),
    /// Every source matches this one pattern.
    Repeat(Box<UPat>),
    /// The first source matches this pattern; any others are anything.
    First(Box<UPat>),
}

/// A pattern over UOps: ops, dtype, argument, sources and a capture name, each optional.
#[derive(Clone)]
pub struct UPat {
    ops: Option<Vec<Ops>>,
    dtype: Option<fn(DType) -> bool>,
    arg: Option<Arg>,
    const_value: Option<f64>,
    name: Option<&'static str>,
    src: SrcPat,
}

/// Named captures of one match; `m["x"]` is the node captured as `x`.
#[derive(Clone, Default, Debug)]
pub struct Captures(Vec<(&'static str, UOp)>);

impl Captures {
    pub fn get(&self, name: &str) -> Option<&UOp> {
        self.0.iter().find(|(n, _)| *n == name).map(|(_, u)| u)
    }
    fn bind(&mut self, name: &'static str, u: &UOp) -> bool {
        match self.get(name) {
            Some(prev) => prev == u,
            None => {
                self.0.push((name, u.clone()));
                true
            }
        }
    }
}

impl ops::Index<&str> for Captures {
    type Output = UOp;
    fn index(&self, name: &str) -> &UOp {
        self.get(name).unwrap_or_else(|| panic!("pattern captured no `{name}`"))
    }
}

impl UPat {
    /// Matches any node.
    pub fn any() -> UPat {
        UPat { ops: None, dtype: None, arg: None, const_value: None, name: None, src: SrcPat::Any }
    }
    /// Matches any node and captures it as `name`.
    pub fn var(name: &'static str) -> UPat {
        UPat::any().named(name)
    }
    /// Matches a node with one of `ops` and any sources.
    pub fn ops(ops: &[Ops]) -> UPat {
        UPat { ops: Some(ops.to_vec()), ..UPat::any() }
    }
    /// Matches `op` with exactly these sources in order.
    pub fn op<const N: usize>(op: Ops, src: [UPat; N]) -> UPat {
        UPat { ops: Some(vec![op]), src: SrcPat::Exact(src.to_vec()), ..UPat::any() }
    }
    /// Matches commutative `op` with these sources in either order.
    pub fn comm(op: Ops, a: UPat, b: UPat) -> UPat {
        UPat { ops: Some(vec![op]), src: SrcPat::Perms(vec![a, b]), ..UPat::any() }
    }
    /// Matches a CONST, captured as `name`.
    pub fn cvar(name: &'static str) -> UPat {
        UPat::ops(&[Ops::Const]).named(name)
    }
    /// Matches a CONST equal to `v` (compared numerically, any dtype).
    pub fn konst(v: f64) -> UPat {
        UPat { const_value: Some(v), ..UPat::ops(&[Ops::Const]) }
    }
    pub fn named(mut self, name: &'static str) -> UPat {
        self.name = Some(name);
        self
    }
    /// Whether the pattern, or one below it, captures a node as `name`.
    pub fn captures(&self, name: &str) -> bool {
        self.name == Some(name)
            || match &self.src {
                SrcPat::Any => false,
                SrcPat::Exact(v) | SrcPat::Perms(v) => v.iter().any(|p| p.captures(name)),
                SrcPat::Repeat(p) | SrcPat::First(p) => p.captures(name),
            }
    }
    /// Restrict to dtypes accepted by `pred` (e.g. `DType::is_int`).
    pub fn dtype(mut self, pred: fn(DType) -> bool) -> UPat {
        self.dtype = Some(pred);
        self
    }
    pub fn arg(mut self, arg: Arg) -> UPat {
        self.arg = Some(arg);
        self
    }
    /// Every source matches `p` (any number of them).
    pub fn all_src(mut self, p: UPat) -> UPat {
        self.src = SrcPat::Repeat(Box::new(p));
        self
    }
    /// The first source matches `p`, whatever follows it.
    pub fn first_src(mut self, p: UPat) -> UPat {
        self.src = SrcPat::First(Box::new(p));
        self
    }
    pub fn idiv(self, rhs: UPat) -> UPat {
        UPat::op(Ops::IDiv, [self, rhs])
    }
    pub fn lt(self, rhs: UPat) -> UPat {
        UPat::op(Ops::CmpLt, [self, rhs])
    }
    pub fn ne(self, rhs: UPat) -> UPat {
        UPat::comm(Ops::CmpNe, self, rhs)
    }
    pub fn max(self, rhs: UPat) -> UPat {
        UPat::comm(Ops::Max, self, rhs)
    }
    pub fn and(self, rhs: UPat) -> UPat {
        UPat::comm(Ops::And, self, rhs)
    }
    pub fn or(self, rhs: UPat) -> UPat {
        UPat::comm(Ops::Or, self, rhs)
    }
    pub fn where_(self, a: UPat, b: UPat) -> UPat {
        UPat::op(Ops::Where, [self, a, b])
    }
    pub fn cast(self) -> UPat {
        UPat::op(Ops::Cast, [self])
    }
    /// `NEG(self)`; also available as `-pat`.
    #[allow(clippy::should_implement_trait)]
    pub fn neg(self) -> UPat {
        UPat::op(Ops::Neg, [self])
    }

    /// Every way `u` matches this pattern, as capture sets extending `caps`.
    pub fn matches(&self, u: &UOp, caps: Captures) -> Vec<Captures> {
        let mut out = vec![];
        self.match_into(u, caps, &mut out);
        out
    }

    fn match_into(&self, u: &UOp, mut caps: Captures, out: &mut Vec<Captures>) {
        if self.ops.as_ref().is_some_and(|o| !o.contains(&u.op()))
            || self.dtype.is_some_and(|f| !f(u.dtype()))
            || self.arg.as_ref().is_some_and(|a| a != u.arg())
            || self.const_value.is_some_and(|v| u.const_value().is_none_or(|c| c.as_f64() != v))
            || self.name.is_some_and(|n| !caps.bind(n, u))
        {
            return;
        }
        match &self.src {
            SrcPat::Any => out.push(caps),
            SrcPat::Repeat(p) => {
                let mut sets = vec![caps];
                for s in u.src() {
                    sets = sets.into_iter().flat_map(|c| p.matches(s, c)).collect();
                }
                out.extend(sets);
            }
            SrcPat::Exact(pats) => match_seq(pats.iter(), u.src(), caps, out),
            SrcPat::First(p) => {
                if let Some(first) = u.src().first() {
                    out.extend(p.matches(first, caps));
                }
            }
            SrcPat::Perms(pats) => {
                if pats.len() != u.src().len() {
                    return;
                }
                match_seq(pats.iter(), u.src(), caps.clone(), out);
                if pats.len() == 2 {
                    match_seq(pats.iter().rev(), u.src(), caps, out);
                }
            }
        }
    }
}

fn match_seq<'a>(pats: impl ExactSizeIterator<Item = &'a UPat>, src: &[UOp], caps: Captures, out: &mut Vec<Captures>) {
    if pats.len() != src.len() {
        return;
    }
    let mut sets = vec![caps];
    for (p, s) in pats.zip(src) {
        sets = sets.into_iter().flat_map(|c| p.matches(s, c)).collect();
        if sets.is_empty() {
            return;
        }
    }
    out.extend(sets);
}

macro_rules! upat_binop {
    ($trait:ident, $method:ident, $op:expr, $comm:expr) => {
        impl ops::$trait for UPat {
            type Output = UPat;
            fn $method(self, rhs: UPat) -> UPat {
                if $comm {
                    UPat::comm($op, self, rhs)
                } else {
                    UPat::op($op, [self, rhs])
                }
            }
        }
    };
}
upat_binop!(Add, add, Ops::Add, true);
upat_binop!(Mul, mul, Ops::Mul, true);
upat_binop!(Rem, rem, Ops::Mod, false);

impl ops::Neg for UPat {
    type Output = UPat;
    fn neg(self) -> UPat {
        UPat::neg(self)
    }
}

/// A rewrite function: the captures and the pass context `C` in, a replacement (or nothing) out.
pub type RuleFn<C> = Arc<dyn Fn(&Captures, &mut C) -> Option<UOp> + Send + Sync>;

/// Where a rule was written and, where it has one, its name: what VIZ shows for a rewrite.
#[derive(Clone, Copy, Debug)]
pub struct RuleSite {
    pub location: &'static Location<'static>,
    pub name: Option<&'static str>,
}

impl std::fmt::Display for RuleSite {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}:{}", self.location.file(), self.location.line())?;
        self.name.map_or(Ok(()), |name| write!(f, " {name}"))
    }
}

/// One rule of a table over pass context `C`: a pattern, its rewrite function, and its site.
pub struct Rule<C = ()> {
    pat: UPat,
    f: RuleFn<C>,
    site: RuleSite,
}

impl<C> Clone for Rule<C> {
    fn clone(&self) -> Self {
        Rule { pat: self.pat.clone(), f: self.f.clone(), site: self.site }
    }
}

impl<C> Rule<C> {
    /// Where the rule was written, and its name.
    pub fn site(&self) -> RuleSite {
        self.site
    }
    /// The rule named `name` (`rule!` names every rule it writes).
    pub fn named(mut self, name: &'static str) -> Rule<C> {
        self.site.name = Some(name);
        self
    }
    /// The rule, whose function reads `captures`; panics (when its table is built) naming the
    /// rule and the capture if its pattern does not capture one of them.
    pub fn reading(self, captures: &[&str]) -> Rule<C> {
        if let Some(missing) = captures.iter().find(|c| !self.pat.captures(c)) {
            panic!("the rule at {}: its pattern captures no `{missing}`", self.site);
        }
        self
    }
}

/// An ordered rule table over pass context `C` (its rules read or update a `C`). Rules are
/// indexed by the root op they can match; the first rule that returns a new node wins.
///
/// A table runs with its own context only:
/// ```
/// use lazygrad::uop::{graph_rewrite, rule_ctx, PatternMatcher, UOp, UPat};
/// let count = PatternMatcher::new(vec![rule_ctx(UPat::cvar("c"), |_, seen: &mut i64| {
///     *seen += 1;
///     None
/// })]);
/// let mut seen = 0i64;
/// graph_rewrite(&UOp::index_const(1), &count, &mut seen, "count constants", false);
/// assert_eq!(seen, 1);
/// ```
/// and given another, it does not compile (where a rule once silently never fired):
/// ```compile_fail
/// use lazygrad::uop::{graph_rewrite, rule_ctx, PatternMatcher, UOp, UPat};
/// let count = PatternMatcher::new(vec![rule_ctx(UPat::cvar("c"), |_, seen: &mut i64| {
///     *seen += 1;
///     None
/// })]);
/// graph_rewrite(&UOp::index_const(1), &count, &mut (), "count constants", false);
/// ```
pub struct PatternMatcher<C = ()> {
    rules: Vec<Rule<C>>,
    by_op: Vec<Vec<usize>>,
}

impl<C> Clone for PatternMatcher<C> {
    fn clone(&self) -> Self {
        PatternMatcher { rules: self.rules.clone(), by_op: self.by_op.clone() }
    }
}

impl PatternMatcher<()> {
    /// Whether some rule accepts `u` (a spec table's rules return the node itself to accept it).
    pub fn accepts(&self, u: &UOp) -> bool {
        self.by_op[u.op() as usize].iter().any(|&i| {
            let rule = &self.rules[i];
            rule.pat.matches(u, Captures::default()).iter().any(|caps| (rule.f)(caps, &mut ()).is_some())
        })
    }
    /// These context-free rules as a table over context `C`, to extend one that reads a `C`.
    pub fn with_context<C: 'static>(&self) -> PatternMatcher<C> {
        let lift = |r: &Rule| {
            let f = r.f.clone();
            Rule { pat: r.pat.clone(), f: Arc::new(move |m: &Captures, _: &mut C| f(m, &mut ())), site: r.site }
        };
        PatternMatcher::new(self.rules.iter().map(lift).collect())
    }
}

impl<C> PatternMatcher<C> {
    pub fn new(rules: Vec<Rule<C>>) -> PatternMatcher<C> {
        let mut by_op = vec![vec![]; Ops::COUNT];
        for (i, rule) in rules.iter().enumerate() {
            match &rule.pat.ops {
                Some(ops) => ops.iter().for_each(|o| by_op[*o as usize].push(i)),
                None => by_op.iter_mut().for_each(|v| v.push(i)),
            }
        }
        PatternMatcher { rules, by_op }
    }
    /// This table followed by `other`'s rules.
    pub fn extend(&self, other: &PatternMatcher<C>) -> PatternMatcher<C> {
        PatternMatcher::new(self.rules.iter().chain(&other.rules).cloned().collect())
    }
    /// The first rewrite of `u` a rule offers, if any.
    pub fn rewrite(&self, u: &UOp, ctx: &mut C) -> Option<UOp> {
        self.rewrite_by_rule(u, ctx).map(|(r, _)| r)
    }
    /// The first rewrite of `u` a rule offers, with the rule that offered it.
    pub fn rewrite_by_rule(&self, u: &UOp, ctx: &mut C) -> Option<(UOp, &Rule<C>)> {
        for &i in &self.by_op[u.op() as usize] {
            let rule = &self.rules[i];
            for caps in rule.pat.matches(u, Captures::default()) {
                if let Some(r) = (rule.f)(&caps, ctx) {
                    if &r != u {
                        return Some((r, rule));
                    }
                }
            }
        }
        None
    }
}

/// A rule that reads no context (it fits a table over any context).
#[track_caller]
pub fn rule<C>(pat: UPat, f: impl Fn(&Captures) -> Option<UOp> + Send + Sync + 'static) -> Rule<C> {
    Rule { pat, f: Arc::new(move |m, _| f(m)), site: RuleSite { location: Location::caller(), name: None } }
}

/// A rule that reads or updates the pass context `C`.
#[track_caller]
pub fn rule_ctx<C>(pat: UPat, f: impl Fn(&Captures, &mut C) -> Option<UOp> + Send + Sync + 'static) -> Rule<C> {
    Rule { pat, f: Arc::new(f), site: RuleSite { location: Location::caller(), name: None } }
}

/// A named rule written as tinygrad writes one, a pattern and a function of its captures:
///
/// ```
/// use lazygrad::uop::{graph_rewrite, PatternMatcher, UPat, Variable};
/// let pm: PatternMatcher = PatternMatcher::new(vec![
///     lazygrad::rule!("x * 1", |x| UPat::var(x) * UPat::konst(1.0) => Some(x.clone())),
/// ]);
/// let x = Variable::new("x", 0, 9).uop().clone();
/// assert_eq!(graph_rewrite(&(&x * 1), &pm, &mut (), "identities", false), x);
/// ```
///
/// Each parameter is a capture: in the pattern, its name (a `&'static str`); in the body, the
/// node it captured (`&UOp`). A body that reads a capture the parameters do not declare does not
/// compile, and a parameter the pattern never captures panics, naming it, when the table is
/// built (the first time any pass uses it), before any rule runs. After a `;`, the pass context
/// the body reads:
/// `|red; ctx: &mut LowerCtx| ...`. VIZ shows the name beside where the rule was written.
///
/// ```compile_fail
/// use lazygrad::uop::{Rule, UPat};
/// // the body reads `y`, which the rule does not capture
/// let r: Rule = lazygrad::rule!("x * 1", |x| UPat::var(x) * UPat::konst(1.0) => Some(y.clone()));
/// ```
///
/// ```should_panic
/// use lazygrad::uop::{Rule, UPat};
/// // the pattern never captures `c`: "the rule at src/...: its pattern captures no `c`"
/// let r: Rule = lazygrad::rule!("x * 1", |x, c| UPat::var(x) * UPat::konst(1.0) => Some(x.clone()));
/// ```
#[macro_export]
macro_rules! rule {
    ($name:expr, |$($cap:ident),+| $pat:expr => $body:expr) => {
        $crate::uop::rule(
            { $(let $cap: &'static str = stringify!($cap);)+ $pat },
            move |m: &$crate::uop::Captures| {
                $(#[allow(unused_variables)] let $cap: &$crate::uop::UOp = &m[stringify!($cap)];)+
                $body
            },
        )
        .named($name)
        .reading(&[$(stringify!($cap)),+])
    };
    ($name:expr, |$($cap:ident),+; $ctx:ident: $cty:ty| $pat:expr => $body:expr) => {
        $crate::uop::rule_ctx(
            { $(let $cap: &'static str = stringify!($cap);)+ $pat },
            move |m: &$crate::uop::Captures, $ctx: $cty| {
                $(#[allow(unused_variables)] let $cap: &$crate::uop::UOp = &m[stringify!($cap)];)+
                $body
            },
        )
        .named($name)
        .reading(&[$(stringify!($cap)),+])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commutative_patterns_match_both_orders() {
        let x =
            UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(4)], Arg::Range(0, super::super::AxisKind::Loop));
        let c = UOp::index_const(0);
        let pat = UPat::var("x") + UPat::konst(0.0);
        let pm = PatternMatcher::new(vec![rule(pat, |m| Some(m["x"].clone()))]);
        assert_eq!(pm.rewrite(&x.alu(Ops::Add, &[&c]), &mut ()), Some(x.clone()));
        assert_eq!(pm.rewrite(&c.alu(Ops::Add, &[&x]), &mut ()), Some(x.clone()));
        assert_eq!(pm.rewrite(&x.alu(Ops::Mul, &[&c]), &mut ()), None);
    }

    #[test]
    fn a_first_source_pattern_leaves_the_others_free() {
        let r =
            UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(4)], Arg::Range(0, super::super::AxisKind::Loop));
        let c = UOp::index_const(2);
        let pat = UPat::ops(&[Ops::Add]).first_src(UPat::cvar("c"));
        assert_eq!(pat.matches(&c.alu(Ops::Add, &[&r]), Captures::default())[0]["c"], c);
        assert!(pat.matches(&r.alu(Ops::Add, &[&c]), Captures::default()).is_empty());
        assert!(pat.matches(&c, Captures::default()).is_empty(), "the op must match too");
    }

    #[test]
    fn a_name_bound_twice_must_be_the_same_node() {
        let a = UOp::index_const(1);
        let b = UOp::index_const(2);
        let pat = UPat::var("x") + UPat::var("x");
        assert_eq!(pat.matches(&a.alu(Ops::Add, &[&a]), Captures::default()).len(), 2);
        assert!(pat.matches(&a.alu(Ops::Add, &[&b]), Captures::default()).is_empty());
    }

    #[test]
    fn context_rules_see_their_context() {
        let pm = PatternMatcher::new(vec![rule_ctx(UPat::cvar("c"), |m, n: &mut i64| {
            *n += 1;
            Some(UOp::index_const(m["c"].const_int_value()? + *n))
        })]);
        let mut n: i64 = 10;
        assert_eq!(pm.rewrite(&UOp::index_const(5), &mut n), Some(UOp::index_const(16)));
        assert_eq!(n, 11);
    }
}
