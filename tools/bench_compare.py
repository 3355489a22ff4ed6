"""lazygrad beside numpy, PyTorch and tinygrad: one run, one markdown table.

Runs `cargo run --release --example bench` (lazygrad's figures), then the same workloads in
numpy, PyTorch (eager) and tinygrad (CPU device, clang), and the LLaMA rows in transformers and
llama.cpp (tools/llama_bench_torch.py, tools/llama_bench_llamacpp.py), each peer in its own
process, all on 2 threads, and prints a table with the done-when ratios; then lazygrad and tinygrad again on the
OpenCL device (`DEV=CL`; PoCL here, OpenCL on the CPU), and lazygrad on the WebGPU device
(`DEV=WEBGPU`; Mesa's lavapipe here, Vulkan on the CPU; its mnist step the median of 3), the
matmul, fused elementwise and mnist_step workloads alone, in a second table with its own ratios
(lazygrad CL vs tinygrad CL). Lines `bench <name> <value> <unit>` are
the protocol between the parts (examples/bench.rs prints the same). Usage, from tools/bench_compare.sh
(which installs clang-14 for tinygrad first):

    python3 tools/bench_compare.py [--beam] [--cl-only]

The `lazygrad BEAM=2` column is filled for the matmul rows (a second lazygrad run of the matmul
workloads with BEAM=2; its searches are cached on disk, so only the first run pays for them);
`--beam` runs every lazygrad workload with BEAM=2. Runs in tools/.venv-bench (created on first
use, torch + numpy + tinygrad). `--cl-only` measures the device table's columns alone.
`--peer NAME` runs one peer's workloads alone (numpy, torch, torch-gpt, tinygrad-cold-start, tinygrad; the
last wants the CACHEDB that tinygrad-cold-start filled); the tinygrad peer measures only the
workloads whose names start with one of env `BENCH_ONLY`'s comma-separated prefixes, when set.
"""

import os
import sys

from venv_bootstrap import ensure_pinned_venv

if __name__ == "__main__":
    ensure_pinned_venv(__file__, ".venv-bench", "requirements-bench.txt")

import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

THREADS = 2
STREAM_LEN = 16 << 20  # floats in the memory-bound workloads, as in examples/bench.rs
# floats read before each timed run of a memory-bound workload, so that it streams from DRAM
# rather than from what the last run left in the L3, 32 to 260 MB on the hosts measured
# (examples/bench.rs EVICT_LEN)
EVICT_LEN = 256 << 20
MATMUL_SIZES = (256, 512, 1000, 1024, 2048)
CONV = dict(n=16, c=64, hw=32)  # conv2d 3x3, padding 1, C -> C
EAGER_OPS = 1000  # timed calls of the eager op (examples/bench.rs EAGER_OPS)
LINEAR = (256, 768, 768)  # x @ w.T: batch, input and output features (examples/bench.rs LINEAR)
MATVECS = ((1536, 576), (49152, 576))  # one row through x @ w.T: w's (out, in) (examples/bench.rs MATVECS)
MNIST_BATCH, MLP_BATCH = 512, 128
GPT_STEPS = 5


