"""The shape of the package's code that readers and tools rely on: no module named like a module
of the standard library (``qkvquiz/render/html.py`` once made ``import html`` ambiguous to readers
and import tools)."""

from __future__ import annotations

import sys
from pathlib import Path

import qkvquiz

PACKAGE = Path(qkvquiz.__file__).resolve().parent


def test_no_module_is_named_like_a_standard_library_module():
    clashes = sorted(
        str(path.relative_to(PACKAGE.parent))
        for path in PACKAGE.rglob("*.py")
        if path.stem in sys.stdlib_module_names
    )
    assert clashes == []
