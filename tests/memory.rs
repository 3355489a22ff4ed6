//! Memory: the LRU allocator reuses freed blocks, `GlobalCounters` tracks the bytes live buffers
//! hold and their peak, and the memory planner lets intermediates with disjoint lifetimes share
//! storage, in schedules and in JIT'd training steps, without changing a single bit; a tensor over
//! host memory it does not own (`from_blob`) reads and writes that memory in place.

mod common;

use std::sync::Arc;

use lazygrad::engine::ScheduleItem;
use lazygrad::helpers::GlobalCounters;
use lazygrad::nn::layers::Linear;
use lazygrad::nn::optim::{Optimizer, SGD};
use lazygrad::nn::state::get_parameters;
use lazygrad::runtime::{get_device, Buffer};
use lazygrad::tensor::Reduction;
use lazygrad::{module, Context, DType, Error, Jit, Tensor};

/// The counters and the random stream are process-wide: these tests run one at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn lru_reuses_a_freed_block_of_the_same_size() {
    let _s = serial();
    let alloc = || get_device("CPU").unwrap().allocator().stats();
    // an odd size nothing else in this process allocates
    let first = Buffer::new("CPU", 12_347, DType::UINT8);
    let ptr = first.host_ptr().unwrap();
    let before = alloc();
    drop(first);
    assert_eq!(alloc().cached_blocks, before.cached_blocks + 1);
    let second = Buffer::new("CPU", 12_347, DType::UINT8);
    assert_eq!(second.host_ptr().unwrap(), ptr, "the freed block comes back");
    let after = alloc();
    assert_eq!((after.allocs, after.reused), (before.allocs, before.reused + 1));
    // another size is a new block from the device
    let third = Buffer::new("CPU", 12_349, DType::UINT8);
    third.host_ptr().unwrap();
    assert_eq!(alloc().allocs, after.allocs + 1);
    // LRU=0: freed blocks go straight back
    let cached = alloc().cached_blocks;
    let _off = Context::new(&[("LRU", 0)]);
    drop(third);
    assert_eq!(alloc().cached_blocks, cached);
}

#[test]
fn peak_counter_is_the_sum_of_the_live_buffers() {
    let _s = serial();
    let base = GlobalCounters::mem_used();
    GlobalCounters::reset();
    assert_eq!(GlobalCounters::peak_mem(), base);
    let x = Tensor::from_slice(&[1.5f32; 1024], &[1024]);
    assert_eq!(GlobalCounters::mem_used(), base + 4096);
    // two kernels: an intermediate and the output, 4 KB each, live together with the input
    let y = ((&x + 1.0).contiguous() * 2.0).realize();
    assert_eq!(GlobalCounters::peak_mem(), base + 3 * 4096);
    assert_eq!(GlobalCounters::mem_used(), base + 2 * 4096, "the intermediate is freed");
    assert_eq!(y.to_vec::<f32>()[0], 5.0);
    drop((x, y));
    assert_eq!(GlobalCounters::mem_used(), base);
    GlobalCounters::reset();
    assert_eq!(GlobalCounters::peak_mem(), base);
}

/// x -> a -> b -> c -> out, each step its own kernel: a dies before c is born.
fn chain(x: &Tensor) -> Tensor {
    let a = (x + 1.0).contiguous();
    let b = (&a * 2.0).contiguous();
    let c = (&b + 3.0).contiguous();
    (&c * &c).sum(None, false)
}

#[test]
fn planner_shares_storage_between_intermediates_that_do_not_overlap() {
    let _s = serial();
    let x = Tensor::from_slice(&(0..4096).map(|i| i as f32 * 0.25).collect::<Vec<_>>(), &[4096]).realize();
    let written = |items: &[ScheduleItem]| -> Vec<Arc<Buffer>> {
        items
            .iter()
            .map(|i| match i {
                ScheduleItem::Kernel { bufs, .. } => bufs[0].clone(),
                ScheduleItem::Copy { dst, .. } => dst.clone(),
            })
            .collect()
    };
    // the schedule is planned over its slots before it is bound to buffers
    let items = Tensor::schedule(&[chain(&x)]);
    let after = written(&items);
    assert_eq!(after.len(), 4, "a, b, c and the sum");
    let (a, b, c) = (&after[0], &after[1], &after[2]);
    let (base_a, off_a) = a.base().expect("a is planned");
    let (base_c, off_c) = c.base().expect("c is planned");
    let (_, off_b) = b.base().expect("b is planned");
    assert!(Arc::ptr_eq(base_a, base_c) && off_a == off_c, "a and c share storage");
    assert_ne!(off_a, off_b, "a and b are live together");
    assert_eq!(base_a.nbytes(), 2 * 4096 * 4, "two intermediates' worth of arena for three");
    assert!(after[3].base().is_none(), "the output's buffer is its own");
    drop((after, items));
    let unplanned = {
        let _off = Context::new(&[("NO_MEMORY_PLANNER", 1)]);
        written(&Tensor::schedule(&[chain(&x)]))
    };
    assert!(unplanned.iter().all(|b| b.base().is_none()), "NO_MEMORY_PLANNER=1 plans nothing");
    drop(unplanned);

    let planned = chain(&x).realize();
    let unplanned = {
        let _off = Context::new(&[("NO_MEMORY_PLANNER", 1)]);
        chain(&x).realize()
    };
    assert_eq!(bits(&planned), bits(&unplanned));
}

