//! Exact scalar semantics of every ALU op for every dtype, shared by the reference interpreter
//! (bit-exact with the generated C compiled by gcc on x86-64) and by constant folding.
//!
//! Values are normalized per dtype (only `dtype.scalar` matters): bool is `Bool`; every integer
//! dtype (and `Index`, which is int64) is `Int` wrapped to its width, signed types sign-extended
//! and unsigned ones zero-extended (uint64 keeps its bit pattern, so `u64::MAX` is `Int(-1)`);
//! floats are `Float` holding a value exactly representable in the dtype. Every rounding here is
//! a single round-to-nearest-even (no double rounding through f32 or f64; `half::f16::from_f64`
//! rounds through f32 on x86 and truncates low bits, so it is used only on exact values). The C
//! must be compiled without contraction (`-ffp-contract=off`): a multiply-add is fused only where
//! codegen says so, with `MulAcc`.
//!
//! Where C leaves behaviour undefined this module picks a deterministic answer, and codegen makes
//! the generated code compute the same (`codegen/decompose.rs`: `total_cast`, `total_division`,
//! `total_shift`), so no kernel executes undefined behaviour (`SANITIZE=1` checks it):
//!
//! - a float→int cast truncates toward zero; NaN gives 0, a value whose truncation is below the
//!   target's range its min and one above its max (Rust's `as`, ARM's `fcvtzs`, WebAssembly's
//!   `trunc_sat`; x86's `cvttss2si` gives INT_MIN for all three, and gcc's `(uchar)-1.0f` 255):
//!
//!   | value  | int8 | uint8 | int32 | uint32 | int64 | uint64 |
//!   |---|---|---|---|---|---|---|
//!   | NaN | 0 | 0 | 0 | 0 | 0 | 0 |
//!   | +inf, 1e20 | 127 | 255 | 2^31-1 | 2^32-1 | 2^63-1 | 2^64-1 |
//!   | -inf, -1e20 | -128 | 0 | -2^31 | 0 | -2^63 | 0 |
//!   | -0.9, -0.0 | 0 | 0 | 0 | 0 | 0 | 0 |
//!   | -1.5 | -1 | 0 | -1 | 0 | -1 | 0 |
//!   | 300.7 | 127 | 255 | 300 | 300 | 300 | 300 |
//!   | 2^31 | 127 | 255 | 2^31-1 | 2^31 | 2^31 | 2^31 |
//!
//! - int→int casts wrap to the target's width (C's rule for unsigned targets, gcc's for signed);
//!   anything→bool is `!= 0` (NaN is true);
//! - int→float and float→float casts round once to nearest even, ±inf past the range; to
//!   bfloat16 the value rounds to float32 first (as PyTorch's `c10::BFloat16` and codegen's
//!   emulation do), which matters for float64 and 32- and 64-bit integer sources only:
//!   `2^30 + 2^22 + 1` becomes 2^30 (a tie once in float32), not 2^30 + 2^23;
//! - integer division and remainder by zero give 0 (`MIN / -1` wraps to MIN); shifts by >= the
//!   width give 0 (or -1 for an arithmetic right shift of a negative value).
//!
//! Float `Max` returns NaN if either operand is NaN, else `a > b ? a : b`. Integer `Recip`,
//! `Exp2`, `Log2`, `Sin`, `Sqrt`, `Pow` and `FDiv` (never emitted) evaluate the float formula in
//! f64 and cast back.

use std::cmp::Ordering;
use std::ops::{Add, Div, Mul, Neg, Rem, Sub};

use super::ops::Ops;
use super::uop::ConstValue::{self, Bool, Float, Int};
use crate::dtype::{DType, Scalar};

/// `v` (a value of dtype `from`) converted to `to`: C's cast where C defines it, the rules above
/// where it does not.
pub fn cast_value(v: ConstValue, from: DType, to: DType) -> ConstValue {
    match v {
        _ if to.is_bool() => Bool(v.as_bool()),
        // to bfloat16 through float32 (exact there from float16, bool and 8- and 16-bit integers)
        _ if to.scalar == Scalar::BFloat16 && from.scalar != Scalar::Float32 => {
            Float(round_float(cast_value(v, from, DType::FLOAT32).as_f64(), to))
        }
        Float(f) if to.is_float() => Float(round_float(f, to)),
        _ if to.is_float() => Float(int_to_float(v.as_i64(), from.is_unsigned(), to)),
        Float(f) if to.is_int() => {
            let (lo, hi) = to.int_range();
            Int((f as i128).clamp(lo, hi) as i64)
        }
        _ if to.is_int() => Int(wrap(v.as_i64(), to)),
        _ => panic!("cast_value: cannot cast {v} from {from:?} to {to:?}"),
    }
}

