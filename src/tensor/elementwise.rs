//! Elementwise math: unary ops, broadcasting binary ops with dtype promotion, casts, and operators.
//!
//! Everything here is composed from the ALU primitives (tinygrad's definitions, with a few forms
//! chosen for accuracy or for a finite gradient at the edges, noted where they differ).

use std::cell::RefCell;
use std::f64::consts::LN_2;

use super::Tensor;
use crate::dtype::DType;
use crate::error::{ensure, Error, OrPanic, Result};
use crate::uop::{Arg, BoundVar, ConstValue, Ops, UOp};

/// A Rust scalar operand. Like a Python scalar in tinygrad it is *weak*: `t * 2.0` keeps `t`'s
/// float dtype, and only a float scalar turns an integer tensor into a float one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    Bool(bool),
    Int(i64),
    Float(f64),
}

impl Scalar {
    pub fn value(self) -> ConstValue {
        match self {
            Scalar::Bool(b) => ConstValue::Bool(b),
            Scalar::Int(i) => ConstValue::Int(i),
            Scalar::Float(f) => ConstValue::Float(f),
        }
    }
    /// The dtype a tensor made only of this scalar gets (an int past int32 is int64, as
    /// `from_scalars` infers).
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::BOOL,
            Scalar::Int(i) if i32::try_from(i).is_err() => DType::INT64,
            Scalar::Int(_) => DType::INT32,
            Scalar::Float(_) => DType::FLOAT32,
        }
    }
    /// The dtype of `dtype op self`: the tensor's, unless the scalar needs a wider kind.
    pub(super) fn weak_with(self, dtype: DType) -> DType {
        match self {
            Scalar::Float(_) if !dtype.is_float() => DType::FLOAT32,
            Scalar::Int(_) if dtype.is_bool() => DType::INT32,
            _ => dtype,
        }
    }
}

macro_rules! scalar_from {
    ($($t:ty => $v:ident as $as:ty),*) => {$(
        impl From<$t> for Scalar {
            fn from(x: $t) -> Scalar {
                Scalar::$v(x as $as)
            }
        }
    )*};
}
scalar_from!(f32 => Float as f64, f64 => Float as f64, i8 => Int as i64, i16 => Int as i64, i32 => Int as i64,
    i64 => Int as i64, u8 => Int as i64, u16 => Int as i64, u32 => Int as i64, usize => Int as i64);
impl From<bool> for Scalar {
    fn from(b: bool) -> Scalar {
        Scalar::Bool(b)
    }
}

/// Something a binary op can take on its right: a tensor or a scalar.
pub trait Operand {
    /// This operand as a tensor broadcastable with `lhs`, and the dtype the op computes in.
    fn with(self, lhs: &Tensor) -> (Tensor, DType);
    /// The operand if it is a tensor (a scalar has no dtype of its own until paired).
    fn as_tensor(&self) -> Option<Tensor> {
        None
    }
}

impl Operand for &Tensor {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        (self.clone(), DType::least_upper(lhs.dtype(), self.dtype()))
    }
    fn as_tensor(&self) -> Option<Tensor> {
        Some((*self).clone())
    }
}
impl Operand for Tensor {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        (&self).with(lhs)
    }
    fn as_tensor(&self) -> Option<Tensor> {
        Some(self.clone())
    }
}
impl<S: Into<Scalar>> Operand for S {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        let s: Scalar = self.into();
        let dtype = s.weak_with(lhs.dtype());
        (lhs.const_tensor(s, dtype), dtype)
    }
}

/// A bound variable is a weak integer scalar whose value each kernel reads when it runs (as
/// tinygrad's `x < v`), on the other operand's device or devices.
impl Operand for &BoundVar {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        let dtype = Scalar::Int(0).weak_with(lhs.dtype());
        (Tensor::from_uop(self.uop().clone(), lhs.device()).cast(dtype), dtype)
    }
}

/// How `div_mode` rounds the quotient (torch's and tinygrad's `rounding_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoundingMode {
    /// Toward zero (C integer division).
    Trunc,
    /// Toward negative infinity (Python `//`).
    Floor,
}

