//! The WGSL dialect for WebGPU: kernels as `@compute` entry points over `@group(0)` storage
//! bindings, launched as workgroups (`workgroup_id`, `local_invocation_id`), `var<workgroup>`
//! arrays and `workgroupBarrier()`. Scalar code: a GPU's threads fill its SIMD lanes.
//!
//! WGSL has 32-bit integers, `f32`, `bool` and (with `shader-f16`) `f16`, and no pointers into
//! storage narrower than 32 bits. So, as tinygrad's WGSL renderer does:
//! - 8- and 16-bit integers and bool compute in 32-bit registers (wrapped back to their width
//!   after each op) and are stored packed into `u32` words: a load shifts its element out, a
//!   store clears and sets its bits with atomics, so neighbouring threads writing the same word
//!   do not undo each other;
//! - float16 without `shader-f16`, and bfloat16 always, are stored as their bits and computed in
//!   float32; index arithmetic is `i32`; 64-bit types are refused by codegen (the target lacks
//!   them), so a kernel that needs them is an error naming the dtype;
//! - no literal spells inf or NaN, and an implementation may assume values are never NaN, so
//!   both are bit patterns and NaN tests look at the bits;
//! - shift amounts are `u32`, `where` is `select`, and a kernel's variables are the fields of one
//!   uniform struct bound after its buffers.

use super::cstyle::{self, Dialect, Param};
use super::Renderer;
use crate::dtype::{DType, Scalar};
use crate::uop::Target;
use crate::uop::{Arg, ConstValue, LinearProgram, Ops, Special, UOp};

/// Renders kernels as WGSL for a WebGPU device described by `target`.
pub struct WgslRenderer {
    pub target: Target,
}

/// The dialect for one kernel: its workgroup size goes into `@workgroup_size`.
struct Wgsl {
    /// Whether the adapter computes in `f16` (`shader-f16`); else float16 is stored as bits.
    half: bool,
    workgroup: [usize; 3],
    /// Whether the kernel computes in `f16`, which must be enabled first.
    uses_half: bool,
    /// The helper functions the kernel calls (`lg_pow`, and the conversions of 16-bit floats
    /// stored as bits).
    helpers: Vec<&'static str>,
}

/// The helper functions a kernel may call, by name: C's pow; bfloat16 stored as its 16 bits,
/// converted rounding to nearest even (NaN stays NaN); float16 stored as its bits, converted by
/// WGSL's packing built-ins.
const HELPERS: [(&str, &str); 5] = [
    (
        "lg_pow",
        concat!(
            // |x|^y, negative bases only to integral powers, x^0 = 1^y = 1
            "fn lg_pow(x: f32, y: f32) -> f32 {\n",
            "  if (y == 0.0f || x == 1.0f) { return 1.0f; }\n",
            "  let r = pow(abs(x), y);\n",
            "  let integral = trunc(y) == y;\n",
            "  let odd = integral && abs(y) < 16777216.0f && (i32(abs(y)) & 1) == 1;\n",
            "  if (x < 0.0f && !integral) { return bitcast<f32>(0x7fc00000u); }\n",
            "  return select(r, -r, odd && (bitcast<u32>(x) & 0x80000000u) != 0u);\n",
            "}\n",
        ),
    ),
    ("lg_bf16_to_f32", "fn lg_bf16_to_f32(b: u32) -> f32 { return bitcast<f32>(b << 16u); }\n"),
    (
        "lg_f32_to_bf16",
        concat!(
            "fn lg_f32_to_bf16(f: f32) -> u32 {\n",
            "  let u = bitcast<u32>(f);\n",
            "  if ((u & 0x7fffffffu) > 0x7f800000u) { return ((u >> 16u) | 0x40u) & 0xffffu; }\n",
            "  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;\n",
            "}\n",
        ),
    ),
    ("lg_half_to_f32", "fn lg_half_to_f32(h: u32) -> f32 { return unpack2x16float(h).x; }\n"),
    ("lg_f32_to_half", "fn lg_f32_to_half(f: f32) -> u32 { return pack2x16float(vec2<f32>(f, 0.0f)) & 0xffffu; }\n"),
];

