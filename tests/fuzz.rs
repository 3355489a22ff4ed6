//! Differential fuzzing. proptest draws random tensor programs: elementwise ops of every dtype,
//! every movement op, sum and max reduces, matmuls (a tensor with its own transpose among them),
//! casts, integer division and remainder, and in-place assignment through views, up to 8 ops
//! deep over shapes of 1s and primes. Every value is a small integer, so every order of
//! summation gives the same float: results are compared bit for bit. Each program runs
//!  - end to end on INTERP and on the CPU, against an exact evaluation on the host;
//!  - kernel by kernel on the CPU with the heuristics' opts, with none (NOOPT) and with random
//!    legal opts, each against INTERP's run of the same kernel on the same inputs.
//!
//! Some programs end in a float op (`sqrt`, `exp`, `sin`, a division): their host value is
//! float64, compared within a tolerance. A failing program shrinks (proptest shrinks its choice
//! list) and is printed as that list: add it to `REGRESSIONS`, which run first.
//!
//! More parts, one concept per file under `tests/fuzz/`, each its own test run on the CPU, INTERP
//! and CL: JIT call sequences (`jit_calls.rs`), assignment through random views (`views.rs`),
//! gradients at kinks and special points (`kinks.rs`), Variables bound at their extremes
//! (`variables.rs`).
//!
//! `FUZZ_PROGRAMS=n` and `FUZZ_SEED=s` (a byte) run other or more programs than CI's 2,000 of
//! seed 20; the other parts scale their counts by the same factor.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use lazygrad::codegen::opt::{apply_opt, kernel_ranges, Opt};
use lazygrad::codegen::{get_program, get_program_opts, optimizable};
use lazygrad::engine::CompiledKernel;
use lazygrad::engine::ScheduleItem;
use lazygrad::renderer::c::CRenderer;
use lazygrad::renderer::listing::ListingRenderer;
use lazygrad::runtime::{get_device, Buffer, DefaultDevice};
use lazygrad::schedule::VarVals;
use lazygrad::uop::ProgramSpec;
use lazygrad::uop::{AxisKind, Kernel};
use lazygrad::{Context, DType, Tensor};

mod common;
#[path = "fuzz/driver.rs"]
mod driver;
#[path = "fuzz/host.rs"]
mod host;
#[path = "fuzz/jit_calls.rs"]
mod jit_calls;
#[path = "fuzz/kinks.rs"]
mod kinks;
#[path = "fuzz/program.rs"]
mod program;
#[path = "fuzz/variables.rs"]
mod variables;
#[path = "fuzz/views.rs"]
mod views;

use host::{host_run, Host};
use program::{build, Bin, Choices, Expr, Node, Program, Tail, Un, View};
use proptest::strategy::ValueTree;

/// Programs whose kernels are compiled together (one compiler run per batch and core).
const BATCH: usize = 100;
/// Choice lists of programs that once failed, replayed before the random ones. A list decodes to
/// its program only under the generator it was found with, so each bug found also has a named
/// test in `tests/edges.rs` (these two: the negated dot product and the lane-invariant load).
const REGRESSIONS: &[&[u16]] = &[
    &[45474, 0, 6877, 297, 2515, 1877, 18641, 0, 24890, 10396, 4464, 183, 4579, 29776, 0, 500, 4864],
    &[
        14028, 4415, 41187, 19230, 5, 27923, 46695, 34147, 1, 32975, 0, 0, 0, 769, 12663, 30221, 52968, 6321, 27536, 0,
        1, 60721, 1, 24513, 0, 1689, 27060, 0, 17197, 0, 0, 0, 0, 0, 1, 21305, 0, 0, 0, 0, 0, 0, 14537, 45364, 0, 8497,
        33103, 40457, 0, 13, 31041, 58250, 25827, 42930, 11553, 47634, 58999, 45284, 29240, 23143, 53406, 61898, 50953,
        41539, 34620, 23011, 9650, 43322, 24275, 26619, 20681, 15524, 47309, 7805, 59942, 8827, 4431, 1787, 14977,
        29694, 57900, 45158, 10406, 13862, 61056, 54506, 40599, 54768, 9625, 43855, 2583, 15825, 62851, 29100, 14004,
        24503, 39288, 41040, 37634, 32558, 43071, 11228, 49105, 35182, 49516, 40075, 4350, 22601, 4802, 53116,
    ],
];

