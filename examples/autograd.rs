//! The seed's autograd example: gradients of `y @ x` summed, with respect to both inputs.

use lazygrad::Tensor;

fn main() {
    let x = Tensor::eye(3).realize();
    let y = Tensor::new([[2.0f32, 0.0, -2.0]]);
    let z = y.matmul(&x).sum(None, false);
    z.backward();
    let (xg, yg) = (x.grad().expect("x has a gradient"), y.grad().expect("y has a gradient"));
    println!("x.grad = {:?}", xg.to_vec::<f32>().chunks(3).collect::<Vec<_>>());
    println!("y.grad = {:?}", yg.to_vec::<f32>());
    lazygrad::viz::serve_if_enabled();
}
