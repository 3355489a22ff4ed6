"""beautiful_mnist in PyTorch (CPU): the reference for examples/beautiful_mnist.rs.

Same model, optimizer, batch size, steps and evaluation as the lazygrad example, reading the same
IDX files. Prints one `key value` line per figure (read by tools/mnist_compare.sh):
steps, wall time, step time after warm-up, test accuracy, peak RSS. Settings by env var as in the
example: BS (512), STEPS (70), FASHION, SGD / MUON (Muon is not in torch: falls back to SGD), LR,
SEED, THREADS (torch threads, default: all cores). SAVE_INIT=<file>: write the initial weights and
every step's batch indices (`samples`, [STEPS, BS] int32) as safetensors before training;
INIT=<file>: train from such a file instead of drawing them (the lazygrad example reads the same
file: tools/accuracy_parity.sh PAIRED=1). Runs in tools/.venv-torch (created on first use).
"""

import os
import sys

from venv_bootstrap import ensure_torch_venv

if __name__ == "__main__":
    ensure_torch_venv(__file__)

import gzip  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402


def env(name, default):
    return type(default)(os.environ.get(name, default))


def find_dataset(fashion):
    """The directory holding the four IDX files, searched as lazygrad's mnist() searches."""
    name = "fashion-mnist" if fashion else "mnist"
    dirs = [os.environ.get("FASHION_MNIST_DIR" if fashion else "MNIST_DIR"),
            os.path.expanduser(f"~/.cache/lazygrad/datasets/{name}")]
    if fashion:
        dirs.append("/usr/share/datasets/fashion-mnist")
    for d in filter(None, dirs):
        if os.path.exists(os.path.join(d, "train-images-idx3-ubyte.gz")):
            return d
    sys.exit(f"no {name} IDX files found in {dirs}; run the lazygrad example once to fetch them")


def idx(path, offset):
    with gzip.open(path) as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def load(fashion):
    d = find_dataset(fashion)
    images = lambda n: idx(os.path.join(d, n), 16).reshape(-1, 1, 28, 28)  # noqa: E731
    labels = lambda n: idx(os.path.join(d, n), 8).astype(np.int64)  # noqa: E731
    return (torch.from_numpy(images("train-images-idx3-ubyte.gz").copy()),
            torch.from_numpy(labels("train-labels-idx1-ubyte.gz").copy()),
            torch.from_numpy(images("t10k-images-idx3-ubyte.gz").copy()),
            torch.from_numpy(labels("t10k-labels-idx1-ubyte.gz").copy()))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.bn1 = nn.Conv2d(1, 32, 5), nn.Conv2d(32, 32, 5), nn.BatchNorm2d(32)
        self.c3, self.c4, self.bn2 = nn.Conv2d(32, 64, 3), nn.Conv2d(64, 64, 3), nn.BatchNorm2d(64)
        self.fc = nn.Linear(576, 10)

    def forward(self, x):
        x = F.max_pool2d(self.bn1(F.relu(self.c2(F.relu(self.c1(x))))), 2)
        x = F.max_pool2d(self.bn2(F.relu(self.c4(F.relu(self.c3(x))))), 2)
        return self.fc(x.flatten(1))


def main():
    bs, steps, fashion = env("BS", 512), env("STEPS", 70), env("FASHION", 0) != 0
    torch.manual_seed(env("SEED", 42))
    torch.set_num_threads(env("THREADS", os.cpu_count()))
    x_train, y_train, x_test, y_test = load(fashion)
    x_test = x_test.float()
    model = Model()
    samples_all = torch.randint(0, x_train.shape[0], (steps, bs))
    if os.environ.get("INIT"):
        state = load_file(os.environ["INIT"])
        samples_all = state.pop("samples").long()
        own = model.state_dict()
        model.load_state_dict({k: v.to(own[k].dtype).reshape(own[k].shape) for k, v in state.items()})
    if os.environ.get("SAVE_INIT"):
        # scalars (BatchNorm's num_batches_tracked) as lazygrad (and tinygrad) shape them: [1]
        state = {k: v.reshape(-1) if v.dim() == 0 else v.contiguous() for k, v in model.state_dict().items()}
        save_file({**state, "samples": samples_all.int()}, os.environ["SAVE_INIT"])
    if env("SGD", 0) or env("MUON", 0):
        opt = torch.optim.SGD(model.parameters(), lr=env("LR", 0.01), momentum=0.9, nesterov=True)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=env("LR", 0.001))

    def test_accuracy():
        model.eval()
        with torch.no_grad():
            acc = (model(x_test).argmax(1) == y_test).float().mean().item() * 100
        model.train()
        return acc

    start, step_times, acc = time.perf_counter(), [], float("nan")
    for i in range(steps):
        t0 = time.perf_counter()
        samples = samples_all[i]
        x, y = x_train[samples].float(), y_train[samples]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        loss = loss.item()
        step_times.append(time.perf_counter() - t0)
        # the same per-step line as the lazygrad example's, on stderr
        print(f"\rstep {i + 1:4}/{steps} loss {loss:6.3f}", end="", file=sys.stderr, flush=True)
        if i % 10 == 9 or i + 1 == steps:
            acc = test_accuracy()
    wall = time.perf_counter() - start
    steady = step_times[3:] if len(step_times) > 3 else step_times
    print(f"steps {steps}")
    print(f"wall_s {wall:.3f}")
    print(f"train_s {sum(step_times):.3f}")
    print(f"step_s {sum(steady) / len(steady):.4f}")
    print(f"test_accuracy_pct {acc:.2f}")
    print(f"peak_rss_mb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.1f}")


if __name__ == "__main__":
    main()
