#!/usr/bin/env python3
"""Generate tests/fixtures/ops.bin: numpy reference results for the Tensor ops of lazygrad.

Usage: python3 tools/gen_fixtures.py [--check]

The script creates its own virtual environment in tools/.venv (numpy pinned by
tools/requirements.txt) on first use and re-executes itself there. `--check` regenerates the
fixture in memory and exits non-zero if the committed file differs.

Each case is an expression over inputs x0, x1, ... in a small call syntax that tests/ops.rs
parses and evaluates with lazygrad, e.g. `add(permute(x0,[1,0]),x1)` or `sum(x0,[0,2],true)`.
Arguments are input references, nested calls, integers, floats (always written with a `.` or an
exponent), integer lists `[..]`, and names (dtype names, `true`, `false`, `none`). The expected
output is computed here by evaluating the same tree with numpy, following tinygrad's semantics
where they differ from numpy's (dtype promotion with weak Python scalars, int-to-float true
division, idiv truncating toward zero, sum accumulation dtypes, float16 sums cast back).

File format (little-endian):
    magic b"LGFX", u32 version, u32 case count, then per case:
        str name, str group, str expr, f64 atol, f64 rtol, u8 input count, array inputs..., array expected
    str:   u16 byte length + UTF-8 bytes
    array: str dtype (numpy name), u8 ndim, u32 dims[ndim], u32 byte length, raw row-major bytes
"""

import math
import os
import struct
import subprocess
import zlib

from venv_bootstrap import ensure_venv, write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(HERE, ".venv")
OUT = os.path.join(ROOT, "tests", "fixtures", "ops.bin")


def install_requirements(venv_py):
    """Install tools/requirements.txt into the venv unless numpy already imports there."""
    if subprocess.call([venv_py, "-c", "import numpy"], stderr=subprocess.DEVNULL) != 0:
        subprocess.check_call([venv_py, "-m", "pip", "install", "-q", "-r", os.path.join(HERE, "requirements.txt")])


if __name__ == "__main__":
    ensure_venv(VENV, __file__, install_requirements)

import numpy as np  # noqa: E402  (only importable inside the venv)

# ---------------------------------------------------------------------------------------------
# tinygrad's dtype semantics

B, I8, I16, I32, I64 = np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64)
U8, U16, U32, U64 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)

# tinygrad's promotion lattice (bfloat16 left out: numpy has none) and dtype priorities.
PARENTS = {
    B: [I8, U8], I8: [I16], I16: [I32], I32: [I64], I64: [F16], U8: [I16, U16], U16: [I32, U32],
    U32: [I64, U64], U64: [F16], F16: [F32], F32: [F64], F64: [],
}
PRIORITY = {B: 0, I8: 1, U8: 2, I16: 3, U16: 4, I32: 5, U32: 6, I64: 7, U64: 8, F16: 11, F32: 13, F64: 14}


def upper(d):
    out, todo = {d}, [d]
    while todo:
        for p in PARENTS[todo.pop()]:
            if p not in out:
                out.add(p)
                todo.append(p)
    return out


def lub(*ds):
    return min(set.intersection(*(upper(d) for d in ds)), key=PRIORITY.__getitem__)


def is_float(d):
    return d.kind == "f"


def to_float(d):
    return d if is_float(d) else F32


def weak(s, d):
    """dtype of `tensor(d) op s` for a Python scalar s (scalars are weak)."""
    if isinstance(s, bool):
        return d
    if isinstance(s, int):
        return I32 if d == B else d
    return d if is_float(d) else F32


def py_dtype(s):
    return B if isinstance(s, bool) else I32 if isinstance(s, int) else F32


def is_arr(v):
    return isinstance(v, np.ndarray)


def promote(a, b):
    if is_arr(a) and is_arr(b):
        return lub(a.dtype, b.dtype)
    if is_arr(a):
        return weak(b, a.dtype)
    if is_arr(b):
        return weak(a, b.dtype)
    return lub(py_dtype(a), py_dtype(b))


def cast(v, d):
    return np.asarray(v).astype(d)


def sum_acc(d):
    if d.kind == "u":
        return lub(d, U32)
    if d.kind in "ib":
        return lub(d, I32)
    return lub(d, F32)


def axis_arg(axes):
    return tuple(axes) if isinstance(axes, list) else axes


# ---------------------------------------------------------------------------------------------
# numpy implementations, one per op name (the same names tests/ops.rs dispatches on)


def binary(f, out=None):
    def run(a, b):
        d = promote(a, b)
        d = out(d) if out else d
        return cast(f(cast(a, d), cast(b, d)), d)

    return run


def compare(f):
    def run(a, b):
        d = promote(a, b)
        return cast(f(cast(a, d), cast(b, d)), B)

    return run


def idiv(x, y):
    q = x // y
    return q + ((x % y != 0) & ((x < 0) != (y < 0))).astype(q.dtype)


def where(c, a, b):
    """A scalar branch is weak against the other branch; two scalars are weak against the condition."""
    if is_arr(a) or is_arr(b):
        d = promote(a, b)
    else:
        d = lub(weak(a, c.dtype), weak(b, c.dtype))
    return np.where(cast(c, B), cast(a, d), cast(b, d))


