//! Kernel counts: what fuses into one kernel and what must be stored in between (the counts
//! tinygrad measures for the same graphs).

use lazygrad::engine::ScheduleItem;
use lazygrad::Tensor;

const N: usize = 16;

fn kernels(t: &Tensor) -> usize {
    Tensor::schedule(std::slice::from_ref(t)).iter().filter(|i| matches!(i, ScheduleItem::Kernel { .. })).count()
}

fn inputs() -> (Tensor, Tensor, Tensor) {
    Tensor::manual_seed(1);
    let r = || Tensor::rand(&[N, N]).realize();
    (r(), r(), r())
}

#[test]
fn elementwise_chain_is_one_kernel() {
    let (a, b, c) = inputs();
    assert_eq!(kernels(&(&a * &b + &c).relu()), 1);
}

#[test]
fn a_chain_of_100000_ops_is_stored_every_thousand() {
    // one kernel would be 100,000 chained statements, which gcc's cc1 cannot compile
    let mut x = Tensor::from_slice(&[0.5f32, 1.5, -2.0], &[3]);
    for _ in 0..100_000 {
        x = &x + 1.0;
    }
    assert_eq!(kernels(&x), 100_000usize.div_ceil(lazygrad::schedule::realize::MAX_FUSED_DEPTH));
    assert_eq!(x.to_vec::<f32>(), [100_000.5, 100_001.5, 99_998.0]);
}

#[test]
fn a_large_sum_over_a_100000_op_chain_is_scheduled_without_recursion() {
    // split_reduce asks whether the reduced axis is a broadcast along every path to memory: it
    // walked the chain recursively and overflowed the stack
    let mut x = Tensor::from_slice(&vec![1.0f32; 1 << 14], &[1 << 14]).realize();
    for _ in 0..100_000 {
        x = &x + 1.0;
    }
    assert_eq!(x.sum(0, false).item::<f32>(), (1 << 14) as f32 * 100_001.0);
}

#[test]
fn broadcast_multiply_sum_matmul_is_one_kernel() {
    let (a, b, _) = inputs();
    assert_eq!(kernels(&(a.reshape(&[N, 1, N]) * b.T().reshape(&[1, N, N])).sum(2, false)), 1);
}

#[test]
fn matmul_relu_sum_is_one_kernel() {
    let (a, b, _) = inputs();
    assert_eq!(kernels(&a.matmul(&b).relu().sum(1, false)), 1);
}

#[test]
fn broadcast_reduce_is_stored_first() {
    let (a, _, _) = inputs();
    assert_eq!(kernels(&(&a + a.sum(1, true))), 2);
}

#[test]
fn softmax_is_at_most_three_kernels() {
    let (a, _, _) = inputs();
    let e = (&a - a.max(1, true)).exp();
    let sm = &e / e.sum(1, true);
    assert!(kernels(&sm) <= 3, "softmax took {} kernels", kernels(&sm));
    let rows = sm.sum(1, false).to_vec::<f32>();
    assert!(rows.iter().all(|r| (r - 1.0).abs() < 1e-5), "softmax rows do not sum to 1: {rows:?}");
}

#[test]
fn realized_inputs_need_no_kernel() {
    let (a, _, _) = inputs();
    assert_eq!(kernels(&a), 0);
    assert_eq!(kernels(&a.reshape(&[N * N])), 0);
    assert_eq!(kernels(&a.T()), 1);
}

