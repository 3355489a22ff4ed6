"""Shared pieces of the tools/ scripts: re-executing a script inside its own virtual environment
(created first if needed), and writing or checking a generated fixture."""

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
TORCH_VENV = os.path.join(HERE, ".venv-torch")


def _install_torch_requirements(venv_py):
    """Install tools/requirements-torch.txt into the torch venv when the pins changed since last time."""
    with open(os.path.join(TORCH_VENV, ".gitignore"), "w") as f:
        f.write("*\n")  # keep the (multi-GB) environment out of git without touching tools/.gitignore
    req, stamp = os.path.join(HERE, "requirements-torch.txt"), os.path.join(TORCH_VENV, "installed-requirements.txt")
    wanted = open(req).read()
    if not os.path.exists(stamp) or open(stamp).read() != wanted:
        subprocess.check_call([venv_py, "-m", "pip", "install", "-q", "-r", req])
        with open(stamp, "w") as f:
            f.write(wanted)


def ensure_torch_venv(script):
    """Re-exec `script` inside tools/.venv-torch (torch and numpy pinned, CPU only is used)."""
    ensure_venv(TORCH_VENV, script, _install_torch_requirements)


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
