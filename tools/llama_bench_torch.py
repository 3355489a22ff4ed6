"""The LLaMA rows' PyTorch peer: Hugging Face transformers running SmolLM2-135M-Instruct from the
same GGUF file (dequantized to float32 by transformers' GGUF loader), on 2 threads. The prefill
is one batched forward over 256 tokens (ids 1000..1255, as examples/bench.rs feeds lazygrad);
the decode is 64 greedy steps after it with the KV cache. Prints `bench llama_prefill <tok/s>
tok/s` and `bench llama_decode <tok/s> tok/s` (best of 3 runs each) for tools/bench_compare.py.
Runs in tools/.venv-torch (created on first use): `python3 tools/llama_bench_torch.py`.
"""

import os
import time

from venv_bootstrap import ensure_torch_venv

if __name__ == "__main__":
    ensure_torch_venv(__file__)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from gen_llama_ref import load_model  # noqa: E402

PREFILL, DECODE, FIRST_ID, RUNS = 256, 64, 1000, 3


def main():
    torch.set_num_threads(2)
    _, model = load_model()
    ids = torch.arange(FIRST_ID, FIRST_ID + PREFILL).view(1, PREFILL)
    prefill, decode = [], []
    with torch.no_grad():
        for _ in range(RUNS):
            start = time.perf_counter()
            step = model(ids, use_cache=True)
            prefill.append(PREFILL / (time.perf_counter() - start))
            past, nxt = step.past_key_values, step.logits[0, -1].argmax()
            start = time.perf_counter()
            for _ in range(DECODE):
                step = model(nxt.view(1, 1), past_key_values=past, use_cache=True)
                past, nxt = step.past_key_values, step.logits[0, -1].argmax()
            decode.append(DECODE / (time.perf_counter() - start))
    print(f"bench llama_prefill {max(prefill):.3f} tok/s")
    print(f"bench llama_decode {max(decode):.3f} tok/s")


if __name__ == "__main__":
    main()
