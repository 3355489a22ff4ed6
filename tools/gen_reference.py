#!/usr/bin/env python3
"""Generate tests/fixtures/torch_ref.bin: PyTorch reference results (forward and gradients) for
lazygrad's Tensor API and nn layers, read by tests/torch_ref.rs.

Usage: python3 tools/gen_reference.py [--check] [--list]

The script creates its own virtual environment in tools/.venv-torch (torch and numpy pinned by
tools/requirements-torch.txt; CPU only is used) on first use and re-executes itself there.
`--check` regenerates the fixture in memory and exits non-zero if the committed file differs;
`--list` prints the case count per group and op.

Every case names an op key (the same keys the Rust table in tests/torch_ref.rs maps to lazygrad
calls), small JSON parameters, and its inputs. Inputs are built here from a seeded generator; an
input may reach the op through a view (`"pre": ["T", ""]` per input: `T` swaps the last two axes,
`P` reverses all axes, `S` drops the first row of axis 0), so the op sees a non-contiguous
tensor while the gradient is taken with respect to the stored (base) input. The torch functions
follow tinygrad's semantics where they differ from torch's defaults (int32 indices, int32 sums,
`gelu` with the tanh approximation, `linear` weights stored as (in, out), class axis -1 for
`sparse_categorical_crossentropy`, ...). An `nn.*` case runs the torch.nn module itself with the
case's inputs after the call's arguments as the module's parameters (so their gradients are the
parameters' gradients). For every output with a float dtype a fixed random
`upstream` of its shape is stored, and the gradients are those of `sum((out * upstream).sum())`
with respect to every input flagged `requires_grad` that the outputs depend on.

File format (little-endian):
    magic b"LGTR", u32 version, u32 case count, then per case:
        str name, str group, str op, str params (JSON),
        f64 atol, f64 rtol, f64 grad_atol, f64 grad_rtol,
        u8 input count,  per input:  u8 requires_grad, array
        u8 output count, per output: array value, u8 has_upstream, [array upstream]
        u8 grad count,   per grad:   u8 input index, array gradient
    str:   u16 byte length + UTF-8 bytes
    array: str dtype (torch name without "torch."), u8 ndim, u32 dims[ndim], u32 byte length,
           raw row-major bytes
"""

import os
import sys

from venv_bootstrap import ensure_torch_venv, write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "fixtures", "torch_ref.bin")


if __name__ == "__main__":
    ensure_torch_venv(__file__)

import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402
from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.func import functional_call  # noqa: E402

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.manual_seed(0)
random.seed(0)
RNG = np.random.default_rng(20240607)

# tinygrad's test tolerances (test/test_ops.py helper_test_op)
ATOL, RTOL, GRAD_ATOL, GRAD_RTOL = 1e-6, 1e-3, 1e-4, 1e-3

DTYPES = {
    "bool": torch.bool, "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "uint16": torch.uint16, "uint32": torch.uint32, "uint64": torch.uint64,
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
}
NAMES = {v: k for k, v in DTYPES.items()}
I32 = torch.int32

# ---------------------------------------------------------------------------------------------
# input specs: a base tensor (built now from the seeded generator) and a requires_grad flag


class In:
    def __init__(self, value, grad):
        self.value, self.grad = value, grad and value.dtype.is_floating_point


def _t(a, dtype):
    return torch.from_numpy(np.array(a, order="C")).to(DTYPES[dtype])


def F32(*shape, lo=-2.0, hi=2.0, dtype="float32", grad=True):
    """Uniform floats in [lo, hi)."""
    return In(_t(RNG.uniform(lo, hi, shape).astype(np.float32), dtype), grad)


def POS(*shape, lo=0.5, hi=3.0, **kw):
    return F32(*shape, lo=lo, hi=hi, **kw)


def AWAY(*shape, lo=0.25, hi=2.0, grad=True):
    """Floats with |x| in [lo, hi) and a random sign: away from kinks at 0."""
    sign = RNG.choice([-1.0, 1.0], shape)
    return In(_t((sign * RNG.uniform(lo, hi, shape)).astype(np.float32), "float32"), grad)


def DIST(*shape, grad=True, scale=0.25):
    """Distinct floats (a shuffled grid): no ties for max/sort/pool."""
    n = math.prod(shape)
    v = (RNG.permutation(n) - n / 2) * scale + RNG.uniform(-0.05, 0.05)
    return In(_t(v.reshape(shape).astype(np.float32), "float32"), grad)


def INT(*shape, lo=-10, hi=10, dtype="int32"):
    return In(_t(RNG.integers(lo, hi, shape, endpoint=False).astype(np.int64), dtype), False)


def BOOL(*shape, p=0.5):
    return In(_t(RNG.random(shape) < p, "bool"), False)


def VAL(values, dtype="float32", grad=False):
    return In(_t(np.array(values, dtype=np.float64), dtype), grad)


def SPECIAL(*shape):
    """Floats with inf, -inf and nan mixed in."""
    v = RNG.uniform(-3, 3, shape).reshape(-1)
    for i, s in enumerate([np.inf, -np.inf, np.nan, 0.0]):
        if i < v.size:
            v[(i * 7) % v.size] = s
    return In(_t(v.reshape(shape).astype(np.float32), "float32"), False)


def PERM(n, rows, cols=None, transpose=False):
    """int32 scatter indices: `rows` rows, each the first `cols` of a permutation of range(n), so no
    two sources target the same place (torch leaves the winner of duplicates unspecified)."""
    v = np.stack([RNG.permutation(n)[:cols] for _ in range(rows)])
    return In(_t(v.T if transpose else v, "int32"), False)


# ---------------------------------------------------------------------------------------------
# helpers for tinygrad semantics


def sum_dtype(dt):
    """tinygrad's sum_acc_dtype, with float16/bfloat16 sums cast back."""
    if dt in (torch.uint8, torch.uint16, torch.uint32):
        return torch.uint32
    if dt == torch.uint64:
        return torch.uint64
    if dt in (torch.bool, torch.int8, torch.int16, torch.int32):
        return torch.int32
    return dt


def axes(p, x):
    a = p.get("axis")
    if a is None:
        return tuple(range(x.ndim))
    return tuple(a) if isinstance(a, list) else (a,)


def tg_sum(x, p):
    return x.sum(dim=axes(p, x), keepdim=p.get("keepdim", False)).to(sum_dtype(x.dtype))


def tg_reduce(fn):
    """A torch reduction over tinygrad-style `axis` (None, int or list) and `keepdim`."""

    def run(x, p):
        out = x[0]
        k = p.get("keepdim", False)
        for a in sorted((a % out.ndim for a in axes(p, out)), reverse=True) if out.ndim else []:
            out = fn(out, a, k)
        return out

    return run


def idx_tuple(spec, xs):
    """A torch index from the JSON index spec: an int, a [start, stop, step] slice (nulls allowed),
    "new" (None), "...", ":" or {"t": k} (input k as an integer-tensor index). torch has no
    negative slice steps: such a slice becomes a tensor of positions (so at most one per index,
    and not together with tensor indices, where it would broadcast with them)."""
    shape, real = xs[0].shape, [s for s in spec if s not in ("new", "...")]
    out, dim = [], 0
    for s in spec:
        if s == "...":
            out.append(Ellipsis)
            dim += len(shape) - len(real)
            continue
        if s == "new":
            out.append(None)
            continue
        if isinstance(s, int):
            out.append(s)
        elif isinstance(s, list) and (s[2] or 1) < 0:
            out.append(torch.tensor(list(range(*slice(*s).indices(shape[dim]))), dtype=torch.long))
        elif isinstance(s, list):
            out.append(slice(*s))
        elif s == ":":
            out.append(slice(None))
        elif isinstance(s, dict):
            out.append(xs[s["t"]].long())
        else:
            raise ValueError(s)
        dim += 1
    return tuple(out)


def torch_pads(pads):
    """tinygrad's per-axis (before, after) pairs as F.pad's flat list (last axis first), trimmed
    to the trailing axes that are padded (reflect/replicate/circular only pad trailing axes)."""
    first = next((i for i, p in enumerate(pads) if tuple(p) != (0, 0)), len(pads))
    return [v for p in reversed(pads[first:]) for v in p]


def both(p, key, default):
    """A conv/pool option: an int, or a list as the tuple torch wants."""
    v = p.get(key, default)
    return tuple(v) if isinstance(v, list) else v


def i32(t):
    return t.to(I32)


def values_i32(r):
    """(values, indices) with tinygrad's int32 indices."""
    return r.values, i32(r.indices)


def interpolate(x, p):
    size = p["size"]
    mode = p.get("mode", "linear")
    if mode == "linear":
        mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)]
        return F.interpolate(x, size=size, mode=mode, align_corners=p.get("align_corners", False))
    return F.interpolate(x, size=size, mode=mode)


def sdpa(x, p):
    mask = x[3] if len(x) > 3 else None
    return F.scaled_dot_product_attention(x[0], x[1], x[2], attn_mask=mask, is_causal=p.get("is_causal", False))


def batchnorm(x, p):
    xx, w, b, mean, invstd = x
    var = invstd.pow(-2) - 1e-5
    return F.batch_norm(xx, mean, var, w, b, training=False, eps=1e-5)


def sparse_cce(x, p):
    logits, y = x
    ignore = p.get("ignore_index", -1)
    flat = logits.reshape(-1, logits.shape[-1])
    loss = F.cross_entropy(flat, y.reshape(-1).long(), ignore_index=ignore, reduction="none",
                           label_smoothing=p.get("label_smoothing", 0.0))
    r = p.get("reduction", "mean")
    if r == "mean":
        return loss.sum() / (y != ignore).sum()
    return loss.reshape(y.shape) if r == "none" else loss.sum()


def cross_entropy(x, p):
    logits, y = x
    y = y if y.dtype.is_floating_point else y.long()
    return F.cross_entropy(logits, y, reduction=p.get("reduction", "mean"),
                           label_smoothing=p.get("label_smoothing", 0.0))


