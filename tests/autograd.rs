//! Autograd: the seed's example, accumulation, opting out, and in-place assignment.

use lazygrad::Tensor;

#[test]
fn seed_example_gradients() {
    let x = Tensor::eye(3).realize();
    let y = Tensor::new([[2.0f32, 0.0, -2.0]]);
    y.matmul(&x).sum(None, false).backward();
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), vec![2.0, 2.0, 2.0, 0.0, 0.0, 0.0, -2.0, -2.0, -2.0]);
    assert_eq!(y.grad().unwrap().to_vec::<f32>(), vec![1.0, 1.0, 1.0]);
}

#[test]
fn gradients_accumulate_and_respect_opt_out() {
    let a = Tensor::new([1.0f32, 2.0, 3.0]);
    let b = Tensor::new([4.0f32, 5.0, 6.0]).requires_grad(false);
    (&a * &b).sum(None, false).backward();
    (&a * &a).sum(None, false).backward();
    assert_eq!(a.grad().unwrap().to_vec::<f32>(), vec![6.0, 9.0, 12.0]);
    assert!(b.grad().is_none());
    let c = Tensor::new([1.0f32, -1.0]);
    let g = (c.detach() * &c).sum(None, false).gradient(&[&c]);
    assert_eq!(g[0].to_vec::<f32>(), vec![1.0, -1.0]);
    assert!(c.grad().is_none(), "gradient() leaves .grad alone");
}

/// As tinygrad, `backward` fills `.grad` of every live float tensor the loss depends on,
/// intermediates and unrealized tensors included (unless opted out), from a seed for a loss that
/// is not a scalar; `clone_to` copies the gradient with the values.
#[test]
fn backward_fills_every_tensor_from_a_seed() {
    let x = Tensor::new([1.0f32, 2.0]);
    let y = &x * 3.0;
    let skipped = (&y + 0.0).requires_grad(false);
    (&skipped * &y).sum(None, false).backward();
    assert_eq!(y.grad().unwrap().to_vec::<f32>(), [6.0, 12.0], "an intermediate");
    assert_eq!(x.grad().unwrap().to_vec::<f32>(), [18.0, 36.0]);
    assert!(skipped.grad().is_none(), "opted out");
    let unrealized = Tensor::ones(&[2]) * 2.0;
    (&unrealized * &unrealized).sum(None, false).backward();
    assert_eq!(unrealized.grad().unwrap().to_vec::<f32>(), [4.0, 4.0]);
    let w = Tensor::new([1.0f32, 2.0]);
    let v = &w * 2.0;
    v.backward_with(Some(&Tensor::new([1.0f32, 10.0]))).unwrap();
    assert_eq!(w.grad().unwrap().to_vec::<f32>(), [2.0, 20.0]);
    let missing = (&w * 2.0).backward_with(None).map(|_| ()).unwrap_err().to_string();
    assert!(missing.contains("seed") && missing.contains("[2]"), "{missing}");
    let copy = w.clone_to(None);
    assert_eq!(copy.grad().unwrap().to_vec::<f32>(), [2.0, 20.0]);
    copy.assign(&Tensor::new([7.0f32, 8.0])).realize();
    assert_eq!((w.to_vec::<f32>(), copy.to_vec::<f32>()), (vec![1.0, 2.0], vec![7.0, 8.0]));
    // two clones of one constant are two tensors, each with its own gradient
    let (a, b) = (Tensor::new(3.5f32).clone_to(None), Tensor::new(3.5f32).clone_to(None));
    (&a + &b).backward();
    assert_eq!((a.grad().unwrap().item::<f32>(), b.grad().unwrap().item::<f32>()), (1.0, 1.0));
}

#[test]
fn max_relu_and_broadcast_gradients() {
    let x = Tensor::new([[1.0f32, 3.0, 3.0], [-1.0, 0.5, -2.0]]);
    let loss = (x.max(1, true) + x.relu().sum(0, true).sum(1, true)).sum(None, false);
    let g = loss.gradient(&[&x])[0].to_vec::<f32>();
    // max ties split evenly; the relu sum is broadcast over both rows, so it counts twice
    assert_eq!(g, vec![2.0, 2.5, 2.5, 0.0, 3.0, 0.0]);
}

