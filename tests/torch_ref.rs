//! The Tensor API and the `nn` layers checked against PyTorch: forward values and input gradients
//! of every case in `fixtures/torch_ref.bin` (written by `tools/gen_reference.py`, which documents
//! the format), on the CPU device and on the INTERP reference device. A layer case passes torch's
//! module tensors as inputs, so its gradients are those of the layer's parameters.
//!
//! Each case names an op key; `table::table()` maps keys to lazygrad calls. The test builds the
//! inputs on the device, applies the case's `pre` views (so ops also see non-contiguous inputs),
//! runs the op, and takes the gradients of `sum((out * upstream).sum())` with respect to the stored
//! inputs with `gradient()`. Forward values must match within atol 1e-6 / rtol 1e-3, gradients
//! within atol 1e-4 / rtol 1e-3 (tinygrad's tolerances), integers and bools exactly, and shapes
//! and dtypes always.
//!
//! Cases run on a few worker threads (a cold run is dominated by compiling the CPU kernels, which
//! are cached on disk afterwards). `cargo test --test torch_ref -- --nocapture` prints a table per
//! group. Environment knobs: `TORCH_REF_ONLY=substr` runs only the cases whose `group/name`
//! contains `substr` (`reduce/`, `softmax[`; a filter that selects no case fails the test);
//! `TORCH_REF_TRACE=1` prints each case before it runs (to find one that crashes the process);
//! `TORCH_REF_SKIP=a,b` treats the named cases as known failures; `TORCH_REF_THREADS=n` sets the
//! number of worker threads.

mod common;
#[path = "torch_ref/fixture.rs"]
mod fixture;
#[path = "torch_ref/params.rs"]
mod params;
#[path = "torch_ref/table.rs"]
mod table;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use fixture::{compare, Array, Case};
use lazygrad::runtime::DefaultDevice;
use lazygrad::Tensor;
use params::{Json, Params};
use table::OpFn;

/// Op keys of the fixture that may still lack a mapping in `table.rs`, each with the reason.
/// Any other unmapped key fails the test. The goal is an empty list.
const ALLOWED_MISSING: &[(&str, &str)] = &[];

/// Cases that src/ gets wrong, matched by op key or by exact case name, each with the reason and a
/// minimal repro. They are skipped by `torch_reference` (a bug may crash the process) and counted
/// as "known"; `known_failures` (ignored by default) runs them to see which are fixed.
const KNOWN_FAILURES: &[(&str, &str)] = &[];

/// What happened to one case.
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Pass,
    Fail(String),
    Missing,
    Known,
}

fn cases() -> Vec<Case> {
    fixture::parse(include_bytes!("fixtures/torch_ref.bin"))
}

fn is_known(case: &Case) -> bool {
    let extra = std::env::var("TORCH_REF_SKIP").unwrap_or_default();
    KNOWN_FAILURES.iter().any(|(k, _)| *k == case.op || *k == case.name) || extra.split(',').any(|n| n == case.name)
}

/// The view an input reaches the op through (see `apply_pre` in the generator).
fn apply_pre(t: &Tensor, pre: &str) -> Tensor {
    match pre {
        "" => t.clone(),
        "T" => t.transpose(-2, -1),
        "P" => t.permute(&(0..t.ndim() as isize).rev().collect::<Vec<_>>()),
        "S" => {
            let mut bounds: Vec<(usize, usize)> = t.shape().iter().map(|&d| (0, d)).collect();
            bounds[0].0 = 1;
            t.shrink(&bounds)
        }
        other => panic!("unknown pre view {other:?}"),
    }
}

fn host(t: &Tensor) -> Result<Array, String> {
    let bytes = t.raw_bytes().map_err(|e| format!("reading back: {e}"))?;
    Ok(Array { dtype: t.dtype(), shape: t.shape(), bytes })
}

