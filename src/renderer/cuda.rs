//! The CUDA C dialect for NVRTC: kernels launched as blocks of threads (`blockIdx`,
//! `threadIdx`), `__shared__` arrays and `__syncthreads`, `__launch_bounds__` from the block
//! size. Scalar code: a GPU's threads fill its SIMD lanes, so the target has no vectors; only a
//! tensor core's fragments are vectors, small structs its `mma.sync` helper takes apart. Half and
//! bfloat16 are stored as their bits and computed in float32 (PTX conversions, no CUDA headers,
//! which NVRTC does not carry).

use super::cstyle::{self, Dialect, Param};
use super::Renderer;
use crate::dtype::{DType, Scalar};
use crate::uop::wmma::TensorCore;
use crate::uop::Target;
use crate::uop::{Arg, LinearProgram, Ops, Special, UOp};

/// Renders kernels as CUDA C for a device described by `target`.
pub struct CudaRenderer {
    /// A `Language::Cuda` target.
    pub target: Target,
}

impl CudaRenderer {
    /// The renderer for a GPU of architecture `arch` (`sm_90`) with every NVIDIA GPU's limits,
    /// for rendering without a device (`runtime::cuda::arch_target`).
    pub fn for_arch(arch: &str) -> Option<Self> {
        crate::runtime::cuda::arch_target(arch).map(|target| CudaRenderer { target })
    }
}

/// The dialect for one kernel: its block size goes into `__launch_bounds__`.
struct Cuda {
    block_threads: usize,
}

/// Threads per block of a linearized kernel: the product of its local index sizes.
fn block_threads(uops: &[UOp]) -> usize {
    uops.iter()
        .filter(|u| matches!(u.arg(), Arg::Special(Special::Local(_))))
        .filter_map(|u| u.src()[0].const_int_value())
        .product::<i64>()
        .max(1) as usize
}

/// The PTX name of a tensor core's element type.
fn ptx_type(dtype: DType) -> &'static str {
    match dtype.scalar {
        Scalar::Float16 => "f16",
        Scalar::BFloat16 => "bf16",
        Scalar::Float32 => "f32",
        _ => panic!("CUDA renderer: no tensor core takes {dtype:?}"),
    }
}

