//! The laziness demo: a matmul written as broadcast-multiply + sum is scheduled as ONE kernel.
//!
//! `DEBUG=3 cargo run --release --example lazy_matmul` shows the schedule; `DEBUG=4` the C source;
//! `VIZ=1` records every rewrite and serves the explorer at the end (`docs/viz.md`).

use std::time::Instant;

use lazygrad::{GlobalCounters, Tensor};

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    let n: usize = std::env::var("N").ok().and_then(|v| v.parse().ok()).unwrap_or(1024);
    Tensor::manual_seed(0);
    let a = Tensor::rand(&[n, n]);
    let b = Tensor::rand(&[n, n]);
    let (av, bv) = (a.try_to_vec::<f32>()?, b.try_to_vec::<f32>()?);

    GlobalCounters::reset();
    let start = Instant::now();
    let c = (a.reshape(&[n, 1, n]) * b.T().reshape(&[1, n, n])).sum(2, false).try_realize()?;
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{n}x{n} matmul: {} kernel(s), {:.3} s wall (incl. schedule + codegen + compile), {:.2} GFLOP/s in the kernel",
        GlobalCounters::kernel_count(),
        elapsed,
        2.0 * (n * n * n) as f64 / GlobalCounters::time_sum_s() * 1e-9
    );

    // check against a plain f64 reference on sampled entries
    let out = c.try_to_vec::<f32>()?;
    let mut worst: f64 = 0.0;
    for s in 0..256usize {
        let (i, j) = ((s * 7919) % n, (s * 104_729) % n);
        let exact: f64 = (0..n).map(|k| av[i * n + k] as f64 * bv[k * n + j] as f64).sum();
        worst = worst.max((out[i * n + j] as f64 - exact).abs() / exact.abs().max(1e-12));
    }
    println!("max relative error vs reference on 256 sampled entries: {worst:.2e}");
    assert!(worst < 1e-4, "matmul result is wrong");
    lazygrad::viz::serve_if_enabled();
    Ok(())
}