def nll_loss(x, p):
    w = x[2] if len(x) > 2 else None
    return F.nll_loss(x[0], x[1].long(), weight=w, ignore_index=p.get("ignore_index", -100),
                      reduction=p.get("reduction", "mean"))


def setitem(x, p):
    y = x[0].clone()
    y[idx_tuple(p["idx"], x)] = x[1]
    return y



# ---------------------------------------------------------------------------------------------
# the op table: key -> (group, torch function of (inputs, params))

OPS = {}


def op(group, key, fn):
    assert key not in OPS, key
    OPS[key] = (group, fn)


# creation (forward only, no inputs)
op("creation", "arange", lambda x, p: torch.arange(p["start"], p["stop"], p["step"], dtype=DTYPES[p["dtype"]]))
op("creation", "linspace", lambda x, p: torch.linspace(p["start"], p["stop"], p["steps"], dtype=DTYPES[p["dtype"]]))
op("creation", "eye", lambda x, p: torch.eye(p["n"], dtype=torch.float32))
op("creation", "eye_nm", lambda x, p: torch.eye(p["n"], p["m"], dtype=torch.float32))
op("creation", "full", lambda x, p: torch.full(p["shape"], p["value"], dtype=DTYPES[p["dtype"]]))
op("creation", "zeros", lambda x, p: torch.zeros(p["shape"]))
op("creation", "ones", lambda x, p: torch.ones(p["shape"]))
op("creation", "zeros_like", lambda x, p: torch.zeros_like(x[0]))
op("creation", "ones_like", lambda x, p: torch.ones_like(x[0]))
op("creation", "full_like", lambda x, p: torch.full_like(x[0], p["value"]))

# unary math
for key, fn in {
    "neg": torch.neg, "log": torch.log, "log2": torch.log2, "exp": torch.exp, "exp2": torch.exp2, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "trunc": torch.trunc, "ceil": torch.ceil, "floor": torch.floor,
    "round": torch.round, "isinf": torch.isinf, "isnan": torch.isnan, "isfinite": torch.isfinite,
    "square": torch.square, "sign": torch.sign, "abs": torch.abs, "reciprocal": torch.reciprocal,
    "logical_not": torch.logical_not,
}.items():
    op("unary", key, lambda x, p, fn=fn: fn(x[0]))
op("unary", "lerp", lambda x, p: torch.lerp(x[0], x[1], x[2] if len(x) > 2 else p["weight"]))
op("unary", "clamp", lambda x, p: torch.clamp(x[0], p.get("min"), p.get("max")))

# activations
for key, fn in {
    "relu": F.relu, "sigmoid": torch.sigmoid, "logsigmoid": F.logsigmoid, "hardsigmoid": F.hardsigmoid,
    "elu": F.elu, "celu": F.celu, "selu": F.selu, "silu": F.silu, "swish": F.silu, "relu6": F.relu6,
    "hardswish": F.hardswish, "tanh": torch.tanh, "sinh": torch.sinh, "cosh": torch.cosh, "atanh": torch.atanh,
    "asinh": torch.asinh, "acosh": torch.acosh, "hardtanh": F.hardtanh, "erf": torch.erf,
    "gelu": lambda x: F.gelu(x, approximate="tanh"), "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "leaky_relu": F.leaky_relu, "mish": F.mish, "softplus": F.softplus, "softsign": F.softsign,
}.items():
    op("activation", key, lambda x, p, fn=fn: fn(x[0]))
op("activation", "elu_alpha", lambda x, p: F.elu(x[0], p["alpha"]))
op("activation", "celu_alpha", lambda x, p: F.celu(x[0], p["alpha"]))
op("activation", "leaky_relu_slope", lambda x, p: F.leaky_relu(x[0], p["slope"]))
op("activation", "softplus_beta", lambda x, p: F.softplus(x[0], p["beta"]))
op("activation", "hardtanh_range", lambda x, p: F.hardtanh(x[0], p["min"], p["max"]))

# binary (broadcasting), bitwise, comparisons
for key, fn in {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "copysign": torch.copysign, "logaddexp": torch.logaddexp, "pow": torch.pow,
    "mod": torch.remainder, "fmod": torch.fmod, "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor, "lt": torch.lt, "gt": torch.gt, "le": torch.le, "ge": torch.ge,
    "eq": torch.eq, "ne": torch.ne,
}.items():
    op("binary", key, lambda x, p, fn=fn: fn(x[0], x[1]))
op("binary", "add_scalar", lambda x, p: x[0] + p["value"])
op("binary", "mul_scalar", lambda x, p: x[0] * p["value"])
op("binary", "sub_rscalar", lambda x, p: p["value"] - x[0])
op("binary", "div_rscalar", lambda x, p: p["value"] / x[0])
op("binary", "pow_scalar", lambda x, p: x[0] ** p["value"])
op("binary", "rpow_scalar", lambda x, p: p["value"] ** x[0])
op("binary", "maximum_scalar", lambda x, p: torch.clamp(x[0], min=p["value"]))
op("binary", "lt_scalar", lambda x, p: x[0] < p["value"])
op("binary", "div_rounding", lambda x, p: torch.div(x[0], x[1], rounding_mode=p["mode"]))
op("binary", "where", lambda x, p: torch.where(x[0], x[1], x[2]))
op("binary", "where_scalar", lambda x, p: torch.where(x[0], x[1], p["value"]))
op("binary", "bitwise_not", lambda x, p: torch.bitwise_not(x[0]))
op("binary", "lshift", lambda x, p: x[0] << p["bits"])
op("binary", "rshift", lambda x, p: x[0] >> p["bits"])

# casting
op("cast", "cast", lambda x, p: x[0].to(DTYPES[p["dtype"]]))
op("cast", "bitcast", lambda x, p: x[0].view(DTYPES[p["dtype"]]))
for key, dt in {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16, "double": torch.float64,
                "int": torch.int32, "long": torch.int64, "bool": torch.bool}.items():
    op("cast", key, lambda x, p, dt=dt: x[0].to(dt))

# movement
op("movement", "reshape", lambda x, p: x[0].reshape(p["shape"]))
op("movement", "expand", lambda x, p: x[0].expand(p["shape"]))
op("movement", "permute", lambda x, p: x[0].permute(p["order"]))
op("movement", "flip", lambda x, p: x[0].flip(p["axes"]))
op("movement", "shrink", lambda x, p: x[0][tuple(slice(s, e) for s, e in p["bounds"])])
op("movement", "pad", lambda x, p: F.pad(x[0], torch_pads(p["pads"]), mode=p.get("mode", "constant"),
                                         value=p.get("value", 0.0) if p.get("mode") is None else None))
op("movement", "index", lambda x, p: x[0][idx_tuple(p["idx"], x)])
op("movement", "setitem", setitem)
op("movement", "gather", lambda x, p: torch.gather(x[0], p["dim"], x[1].long()))
op("movement", "scatter", lambda x, p: torch.scatter(x[0], p["dim"], x[1].long(), x[2]))
op("movement", "cat", lambda x, p: torch.cat(x, p["dim"]))
op("movement", "stack", lambda x, p: torch.stack(x, p["dim"]))
op("movement", "repeat", lambda x, p: x[0].repeat(*p["repeats"]))
op("movement", "repeat_interleave", lambda x, p: torch.repeat_interleave(x[0], p["repeats"], p.get("dim")))
op("movement", "split", lambda x, p: torch.split(x[0], p["sizes"], p["dim"]))
op("movement", "chunk", lambda x, p: torch.chunk(x[0], p["chunks"], p["dim"]))
op("movement", "unfold", lambda x, p: x[0].unfold(p["dim"], p["size"], p["step"]))
op("movement", "meshgrid", lambda x, p: torch.meshgrid(*x, indexing=p["indexing"]))
op("movement", "squeeze", lambda x, p: x[0].squeeze() if p.get("dim") is None else x[0].squeeze(p["dim"]))
op("movement", "unsqueeze", lambda x, p: x[0].unsqueeze(p["dim"]))
op("movement", "transpose", lambda x, p: x[0].transpose(p["dim0"], p["dim1"]))
op("movement", "flatten", lambda x, p: x[0].flatten(p["start"], p["end"]))
op("movement", "unflatten", lambda x, p: x[0].unflatten(p["dim"], p["sizes"]))
op("movement", "diag", lambda x, p: torch.diag(x[0]))
op("movement", "diagonal", lambda x, p: torch.diagonal(x[0], p["offset"], p["dim1"], p["dim2"]))
op("movement", "roll", lambda x, p: torch.roll(x[0], p["shifts"], p["dims"] or None))
op("movement", "tril", lambda x, p: torch.tril(x[0], p["diagonal"]))
op("movement", "triu", lambda x, p: torch.triu(x[0], p["diagonal"]))

# reduce
op("reduce", "sum", lambda x, p: tg_sum(x[0], p))
op("reduce", "prod", tg_reduce(lambda t, a, k: t.prod(a, keepdim=k).to(t.dtype)))
op("reduce", "max", lambda x, p: torch.amax(x[0], axes(p, x[0]), p.get("keepdim", False)))
op("reduce", "min", lambda x, p: torch.amin(x[0], axes(p, x[0]), p.get("keepdim", False)))
op("reduce", "any", tg_reduce(lambda t, a, k: t.any(a, keepdim=k)))
op("reduce", "all", tg_reduce(lambda t, a, k: t.all(a, keepdim=k)))
op("reduce", "mean", lambda x, p: x[0].float().mean(axes(p, x[0]), p.get("keepdim", False)).to(
    x[0].dtype if x[0].dtype.is_floating_point else torch.float32))
for key, fn in {"var": torch.var, "std": torch.std, "var_mean": torch.var_mean, "std_mean": torch.std_mean}.items():
    op("reduce", key, lambda x, p, fn=fn: fn(x[0], axes(p, x[0]), correction=p.get("correction", 1),
                                             keepdim=p.get("keepdim", False)))
