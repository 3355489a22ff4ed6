#!/usr/bin/env python3
"""Generate tests/fixtures/optim_ref.safetensors: every optimizer of src/nn/optim.rs run for a few
steps in float64, read by tests/optim.rs.

Usage: python3 tools/gen_optim_ref.py [--check]

Each case is one optimizer with its hyperparameters (SGD plain, with momentum and weight decay,
with Nesterov momentum; Adam; AdamW with weight decay; Adam through LAMB with other betas and eps;
LAMB with weight decay and a zero parameter, whose trust ratio is 1; Muon) over a few parameters,
stepped STEPS times with given gradients and a learning rate halved from step LR_CHANGE on.
torch.optim computes SGD, Adam and AdamW (their updates are tinygrad's); LAMB and Muon are written
out below exactly as tinygrad's nn/optim.py defines them (torch has no LAMB, and its Muon differs).

Tensors: `<case>.param<i>` the initial parameters and `<case>.grad<i>.step<k>` the gradients
(float32, what lazygrad starts from), `<case>.param<i>.step<k>` the parameters after step k
(float64). The `__metadata__` entry `cases` is JSON: a list of {"name", "optimizer" (sgd, adam,
adamw, lamb or muon), "hyper" (the constructor's arguments besides the parameters), "lr" (the
learning rate of each step), "params" (how many)}. Runs in tools/.venv-torch (created on first
use); `--check` compares instead of writing.
"""

import json
import os

from venv_bootstrap import ensure_torch_venv, write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "optim_ref.safetensors")

if __name__ == "__main__":
    ensure_torch_venv(__file__)

import torch  # noqa: E402

from gen_train_ref import safetensors  # noqa: E402

STEPS, LR_CHANGE = 5, 3
SHAPES = [(3, 4), (5,), (2, 3)]
# Muon orthogonalizes matrices: a wide one, a tall one (transposed for the iteration), a conv
# weight (flattened to rows) and a vector (a column, as tinygrad reshapes it)
MUON_SHAPES = [(3, 5), (6, 4), (4, 2, 3, 3), (5,)]
NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)

CASES = [
    ("sgd", "sgd", {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "nesterov": False}),
    ("sgd_momentum_wd", "sgd", {"lr": 0.05, "momentum": 0.9, "weight_decay": 0.01, "nesterov": False}),
    ("sgd_nesterov_wd", "sgd", {"lr": 0.05, "momentum": 0.8, "weight_decay": 0.05, "nesterov": True}),
    ("adam", "adam", {"lr": 0.01}),
    ("adamw", "adamw", {"lr": 0.01, "weight_decay": 0.1}),
    ("adam_betas", "lamb", {"lr": 0.02, "b1": 0.8, "b2": 0.99, "eps": 1e-6, "weight_decay": 0.0, "adam": True}),
    ("lamb_wd", "lamb", {"lr": 0.01, "b1": 0.9, "b2": 0.999, "eps": 1e-6, "weight_decay": 0.01, "adam": False}),
    ("muon", "muon", {"lr": 0.02, "momentum": 0.95, "weight_decay": 0.01, "ns_steps": 5}),
]


class TorchOptim:
    """A torch.optim optimizer, stepped with given gradients and learning rate."""

    def __init__(self, opt):
        self.opt = opt

    def step(self, params, grads, lr):
        self.opt.param_groups[0]["lr"] = lr
        for p, g in zip(params, grads):
            p.grad = g
        self.opt.step()


class Lamb:
    """tinygrad's LAMB: Adam's update plus weight decay, scaled by the trust ratio |p| / |update|
    (1 where either norm is 0, and always 1 with `adam`)."""

    def __init__(self, h, params):
        self.h, self.t = h, 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def step(self, params, grads, lr):
        h = self.h
        self.t += 1
        for p, g, m, v in zip(params, grads, self.m, self.v):
            m.mul_(h["b1"]).add_((1 - h["b1"]) * g)
            v.mul_(h["b2"]).add_((1 - h["b2"]) * g * g)
            m_hat, v_hat = m / (1 - h["b1"] ** self.t), v / (1 - h["b2"] ** self.t)
            up = m_hat / (v_hat.sqrt() + h["eps"]) + h["weight_decay"] * p
            r1, r2 = p.square().sum().sqrt(), up.square().sum().sqrt()
            ratio = 1.0 if h["adam"] or r1 == 0 or r2 == 0 else r1 / r2
            p.sub_(lr * ratio * up)


