//! The schedule cache: the same graph over other buffers reuses the schedule, and computes the
//! same values as scheduling it afresh. (Its own test binary: the hit and miss counts are
//! process-wide.)

use lazygrad::schedule::cache::stats;
use lazygrad::schedule::{create_schedule, Devices, ScheduleStep, Slot};
use lazygrad::{Context, DType, Tensor, UOp};

/// The counts are process-wide: one test at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn step(x: &Tensor, w: &Tensor) -> Tensor {
    (x.matmul(w).contiguous().relu() + 1.0).sum(1, false)
}

/// `step` on the host, in f64.
fn step_ref(x: &[f32], w: &[f32], (m, k, n): (usize, usize, usize)) -> Vec<f64> {
    (0..m)
        .map(|i| {
            let row = |j: usize| (0..k).map(|t| x[i * k + t] as f64 * w[t * n + j] as f64).sum::<f64>();
            (0..n).map(|j| row(j).max(0.0) + 1.0).sum()
        })
        .collect()
}

#[test]
fn a_graph_rebuilt_over_new_buffers_hits_and_computes_the_same() {
    let _serial = serial();
    Tensor::manual_seed(2);
    let (m, k, n) = (5, 7, 3);
    let w = Tensor::randn(&[k, n]).realize();
    let close = |got: Vec<f32>, want: Vec<f64>| {
        assert!(got.iter().zip(&want).all(|(g, w)| (*g as f64 - w).abs() < 1e-4), "{got:?} vs {want:?}");
    };
    // what one realize of `y` did to the counts
    let counted = |y: &Tensor| {
        let (hits, misses) = stats();
        y.realize();
        (stats().0 - hits, stats().1 - misses)
    };
    for round in 0..3 {
        let x = Tensor::randn(&[m, k]).realize();
        let y = step(&x, &w);
        // the first round schedules, the others reuse it
        assert_eq!(counted(&y), if round == 0 { (0, 1) } else { (1, 0) }, "round {round}");
        close(y.to_vec::<f32>(), step_ref(&x.to_vec::<f32>(), &w.to_vec::<f32>(), (m, k, n)));
    }
    // another shape is another graph
    assert_eq!(counted(&step(&Tensor::randn(&[m + 1, k]).realize(), &w)), (0, 1));
    // SCACHE=0 schedules without looking
    let _off = Context::new(&[("SCACHE", 0)]);
    assert_eq!(counted(&step(&Tensor::randn(&[m, k]).realize(), &w)), (0, 0));
}

#[test]
fn in_place_updates_replayed_from_the_cache_update_their_buffer() {
    let _serial = serial();
    let w = Tensor::new([1.0f32, 2.0, 3.0]).realize();
    let mut hits = 0;
    for step in 1..=3 {
        let delta = Tensor::new([1.0f32, 1.0, 1.0]).realize();
        let before = stats().0;
        w.assign(&(&w - &delta)).realize();
        hits += stats().0 - before;
        let want: Vec<f32> = [1.0f32, 2.0, 3.0].iter().map(|v| v - step as f32).collect();
        assert_eq!(w.to_vec::<f32>(), want, "step {step}");
    }
    assert_eq!(hits, 2);
}

#[test]
fn a_schedule_names_its_buffers_by_slot_and_new_inputs_take_the_same_one() {
    let _serial = serial();
    let runtime = || Devices {
        target_of: |d| lazygrad::runtime::get_device(d).ok().map(|d| d.target()),
        default: lazygrad::runtime::default_device,
    };
    let schedule = |a: &Tensor, b: &Tensor| {
        let out = (a + b).relu().uop();
        create_schedule(
            std::slice::from_ref(&out),
            &[a.device()],
            &UOp::toposort_all(std::slice::from_ref(&out)),
            runtime(),
        )
        .unwrap()
    };
    let realized = || (Tensor::rand(&[16]).realize(), Tensor::rand(&[16]).realize());
    let (a, b) = realized();
    let (first, inputs) = schedule(&a, &b);
    assert_eq!(inputs, [a.uop(), b.uop()], "the graph's BUFFERs, in the order its walk meets them");
    let [ScheduleStep::Kernel { slots, .. }] = &first.steps[..] else { panic!("one kernel") };
    let named: Vec<&Slot> = slots.iter().map(|&s| &first.slots[s]).collect();
    let (device, dtype) = (a.device().to_string(), DType::FLOAT32);
    assert_eq!(
        named,
        [
            &Slot::New { device, size: 16, dtype },
            &Slot::Input { position: 0, size: 16, dtype },
            &Slot::Input { position: 1, size: 16, dtype }
        ],
        "the output is a new slot, PARAM 0; the inputs by position"
    );
    assert_eq!(first.outputs, [Some((slots[0], false))]);
    // other buffers of the same kinds: the cached schedule itself, over them
    let (c, d) = realized();
    let (second, inputs) = schedule(&c, &d);
    assert!(std::sync::Arc::ptr_eq(&first, &second), "a plain lookup");
    assert_eq!(inputs, [c.uop(), d.uop()]);
}
