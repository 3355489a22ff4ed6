"""The LLaMA rows' llama.cpp peer: llama-cpp-python running SmolLM2-135M-Instruct from the same
GGUF file on its quantized weights (Q4_1, Q8_0 embedding), on 2 threads. The prefill is one
batch of 256 tokens (ids 1000..1255, as examples/bench.rs feeds lazygrad); the decode is 64
greedy steps after it. Prints `bench llama_prefill <tok/s> tok/s` and `bench llama_decode
<tok/s> tok/s` (best of 3 runs each) for tools/bench_compare.py. Runs in tools/.venv-llamacpp,
created on first use (llama-cpp-python builds from source: about 20 minutes on 2 cores):
`python3 tools/llama_bench_llamacpp.py`.
"""

import time

from venv_bootstrap import ensure_pinned_venv, llama_gguf

if __name__ == "__main__":
    ensure_pinned_venv(__file__, ".venv-llamacpp", "requirements-llamacpp.txt")

import numpy as np  # noqa: E402
from llama_cpp import Llama  # noqa: E402

PREFILL, DECODE, FIRST_ID, RUNS, THREADS = 256, 64, 1000, 3, 2


def last_logits(llm):
    """The logits of the last token evaluated (llama.cpp's own buffer: without `logits_all` the
    binding keeps no copy)."""
    return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))


def main():
    llm = Llama(model_path=llama_gguf(), n_ctx=PREFILL + DECODE, n_batch=PREFILL, n_threads=THREADS,
                n_threads_batch=THREADS, verbose=False)
    ids = list(range(FIRST_ID, FIRST_ID + PREFILL))
    prefill, decode = [], []
    for _ in range(RUNS):
        llm.reset()
        start = time.perf_counter()
        llm.eval(ids)
        prefill.append(PREFILL / (time.perf_counter() - start))
        start = time.perf_counter()
        for _ in range(DECODE):
            llm.eval([int(np.argmax(last_logits(llm)))])
        decode.append(DECODE / (time.perf_counter() - start))
    print(f"bench llama_prefill {max(prefill):.3f} tok/s")
    print(f"bench llama_decode {max(decode):.3f} tok/s")


if __name__ == "__main__":
    main()
