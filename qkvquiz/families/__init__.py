"""The registry of families: every topic a worksheet can ask about."""

from __future__ import annotations

from .attention import FAMILIES as _ATTENTION
from .base import Env, Family, Given, Misconception, Param, Params, Step

REGISTRY: dict[str, Family] = {f.name: f for f in (*_ATTENTION,)}


def get_family(name: str) -> Family:
    """The family called ``name``; KeyError lists the known names."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; known families: {', '.join(sorted(REGISTRY))}") from None


__all__ = ["REGISTRY", "Env", "Family", "Given", "Misconception", "Param", "Params", "Step", "get_family"]
