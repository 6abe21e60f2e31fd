"""The registry of families: every topic a worksheet can ask about.

Each module of this package that defines ``FAMILIES`` (a tuple of :class:`Family`) is
registered; adding a topic is adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Env, Family, Given, Misconception, Param, Params, Step


def _discover() -> dict[str, Family]:
    found: dict[str, Family] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for family in getattr(module, "FAMILIES", ()):
            if family.name in found:
                raise RuntimeError(f"family {family.name!r} is defined twice")
            found[family.name] = family
    return dict(sorted(found.items()))


REGISTRY: dict[str, Family] = _discover()


def get_family(name: str) -> Family:
    """The family called ``name``; KeyError lists the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; known families: {', '.join(REGISTRY)}") from None


__all__ = ["REGISTRY", "Env", "Family", "Given", "Misconception", "Param", "Params", "Step", "get_family"]
