"""Where the bundled templates, problem bank and JSON Schemas live.

In a wheel, ``templates/`` and ``problem_bank/`` are copied into the package; in a source
checkout (or an editable install) they sit at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent


def _bundled(name: str) -> Path:
    inside = _PACKAGE / name
    return inside if inside.is_dir() else _PACKAGE.parent / name


def templates_dir() -> Path:
    """The Jinja templates (worksheets, keys, one problem and solution per family)."""
    return _bundled("templates")


def bank_dir() -> Path:
    """The bundled worksheet specs (``problem_bank/*.yaml``)."""
    return _bundled("problem_bank")


def schemas_dir() -> Path:
    """The JSON Schemas of the key and submission files."""
    return _PACKAGE / "schemas"
