//! Ops on sharded and replicated tensors equal the same ops on one device; reduces over the
//! sharded axis all-reduce with the copy counts of their algorithm.

use lazygrad::engine::ScheduleItem;
use lazygrad::{Context, Tensor};

const FOUR: [&str; 4] = ["CPU", "CPU:1", "CPU:2", "CPU:3"];

fn arange(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_slice(&(0..n).map(|i| (i as f32) * 0.5 - 3.0).collect::<Vec<_>>(), shape)
}

fn copies(t: &Tensor) -> usize {
    Tensor::schedule(std::slice::from_ref(t)).iter().filter(|i| matches!(i, ScheduleItem::Copy { .. })).count()
}

#[test]
fn a_sharded_tensor_lives_on_each_device_and_reads_back_whole() {
    let a = arange(&[8, 3]);
    let s = a.shard(&FOUR, Some(0));
    assert_eq!(s.device(), "CPU,CPU:1,CPU:2,CPU:3");
    assert_eq!(s.devices(), FOUR);
    assert_eq!(s.shape(), [8, 3]);
    assert_eq!(s.shard_axis(), Some(0));
    assert_eq!(s.to_vec::<f32>(), a.to_vec::<f32>());
    let r = a.shard(&FOUR[..2], None);
    assert_eq!(r.shard_axis(), None);
    assert_eq!(r.to_vec::<f32>(), a.to_vec::<f32>());
    let on_one = s.to("CPU:2");
    assert_eq!((on_one.device(), on_one.to_vec::<f32>()), ("CPU:2", a.to_vec::<f32>()));
}

#[test]
fn elementwise_and_movement_ops_run_per_shard() {
    let (a, b) = (arange(&[8, 6]), arange(&[8, 6]).flip(&[1]));
    let (sa, sb) = (a.shard(&FOUR, Some(0)), b.shard(&FOUR, Some(0)));
    let expect = |t: Tensor| t.to_vec::<f32>();
    assert_eq!(expect((&sa * &sb + 1.0).relu()), expect((&a * &b + 1.0).relu()));
    // a replicated operand meets a sharded one: each device takes its part
    let rb = b.shard(&FOUR, None);
    assert_eq!(expect(&sa - &rb), expect(&a - &b));
    // an operand split along another axis is gathered and split again
    let cb = b.shard(&FOUR[..2], Some(1));
    let sa2 = a.shard(&FOUR[..2], Some(0));
    assert_eq!(expect(&sa2 * &cb), expect(&a * &b));
    assert_eq!(expect(sa.permute(&[1, 0])), expect(a.permute(&[1, 0])));
    assert_eq!(sa.permute(&[1, 0]).shard_axis(), Some(1));
    assert_eq!(expect(sa.reshape(&[4, 2, 6])), expect(a.reshape(&[4, 2, 6])));
    assert_eq!(sa.reshape(&[4, 2, 6]).shard_axis(), Some(0));
    assert!(sa.reshape(&[2, 4, 6]).try_realize().is_err(), "two rows per device cannot split [2, 4, 6]");
    assert_eq!(expect(sa.reshape(&[48])), expect(a.reshape(&[48])));
    assert_eq!(expect(sa.shrink(&[(0, 8), (1, 4)])), expect(a.shrink(&[(0, 8), (1, 4)])));
    assert_eq!(expect(sa.pad(&[(0, 0), (2, 1)])), expect(a.pad(&[(0, 0), (2, 1)])));
    assert_eq!(expect(sa.flip(&[1])), expect(a.flip(&[1])));
    assert_eq!(expect(sa.reshape(&[8, 1, 6]).expand(&[8, 3, 6])), expect(a.reshape(&[8, 1, 6]).expand(&[8, 3, 6])));
    assert_eq!(
        expect(sa.cast(lazygrad::DType::INT32).cast(lazygrad::DType::FLOAT32)),
        expect(a.cast(lazygrad::DType::INT32).cast(lazygrad::DType::FLOAT32))
    );
}

