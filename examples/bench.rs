//! lazygrad's side of the benchmark: kernels (matmul, copy, fused elementwise, reduction, a
//! linear layer's product, conv), the latency of one small eager op
//! and training steps (beautiful_mnist, a small MLP), plus schedule+codegen and cold-start times
//! of the beautiful_mnist step, and SmolLM2-135M's prefill and decode (tokens per second; the
//! model from `tools/setup.sh --models`).
//!
//! `cargo run --release --example bench [-- NAME...]` runs every workload, or those whose name
//! starts with one of the NAMEs (`matmul`, `copy_elementwise`, `sum`, `linear`, `conv2d`,
//! `matvec`, `eager_op`, `mnist`, `mlp`, `llama`; `ranks_mnist_step` only when named, run under
//! `mpirun` by tools/bench_compare.py). Each figure is one stdout line `bench <name> <value> <unit>` (read by
//! tools/bench_compare.py); progress goes to stderr. Kernel figures are the best of several runs
//! after a warm-up, counting only time in kernels (inputs are realized first); steps are the
//! median wall time of JIT-replayed steps. With `BEAM=2` the library picks each kernel's opts by
//! BEAM search instead of the heuristics: the warm-up realization searches (or reads the search's
//! disk cache), so the figures time the kernels BEAM chose.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use lazygrad::engine::get_runner;
use lazygrad::engine::ScheduleItem;
use lazygrad::models::gpt::{Gpt, GptConfig};
use lazygrad::nn::layers::Linear;
use lazygrad::nn::optim::{adam, adamw, Optimizer};
use lazygrad::nn::state::get_parameters;
use lazygrad::tensor::ConvOpts;
use lazygrad::{module, DType, GlobalCounters, Jit, Tensor};

mod common;
use common::{train_step, Model};

/// Elements in the memory-bound workloads (16M f32 = 64 MiB per tensor).
const STREAM_LEN: usize = 16 << 20;
/// Floats read before each timed run of a memory-bound workload (1 GiB, at least 4x the L3: 32
/// to 260 MB on the hosts measured), so that every run streams from DRAM: left warm, a copy's 64
/// MiB source stays in L3 between runs while a fused kernel's 192 MiB of inputs do not, and the
/// two would time different memories.
const EVICT_LEN: usize = 256 << 20;
/// A best-of timing keeps sampling for at least this many seconds: load from elsewhere on this
/// shared machine comes in bursts of a second or so, and a row whose samples all fell in one (50
/// runs of a 256 matmul take 10 ms) read a third of its speed (tools/bench_compare.py does the same).
const MIN_SPAN_S: f64 = 2.0;
/// The memory-bound rows (those that empty the caches before each run) sample for longer: other
/// tenants' memory traffic comes in stretches of several seconds that cut a copy from ~85 to ~50
/// GB/s, and a row measured inside one times the neighbours, not the kernel (bench_compare.py
/// does the same).
const STREAM_SPAN_S: f64 = 10.0;
/// Batch size of the beautiful_mnist step (as in the example) and of the MLP step.
const MNIST_BATCH: usize = 512;
const MLP_BATCH: usize = 128;
/// Timed calls of the eager op (after 50 untimed ones).
const EAGER_OPS: usize = 1000;
/// The linear layer's batch, input and output features.
const LINEAR: (usize, usize, usize) = (256, 768, 768);
/// The decode step's matrix-vector products, `(out, in)` of the weight: a LLaMA layer's FFN
/// (SmolLM2's 576 -> 1536) and SmolLM2's output projection over its 49152 tokens.
const MATVECS: [(usize, usize); 2] = [(1536, 576), (49152, 576)];
/// Tokens of the LLaMA prefill (ids `LLAMA_FIRST_ID..`, as tools/llama_bench_torch.py feeds
/// transformers) and of its greedy decode after it.
const GPT_STEPS: usize = 5;
const LLAMA_PREFILL: usize = 256;
const LLAMA_DECODE: usize = 64;
const LLAMA_FIRST_ID: u32 = 1000;
/// The child-process modes that time the beautiful_mnist step's first call and its compile.
const COLD_START_MODE: &str = "--mnist-cold-start";
const SCHEDULE_CODEGEN_MODE: &str = "--mnist-schedule-codegen";