op("reduce", "softmax", lambda x, p: torch.softmax(x[0], p["axis"]))
op("reduce", "log_softmax", lambda x, p: torch.log_softmax(x[0], p["axis"]))
op("reduce", "logsumexp", lambda x, p: torch.logsumexp(x[0], axes(p, x[0]), p.get("keepdim", False)))
op("reduce", "logcumsumexp", lambda x, p: torch.logcumsumexp(x[0], p["axis"]))
op("reduce", "argmax", lambda x, p: i32(torch.argmax(x[0], p.get("axis"), p.get("keepdim", False))))
op("reduce", "argmin", lambda x, p: i32(torch.argmin(x[0], p.get("axis"), p.get("keepdim", False))))
op("reduce", "cumsum", lambda x, p: torch.cumsum(x[0], p["axis"]).to(sum_dtype(x[0].dtype)))
op("reduce", "cumprod", lambda x, p: torch.cumprod(x[0], p["axis"]).to(x[0].dtype))
op("reduce", "cummax", lambda x, p: values_i32(torch.cummax(x[0], p["axis"])))
op("reduce", "isclose", lambda x, p: torch.isclose(x[0], x[1], p["rtol"], p["atol"], p.get("equal_nan", False)))
op("reduce", "allclose", lambda x, p: torch.tensor(torch.allclose(x[0], x[1], p["rtol"], p["atol"],
                                                                  p.get("equal_nan", False))))

# processing
op("processing", "matmul", lambda x, p: torch.matmul(x[0], x[1]))
op("processing", "dot", lambda x, p: torch.matmul(x[0], x[1]))
op("processing", "einsum", lambda x, p: torch.einsum(p["formula"], *x))
op("processing", "conv2d", lambda x, p: F.conv2d(x[0], x[1], x[2] if len(x) > 2 else None, both(p, "stride", 1),
                                                 both(p, "padding", 0), both(p, "dilation", 1), p.get("groups", 1)))
op("processing", "conv_transpose2d", lambda x, p: F.conv_transpose2d(
    x[0], x[1], x[2] if len(x) > 2 else None, both(p, "stride", 1), both(p, "padding", 0),
    both(p, "output_padding", 0), p.get("groups", 1), both(p, "dilation", 1)))
op("processing", "avg_pool2d", lambda x, p: F.avg_pool2d(x[0], both(p, "kernel", 2), both(p, "stride", None),
                                                         both(p, "padding", 0), p.get("ceil_mode", False),
                                                         p.get("count_include_pad", True)))
op("processing", "max_pool2d", lambda x, p: F.max_pool2d(x[0], both(p, "kernel", 2), both(p, "stride", None),
                                                         both(p, "padding", 0), both(p, "dilation", 1),
                                                         p.get("ceil_mode", False)))
op("processing", "interpolate", lambda x, p: interpolate(x[0], p))
op("processing", "sort", lambda x, p: values_i32(torch.sort(x[0], p["dim"], p["descending"])))
op("processing", "argsort", lambda x, p: i32(torch.argsort(x[0], dim=p["dim"], descending=p["descending"])))
op("processing", "topk", lambda x, p: values_i32(torch.topk(x[0], p["k"], p["dim"], p["largest"])))
op("processing", "masked_fill", lambda x, p: x[0].masked_fill(x[1], p["value"]))
op("processing", "masked_select", lambda x, p: torch.masked_select(x[0], x[1]))
op("processing", "one_hot", lambda x, p: i32(F.one_hot(x[0].long(), p["num_classes"])))

# functional
op("functional", "linear", lambda x, p: F.linear(x[0], x[1].t(), x[2] if len(x) > 2 else None))
op("functional", "layernorm", lambda x, p: F.layer_norm(x[0], x[0].shape[-p.get("naxes", 1):],
                                                        eps=p.get("eps", 1e-5)))
op("functional", "batchnorm", batchnorm)
op("functional", "scaled_dot_product_attention", sdpa)
op("functional", "binary_crossentropy", lambda x, p: F.binary_cross_entropy(
    x[0], x[1], reduction=p.get("reduction", "mean")))
op("functional", "binary_crossentropy_logits", lambda x, p: F.binary_cross_entropy_with_logits(
    x[0], x[1], reduction=p.get("reduction", "mean")))
op("functional", "sparse_categorical_crossentropy", sparse_cce)
op("functional", "cross_entropy", cross_entropy)
op("functional", "nll_loss", nll_loss)

# nn layers: the torch.nn module itself, called (torch.func.functional_call) with the case's inputs
# after the call's arguments as its parameters, in the module's registration order. lazygrad's
# layers store their parameters in torch's layouts (tests/torch_ref/table.rs checks each shape).


def module_params(m, tensors):
    """`m`'s parameters replaced by `tensors` (same order, same shapes)."""
    named = list(m.named_parameters())
    assert [tuple(t.shape) for t in tensors] == [tuple(q.shape) for _, q in named], (m, [t.shape for t in tensors])
    return {n: t for (n, _), t in zip(named, tensors)}


def layer(make, nargs=1):
    """An op calling the module `make(x, p)` on the first `nargs` inputs, the rest its parameters."""
    def run(x, p):
        m = make(x, p)
        return functional_call(m, module_params(m, x[nargs:]), tuple(x[:nargs]))
    return run


def conv_kw(p):
    return dict(stride=p.get("stride", 1), padding=p.get("padding", 0), dilation=p.get("dilation", 1),
                groups=p.get("groups", 1))


def nn_lstm_cell(x, p):
    """LSTMCell on x and, with `state`, (h, c): inputs x, [h, c,] then its weights and biases."""
    n = 3 if p["state"] else 1
    m = torch.nn.LSTMCell(p["in"], p["hidden"], bias=len(x) - n == 4)
    return functional_call(m, module_params(m, x[n:]), (x[0], (x[1], x[2])) if p["state"] else (x[0],))


def nn_batchnorm(x, p):
    """`batches` training steps from zero/unit running statistics, then eval mode on the last input:
    outputs the last training output, running mean, running var, batches tracked and eval output."""
    k = p["batches"]
    batches, (w, b, x_eval) = x[:k], x[k:]
    c = w.shape[0]
    m = (torch.nn.BatchNorm2d if x_eval.ndim == 4 else torch.nn.BatchNorm1d)(c, eps=p["eps"], momentum=p["momentum"])
    state = {"weight": w, "bias": b, "running_mean": torch.zeros(c), "running_var": torch.ones(c),
             "num_batches_tracked": torch.tensor(0)}
    m.train()
    for xb in batches:
        y = functional_call(m, state, (xb,))
    m.eval()
    y_eval = functional_call(m, state, (x_eval,))
    stats = [state["running_mean"].clone(), state["running_var"].clone()]
    return [y, *stats, state["num_batches_tracked"].to(I32).reshape(1), y_eval]


op("nn", "nn.Linear", layer(lambda x, p: torch.nn.Linear(p["in"], p["out"], bias=len(x) > 2)))
op("nn", "nn.Conv2d", layer(lambda x, p: torch.nn.Conv2d(p["in"], p["out"], p["kernel"], bias=len(x) > 2,
                                                         **conv_kw(p))))
op("nn", "nn.ConvTranspose2d", layer(lambda x, p: torch.nn.ConvTranspose2d(
    p["in"], p["out"], p["kernel"], output_padding=p.get("output_padding", 0), bias=len(x) > 2, **conv_kw(p))))
op("nn", "nn.LayerNorm", layer(lambda x, p: torch.nn.LayerNorm(p["shape"], eps=p["eps"],
                                                               elementwise_affine=len(x) > 1)))
op("nn", "nn.RMSNorm", layer(lambda x, p: torch.nn.RMSNorm(x[0].shape[-1], eps=p["eps"],
                                                           elementwise_affine=len(x) > 1)))
op("nn", "nn.GroupNorm", layer(lambda x, p: torch.nn.GroupNorm(p["groups"], x[0].shape[1], eps=p["eps"],
                                                               affine=len(x) > 1)))
op("nn", "nn.InstanceNorm", layer(lambda x, p: (torch.nn.InstanceNorm2d if x[0].ndim == 4 else torch.nn.InstanceNorm1d)(
    x[0].shape[1], eps=p["eps"], affine=len(x) > 1)))
op("nn", "nn.Embedding", layer(lambda x, p: torch.nn.Embedding(*x[1].shape)))
op("nn", "nn.LSTMCell", nn_lstm_cell)
op("nn", "nn.BatchNorm", nn_batchnorm)

# ---------------------------------------------------------------------------------------------
# the cases: (op key, inputs, params); `tol` overrides a tolerance (a documented exception)

CASES = []


def case(key, *inputs, tol=None, **params):
    assert key in OPS, key
    CASES.append((key, list(inputs), params, tol or {}))


# creation
case("arange", start=0, stop=10, step=1, dtype="int32")
case("arange", start=2, stop=11, step=3, dtype="int32")
case("arange", start=5, stop=-4, step=-2, dtype="int32")
case("arange", start=0, stop=0, step=1, dtype="int32")
case("arange", start=0.5, stop=3.0, step=0.25, dtype="float32")
case("arange", start=-1.0, stop=1.0, step=0.3, dtype="float32")
case("linspace", start=0.0, stop=1.0, steps=5, dtype="float32")
case("linspace", start=-3.0, stop=7.5, steps=12, dtype="float32")
case("linspace", start=2.0, stop=2.0, steps=1, dtype="float32")
case("linspace", start=0.0, stop=10.0, steps=6, dtype="int32")
case("eye", n=4)
case("eye_nm", n=3, m=5)
case("eye_nm", n=4, m=2)
case("eye", n=1)
case("eye", n=0)
case("full", shape=[2, 3], value=1.5, dtype="float32")
case("full", shape=[4], value=7, dtype="int32")
case("full", shape=[2, 0, 3], value=2.0, dtype="float32")
case("full", shape=[], value=True, dtype="bool")
case("zeros", shape=[3, 2])
case("zeros", shape=[0])
case("ones", shape=[2, 1, 3])
case("ones", shape=[])
case("zeros_like", INT(2, 3))
case("ones_like", F32(3, 1))
case("full_like", F32(2, 2), value=-4.25)

