"""Layers point one way (DESIGN.md): fail on any import of a higher layer by a lower one.

    python3 tools/check_layers.py

Ranks the top-level modules of src/ as DESIGN.md draws them (`nn`/`models` -> `tensor` ->
`engine` -> `schedule` -> `codegen` -> `renderer` -> `runtime`, with `uop`, `dtype`, `error`,
`helpers` and the VIZ recorder beneath them all) and reads every `crate::` path in each file
outside its `#[cfg(test)]` module, grouped imports (`use crate::{a::X, b}`) included. A path into a
higher layer is a violation: exit 1 with one line per violation, else 0.
"""

import os
import re
import sys

RANK = {
    "models": 7,
    "nn": 7,
    "tensor": 6,
    "engine": 5,
    "schedule": 4,
    "codegen": 3,
    "renderer": 2,
    "runtime": 1,
    "uop": 0,
    "dtype": 0,
    "error": 0,
    "helpers": 0,
    "viz": 0,
}

# the explorer's HTTP server sits on top of everything
ON_TOP = {"src/viz/server.rs"}


def modules_reached(text):
    """The top-level modules named by the `crate::` paths of `text`."""
    reached = set(re.findall(r"crate::(\w+)", text))
    for group in re.findall(r"crate::\{([^}]*)\}", text):
        reached |= {item.strip().split("::")[0] for item in group.split(",") if item.strip()}
    return reached


def violations(root):
    found = set()
    for folder, _, files in os.walk(os.path.join(root, "src")):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.relpath(os.path.join(folder, name), root)
            module = path.split(os.sep)[1].removesuffix(".rs")
            if module not in RANK or path in ON_TOP:
                continue
            with open(os.path.join(root, path)) as f:
                text = f.read().split("#[cfg(test)]")[0]
            for reached in modules_reached(text):
                if RANK.get(reached, -1) > RANK[module]:
                    found.add((path, reached))
    return found


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = sorted(violations(root))
    for path, reached in found:
        print(f"{path}: imports `crate::{reached}`, a higher layer (DESIGN.md: layers point one way)")
    if found:
        sys.exit(1)
    print("layers: every import points down (DESIGN.md)")


if __name__ == "__main__":
    main()