fn report(name: &str, value: f64, unit: &str) {
    println!("bench {name} {value:.3} {unit}");
}

/// The shortest time spent in kernels over at least `reps` realizations of `build()` spanning
/// `MIN_SPAN_S`, after one warm-up realization (which compiles); with `evict` (a memory-bound
/// row), each run empties the caches first (see `kernel_seconds`) and the runs span
/// `STREAM_SPAN_S`. Fails when realizing ran no kernel.
fn best_kernel_seconds(reps: usize, evict: Option<&Tensor>, build: impl Fn() -> Tensor) -> lazygrad::Result<f64> {
    build().try_realize()?;
    let span = if evict.is_some() { STREAM_SPAN_S } else { MIN_SPAN_S };
    let (first, mut best, mut runs) = (Instant::now(), f64::INFINITY, 0);
    while runs < reps || first.elapsed().as_secs_f64() < span {
        best = best.min(kernel_seconds(&build, evict)?);
        runs += 1;
    }
    Ok(best)
}

/// The time spent in kernels realizing `build()` once; with `evict` (an `EVICT_LEN` buffer), it
/// is read first, untimed, so the run finds none of its inputs in cache.
fn kernel_seconds(build: &impl Fn() -> Tensor, evict: Option<&Tensor>) -> lazygrad::Result<f64> {
    if let Some(evict) = evict {
        evict.sum(None, false).try_realize()?;
    }
    let out = build();
    GlobalCounters::reset();
    out.try_realize()?;
    if GlobalCounters::kernel_count() == 0 {
        return Err(lazygrad::Error::value("bench", "the benchmark graph ran no kernel"));
    }
    Ok(GlobalCounters::time_sum_s())
}

fn realized_rand(shape: &[usize]) -> Tensor {
    Tensor::rand(shape).realize()
}

/// The buffer read before each timed run of a memory-bound row, on a device whose memory is the
/// host's; a GPU-like device (CL, WEBGPU) has none: its caches are not the host's (and a WebGPU
/// adapter may not bind 1 GiB at once).
fn evict_buffer() -> lazygrad::Result<Option<Tensor>> {
    let device = lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    Ok((!device.target().gpu).then(|| realized_rand(&[EVICT_LEN])))
}

fn matmul(n: usize) -> lazygrad::Result<()> {
    let (a, b) = (realized_rand(&[n, n]), realized_rand(&[n, n]));
    // more runs for the small sizes, whose timings vary more (tools/bench_compare.py does the same)
    let reps = match n {
        256 => 50,
        512 => 20,
        1000 | 1024 => 8,
        _ => 3,
    };
    let seconds = best_kernel_seconds(reps, None, || a.matmul(&b))?;
    report(&format!("matmul_{n}"), 2.0 * (n * n * n) as f64 / seconds * 1e-9, "GFLOP/s");
    Ok(())
}

/// The GPU rows (run only when asked for by name, `bench gpu`): 4096² matmuls in float32,
/// float16 and bfloat16 (16-bit inputs summed in float32: tensor cores where the device has them),
/// and `relu(a*b+c)` over 64M floats, 4 arrays counted.
fn gpu_matmul(name: &str, dtype: DType) -> lazygrad::Result<()> {
    let n = 4096;
    let [a, b] = [(); 2].map(|_| Tensor::rand(&[n, n]).cast(dtype).realize());
    let seconds = best_kernel_seconds(5, None, || a.matmul(&b))?;
    report(name, 2.0 * (n * n * n) as f64 / seconds * 1e-12, "TFLOP/s");
    Ok(())
}

fn gpu_elementwise() -> lazygrad::Result<()> {
    let len = 64 << 20;
    let [a, b, c] = [(); 3].map(|_| realized_rand(&[len]));
    let seconds = best_kernel_seconds(10, None, || (&a * &b + &c).relu())?;
    report("gpu_elementwise_64m", (4 * len * 4) as f64 / seconds * 1e-9, "GB/s");
    Ok(())
}

