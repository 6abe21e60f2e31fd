"""Answers, claims and givens written without the boxes a part does not have.

A delta-rule sequence whose last chunk is shorter than the others is stored rectangular, its
last chunk padded (see :func:`qkvquiz.families.delta.present`); a student, an instructor's
key and a hand-written given write that chunk at its own length. :func:`pad_nested` puts the
missing trailing boxes back so that the rectangular readers apply, and says where it did.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def pad_nested(value: Any, shape: tuple[int, ...], fill: Any = None) -> tuple[list, np.ndarray] | None:
    """``value`` (nested lists) padded at the end of each level with ``fill`` to ``shape``.

    Returns the padded lists and a bool array of ``shape``, True where ``fill`` was put; None
    when ``value`` is not nested lists that fit inside ``shape`` (a level longer than it, a
    number where a list belongs or the reverse).
    """
    filled = np.zeros(shape, dtype=bool)

    def pad(v: Any, level: int, at: tuple[int, ...]) -> Any:
        if level == len(shape):
            if isinstance(v, list):
                raise ValueError
            return v
        if not isinstance(v, list) or len(v) > shape[level]:
            raise ValueError
        out = [pad(x, level + 1, (*at, i)) for i, x in enumerate(v)]
        for i in range(len(v), shape[level]):
            filled[(*at, i)] = True
            out.append(_full(shape[level + 1:], fill))
        return out

    try:
        return pad(value, 0, ()), filled
    except ValueError:
        return None


def _full(shape: tuple[int, ...], fill: Any) -> Any:
    return fill if not shape else [_full(shape[1:], fill) for _ in range(shape[0])]


def _rectangular(value: Any, shape: tuple[int, ...]) -> bool:
    try:
        return np.array(value, dtype=object).shape == tuple(shape)
    except ValueError:
        return False


def fill_absent(value: Any, shape: tuple[int, ...], absent: np.ndarray | None) -> Any:
    """``value`` with the boxes it leaves out put back as ``null``, when every one is ``absent``.

    An answer of the step's full shape, or one that leaves out a box that exists, is returned
    as it is (the reader then words what is wrong with it).
    """
    if absent is None or not isinstance(value, list) or _rectangular(value, shape):
        return value
    padded = pad_nested(value, tuple(shape))
    if padded is None or not padded[1].any() or (padded[1] & ~absent).any():
        return value
    return padded[0]


def real_box(real: np.ndarray) -> tuple[slice, ...]:
    """The leading box of ``real`` (bool, True where an entry exists), where padding is trailing:
    a slice per axis, so that ``value[real_box(real)]`` is the chunk at its own length."""
    return tuple(slice(0, int(np.moveaxis(real, axis, 0).reshape(real.shape[axis], -1).any(axis=1).sum()))
                 for axis in range(real.ndim))
