//! Rendering shared by the C family (C for the CPU, OpenCL C, CUDA C, MSL): one walk over
//! the linear program, with a `Dialect` supplying what differs between languages.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use crate::dtype::{DType, Scalar};
use crate::uop::variable::kernel_vars;
use crate::uop::Target;
use crate::uop::{Arg, ConstValue, Ops, Special, UOp};

/// What one C-family language spells its own way.
pub trait Dialect {
    /// The type name of a scalar dtype.
    fn type_name(&self, dtype: DType) -> String;
    /// Code before the kernel (includes, helper macros).
    fn prelude(&self) -> String;
    /// The kernel's signature, taking the buffers it uses in slot order.
    fn signature(&self, name: &str, params: &[Param]) -> String;
    /// Code after the kernel (e.g. an entry point with a uniform ABI).
    fn epilogue(&self, name: &str, params: &[Param]) -> String;
    // Vector hooks: a dialect whose target builds vectors implements them; a scalar dialect (a
    // GPU's, whose threads fill its SIMD lanes) is never asked, and the defaults say so.
    /// The definition of vector type `dtype` (a `typedef` before the kernel).
    fn vector_typedef(&self, dtype: DType) -> String {
        scalar_only(&format!("{dtype:?}"))
    }
    /// `mask ? a : b` lane by lane on vectors (a bool vector is a mask of all-ones lanes).
    fn vector_where(&self, dtype: DType, _a: &[String]) -> String {
        scalar_only(&format!("a select of {dtype:?}"))
    }
    /// `max(a, b)` lane by lane on float vectors, NaN from either side propagating.
    fn vector_max(&self, dtype: DType, _a: &[String]) -> String {
        scalar_only(&format!("a max of {dtype:?}"))
    }
    /// `b > a ? b : a` lane by lane on float vectors: `max(a, b)` for a `b` that is never NaN, in
    /// one instruction where the target has one (ties take `a`).
    fn vector_max_over(&self, dtype: DType, _a: &[String]) -> String {
        scalar_only(&format!("a max of {dtype:?}"))
    }
    /// Vector `a` of `from` converted lane by lane to `dtype` (a mask's lanes become 0 or 1).
    fn vector_cast(&self, dtype: DType, _from: DType, _a: &str) -> String {
        scalar_only(&format!("a cast to {dtype:?}"))
    }
    /// The declaration of `name`, a vector of `dtype` holding the consecutive lanes of vector `v`
    /// from lane `first` on.
    fn vector_slice(&self, dtype: DType, _name: &str, _v: &str, _first: usize) -> String {
        scalar_only(&format!("a slice of {dtype:?}"))
    }
    /// The correctly rounded square root of each lane of float32 vector `a`.
    fn vector_sqrt(&self, dtype: DType, _a: &str) -> String {
        scalar_only(&format!("a square root of {dtype:?}"))
    }
    /// `a * b + c` with one rounding on vectors of `dtype`.
    fn vector_fma(&self, dtype: DType, _a: &[String]) -> String {
        scalar_only(&format!("an FMA of {dtype:?}"))
    }
    /// A store of vector `value` to `addr` that bypasses the caches (`addr` is register-aligned).
    fn stream_store(&self, dtype: DType, _addr: &str, _value: &str) -> String {
        scalar_only(&format!("a streamed store of {dtype:?}"))
    }
    /// A load of float32 vector `dtype` from `addr` reading only the lanes `mask` is true in (the
    /// others are 0 and their addresses are never touched).
    fn masked_load(&self, dtype: DType, _addr: &str, _mask: &str) -> String {
        scalar_only(&format!("a masked load of {dtype:?}"))
    }
    /// A store of float32 vector `value` to `addr` writing only the lanes `mask` is true in.
    fn masked_store(&self, dtype: DType, _addr: &str, _value: &str, _mask: &str) -> String {
        scalar_only(&format!("a masked store of {dtype:?}"))
    }
    /// What makes this thread's streamed stores visible before the kernel returns.
    fn stream_fence(&self) -> String {
        String::new()
    }
    /// A statement after which vector `value` stays in a register: the compiler may not load it
    /// again at each use.
    fn keep_in_register(&self, _value: &str) -> String {
        String::new()
    }
    /// `-a` for a scalar float32 or float64 `a`, in a form the compiler cannot merge into the
    /// multiply-add that computed `a` (gcc turns `-fma(a, b, c)`, even across a loop, into one
    /// `fnmsub`, which gives +0 where the sum is +0: IEEE negation gives -0).
    fn negate(&self, _dtype: DType, a: &str) -> String {
        format!("(-{a})")
    }
    /// The name of math function `f` (`exp2`, `log2`, `sin`, `sqrt`, `trunc`, `pow`, `fmod`,
    /// `fma`) for float32 arguments, else for float64 ones.
    fn math_name(&self, f: &str, float32: bool) -> String;
    /// The call of math function `f` for `dtype`: in float64 or float32, and for narrower types
    /// in float32, cast back.
    fn math(&self, f: &str, dtype: DType, args: &[String]) -> String {
        match dtype.scalar {
            Scalar::Float64 => format!("{}({})", self.math_name(f, false), args.join(", ")),
            Scalar::Float32 => format!("{}({})", self.math_name(f, true), args.join(", ")),
            _ => {
                let widened: Vec<String> = args.iter().map(|a| format!("(float){a}")).collect();
                format!("(({}){}({}))", self.type_name(dtype), self.math_name(f, true), widened.join(", "))
            }
        }
    }
    /// The bits of `a` (of `from`) read as `to`, of the same size.
    fn bitcast(&self, from: DType, to: DType, a: &str) -> String;
    /// The value of a launch index.
    fn special(&self, which: Special) -> String;
    /// The declaration of a workgroup's shared array `name` of `size` elements of `dtype`.
    fn local_array(&self, dtype: DType, name: &str, size: &str) -> String;
    /// The statement where a workgroup's threads wait for each other, their local memory
    /// writes visible after it.
    fn barrier(&self) -> String;
    /// A vector of type `ty` from its `lanes` (one lane: every lane that value).
    fn vector_literal(&self, ty: &str, lanes: &[String]) -> String {
        format!("({ty}){{{}}}", lanes.join(", "))
    }
    /// Lane `k` of vector `v`.
    fn lane(&self, v: &str, k: usize) -> String {
        format!("{v}[{k}]")
    }
    /// The statement loading vector `name` (declared) from the consecutive elements at `addr`.
    fn vector_load(&self, _dtype: DType, name: &str, addr: &str) -> String {
        format!("__builtin_memcpy(&{name}, {addr}, sizeof({name}));")
    }
    /// The statement storing vector `value` to the consecutive elements at `addr`.
    fn vector_store(&self, _dtype: DType, addr: &str, value: &str) -> String {
        format!("__builtin_memcpy({addr}, &{value}, sizeof({value}));")
    }
    /// The definition of `lg_<tc.name>(a, b, c)`, tensor core `tc`'s instruction on a thread's
    /// fragments (`uop/wmma.rs`), for a dialect whose target lists it.
    fn tensor_core(&self, tc: &crate::uop::wmma::TensorCore) -> String {
        panic!("C renderer: this dialect has no tensor core {}", tc.name)
    }
    /// The element type of a buffer of `dtype` as a kernel parameter.
    fn buffer_type(&self, dtype: DType) -> String {
        self.type_name(dtype)
    }
    /// The name in `lg_f32_to_<name>` and `lg_<name>_to_f32` of a 16-bit float `dtype` that the
    /// target stores as its bits and computes in float32 (bfloat16 everywhere).
    fn storage_only(&self, dtype: DType) -> Option<&'static str> {
        (dtype == DType::BFLOAT16).then_some("bf16")
    }
    /// The suffix of a 64-bit integer literal (`ll` in C; an `u` goes before it when unsigned).
    fn long_suffix(&self) -> &'static str {
        "ll"
    }
    /// A literal of `v` as `dtype`.
    fn literal(&self, v: ConstValue, dtype: DType) -> String {
        c_literal(&|| self.type_name(dtype), self.storage_only(dtype).is_some(), self.long_suffix(), v, dtype)
    }
    /// The statement declaring `name` of type `ty` with `value` (`mutable`: assigned again later).
    fn declare(&self, ty: &str, name: &str, value: &str, mutable: bool) -> String {
        let _ = mutable;
        format!("{ty} {name} = {value};")
    }
    /// `a` where `cond` holds, else `b` (without enclosing parentheses).
    fn select(&self, cond: &str, a: &str, b: &str) -> String {
        format!("{cond} ? {a} : {b}")
    }
    /// `stmt` run only where `cond` holds.
    fn guarded(&self, cond: &str, stmt: &str) -> String {
        format!("if ({cond}) {stmt}")
    }
    /// The head of a loop of index `name` from 0 up to `bound`, ending in `{`.
    fn loop_open(&self, name: &str, bound: &str) -> String {
        format!("for ({} {name} = 0; {name} < {bound}; {name}++) {{", self.type_name(DType::INDEX))
    }
    /// `value` (of `from`) converted to `to` (a bool is whether it is non-zero).
    fn cast(&self, to: DType, from: DType, value: &str) -> String {
        let _ = from;
        match to.is_bool() {
            true => format!("({value} != 0)"),
            false => format!("(({})({value}))", self.type_name(to)),
        }
    }
    /// Whether float `a` of `dtype` is NaN (without enclosing parentheses).
    fn is_nan(&self, dtype: DType, a: &str) -> String {
        let _ = dtype;
        format!("{a} != {a}")
    }
    /// The dialect's own rendering of ALU `op` on `dtype` operands `a` (of sources `srcs`), where
    /// it differs from C's; `None`: C's.
    fn alu(&self, op: Ops, dtype: DType, srcs: &[UOp], a: &[String]) -> Option<String> {
        let _ = (op, dtype, srcs, a);
        None
    }
    /// An ALU result `expr` of `dtype` as that dtype holds it: where registers are wider than the
    /// dtype (8- and 16-bit integers in 32-bit registers), its bits wrapped to the dtype's width.
    fn wrap(&self, dtype: DType, expr: String) -> String {
        let _ = dtype;
        expr
    }
    /// Whether signed integer arithmetic wraps on overflow (in C it is undefined behaviour, so
    /// it runs in the unsigned type).
    fn signed_overflow_wraps(&self) -> bool {
        false
    }
    /// The value of element `idx` of `buf` (a PARAM, a local array) of element type `dtype`.
    fn load(&self, buf: &UOp, dtype: DType, buf_name: &str, idx: &str) -> String {
        let _ = (buf, dtype);
        format!("{buf_name}[{idx}]")
    }
    /// The statement writing `value` to element `idx` of `buf` of element type `dtype`.
    fn store(&self, buf: &UOp, dtype: DType, buf_name: &str, idx: &str, value: &str) -> String {
        let _ = (buf, dtype);
        format!("{buf_name}[{idx}] = {value};")
    }
    /// How a kernel names variable `name`, a value its signature declares.
    fn variable(&self, name: &str) -> String {
        name.to_string()
    }
    /// Whether a workgroup's shared arrays are declared outside the kernel (WGSL), not in it.
    fn locals_outside(&self) -> bool {
        false
    }
    /// `code` defined once where kernels are concatenated into one source: behind an include
    /// guard named after `what`.
    fn once(&self, what: &str, code: &str) -> String {
        include_once(what, code)
    }
}

