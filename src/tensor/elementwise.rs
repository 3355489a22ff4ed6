//! Elementwise math: unary ops, broadcasting binary ops with dtype promotion, and operators.

use std::ops;

use super::Tensor;
use crate::dtype::DType;
use crate::uop::{ConstValue, Ops, UOp};

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
    /// The dtype a tensor made only of this scalar gets.
    pub fn default_dtype(self) -> DType {
        match self {
            Scalar::Bool(_) => DType::BOOL,
            Scalar::Int(_) => DType::INT32,
            Scalar::Float(_) => DType::FLOAT32,
        }
    }
    /// The dtype of `dtype op self`: the tensor's, unless the scalar needs a wider kind.
    fn weak_with(self, dtype: DType) -> DType {
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
}

impl Operand for &Tensor {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        (self.clone(), DType::least_upper(lhs.dtype(), self.dtype()))
    }
}
impl Operand for Tensor {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        (&self).with(lhs)
    }
}
impl<S: Into<Scalar>> Operand for S {
    fn with(self, lhs: &Tensor) -> (Tensor, DType) {
        let s: Scalar = self.into();
        let dtype = s.weak_with(lhs.dtype());
        (lhs.const_tensor(s, dtype), dtype)
    }
}

/// numpy broadcasting of two shapes, or `None` if they are incompatible.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let pad = |s: &[usize]| [vec![1; n - s.len()], s.to_vec()].concat();
    let (a, b) = (pad(a), pad(b));
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| match (x, y) {
            _ if x == y => Some(x),
            (1, _) => Some(y),
            (_, 1) => Some(x),
            _ => None,
        })
        .collect()
}

impl Tensor {
    /// A scalar constant of `dtype` with this tensor's rank (all dims 1), on its device.
    pub(crate) fn const_tensor(&self, s: Scalar, dtype: DType) -> Tensor {
        let c = UOp::constant(dtype, s.value());
        let u = UOp::new(Ops::Reshape, dtype, vec![c], crate::uop::Arg::Shape(vec![1; self.ndim()]));
        self.lift(u)
    }
    /// This tensor broadcast to `shape` (numpy rules).
    pub fn broadcast_to(&self, shape: &[usize]) -> Tensor {
        let me = self.shape();
        if me == shape {
            return self.clone();
        }
        assert!(
            me.len() <= shape.len() && broadcast_shape(&me, shape).as_deref() == Some(shape),
            "broadcast_to: cannot broadcast {me:?} to {shape:?}"
        );
        let padded: Vec<usize> = [vec![1; shape.len() - me.len()], me].concat();
        self.reshape(&padded).expand(shape)
    }
    fn unary(&self, op: Ops) -> Tensor {
        self.lift(self.uop().alu(op, &[]))
    }
    /// A float version of this tensor (ints become float32).
    fn float(&self) -> Tensor {
        self.cast(self.dtype().to_float())
    }
    /// Broadcast `self` and `rhs`, cast both to `dtype`, and apply `op`.
    fn binary(&self, op: Ops, rhs: &Tensor, dtype: DType) -> Tensor {
        assert_eq!(self.device(), rhs.device(), "{}: operands on different devices", op.name());
        let shape = broadcast_shape(&self.shape(), &rhs.shape()).unwrap_or_else(|| {
            panic!("{}: shapes {:?} and {:?} do not broadcast", op.name(), self.shape(), rhs.shape())
        });
        let (a, b) = (self.cast(dtype).broadcast_to(&shape), rhs.cast(dtype).broadcast_to(&shape));
        self.lift(a.uop().alu(op, &[&b.uop()]))
    }
    fn binop(&self, op: Ops, rhs: impl Operand) -> Tensor {
        let (r, dtype) = rhs.with(self);
        self.binary(op, &r, dtype)
    }

