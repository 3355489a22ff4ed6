#!/usr/bin/env python3
"""Generate tests/fixtures/bn_convnet_grads.safetensors: one training step of a small BatchNorm
conv net in PyTorch, computed in float64, read by tests/train.rs.

Usage: python3 tools/gen_train_ref.py [--check]

The net (conv 1->16 5x5, relu, conv 16->16 3x3, relu, BatchNorm in training mode, 2x2 max pool,
linear 1936->10, mean cross-entropy) sees a batch of 128 28x28 images, so its BatchNorm
statistics and its conv weights' gradients each sum tens of thousands of values per output: the
kind of long reduction where float32 accumulation order matters. With 16 channels, lazygrad
computes both convs channels-last, and the second conv's input gradient (a transposed conv) is
part of the step. The images are a hash of the element index (both sides compute it,
see `image` below); the parameters, labels, loss and float64 gradients (stored as float32) are
in the file. Runs in tools/.venv-torch (created on first use); `--check` compares instead of
writing.
"""

import json
import os
import struct

from venv_bootstrap import ensure_torch_venv, write_or_check

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "bn_convnet_grads.safetensors")

if __name__ == "__main__":
    ensure_torch_venv(__file__)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

BATCH, CHANNELS, CLASSES = 128, 16, 10
# spatial size after conv 5x5 (28 -> 24), conv 3x3 (-> 22) and the 2x2 pool (-> 11)
POOLED = 11


def image():
    """Pixel i of the flattened [128, 1, 28, 28] batch is bits 24..32 of i * 2654435761 mod 2^32."""
    i = torch.arange(BATCH * 28 * 28, dtype=torch.int64)
    return (((i * 2654435761) % (1 << 32)) >> 24).to(torch.float64).reshape(BATCH, 1, 28, 28)


def safetensors(tensors, metadata=None):
    """The safetensors encoding of `tensors` (name -> tensor), names sorted, data packed in order,
    with `metadata` (str -> str) as the header's `__metadata__` table when given."""
    names = {torch.float32: "F32", torch.float64: "F64", torch.int32: "I32"}
    header, blobs, offset = ({"__metadata__": metadata} if metadata else {}), [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        blob = t.numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def main():
    gen = torch.Generator().manual_seed(0)
    bound = lambda fan_in: fan_in ** -0.5  # noqa: E731
    uniform = lambda shape, b: (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * b  # noqa: E731
    params = {
        "conv.weight": uniform((CHANNELS, 1, 5, 5), bound(25)),
        "conv.bias": uniform((CHANNELS,), bound(25)),
        "conv2.weight": uniform((CHANNELS, CHANNELS, 3, 3), bound(CHANNELS * 9)),
        "conv2.bias": uniform((CHANNELS,), bound(CHANNELS * 9)),
        "bn.weight": 1 + uniform((CHANNELS,), 0.1),
        "bn.bias": uniform((CHANNELS,), 0.1),
        "fc.weight": uniform((CLASSES, CHANNELS * POOLED**2), bound(CHANNELS * POOLED**2)),
        "fc.bias": uniform((CLASSES,), bound(CHANNELS * POOLED**2)),
    }
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    for p in params.values():
        p.requires_grad_(True)
    x = F.conv2d(image(), params["conv.weight"], params["conv.bias"]).relu()
    x = F.conv2d(x, params["conv2.weight"], params["conv2.bias"]).relu()
    x = F.batch_norm(x, None, None, params["bn.weight"], params["bn.bias"], training=True, eps=1e-5)
    logits = F.linear(F.max_pool2d(x, 2).flatten(1), params["fc.weight"], params["fc.bias"])
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    out = {k: v.detach().float() for k, v in params.items()}
    out.update({f"grad.{k}": v.grad.float() for k, v in params.items()})
    out["labels"] = labels.to(torch.int32)
    out["loss"] = loss.detach().float().reshape(1)
    write_or_check(OUT, safetensors(out), f"{len(out)} tensors")


if __name__ == "__main__":
    main()