def float_unary(f):
    """Ints compute in float32; the reference is computed in float64 and rounded once."""

    def run(x):
        d = to_float(x.dtype)
        return cast(f(x.astype(F64)), d)

    return run


def reduce_sum(x, axes=None, keepdim=False):
    acc = sum_acc(x.dtype)
    out = x.astype(acc).sum(axis=axis_arg(axes), keepdims=keepdim, dtype=acc)
    return cast(out, x.dtype if x.dtype == F16 else out.dtype)


def reduce_mean(x, axes=None, keepdim=False):
    axes = range(x.ndim) if axes is None else [axes] if isinstance(axes, int) else axes
    count = math.prod(x.shape[a] for a in axes)
    acc = x.astype(F64).sum(axis=tuple(axes), keepdims=keepdim)
    with np.errstate(invalid="ignore", divide="ignore"):
        return cast(acc / count, x.dtype if is_float(x.dtype) else F32)


def matmul(a, b):
    d = lub(a.dtype, b.dtype)
    acc = sum_acc(d)
    return cast(np.matmul(a.astype(acc), b.astype(acc)), d if d == F16 else acc)


def flatten(x, start, end):
    s, e = start % x.ndim, end % x.ndim
    return x.reshape(x.shape[:s] + (math.prod(x.shape[s : e + 1]),) + x.shape[e + 1 :])


def squeeze(x, axis=None):
    if axis is None:
        return np.squeeze(x)
    return np.squeeze(x, axis) if x.shape[axis] == 1 else x


def arange_step(start, stop, step, dtype):
    n = max(0, math.ceil((stop - start) / step))
    return cast(start + np.arange(n, dtype=F64) * step, dtype)


OPS = {
    # elementwise binary
    "add": binary(np.add),
    "sub": binary(np.subtract),
    "mul": binary(np.multiply),
    "div": binary(np.divide, out=to_float),
    "idiv": binary(idiv),
    "maximum": binary(np.maximum),
    "minimum": binary(np.minimum),
    "cmplt": compare(np.less),
    "lt": compare(np.less),
    "gt": compare(np.greater),
    "ge": compare(np.greater_equal),
    "le": compare(np.less_equal),
    "eq": compare(np.equal),
    "ne": compare(np.not_equal),
    "where": where,
    # elementwise unary
    "neg": lambda x: cast(np.negative(x), x.dtype),
    "logical_not": lambda x: np.logical_not(x),
    "exp": float_unary(np.exp),
    "exp2": float_unary(np.exp2),
    "log": float_unary(np.log),
    "log2": float_unary(np.log2),
    "sqrt": float_unary(np.sqrt),
    "sin": float_unary(np.sin),
    "reciprocal": float_unary(np.reciprocal),
    "trunc": lambda x: np.trunc(x) if is_float(x.dtype) else x,
    "relu": lambda x: cast(np.maximum(x, 0), x.dtype),
    "cast": lambda x, d: x.astype(d),
    # movement
    "reshape": lambda x, shape: x.reshape(shape),
    "permute": lambda x, order: np.transpose(x, order),
    "expand": lambda x, shape: np.broadcast_to(x, shape).copy(),
    "pad": lambda x, p: np.pad(x, [(p[i], p[i + 1]) for i in range(0, len(p), 2)]),
    "shrink": lambda x, b: x[tuple(slice(b[i], b[i + 1]) for i in range(0, len(b), 2))],
    "flip": lambda x, axes: np.flip(x, axes),
    "transpose": lambda x, a, b: np.swapaxes(x, a, b),
    "T": lambda x: np.swapaxes(x, -2, -1),
    "flatten": flatten,
    "squeeze": squeeze,
    "unsqueeze": lambda x, a: np.expand_dims(x, a),
    "contiguous": lambda x: x,
    "realize": lambda x: x,
    # reduce
    "sum": reduce_sum,
    "max": lambda x, axes=None, keepdim=False: np.max(x, axis=axis_arg(axes), keepdims=keepdim),
    "min": lambda x, axes=None, keepdim=False: np.min(x, axis=axis_arg(axes), keepdims=keepdim),
    "mean": reduce_mean,
    "matmul": matmul,
    "dot": matmul,
    # creation
    "arange": lambda n: np.arange(n, dtype=I32),
    "arange_step": arange_step,
    "eye": lambda n: np.eye(n, dtype=F32),
    "full": lambda shape, v: np.full(shape, v, dtype=py_dtype(v)),
    "full_dtype": lambda shape, v, d: cast(np.full(shape, v), d),
    "zeros": lambda shape: np.zeros(shape, dtype=F32),
    "ones": lambda shape: np.ones(shape, dtype=F32),
    "zeros_like": lambda x: np.zeros_like(x),
    "ones_like": lambda x: np.ones_like(x),
    "full_like": lambda x, v: cast(np.full(x.shape, v), x.dtype),
}
TRANSCENDENTAL = {"exp", "exp2", "log", "log2", "sin", "sqrt", "reciprocal"}