    pub fn cast(&self, dtype: DType) -> Tensor {
        if self.dtype() == dtype {
            return self.clone();
        }
        self.lift(self.uop().cast(dtype))
    }
    pub fn add(&self, rhs: impl Operand) -> Tensor {
        self.binop(Ops::Add, rhs)
    }
    pub fn sub(&self, rhs: impl Operand) -> Tensor {
        let (r, dtype) = rhs.with(self);
        self.binary(Ops::Add, &r.cast(dtype).neg(), dtype)
    }
    pub fn mul(&self, rhs: impl Operand) -> Tensor {
        self.binop(Ops::Mul, rhs)
    }
    /// True division: integer operands are divided as floats.
    pub fn div(&self, rhs: impl Operand) -> Tensor {
        let (r, dtype) = rhs.with(self);
        self.binary(Ops::FDiv, &r, dtype.to_float())
    }
    /// Integer division truncating toward zero (C semantics).
    pub fn idiv(&self, rhs: impl Operand) -> Tensor {
        self.binop(Ops::IDiv, rhs)
    }
    pub fn maximum(&self, rhs: impl Operand) -> Tensor {
        self.binop(Ops::Max, rhs)
    }
    pub fn minimum(&self, rhs: impl Operand) -> Tensor {
        let (r, dtype) = rhs.with(self);
        self.cast(dtype).neg().maximum(r.cast(dtype).neg()).neg()
    }
    /// `self < rhs` as bool.
    pub fn cmplt(&self, rhs: impl Operand) -> Tensor {
        self.binop(Ops::CmpLt, rhs)
    }
    pub fn lt(&self, rhs: impl Operand) -> Tensor {
        self.cmplt(rhs)
    }
    pub fn gt(&self, rhs: impl Operand) -> Tensor {
        let (r, dtype) = rhs.with(self);
        r.binary(Ops::CmpLt, self, dtype)
    }
    pub fn ge(&self, rhs: impl Operand) -> Tensor {
        self.lt(rhs).logical_not()
    }
    pub fn le(&self, rhs: impl Operand) -> Tensor {
        self.gt(rhs).logical_not()
    }
    pub fn ne(&self, rhs: impl Operand) -> Tensor {
        self.binop(Ops::CmpNe, rhs)
    }
    pub fn eq(&self, rhs: impl Operand) -> Tensor {
        self.ne(rhs).logical_not()
    }
    /// Elementwise `cond ? a : b` with broadcasting; `self` is the condition.
    pub fn where_(&self, a: impl Operand, b: impl Operand) -> Tensor {
        let (ta, _) = a.with(self);
        let (tb, _) = b.with(self);
        let dtype = DType::least_upper(ta.dtype(), tb.dtype());
        let shape = [self.shape(), ta.shape(), tb.shape()]
            .iter()
            .try_fold(vec![], |acc, s| broadcast_shape(&acc, s))
            .unwrap_or_else(|| {
                panic!("where: shapes {:?}, {:?}, {:?} do not broadcast", self.shape(), ta.shape(), tb.shape())
            });
        let c = self.cast(DType::BOOL).broadcast_to(&shape);
        let (ta, tb) = (ta.cast(dtype).broadcast_to(&shape), tb.cast(dtype).broadcast_to(&shape));
        self.lift(UOp::where_(&c.uop(), &ta.uop(), &tb.uop()))
    }

    pub fn neg(&self) -> Tensor {
        self.unary(Ops::Neg)
    }
    pub fn logical_not(&self) -> Tensor {
        self.cast(DType::BOOL).unary(Ops::Neg)
    }
    pub fn exp2(&self) -> Tensor {
        self.float().unary(Ops::Exp2)
    }
    pub fn log2(&self) -> Tensor {
        self.float().unary(Ops::Log2)
    }
    pub fn exp(&self) -> Tensor {
        self.float().mul(std::f64::consts::LOG2_E).exp2()
    }
    pub fn log(&self) -> Tensor {
        self.log2().mul(std::f64::consts::LN_2)
    }
    pub fn sqrt(&self) -> Tensor {
        self.float().unary(Ops::Sqrt)
    }
    pub fn sin(&self) -> Tensor {
        self.float().unary(Ops::Sin)
    }
    pub fn reciprocal(&self) -> Tensor {
        self.float().unary(Ops::Recip)
    }
    pub fn trunc(&self) -> Tensor {
        self.unary(Ops::Trunc)
    }
    pub fn relu(&self) -> Tensor {
        self.maximum(0)
    }
}

macro_rules! operator {
    ($trait:ident, $method:ident) => {
        impl<R: Operand> ops::$trait<R> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                Tensor::$method(self, rhs)
            }
        }
        impl<R: Operand> ops::$trait<R> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                Tensor::$method(&self, rhs)
            }
        }
        operator!(@scalar $trait, $method, f32, f64, i32, i64);
    };
    (@scalar $trait:ident, $method:ident, $($s:ty),*) => {$(
        impl ops::$trait<&Tensor> for $s {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                let dtype = Scalar::from(self).weak_with(rhs.dtype());
                Tensor::$method(&rhs.const_tensor(Scalar::from(self), dtype), rhs)
            }
        }
        impl ops::$trait<Tensor> for $s {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                self.$method(&rhs)
            }
        }
    )*};
}
operator!(Add, add);
operator!(Sub, sub);
operator!(Mul, mul);
operator!(Div, div);

impl ops::Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}
impl ops::Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}