def gpt_shape():
    """The GPT step's model and batch (sequences, tokens), by default 2 layers 256 wide in 4 heads
    over 4 x 256 tokens; env GPT_LAYERS, GPT_WIDTH, GPT_HEADS, GPT_SEQ, GPT_BATCH set other shapes
    (examples/bench.rs gpt_shape reads the same)."""

    def knob(name, default):
        return max(1, int(os.environ.get(name) or default))

    seq, batch = knob("GPT_SEQ", 256), knob("GPT_BATCH", 4)
    config = dict(vocab=1024, context=seq, layers=knob("GPT_LAYERS", 2), heads=knob("GPT_HEADS", 4),
                  width=knob("GPT_WIDTH", 256))
    return config, (batch, seq)


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (name, label, unit): the table's rows, in order
ROWS = [
    *[(f"matmul_{n}", f"matmul f32 {n}", "GFLOP/s") for n in MATMUL_SIZES],
    ("copy", "copy 16M f32 (2 threads; numpy: 1)", "GB/s"),
    ("elementwise", "relu(a*b+c) 16M f32", "GB/s"),
    ("elementwise_reads", "sum(relu(a*b+c)) 16M f32: its reads alone", "GB/s"),
    ("sum", "sum 16M f32", "GB/s"),
    ("linear", "linear x @ w.T, 256x768 @ (768x768).T", "GFLOP/s"),
    ("matvec_1536x576", "matvec 1x576 @ (1536x576).T, weight from DRAM (a decode step's FFN)", "GB/s"),
    ("matvec_49152x576", "matvec 1x576 @ (49152x576).T, weight from DRAM (SmolLM2's output)", "GB/s"),
    ("conv2d", "conv2d 3x3 16x64x32x32 -> 64", "GFLOP/s"),
    ("eager_op", "eager relu(a + b) on 64x64, realized alone", "us"),
    ("all_reduce_cpu2", "all-reduce (sum) of 16M floats over CPU:0..1, GB/s of the tensor", "GB/s"),
    ("copy_cpu_cpu1", "copy of 16M floats from CPU:0 to CPU:1", "GB/s"),
    ("mnist_step", "beautiful_mnist train step, BS 512", "ms"),
    ("ranks_mnist_step1", "the mnist step as an MPI program, 1 process (2 threads)", "ms"),
    ("ranks_mnist_step2", "the mnist step data parallel over 2 MPI processes (1 thread each, 256 rows each)", "ms"),
    ("mlp_step", "MLP 784-128-10 train step, BS 128", "ms"),
    ("gpt_step", "GPT train step: 2 layers 256 wide, 4 x 256 tokens, AdamW (PyTorch eager)", "ms"),
    ("gpt_step_compiled", "the GPT step, PyTorch under torch.compile (lazygrad: its JIT, as above)", "ms"),
    ("gpt_first_step", "the GPT step's first call (lazygrad: kernel cache as the last run left it)", "s"),
    ("mnist_schedule_codegen", "mnist step schedule+codegen (warm cache)", "ms"),
    ("mnist_cold_start", "mnist step cold start (empty cache)", "s"),
    ("llama_prefill", "SmolLM2-135M prefill, 256 tokens (PyTorch: transformers; both peers batched)", "tok/s"),
    ("llama_decode", "SmolLM2-135M greedy decode after it (PyTorch: transformers; llama.cpp: Q4_1)", "tok/s"),
]
COLUMNS = ["lazygrad", "lazygrad BEAM=2", "numpy", "PyTorch", "tinygrad", "llama.cpp"]
# the second table: lazygrad and tinygrad on the OpenCL device and lazygrad on the WebGPU one, these
# workloads (name prefixes, as examples/bench.rs takes them: "mnist" alone would add its
# mnist_compile; "copy_elementwise" measures the copy and the fused kernel) and their rows
CL_COLUMNS = ["lazygrad CL", "tinygrad CL", "lazygrad WEBGPU"]
CL_WORKLOADS = ("matmul", "copy_elementwise", "mnist_step")
CL_ROWS = [row for row in ROWS if row[0].startswith(("matmul", "elementwise", "mnist_step"))]
# its done-when rows: name -> whether higher is better
CL_DONE_WHEN = {"matmul_1024": True, "mnist_step": False}
# a best-of timing keeps sampling for at least this many seconds (examples/bench.rs MIN_SPAN_S):
# load from elsewhere on this shared machine comes in bursts of a second or so, and a row whose
# samples all fell in one (50 runs of a 256 matmul take 10 ms) read a third of its speed
MIN_SPAN_S = 2.0
# rows that empty the caches before each run (memory-bound) sample for longer: other tenants'
# memory traffic comes in stretches of several seconds (examples/bench.rs STREAM_SPAN_S)
STREAM_SPAN_S = 10.0


def report(name, value, unit):
    print(f"bench {name} {value:.3f} {unit}", flush=True)


