//! nn layers fed inputs of the wrong shape or dtype, optimizers without gradients, and the JIT
//! called with inputs that changed.

use lazygrad::nn::layers::{
    BatchNorm, Conv2d, ConvTranspose2d, Embedding, GroupNorm, LSTMCell, LayerNorm, Linear, RMSNorm,
};
use lazygrad::nn::optim::{adam, Optimizer, SGD};
use lazygrad::tensor::ConvOpts;
use lazygrad::{Context, DType, Error, Jit, Tensor};

use crate::{err_with, interp, panics_with};

#[test]
fn layers_check_their_inputs() {
    let _d = interp();
    let x = Tensor::zeros(&[2, 3]);
    panics_with(&["Linear", "[2, 3]", "4 features"], || Linear::new(4, 2, true).forward(&x));
    panics_with(&["Conv2d", "4 input", "0 groups"], || Conv2d::new(4, 4, 3, ConvOpts::default().groups(0), true));
    panics_with(&["Conv2d", "4 input", "6 output", "3 groups"], || {
        Conv2d::new(4, 6, 3, ConvOpts::default().groups(3), true)
    });
    panics_with(&["ConvTranspose2d", "2 groups"], || {
        ConvTranspose2d::new(4, 3, 3, ConvOpts::default().groups(2), true)
    });
    panics_with(&["conv2d", "[1, 2, 8, 8]", "[4, 3, 3, 3]"], || {
        Conv2d::new(3, 4, 3, ConvOpts::default(), true).forward(&Tensor::zeros(&[1, 2, 8, 8]))
    });
    panics_with(&["conv_transpose2d", "[1, 2, 8, 8]", "channels are not the weight's"], || {
        ConvTranspose2d::new(3, 4, 3, ConvOpts::default(), true).forward(&Tensor::zeros(&[1, 2, 8, 8]))
    });
    panics_with(&["BatchNorm", "[2, 3, 5]", "[N, 4, ...]"], || {
        BatchNorm::with_size(4).forward(&Tensor::zeros(&[2, 3, 5]))
    });
    panics_with(&["BatchNorm", "[4]"], || BatchNorm::with_size(4).forward(&Tensor::zeros(&[4])));
    panics_with(&["LayerNorm", "[2, 3]", "[4]"], || LayerNorm::new(&[4], 1e-5, true).forward(&x));
    panics_with(&["LayerNorm", "[2, 3]", "[2, 2]"], || LayerNorm::new(&[2, 2], 1e-5, true).forward(&x));
    panics_with(&["LayerNorm", "[3]", "2 axes"], || LayerNorm::new(&[2, 3], 1e-5, false).forward(&Tensor::zeros(&[3])));
    panics_with(&["RMSNorm", "[2, 3]", "4 features"], || RMSNorm::new(4, 1e-5, true).forward(&x));
    panics_with(&["RMSNorm", "[]"], || RMSNorm::new(4, 1e-5, false).forward(&Tensor::new(1.0f32)));
    panics_with(&["GroupNorm", "6 channels", "4 groups"], || GroupNorm::new(4, 6, 1e-5, true));
    panics_with(&["GroupNorm", "0 groups"], || GroupNorm::new(0, 6, 1e-5, true));
    // 6 channels reshaped into 4 groups used to go through when the whole size divided
    panics_with(&["GroupNorm", "[2, 6, 4]", "4 groups"], || {
        GroupNorm::new(4, 4, 1e-5, false).forward(&Tensor::zeros(&[2, 6, 4]))
    });
    panics_with(&["GroupNorm", "[2, 8, 4]", "C 4"], || {
        GroupNorm::new(2, 4, 1e-5, true).forward(&Tensor::zeros(&[2, 8, 4]))
    });
    let embedding = Embedding::new(10, 4);
    panics_with(&["Embedding", "10 rows", "integer tensor", "[2, 3]"], || embedding.forward(&x));
    // as tinygrad: nothing is read on the host, and an index outside the table is a row of zeros
    let outside = embedding.forward(&Tensor::new([1i32, 12]));
    assert_eq!(outside.shrink(&[(1, 2), (0, 4)]).to_vec::<f32>(), [0.0; 4]);
    let cell = LSTMCell::new(4, 3, true);
    panics_with(&["LSTMCell", "[2, 3]", "[batch, 4]"], || cell.forward(&x, None));
    let (x, h) = (Tensor::zeros(&[2, 4]), Tensor::zeros(&[2, 3]));
    panics_with(&["LSTMCell", "[2, 5]", "[2, 3]"], || cell.forward(&x, Some((&Tensor::zeros(&[2, 5]), &h))));
}