struct Mlp {
    l1: Linear,
    l2: Linear,
}
module!(Mlp { l1, l2 });

/// A JIT'd two-layer MLP trained with SGD for five steps: the losses and the final weights, and
/// the bytes the JIT holds after it has replayed.
fn train(planner: bool) -> (Vec<u32>, Vec<Vec<u32>>, u64) {
    let _ctx = Context::new(&[("NO_MEMORY_PLANNER", !planner as i64)]);
    Tensor::manual_seed(7);
    let net = Mlp { l1: Linear::new(32, 64, true), l2: Linear::new(64, 10, true) };
    let params = get_parameters(&net);
    Tensor::realize_all(&params).unwrap();
    let mut opt = SGD::new(&params, 0.05, 0.9, 0.0, false);
    let batches: Vec<(Tensor, Tensor)> =
        (0..5).map(|_| (Tensor::randn(&[16, 32]).realize(), Tensor::randint(&[16], 0, 10).realize())).collect();
    let before = GlobalCounters::mem_used();
    let mut losses = vec![];
    let held;
    {
        let mut jit = Jit::new(|b: &[Tensor]| {
            let _training = Context::new(&[("TRAINING", 1)]);
            opt.zero_grad();
            let loss = net.l2.forward(&net.l1.forward(&b[0]).relu()).sparse_categorical_crossentropy(
                &b[1],
                -1,
                0.0,
                Reduction::Mean,
            );
            loss.backward();
            let mut out = vec![loss];
            out.extend(opt.schedule_step());
            out
        });
        for (x, y) in &batches {
            losses.push(jit.call(&[x.clone(), y.clone()]).unwrap()[0].to_vec::<f32>()[0].to_bits());
        }
        held = GlobalCounters::mem_used() - before;
    }
    let weights = params.iter().map(bits).collect();
    (losses, weights, held)
}

#[test]
fn jit_training_step_is_identical_with_the_planner_and_holds_less() {
    let _s = serial();
    let (losses, weights, held) = train(true);
    let (losses_off, weights_off, held_off) = train(false);
    assert_eq!(losses, losses_off);
    assert_eq!(weights, weights_off);
    assert!(held < held_off, "the planned JIT holds {held} bytes, unplanned {held_off}");
}

/// Runs in a child process (below) with DEBUG=1: the chain realized, then JIT'd three times.
#[test]
fn planner_debug_workload() {
    let _s = serial();
    let x = Tensor::from_slice(&[0.5f32; 4096], &[4096]).realize();
    chain(&x).realize();
    let mut jit = Jit::new(|x: &[Tensor]| vec![chain(&x[0])]);
    for _ in 0..3 {
        jit.call(std::slice::from_ref(&x)).unwrap();
    }
}

#[test]
fn debug_1_reports_the_planner_savings() {
    let run = |planner: &str| {
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "planner_debug_workload", "--nocapture"])
            .env("DEBUG", "1")
            .env("NO_MEMORY_PLANNER", planner)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&child.stderr).into_owned();
        assert!(child.status.success(), "the child failed:\n{stderr}");
        stderr
    };
    // three 16 KB intermediates in two 16 KB slots
    let on = run("0");
    assert!(on.contains("\nmemory reduced from 0.05 MB -> 0.03 MB, 3 -> 1 bufs\n"), "{on}");
    assert!(on.contains("\nJIT memory reduced from 0.05 MB -> 0.03 MB, 3 -> 1 bufs\n"), "{on}");
    let off = run("1");
    assert!(!off.contains("memory reduced"), "{off}");
}