/// Run `case` with `op` on `device`; `Err` describes the first mismatch.
fn run_on(case: &Case, op: &OpFn, device: &str) -> Result<(), String> {
    let _guard = DefaultDevice::scoped(device);
    let params = Params(Json::parse(&case.params));
    let tensor = |a: &Array| Tensor::from_bytes(&a.bytes, &a.shape, a.dtype, device);
    let leaves: Vec<Tensor> = case.inputs.iter().map(|i| tensor(&i.array).requires_grad(i.requires_grad)).collect();
    let pre: Vec<String> = params.opt("pre").map_or(vec![], |v| v.as_arr().iter().map(|s| s.as_str().into()).collect());
    let xs: Vec<Tensor> =
        leaves.iter().enumerate().map(|(n, t)| apply_pre(t, pre.get(n).map_or("", String::as_str))).collect();
    let outs = op(&xs, &params);
    if outs.len() != case.outputs.len() {
        return Err(format!("{} outputs, want {}", outs.len(), case.outputs.len()));
    }
    // the gradients of sum((out * upstream).sum()) over the float outputs, built before realizing
    let mut loss: Option<Tensor> = None;
    for (o, want) in outs.iter().zip(&case.outputs) {
        if let (Some(up), true) = (&want.upstream, o.dtype().is_float()) {
            let term = o.mul(tensor(up)).sum(None::<isize>, false);
            loss = Some(loss.map_or(term.clone(), |l| l.add(&term)));
        }
    }
    let targets: Vec<&Tensor> = case.grads.iter().map(|(i, _)| &leaves[*i]).collect();
    let grads = match (targets.is_empty(), loss) {
        (true, _) => vec![],
        (false, None) => return Err("no float output to take gradients of".into()),
        (false, Some(l)) => l.try_gradient(&targets).map_err(|e| e.to_string())?,
    };
    let all: Vec<Tensor> = outs.iter().chain(&grads).cloned().collect();
    Tensor::realize_all(&all).map_err(|e| format!("realize: {e}"))?;
    for (n, (o, want)) in outs.iter().zip(&case.outputs).enumerate() {
        compare(&format!("output {n}"), &host(o)?, &want.value, case.tol)?;
    }
    for (g, (i, want)) in grads.iter().zip(&case.grads) {
        compare(&format!("grad of input {i}"), &host(g)?, want, case.grad_tol)?;
    }
    Ok(())
}

fn panic_message(e: &(dyn std::any::Any + Send)) -> String {
    let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()));
    format!("panic: {}", msg.unwrap_or_else(|| "(non-string payload)".into()).lines().next().unwrap_or(""))
}

/// Run one case on every device that computes in its dtypes: `Pass`, or `Fail` naming the device
/// and the mismatch.
fn check(case: &Case, op: &OpFn, trace: bool) -> Outcome {
    let arrays = case.inputs.iter().map(|i| &i.array).chain(case.outputs.iter().map(|o| &o.value));
    let named = common::dtypes_named(&format!("{} {}", case.op, case.params));
    for device in common::devices_for(&arrays.map(|a| a.dtype).chain(named).collect::<Vec<_>>()) {
        if trace {
            println!("running {} on {device}", case.name);
        }
        let result = catch_unwind(AssertUnwindSafe(|| run_on(case, op, device)));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Outcome::Fail(format!("{device}: {e}")),
            Err(e) => return Outcome::Fail(format!("{device}: {}", panic_message(e.as_ref()))),
        }
    }
    Outcome::Pass
}

/// Run `cases` (quietly: panics become failures) on worker threads (`TORCH_REF_THREADS`, default:
/// the available cores, at most 4; kernel compiles dominate a cold run), returning each outcome.
fn run_all(cases: &[Case], ops: &HashMap<&'static str, OpFn>, skip_known: bool) -> Vec<Outcome> {
    let trace = std::env::var("TORCH_REF_TRACE").is_ok_and(|v| v != "0");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let threads = std::env::var("TORCH_REF_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(cores).max(1);
    let run = |c: &Case| match ops.get(c.op.as_str()) {
        None => Outcome::Missing,
        Some(_) if skip_known && is_known(c) => Outcome::Known,
        Some(op) => {
            let o = check(c, op, trace);
            if let (true, Outcome::Fail(e)) = (trace, &o) {
                println!("FAIL {}: {e}", c.name);
            }
            o
        }
    };
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut outcomes = vec![Outcome::Missing; cases.len()];
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|k| {
                let run = &run;
                s.spawn(move || (k..cases.len()).step_by(threads).map(|i| (i, run(&cases[i]))).collect::<Vec<_>>())
            })
            .collect();
        for w in workers {
            for (i, o) in w.join().expect("torch_ref worker thread") {
                outcomes[i] = o;
            }
        }
    });
    std::panic::set_hook(hook);
    outcomes
}