/// GB/s of a workload over `STREAM_LEN` floats that moves `tensors_moved` tensors of that size.
fn report_stream(name: &str, tensors_moved: usize, seconds: f64) {
    report(name, (tensors_moved * STREAM_LEN * 4) as f64 / seconds * 1e-9, "GB/s");
}

/// The copy, the fused elementwise kernel and the sum of its results, timed in turn (the best of
/// at least 10 cold runs each, spanning `STREAM_SPAN_S`): this machine's memory bandwidth drifts from
/// second to second, and their ratios are what count. The sum reads what the fused kernel reads
/// and writes nothing: the bandwidth of its reads alone, a roofline the fused kernel cannot beat.
fn copy_elementwise() -> lazygrad::Result<()> {
    let [a, b, c] = [(); 3].map(|_| realized_rand(&[STREAM_LEN]));
    let evict = evict_buffer()?;
    // `contiguous()` of a realized buffer is the buffer itself; a negation is the copy kernel
    // lazygrad has: one read and one write per element
    let copy = || -&a;
    let fused = || (&a * &b + &c).relu();
    let reads = || fused().sum(None, false);
    let workloads: [(&str, usize, &dyn Fn() -> Tensor); 3] =
        [("copy", 2, &copy), ("elementwise", 4, &fused), ("elementwise_reads", 3, &reads)];
    for (_, _, build) in workloads {
        build().try_realize()?;
    }
    let (first, mut runs) = (Instant::now(), 0);
    let mut best = [f64::INFINITY; 3];
    while runs < 10 || first.elapsed().as_secs_f64() < STREAM_SPAN_S {
        for (best, (_, _, build)) in best.iter_mut().zip(workloads) {
            *best = best.min(kernel_seconds(&build, evict.as_ref())?);
        }
        runs += 1;
    }
    for (best, (name, tensors_moved, _)) in best.into_iter().zip(workloads) {
        report_stream(name, tensors_moved, best);
    }
    Ok(())
}

fn sum() -> lazygrad::Result<()> {
    let (a, evict) = (realized_rand(&[STREAM_LEN]), evict_buffer()?);
    report_stream("sum", 1, best_kernel_seconds(10, evict.as_ref(), || a.sum(None, false))?);
    Ok(())
}

/// A linear layer's product `x @ w.T` (batch 256, 768 -> 768 features, as in a BERT-base
/// layer): the weight is stored `(out, in)`, so both operands are contiguous along the reduction.
fn linear() -> lazygrad::Result<()> {
    let (batch, k, n) = LINEAR;
    let (x, w) = (realized_rand(&[batch, k]), realized_rand(&[n, k]));
    let seconds = best_kernel_seconds(20, None, || x.matmul(&w.transpose(0, 1)))?;
    report("linear", 2.0 * (batch * k * n) as f64 / seconds * 1e-9, "GFLOP/s");
    Ok(())
}

/// One token through a linear layer, `x @ w.T` with `x` one row: GB/s of weight read, the
/// caches emptied before each run (a model's weights do not stay in them from one token to the
/// next, and the product is bound by reading them).
fn matvec() -> lazygrad::Result<()> {
    let evict = evict_buffer()?;
    for (out, inp) in MATVECS {
        let (x, w) = (realized_rand(&[1, inp]), realized_rand(&[out, inp]));
        let seconds = best_kernel_seconds(20, evict.as_ref(), || x.matmul(&w.transpose(0, 1)))?;
        report(&format!("matvec_{out}x{inp}"), (out * inp * 4) as f64 / seconds * 1e-9, "GB/s");
    }
    Ok(())
}