/// Small integer `values` as little-endian elements of `dtype`.
fn value_bytes(dtype: DType, values: &[i64]) -> Vec<u8> {
    let mut out = vec![];
    for &v in values {
        match dtype {
            DType::FLOAT32 => out.extend((v as f32).to_le_bytes()),
            DType::FLOAT16 => out.extend(half::f16::from_f64(v as f64).to_le_bytes()),
            DType::BFLOAT16 => out.extend(half::bf16::from_f64(v as f64).to_le_bytes()),
            DType::INT32 => out.extend((v as i32).to_le_bytes()),
            DType::INT8 => out.extend((v as i8).to_le_bytes()),
            DType::UINT8 | DType::BOOL => out.push(v as u8),
            DType::FLOAT64 => out.extend((v as f64).to_le_bytes()),
            DType::INT16 => out.extend((v as i16).to_le_bytes()),
            DType::INT64 => out.extend(v.to_le_bytes()),
            DType::UINT16 => out.extend((v as u16).to_le_bytes()),
            DType::UINT32 => out.extend((v as u32).to_le_bytes()),
            DType::UINT64 => out.extend((v as u64).to_le_bytes()),
            other => unreachable!("no inputs of {other:?}"),
        }
    }
    out
}

/// The program as lazygrad tensors on `device`: what to realize (the result, or the assignment)
/// and the output to read after it (the result, or the assigned input).
fn lazy(p: &Program, device: &str) -> (Tensor, Tensor) {
    let inputs: Vec<Tensor> = p
        .inputs
        .iter()
        .map(|i| Tensor::from_bytes(&value_bytes(i.dtype, &i.values), &i.shape, i.dtype, device))
        .collect();
    program_over(p, &inputs)
}

/// The program over `inputs` (tensors of its inputs' shapes and dtypes): what to realize and the
/// output to read after it, as `lazy` says.
fn program_over(p: &Program, inputs: &[Tensor]) -> (Tensor, Tensor) {
    let mut memo: HashMap<*const Node, Tensor> = HashMap::new();
    let value = lazy_node(&p.root, inputs, &mut memo);
    let Some((target, views)) = &p.assign else { return (value.clone(), value) };
    let mut view = inputs[*target].clone();
    for v in views {
        view = match v {
            View::Permute(perm) => view.permute(&perm.iter().map(|&a| a as isize).collect::<Vec<_>>()),
            View::Shrink(bounds) => view.shrink(bounds),
            View::Reshape(shape) => view.reshape(shape),
        };
    }
    (view.assign(&value), inputs[*target].clone())
}

