//! tinygrad's beautiful_mnist in lazygrad: a small conv net trained with a JIT'd step.
//!
//! `cargo run --release --example beautiful_mnist`; settings: `BS` (512), `STEPS` (70),
//! `EVAL_EVERY` (10: steps between test-set evaluations, and after the last), `EVAL_BS` (1000:
//! test images a JIT'd evaluation call takes; a WebGPU device binds at most its
//! `max_storage_buffer_binding_size` of one intermediate, 128 MiB on lavapipe),
//! `FASHION=1` (Fashion-MNIST; when unset, MNIST digits if they can be found or downloaded, else
//! Fashion-MNIST), `SGD=1` / `MUON=1` (optimizer; Adam by default), `LR`,
//! `TARGET_EVAL_ACC_PCT` (exit non-zero below it), `SEED`, `INIT` (a safetensors file of initial
//! weights and each step's batch indices, `samples`, written by tools/mnist_torch.py's
//! `SAVE_INIT`: both frameworks then train from the same start on the same batches), `GPUS` (1:
//! with n > 1, data parallel over the default device's numbers 0..n, as tinygrad's multi-GPU
//! example: the model replicated, each batch split along axis 0). Under `mpirun -np N` (built with
//! `--features mpi`) each rank trains on its part of every batch and the optimizer averages the
//! gradients over the ranks; rank 0 prints. Prints its
//! figures as `key value` lines (tools/mnist_compare.sh puts them beside PyTorch's).

use std::io::Write;
use std::time::Instant;

use lazygrad::helpers::{getenv, getenv_str, peak_rss_bytes, GlobalCounters};
use lazygrad::nn::datasets::mnist;
use lazygrad::nn::optim::{adam, muon, Optimizer, SGD};
use lazygrad::nn::state::{get_parameters, get_state_dict, load_state_dict, safe_load};
use lazygrad::tensor::Idx;
use lazygrad::{DType, Jit, Tensor};

mod common;
use common::{train_step, Model};