def timed_runs(run, reps, warmup, before=None, min_span=0.0):
    """The wall times of at least `reps` calls of `run()`, after `warmup` calls, and of more until
    `min_span` seconds have passed; `before()`, when given, runs untimed ahead of each timed call."""
    for _ in range(warmup):
        run()
    times, first = [], time.perf_counter()
    while len(times) < reps or time.perf_counter() - first < min_span:
        if before:
            before()
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return times


def best_seconds(run, reps, warmup=1, before=None):
    """The shortest wall time of `run()` over at least `reps` calls spanning `MIN_SPAN_S` (with
    `before`, a memory-bound row's cache emptying, `STREAM_SPAN_S`), after `warmup` calls."""
    return min(timed_runs(run, reps, warmup, before, STREAM_SPAN_S if before else MIN_SPAN_S))


def cache_evictor():
    """A function that reads an `EVICT_LEN` host buffer, emptying the caches of every peer's
    (host) tensors."""
    import numpy as np

    evict = np.ones(EVICT_LEN, dtype=np.float32)
    return lambda: evict.sum()


def median_seconds(run, reps, warmup):
    """The median wall time of `reps` calls of `run()`, after `warmup` calls."""
    return statistics.median(timed_runs(run, reps, warmup))


def matmul_reps(n):
    """Timed runs per matmul size (more for the small ones, whose timings vary more)."""
    return {256: 50, 512: 20, 1000: 8, 1024: 8}.get(n, 3)


def report_matmul(n, seconds):
    report(f"matmul_{n}", 2 * n**3 / seconds * 1e-9, "GFLOP/s")


def report_stream(name, tensors_moved, seconds):
    report(name, tensors_moved * STREAM_LEN * 4 / seconds * 1e-9, "GB/s")


def report_linear(seconds):
    batch, k, n = LINEAR
    report("linear", 2 * batch * k * n / seconds * 1e-9, "GFLOP/s")


def report_matvecs(rng_matrix, product, evict):
    """The matvec rows: `product(x, w)` of one row `x` and each weight of `MATVECS` (made by
    `rng_matrix(rows, cols)`), GB/s of weight read, the caches emptied before each run."""
    for out, inp in MATVECS:
        x, w = rng_matrix(1, inp), rng_matrix(out, inp)
        seconds = best_seconds(lambda: product(x, w), 20, before=evict)
        report(f"matvec_{out}x{inp}", out * inp * 4 / seconds * 1e-9, "GB/s")


def report_conv(seconds):
    n, c, hw = CONV["n"], CONV["c"], CONV["hw"]
    report("conv2d", 2 * n * c * hw * hw * c * 9 / seconds * 1e-9, "GFLOP/s")


# ---- numpy ---------------------------------------------------------------------------------


def run_numpy():
    import numpy as np

    rng = np.random.default_rng(0)
    for n in MATMUL_SIZES:
        a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
        report_matmul(n, best_seconds(lambda: a @ b, matmul_reps(n)))
    a, b, c = (rng.random(STREAM_LEN, dtype=np.float32) for _ in range(3))
    out, evict = np.empty_like(a), cache_evictor()
    report_stream("copy", 2, best_seconds(lambda: np.copyto(out, a), 10, before=evict))
    report_stream("elementwise", 4, best_seconds(lambda: np.maximum(a * b + c, 0), 10, before=evict))
    report_stream("sum", 1, best_seconds(lambda: a.sum(), 10, before=evict))
    batch, k, n = LINEAR
    x, w = rng.random((batch, k), dtype=np.float32), rng.random((n, k), dtype=np.float32)
    report_linear(best_seconds(lambda: x @ w.T, 20))
    report_matvecs(lambda r, c: rng.random((r, c), dtype=np.float32), lambda x, w: x @ w.T, evict)
    a, b = rng.random((64, 64), dtype=np.float32), rng.random((64, 64), dtype=np.float32)
    report("eager_op", median_seconds(lambda: np.maximum(a + b, 0), EAGER_OPS, 50) * 1e6, "us")


# ---- PyTorch -------------------------------------------------------------------------------


