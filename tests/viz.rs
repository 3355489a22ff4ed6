//! VIZ recording and export: what a pass records, how passes are grouped, the JSON and DOT
//! forms, and the explorer's HTTP server. (`tools/viz_browser_test.sh` drives the page itself.)

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::TcpStream;

use lazygrad::codegen::{LOWER, SIMPLIFY};
use lazygrad::nn::layers::{BatchNorm, Conv2d, Linear};
use lazygrad::nn::optim::{adam, Optimizer};
use lazygrad::schedule::kernel::SCHEDULE;
use lazygrad::tensor::{ConvOpts, PoolOpts, Reduction};
use lazygrad::uop::{graph_rewrite, rule, PatternMatcher, UPat};
use lazygrad::viz::{self, export, server, Trace};
use lazygrad::{Context, Jit, Ops, Tensor, UOp};

/// The line of `identity_pass`'s named rule.
const NAMED_RULE_LINE: u32 = line!() + 5;

/// `x*1 -> x` (a named rule) and `x+0 -> x` applied to `((3*1)+0)*1`, recorded.
fn identity_pass() -> (UOp, Trace) {
    let pm = PatternMatcher::new(vec![
        lazygrad::rule!("x * 1", |x| UPat::var(x) * UPat::konst(1.0) => Some(x.clone())),
        rule(UPat::var("x") + UPat::konst(0.0), |m| Some(m["x"].clone())),
    ]);
    let (one, zero, three) = (UOp::index_const(1), UOp::index_const(0), UOp::index_const(3));
    let e = three.alu(Ops::Mul, &[&one]).alu(Ops::Add, &[&zero]).alu(Ops::Mul, &[&one]);
    viz::capture(|| graph_rewrite(&e, &pm, &mut (), "drop identities", false))
}

#[test]
fn a_pass_records_each_rewrite_with_its_rule_and_every_intermediate_graph() {
    let (result, trace) = identity_pass();
    assert_eq!(result, UOp::index_const(3));
    assert_eq!(trace.groups.len(), 1, "one group: passes outside any group");
    assert_eq!(trace.groups[0].name, "other");
    let pass = &trace.groups[0].passes[0];
    assert_eq!(pass.name, "drop identities");
    assert_eq!(trace.reachable(pass.before).len(), 6, "3, 1, 0, MUL, ADD, MUL");
    assert_eq!(trace.reachable(pass.after).len(), 1);
    let after = &trace.nodes[pass.after as usize];
    assert_eq!((after.op, after.arg.as_str(), after.dtype.as_str()), (Ops::Const, "3", "index"));

    // sources first: the inner 3*1 goes, then (3)+0, then (3)*1
    let ops: Vec<(Ops, Ops)> =
        pass.steps.iter().map(|s| (trace.nodes[s.before as usize].op, trace.nodes[s.after as usize].op)).collect();
    assert_eq!(ops, vec![(Ops::Mul, Ops::Const), (Ops::Add, Ops::Const), (Ops::Mul, Ops::Const)]);
    let rules: Vec<&str> = pass.steps.iter().map(|s| trace.rules[s.rule as usize].as_str()).collect();
    assert!(rules.iter().all(|r| r.starts_with("tests/viz.rs:")), "{rules:?}");
    assert_eq!(rules[0], rules[2], "the same rule fired for both multiplications");
    assert_eq!(rules[0], format!("tests/viz.rs:{NAMED_RULE_LINE} x * 1"), "a named rule: where and its name");
    assert!(!rules[1].contains(' '), "an unnamed rule: where only ({})", rules[1]);

    let sizes: Vec<usize> = pass.steps.iter().map(|s| trace.reachable(s.graph.unwrap()).len()).collect();
    assert_eq!(sizes, vec![5, 3, 1], "the whole graph shrinks by one rewrite at a time");
    assert_eq!(pass.steps.last().unwrap().graph, Some(pass.after));
}

#[test]
fn passes_run_by_rules_are_listed_inside_the_pass_that_ran_them() {
    let inner = PatternMatcher::new(vec![rule(UPat::cvar("c"), |m| {
        (m["c"].const_int_value()? == 2).then(|| UOp::index_const(20))
    })]);
    let outer = PatternMatcher::new(vec![rule(UPat::ops(&[Ops::Add]).named("a"), move |m| {
        let a = graph_rewrite(&m["a"].src()[1], &inner, &mut (), "inner", false);
        (a != m["a"].src()[1]).then(|| m["a"].src()[0].alu(Ops::Add, &[&a]))
    })]);
    let e = UOp::index_const(1).alu(Ops::Add, &[&UOp::index_const(2)]);
    let (_, trace) = viz::capture(|| graph_rewrite(&e, &outer, &mut (), "outer", false));
    let passes: Vec<(&str, u32)> = trace.groups[0].passes.iter().map(|p| (p.name.as_str(), p.depth)).collect();
    assert_eq!(passes[0], ("outer", 0));
    assert!(passes[1..].iter().all(|p| *p == ("inner", 1)), "{passes:?}");
}

