"""The package's sources are valid on every Python we support, not only the one running the tests.

Two faults that one Python accepts and a newer one refuses, each found in a release:
- Python 3.13's compiler cleans docstrings' indentation through UTF-8, so a docstring holding a
  lone surrogate (``\\udcff`` written unescaped in a plain string) stops the import there; 3.11
  and 3.12 compiled it. Checked here on the parsed docstrings, so it fails on every Python.
- In a function that calls the gettext function ``_``, binding ``_`` anywhere in its module
  (``for _, x in …``, ``_, y = …``) makes ``_`` a local name on Python 3.12+, where inlined
  comprehensions share the function's scope: ``_("…")`` then raises UnboundLocalError.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qkvquiz

SOURCES = sorted(Path(qkvquiz.__file__).parent.rglob("*.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(SOURCES[0].parents[1])))
def test_every_docstring_can_be_written_as_utf8(path):
    for node in ast.walk(_tree(path)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node, clean=False)
            try:
                (docstring or "").encode("utf-8")
            except UnicodeEncodeError as error:
                where = getattr(node, "lineno", 1)
                pytest.fail(f"{path}:{where}: a docstring that Python 3.13 refuses to compile ({error.reason})")


def test_modules_that_translate_with_underscore_never_bind_it():
    bound = []
    for path in SOURCES:
        tree = _tree(path)
        uses_gettext = any(isinstance(node, ast.ImportFrom) and any(alias.name == "_" and alias.asname is None
                                                                   for alias in node.names)
                           for node in ast.walk(tree))
        if uses_gettext:
            bound += [f"{path}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Name) and node.id == "_" and isinstance(node.ctx, (ast.Store, ast.Del))]
    assert not bound, "`_` is the translation function here; name the unused value instead: " + ", ".join(bound)


def test_every_module_compiles_on_this_python():
    for path in SOURCES:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
