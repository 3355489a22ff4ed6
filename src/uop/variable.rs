//! Variables: symbolic integers for the sizes and offsets that change from one run of a graph to
//! the next (how much of a KV cache is filled, which row to read), as tinygrad's `Variable`.
//!
//! A `Variable` is a DEFINE_VAR with a name and an inclusive range. Binding it to a value gives a
//! BIND, which shapes and offsets are built from (`Sint`). Realize takes the values out of the
//! graph before scheduling, so the schedule, the kernels and their programs depend on the
//! variable and its range only: a kernel over a variable-length axis compiles once, and each run
//! passes the value as a kernel parameter.

use std::fmt;
use std::ops::{Add, Sub};

use super::ops::Ops;
use super::symbolic::simplify;
use super::uop::{Arg, ConstValue, UOp};
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};

/// A symbolic integer with an inclusive range of values.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Variable(UOp);

impl Variable {
    /// A variable named `name` (letters, digits and `_`, not starting with a digit: it becomes a
    /// kernel parameter's name) taking values in `min..=max`.
    pub fn new(name: &str, min: usize, max: usize) -> Variable {
        Variable::try_new(name, min, max).or_panic()
    }
    /// `new`, reporting a name that is no identifier or an empty or too large range as an error.
    pub fn try_new(name: &str, min: usize, max: usize) -> Result<Variable> {
        let identifier = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        ensure(identifier, || {
            Error::value("Variable::new", format!("{name:?} is not a name of letters, digits and _"))
        })?;
        ensure(min <= max && max <= i32::MAX as usize, || {
            Error::value("Variable::new", format!("{name}: range {min}..={max} is empty or too large"))
        })?;
        Ok(Variable(UOp::new(Ops::DefineVar, DType::INDEX, vec![], Arg::Var(name.into(), min as i64, max as i64))))
    }
    pub fn name(&self) -> &str {
        match self.0.arg() {
            Arg::Var(name, ..) => name,
            _ => unreachable!("a Variable is a DEFINE_VAR"),
        }
    }
    /// The smallest and largest value it may take.
    pub fn range(&self) -> (usize, usize) {
        (self.0.vmin() as usize, self.0.vmax() as usize)
    }
    /// This variable with `value` for the next run; panics outside its range.
    pub fn bind(&self, value: usize) -> BoundVar {
        self.try_bind(value).or_panic()
    }
    /// `bind`, reporting a value outside the range as an error.
    pub fn try_bind(&self, value: usize) -> Result<BoundVar> {
        let (min, max) = self.range();
        ensure((min..=max).contains(&value), || {
            Error::value("bind", format!("{} = {value} is outside {min}..={max}", self.name()))
        })?;
        Ok(BoundVar(bind(&self.0, value as i64)))
    }
    /// The DEFINE_VAR.
    pub fn uop(&self) -> &UOp {
        &self.0
    }
}

/// A variable and its value (a BIND).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct BoundVar(UOp);

impl BoundVar {
    /// The BIND `u` as a bound variable.
    pub fn from_uop(u: &UOp) -> Option<BoundVar> {
        (u.op() == Ops::Bind).then(|| BoundVar(u.clone()))
    }
    pub fn variable(&self) -> Variable {
        Variable(self.0.src()[0].clone())
    }
    pub fn value(&self) -> usize {
        bound_value(&self.0) as usize
    }
    /// The BIND.
    pub fn uop(&self) -> &UOp {
        &self.0
    }
}

/// DEFINE_VAR `var` bound to `value` (a BIND; `Variable::bind` checks the range first).
pub fn bind(var: &UOp, value: i64) -> UOp {
    UOp::new(Ops::Bind, DType::INDEX, vec![var.clone(), UOp::const_int(DType::INDEX, value)], Arg::None)
}

/// The length `end - start` of a symbolic bound, simplified.
pub fn length(start: &UOp, end: &UOp) -> UOp {
    simplify(&end.alu(Ops::Add, &[&start.alu(Ops::Neg, &[])]))
}

/// A SHRINK of tensor node `u` to `[start, end)` on each axis, the bounds INDEX expressions: its
/// sources carry them (`shape::derive_sym_dims` reads the symbolic lengths back), its shape
/// each length's largest value.
pub fn symbolic_shrink(u: &UOp, bounds: &[(UOp, UOp)]) -> UOp {
    let sizes = bounds.iter().map(|(s, e)| (0, length(s, e).vmax().max(0) as usize)).collect();
    let src = std::iter::once(u.clone()).chain(bounds.iter().flat_map(|(s, e)| [s.clone(), e.clone()])).collect();
    UOp::new(Ops::Shrink, u.dtype(), src, Arg::Pairs(sizes))
}

/// The value a BIND gives its variable.
pub fn bound_value(bind: &UOp) -> i64 {
    match bind.src()[1].const_value() {
        Some(ConstValue::Int(v)) => v,
        other => unreachable!("a BIND's value is an integer constant, not {other:?}"),
    }
}

/// A size or an offset: a number, or an integer expression over variables (the shape of a
/// tensor holds the expression's upper bound).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Sint {
    Int(usize),
    Sym(UOp),
}

