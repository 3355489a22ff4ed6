"""The LLaMA reference: Hugging Face transformers running SmolLM2-135M-Instruct from its GGUF file
(dequantized to float32 by transformers' own GGUF loader, its tokenizer converted from the GGUF's),
for three chat prompts: the prompt's token ids, the logits of the first decode step (after the
prompt) and the first 64 greedy tokens (decoding on past the end-of-turn token). Written to
tests/fixtures/llama/reference.safetensors for tests/models.rs. The model is the file
tools/setup.sh --models puts in the user cache (or LLAMA_GGUF). Runs in tools/.venv-torch (created
on first use): `python3 tools/gen_llama_ref.py` (about a minute).
"""

import os

from venv_bootstrap import ensure_torch_venv, llama_gguf

if __name__ == "__main__":
    ensure_torch_venv(__file__)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is a local file: never ask the Hub

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "llama")
# one line each; tests/models.rs reads the same file
PROMPTS = os.path.join(FIXTURES, "prompts.txt")
STEPS = 64


def load_model():
    """The tokenizer and the float32 model of the GGUF file tools/setup.sh --models installs
    (or LLAMA_GGUF)."""
    folder, name = os.path.split(llama_gguf())
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    return tok, model


def main():
    tok, model = load_model()
    out = {}
    for i, prompt in enumerate(open(PROMPTS, encoding="utf-8").read().splitlines()):
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            step = model(ids, use_cache=True)
            out[f"logits_{i}"] = step.logits[0, -1].float().contiguous()
            past, tokens = step.past_key_values, []
            nxt = step.logits[0, -1].argmax()
            for _ in range(STEPS):
                tokens.append(int(nxt))
                step = model(nxt.view(1, 1), past_key_values=past, use_cache=True)
                past, nxt = step.past_key_values, step.logits[0, -1].argmax()
        out[f"prompt_{i}"] = ids[0].to(torch.int32).contiguous()
        out[f"greedy_{i}"] = torch.tensor(tokens, dtype=torch.int32)
        print(f"{prompt!r}: {len(ids[0])} prompt tokens -> {tok.decode(tokens)!r}")
    save_file(out, os.path.join(FIXTURES, "reference.safetensors"))


if __name__ == "__main__":
    main()
