//! Property test of the symbolic simplifier: random integer index expressions over RANGE
//! variables evaluate to the same value before and after `simplify` (exact C semantics through
//! `exec_alu`), and simplification reaches a fixed point without blowing up the graph. Runs are
//! deterministic (a fixed seed) and failures are kept and replayed (see `config`).

use std::collections::HashMap;

use lazygrad::dtype::DType;
use lazygrad::uop::exec::{cast_value, exec_alu};
use lazygrad::uop::symbolic::simplify;
use lazygrad::uop::{Arg, AxisKind, ConstValue, Ops, UOp};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};

#[derive(Clone, Debug)]
enum E {
    Var(usize),
    Const(i64),
    /// `v_a * stride + v_b + k`: the shape reshapes produce.
    Flat(usize, i64, usize, i64),
    Add(Box<E>, Box<E>),
    Sub(Box<E>, Box<E>),
    Neg(Box<E>),
    MulC(Box<E>, i64),
    MulV(Box<E>, usize),
    Div(Box<E>, i64),
    Mod(Box<E>, i64),
    Max(Box<E>, Box<E>),
    /// `a < b ? c : d`
    WhereLt(Box<E>, Box<E>, Box<E>, Box<E>),
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![
        3 => (0usize..3).prop_map(E::Var),
        1 => (-8i64..=8).prop_map(E::Const),
        2 => (0usize..3, 1i64..=9, 0usize..3, 0i64..=8).prop_map(|(a, s, b, k)| E::Flat(a, s, b, k)),
    ];
    leaf.prop_recursive(6, 64, 4, |e| {
        let b = |x: E| Box::new(x);
        prop_oneof![
            4 => (e.clone(), e.clone()).prop_map(move |(x, y)| E::Add(b(x), b(y))),
            1 => (e.clone(), e.clone()).prop_map(move |(x, y)| E::Sub(b(x), b(y))),
            1 => e.clone().prop_map(move |x| E::Neg(b(x))),
            3 => (e.clone(), -8i64..=8).prop_map(move |(x, c)| E::MulC(b(x), c)),
            1 => (e.clone(), 0usize..3).prop_map(move |(x, v)| E::MulV(b(x), v)),
            4 => (e.clone(), 1i64..=9).prop_map(move |(x, c)| E::Div(b(x), c)),
            4 => (e.clone(), 1i64..=9).prop_map(move |(x, c)| E::Mod(b(x), c)),
            1 => (e.clone(), e.clone()).prop_map(move |(x, y)| E::Max(b(x), b(y))),
            1 => (e.clone(), e.clone(), e.clone(), e.clone())
                .prop_map(move |(x, y, z, w)| E::WhereLt(b(x), b(y), b(z), b(w))),
        ]
    })
}

/// The UOp of `e` in dtype `dt` over `vars` (RANGEs, cast to `dt` when it is not INDEX).
fn build(e: &E, vars: &[UOp], dt: DType) -> UOp {
    let var = |i: usize| vars[i % vars.len()].cast(dt);
    let k = |v: i64| UOp::const_int(dt, v);
    let f = |x: &E| build(x, vars, dt);
    match e {
        E::Var(i) => var(*i),
        E::Const(c) => k(*c),
        E::Flat(a, s, b, c) => var(*a).alu(Ops::Mul, &[&k(*s)]).alu(Ops::Add, &[&var(*b)]).alu(Ops::Add, &[&k(*c)]),
        E::Add(x, y) => f(x).alu(Ops::Add, &[&f(y)]),
        E::Sub(x, y) => f(x).alu(Ops::Sub, &[&f(y)]),
        E::Neg(x) => f(x).alu(Ops::Neg, &[]),
        E::MulC(x, c) => f(x).alu(Ops::Mul, &[&k(*c)]),
        E::MulV(x, i) => f(x).alu(Ops::Mul, &[&var(*i)]),
        E::Div(x, c) => f(x).alu(Ops::IDiv, &[&k(*c)]),
        E::Mod(x, c) => f(x).alu(Ops::Mod, &[&k(*c)]),
        E::Max(x, y) => f(x).alu(Ops::Max, &[&f(y)]),
        E::WhereLt(x, y, z, w) => UOp::where_(&f(x).alu(Ops::CmpLt, &[&f(y)]), &f(z), &f(w)),
    }
}

