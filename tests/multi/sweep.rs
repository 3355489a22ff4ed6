//! A sweep: each op of a table on tensors split along each of their axes (and replicated), over 2
//! and 4 devices, equals the op on one device, or (padding, flipping, shrinking or reshaping
//! across the split axis) is the error that says so, naming the op.

use lazygrad::tensor::ConvOpts;
use lazygrad::{DType, Tensor};

type Op = (&'static str, fn(&Tensor) -> Tensor);

const OPS: &[Op] = &[
    ("exp", |t| t.exp()),
    ("sigmoid", |t| t.sigmoid()),
    ("square-sqrt", |t| t.square().sqrt()),
    ("where", |t| t.gt(0.5).where_(t, &(t * 2.0))),
    ("add-row", |t| t + &t.sum(0, true)),
    ("add-col", |t| t + &t.max(1, true)),
    ("sum0", |t| t.sum(0, false)),
    ("sum1", |t| t.sum(1, false)),
    ("sum-all", |t| t.sum(None, false)),
    ("max0", |t| t.max(0, false)),
    ("min1", |t| t.min(1, true)),
    ("mean", |t| t.mean(None, false)),
    ("prod0", |t| (t * 0.1 + 1.0).prod(0, false)),
    ("std1", |t| t.std(1, false, 1)),
    ("softmax0", |t| t.softmax(0)),
    ("softmax1", |t| t.softmax(1)),
    ("log_softmax1", |t| t.log_softmax(1)),
    ("argmax0", |t| t.argmax(Some(0), false).cast(DType::FLOAT32)),
    ("argmax1", |t| t.argmax(Some(1), false).cast(DType::FLOAT32)),
    ("transpose", |t| t.T()),
    ("reshape-rows", |t| t.reshape(&[4, -1, 12])),
    ("flatten", |t| t.flatten(0, -1)),
    ("expand", |t| t.reshape(&[8, 1, 12]).expand(&[8, 3, 12])),
    ("pad-cols", |t| t.pad(&[(0, 0), (1, 2)])),
    ("shrink-cols", |t| t.shrink(&[(0, 8), (2, 9)])),
    ("flip-cols", |t| t.flip(&[1])),
    ("matmul-self", |t| t.matmul(&t.T())),
    ("matmul-const", |t| {
        t.matmul(&Tensor::from_slice(&(0..36).map(|i| i as f32 * 0.1).collect::<Vec<_>>(), &[12, 3]).to(t.device()))
    }),
    ("cumsum1", |t| t.cumsum(1)),
    ("cat-cols", |t| Tensor::cat(&[t, &(t * 2.0)], 1)),
    ("int-ops", |t| (t * 10.0).cast(DType::INT32).idiv(3).cast(DType::FLOAT32)),
];

fn input() -> Tensor {
    Tensor::from_slice(&(0..96).map(|i| ((i * 29 % 31) as f32 - 15.0) / 7.0).collect::<Vec<_>>(), &[8, 12])
}

#[test]
fn each_op_on_split_or_replicated_tensors_equals_one_device() {
    let x = input();
    let (mut failures, mut refused) = (vec![], 0);
    for (name, op) in OPS {
        let want = op(&x).to_vec::<f32>();
        for devices in [&["CPU", "CPU:1"][..], &["CPU", "CPU:1", "CPU:2", "CPU:3"]] {
            for axis in [Some(0), Some(1), None] {
                let got = op(&x.shard(devices, axis)).try_to_vec::<f32>();
                let close = |g: &Vec<f32>| {
                    g.len() == want.len() && g.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-4 * w.abs().max(1.0))
                };
                match got {
                    Ok(g) if close(&g) => {}
                    Ok(g) => failures.push(format!("{name} over {} split {axis:?}: {g:?} vs {want:?}", devices.len())),
                    Err(e) if axis == Some(1) && e.to_string().contains("(the tensor is split along axis 1)") => {
                        refused += 1
                    }
                    Err(e) => failures.push(format!("{name} over {} split {axis:?}: {e}", devices.len())),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    // pad, shrink, flip, flatten, cumsum and cat along the split columns, twice each
    assert_eq!(refused, 12, "ops refused along the split axis");
}

#[test]
fn a_conv_net_over_a_split_batch_equals_one_device() {
    let x =
        Tensor::from_slice(&(0..4 * 2 * 36).map(|i| ((i * 13 % 17) as f32) / 9.0).collect::<Vec<_>>(), &[4, 2, 6, 6]);
    let w = Tensor::from_slice(
        &(0..3 * 2 * 9).map(|i| ((i * 7 % 11) as f32 - 5.0) / 5.0).collect::<Vec<_>>(),
        &[3, 2, 3, 3],
    );
    let net = |x: &Tensor, w: &Tensor| x.conv2d(w, None, &ConvOpts::default()).relu().max_pool2d(&Default::default());
    let want = net(&x, &w).to_vec::<f32>();
    let devices = ["CPU", "CPU:1"];
    let got = net(&x.shard(&devices, Some(0)), &w.shard(&devices, None)).to_vec::<f32>();
    assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-4 * w.abs().max(1.0)), "{got:?} vs {want:?}");
}
