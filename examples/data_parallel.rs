//! Data-parallel training across processes: `mpirun -np 2 target/release/examples/data_parallel`
//! (built with `--features mpi`) trains a small MLP with each rank taking its part of every
//! batch; the optimizer averages the gradients over the ranks, so the losses follow the one-process
//! run's. Settings: `STEPS` (10), `DIE_AT_STEP` (a rank other than 0 exits there with an error, to
//! check that the others then stop instead of waiting for it). Rank 0 prints `step i loss x`.

use lazygrad::helpers::getenv;
use lazygrad::nn::layers::Linear;
use lazygrad::nn::optim::{Optimizer, SGD};
use lazygrad::nn::state::get_parameters;
use lazygrad::runtime::job::world;
use lazygrad::tensor::Reduction;
use lazygrad::{module, Context, Ops, Tensor};

struct Mlp {
    l1: Linear,
    l2: Linear,
}
module!(Mlp { l1, l2 });

const BATCH: usize = 16;

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    let world = world()?;
    let (rank, ranks) = (world.rank(), world.size());
    if !BATCH.is_multiple_of(ranks) {
        return Err(lazygrad::Error::value(
            "data_parallel",
            format!("a batch of {BATCH} does not split over {ranks} ranks"),
        ));
    }
    Tensor::manual_seed(1);
    let model = Mlp { l1: Linear::new(8, 32, true), l2: Linear::new(32, 4, true) };
    let mut opt = SGD::new(&get_parameters(&model), 0.05, 0.9, 0.0, false);
    let _training = Context::new(&[("TRAINING", 1)]);
    let part = BATCH / ranks;
    for step in 0..getenv("STEPS", 10) as usize {
        if rank > 0 && getenv("DIE_AT_STEP", -1) == step as i64 {
            return Err(lazygrad::Error::value("data_parallel", format!("rank {rank} told to die at step {step}")));
        }
        // the whole batch, the same on every rank; this rank's rows of it
        let x: Vec<f32> = (0..BATCH * 8).map(|i| ((step * BATCH * 8 + i) as f32 * 0.61).sin()).collect();
        let y: Vec<i32> = (0..BATCH).map(|i| ((step + i) * 5 % 4) as i32).collect();
        let rows = [(rank * part, (rank + 1) * part)];
        let x = Tensor::from_slice(&x, &[BATCH, 8]).shrink(&[rows[0], (0, 8)]);
        let y = Tensor::from_slice(&y, &[BATCH]).shrink(&rows);
        opt.zero_grad();
        let h = model.l1.forward(&x).relu();
        let loss = model.l2.forward(&h).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        // the whole batch's loss: the mean of the ranks' means
        let mut out = vec![loss.all_reduce_ranks(Ops::Add) / ranks as f64];
        out.extend(opt.schedule_step());
        Tensor::realize_all(&out)?;
        if rank == 0 {
            println!("step {step} loss {:.6}", out[0].item::<f32>());
        }
    }
    Ok(())
}