# ---------------------------------------------------------------------------------------------
# expressions


class X:
    """Input reference x<i>."""

    def __init__(self, i):
        self.i = i

    def __str__(self):
        return f"x{self.i}"

    def eval(self, inputs):
        return inputs[self.i]

    def ops(self):
        return set()


class Call:
    def __init__(self, op, *args):
        assert op in OPS, op
        self.op, self.args = op, args

    def __str__(self):
        return f"{self.op}({','.join(fmt(a) for a in self.args)})"

    def eval(self, inputs):
        args = [a.eval(inputs) if isinstance(a, (X, Call)) else a for a in self.args]
        with np.errstate(all="ignore"):
            return np.asarray(OPS[self.op](*args))

    def ops(self):
        return {self.op}.union(*(a.ops() for a in self.args if isinstance(a, (X, Call))))


def fmt(a):
    if isinstance(a, (X, Call)):
        return str(a)
    if isinstance(a, bool):
        return "true" if a else "false"
    if a is None:
        return "none"
    if isinstance(a, int):
        return str(a)
    if isinstance(a, float):
        s = repr(a)
        assert "." in s or "e" in s, s
        return s
    if isinstance(a, list):
        return "[" + ",".join(str(int(v)) for v in a) + "]"
    if isinstance(a, np.dtype):
        return a.name
    raise TypeError(a)


class _Ops:
    """`op.add(a, b)` builds Call("add", a, b)."""

    def __getattr__(self, name):
        return lambda *args: Call(name, *args)


op = _Ops()
x0, x1, x2 = X(0), X(1), X(2)

# ---------------------------------------------------------------------------------------------
# inputs: specs turned into arrays by a generator seeded from the case name


def uniform(*shape, lo=-3.0, hi=3.0, dtype=F32):
    return lambda rng: rng.uniform(lo, hi, size=shape).astype(dtype)


def away0(*shape, lo=0.5, hi=3.0, dtype=F32):
    """Floats with |x| in [lo, hi) and random signs (safe divisors)."""
    return lambda rng: (rng.uniform(lo, hi, size=shape) * rng.choice([-1.0, 1.0], size=shape)).astype(dtype)


def halves(*shape, dtype=F32):
    """Multiples of 0.5 in [-2, 2]: ties and zeros for comparisons, exact in every float dtype."""
    return lambda rng: (rng.integers(-4, 5, size=shape) / 2).astype(dtype)


def ints(*shape, lo=-10, hi=10, dtype=I32, nonzero=False):
    def make(rng):
        v = rng.integers(lo, hi + 1, size=shape)
        if nonzero:
            v[v == 0] = 1
        return v.astype(dtype)

    return make


def bools(*shape):
    return lambda rng: rng.integers(0, 2, size=shape).astype(B)


def const(values, dtype):
    return lambda rng: np.asarray(values, dtype=dtype)


f32, pos, nz, f16 = uniform, lambda *s: uniform(*s, lo=0.1, hi=4.0), away0, lambda *s: uniform(*s, dtype=F16)


def i32(*s, **kw):
    return ints(*s, **kw)


def u8(*s, lo=0, hi=255, dtype=U8, **kw):
    return ints(*s, lo=lo, hi=hi, dtype=dtype, **kw)


# ---------------------------------------------------------------------------------------------
# cases

CASES = []


def case(name, group, expr, *inputs):
    assert all(c[0] != name for c in CASES), f"duplicate case {name}"
    CASES.append((name, group, expr, inputs))


def unary_cases():
    g = "unary"
    for o in ["neg", "exp", "exp2", "sin", "trunc", "relu"]:
        case(f"{o}_f32", g, getattr(op, o)(x0), f32(3, 4))
    for o in ["log", "log2", "sqrt"]:
        case(f"{o}_f32", g, getattr(op, o)(x0), pos(3, 4))
    case("reciprocal_f32", g, op.reciprocal(x0), nz(3, 4))
    case("logical_not_f32", g, op.logical_not(x0), halves(3, 4))
    # same kernels as above (same shape), wider input ranges
    case("exp_big_f32", g, op.exp(x0), uniform(3, 4, lo=-20.0, hi=20.0))
    case("sin_wide_f32", g, op.sin(x0), uniform(3, 4, lo=-12.0, hi=12.0))
    case("trunc_wide_f32", g, op.trunc(x0), uniform(3, 4, lo=-100.0, hi=100.0))
    for o, spec in [("neg", i32(3, 4)), ("relu", i32(3, 4)), ("exp", i32(3, 4, lo=-3, hi=3)),
                    ("logical_not", i32(3, 4, lo=-2, hi=2))]:
        case(f"{o}_i32", g, getattr(op, o)(x0), spec)
    case("neg_u8", g, op.neg(x0), u8(8))
    case("logical_not_bool", g, op.logical_not(x0), bools(8))
    case("exp_f16", g, op.exp(x0), f16(3, 4))
    case("sqrt_f16", g, op.sqrt(x0), uniform(3, 4, lo=0.1, hi=4.0, dtype=F16))
    case("reciprocal_f16", g, op.reciprocal(x0), away0(3, 4, dtype=F16))
    case("unary_chain_f32", g, op.sqrt(op.exp2(op.neg(op.relu(x0)))), f32(3, 4))