fn lazy_node(node: &Rc<Node>, inputs: &[Tensor], memo: &mut HashMap<*const Node, Tensor>) -> Tensor {
    if let Some(t) = memo.get(&Rc::as_ptr(node)) {
        return t.clone();
    }
    let mut ev = |n: &Rc<Node>| lazy_node(n, inputs, memo);
    let axes = |a: &[usize]| a.iter().map(|&x| x as isize).collect::<Vec<_>>();
    let t = match &node.expr {
        Expr::Input(i) => inputs[*i].clone(),
        Expr::Unary(Un::Neg, x) => ev(x).neg(),
        Expr::Unary(Un::Abs, x) => ev(x).abs(),
        Expr::Unary(Un::Not, x) => ev(x).logical_not(),
        Expr::Binary(op, a, b) => {
            let (a, b) = (ev(a), ev(b));
            match op {
                Bin::Add => &a + &b,
                Bin::Sub => &a - &b,
                Bin::Mul => &a * &b,
                Bin::Max => a.maximum(&b),
                Bin::Min => a.minimum(&b),
                Bin::Lt => a.lt(&b),
                Bin::Ne => a.ne(&b),
                Bin::Eq => a.eq(&b),
                Bin::And => a.bitwise_and(&b),
                Bin::Or => a.bitwise_or(&b),
                Bin::Xor => a.bitwise_xor(&b),
                Bin::IDiv => a.idiv(&b),
                Bin::Mod => a.mod_(&b),
                Bin::FMod => a.fmod(&b),
            }
        }
        Expr::Where(c, a, b) => {
            let (c, a, b) = (ev(c), ev(a), ev(b));
            c.where_(&a, &b)
        }
        Expr::Cast(x) => ev(x).cast(node.dtype),
        Expr::Contiguous(x) => ev(x).contiguous(),
        Expr::Reshape(x) => ev(x).reshape(&node.shape),
        Expr::Permute(perm, x) => ev(x).permute(&axes(perm)),
        Expr::Expand(x) => ev(x).expand(&node.shape),
        Expr::Pad(pads, x) => ev(x).pad(pads),
        Expr::Shrink(bounds, x) => ev(x).shrink(bounds),
        Expr::Flip(flips, x) => ev(x).flip(&axes(flips)),
        Expr::Sum(axis, keepdim, x) => ev(x).sum(*axis as isize, *keepdim),
        Expr::Max(axis, keepdim, x) => ev(x).max(*axis as isize, *keepdim),
        Expr::Matmul(a, b) => {
            let (a, b) = (ev(a), ev(b));
            a.matmul(&b)
        }
        Expr::Gram(g) => {
            let g = ev(g);
            g.transpose(-1, -2).matmul(&g)
        }
        Expr::Tail(op, x, divisor) => {
            let x = ev(x);
            match (op, divisor) {
                (Tail::Sqrt, _) => x.abs().sqrt(),
                (Tail::Exp, _) => x.mul(1e-3).exp(),
                (Tail::Sin, _) => x.sin(),
                (Tail::Div, Some(d)) => x.div(ev(d).abs().add(1.0)),
                (Tail::Div, None) => unreachable!("a division has a divisor"),
            }
        }
    };
    assert_eq!(t.shape(), node.shape, "fuzz: built {:?}, meant {:?}", t.shape(), node.shape);
    assert_eq!(t.dtype(), node.dtype, "fuzz: built {:?} of {:?}", t.dtype(), node.expr);
    memo.insert(Rc::as_ptr(node), t.clone());
    t
}

/// Whether the program ends in a float op (compared within a tolerance, not exactly).
fn inexact(p: &Program) -> bool {
    matches!(p.root.expr, Expr::Tail(..))
}

/// `Err` describing the first value of `got` that differs from the host's `want`.
fn compare(what: &str, got: &[f64], want: &Host, tolerant: bool) -> Result<(), String> {
    if got.len() != want.values.len() {
        return Err(format!("{what}: {} values, the host has {}", got.len(), want.values.len()));
    }
    for (i, (&g, &w)) in got.iter().zip(&want.values).enumerate() {
        let ok = match tolerant {
            true => (g - w).abs() <= 1e-6 + 1e-5 * w.abs(),
            false => g == w,
        };
        if !ok {
            return Err(format!("{what}: element {i} is {g}, the host says {w}"));
        }
    }
    Ok(())
}

/// The program's end-to-end result on `device`, as f64.
fn run_on(p: &Program, device: &str) -> Result<Vec<f64>, String> {
    let _device = DefaultDevice::scoped(device);
    let (result, out) = lazy(p, device);
    result.try_realize().map_err(|e| format!("{device}: {e}"))?;
    out.cast(DType::FLOAT64).try_to_vec::<f64>().map_err(|e| format!("{device}: {e}"))
}

/// Random legal opts for the CPU (no workgroups) on the optimizable form of kernel `ast`.
fn random_opts(ast: &Kernel, c: &mut Choices) -> Vec<Opt> {
    let mut current = optimizable(ast).unwrap().root().clone();
    let mut opts = vec![];
    for _ in 0..1 + c.pick(5) {
        let ranges = kernel_ranges(&current);
        if ranges.is_empty() {
            break;
        }
        let (id, _, _) = ranges[c.pick(ranges.len())];
        let amount = [2, 3, 4, 5, 7, 8, 16][c.pick(7)];
        let loops: Vec<usize> = ranges.iter().filter(|r| r.1 == AxisKind::Loop).map(|r| r.0).collect();
        let opt = match c.pick(5) {
            0 => Opt::Upcast { range: id, amount },
            1 => Opt::Unroll { range: id, amount },
            2 => Opt::Padto { range: id, amount },
            3 => Opt::Thread(amount.min(4)),
            _ => Opt::Swap { range: id, with: loops.get(c.pick(loops.len().max(1))).copied().unwrap_or(id) },
        };
        if let Some(next) = apply_opt(&current, opt) {
            current = next;
            opts.push(opt);
        }
    }
    opts
}