# unary math: several shapes per op, including a scalar, a size-0 tensor and a transposed view
SHAPES = [(3, 4), (), (2, 0, 3), (4, 3), (1, 5)]


def unary(key, spec, shapes=SHAPES, tol=None, **kw):
    for s in shapes:
        pre = {"pre": ["T"]} if len(s) == 2 and s == (4, 3) else {}
        case(key, spec(*s, **kw), tol=tol, **pre)


unary("neg", F32)
case("neg", F32(2, 3, 4), pre=["P"])
case("exp", F32(4, 3, lo=-3, hi=3), pre=["S"])
case("sqrt", POS(2, 3, 4), pre=["P"])
unary("log", POS, lo=0.05, hi=5.0)
unary("log2", POS, lo=0.05, hi=5.0)
unary("exp", F32, lo=-4, hi=4)
unary("exp2", F32, lo=-4, hi=4)
unary("sqrt", POS, lo=0.1, hi=9.0)
unary("rsqrt", POS, lo=0.1, hi=9.0)
unary("sin", F32, lo=-6, hi=6)
unary("cos", F32, lo=-6, hi=6)
unary("tan", F32, lo=-1.3, hi=1.3)
unary("asin", F32, lo=-0.95, hi=0.95)
unary("acos", F32, lo=-0.95, hi=0.95)
unary("atan", F32, lo=-5, hi=5)
for k in ["trunc", "ceil", "floor", "round"]:  # forward only, as in tinygrad's tests
    unary(k, F32, lo=-5, hi=5, grad=False)
    case(k, VAL([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 3.0, -3.7, 3.7]))
for k in ["isinf", "isnan", "isfinite"]:
    case(k, SPECIAL(3, 4))
    case(k, SPECIAL(5))
    case(k, F32(2, 3, grad=False))
unary("square", F32)
unary("sign", F32)
case("sign", VAL([-2.0, 0.0, 3.0, -0.0], grad=True))
unary("abs", AWAY)
unary("reciprocal", AWAY)
for s in [(3, 4), (5,), (2, 0)]:
    case("logical_not", BOOL(*s))
case("logical_not", F32(2, 3, grad=False))
case("lerp", F32(3, 4), F32(3, 4), weight=0.3)
case("lerp", F32(3, 4), F32(4), weight=0.75)
case("lerp", F32(2, 3), F32(2, 3), POS(2, 3, lo=0, hi=1))
case("lerp", F32(4, 3), F32(3, 1), POS(1, 4, lo=0, hi=1), pre=["T", "", ""])
case("lerp", F32(0, 3), F32(0, 3), weight=0.5)
for lo, hi in [(-1.0, 1.0), (None, 0.5), (-0.5, None)]:
    case("clamp", AWAY(3, 4, lo=0.05), min=lo, max=hi)
case("clamp", DIST(4, 3), min=-0.6, max=0.6, pre=["T"])
case("clamp", F32(0, 2), min=0.0, max=1.0)

# activations
ACT = [(3, 4), (), (4, 3), (2, 0)]


def act(key, spec=AWAY, tol=None, **kw):
    for s in ACT:
        case(key, spec(*s, **kw), tol=tol, **({"pre": ["T"]} if s == (4, 3) else {}))


for k in ["relu", "sigmoid", "logsigmoid", "hardsigmoid", "elu", "celu", "selu", "silu", "swish", "relu6",
          "hardswish", "tanh", "sinh", "cosh", "asinh", "hardtanh", "erf", "gelu", "quick_gelu", "leaky_relu",
          "mish", "softplus", "softsign"]:
    act(k, AWAY, lo=0.05, hi=4.0)
act("atanh", F32, lo=-0.9, hi=0.9)
act("acosh", POS, lo=1.1, hi=5.0)
case("relu", VAL([-1.0, 0.0, 2.0, -0.0, 0.5], grad=True))  # the gradient at 0 is 0, not 1/2
case("relu6", VAL([-1.0, 3.0, 7.0, 5.5, -2.5], grad=True))
case("hardsigmoid", VAL([-4.0, -1.0, 0.5, 2.5, 4.0], grad=True))
case("hardswish", VAL([-4.0, -2.0, 0.5, 2.5, 4.0], grad=True))
case("elu_alpha", AWAY(3, 4, lo=0.05), alpha=0.5)
case("celu_alpha", AWAY(3, 4, lo=0.05), alpha=2.0)
case("leaky_relu_slope", AWAY(3, 4, lo=0.05), slope=0.2)
case("softplus_beta", F32(3, 4, lo=-3, hi=3), beta=2.0)
case("hardtanh_range", AWAY(3, 4, lo=0.05, hi=3), min=-0.5, max=1.5)
case("sigmoid", F32(6, lo=-40, hi=40))
case("tanh", F32(6, lo=-30, hi=30))
case("softplus", F32(6, lo=-15, hi=15))
# gradients at each activation's kinks and at 0, as PyTorch defines them
KINKS = VAL([-3.0, -1.0, -0.0, 0.0, 1.0, 3.0, 6.0], grad=True)
for k in ["relu6", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "elu", "celu", "selu", "abs", "sign"]:
    case(k, KINKS)
case("hardtanh_range", KINKS, min=-1.0, max=3.0)
case("clamp", KINKS, min=-1.0, max=3.0)
case("sqrt", VAL([0.0, 1.0, 4.0], grad=True))

# binary
BIN = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)), ((0, 3), (1, 3)), ((4, 3), (3, 4))]


def binary(key, a=F32, b=F32, shapes=BIN, akw=None, bkw=None, tol=None):
    for sa, sb in shapes:
        pre = {"pre": ["T", ""]} if sa == (4, 3) else {}
        case(key, a(*sa, **(akw or {})), b(*sb, **(bkw or {})), tol=tol, **pre)


binary("add")
case("add", F32(4, 3, 2), F32(2, 3, 4), pre=["P", ""])
case("mul", F32(5, 4), F32(4, 4), pre=["S", ""])
case("div", F32(2, 3, 4), AWAY(4, 3, 2), pre=["", "P"])
binary("sub")
binary("mul")
binary("div", b=AWAY, bkw={"lo": 0.5})
binary("maximum", a=DIST, b=DIST, shapes=BIN[:4] + BIN[5:])
binary("minimum", a=DIST, b=DIST, shapes=BIN[:4] + BIN[5:])
case("maximum", VAL([1.0, 2.0, 3.0, -1.0], grad=True), VAL([1.0, 0.0, 3.0, -1.0], grad=True))  # ties split evenly
case("minimum", VAL([1.0, 2.0, 3.0, -1.0], grad=True), VAL([1.0, 0.0, 3.0, -1.0], grad=True))
binary("logaddexp", a=F32, b=F32, akw={"lo": -5, "hi": 5}, bkw={"lo": -5, "hi": 5})
binary("pow", a=POS, b=F32, shapes=BIN[:3] + BIN[5:], akw={"lo": 0.5, "hi": 2.0})
# at base 0: 0^0 = 1 with gradient 0 for the base (0 * 0^-1 gave NaN) and 0 for the exponent; the
# exponent's gradient a^b ln a is 0 at a = 0 for b >= 0; at exponent 0 any base's gradient is 0
case("pow", VAL([0.0, 0.0, 0.0, 2.0, -2.0, 1.5], grad=True), VAL([0.0, 2.0, 1.0, 0.0, 3.0, 2.0], grad=True))
for ka, kb in [((3, 4), (3, 4)), ((4,), (2, 4))]:
    case("copysign", AWAY(*ka), F32(*kb, grad=False))
case("copysign", AWAY(6), VAL([1.0, -1.0, 0.0, -0.0, 2.0, -3.0]))
for k in ["add", "sub", "mul", "maximum", "minimum"]:
    case(k, INT(3, 4), INT(3, 4))
    case(k, INT(3, 4), INT(4, dtype="int8"))
case("add", F32(3, 4), INT(3, 4))
case("mul", INT(2, 3, dtype="uint8", lo=0, hi=16), INT(2, 3, dtype="int8"))
case("add", F32(2, 3, dtype="float16"), F32(2, 3, dtype="float16"))
case("mul", F32(2, 3, dtype="float16"), F32(3))
case("div", INT(3, 4), AWAY(3, 4, lo=1, hi=5))
case("div", INT(3, 4), INT(3, 4, lo=1, hi=6))
case("add_scalar", F32(3, 4), value=2.5)
case("add_scalar", INT(3, 4), value=3)
case("add_scalar", INT(3, 4), value=0.5)
case("mul_scalar", F32(3, 4), value=-1.5)
case("mul_scalar", INT(2, 3, dtype="int8"), value=3)
case("sub_rscalar", F32(3, 4), value=1.0)
case("div_rscalar", AWAY(3, 4, lo=0.5), value=2.0)
case("pow_scalar", POS(3, 4), value=2.5)
case("pow_scalar", F32(3, 4), value=2)
case("pow_scalar", F32(3, 4), value=3)
case("pow_scalar", AWAY(3, 4, lo=0.5), value=-2)
case("pow_scalar", POS(3, 4), value=0.5)
case("pow_scalar", F32(2, 3), value=0)
case("rpow_scalar", F32(3, 4), value=2.0)
case("rpow_scalar", F32(3, 4), value=0.5)
case("maximum_scalar", AWAY(3, 4), value=0.5)
case("lt_scalar", F32(3, 4), value=0.25)
for mode in ["trunc", "floor"]:
    case("div_rounding", F32(3, 4, lo=-6, hi=6, grad=False), AWAY(3, 4, lo=0.5, grad=False), mode=mode)
    case("div_rounding", INT(3, 4), INT(3, 4, lo=1, hi=5), mode=mode)
    case("div_rounding", INT(3, 4), VAL([[-3], [2], [-1]], "int32"), mode=mode)
