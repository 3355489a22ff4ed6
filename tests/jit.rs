//! The JIT: capture on the second call, replay from the third, bit-identical to running eagerly.

use lazygrad::{Jit, Tensor};

fn step(inputs: &[Tensor]) -> Vec<Tensor> {
    let (x, w) = (&inputs[0], &inputs[1]);
    let h = x.matmul(w).relu();
    vec![(&h - h.max(1, true)).exp().sum(1, false), h.mean(None, false)]
}

#[test]
fn replay_matches_eager_bit_for_bit() {
    let w = Tensor::new([[0.5f32, -1.0, 2.0], [1.5, 0.25, -0.75]]).realize();
    let mut jit = Jit::new(step);
    for i in 0..5 {
        let x = Tensor::new([[i as f32, 1.0], [-2.0, i as f32 * 0.5], [0.1, 0.2]]);
        let got = jit.call(&[x.clone(), w.clone()]).unwrap();
        // eager runs the same schedule when it realizes the outputs together, as the JIT does
        let want = step(&[x, w.clone()]);
        Tensor::realize_all(&want).unwrap();
        for (g, e) in got.iter().zip(&want) {
            let bits = |t: &Tensor| t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(g), bits(e), "call {i}");
        }
    }
}

#[test]
fn replay_updates_state_in_place() {
    let acc = Tensor::new([0.0f32, 0.0]).realize();
    let a = acc.clone();
    let mut jit = Jit::new(move |inp: &[Tensor]| vec![a.assign(&(&a + &inp[0]))]);
    for i in 1..=4 {
        jit.call(&[Tensor::new([i as f32, 1.0])]).unwrap();
    }
    assert_eq!(acc.to_vec::<f32>(), vec![10.0, 4.0]);
}

#[test]
fn changed_inputs_and_empty_functions_are_errors() {
    let mut jit = Jit::new(|inp: &[Tensor]| vec![&inp[0] * 2.0]);
    jit.call(&[Tensor::new([1.0f32, 2.0])]).unwrap();
    let err = jit.call(&[Tensor::new([1.0f32, 2.0, 3.0])]).unwrap_err();
    assert!(err.to_string().contains("inputs changed"), "{err}");
    let mut empty = Jit::new(|inp: &[Tensor]| vec![inp[0].clone()]);
    empty.call(&[Tensor::new([1.0f32])]).unwrap();
    // a failed capture leaves the JIT returning errors (it tries again), never panicking
    for _ in 0..3 {
        let err = empty.call(&[Tensor::new([1.0f32])]).unwrap_err();
        assert!(err.to_string().contains("nothing to capture"), "{err}");
    }
}

#[test]
fn random_draws_inside_a_jit_are_new_on_every_replay() {
    // the counter lives on the device and the captured kernels advance it: five calls draw
    // what five eager draws would, in the same order
    let draw = |inp: &[Tensor]| vec![&inp[0] + Tensor::rand(&[6])];
    let x = Tensor::new([10.0f32; 6]).realize();
    Tensor::manual_seed(11);
    let want: Vec<Vec<f32>> = (0..5).map(|_| draw(std::slice::from_ref(&x))[0].to_vec()).collect();
    Tensor::manual_seed(11);
    let mut jit = Jit::new(draw);
    let got: Vec<Vec<f32>> = (0..5).map(|_| jit.call(std::slice::from_ref(&x)).unwrap()[0].to_vec()).collect();
    assert_eq!(got, want);
    assert!(want.windows(2).all(|w| w[0] != w[1]), "each call draws new numbers");
}
