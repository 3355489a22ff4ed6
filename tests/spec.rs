//! The IR spec (`uop/spec.rs`): a malformed graph is an error naming the pass that made it and
//! the node, at the stage where it appears, instead of a panic in a later pass or the renderer.
//! Every other suite runs with the checks on (debug builds, and `SPEC=1` in `.ci/run`), so each
//! well-formed graph they build is accepted.

mod common;

use lazygrad::codegen::get_program;
use lazygrad::renderer::listing::ListingRenderer;
use std::sync::LazyLock;

use lazygrad::uop::pipeline::{Pipeline, Step};
use lazygrad::uop::stage::KernelStage;
use lazygrad::uop::{rule, substitute, Arg, ConstValue, Kernel, LinearProgram, Ops, PatternMatcher, UOp, UOpMap, UPat};
use lazygrad::{Context, DType, Error, Tensor};

fn spec_message(result: lazygrad::Result<impl std::fmt::Debug>) -> String {
    match result {
        Err(Error::Spec(m)) => m,
        other => panic!("expected a spec violation, got {other:?}"),
    }
}

#[test]
fn a_malformed_tensor_graph_is_an_error_before_scheduling() {
    let _on = Context::new(&[("SPEC", 1)]);
    let x = Tensor::ones(&[4, 8]).contiguous().realize();
    let u = x.uop();
    // SIN is no reduce op
    let reduce = UOp::new(Ops::ReduceAxis, u.dtype(), vec![u], Arg::ReduceAxis(Ops::Sin, vec![1]));
    let m = spec_message(Tensor::from_uop(reduce, x.device()).try_realize());
    assert!(m.contains("`tensor ops`") && m.contains("Tensor stage") && m.contains("REDUCE_AXIS"), "{m}");
}

fn no_rules() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| PatternMatcher::new(vec![]));
    &PM
}

/// Turns the index constant 4 into a float one (under an index ADD: malformed).
fn to_float() -> &'static PatternMatcher {
    static PM: LazyLock<PatternMatcher> = LazyLock::new(|| {
        PatternMatcher::new(vec![rule(UPat::cvar("c").dtype(|d| d == DType::INDEX), |m| {
            (m["c"].const_int_value() == Some(4)).then(|| UOp::constant(DType::FLOAT32, ConstValue::Float(4.0)))
        })])
    });
    &PM
}

static THREE_STEPS: Pipeline<(), KernelStage> = Pipeline {
    stage: std::marker::PhantomData,
    steps: &[
        Step::table("a harmless step", no_rules),
        Step::table("the bad step", to_float),
        Step::table("a later step", no_rules),
    ],
};

#[test]
fn the_first_step_to_leave_a_malformed_node_is_named() {
    let _on = Context::new(&[("SPEC", 1)]);
    let sum = UOp::index_const(3).alu(Ops::Add, &[&UOp::index_const(4)]);
    let m = spec_message(THREE_STEPS.run(&Kernel::new(sum.clone(), "the test").unwrap(), &mut ()));
    assert!(m.contains("after pass `the bad step`") && m.contains("ADD dtypes.index"), "{m}");
    assert!(m.contains("CONST dtypes.float"), "the node's sources are named: {m}");
    // a graph becomes a stage's graph checked, named by what made it
    let bad = UOp::index_const(3).alu(Ops::Add, &[&UOp::constant(DType::FLOAT32, ConstValue::Float(4.0))]);
    assert!(spec_message(Kernel::new(bad, "the test")).contains("after pass `the test`"));
    let _off = Context::new(&[("SPEC", 0)]);
    assert!(THREE_STEPS.run(&Kernel::new(sum, "the test").unwrap(), &mut ()).is_ok(), "unchecked with SPEC=0");
}

#[test]
fn a_malformed_kernel_is_an_error_before_codegen() {
    let _on = Context::new(&[("SPEC", 1)]);
    let x = Tensor::arange(16).cast(DType::FLOAT32).realize();
    let (ast, _) = common::only_kernel(&(x * 2.0));
    assert!(get_program(&ast, &ListingRenderer).is_ok());
    // index the input with a float
    let index = ast.toposort().into_iter().find(|u| u.op() == Ops::Index && u.src()[0].arg() == &Arg::Int(1)).unwrap();
    let float_index = UOp::constant(DType::FLOAT32, ConstValue::Float(0.0));
    let broken = index.replace_src(vec![index.src()[0].clone(), float_index]);
    let bad = substitute(&ast, &mut UOpMap::from_iter([(index, broken)]), "test");
    // codegen takes a `Kernel` only, which is checked when it is made (rangeify makes them)
    let m = spec_message(Kernel::new(bad, "rangeify"));
    assert!(m.contains("`rangeify`") && m.contains("Kernel stage") && m.contains("INDEX"), "{m}");
}

#[test]
fn a_linear_program_places_sources_first_and_closes_its_ranges() {
    let x = Tensor::arange(64).cast(DType::FLOAT32).reshape(&[8, 8]).realize();
    let (ast, _) = common::only_kernel(&x.sum(1, false));
    let uops = {
        let _noopt = Context::new(&[("NOOPT", 1)]);
        get_program(&ast, &ListingRenderer).unwrap().uops
    };
    // a renderer takes a `LinearProgram` only, which is checked when it is made
    let _on = Context::new(&[("SPEC", 1)]);
    LinearProgram::new(uops.to_vec(), "linearize").unwrap();
    let end = uops.iter().rposition(|u| u.op() == Ops::End).expect("a loop");
    let unclosed: Vec<UOp> = uops.iter().enumerate().filter(|(k, _)| *k != end).map(|(_, u)| u.clone()).collect();
    let m = spec_message(LinearProgram::new(unclosed, "dropping an END"));
    assert!(m.contains("`dropping an END`") && m.contains("RANGE never closed"), "{m}");
    let range = uops.iter().position(|u| u.op() == Ops::Range).unwrap();
    let mut late = uops.to_vec();
    let moved = late.remove(range);
    late.push(moved);
    let m = spec_message(LinearProgram::new(late, "moving a RANGE"));
    assert!(m.contains("not placed before") && m.contains("RANGE dtypes.index"), "{m}");
}