/// A vector hook reached in a scalar dialect: codegen made a vector for a target without them.
pub(super) fn scalar_only(what: &str) -> ! {
    panic!("C-family renderer: {what}, but this dialect's target has no vector registers")
}

/// A buffer a kernel uses: its slot in the launch's buffer list, element type, name, and
/// whether the kernel writes it. Slots a kernel doesn't read have no `Param`. A variable's value
/// is a `Param` too (`by_value`), its slot its place among the kernel's variables
/// (`variable::kernel_vars`), after every buffer.
pub struct Param {
    pub slot: i64,
    pub ty: String,
    pub name: String,
    pub written: bool,
    pub by_value: bool,
}

/// A C literal of `v` as `dtype`, whose type is called `ty()` (asked only where a cast needs it);
/// a `storage_only` 16-bit float is its bits, a 64-bit integer has `long_suffix`.
fn c_literal(ty: &dyn Fn() -> String, storage_only: bool, long_suffix: &str, v: ConstValue, dtype: DType) -> String {
    match (v, dtype.scalar) {
        (ConstValue::Bool(b), _) => (b as u8).to_string(),
        (ConstValue::Float(f), s) if storage_only => {
            let bits = match s {
                Scalar::BFloat16 => half::bf16::from_f64(f).to_bits(),
                _ => half::f16::from_f64(f).to_bits(),
            };
            format!("(({}){bits:#06x})", ty())
        }
        (ConstValue::Float(f), s) => {
            let body = if f.is_nan() {
                "NAN".to_string()
            } else if f.is_infinite() {
                format!("{}INFINITY", if f < 0.0 { "-" } else { "" })
            } else if s == Scalar::Float64 {
                format!("{f:?}")
            } else {
                format!("{f:?}f")
            };
            if matches!(s, Scalar::Float32 | Scalar::Float64) {
                body
            } else {
                format!("(({}){body})", ty())
            }
        }
        (ConstValue::Int(i), Scalar::UInt64) => format!("{}u{long_suffix}", i as u64),
        (ConstValue::Int(i), Scalar::UInt32) => format!("{}u", i as u32),
        (ConstValue::Int(i), Scalar::Int64 | Scalar::Index) if i == i64::MIN => {
            format!("(-9223372036854775807{long_suffix}-1)")
        }
        (ConstValue::Int(i), Scalar::Int64 | Scalar::Index) => format!("{i}{long_suffix}"),
        (ConstValue::Int(i), Scalar::Int32) if i == i32::MIN as i64 => "(-2147483647-1)".into(),
        (ConstValue::Int(i), Scalar::Int32) => i.to_string(),
        (ConstValue::Int(i), _) => format!("(({}){i})", ty()),
    }
}