#[test]
fn realize_records_the_schedule_and_each_kernel_with_its_code() {
    let (out, trace) = viz::capture(|| {
        let a = Tensor::new([[1.0f32, -2.0, 3.0], [4.0, -5.0, 6.0], [7.0, 8.0, -9.0]]);
        (a.clone() * 2.0 + a.exp2()).relu().sum(1, false).to_vec::<f32>()
    });
    assert_eq!(out.len(), 3);
    let schedule = trace.groups.iter().find(|g| g.name == "schedule").expect("a schedule group");
    // the schedule's steps, each by name, in the order they ran; the passes a walk runs inside it
    let steps: Vec<&str> = schedule.passes.iter().filter(|p| p.depth == 0).map(|p| p.name.as_str()).collect();
    assert_eq!(steps, SCHEDULE.step_names(), "every step of the declared schedule");
    let inside: Vec<&str> = schedule.passes.iter().filter(|p| p.depth == 1).map(|p| p.name.as_str()).collect();
    let (first, last) = (inside.first(), inside.last());
    assert_eq!((first, last), (Some(&"push indices"), Some(&"kernel graph")), "rangeify's own passes: {inside:?}");
    let rangeify = schedule.passes.iter().find(|p| p.name == "rangeify").expect("rangeify recorded");
    let graph = &trace.nodes[rangeify.after as usize];
    assert_eq!(graph.op, Ops::Sink, "the kernel graph is a SINK of the outputs' states");
    assert_eq!(trace.nodes[graph.src[0] as usize].op, Ops::After, "the output's buffer once its kernel ran");
    // the steps in the order they run: the one kernel
    let ordered = schedule.passes.iter().find(|p| p.name == "order steps").expect("order steps recorded");
    let steps = &trace.nodes[ordered.after as usize];
    let kernels: Vec<(Ops, &str)> =
        steps.src.iter().map(|&k| (trace.nodes[k as usize].op, trace.nodes[k as usize].arg.as_str())).collect();
    assert_eq!(kernels, [(Ops::Kernel, "0")]);
    let kernel = trace.groups.iter().find(|g| g.name.starts_with("kernel r_")).expect("a kernel group");
    let code = kernel.code.as_deref().expect("kernel code recorded");
    assert!(code.contains(&kernel.name["kernel ".len()..]), "the code defines the kernel:\n{code}");
    // codegen's steps, each by name (a CPU kernel launches no workgroups and streams nothing),
    // between them the heuristics trying opts ("split ranges")
    let declared = [SIMPLIFY.step_names(), LOWER.step_names()].concat();
    let steps: Vec<&str> = kernel.passes.iter().filter(|p| p.depth == 0).map(|p| p.name.as_str()).collect();
    let ran: Vec<&str> = steps.iter().copied().filter(|s| declared.contains(s)).collect();
    let cpu_steps: Vec<&str> =
        declared.iter().copied().filter(|s| !["gpu dims", "stream stores"].contains(s)).collect();
    assert_eq!(ran, cpu_steps, "{steps:?}");
    assert!(kernel.passes.iter().any(|p| !p.steps.is_empty()), "codegen rewrote something");
}

/// Every schedule and every kernel's codegen in `trace` shows each step of its declared stage by
/// name, in order: the top-level passes of a group are exactly the steps that ran (codegen's
/// may skip launch dims for workgroups and streamed stores, which a CPU kernel may not need;
/// the heuristics' trial opts show between them as "split ranges"). Returns (schedules, kernels).
fn every_step_shown(trace: &Trace) -> (usize, usize) {
    let codegen = [SIMPLIFY.step_names(), LOWER.step_names()].concat();
    let (mut schedules, mut kernels) = (0, 0);
    for group in &trace.groups {
        let top: Vec<&str> = group.passes.iter().filter(|p| p.depth == 0).map(|p| p.name.as_str()).collect();
        if group.name == "schedule" {
            assert_eq!(top, SCHEDULE.step_names());
            schedules += 1;
        } else if group.name.starts_with("kernel ") {
            let ran: Vec<&str> = top.iter().copied().filter(|s| *s != "split ranges").collect();
            let required: Vec<&str> =
                codegen.iter().copied().filter(|s| !["gpu dims", "stream stores"].contains(s)).collect();
            let shown: Vec<&str> = ran.iter().copied().filter(|s| required.contains(s)).collect();
            assert_eq!(shown, required, "{}: {top:?}", group.name);
            assert!(ran.iter().all(|s| codegen.contains(s)), "{}: {top:?}", group.name);
            kernels += 1;
        }
    }
    (schedules, kernels)
}

