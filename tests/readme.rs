//! The README's example, exactly as written there.

use lazygrad::Tensor;

#[test]
fn readme_example() {
    let a = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]);
    let b = Tensor::eye(2);
    let c = (a.matmul(&b) + 1.0).relu().sum(1, false);
    assert_eq!(c.to_vec::<f32>(), vec![5.0, 9.0]);
}