/// Launch dims of a workgroup: the sizes of the kernel's local index SPECIALs.
fn workgroup_size(uops: &[UOp]) -> [usize; 3] {
    let mut size = [1; 3];
    for u in uops {
        if let (Ops::Special, Arg::Special(Special::Local(d))) = (u.op(), u.arg()) {
            size[*d] = u.src()[0].vmax().max(1) as usize;
        }
    }
    size
}

/// The bit width of an integer dtype computed in a 32-bit register, if narrower.
fn narrow_bits(dtype: DType) -> Option<u32> {
    match dtype.scalar {
        Scalar::Int8 | Scalar::UInt8 => Some(8),
        Scalar::Int16 | Scalar::UInt16 => Some(16),
        _ => None,
    }
}

/// `x`, an `i32` whose low `bits` bits hold a signed value, sign-extended.
fn sign_extend(x: &str, bits: u32) -> String {
    format!("(({x} << {0}u) >> {0}u)", 32 - bits)
}

impl Wgsl {
    /// Whether a buffer of `dtype` is stored packed into `u32` words.
    fn packed(&self, dtype: DType) -> bool {
        dtype.itemsize() < 4 && !(dtype == DType::FLOAT16 && self.half)
    }

    /// The word and the shift of packed element `idx` of `buf_name`, elements of `bytes` bytes.
    fn packed_word(&self, buf_name: &str, idx: &str, bytes: usize) -> (String, String) {
        let per_word = 4 / bytes;
        (format!("{buf_name}[({idx}) / {per_word}]"), format!("(u32({idx}) % {per_word}u) * {}u", 8 * bytes))
    }

    /// The NaN test on the bits of float `a` (an `f16` widened to `f32`, which keeps NaN).
    fn nan_bits(&self, dtype: DType, a: &str) -> String {
        match dtype.scalar {
            Scalar::Float16 => format!("((bitcast<u32>(f32({a})) & 0x7fffffffu) > 0x7f800000u)"),
            _ => format!("((bitcast<u32>({a}) & 0x7fffffffu) > 0x7f800000u)"),
        }
    }

    /// The low 16 bits of `a` (of 16-bit type `from`) as a `u32`.
    fn bits16(&self, from: DType, a: &str) -> String {
        match from.scalar {
            Scalar::Float16 if self.half => format!("(pack2x16float(vec2<f32>(f32({a}), 0.0f)) & 0xffffu)"),
            Scalar::Int16 => format!("(bitcast<u32>({a}) & 0xffffu)"),
            _ => a.to_string(),
        }
    }
}