def torch_step_seconds(model, batch, steps, warmup=3):
    """Median wall time of an eager Adam training step of `model` on `batch`."""
    import torch
    import torch.nn.functional as F

    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    x, y = batch

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss.item()

    return median_seconds(step, steps, warmup)


def torch_batch(batch, image):
    import torch

    return torch.randn(batch, *image), torch.randint(0, 10, (batch,))


def run_torch():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from mnist_torch import Model

    torch.manual_seed(0)
    torch.set_num_threads(THREADS)
    for n in MATMUL_SIZES:
        a, b = torch.rand(n, n), torch.rand(n, n)
        report_matmul(n, best_seconds(lambda: a @ b, matmul_reps(n)))
    a, b, c = (torch.rand(STREAM_LEN) for _ in range(3))
    out, evict = torch.empty_like(a), cache_evictor()
    report_stream("copy", 2, best_seconds(lambda: out.copy_(a), 10, before=evict))
    report_stream("elementwise", 4, best_seconds(lambda: torch.relu(a * b + c), 10, before=evict))
    report_stream("sum", 1, best_seconds(lambda: a.sum(), 10, before=evict))
    batch, k, n = LINEAR
    x, w = torch.rand(batch, k), torch.rand(n, k)
    report_linear(best_seconds(lambda: F.linear(x, w), 20))
    report_matvecs(torch.rand, F.linear, evict)
    a, b = torch.rand(64, 64), torch.rand(64, 64)
    report("eager_op", median_seconds(lambda: torch.relu(a + b), EAGER_OPS, 50) * 1e6, "us")
    x, w = torch.rand(CONV["n"], CONV["c"], CONV["hw"], CONV["hw"]), torch.rand(CONV["c"], CONV["c"], 3, 3)
    report_conv(best_seconds(lambda: F.conv2d(x, w, padding=1), 5))

    model, batch = Model(), torch_batch(MNIST_BATCH, (1, 28, 28))
    report("mnist_cold_start", torch_step_seconds(model, batch, steps=1, warmup=0), "s")
    report("mnist_step", torch_step_seconds(model, batch, steps=7) * 1e3, "ms")
    mlp = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    report("mlp_step", torch_step_seconds(mlp, torch_batch(MLP_BATCH, (784,)), steps=100) * 1e3, "ms")
    run_torch_gpt()


def run_torch_gpt():
    import torch
    from gpt_torch import Gpt, train_step

    torch.manual_seed(0)
    torch.set_num_threads(THREADS)
    config, (b, t) = gpt_shape()
    vocab = config["vocab"]
    tokens, targets = torch.randint(0, vocab, (b, t)), torch.randint(0, vocab, (b * t,))
    # GPT_COMPILED=0: PyTorch eager alone (torch.compile takes a minute or more per shape)
    variants = (("gpt_step", False), ("gpt_step_compiled", True))[: 1 if os.environ.get("GPT_COMPILED") == "0" else 2]
    for name, compiled in variants:
        step = train_step(Gpt(**config), compiled)
        report(name, median_seconds(lambda: step(tokens, targets), GPT_STEPS, 3) * 1e3, "ms")


# ---- tinygrad ------------------------------------------------------------------------------


class Sequential:
    """tinygrad layers applied in order (tinygrad's get_parameters finds them in `layers`)."""

    def __init__(self, *layers):
        self.layers = list(layers)

    def __call__(self, x):
        return x.sequential(self.layers)


def tinygrad_mnist_model():
    """tinygrad's beautiful_mnist model (examples/beautiful_mnist.py in tinygrad's repo)."""
    from tinygrad import Tensor, nn

    return Sequential(
        nn.Conv2d(1, 32, 5), Tensor.relu, nn.Conv2d(32, 32, 5), Tensor.relu, nn.BatchNorm(32), Tensor.max_pool2d,
        nn.Conv2d(32, 64, 3), Tensor.relu, nn.Conv2d(64, 64, 3), Tensor.relu, nn.BatchNorm(64), Tensor.max_pool2d,
        lambda x: x.flatten(1), nn.Linear(576, 10),
    )