/// One kernel of a program's CPU schedule: its AST and buffers, and its variants (the
/// heuristics' opts, none, random ones), each as a name and the programs for the CPU and INTERP.
struct KernelCase {
    ast: Kernel,
    bufs: Vec<Arc<Buffer>>,
    /// The values of the program's scalar parameters (its float constants).
    vals: VarVals,
    variants: Vec<(String, ProgramSpec, ProgramSpec)>,
}

/// A program prepared for its runs: the host result, its kernels and the VECTOR_BYTES they were
/// generated for.
struct Prepared {
    host: Host,
    kernels: Vec<KernelCase>,
    vector_bytes: i64,
}

/// Schedule `p` on the CPU and generate every variant of its kernels (nothing runs yet).
fn prepare(p: &Program, list: &[u16]) -> Result<Prepared, String> {
    let host = host_run(p);
    // the opts' choices come from the end of the list, so that they do not shift the program's
    let mut c = Choices { list, at: list.len() / 2 };
    let vector_bytes = [16, 32, 64][c.pick(3)];
    let _width = Context::new(&[("VECTOR_BYTES", vector_bytes)]);
    let (result, _) = {
        let _device = DefaultDevice::scoped("CPU");
        lazy(p, "CPU")
    };
    let mut kernels = vec![];
    let (items, vals) = Tensor::linear_with_vars(std::slice::from_ref(&result)).map_err(|e| e.to_string())?;
    for item in items {
        let ScheduleItem::Kernel { ast, bufs } = item else { continue };
        let generate = |opts: Option<&[Opt]>, r: &dyn lazygrad::renderer::Renderer| {
            match opts {
                None => get_program(&ast, r),
                Some(o) => get_program_opts(&ast, r, o, ""),
            }
            .map_err(|e| format!("codegen: {e}"))
        };
        let random = random_opts(&ast, &mut c);
        let mut variants = vec![];
        for (name, opts) in [
            ("heuristics".to_string(), None),
            ("NOOPT".to_string(), Some(vec![])),
            (format!("opts {random:?}"), Some(random)),
        ] {
            let (cpu, interp) = (generate(opts.as_deref(), &CRenderer)?, generate(opts.as_deref(), &ListingRenderer)?);
            variants.push((name, cpu, interp));
        }
        kernels.push(KernelCase { ast: ast.clone(), bufs, vals: vals.clone(), variants });
    }
    Ok(Prepared { host, kernels, vector_bytes })
}

