//! The C dialect for the CPU device: plain C99 plus GCC/Clang extensions, with an entry point
//! taking all buffers as one pointer array so every kernel has the same ABI.

use super::cstyle::{self, Dialect, Param};
use super::Renderer;
use crate::dtype::{DType, Scalar};
use crate::uop::Target;
use crate::uop::{LinearProgram, Ops, Special};

/// Renders kernels as C for the CPU device.
pub struct CRenderer;

impl Dialect for CRenderer {
    fn type_name(&self, dtype: DType) -> String {
        let scalar = match dtype.scalar {
            Scalar::Void => "void",
            Scalar::Bool => "_Bool",
            Scalar::Int8 => "signed char",
            Scalar::Int16 => "short",
            Scalar::Int32 => "int",
            Scalar::Int64 | Scalar::Index => "long long",
            Scalar::UInt8 => "unsigned char",
            Scalar::UInt16 | Scalar::BFloat16 => "unsigned short",
            Scalar::UInt32 => "unsigned int",
            Scalar::UInt64 => "unsigned long long",
            Scalar::Float16 => "_Float16",
            Scalar::Float32 => "float",
            Scalar::Float64 => "double",
        };
        match dtype.count {
            1 => scalar.to_string(),
            // a bool vector is a mask as wide as the float32 lanes it selects
            n if dtype.is_bool() => format!("lg_mask{n}"),
            // one word: `uint16` is 16 lanes of unsigned int, `longlong8` 8 of long long
            n => format!("{}{n}", scalar.replace("unsigned ", "u").replace("signed ", "s").replace(' ', "")),
        }
    }
    fn vector_typedef(&self, dtype: DType) -> String {
        let n = dtype.count;
        if dtype.is_bool() {
            return format!("typedef int lg_mask{n} __attribute__((vector_size({})));\n", 4 * n);
        }
        let (scalar, bytes) = (self.type_name(dtype.base()), dtype.itemsize() * dtype.count as usize);
        let name = self.type_name(dtype);
        let mut def = format!("typedef {scalar} {name} __attribute__((vector_size({bytes})));\n");
        // one x86 builtin per register width where the target has it, else the portable statement
        let helper = |signature: String, native: [(&str, String); 3], portable: String| {
            let native = native.into_iter().zip([64, 32, 16]).find(|(_, b)| *b == bytes).map(|(n, _)| n);
            let body = match native {
                Some((cond, stmt)) => format!("#if {cond}\n  {stmt}\n#else\n  {portable}\n#endif\n"),
                None => format!("  {portable}\n"),
            };
            format!("static inline {signature} {{\n{body}}}\n")
        };
        let (avx512, avx, sse) = ("defined(__AVX512F__)", "defined(__AVX__)", "defined(__SSE__)");
        // gcc's 512-bit builtins that clang spells differently (clang finds those instructions
        // in the portable code itself)
        let gcc512 = "defined(__AVX512F__) && !defined(__clang__)";
        if dtype.is_float() {
            // fused multiply-add on whole registers, else lane by lane
            let (sfx, fma) = match dtype.scalar {
                Scalar::Float64 => ("pd", "__builtin_fma"),
                _ => ("ps", "__builtin_fmaf"),
            };
            def += &helper(
                format!("{name} lg_fma_{name}({name} a, {name} b, {name} c)"),
                [
                    (avx512, format!("return __builtin_ia32_vfmadd{sfx}512_mask(a, b, c, -1, 4);")),
                    ("defined(__FMA__)", format!("return __builtin_ia32_vfmadd{sfx}256(a, b, c);")),
                    ("defined(__FMA__)", format!("return __builtin_ia32_vfmadd{sfx}(a, b, c);")),
                ],
                format!("{name} r; for (int i = 0; i < {n}; i++) r[i] = {fma}(a[i], b[i], c[i]); return r;"),
            );
        }
        if matches!(dtype.scalar, Scalar::Int8 | Scalar::UInt8) && matches!(n, 8 | 16) {
            // bytes widened to int32 lanes by one x86 extension (gcc splits the generic
            // conversion of a 64-bit vector into shifts lane by lane)
            let ext = if dtype.scalar == Scalar::Int8 { "sx" } else { "zx" };
            let wide = format!("int __attribute__((vector_size({})))", 4 * n);
            let bytes16 = "char __attribute__((vector_size(16)))";
            let (cond, native) = match n {
                8 => (
                    "defined(__AVX2__) && !defined(__clang__)",
                    format!("long long bits; __builtin_memcpy(&bits, &a, 8); return ({wide})__builtin_ia32_pmov{ext}bd256(({bytes16})(long long __attribute__((vector_size(16)))){{bits, 0}});"),
                ),
                _ => (gcc512, format!("return ({wide})__builtin_ia32_pmov{ext}bd512_mask(({bytes16})a, ({wide}){{0}}, -1);")),
            };
            def += &format!(
                "static inline {wide} lg_widen_{name}({name} a) {{\n#if {cond}\n  {native}\n#else\n  return __builtin_convertvector(a, {wide});\n#endif\n}}\n"
            );
        }
        if dtype == DType::FLOAT32.vec(n) {
            // selects are bitwise on the comparison masks (`lg_mask`, typedef'd with the bool
            // vectors); max takes a where a is NaN or larger
            def += &format!(
                "static inline {name} lg_where_{name}(lg_mask{n} m, {name} a, {name} b) {{ return ({name})(((lg_mask{n})a & m) | ((lg_mask{n})b & ~m)); }}\nstatic inline {name} lg_max_{name}({name} a, {name} b) {{ return lg_where_{name}((a != a) | (a > b), a, b); }}\n"
            );
            // x86's max returns its second operand unless the first is larger
            def += &helper(
                format!("{name} lg_max_over_{name}({name} a, {name} b)"),
                [
                    (gcc512, format!("return __builtin_ia32_maxps512_mask(b, a, ({name}){{0}}, -1, 4);")),
                    (avx, "return __builtin_ia32_maxps256(b, a);".into()),
                    (sse, "return __builtin_ia32_maxps(b, a);".into()),
                ],
                format!("return lg_where_{name}(b > a, b, a);"),
            );
            def += &helper(
                format!("{name} lg_sqrt_{name}({name} a)"),
                [
                    (gcc512, "return __builtin_ia32_sqrtps512_mask(a, a, -1, 4);".into()),
                    (avx, "return __builtin_ia32_sqrtps256(a);".into()),
                    (sse, "return __builtin_ia32_sqrtps(a);".into()),
                ],
                format!("{name} r; for (int i = 0; i < {n}; i++) r[i] = __builtin_sqrtf(a[i]); return r;"),
            );
            // masked lanes are neither read nor written: the x86 masked moves suppress their
            // faults, and the fallback branches lane by lane
            let test = "__builtin_ia32_ptestmd512(m, m, -1)";
            def += &helper(
                format!("{name} lg_load_{name}(const float* p, lg_mask{n} m)"),
                [
                    (avx512, format!("return __builtin_ia32_loadups512_mask(p, ({name}){{0}}, {test});")),
                    (avx, format!("return __builtin_ia32_maskloadps256((const {name}*)p, m);")),
                    (avx, format!("return __builtin_ia32_maskloadps((const {name}*)p, m);")),
                ],
                format!("{name} v = {{0}}; for (int i = 0; i < {n}; i++) if (m[i]) v[i] = p[i]; return v;"),
            );
            def += &helper(
                format!("void lg_store_{name}(float* p, {name} v, lg_mask{n} m)"),
                [
                    (avx512, format!("__builtin_ia32_storeups512_mask(p, v, {test});")),
                    (avx, format!("__builtin_ia32_maskstoreps256(({name}*)p, m, v);")),
                    (avx, format!("__builtin_ia32_maskstoreps(({name}*)p, m, v);")),
                ],
                format!("for (int i = 0; i < {n}; i++) if (m[i]) p[i] = v[i];"),
            );
            // stores around the caches, for whole registers (`pm_stream_stores`)
            def += &helper(
                format!("void lg_stream_{name}(float* p, {name} v)"),
                [
                    (avx512, "__builtin_ia32_movntps512(p, v);".into()),
                    (avx, "__builtin_ia32_movntps256(p, v);".into()),
                    (sse, "__builtin_ia32_movntps(p, v);".into()),
                ],
                "__builtin_memcpy(p, &v, sizeof(v));".into(),
            );
        }
        def
    }
    fn vector_where(&self, dtype: DType, a: &[String]) -> String {
        format!("lg_where_{}({}, {}, {})", self.type_name(dtype), a[0], a[1], a[2])
    }
    fn vector_cast(&self, dtype: DType, from: DType, a: &str) -> String {
        let bytes = dtype.itemsize() * dtype.count as usize;
        if dtype.base() == DType::FLOAT64 && from.base() == DType::FLOAT32 && matches!(bytes, 32 | 64) {
            return format!("LG_WIDEN_{bytes}({a}, {})", self.type_name(dtype));
        }
        if matches!(from.scalar, Scalar::Int8 | Scalar::UInt8)
            && matches!(from.count, 8 | 16)
            && dtype.scalar == Scalar::Int32
        {
            return format!("lg_widen_{}({a})", self.type_name(from));
        }
        // mask lanes are all ones (-1) for true
        let lanes = if from.is_bool() { format!("-({a})") } else { a.to_string() };
        format!("__builtin_convertvector({lanes}, {})", self.type_name(dtype))
    }
    fn negate(&self, dtype: DType, a: &str) -> String {
        format!("lg_neg_{}({a})", self.type_name(dtype))
    }
    fn vector_slice(&self, dtype: DType, name: &str, v: &str, first: usize) -> String {
        let ty = self.type_name(dtype);
        let lanes: Vec<usize> = (first..first + dtype.count as usize).collect();
        let shuffle: Vec<String> = lanes.iter().map(usize::to_string).collect();
        let pick: Vec<String> = lanes.iter().map(|k| format!("{v}[{k}]")).collect();
        // a shuffle is one instruction; gcc before 12 lacks it, and builds the vector lane by lane
        format!(
            "#if defined(__clang__) || __GNUC__ >= 12\n{ty} {name} = __builtin_shufflevector({v}, {v}, {});\n#else\n{ty} {name} = ({ty}){{{}}};\n#endif",
            shuffle.join(", "),
            pick.join(", ")
        )
    }
    fn vector_max(&self, dtype: DType, a: &[String]) -> String {
        format!("lg_max_{}({}, {})", self.type_name(dtype), a[0], a[1])
    }
    fn vector_sqrt(&self, dtype: DType, a: &str) -> String {
        format!("lg_sqrt_{}({a})", self.type_name(dtype))
    }
    fn vector_max_over(&self, dtype: DType, a: &[String]) -> String {
        format!("lg_max_over_{}({}, {})", self.type_name(dtype), a[0], a[1])
    }
    fn stream_store(&self, dtype: DType, addr: &str, value: &str) -> String {
        format!("lg_stream_{}({addr}, {value});", self.type_name(dtype))
    }
    fn masked_load(&self, dtype: DType, addr: &str, mask: &str) -> String {
        format!("lg_load_{}({addr}, {mask})", self.type_name(dtype))
    }
    fn masked_store(&self, dtype: DType, addr: &str, value: &str, mask: &str) -> String {
        format!("lg_store_{}({addr}, {value}, {mask});", self.type_name(dtype))
    }
    fn stream_fence(&self) -> String {
        "#if defined(__SSE__)\n  __builtin_ia32_sfence();\n#endif".to_string()
    }
    fn vector_fma(&self, dtype: DType, a: &[String]) -> String {
        format!("lg_fma_{}({}, {}, {})", self.type_name(dtype), a[0], a[1], a[2])
    }
    fn prelude(&self) -> String {
        // no <math.h>: parsing it costs more than compiling a small kernel, so the constants and
        // functions are the compiler's builtins. bfloat16 is stored as its 16 bits; conversions
        // round to nearest even, NaN stays NaN. An empty asm that may change a value makes the
        // compiler hold it in a (vector) register rather than read its memory again.
        concat!(
            "#define INFINITY __builtin_inff()\n#define NAN __builtin_nanf(\"\")\n",
            "#if defined(__x86_64__)\n#define LG_IN_REGISTER(v) __asm__(\"\" : \"+v\"(v))\n",
            "#else\n#define LG_IN_REGISTER(v) ((void)0)\n#endif\n",
            // float32 lanes widened to float64 in one instruction (gcc's generic conversion of a
            // register's worth takes several)
            "#if defined(__AVX512F__) && !defined(__clang__)\n",
            "#define LG_WIDEN_64(a, t) __builtin_ia32_cvtps2pd512_mask(a, (t){0}, -1, 4)\n",
            "#else\n#define LG_WIDEN_64(a, t) __builtin_convertvector(a, t)\n#endif\n",
            "#if defined(__AVX__) && !defined(__clang__)\n#define LG_WIDEN_32(a, t) __builtin_ia32_cvtps2pd256(a)\n",
            "#else\n#define LG_WIDEN_32(a, t) __builtin_convertvector(a, t)\n#endif\n",
            "static inline float lg_bf16_to_f32(unsigned short b) { union { unsigned int u; float f; } v; ",
            "v.u = (unsigned int)b << 16; return v.f; }\n",
            "static inline unsigned short lg_f32_to_bf16(float f) { union { float f; unsigned int u; } v; v.f = f; ",
            "if ((v.u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((v.u >> 16) | 0x40u); ",
            "v.u += 0x7fffu + ((v.u >> 16) & 1u); return (unsigned short)(v.u >> 16); }\n",
            // a register barrier keeps gcc from merging a negation into the fma before it
            "static inline float lg_neg_float(float x) { LG_IN_REGISTER(x); return -x; }\n",
            "static inline double lg_neg_double(double x) { LG_IN_REGISTER(x); return -x; }\n"
        )
        .to_string()
    }
    fn signature(&self, name: &str, params: &[Param]) -> String {
        let args: Vec<String> = params
            .iter()
            .map(|p| match p.by_value {
                true => format!("{} {}", p.ty, p.name),
                false => format!("{}{}* restrict {}", if p.written { "" } else { "const " }, p.ty, p.name),
            })
            .collect();
        format!("static void {name}({}, int core_id)", args.join(", "))
    }
    fn epilogue(&self, name: &str, params: &[Param]) -> String {
        let args: Vec<String> = params
            .iter()
            .map(|p| match p.by_value {
                true => format!("vars[{}]", p.slot),
                false => format!("({}*)bufs[{}]", p.ty, p.slot),
            })
            .collect();
        format!(
            "void {name}_entry(void** bufs, const long long* vars, int core_id) {{ {name}({}, core_id); }}\n",
            args.join(", ")
        )
    }
    fn bitcast(&self, from: DType, to: DType, a: &str) -> String {
        let (from, to) = (self.type_name(from), self.type_name(to));
        format!("({{ union {{ {from} a; {to} b; }} u_ = {{ .a = {a} }}; u_.b; }})")
    }
    fn special(&self, which: Special) -> String {
        match which {
            Special::Core => "core_id".into(),
            other => panic!("C renderer: a CPU kernel has no launch index {other}"),
        }
    }
    fn local_array(&self, _dtype: DType, name: &str, _size: &str) -> String {
        panic!("C renderer: a CPU kernel has no local memory ({name})")
    }
    fn barrier(&self) -> String {
        panic!("C renderer: a CPU kernel has no workgroups to wait for")
    }
    fn keep_in_register(&self, value: &str) -> String {
        format!("LG_IN_REGISTER({value});")
    }
    fn math_name(&self, f: &str, float32: bool) -> String {
        format!("__builtin_{f}{}", if float32 { "f" } else { "" })
    }
}

impl Renderer for CRenderer {
    fn language(&self) -> &'static str {
        "c"
    }
    fn target(&self) -> Target {
        crate::runtime::cpu::host_target("CPU")
    }
    /// All but float32 EXP2 and LOG2, which codegen computes in float64 (`transcendental.rs`):
    /// libm's results may differ by an ulp from another device's.
    fn supports(&self, op: Ops) -> bool {
        !matches!(op, Ops::Exp2 | Ops::Log2)
    }
    fn render(&self, name: &str, uops: &LinearProgram) -> String {
        cstyle::render(self, &self.target(), name, uops)
    }
}