/// `v` normalized to `dtype`'s representation (used when building CONSTs from Rust values):
/// an `Int` is a signed i64, a `Float` cast to an integer dtype truncates toward zero then wraps.
pub fn cast_const(v: ConstValue, dtype: DType) -> ConstValue {
    match v {
        Float(f) if dtype.is_int() => Int(wrap(f as i128 as i64, dtype)),
        Float(_) => cast_value(v, DType::FLOAT64, dtype),
        _ => cast_value(v, DType::INT64, dtype),
    }
}

/// The bits of `v` (dtype `from`) reinterpreted as `to` (same itemsize).
pub fn bitcast_value(v: ConstValue, from: DType, to: DType) -> ConstValue {
    assert_eq!(from.itemsize(), to.itemsize(), "bitcast_value: {from:?} and {to:?} differ in size");
    let bits = match (v, from.scalar) {
        (Float(f), Scalar::Float16) => half::f16::from_f64(f).to_bits() as u64,
        (Float(f), Scalar::BFloat16) => half::bf16::from_f64(f).to_bits() as u64,
        (Float(f), Scalar::Float32) => (f as f32).to_bits() as u64,
        (Float(f), _) => f.to_bits(),
        _ => v.as_i64() as u64,
    };
    match to.scalar {
        Scalar::Float16 => Float(half::f16::from_bits(bits as u16).to_f64()),
        Scalar::BFloat16 => Float(half::bf16::from_bits(bits as u16).to_f64()),
        Scalar::Float32 => Float(f32::from_bits(bits as u32) as f64),
        Scalar::Float64 => Float(f64::from_bits(bits)),
        _ => cast_const(Int(bits as i64), to),
    }
}

/// Result of ALU `op` on operands of dtype `dtype` (for `Where`, the dtype of the two values).
pub fn exec_alu(op: Ops, dtype: DType, src: &[ConstValue]) -> ConstValue {
    match op {
        Ops::Where => src[if src[0].as_bool() { 1 } else { 2 }],
        // fused (one rounding) in float32 and float64, as C's fmaf/fma; elsewhere the product
        // rounds to the dtype first, as the separate ops would
        Ops::MulAcc => match (dtype.scalar, src) {
            (Scalar::Float32, [Float(a), Float(b), Float(c)]) => {
                Float((*a as f32).mul_add(*b as f32, *c as f32) as f64)
            }
            (Scalar::Float64, [Float(a), Float(b), Float(c)]) => Float(a.mul_add(*b, *c)),
            _ => exec_alu(Ops::Add, dtype, &[exec_alu(Ops::Mul, dtype, &src[..2]), src[2]]),
        },
        Ops::IDiv if dtype.is_float() => exec_alu(Ops::Trunc, dtype, &[exec_alu(Ops::FDiv, dtype, src)]),
        _ if op.is_comparison() => {
            let ord = compare(dtype, src[0], src[1]);
            Bool(match op {
                Ops::CmpLt => ord == Some(Ordering::Less),
                Ops::CmpEq => ord == Some(Ordering::Equal),
                _ => ord != Some(Ordering::Equal),
            })
        }
        _ if dtype.scalar == Scalar::Float64 => Float(float_alu::<f64>(op, dtype, src)),
        _ if dtype.is_float() => Float(round_float(float_alu::<f32>(op, dtype, src), dtype)),
        _ if dtype.is_int() || dtype.is_bool() => int_alu(op, dtype, src),
        _ => unsupported(op, dtype),
    }
}

fn unsupported(op: Ops, dtype: DType) -> ! {
    panic!("exec_alu: {op:?} is not defined for {dtype:?}")
}

/// `x` wrapped to the width of integer dtype `dtype` (sign- or zero-extended into the i64).
fn wrap(x: i64, dtype: DType) -> i64 {
    let shift = 64 - dtype.bits();
    if dtype.is_unsigned() {
        ((x as u64) << shift >> shift) as i64
    } else {
        x << shift >> shift
    }
}

/// The numeric value of a normalized `v` of dtype `dtype` (unsigned bit patterns read unsigned).
fn num(v: ConstValue, dtype: DType) -> f64 {
    match v {
        Int(i) if dtype.is_unsigned() => i as u64 as f64,
        _ => v.as_f64(),
    }
}