/// The value every lane of `u` holds, if it is a CONST or a VECTORIZE of one CONST.
fn splat_const(u: &UOp) -> Option<f64> {
    match u.op() {
        Ops::Const => u.const_value().map(|c| c.as_f64()),
        Ops::Vectorize if u.src().iter().all(|s| s == &u.src()[0]) => splat_const(&u.src()[0]),
        _ => None,
    }
}

/// The vector and first lane of a VECTORIZE of consecutive lanes of one wider float vector.
fn consecutive_lanes(u: &UOp) -> Option<(&UOp, usize)> {
    let first = &u.src()[0];
    let (Ops::Gep, Arg::Int(k)) = (first.op(), first.arg()) else { return None };
    let v = &first.src()[0];
    let lane = |(i, s): (usize, &UOp)| s.op() == Ops::Gep && &s.src()[0] == v && s.arg() == &Arg::Int(*k + i as i64);
    let wider = v.dtype().count > u.dtype().count && u.dtype().is_float();
    (wider && u.src().iter().enumerate().all(lane)).then_some((v, *k as usize))
}

/// `max(a[0], a[1])` when one side is a constant that is not NaN, as `c > x ? c : x` (a single
/// max instruction, `x`'s NaN propagating), or `None`. That is exact for `max(c, x)`, which takes
/// `x` on a tie. `max(x, c)` takes `c` on a tie, which differs only for zeros: a +0.0 `c` is
/// restored by adding it (which leaves every other result as is), a -0.0 `c` is left to `None`.
fn render_max_with_const(d: &dyn Dialect, dtype: DType, srcs: &[UOp], a: &[String]) -> Option<String> {
    let usable = |c: Option<f64>| c.filter(|c| !c.is_nan());
    let (x, c, tie_fix) = match (usable(splat_const(&srcs[0])), usable(splat_const(&srcs[1]))) {
        (Some(_), _) => (&a[1], &a[0], false),
        (None, Some(c)) if !(c == 0.0 && c.is_sign_negative()) => (&a[0], &a[1], c == 0.0),
        _ => return None,
    };
    let max = match dtype.count {
        1 => format!("({})", d.select(&format!("({c} > {x})"), c, x)),
        _ => d.vector_max_over(dtype, &[x.clone(), c.clone()]),
    };
    Some(if tie_fix { format!("({max} + {c})") } else { max })
}