/// SmolLM2-135M-Instruct from its GGUF: a 256-token prefill (chunks of `PREFILL_CHUNK` tokens
/// through the JIT'd prefill) and 64 greedy decode steps after it, best of 3 runs.
fn llama() -> lazygrad::Result<()> {
    use lazygrad::models::llama::Llama;
    let path =
        lazygrad::models::model_dir("smollm2-135m-instruct", "LLAMA_DIR").join("SmolLM2-135M-Instruct.Q4_1.gguf");
    let (model, _) = Llama::load(&path, LLAMA_PREFILL + LLAMA_DECODE)?;
    let (mut step, mut prefill) = (model.decode_jit(), model.prefill_jit());
    let prompt: Vec<u32> = (0..LLAMA_PREFILL as u32).map(|i| LLAMA_FIRST_ID + i).collect();
    // best of 3 runs, as the peers: the first also captures the JITs (compiling their kernels)
    let (mut prefill_best, mut decode_best) = (0.0f64, 0.0f64);
    for _ in 0..3 {
        let start = Instant::now();
        let mut logits = model.prefill_chunked(&prompt, 0, &mut prefill, &mut step)?;
        logits.realize();
        prefill_best = prefill_best.max(LLAMA_PREFILL as f64 / start.elapsed().as_secs_f64());
        let start = Instant::now();
        for pos in LLAMA_PREFILL..LLAMA_PREFILL + LLAMA_DECODE {
            let next = logits.argmax(None, false).item::<i32>() as u32;
            logits = step.call(&model.step_inputs(next, pos))?.remove(0);
        }
        logits.realize();
        decode_best = decode_best.max(LLAMA_DECODE as f64 / start.elapsed().as_secs_f64());
    }
    report("llama_prefill", prefill_best, "tok/s");
    report("llama_decode", decode_best, "tok/s");
    Ok(())
}

fn conv2d() -> lazygrad::Result<()> {
    let (n, c, hw) = (16, 64, 32);
    let (x, w) = (realized_rand(&[n, c, hw, hw]), realized_rand(&[c, c, 3, 3]));
    let opts = ConvOpts::default().padding(1);
    let seconds = best_kernel_seconds(5, None, || x.conv2d(&w, None, &opts))?;
    report("conv2d", 2.0 * (n * c * hw * hw * c * 9) as f64 / seconds * 1e-9, "GFLOP/s");
    Ok(())
}

/// A realized batch: `[batch, ..image]` standard-normal images and int32 labels in `0..10`.
fn random_batch(batch: usize, image: &[usize]) -> [Tensor; 2] {
    let shape: Vec<usize> = [batch].iter().chain(image).copied().collect();
    [Tensor::randn(&shape).realize(), Tensor::randint(&[batch], 0, 10).cast(DType::INT32).realize()]
}

/// The median wall time in seconds of `steps` JIT-replayed training steps of `forward` with Adam,
/// after the JIT's run, capture and a first replay.
fn median_step_seconds(
    forward: &dyn Fn(&Tensor) -> Tensor,
    opt: &mut dyn Optimizer,
    batch: &[Tensor; 2],
    steps: usize,
) -> lazygrad::Result<f64> {
    Ok(step_seconds(forward, opt, batch, steps)?.1)
}

/// The wall time in seconds of the first training step (the JIT's plain run) and the median of
/// `steps` JIT-replayed ones after the capture and a first replay.
fn step_seconds(
    forward: &dyn Fn(&Tensor) -> Tensor,
    opt: &mut dyn Optimizer,
    batch: &[Tensor; 2],
    steps: usize,
) -> lazygrad::Result<(f64, f64)> {
    let mut step = Jit::new(|b: &[Tensor]| train_step(forward, opt, &b[0], &b[1]));
    let mut times = vec![];
    for i in 0..3 + steps {
        let start = Instant::now();
        let loss = step.call(batch)?[0].item::<f32>();
        if !loss.is_finite() {
            return Err(lazygrad::Error::value("bench", format!("training step {i}: loss is {loss}")));
        }
        times.push(start.elapsed().as_secs_f64());
    }
    let mut replayed = times.split_off(3);
    replayed.sort_by(f64::total_cmp);
    Ok((times[0], replayed[replayed.len() / 2]))
}

