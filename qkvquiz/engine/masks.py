"""Attention masks as boolean "allowed" arrays: True where query i may attend to key j."""

from __future__ import annotations

from typing import Any

import numpy as np

Array = Any
MASK_KINDS = ("none", "causal", "padding", "random")


def full_allowed(n: int, m: int, *, xp=np) -> Array:
    return xp.ones((n, m), dtype=bool)


def causal_allowed(n: int, m: int | None = None, *, xp=np) -> Array:
    """Query i sees keys j ≤ i (the diagonal included)."""
    return xp.tril(xp.ones((n, n if m is None else m), dtype=bool))


def padding_allowed(n: int, m: int, padded: int, *, xp=np) -> Array:
    """The last ``padded`` keys are padding tokens that no query may attend to."""
    allowed = xp.ones((n, m), dtype=bool)
    allowed[:, m - padded:] = False
    return allowed


def allowed_from_given(mask: Array, *, xp=np) -> Array:
    """A 0/1 mask given (as stored in keys and specs) as a boolean array."""
    return xp.asarray(mask) > 0.5
