//! What an adversarial sweep of the public API (issue 38: JIT replay, writes through views,
//! gradients at kinks, Variables at their edges, precision, odd shapes) found wrong, each checked
//! on every suite device (`DEV`, and INTERP) against values computed here.

mod common;

use lazygrad::tensor::Idx;
use lazygrad::Tensor;

use common::on_each_device;

/// An assignment realized as part of another tensor's graph is done once: the assigned tensor
/// then reads the stored result. It stayed the ASSIGN node and ran again when read, adding twice.
#[test]
fn an_assignment_realized_inside_another_graph_is_not_run_again() {
    on_each_device(|device| {
        let w = Tensor::new([1.0f32, 1.0, 1.0]).contiguous().realize();
        w.assign(&(&w + &Tensor::new([1.0f32, 2.0, 3.0])));
        let doubled = (&w * 2.0).realize();
        assert_eq!(doubled.to_vec::<f32>(), [4.0, 6.0, 8.0], "{device}");
        assert_eq!(w.to_vec::<f32>(), [2.0, 3.0, 4.0], "{device}");
        assert_eq!((&w * 1.0).to_vec::<f32>(), [2.0, 3.0, 4.0], "{device}");
    });
}

/// `t[idx] = value` with a tensor index writes the elements it selects, as numpy does; it
/// wrote into a gathered copy and left the tensor as it was (in Rust and in Python).
#[test]
fn setitem_with_a_tensor_index_writes_the_selected_elements() {
    on_each_device(|device| {
        let t = Tensor::new([0.0f32, 1.0, 2.0, 3.0, 4.0]).contiguous().realize();
        t.setitem(&[Idx::Tensor(Tensor::new([3i32, 0]))], &Tensor::new([60.0f32, 50.0]));
        assert_eq!(t.to_vec::<f32>(), [50.0, 1.0, 2.0, 60.0, 4.0], "{device}");
        let m = Tensor::new([[0i32, 1, 2], [3, 4, 5]]).contiguous().realize();
        m.setitem(&[Idx::Full, Idx::Tensor(Tensor::new([2i32, -3]))], &Tensor::new([7i32]));
        assert_eq!(m.to_vec::<i32>(), [7, 1, 7, 7, 4, 7], "{device}");
        // basic indices write through their view (an odd length, a negative step)
        let v = Tensor::new([0i32, 1, 2, 3, 4]).contiguous().realize();
        v.setitem(&[Idx::R(None, None, -2)], &Tensor::new([9i32, 8, 7]));
        assert_eq!(v.to_vec::<i32>(), [7, 1, 8, 3, 9], "{device}");
        // a value with leading axes of size 1 fits fewer axes, as numpy lets it
        v.setitem(&[Idx::I(1)], &Tensor::new([[5i32]]));
        assert_eq!(v.to_vec::<i32>(), [7, 5, 8, 3, 9], "{device}");
    });
}

/// The gradient of `cummax`/`cummin` values at ties reaches the element the returned index names
/// (the last of equal values), as PyTorch's; it went to the first. NaN starts where it appears.
/// References from PyTorch 2.x (`x.cummax(0)`, `x.cummin(0)`, `values.sum().backward()`).
#[test]
fn cummax_and_cummin_gradients_at_ties_follow_the_indices() {
    on_each_device(|device| {
        let x = Tensor::new([1.0f32, 1.0, 0.0, 2.0]).requires_grad(true);
        x.cummax(0).0.sum(None, false).backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>(), [1.0, 2.0, 0.0, 1.0], "cummax {device}");
        let x = Tensor::new([2.0f32, 2.0, 3.0, 1.0]).requires_grad(true);
        let (values, indices) = x.cummin(0);
        values.sum(None, false).backward();
        assert_eq!((values.to_vec::<f32>(), indices.to_vec::<i32>()), (vec![2.0, 2.0, 2.0, 1.0], vec![0, 1, 1, 3]));
        assert_eq!(x.grad().unwrap().to_vec::<f32>(), [1.0, 2.0, 0.0, 1.0], "cummin {device}");
        let x = Tensor::new([1.0f32, f32::NAN, 2.0, 0.0]).requires_grad(true);
        let (values, indices) = x.cummax(0);
        values.sum(None, false).backward();
        let v = values.to_vec::<f32>();
        assert!(v[0] == 1.0 && v[1..].iter().all(|v| v.is_nan()), "{device}: {v:?}");
        assert_eq!(indices.to_vec::<i32>(), [0, 1, 1, 1], "{device}");
        assert_eq!(x.grad().unwrap().to_vec::<f32>(), [1.0, 3.0, 0.0, 0.0], "{device}");
    });
}

/// The gradient of `std` (and `std_mean`) over equal values is 0, as PyTorch defines it; it was
/// NaN (sqrt's 1/(2*0) times 0). Elsewhere it is unchanged: PyTorch's `(x - mean) / (std * (n - 1))`.
#[test]
fn the_gradient_of_std_over_equal_values_is_zero() {
    on_each_device(|device| {
        let x = Tensor::new([1.5f32, 1.5, 1.5]).requires_grad(true);
        x.std(None, false, 1).backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>(), [0.0; 3], "{device}");
        let x = Tensor::new([[2.0f64, 2.0], [1.0, 3.0]]).requires_grad(true);
        let (std, _) = x.std_mean(1, false, 1);
        assert_eq!(std.to_vec::<f64>(), [0.0, 2f64.sqrt()], "{device}");
        std.sum(None, false).backward();
        let g = x.grad().unwrap().to_vec::<f64>();
        let want = [0.0, 0.0, -1.0 / 2f64.sqrt(), 1.0 / 2f64.sqrt()];
        assert!(g.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-12), "{device}: {g:?}");
    });
}

/// A Rust or Python int past int32 as a fill value is int64, as `Tensor::from_scalars` (and
/// numpy) infer; `full` wrapped it to int32 (2**40 became 0).
#[test]
fn a_fill_value_past_int32_is_int64() {
    on_each_device(|device| {
        let t = Tensor::full(&[2], 1i64 << 40);
        assert_eq!((t.dtype(), t.to_vec::<i64>()), (lazygrad::DType::INT64, vec![1 << 40; 2]), "{device}");
        assert_eq!(Tensor::full(&[1], 7i64).dtype(), lazygrad::DType::INT32);
    });
}