impl Sint {
    /// `u` (an INDEX expression), simplified; a constant becomes a number.
    pub fn from_uop(u: &UOp) -> Sint {
        let u = simplify(u);
        match u.const_int_value() {
            Some(v) => Sint::Int(v as usize),
            None => Sint::Sym(u),
        }
    }
    /// As an INDEX expression.
    pub fn uop(&self) -> UOp {
        match self {
            Sint::Int(v) => UOp::index_const(*v as i64),
            Sint::Sym(u) => u.clone(),
        }
    }
    /// The number, if it is one.
    pub fn as_int(&self) -> Option<usize> {
        match self {
            Sint::Int(v) => Some(*v),
            Sint::Sym(_) => None,
        }
    }
    /// The largest value it can take.
    pub fn max(&self) -> usize {
        match self {
            Sint::Int(v) => *v,
            Sint::Sym(u) => u.vmax().max(0) as usize,
        }
    }
    /// The smallest value it can take.
    pub fn min(&self) -> usize {
        match self {
            Sint::Int(v) => *v,
            Sint::Sym(u) => u.vmin().max(0) as usize,
        }
    }
    /// The number it is with its variables at the values they are bound to (at their largest
    /// where one is not bound).
    pub fn value(&self) -> usize {
        let Sint::Sym(u) = self else { return self.max() };
        let mut binds: super::UOpMap<UOp> = u
            .toposort()
            .into_iter()
            .filter(|n| n.op() == Ops::Bind)
            .map(|b| (b.clone(), UOp::index_const(bound_value(&b))))
            .collect();
        let valued = simplify(&super::rewrite::substitute(u, &mut binds, "bound values"));
        valued.const_int_value().map_or(self.max(), |v| v.max(0) as usize)
    }
}

impl From<usize> for Sint {
    fn from(v: usize) -> Sint {
        Sint::Int(v)
    }
}
impl From<&BoundVar> for Sint {
    fn from(v: &BoundVar) -> Sint {
        Sint::Sym(v.0.clone())
    }
}
impl From<&Variable> for Sint {
    fn from(v: &Variable) -> Sint {
        Sint::Sym(v.0.clone())
    }
}
impl<T: Into<Sint>> Add<T> for Sint {
    type Output = Sint;
    fn add(self, rhs: T) -> Sint {
        Sint::from_uop(&self.uop().alu(Ops::Add, &[&rhs.into().uop()]))
    }
}
impl<T: Into<Sint>> Sub<T> for Sint {
    type Output = Sint;
    fn sub(self, rhs: T) -> Sint {
        Sint::from_uop(&self.uop().alu(Ops::Add, &[&rhs.into().uop().alu(Ops::Neg, &[])]))
    }
}
impl<T: Into<Sint>> Add<T> for &BoundVar {
    type Output = Sint;
    fn add(self, rhs: T) -> Sint {
        Sint::from(self) + rhs
    }
}

impl fmt::Display for Sint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Sint::Int(v) => write!(f, "{v}"),
            Sint::Sym(u) => write!(f, "{}", expression(u)),
        }
    }
}

/// An index expression as arithmetic over variable names, for messages.
fn expression(u: &UOp) -> String {
    match (u.op(), u.arg()) {
        (Ops::DefineVar, Arg::Var(name, ..)) => name.clone(),
        (Ops::Bind, _) => format!("{}={}", expression(&u.src()[0]), bound_value(u)),
        (Ops::Const, Arg::Const(c)) => c.to_string(),
        (Ops::Add, _) => format!("({}+{})", expression(&u.src()[0]), expression(&u.src()[1])),
        (Ops::Mul, _) => format!("{}*{}", expression(&u.src()[0]), expression(&u.src()[1])),
        (op, _) => {
            let args: Vec<String> = u.src().iter().map(expression).collect();
            format!("{}({})", op.name(), args.join(", "))
        }
    }
}

/// The sizes of `u`'s axes as `Sint`s: the symbolic ones where it has them, else the numbers of
/// its shape.
pub fn dims_of(u: &UOp) -> Vec<Sint> {
    let sym = u.sym_dims();
    u.sh()
        .iter()
        .enumerate()
        .map(|(a, &d)| match sym.and_then(|s| s[a].clone()) {
            Some(s) => Sint::Sym(s),
            None => Sint::Int(d),
        })
        .collect()
}

/// The variables a kernel's program reads, by name: the order in which a launch passes their
/// values, after the buffers.
pub fn kernel_vars(uops: &[UOp]) -> Vec<UOp> {
    let mut vars: Vec<UOp> = uops.iter().filter(|u| u.op() == Ops::DefineVar).cloned().collect();
    vars.sort_by(|a, b| var_name(a).cmp(var_name(b)));
    vars.dedup();
    vars
}

/// The value of index expression `expr` when the kernel variables `vars` have the values
/// `vals` (a launch size over a symbolic loop).
pub fn value_at(expr: &UOp, vars: &[UOp], vals: &[i64]) -> i64 {
    if let Some(v) = expr.const_int_value() {
        return v;
    }
    let mut map: super::UOpMap<UOp> =
        vars.iter().zip(vals).map(|(v, &x)| (v.clone(), UOp::const_int(DType::INDEX, x))).collect();
    let folded = simplify(&super::substitute(expr, &mut map, "bind launch size"));
    folded
        .const_int_value()
        .unwrap_or_else(|| panic!("launch size {} depends on an unbound variable", expression(expr)))
}

/// The name of DEFINE_VAR `u`.
pub fn var_name(u: &UOp) -> &str {
    match u.arg() {
        Arg::Var(name, ..) => name,
        _ => panic!("{} is not a DEFINE_VAR", u.op().name()),
    }
}