/// The latency of one small eager op, `relu(a + b)` on 64x64 realized on its own (no JIT): graph,
/// schedule (cached after the first), launch and wait; the median of `EAGER_OPS` calls.
/// Many devices: an all-reduce (the sum of two shards) of `STREAM_LEN` floats over CPU:0 and
/// CPU:1, beside a plain copy of as many from one to the other; GB/s of the tensor (NCCL's
/// algorithm bandwidth), the best of at least 10 runs each.
fn all_reduce() -> lazygrad::Result<()> {
    let devices = ["CPU", "CPU:1"];
    let shards = Tensor::rand(&[2, STREAM_LEN]).try_shard(&devices, Some(0))?.realize();
    let one = realized_rand(&[STREAM_LEN]);
    let reduce = || shards.sum(0, false);
    let copy = || one.to("CPU:1");
    let workloads: [(&str, &dyn Fn() -> Tensor); 2] = [("all_reduce_cpu2", &reduce), ("copy_cpu_cpu1", &copy)];
    for (name, build) in workloads {
        build().try_realize()?;
        let (first, mut runs, mut best) = (Instant::now(), 0, f64::INFINITY);
        while runs < 10 || first.elapsed().as_secs_f64() < MIN_SPAN_S {
            best = best.min(kernel_seconds(&build, None)?);
            runs += 1;
        }
        report(name, (STREAM_LEN * 4) as f64 / best * 1e-9, "GB/s");
    }
    Ok(())
}

fn eager_op() -> lazygrad::Result<()> {
    let (a, b) = (realized_rand(&[64, 64]), realized_rand(&[64, 64]));
    let mut times: Vec<f64> = (0..EAGER_OPS + 50)
        .map(|_| {
            let start = Instant::now();
            (&a + &b).relu().try_realize().map(|_| start.elapsed().as_secs_f64())
        })
        .collect::<lazygrad::Result<_>>()?;
    let mut timed = times.split_off(50);
    timed.sort_by(f64::total_cmp);
    report("eager_op", timed[timed.len() / 2] * 1e6, "us");
    Ok(())
}

fn mnist_step() -> lazygrad::Result<()> {
    let model = Model::new();
    let batch = random_batch(MNIST_BATCH, &[1, 28, 28]);
    let mut opt = adam(&get_parameters(&model), 0.001);
    let seconds = median_step_seconds(&|x| model.forward(x), &mut opt, &batch, mnist_steps())?;
    report("mnist_step", seconds * 1e3, "ms");
    Ok(())
}

/// Timed beautiful_mnist steps: the median of 7 (`MNIST_STEPS`), as a burst of load from
/// elsewhere on a shared machine can cover a step or two.
fn mnist_steps() -> usize {
    lazygrad::helpers::getenv("MNIST_STEPS", 7).max(1) as usize
}

/// The beautiful_mnist step data parallel over the processes of an MPI job (built with
/// `--features mpi`, started by `mpirun -np N`): each rank its part of every batch, the optimizer
/// averaging the gradients over the ranks; rank 0 reports `ranks_mnist_step<N>` in ms (N = 1 run
/// alone: the same program in one process, beside it).
fn ranks_mnist_step() -> lazygrad::Result<()> {
    let world = lazygrad::runtime::job::world()?;
    let (rank, ranks) = (world.rank(), world.size());
    if !MNIST_BATCH.is_multiple_of(ranks) {
        return Err(lazygrad::Error::value(
            "bench",
            format!("a batch of {MNIST_BATCH} does not split over {ranks} ranks"),
        ));
    }
    let model = Model::new();
    // the same batch on every rank (one seed); this rank's rows of it
    let rows = (rank * MNIST_BATCH / ranks, (rank + 1) * MNIST_BATCH / ranks);
    let [x, y] = random_batch(MNIST_BATCH, &[1, 28, 28]);
    let batch = [x.shrink(&[rows, (0, 1), (0, 28), (0, 28)]).realize(), y.shrink(&[rows]).realize()];
    let mut opt = adam(&get_parameters(&model), 0.001);
    let seconds = median_step_seconds(&|x| model.forward(x), &mut opt, &batch, mnist_steps())?;
    if rank == 0 {
        report(&format!("ranks_mnist_step{ranks}"), seconds * 1e3, "ms");
    }
    Ok(())
}