def tinygrad_training(model, batch):
    """A realized batch, the model's parameters realized, and a plain (un-JIT'd) step function
    returning the loss and the optimizer's updates, lazily."""
    from tinygrad import Tensor, dtypes, nn
    from tinygrad.helpers import Context

    params = nn.state.get_parameters(model)
    Tensor.realize(*params)
    opt = nn.optim.Adam(params, lr=0.001)
    x, y = batch
    x, y = Tensor.randn(*x).realize(), Tensor.randint(y, low=0, high=10).cast(dtypes.int32).realize()

    def step(x, y):
        with Context(TRAINING=1):
            opt.zero_grad()
            loss = model(x).sparse_categorical_crossentropy(y).backward()
            return [loss, *opt.schedule_step()]

    return step, (x, y)


def tinygrad_mnist_training():
    return tinygrad_training(tinygrad_mnist_model(), ((MNIST_BATCH, 1, 28, 28), (MNIST_BATCH,)))


def tinygrad_step_seconds(step, batch, steps):
    """Median wall time of JIT-replayed steps (after the JIT's run, capture and a first replay)."""
    from tinygrad import Tensor, TinyJit

    jit_step = TinyJit(lambda x, y: Tensor.realize(*step(x, y)))  # realize returns the loss
    return median_seconds(lambda: jit_step(*batch).item(), steps, warmup=3)


def tinygrad_kernel_seconds(fn, inputs, reps, before=None):
    """Best wall time of a JIT-replayed `fn(*inputs)` (kernel time plus the JIT's launch cost),
    `before()` running untimed ahead of each timed call."""
    from tinygrad import Device, TinyJit

    jit = TinyJit(lambda *xs: fn(*xs).realize())

    def run():
        jit(*inputs)
        Device[Device.DEFAULT].synchronize()

    return best_seconds(run, reps, warmup=3, before=before)


def chosen(*names):
    """Whether a peer measures any of the workloads `names`: all of them unless env `BENCH_ONLY`
    lists comma-separated name prefixes (as examples/bench.rs's arguments), then those it matches."""
    prefixes = [p for p in os.environ.get("BENCH_ONLY", "").split(",") if p]
    return not prefixes or any(name.startswith(p) for name in names for p in prefixes)


