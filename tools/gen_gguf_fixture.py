"""The GGUF reader's fixture: tests/fixtures/gguf/small.gguf and the values each tensor holds.

A small GGUF v3 file written by llama.cpp's own `gguf` package: metadata of every value type, and
one tensor of each type lazygrad reads (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K). The
quantized ones are random blocks (every bit pattern is a valid quant) with their float16 scales
set to ordinary values; `gguf.quants.dequantize` gives what they hold, written as float32 to
small.expected.safetensors. Runs in tools/.venv-gguf (created on first use):
`python3 tools/gen_gguf_fixture.py`.
"""

import os

from venv_bootstrap import ensure_pinned_venv

if __name__ == "__main__":
    ensure_pinned_venv(__file__, ".venv-gguf", "requirements-gguf.txt")

import numpy as np  # noqa: E402
import gguf  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "gguf")

# byte offsets of each quantized block's float16 scales
SCALES = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q4_K: [0, 2], Q.Q6_K: [208]}


def quantized(rng, qtype, rows, cols):
    """Random blocks of `qtype` for a [rows, cols] tensor, as the [rows, bytes per row] uint8 array."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(rows * cols // block, size), dtype=np.uint8)
    for off in SCALES[qtype]:
        scale = rng.uniform(0.01, 0.1, size=len(blocks)).astype(np.float16) * rng.choice([-1, 1], len(blocks))
        blocks[:, off:off + 2] = scale.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return blocks.reshape(rows, cols // block * size)


def main():
    rng = np.random.default_rng(7)
    writer = gguf.GGUFWriter(os.path.join(OUT, "small.gguf"), arch="llama")
    writer.add_uint32("test.u32", 123456)
    writer.add_int32("test.i32", -42)
    writer.add_float32("test.f32", 0.5)
    writer.add_uint64("test.u64", 1 << 40)
    writer.add_bool("test.bool", True)
    writer.add_string("test.string", "héllo gguf")
    writer.add_array("test.strings", ["a", "bc", ""])
    writer.add_array("test.ints", [1, -2, 3])
    expected = {}
    plain = {"f32": (np.float32, [3, 5]), "f16": (np.float16, [4, 8])}
    for name, (dtype, shape) in plain.items():
        t = rng.standard_normal(shape).astype(dtype)
        writer.add_tensor(name, t)
        expected[name] = t.astype(np.float32)
    bf16 = rng.standard_normal([2, 16]).astype(np.float32)
    bf16_bits = (bf16.view(np.uint32) >> 16).astype(np.uint16)
    writer.add_tensor("bf16", bf16_bits.view(np.uint8).reshape(2, 32), raw_dtype=Q.BF16)
    expected["bf16"] = (bf16_bits.astype(np.uint32) << 16).view(np.float32)
    for name, qtype, shape in [("q8_0", Q.Q8_0, [2, 64]), ("q4_0", Q.Q4_0, [3, 32]), ("q4_1", Q.Q4_1, [2, 64]),
                               ("q4_k", Q.Q4_K, [2, 256]), ("q6_k", Q.Q6_K, [1, 512])]:
        raw = quantized(rng, qtype, *shape)
        writer.add_tensor(name, raw, raw_dtype=qtype)
        expected[name] = gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    save_file({k: np.ascontiguousarray(v) for k, v in expected.items()}, os.path.join(OUT, "small.expected.safetensors"))


if __name__ == "__main__":
    main()