/// The GPT step's model and batch (sequences, tokens in each): by default 2 layers 256 wide in 4
/// heads, a 1024-token vocabulary, 4 sequences of 256 tokens; env `GPT_LAYERS`, `GPT_WIDTH`,
/// `GPT_HEADS`, `GPT_SEQ` and `GPT_BATCH` set other shapes (tools/bench_compare.py's peer reads
/// the same).
fn gpt_shape() -> (GptConfig, usize, usize) {
    let knob = |name: &str, default: i64| lazygrad::helpers::getenv(name, default).max(1) as usize;
    let (seq, batch) = (knob("GPT_SEQ", 256), knob("GPT_BATCH", 4));
    let (layers, heads, width) = (knob("GPT_LAYERS", 2), knob("GPT_HEADS", 4), knob("GPT_WIDTH", 256));
    (GptConfig { vocab: 1024, context: seq, layers, heads, width }, batch, seq)
}

/// One AdamW training step of a small GPT (`gpt_shape`) on random tokens, next-token loss over
/// every position; the median of `GPT_STEPS` JIT'd steps, and the first step's time (graph,
/// schedule, codegen and compiles, or the kernel cache's programs when it is warm).
fn gpt_step() -> lazygrad::Result<()> {
    let (config, b, t) = gpt_shape();
    let model = Gpt::new(config);
    let tokens = |n: usize| Tensor::randint(&[n], 0, config.vocab as i64).realize();
    let batch = [tokens(b * t).reshape(&[b, t]).realize(), tokens(b * t)];
    let mut opt = adamw(&get_parameters(&model), 3e-4, 0.1);
    let forward = |x: &Tensor| model.forward(x).reshape(&[b * t, config.vocab]);
    let (first, median) = step_seconds(&forward, &mut opt, &batch, GPT_STEPS)?;
    report("gpt_step", median * 1e3, "ms");
    report("gpt_first_step", first, "s");
    Ok(())
}

/// The 784-128-10 perceptron of the MLP step.
struct Mlp {
    l1: Linear,
    l2: Linear,
}
module!(Mlp { l1, l2 });

fn mlp_step() -> lazygrad::Result<()> {
    let mlp = Mlp { l1: Linear::new(784, 128, true), l2: Linear::new(128, 10, true) };
    let batch = random_batch(MLP_BATCH, &[784]);
    let forward = |x: &Tensor| mlp.l2.forward(&mlp.l1.forward(x).relu());
    let mut opt = adam(&get_parameters(&mlp), 0.001);
    let seconds = median_step_seconds(&forward, &mut opt, &batch, 50)?;
    report("mlp_step", seconds * 1e3, "ms");
    Ok(())
}

/// The beautiful_mnist model with realized parameters, its optimizer and a realized batch: what
/// exists before the first train step.
fn mnist_before_first_step() -> lazygrad::Result<(Model, Box<dyn Optimizer>, [Tensor; 2])> {
    let model = Model::new();
    let params = get_parameters(&model);
    Tensor::realize_all(&params)?;
    let opt = Box::new(adam(&params, 0.001));
    Ok((model, opt, random_batch(MNIST_BATCH, &[1, 28, 28])))
}

/// Child mode: the first train step (graph, schedule, codegen, compile, run), in seconds.
fn mnist_cold_start() -> lazygrad::Result<()> {
    let (model, mut opt, [x, y]) = mnist_before_first_step()?;
    let start = Instant::now();
    Tensor::realize_all(&train_step(&|x| model.forward(x), opt.as_mut(), &x, &y))?;
    report("mnist_cold_start", start.elapsed().as_secs_f64(), "s");
    Ok(())
}