for k in ["mod", "fmod"]:
    case(k, INT(3, 4, lo=-20, hi=20), VAL([[-3], [2], [-7]], "int32"))
    case(k, INT(2, 5), INT(5, lo=1, hi=4))
    case(k, F32(3, 4, lo=-6, hi=6, grad=False), AWAY(3, 4, lo=0.7, grad=False))
    case(k, F32(4, lo=-6, hi=6, grad=False), VAL(2.5))
for c in [(BOOL(3, 4), F32(3, 4), F32(3, 4)), (BOOL(3, 1), F32(1, 4), F32(3, 4)), (BOOL(4), F32(2, 4), F32(4)),
          (BOOL(0, 2), F32(0, 2), F32(2)), (BOOL(2, 3), INT(2, 3), INT(2, 3))]:
    case("where", *c)
case("where", BOOL(4, 3), F32(3, 4), F32(4), pre=["T", "", ""])
case("where_scalar", BOOL(3, 4), F32(3, 4), value=-1.0)
for k in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
    case(k, INT(3, 4, lo=-100, hi=100), INT(3, 4, lo=-100, hi=100))
    case(k, INT(2, 3, lo=0, hi=255, dtype="uint8"), INT(3, lo=0, hi=255, dtype="uint8"))
    case(k, BOOL(3, 4), BOOL(3, 4))
case("bitwise_not", INT(3, 4, lo=-100, hi=100))
case("bitwise_not", INT(5, lo=0, hi=255, dtype="uint8"))
case("bitwise_not", BOOL(2, 3))
for bits in [1, 3]:
    case("lshift", INT(3, 4, lo=-100, hi=100), bits=bits)
    case("rshift", INT(3, 4, lo=-100, hi=100), bits=bits)
case("lshift", INT(6, lo=0, hi=60, dtype="uint8"), bits=2)
case("rshift", INT(6, lo=0, hi=255, dtype="uint8"), bits=2)
for k in ["lt", "gt", "le", "ge", "eq", "ne"]:
    case(k, INT(3, 4, lo=-2, hi=2), INT(3, 4, lo=-2, hi=2))
    case(k, VAL([[0.5, 1.0, -2.0, 3.0]]), VAL([[0.5], [1.5]]))
    case(k, F32(2, 0), F32(1, 0))
    case(k, INT(4, 3, lo=-2, hi=2), INT(4, lo=-2, hi=2), pre=["T", ""])

# casting
case("cast", F32(3, 4, lo=-100, hi=100), dtype="int32")
case("cast", F32(3, 4, lo=-100, hi=100), dtype="int8")
case("cast", F32(3, 4, lo=0, hi=255), dtype="uint8")
case("cast", F32(3, 4, lo=-1e5, hi=1e5), dtype="int64")
case("cast", VAL([0.0, -0.0, 0.5, -2.0, float("nan"), float("inf")]), dtype="bool")
case("cast", F32(3, 4, lo=-100, hi=100), dtype="float16")
case("cast", F32(3, 4, lo=-100, hi=100), dtype="bfloat16")
case("cast", F32(3, 4), dtype="float64")
case("cast", F32(4, 3), dtype="float16", pre=["T"])
case("cast", INT(3, 4, lo=-1000, hi=1000), dtype="float32")
case("cast", INT(3, 4, lo=-1000, hi=1000), dtype="int8")
case("cast", INT(3, 4, lo=-1000, hi=1000), dtype="uint8")
case("cast", INT(3, 4, lo=-1000, hi=1000), dtype="int64")
case("cast", INT(3, 4, lo=-1000, hi=1000), dtype="float16")
case("cast", INT(3, 4, lo=-3, hi=3), dtype="bool")
case("cast", INT(3, 4, lo=0, hi=255, dtype="uint8"), dtype="float32")
case("cast", INT(3, 4, lo=-128, hi=127, dtype="int8"), dtype="int32")
case("cast", BOOL(3, 4), dtype="float32")
case("cast", BOOL(3, 4), dtype="int32")
case("cast", F32(3, 4, dtype="float16"), dtype="float32")
case("cast", F32(3, 4, dtype="float64"), dtype="float32")
case("cast", F32(0, 3), dtype="int32")
case("bitcast", F32(3, 4), dtype="int32")
case("bitcast", F32(3, 4), dtype="uint32")
case("bitcast", INT(3, 4, lo=0, hi=1 << 30), dtype="float32")
case("bitcast", F32(3, 4, dtype="float16"), dtype="int16")
case("bitcast", INT(2, 3, lo=-128, hi=127, dtype="int8"), dtype="uint8")
case("bitcast", F32(2, 3, dtype="float64"), dtype="int64")
case("float", INT(2, 3))
case("float", F32(2, 3, dtype="float16"))
case("half", F32(4, 3), pre=["T"])
case("bfloat16", F32(2, 3, lo=-50, hi=50))
case("double", F32(2, 3))
case("int", F32(2, 3, lo=-50, hi=50, grad=False))
case("long", INT(2, 3))
case("bool", INT(2, 3, lo=-1, hi=2))

# movement
case("reshape", F32(3, 4), shape=[2, 6])
case("reshape", F32(3, 4), shape=[-1])
case("reshape", F32(2, 3, 4), shape=[4, -1, 2])
case("reshape", F32(), shape=[1, 1])
case("reshape", F32(0, 4), shape=[2, 0, 2])
case("reshape", F32(4, 3), shape=[12], pre=["T"])
case("expand", F32(3, 1), shape=[3, 4])
case("expand", F32(1, 4, 1), shape=[2, 4, 3])
case("expand", F32(1, 3), shape=[0, 3])
case("expand", F32(1, 3), shape=[3, 3], pre=["T"])
case("permute", F32(2, 3, 4), order=[2, 0, 1])
case("permute", F32(2, 3, 4), order=[1, 2, 0])
case("permute", F32(2, 0, 4), order=[2, 1, 0])
case("permute", F32(2, 3, 4), order=[1, 0, 2], pre=["T"])
case("flip", F32(3, 4), axes=[0])
case("flip", F32(2, 3, 4), axes=[0, 2])
case("flip", F32(2, 3, 4), axes=[-1])
case("flip", F32(4, 3), axes=[1], pre=["T"])
case("shrink", F32(4, 5), bounds=[[1, 3], [0, 5]])
case("shrink", F32(2, 3, 4), bounds=[[0, 1], [1, 3], [2, 4]])
case("shrink", F32(4, 5), bounds=[[2, 2], [0, 5]])
case("shrink", F32(4, 5), bounds=[[1, 4], [2, 3]], pre=["T"])
case("pad", F32(3, 4), pads=[[1, 2], [0, 1]])
case("pad", F32(3, 4), pads=[[0, 0], [2, 1]], value=1.5)
case("pad", F32(2, 3, 4), pads=[[0, 0], [-1, 1], [1, -2]])
case("pad", F32(0, 3), pads=[[1, 1], [0, 0]])
case("pad", F32(4, 3), pads=[[1, 0], [0, 2]], pre=["T"])
for mode in ["reflect", "replicate", "circular"]:
    case("pad", F32(1, 3, 4), pads=[[0, 0], [1, 2], [2, 1]], mode=mode)
    case("pad", F32(2, 5), pads=[[0, 0], [3, 1]], mode=mode)
    case("pad", F32(1, 4, 3), pads=[[0, 0], [2, 0], [0, 2]], mode=mode, pre=["T"])
IDX_CASES = [
    ((4, 5), [1]),
    ((4, 5), [-1, [1, 4, None]]),
    ((4, 5), [[None, None, 2], [None, None, -1]]),
    ((4, 5), [[3, 0, -2], ":"]),
    ((2, 3, 4), ["...", 1]),
    ((2, 3, 4), ["new", 0, "new", [1, None, None]]),
    ((2, 3, 4), [":", "new", [None, None, 3], -2]),
    ((4, 5), [[-100, 100, None]]),
    ((4, 5), [[3, 1, None]]),
    ((6,), [[5, None, -2]]),
]
for shape, spec in IDX_CASES:
    case("index", F32(*shape), idx=spec)
