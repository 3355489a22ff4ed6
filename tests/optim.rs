//! Optimizers: exact first steps and convergence on a quadratic.

use lazygrad::nn::optim::{adam, adamw, muon, Optimizer, LAMB, SGD};
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