/// Run a prepared program's kernels, each variant from the same inputs: the CPU's result equals
/// INTERP's for the same variant bit for bit, and every variant's the heuristics' (as values: a
/// zero's sign depends on the order of a sum; within a tolerance in a float tail). The
/// heuristics' result goes on to the next kernel.
fn run_kernels(prepared: &Prepared, tolerant: bool) -> Result<(), String> {
    let device = |name: &str| get_device(name).map_err(|e| e.to_string());
    let (cpu, interp) = (device("CPU")?, device("INTERP")?);
    for k in &prepared.kernels {
        let out = &k.bufs[0];
        let before = out.copyout().map_err(|e| e.to_string())?;
        let mut first: Option<Vec<u8>> = None;
        for (name, cpu_spec, interp_spec) in &k.variants {
            let run = |dev: &Arc<dyn lazygrad::runtime::Device>, spec: &ProgramSpec| {
                out.copyin(&before).map_err(|e| e.to_string())?;
                let err = |e: lazygrad::Error| format!("{} {name}: {e}\n{:?}", dev.name(), k.ast);
                let c = CompiledKernel::compile(&**dev, &k.ast, spec).map_err(err)?;
                let vals: Vec<i64> = c.vars.iter().map(|n| k.vals[n]).collect();
                c.launch(&k.bufs, &vals).map_err(err)?;
                out.copyout().map_err(|e| e.to_string())
            };
            let (on_interp, on_cpu) = (run(&interp, interp_spec)?, run(&cpu, cpu_spec)?);
            let reference = first.get_or_insert_with(|| on_interp.clone());
            let failure = match () {
                _ if on_cpu != on_interp => "the CPU differs from INTERP",
                _ if !same_values(&on_interp, reference, out.dtype(), tolerant) => {
                    "INTERP differs from the heuristics' result"
                }
                _ => continue,
            };
            let size = out.dtype().itemsize();
            let at = (0..on_cpu.len()).find(|&i| on_cpu[i] != on_interp[i]).map_or(0, |i| i / size);
            let bytes = |b: &[u8]| b[at * size..(at + 1) * size].to_vec();
            return Err(format!(
                "kernel {} with {name}: {failure}: element {at} is {:?} on the CPU, {:?} on INTERP\n{:?}\n{}",
                cpu_spec.name,
                bytes(&on_cpu),
                bytes(&on_interp),
                k.ast,
                cpu_spec.src
            ));
        }
        out.copyin(first.as_deref().unwrap_or(&before)).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Two buffers of `dtype` hold the same values (floats compared as numbers, within the float
/// tail's tolerance when `tolerant`; other dtypes bit for bit).
fn same_values(a: &[u8], b: &[u8], dtype: DType, tolerant: bool) -> bool {
    let floats = |bytes: &[u8]| -> Vec<f64> {
        match dtype {
            DType::FLOAT32 => bytes.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64).collect(),
            DType::FLOAT16 => bytes.chunks(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
            DType::BFLOAT16 => bytes.chunks(2).map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f64()).collect(),
            DType::FLOAT64 => bytes.chunks(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect(),
            _ => unreachable!("only floats"),
        }
    };
    if !dtype.is_float() {
        return a == b;
    }
    floats(a).iter().zip(floats(b)).all(|(&x, y)| x == y || tolerant && (x - y).abs() <= 1e-6 + 1e-5 * y.abs())
}

/// Every check of one program, after its kernels were compiled.
fn check_prepared(p: &Program, prepared: &Prepared) -> Result<(), String> {
    let tolerant = inexact(p);
    run_kernels(prepared, tolerant)?;
    let _width = Context::new(&[("VECTOR_BYTES", prepared.vector_bytes)]);
    for device in ["INTERP", "CPU"] {
        compare(device, &run_on(p, device)?, &prepared.host, tolerant)?;
    }
    Ok(())
}

/// A program's checks, as one `Result` (a panic inside lazygrad is a failure too).
fn check(list: &[u16]) -> Result<(), String> {
    let p = build(list);
    let run = || {
        let prepared = prepare(&p, list)?;
        compile(&prepared.kernels)?;
        check_prepared(&p, &prepared)
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
        .unwrap_or_else(|e| Err(format!("panic: {}", e.downcast_ref::<String>().cloned().unwrap_or_default())))
        .map_err(|e| format!("{e}\nprogram: {p:#?}"))
}

/// Compile every CPU variant of `kernels` (one compiler run per batch of new ones).
fn compile(kernels: &[KernelCase]) -> Result<(), String> {
    let specs: Vec<&ProgramSpec> = kernels.iter().flat_map(|k| k.variants.iter().map(|(_, s, _)| s)).collect();
    get_device("CPU").and_then(|cpu| cpu.compile_all(&specs)).map(|_| ()).map_err(|e| format!("compile: {e}"))
}

#[test]
fn random_programs_agree_with_interp_and_the_host() {
    for list in REGRESSIONS {
        check(list).unwrap_or_else(|e| panic!("regression {list:?}:\n{e}"));
    }
    let mut trees = driver::draw(driver::setting("FUZZ_PROGRAMS", driver::PROGRAMS), 0);
    let (mut programs, mut kernels) = (0, 0);
    for batch in trees.chunks_mut(BATCH) {
        let lists: Vec<Vec<u16>> = batch.iter().map(|t| t.current()).collect();
        let built: Vec<Program> = lists.iter().map(|l| build(l)).collect();
        // generate every kernel of the batch, compile them together, then run each program
        let prepared: Vec<Result<Prepared, String>> = built
            .iter()
            .zip(&lists)
            .map(|(p, l)| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| prepare(p, l)))
                    .unwrap_or_else(|_| Err("panic".into()))
            })
            .collect();
        let cases: Vec<&KernelCase> = prepared.iter().flatten().flat_map(|p| &p.kernels).collect();
        let specs: Vec<&ProgramSpec> = cases.iter().flat_map(|k| k.variants.iter().map(|(_, s, _)| s)).collect();
        get_device("CPU").and_then(|cpu| cpu.compile_all(&specs)).expect("the batch compiles");
        kernels += cases.len();
        for (i, (p, prep)) in built.iter().zip(&prepared).enumerate() {
            programs += 1;
            let ok = match prep {
                Ok(prep) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_prepared(p, prep)))
                    .unwrap_or_else(|_| Err("panic".into())),
                Err(e) => Err(e.clone()),
            };
            if ok.is_err() {
                let failing = driver::shrink(&mut batch[i], &check);
                let err = check(&failing).expect_err("the shrunk program still fails");
                panic!("a fuzzed program fails; add its choices to REGRESSIONS:\n{failing:?}\n{err}");
            }
        }
    }
    println!("fuzzed {programs} programs ({kernels} kernels, 3 CPU variants each) with no mismatch");
    assert!(kernels >= programs, "the programs are too simple: {kernels} kernels for {programs} programs");
}

