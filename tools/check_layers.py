"""Layers point one way (DESIGN.md), and files import each other without cycles: fail on any
import of a higher layer by a lower one, and on any cycle of imports between files.

    python3 tools/check_layers.py

Layers: ranks the top-level modules of src/ as DESIGN.md draws them (`nn`/`models` -> `tensor` ->
`engine` -> `schedule` -> `codegen` -> `renderer` -> `runtime`, with `uop`, `dtype`, `error`,
`helpers` and VIZ's export beneath them all; the recorder is `uop/track.rs`) and reads every
`crate::` path in each file outside its `#[cfg(test)]` module, grouped imports (`use crate::{a::X, b}`) included. A path into a
higher layer is a violation.

Cycles: in src/ and python/src/, every `use` and every `crate::`/`super::` path names a file (an
item re-exported by a `pub use` is followed to the file that defines it; a `pub use` is a
module's face, not a dependency of its own). A cycle of such imports between files is a
violation, except among the `uop/` files, which together define `UOp`.

Exit 1 with one line per violation, else 0.
"""

import os
import re
import sys
from collections import defaultdict

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

# lower layers a layer still may not import: the schedule plans over slots and knows devices only
# through what the tensor layer passes it (`schedule::Devices`); the engine binds buffers
APART = {("schedule", "runtime")}


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
                if RANK.get(reached, -1) > RANK[module] or (module, reached) in APART:
                    found.add((path, reached))
    return found



USE = re.compile(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", re.S)
PATH = re.compile(r"\b(crate|super)((?:::\w+)+)")


class Crate:
    """The .rs files under `src` (a crate's source folder, relative to `root`), outside their
    `#[cfg(test)]` modules, and which files each one imports."""

    def __init__(self, root, src):
        self.src = src
        self.text = {}
        for folder, _, names in os.walk(os.path.join(root, src)):
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.relpath(os.path.join(folder, name), root)
                    with open(os.path.join(root, path)) as f:
                        self.text[path] = f.read().split("#[cfg(test)]")[0]
        # per file, each name its `pub use`s re-export -> the module path it comes from
        self.reexports = defaultdict(dict)
        for path, text in self.text.items():
            for m in USE.finditer(text):
                if m.group(1):
                    for item in flatten(m.group(2)):
                        parts = self.absolute(item, path) or self.module(path) + item.split("::")
                        self.reexports[path][parts[-1]] = parts[:-1]

    def module(self, path):
        """The module path of a file (`src/a/b.rs` and `src/a/b/mod.rs`: ["a", "b"])."""
        parts = os.path.relpath(path, self.src)[: -len(".rs")].split(os.sep)
        return parts[:-1] if parts[-1] in ("mod", "lib") else parts

    def file(self, parts):
        """The file of module `parts`, if it is one."""
        base = os.path.join(self.src, *parts)
        candidates = [base + ".rs", os.path.join(base, "mod.rs")] if parts else [os.path.join(self.src, "lib.rs")]
        return next((c for c in candidates if c in self.text), None)

    def absolute(self, path, here):
        """A `crate::`, `super::` or `self::` path as module parts from the crate root."""
        parts = path.split("::")
        if parts[0] == "crate":
            return parts[1:]
        if parts[0] in ("super", "self"):
            mine = self.module(here)
            while parts[0] == "super":
                mine, parts = mine[:-1], parts[1:]
            return mine + (parts[1:] if parts[0] == "self" else parts)
        return None

    def resolve(self, parts, hops=0):
        """The file that defines what `parts` names: its longest module prefix, or the file a
        `pub use` there re-exports the next name from."""
        for k in range(len(parts), -1, -1):
            f = self.file(parts[:k])
            if f is None:
                continue
            source = self.reexports[f].get(parts[k]) if k < len(parts) else None
            if source is not None and hops < 8:
                return self.resolve(source + [parts[k]], hops + 1) or f
            return f
        return None

    def imports(self):
        """Each file's set of the other files it imports."""
        edges = defaultdict(set)
        for path, text in self.text.items():
            named = []
            for m in USE.finditer(text):
                if not m.group(1):
                    for item in flatten(m.group(2)):
                        parts = self.absolute(item, path)
                        # `use child::X` in a module file names its own child
                        named.append(parts if parts is not None else self.module(path) + item.split("::"))
            for m in PATH.finditer(USE.sub(lambda u: "" if u.group(1) else u.group(0), text)):
                named.append(self.absolute(m.group(1) + m.group(2), path))
            for parts in named:
                target = self.resolve(parts)
                if target and target != path:
                    edges[path].add(target)
        return edges


def flatten(tree):
    """The paths of a use tree: `a::{b, c::{d, e as f}, self}` -> a::b, a::c::d, a::c::e, a."""
    tree = re.sub(r"\s+", "", re.sub(r"\s+as\s+\w+", "", tree))
    m = re.match(r"^(.*?)::\{(.*)\}$", tree)
    if not m:
        return [tree]
    prefix, inner, items, depth, current = m.group(1), m.group(2), [], 0, ""
    for ch in inner + ",":
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            if current:
                items.append(current)
            current = ""
        else:
            current += ch
    return [p for item in items for p in ([prefix] if item == "self" else flatten(f"{prefix}::{item}"))]


def cycles(edges):
    """The strongly connected groups of more than one file (Tarjan's algorithm, iteratively)."""
    index, low, on_stack, stack, groups, counter = {}, {}, set(), [], [], [0]
    for start in list(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def cycle_violations(root):
    """The import cycles between files beyond `uop/`'s own."""
    found = []
    for src in ("src", os.path.join("python", "src")):
        for group in cycles(Crate(root, src).imports()):
            outside_uop = {p for p in group if not p.startswith("src/uop/")}
            if not outside_uop:
                continue
            found.append(sorted(group))
    return found


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = sorted(violations(root))
    for path, reached in found:
        why = "a layer kept apart from it" if (path.split("/")[1], reached) in APART else "a higher layer"
        print(f"{path}: imports `crate::{reached}`, {why} (DESIGN.md: layers point one way)")
    loops = cycle_violations(root)
    for group in loops:
        print(f"import cycle between files: {', '.join(group)}")
    if found or loops:
        sys.exit(1)
    print(
        "layers: every import points down (DESIGN.md), schedule/ does not import the runtime; "
        "no import cycle between files outside uop/"
    )


if __name__ == "__main__":
    main()
