//! Scalar parameters (`schedule/unbind.rs`): a float constant that is data reaches its kernel as
//! a launch value, so a new value (`t * 0.37` after `t * 0.5`, another learning rate) compiles
//! nothing new and still computes with the new value, on the compiled device and on INTERP.
//! (Its own test binary: the program count is process-wide.)

mod common;

use common::devices;
use half::f16;
use lazygrad::engine::realize::programs_made;
use lazygrad::nn::optim::{Optimizer, LAMB, SGD};
use lazygrad::runtime::DefaultDevice;
use lazygrad::{Context, DType, Tensor};

/// The tests run one at a time: they count the programs this process makes.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

const CONSTANTS: [f32; 5] = [0.5, 0.37, -2.75, 1e-3, 12345.678];

/// `-3.5, -2.25, ..., ` eight float32 values on `dev`.
fn values(dev: &str) -> (Vec<f32>, Tensor) {
    let host: Vec<f32> = (0..8).map(|i| i as f32 * 1.25 - 3.5).collect();
    (host.clone(), Tensor::from_vec(host, &[8]).to(dev).realize())
}

/// Realizes `op(x, c)` for each of `CONSTANTS` after a first one compiled it: every result equals
/// `want(x, c)` bit for bit, and no program was made after the first.
fn one_program_for_every_constant(op: impl Fn(&Tensor, f32) -> Tensor, want: impl Fn(f32, f32) -> f32) {
    let _serial = serial();
    for dev in devices() {
        let (host, x) = values(dev);
        op(&x, 2.5).realize();
        let made = programs_made();
        for c in CONSTANTS {
            let got: Vec<f32> = op(&x, c).to_vec();
            let expect: Vec<f32> = host.iter().map(|&v| want(v, c)).collect();
            assert_eq!(got, expect, "{dev}: constant {c}");
        }
        assert_eq!(programs_made(), made, "{dev}: a new constant compiled a new program");
    }
}

#[test]
fn a_changed_multiplier_compiles_nothing_new() {
    one_program_for_every_constant(|x, c| x * c as f64, |v, c| v * c);
}

#[test]
fn a_changed_addend_compiles_nothing_new() {
    one_program_for_every_constant(|x, c| x + c as f64, |v, c| v + c);
}

#[test]
fn a_half_multiplier_is_rounded_to_half_and_compiles_nothing_new() {
    let _serial = serial();
    for dev in devices() {
        let (host, x) = values(dev);
        let scaled = |c: f64| (x.cast(DType::FLOAT16) * c).to_vec::<f16>();
        scaled(0.75);
        let made = programs_made();
        for c in [0.37, -6.5] {
            let want: Vec<f16> =
                host.iter().map(|&v| f16::from_f32(f16::from_f32(v).to_f32() * f16::from_f64(c).to_f32())).collect();
            assert_eq!(scaled(c), want, "{dev}: float16 times {c}");
        }
        assert_eq!(programs_made(), made, "{dev}: a new half constant compiled a new program");
    }
}

#[test]
fn only_data_constants_become_parameters() {
    let _serial = serial();
    let x = Tensor::from_vec(vec![1.0f32, 2.0], &[2]).realize();
    let params = |t: Tensor| Tensor::linear_with_vars(&[t]).unwrap().1.len();
    assert_eq!(params(&x * 0.37), 1);
    assert_eq!(params(&(&x * 0.37) + 0.37), 1, "one constant used twice is one parameter");
    assert_eq!(params(&(&x * 0.37) - 2.0), 2);
    // what the rules fold stays in the kernel, and so do integers
    assert_eq!(params(&(&x * 1.0) + 0.0), 0);
    assert_eq!(params(x.relu().maximum(f64::NEG_INFINITY)), 0);
    assert_eq!(params(x.cast(DType::INT32) * 3), 0);
    assert_eq!(params(x.cast(DType::FLOAT64) * 0.37), 0, "64-bit floats stay in the kernel");
}

/// A step of `make(params, lr)` over `loss = sum(w * w)` for each learning rate, after a first
/// one compiled them: no program is made after the first, and the step moves `w` to `update`
/// (the host's arithmetic on `w`, its gradient `2w` and the learning rate) within float32
/// rounding.
fn one_program_for_every_learning_rate<O: Optimizer>(
    make: impl Fn(&[Tensor], f64) -> O,
    update: impl Fn(f32, f32, f32) -> f32,
) {
    let _serial = serial();
    let _training = Context::new(&[("TRAINING", 1)]);
    for dev in devices() {
        // the optimizer keeps its learning rate on the default device
        let _default = DefaultDevice::scoped(dev);
        let step = |lr: f64| {
            let (host, w) = values(dev);
            let w = w.requires_grad(true);
            let mut opt = make(std::slice::from_ref(&w), lr);
            (&w * &w).sum(None, false).backward();
            opt.step();
            (host, w.to_vec::<f32>())
        };
        step(0.1);
        let made = programs_made();
        for lr in [0.37, 0.01, 3e-4] {
            let (host, got) = step(lr);
            for (v, g) in host.iter().zip(&got) {
                let want = update(*v, 2.0 * v, lr as f32);
                assert!(
                    (g - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{dev}: lr {lr}: {v} stepped to {g}, want {want}"
                );
            }
        }
        assert_eq!(programs_made(), made, "{dev}: a new learning rate compiled a new program");
    }
}

#[test]
fn sgd_with_another_learning_rate_compiles_nothing_new() {
    one_program_for_every_learning_rate(|p, lr| SGD::new(p, lr, 0.0, 0.0, false), |w, g, lr| w - g * lr);
}

#[test]
fn adam_with_another_learning_rate_compiles_nothing_new() {
    // the first step of Adam moves each weight by lr * g / (|g| + eps) (bias-corrected moments)
    one_program_for_every_learning_rate(
        |p, lr| LAMB::new(p, lr, 0.9, 0.999, 1e-8, 0.0, true),
        |w, g, lr| w - lr * g / (g.abs() + 1e-8),
    );
}