#[test]
fn assignments_through_random_views_write_the_host_models_elements_or_refuse() {
    use std::sync::atomic::Ordering;
    let programs = driver::run_part("views", 1, driver::scaled(views::PROGRAMS), views::REGRESSIONS, &views::check);
    let (written, refused) = (views::WRITTEN.load(Ordering::Relaxed), views::REFUSED.load(Ordering::Relaxed));
    println!(
        "assigned through {programs} random views on {:?}: {written} written, {refused} refused",
        driver::devices()
    );
    assert!(written > programs / 3 && refused > programs / 10, "{written} written and {refused} refused");
}

#[test]
fn jit_call_sequences_replay_as_eager() {
    use std::sync::atomic::Ordering;
    let programs =
        driver::run_part("jit", 2, driver::scaled(jit_calls::PROGRAMS), jit_calls::REGRESSIONS, &jit_calls::check);
    let count = |c: &std::sync::atomic::AtomicUsize| c.load(Ordering::Relaxed);
    let (fed, aliased, changed) = (count(&jit_calls::FED), count(&jit_calls::ALIASED), count(&jit_calls::CHANGED));
    println!(
        "called {programs} random functions through the JIT on {:?} as eagerly: {fed} calls fed an output back, \
         {aliased} gave one tensor twice, {changed} changed an input",
        driver::devices()
    );
    assert!(fed > 0 && aliased > 0 && changed > 0, "calls fed {fed}, aliased {aliased}, changed {changed}");
}

#[test]
fn gradients_at_kinks_follow_pytorch_and_central_differences() {
    use std::sync::atomic::Ordering;
    let programs = driver::run_part("kinks", 3, driver::scaled(kinks::PROGRAMS), kinks::REGRESSIONS, &kinks::check);
    let (kinked, smooth) = (kinks::AT_KINKS.load(Ordering::Relaxed), kinks::SMOOTH.load(Ordering::Relaxed));
    println!(
        "differentiated {programs} random programs on {:?}: {kinked} input elements at kinks, {smooth} smooth",
        driver::devices()
    );
    assert!(kinked * 4 >= kinked + smooth, "too few kinks: {kinked} of {} elements", kinked + smooth);
}

#[test]
fn programs_of_variable_shape_equal_their_concrete_twins_at_every_binding() {
    let programs = driver::run_part("variables", 4, driver::scaled(variables::PROGRAMS), &[], &variables::check);
    println!("ran {programs} programs of variable shape at three bindings each on {:?}", driver::devices());
}