#[test]
fn ops_that_would_move_items_between_shards_are_errors() {
    let s = arange(&[8, 6]).shard(&FOUR, Some(0));
    let err = |t: Tensor| t.try_realize().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err(s.reshape(&[6, 8])).contains("moves items between shards"), "{}", err(s.reshape(&[6, 8])));
    assert!(err(s.pad(&[(1, 0), (0, 0)])).contains("padding the sharded axis"));
    assert!(err(s.flip(&[0])).contains("flipping the sharded axis"));
    assert!(err(s.shrink(&[(1, 5), (0, 6)])).contains("shrinking the sharded axis"));
    assert!(arange(&[6, 2]).try_shard(&FOUR, Some(0)).is_err(), "6 rows over 4 devices");
    assert!(arange(&[8]).try_shard(&["CPU", "CPU"], Some(0)).is_err(), "a device twice");
    assert!(arange(&[8]).try_shard(&[], Some(0)).is_err(), "no devices");
    assert!(s.try_shard(&FOUR, Some(1)).is_err(), "already on several devices");
    let one = arange(&[8, 6]);
    assert!(s.try_add(&one).is_err(), "a sharded and a one-device operand");
}

#[test]
fn reduces_over_the_sharded_axis_all_reduce() {
    let a = arange(&[8, 6]);
    let s = a.shard(&FOUR, Some(0)).realize();
    for (sharded, single) in [
        (s.sum(0, false), a.sum(0, false)),
        (s.max(0, true), a.max(0, true)),
        (s.sum(None, false), a.sum(None, false)),
        (s.sum(1, false), a.sum(1, false)),
        (s.mean(0, false), a.mean(0, false)),
    ] {
        let (got, want) = (sharded.to_vec::<f32>(), single.to_vec::<f32>());
        assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)), "{got:?} vs {want:?}");
    }
    assert_eq!(s.sum(0, false).shard_axis(), None, "the result is on every device");
    assert_eq!(s.sum(1, false).shard_axis(), Some(0), "a reduce along another axis stays sharded");
}

#[test]
fn all_reduce_copy_counts_are_naive_n_n_minus_1_and_ring_2n_n_minus_1() {
    let a = arange(&[12, 6]);
    for n in [2, 3, 4] {
        let s = a.shard(&FOUR[..n], Some(0)).realize();
        let naive = s.sum(0, false);
        assert_eq!(copies(&naive), n * (n - 1), "naive over {n}");
        let ring = {
            let _ring = Context::new(&[("RING", 2)]);
            let ring = s.sum(0, false);
            assert_eq!(copies(&ring), 2 * n * (n - 1), "ring over {n}");
            ring.realize()
        };
        let want = a.sum(0, false).to_vec::<f32>();
        for got in [naive.to_vec::<f32>(), ring.to_vec::<f32>()] {
            assert!(got.iter().zip(&want).all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)), "{got:?}");
        }
    }
}

#[test]
fn shards_on_different_backends_compute_the_same() {
    let a = arange(&[8, 6]);
    let want = ((&a * 2.0).exp2().sum(0, false), (&a - 1.0).relu().max(1, false));
    for pair in [["CPU", "CL"], ["CL", "INTERP"], ["INTERP", "INTERP:1"]] {
        let s = a.shard(&pair, Some(0));
        let got = ((&s * 2.0).exp2().sum(0, false), (&s - 1.0).relu().max(1, false));
        for (g, w) in [(got.0, &want.0), (got.1, &want.1)] {
            let (g, w) = (g.to_vec::<f32>(), w.to_vec::<f32>());
            assert!(
                g.iter().zip(&w).all(|(g, w)| (g - w).abs() <= 1e-5 * w.abs().max(1.0)),
                "{pair:?}: {g:?} vs {w:?}"
            );
        }
    }
}

