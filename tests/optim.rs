//! Optimizers: exact first steps, convergence on a quadratic, and several steps of each against
//! PyTorch (`fixtures/optim_ref.safetensors`, written by `tools/gen_optim_ref.py`).

mod common;

use std::collections::BTreeSet;

use common::{close, Tol};
use lazygrad::nn::optim::{adam, adamw, muon, Optimizer, LAMB, SGD};
use lazygrad::nn::state::{safe_load_metadata, safe_load_on};
use lazygrad::runtime::DefaultDevice;
use lazygrad::{Context, Tensor};

fn quadratic_loss(p: &Tensor) -> Tensor {
    let target = Tensor::new([[1.0f32, -2.0], [0.5, 3.0]]);
    let d = p - &target;
    (&d * &d).sum(None, false)
}

fn train(opt: &mut dyn Optimizer, p: &Tensor, steps: usize) -> f32 {
    let _t = Context::new(&[("TRAINING", 1)]);
    for _ in 0..steps {
        opt.zero_grad();
        quadratic_loss(p).backward();
        opt.step();
    }
    quadratic_loss(p).item::<f32>()
}

fn param() -> Tensor {
    Tensor::new([[0.0f32, 0.0], [0.0, 0.0]]).realize()
}

#[test]
fn sgd_first_step_is_exact() {
    let p = param();
    let mut opt = SGD::new(std::slice::from_ref(&p), 0.1, 0.0, 0.0, false);
    train(&mut opt, &p, 1);
    // gradient 2 (p - target), one step of lr 0.1
    assert_eq!(p.to_vec::<f32>(), vec![0.2, -0.4, 0.1, 0.6]);
}

#[test]
fn adam_first_step_moves_by_lr_times_sign() {
    let p = param();
    let mut opt = adam(std::slice::from_ref(&p), 0.01);
    train(&mut opt, &p, 1);
    let got = p.to_vec::<f32>();
    for (g, want) in got.iter().zip([0.01f32, -0.01, 0.01, 0.01]) {
        assert!((g - want).abs() < 1e-6, "{got:?}");
    }
}

#[test]
fn adam_matches_a_scalar_reference_over_60_steps() {
    // 0.0265632599 is the loss after 60 steps of the textbook Adam recurrence (lr 0.1,
    // b1 0.9, b2 0.999, eps 1e-8) run in f64 on this problem.
    let p = param();
    let mut opt = adam(std::slice::from_ref(&p), 0.1);
    let loss = train(&mut opt, &p, 60);
    assert!((loss - 0.026_563_26).abs() < 2e-5, "{loss}");
}

#[test]
fn every_optimizer_converges_and_lr_can_change() {
    type Make = Box<dyn Fn(&Tensor) -> Box<dyn Optimizer>>;
    let cases: Vec<(&str, Make, f32)> = vec![
        ("sgd momentum", Box::new(|p| Box::new(SGD::new(std::slice::from_ref(p), 0.02, 0.8, 0.0, false))), 1e-3),
        ("sgd nesterov", Box::new(|p| Box::new(SGD::new(std::slice::from_ref(p), 0.02, 0.8, 0.0, true))), 1e-3),
        ("adam", Box::new(|p| Box::new(adam(std::slice::from_ref(p), 0.1))), 5e-2),
        ("adamw", Box::new(|p| Box::new(adamw(std::slice::from_ref(p), 0.1, 0.0))), 5e-2),
        ("lamb", Box::new(|p| Box::new(LAMB::new(std::slice::from_ref(p), 0.1, 0.9, 0.999, 1e-6, 0.0, false))), 0.46),
        ("muon", Box::new(|p| Box::new(muon(std::slice::from_ref(p), 0.05, 0.9, 0.0, 5))), 3.0),
    ];
    for (name, make, tol) in cases {
        let p = param();
        let mut opt = make(&p);
        let start = quadratic_loss(&p).item::<f32>();
        let end = train(opt.as_mut(), &p, 60);
        println!("{name}: {start} -> {end}");
        assert!(end < tol && end < start, "{name}: loss {start} -> {end}");
    }
    let p = param();
    let mut opt = SGD::new(std::slice::from_ref(&p), 0.1, 0.0, 0.0, false);
    opt.set_lr(0.0);
    assert_eq!(opt.lr(), 0.0);
    train(&mut opt, &p, 2);
    assert_eq!(p.to_vec::<f32>(), vec![0.0; 4], "a zero learning rate leaves the parameter");
}

/// One case of `fixtures/optim_ref.safetensors` (see `tools/gen_optim_ref.py`).
struct RefCase {
    name: String,
    optimizer: String,
    hyper: serde_json::Value,
    lr: Vec<f64>,
    params: usize,
}

