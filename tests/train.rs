//! Training end to end on small conv nets: one step's gradients (every one in the fixture, NaN a
//! failure) match float64 PyTorch, the JIT'd step is bit-identical to the eager one, and a saved
//! and reloaded state dict predicts exactly the same.

mod common;

use lazygrad::nn::layers::{BatchNorm, Conv2d, Linear};
use lazygrad::nn::optim::{adam, Optimizer};
use lazygrad::nn::state::{get_parameters, get_state_dict, load_state_dict, safe_load, safe_save};
use lazygrad::tensor::{ConvOpts, PoolOpts, Reduction};
use lazygrad::{module, Context, Jit, Tensor};

struct Net {
    conv: Conv2d,
    bn: BatchNorm,
    fc: Linear,
}
module!(Net { conv, bn, fc });

impl Net {
    fn new(seed: u64) -> Net {
        Tensor::manual_seed(seed);
        Net {
            conv: Conv2d::new(1, 4, 3, ConvOpts::default(), true),
            bn: BatchNorm::with_size(4),
            fc: Linear::new(36, 3, true),
        }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.bn.forward(&self.conv.forward(x).relu()).max_pool2d(&PoolOpts::default());
        self.fc.forward(&h.flatten(1, -1))
    }
}

/// The random stream is process-wide (as in tinygrad): tests that seed it run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn batch(i: u64) -> (Tensor, Tensor) {
    Tensor::manual_seed(100 + i);
    (Tensor::rand(&[6, 1, 8, 8]).realize(), Tensor::randint(&[6], 0, 3).realize())
}

fn step(net: &Net, opt: &mut dyn Optimizer, x: &Tensor, y: &Tensor) -> Vec<Tensor> {
    let _training = Context::new(&[("TRAINING", 1)]);
    opt.zero_grad();
    let loss = net.forward(x).sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
    loss.backward();
    let mut out = vec![loss];
    out.extend(opt.schedule_step());
    out
}