def binary_cases():
    g = "binary"
    arith = ["add", "sub", "mul", "maximum", "minimum"]
    for o in arith:
        case(f"{o}_f32", g, getattr(op, o)(x0, x1), f32(3, 4), f32(3, 4))
    case("div_f32", g, op.div(x0, x1), f32(3, 4), nz(3, 4))
    for o in arith:
        case(f"{o}_i32", g, getattr(op, o)(x0, x1), i32(3, 4), i32(3, 4))
    case("div_i32", g, op.div(x0, x1), i32(3, 4), i32(3, 4, nonzero=True))
    case("idiv_i32", g, op.idiv(x0, x1), i32(3, 4, lo=-50, hi=50), i32(3, 4, lo=-7, hi=7, nonzero=True))
    for o in ["add", "mul"]:
        case(f"{o}_u8", g, getattr(op, o)(x0, x1), u8(3, 4), u8(3, 4))
    case("minimum_u8_zero", g, op.minimum(x0, x1), const([0, 0, 7, 200], U8), const([5, 0, 0, 100], U8))
    case("idiv_u8", g, op.idiv(x0, x1), u8(3, 4), u8(3, 4, lo=1, hi=20))
    for o in ["add", "mul", "maximum"]:
        case(f"{o}_f16", g, getattr(op, o)(x0, x1), f16(3, 4), f16(3, 4))
    case("div_f16", g, op.div(x0, x1), f16(3, 4), away0(3, 4, dtype=F16))
    for o in ["add", "mul"]:
        case(f"{o}_bool", g, getattr(op, o)(x0, x1), bools(8), bools(8))
    # mixed dtypes: tinygrad's lattice
    mixed = [("i32_f32", i32(3, 4), f32(3, 4)), ("u8_i32", u8(3, 4), i32(3, 4)),
             ("i8_u8", i32(3, 4, dtype=I8), u8(3, 4)), ("bool_i32", bools(3, 4), i32(3, 4)),
             ("f16_f32", f16(3, 4), f32(3, 4)), ("i32_f16", i32(3, 4), f16(3, 4)),
             ("i64_i32", i32(3, 4, dtype=I64), i32(3, 4)), ("f64_f32", f32(3, 4, dtype=F64), f32(3, 4)),
             ("u8_bool", u8(3, 4), bools(3, 4)), ("u8_u32", u8(3, 4), u8(3, 4, dtype=U32))]
    for n, a, b in mixed:
        case(f"add_{n}", g, op.add(x0, x1), a, b)
    # Rust scalars are weak
    scalar = [
        ("add_f32_s", op.add(x0, 2.5), f32(3, 4)), ("sub_f32_sint", op.sub(x0, 1), f32(3, 4)),
        ("rsub_f32", op.sub(2.5, x0), f32(3, 4)), ("rdiv_f32", op.div(3.0, x0), nz(3, 4)),
        ("rsub_int_u8", op.sub(3, x0), u8(3, 4)), ("mul_i32_sfloat", op.mul(x0, 2.5), i32(3, 4)),
        ("idiv_i32_sneg", op.idiv(x0, -4), i32(3, 4)), ("add_u8_s_wrap", op.add(x0, 250), u8(3, 4)),
        ("add_bool_sint", op.add(x0, 1), bools(3, 4)),
        ("mul_bool_sfloat", op.mul(x0, 2.5), bools(3, 4)), ("mul_f16_s", op.mul(x0, 2.5), f16(3, 4)),
        ("maximum_i32_sfloat", op.maximum(x0, 0.5), i32(3, 4)), ("add_bool_sbool", op.add(x0, True), bools(4)),
    ]
    for n, e, a in scalar:
        case(n, g, e, a)


def broadcast_cases():
    g = "broadcast"
    case("bcast_row", g, op.add(x0, x1), f32(3, 4), f32(4))
    case("bcast_col", g, op.mul(x0, x1), f32(3, 4), f32(3, 1))
    case("bcast_outer", g, op.sub(x0, x1), f32(3, 1), f32(1, 4))
    case("bcast_rank3_row", g, op.mul(x0, x1), f32(2, 3, 4), f32(4))
    case("bcast_rank_mismatch", g, op.sub(x0, x1), f32(2, 1, 4), f32(3, 1))
    case("bcast_0d", g, op.add(x0, x1), f32(), f32(3, 4))
    case("bcast_0d_both", g, op.mul(x0, x1), f32(), f32())
    case("bcast_size1", g, op.add(x0, x1), f32(1), f32(3, 4))
    case("bcast_maximum_mid", g, op.maximum(x0, x1), f32(2, 3, 4), f32(1, 3, 1))
    case("bcast_mixed_dtype", g, op.add(x0, x1), i32(3, 1), f32(4))
    case("bcast_div", g, op.div(x0, x1), f32(4, 1), nz(1, 3))
    case("bcast_cmplt", g, op.cmplt(x0, x1), halves(3, 4), halves(4))
    case("bcast_where", g, op.where(x0, x1, x2), bools(3, 1), f32(1, 4), f32(3, 4))
    case("bcast_u8_col", g, op.add(x0, x1), u8(2, 3), u8(2, 1))


