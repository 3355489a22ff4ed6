//! Every Tensor op of the core against numpy, on both the CPU device and the INTERP reference
//! device, which must also agree with each other; plus exact integer-semantics and creation-op
//! tests that need no fixture.
//!
//! The cases live in `fixtures/ops.bin`, written by `python3 tools/gen_fixtures.py` (which also
//! documents the format and the expression syntax). Each case is an expression such as
//! `add(permute(x0,[1,0]),x1)`; `apply` below maps every op name to lazygrad. Set `OPS_TRACE=1`
//! to print each case name before it runs (useful when a kernel crashes the process).

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, MutexGuard, OnceLock};

use common::{compare, dtype_from_name, parse_fixtures, Array, Case, Expr};
use lazygrad::runtime::DefaultDevice;
use lazygrad::tensor::Scalar;
use lazygrad::{DType, Tensor};

/// Fixture cases that expose known bugs in src/. The group tests skip them; each bug gets its own
/// `#[ignore]`d test (`cargo test --test ops -- --ignored`) that runs its cases, so a fix shows up
/// by name and its entry can then be deleted.
macro_rules! known_bugs {
    ($($test:ident: [$($case:literal),+ $(,)?] => $why:literal;)*) => {
        const KNOWN_BUGS: &[&str] = &[$($($case),+),*];
        $(
            #[test]
            #[ignore = $why]
            fn $test() {
                let _serial = serial();
                let failures: Vec<String> = [$($case),+].iter().filter_map(|c| check_case(named(c)).err()).collect();
                assert!(failures.is_empty(), "{}", failures.join("\n"));
            }
        )*
    };
}

known_bugs! {}

/// Tests in this file run one at a time, so `concurrent_realize_stress` controls exactly which
/// threads realize at once.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| parse_fixtures(include_bytes!("fixtures/ops.bin")))
}

// ---------------------------------------------------------------------------------------------
// evaluating a case expression with lazygrad

/// The value of an expression argument.
enum Val {
    T(Tensor),
    F(f64),
    I(i64),
    B(bool),
    List(Vec<i64>),
    Name(String),
}

impl Val {
    fn tensor(&self) -> &Tensor {
        match self {
            Val::T(t) => t,
            _ => panic!("expected a tensor argument"),
        }
    }
    fn int(&self) -> i64 {
        match self {
            Val::I(i) => *i,
            _ => panic!("expected an integer argument"),
        }
    }
    fn float(&self) -> f64 {
        match self {
            Val::F(f) => *f,
            Val::I(i) => *i as f64,
            _ => panic!("expected a number argument"),
        }
    }
    fn flag(&self) -> bool {
        match self {
            Val::B(b) => *b,
            _ => panic!("expected true/false"),
        }
    }
    fn scalar(&self) -> Scalar {
        match self {
            Val::F(f) => Scalar::Float(*f),
            Val::I(i) => Scalar::Int(*i),
            Val::B(b) => Scalar::Bool(*b),
            _ => panic!("expected a scalar argument"),
        }
    }
    fn list(&self) -> &[i64] {
        match self {
            Val::List(l) => l,
            _ => panic!("expected a list argument"),
        }
    }
    fn isizes(&self) -> Vec<isize> {
        self.list().iter().map(|&v| v as isize).collect()
    }
    fn usizes(&self) -> Vec<usize> {
        self.list().iter().map(|&v| usize::try_from(v).expect("non-negative")).collect()
    }
    fn pairs(&self) -> Vec<(usize, usize)> {
        self.usizes().chunks_exact(2).map(|p| (p[0], p[1])).collect()
    }
    fn dtype(&self) -> DType {
        match self {
            Val::Name(n) => dtype_from_name(n),
            _ => panic!("expected a dtype name"),
        }
    }
}

/// Run `$body` with `$r` bound to the operand in `$v`: a `&Tensor` or a Rust scalar.
macro_rules! with_operand {
    ($v:expr, $r:ident => $body:expr) => {
        match $v {
            Val::T(t) => {
                let $r = t;
                $body
            }
            Val::F(x) => {
                let $r = *x;
                $body
            }
            Val::I(x) => {
                let $r = *x;
                $body
            }
            Val::B(x) => {
                let $r = *x;
                $body
            }
            _ => panic!("expected a tensor or scalar operand"),
        }
    };
}

