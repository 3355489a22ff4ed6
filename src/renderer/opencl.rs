//! The OpenCL C dialect: kernels launched as workgroups (`get_group_id`, `get_local_id`),
//! `__local` arrays and barriers, OpenCL's built-in vector types and overloaded math.

use super::cstyle::{self, Dialect, Param};
use super::Renderer;
use crate::dtype::{DType, Scalar};
use crate::uop::Target;
use crate::uop::{LinearProgram, Ops, Special};

/// Renders kernels as OpenCL C for a device described by `target`.
pub struct OpenClRenderer {
    pub target: Target,
}

impl Dialect for OpenClRenderer {
    fn type_name(&self, dtype: DType) -> String {
        let scalar = match dtype.scalar {
            Scalar::Void => "void",
            Scalar::Bool => "bool",
            Scalar::Int8 => "char",
            Scalar::Int16 => "short",
            Scalar::Int32 => "int",
            Scalar::Int64 | Scalar::Index => "long",
            Scalar::UInt8 => "uchar",
            Scalar::UInt16 | Scalar::BFloat16 => "ushort",
            Scalar::UInt32 => "uint",
            Scalar::UInt64 => "ulong",
            Scalar::Float16 if !self.target.dtypes.half => "ushort",
            Scalar::Float16 => "half",
            Scalar::Float32 => "float",
            Scalar::Float64 => "double",
        };
        match dtype.count {
            1 => scalar.to_string(),
            // comparisons of vectors give lanes of all ones or zeros, as wide as the operands
            n if dtype.is_bool() => format!("int{n}"),
            n => format!("{scalar}{n}"),
        }
    }
    fn buffer_type(&self, dtype: DType) -> String {
        // kernel arguments may not point to bool, whose size is the implementation's
        match dtype.is_bool() {
            true => "uchar".into(),
            false => self.type_name(dtype),
        }
    }
    fn storage_only(&self, dtype: DType) -> Option<&'static str> {
        match dtype.scalar {
            Scalar::BFloat16 => Some("bf16"),
            Scalar::Float16 if !self.target.dtypes.half => Some("half"),
            _ => None,
        }
    }
    fn long_suffix(&self) -> &'static str {
        "l"
    }
    fn prelude(&self) -> String {
        // no contraction: `a * b + c` rounds twice, as in the interpreter, unless codegen fused it
        let mut p = String::from("#pragma OPENCL FP_CONTRACT OFF\n");
        if self.target.dtypes.float64 {
            p += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
        }
        if self.target.dtypes.half {
            p += "#pragma OPENCL EXTENSION cl_khr_fp16 : enable\n";
        }
        // bfloat16 is stored as its 16 bits; conversions round to nearest even, NaN stays NaN
        p += concat!(
            "float lg_bf16_to_f32(ushort b) { return as_float((uint)b << 16); }\n",
            "ushort lg_f32_to_bf16(float f) { uint u = as_uint(f); ",
            "if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); ",
            "u += 0x7fffu + ((u >> 16) & 1u); return (ushort)(u >> 16); }\n"
        );
        if !self.target.dtypes.half {
            // float16 stored as its bits, converted by the core half loads and stores (rounding
            // to nearest even)
            p += concat!(
                "float lg_half_to_f32(ushort h) { return vload_half(0, (const half*)&h); }\n",
                "ushort lg_f32_to_half(float f) { ushort h; vstore_half_rte(f, 0, (half*)&h); return h; }\n"
            );
        }
        p
    }
    fn signature(&self, name: &str, params: &[Param]) -> String {
        let args: Vec<String> = params
            .iter()
            .map(|p| match p.by_value {
                true => format!("{} {}", p.ty, p.name),
                false => format!("__global {}{}* restrict {}", if p.written { "" } else { "const " }, p.ty, p.name),
            })
            .collect();
        format!("__kernel void {name}({})", args.join(", "))
    }
    fn epilogue(&self, _name: &str, _params: &[Param]) -> String {
        String::new()
    }
    fn vector_typedef(&self, _dtype: DType) -> String {
        String::new()
    }
    fn vector_where(&self, dtype: DType, a: &[String]) -> String {
        // `select`'s mask has the lanes' width: a mask (int lanes) widens for 64-bit lanes
        let mask = match dtype.itemsize() {
            8 => format!("convert_long{}({})", dtype.count, a[0]),
            _ => a[0].clone(),
        };
        format!("select({}, {}, {mask})", a[2], a[1])
    }
    fn vector_max(&self, _dtype: DType, a: &[String]) -> String {
        format!("select({1}, {0}, ({0} != {0}) | ({0} > {1}))", a[0], a[1])
    }
    fn vector_max_over(&self, _dtype: DType, a: &[String]) -> String {
        format!("select({0}, {1}, {1} > {0})", a[0], a[1])
    }
    fn vector_cast(&self, dtype: DType, from: DType, a: &str) -> String {
        let lanes = if from.is_bool() { format!("-({a})") } else { a.to_string() };
        format!("convert_{}({lanes})", self.type_name(dtype))
    }
    fn negate(&self, _dtype: DType, a: &str) -> String {
        format!("(-{a})")
    }
    fn vector_slice(&self, dtype: DType, name: &str, v: &str, first: usize) -> String {
        let lanes: String = (first..first + dtype.count as usize).map(|k| format!("{k:x}")).collect();
        format!("{} {name} = {v}.s{lanes};", self.type_name(dtype))
    }
    fn vector_sqrt(&self, _dtype: DType, a: &str) -> String {
        format!("sqrt({a})")
    }
    fn vector_fma(&self, _dtype: DType, a: &[String]) -> String {
        format!("fma({}, {}, {})", a[0], a[1], a[2])
    }
    fn stream_store(&self, dtype: DType, addr: &str, value: &str) -> String {
        format!("*(__global {}*)({addr}) = {value};", self.type_name(dtype))
    }
    fn masked_load(&self, dtype: DType, addr: &str, mask: &str) -> String {
        let lanes: Vec<String> = (0..dtype.count).map(|k| format!("{mask}.s{k:x} ? ({addr})[{k}] : 0")).collect();
        self.vector_literal(&self.type_name(dtype), &lanes)
    }
    fn masked_store(&self, dtype: DType, addr: &str, value: &str, mask: &str) -> String {
        (0..dtype.count).map(|k| format!("if ({mask}.s{k:x}) ({addr})[{k}] = {value}.s{k:x};")).collect()
    }
    fn vector_literal(&self, ty: &str, lanes: &[String]) -> String {
        format!("({ty})({})", lanes.join(", "))
    }
    fn lane(&self, v: &str, k: usize) -> String {
        format!("{v}.s{k:x}")
    }
    fn vector_load(&self, dtype: DType, name: &str, addr: &str) -> String {
        format!("{name} = vload{}(0, {addr});", dtype.count)
    }
    fn vector_store(&self, dtype: DType, addr: &str, value: &str) -> String {
        format!("vstore{}({value}, 0, {addr});", dtype.count)
    }
    fn stream_fence(&self) -> String {
        String::new()
    }
    fn keep_in_register(&self, _value: &str) -> String {
        String::new()
    }
    fn math_name(&self, f: &str, _float32: bool) -> String {
        // OpenCL's math functions are overloaded
        f.to_string()
    }
    fn bitcast(&self, _from: DType, to: DType, a: &str) -> String {
        format!("as_{}({a})", self.type_name(to))
    }
    fn special(&self, which: Special) -> String {
        match which {
            Special::Group(d) => format!("(long)get_group_id({d})"),
            Special::Local(d) => format!("(long)get_local_id({d})"),
            other => panic!("OpenCL renderer: no launch index {other} on a GPU-like target"),
        }
    }
    fn local_array(&self, dtype: DType, name: &str, size: &str) -> String {
        format!("__local {} {name}[{size}];", self.type_name(dtype))
    }
    fn barrier(&self) -> String {
        "barrier(CLK_LOCAL_MEM_FENCE);".into()
    }
}

impl Renderer for OpenClRenderer {
    fn language(&self) -> &'static str {
        "cl"
    }
    fn target(&self) -> Target {
        self.target.clone()
    }
    /// All, except float32 EXP2 and LOG2 on a CPU device: there codegen computes them as the
    /// CPU does (`transcendental.rs`), so both give the same bits.
    fn supports(&self, op: Ops) -> bool {
        self.target.simd_workgroups() || !matches!(op, Ops::Exp2 | Ops::Log2)
    }
    fn render(&self, name: &str, uops: &LinearProgram) -> String {
        cstyle::render(self, &self.target, name, uops)
    }
}
