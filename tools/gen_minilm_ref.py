"""The MiniLM reference: sentence-transformers' embeddings of tests/fixtures/minilm/sentences.txt
with all-MiniLM-L6-v2 (the folder tools/setup.sh --models puts in the user cache, or MINILM_DIR),
written to tests/fixtures/minilm/embeddings.safetensors (`embeddings`, [sentences, 384] float32)
for tests/models.rs. Runs in tools/.venv-torch (created on first use):
`python3 tools/gen_minilm_ref.py`.
"""

import os

from venv_bootstrap import ensure_torch_venv

if __name__ == "__main__":
    ensure_torch_venv(__file__)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is a local folder: never ask the Hub

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "minilm")


def main():
    cache = os.environ.get("LAZYGRAD_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lazygrad")
    model_dir = os.environ.get("MINILM_DIR") or os.path.join(cache, "models", "all-MiniLM-L6-v2")
    sentences = open(os.path.join(FIXTURES, "sentences.txt"), encoding="utf-8").read().splitlines()
    model = SentenceTransformer(model_dir, device="cpu")
    with torch.no_grad():
        embeddings = model.encode(sentences, convert_to_tensor=True, batch_size=len(sentences))
    save_file({"embeddings": embeddings.float().contiguous()}, os.path.join(FIXTURES, "embeddings.safetensors"))
    print(f"{len(sentences)} sentences -> {tuple(embeddings.shape)}")


if __name__ == "__main__":
    main()
