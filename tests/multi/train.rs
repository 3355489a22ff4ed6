//! Data-parallel training: weights replicated, the batch split along axis 0. The gradients come
//! out all-reduced with no code of their own, and ten steps follow the one-device run.

use lazygrad::nn::layers::Linear;
use lazygrad::nn::optim::{adam, Optimizer, SGD};
use lazygrad::nn::state::get_parameters;
use lazygrad::tensor::Reduction;
use lazygrad::{module, Context, DType, Jit, Tensor};

struct Mlp {
    l1: Linear,
    l2: Linear,
}
module!(Mlp { l1, l2 });

impl Mlp {
    fn new() -> Mlp {
        Tensor::manual_seed(7);
        Mlp { l1: Linear::new(6, 16, true), l2: Linear::new(16, 3, true) }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        self.l2.forward(&self.l1.forward(x).relu())
    }
}

/// The random stream is process-wide: tests that seed it run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Batch `i`: 8 rows of 6 features and their labels, the same on every run.
fn batch(i: usize) -> (Tensor, Tensor) {
    let x: Vec<f32> = (0..48).map(|j| ((i * 48 + j) as f32 * 0.37).sin()).collect();
    let y: Vec<i32> = (0..8).map(|j| ((i * 8 + j) * 7 % 3) as i32).collect();
    (Tensor::from_slice(&x, &[8, 6]), Tensor::from_slice(&y, &[8]))
}

/// One training step on batch `xy` (inputs, labels): the loss, and the tensors the step assigns.
fn train_step(model: &Mlp, opt: &mut dyn Optimizer, xy: &[Tensor]) -> Vec<Tensor> {
    opt.zero_grad();
    let loss = model.forward(&xy[0]).sparse_categorical_crossentropy(&xy[1], -1, 0.0, Reduction::Mean);
    loss.backward();
    let mut step = vec![loss];
    step.extend(opt.schedule_step());
    Tensor::realize_all(&step).unwrap();
    step
}

/// The losses of ten steps of `make_opt` on `Mlp`, with parameters on `devices` (replicated) and
/// each batch split over them; with `jit`, each step through one `Jit` (replayed from the third).
fn losses(devices: &[&str], make_opt: fn(&[Tensor]) -> Box<dyn Optimizer>, jit: bool) -> Vec<f32> {
    let _one_at_a_time = serial();
    let model = Mlp::new();
    let params = get_parameters(&model);
    if devices.len() > 1 {
        params.iter().for_each(|p| {
            p.shard_(devices, None).realize();
        });
    }
    let mut opt = make_opt(&params);
    let _training = Context::new(&[("TRAINING", 1)]);
    let batch_on = |i: usize| {
        let (x, y) = batch(i % 2);
        match devices.len() {
            1 => [x, y],
            _ => [x.shard(devices, Some(0)), y.shard(devices, Some(0))],
        }
    };
    let loss = |out: Vec<Tensor>| out[0].cast(DType::FLOAT32).item::<f32>();
    if jit {
        let mut step = Jit::new(|xy: &[Tensor]| train_step(&model, opt.as_mut(), xy));
        (0..10).map(|i| loss(step.call(&batch_on(i)).unwrap())).collect()
    } else {
        (0..10).map(|i| loss(train_step(&model, opt.as_mut(), &batch_on(i)))).collect()
    }
}

fn sgd(params: &[Tensor]) -> Box<dyn Optimizer> {
    Box::new(SGD::new(params, 0.1, 0.9, 0.0, false))
}

fn adam_opt(params: &[Tensor]) -> Box<dyn Optimizer> {
    Box::new(adam(params, 0.01))
}

#[test]
fn data_parallel_training_follows_one_device_over_ten_steps() {
    for make_opt in [sgd as fn(&[Tensor]) -> Box<dyn Optimizer>, adam_opt] {
        let single = losses(&["CPU"], make_opt, false);
        assert!(single[9] < single[0], "the one-device run learns: {single:?}");
        for (devices, jit) in
            [(&["CPU", "CPU:1"][..], false), (&["CPU", "CPU:1", "CPU:2", "CPU:3"], false), (&["CPU", "CPU:1"], true)]
        {
            let parallel = losses(devices, make_opt, jit);
            for (step, (p, s)) in parallel.iter().zip(&single).enumerate() {
                assert!((p - s).abs() <= 1e-5 * s.abs().max(1.0), "step {step} on {devices:?} (jit {jit}): {p} vs {s}");
            }
        }
    }
}

