//! Casts of edge values on the CPU and INTERP devices, checked against the rule `uop/exec.rs`
//! documents, restated here with Rust's own conversions:
//!
//! - float to integer truncates toward zero; NaN gives 0 and values past the type's range its
//!   min or max (Rust's `as`), where C leaves them undefined;
//! - anything to bool is `!= 0` (NaN is true);
//! - integer to integer wraps to the target's width;
//! - integer or float to float rounds once to nearest even (±inf past the range), except to
//!   bfloat16, which goes through float32 first (as PyTorch's conversions do).
//!
//! Every source dtype is cast to every other one, edge values and random bit patterns alike. With
//! `SANITIZE=1` (`docs/env.md`) the CPU kernels also prove that no cast is undefined in C.

use half::{bf16, f16};
use lazygrad::dtype::Scalar;
use lazygrad::{DType, Tensor};

/// A value of any dtype: floats exactly as f64, integers and bools as i128.
#[derive(Clone, Copy, Debug)]
enum V {
    F(f64),
    I(i128),
}

impl PartialEq for V {
    /// Floats equal bit for bit (so -0.0 is not 0.0), any NaN equal to any NaN.
    fn eq(&self, other: &V) -> bool {
        match (self, other) {
            (V::F(a), V::F(b)) => (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits(),
            (V::I(a), V::I(b)) => a == b,
            _ => false,
        }
    }
}

/// `vals` as the little-endian bytes of `d` (floats rounded, integers wrapped to it).
fn encode(d: DType, vals: &[V]) -> Vec<u8> {
    let mut out = vec![];
    for &v in vals {
        let (f, i) = match v {
            V::F(f) => (f, f as i128),
            V::I(i) => (i as f64, i),
        };
        match d.scalar {
            Scalar::Bool => out.push((i != 0) as u8),
            Scalar::Int8 => out.extend((i as i8).to_le_bytes()),
            Scalar::Int16 => out.extend((i as i16).to_le_bytes()),
            Scalar::Int32 => out.extend((i as i32).to_le_bytes()),
            Scalar::Int64 => out.extend((i as i64).to_le_bytes()),
            Scalar::UInt8 => out.extend((i as u8).to_le_bytes()),
            Scalar::UInt16 => out.extend((i as u16).to_le_bytes()),
            Scalar::UInt32 => out.extend((i as u32).to_le_bytes()),
            Scalar::UInt64 => out.extend((i as u64).to_le_bytes()),
            Scalar::Float16 => out.extend(f16::from_f64(f).to_le_bytes()),
            Scalar::BFloat16 => out.extend(bf16::from_f64(f).to_le_bytes()),
            Scalar::Float32 => out.extend((f as f32).to_le_bytes()),
            Scalar::Float64 => out.extend(f.to_le_bytes()),
            s => panic!("no tensors of {s:?}"),
        }
    }
    out
}

/// The values of dtype `d` in `bytes`.
fn decode(d: DType, bytes: &[u8]) -> Vec<V> {
    bytes
        .chunks_exact(d.itemsize())
        .map(|b| match d.scalar {
            Scalar::Bool => V::I((b[0] != 0) as i128),
            Scalar::Int8 => V::I(i8::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::Int16 => V::I(i16::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::Int32 => V::I(i32::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::Int64 => V::I(i64::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::UInt8 => V::I(b[0] as i128),
            Scalar::UInt16 => V::I(u16::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::UInt32 => V::I(u32::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::UInt64 => V::I(u64::from_le_bytes(b.try_into().unwrap()) as i128),
            Scalar::Float16 => V::F(f16::from_le_bytes(b.try_into().unwrap()).to_f64()),
            Scalar::BFloat16 => V::F(bf16::from_le_bytes(b.try_into().unwrap()).to_f64()),
            Scalar::Float32 => V::F(f32::from_le_bytes(b.try_into().unwrap()) as f64),
            Scalar::Float64 => V::F(f64::from_le_bytes(b.try_into().unwrap())),
            s => panic!("no tensors of {s:?}"),
        })
        .collect()
}

/// `x` rounded once to float16: to float32 rounding toward zero with the lowest bit set when
/// inexact ("round to odd", which float32's 13 spare bits make exact), then to nearest even.
fn f64_to_f16(x: f64) -> f16 {
    let f = x as f32;
    if x.is_nan() || f as f64 == x {
        return f16::from_f32(f);
    }
    let toward_zero = if (f as f64).abs() > x.abs() { f32::from_bits(f.to_bits() - 1) } else { f };
    f16::from_f32(f32::from_bits(toward_zero.to_bits() | 1))
}

/// The integer `i` (a value of any integer dtype) in integer or bool dtype `to`: wrapped.
fn int_to_int(i: i128, to: DType) -> V {
    V::I(match to.scalar {
        Scalar::Bool => (i != 0) as i128,
        Scalar::Int8 => i as i8 as i128,
        Scalar::Int16 => i as i16 as i128,
        Scalar::Int32 => i as i32 as i128,
        Scalar::Int64 => i as i64 as i128,
        Scalar::UInt8 => i as u8 as i128,
        Scalar::UInt16 => i as u16 as i128,
        Scalar::UInt32 => i as u32 as i128,
        Scalar::UInt64 => i as u64 as i128,
        s => panic!("{s:?} is no integer"),
    })
}

/// What the cast of `v` to `to` gives by the rule.
fn rule(v: V, to: DType) -> V {
    match (v, to.scalar) {
        (V::F(f), Scalar::Bool) => V::I((f != 0.0) as i128),
        (V::F(f), Scalar::Float64) => V::F(f),
        (V::F(f), Scalar::Float32) => V::F(f as f32 as f64),
        (V::F(f), Scalar::Float16) => V::F(f64_to_f16(f).to_f64()),
        (V::F(f), Scalar::BFloat16) => V::F(bf16::from_f32(f as f32).to_f64()),
        // Rust's float-to-integer `as` truncates, saturates and takes NaN to 0
        (V::F(f), Scalar::Int8) => V::I(f as i8 as i128),
        (V::F(f), Scalar::Int16) => V::I(f as i16 as i128),
        (V::F(f), Scalar::Int32) => V::I(f as i32 as i128),
        (V::F(f), Scalar::Int64) => V::I(f as i64 as i128),
        (V::F(f), Scalar::UInt8) => V::I(f as u8 as i128),
        (V::F(f), Scalar::UInt16) => V::I(f as u16 as i128),
        (V::F(f), Scalar::UInt32) => V::I(f as u32 as i128),
        (V::F(f), Scalar::UInt64) => V::I(f as u64 as i128),
        (V::F(_), s) => panic!("no tensors of {s:?}"),
        (V::I(i), Scalar::Float64) => V::F(i as f64),
        (V::I(i), Scalar::Float32) => V::F(i as f32 as f64),
        // every integer below 2^24 is exact in float32, every one from 65520 on is inf in float16
        (V::I(i), Scalar::Float16) => V::F(f16::from_f32(i as f32).to_f64()),
        (V::I(i), Scalar::BFloat16) => V::F(bf16::from_f32(i as f32).to_f64()),
        (V::I(i), _) => int_to_int(i, to),
    }
}

/// Floats at the edges: NaN, infinities, zeros, fractions, and the values around every integer
/// type's ends and each float type's largest finite values and rounding ties.
fn float_edges() -> Vec<f64> {
    let p = |k: i32| 2f64.powi(k);
    let mut v = vec![
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.3,
        -0.3,
        0.99,
        -0.99,
        1.0,
        -1.0,
        1.5,
        -1.5,
        2.5,
        -2.5,
        1e20,
        -1e20,
        f32::MAX as f64,
        -(f32::MAX as f64),
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        5e-324,
        1e-40,
        -1e-45,
        65504.0,
        -65504.0,
        65519.0,
        65520.0,
        bf16::MAX.to_f64(),
        1.0 + p(-11),
        1.0 + p(-11) + p(-40),
        1.0 + p(-8) + p(-30),
        p(53) + 1.0,
    ];
    // each integer range's ends, and the floats just inside and outside them
    for bits in [8, 16, 32, 64] {
        for end in [p(bits - 1), -p(bits - 1), p(bits)] {
            let f32_ulp = (end.abs() * p(-23)).max(1.0);
            let f64_ulp = (end.abs() * p(-52)).max(1.0);
            v.extend([end, end - 1.0, end + 1.0, end - 0.5, end + 0.5, end - f32_ulp / 2.0, end + f32_ulp]);
            v.extend([end - f64_ulp / 2.0, end + f64_ulp, end * 1.5, end - 1.5]);
        }
    }
    v
}

/// Integers at the edges: every integer type's ends and their neighbours, and values that round
/// to a tie (or just past one) in float16, bfloat16 and float32.
fn int_edges() -> Vec<i128> {
    let mut v: Vec<i128> = vec![0, 1, -1, 2, -2, 3, 65504, 65519, 65520, -65520, 1 << 24, (1 << 24) + 1, (1 << 24) + 3];
    v.extend([(1 << 30) + (1 << 22) + 1, (1 << 53) + 1, (1 << 60) + (1 << 52) + 1, (1 << 63) + (1 << 39) + 1]);
    v.extend([0x5555_5555_5555_5555, -0x1234_5678_9abc_def0, 0x7fff_ff80_0000_0000, -0x7fff_ff80_0000_0001]);
    for d in [DType::INT8, DType::INT16, DType::INT32, DType::INT64, DType::UINT8, DType::UINT16, DType::UINT32] {
        let (lo, hi) = d.int_range();
        v.extend([lo, lo + 1, lo - 1, hi, hi - 1, hi + 1]);
    }
    v.extend([u64::MAX as i128, u64::MAX as i128 - 1]);
    v
}

/// `n` deterministic random 64-bit patterns.
fn random_bits(n: usize) -> Vec<u64> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            s ^ (s >> 29)
        })
        .collect()
}

/// The source values for dtype `d`: the edges and random bit patterns, as the dtype holds them.
fn sources(d: DType) -> Vec<V> {
    let vals: Vec<V> = match d.is_float() {
        true => {
            let mut v: Vec<V> = float_edges().into_iter().map(V::F).collect();
            // random float32 and float64 bit patterns: every exponent, huge and tiny alike
            v.extend(random_bits(96).into_iter().map(|b| V::F(f32::from_bits((b >> 32) as u32) as f64)));
            v.extend(random_bits(32).into_iter().map(|b| V::F(f64::from_bits(b.rotate_left(7)))));
            v
        }
        false => {
            let mut v: Vec<V> = int_edges().into_iter().map(V::I).collect();
            // random patterns shifted so that every magnitude occurs
            v.extend(random_bits(128).into_iter().map(|b| V::I((b as i64 >> (b % 64)) as i128)));
            v
        }
    };
    decode(d, &encode(d, &vals))
}

#[test]
fn casts_follow_the_rule_on_every_device() {
    let mut failures: Vec<String> = vec![];
    for device in ["CPU", "INTERP"] {
        let mut casts: Vec<(DType, DType, Vec<V>, Tensor)> = vec![];
        for from in DType::ALL {
            let src = sources(from);
            let t = Tensor::from_bytes(&encode(from, &src), &[src.len()], from, device);
            for to in DType::ALL.into_iter().filter(|to| *to != from) {
                casts.push((from, to, src.clone(), t.cast(to)));
            }
        }
        let outs: Vec<Tensor> = casts.iter().map(|c| c.3.clone()).collect();
        Tensor::realize_all(&outs).unwrap_or_else(|e| panic!("{device}: {e}"));
        for (from, to, src, out) in &casts {
            let got = decode(*to, &out.raw_bytes().expect("read back"));
            let wrong: Vec<String> = src
                .iter()
                .zip(&got)
                .filter(|(x, g)| rule(**x, *to) != **g)
                .take(4)
                .map(|(x, g)| format!("{x:?} -> {g:?}, want {:?}", rule(*x, *to)))
                .collect();
            if !wrong.is_empty() {
                failures.push(format!("{device} {from:?} -> {to:?}: {}", wrong.join("; ")));
            }
        }
    }
    assert!(failures.is_empty(), "{} casts break the rule:\n{}", failures.len(), failures.join("\n"));
}
