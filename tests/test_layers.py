"""The package's layers, read from its imports: each module imports only its own layer and those
below it, and no modules import each other round in a circle (imports inside functions count).

Bottom up (docs/internals.md draws the same picture):

core → engine → families → worksheet (spec, worksheet, key, roster …) → scan → render → generate → grade →
exchange → practice → review → cli (and the package's own ``__init__``, the face a notebook imports).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import qkvquiz

PACKAGE = Path(qkvquiz.__file__).resolve().parent

#: Module name prefixes (after ``qkvquiz.``) of each layer, bottom first.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("core",)),
    ("engine", ("engine",)),
    ("families", ("families",)),
    ("worksheet", ("spec_types", "spec", "worksheet", "json_rows", "key", "key_cache", "capacity", "roster", "files")),
    # Below rendering, so that scan/ can never import it (the cell map is data beside the key)
    # and rendering can write the cell map through scan.cellmap.
    ("scan", ("scan",)),
    ("render", ("render",)),
    ("generate", ("generate",)),
    ("grade", ("grade",)),
    ("exchange", ("exchange",)),
    ("practice", ("practice",)),
    # The review page of a scan: served by the practice server's pieces, grading through grade/.
    ("review", ("review",)),
    ("cli", ("cli", "__main__", "")),
]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports() -> dict[str, set[str]]:
    """Every module of the package → the modules of the package it imports (anywhere in it)."""
    known = modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [target, *(f"{target}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            edges[name].update(c for c in candidates if c in known and c != name)
    return edges


def layer_of(module: str) -> int:
    rest = module.removeprefix("qkvquiz").removeprefix(".")
    for rank, (_name, prefixes) in enumerate(LAYERS):
        if any(rest == p or (p and rest.startswith(p + ".")) for p in prefixes):
            return rank
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def test_every_module_belongs_to_a_layer():
    for module in modules():
        layer_of(module)


def test_no_import_runs_up_a_layer():
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]})"
              for a, targets in imports().items() for b in targets if layer_of(b) > layer_of(a)]
    assert not upward, "\n".join(sorted(upward))


def test_no_modules_import_each_other_in_a_circle():
    edges = imports()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in list(modules()):
        if module not in index:
            visit(module)
    assert not circles, circles