impl Dialect for Wgsl {
    fn type_name(&self, dtype: DType) -> String {
        let scalar = match dtype.scalar {
            Scalar::Void => "void",
            Scalar::Bool => "bool",
            Scalar::Int8 | Scalar::Int16 | Scalar::Int32 | Scalar::Index => "i32",
            Scalar::UInt8 | Scalar::UInt16 | Scalar::UInt32 | Scalar::BFloat16 => "u32",
            Scalar::Float16 if self.half => "f16",
            Scalar::Float16 => "u32",
            Scalar::Float32 => "f32",
            // codegen refuses these for a target without them; naga would reject the names
            Scalar::Int64 => "i64",
            Scalar::UInt64 => "u64",
            Scalar::Float64 => "f64",
        };
        match dtype.count {
            1 => scalar.to_string(),
            n => format!("vec{n}<{scalar}>"),
        }
    }
    fn buffer_type(&self, dtype: DType) -> String {
        match self.packed(dtype) {
            true => "atomic<u32>".into(),
            false => self.type_name(dtype),
        }
    }
    fn storage_only(&self, dtype: DType) -> Option<&'static str> {
        match dtype.scalar {
            Scalar::BFloat16 => Some("bf16"),
            Scalar::Float16 if !self.half => Some("half"),
            _ => None,
        }
    }
    fn literal(&self, v: ConstValue, dtype: DType) -> String {
        let storage_only = self.storage_only(dtype).is_some();
        // WGSL converts no literal to another type: the value as the dtype's kind
        let v = match v {
            _ if dtype.is_bool() => ConstValue::Bool(v.as_f64() != 0.0),
            _ if dtype.is_float() => ConstValue::Float(v.as_f64()),
            ConstValue::Bool(_) | ConstValue::Float(_) => ConstValue::Int(v.as_i64()),
            int => int,
        };
        match (v, dtype.scalar) {
            (ConstValue::Bool(b), _) => b.to_string(),
            (ConstValue::Float(f), Scalar::BFloat16) if storage_only => {
                format!("{}u", half::bf16::from_f64(f).to_bits())
            }
            (ConstValue::Float(f), Scalar::Float16) if storage_only => format!("{}u", half::f16::from_f64(f).to_bits()),
            (ConstValue::Float(f), Scalar::Float16) => match half::f16::from_f64(f) {
                h if h.is_finite() => format!("{:?}h", h.to_f32()),
                h => format!("f16(bitcast<f32>({:#010x}u))", h.to_f32().to_bits()),
            },
            (ConstValue::Float(f), _) => match f as f32 {
                x if x.is_finite() => format!("{x:?}f"),
                x => format!("bitcast<f32>({:#010x}u)", x.to_bits()),
            },
            (ConstValue::Int(i), _) if dtype.is_unsigned() => format!("{}u", i as u32),
            (ConstValue::Int(i), _) if i as i32 == i32::MIN => "i32(-2147483648)".into(),
            (ConstValue::Int(i), _) => format!("{}i", i as i32),
        }
    }
    fn declare(&self, ty: &str, name: &str, value: &str, mutable: bool) -> String {
        format!("{} {name}: {ty} = {value};", if mutable { "var" } else { "let" })
    }
    fn select(&self, cond: &str, a: &str, b: &str) -> String {
        format!("select({b}, {a}, {cond})")
    }
    fn guarded(&self, cond: &str, stmt: &str) -> String {
        format!("if ({cond}) {{ {stmt} }}")
    }
    fn loop_open(&self, name: &str, bound: &str) -> String {
        format!("for (var {name}: i32 = 0; {name} < {bound}; {name}++) {{")
    }
    fn cast(&self, to: DType, from: DType, value: &str) -> String {
        let ty = self.type_name(to);
        if to.is_bool() {
            return self
                .alu(Ops::CmpNe, from, &[], &[value.into(), self.literal(ConstValue::Int(0), from)])
                .unwrap_or_else(|| format!("({value} != {})", self.literal(ConstValue::Int(0), from)));
        }
        match (to.scalar, narrow_bits(to)) {
            (Scalar::Int8 | Scalar::Int16, Some(bits)) => sign_extend(&format!("{ty}({value})"), bits),
            (_, Some(bits)) => format!("({ty}({value}) & {:#x}u)", (1u64 << bits) - 1),
            // a 16-bit float stored as bits converts through float32 (`storage_only`), so a cast
            // here is between two register types
            _ => {
                let _ = from;
                format!("{ty}({value})")
            }
        }
    }
    fn is_nan(&self, dtype: DType, a: &str) -> String {
        self.nan_bits(dtype, a)
    }
    fn alu(&self, op: Ops, dtype: DType, srcs: &[UOp], a: &[String]) -> Option<String> {
        let float = dtype.is_float();
        Some(match op {
            // bools have no arithmetic, no order and no xor: C's on 0 and 1, as bool
            Ops::CmpLt if dtype.is_bool() => format!("(!{} && {})", a[0], a[1]),
            Ops::Xor | Ops::Sub if dtype.is_bool() => format!("({} != {})", a[0], a[1]),
            Ops::Max | Ops::Add if dtype.is_bool() => format!("({} || {})", a[0], a[1]),
            Ops::Mul if dtype.is_bool() => format!("({} && {})", a[0], a[1]),
            Ops::CmpNe if float && srcs.len() == 2 && srcs[0] == srcs[1] => self.nan_bits(dtype, &a[0]),
            Ops::CmpEq if float && srcs.len() == 2 && srcs[0] == srcs[1] => {
                format!("(!{})", self.nan_bits(dtype, &a[0]))
            }
            // `!=` may be compiled as an ordered comparison, false for NaN
            Ops::CmpNe if float => format!("(!({} == {}))", a[0], a[1]),
            Ops::Shl => format!("({} << u32({}))", a[0], a[1]),
            Ops::Shr => format!("({} >> u32({}))", a[0], a[1]),
            Ops::Neg if dtype.is_unsigned() => format!("(0u - {})", a[0]),
            Ops::Mod if float => format!("({} % {})", a[0], a[1]),
            Ops::Recip => format!("({} / {})", self.literal(ConstValue::Float(1.0), dtype), a[0]),
            Ops::Pow => format!("lg_pow({}, {})", a[0], a[1]),
            _ => return None,
        })
    }
    fn wrap(&self, dtype: DType, expr: String) -> String {
        match (dtype.scalar, narrow_bits(dtype)) {
            (Scalar::Int8 | Scalar::Int16, Some(bits)) => sign_extend(&expr, bits),
            (_, Some(bits)) => format!("({expr} & {:#x}u)", (1u64 << bits) - 1),
            _ => expr,
        }
    }
    fn signed_overflow_wraps(&self) -> bool {
        true
    }
    fn load(&self, buf: &UOp, dtype: DType, buf_name: &str, idx: &str) -> String {
        if buf.op() != Ops::Param || !self.packed(dtype) {
            return format!("{buf_name}[{idx}]");
        }
        let (word, shift) = self.packed_word(buf_name, idx, dtype.itemsize());
        let bits = format!("((atomicLoad(&{word}) >> ({shift})) & {:#x}u)", (1u64 << (8 * dtype.itemsize())) - 1);
        match dtype.scalar {
            Scalar::Bool => format!("({bits} != 0u)"),
            Scalar::Int8 | Scalar::Int16 => sign_extend(&format!("bitcast<i32>({bits})"), 8 * dtype.itemsize() as u32),
            _ => bits,
        }
    }
    fn store(&self, buf: &UOp, dtype: DType, buf_name: &str, idx: &str, value: &str) -> String {
        if buf.op() != Ops::Param || !self.packed(dtype) {
            return format!("{buf_name}[{idx}] = {value};");
        }
        let (word, shift) = self.packed_word(buf_name, idx, dtype.itemsize());
        let mask = format!("{:#x}u", (1u64 << (8 * dtype.itemsize())) - 1);
        let bits = match dtype.scalar {
            Scalar::Bool => format!("select(0u, 1u, {value})"),
            Scalar::Int8 | Scalar::Int16 => format!("bitcast<u32>({value})"),
            _ => value.to_string(),
        };
        format!("atomicAnd(&{word}, ~({mask} << ({shift}))); atomicOr(&{word}, ({bits} & {mask}) << ({shift}));")
    }
    fn variable(&self, name: &str) -> String {
        format!("vars.{name}")
    }
    fn locals_outside(&self) -> bool {
        true
    }
    fn once(&self, _what: &str, code: &str) -> String {
        code.to_string()
    }
    fn prelude(&self) -> String {
        let enable = if self.uses_half { "enable f16;\n" } else { "" };
        let helpers = HELPERS.iter().filter(|(name, _)| self.helpers.contains(name)).map(|(_, code)| *code);
        std::iter::once(enable).chain(helpers).collect()
    }
    /// The buffers as storage bindings in slot order, the variables one uniform struct bound
    /// after them, and the entry point with its workgroup size.
    fn signature(&self, name: &str, params: &[Param]) -> String {
        let buffers = params.iter().filter(|p| !p.by_value);
        let vars: Vec<&Param> = params.iter().filter(|p| p.by_value).collect();
        let mut s = String::new();
        for (binding, p) in buffers.clone().enumerate() {
            s += &format!("@group(0) @binding({binding}) var<storage, read_write> {}: array<{}>;\n", p.name, p.ty);
        }
        if !vars.is_empty() {
            let fields: Vec<String> = vars.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
            s += &format!("struct Vars {{ {} }}\n", fields.join(", "));
            s += &format!("@group(0) @binding({}) var<uniform> vars: Vars;\n", buffers.count());
        }
        let [x, y, z] = self.workgroup;
        s + &format!(
            "@compute @workgroup_size({x}, {y}, {z})\nfn {name}(@builtin(workgroup_id) gindex: vec3<u32>, @builtin(local_invocation_id) lindex: vec3<u32>)"
        )
    }
    fn epilogue(&self, _name: &str, _params: &[Param]) -> String {
        String::new()
    }
    fn math_name(&self, f: &str, _float32: bool) -> String {
        // WGSL's math built-ins are overloaded for f32 and f16
        f.to_string()
    }
    fn math(&self, f: &str, _dtype: DType, args: &[String]) -> String {
        format!("{f}({})", args.join(", "))
    }
    fn bitcast(&self, from: DType, to: DType, a: &str) -> String {
        match to.itemsize() {
            4 => format!("bitcast<{}>({a})", self.type_name(to)),
            2 => {
                let bits = self.bits16(from, a);
                match to.scalar {
                    Scalar::Float16 if self.half => format!("f16(unpack2x16float({bits}).x)"),
                    Scalar::Int16 => sign_extend(&format!("bitcast<i32>({bits})"), 16),
                    _ => bits,
                }
            }
            _ => match to.scalar {
                Scalar::Int8 => sign_extend(&format!("bitcast<i32>({a})"), 8),
                _ => format!("(bitcast<u32>({a}) & 0xffu)"),
            },
        }
    }
    fn special(&self, which: Special) -> String {
        match which {
            Special::Group(d) => format!("i32(gindex.{})", ["x", "y", "z"][d]),
            Special::Local(d) => format!("i32(lindex.{})", ["x", "y", "z"][d]),
            other => panic!("WGSL renderer: no launch index {other} on a GPU target"),
        }
    }
    fn local_array(&self, dtype: DType, name: &str, size: &str) -> String {
        format!("var<workgroup> {name}: array<{}, {size}>;", self.type_name(dtype))
    }
    fn barrier(&self) -> String {
        "workgroupBarrier();".into()
    }
}