#[test]
fn assign_writes_in_place_after_old_readers() {
    let w = Tensor::new([1.0f32, 2.0, 3.0]).realize();
    let old_plus_one = &w + 1.0;
    w.assign(&(&w * 10.0));
    Tensor::realize_all(&[w.clone(), old_plus_one.clone()]).unwrap();
    assert_eq!(old_plus_one.to_vec::<f32>(), vec![2.0, 3.0, 4.0], "reader scheduled before the write");
    assert_eq!(w.to_vec::<f32>(), vec![10.0, 20.0, 30.0]);
    w.assign(&w.flip(&[0])).realize();
    assert_eq!(w.to_vec::<f32>(), vec![30.0, 20.0, 10.0], "a value reading other elements is computed aside");
}

#[test]
fn compound_assignment_updates_in_place() {
    let mut w = Tensor::new([1.0f32, 2.0]).realize();
    let alias = w.clone();
    w += 1.0;
    w *= &Tensor::new([2.0f32, 3.0]);
    assert_eq!(alias.to_vec::<f32>(), vec![4.0, 9.0], "a clone shares the storage");
    assert_eq!(
        Tensor::new([[1i32, 2], [3, 4]]).tolist::<i32>(),
        lazygrad::tensor::Nested::List(vec![
            lazygrad::tensor::Nested::List(vec![
                lazygrad::tensor::Nested::Scalar(1),
                lazygrad::tensor::Nested::Scalar(2)
            ]),
            lazygrad::tensor::Nested::List(vec![
                lazygrad::tensor::Nested::Scalar(3),
                lazygrad::tensor::Nested::Scalar(4)
            ]),
        ])
    );
}

/// A clone is stored in a buffer of its own (tinygrad's `a.uop.base.buffer is not
/// b.uop.base.buffer`); a reshape of a stored tensor is that buffer, a computation none.
#[test]
fn clones_have_buffers_of_their_own() {
    let a = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]).realize();
    let b = a.clone_to(None).realize();
    let (ab, bb) = (a.buffer().expect("a is stored"), b.buffer().expect("the clone is stored"));
    assert_ne!(ab.id(), bb.id());
    assert_eq!(a.reshape(&[4]).buffer().map(|x| x.id()), Some(ab.id()));
    assert!((&a + 1.0).buffer().is_none(), "an unrealized sum has no buffer");
    let part = a.shrink(&[(1, 2), (0, 2)]).clone_to(None).realize();
    assert_ne!(part.buffer().unwrap().id(), ab.id());
    assert_eq!(part.to_vec::<f32>(), [3.0, 4.0]);
}

#[test]
fn an_embedding_gradient_adds_each_token_into_its_row_alone() {
    // PyTorch's index_add: rows no token picks get 0, a picked row the sum of its tokens'
    // gradients, and a NaN in one token's gradient reaches its row and no other (the one-hot
    // selection is a select, not a multiply by 0 or 1, though it sums like a product: float32)
    let (vocab, dim) = (5, 2);
    let table = lazygrad::nn::layers::Embedding { weight: Tensor::zeros(&[vocab, dim]).realize() };
    let ids = Tensor::new([[1i32, 3, 1, 4]]).realize();
    let upstream = Tensor::new([[[0.5f32, 1.0], [f32::NAN, 2.0], [0.25, -3.0], [7.0, 8.0]]]);
    let g = (table.forward(&ids) * &upstream).sum(None, false).gradient(&[&table.weight]);
    let got = g[0].to_vec::<f32>();
    let want = [0.0, 0.0, 0.75, -2.0, 0.0, 0.0, f32::NAN, 2.0, 7.0, 8.0];
    assert!(got.iter().zip(want).all(|(g, w)| g == &w || (g.is_nan() && w.is_nan())), "{got:?}");
}