/// The unsigned type that integer `op` on scalar `dtype` runs in, where C's own would overflow
/// (undefined behaviour) or shift a negative value: the IR wraps (`uop/exec.rs`), and unsigned
/// arithmetic wraps in C. Index arithmetic never overflows and keeps its type.
fn wrapping_type(op: Ops, dtype: DType) -> Option<DType> {
    if dtype.count != 1 {
        return None;
    }
    match (op, dtype.scalar) {
        (Ops::Add | Ops::Sub | Ops::Mul | Ops::Neg | Ops::Shl, Scalar::Int32) => Some(DType::UINT32),
        (Ops::Add | Ops::Sub | Ops::Mul | Ops::Neg | Ops::Shl, Scalar::Int64) => Some(DType::UINT64),
        // promoted to int, where a product of two uint16s or a negative value shifted overflows
        (Ops::Mul, Scalar::UInt16) | (Ops::Shl, Scalar::Int8 | Scalar::Int16) => Some(DType::UINT32),
        _ => None,
    }
}

/// The expression of an ALU op over already-rendered operands `a` (of sources `srcs`).
fn render_alu(d: &dyn Dialect, op: Ops, dtype: DType, srcs: &[UOp], a: &[String]) -> String {
    if let Some(own) = d.alu(op, dtype, srcs, a) {
        return own;
    }
    if let Some(unsigned) = wrapping_type(op, dtype).filter(|_| !d.signed_overflow_wraps()) {
        let u = d.type_name(unsigned);
        // a shift's amount keeps its type
        let operands: Vec<String> = a
            .iter()
            .enumerate()
            .map(|(i, x)| if op == Ops::Shl && i == 1 { x.clone() } else { format!("(({u}){x})") })
            .collect();
        return format!("(({}){})", d.type_name(dtype), render_alu(d, op, unsigned, srcs, &operands));
    }
    let infix = |sym: &str| format!("({} {sym} {})", a[0], a[1]);
    let float = dtype.is_float();
    match op {
        Ops::Add => infix("+"),
        Ops::Sub => infix("-"),
        Ops::Mul => infix("*"),
        Ops::FDiv => infix("/"),
        Ops::IDiv if float => d.math("trunc", dtype, &[infix("/")]),
        Ops::IDiv => infix("/"),
        Ops::Mod if float => d.math("fmod", dtype, a),
        Ops::Mod => infix("%"),
        Ops::CmpLt => infix("<"),
        Ops::CmpNe => infix("!="),
        Ops::CmpEq => infix("=="),
        Ops::And if dtype.is_bool() && dtype.count == 1 => infix("&&"),
        Ops::Or if dtype.is_bool() && dtype.count == 1 => infix("||"),
        Ops::And => infix("&"),
        Ops::Or => infix("|"),
        Ops::Xor => infix("^"),
        Ops::Shl => infix("<<"),
        Ops::Shr => infix(">>"),
        // NaN propagates from either side, as in the interpreter.
        Ops::Max if float => match render_max_with_const(d, dtype, srcs, a) {
            Some(max) => max,
            None if dtype.count > 1 => d.vector_max(dtype, a),
            None => {
                let larger = format!("({} || {} > {})", d.is_nan(dtype, &a[0]), a[0], a[1]);
                format!("({})", d.select(&larger, &a[0], &a[1]))
            }
        },
        Ops::Max => format!("({})", d.select(&format!("({} > {})", a[0], a[1]), &a[0], &a[1])),
        Ops::Where if dtype.count > 1 => d.vector_where(dtype, a),
        Ops::Where => format!("({})", d.select(&a[0], &a[1], &a[2])),
        Ops::MulAcc if float && dtype.count > 1 => d.vector_fma(dtype, a),
        Ops::MulAcc if matches!(dtype.scalar, Scalar::Float32 | Scalar::Float64) => d.math("fma", dtype, a),
        Ops::MulAcc => format!("(({} * {}) + {})", a[0], a[1], a[2]),
        // a mask's lanes are all ones or all zeros
        Ops::Neg if dtype.is_bool() && dtype.count > 1 => format!("(~{})", a[0]),
        Ops::Neg if dtype.is_bool() => format!("(!{})", a[0]),
        Ops::Neg if dtype.count == 1 && matches!(dtype.scalar, Scalar::Float32 | Scalar::Float64) => {
            d.negate(dtype, &a[0])
        }
        Ops::Neg => format!("(-{})", a[0]),
        Ops::Recip => {
            format!("(({}){} / {})", d.type_name(dtype), d.literal(ConstValue::Float(1.0), DType::FLOAT64), a[0])
        }
        Ops::Exp2 => d.math("exp2", dtype, a),
        Ops::Log2 => d.math("log2", dtype, a),
        Ops::Sin => d.math("sin", dtype, a),
        Ops::Sqrt if dtype.count > 1 => d.vector_sqrt(dtype, &a[0]),
        Ops::Sqrt => d.math("sqrt", dtype, a),
        Ops::Trunc if float => d.math("trunc", dtype, a),
        Ops::Trunc => a[0].clone(),
        Ops::Pow => d.math("pow", dtype, a),
        _ => panic!("C renderer: cannot render {}", op.name()),
    }
}