/// The cases `TORCH_REF_ONLY` selects (all without it); a filter that selects none is an error, so a
/// mistyped filter cannot pass by running nothing.
fn selected() -> Vec<Case> {
    let only = std::env::var("TORCH_REF_ONLY").unwrap_or_default();
    let cases: Vec<Case> = cases().into_iter().filter(|c| format!("{}/{}", c.group, c.name).contains(&only)).collect();
    assert!(!cases.is_empty(), "TORCH_REF_ONLY={only:?} selects none of the fixture's cases");
    cases
}

/// Print the per-group table and the failures.
fn report(cases: &[Case], outcomes: &[Outcome]) {
    #[derive(Default)]
    struct Row {
        cases: usize,
        with_grad: usize,
        passed: usize,
        failed: usize,
        known: usize,
        missing: usize,
    }
    let mut rows: BTreeMap<&str, Row> = BTreeMap::new();
    for (c, o) in cases.iter().zip(outcomes) {
        let r = rows.entry(c.group.as_str()).or_default();
        r.cases += 1;
        r.with_grad += usize::from(!c.grads.is_empty());
        match o {
            Outcome::Pass => r.passed += 1,
            Outcome::Fail(_) => r.failed += 1,
            Outcome::Known => r.known += 1,
            Outcome::Missing => r.missing += 1,
        }
    }
    let header = ["group", "cases", "w/grad", "passed", "failed", "known", "missing"];
    println!(
        "\n{:<12} {:>6} {:>7} {:>7} {:>7} {:>6} {:>8}",
        header[0], header[1], header[2], header[3], header[4], header[5], header[6]
    );
    let mut total = Row::default();
    for (g, r) in &rows {
        println!(
            "{g:<12} {:>6} {:>7} {:>7} {:>7} {:>6} {:>8}",
            r.cases, r.with_grad, r.passed, r.failed, r.known, r.missing
        );
        total.cases += r.cases;
        total.with_grad += r.with_grad;
        total.passed += r.passed;
        total.failed += r.failed;
        total.known += r.known;
        total.missing += r.missing;
    }
    let t = total;
    println!(
        "{:<12} {:>6} {:>7} {:>7} {:>7} {:>6} {:>8}",
        "total", t.cases, t.with_grad, t.passed, t.failed, t.known, t.missing
    );
    println!("(each case runs on {}; w/grad: cases that also check input gradients)", common::devices().join(" and "));
    for (c, o) in cases.iter().zip(outcomes) {
        if let Outcome::Fail(e) = o {
            println!("FAIL {} [{}] {}: {e}", c.name, c.op, c.params);
        }
    }
}

#[test]
fn torch_reference() {
    let start = Instant::now();
    let (cases, ops) = (selected(), table::table());
    let outcomes = run_all(&cases, &ops, true);
    report(&cases, &outcomes);
    println!("torch_reference: {:.1} s", start.elapsed().as_secs_f64());

    let fixture_keys: BTreeSet<&str> = cases.iter().map(|c| c.op.as_str()).collect();
    let missing: BTreeSet<&str> = fixture_keys.iter().copied().filter(|k| !ops.contains_key(k)).collect();
    let unexpected: Vec<&str> =
        missing.iter().copied().filter(|k| !ALLOWED_MISSING.iter().any(|(a, _)| a == k)).collect();
    for (k, why) in ALLOWED_MISSING {
        match missing.contains(k) {
            true => println!("missing (allowed): {k}: {why}"),
            false => println!("note: {k} is mapped now; remove it from ALLOWED_MISSING"),
        }
    }
    let failed = outcomes.iter().filter(|o| matches!(o, Outcome::Fail(_))).count();
    let ran = outcomes.iter().filter(|o| matches!(o, Outcome::Pass | Outcome::Fail(_))).count();
    assert!(ran > 0, "none of the {} selected cases ran (all known failures or skipped)", cases.len());
    assert!(unexpected.is_empty(), "op keys without a lazygrad mapping: {unexpected:?}");
    assert_eq!(failed, 0, "{failed} cases differ from PyTorch (listed above)");
}

/// Runs the `KNOWN_FAILURES` cases and lists which of them pass now (so their entries can go).
#[test]
#[ignore = "runs the known src/ failures (some may crash the process)"]
fn known_failures() {
    let cases: Vec<Case> = selected().into_iter().filter(is_known).collect();
    let outcomes = run_all(&cases, &table::table(), false);
    report(&cases, &outcomes);
    for (c, o) in cases.iter().zip(&outcomes) {
        if *o == Outcome::Pass {
            println!("FIXED {} ({}): remove it from KNOWN_FAILURES", c.name, c.op);
        }
    }
}