impl Renderer for WgslRenderer {
    fn language(&self) -> &'static str {
        "wgsl"
    }
    fn target(&self) -> Target {
        self.target.clone()
    }
    fn supports(&self, _op: Ops) -> bool {
        true
    }
    fn render(&self, name: &str, uops: &LinearProgram) -> String {
        let half = self.target.dtypes.half;
        let uses_half = half && uops.iter().any(|u| u.dtype().scalar == Scalar::Float16);
        let mut wgsl = Wgsl { half, workgroup: workgroup_size(uops), uses_half, helpers: vec![] };
        for u in uops {
            let from = u.src().first().map(|s| s.dtype());
            let called = match u.op() {
                Ops::Pow => Some("lg_pow"),
                Ops::Cast => match (wgsl.storage_only(u.dtype()), from.and_then(|f| wgsl.storage_only(f))) {
                    (Some("bf16"), _) => Some("lg_f32_to_bf16"),
                    (Some(_), _) => Some("lg_f32_to_half"),
                    (_, Some("bf16")) => Some("lg_bf16_to_f32"),
                    (_, Some(_)) => Some("lg_half_to_f32"),
                    _ => None,
                },
                _ => None,
            };
            wgsl.helpers.extend(called.filter(|c| !wgsl.helpers.contains(c)));
        }
        cstyle::render(&wgsl, &self.target, name, uops)
    }
}