fn first_line(e: &lazygrad::Error) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    // MNIST digits unless FASHION=1; with FASHION unset and no digits to be had (offline), the
    // Fashion-MNIST that tools/setup.sh --demo installs
    let data = match getenv_str("FASHION") {
        Some(v) => mnist(v != "0")?,
        None => mnist(false).or_else(|e| {
            eprintln!("MNIST digits unavailable, training on Fashion-MNIST instead ({})", first_line(&e));
            mnist(true)
        })?,
    };
    let (bs, steps) = (getenv("BS", 512) as usize, getenv("STEPS", 70) as usize);
    Tensor::manual_seed(getenv("SEED", 42) as u64);
    let model = Model::new();
    // row i of `samples`: step i's batch
    let given_batches: Option<Vec<Tensor>> = match getenv_str("INIT") {
        Some(path) => {
            let mut state = safe_load(&path)?;
            let samples = state.remove("samples").ok_or_else(|| {
                lazygrad::Error::value(
                    "beautiful_mnist",
                    format!("INIT={path}: no `samples` (each step's batch indices)"),
                )
            })?;
            if samples.shape() != [steps, bs] {
                let msg = format!("INIT={path}: `samples` is {:?}, not [STEPS, BS] = [{steps}, {bs}]", samples.shape());
                return Err(lazygrad::Error::value("beautiful_mnist", msg));
            }
            load_state_dict(&model, &state, true)?;
            let rows =
                (0..steps).map(|i| samples.index(&[Idx::I(i as isize)]).cast(DType::INT32).contiguous().realize());
            Some(rows.collect())
        }
        None => None,
    };
    // data parallel: every tensor of the model on each device (before the optimizer, which keeps
    // its state where the parameters are), each batch split over them
    let gpus = getenv("GPUS", 1).max(1) as usize;
    let devices = lazygrad::runtime::default_devices(gpus);
    let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
    let spread = |t: Tensor| if gpus > 1 { t.try_shard(&devices, Some(0)) } else { Ok(t) };
    if bs % gpus != 0 {
        return Err(lazygrad::Error::value("beautiful_mnist", format!("BS={bs} does not split over GPUS={gpus}")));
    }
    if gpus > 1 {
        get_state_dict(&model).values().try_for_each(|t| t.try_shard_(&devices, None).map(|_| ()))?;
    }
    let params = get_parameters(&model);
    let lr = |default: f64| getenv_str("LR").and_then(|v| v.parse().ok()).unwrap_or(default);
    let mut opt: Box<dyn Optimizer> = if getenv("SGD", 0) != 0 {
        Box::new(SGD::new(&params, lr(0.01), 0.9, 0.0, true))
    } else if getenv("MUON", 0) != 0 {
        Box::new(muon(&params, lr(0.02), 0.95, 0.0, 5))
    } else {
        Box::new(adam(&params, lr(0.001)))
    };

    // the batch is sampled inside the JIT'd step: the random counter lives on the device, so
    // each replay draws a new batch (unless INIT gives the batches, as a third input)
    let n_train = data.x_train.shape()[0] as i64;
    // several processes: every rank draws the same batch (one seed, one random stream) and takes
    // its part; the loss shown is the whole batch's
    let world = lazygrad::runtime::job::world()?;
    let (rank, ranks) = (world.rank(), world.size());
    if bs % (ranks * gpus) != 0 {
        return Err(lazygrad::Error::value(
            "beautiful_mnist",
            format!("BS={bs} does not split over {ranks} ranks of GPUS={gpus}"),
        ));
    }
    let mine = [(rank * bs / ranks, (rank + 1) * bs / ranks)];
    let mut jit_step = Jit::new(|train: &[Tensor]| {
        let samples = train.get(2).cloned().unwrap_or_else(|| Tensor::randint(&[bs], 0, n_train));
        let samples = if ranks > 1 { samples.shrink(&mine) } else { samples };
        let x = train[0].index(&[Idx::Tensor(samples.clone())]).cast(DType::FLOAT32);
        let y = train[1].index(&[Idx::Tensor(samples)]).cast(DType::INT32);
        let (x, y) =
            (spread(x).expect("BS splits over GPUS (checked)"), spread(y).expect("BS splits over GPUS (checked)"));
        let mut out = train_step(&|x| model.forward(x), opt.as_mut(), &x, &y);
        if ranks > 1 {
            out[0] = out[0].all_reduce_ranks(lazygrad::Ops::Add) / ranks as f64;
        }
        out
    });
    // the test set in equal chunks, each a JIT'd call counting its correct predictions
    let mut test_correct = Jit::new(|test: &[Tensor]| {
        let pred = model.forward(&test[0]).argmax(Some(1), false);
        vec![pred.eq(&test[1]).cast(DType::INT32).sum(None, false)]
    });
    let n_test = data.x_test.shape()[0];
    let eval_bs = (getenv("EVAL_BS", 1000) as usize).clamp(1, n_test);
    let chunks: Vec<[Tensor; 2]> = (0..n_test / eval_bs)
        .map(|c| {
            let rows = [(c * eval_bs, (c + 1) * eval_bs)];
            let x = data.x_test.shrink(&[rows[0], (0, 1), (0, 28), (0, 28)]).cast(DType::FLOAT32);
            let y = data.y_test.shrink(&rows).cast(DType::INT32);
            Ok([spread(x.contiguous())?.realize(), spread(y.contiguous())?.realize()])
        })
        .collect::<lazygrad::Result<_>>()?;
    let mut test_acc = || -> lazygrad::Result<f32> {
        let mut correct = 0;
        for chunk in &chunks {
            correct += test_correct.call(chunk)?[0].item::<i32>();
        }
        Ok(100.0 * correct as f32 / (chunks.len() * eval_bs) as f32)
    };
    let eval_every = getenv("EVAL_EVERY", 10).max(1) as usize;

    let (mut acc, start) = (f32::NAN, Instant::now());
    let (mut step_times, mut kernels_per_step) = (vec![], 0);
    for i in 0..steps {
        let t0 = Instant::now();
        let kernels_before = GlobalCounters::kernel_count();
        let mut inputs = vec![data.x_train.clone(), data.y_train.clone()];
        inputs.extend(given_batches.as_ref().map(|rows| rows[i].clone()));
        let out = jit_step.call(&inputs)?;
        let loss = out[0].item::<f32>();
        step_times.push(t0.elapsed().as_secs_f64());
        kernels_per_step = GlobalCounters::kernel_count() - kernels_before;
        if (i + 1) % eval_every == 0 || i + 1 == steps {
            acc = test_acc()?;
        }
        if rank == 0 {
            eprint!(
                "\rstep {:4}/{steps} loss {loss:6.3} test_accuracy {acc:5.2}% ({:.2} s/step)",
                i + 1,
                step_times[i]
            );
        }
        let _ = std::io::stderr().flush();
    }
    // the first calls schedule, compile and capture; after them the JIT replays
    let steady = if step_times.len() > 3 { &step_times[3..] } else { &step_times[..] };
    if rank > 0 {
        return Ok(());
    }
    eprintln!();
    // the same `key value` lines as tools/mnist_torch.py, compared by tools/mnist_compare.sh
    println!("steps {steps}");
    println!("wall_s {:.3}", start.elapsed().as_secs_f64());
    println!("train_s {:.3}", step_times.iter().sum::<f64>());
    println!("step_s {:.4}", steady.iter().sum::<f64>() / steady.len() as f64);
    println!("test_accuracy_pct {acc:.2}");
    println!("kernels_per_step {kernels_per_step}");
    println!("peak_rss_mb {:.1}", peak_rss_bytes().unwrap_or(0) as f64 / (1 << 20) as f64);
    // the most memory buffers held at once (GlobalCounters; not the allocator's free list)
    println!("peak_mem_mb {:.1}", GlobalCounters::peak_mem() as f64 / (1 << 20) as f64);
    let target = getenv_str("TARGET_EVAL_ACC_PCT").and_then(|v| v.parse::<f32>().ok()).unwrap_or(0.0);
    if acc < target {
        eprintln!("test accuracy {acc:.2}% is below the target {target}%");
        std::process::exit(1);
    }
    lazygrad::viz::serve_if_enabled();
    Ok(())
}
