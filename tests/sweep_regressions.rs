//! What an adversarial sweep of the public API (issue 38: JIT replay, writes through views,
//! gradients at kinks, Variables at their edges, precision, odd shapes) found wrong, each checked
//! on every suite device (`DEV`, and INTERP) against values computed here.

mod common;

use lazygrad::runtime::DefaultDevice;
use lazygrad::Tensor;

/// Run `f` with each suite device the default.
fn on_each_device(f: impl Fn(&str)) {
    for device in common::devices() {
        let _device = DefaultDevice::scoped(device);
        f(device);
    }
}

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