case("index", F32(5, 4), idx=[[1, None, 2], 2], pre=["T"])
case("index", F32(5, 4), idx=[[None, None, -2], 1], pre=["S"])
case("setitem", F32(4, 3, 2), F32(3), idx=[1, ":", 0], pre=["P", ""])
case("index", F32(5, 4), INT(3, lo=0, hi=5), idx=[{"t": 1}])
case("index", F32(5, 4), INT(2, 2, lo=-4, hi=4), idx=[":", {"t": 1}])
case("index", F32(3, 4, 5), INT(2, lo=0, hi=3), INT(2, lo=0, hi=5), idx=[{"t": 1}, ":", {"t": 2}])
case("index", F32(3, 4), INT(3, lo=0, hi=3), idx=[{"t": 1}, [1, 3, None]])
case("setitem", F32(4, 5), F32(5), idx=[1])
case("setitem", F32(4, 5), F32(2, 1), idx=[[1, 3, None], [None, None, 2]])
case("setitem", F32(4, 5), F32(), idx=["...", -1])
case("setitem", F32(4, 5), F32(4, 2), idx=[":", [None, None, -3]])
case("setitem", F32(5, 4), F32(2, 4), VAL([3, 0], "int32"), idx=[{"t": 2}])
case("gather", F32(3, 4), INT(3, 4, lo=0, hi=3), dim=0)
case("gather", F32(3, 4), INT(3, 2, lo=0, hi=4), dim=1)
case("gather", F32(2, 3, 4), INT(2, 3, 2, lo=0, hi=4), dim=-1)
case("gather", F32(4, 3), INT(2, 4, lo=0, hi=3), dim=0, pre=["T", ""])
case("gather", F32(3, 4), INT(0, 4, lo=0, hi=3), dim=0)
case("scatter", F32(4, 5), PERM(4, 5, transpose=True), F32(4, 5), dim=0)
case("scatter", F32(3, 5), PERM(5, 3, cols=3), F32(3, 3), dim=1)
case("scatter", F32(2, 4), PERM(4, 2, cols=2), F32(2, 2), dim=-1)
case("scatter", F32(5, 4), PERM(4, 5, transpose=True), F32(4, 5), dim=0, pre=["T", "", ""])
case("cat", F32(2, 3), F32(4, 3), dim=0)
case("cat", F32(2, 3), F32(2, 1), F32(2, 2), dim=1)
case("cat", F32(2, 3), F32(0, 3), dim=0)
case("cat", F32(2, 3), F32(3, 2), dim=-2, pre=["T", ""])
case("cat", INT(2, 3), INT(1, 3), dim=0)
case("cat", F32(2, 3), INT(2, 3), dim=1)
case("stack", F32(2, 3), F32(2, 3), dim=0)
case("stack", F32(2, 3), F32(2, 3), F32(2, 3), dim=-1)
case("stack", F32(3, 2), F32(2, 3), dim=1, pre=["T", ""])
case("stack", F32(0, 3), F32(0, 3), dim=1)
case("repeat", F32(2, 3), repeats=[2, 1])
case("repeat", F32(2, 3), repeats=[2, 2, 3])
case("repeat", F32(3), repeats=[0, 2])
case("repeat", F32(3, 2), repeats=[1, 2], pre=["T"])
case("repeat_interleave", F32(2, 3), repeats=2, dim=0)
case("repeat_interleave", F32(2, 3), repeats=3, dim=1)
case("repeat_interleave", F32(2, 3), repeats=2, dim=None)
case("repeat_interleave", F32(3, 2), repeats=2, dim=-1, pre=["T"])
case("split", F32(5, 3), sizes=2, dim=0)
case("split", F32(3, 6), sizes=[1, 2, 3], dim=1)
case("split", F32(2, 4), sizes=[4, 0], dim=-1)
case("split", F32(4, 5), sizes=2, dim=0, pre=["T"])
case("chunk", F32(6, 2), chunks=3, dim=0)
case("chunk", F32(2, 7), chunks=3, dim=1)
case("chunk", F32(5, 2), chunks=2, dim=-2)
case("unfold", F32(8), dim=0, size=3, step=2)
case("unfold", F32(2, 6), dim=1, size=2, step=1)
case("unfold", F32(5, 3), dim=0, size=5, step=3)
case("unfold", F32(3, 6), dim=0, size=2, step=2, pre=["T"])
case("meshgrid", F32(3), F32(4), indexing="ij")
case("meshgrid", F32(3), F32(4), indexing="xy")
case("meshgrid", F32(2), F32(3), F32(4), indexing="ij")
case("meshgrid", F32(3), F32(0), indexing="xy")
case("squeeze", F32(1, 3, 1), dim=None)
case("squeeze", F32(1, 3, 1), dim=-1)
case("squeeze", F32(2, 3), dim=0)
case("squeeze", F32(), dim=None)
case("unsqueeze", F32(2, 3), dim=0)
case("unsqueeze", F32(2, 3), dim=-1)
case("unsqueeze", F32(), dim=0)
case("unsqueeze", F32(3, 2), dim=1, pre=["T"])
case("transpose", F32(2, 3, 4), dim0=0, dim1=2)
case("transpose", F32(3, 4), dim0=-1, dim1=0)
case("transpose", F32(2, 0, 3), dim0=1, dim1=2)
case("flatten", F32(2, 3, 4), start=0, end=-1)
case("flatten", F32(2, 3, 4), start=1, end=2)
case("flatten", F32(2, 3, 4), start=0, end=1, pre=["T"])
case("unflatten", F32(6, 2), dim=0, sizes=[2, 3])
case("unflatten", F32(2, 12), dim=-1, sizes=[2, -1, 3])
case("diag", F32(4))
case("diag", F32(1))
case("diag", F32(0))
case("diagonal", F32(4, 4), offset=0, dim1=0, dim2=1)
case("diagonal", F32(3, 5), offset=1, dim1=0, dim2=1)
case("diagonal", F32(5, 3), offset=-2, dim1=0, dim2=1)
case("diagonal", F32(2, 3, 4), offset=0, dim1=-1, dim2=0)
case("diagonal", F32(3, 4), offset=1, dim1=1, dim2=0, pre=["T"])
case("roll", F32(5), shifts=[2], dims=[0])
case("roll", F32(3, 4), shifts=[1, -1], dims=[0, 1])
case("roll", F32(3, 4), shifts=[5], dims=[])
case("roll", F32(3, 4), shifts=[-7], dims=[1])
case("roll", F32(4, 3), shifts=[1], dims=[1], pre=["T"])
for k in ["tril", "triu"]:
    case(k, F32(4, 4), diagonal=0)
    case(k, F32(3, 5), diagonal=1)
    case(k, F32(5, 3), diagonal=-1)
    case(k, F32(2, 3, 4), diagonal=2)
    case(k, F32(4, 3), diagonal=0, pre=["T"])
    case(k, INT(3, 3), diagonal=0)

# reduce
RED = [
    ((3, 4), {"axis": None}),
    ((3, 4), {"axis": 1}),
    ((2, 3, 4), {"axis": [0, 2], "keepdim": True}),
    ((2, 3, 4), {"axis": -2}),
    ((0, 3), {"axis": 0}),
    ((), {"axis": None}),
    ((4, 3), {"axis": 0, "pre": ["T"]}),
    ((1, 5), {"axis": 0, "keepdim": True}),
]


def reduce(key, spec=F32, cases=RED, tol=None, **kw):
    for shape, p in cases:
        case(key, spec(*shape, **kw), tol=tol, **p)


reduce("sum")
case("sum", F32(4, 3, 2), axis=[0, 1], pre=["P"])
case("sum", F32(5, 4), axis=1, pre=["S"])
case("max", DIST(4, 3, 2), axis=0, pre=["P"])
case("sum", INT(3, 4), axis=1)
case("sum", INT(3, 4, dtype="int8", lo=-100, hi=100), axis=None)
case("sum", INT(3, 4, dtype="uint8", lo=0, hi=250), axis=0)
case("sum", BOOL(3, 4), axis=1)
case("sum", F32(3, 4, dtype="float16"), axis=1, tol={"atol": 2e-3})  # the f32 sum rounded to half: 1 ulp
reduce("prod", F32, lo=0.5, hi=1.5)
case("prod", AWAY(3, 4, lo=0.5, hi=1.5), axis=1)
case("prod", INT(3, 4, lo=-3, hi=4), axis=0)
# gradients at zeros, as PyTorch defines them: one zero gets the product of the others, every
# element of a row with two zeros 0 (dividing the product by each element gave NaN)
case("prod", VAL([[2.0, 0.0, 3.0], [4.0, 0.5, 2.0], [0.0, 2.0, 0.0]], grad=True), axis=1)
case("prod", VAL([[2.0, 0.0], [3.0, 5.0]], grad=True), axis=None)
reduce("mean")
case("mean", INT(3, 4), axis=1)
reduce("max", DIST, cases=[c for c in RED if c[0] != (0, 3)])
reduce("min", DIST, cases=[c for c in RED if c[0] != (0, 3)])
case("max", VAL([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], grad=True), axis=1)  # ties share the gradient
case("min", VAL([[1.0, 1.0, 3.0], [2.0, 5.0, 5.0]], grad=True), axis=None)
case("max", INT(3, 4), axis=0)
case("min", INT(3, 4, dtype="uint8", lo=0, hi=255), axis=1)
case("max", BOOL(3, 4), axis=1)
for k in ["any", "all"]:
    for shape, p in [((3, 4), {"axis": None}), ((3, 4), {"axis": 1}), ((2, 3, 4), {"axis": [0, 2], "keepdim": True}),
                     ((0, 3), {"axis": 0}), ((4, 3), {"axis": 0, "pre": ["T"]})]:
        case(k, BOOL(*shape, p=0.7 if k == "all" else 0.2), **p)
    case(k, INT(3, 4, lo=0, hi=3), axis=0)
    case(k, F32(2, 3, grad=False), axis=1)
VAR = [
    ((3, 4), {"axis": None}),
    ((3, 4), {"axis": 1}),
    ((2, 3, 4), {"axis": [0, 2], "keepdim": True}),
    ((3, 4), {"axis": 0, "correction": 0}),
    ((4, 3), {"axis": 1, "correction": 2, "pre": ["T"]}),
    ((5,), {"axis": 0}),
]
for k in ["var", "std", "var_mean", "std_mean"]:
    reduce(k, cases=VAR)
for k in ["softmax", "log_softmax"]:
    reduce(k, F32, lo=-4, hi=4, cases=[((3, 4), {"axis": -1}), ((3, 4), {"axis": 0}), ((2, 3, 4), {"axis": 1}),
                                          ((5,), {"axis": 0}), ((4, 3), {"axis": -1, "pre": ["T"]}),
                                          ((0, 3), {"axis": 1})])
case("softmax", F32(2, 3, lo=50, hi=100), axis=1)
reduce("logsumexp", F32, lo=-4, hi=4, cases=[((3, 4), {"axis": 1}), ((3, 4), {"axis": None}),
                                               ((2, 3, 4), {"axis": 0, "keepdim": True}),
                                               ((4, 3), {"axis": 0, "pre": ["T"]})])
case("logsumexp", F32(2, 3, lo=80, hi=100), axis=1)
reduce("logcumsumexp", F32, lo=-4, hi=4, cases=[((5,), {"axis": 0}), ((3, 4), {"axis": 1}), ((3, 4), {"axis": 0}),
                                                  ((2, 3, 4), {"axis": -2}), ((4, 3), {"axis": 1, "pre": ["T"]})])
for k in ["argmax", "argmin"]:
    reduce(k, DIST, grad=False, cases=[((3, 4), {"axis": None}), ((3, 4), {"axis": 1}),
                                        ((2, 3, 4), {"axis": 0, "keepdim": True}), ((4, 3), {"axis": 1, "pre": ["T"]}),
                                        ((5,), {"axis": 0})])
    case(k, VAL([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, -1.0, -1.0]]), axis=1)  # ties: the first index
    case(k, INT(3, 4, lo=-50, hi=50), axis=0)
