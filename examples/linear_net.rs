//! The seed's LinearNet: two weight matrices trained with Adam in training mode.

use lazygrad::nn::optim::{adam, Optimizer};
use lazygrad::tensor::Reduction;
use lazygrad::{Context, Tensor};

struct LinearNet {
    l1: Tensor,
    l2: Tensor,
}

impl LinearNet {
    fn new() -> LinearNet {
        LinearNet { l1: Tensor::kaiming_uniform(&[784, 128], 0.0), l2: Tensor::kaiming_uniform(&[128, 10], 0.0) }
    }
    fn forward(&self, x: &Tensor) -> Tensor {
        x.flatten(1, -1).dot(&self.l1).relu().dot(&self.l2)
    }
}

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    Tensor::manual_seed(0);
    let model = LinearNet::new();
    let mut opt = adam(&[model.l1.clone(), model.l2.clone()], 0.001);
    // random stand-in data, as in the seed (a real data loader is `nn::datasets::mnist`)
    let (x, y) = (Tensor::rand(&[4, 1, 28, 28]), Tensor::new([2i32, 4, 3, 7]));
    let _training = Context::new(&[("TRAINING", 1)]);
    for i in 0..10 {
        opt.zero_grad();
        let loss = model.forward(&x).sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
        loss.backward();
        // realize the loss with the step, so it is the loss the gradients came from
        let mut step = vec![loss.clone()];
        step.extend(opt.schedule_step());
        Tensor::realize_all(&step)?;
        println!("{i} {:.4}", loss.try_to_vec::<f32>()?[0]);
    }
    lazygrad::viz::serve_if_enabled();
    Ok(())
}
