//! Long runs and threads: memory that stays flat over many JIT'd training steps and many eager
//! ops, and threads that build and realize different graphs at once. The training soak runs in
//! `.ci/run` (`--ignored`: 2,000 steps take minutes).

use lazygrad::nn::layers::{BatchNorm, Conv2d, Linear};
use lazygrad::nn::optim::{adam, Optimizer};
use lazygrad::nn::state::get_parameters;
use lazygrad::tensor::{ConvOpts, PoolOpts, Reduction};
use lazygrad::{module, Context, Jit, Tensor};

/// Held by every test here: a memory test reads the whole process's resident memory, which a
/// test running beside it would grow.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The resident memory of this process now, in bytes (Linux: `/proc/self/statm`).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * 4096
}

struct Net {
    c1: Conv2d,
    c2: Conv2d,
    bn: BatchNorm,
    fc: Linear,
}
module!(Net { c1, c2, bn, fc });

impl Net {
    fn forward(&self, x: &Tensor) -> Tensor {
        let h = self.c1.forward(x).relu();
        let h = self.bn.forward(&self.c2.forward(&h).relu()).max_pool2d(&PoolOpts::default());
        self.fc.forward(&h.flatten(1, -1))
    }
}

#[test]
#[ignore = "2,000 training steps (minutes); .ci/run runs it"]
fn jit_training_memory_stays_flat_over_2000_steps() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    Tensor::manual_seed(3);
    let net = Net {
        c1: Conv2d::new(1, 8, 5, ConvOpts::default(), true),
        c2: Conv2d::new(8, 8, 5, ConvOpts::default(), true),
        bn: BatchNorm::with_size(8),
        fc: Linear::new(8 * 10 * 10, 10, true),
    };
    let mut opt = adam(&get_parameters(&net), 1e-3);
    let images = Tensor::rand(&[1024, 1, 28, 28]).realize();
    let labels = Tensor::randint(&[1024], 0, 10).realize();
    let mut step = Jit::new(|data: &[Tensor]| {
        let _training = Context::new(&[("TRAINING", 1)]);
        let pick = Tensor::randint(&[128], 0, 1024);
        let (x, y) = (
            data[0].index(&[lazygrad::tensor::Idx::Tensor(pick.clone())]),
            data[1].index(&[lazygrad::tensor::Idx::Tensor(pick)]),
        );
        opt.zero_grad();
        let loss = net.forward(&x).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        let mut out = vec![loss];
        out.extend(opt.schedule_step());
        out
    });
    let mut after_warmup = 0;
    for i in 0..2000 {
        let loss = step.call(&[images.clone(), labels.clone()]).unwrap()[0].item::<f32>();
        assert!(loss.is_finite(), "step {i}: loss {loss}");
        if i == 100 {
            after_warmup = rss_bytes();
        }
    }
    let end = rss_bytes();
    let growth = end as f64 / after_warmup as f64 - 1.0;
    eprintln!(
        "resident memory: {} MB after step 100, {} MB after 2000 ({:+.2}%)",
        after_warmup >> 20,
        end >> 20,
        growth * 100.0
    );
    assert!(growth < 0.05, "resident memory grew {:.1}% from step 100 to 2000", growth * 100.0);
}

#[test]
fn eager_ops_over_a_thousand_live_tensors_do_not_grow_memory() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // 10,000 eager ops, each result replacing one of 1,000 live tensors
    let mut live: Vec<Tensor> = (0..1000).map(|i| Tensor::from_slice(&[i as f32; 64], &[64])).collect();
    let mut before = 0;
    for i in 0..10_000usize {
        let (a, b) = (&live[i % 1000], &live[(i * 7 + 3) % 1000]);
        let next = ((a + b) * 0.5).realize();
        live[i % 1000] = next;
        if i == 1000 {
            before = rss_bytes();
        }
    }
    let growth = rss_bytes() as f64 / before as f64 - 1.0;
    assert!(growth < 0.02, "resident memory grew {:.1}% over 9,000 eager ops", growth * 100.0);
    assert!(live.iter().all(|t| t.to_vec::<f32>().iter().all(|v| v.is_finite())));
}

#[test]
fn four_threads_build_and_realize_different_graphs_at_once() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let worker = |kind: usize| {
        move || {
            for round in 0..20 {
                let n = 16 + round;
                let data: Vec<f32> = (0..n * n).map(|i| ((i * (kind + 3) + round) % 17) as f32 - 8.0).collect();
                let x = Tensor::from_slice(&data, &[n, n]);
                let (got, want): (Vec<f32>, Vec<f32>) = match kind {
                    0 => {
                        let want = (0..n)
                            .flat_map(|i| (0..n).map(move |j| (i, j)))
                            .map(|(i, j)| (0..n).map(|k| data[i * n + k] * data[k * n + j]).sum())
                            .collect();
                        (x.matmul(&x).to_vec(), want)
                    }
                    1 => (x.sum(1, false).to_vec(), data.chunks(n).map(|r| r.iter().sum()).collect()),
                    2 => (
                        x.max(0, false).to_vec(),
                        (0..n).map(|j| (0..n).map(|i| data[i * n + j]).fold(f32::MIN, f32::max)).collect(),
                    ),
                    _ => (x.relu().mul(2.0).to_vec(), data.iter().map(|v| v.max(0.0) * 2.0).collect()),
                };
                for (g, w) in got.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-3 * (1.0 + w.abs()), "thread {kind} round {round}: {g} vs {w}");
                }
            }
        }
    };
    let handles: Vec<_> = (0..4).map(|k| std::thread::spawn(worker(k))).collect();
    for h in handles {
        h.join().expect("a worker thread failed");
    }
}