/// Vector loads that are factors of several products: the operands of a tile of vector
/// accumulators (a row of `w` shared by a matmul tile's rows, each `x @ w.T` load feeding 4
/// FMAs). gcc folds such a load into every FMA that uses it, as a memory operand: the tile's
/// loads tripled (24 for 16 FMAs in `x @ w.T`; 12 for 8 in a 4x16 AVX2 matmul tile, which ran at
/// 63 GFLOP/s a core against 92 pinned in a register) and its speed halved.
fn reused_vector_operands(uops: &[UOp], register_bytes: usize) -> HashSet<&UOp> {
    let mut uses: HashMap<&UOp, usize> = HashMap::new();
    for u in uops {
        for s in u.src() {
            *uses.entry(s).or_default() += 1;
        }
    }
    // ungated, and one of the target's registers wide (a register is what the pin asks for)
    let register = |u: &UOp| u.dtype().itemsize() * u.dtype().count as usize <= register_bytes;
    let vector_load =
        |u: &UOp| u.op() == Ops::Load && u.dtype().count > 1 && u.src()[0].src().len() == 2 && register(u);
    uops.iter()
        .filter(|u| matches!(u.op(), Ops::Mul | Ops::MulAcc))
        .flat_map(|u| &u.src()[..2])
        .filter(|l| vector_load(l) && uses.get(l).is_some_and(|n| *n > 1))
        .collect()
}