/// Run `$body` with `$a` bound to reduce axes: one axis, a list, or `none` (all).
macro_rules! with_axes {
    ($v:expr, $a:ident => $body:expr) => {
        match $v {
            Val::I(i) => {
                let $a = *i as isize;
                $body
            }
            Val::List(_) => {
                let v = $v.isizes();
                let $a = v.as_slice();
                $body
            }
            Val::Name(n) if n == "none" => {
                let $a = None::<isize>;
                $body
            }
            _ => panic!("expected reduce axes"),
        }
    };
}

/// `+ - * /` through the operators, scalars allowed on either side.
fn arith(op: &str, a: &Val, b: &Val) -> Tensor {
    macro_rules! apply {
        ($l:expr, $r:expr) => {
            match op {
                "add" => $l + $r,
                "sub" => $l - $r,
                "mul" => $l * $r,
                "div" => $l / $r,
                _ => unreachable!(),
            }
        };
    }
    match a {
        Val::T(x) => with_operand!(b, r => apply!(x, r)),
        Val::F(s) => apply!(*s, b.tensor()),
        Val::I(s) => apply!(*s, b.tensor()),
        _ => panic!("{op}: bad left operand"),
    }
}

/// The op table: every name the generator writes, mapped to lazygrad.
fn apply(op: &str, a: &[Val]) -> Tensor {
    let x = || a[0].tensor();
    let keepdim = || a.get(2).is_some_and(Val::flag);
    match op {
        "add" | "sub" | "mul" | "div" => arith(op, &a[0], &a[1]),
        "idiv" => with_operand!(&a[1], r => x().idiv(r)),
        "maximum" => with_operand!(&a[1], r => x().maximum(r)),
        "minimum" => with_operand!(&a[1], r => x().minimum(r)),
        "cmplt" => with_operand!(&a[1], r => x().cmplt(r)),
        "lt" => with_operand!(&a[1], r => x().lt(r)),
        "gt" => with_operand!(&a[1], r => x().gt(r)),
        "ge" => with_operand!(&a[1], r => x().ge(r)),
        "le" => with_operand!(&a[1], r => x().le(r)),
        "eq" => with_operand!(&a[1], r => x().eq(r)),
        "ne" => with_operand!(&a[1], r => x().ne(r)),
        "where" => with_operand!(&a[1], p => with_operand!(&a[2], q => x().where_(p, q))),
        "neg" => -x(),
        "logical_not" => x().logical_not(),
        "exp" => x().exp(),
        "exp2" => x().exp2(),
        "log" => x().log(),
        "log2" => x().log2(),
        "sqrt" => x().sqrt(),
        "sin" => x().sin(),
        "reciprocal" => x().reciprocal(),
        "trunc" => x().trunc(),
        "relu" => x().relu(),
        "cast" => x().cast(a[1].dtype()),
        "reshape" => x().reshape(&a[1].isizes()),
        "permute" => x().permute(&a[1].isizes()),
        "expand" => x().expand(&a[1].usizes()),
        "pad" => x().pad(&a[1].pairs()),
        "shrink" => x().shrink(&a[1].pairs()),
        "flip" => x().flip(&a[1].isizes()),
        "transpose" => x().transpose(a[1].int() as isize, a[2].int() as isize),
        "T" => x().T(),
        "flatten" => x().flatten(a[1].int() as isize, a[2].int() as isize),
        "squeeze" => x().squeeze(match &a[1] {
            Val::I(i) => Some(*i as isize),
            _ => None,
        }),
        "unsqueeze" => x().unsqueeze(a[1].int() as isize),
        "contiguous" => x().contiguous(),
        "realize" => x().realize(),
        "sum" => with_axes!(&a[1], ax => x().sum(ax, keepdim())),
        "max" => with_axes!(&a[1], ax => x().max(ax, keepdim())),
        "min" => with_axes!(&a[1], ax => x().min(ax, keepdim())),
        "mean" => with_axes!(&a[1], ax => x().mean(ax, keepdim())),
        "matmul" => x().matmul(a[1].tensor()),
        "dot" => x().dot(a[1].tensor()),
        "arange" => Tensor::arange(a[0].int() as usize),
        "arange_step" => Tensor::arange_step(a[0].float(), a[1].float(), a[2].float(), a[3].dtype()),
        "eye" => Tensor::eye(a[0].int() as usize),
        "full" => Tensor::full(&a[0].usizes(), a[1].scalar()),
        "full_dtype" => Tensor::full_dtype(&a[0].usizes(), a[1].scalar(), a[2].dtype()),
        "zeros" => Tensor::zeros(&a[0].usizes()),
        "ones" => Tensor::ones(&a[0].usizes()),
        "zeros_like" => x().zeros_like(),
        "ones_like" => x().ones_like(),
        "full_like" => x().full_like(a[1].scalar()),
        other => panic!("no op {other:?} in the test table"),
    }
}