def compare_cases():
    g = "compare"
    for o in ["cmplt", "lt", "gt", "ge", "le", "eq", "ne"]:
        case(f"{o}_f32", g, getattr(op, o)(x0, x1), halves(3, 4), halves(3, 4))
    for o in ["lt", "eq"]:
        case(f"{o}_i32", g, getattr(op, o)(x0, x1), i32(3, 4, lo=-2, hi=2), i32(3, 4, lo=-2, hi=2))
    case("gt_u8", g, op.gt(x0, x1), u8(3, 4, hi=3), u8(3, 4, hi=3))
    case("eq_bool", g, op.eq(x0, x1), bools(8), bools(8))
    case("lt_f16", g, op.lt(x0, x1), halves(3, 4, dtype=F16), halves(3, 4, dtype=F16))
    case("lt_f32_s", g, op.lt(x0, 0.5), halves(3, 4))
    case("eq_f32_s", g, op.eq(x0, 1.0), halves(3, 4))
    case("gt_i32_s", g, op.gt(x0, 2), i32(3, 4, lo=-5, hi=5))
    case("ne_i32_s", g, op.ne(x0, 0), i32(3, 4, lo=-2, hi=2))
    case("le_i32_sfloat", g, op.le(x0, 0.5), i32(3, 4, lo=-2, hi=2))
    # where
    case("where_f32", g, op.where(x0, x1, x2), bools(3, 4), f32(3, 4), f32(3, 4))
    case("where_f32_s", g, op.where(x0, x1, 0.0), bools(3, 4), f32(3, 4))
    case("where_s_f32", g, op.where(x0, -1.5, x1), bools(3, 4), f32(3, 4))
    case("where_float_cond", g, op.where(x0, x1, x2), halves(3, 4), f32(3, 4), f32(3, 4))
    case("where_i32", g, op.where(x0, x1, x2), bools(3, 4), i32(3, 4), i32(3, 4))
    case("where_mixed", g, op.where(x0, x1, x2), bools(3, 4), i32(3, 4), f32(3, 4))
    case("where_ss_mixed", g, op.where(x0, 2.5, 1), bools(3, 4))
    case("where_u8_sint", g, op.where(x0, x1, 0), bools(3, 4), u8(3, 4))
    case("where_s_f16", g, op.where(x0, 1.5, x1), bools(3, 4), f16(3, 4))
    case("leaky_relu", g, op.where(op.gt(x0, 0), x0, op.mul(x0, 0.1)), f32(3, 4))


def cast_cases():
    g = "cast"
    table = [
        ("f32_i32", f32(12, lo=-100.0, hi=100.0), I32), ("f32_u8", f32(12, lo=0.0, hi=255.0), U8),
        ("f32_bool", halves(12), B), ("f32_f16", f32(12), F16), ("f16_f32", f16(12), F32),
        ("f64_f32", f32(12, dtype=F64), F32), ("i32_f32", i32(12, lo=-1000, hi=1000), F32),
        ("i32_i8_wrap", i32(12, lo=-300, hi=300), I8), ("i32_u8_wrap", i32(12, lo=-300, hi=300), U8),
        ("i32_bool", i32(12, lo=-2, hi=2), B), ("i64_i32", i32(12, dtype=I64), I32), ("u8_i32", u8(12), I32),
        ("bool_f32", bools(12), F32), ("i8_u8", i32(12, lo=-128, hi=127, dtype=I8), U8),
    ]
    for n, spec, d in table:
        case(f"cast_{n}", g, op.cast(x0, d), spec)
    case("cast_then_add", g, op.add(op.cast(x0, I32), x1), f32(3, 4, lo=-9.0, hi=9.0), i32(3, 4))
    case("cast_bool_sum", g, op.sum(op.cast(op.gt(x0, 0), I32), None, False), f32(3, 4))
    case("cast_chain", g, op.cast(op.cast(op.cast(x0, I32), U8), F32), f32(12, lo=0.0, hi=200.0))