/// Ordering of two normalized values of `dtype` (`None` when a NaN is involved).
fn compare(dtype: DType, a: ConstValue, b: ConstValue) -> Option<Ordering> {
    match dtype {
        _ if dtype.is_float() => a.as_f64().partial_cmp(&b.as_f64()),
        _ if dtype.is_unsigned() => Some((a.as_i64() as u64).cmp(&(b.as_i64() as u64))),
        _ => Some(a.as_i64().cmp(&b.as_i64())),
    }
}

/// Significand bits (with the implicit one), min normal exponent and max exponent of a float.
fn float_format(dtype: DType) -> (i32, i32, i32) {
    match dtype.scalar {
        Scalar::Float16 => (11, -14, 15),
        Scalar::BFloat16 => (8, -126, 127),
        Scalar::Float32 => (24, -126, 127),
        _ => (53, -1022, 1023),
    }
}

/// 2^k for k in f64's normal exponent range.
fn pow2(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `x` rounded to nearest-even in float dtype `dtype` (subnormals kept, overflow to ±inf).
fn round_float(x: f64, dtype: DType) -> f64 {
    let (p, emin, emax) = float_format(dtype);
    if p == 53 || !x.is_finite() || x == 0.0 {
        return x;
    }
    let e = (((x.to_bits() >> 52) & 0x7ff) as i32 - 1023).max(emin);
    let quantum = pow2(e - p + 1);
    let r = (x / quantum).round_ties_even() * quantum;
    if r.abs() >= pow2(emax + 1) {
        f64::INFINITY.copysign(r)
    } else {
        r
    }
}

/// The integer `i` (read unsigned if `unsigned`) rounded once to float dtype `to`.
fn int_to_float(i: i64, unsigned: bool, to: DType) -> f64 {
    let mag = if unsigned { i as u64 } else { i.unsigned_abs() };
    let (p, _, _) = float_format(to);
    // Round the magnitude to p significant bits in integer arithmetic, so the f64 is exact.
    let drop = (64 - mag.leading_zeros()).saturating_sub(p as u32);
    let rounded = if drop == 0 {
        mag as f64
    } else {
        let (q, r, half) = (mag >> drop, mag & ((1 << drop) - 1), 1u64 << (drop - 1));
        (q + (r > half || (r == half && q & 1 == 1)) as u64) as f64 * pow2(drop as i32)
    };
    let r = round_float(rounded, to);
    if !unsigned && i < 0 {
        -r
    } else {
        r
    }
}

/// The float arithmetic `float_alu` needs, for f32 and f64 (each calls the C library routine
/// of its precision: `exp2f`/`exp2`, `sinf`/`sin`, ...).
trait Fp:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Rem<Output = Self>
    + Neg<Output = Self>
{
    fn of(x: f64) -> Self;
    fn get(self) -> f64;
    fn nan(self) -> bool;
    fn unary(self, op: Ops) -> Self;
    fn pow(self, e: Self) -> Self;
}

macro_rules! impl_fp {
    ($($t:ty),*) => {$(
        impl Fp for $t {
            fn of(x: f64) -> Self {
                x as $t
            }
            fn get(self) -> f64 {
                self.into()
            }
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn unary(self, op: Ops) -> Self {
                match op {
                    Ops::Exp2 => self.exp2(),
                    Ops::Log2 => self.log2(),
                    Ops::Sin => self.sin(),
                    Ops::Sqrt => self.sqrt(),
                    _ => self.trunc(),
                }
            }
            fn pow(self, e: Self) -> Self {
                self.powf(e)
            }
        }
    )*};
}
impl_fp!(f32, f64);

/// Float `op` computed in precision `T` (f32 for float16/bfloat16/float32), returned unrounded.
fn float_alu<T: Fp>(op: Ops, dtype: DType, src: &[ConstValue]) -> f64 {
    let x = |i: usize| T::of(num(src[i], dtype));
    let r = match op {
        Ops::Exp2 | Ops::Log2 | Ops::Sin | Ops::Sqrt | Ops::Trunc => x(0).unary(op),
        Ops::Recip => T::of(1.0) / x(0),
        Ops::Neg => -x(0),
        Ops::Add => x(0) + x(1),
        Ops::Sub => x(0) - x(1),
        Ops::Mul => x(0) * x(1),
        Ops::FDiv => x(0) / x(1),
        Ops::Mod => x(0) % x(1), // C fmod: exact, sign of the dividend
        Ops::Pow => x(0).pow(x(1)),
        Ops::Max if x(0) > x(1) || x(0).nan() => x(0),
        Ops::Max => x(1),
        _ => unsupported(op, dtype),
    };
    r.get()
}

/// Integer (and bool, as 0/1 converted back with `!= 0`) `op` with C's wrapping semantics.
fn int_alu(op: Ops, dtype: DType, src: &[ConstValue]) -> ConstValue {
    let (a, b) = (src[0].as_i64(), src.get(1).map_or(0, |v| v.as_i64()));
    let (ua, ub, bits) = (a as u64, b as u64, dtype.bits() as u64);
    let unsigned = dtype.is_unsigned();
    let r = match op {
        Ops::Neg if dtype.is_bool() => return Bool(a == 0),
        Ops::Neg => a.wrapping_neg(),
        Ops::Trunc => a,
        Ops::Add => a.wrapping_add(b),
        Ops::Sub => a.wrapping_sub(b),
        Ops::Mul => a.wrapping_mul(b),
        Ops::And => a & b,
        Ops::Or => a | b,
        Ops::Xor => a ^ b,
        Ops::Max if compare(dtype, src[0], src[1]) == Some(Ordering::Less) => b,
        Ops::Max => a,
        Ops::Shl if ub >= bits => 0,
        Ops::Shl => a << ub,
        Ops::Shr if unsigned && ub >= bits => 0,
        Ops::Shr if unsigned => (ua >> ub) as i64,
        Ops::Shr => a >> ub.min(63),
        Ops::IDiv | Ops::Mod if b == 0 => 0,
        Ops::IDiv if unsigned => (ua / ub) as i64,
        Ops::IDiv => a.wrapping_div(b),
        Ops::Mod if unsigned => (ua % ub) as i64,
        Ops::Mod => a.wrapping_rem(b),
        _ => return cast_value(Float(float_alu::<f64>(op, dtype, src)), DType::FLOAT64, dtype),
    };
    if dtype.is_bool() {
        Bool(r != 0)
    } else {
        Int(wrap(r, dtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ConstValue::{Bool as B, Float as F, Int as I};

    fn alu(op: Ops, dtype: DType, src: &[ConstValue]) -> ConstValue {
        exec_alu(op, dtype, src)
    }
    fn f32v(x: f32) -> ConstValue {
        F(x as f64)
    }

    #[test]
    fn ints_wrap_to_their_width() {
        let cases = [
            (DType::INT8, Ops::Add, 127, 1, -128),
            (DType::INT16, Ops::Add, 32767, 1, -32768),
            (DType::INT32, Ops::Add, i32::MAX as i64, 1, i32::MIN as i64),
            (DType::INT64, Ops::Add, i64::MAX, 1, i64::MIN),
            (DType::INDEX, Ops::Add, i64::MAX, 1, i64::MIN),
            (DType::UINT8, Ops::Add, 255, 1, 0),
            (DType::UINT16, Ops::Sub, 0, 1, 65535),
            (DType::UINT32, Ops::Sub, 0, 1, 4294967295),
            (DType::UINT64, Ops::Sub, 0, 1, -1),
        ];
        for (dt, op, a, b, want) in cases {
            assert_eq!(alu(op, dt, &[I(a), I(b)]), I(want), "{dt:?}");
        }
        assert_eq!(cast_const(I(200), DType::INT8), I(-56));
        assert_eq!(cast_const(I(-1), DType::UINT8), I(255));
        assert_eq!(cast_const(I(-1), DType::UINT32), I(4294967295));
        assert_eq!(cast_const(I(-1), DType::UINT64), I(-1));
        assert_eq!(alu(Ops::Mul, DType::INT16, &[I(300), I(300)]), I(24464));
        assert_eq!(alu(Ops::Neg, DType::INT8, &[I(-128)]), I(-128));
        assert_eq!(alu(Ops::Neg, DType::UINT8, &[I(1)]), I(255));
        assert_eq!(alu(Ops::Trunc, DType::INT32, &[I(-5)]), I(-5));
    }

    #[test]
    fn unsigned_compare_divide_and_shift_as_unsigned() {
        let (u32max, u64max) = (I(0xFFFF_FFFF), I(-1));
        assert_eq!(alu(Ops::CmpLt, DType::UINT32, &[I(1), u32max]), B(true));
        assert_eq!(alu(Ops::CmpLt, DType::UINT64, &[u64max, I(1)]), B(false));
        assert_eq!(alu(Ops::CmpLt, DType::INT64, &[I(-1), I(1)]), B(true));
        assert_eq!(alu(Ops::Max, DType::UINT64, &[u64max, I(1)]), u64max);
        assert_eq!(alu(Ops::Max, DType::INT8, &[I(-1), I(1)]), I(1));
        assert_eq!(alu(Ops::IDiv, DType::UINT64, &[u64max, I(2)]), I(i64::MAX));
        assert_eq!(alu(Ops::Mod, DType::UINT64, &[u64max, I(10)]), I(5));
        assert_eq!(alu(Ops::IDiv, DType::UINT8, &[I(200), I(3)]), I(66));
        assert_eq!(alu(Ops::Shr, DType::UINT64, &[u64max, I(63)]), I(1));
        assert_eq!(alu(Ops::Add, DType::UINT64, &[I(i64::MAX), I(1)]), I(i64::MIN));
        assert_eq!(cast_value(u64max, DType::UINT64, DType::FLOAT64), F(1.8446744073709552e19));
        assert_eq!(cast_value(u64max, DType::UINT64, DType::FLOAT32), F(1.8446744073709552e19));
        assert_eq!(cast_value(u32max, DType::UINT32, DType::FLOAT64), F(4294967295.0));
        assert_eq!(cast_value(u64max, DType::UINT64, DType::INT8), I(-1));
    }

    #[test]
    fn integer_division_is_c_truncating() {
        let dt = DType::INT32;
        for (a, b, q, r) in [(-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (7, 2, 3, 1), (5, 0, 0, 0)] {
            assert_eq!(alu(Ops::IDiv, dt, &[I(a), I(b)]), I(q), "{a}/{b}");
            assert_eq!(alu(Ops::Mod, dt, &[I(a), I(b)]), I(r), "{a}%{b}");
        }
        assert_eq!(alu(Ops::IDiv, DType::INT64, &[I(i64::MIN), I(-1)]), I(i64::MIN));
        assert_eq!(alu(Ops::Mod, DType::INT64, &[I(i64::MIN), I(-1)]), I(0));
        assert_eq!(alu(Ops::IDiv, DType::INT8, &[I(-128), I(-1)]), I(-128));
    }

    #[test]
    fn shifts() {
        assert_eq!(alu(Ops::Shl, DType::INT32, &[I(1), I(31)]), I(i32::MIN as i64));
        assert_eq!(alu(Ops::Shl, DType::UINT8, &[I(0x80), I(1)]), I(0));
        assert_eq!(alu(Ops::Shl, DType::UINT8, &[I(1), I(8)]), I(0));
        assert_eq!(alu(Ops::Shl, DType::INT64, &[I(1), I(64)]), I(0));
        assert_eq!(alu(Ops::Shr, DType::INT8, &[I(-128), I(1)]), I(-64));
        assert_eq!(alu(Ops::Shr, DType::INT8, &[I(-1), I(100)]), I(-1));
        assert_eq!(alu(Ops::Shr, DType::INT8, &[I(64), I(100)]), I(0));
        assert_eq!(alu(Ops::Shr, DType::UINT8, &[I(255), I(4)]), I(15));
        assert_eq!(alu(Ops::Shr, DType::UINT8, &[I(255), I(8)]), I(0));
        assert_eq!(alu(Ops::Shr, DType::UINT32, &[I(0x8000_0000), I(31)]), I(1));
        assert_eq!(alu(Ops::Shr, DType::INT64, &[I(i64::MIN), I(63)]), I(-1));
    }

    #[test]
    fn bool_ops_are_logical() {
        let (t, f) = (B(true), B(false));
        assert_eq!(alu(Ops::Neg, DType::BOOL, &[t]), f);
        assert_eq!(alu(Ops::Add, DType::BOOL, &[t, t]), t);
        assert_eq!(alu(Ops::Mul, DType::BOOL, &[t, f]), f);
        assert_eq!(alu(Ops::And, DType::BOOL, &[t, f]), f);
        assert_eq!(alu(Ops::Or, DType::BOOL, &[t, f]), t);
        assert_eq!(alu(Ops::Xor, DType::BOOL, &[t, t]), f);
        assert_eq!(alu(Ops::Max, DType::BOOL, &[f, t]), t);
        assert_eq!(alu(Ops::CmpLt, DType::BOOL, &[f, t]), t);
        assert_eq!(alu(Ops::CmpNe, DType::BOOL, &[t, t]), f);
        assert_eq!(alu(Ops::Where, DType::INT32, &[t, I(1), I(2)]), I(1));
        assert_eq!(alu(Ops::Where, DType::FLOAT32, &[f, F(1.0), F(2.0)]), F(2.0));
    }

    #[test]
    fn float32_computes_in_f32() {
        let (a, b) = (cast_const(F(0.1), DType::FLOAT32), cast_const(F(0.2), DType::FLOAT32));
        assert_eq!(a, f32v(0.1));
        assert_eq!(alu(Ops::Add, DType::FLOAT32, &[a, b]), f32v(0.1f32 + 0.2f32));
        assert_eq!(alu(Ops::Add, DType::FLOAT32, &[a, b]), F(0.30000001192092896));
        assert_eq!(alu(Ops::FDiv, DType::FLOAT32, &[F(1.0), F(3.0)]), f32v(1.0 / 3.0));
        assert_eq!(alu(Ops::Recip, DType::FLOAT32, &[F(3.0)]), f32v(1.0 / 3.0));
        assert_eq!(alu(Ops::Sqrt, DType::FLOAT32, &[F(2.0)]), f32v(2f32.sqrt()));
        assert_eq!(alu(Ops::Sin, DType::FLOAT32, &[F(1.0)]), f32v(1f32.sin()));
        assert_eq!(alu(Ops::Exp2, DType::FLOAT32, &[F(0.5)]), f32v(0.5f32.exp2()));
        assert_eq!(alu(Ops::Log2, DType::FLOAT32, &[F(10.0)]), f32v(10f32.log2()));
        assert_eq!(alu(Ops::Pow, DType::FLOAT32, &[F(2.0), F(10.0)]), F(1024.0));
        assert_eq!(alu(Ops::Sqrt, DType::FLOAT64, &[F(2.0)]), F(2f64.sqrt()));
        assert_eq!(alu(Ops::Trunc, DType::FLOAT32, &[F(-2.5)]), F(-2.0));
        assert_eq!(alu(Ops::Neg, DType::FLOAT64, &[F(0.0)]), F(-0.0));
        assert_eq!(alu(Ops::IDiv, DType::FLOAT32, &[F(-7.5), F(2.0)]), F(-3.0));
        assert_eq!(alu(Ops::Mod, DType::FLOAT32, &[F(-7.5), F(2.0)]), F(-1.5));
        assert_eq!(alu(Ops::Mod, DType::FLOAT64, &[F(7.5), F(-2.0)]), F(1.5));
        // (1+2^-12)^2 - (1+2^-11) is 2^-24 fused; the float32 product alone rounds (a tie, to
        // even) to 1+2^-11, so Mul then Add gives 0
        let a = F(1.0 + pow2(-12));
        assert_eq!(alu(Ops::MulAcc, DType::FLOAT32, &[a, a, F(-1.0 - pow2(-11))]), F(pow2(-24)));
        assert_eq!(alu(Ops::MulAcc, DType::FLOAT64, &[a, a, F(-1.0 - pow2(-11))]), F(pow2(-24)));
        let product = alu(Ops::Mul, DType::FLOAT32, &[a, a]);
        assert_eq!(alu(Ops::Add, DType::FLOAT32, &[product, F(-1.0 - pow2(-11))]), F(0.0));
    }

    #[test]
    fn half_and_bfloat16_round_to_nearest_even() {
        let (h, bf) = (DType::FLOAT16, DType::BFLOAT16);
        assert_eq!(alu(Ops::Add, h, &[F(1.0), F(pow2(-11))]), F(1.0));
        assert_eq!(alu(Ops::Add, h, &[F(1.0 + pow2(-10)), F(pow2(-11))]), F(1.0 + pow2(-9)));
        assert_eq!(alu(Ops::Add, h, &[F(65504.0), F(16.0)]), F(f64::INFINITY));
        assert_eq!(alu(Ops::Add, h, &[F(65504.0), F(15.0)]), F(65504.0));
        assert_eq!(alu(Ops::FDiv, h, &[F(1.0), F(3.0)]), F(half::f16::from_f32(1.0 / 3.0).to_f64()));
        assert_eq!(alu(Ops::Add, bf, &[F(1.0), F(pow2(-8))]), F(1.0));
        assert_eq!(alu(Ops::Add, bf, &[F(1.0), F(3.0 * pow2(-8))]), F(1.0 + pow2(-6)));
        assert_eq!(alu(Ops::Exp2, h, &[F(0.5)]), F(half::f16::from_f32(0.5f32.exp2()).to_f64()));
        // Single rounding from f64 (no double rounding through f32), subnormals, ints.
        assert_eq!(cast_const(F(1.0 + pow2(-11) + pow2(-40)), h), F(1.0 + pow2(-10)));
        assert_eq!(cast_const(F(pow2(-25)), h), F(0.0));
        assert_eq!(cast_const(F(3.0 * pow2(-26)), h), F(pow2(-24)));
        assert_eq!(cast_const(F(-1e-30), h), F(-0.0));
        // to bfloat16 through float32: 2^52 + 1 rounds to 2^52 there, a tie for bfloat16
        assert_eq!(cast_const(I((1 << 60) + (1 << 52) + 1), bf), F(pow2(60)));
        assert_eq!(cast_const(I((1 << 60) + (1 << 52) + (1 << 40)), bf), F(pow2(60) + pow2(53)));
        assert_eq!(cast_const(F(1.0 + pow2(-8) + pow2(-30)), bf), F(1.0));
        assert_eq!(cast_const(I(-65519), h), F(-65504.0));
        assert_eq!(cast_const(I(65520), h), F(f64::INFINITY));
        assert_eq!(
            cast_const(I((1 << 60) + (1 << 36) + 1), DType::FLOAT32),
            F(((1u64 << 60) + (1 << 36) + 1) as f32 as f64)
        );
    }

    #[test]
    fn round_float_agrees_with_hardware_conversions() {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20000 {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let x = f64::from_bits(s);
            if x.is_nan() {
                continue;
            }
            assert_eq!(round_float(x, DType::FLOAT32).to_bits(), (x as f32 as f64).to_bits(), "{x:e}");
            let y = f32::from_bits((s >> 32) as u32);
            if !y.is_nan() {
                let want16 = half::f16::from_f32(y).to_f64().to_bits();
                assert_eq!(round_float(y as f64, DType::FLOAT16).to_bits(), want16, "{y:e}");
                let want_bf = half::bf16::from_f32(y).to_f64().to_bits();
                assert_eq!(round_float(y as f64, DType::BFLOAT16).to_bits(), want_bf, "{y:e}");
            }
            let i = s as i64 >> (s % 64);
            assert_eq!(cast_const(I(i), DType::FLOAT32), F(i as f32 as f64), "{i}");
            assert_eq!(cast_value(I(i), DType::UINT64, DType::FLOAT32), F(i as u64 as f32 as f64), "{i}");
        }
    }

    #[test]
    fn casts() {
        let f32_to = |x: f64, to: DType| cast_value(F(x), DType::FLOAT32, to);
        assert_eq!(f32_to(2.9, DType::INT32), I(2));
        assert_eq!(f32_to(-2.9, DType::INT32), I(-2));
        assert_eq!(f32_to(300.0, DType::UINT8), I(255));
        assert_eq!(f32_to(-1.0, DType::UINT8), I(0));
        assert_eq!(f32_to(f64::NAN, DType::INT32), I(0));
        assert_eq!(f32_to(1e20, DType::INT64), I(i64::MAX));
        assert_eq!(f32_to(-1e20, DType::INT64), I(i64::MIN));
        assert_eq!(f32_to(1e20, DType::UINT64), I(-1));
        assert_eq!(f32_to(-f64::INFINITY, DType::INT16), I(-32768));
        assert_eq!(f32_to(f64::NAN, DType::BOOL), B(true));
        assert_eq!(f32_to(-0.0, DType::BOOL), B(false));
        assert_eq!(f32_to(0.1, DType::FLOAT16), F(half::f16::from_f64(0.1).to_f64()));
        assert_eq!(cast_value(F(0.1), DType::FLOAT64, DType::FLOAT32), f32v(0.1));
        assert_eq!(cast_value(F(f64::MAX), DType::FLOAT64, DType::FLOAT32), F(f64::INFINITY));
        assert_eq!(cast_value(I(-1), DType::INT32, DType::UINT8), I(255));
        assert_eq!(cast_value(I(255), DType::UINT8, DType::INT8), I(-1));
        assert_eq!(cast_value(I(4294967295), DType::UINT32, DType::INT64), I(4294967295));
        assert_eq!(cast_value(I(-1), DType::INT8, DType::UINT64), I(-1));
        assert_eq!(cast_value(I(-3), DType::INT8, DType::FLOAT32), F(-3.0));
        assert_eq!(cast_value(I(256), DType::INT16, DType::BOOL), B(true));
        assert_eq!(cast_value(B(true), DType::BOOL, DType::FLOAT16), F(1.0));
        assert_eq!(cast_value(B(true), DType::BOOL, DType::INT8), I(1));
        assert_eq!(cast_const(F(-2.5), DType::INT8), I(-2));
        assert_eq!(cast_const(F(300.0), DType::UINT8), I(44));
        assert_eq!(cast_const(F(1e10), DType::INT32), I(1410065408));
        assert_eq!(cast_const(B(true), DType::FLOAT32), F(1.0));
        assert_eq!(cast_const(I(3), DType::BOOL), B(true));
        assert_eq!(cast_const(I(7), DType::INDEX), I(7));
    }

    #[test]
    fn float_to_int_casts_are_rusts_as() {
        let edges = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, -0.9, -1.5, 300.7, 2147483648.0, 1e20, -1e20];
        for x in edges {
            for (from, y) in [(DType::FLOAT64, x), (DType::FLOAT32, x as f32 as f64)] {
                let to = |d: DType| cast_value(F(y), from, d);
                assert_eq!(to(DType::INT8), I(y as i8 as i64), "{y}");
                assert_eq!(to(DType::UINT8), I(y as u8 as i64), "{y}");
                assert_eq!(to(DType::INT16), I(y as i16 as i64), "{y}");
                assert_eq!(to(DType::UINT16), I(y as u16 as i64), "{y}");
                assert_eq!(to(DType::INT32), I(y as i32 as i64), "{y}");
                assert_eq!(to(DType::UINT32), I(y as u32 as i64), "{y}");
                assert_eq!(to(DType::INT64), I(y as i64), "{y}");
                assert_eq!(to(DType::UINT64), I(y as u64 as i64), "{y}");
            }
        }
    }

    #[test]
    fn bitcasts() {
        assert_eq!(bitcast_value(F(1.0), DType::FLOAT32, DType::INT32), I(1065353216));
        assert_eq!(bitcast_value(I(1065353216), DType::INT32, DType::FLOAT32), F(1.0));
        assert_eq!(bitcast_value(F(-1.0), DType::FLOAT32, DType::UINT32), I(0xBF80_0000));
        assert_eq!(bitcast_value(F(1.0), DType::FLOAT16, DType::UINT16), I(0x3C00));
        assert_eq!(bitcast_value(F(-2.0), DType::FLOAT16, DType::INT16), I(-16384));
        assert_eq!(bitcast_value(I(0x3C00), DType::INT16, DType::FLOAT16), F(1.0));
        assert_eq!(bitcast_value(F(1.0), DType::BFLOAT16, DType::UINT16), I(0x3F80));
        assert_eq!(bitcast_value(I(0xC000), DType::UINT16, DType::BFLOAT16), F(-2.0));
        assert_eq!(bitcast_value(F(1.0), DType::FLOAT64, DType::INT64), I(0x3FF0_0000_0000_0000));
        assert_eq!(bitcast_value(I(-1), DType::INT32, DType::UINT32), I(0xFFFF_FFFF));
        assert_eq!(bitcast_value(I(-1), DType::UINT64, DType::INT64), I(-1));
        assert!(bitcast_value(I(-1), DType::INT16, DType::FLOAT16).as_f64().is_nan());
        assert!(bitcast_value(I(0xFFFF_FFFF), DType::UINT32, DType::FLOAT32).as_f64().is_nan());
    }

    #[test]
    fn nan_compares_and_max() {
        let nan = F(f64::NAN);
        assert_eq!(alu(Ops::CmpNe, DType::FLOAT32, &[nan, nan]), B(true));
        assert_eq!(alu(Ops::CmpEq, DType::FLOAT32, &[nan, nan]), B(false));
        assert_eq!(alu(Ops::CmpLt, DType::FLOAT32, &[nan, F(1.0)]), B(false));
        assert_eq!(alu(Ops::CmpLt, DType::FLOAT64, &[F(1.0), nan]), B(false));
        assert_eq!(alu(Ops::CmpLt, DType::FLOAT16, &[F(-0.0), F(0.0)]), B(false));
        assert!(alu(Ops::Max, DType::FLOAT32, &[nan, F(1.0)]).as_f64().is_nan());
        assert!(alu(Ops::Max, DType::FLOAT32, &[F(1.0), nan]).as_f64().is_nan());
        assert_eq!(alu(Ops::Max, DType::FLOAT32, &[F(-1.0), F(2.0)]), F(2.0));
        assert!(alu(Ops::Sqrt, DType::FLOAT16, &[F(-1.0)]).as_f64().is_nan());
    }

    #[test]
    fn int_float_formulas_cast_back() {
        assert_eq!(alu(Ops::Sqrt, DType::INT32, &[I(17)]), I(4));
        assert_eq!(alu(Ops::Pow, DType::INT64, &[I(3), I(4)]), I(81));
        assert_eq!(alu(Ops::FDiv, DType::UINT64, &[I(-1), I(1 << 32)]), I(4294967296));
    }

    #[test]
    #[should_panic(expected = "Load")]
    fn non_alu_op_panics() {
        alu(Ops::Load, DType::FLOAT32, &[F(1.0)]);
    }

    #[test]
    #[should_panic(expected = "Xor")]
    fn bitwise_on_floats_panics() {
        alu(Ops::Xor, DType::FLOAT32, &[F(1.0), F(2.0)]);
    }
}