fn ref_cases(path: &str) -> Vec<RefCase> {
    let meta = safe_load_metadata(path).unwrap();
    let cases: serde_json::Value = serde_json::from_str(&meta["cases"]).unwrap();
    let list = cases.as_array().expect("a list of cases");
    list.iter()
        .map(|c| RefCase {
            name: c["name"].as_str().unwrap().into(),
            optimizer: c["optimizer"].as_str().unwrap().into(),
            hyper: c["hyper"].clone(),
            lr: c["lr"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect(),
            params: c["params"].as_u64().unwrap() as usize,
        })
        .collect()
}

/// The lazygrad optimizer a fixture case names, built with its hyperparameters.
fn make_optimizer(case: &RefCase, params: &[Tensor]) -> Box<dyn Optimizer> {
    let h = &case.hyper;
    let f = |k: &str| h[k].as_f64().unwrap_or_else(|| panic!("{}: hyperparameter {k}", case.name));
    let b = |k: &str| h[k].as_bool().unwrap_or_else(|| panic!("{}: hyperparameter {k}", case.name));
    match case.optimizer.as_str() {
        "sgd" => Box::new(SGD::new(params, f("lr"), f("momentum"), f("weight_decay"), b("nesterov"))),
        "adam" => Box::new(adam(params, f("lr"))),
        "adamw" => Box::new(adamw(params, f("lr"), f("weight_decay"))),
        "lamb" => Box::new(LAMB::new(params, f("lr"), f("b1"), f("b2"), f("eps"), f("weight_decay"), b("adam"))),
        "muon" => Box::new(muon(params, f("lr"), f("momentum"), f("weight_decay"), f("ns_steps") as usize)),
        other => panic!("{}: unknown optimizer {other}", case.name),
    }
}

/// Every optimizer against PyTorch (or tinygrad's update rule written out in float64 where torch
/// has none): the parameters after each of several steps (with weight decay, momentum, Nesterov,
/// and a learning rate changed midway) within rtol 1e-5 / atol 1e-6, on CPU and INTERP. The
/// gradients come from `backward` of `sum(p * g)` with the stored `g`, so `zero_grad` is checked too.
#[test]
fn optimizers_match_the_torch_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/optim_ref.safetensors");
    let cases = ref_cases(path);
    let kinds: BTreeSet<&str> = cases.iter().map(|c| c.optimizer.as_str()).collect();
    assert_eq!(kinds, BTreeSet::from(["adam", "adamw", "lamb", "muon", "sgd"]), "every optimizer has a case");
    let tol = Tol { atol: 1e-6, rtol: 1e-5 };
    let mut compared = 0;
    for device in ["CPU", "INTERP"] {
        let _device = DefaultDevice::scoped(device);
        let fixture = safe_load_on(path, device).unwrap();
        let _training = Context::new(&[("TRAINING", 1)]);
        for case in &cases {
            let params: Vec<Tensor> =
                (0..case.params).map(|i| fixture[&format!("{}.param{i}", case.name)].clone()).collect();
            let mut opt = make_optimizer(case, &params);
            assert_eq!(opt.lr() as f32, case.lr[0] as f32, "{}: initial learning rate", case.name);
            for (k, &lr) in case.lr.iter().enumerate() {
                if k > 0 && lr != case.lr[k - 1] {
                    opt.set_lr(lr);
                }
                opt.zero_grad();
                let terms: Vec<Tensor> = params
                    .iter()
                    .enumerate()
                    .map(|(i, p)| (p * &fixture[&format!("{}.grad{i}.step{k}", case.name)]).sum(None, false))
                    .collect();
                terms.iter().skip(1).fold(terms[0].clone(), |acc, t| acc + t).backward();
                opt.step();
                for (i, p) in params.iter().enumerate() {
                    let want = fixture[&format!("{}.param{i}.step{k}", case.name)].to_vec::<f64>();
                    let got = p.to_vec::<f32>();
                    assert_eq!(got.len(), want.len());
                    let bad = got.iter().zip(&want).position(|(&g, &w)| !close(f64::from(g), w, tol));
                    if let Some(j) = bad {
                        panic!(
                            "{device} {}: param{i} after step {k}: [{j}] is {}, want {}",
                            case.name, got[j], want[j]
                        );
                    }
                    compared += 1;
                }
            }
        }
    }
    let per_device: usize = cases.iter().map(|c| c.params * c.lr.len()).sum();
    assert_eq!(compared, 2 * per_device, "every stored parameter was compared");
}