def movement_cases():
    g = "movement"
    a34, a234 = f32(3, 4), f32(2, 3, 4)
    table = [
        ("reshape_2d", op.reshape(x0, [2, 6]), a34), ("reshape_infer", op.reshape(x0, [-1, 3]), a34),
        ("reshape_flat", op.reshape(x0, [12]), a34), ("reshape_3d", op.reshape(x0, [4, 6]), a234),
        ("reshape_add_ones", op.reshape(x0, [1, 3, 1, 4]), a34), ("reshape_0d", op.reshape(x0, []), f32(1)),
        ("permute_2d", op.permute(x0, [1, 0]), a34), ("permute_3d", op.permute(x0, [2, 0, 1]), a234),
        ("expand_row", op.expand(x0, [3, 4]), f32(1, 4)),
        ("pad_1d", op.pad(x0, [2, 1]), f32(4)), ("pad_2d", op.pad(x0, [1, 0, 2, 3]), a34),
        ("pad_3d_one_axis", op.pad(x0, [0, 0, 1, 1, 0, 0]), a234),
        ("shrink_2d", op.shrink(x0, [1, 3, 0, 2]), a34),
        ("flip_0", op.flip(x0, [0]), a34), ("flip_both", op.flip(x0, [0, 1]), a34),
        ("flip_3d_neg", op.flip(x0, [0, -1]), a234),
        ("transpose_3d", op.transpose(x0, 0, 2), a234), ("T_3d", op.T(x0), a234),
        ("flatten_01", op.flatten(x0, 0, 1), a234), ("flatten_12", op.flatten(x0, 1, 2), a234),
        ("flatten_all", op.flatten(x0, 0, -1), a234),
        ("squeeze_all", op.squeeze(x0, None), f32(1, 3, 1, 2)), ("squeeze_1", op.squeeze(x0, 2), f32(1, 3, 1, 2)),
        ("squeeze_noop", op.squeeze(x0, 1), f32(1, 3, 1, 2)),
        ("unsqueeze_0", op.unsqueeze(x0, 0), a34), ("unsqueeze_neg", op.unsqueeze(x0, -1), a34),
        ("contiguous", op.contiguous(x0), a34),
        # chains
        ("chain_reshape_permute_reshape", op.reshape(op.permute(op.reshape(x0, [4, 3, 2]), [2, 0, 1]), [6, 4]), a234),
        ("chain_pad_shrink", op.shrink(op.pad(x0, [2, 2, 1, 1]), [1, 6, 0, 5]), a34),
        ("chain_shrink_pad", op.pad(op.shrink(x0, [1, 3, 1, 3]), [1, 0, 0, 2]), a34),
        ("chain_flip_permute", op.flip(op.permute(x0, [1, 2, 0]), [0, 2]), a234),
        ("chain_reshape_expand_permute", op.permute(op.expand(op.reshape(x0, [3, 1]), [3, 4]), [1, 0]), f32(3)),
        ("chain_pad_flip", op.flip(op.pad(x0, [1, 2]), [0]), f32(4)),
        ("chain_permute_pad_shrink", op.shrink(op.pad(op.permute(x0, [1, 0]), [1, 1, 0, 2]), [0, 5, 1, 4]), a34),
        ("chain_flip_shrink_reshape", op.reshape(op.shrink(op.flip(x0, [0, 1]), [1, 3, 0, 4]), [8]), a34),
        ("chain_unsqueeze_expand", op.expand(op.unsqueeze(x0, 1), [3, 2, 4]), a34),
        ("permute_i32", op.permute(x0, [1, 0]), i32(3, 4)), ("expand_f16", op.expand(x0, [3, 4]), f16(3, 1)),
        ("shrink_i64", op.shrink(x0, [1, 3]), i32(4, dtype=I64)),
        # realized intermediates: movement over a realized buffer, and realized views
        ("realize_then_permute", op.permute(op.realize(op.add(x0, 1.0)), [1, 0]), a34),
        ("realize_view_then_add", op.add(op.realize(op.permute(x0, [1, 0])), x1), a34, f32(4, 3)),
        ("realize_then_shrink", op.shrink(op.realize(op.mul(x0, x1)), [1, 2, 1, 3]), a34, a34),
    ]
    for n, e, *specs in table:
        case(n, g, e, *specs)


def noncontig_cases():
    g = "noncontig"
    case("nc_add_permuted", g, op.add(op.permute(x0, [1, 0]), x1), f32(4, 3), f32(3, 4))
    case("nc_mul_shrink_flip", g, op.mul(op.shrink(x0, [1, 4, 0, 4]), op.flip(x1, [1])), f32(4, 5), f32(3, 4))
    case("nc_exp_permuted", g, op.exp(op.permute(x0, [2, 0, 1])), f32(2, 3, 4))
    case("nc_sub_expand_T", g, op.sub(op.expand(x0, [3, 3]), op.T(x1)), f32(1, 3), f32(3, 3))
    case("nc_where_views", g, op.where(op.permute(x0, [1, 0]), op.shrink(x1, [0, 4, 1, 4]), op.flip(x2, [0])),
         bools(3, 4), f32(4, 5), f32(4, 3))
    case("nc_cast_permuted", g, op.cast(op.permute(x0, [1, 0]), F32), i32(3, 4))
    case("nc_add_pad", g, op.add(op.pad(x0, [1, 1, 0, 1]), x1), f32(1, 3), f32(3, 4))
    case("nc_maximum_flip_permute", g, op.maximum(op.flip(op.permute(x0, [1, 0]), [0]), x1), f32(3, 4), f32(4, 3))
    case("nc_self_transpose", g, op.add(x0, op.T(x0)), f32(3, 3))
    case("nc_reshaped_permute_add", g, op.add(op.reshape(op.permute(x0, [1, 0, 2]), [3, 8]), x1), f32(2, 3, 4),
         f32(8))
    case("nc_neg_shrink_realized", g, op.neg(op.shrink(op.realize(op.add(x0, x1)), [0, 2, 1, 3])), f32(3, 4), f32(3, 4))
    case("nc_u8_flip_add", g, op.add(op.flip(x0, [0]), x1), u8(6), u8(6))
    case("nc_sum_permuted", g, op.sum(op.permute(x0, [2, 1, 0]), 0, False), f32(2, 3, 4))