/// Safe calls could touch memory outside a block: the host allocator's copies and views trusted
/// the sizes they were given, a view held a bare address into a block that could be freed first,
/// and a CPU launch trusted its arguments' sizes. Each is now checked where memory is touched.
#[test]
fn host_memory_is_touched_only_inside_its_blocks() {
    use lazygrad::runtime::KernelArg;
    for device in ["CPU", "INTERP"] {
        let dev = get_device(device).unwrap();
        let alloc = dev.allocator();
        let block = alloc.alloc(8).unwrap();
        assert!(alloc.copyin(block.as_ref(), &[1; 16]).is_err(), "{device}: a copy in past the end");
        assert!(alloc.copyout(block.as_ref(), &mut [0; 16]).is_err(), "{device}: a copy out past the end");
        assert!(alloc.view(block.as_ref(), 4, 8).is_err(), "{device}: a view past the end");
        assert!(alloc.view(block.as_ref(), usize::MAX, 2).is_err(), "{device}: a view at an overflowing offset");
        // a view keeps its memory alive after the block it was made from is freed
        let view = alloc.view(block.as_ref(), 4, 4).unwrap();
        alloc.copyin(block.as_ref(), &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        drop(block);
        let mut out = [0u8; 4];
        alloc.copyout(view.as_ref(), &mut out).unwrap();
        assert_eq!(out, [5, 6, 7, 8], "{device}");
        // a launch over an argument claiming more bytes than its block holds is refused
        let t = Tensor::new([1.0f32; 64]).to(device).realize();
        let spec = match Tensor::schedule(&[&t + &t]).remove(0) {
            ScheduleItem::Kernel { ast, .. } => {
                lazygrad::codegen::get_program(&ast, &*lazygrad::renderer::for_target(dev.target())).unwrap()
            }
            ScheduleItem::Copy { .. } => panic!("a copy"),
        };
        let small = alloc.alloc(16).unwrap();
        let t_buf = [lazygrad::runtime::view_buffer(&t.uop()).unwrap()];
        let input = Buffer::kernel_args(&t_buf).unwrap()[0];
        let claimed = KernelArg { raw: small.as_ref(), bytes: 256 };
        let program = dev.compile(&spec).unwrap();
        // SAFETY: the program compares each argument's claimed bytes with its block before it
        // runs, which is what this tests
        let err = unsafe { program.run(&[claimed, input], &[]) }.unwrap_err();
        assert!(matches!(err, Error::Size { bytes: 256, capacity: 16, .. }), "{device}: {err}");
    }
}

/// A launch touched whatever buffers it was given: `CapturedJit::replay` and `ExecItem::run` are
/// public, and a smaller buffer than the capture's, or a variable's value past its range, let a
/// kernel read and write past the end. Each launch now checks every buffer against the bytes the
/// kernel reaches through it (`schedule::memory::param_reach`) and every value against its range.
#[test]
fn launches_stay_inside_their_buffers() {
    use lazygrad::engine::{capture, CapturedJit, ExecItem};
    use lazygrad::runtime::view_buffer;
    use lazygrad::schedule::VarVals;
    use lazygrad::{Error, Sint, Variable};
    let _s = serial();
    for device in common::devices() {
        let x = Tensor::arange(16).float().to(device).realize();
        let (y, items) = capture(|| (&x * 2.0).realize());
        let (x_buf, y_buf) = (view_buffer(&x.uop()).unwrap(), view_buffer(&y.uop()).unwrap());
        let jit = CapturedJit::new(items.clone(), &[x_buf], &[y_buf]);
        let ones = Arc::new(Buffer::new(device, 16, DType::FLOAT32));
        ones.copyin(&[1.0f32; 16].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>()).unwrap();
        let (out, _) = jit.replay(&[ones], &VarVals::new()).unwrap();
        assert_eq!(out[0].copyout().unwrap(), [2.0f32; 16].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>());
        // a replay on a buffer of 8 floats, where the kernel reads 16 through slot 1
        let short = Arc::new(Buffer::new(device, 8, DType::FLOAT32));
        let err =
            jit.replay(std::slice::from_ref(&short), &VarVals::new()).err().expect("a replay on a short buffer fails");
        assert!(
            matches!(&err, Error::OutOfBounds { slot: 1, reach, bytes: 32, .. } if *reach == (0..64)),
            "{device}: {err}"
        );
        assert!(jit.replay(&[], &VarVals::new()).is_err(), "{device}: a replay given no inputs");
        // the same step run directly, writing into the short buffer
        let mut item = items.last().unwrap().clone();
        item.bufs[0] = short;
        assert!(matches!(item.run(), Err(Error::OutOfBounds { slot: 0, .. })), "{device}");
        let empty = ExecItem { bufs: vec![], ..item };
        assert!(empty.run().is_err(), "{device}: a step given no buffers");

        // a variable's value is held to its range: the reach assumed it
        let n = Variable::new("n", 1, 16);
        let (_, items) = capture(|| x.shrink_sym(&[(Sint::Int(0), Sint::from(&n.bind(4)))]).contiguous().realize());
        let x_buf = view_buffer(&x.uop()).unwrap();
        let part_buf = items.last().unwrap().bufs[0].clone();
        let jit = CapturedJit::new(items, std::slice::from_ref(&x_buf), &[part_buf]);
        assert!(jit.replay(std::slice::from_ref(&x_buf), &VarVals::from([("n".to_string(), 16)])).is_ok(), "{device}");
        let err = jit.replay(&[x_buf], &VarVals::from([("n".to_string(), 17)])).err().expect("n = 17 fails");
        assert!(err.to_string().contains("n = 17, outside its range 1..=16"), "{device}: {err}");
    }
}

#[test]
fn from_blob_reads_and_writes_host_memory_in_place() {
    let mut host = vec![0i32; 4];
    let ptr = host.as_mut_ptr();
    let write = |values: [i32; 4]| {
        // SAFETY: `host` holds 4 elements and outlives every use of `ptr`
        values.iter().enumerate().for_each(|(i, v)| unsafe { ptr.add(i).write(*v) })
    };
    for device in ["CPU", "INTERP"] {
        write([0, 0, 0, 0]);
        // SAFETY: `host` holds the tensor's 16 bytes and outlives it
        let t = unsafe { Tensor::try_from_blob(ptr.cast(), &[2, 2], DType::INT32, device) }.unwrap();
        assert_eq!((t.device(), (&t + 1).to_vec::<i32>()), (device, vec![1, 1, 1, 1]));
        // what is written to the memory shows in what is computed after, with no copy in between
        write([0, 1, 2, 3]);
        assert_eq!((&t * 10).to_vec::<i32>(), [0, 10, 20, 30], "{device}");
        assert_eq!(t.permute(&[1, 0]).to_vec::<i32>(), [0, 2, 1, 3], "{device}");
        t.assign(&(&t + 5)).realize();
        // SAFETY: no tensor computes over the memory now
        assert_eq!(unsafe { std::slice::from_raw_parts(ptr, 4) }, [5, 6, 7, 8], "{device}");
        drop(t);
    }
    assert_eq!(host, [5, 6, 7, 8], "dropping the tensor leaves the memory to its owner");
    // SAFETY: the calls below fail before touching the memory
    let fails = |device: &str, ptr: *mut u8| unsafe { Tensor::try_from_blob(ptr, &[4], DType::INT32, device) };
    assert!(matches!(fails("CL", host.as_mut_ptr().cast()), Err(Error::Device(_))), "CL memory is not the host's");
    assert!(matches!(fails("CPU", std::ptr::null_mut()), Err(Error::Device(_))), "a null pointer");
    assert!(matches!(
        unsafe { Tensor::try_from_blob(host.as_mut_ptr().cast(), &[4], DType::INDEX, "CPU") },
        Err(Error::DTypes { .. })
    ));
    // an int32 element at an odd address
    let odd = unsafe { host.as_mut_ptr().cast::<u8>().add(1) };
    assert!(matches!(fails("CPU", odd), Err(Error::Value { .. })), "misaligned elements");
}

#[test]
fn lent_memory_off_the_64_byte_grid_refuses_streamed_stores_instead_of_faulting() {
    // an elementwise kernel writing 32 MiB or more streams whole registers past the caches, which
    // host memory takes only 64-byte aligned: lent memory 16 bytes off that grid is an error at
    // launch, while reading it and smaller writes work
    let n = 8 << 20;
    let mut host = vec![1.0f32; n + 16];
    let skip = host.as_ptr().align_offset(64) + 4;
    let ptr = host[skip..].as_mut_ptr();
    // SAFETY: `host` holds the n floats from `ptr` and outlives the tensor
    let t = unsafe { Tensor::try_from_blob(ptr.cast(), &[n], DType::FLOAT32, "CPU") }.unwrap();
    assert_eq!(t.sum(None, false).item::<f32>(), n as f32);
    let err = t.assign(&(&t * 2.0)).try_realize().err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("64-byte aligned"), "{err}");
    let part = t.shrink(&[(0, 1024)]);
    part.assign(&(&part * 3.0)).realize();
    drop((t, part));
    assert_eq!((host[skip], host[skip + 1023], host[skip + 1024]), (3.0, 3.0, 1.0));
}
