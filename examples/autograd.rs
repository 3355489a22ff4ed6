//! The seed's autograd example: gradients of `y @ x` summed, with respect to both inputs.

use lazygrad::Tensor;

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    let x = Tensor::eye(3).try_realize()?;
    let y = Tensor::new([[2.0f32, 0.0, -2.0]]);
    let z = y.matmul(&x).sum(None, false);
    z.backward();
    let (xg, yg) = (x.grad().expect("x has a gradient"), y.grad().expect("y has a gradient"));
    println!("x.grad = {:?}", xg.try_to_vec::<f32>()?.chunks(3).collect::<Vec<_>>());
    println!("y.grad = {:?}", yg.try_to_vec::<f32>()?);
    lazygrad::viz::serve_if_enabled();
    Ok(())
}