def reduce_cases():
    g = "reduce"
    x = f32(2, 3, 4)
    for keep in [False, True]:
        k = "keep" if keep else "drop"
        for ax in [0, 1, 2]:
            case(f"sum_ax{ax}_{k}", g, op.sum(x0, ax, keep), x)
        case(f"sum_ax02_{k}", g, op.sum(x0, [0, 2], keep), x)
        case(f"sum_all_{k}", g, op.sum(x0, None, keep), x)
        case(f"max_ax1_{k}", g, op.max(x0, 1, keep), x)
        case(f"min_ax2_{k}", g, op.min(x0, 2, keep), x)
        case(f"mean_ax12_{k}", g, op.mean(x0, [1, 2], keep), x)
    case("sum_neg_axis", g, op.sum(x0, -1, False), x)
    case("sum_ax01", g, op.sum(x0, [0, 1], False), x)
    case("max_ax0", g, op.max(x0, 0, False), x)
    case("max_all", g, op.max(x0, None, False), x)
    case("min_ax0", g, op.min(x0, 0, False), x)
    case("min_all", g, op.min(x0, None, False), x)
    case("mean_ax0", g, op.mean(x0, 0, False), x)
    case("mean_all", g, op.mean(x0, None, False), x)
    case("mean_all_keep", g, op.mean(x0, None, True), x)
    # integer and other dtypes
    case("sum_i32", g, op.sum(x0, 1, False), i32(3, 4))
    case("max_i32", g, op.max(x0, 0, False), i32(3, 4))
    case("min_i32", g, op.min(x0, None, False), i32(3, 4))
    case("mean_i32", g, op.mean(x0, 1, False), i32(3, 4))
    case("sum_u8", g, op.sum(x0, 1, False), u8(3, 4))
    case("max_u8", g, op.max(x0, 1, False), u8(3, 4))
    case("min_u8", g, op.min(x0, 1, False), u8(3, 4, lo=1))
    case("min_u8_zero", g, op.min(x0, None, False), const([3, 0, 5, 9], U8))
    case("sum_i8", g, op.sum(x0, None, False), i32(3, 4, lo=-100, hi=100, dtype=I8))
    case("sum_bool", g, op.sum(x0, 0, False), bools(5, 3))
    case("max_bool", g, op.max(x0, 1, False), bools(3, 4))
    case("sum_f16", g, op.sum(x0, 1, False), f16(3, 4))
    case("mean_f16", g, op.mean(x0, 0, False), f16(3, 4))
    case("max_f16", g, op.max(x0, None, False), f16(3, 4))
    case("sum_f64", g, op.sum(x0, 0, False), f32(3, 4, dtype=F64))
    # size-1 and size-0 dims
    case("sum_size1_keep", g, op.sum(x0, 1, True), f32(3, 1, 4))
    case("sum_size1_drop", g, op.sum(x0, 1, False), f32(3, 1, 4))
    case("sum_all_ones_shape", g, op.sum(x0, None, False), f32(1, 3, 1))
    case("sum_empty_ax0", g, op.sum(x0, 0, False), f32(0, 3))
    case("sum_empty_all", g, op.sum(x0, None, False), f32(0, 3))
    case("sum_empty_ax1", g, op.sum(x0, 1, False), f32(0, 3))
    case("sum_empty_keep", g, op.sum(x0, 0, True), f32(0, 3))
    case("mean_empty", g, op.mean(x0, 0, False), f32(0, 3))
    case("add_empty", g, op.add(x0, 1.0), f32(0, 3))
    # reductions combined with other ops
    case("expand_then_sum", g, op.sum(op.expand(x0, [3, 4]), 0, False), f32(1, 4))
    case("expand_then_sum_other", g, op.sum(op.expand(x0, [3, 4]), 1, False), f32(1, 4))
    case("sum_of_max", g, op.sum(op.max(x0, 2, False), 0, False), x)
    case("sub_max_keep", g, op.sub(x0, op.max(x0, 1, True)), f32(3, 4))
    shifted = op.exp(op.sub(x0, op.max(x0, 1, True)))
    case("softmax", g, op.div(shifted, op.sum(shifted, 1, True)), f32(3, 4))
    case("sum_of_product", g, op.sum(op.mul(x0, x1), None, False), f32(3, 4), f32(3, 4))
    case("relu_sum", g, op.sum(op.relu(op.add(x0, x1)), 1, False), f32(3, 4), f32(4))
    case("sum_flipped_padded", g, op.sum(op.flip(op.pad(x0, [1, 1, 0, 0]), [0]), 0, False), f32(3, 4))