/// Render the linear program `uops` as kernel `name` for `target`.
pub fn render(d: &dyn Dialect, target: &Target, name: &str, uops: &[UOp]) -> String {
    let mut names: HashMap<&UOp, String> = HashMap::new();
    let written: HashSet<&UOp> = uops.iter().filter(|u| u.op() == Ops::Store).map(|u| &u.src()[0].src()[0]).collect();
    let mut params: Vec<Param> = vec![];
    let mut body = String::new();
    let mut depth = 1;
    let mut streamed = false;
    // the workgroup's shared arrays, where the dialect declares them outside the kernel
    let mut outside = String::new();
    let pinned = reused_vector_operands(uops, target.register_bytes);
    let vars = kernel_vars(uops);
    let mut counter: HashMap<&str, usize> = HashMap::new();
    let mut fresh = |prefix: &'static str| {
        let n = counter.entry(prefix).or_insert(0);
        *n += 1;
        format!("{prefix}{}", *n - 1)
    };
    for u in uops {
        let src: Vec<String> = u.src().iter().map(|s| names.get(s).cloned().unwrap_or_default()).collect();
        let ty = if u.dtype().is_ptr() || u.dtype() == DType::VOID { String::new() } else { d.type_name(u.dtype()) };
        let pad = "  ".repeat(depth);
        let mut line = |s: String| {
            let _ = writeln!(body, "{pad}{s}");
        };
        let value = match (u.op(), u.arg()) {
            (Ops::Const, Arg::Const(c)) => Some(d.literal(*c, u.dtype())),
            (Ops::Param, Arg::Int(slot)) => {
                let n = format!("data{slot}");
                params.push(Param {
                    slot: *slot,
                    ty: d.buffer_type(u.dtype().base()),
                    name: n.clone(),
                    written: written.contains(u),
                    by_value: false,
                });
                Some(n)
            }
            (Ops::DefineVar, Arg::Var(var, ..)) => {
                let n = format!("var_{var}");
                let slot = vars.iter().position(|v| v == u).expect("a kernel variable") as i64;
                params.push(Param {
                    slot,
                    ty: d.type_name(DType::INDEX),
                    name: n.clone(),
                    written: false,
                    by_value: true,
                });
                Some(d.variable(&n))
            }
            (Ops::Range, Arg::Range(id, _)) => {
                let n = format!("ridx{id}");
                line(d.loop_open(&n, &src[0]));
                depth += 1;
                Some(n)
            }
            (Ops::End, _) => {
                depth -= 1;
                let _ = writeln!(body, "{}}}", "  ".repeat(depth));
                None
            }
            (Ops::Index, _) => Some(format!("{}[{}]", src[0], src[1])),
            (Ops::Load, _) if u.dtype().count > 1 => {
                let n = fresh("val");
                let load = d.vector_load(u.dtype(), &n, &format!("&{}", src[0]));
                match u.src()[0].src().get(2) {
                    Some(g) if g.dtype().count > 1 => {
                        line(format!("{ty} {n} = {};", d.masked_load(u.dtype(), &format!("&{}", src[0]), &names[g])))
                    }
                    Some(g) => {
                        line(format!("{ty} {n} = {}; if ({}) {load}", d.vector_literal(&ty, &["0".into()]), names[g]))
                    }
                    None if pinned.contains(u) => line(format!("{ty} {n}; {load} {}", d.keep_in_register(&n))),
                    None => line(format!("{ty} {n}; {load}")),
                }
                Some(n)
            }
            (Ops::Store, Arg::Store(crate::uop::StoreMode::Stream)) => {
                streamed = true;
                line(d.stream_store(u.src()[1].dtype(), &format!("&{}", src[0]), &src[1]));
                None
            }
            (Ops::Store, _) if u.src()[1].dtype().count > 1 => {
                let store = d.vector_store(u.src()[1].dtype(), &format!("&{}", src[0]), &src[1]);
                match u.src()[0].src().get(2) {
                    Some(g) if g.dtype().count > 1 => {
                        line(d.masked_store(u.src()[1].dtype(), &format!("&{}", src[0]), &src[1], &names[g]))
                    }
                    Some(g) => line(d.guarded(&names[g], &store)),
                    None => line(store),
                }
                None
            }
            (Ops::Vectorize, _) if consecutive_lanes(u).is_some() => {
                let n = fresh("vec");
                let (v, first) = consecutive_lanes(u).expect("checked");
                line(d.vector_slice(u.dtype(), &n, &names[v], first));
                Some(n)
            }
            // bool lanes become masks: true is all ones
            (Ops::Vectorize, _) => {
                let n = fresh("vec");
                let lanes: Vec<String> = match u.dtype().is_bool() {
                    true => src.iter().map(|l| format!("-({l})")).collect(),
                    false => src.clone(),
                };
                line(format!("{ty} {n} = {};", d.vector_literal(&ty, &lanes)));
                Some(n)
            }
            (Ops::Gep, Arg::Int(k)) if u.dtype().is_bool() => Some(format!("({} != 0)", d.lane(&src[0], *k as usize))),
            (Ops::Gep, Arg::Int(k)) => Some(d.lane(&src[0], *k as usize)),
            (Ops::Load, _) => {
                let n = fresh("val");
                let gate = u.src()[0].src().get(2).map(|g| names[g].clone());
                let value = element(d, &names, &u.src()[0], u.dtype(), None).unwrap_or_else(|| src[0].clone());
                let value = match gate {
                    Some(g) => d.select(&g, &value, &d.literal(ConstValue::Int(0), u.dtype())),
                    None => value,
                };
                line(d.declare(&ty, &n, &value, false));
                Some(n)
            }
            (Ops::Store, _) => {
                let store = element(d, &names, &u.src()[0], u.src()[1].dtype(), Some(&src[1]))
                    .unwrap_or_else(|| format!("{} = {};", src[0], src[1]));
                match u.src()[0].src().get(2).map(|g| names[g].clone()) {
                    Some(g) => line(d.guarded(&g, &store)),
                    None => line(store),
                }
                None
            }
            (Ops::DefineReg, _) => {
                let n = fresh("acc");
                line(d.declare(&ty, &n, &src[0], true));
                Some(n)
            }
            (Ops::Assign, _) => {
                line(format!("{} = {};", src[0], src[1]));
                Some(src[0].clone())
            }
            (Ops::After, _) => Some(src[0].clone()),
            // named: a vector store takes its value's address
            (Ops::Cast, _) if u.dtype().count > 1 => {
                let n = fresh("cast");
                line(format!("{ty} {n} = {};", d.vector_cast(u.dtype(), u.src()[0].dtype(), &src[0])));
                Some(n)
            }
            (Ops::Cast, _) if d.storage_only(u.dtype()).is_some() => {
                Some(format!("lg_f32_to_{}({})", d.storage_only(u.dtype()).expect("checked"), src[0]))
            }
            (Ops::Cast, _) if d.storage_only(u.src()[0].dtype()).is_some() => {
                Some(format!("lg_{}_to_f32({})", d.storage_only(u.src()[0].dtype()).expect("checked"), src[0]))
            }
            (Ops::Cast, _) => Some(d.cast(u.dtype(), u.src()[0].dtype(), &src[0])),
            (Ops::Bitcast, _) => Some(d.bitcast(u.src()[0].dtype(), u.dtype(), &src[0])),
            (Ops::Special, Arg::Special(which)) => Some(d.special(*which)),
            (Ops::DefineLocal, Arg::Int(id)) => {
                let n = format!("temp{id}");
                match d.locals_outside() {
                    true => outside += &format!("{}\n", d.local_array(u.dtype().base(), &n, &src[0])),
                    false => line(d.local_array(u.dtype().base(), &n, &src[0])),
                }
                Some(n)
            }
            (Ops::Barrier, _) => {
                line(d.barrier());
                None
            }
            (Ops::Sink, _) => None,
            (Ops::Wmma, Arg::Wmma(tc)) => {
                let n = fresh("wmma");
                line(d.declare(&ty, &n, &format!("lg_{}({}, {}, {})", tc.name, src[0], src[1], src[2]), false));
                Some(n)
            }
            (op, _) if op.is_alu() => {
                let operand = if op == Ops::Where { u.src()[1].dtype() } else { u.src()[0].dtype() };
                let n = fresh("alu");
                line(d.declare(&ty, &n, &d.wrap(u.dtype(), render_alu(d, op, operand, u.src(), &src)), false));
                Some(n)
            }
            (op, _) => panic!("C renderer: unexpected {} in a linear program", op.name()),
        };
        if let Some(v) = value {
            names.insert(u, v);
        }
    }
    if streamed {
        let _ = writeln!(body, "  {}", d.stream_fence());
    }
    params.sort_by_key(|p| (p.by_value, p.slot));
    // float32 vectors select through masks of their width: a bool vector type comes with them
    let mut vectors: Vec<DType> = uops.iter().map(UOp::dtype).filter(|t| t.count > 1).collect();
    let masks: Vec<DType> =
        vectors.iter().filter(|t| t.scalar == Scalar::Float32).map(|t| DType::BOOL.vec(t.count)).collect();
    vectors.extend(masks);
    vectors.sort_by_key(|t| (t.scalar, t.count));
    vectors.dedup();
    let mut typedefs: String = vectors.into_iter().map(|t| d.once(&format!("{t:?}"), &d.vector_typedef(t))).collect();
    let mut tensor_cores: Vec<&crate::uop::wmma::TensorCore> = uops
        .iter()
        .filter_map(|u| match u.arg() {
            Arg::Wmma(tc) => Some(*tc),
            _ => None,
        })
        .collect();
    tensor_cores.sort_by_key(|tc| tc.name);
    tensor_cores.dedup();
    typedefs.extend(tensor_cores.into_iter().map(|tc| d.once(tc.name, &d.tensor_core(tc))));
    let prelude = d.once("prelude", &d.prelude());
    let (signature, epilogue) = (d.signature(name, &params), d.epilogue(name, &params));
    format!("{prelude}{typedefs}{outside}{signature} {{\n{body}}}\n{epilogue}")
}

/// A scalar load of element type `dtype` through `index` (with `value`: a store of it), in the
/// dialect's words, or `None` where `index` is no INDEX node.
fn element(
    d: &dyn Dialect,
    names: &HashMap<&UOp, String>,
    index: &UOp,
    dtype: DType,
    value: Option<&String>,
) -> Option<String> {
    let [buf, idx, ..] = index.src() else { return None };
    (index.op() == Ops::Index).then(|| match value {
        Some(v) => d.store(buf, dtype, &names[buf], &names[idx], v),
        None => d.load(buf, dtype, &names[buf], &names[idx]),
    })
}

/// `code` behind an include guard named after `what`, so that kernels concatenated into one
/// translation unit (a compile batch) define their shared types and helpers once.
fn include_once(what: &str, code: &str) -> String {
    let guard: String =
        what.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    format!("#ifndef LG_{guard}\n#define LG_{guard}\n{code}#endif\n")
}