/// numpy broadcasting of two shapes, or `None` if they are incompatible.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    // axis `i` of `s` right-aligned to `n` axes (1 where `s` has none)
    let axis = |s: &[usize], i: usize| (i + s.len()).checked_sub(n).map_or(1, |j| s[j]);
    (0..n)
        .map(|i| match (axis(a, i), axis(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

/// `coeffs[0]*x^(n-1) + ... + coeffs[n-1]` by Horner's rule.
pub(crate) fn polyn(x: &Tensor, coeffs: &[f64]) -> Tensor {
    let (first, rest) = coeffs.split_first().expect("polyn: no coefficients");
    rest.iter().fold(x.const_tensor(Scalar::Float(*first), x.dtype()), |acc, &c| acc.mul(x).add(c))
}

/// `value` in the forward pass with the gradient of `surrogate` (which must be finite where the
/// gradient matters): `value` itself is detached, so it may use ops without a gradient rule.
pub(crate) fn value_with_grad_of(value: &Tensor, surrogate: &Tensor) -> Tensor {
    let zero = surrogate.detach().sub(surrogate); // exactly +0 wherever the surrogate is finite
    zero.eq(0.0).where_(value.detach().sub(&zero), value.detach())
}

/// Whether a C remainder `r` of a division by `b` needs `+ b` to take the divisor's sign (Python).
fn floor_fix(r: &Tensor, b: &Tensor) -> Tensor {
    r.ne(0).bitwise_and(r.lt(0).ne(b.lt(0)))
}

impl Tensor {
    /// A scalar constant of `dtype` with this tensor's rank (all dims 1), on its device.
    pub(crate) fn const_tensor(&self, s: Scalar, dtype: DType) -> Tensor {
        let c = super::device_const(dtype, s.value(), self.device());
        let u = UOp::new(Ops::Reshape, dtype, vec![c], Arg::Shape(vec![1; self.ndim()]));
        self.lift(u)
    }
    /// The node of `const_tensor(s, dtype)` broadcast to this tensor's shape (no tensor made).
    /// The last few made are kept on the thread: `relu` asks for the same zero on every eager op,
    /// and building its four nodes again (each found in the intern table) cost more than the
    /// lookup here.
    fn broadcast_const(&self, s: Scalar, dtype: DType) -> UOp {
        thread_local! {
            static RECENT: RefCell<Vec<(ConstValue, &'static str, UOp)>> = const { RefCell::new(Vec::new()) };
        }
        const KEPT: usize = 8;
        let (value, device) = (s.value(), self.device());
        let wanted = |(v, d, u): &&(ConstValue, &'static str, UOp)| {
            *v == value && *d == device && u.dtype() == dtype && self.with_uop(|x| x.shape() == u.shape())
        };
        if let Some(found) = RECENT.with(|r| r.borrow().iter().find(wanted).map(|(_, _, u)| u.clone())) {
            return found;
        }
        let made = self.make_broadcast_const(value, dtype, device);
        RECENT.with(|r| {
            let mut recent = r.borrow_mut();
            if recent.len() == KEPT {
                recent.remove(0);
            }
            recent.push((value, device, made.clone()));
        });
        made
    }
    /// `broadcast_const`'s nodes, built.
    fn make_broadcast_const(&self, value: ConstValue, dtype: DType, device: &str) -> UOp {
        let shape = self.shape();
        let c = super::device_const(dtype, value, device);
        let ones = UOp::new(Ops::Reshape, dtype, vec![c], Arg::Shape(vec![1; shape.len()]));
        match shape.iter().all(|&d| d == 1) {
            true => ones,
            false => ones.movement(Ops::Expand, Arg::Shape(shape)),
        }
    }
    /// The scalar this tensor is a broadcast constant of, if it is one.
    fn const_scalar(&self) -> Option<ConstValue> {
        let mut u = self.uop();
        while matches!(u.op(), Ops::Reshape | Ops::Expand) {
            u = u.src()[0].clone();
        }
        u.const_value()
    }
    /// This tensor broadcast to `shape` (numpy rules).
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        self.try_broadcast_to(shape).or_panic()
    }
    /// `broadcast_to`, reporting a shape it does not broadcast to as an error.
    pub fn try_broadcast_to(&self, shape: &[usize]) -> Result<Tensor> {
        let me = self.shape();
        if me == shape {
            return Ok(self.clone());
        }
        ensure(me.len() <= shape.len() && broadcast_shape(&me, shape).as_deref() == Some(shape), || {
            Error::shape("broadcast_to", &[&me, shape], "cannot broadcast the first to the second")
        })?;
        let padded: Vec<usize> = [vec![1; shape.len() - me.len()], me].concat();
        self.try_reshape(&padded)?.try_expand(shape)
    }
    fn unary(&self, op: Ops) -> Tensor {
        self.lift(self.uop().alu(op, &[]))
    }
    /// This tensor in its float dtype for float math (ints and bools become float32).
    pub(crate) fn promote_float(&self) -> Tensor {
        self.cast(self.dtype().to_float())
    }
    /// `f` computed in at least float32 (as tinygrad does for half inputs), cast back to the float dtype.
    pub(super) fn in_f32(&self, f: impl Fn(&Tensor) -> Tensor) -> Tensor {
        let x = self.promote_float();
        f(&x.cast(DType::least_upper(x.dtype(), DType::FLOAT32))).cast(x.dtype())
    }
    /// `self` and `rhs` cast to `dtype` and broadcast to their common shape (`op` names errors).
    fn broadcast_pair(&self, op: &'static str, rhs: &Tensor, dtype: DType) -> Result<(Tensor, Tensor)> {
        super::check_devices(op, &[self, rhs])?;
        let (a, b) = (self.shape(), rhs.shape());
        if a == b {
            return Ok((self.cast(dtype), rhs.cast(dtype)));
        }
        let shape = broadcast_shape(&a, &b).ok_or_else(|| Error::shape(op, &[&a, &b], "shapes do not broadcast"))?;
        Ok((self.cast(dtype).broadcast_to(&shape), rhs.cast(dtype).broadcast_to(&shape)))
    }
    /// `self` and an operand, promoted to their common dtype and broadcast.
    fn pair(&self, op: &'static str, rhs: impl Operand) -> Result<(Tensor, Tensor)> {
        let (r, dtype) = rhs.with(self);
        self.broadcast_pair(op, &r, dtype)
    }
    /// Broadcast `self` and `rhs`, cast both to `dtype`, and apply `op` (`name` names errors).
    fn binary(&self, op: Ops, name: &'static str, rhs: &Tensor, dtype: DType) -> Result<Tensor> {
        let (a, b) = self.broadcast_pair(name, rhs, dtype)?;
        Ok(self.lift(a.uop().alu(op, &[&b.uop()])))
    }
    fn binop(&self, op: Ops, name: &'static str, rhs: impl Operand) -> Result<Tensor> {
        let (r, dtype) = rhs.with(self);
        self.binary(op, name, &r, dtype)
    }
    /// A binary op defined on integers (and bools, if `bools`) only.
    fn int_binop(&self, op: Ops, name: &'static str, rhs: impl Operand, bools: bool) -> Result<Tensor> {
        let (r, dtype) = rhs.with(self);
        ensure(dtype.is_int() || (bools && dtype.is_bool()), || Error::DTypes {
            op: name,
            dtypes: vec![self.dtype(), r.dtype()],
            reason: format!("needs integer{} operands", if bools { " or bool" } else { "" }),
        })?;
        self.binary(op, name, &r, dtype)
    }

    // ***** casts *****

    /// This tensor converted to `dtype` (C cast semantics).
    pub fn cast(&self, dtype: DType) -> Tensor {
        self.try_cast(dtype).or_panic()
    }
    /// `cast`, reporting a dtype no tensor has as an error.
    pub fn try_cast(&self, dtype: DType) -> Result<Tensor> {
        if self.dtype() == dtype {
            return Ok(self.clone());
        }
        super::check_dtype("cast", dtype)?;
        Ok(self.lift(self.uop().cast(dtype)))
    }
    /// The same bits read as `dtype`, which must have the same itemsize.
    pub fn bitcast(&self, dtype: DType) -> Tensor {
        self.try_bitcast(dtype).or_panic()
    }
    /// `bitcast`, reporting a dtype of another size as an error.
    pub fn try_bitcast(&self, dtype: DType) -> Result<Tensor> {
        let from = self.dtype();
        super::check_dtype("bitcast", dtype)?;
        ensure(from.itemsize() == dtype.itemsize(), || Error::DTypes {
            op: "bitcast",
            dtypes: vec![from, dtype],
            reason: "the dtypes differ in size".into(),
        })?;
        if from == dtype {
            return Ok(self.clone());
        }
        let u = self.uop();
        Ok(self.lift(UOp::new(Ops::Bitcast, dtype, vec![u], Arg::None)))
    }
    /// Cast to float32.
    pub fn float(&self) -> Tensor {
        self.cast(DType::FLOAT32)
    }
    /// Cast to float16.
    pub fn half(&self) -> Tensor {
        self.cast(DType::FLOAT16)
    }
    /// Cast to bfloat16.
    pub fn bfloat16(&self) -> Tensor {
        self.cast(DType::BFLOAT16)
    }
    /// Cast to float64.
    pub fn double(&self) -> Tensor {
        self.cast(DType::FLOAT64)
    }
    /// Cast to int32.
    pub fn int(&self) -> Tensor {
        self.cast(DType::INT32)
    }
    /// Cast to int64.
    pub fn long(&self) -> Tensor {
        self.cast(DType::INT64)
    }
    /// Cast to bool (non-zero is true).
    pub fn bool(&self) -> Tensor {
        self.cast(DType::BOOL)
    }

    // ***** binary: each `try_` form reports shapes that do not broadcast, operands on different
    // devices or dtypes the op does not take as an error *****

    /// `self + rhs` with broadcasting and promotion.
    pub fn add(&self, rhs: impl Operand) -> Tensor {
        self.try_add(rhs).or_panic()
    }
    pub fn try_add(&self, rhs: impl Operand) -> Result<Tensor> {
        self.binop(Ops::Add, "add", rhs)
    }
    /// `self - rhs`.
    pub fn sub(&self, rhs: impl Operand) -> Tensor {
        self.try_sub(rhs).or_panic()
    }
    pub fn try_sub(&self, rhs: impl Operand) -> Result<Tensor> {
        let (r, dtype) = rhs.with(self);
        self.binary(Ops::Add, "sub", &r.cast(dtype).neg(), dtype)
    }
    /// `self * rhs`.
    pub fn mul(&self, rhs: impl Operand) -> Tensor {
        self.try_mul(rhs).or_panic()
    }
    pub fn try_mul(&self, rhs: impl Operand) -> Result<Tensor> {
        self.binop(Ops::Mul, "mul", rhs)
    }
    /// True division: integer operands are divided as floats.
    pub fn div(&self, rhs: impl Operand) -> Tensor {
        self.try_div(rhs).or_panic()
    }
    pub fn try_div(&self, rhs: impl Operand) -> Result<Tensor> {
        let (r, dtype) = rhs.with(self);
        self.binary(Ops::FDiv, "div", &r, dtype.to_float())
    }
    /// Integer division truncating toward zero (C semantics).
    pub fn idiv(&self, rhs: impl Operand) -> Tensor {
        self.try_idiv(rhs).or_panic()
    }
    pub fn try_idiv(&self, rhs: impl Operand) -> Result<Tensor> {
        self.binop(Ops::IDiv, "idiv", rhs)
    }
    /// Division with an optional rounding mode (`None`: true division), as torch's `div`.
    /// Integers stay integers when rounded; float floor division follows Python exactly.
    pub fn div_mode(&self, rhs: impl Operand, mode: Option<RoundingMode>) -> Tensor {
        self.try_div_mode(rhs, mode).or_panic()
    }
    pub fn try_div_mode(&self, rhs: impl Operand, mode: Option<RoundingMode>) -> Result<Tensor> {
        let (a, b) = self.pair("div", rhs)?;
        let (a, b) = if a.dtype().is_bool() { (a.float(), b.float()) } else { (a, b) };
        let int = a.dtype().is_int();
        Ok(match mode {
            None => a.div(&b),
            Some(RoundingMode::Trunc) if int => a.idiv(&b),
            Some(RoundingMode::Trunc) => a.div(&b).trunc(),
            Some(RoundingMode::Floor) if int => {
                let q = a.idiv(&b);
                floor_fix(&a.binop(Ops::Mod, "div", &b)?, &b).where_(q.sub(1), &q)
            }
            Some(RoundingMode::Floor) => {
                // Python's float `//`: the quotient of the exact remainder, corrected to the floor.
                let r = a.binop(Ops::Mod, "div", &b)?;
                let q = a.sub(&r).div(&b);
                let q = floor_fix(&r, &b).where_(q.sub(1.0), &q);
                let f = q.floor();
                let f = q.sub(&f).gt(0.5).where_(f.add(1.0), &f);
                let f = q.eq(0.0).where_(a.div(&b).mul(0.0), &f);
                let exact = b.eq(0.0).where_(a.div(&b), &f);
                value_with_grad_of(&exact, &a.div(&b).trunc())
            }
        })
    }
    /// Remainder with the sign of the divisor (Python `%`, torch `remainder`); exact for floats.
    pub fn mod_(&self, rhs: impl Operand) -> Tensor {
        self.try_mod(rhs).or_panic()
    }
    pub fn try_mod(&self, rhs: impl Operand) -> Result<Tensor> {
        let (a, b) = self.pair("mod", rhs)?;
        let (a, b) = if a.dtype().is_bool() { (a.float(), b.float()) } else { (a, b) };
        let r = a.binop(Ops::Mod, "mod", &b)?;
        let r = floor_fix(&r, &b).where_(r.add(&b), &r);
        if a.dtype().is_int() {
            return Ok(r);
        }
        Ok(value_with_grad_of(&r, &a.sub(b.mul(a.sub(&r).div(&b).detach()))))
    }
    /// Remainder with the sign of the dividend (C `fmod`, torch `fmod`); exact for floats.
    pub fn fmod(&self, rhs: impl Operand) -> Tensor {
        self.try_fmod(rhs).or_panic()
    }
    pub fn try_fmod(&self, rhs: impl Operand) -> Result<Tensor> {
        let (a, b) = self.pair("fmod", rhs)?;
        let (a, b) = if a.dtype().is_bool() { (a.float(), b.float()) } else { (a, b) };
        let r = a.binop(Ops::Mod, "fmod", &b)?;
        if a.dtype().is_int() {
            return Ok(r);
        }
        Ok(value_with_grad_of(&r, &a.sub(b.mul(a.sub(&r).div(&b).detach()))))
    }
    /// `self ** rhs`. Floats use the POW op (C `pow`: negative bases with integral exponents,
    /// `0^0 = 1`, ...); integers use exact wrapping square-and-multiply (torch's integer `pow`).
    pub fn pow(&self, rhs: impl Operand) -> Tensor {
        self.try_pow(rhs).or_panic()
    }
    /// `pow`; an integer to a negative constant integer power is an error too.
    pub fn try_pow(&self, rhs: impl Operand) -> Result<Tensor> {
        let (a, e) = self.pair("pow", rhs)?;
        if !a.dtype().is_int() {
            let (a, e) = (a.promote_float(), e.promote_float());
            return Ok(a.lift(a.uop().alu(Ops::Pow, &[&e.uop()])));
        }
        // negative exponents in a tensor: 1 for a base of 1, +-1 for -1, else 0
        let odd = e.bitwise_and(1).ne(0);
        let unit = a.eq(-1).where_(odd.where_(-1, 1).cast(a.dtype()), a.eq(1).cast(a.dtype()));
        let (mut acc, mut p) = (a.const_tensor(Scalar::Int(1), a.dtype()).expand(&a.shape()), a.clone());
        match e.const_scalar().map(|c| c.as_i64()) {
            // as tinygrad and torch: a number that cannot be an integer power
            Some(n) if n < 0 && e.dtype().is_signed() => {
                return Err(Error::value(
                    "pow",
                    format!("integers to negative integer powers are not allowed (** {n})"),
                ))
            }
            Some(n) => {
                let n = n as u64;
                for i in 0..64 - n.leading_zeros() {
                    if n >> i & 1 == 1 {
                        acc = acc.mul(&p);
                    }
                    p = p.mul(&p);
                }
                return Ok(acc);
            }
            // square-and-multiply over every bit of the exponent
            None => {
                for i in 0..e.dtype().bits() - e.dtype().is_signed() as u32 {
                    acc = e.rshift(i as i64).bitwise_and(1).ne(0).where_(acc.mul(&p), &acc);
                    p = p.mul(&p);
                }
            }
        }
        Ok(if e.dtype().is_signed() { e.lt(0).where_(&unit, &acc) } else { acc })
    }
    /// The larger of `self` and `rhs` (NaN if either is NaN).
    pub fn maximum(&self, rhs: impl Operand) -> Tensor {
        self.try_maximum(rhs).or_panic()
    }
    pub fn try_maximum(&self, rhs: impl Operand) -> Result<Tensor> {
        self.binop(Ops::Max, "maximum", rhs)
    }
    /// The smaller of `self` and `rhs`.
    pub fn minimum(&self, rhs: impl Operand) -> Tensor {
        self.try_minimum(rhs).or_panic()
    }
    pub fn try_minimum(&self, rhs: impl Operand) -> Result<Tensor> {
        let (a, b) = self.pair("minimum", rhs)?;
        Ok(if a.dtype().is_float() { a.neg().maximum(b.neg()).neg() } else { a.lt(&b).where_(&a, &b) })
    }
    /// `|self|` with the sign of `other`: a float's sign bit (negative zeros and NaNs included).
    pub fn copysign(&self, other: impl Operand) -> Tensor {
        self.try_copysign(other).or_panic()
    }
    pub fn try_copysign(&self, other: impl Operand) -> Result<Tensor> {
        let (a, b) = self.pair("copysign", other)?;
        let mag = a.abs();
        let negative = match b.dtype().itemsize() {
            _ if !b.dtype().is_float() => b.lt(0),
            2 => b.bitcast(DType::INT16).lt(0),
            4 => b.bitcast(DType::INT32).lt(0),
            _ => b.bitcast(DType::INT64).lt(0),
        };
        Ok(negative.where_(mag.neg(), &mag))
    }
    /// `log(exp(self) + exp(other))`, as `max + log1p(exp(-|a - b|))` (infinities included: equal
    /// ones give themselves).
    pub fn logaddexp(&self, other: impl Operand) -> Tensor {
        self.try_logaddexp(other).or_panic()
    }
    pub fn try_logaddexp(&self, other: impl Operand) -> Result<Tensor> {
        let (a, b) = self.pair("logaddexp", other)?;
        Ok(a.in_f32(|a| {
            let b = b.cast(a.dtype());
            let gap = a.eq(&b).where_(0.0, a.sub(&b).abs().neg());
            a.maximum(&b).add(gap.exp().log1p())
        }))
    }
    /// Bitwise AND of integers, logical AND of bools.
    pub fn bitwise_and(&self, rhs: impl Operand) -> Tensor {
        self.try_bitwise_and(rhs).or_panic()
    }
    pub fn try_bitwise_and(&self, rhs: impl Operand) -> Result<Tensor> {
        self.int_binop(Ops::And, "bitwise_and", rhs, true)
    }
    /// Bitwise OR of integers, logical OR of bools.
    pub fn bitwise_or(&self, rhs: impl Operand) -> Tensor {
        self.try_bitwise_or(rhs).or_panic()
    }
    pub fn try_bitwise_or(&self, rhs: impl Operand) -> Result<Tensor> {
        self.int_binop(Ops::Or, "bitwise_or", rhs, true)
    }
    /// Bitwise XOR of integers, logical XOR of bools.
    pub fn bitwise_xor(&self, rhs: impl Operand) -> Tensor {
        self.try_bitwise_xor(rhs).or_panic()
    }
    pub fn try_bitwise_xor(&self, rhs: impl Operand) -> Result<Tensor> {
        self.int_binop(Ops::Xor, "bitwise_xor", rhs, true)
    }
    /// Bitwise NOT of integers (`!x`), logical NOT of bools.
    pub fn bitwise_not(&self) -> Tensor {
        self.try_bitwise_not().or_panic()
    }
    pub fn try_bitwise_not(&self) -> Result<Tensor> {
        let dt = self.dtype();
        ensure(dt.is_int() || dt.is_bool(), || Error::DTypes {
            op: "bitwise_not",
            dtypes: vec![dt],
            reason: "needs an integer or bool tensor".into(),
        })?;
        if dt.is_bool() {
            return Ok(self.logical_not());
        }
        self.try_bitwise_xor(self.const_tensor(Scalar::Int(-1), dt))
    }
    /// `self << rhs` for integers.
    pub fn lshift(&self, rhs: impl Operand) -> Tensor {
        self.try_lshift(rhs).or_panic()
    }
    pub fn try_lshift(&self, rhs: impl Operand) -> Result<Tensor> {
        self.int_binop(Ops::Shl, "lshift", rhs, false)
    }
    /// `self >> rhs` for integers (arithmetic for signed ones).
    pub fn rshift(&self, rhs: impl Operand) -> Tensor {
        self.try_rshift(rhs).or_panic()
    }
    pub fn try_rshift(&self, rhs: impl Operand) -> Result<Tensor> {
        self.int_binop(Ops::Shr, "rshift", rhs, false)
    }

    // ***** comparisons and selection *****

    /// `self < rhs` as bool.
    pub fn cmplt(&self, rhs: impl Operand) -> Tensor {
        self.try_lt(rhs).or_panic()
    }
    /// `self < rhs` as bool.
    pub fn lt(&self, rhs: impl Operand) -> Tensor {
        self.try_lt(rhs).or_panic()
    }
    pub fn try_lt(&self, rhs: impl Operand) -> Result<Tensor> {
        self.binop(Ops::CmpLt, "lt", rhs)
    }
    /// `self > rhs` as bool.
    pub fn gt(&self, rhs: impl Operand) -> Tensor {
        self.try_gt(rhs).or_panic()
    }
    pub fn try_gt(&self, rhs: impl Operand) -> Result<Tensor> {
        self.greater(rhs, "gt")
    }
    /// `rhs < self`, with `name` in errors.
    fn greater(&self, rhs: impl Operand, name: &'static str) -> Result<Tensor> {
        let (r, dtype) = rhs.with(self);
        let (a, b) = self.broadcast_pair(name, &r, dtype)?;
        b.binary(Ops::CmpLt, name, &a, dtype)
    }
    /// `self >= rhs` as bool (true for NaN, as tinygrad: `!(self < rhs)`).
    pub fn ge(&self, rhs: impl Operand) -> Tensor {
        self.try_ge(rhs).or_panic()
    }
    pub fn try_ge(&self, rhs: impl Operand) -> Result<Tensor> {
        Ok(self.binop(Ops::CmpLt, "ge", rhs)?.logical_not())
    }
    /// `self <= rhs` as bool (true for NaN, as tinygrad: `!(self > rhs)`).
    pub fn le(&self, rhs: impl Operand) -> Tensor {
        self.try_le(rhs).or_panic()
    }
    pub fn try_le(&self, rhs: impl Operand) -> Result<Tensor> {
        Ok(self.greater(rhs, "le")?.logical_not())
    }
    /// `self != rhs` as bool.
    pub fn ne(&self, rhs: impl Operand) -> Tensor {
        self.try_ne(rhs).or_panic()
    }
    pub fn try_ne(&self, rhs: impl Operand) -> Result<Tensor> {
        self.binop(Ops::CmpNe, "ne", rhs)
    }
    /// `self == rhs` as bool.
    pub fn eq(&self, rhs: impl Operand) -> Tensor {
        self.try_eq(rhs).or_panic()
    }
    pub fn try_eq(&self, rhs: impl Operand) -> Result<Tensor> {
        Ok(self.binop(Ops::CmpNe, "eq", rhs)?.logical_not())
    }
    /// Elementwise `cond ? a : b` with broadcasting; `self` is the condition. A scalar branch takes
    /// the other branch's dtype when it fits (weak, like a Python scalar).
    pub fn where_(&self, a: impl Operand, b: impl Operand) -> Tensor {
        self.try_where(a, b).or_panic()
    }
    pub fn try_where(&self, a: impl Operand, b: impl Operand) -> Result<Tensor> {
        let reference = a.as_tensor().or_else(|| b.as_tensor()).unwrap_or_else(|| self.clone());
        let (ta, _) = a.with(&reference);
        let (tb, _) = b.with(&reference);
        super::check_devices("where", &[self, &ta, &tb])?;
        let dtype = DType::least_upper(ta.dtype(), tb.dtype());
        let shapes = [self.shape(), ta.shape(), tb.shape()];
        let shape = shapes
            .iter()
            .try_fold(vec![], |acc, s| broadcast_shape(&acc, s))
            .ok_or_else(|| Error::shape("where", &[&shapes[0], &shapes[1], &shapes[2]], "shapes do not broadcast"))?;
        let c = self.cast(DType::BOOL).broadcast_to(&shape);
        let (ta, tb) = (ta.cast(dtype).broadcast_to(&shape), tb.cast(dtype).broadcast_to(&shape));
        Ok(self.lift(UOp::where_(&c.uop(), &ta.uop(), &tb.uop())))
    }
    /// `self` limited to `[min, max]` (either bound may be `None`, not both), NaN staying NaN;
    /// its gradient passes only strictly inside, 0 at a bound (as PyTorch's).
    pub fn clamp<S: Into<Scalar>>(&self, min: Option<S>, max: Option<S>) -> Tensor {
        self.try_clamp(min, max).or_panic()
    }
    /// `clamp`, reporting no bound given as an error.
    pub fn try_clamp<S: Into<Scalar>>(&self, min: Option<S>, max: Option<S>) -> Result<Tensor> {
        let (min, max) = (min.map(Into::into), max.map(Into::into));
        let lo = min.map_or_else(|| self.clone(), |m| self.lt(m).where_(m, self));
        let limited = max.map_or_else(|| lo.clone(), |m| lo.gt(m).where_(m, &lo));
        let above = min.map(|m| self.gt(m));
        let below = max.map(|m| self.lt(m));
        let inside = match (above, below) {
            (Some(a), Some(b)) => a.bitwise_and(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return Err(Error::value("clamp", "at least one of min and max must be given")),
        };
        Ok(inside.where_(self, limited.detach()))
    }
    /// `self + (end - self) * weight`; uint8 with a weight tensor interpolates in 7-bit fixed
    /// point, as tinygrad and torch resize uint8 images.
    pub fn lerp(&self, end: &Tensor, weight: impl Operand) -> Tensor {
        self.try_lerp(end, weight).or_panic()
    }
    pub fn try_lerp(&self, end: &Tensor, weight: impl Operand) -> Result<Tensor> {
        let lerp = || -> Result<Tensor> {
            let gap = end.try_sub(self)?;
            // uint8 with weights per element: 7-bit fixed point, rounding as torch's uint8 resize
            if let Some(w) = weight.as_tensor().filter(|_| self.dtype() == DType::UINT8) {
                let w = w.mul(128.0).add(0.5).cast(DType::INT16);
                let step = gap.cast(DType::INT8).try_mul(&w)?.add(64).cast(DType::UINT16).rshift(7);
                return Ok(self.try_add(&step)?.cast(DType::UINT8));
            }
            self.try_add(gap.try_mul(weight)?)
        };
        lerp().map_err(|e| e.for_op("lerp"))
    }

    // ***** unary *****

    /// `-self` (logical NOT for bools).
    pub fn neg(&self) -> Tensor {
        self.unary(Ops::Neg)
    }
    /// `!self` as bool (non-zero is true).
    pub fn logical_not(&self) -> Tensor {
        self.cast(DType::BOOL).unary(Ops::Neg)
    }
    /// `2^self`.
    pub fn exp2(&self) -> Tensor {
        self.promote_float().unary(Ops::Exp2)
    }
    /// Base-2 logarithm.
    pub fn log2(&self) -> Tensor {
        self.promote_float().unary(Ops::Log2)
    }
    /// Natural logarithm.
    pub fn log(&self) -> Tensor {
        self.in_f32(|x| x.log2().mul(LN_2))
    }
    /// Base-10 logarithm.
    pub fn log10(&self) -> Tensor {
        self.in_f32(|x| x.log2().mul(std::f64::consts::LOG10_2))
    }
    /// Square root.
    pub fn sqrt(&self) -> Tensor {
        self.promote_float().unary(Ops::Sqrt)
    }
    /// `1 / sqrt(self)`.
    pub fn rsqrt(&self) -> Tensor {
        self.in_f32(|x| x.sqrt().reciprocal())
    }
    /// Sine (radians).
    pub fn sin(&self) -> Tensor {
        self.promote_float().unary(Ops::Sin)
    }
    /// `1 / self`.
    pub fn reciprocal(&self) -> Tensor {
        self.promote_float().unary(Ops::Recip)
    }
    /// Round toward zero.
    pub fn trunc(&self) -> Tensor {
        self.unary(Ops::Trunc)
    }
    /// Round toward positive infinity.
    pub fn ceil(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        self.gt(&t).where_(t.add(1), &t)
    }
    /// Round toward negative infinity.
    pub fn floor(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        self.lt(&t).where_(t.sub(1), &t)
    }
    /// Round to the nearest integer, halves to even (as torch).
    pub fn round(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        let t = self.trunc();
        let half = t.div(2.0);
        let even_down = self.gt(0).eq(half.trunc().eq(&half));
        let r = even_down.where_(self.sub(0.5).ceil(), self.add(0.5).floor());
        t.eq(self).where_(self, &r) // integral values (all large ones) stay exact
    }
    /// Whether each element is +inf or -inf.
    pub fn isinf(&self) -> Tensor {
        self.eq(f64::INFINITY).bitwise_or(self.eq(f64::NEG_INFINITY))
    }
    /// Whether each element is NaN.
    pub fn isnan(&self) -> Tensor {
        self.ne(self)
    }
    /// Whether each element is neither infinite nor NaN.
    pub fn isfinite(&self) -> Tensor {
        self.isinf().bitwise_or(self.isnan()).logical_not()
    }
    /// `self * self`.
    pub fn square(&self) -> Tensor {
        self.mul(self)
    }
    /// -1, 0 or 1 by the sign of each element (NaN stays NaN).
    pub fn sign(&self) -> Tensor {
        let dt = self.dtype();
        let c = |v: i64| self.const_tensor(Scalar::Int(v), dt);
        let s = self.ne(0).where_(self.lt(0).where_(c(-1), c(1)), c(0));
        if dt.is_float() {
            self.isnan().where_(self, &s)
        } else {
            s
        }
    }
    /// `|self|`, as `self * sign(self)` (gradient 0 at 0, as torch).
    pub fn abs(&self) -> Tensor {
        self.mul(self.sign())
    }
    /// `max(self, 0)`, with gradient 0 at 0 and NaN passed through (as torch): `(self > 0 |
    /// isnan(self)).where(self, 0)`, built as nodes directly: composed from tensor ops it made
    /// seven tensors, a quarter of an eager `relu(a + b)`'s latency.
    pub fn relu(&self) -> Tensor {
        if self.dtype().is_bool() {
            // the comparison with an int 0 promotes a bool to int32, and so does the result
            return self.gt(0).bitwise_or(self.isnan()).where_(self, 0);
        }
        let (x, zero) = (self.uop(), self.broadcast_const(Scalar::Int(0), self.dtype()));
        let kept = zero.alu(Ops::CmpLt, &[&x]).alu(Ops::Or, &[&x.alu(Ops::CmpNe, &[&x])]);
        self.lift(UOp::where_(&kept, &x, &zero))
    }
}