def newton_schulz(g, steps=5):
    """tinygrad's Tensor.newton_schulz of a matrix: normalized, then `steps` times
    G = a G + b (G G^T) G + c (G G^T)^2 G, on the transpose when it has more rows than columns."""
    if g.shape[0] > g.shape[1]:
        return newton_schulz(g.T, steps).T
    a, b, c = NS_COEFFICIENTS
    x = g / (g.square().sum().sqrt() + 1e-7)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + b * (gram @ x) + c * (gram @ (gram @ x))
    return x


class Muon:
    """tinygrad's Muon (LARS without trust ratio): weight decay added to the gradient, Nesterov
    momentum, then the update reshaped to (rows, -1) and orthogonalized by Newton-Schulz."""

    def __init__(self, h, params):
        self.h = h
        self.b = [torch.zeros_like(p) for p in params]

    def step(self, params, grads, lr):
        h = self.h
        for p, g, b in zip(params, grads, self.b):
            g = g + h["weight_decay"] * p
            b.mul_(h["momentum"]).add_(g)
            g = g + h["momentum"] * b
            g = newton_schulz(g.reshape(g.shape[0], -1), h["ns_steps"]).reshape(g.shape)
            p.sub_(lr * g)


def reference(kind, h, params):
    """The reference optimizer for lazygrad's `kind` with hyperparameters `h`: torch.optim where its
    update is tinygrad's (SGD, Adam, AdamW, and LAMB without trust ratio or weight decay, which is
    Adam), else the implementations above."""
    if kind == "sgd":
        return TorchOptim(torch.optim.SGD(params, lr=h["lr"], momentum=h["momentum"],
                                          weight_decay=h["weight_decay"], nesterov=h["nesterov"]))
    if kind == "adam":
        return TorchOptim(torch.optim.Adam(params, lr=h["lr"], betas=(0.9, 0.999), eps=1e-8))
    if kind == "adamw":
        return TorchOptim(torch.optim.AdamW(params, lr=h["lr"], betas=(0.9, 0.999), eps=1e-8,
                                            weight_decay=h["weight_decay"]))
    if kind == "lamb" and h["adam"] and h["weight_decay"] == 0:
        return TorchOptim(torch.optim.Adam(params, lr=h["lr"], betas=(h["b1"], h["b2"]), eps=h["eps"]))
    return {"lamb": Lamb, "muon": Muon}[kind](h, params)


def trajectory(opt, init, grads, lrs):
    """The parameters (float64, from `init`) after each step of `opt` with `grads` and `lrs`."""
    params = [p.double().requires_grad_(True) for p in init]
    opt = opt(params)
    steps = []
    for gs, lr in zip(grads, lrs):
        with torch.no_grad():
            opt.step(params, [g.double() for g in gs], lr)
        steps.append([p.detach().clone() for p in params])
    return steps


def run(name, kind, h, gen):
    """The case's tensors (initial parameters, gradients, the parameters after each step) and its
    metadata entry."""
    shapes = MUON_SHAPES if kind == "muon" else SHAPES
    init = [torch.rand(s, generator=gen) * 2 - 1 for s in shapes]
    if kind == "lamb" and not h["adam"]:
        init[-1].zero_()  # |p| = 0: the trust ratio is 1
    grads = [[torch.randn(s, generator=gen) * (i + 1) for i, s in enumerate(shapes)] for _ in range(STEPS)]
    lrs = [h["lr"] * (0.5 if k >= LR_CHANGE else 1.0) for k in range(STEPS)]
    steps = trajectory(lambda ps: reference(kind, h, ps), init, grads, lrs)
    if kind == "lamb" and h["adam"]:
        # the LAMB written out above agrees with torch's Adam where they are the same optimizer
        lamb = trajectory(lambda ps: Lamb(h, ps), init, grads, lrs)
        assert all(torch.allclose(a, b, rtol=1e-12, atol=0) for s, t in zip(steps, lamb) for a, b in zip(s, t))
    out = {f"{name}.param{i}": p for i, p in enumerate(init)}
    out.update({f"{name}.grad{i}.step{k}": g for k, gs in enumerate(grads) for i, g in enumerate(gs)})
    out.update({f"{name}.param{i}.step{k}": p for k, ps in enumerate(steps) for i, p in enumerate(ps)})
    return out, {"name": name, "optimizer": kind, "hyper": h, "lr": lrs, "params": len(shapes)}


def main():
    gen = torch.Generator().manual_seed(0)
    tensors, cases = {}, []
    for name, kind, h in CASES:
        out, meta = run(name, kind, h, gen)
        tensors.update(out)
        cases.append(meta)
    data = safetensors(tensors, {"cases": json.dumps(cases, separators=(",", ":"))})
    write_or_check(OUT, data, f"{len(CASES)} cases, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
