//! The Metal Shading Language dialect (MSL, C++ based): `kernel` functions taking `device`
//! buffers and `constant` variables by `[[buffer(n)]]` index, launched as threadgroups (`gid`,
//! `lid`), `threadgroup` arrays and `threadgroup_barrier`, `as_type` bitcasts and `metal::` math.
//! Scalar code, as CUDA's: a GPU's threads fill its SIMD lanes, so the only vectors are a tensor
//! core's fragments (`half2`, `float2`), which its `simdgroup_multiply_accumulate` helper loads
//! into `simdgroup_matrix` tiles. half is computed in; bfloat16 too where the target has MSL 3.1's
//! `bfloat`, else it is stored as its bits and computed in float32. Metal has no float64.
//!
//! No Metal compiler runs here: `runtime::metal::msl_check` type-checks the source with clang++
//! against the `metal_stdlib` header in `tools/msl` (`MSL_CHECK`).

use super::cstyle::{self, Dialect, Param};
use super::Renderer;
use crate::dtype::{DType, Scalar};
use crate::uop::wmma::{Fragment, TensorCore};
use crate::uop::Target;
use crate::uop::{LinearProgram, Ops, Special};

/// Renders kernels as MSL for an Apple GPU described by `target` (`Target::metal`).
pub struct MetalRenderer {
    /// A `Language::Metal` target.
    pub target: Target,
}