CUM = [((5,), {"axis": 0}), ((3, 4), {"axis": 1}), ((3, 4), {"axis": 0}), ((2, 3, 4), {"axis": -1}),
       ((4, 3), {"axis": 0, "pre": ["T"]})]
reduce("cumsum", cases=CUM)
case("cumsum", INT(3, 4), axis=1)
case("cumsum", BOOL(6), axis=0)
case("cumsum", F32(0, 3), axis=1)
reduce("cumprod", AWAY, lo=0.5, hi=1.5, cases=CUM)
case("cumprod", INT(3, 4, lo=-3, hi=4), axis=1)
case("cumprod", VAL([[2.0, 0.0, 3.0, 4.0], [0.0, 1.5, 0.0, 2.0], [1.5, 2.0, 0.5, 0.0]], grad=True), axis=1)
reduce("cummax", DIST, cases=CUM)
case("cummax", VAL([[3, 1, 4, 0, 5], [-2, 6, 5, 7, 8]], "int32"), axis=1)  # distinct: torch reports the last tie
case("isclose", VAL([1.0, 1.0, 1.0, float("nan"), float("inf"), float("inf"), 0.0]),
     VAL([1.0, 1.0001, 1.1, float("nan"), float("inf"), float("-inf"), 1e-9]), rtol=1e-5, atol=1e-8)
case("isclose", VAL([1.0, float("nan"), 2.0]), VAL([1.05, float("nan"), 2.5]), rtol=0.1, atol=0.0, equal_nan=True)
case("isclose", F32(3, 4, grad=False), F32(4, grad=False), rtol=0.5, atol=0.5)
case("allclose", VAL([1.0, 2.0, 3.0]), VAL([1.0, 2.000001, 3.0]), rtol=1e-5, atol=1e-8)
case("allclose", VAL([1.0, 2.0, 3.0]), VAL([1.0, 2.1, 3.0]), rtol=1e-5, atol=1e-8)
case("allclose", VAL([[1.0, float("nan")]]), VAL([1.0, float("nan")]), rtol=1e-5, atol=1e-8, equal_nan=True)

# processing
for a, b in [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
             ((2, 3, 4), (2, 4, 5)),
             ((2, 1, 3, 4), (3, 4, 2)), ((0, 4), (4, 3)), ((3, 0), (0, 4))]:
    case("matmul", F32(*a), F32(*b))
case("matmul", F32(4, 3), F32(5, 4), pre=["T", "T"])
case("matmul", INT(2, 3), INT(3, 2))
case("matmul", F32(5, 4), F32(3, 4, 2), pre=["S", "P"])
case("dot", F32(3, 4), F32(4, 2))
case("dot", F32(5), F32(5))
for formula, shapes in [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij->ji", [(3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
                        ("i,i->", [(5,), (5,)]), ("ij->", [(3, 4)]), ("i,j->ij", [(3,), (4,)]), ("ij->j", [(3, 4)]),
                        ("ijk,ik->ij", [(2, 3, 4), (2, 4)]), ("ii->i", [(3, 3)]), ("ii", [(4, 4)])]:
    case("einsum", *[F32(*s) for s in shapes], formula=formula)
CONV = [
    ((1, 1, 5, 5), (1, 1, 3, 3), {}),
    ((2, 3, 6, 5), (4, 3, 3, 2), {"bias": True}),
    ((1, 2, 7, 7), (2, 2, 3, 3), {"stride": 2, "padding": 1}),
    ((1, 4, 6, 6), (4, 2, 3, 3), {"groups": 2, "padding": [1, 0]}),
    ((1, 2, 7, 6), (3, 2, 2, 3), {"dilation": [2, 1], "stride": [1, 2], "bias": True}),
    ((2, 1, 4, 4), (2, 1, 1, 1), {}),
]
for xs, ws, p in CONV:
    extra = [F32(ws[0])] if p.pop("bias", False) else []
    case("conv2d", F32(*xs), F32(*ws), *extra, **p)
case("conv2d", F32(1, 2, 6, 5), F32(3, 2, 2, 2), pre=["T", ""])
CONVT = [
    ((1, 1, 3, 3), (1, 1, 3, 3), {}),
    ((2, 3, 4, 3), (3, 2, 2, 3), {"bias": True}),
    ((1, 2, 3, 4), (2, 3, 3, 3), {"stride": 2, "padding": 1}),
    ((1, 2, 3, 3), (2, 1, 3, 3), {"stride": 2, "output_padding": 1}),
    ((1, 4, 3, 3), (4, 1, 2, 2), {"groups": 2, "dilation": 2, "bias": True}),
]
for xs, ws, p in CONVT:
    extra = [F32(ws[1] * p.get("groups", 1))] if p.pop("bias", False) else []
    case("conv_transpose2d", F32(*xs), F32(*ws), *extra, **p)
POOL = [
    ((1, 1, 4, 4), {}),
    ((2, 2, 5, 6), {"kernel": [3, 2], "stride": [1, 2]}),
    ((1, 2, 6, 6), {"kernel": 3, "stride": 2, "padding": 1}),
    ((1, 1, 5, 5), {"kernel": 2, "ceil_mode": True}),
    ((1, 1, 4, 5), {"kernel": [2, 3], "stride": 1, "pre": ["T"]}),
]
for xs, p in POOL:
    case("avg_pool2d", F32(*xs), **p)
    case("max_pool2d", DIST(*xs), **p)
case("avg_pool2d", F32(1, 2, 5, 5), kernel=3, stride=2, padding=1, count_include_pad=False)
case("max_pool2d", DIST(1, 1, 7, 7), kernel=2, stride=2, dilation=2)
for xs, p in [((1, 1, 4), {"size": [7]}), ((1, 2, 3, 4), {"size": [5, 2]}),
              ((1, 1, 3, 3), {"size": [6, 6], "align_corners": True}),
              ((1, 1, 6), {"size": [4], "align_corners": True}), ((1, 1, 4, 3), {"size": [3, 5], "mode": "nearest"}),
              ((1, 1, 5), {"size": [8], "mode": "nearest-exact"}), ((1, 1, 2, 2, 2), {"size": [3, 3, 3]})]:
    case("interpolate", F32(*xs), **p)
for xs, p in [((6,), {"dim": 0, "descending": False}), ((3, 5), {"dim": 1, "descending": True}),
              ((4, 3), {"dim": 0, "descending": False}), ((2, 3, 4), {"dim": -2, "descending": True}),
              ((5, 3), {"dim": 1, "descending": False, "pre": ["T"]}), ((1,), {"dim": 0, "descending": False})]:
    case("sort", DIST(*xs), **p)
    case("argsort", DIST(*xs, grad=False), **p)
case("sort", DIST(6, 5), dim=0, descending=True, pre=["S"])
case("sort", VAL([[3, 1, 4, 9, 5], [-2, 6, 5, 0, 8]], "int32"), dim=1, descending=False)
for xs, p in [((6,), {"k": 3, "dim": 0, "largest": True}), ((3, 5), {"k": 2, "dim": 1, "largest": False}),
              ((4, 3), {"k": 4, "dim": 0, "largest": True}),
              ((2, 5, 3), {"k": 1, "dim": 1, "largest": True, "pre": ["T"]})]:
    case("topk", DIST(*xs), **p)
case("masked_fill", F32(3, 4), BOOL(3, 4), value=-1.5)
case("masked_fill", F32(3, 4), BOOL(4), value=0.0)
case("masked_fill", F32(4, 3), BOOL(3, 1), value=2.0, pre=["T", ""])
case("masked_fill", INT(3, 4), BOOL(3, 4), value=7)
case("masked_select", F32(3, 4), BOOL(3, 4))
case("masked_select", F32(3, 4), BOOL(4))
case("masked_select", F32(2, 3), VAL([[False] * 3] * 2, "bool"))
case("masked_select", F32(4, 3), BOOL(3, 4), pre=["T", ""])
case("one_hot", INT(5, lo=0, hi=4), num_classes=4)
case("one_hot", INT(2, 3, lo=0, hi=5), num_classes=6)
case("one_hot", INT(0, lo=0, hi=3), num_classes=3)

# functional
case("linear", F32(3, 4), F32(4, 5), F32(5))
case("linear", F32(2, 3, 4), F32(4, 2))
case("linear", F32(4), F32(4, 3), F32(3))
case("linear", F32(4, 3), F32(4, 5), F32(5), pre=["T", "", ""])
for xs, p in [((3, 8), {}), ((2, 3, 5), {}), ((2, 3, 4), {"naxes": 2, "axis": [-2, -1]}), ((4, 6), {"eps": 1e-3}),
              ((5, 4), {"pre": ["T"]})]:
    case("layernorm", F32(*xs), **p)
for xs in [(2, 3, 4, 4), (4, 3), (2, 3, 5)]:
    c = xs[1]
    case("batchnorm", F32(*xs), F32(c), F32(c), F32(c, grad=False), POS(c, lo=0.5, hi=2, grad=False))
for q, k, p in [((2, 4, 8), (2, 5, 8), {}), ((1, 2, 3, 4), (1, 2, 3, 4), {"is_causal": True}), ((3, 4), (6, 4), {})]:
    case("scaled_dot_product_attention", F32(*q), F32(*k), F32(*k[:-1], 5 if len(k) == 2 else k[-1]), **p)
