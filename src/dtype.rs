//! Data types: the scalar set, vectors and pointers used by kernels, and tinygrad's promotion
//! lattice.

use std::fmt;

/// The scalar kinds. `Index` is the type of index arithmetic (an unbounded integer in the IR,
/// rendered as a 64-bit integer); `Void` types statements such as STORE and SINK.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Scalar {
    Void,
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float16,
    BFloat16,
    Float32,
    Float64,
    Index,
}

/// Where a pointer points.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum AddrSpace {
    Global,
    Local,
    Reg,
}

/// A value's type: a scalar, a vector of `count` scalars, or a pointer to scalars.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DType {
    pub scalar: Scalar,
    pub count: u16,
    pub ptr: Option<AddrSpace>,
}

impl DType {
    const fn of(scalar: Scalar) -> DType {
        DType { scalar, count: 1, ptr: None }
    }
    pub const VOID: DType = DType::of(Scalar::Void);
    pub const BOOL: DType = DType::of(Scalar::Bool);
    pub const INT8: DType = DType::of(Scalar::Int8);
    pub const INT16: DType = DType::of(Scalar::Int16);
    pub const INT32: DType = DType::of(Scalar::Int32);
    pub const INT64: DType = DType::of(Scalar::Int64);
    pub const UINT8: DType = DType::of(Scalar::UInt8);
    pub const UINT16: DType = DType::of(Scalar::UInt16);
    pub const UINT32: DType = DType::of(Scalar::UInt32);
    pub const UINT64: DType = DType::of(Scalar::UInt64);
    pub const FLOAT16: DType = DType::of(Scalar::Float16);
    pub const BFLOAT16: DType = DType::of(Scalar::BFloat16);
    pub const FLOAT32: DType = DType::of(Scalar::Float32);
    pub const FLOAT64: DType = DType::of(Scalar::Float64);
    pub const INDEX: DType = DType::of(Scalar::Index);

    /// Every dtype a tensor can hold, in tinygrad's promotion-priority order.
    pub const ALL: [DType; 13] = [
        DType::BOOL,
        DType::INT8,
        DType::UINT8,
        DType::INT16,
        DType::UINT16,
        DType::INT32,
        DType::UINT32,
        DType::INT64,
        DType::UINT64,
        DType::FLOAT16,
        DType::BFLOAT16,
        DType::FLOAT32,
        DType::FLOAT64,
    ];

    /// The element type behind a pointer or vector.
    pub fn base(self) -> DType {
        DType::of(self.scalar)
    }
    /// A vector of `n` of this scalar.
    pub fn vec(self, n: u16) -> DType {
        DType { count: n, ..self.base() }
    }
    /// A pointer to this scalar in `space`.
    pub fn ptr(self, space: AddrSpace) -> DType {
        DType { ptr: Some(space), ..self }
    }
    pub fn is_ptr(self) -> bool {
        self.ptr.is_some()
    }
    pub fn is_float(self) -> bool {
        matches!(self.scalar, Scalar::Float16 | Scalar::BFloat16 | Scalar::Float32 | Scalar::Float64)
    }
    pub fn is_int(self) -> bool {
        self.is_signed() || self.is_unsigned()
    }
    pub fn is_signed(self) -> bool {
        matches!(self.scalar, Scalar::Int8 | Scalar::Int16 | Scalar::Int32 | Scalar::Int64 | Scalar::Index)
    }
    pub fn is_unsigned(self) -> bool {
        matches!(self.scalar, Scalar::UInt8 | Scalar::UInt16 | Scalar::UInt32 | Scalar::UInt64)
    }
    pub fn is_bool(self) -> bool {
        self.scalar == Scalar::Bool
    }
    /// Size of one scalar element in bytes (`Index` counts as 8).
    pub fn itemsize(self) -> usize {
        match self.scalar {
            Scalar::Void => 0,
            Scalar::Bool | Scalar::Int8 | Scalar::UInt8 => 1,
            Scalar::Int16 | Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => 2,
            Scalar::Int32 | Scalar::UInt32 | Scalar::Float32 => 4,
            Scalar::Int64 | Scalar::UInt64 | Scalar::Float64 | Scalar::Index => 8,
        }
    }
    /// Bits of an integer dtype (64 for `Index`).
    pub fn bits(self) -> u32 {
        (self.itemsize() * 8) as u32
    }
    /// The dtype numpy and torch call `name` (`"int8"`, `"uint64"`, `"bfloat16"`, `"float32"`, ...;
    /// torch's without the `torch.` prefix), or `None` for any other name.
    pub fn from_name(name: &str) -> Option<DType> {
        Some(match name {
            "bool" => DType::BOOL,
            "int8" => DType::INT8,
            "int16" => DType::INT16,
            "int32" => DType::INT32,
            "int64" => DType::INT64,
            "uint8" => DType::UINT8,
            "uint16" => DType::UINT16,
            "uint32" => DType::UINT32,
            "uint64" => DType::UINT64,
            "float16" => DType::FLOAT16,
            "bfloat16" => DType::BFLOAT16,
            "float32" => DType::FLOAT32,
            "float64" => DType::FLOAT64,
            _ => return None,
        })
    }
    /// tinygrad's name of the dtype.
    pub fn name(self) -> &'static str {
        match self.scalar {
            Scalar::Void => "void",
            Scalar::Bool => "bool",
            Scalar::Int8 => "char",
            Scalar::Int16 => "short",
            Scalar::Int32 => "int",
            Scalar::Int64 => "long",
            Scalar::UInt8 => "uchar",
            Scalar::UInt16 => "ushort",
            Scalar::UInt32 => "uint",
            Scalar::UInt64 => "ulong",
            Scalar::Float16 => "half",
            Scalar::BFloat16 => "bfloat16",
            Scalar::Float32 => "float",
            Scalar::Float64 => "double",
            Scalar::Index => "index",
        }
    }

    /// The types `self` promotes to directly (tinygrad's lattice edges).
    fn parents(self) -> &'static [DType] {
        match self.scalar {
            Scalar::Bool => &[DType::INT8, DType::UINT8],
            Scalar::Int8 => &[DType::INT16],
            Scalar::Int16 => &[DType::INT32],
            Scalar::Int32 => &[DType::INT64],
            Scalar::Int64 => &[DType::FLOAT16, DType::BFLOAT16],
            Scalar::UInt8 => &[DType::INT16, DType::UINT16],
            Scalar::UInt16 => &[DType::INT32, DType::UINT32],
            Scalar::UInt32 => &[DType::INT64, DType::UINT64],
            Scalar::UInt64 => &[DType::FLOAT16, DType::BFLOAT16],
            Scalar::Float16 | Scalar::BFloat16 => &[DType::FLOAT32],
            Scalar::Float32 => &[DType::FLOAT64],
            _ => &[],
        }
    }

    /// Every type `self` can promote to, itself included.
    fn upper_set(self) -> Vec<DType> {
        let mut out = vec![self];
        let mut i = 0;
        while i < out.len() {
            for p in out[i].parents() {
                if !out.contains(p) {
                    out.push(*p);
                }
            }
            i += 1;
        }
        out
    }

    /// The least upper bound of two dtypes in the promotion lattice.
    pub fn least_upper(a: DType, b: DType) -> DType {
        if a == b {
            return a;
        }
        let (ua, ub) = (a.upper_set(), b.upper_set());
        // As tinygrad: the lowest-priority type both can promote to.
        DType::ALL.into_iter().find(|d| ua.contains(d) && ub.contains(d)).unwrap_or(DType::FLOAT64)
    }

    /// The float type an op on `self` computes in (ints become the default float).
    pub fn to_float(self) -> DType {
        if self.is_float() {
            self
        } else {
            DType::FLOAT32
        }
    }

    /// Smallest and largest value of an integer or bool dtype, as i128.
    pub fn int_range(self) -> (i128, i128) {
        match self.scalar {
            Scalar::Bool => (0, 1),
            Scalar::Index => (i64::MIN as i128, i64::MAX as i128),
            _ if self.is_signed() => {
                let b = self.bits();
                (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
            }
            _ if self.is_unsigned() => (0, (1i128 << self.bits()) - 1),
            _ => (i128::MIN, i128::MAX),
        }
    }
}

