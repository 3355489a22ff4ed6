//! Rust's operators over tensors (`+ - * / %`, the bitwise and shift ones, unary `-` and `!`,
//! and the in-place `+= -= *= /=`), each forwarding to the named op.

use std::ops;

use super::elementwise::{Operand, Scalar};
use super::Tensor;

macro_rules! operator {
    ($trait:ident, $method:ident, $fn:ident; $($s:ty),*) => {
        impl<R: Operand> ops::$trait<R> for &Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                Tensor::$fn(self, rhs)
            }
        }
        impl<R: Operand> ops::$trait<R> for Tensor {
            type Output = Tensor;
            fn $method(self, rhs: R) -> Tensor {
                Tensor::$fn(&self, rhs)
            }
        }
        $(
        impl ops::$trait<&Tensor> for $s {
            type Output = Tensor;
            fn $method(self, rhs: &Tensor) -> Tensor {
                let dtype = Scalar::from(self).weak_with(rhs.dtype());
                Tensor::$fn(&rhs.const_tensor(Scalar::from(self), dtype), rhs)
            }
        }
        impl ops::$trait<Tensor> for $s {
            type Output = Tensor;
            fn $method(self, rhs: Tensor) -> Tensor {
                self.$method(&rhs)
            }
        }
        )*
    };
}
operator!(Add, add, add; f32, f64, i32, i64);
operator!(Sub, sub, sub; f32, f64, i32, i64);
operator!(Mul, mul, mul; f32, f64, i32, i64);
operator!(Div, div, div; f32, f64, i32, i64);
operator!(Rem, rem, mod_; f32, f64, i32, i64);
operator!(BitAnd, bitand, bitwise_and; i32, i64, bool);
operator!(BitOr, bitor, bitwise_or; i32, i64, bool);
operator!(BitXor, bitxor, bitwise_xor; i32, i64, bool);
operator!(Shl, shl, lshift; i32, i64);
operator!(Shr, shr, rshift; i32, i64);

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
impl ops::Not for &Tensor {
    type Output = Tensor;
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}
impl ops::Not for Tensor {
    type Output = Tensor;
    fn not(self) -> Tensor {
        self.bitwise_not()
    }
}

macro_rules! assign_operator {
    ($trait:ident, $method:ident, $op:ident) => {
        /// In-place update: `t += x` assigns `t + x` into `t`'s storage (lazily, as `assign`).
        impl<R: Operand> ops::$trait<R> for Tensor {
            fn $method(&mut self, rhs: R) {
                let value = Tensor::$op(self, rhs);
                self.assign(&value);
            }
        }
    };
}
assign_operator!(AddAssign, add_assign, add);
assign_operator!(SubAssign, sub_assign, sub);
assign_operator!(MulAssign, mul_assign, mul);
assign_operator!(DivAssign, div_assign, div);
