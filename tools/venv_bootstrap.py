"""Shared start-up for the tools/gen_*.py scripts: re-execute the script inside its own virtual
environment, creating that environment first if needed."""

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
