"""Shared pieces of the tools/ scripts: re-executing a script inside its own virtual environment
(created first if needed), writing or checking a generated fixture, and where the LLaMA model is."""

import os
import subprocess
import sys


def ensure_venv(venv, script, install):
    """Re-exec `script` (with the same arguments) inside `venv`, creating the venv if it is missing.

    Returns at once when already running inside `venv`. Otherwise `install(venv_py)` is called
    before the re-exec to install the requirements when needed (it gets the venv's python).
    """
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    venv_py = os.path.join(venv, "bin", "python")
    if not os.path.exists(venv_py):
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    install(venv_py)
    os.execv(venv_py, [venv_py, os.path.abspath(script), *sys.argv[1:]])


HERE = os.path.dirname(os.path.abspath(__file__))


def _pinned_text(requirements):
    """The requirements file's text with the files it includes (`-r other.txt`) spliced in."""
    lines = []
    for line in open(requirements).read().splitlines():
        if line.startswith("-r "):
            lines.append(_pinned_text(os.path.join(os.path.dirname(requirements), line[3:].strip())))
        else:
            lines.append(line)
    return "\n".join(lines)


def _install_requirements(venv, requirements, venv_py):
    """Install `requirements` into `venv` when the pins changed since last time."""
    with open(os.path.join(venv, ".gitignore"), "w") as f:
        f.write("*\n")  # keep the (multi-GB) environment out of git without touching tools/.gitignore
    stamp = os.path.join(venv, "installed-requirements.txt")
    wanted = _pinned_text(requirements)
    if not os.path.exists(stamp) or open(stamp).read() != wanted:
        subprocess.check_call([venv_py, "-m", "pip", "install", "-q", "-r", requirements])
        with open(stamp, "w") as f:
            f.write(wanted)


def ensure_pinned_venv(script, venv_name, requirements_name):
    """Re-exec `script` inside tools/`venv_name` with tools/`requirements_name` installed."""
    venv = os.path.join(HERE, venv_name)
    requirements = os.path.join(HERE, requirements_name)
    ensure_venv(venv, script, lambda venv_py: _install_requirements(venv, requirements, venv_py))


def ensure_torch_venv(script):
    """Re-exec `script` inside tools/.venv-torch (torch and numpy pinned, CPU only is used)."""
    ensure_pinned_venv(script, ".venv-torch", "requirements-torch.txt")


def write_or_check(out, data, summary):
    """Write the fixture `data` to `out`; with --check only compare (exit 1 when it differs)."""
    rel = os.path.relpath(out, os.path.dirname(HERE))
    if "--check" in sys.argv[1:]:
        with open(out, "rb") as f:
            same = f.read() == data
        print(f"{rel}: {'up to date' if same else 'STALE (rerun its generator)'} ({summary})")
        sys.exit(0 if same else 1)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(data)
    print(f"wrote {rel}: {summary}, {len(data)} bytes")


def llama_gguf():
    """The SmolLM2 GGUF file tools/setup.sh --models puts in the user cache, or LLAMA_GGUF."""
    cache = os.environ.get("LAZYGRAD_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lazygrad")
    return os.environ.get("LLAMA_GGUF") or os.path.join(
        cache, "models", "smollm2-135m-instruct", "SmolLM2-135M-Instruct.Q4_1.gguf")