#[test]
fn alone_a_job_of_one_process_all_reduces_to_the_tensor_itself() {
    let world = lazygrad::runtime::job::world().unwrap();
    assert_eq!((world.rank(), world.size()), (0, 1));
    let a = arange(&[4, 3]);
    let r = a.all_reduce_ranks(lazygrad::Ops::Add);
    let items = Tensor::schedule(std::slice::from_ref(&r));
    assert!(
        items.iter().any(|i| matches!(i, ScheduleItem::Copy { ranks: Some(lazygrad::Ops::Add), .. })),
        "a step of its own"
    );
    assert_eq!(r.to_vec::<f32>(), a.to_vec::<f32>());
    // on several devices, each device's part
    let s = a.shard(&FOUR[..2], Some(0)).all_reduce_ranks(lazygrad::Ops::Max);
    assert_eq!(s.to_vec::<f32>(), a.to_vec::<f32>());
    assert!(a.try_all_reduce_ranks(lazygrad::Ops::Sub).is_err(), "not a reduce op");
    let x = a.requires_grad(true);
    let g = x.all_reduce_ranks(lazygrad::Ops::Add).sum(None, false).gradient_with(&[&x], None).unwrap();
    assert_eq!(g[0].to_vec::<f32>(), vec![1.0; 12]);
    // the buffers it runs on must match: a backend's own collective (NCCL) trusts their sizes
    use lazygrad::runtime::Buffer;
    use lazygrad::{DType, Error};
    let (floats, more, ints) = (
        Buffer::new("CPU", 4, DType::FLOAT32),
        Buffer::new("CPU", 5, DType::FLOAT32),
        Buffer::new("CPU", 4, DType::INT32),
    );
    floats.copyin(&[1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
    assert!(matches!(ints.all_reduce_ranks_from(&floats, lazygrad::Ops::Add), Err(Error::DTypes { .. })));
    assert!(matches!(more.all_reduce_ranks_from(&floats, lazygrad::Ops::Add), Err(Error::Size { .. })));
    let out = Buffer::new("CPU:1", 4, DType::FLOAT32);
    out.all_reduce_ranks_from(&floats, lazygrad::Ops::Add).unwrap();
    assert_eq!(out.copyout().unwrap(), floats.copyout().unwrap());
}

#[test]
fn symbolic_sizes_off_the_split_axis_shard_and_on_it_are_an_error() {
    use lazygrad::{Sint, Variable};
    let a = arange(&[8, 6]);
    let n = Variable::new("rows", 1, 8);
    let split = a.shard(&FOUR[..2], Some(1)).realize();
    for len in [1, 5, 8] {
        let rows = |t: &Tensor| t.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(len))), (Sint::Int(0), Sint::Int(6))]);
        let want = (rows(&a) * 2.0).sum(0, false).to_vec::<f32>();
        assert_eq!((rows(&split) * 2.0).sum(0, false).to_vec::<f32>(), want, "{len} rows");
    }
    let cols = Variable::new("cols", 1, 6);
    let on_split = split.shrink_sym(&[(Sint::Int(0), Sint::Int(8)), (Sint::Int(0), Sint::from(&cols.bind(3)))]);
    let err = on_split.sum(None, false).try_realize().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("split axis 1"), "{err}");
}

#[test]
fn a_bound_variable_is_a_scalar_on_each_device() {
    // as the LLaMA model marks the cache rows at and past its start position
    let pos = lazygrad::Variable::new("pos", 0, 7);
    let rows = Tensor::arange(8);
    for (device, t) in [("CPU", rows.clone()), ("CPU,CPU:1", rows.shard(&FOUR[..2], Some(0)))] {
        for at in [0, 3, 7] {
            let v = pos.bind(at);
            let marked = t.ge(&v).where_(&t * 10, &t - &v);
            assert_eq!(marked.device(), device);
            let want: Vec<i32> = (0..8).map(|r| if r >= at as i32 { r * 10 } else { r - at as i32 }).collect();
            assert_eq!(marked.to_vec::<i32>(), want, "{device}, pos {at}");
        }
    }
    // a float tensor takes it as a float, as it takes an integer scalar
    let half = (Tensor::arange(4).cast(lazygrad::DType::FLOAT32) * 0.5) + &pos.bind(2);
    assert_eq!(half.to_vec::<f32>(), [2.0, 2.5, 3.0, 3.5]);
}

#[test]
fn the_default_devices_are_the_default_backends_numbers() {
    use lazygrad::runtime::{canonical_device, default_device, default_devices};
    let backend = default_device().split(':').next().unwrap_or_default().to_string();
    let named: Vec<String> = default_devices(3).iter().map(|d| canonical_device(d)).collect();
    assert_eq!(named, [canonical_device(&format!("{backend}:0")), format!("{backend}:1"), format!("{backend}:2")]);
}