impl Dialect for Cuda {
    fn type_name(&self, dtype: DType) -> String {
        if dtype.count > 1 {
            return format!("lg_{}x{}", format!("{:?}", dtype.scalar).to_lowercase(), dtype.count);
        }
        match dtype.scalar {
            Scalar::Void => "void",
            Scalar::Bool => "bool",
            Scalar::Int8 => "signed char",
            Scalar::Int16 => "short",
            Scalar::Int32 => "int",
            Scalar::Int64 | Scalar::Index => "long long",
            Scalar::UInt8 => "unsigned char",
            Scalar::UInt16 | Scalar::Float16 | Scalar::BFloat16 => "unsigned short",
            Scalar::UInt32 => "unsigned int",
            Scalar::UInt64 => "unsigned long long",
            Scalar::Float32 => "float",
            Scalar::Float64 => "double",
        }
        .into()
    }
    fn storage_only(&self, dtype: DType) -> Option<&'static str> {
        match dtype.scalar {
            Scalar::BFloat16 => Some("bf16"),
            Scalar::Float16 => Some("half"),
            _ => None,
        }
    }
    fn prelude(&self) -> String {
        concat!(
            "#define INFINITY (__int_as_float(0x7f800000))\n",
            "#define NAN (__int_as_float(0x7fffffff))\n",
            // bfloat16 is stored as its 16 bits; conversions round to nearest even, NaN stays NaN
            "__device__ float lg_bf16_to_f32(unsigned short b) { return __uint_as_float((unsigned int)b << 16); }\n",
            "__device__ unsigned short lg_f32_to_bf16(float f) { unsigned int u = __float_as_uint(f); ",
            "if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); ",
            "u += 0x7fffu + ((u >> 16) & 1u); return (unsigned short)(u >> 16); }\n",
            // float16 through PTX's conversions (to nearest even)
            "__device__ float lg_half_to_f32(unsigned short h) { float f; ",
            "asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f; }\n",
            "__device__ unsigned short lg_f32_to_half(float f) { unsigned short h; ",
            "asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h; }\n",
        )
        .into()
    }
    fn signature(&self, name: &str, params: &[Param]) -> String {
        let args: Vec<String> = params
            .iter()
            .map(|p| match p.by_value {
                true => format!("{} {}", p.ty, p.name),
                false => format!("{}{}* __restrict__ {}", if p.written { "" } else { "const " }, p.ty, p.name),
            })
            .collect();
        format!("extern \"C\" __global__ void __launch_bounds__({}) {name}({})", self.block_threads, args.join(", "))
    }
    fn epilogue(&self, _name: &str, _params: &[Param]) -> String {
        String::new()
    }
    fn vector_typedef(&self, dtype: DType) -> String {
        format!("struct {} {{ {} v[{}]; }};\n", self.type_name(dtype), self.type_name(dtype.base()), dtype.count)
    }
    fn vector_literal(&self, ty: &str, lanes: &[String]) -> String {
        if lanes.len() == 1 {
            cstyle::scalar_only("a broadcast");
        }
        format!("{ty}{{{{{}}}}}", lanes.join(", "))
    }
    fn lane(&self, v: &str, k: usize) -> String {
        format!("{v}.v[{k}]")
    }
    /// `lg_<name>(a, b, c)`: the fragments handed to `mma.sync` in 32-bit registers (16-bit
    /// elements two to a register, the lower-numbered in the low half; float32 ones as TF32),
    /// C's floats updated in place into D.
    fn tensor_core(&self, tc: &TensorCore) -> String {
        assert_eq!(tc.accumulate, DType::FLOAT32, "CUDA renderer: mma accumulates float32 here");
        let registers = |elements: usize, dtype: DType| elements * dtype.itemsize() / 4;
        let (na, nb, nc) =
            (registers(tc.a.elements(), tc.input), registers(tc.b.elements(), tc.input), tc.c.elements());
        let operands =
            |first: usize, n: usize| (first..first + n).map(|i| format!("%{i}")).collect::<Vec<_>>().join(", ");
        let [m, n, k] = tc.dims;
        let acc = ptx_type(tc.accumulate);
        let input = if tc.input == DType::FLOAT32 { "tf32" } else { ptx_type(tc.input) };
        // TF32 inputs are float32 registers rounded by PTX's own conversion; 16-bit ones their bits
        let bits = match tc.input == DType::FLOAT32 {
            true => format!(
                "for (int i = 0; i < {na}; i++) asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(a_bits[i]) : \"f\"(a.v[i]));\n  \
                 for (int i = 0; i < {nb}; i++) asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(b_bits[i]) : \"f\"(b.v[i]));"
            ),
            false => "memcpy(a_bits, &a, sizeof(a_bits)); memcpy(b_bits, &b, sizeof(b_bits));".into(),
        };
        let mma = format!(
            "mma.sync.aligned.m{m}n{n}k{k}.row.col.{acc}.{input}.{input}.{acc} {{{d}}}, {{{a}}}, {{{b}}}, {{{d}}};",
            d = operands(0, nc),
            a = operands(nc, na),
            b = operands(nc + na, nb)
        );
        let outputs: Vec<String> = (0..nc).map(|i| format!("\"+f\"(c.v[{i}])")).collect();
        let inputs: Vec<String> = (0..na)
            .map(|i| format!("\"r\"(a_bits[{i}])"))
            .chain((0..nb).map(|i| format!("\"r\"(b_bits[{i}])")))
            .collect();
        let ty = |f: &crate::uop::wmma::Fragment, d: DType| self.type_name(d.vec(f.elements() as u16));
        format!(
            "__device__ {tc_ty} lg_{name}({a_ty} a, {b_ty} b, {tc_ty} c) {{\n  unsigned int a_bits[{na}], b_bits[{nb}];\n  \
             {bits}\n  asm volatile(\"{mma}\" : {outputs} : {inputs});\n  return c;\n}}\n",
            tc_ty = ty(&tc.c, tc.accumulate),
            a_ty = ty(&tc.a, tc.input),
            b_ty = ty(&tc.b, tc.input),
            name = tc.name,
            outputs = outputs.join(", "),
            inputs = inputs.join(", "),
        )
    }
    fn stream_store(&self, dtype: DType, addr: &str, value: &str) -> String {
        format!("*({}*)({addr}) = {value};", self.type_name(dtype))
    }
    fn math_name(&self, f: &str, float32: bool) -> String {
        // CUDA's float functions carry an f (`sqrtf`); fma and friends too
        format!("{f}{}", if float32 { "f" } else { "" })
    }
    fn bitcast(&self, from: DType, to: DType, a: &str) -> String {
        let (from_ty, to_ty) = (self.type_name(from), self.type_name(to));
        format!("([&]{{ {from_ty} v = {a}; {to_ty} r; memcpy(&r, &v, sizeof(r)); return r; }}())")
    }
    fn special(&self, which: Special) -> String {
        const DIMS: [char; 3] = ['x', 'y', 'z'];
        match which {
            Special::Group(d) => format!("(long long)blockIdx.{}", DIMS[d]),
            Special::Local(d) => format!("(long long)threadIdx.{}", DIMS[d]),
            other => panic!("CUDA renderer: no launch index {other} on a GPU"),
        }
    }
    fn local_array(&self, dtype: DType, name: &str, size: &str) -> String {
        format!("__shared__ {} {name}[{size}];", self.type_name(dtype))
    }
    fn barrier(&self) -> String {
        "__syncthreads();".into()
    }
}

impl Renderer for CudaRenderer {
    fn language(&self) -> &'static str {
        "cu"
    }
    fn target(&self) -> Target {
        self.target.clone()
    }
    fn supports(&self, _op: Ops) -> bool {
        true
    }
    fn render(&self, name: &str, uops: &LinearProgram) -> String {
        cstyle::render(&Cuda { block_threads: block_threads(uops) }, &self.target, name, uops)
    }
}
