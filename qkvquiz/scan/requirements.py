"""The optional libraries the scanner needs, and the one message when one is missing."""

from __future__ import annotations

import importlib
from types import ModuleType

#: import name → the distribution that provides it.
DISTRIBUTIONS = {"segno": "segno", "zxingcpp": "zxing-cpp", "pypdf": "pypdf", "PIL": "pillow"}


class ScanDependencyMissing(RuntimeError):
    """A library of the ``scan`` extra is not installed."""


def need(module: str) -> ModuleType:
    """The module, or :class:`ScanDependencyMissing` saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ScanDependencyMissing(
            f"reading scans needs the Python package {DISTRIBUTIONS.get(module.split('.')[0], module)}, which is not installed; "
            "install the scanner's extras with: pip install 'qkvquiz[scan]'"
        ) from None