def run_tinygrad():
    """Kernels, then the mnist step's schedule+codegen (with CACHEDB warm) and train steps; those
    `BENCH_ONLY` chooses (see `chosen`)."""
    from tinygrad import Tensor, nn
    from tinygrad.engine.realize import compile_linear, run_linear

    Tensor.manual_seed(0)
    for n in filter(lambda n: chosen(f"matmul_{n}"), MATMUL_SIZES):
        a, b = Tensor.rand(n, n).realize(), Tensor.rand(n, n).realize()
        report_matmul(n, tinygrad_kernel_seconds(lambda a, b: a @ b, (a, b), min(matmul_reps(n), 5)))
    if chosen("copy", "elementwise", "sum"):
        a, b, c = (Tensor.rand(STREAM_LEN).realize() for _ in range(3))
        evict = cache_evictor()
        if chosen("copy"):
            report_stream("copy", 2, tinygrad_kernel_seconds(lambda a: -a, (a,), 10, before=evict))
        if chosen("elementwise"):
            report_stream("elementwise", 4, tinygrad_kernel_seconds(lambda a, b, c: (a * b + c).relu(), (a, b, c), 10, before=evict))
        if chosen("sum"):
            report_stream("sum", 1, tinygrad_kernel_seconds(lambda a: a.sum(), (a,), 10, before=evict))
    if chosen("linear"):
        batch, k, n = LINEAR
        x, w = Tensor.rand(batch, k).realize(), Tensor.rand(n, k).realize()
        report_linear(tinygrad_kernel_seconds(lambda x, w: x @ w.T, (x, w), 5))
    if chosen("eager_op"):
        a, b = Tensor.rand(64, 64).realize(), Tensor.rand(64, 64).realize()
        report("eager_op", median_seconds(lambda: (a + b).relu().realize(), EAGER_OPS // 10, 10) * 1e6, "us")
    if chosen("conv2d"):
        x = Tensor.rand(CONV["n"], CONV["c"], CONV["hw"], CONV["hw"]).realize()
        w = Tensor.rand(CONV["c"], CONV["c"], 3, 3).realize()
        report_conv(tinygrad_kernel_seconds(lambda x, w: x.conv2d(w, padding=1), (x, w), 3))

    if chosen("mnist_schedule_codegen", "mnist_step"):
        step, batch = tinygrad_mnist_training()
        if chosen("mnist_schedule_codegen"):
            # schedule+codegen first (the cold-start run filled CACHEDB); then this step runs once
            # and the JIT'd steps reuse its compiled programs
            start = time.perf_counter()
            linear = Tensor.schedule_linear(*step(*batch))
            compile_linear(linear)
            report("mnist_schedule_codegen", (time.perf_counter() - start) * 1e3, "ms")
            run_linear(linear)
        if chosen("mnist_step"):
            report("mnist_step", tinygrad_step_seconds(step, batch, steps=2) * 1e3, "ms")
    if chosen("mlp_step"):
        mlp = Sequential(nn.Linear(784, 128), Tensor.relu, nn.Linear(128, 10))
        step, batch = tinygrad_training(mlp, ((MLP_BATCH, 784), (MLP_BATCH,)))
        report("mlp_step", tinygrad_step_seconds(step, batch, steps=30) * 1e3, "ms")


def run_tinygrad_cold_start():
    """The first train step (schedule, codegen, compile, run); run with an empty CACHEDB."""
    from tinygrad import Tensor

    step, batch = tinygrad_mnist_training()
    start = time.perf_counter()
    Tensor.realize(*step(*batch))
    report("mnist_cold_start", time.perf_counter() - start, "s")


PEERS = {
    "numpy": run_numpy,
    "torch": run_torch,
    "torch-gpt": run_torch_gpt,
    "tinygrad": run_tinygrad,
    "tinygrad-cold-start": run_tinygrad_cold_start,
}

# ---- the driver ----------------------------------------------------------------------------


def pinned_env(**extra):
    """The environment for a measured process: 2 threads everywhere (PoCL's CPU device too: its
    threads are `POCL_MAX_PTHREAD_COUNT` in PoCL 3, `POCL_CPU_MAX_CU_NUM` from 4), OpenBLAS
    untuned knobs unset."""
    env = dict(os.environ)
    for knob in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(knob, None)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUM_CPU_THREADS",
                "POCL_MAX_PTHREAD_COUNT", "POCL_CPU_MAX_CU_NUM"):
        env[var] = str(THREADS)
    env.update(extra)
    return env


def collect(cmd, env, what):
    """Run `cmd`, passing its stderr through, and return its `bench` lines as {name: value}."""
    print(f"== {what}", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, text=True)
    figures = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "bench":
            figures[parts[1]] = float(parts[2])
    if proc.returncode != 0:
        print(f"!! {what} failed (exit {proc.returncode}); its figures so far are kept", file=sys.stderr)
    return figures


def run_peer(name, **env):
    return collect([sys.executable, os.path.abspath(__file__), "--peer", name], pinned_env(**env), name)


def run_lazygrad(*workloads, **env):
    cmd = ["cargo", "run", "--release", "--quiet", "--example", "bench", "--", *workloads]
    return collect(cmd, pinned_env(**env), "lazygrad" + "".join(f" {k}={v}" for k, v in env.items()))


def tinygrad_env(cache_db):
    return dict(DEV="CPU", CC=os.environ.get("TINYGRAD_CC", "clang-14"), CACHEDB=cache_db)


def measure_cl(results):
    """Add the CL columns to `results`: lazygrad and tinygrad on the OpenCL device, `CL_WORKLOADS`
    alone (tinygrad with an empty CACHEDB of its own, its cold start not measured)."""
    results["lazygrad CL"] = run_lazygrad(*CL_WORKLOADS, DEV="CL")
    with tempfile.TemporaryDirectory(prefix="tinygrad-bench-cl-") as cache:
        env = dict(DEV="CL", CACHEDB=os.path.join(cache, "cache.db"), BENCH_ONLY="matmul,elementwise,mnist_step")
        results["tinygrad CL"] = run_peer("tinygrad", **env)
    # lavapipe runs an mnist step in tens of seconds: the median of 3; the Vulkan loader wants a
    # runtime folder
    runtime = os.environ.get("XDG_RUNTIME_DIR") or tempfile.mkdtemp(prefix="lazygrad-xdg-")
    results["lazygrad WEBGPU"] = run_lazygrad(*CL_WORKLOADS, DEV="WEBGPU", MNIST_STEPS="3", XDG_RUNTIME_DIR=runtime)
    return results


def measure_all(with_beam):
    results = {column: {} for column in COLUMNS}
    results["lazygrad"] = run_lazygrad()
    results["lazygrad BEAM=2"] = run_lazygrad(*([] if with_beam else ["matmul"]), BEAM="2")
    results["numpy"] = run_peer("numpy")
    results["PyTorch"] = run_peer("torch")
    llama = [sys.executable, os.path.join(REPO, "tools", "llama_bench_torch.py")]
    results["PyTorch"].update(collect(llama, pinned_env(), "transformers (tools/llama_bench_torch.py)"))
    llama_cpp = [sys.executable, os.path.join(REPO, "tools", "llama_bench_llamacpp.py")]
    results["llama.cpp"] = collect(llama_cpp, pinned_env(), "llama.cpp (tools/llama_bench_llamacpp.py)")
    with tempfile.TemporaryDirectory(prefix="tinygrad-bench-") as cache:
        env = tinygrad_env(os.path.join(cache, "cache.db"))
        results["tinygrad"] = run_peer("tinygrad-cold-start", **env)
        results["tinygrad"].update(run_peer("tinygrad", **env))
    results["lazygrad"].update(run_ranks())
    return results


def run_ranks():
    """The data-parallel mnist step across processes: examples/bench built with `--features mpi`
    (Open MPI from tools/setup.sh), its `ranks_mnist_step` alone and under `mpirun -np 2`, the
    machine's threads shared between the ranks."""
    build = ["cargo", "build", "--release", "--quiet", "--features", "mpi", "--example", "bench"]
    if subprocess.run(build, cwd=REPO).returncode != 0:
        print("!! building the bench with --features mpi failed; no ranks_ rows", file=sys.stderr)
        return {}
    bench = [os.path.join(REPO, "target", "release", "examples", "bench"), "ranks_mnist_step"]
    figures = collect(bench, pinned_env(), "lazygrad ranks_mnist_step, 1 process")
    per_rank = str(max(THREADS // 2, 1))
    mpirun = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", "NUM_CPU_THREADS"]
    figures.update(collect(mpirun + bench, pinned_env(NUM_CPU_THREADS=per_rank), "lazygrad ranks_mnist_step, 2 processes"))
    return figures


def cl_device():
    """The first OpenCL device, "platform: device" as `clinfo -l` names them ("?" without clinfo)."""
    try:
        lines = subprocess.run(["clinfo", "-l"], capture_output=True, text=True).stdout.splitlines()
    except OSError:
        return "?"
    names = [line.split(":", 1)[1].strip() for line in lines if "#" in line and ":" in line][:2]
    return ": ".join(names) if len(names) == 2 else "?"


def fmt(value):
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def done_when(name, results):
    """The issue's done-when ratio for a row: lazygrad's speed relative to the reference
    (above 1: lazygrad is faster), or None where the row has none."""
    ours = results["lazygrad"].get("gpt_step" if name == "gpt_step_compiled" else name)
    copies = [results[c].get("copy") for c in ("lazygrad", "PyTorch", "tinygrad")]
    copies = [c for c in copies if c]
    references = {
        **{
            f"matmul_{n}": ("PyTorch (line: 0.95x)", results["PyTorch"].get(f"matmul_{n}"), True)
            for n in MATMUL_SIZES
        },
        "linear": ("PyTorch (line: 0.95x)", results["PyTorch"].get(name), True),
        "conv2d": ("PyTorch (line: 0.95x)", results["PyTorch"].get(name), True),
        "elementwise": ("2-thread copy", max(copies) if copies else None, True),
        # a latency at most 1.5x PyTorch's is a speed of at least 1/1.5 of it
        "eager_op": ("PyTorch (line: 0.67x)", results["PyTorch"].get(name), False),
        "mnist_step": ("PyTorch (line: 1.5x)", results["PyTorch"].get(name), False),
        "ranks_mnist_step2": ("1 process", results["lazygrad"].get("ranks_mnist_step1"), False),
        "mlp_step": ("PyTorch eager", results["PyTorch"].get(name), False),
        "gpt_step": ("PyTorch eager (line: 1.0x)", results["PyTorch"].get(name), False),
        "gpt_step_compiled": ("torch.compile", results["PyTorch"].get(name), False),
        "mnist_cold_start": ("tinygrad", results["tinygrad"].get(name), False),
        "llama_prefill": ("transformers (line: 1.0x)", results["PyTorch"].get(name), True),
        "llama_decode": ("llama.cpp (line: 1.0x)", results["llama.cpp"].get(name), True),
    }
    fused = results["lazygrad"].get("elementwise")
    if name == "elementwise_reads" and ours and fused:
        # runs per second of the fused kernel over those of a kernel that only reads its inputs
        return f"fused kernel: {(fused / 4) / (ours / 3):.2f}x the speed of its reads alone"
    if name not in references:
        return ""
    label, theirs, higher_is_better = references[name]
    if not ours or not theirs:
        return f"n/a vs {label}"
    ratio = ours / theirs if higher_is_better else theirs / ours
    return f"{ratio:.2f}x {label}"


def cl_done_when(name, results):
    """The CL table's done-when ratio for a row: lazygrad CL's speed relative to tinygrad CL's
    (above 1: lazygrad is faster), or "" where the row has none."""
    if name not in CL_DONE_WHEN:
        return ""
    ours, theirs = results["lazygrad CL"].get(name), results["tinygrad CL"].get(name)
    if not ours or not theirs:
        return "n/a vs tinygrad CL"
    return f"{ours / theirs if CL_DONE_WHEN[name] else theirs / ours:.2f}x tinygrad CL"


def markdown_table(results, title, columns, rows, ratio):
    """The table of `rows` in `columns`, each row ending with its done-when `ratio`."""
    lines = [
        f"| {title} | unit | " + " | ".join(columns) + f" | done-when: {columns[0]} speed vs |",
        "|---|---|" + "---:|" * len(columns) + "---|",
    ]
    for name, label, unit in rows:
        cells = [fmt(results[c].get(name)) for c in columns]
        lines.append(f"| {label} | {unit} | " + " | ".join(cells) + f" | {ratio(name, results)} |")
    return "\n".join(lines)


def table(results):
    return markdown_table(results, "workload", COLUMNS, ROWS, done_when)


def cl_table(results):
    return markdown_table(results, "workload (devices behind GPU APIs)", CL_COLUMNS, CL_ROWS, cl_done_when)


def main():
    if "--peer" in sys.argv:
        PEERS[sys.argv[sys.argv.index("--peer") + 1]]()
        return
    with_beam, cl_only = "--beam" in sys.argv, "--cl-only" in sys.argv
    start = time.perf_counter()
    results = measure_cl({} if cl_only else measure_all(with_beam))
    if not cl_only:
        print(table(results) + "\n")
    print(cl_table(results))
    print(
        f"\n{THREADS} threads everywhere; kernels: best of several runs, steps: median; "
        + ("" if cl_only else "memory-bound rows run with the caches emptied first; the copy roofline is the best 2-thread copy above; ")
        + f"CL: DEV=CL, the first OpenCL device ({cl_device()}); WEBGPU: DEV=WEBGPU, its first adapter "
        + f"(Mesa's lavapipe where no GPU is). Whole run: {time.perf_counter() - start:.0f} s."
    )


if __name__ == "__main__":
    main()