/// Child mode: from building the train step's graph to having a program for every kernel,
/// nothing run, in milliseconds (compiled kernels come from the disk cache when it is warm).
fn mnist_schedule_codegen() -> lazygrad::Result<()> {
    let (model, mut opt, [x, y]) = mnist_before_first_step()?;
    let start = Instant::now();
    let outputs = train_step(&|x| model.forward(x), opt.as_mut(), &x, &y);
    let mut kernels = 0;
    for item in Tensor::schedule(&outputs) {
        if let ScheduleItem::Kernel { ast, bufs } = item {
            get_runner(bufs[0].device(), &ast)?;
            kernels += 1;
        }
    }
    report("mnist_schedule_codegen", start.elapsed().as_secs_f64() * 1e3, "ms");
    report("mnist_step_kernels", kernels as f64, "kernels");
    Ok(())
}

/// Run this program in `mode` in a fresh process with its compiled-kernel cache in `cache`.
fn run_child(mode: &str, cache: &Path) -> lazygrad::Result<()> {
    let status = Command::new(std::env::current_exe()?).arg(mode).env("LAZYGRAD_CACHE", cache).status()?;
    if !status.success() {
        return Err(lazygrad::Error::value("bench", format!("bench {mode} failed ({status})")));
    }
    Ok(())
}

/// Cold start with an empty kernel cache, then schedule+codegen with the cache it filled.
fn mnist_compile() -> lazygrad::Result<()> {
    let cache: PathBuf = std::env::temp_dir().join(format!("lazygrad-bench-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let result = run_child(COLD_START_MODE, &cache).and_then(|_| run_child(SCHEDULE_CODEGEN_MODE, &cache));
    let _ = std::fs::remove_dir_all(&cache);
    result
}

type Workload = (&'static str, fn() -> lazygrad::Result<()>);

const WORKLOADS: &[Workload] = &[
    ("matmul_256", || matmul(256)),
    ("matmul_512", || matmul(512)),
    ("matmul_1000", || matmul(1000)),
    ("matmul_1024", || matmul(1024)),
    ("matmul_2048", || matmul(2048)),
    ("copy_elementwise", copy_elementwise),
    ("sum", sum),
    ("linear", linear),
    ("matvec", matvec),
    ("conv2d", conv2d),
    ("eager_op", eager_op),
    ("all_reduce", all_reduce),
    ("mnist_step", mnist_step),
    ("ranks_mnist_step", ranks_mnist_step),
    ("mlp_step", mlp_step),
    ("gpt_step", gpt_step),
    ("mnist_compile", mnist_compile),
    ("llama", llama),
    ("gpu_matmul_4096_float32", || gpu_matmul("gpu_matmul_4096_float32", DType::FLOAT32)),
    ("gpu_matmul_4096_float16", || gpu_matmul("gpu_matmul_4096_float16", DType::FLOAT16)),
    ("gpu_matmul_4096_bfloat16", || gpu_matmul("gpu_matmul_4096_bfloat16", DType::BFLOAT16)),
    ("gpu_elementwise_64m", gpu_elementwise),
];

fn main() -> std::process::ExitCode {
    lazygrad::helpers::exit_code(run())
}

fn run() -> lazygrad::Result<()> {
    lazygrad::runtime::get_device(&lazygrad::runtime::default_device())?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    Tensor::manual_seed(0);
    match args.first().map(String::as_str) {
        Some(COLD_START_MODE) => return mnist_cold_start(),
        Some(SCHEDULE_CODEGEN_MODE) => return mnist_schedule_codegen(),
        _ => {}
    }
    // the GPU rows only when named (they are sized for a GPU), and the MPI job's (tools/bench_compare.py
    // starts it under mpirun)
    let chosen = |name: &str| match args.is_empty() {
        true => !name.starts_with("gpu_") && !name.starts_with("ranks_"),
        false => args.iter().any(|a| name.starts_with(a.as_str())),
    };
    for (name, run) in WORKLOADS.iter().filter(|(name, _)| chosen(name)) {
        eprintln!("lazygrad: {name}");
        run()?;
    }
    Ok(())
}