#[test]
fn copies_move_data_between_devices() {
    let a = Tensor::new([[1.0f32, 2.0], [3.0, 4.0]]);
    let b = (a.to("INTERP") * 2.0).to("CPU") + 1.0;
    let items = Tensor::schedule(std::slice::from_ref(&b));
    assert_eq!(items.iter().filter(|i| matches!(i, ScheduleItem::Copy { .. })).count(), 2);
    assert_eq!(b.device(), "CPU");
    assert_eq!(b.to_vec::<f32>(), vec![3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn reducing_a_loop_invariant_value_still_loops() {
    assert_eq!(Tensor::full(&[2, 5], 1.5f32).sum(None, false).item::<f32>(), 15.0);
    assert_eq!(Tensor::new([[2.0f32]]).expand(&[3, 4]).sum(1, false).to_vec::<f32>(), vec![8.0; 3]);
}

#[test]
fn empty_tensors_need_no_kernel_and_reduce_to_identities() {
    let t = Tensor::from_vec(Vec::<f32>::new(), &[0, 3]);
    assert_eq!(t.sum(0, false).to_vec::<f32>(), vec![0.0; 3]);
    assert_eq!(t.sum(1, false).to_vec::<f32>(), Vec::<f32>::new());
    assert_eq!((&t + 1.0).shape(), vec![0, 3]);
    assert_eq!((&t + 1.0).to_vec::<f32>(), Vec::<f32>::new());
    assert_eq!(t.prod(0, false).to_vec::<f32>(), vec![1.0; 3]);
}

#[test]
fn large_reduces_split_in_two_and_stay_exact() {
    // 2^20 values into one output: 256 partial sums of 4096, then their sum
    let ones = Tensor::ones(&[1 << 20]).contiguous().realize();
    let total = ones.sum(None, false);
    assert_eq!(kernels(&total), 2);
    assert_eq!(total.item::<f32>(), (1 << 20) as f32);
    // a single float32 accumulator stops counting at 2^24 (adding 1 changes nothing); split, it
    // gets there
    let big = Tensor::ones(&[1 << 25]).contiguous().realize();
    let big_total = big.sum(None, false);
    // a partial (here 2^17 values each) is not split again: each part reads one contiguous run
    assert_eq!(kernels(&big_total), 2);
    assert_eq!(big_total.item::<f32>(), (1u32 << 25) as f32);
    // small reduces, gathers and aranges are not split
    assert_eq!(kernels(&ones.reshape(&[1 << 10, 1 << 10]).sum(1, false)), 1);
    let idx = Tensor::new([3i32, 1 << 19]).realize();
    let gathered = ones.index(&[lazygrad::tensor::Idx::Tensor(idx)]);
    assert_eq!(kernels(&gathered), 1);
    assert_eq!(gathered.to_vec::<f32>(), vec![1.0, 1.0]);
}

#[test]
fn a_realized_tensor_is_read_from_its_buffer_by_every_graph_built_on_it() {
    use lazygrad::uop::Ops;
    let (a, b, c) = inputs();
    let product = &a * &b;
    let sum = &product + &c;
    product.realize();
    let ops = |t: &Tensor| t.uop().toposort().iter().map(|u| u.op()).collect::<Vec<_>>();
    assert!(!ops(&sum).contains(&Ops::Mul), "the product is not computed again: {:?}", ops(&sum));
    assert_eq!(kernels(&sum), 1);
    let expect: Vec<f32> =
        a.to_vec::<f32>().iter().zip(b.to_vec::<f32>()).zip(c.to_vec::<f32>()).map(|((x, y), z)| x * y + z).collect();
    assert_eq!(sum.to_vec::<f32>(), expect);
}

#[test]
fn every_node_is_younger_than_its_sources_even_when_interned_again() {
    let (a, b, _) = inputs();
    let old = (&a + &b).uop();
    let again = (&a + &b).uop();
    assert_eq!(old.serial(), again.serial(), "interning returns the node as made");
    let graph = ((&a + &b) * 3.0).exp().uop();
    for u in graph.toposort() {
        assert!(u.src().iter().all(|s| s.serial() < u.serial()), "{:?} is older than a source", u.op());
    }
}

/// A step reading a buffer that another step of the same schedule assigns in place runs before
/// the assignment, whichever was asked for first, unless it reads through the assignment.
#[test]
fn reads_of_a_buffer_assigned_in_the_same_schedule_run_before_the_write_unless_they_read_it() {
    for assign_first in [false, true] {
        let x = Tensor::new([1.0f32, 2.0, 3.0]).realize();
        let old = &x + 1.0;
        let assigned = x.assign(&(&x * 10.0));
        let new = &assigned + 1.0;
        let mut outputs = vec![old.clone(), new.clone()];
        outputs.insert(if assign_first { 0 } else { 2 }, assigned);
        Tensor::realize_all(&outputs).unwrap();
        assert_eq!(old.to_vec::<f32>(), [2.0, 3.0, 4.0], "assign first: {assign_first}");
        assert_eq!(new.to_vec::<f32>(), [11.0, 21.0, 31.0], "assign first: {assign_first}");
        assert_eq!(x.to_vec::<f32>(), [10.0, 20.0, 30.0], "assign first: {assign_first}");
    }
}

/// A read through an assignment to part of a buffer (rows 1..3 of a 4x2 matrix) reads those
/// rows, and a kernel reading the rows before them as they were and the assigned ones through the
/// assignment (a KV cache's filled rows beside the new one) runs after the write.
#[test]
fn reads_through_an_assignment_to_a_slice_read_the_slices_rows() {
    let cache = Tensor::new([[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]).realize();
    let rows = cache.shrink(&[(1, 3), (0, 2)]).assign(&Tensor::new([[10.0f32, 20.0], [30.0, 40.0]]));
    let doubled = &rows * 2.0;
    let before = cache.shrink(&[(0, 1), (0, 2)]);
    let joined = Tensor::cat(&[&before, &rows], 0) + 0.5;
    Tensor::realize_all(&[doubled.clone(), joined.clone()]).unwrap();
    assert_eq!(doubled.to_vec::<f32>(), [20.0, 40.0, 60.0, 80.0]);
    assert_eq!(joined.to_vec::<f32>(), [1.5, 2.5, 10.5, 20.5, 30.5, 40.5]);
    assert_eq!(cache.to_vec::<f32>(), [1.0, 2.0, 10.0, 20.0, 30.0, 40.0, 7.0, 8.0]);
}

#[test]
fn a_residual_stream_is_stored_once_not_recomputed_by_each_reader() {
    // x <- x + a + b over 6 layers, each x read by two row statistics (a LayerNorm's sum and sum
    // of squares): fused into its readers, layer i's statistics each read the 2i + 1 buffers of
    // every earlier layer; stored, each reads the x before it and that layer's two
    Tensor::manual_seed(3);
    let layers = 6;
    let rand = || Tensor::rand(&[N, N]).realize();
    let x0 = rand();
    let (mut x, mut host) = (x0.clone(), x0.to_vec::<f32>());
    let mut stats = vec![];
    for _ in 0..layers {
        let (a, b) = (rand(), rand());
        for ((h, a), b) in host.iter_mut().zip(a.to_vec::<f32>()).zip(b.to_vec::<f32>()) {
            *h = *h + a + b;
        }
        x = &(&x + &a) + &b;
        stats.extend([x.sum(1, false), (&x * &x).sum(1, false)]);
    }
    let schedule = Tensor::schedule(&stats);
    let widest = schedule
        .iter()
        .filter_map(|i| match i {
            ScheduleItem::Kernel { bufs, .. } => Some(bufs.len()),
            _ => None,
        })
        .max()
        .unwrap();
    assert!(widest <= 4, "a kernel binds {widest} buffers (its output and what it reads)");
    let sums = stats[2 * layers - 2].to_vec::<f32>();
    for (row, sum) in sums.iter().enumerate() {
        let want: f32 = host[row * N..(row + 1) * N].iter().sum();
        assert!((sum - want).abs() <= 1e-4 * want.abs(), "row {row}: {sum} != {want}");
    }
}

/// How many times the kernels of `outputs` evaluate an `op`: each node of it once per point of
/// the loops it depends on, in the kernel as codegen takes it (an arange's loop folded away).
fn evaluations(outputs: &[Tensor], op: lazygrad::uop::Ops) -> usize {
    use lazygrad::uop::Ops;
    let mut total = 0;
    for item in Tensor::schedule(outputs) {
        let ScheduleItem::Kernel { ast, .. } = item else { continue };
        for n in lazygrad::codegen::optimizable(&ast).unwrap().toposort().iter().filter(|n| n.op() == op) {
            let loops = n.toposort().into_iter().filter(|r| r.op() == Ops::Range);
            total += loops.map(|r| r.src()[0].const_int_value().unwrap() as usize).product::<usize>();
        }
    }
    total
}

#[test]
fn causal_attention_computes_each_probability_once() {
    // the probabilities exp(s - max) / sum are read by every output column of P @ V: recomputing
    // them there evaluated exp 64 times per score (the head size); stored, exp runs once for the
    // sum and once for the probabilities. The backward reads exp in more kernels (sum(dP * P), P *
    // (dP - it)), so there exp itself is stored: evaluated 5 times per score before
    Tensor::manual_seed(2);
    let (b, h, t, d) = (1, 2, 256, 64);
    let [q, k, v] = [0; 3].map(|_| Tensor::randn(&[b, h, t, d]).realize());
    let out = q.scaled_dot_product_attention(&k, &v, None, true);
    let scores = b * h * t * t;
    let forward = evaluations(std::slice::from_ref(&out), lazygrad::uop::Ops::Exp2);
    assert!(forward <= 2 * scores, "exp evaluated {forward} times for {scores} scores");
    let grads = out.sum(None, false).gradient(&[&q, &k, &v]);
    let backward = evaluations(&grads, lazygrad::uop::Ops::Exp2);
    assert!(backward <= 2 * scores, "exp evaluated {backward} times for {scores} scores, backward");
}

/// A live tensor that is a `contiguous()` inside a realized graph keeps the buffer the schedule
/// stored it in (as tinygrad maps every realized node back to its tensors): using it again runs
/// no kernel for it. It was computed again each time (tinygrad's test_embedding_one_kernel: a
/// second lookup into a freshly made table took 2 kernels, not 1).
#[test]
fn a_contiguous_tensor_realized_inside_a_graph_keeps_its_buffer() {
    let (a, b, _) = inputs();
    let table = (&a * 2.0).contiguous();
    let first = &table + &b;
    assert_eq!(kernels(&first), 2, "the table, then the sum");
    first.realize();
    assert!(table.buffer().is_some(), "the table is stored");
    assert_eq!(kernels(&(&table * &b)), 1, "the table is read, not computed again");
    let want: Vec<f32> = a.to_vec::<f32>().iter().zip(b.to_vec::<f32>()).map(|(x, y)| 2.0 * x * y).collect();
    assert_eq!((&table * &b).to_vec::<f32>(), want);
}

/// tinygrad's `linear_with_vars` and `run_linear`: the items that compute a graph, with the
/// variables' values; the tensors point at the buffers the items fill, so running them realizes
/// the tensors (nothing is computed again when they are read).
#[test]
fn a_linear_schedule_runs_into_the_tensors_it_was_made_for() {
    let (a, b, _) = inputs();
    let table = (&a * 2.0).contiguous();
    let out = &table + &b;
    let (items, vals) = Tensor::linear_with_vars(std::slice::from_ref(&out)).unwrap();
    let kernel_items = items.iter().filter(|i| matches!(i, ScheduleItem::Kernel { .. })).count();
    // the 2.0 is a scalar parameter (`schedule/unbind.rs`), whose value `vals` holds
    assert_eq!((kernel_items, vals.len()), (2, 1));
    assert!(out.buffer().is_some() && table.buffer().is_some(), "both point at their buffers");
    Tensor::run_linear(items, &vals).unwrap();
    let want: Vec<f32> = a.to_vec::<f32>().iter().zip(b.to_vec::<f32>()).map(|(x, y)| 2.0 * x + y).collect();
    assert_eq!(out.to_vec::<f32>(), want);
    let i = lazygrad::Variable::new("i", 1, 10);
    let x = Tensor::ones(&[10]).contiguous().realize();
    let part = x.shrink_sym(&[(lazygrad::Sint::Int(0), lazygrad::Sint::from(&i.bind(3)))]) * 2.0;
    let (items, vals) = Tensor::linear_with_vars(std::slice::from_ref(&part)).unwrap();
    assert_eq!(vals.get("i"), Some(&3));
    Tensor::run_linear(items, &vals).unwrap();
    assert_eq!(part.to_vec::<f32>(), [2.0; 3]);
}