/// Evaluates `root` with every RANGE `id` set to `env[id]`, op by op with C semantics.
#[allow(clippy::mutable_key_type)] // UOp hashes by pointer
fn eval(root: &UOp, env: &[i64]) -> ConstValue {
    let mut vals: HashMap<UOp, ConstValue> = HashMap::new();
    for u in root.toposort() {
        let v = match (u.op(), u.arg()) {
            (Ops::Range, Arg::Range(id, _)) => ConstValue::Int(env[*id]),
            (Ops::Const, Arg::Const(c)) => *c,
            (Ops::Cast, _) => cast_value(vals[&u.src()[0]], u.src()[0].dtype(), u.dtype()),
            (op, _) => {
                let src: Vec<ConstValue> = u.src().iter().map(|s| vals[s]).collect();
                let dt = if op == Ops::Where { u.src()[1].dtype() } else { u.src()[0].dtype() };
                exec_alu(op, dt, &src)
            }
        };
        vals.insert(u, v);
    }
    vals[root]
}

fn check_case(e: &E, dt: DType, nvars: usize, ends: [i64; 3], points: &[[i64; 3]]) -> Result<(), TestCaseError> {
    let vars: Vec<UOp> = (0..nvars)
        .map(|i| UOp::new(Ops::Range, DType::INDEX, vec![UOp::index_const(ends[i])], Arg::Range(i, AxisKind::Loop)))
        .collect();
    let orig = build(e, &vars, dt);
    let simple = simplify(&orig);
    let (n0, n1) = (orig.toposort().len(), simple.toposort().len());
    prop_assert!(n1 <= 2 * n0 + 5, "simplification grew {n0} -> {n1} nodes:\n{orig:?}\n->\n{simple:?}");
    prop_assert!(simplify(&simple) == simple, "not a fixed point:\n{simple:?}");
    for p in points {
        let env: Vec<i64> = (0..3).map(|i| p[i] % ends[i]).collect();
        let (want, got) = (eval(&orig, &env), eval(&simple, &env));
        prop_assert_eq!(want, got, "at {:?}:\n{:?}\nsimplified to\n{:?}", &env[..nvars], orig, simple);
    }
    Ok(())
}

/// The seed every run starts from, so a run is repeatable; `PROPTEST_RNG_SEED` picks another.
const SEED: u64 = 0x5eed_1a2f_9a0d;

/// `cases` cases from a fixed seed (unless `PROPTEST_RNG_SEED` is set). A failure's seed is saved in
/// `tests/symbolic_props.proptest-regressions` (commit it) and replayed first on every later run.
fn config(cases: u32) -> ProptestConfig {
    let base = ProptestConfig::default();
    let rng_seed = match base.rng_seed {
        RngSeed::Random => RngSeed::Fixed(SEED),
        chosen => chosen,
    };
    ProptestConfig {
        cases,
        rng_seed,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..base
    }
}

/// An expression, its variable count (2 or 3), the variables' range ends and 8 evaluation points.
fn case_inputs() -> impl Strategy<Value = (E, usize, [i64; 3], Vec<[i64; 3]>)> {
    (
        expr(),
        2usize..=3,
        prop::array::uniform3(1i64..=20),
        prop::collection::vec(prop::array::uniform3(0i64..10_000), 8),
    )
}

proptest! {
    #![proptest_config(config(10_000))]
    #[test]
    fn simplify_preserves_index_values(
        (e, nvars, ends, points) in case_inputs(),
    ) {
        check_case(&e, DType::INDEX, nvars, ends, &points)?;
    }
}

proptest! {
    #![proptest_config(config(3_000))]
    /// The same in int8, where products and sums wrap: rules must not assume exact arithmetic.
    #[test]
    fn simplify_preserves_wrapping_int8_values(
        (e, nvars, ends, points) in case_inputs(),
    ) {
        check_case(&e, DType::INT8, nvars, ends, &points)?;
    }
}