#[test]
fn a_replicated_weights_gradient_is_the_sum_over_the_sharded_batch() {
    let _one_at_a_time = serial();
    let (x, _) = batch(0);
    let w = Tensor::from_slice(&(0..18).map(|i| i as f32 * 0.1).collect::<Vec<_>>(), &[6, 3]);
    let expect = x.matmul(&w).relu().sum(None, false).gradient_with(&[&w], None).unwrap()[0].to_vec::<f32>();
    let devices = ["CPU", "CPU:1", "CPU:2", "CPU:3"];
    let (xs, ws) = (x.shard(&devices, Some(0)), w.shard(&devices, None).realize());
    let g = xs.matmul(&ws).relu().sum(None, false).gradient_with(&[&ws], None).unwrap().remove(0);
    assert_eq!((g.device(), g.shard_axis()), ("CPU,CPU:1,CPU:2,CPU:3", None));
    let got = g.to_vec::<f32>();
    assert!(got.iter().zip(&expect).all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0)), "{got:?} vs {expect:?}");
}

#[test]
fn batchnorm_over_a_split_batch_uses_each_devices_statistics_unless_syncbn() {
    use lazygrad::nn::layers::BatchNorm;
    let _one_at_a_time = serial();
    let _training = Context::new(&[("TRAINING", 1)]);
    let x = Tensor::from_slice(&(0..96).map(|i| ((i * 37 % 23) as f32).sqrt()).collect::<Vec<_>>(), &[8, 3, 2, 2]);
    let devices = ["CPU", "CPU:1"];
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0));
    let layer = |on: Option<&[&str]>| {
        let bn = BatchNorm::with_size(3);
        if let Some(d) = on {
            lazygrad::nn::state::get_state_dict(&bn).values().for_each(|t| {
                t.shard_(d, None);
            });
        }
        bn
    };
    // each device normalizes its half as one device would
    let halves: Vec<(Vec<f32>, Vec<f32>)> = [(0, 4), (4, 8)]
        .iter()
        .map(|&rows| {
            let bn = layer(None);
            let out = bn.forward(&x.shrink(&[rows, (0, 3), (0, 2), (0, 2)])).to_vec::<f32>();
            (out, bn.running_mean.as_ref().unwrap().to_vec::<f32>())
        })
        .collect();
    let bn = layer(Some(&devices));
    let out = bn.forward(&x.shard(&devices, Some(0))).to_vec::<f32>();
    assert!(close(&out, &[halves[0].0.clone(), halves[1].0.clone()].concat()), "per device");
    let average: Vec<f32> = halves[0].1.iter().zip(&halves[1].1).map(|(a, b)| (a + b) / 2.0).collect();
    assert!(close(&bn.running_mean.as_ref().unwrap().to_vec::<f32>(), &average), "running mean");
    // SYNCBN=1: the whole batch's statistics, as on one device
    let whole = layer(None).forward(&x).to_vec::<f32>();
    let _sync = Context::new(&[("SYNCBN", 1)]);
    let synced = layer(Some(&devices)).forward(&x.shard(&devices, Some(0))).to_vec::<f32>();
    assert!(close(&synced, &whole), "synced");
    assert!(!close(&out, &whole), "the per-device statistics differ from the whole batch's");
}

#[test]
fn gradients_flow_back_through_a_shard_to_the_one_device_tensor_it_split() {
    let _one_at_a_time = serial();
    let x = Tensor::from_slice(&(0..12).map(|i| i as f32 - 5.0).collect::<Vec<_>>(), &[4, 3]).requires_grad(true);
    for axis in [Some(0), None] {
        x.set_grad(None);
        let y = x.shard(&["CPU", "CPU:1"], axis);
        (&y * &y).sum(None, false).backward();
        let g = x.grad().expect("x has a gradient");
        assert_eq!(g.device(), "CPU");
        // replicated, the copies are one value: its gradient counts once
        let twice: Vec<f32> = x.to_vec::<f32>().iter().map(|v| 2.0 * v).collect();
        assert_eq!(g.to_vec::<f32>(), twice, "axis {axis:?}");
    }
}

