//! tinygrad's beautiful_mnist model and a train step for any model, shared by the `beautiful_mnist` and
//! `bench` examples.

use lazygrad::nn::layers::{BatchNorm, Conv2d, Linear};
use lazygrad::nn::optim::Optimizer;
use lazygrad::tensor::{ConvOpts, PoolOpts, Reduction};
use lazygrad::{module, Context, Tensor};

/// Two conv blocks (conv-relu-conv-relu-batchnorm-maxpool) and a linear classifier over
/// `[N, 1, 28, 28]` images.
pub struct Model {
    c1: Conv2d,
    c2: Conv2d,
    bn1: BatchNorm,
    c3: Conv2d,
    c4: Conv2d,
    bn2: BatchNorm,
    fc: Linear,
}
module!(Model { c1, c2, bn1, c3, c4, bn2, fc });

impl Model {
    pub fn new() -> Model {
        let conv = |cin, cout, k| Conv2d::new(cin, cout, k, ConvOpts::default(), true);
        Model {
            c1: conv(1, 32, 5),
            c2: conv(32, 32, 5),
            bn1: BatchNorm::with_size(32),
            c3: conv(32, 64, 3),
            c4: conv(64, 64, 3),
            bn2: BatchNorm::with_size(64),
            fc: Linear::new(576, 10, true),
        }
    }
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let pool = PoolOpts::default();
        let x = self.c2.forward(&self.c1.forward(x).relu()).relu();
        let x = self.bn1.forward(&x).max_pool2d(&pool);
        let x = self.c4.forward(&self.c3.forward(&x).relu()).relu();
        let x = self.bn2.forward(&x).max_pool2d(&pool);
        self.fc.forward(&x.flatten(1, -1))
    }
}

/// One training step of `forward` on inputs `x` and int labels `y`, lazily: the cross-entropy
/// loss followed by the tensors the optimizer updates. Realize them all together (or call it
/// inside a `Jit`).
pub fn train_step(forward: &dyn Fn(&Tensor) -> Tensor, opt: &mut dyn Optimizer, x: &Tensor, y: &Tensor) -> Vec<Tensor> {
    let _training = Context::new(&[("TRAINING", 1)]);
    opt.zero_grad();
    let loss = forward(x).sparse_categorical_crossentropy(y, -1, 0.0, Reduction::Mean);
    loss.backward();
    let mut out = vec![loss];
    out.extend(opt.schedule_step());
    out
}
