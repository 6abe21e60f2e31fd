"""The shape of the package's code that readers and tools rely on:

- no module named like a module of the standard library (``qkvquiz/render/html.py`` once made
  ``import html`` ambiguous to readers and import tools);
- no private name of a dependency imported or read (``jinja2.utils._PassArg`` once was): a
  library's internals change without notice in its next release;
- no function over 100 lines (the ``generate`` command was 182: parsing, checks and printing
  that belong in the library or in functions of their own).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import qkvquiz

PACKAGE = Path(qkvquiz.__file__).resolve().parent
OURS = ("qkvquiz", "tests")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dependency(module: str) -> bool:
    root = module.split(".")[0]
    return bool(root) and root not in OURS and root not in sys.stdlib_module_names


def private_names_of_dependencies(source: str) -> list[str]:
    """Every ``from dep import _x``, ``import dep._x`` and ``dep.mod._x`` in ``source``."""
    tree = ast.parse(source)
    found, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _dependency(alias.name):
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name
                    found += [alias.name for part in alias.name.split(".") if _private(part)]
        elif isinstance(node, ast.ImportFrom) and not node.level and _dependency(node.module or ""):
            module = node.module or ""
            if any(_private(part) for part in module.split(".")):
                found.append(module)
            found += [f"{module}.{alias.name}" for alias in node.names if _private(alias.name)]
            modules.update({alias.asname or alias.name: f"{module}.{alias.name}" for alias in node.names})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, inner = [node.attr], node.value
            while isinstance(inner, ast.Attribute):
                chain.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id in modules:
                found.append(".".join([modules[inner.id], *reversed(chain)]))
    return found


def test_no_module_is_named_like_a_standard_library_module():
    clashes = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if path.stem in sys.stdlib_module_names
    )
    assert clashes == []


def test_the_check_for_private_names_finds_each_form():
    assert private_names_of_dependencies("from jinja2.utils import _PassArg") == ["jinja2.utils._PassArg"]
    assert private_names_of_dependencies("import jinja2\njinja2.utils._PassArg") == ["jinja2.utils._PassArg"]
    assert private_names_of_dependencies("import numpy as np\nnp._core.x") == ["numpy._core"]
    assert private_names_of_dependencies("from weasyprint import _x as y") == ["weasyprint._x"]
    assert private_names_of_dependencies("from .x import _y\nimport os\nos._exit\nself._z\nnp.__name__") == []


def test_no_private_name_of_a_dependency_is_imported_or_read():
    roots = (PACKAGE, PACKAGE.parent / "tests")
    found = {
        str(path.relative_to(PACKAGE.parent)): names
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if (names := private_names_of_dependencies(path.read_text(encoding="utf-8")))
    }
    assert found == {}


MAX_FUNCTION_LINES = 100


def test_no_function_is_longer_than_a_hundred_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