case("scaled_dot_product_attention", F32(2, 3, 4), F32(2, 3, 4), F32(2, 3, 4), F32(3, 3, lo=-1, hi=0, grad=False))
case("binary_crossentropy", POS(3, 4, lo=0.05, hi=0.95), POS(3, 4, lo=0, hi=1, grad=False))
case("binary_crossentropy", POS(5, lo=0.05, hi=0.95), VAL([0.0, 1.0, 1.0, 0.0, 1.0]), reduction="sum")
case("binary_crossentropy", POS(2, 3, lo=0.05, hi=0.95), POS(2, 3, lo=0, hi=1, grad=False), reduction="none")
case("binary_crossentropy_logits", F32(3, 4, lo=-4, hi=4), POS(3, 4, lo=0, hi=1, grad=False))
case("binary_crossentropy_logits", F32(5, lo=-4, hi=4), VAL([0.0, 1.0, 1.0, 0.0, 1.0]), reduction="sum")
case("binary_crossentropy_logits", F32(2, 3, lo=-30, hi=30), POS(2, 3, lo=0, hi=1, grad=False), reduction="none")
case("sparse_categorical_crossentropy", F32(4, 5), INT(4, lo=0, hi=5))
case("sparse_categorical_crossentropy", F32(2, 3, 4), INT(2, 3, lo=0, hi=4), reduction="sum")
case("sparse_categorical_crossentropy", F32(5, 3), VAL([0, 2, 1, 1, 2], "int32"), ignore_index=1)
case("sparse_categorical_crossentropy", F32(4, 5), INT(4, lo=0, hi=5), label_smoothing=0.1)
case("sparse_categorical_crossentropy", F32(3, 4), INT(3, lo=0, hi=4), reduction="none")
case("cross_entropy", F32(4, 5), INT(4, lo=0, hi=5))
case("cross_entropy", F32(3, 4), POS(3, 4, lo=0, hi=1, grad=False), reduction="sum")
case("cross_entropy", F32(2, 4, 3), INT(2, 3, lo=0, hi=4), reduction="none")
case("cross_entropy", F32(4, 5), INT(4, lo=0, hi=5), label_smoothing=0.2)
case("cross_entropy", F32(5), VAL(2, "int32"))
case("nll_loss", F32(4, 5, lo=-3, hi=0), INT(4, lo=0, hi=5))
case("nll_loss", F32(4, 5, lo=-3, hi=0), INT(4, lo=0, hi=5), POS(5, grad=False))
case("nll_loss", F32(5, 3, lo=-3, hi=0), VAL([0, 2, 1, 1, 2], "int32"), ignore_index=1, reduction="sum")
case("nll_loss", F32(3, 4, lo=-3, hi=0), INT(3, lo=0, hi=4), reduction="none")
case("nll_loss", F32(2, 4, 3, lo=-3, hi=0), INT(2, 3, lo=0, hi=4))

# nn layers
case("nn.Linear", F32(3, 4), F32(5, 4), F32(5), **{"in": 4, "out": 5})
case("nn.Linear", F32(2, 3, 4), F32(2, 4), **{"in": 4, "out": 2})
case("nn.Linear", F32(4, 3), F32(5, 4), F32(5), pre=["T", "", ""], **{"in": 4, "out": 5})
case("nn.Conv2d", F32(2, 3, 6, 6), F32(4, 3, 3, 3), F32(4), padding=1, **{"in": 3, "out": 4, "kernel": 3})
case("nn.Conv2d", F32(1, 4, 7, 7), F32(2, 2, 3, 3), stride=2, groups=2, dilation=2, **{"in": 4, "out": 2, "kernel": 3})
case("nn.ConvTranspose2d", F32(1, 2, 3, 3), F32(2, 3, 3, 3), F32(3), **{"in": 2, "out": 3, "kernel": 3})
case("nn.ConvTranspose2d", F32(2, 3, 4, 4), F32(3, 2, 3, 3), F32(2), stride=2, padding=1, output_padding=1,
     **{"in": 3, "out": 2, "kernel": 3})
case("nn.ConvTranspose2d", F32(1, 4, 3, 3), F32(4, 2, 2, 2), groups=2, dilation=2, **{"in": 4, "out": 4, "kernel": 2})
case("nn.LayerNorm", F32(3, 8), F32(8), F32(8), shape=[8], eps=1e-5)
case("nn.LayerNorm", F32(2, 3, 4), F32(3, 4), F32(3, 4), shape=[3, 4], eps=1e-3)
case("nn.LayerNorm", F32(4, 6, lo=1, hi=5), shape=[6], eps=1e-5)
case("nn.RMSNorm", F32(3, 8), F32(8), eps=1e-6)
case("nn.RMSNorm", F32(2, 3, 5, lo=-0.5, hi=0.5), eps=1e-2)
case("nn.GroupNorm", F32(2, 6, 4, 4), F32(6), F32(6), groups=3, eps=1e-5)
case("nn.GroupNorm", F32(2, 4, 5, lo=0, hi=3), F32(4), F32(4), groups=2, eps=1e-3)
case("nn.GroupNorm", F32(3, 4, 3, 2), groups=1, eps=1e-5)
case("nn.InstanceNorm", F32(2, 3, 4, 5), F32(3), F32(3), eps=1e-5)
case("nn.InstanceNorm", F32(2, 3, 6, lo=-1, hi=4), F32(3), F32(3), eps=1e-3)
case("nn.Embedding", INT(2, 5, lo=0, hi=7), F32(7, 4))
case("nn.Embedding", VAL([3, 0, 3, 4, 3, 1], "int32"), F32(5, 3))
case("nn.LSTMCell", F32(3, 4), F32(3, 5), F32(3, 5), F32(20, 4), F32(20, 5), F32(20), F32(20), state=True,
     **{"in": 4, "hidden": 5})
case("nn.LSTMCell", F32(2, 4), F32(12, 4), F32(12, 3), F32(12), F32(12), state=False, **{"in": 4, "hidden": 3})
case("nn.LSTMCell", F32(2, 3), F32(2, 2), F32(2, 2), F32(8, 3), F32(8, 2), state=True, **{"in": 3, "hidden": 2})
for shape, momentum, eps in [((4, 3, 5, 5), 0.1, 1e-5), ((6, 4), 0.3, 1e-3), ((4, 3, 5), 0.1, 1e-5)]:
    c = shape[1]
    batches = [F32(*shape, lo=-1 + k, hi=2 + 2 * k, grad=k == 2) for k in range(3)]
    case("nn.BatchNorm", *batches, F32(c, lo=0.5, hi=1.5), F32(c), F32(*shape, lo=-1, hi=3), batches=3,
         momentum=momentum, eps=eps)

# ---------------------------------------------------------------------------------------------
# running the cases and writing the file


def apply_pre(t, pre):
    if pre == "T":
        return t.transpose(-2, -1)
    if pre == "P":
        return t.permute(*reversed(range(t.ndim)))
    if pre == "S":
        return t[1:]
    assert pre == "", pre
    return t


def run_case(key, inputs, params):
    group, fn = OPS[key]
    leaves = [i.value.clone().requires_grad_(i.grad) for i in inputs]
    pre = params.get("pre", [])
    xs = [apply_pre(t, pre[n] if n < len(pre) else "") for n, t in enumerate(leaves)]
    outs = fn(xs, params)
    outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
    for o in outs:
        assert o.dtype != torch.int64 or group == "cast" or any(i.value.dtype == torch.int64 for i in inputs), \
            f"{key}: int64 output (tinygrad's indices and sums are int32)"
    ups = [torch.randn(o.shape, generator=GEN, dtype=torch.float32).to(o.dtype) if o.dtype.is_floating_point
           else None for o in outs]
    grads = []
    wanted = [n for n, t in enumerate(leaves) if t.requires_grad]
    diff = [(o, u) for o, u in zip(outs, ups) if u is not None and o.requires_grad]
    if wanted and diff:
        loss = sum((o * u).sum() for o, u in diff)
        gs = torch.autograd.grad(loss, [leaves[n] for n in wanted], allow_unused=True)
        grads = [(n, g) for n, g in zip(wanted, gs) if g is not None]
    return group, outs, ups, grads


def name_of(key, inputs, params, seen):
    shapes = "_".join("x".join(map(str, i.value.shape)) or "s" for i in inputs)
    base = f"{key}[{shapes}]" if inputs else key
    seen[base] += 1
    return base if seen[base] == 1 else f"{base}#{seen[base]}"


def w_str(out, s):
    b = s.encode()
    out += struct.pack("<H", len(b)) + b


def w_array(out, t):
    t = t.detach().contiguous()
    w_str(out, NAMES[t.dtype])
    out += struct.pack("<B", t.ndim) + struct.pack(f"<{t.ndim}I", *t.shape)
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.reshape(-1))  # fresh strides (a size-1 view may keep odd ones)
    data = flat.view(torch.uint8).numpy().tobytes()
    out += struct.pack("<I", len(data)) + data


def build():
    out = bytearray(b"LGTR") + struct.pack("<II", 1, len(CASES))
    seen, counts = Counter(), Counter()
    for key, inputs, params, tol in CASES:
        try:
            group, outs, ups, grads = run_case(key, inputs, params)
        except Exception as e:
            raise RuntimeError(f"case {key} {[tuple(i.value.shape) for i in inputs]} {params}: {e}") from e
        counts[(group, key)] += 1
        w_str(out, name_of(key, inputs, params, seen))
        w_str(out, group)
        w_str(out, key)
        w_str(out, json.dumps(params, separators=(",", ":")))
        out += struct.pack("<4d", tol.get("atol", ATOL), tol.get("rtol", RTOL), tol.get("grad_atol", GRAD_ATOL),
                           tol.get("grad_rtol", GRAD_RTOL))
        out += struct.pack("<B", len(inputs))
        for i in inputs:
            out += struct.pack("<B", int(i.grad))
            w_array(out, i.value)
        out += struct.pack("<B", len(outs))
        for o, u in zip(outs, ups):
            w_array(out, o)
            out += struct.pack("<B", u is not None)
            if u is not None:
                w_array(out, u)
        out += struct.pack("<B", len(grads))
        for n, g in grads:
            out += struct.pack("<B", n)
            w_array(out, g)
    return bytes(out), counts


GEN = torch.Generator().manual_seed(1)

if __name__ == "__main__":
    data, counts = build()
    if "--list" in sys.argv:
        groups = Counter()
        for (g, k), n in sorted(counts.items()):
            groups[g] += n
            print(f"{g:12} {k:34} {n}")
        print(dict(groups), "total", sum(groups.values()))
    write_or_check(OUT, data, f"{len(CASES)} cases")
