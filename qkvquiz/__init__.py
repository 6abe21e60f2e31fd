"""qkvquiz: write, render and grade exercises on transformer attention math.

A notebook uses the same functions as the command line::

    from qkvquiz import load_spec, build_worksheet, generate_set, load_key, grade_files

    spec = load_spec("problem_bank/attention-basics.yaml")
    ws = build_worksheet(spec, ["ada", "alan"], seed=7)       # solved variants, NumPy arrays
    result = generate_set(spec, ["ada", "alan"], "out", seed=7)  # files on disk
    report = grade_files(load_key("out/key.json"), ["ada.json"])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .core.version import __version__ as __version__

# The library's names, imported when first used (PEP 562): `qkvquiz --help` and commands that
# need little (families, schema) do not pay for NumPy, Jinja and every family at start-up.
_LAZY = {
    "FAMILIES": ("families", "REGISTRY"), "get_family": ("families", "get_family"),
    "generate_set": ("generate", "generate_set"), "Tolerance": ("core.tolerance", "Tolerance"),
    "grade_files": ("grade.grader", "grade_files"), "load_key": ("key", "load_key"),
    "key_markdown": ("render.markdown", "key_markdown"), "worksheet_markdown": ("render.markdown", "worksheet_markdown"),
    "load_spec": ("spec", "load_spec"), "parse_spec": ("spec", "parse_spec"),
    "build_worksheet": ("worksheet", "build_worksheet"),
    "scan_and_grade": ("grade.scanned", "scan_and_grade"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'qkvquiz' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f".{module}", __name__), attr)
    globals()[name] = value  # once imported, an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


if TYPE_CHECKING:  # for type checkers and editors: the same names, eagerly
    from .families import REGISTRY as FAMILIES  # noqa: F401
    from .families import get_family  # noqa: F401
    from .generate import generate_set  # noqa: F401
    from .grade import Tolerance  # noqa: F401
    from .grade.grader import grade_files  # noqa: F401
    from .grade.scanned import scan_and_grade  # noqa: F401
    from .key import load_key  # noqa: F401
    from .render.markdown import key_markdown, worksheet_markdown  # noqa: F401
    from .spec import load_spec, parse_spec  # noqa: F401
    from .worksheet import build_worksheet  # noqa: F401