#[test]
fn every_step_of_every_stage_is_shown_by_name_for_a_matmul_and_a_training_step() {
    // lazy_matmul: a broadcast multiply and a sum, one kernel
    Tensor::manual_seed(3);
    let (a, b) = (Tensor::rand(&[32, 32]).realize(), Tensor::rand(&[32, 32]).realize());
    let (_, trace) = viz::capture(|| (a.reshape(&[32, 1, 32]) * b.T().reshape(&[1, 32, 32])).sum(2, false).realize());
    assert_eq!(every_step_shown(&trace), (1, 1));
    // a beautiful_mnist step (convolutions, batch norms, pooling, a linear layer, Adam), smaller
    let conv = |cin, cout| Conv2d::new(cin, cout, 3, ConvOpts::default(), true);
    let (c1, bn, c2, fc) = (conv(1, 4), BatchNorm::with_size(4), conv(4, 8), Linear::new(8 * 2 * 2, 10, true));
    let params: Vec<Tensor> = [&c1.weight, &c2.weight, &fc.weight].into_iter().cloned().collect();
    let mut opt = adam(&params, 1e-3);
    let (x, y) = (Tensor::rand(&[4, 1, 14, 14]), Tensor::new([1i32, 7, 3, 0]));
    let (_, trace) = viz::capture(|| {
        let _training = Context::new(&[("TRAINING", 1)]);
        opt.zero_grad();
        let h = bn.forward(&c1.forward(&x).relu()).max_pool2d(&PoolOpts::default());
        let h = c2.forward(&h).relu().max_pool2d(&PoolOpts::default());
        let loss = fc.forward(&h.flatten(1, -1)).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        let mut out = vec![loss];
        out.extend(opt.schedule_step());
        Tensor::realize_all(&out).unwrap();
    });
    let (schedules, kernels) = every_step_shown(&trace);
    assert!(schedules >= 1 && kernels >= 10, "{schedules} schedules, {kernels} kernels");
}

#[test]
fn jit_capture_is_a_group_holding_its_schedules() {
    let w = Tensor::new([[0.5f32, -1.5, 2.5, 1.0]]).realize();
    let mut jit = Jit::new(move |x: &[Tensor]| vec![(&x[0] * &w).sum(1, false)]);
    let (_, trace) = viz::capture(|| {
        for i in 0..3 {
            jit.call(&[Tensor::new([[i as f32, 1.0, 2.0, 3.0]])]).unwrap();
        }
    });
    let capture = trace.groups.iter().position(|g| g.name == "JIT capture").expect("JIT capture group");
    assert!(trace.groups.iter().any(|g| g.name == "schedule" && g.parent == Some(capture)));
}

#[test]
fn json_export_lists_nodes_once_and_steps_by_id() {
    let (_, trace) = identity_pass();
    let json: serde_json::Value = serde_json::from_str(&export::to_json(&trace)).expect("valid JSON");
    assert_eq!(json["nodes"].as_array().unwrap().len(), trace.nodes.len());
    // 6 before, and the ADD and MUL over the folded 3 after the first rewrite; the graph after
    // the second is the original 3*1 again (interned), and the result is the original 3
    assert_eq!(json["nodes"].as_array().unwrap().len(), 8);
    let pass = &json["groups"][0]["passes"][0];
    assert_eq!(pass["name"], "drop identities");
    let steps = pass["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let rule = steps[0][2].as_u64().unwrap() as usize;
    assert!(json["rules"][rule].as_str().unwrap().starts_with("tests/viz.rs:"));
    assert_eq!(json["nodes"][pass["after"].as_u64().unwrap() as usize][0], "CONST");
    assert_eq!(json["colors"]["CONST"], export::op_color(Ops::Const));
}

#[test]
fn dot_export_draws_before_and_after_with_new_nodes_outlined() {
    let (_, trace) = identity_pass();
    let dot = export::to_dot(&trace);
    assert_eq!(dot.matches("digraph").count(), 2, "before and after of the one pass");
    let pass = &trace.groups[0].passes[0];
    let before = export::graph_to_dot(&trace, pass.before, "before", &HashSet::new());
    assert_eq!(before.matches("[label=").count(), 6);
    assert_eq!(before.matches(" -> ").count(), 6, "MUL, ADD, MUL have two sources each");
    let step1 = pass.steps[0].graph.unwrap();
    let changed = export::changed_nodes(&trace, step1, pass.before);
    assert_eq!(changed.len(), 2, "the ADD and the outer MUL over the folded 3");
    let after = export::graph_to_dot(&trace, step1, "step 1", &changed);
    assert_eq!(after.matches("penwidth=3").count(), 2);
}

fn http_get(port: u16, target: &str) -> (String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {target} HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn server_serves_the_page_its_scripts_the_trace_and_dot() {
    let (_, trace) = identity_pass();
    let json = export::to_json(&trace);
    let listener = server::bind(0).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert!(server::bind(port.into()).is_err(), "a port in use is an error, not a crash");
    std::thread::spawn(move || server::serve(listener, trace));

    let (status, page) = http_get(port, "/");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(page.contains("vendor/dagre.min.js") && page.contains("viz.js"));
    let (status, dagre) = http_get(port, "/vendor/dagre.min.js");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(dagre.contains("graphlib"));
    assert_eq!(http_get(port, "/trace.json").1, json);
    let (status, dot) = http_get(port, "/dot?root=0");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(dot.starts_with("digraph"));
    assert_eq!(http_get(port, "/dot?root=999999").0, "HTTP/1.1 400 Bad Request");
    assert_eq!(http_get(port, "/missing").0, "HTTP/1.1 404 Not Found");
}