def matmul_cases():
    g = "matmul"
    table = [
        ("mm_2d", f32(2, 3), f32(3, 4)), ("mm_non_square", f32(4, 3), f32(3, 2)),
        ("mm_1d_2d", f32(3), f32(3, 4)), ("mm_2d_1d", f32(2, 3), f32(3)), ("mm_1d_1d", f32(5), f32(5)),
        ("mm_batched", f32(2, 2, 3), f32(2, 3, 4)), ("mm_batch_bcast", f32(2, 2, 3), f32(3, 4)),
        ("mm_1d_3d", f32(3), f32(2, 3, 4)), ("mm_3d_1d", f32(2, 3, 4), f32(4)), ("mm_outer_dims", f32(1, 3), f32(3, 1)),
        ("mm_i32", i32(2, 3), i32(3, 2)), ("mm_f16", f16(2, 3), f16(3, 2)), ("mm_k1", f32(3, 1), f32(1, 4)),
    ]
    for n, a, b in table:
        case(n, g, op.matmul(x0, x1), a, b)
    case("mm_dot", g, op.dot(x0, x1), f32(2, 3), f32(3, 4))
    case("mm_transposed", g, op.matmul(op.T(x0), x1), f32(3, 2), f32(3, 4))
    case("mm_relu_sum", g, op.sum(op.relu(op.matmul(x0, x1)), 1, False), f32(3, 4), f32(4, 2))
    case("mm_chain", g, op.matmul(op.matmul(x0, x1), x2), f32(2, 3), f32(3, 4), f32(4, 2))


def creation_cases():
    g = "creation"
    table = [
        ("arange_5", op.arange(5)), ("arange_1", op.arange(1)),
        ("arange_step_f32", op.arange_step(0.0, 1.0, 0.25, F32)),
        ("arange_step_neg_i32", op.arange_step(5.0, 0.0, -2.0, I32)),
        ("arange_step_f16", op.arange_step(-1.0, 1.0, 0.5, F16)),
        ("arange_step_empty", op.arange_step(3.0, 1.0, 1.0, F32)),
        ("eye_3", op.eye(3)),
        ("full_f32", op.full([2, 3], 2.5)), ("full_int", op.full([2, 2], 7)), ("full_bool", op.full([3], True)),
        ("full_dtype_u8", op.full_dtype([2, 3], 7, U8)), ("full_dtype_f16", op.full_dtype([2], 1.5, F16)),
        ("full_0d", op.full([], 3.0)), ("zeros", op.zeros([2, 3])), ("ones", op.ones([3])),
        ("add_ones_const", op.add(op.ones([3, 4]), op.mul(op.arange(4), 2))),
        ("eye_matmul", op.matmul(op.eye(3), op.full([3, 2], 2.0))),
    ]
    for n, e in table:
        case(n, g, e)
    case("zeros_like_i32", g, op.zeros_like(x0), i32(2, 3))
    case("ones_like_u8", g, op.ones_like(x0), u8(4))
    case("full_like_f16", g, op.full_like(x0, 2.5), f16(2, 2))
    case("arange_mul_input", g, op.mul(op.arange(4), x0), i32(4))


GROUPS = [unary_cases, binary_cases, broadcast_cases, compare_cases, cast_cases, movement_cases, noncontig_cases,
          reduce_cases, matmul_cases, creation_cases]

# ---------------------------------------------------------------------------------------------
# tolerances and serialization


def tolerance(expected, expr, inputs):
    """tinygrad's forward tolerances; float32 transcendentals get atol 1e-5, anything touching float16 a half's."""
    if not is_float(expected.dtype):
        return 0.0, 0.0
    if expected.dtype == F16 or any(i.dtype == F16 for i in inputs) or "float16" in str(expr):
        return 1e-3, 5e-3
    if expr.ops() & TRANSCENDENTAL:
        return 1e-5, 1e-3
    return 1e-6, 1e-3


def s_str(s):
    b = s.encode()
    return struct.pack("<H", len(b)) + b


def s_array(a):
    a = np.asarray(a)  # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    raw = a.astype(a.dtype.newbyteorder("<")).tobytes(order="C")
    return s_str(a.dtype.name) + struct.pack(f"<B{a.ndim}I", a.ndim, *a.shape) + struct.pack("<I", len(raw)) + raw


def build():
    for g in GROUPS:
        g()
    out = [b"LGFX", struct.pack("<II", 1, len(CASES))]
    for name, group, expr, specs in CASES:
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        inputs = [np.asarray(s(rng)) for s in specs]
        want = expr.eval(inputs)
        atol, rtol = tolerance(want, expr, inputs)
        out += [s_str(name), s_str(group), s_str(str(expr)), struct.pack("<ddB", atol, rtol, len(inputs))]
        out += [s_array(i) for i in inputs] + [s_array(want)]
    return b"".join(out)


def main():
    data = build()
    counts = {}
    for _, group, _, _ in CASES:
        counts[group] = counts.get(group, 0) + 1
    summary = ", ".join(f"{g} {n}" for g, n in counts.items())
    write_or_check(OUT, data, f"{len(CASES)} cases: {summary}")


if __name__ == "__main__":
    main()
