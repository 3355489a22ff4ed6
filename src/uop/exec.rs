//! Exact scalar semantics of every ALU op for every dtype.
//! (stub: being written; see the module doc of the finished file)

use super::ops::Ops;
use super::uop::ConstValue;
use crate::dtype::DType;

/// `v` (a value of dtype `from`) converted to `to` with C cast semantics.
pub fn cast_value(v: ConstValue, from: DType, to: DType) -> ConstValue {
    let _ = (from, to);
    v
}

/// `v` normalized to `dtype`'s representation (used when building CONSTs from Rust values).
pub fn cast_const(v: ConstValue, dtype: DType) -> ConstValue {
    let _ = dtype;
    v
}

/// The bits of `v` (dtype `from`) reinterpreted as `to` (same itemsize).
pub fn bitcast_value(v: ConstValue, from: DType, to: DType) -> ConstValue {
    let _ = (from, to);
    v
}

/// Result of ALU `op` on operands of dtype `dtype`.
pub fn exec_alu(op: Ops, dtype: DType, src: &[ConstValue]) -> ConstValue {
    let _ = (op, dtype);
    src[0]
}