#[test]
fn model_parallel_layers_split_along_their_weights_axes_equal_one_device() {
    let _one_at_a_time = serial();
    let model = Mlp::new();
    let (x, y) = batch(0);
    let loss =
        |m: &Mlp, x: &Tensor, y: &Tensor| m.forward(x).sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
    let want = loss(&model, &x, &y);
    let params = get_parameters(&model);
    let want_grads: Vec<Vec<f32>> = want
        .gradient_with(&params.iter().collect::<Vec<_>>(), None)
        .unwrap()
        .iter()
        .map(|g| g.to_vec::<f32>())
        .collect();
    let want = want.item::<f32>();
    // the first layer split along its outputs (weight [16, 6] on axis 0, bias too), the second along
    // its inputs (weight [3, 16] on axis 1, its partial sums all-reduced); the batch on each device
    let devices = ["CPU", "CPU:1"];
    model.l1.weight.shard_(&devices, Some(0));
    model.l1.bias.as_ref().unwrap().shard_(&devices, Some(0));
    model.l2.weight.shard_(&devices, Some(1));
    model.l2.bias.as_ref().unwrap().shard_(&devices, None);
    let got = loss(&model, &x.to("CPU,CPU:1"), &y.to("CPU,CPU:1"));
    let grads = got.gradient_with(&params.iter().collect::<Vec<_>>(), None).unwrap();
    let got = got.item::<f32>();
    assert!((got - want).abs() <= 1e-5 * want.abs(), "{got} vs {want}");
    for (g, w) in grads.iter().zip(&want_grads) {
        let g = g.to_vec::<f32>();
        assert!(g.iter().zip(w).all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)), "{g:?} vs {w:?}");
    }
}

#[test]
fn gradients_through_a_copy_reach_the_source_on_its_own_device() {
    let _one_at_a_time = serial();
    for (from, to) in [("CPU", "CL"), ("CL", "INTERP"), ("INTERP", "CPU:1")] {
        let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3]).to(from).realize().requires_grad(true);
        let y = x.to(to).exp2();
        (&y * &y).sum(None, false).backward();
        let g = x.grad().expect("x has a gradient");
        assert_eq!(g.device(), from, "{from} -> {to}");
        // d/dx (2^x)^2 = 2 ln2 4^x
        let want: Vec<f32> = [1.0f32, -2.0, 3.0].iter().map(|v| 2.0 * std::f32::consts::LN_2 * 4f32.powf(*v)).collect();
        let got = g.to_vec::<f32>();
        assert!(
            got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 * b.abs().max(1.0)),
            "{from} -> {to}: {got:?}"
        );
    }
}

#[test]
fn optimizers_keep_their_state_on_the_parameters_device_whatever_the_default() {
    let _one_at_a_time = serial();
    let run = |device: &str, make_opt: fn(&[Tensor]) -> Box<dyn Optimizer>| {
        let w = Tensor::from_slice(&[0.5f32, -1.0, 2.0], &[3]).to(device).realize();
        let mut opt = make_opt(std::slice::from_ref(&w));
        let _training = Context::new(&[("TRAINING", 1)]);
        for _ in 0..3 {
            opt.zero_grad();
            (&w * &w).sum(None, false).backward();
            Tensor::realize_all(&opt.schedule_step()).unwrap();
        }
        assert_eq!(w.device(), device);
        w.to_vec::<f32>()
    };
    for make_opt in [sgd as fn(&[Tensor]) -> Box<dyn Optimizer>, adam_opt] {
        let want = run("CPU", make_opt);
        for device in ["CL", "INTERP", "CPU:2"] {
            let got = run(device, make_opt);
            assert!(got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-6), "{device}: {got:?} vs {want:?}");
        }
    }
}