/// Each layer's `try_forward` returns the error its `forward` panics with, as the variant that
/// names the layer (or the op that refused: a convolution's), so a caller can recover.
#[test]
fn layers_report_bad_inputs_through_try_forward() {
    let _d = interp();
    let x = Tensor::zeros(&[2, 3]);
    let shape_error = |e: Error| match e {
        Error::Shape { op, .. } => op,
        other => panic!("not a shape error: {other:?}"),
    };
    assert_eq!(shape_error(Linear::new(4, 2, true).try_forward(&x).unwrap_err()), "Linear");
    let conv = Conv2d::new(3, 4, 3, ConvOpts::default(), true);
    assert_eq!(shape_error(conv.try_forward(&Tensor::zeros(&[1, 2, 8, 8])).unwrap_err()), "conv2d");
    let transposed = ConvTranspose2d::new(3, 4, 3, ConvOpts::default(), true);
    assert_eq!(shape_error(transposed.try_forward(&Tensor::zeros(&[1, 2, 8, 8])).unwrap_err()), "conv_transpose2d");
    assert_eq!(shape_error(BatchNorm::with_size(4).try_forward(&Tensor::zeros(&[4])).unwrap_err()), "BatchNorm");
    let norm = LayerNorm::new(&[4], 1e-5, true);
    assert_eq!(shape_error(norm.try_forward(&x).unwrap_err()), "LayerNorm");
    assert_eq!(shape_error(norm.try_forward_2d(&x).unwrap_err()), "LayerNorm2d");
    assert_eq!(shape_error(norm.try_forward_2d(&Tensor::zeros(&[1, 3, 2, 2])).unwrap_err()), "LayerNorm2d");
    assert_eq!(shape_error(RMSNorm::new(4, 1e-5, true).try_forward(&x).unwrap_err()), "RMSNorm");
    let group = GroupNorm::new(2, 4, 1e-5, true);
    assert_eq!(shape_error(group.try_forward(&Tensor::zeros(&[2, 8, 4])).unwrap_err()), "GroupNorm");
    let cell = LSTMCell::new(4, 3, true);
    assert_eq!(shape_error(cell.try_forward(&x, None).unwrap_err()), "LSTMCell");
    let e = Embedding::new(10, 4).try_forward(&x).unwrap_err();
    assert!(matches!(e, Error::DTypes { op: "Embedding", .. }), "{e:?}");
    // and what they can take goes through
    let y = Linear::new(3, 2, true).try_forward(&x).unwrap();
    assert_eq!(y.shape(), [2, 2]);
    let (h, c) = cell.try_forward(&Tensor::zeros(&[2, 4]), None).unwrap();
    assert_eq!((h.shape(), c.shape()), (vec![2, 3], vec![2, 3]));
}

#[test]
fn optimizers_need_gradients_and_training_mode() {
    let _d = interp();
    let w = Tensor::ones(&[2, 2]).contiguous().realize();
    let mut sgd = SGD::new(std::slice::from_ref(&w), 0.1, 0.0, 0.0, false);
    panics_with(&["optimizer step outside training", "TRAINING"], || sgd.step());
    let _training = Context::new(&[("TRAINING", 1)]);
    panics_with(&["optimizer", "[2, 2]", "no gradient"], || sgd.step());
    let mut opt = adam(&[w], 0.1);
    panics_with(&["optimizer", "[2, 2]", "no gradient"], || opt.step());
}

#[test]
fn the_jit_refuses_inputs_that_changed() {
    let _d = interp();
    let mut jit = Jit::new(|x: &[Tensor]| vec![(&x[0] * 2.0).sum(1, false)]);
    let input = |shape: &[usize]| Tensor::ones(shape).contiguous().realize();
    jit.call(&[input(&[2, 2])]).unwrap();
    let e = err_with(&["JIT", "inputs changed", "[2, 2]", "[3, 2]"], jit.call(&[input(&[3, 2])]));
    assert!(matches!(e, Error::Value { op: "JIT", .. }), "{e:?}");
    err_with(&["JIT", "inputs changed", "int"], jit.call(&[input(&[2, 2]).cast(DType::INT32)]));
    err_with(&["JIT", "inputs changed"], jit.call(&[input(&[2, 2]), input(&[2, 2])]));
    err_with(&["JIT", "inputs changed"], jit.call(&[]));
    jit.call(&[input(&[2, 2])]).unwrap();
    let replayed = jit.call(&[input(&[2, 2])]).unwrap();
    assert_eq!(replayed[0].to_vec::<f32>(), [4.0, 4.0], "the refused calls left the capture intact");
    err_with(&["JIT", "inputs changed", "[1, 4]"], jit.call(&[input(&[1, 4])]));

    let mut idle = Jit::new(|x: &[Tensor]| vec![x[0].clone()]);
    idle.call(&[input(&[2])]).unwrap();
    err_with(&["JIT", "no kernels"], idle.call(&[input(&[2])]));
}
