//! The JIT: capture on the second call, replay from the third, bit-identical to running eagerly.

use std::panic::{catch_unwind, AssertUnwindSafe};

use lazygrad::{Jit, Tensor};

mod common;

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

use common::on_each_device;

#[test]
fn an_output_fed_back_as_the_next_input_replays_as_eager() {
    // x = jit(x): from the third call the input is the buffer the replay writes its output to
    // (the replay read it while writing it: [1, 4, 11, 26] where eager gives [1, 4, 10, 20])
    on_each_device(|d| {
        let step = |inp: &[Tensor]| vec![inp[0].cumsum(0)];
        let mut jit = Jit::new(step);
        let mut x = Tensor::new([1.0f32, 2.0, 3.0, 4.0]).realize();
        let mut eager = x.clone();
        for i in 0..5 {
            x = jit.call(&[x]).unwrap().remove(0);
            eager = step(&[eager])[0].realize();
            assert_eq!(x.to_vec::<f32>(), eager.to_vec::<f32>(), "{d}: call {i}");
        }
        assert_eq!(x.to_vec::<f32>(), [1.0, 7.0, 28.0, 84.0], "{d}");
    });
}

#[test]
fn an_input_given_twice_replays_as_eager() {
    // captured with two buffers, called with one tensor for both: the in-place update reads the
    // other input flipped, which eager computes aside first where both are one buffer (a replay
    // over one buffer read elements it had already overwritten: [5, 5, 8, 10])
    on_each_device(|d| {
        let step = |inp: &[Tensor]| vec![inp[0].assign(&(&inp[0] + inp[1].flip(&[0])))];
        let mut jit = Jit::new(step);
        for i in 0..2 {
            jit.call(&[Tensor::new([i as f32; 4]).realize(), Tensor::new([0.5f32; 4]).realize()]).unwrap();
        }
        let x = Tensor::new([1.0f32, 2.0, 3.0, 4.0]).realize();
        jit.call(&[x.clone(), x.clone()]).unwrap();
        assert_eq!(x.to_vec::<f32>(), [5.0; 4], "{d}");
        let y = Tensor::new([1.0f32, 2.0, 3.0, 4.0]).realize();
        Tensor::realize_all(&step(&[y.clone(), y.clone()])).unwrap();
        assert_eq!(y.to_vec::<f32>(), [5.0; 4], "{d}: eager");
    });
}

#[test]
fn a_panic_while_capturing_lets_the_next_call_capture() {
    on_each_device(|d| {
        let calls = std::cell::Cell::new(0);
        let step = |inp: &[Tensor]| {
            calls.set(calls.get() + 1);
            let out = (&inp[0] * 3.0).realize();
            assert!(calls.get() != 2, "the traced function fails on its second call");
            vec![out + 1.0]
        };
        let mut jit = Jit::new(step);
        let x = Tensor::new([1.0f32, 2.0]).realize();
        jit.call(std::slice::from_ref(&x)).unwrap();
        let failed = catch_unwind(AssertUnwindSafe(|| jit.call(std::slice::from_ref(&x))));
        assert!(failed.is_err(), "{d}: the capture call panics");
        assert!(!lazygrad::engine::capturing(), "{d}: the failed capture left recording on");
        for i in 0..3 {
            let out = jit.call(&[Tensor::new([i as f32, 1.0]).realize()]).unwrap();
            assert_eq!(out[0].to_vec::<f32>(), vec![i as f32 * 3.0 + 1.0, 4.0], "{d}: call {i} after the panic");
        }
    });
}

#[test]
fn an_assignment_through_a_view_is_returned_over_the_calls_input() {
    // the function writes into a slice of its input and returns the slice: the capture refused
    // it ("input of shape [2] is not a realized buffer"); a replay returns the slice of the
    // buffer this call was given
    on_each_device(|d| {
        let step = |inp: &[Tensor]| vec![inp[0].shrink(&[(1, 3)]).assign(&(&inp[1] * 2.0))];
        let mut jit = Jit::new(step);
        for i in 0..4 {
            let x = Tensor::new([0.0f32, 1.0, 2.0, 3.0]).realize();
            let y = Tensor::new([i as f32, 10.0]).realize();
            let out = jit.call(&[x.clone(), y]).unwrap().remove(0);
            assert_eq!(out.to_vec::<f32>(), [2.0 * i as f32, 20.0], "{d}: call {i}");
            assert_eq!(x.to_vec::<f32>(), [0.0, 2.0 * i as f32, 20.0, 3.0], "{d}: call {i}");
        }
    });
}
