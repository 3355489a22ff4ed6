//! Operators and builders on `UOp`, so that rules and tests read like the math they build:
//! `&row * 4 + &col`, `i.lt(&n)`, `buf.index(&i).load()`. An integer operand is a constant of
//! the other operand's dtype (an index constant next to an index).

use std::ops;

use super::{Arg, ConstValue, Ops, UOp};
use crate::dtype::DType;

macro_rules! binary_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl ops::$trait<&UOp> for &UOp {
            type Output = UOp;
            fn $method(self, rhs: &UOp) -> UOp {
                self.alu($op, &[rhs])
            }
        }
        impl ops::$trait<i64> for &UOp {
            type Output = UOp;
            fn $method(self, rhs: i64) -> UOp {
                self.alu($op, &[&self.const_like(ConstValue::Int(rhs))])
            }
        }
    };
}
binary_operator!(Add, add, Ops::Add);
binary_operator!(Mul, mul, Ops::Mul);
binary_operator!(Rem, rem, Ops::Mod);

impl ops::Neg for &UOp {
    type Output = UOp;
    fn neg(self) -> UOp {
        self.alu(Ops::Neg, &[])
    }
}

impl UOp {
    /// Integer division, rounding toward zero (index arithmetic).
    pub fn idiv(&self, rhs: i64) -> UOp {
        self.alu(Ops::IDiv, &[&self.const_like(ConstValue::Int(rhs))])
    }
    /// `self < rhs`.
    pub fn lt(&self, rhs: &UOp) -> UOp {
        self.alu(Ops::CmpLt, &[rhs])
    }
    /// `self && rhs` (bitwise for integers).
    pub fn and(&self, rhs: &UOp) -> UOp {
        self.alu(Ops::And, &[rhs])
    }
    /// The element of buffer pointer `self` (a PARAM, or a kernel-level pointer) at `idx`.
    pub fn index(&self, idx: &UOp) -> UOp {
        UOp::new(Ops::Index, self.dtype(), vec![self.clone(), idx.clone()], Arg::None)
    }
    /// `index`, read or written only where `gate` holds.
    pub fn index_gated(&self, idx: &UOp, gate: &UOp) -> UOp {
        UOp::new(Ops::Index, self.dtype(), vec![self.clone(), idx.clone(), gate.clone()], Arg::None)
    }
    /// The value at INDEX `self`, as `dtype`.
    pub fn load(&self, dtype: DType) -> UOp {
        UOp::new(Ops::Load, dtype, vec![self.clone()], Arg::None)
    }
    /// `value` written at INDEX `self`.
    pub fn store(&self, value: &UOp) -> UOp {
        UOp::new(Ops::Store, DType::VOID, vec![self.clone(), value.clone()], Arg::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operators_build_the_nodes_alu_builds() {
        let (i, j) = (
            UOp::index_const(3),
            UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(8)], Arg::Range(0, crate::uop::AxisKind::Loop)),
        );
        assert_eq!(&(&j * 4) + &i, j.alu(Ops::Mul, &[&UOp::index_const(4)]).alu(Ops::Add, &[&i]));
        assert_eq!(&j % 5, j.alu(Ops::Mod, &[&UOp::index_const(5)]));
        assert_eq!(j.idiv(2), j.alu(Ops::IDiv, &[&UOp::index_const(2)]));
        assert_eq!(-&j, j.alu(Ops::Neg, &[]));
        assert_eq!(j.lt(&i).dtype(), DType::BOOL);
        let p = UOp::new(Ops::Param, DType::FLOAT32.ptr(crate::dtype::AddrSpace::Global), vec![], Arg::Int(1));
        let load = p.index(&j).load(DType::FLOAT32);
        assert_eq!((load.op(), load.src()[0].op(), load.src()[0].src()[1].clone()), (Ops::Load, Ops::Index, j.clone()));
        let st = p.index_gated(&j, &j.lt(&i)).store(&load);
        assert_eq!((st.op(), st.src()[0].src().len()), (Ops::Store, 3));
    }
}