fn eval(e: &Expr, inputs: &[Tensor]) -> Val {
    match e {
        Expr::Input(i) => Val::T(inputs[*i].clone()),
        Expr::Int(i) => Val::I(*i),
        Expr::Float(f) => Val::F(*f),
        Expr::List(l) => Val::List(l.clone()),
        Expr::Name(n) if n == "true" || n == "false" => Val::B(n == "true"),
        Expr::Name(n) => Val::Name(n.clone()),
        Expr::Call(op, args) => {
            let args: Vec<Val> = args.iter().map(|a| eval(a, inputs)).collect();
            Val::T(apply(op, &args))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// running cases

fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// The case's result computed on `device` (the default device while it runs).
fn run_on(case: &Case, device: &str) -> Result<Array, String> {
    catch_unwind(AssertUnwindSafe(|| {
        let _default = DefaultDevice::scoped(device);
        let inputs: Vec<Tensor> = case.inputs.iter().map(Array::to_tensor).collect();
        let out = eval(&case.expr, &inputs);
        let out = out.tensor();
        assert_eq!(out.device(), device, "result on the wrong device");
        Array::from_tensor(out)
    }))
    .map_err(|e| format!("panicked: {}", panic_message(e)))
}

/// Every check of one case: numpy vs the device under test, numpy vs INTERP, the device vs INTERP
/// (a case in a dtype the device lacks runs on INTERP alone).
fn check_case(case: &Case) -> Result<(), String> {
    if std::env::var_os("OPS_TRACE").is_some() {
        eprintln!("case {}", case.name);
    }
    let devices = common::devices_for(&case.dtypes());
    let results: Vec<Result<Array, String>> = devices.iter().map(|d| run_on(case, d)).collect();
    let mut errors = vec![];
    for (device, result) in devices.iter().zip(&results) {
        if let Err(e) = result.clone().and_then(|got| compare(&got, &case.expected, case.tol)) {
            errors.push(format!("{device}: {e}"));
        }
    }
    if let [Ok(cpu), Ok(interp)] = &results[..] {
        if let Err(e) = compare(cpu, interp, case.tol) {
            errors.push(format!("{} vs INTERP: {e}", devices[0]));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("{} = {}: {}", case.name, case.text, errors.join("; ")))
    }
}

fn named(name: &str) -> &'static Case {
    cases().iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no fixture case {name}"))
}

/// Run every case of `group` except the known bugs; report all failures at once.
fn run_group(group: &str) {
    let _serial = serial();
    let selected: Vec<&Case> =
        cases().iter().filter(|c| c.group == group && !KNOWN_BUGS.contains(&c.name.as_str())).collect();
    assert!(!selected.is_empty(), "no fixture cases in group {group}");
    let failures: Vec<String> = selected.iter().filter_map(|c| check_case(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} {group} cases failed:\n{}",
        failures.len(),
        selected.len(),
        failures.join("\n")
    );
}

#[test]
fn fixture_is_complete() {
    let cases = cases();
    assert!(cases.len() >= 150, "only {} cases", cases.len());
    let groups =
        ["unary", "binary", "broadcast", "compare", "cast", "movement", "noncontig", "reduce", "matmul", "creation"];
    for c in cases {
        assert!(groups.contains(&c.group.as_str()), "case {} has unknown group {}", c.name, c.group);
    }
    for bug in KNOWN_BUGS {
        named(bug);
    }
}

#[test]
fn unary() {
    run_group("unary");
}
#[test]
fn binary() {
    run_group("binary");
}
#[test]
fn broadcast() {
    run_group("broadcast");
}
#[test]
fn compare_and_where() {
    run_group("compare");
}
#[test]
fn cast() {
    run_group("cast");
}
#[test]
fn movement() {
    run_group("movement");
}
#[test]
fn noncontiguous_inputs() {
    run_group("noncontig");
}
#[test]
fn reduce() {
    run_group("reduce");
}
#[test]
fn matmul() {
    run_group("matmul");
}
#[test]
fn creation() {
    run_group("creation");
}

// ---------------------------------------------------------------------------------------------
// exact semantics, no fixture

/// Run `f` once per device with that device as the default, one test at a time.
fn on_each_device(f: impl Fn(&str)) {
    let _serial = serial();
    common::on_each_device(f)
}

#[test]
fn int_arithmetic_wraps_like_c() {
    on_each_device(|d| {
        let i8max = Tensor::new([127i32, -128]).cast(DType::INT8);
        assert_eq!((&i8max + 1).to_vec::<i8>(), vec![-128, -127], "{d}");
        assert_eq!((&i8max - 1).to_vec::<i8>(), vec![126, 127], "{d}");
        assert_eq!(Tensor::new([i32::MAX]).add(1).to_vec::<i32>(), vec![i32::MIN], "{d}");
        assert_eq!(Tensor::new([65536i32]).mul(65536).to_vec::<i32>(), vec![0], "{d}");
        assert_eq!(Tensor::new([300i32, -1, 256]).cast(DType::UINT8).to_vec::<u8>(), vec![44, 255, 0], "{d}");
        if common::supports(d, DType::INT64) {
            assert_eq!(Tensor::new([i64::MAX]).add(1i64).to_vec::<i64>(), vec![i64::MIN], "{d}");
        }
    });
}

#[test]
fn idiv_truncates_toward_zero() {
    on_each_device(|d| {
        let a = Tensor::new([-7i32, 7, -7, 7, 0, -1]);
        let b = Tensor::new([2i32, 2, -2, -2, 3, 2]);
        assert_eq!(a.idiv(&b).to_vec::<i32>(), vec![-3, 3, 3, -3, 0, 0], "{d}");
        assert_eq!(a.idiv(2).to_vec::<i32>(), vec![-3, 3, -3, 3, 0, 0], "{d}");
        assert_eq!(Tensor::new([-7i8, 7]).idiv(-2).to_vec::<i8>(), vec![3, -3], "{d}");
    });
}

#[test]
fn uint8_arithmetic_wraps() {
    on_each_device(|d| {
        let a = Tensor::new([250u8, 3, 16]);
        assert_eq!((&a + 10).to_vec::<u8>(), vec![4, 13, 26], "{d}");
        assert_eq!((&a - 5).to_vec::<u8>(), vec![245, 254, 11], "{d}");
        assert_eq!((&a * 17).to_vec::<u8>(), vec![154, 51, 16], "{d}");
        assert_eq!((-&a).to_vec::<u8>(), vec![6, 253, 240], "{d}");
        assert_eq!(a.cast(DType::INT32).sum(0, false).item::<i32>(), 269, "{d}");
    });
}

#[test]
fn creation_ops_exact() {
    on_each_device(|d| {
        let r = Tensor::arange(5);
        assert_eq!((r.dtype(), r.device()), (DType::INT32, d));
        assert_eq!(r.to_vec::<i32>(), vec![0, 1, 2, 3, 4]);
        assert_eq!(Tensor::arange(0).shape(), vec![0]);
        assert_eq!(Tensor::arange_step(0.0, 1.0, 0.25, DType::FLOAT32).to_vec::<f32>(), vec![0.0, 0.25, 0.5, 0.75]);
        assert_eq!(Tensor::arange_step(5.0, 0.0, -2.0, DType::INT32).to_vec::<i32>(), vec![5, 3, 1]);
        assert_eq!(Tensor::arange_step(0.0, 1.0, 0.3, DType::FLOAT64).numel(), 4);
        let eye = Tensor::eye(3);
        assert_eq!((eye.shape(), eye.dtype()), (vec![3, 3], DType::FLOAT32));
        assert_eq!(eye.to_vec::<f32>(), vec![1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        let full = Tensor::full(&[2, 3], 2.5f32);
        assert_eq!((full.shape(), full.dtype()), (vec![2, 3], DType::FLOAT32));
        assert_eq!(full.to_vec::<f32>(), vec![2.5; 6]);
        assert_eq!(Tensor::full(&[2], 7).to_vec::<i32>(), vec![7, 7]);
        assert_eq!(Tensor::full(&[2], true).to_vec::<bool>(), vec![true, true]);
        assert_eq!(Tensor::full_dtype(&[3], 7, DType::UINT8).to_vec::<u8>(), vec![7; 3]);
        assert_eq!(Tensor::full_dtype(&[1], 1.5, DType::FLOAT16).to_vec::<half::f16>(), vec![half::f16::from_f32(1.5)]);
        assert_eq!(Tensor::zeros(&[2, 2]).to_vec::<f32>(), vec![0.0; 4]);
        assert_eq!(Tensor::ones(&[3]).to_vec::<f32>(), vec![1.0; 3]);
        let i = Tensor::new([[1i8, 2], [3, 4]]);
        assert_eq!((i.zeros_like().dtype(), i.zeros_like().to_vec::<i8>()), (DType::INT8, vec![0; 4]));
        assert_eq!(i.ones_like().to_vec::<i8>(), vec![1; 4]);
        assert_eq!(i.full_like(-3).to_vec::<i8>(), vec![-3; 4]);
        assert_eq!(Tensor::empty(&[2, 3], DType::INT64).shape(), vec![2, 3]);
        let s = Tensor::new(3.5f64);
        assert_eq!((s.shape(), s.item::<f64>()), (vec![], 3.5));
        let v = Tensor::from_vec(vec![1u16, 2, 3, 4, 5, 6], &[3, 2]);
        assert_eq!((v.shape(), v.dtype(), v.numel()), (vec![3, 2], DType::UINT16, 6));
        assert_eq!(Tensor::from_slice(&[1.0f64, 2.0], &[2, 1]).T().to_vec::<f64>(), vec![1.0, 2.0]);
        let b = Tensor::from_bytes(&3i32.to_le_bytes().repeat(2), &[2], DType::INT32, d);
        assert_eq!(b.to_vec::<i32>(), vec![3, 3]);
    });
}

#[test]
fn rand_is_reproducible_and_uniform() {
    let _serial = serial();
    Tensor::manual_seed(42);
    let a = Tensor::rand(&[1000]).to_vec::<f32>();
    let a2 = Tensor::rand(&[1000]).to_vec::<f32>();
    Tensor::manual_seed(42);
    let b = {
        let _default = DefaultDevice::scoped("INTERP");
        Tensor::rand(&[1000]).to_vec::<f32>()
    };
    Tensor::manual_seed(43);
    let c = Tensor::rand(&[1000]).to_vec::<f32>();
    assert_eq!(a, b, "same seed, same data (on any device)");
    assert_ne!(a, a2, "the stream advances");
    assert_ne!(a, c, "another seed, other data");
    assert!(a.iter().chain(&c).all(|v| (0.0..1.0).contains(v)), "values in [0, 1)");
    let mean = a.iter().sum::<f32>() / a.len() as f32;
    assert!((mean - 0.5).abs() < 0.05, "mean {mean} of 1000 uniform samples");
    assert_eq!(Tensor::rand(&[2, 3]).shape(), vec![2, 3]);
}

/// Realizing from several threads at once: every case on four threads must still be right.
#[test]
fn concurrent_realize_stress() {
    let _serial = serial();
    let todo: Vec<&Case> = cases().iter().filter(|c| !KNOWN_BUGS.contains(&c.name.as_str())).collect();
    let failures: Vec<String> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|k| {
                let todo = &todo;
                s.spawn(move || {
                    let order = todo.iter().cycle().skip(k * todo.len() / 4).take(todo.len());
                    order.filter_map(|c| check_case(c).err()).collect::<Vec<_>>()
                })
            })
            .collect();
        threads.into_iter().flat_map(|t| t.join().expect("stress thread")).collect()
    });
    assert!(failures.is_empty(), "{} failures under concurrency:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn same_graph_on_two_devices() {
    let _serial = serial();
    let make = |d: &str| {
        let _default = DefaultDevice::scoped(d);
        Tensor::full(&[3], 2.0f32) + 1.0
    };
    let (cpu, interp) = (make("CPU"), make("INTERP"));
    assert_eq!(cpu.to_vec::<f32>(), vec![3.0; 3]);
    let one = {
        let _default = DefaultDevice::scoped("INTERP");
        Tensor::ones(&[3])
    };
    let sum = &interp + &one;
    assert_eq!(sum.device(), "INTERP");
    assert_eq!(sum.to_vec::<f32>(), vec![4.0; 3]);
}