impl fmt::Debug for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "dtypes.{}", self.name())?;
        if self.count > 1 {
            write!(f, ".vec({})", self.count)?;
        }
        if let Some(space) = self.ptr {
            write!(f, ".ptr({space:?})")?;
        }
        Ok(())
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Rust element types that can move in and out of tensors.
pub trait Element: Copy + Send + Sync + 'static + fmt::Debug {
    const DTYPE: DType;
    /// Little-endian bytes of the value.
    fn write_le(self, out: &mut Vec<u8>);
    /// The value from `DTYPE.itemsize()` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element byte width"))
            }
        }
    };
}
element!(i8, DType::INT8);
element!(i16, DType::INT16);
element!(i32, DType::INT32);
element!(i64, DType::INT64);
element!(u8, DType::UINT8);
element!(u16, DType::UINT16);
element!(u32, DType::UINT32);
element!(u64, DType::UINT64);
element!(half::f16, DType::FLOAT16);
element!(half::bf16, DType::BFLOAT16);
element!(f32, DType::FLOAT32);
element!(f64, DType::FLOAT64);

impl Element for bool {
    const DTYPE: DType = DType::BOOL;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promotion_matches_tinygrad() {
        let lub = DType::least_upper;
        assert_eq!(lub(DType::BOOL, DType::INT32), DType::INT32);
        assert_eq!(lub(DType::INT8, DType::UINT8), DType::INT16);
        assert_eq!(lub(DType::UINT32, DType::INT32), DType::INT64);
        assert_eq!(lub(DType::INT64, DType::UINT64), DType::FLOAT16);
        assert_eq!(lub(DType::FLOAT16, DType::BFLOAT16), DType::FLOAT32);
        assert_eq!(lub(DType::INT32, DType::FLOAT16), DType::FLOAT16);
        assert_eq!(lub(DType::FLOAT32, DType::FLOAT64), DType::FLOAT64);
        assert_eq!(lub(DType::BOOL, DType::BOOL), DType::BOOL);
        assert_eq!(lub(DType::BOOL, DType::UINT8), DType::UINT8);
        assert_eq!(lub(DType::UINT8, DType::UINT32), DType::UINT32);
        assert_eq!(lub(DType::UINT8, DType::INT8), DType::INT16);
    }

    #[test]
    fn ranges_and_sizes() {
        assert_eq!(DType::INT8.int_range(), (-128, 127));
        assert_eq!(DType::UINT16.int_range(), (0, 65535));
        assert_eq!(DType::BFLOAT16.itemsize(), 2);
        assert_eq!(DType::FLOAT32.ptr(AddrSpace::Global).base(), DType::FLOAT32);
    }

    #[test]
    fn from_numpy_and_torch_names() {
        let names = [
            "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
            "float32", "float64",
        ];
        // Every tensor dtype has exactly its numpy/torch name (same order as `ALL`).
        for (name, dtype) in names.iter().zip(DType::ALL) {
            assert_eq!(DType::from_name(name), Some(dtype), "{name:?}");
        }
        for name in ["float", "int", "half", "index", "void", "torch.float32", ""] {
            assert_eq!(DType::from_name(name), None, "{name:?}");
        }
    }
}