impl Dialect for MetalRenderer {
    fn type_name(&self, dtype: DType) -> String {
        let scalar = match dtype.scalar {
            Scalar::Void => "void",
            Scalar::Bool => "bool",
            Scalar::Int8 => "char",
            Scalar::Int16 => "short",
            Scalar::Int32 => "int",
            Scalar::Int64 | Scalar::Index => "long",
            Scalar::UInt8 => "uchar",
            Scalar::UInt16 => "ushort",
            Scalar::UInt32 => "uint",
            Scalar::UInt64 => "ulong",
            Scalar::Float16 => "half",
            Scalar::BFloat16 if self.target.dtypes.bfloat16 => "bfloat",
            Scalar::BFloat16 => "ushort",
            Scalar::Float32 => "float",
            Scalar::Float64 => panic!("Metal renderer: MSL has no float64 (double), so {dtype:?} cannot be rendered"),
        };
        match dtype.count {
            1 => scalar.to_string(),
            n => format!("{scalar}{n}"),
        }
    }
    fn storage_only(&self, dtype: DType) -> Option<&'static str> {
        (dtype == DType::BFLOAT16 && !self.target.dtypes.bfloat16).then_some("bf16")
    }
    fn long_suffix(&self) -> &'static str {
        "l"
    }
    fn prelude(&self) -> String {
        let mut p = String::from("#include <metal_stdlib>\nusing namespace metal;\n");
        if !self.target.dtypes.bfloat16 {
            // bfloat16 is stored as its 16 bits; conversions round to nearest even, NaN stays NaN
            p += concat!(
                "float lg_bf16_to_f32(ushort b) { return as_type<float>((uint)b << 16); }\n",
                "ushort lg_f32_to_bf16(float f) { uint u = as_type<uint>(f); ",
                "if ((u & 0x7fffffffu) > 0x7f800000u) return (ushort)((u >> 16) | 0x40u); ",
                "u += 0x7fffu + ((u >> 16) & 1u); return (ushort)(u >> 16); }\n"
            );
        }
        p
    }
    /// Buffers at `[[buffer(i)]]`, `i` their place in the parameter list (slot order, variables
    /// last), then the threadgroup's place in the grid and the thread's in its threadgroup.
    fn signature(&self, name: &str, params: &[Param]) -> String {
        let args = params.iter().enumerate().map(|(i, p)| match p.by_value {
            true => format!("constant {}& {} [[buffer({i})]]", p.ty, p.name),
            false => format!("{}device {}* {} [[buffer({i})]]", if p.written { "" } else { "const " }, p.ty, p.name),
        });
        let launch = ["uint3 gid [[threadgroup_position_in_grid]]", "uint3 lid [[thread_position_in_threadgroup]]"];
        let args: Vec<String> = args.chain(launch.map(String::from)).collect();
        format!("kernel void {name}({})", args.join(", "))
    }
    fn epilogue(&self, _name: &str, _params: &[Param]) -> String {
        String::new()
    }
    /// Metal's vector types are built in.
    fn vector_typedef(&self, _dtype: DType) -> String {
        String::new()
    }
    fn vector_literal(&self, ty: &str, lanes: &[String]) -> String {
        format!("{ty}({})", lanes.join(", "))
    }
    fn lane(&self, v: &str, k: usize) -> String {
        format!("{v}[{k}]")
    }
    /// `lg_<name>(a, b, c)`: each thread's fragments put in its elements of three 8x8
    /// `simdgroup_matrix` tiles (`thread_elements()`, in the order `uop/wmma.rs` lays them out),
    /// multiplied by the SIMD group together, and its elements of the result returned.
    fn tensor_core(&self, tc: &TensorCore) -> String {
        assert_eq!(tc.dims, [8, 8, 8], "Metal renderer: simdgroup_matrix tiles are 8x8, not {}", tc.name);
        let ty = |f: &Fragment, dtype: DType| self.type_name(dtype.vec(f.elements() as u16));
        let matrix = |dtype: DType| format!("simdgroup_{}8x8", self.type_name(dtype));
        let fill = |m: &str, v: &str, f: &Fragment| -> String {
            (0..f.elements()).map(|e| format!(" {m}.thread_elements()[{e}] = {v}[{e}];")).collect()
        };
        let result: Vec<String> = (0..tc.c.elements()).map(|e| format!("mat_c.thread_elements()[{e}]")).collect();
        format!(
            "{c_ty} lg_{name}({a_ty} a, {b_ty} b, {c_ty} c) {{\n  {in_m} mat_a, mat_b; {acc_m} mat_c;\n \
             {fill_a}{fill_b}{fill_c}\n  simdgroup_multiply_accumulate(mat_c, mat_a, mat_b, mat_c);\n  \
             return {c_ty}({result});\n}}\n",
            c_ty = ty(&tc.c, tc.accumulate),
            a_ty = ty(&tc.a, tc.input),
            b_ty = ty(&tc.b, tc.input),
            name = tc.name,
            in_m = matrix(tc.input),
            acc_m = matrix(tc.accumulate),
            fill_a = fill("mat_a", "a", &tc.a),
            fill_b = fill("mat_b", "b", &tc.b),
            fill_c = fill("mat_c", "c", &tc.c),
            result = result.join(", "),
        )
    }
    fn vector_load(&self, _dtype: DType, _name: &str, _addr: &str) -> String {
        cstyle::scalar_only("a load")
    }
    fn vector_store(&self, _dtype: DType, _addr: &str, _value: &str) -> String {
        cstyle::scalar_only("a store")
    }
    /// `metal::precise::` for the transcendental functions (exact to Metal's documented ulps
    /// whatever the fast-math setting), `metal::` for the exact ones; all overloaded, called with
    /// float32 (narrower types are widened first).
    fn math_name(&self, f: &str, float32: bool) -> String {
        assert!(float32, "Metal renderer: MSL has no float64 (double) {f}");
        match f {
            "exp2" | "log2" | "sin" | "sqrt" | "pow" => format!("metal::precise::{f}"),
            _ => format!("metal::{f}"),
        }
    }
    fn bitcast(&self, _from: DType, to: DType, a: &str) -> String {
        format!("as_type<{}>({a})", self.type_name(to))
    }
    fn special(&self, which: Special) -> String {
        const DIMS: [char; 3] = ['x', 'y', 'z'];
        match which {
            Special::Group(d) => format!("(long)gid.{}", DIMS[d]),
            Special::Local(d) => format!("(long)lid.{}", DIMS[d]),
            other => panic!("Metal renderer: no launch index {other} on a GPU"),
        }
    }
    fn local_array(&self, dtype: DType, name: &str, size: &str) -> String {
        format!("threadgroup {} {name}[{size}];", self.type_name(dtype))
    }
    fn barrier(&self) -> String {
        "threadgroup_barrier(mem_flags::mem_threadgroup);".into()
    }
}

impl Renderer for MetalRenderer {
    fn language(&self) -> &'static str {
        "metal"
    }
    fn target(&self) -> Target {
        self.target.clone()
    }
    fn supports(&self, _op: Ops) -> bool {
        true
    }
    fn render(&self, name: &str, uops: &LinearProgram) -> String {
        cstyle::render(self, &self.target, name, uops)
    }
}
