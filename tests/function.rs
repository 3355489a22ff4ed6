//! `Function` (tinygrad's `@function`): traced once, its calls equal the closure's values and
//! gradients, share one key, and with `own_kernels` run the same kernels.

use std::cell::Cell;

use lazygrad::engine::realize::programs_made;
use lazygrad::tensor::function::Function;
use lazygrad::{Tensor, UOp};

fn rand(shape: &[usize], seed: u64) -> Tensor {
    Tensor::manual_seed(seed);
    Tensor::rand(shape).realize()
}

/// The layer the tests trace: a linear map, a ReLU and a row sum.
fn layer(x: &Tensor, w: &Tensor) -> Tensor {
    x.matmul(w).relu().sum(1, false)
}

fn assert_close(got: &Tensor, want: &Tensor, what: &str) {
    let (g, w) = (got.to_vec::<f32>(), want.to_vec::<f32>());
    assert_eq!(g.len(), w.len(), "{what}");
    for (a, b) in g.iter().zip(&w) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{what}: {a} vs {b}");
    }
}

#[test]
fn calls_equal_the_closure_and_share_one_key() {
    let (x1, x2, w) = (rand(&[4, 8], 1), rand(&[4, 8], 2), rand(&[8, 3], 3));
    let traces = Cell::new(0);
    let f = Function::new("layer", &[&x1, &w], |a| {
        traces.set(traces.get() + 1);
        layer(&a[0], &a[1])
    });
    let (y1, y2) = (f.call(&[&x1, &w]), f.call(&[&x2, &w]));
    assert_eq!(traces.get(), 1, "the closure is traced once");
    let key = |t: &Tensor| -> UOp { t.uop() };
    assert_eq!(key(&y1).arg(), key(&y2).arg(), "both calls name the same function");
    assert_close(&y1, &layer(&x1, &w), "first call");
    assert_close(&y2, &layer(&x2, &w), "second call");
}

#[test]
fn gradients_through_calls_equal_the_closures() {
    let (x1, x2, w) = (rand(&[4, 8], 4), rand(&[4, 8], 5), rand(&[8, 3], 6));
    let f = Function::new("layer", &[&x1, &w], |a| layer(&a[0], &a[1]));
    let through_calls = (f.call(&[&x1, &w]) * 2.0).sum(None, false) + f.call(&[&x2, &w]).square().sum(None, false);
    let direct = (layer(&x1, &w) * 2.0).sum(None, false) + layer(&x2, &w).square().sum(None, false);
    let got = through_calls.gradient(&[&x1, &x2, &w]);
    let want = direct.gradient(&[&x1, &x2, &w]);
    for (name, (g, w)) in ["x1", "x2", "w"].iter().zip(got.iter().zip(&want)) {
        assert_close(g, w, &format!("d loss / d {name}"));
    }
}

#[test]
fn own_kernels_run_apart_and_are_shared_by_every_call() {
    let (x1, x2, w) = (rand(&[16, 32], 7), rand(&[16, 32], 8), rand(&[32, 8], 9));
    let inlined = Function::new("layer", &[&x1, &w], |a| layer(&a[0], &a[1]));
    let apart = Function::new("layer", &[&x1, &w], |a| layer(&a[0], &a[1])).own_kernels();
    let kernels = |t: Tensor| Tensor::schedule(&[t]).len();
    assert_eq!(kernels(inlined.call(&[&x1, &w]) + 1.0), 1, "inlined: fused with the + 1");
    assert_eq!(kernels(apart.call(&[&x1, &w]) + 1.0), 2, "apart: the body's kernel, then the + 1");
    (apart.call(&[&x1, &w]) + 1.0).realize();
    let made = programs_made();
    let y = (apart.call(&[&x2, &w]) + 1.0).realize();
    assert_eq!(programs_made(), made, "a second call compiled its own kernels again");
    assert_close(&y, &(layer(&x2, &w) + 1.0), "own kernels");
}

#[test]
#[should_panic(expected = "function: layer called with inputs")]
fn a_call_with_other_shapes_names_the_function() {
    let (x, w) = (rand(&[4, 8], 1), rand(&[8, 3], 2));
    let f = Function::new("layer", &[&x, &w], |a| layer(&a[0], &a[1]));
    f.call(&[&w, &x]);
}
