//! Half-precision and integer dtypes behave the same on CPU (generated C) and INTERP.

use lazygrad::runtime::DefaultDevice;
use lazygrad::{DType, Tensor};

fn on<T>(device: &str, f: impl Fn() -> T) -> T {
    let _d = DefaultDevice::scoped(device);
    f()
}

fn both<T: PartialEq + std::fmt::Debug>(f: impl Fn() -> T) -> T {
    let (cpu, interp) = (on("CPU", &f), on("INTERP", &f));
    assert_eq!(cpu, interp, "CPU and INTERP differ");
    cpu
}

#[test]
fn bfloat16_math_rounds_like_the_reference() {
    let out = both(|| {
        let a = Tensor::new([1.0f32, 2.5, -3.25, 1e-3, 300.0, 65504.0]).cast(DType::BFLOAT16);
        let b = (&a * &a + 1.0).sqrt().sum(0, false).cast(DType::FLOAT32);
        let m = a.max(0, false).cast(DType::FLOAT32);
        (b.item::<f32>().to_bits(), m.item::<f32>())
    });
    assert_eq!(out.1, 65536.0, "65504 rounds to 65536 in bfloat16");
}

#[test]
fn float16_math_matches() {
    let out = both(|| {
        let a = Tensor::new([0.1f32, 0.2, 0.3, 1000.0]).cast(DType::FLOAT16);
        (&a * 3.0 + 0.5)
            .exp2()
            .log2()
            .cast(DType::FLOAT32)
            .to_vec::<f32>()
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>()
    });
    assert_eq!(out.len(), 4);
}

#[test]
fn integers_wrap_and_divide_like_c() {
    let out = both(|| {
        let a = Tensor::new([127i32, -7, 7, -128]).cast(DType::INT8);
        let wrapped = (&a + 1).cast(DType::INT32).to_vec::<i32>();
        let q = Tensor::new([-7i32, 7, -8]).idiv(2).to_vec::<i32>();
        let u = (Tensor::new([250i32, 5]).cast(DType::UINT8) + 10).cast(DType::INT32).to_vec::<i32>();
        (wrapped, q, u)
    });
    assert_eq!(out.0, vec![-128, -6, 8, -127]);
    assert_eq!(out.1, vec![-3, 3, -4]);
    assert_eq!(out.2, vec![4, 15]);
}