fn bits(net: &Net) -> Vec<Vec<u32>> {
    get_parameters(net)
        .iter()
        .map(|t| t.cast(lazygrad::DType::FLOAT32).to_vec::<f32>().iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// tools/gen_train_ref.py's net: conv 1->16 5x5, relu, conv 16->16 3x3, relu, BatchNorm, max
/// pool, linear 1936->10. 16 channels: both convs compute channels-last, and the second one's
/// input gradient is a transposed conv.
struct RefNet {
    conv: Conv2d,
    conv2: Conv2d,
    bn: BatchNorm,
    fc: Linear,
}
module!(RefNet { conv, conv2, bn, fc });

/// tools/gen_train_ref.py's batch: pixel i is bits 24..32 of `i * 2654435761 mod 2^32`.
fn hashed_images() -> Tensor {
    let pixels: Vec<f32> = (0..128u64 * 28 * 28).map(|i| ((i * 2654435761 % (1 << 32)) >> 24) as f32).collect();
    Tensor::new(pixels).reshape(&[128, 1, 28, 28])
}

/// BatchNorm statistics and the conv weights' gradients each sum ~62k-74k values per output; in one
/// float32 accumulator per output that drifts by ~1e-2 relative (it did, before large reduces
/// were split). Split, the gradients match PyTorch's float64 ones to ~1e-6.
#[test]
fn bn_convnet_gradients_match_float64_torch() {
    let _serial = serial(); // its layers' init draws from the shared random stream
    let fixture =
        safe_load(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/bn_convnet_grads.safetensors")).unwrap();
    let net = RefNet {
        conv: Conv2d::new(1, 16, 5, ConvOpts::default(), true),
        conv2: Conv2d::new(16, 16, 3, ConvOpts::default(), true),
        bn: BatchNorm::with_size(16),
        fc: Linear::new(1936, 10, true),
    };
    load_state_dict(&net, &fixture, false).unwrap();
    let _training = Context::new(&[("TRAINING", 1)]);
    let features = net.conv2.forward(&net.conv.forward(&hashed_images()).relu()).relu();
    let h = net.bn.forward(&features).max_pool2d(&PoolOpts::default());
    let loss =
        net.fc.forward(&h.flatten(1, -1)).sparse_categorical_crossentropy(&fixture["labels"], -1, 0.0, Reduction::Mean);
    loss.backward();
    let state = get_state_dict(&net);
    let mut failures = vec![];
    if let Err(e) = within(&loss.reshape(&[1]), &fixture["loss"], 1e-6) {
        failures.push(format!("loss: {e}"));
    }
    let mut compared = 0;
    for (key, want) in fixture.iter().filter(|(k, _)| k.starts_with("grad.")) {
        let name = &key["grad.".len()..];
        match state.get(name).map(Tensor::grad) {
            None => failures.push(format!("{name}: the net has no such parameter")),
            Some(None) => failures.push(format!("{name}: no gradient")),
            Some(Some(got)) => {
                compared += 1;
                if let Err(e) = within(&got, want, 1e-4) {
                    failures.push(format!("{name}: {e}"));
                }
            }
        }
    }
    for (name, param) in &state {
        if param.grad().is_some() && !fixture.contains_key(&format!("grad.{name}")) {
            failures.push(format!("{name}: has a gradient the fixture lacks"));
        }
    }
    assert!(failures.is_empty(), "differences from PyTorch:\n{}", failures.join("\n"));
    assert_eq!(compared, 8, "gradients compared: one per weight and bias of conv, conv2, bn and fc");
}

/// `Ok` when `got` has `want`'s shape and every value is within `tol` times `want`'s largest
/// magnitude of it; a NaN anywhere is an error.
fn within(got: &Tensor, want: &Tensor, tol: f64) -> Result<(), String> {
    if got.shape() != want.shape() {
        return Err(format!("shape {:?}, want {:?}", got.shape(), want.shape()));
    }
    let (got, want) = (got.to_vec::<f32>(), want.to_vec::<f32>());
    let scale = want.iter().fold(0f64, |m, w| m.max(f64::from(w.abs())));
    let diffs = got.iter().zip(&want).map(|(&g, &w)| (f64::from(g) - f64::from(w)).abs());
    // the first NaN difference stays the largest (f64::max would drop it)
    let worst = diffs.fold(0f64, |m, d| if m.is_nan() || d <= m { m } else { d });
    match worst <= tol * scale {
        true => Ok(()),
        false => Err(format!("largest difference {worst:e} is over {tol:e} x the largest value {scale:e}")),
    }
}

#[test]
fn gradient_comparison_rejects_nan_and_wrong_shapes() {
    let want = Tensor::new([1.0f32, -2.0]);
    assert!(within(&Tensor::new([1.0f32, -2.0]), &want, 1e-6).is_ok());
    assert!(within(&Tensor::new([1.01f32, -2.0]), &want, 1e-2).is_ok());
    assert!(within(&Tensor::new([1.1f32, -2.0]), &want, 1e-2).is_err());
    assert!(within(&Tensor::new([f32::NAN, -2.0]), &want, 1e-6).is_err());
    assert!(within(&Tensor::new([1.0f32, f32::NAN]), &want, 1e-6).is_err());
    assert!(within(&Tensor::new([[1.0f32, -2.0]]), &want, 1e-6).is_err());
}

#[test]
fn jit_train_step_is_bit_identical_to_eager() {
    let _serial = serial();
    let (eager, jitted) = (Net::new(7), Net::new(7));
    let mut opt_e = adam(&get_parameters(&eager), 0.01);
    let mut opt_j = adam(&get_parameters(&jitted), 0.01);
    let mut jit = Jit::new(|b: &[Tensor]| step(&jitted, &mut opt_j, &b[0], &b[1]));
    for i in 0..4 {
        let (x, y) = batch(i);
        let le = step(&eager, &mut opt_e, &x, &y);
        Tensor::realize_all(&le).unwrap();
        let lj = jit.call(&[x, y]).unwrap();
        assert_eq!(le[0].item::<f32>().to_bits(), lj[0].item::<f32>().to_bits(), "loss at step {i}");
    }
    assert_eq!(bits(&eager), bits(&jitted), "parameters after 4 steps");
}

#[test]
fn reloaded_state_dict_predicts_identically() {
    let _serial = serial();
    let net = Net::new(3);
    let mut opt = adam(&get_parameters(&net), 0.01);
    for i in 0..3 {
        let (x, y) = batch(i);
        Tensor::realize_all(&step(&net, &mut opt, &x, &y)).unwrap();
    }
    let dir = common::TempDir::new("train");
    let path = dir.path("net.safetensors");
    let state = get_state_dict(&net);
    safe_save(state.iter().map(|(k, v)| (k.as_str(), v)), &path).unwrap();
    let fresh = Net::new(99);
    load_state_dict(&fresh, &safe_load(&path).unwrap(), true).unwrap();
    let (x, _) = batch(10);
    let predict = |n: &Net| n.forward(&x).argmax(Some(1), false).to_vec::<i32>();
    let logits = |n: &Net| n.forward(&x).to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(predict(&net), predict(&fresh));
    assert_eq!(logits(&net), logits(&fresh));
}
