"""Numbers and arrays as LaTeX for the templates (−∞ as \\infty, integers without decimals)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..i18n import _, ngettext


def num(x: Any, decimals: int = 3) -> str:
    """One number: integers as integers, others rounded to ``decimals``; ±∞ as LaTeX."""
    x = float(x)
    if np.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    if x.is_integer():
        return str(int(x))
    text = f"{x:.{decimals}f}"
    if float(text) == 0:
        return "0"  # never "−0": a value that rounds to zero is 0
    if float(text) == x:
        # Exact at this many decimals: written as short as it is (2.5, not 2.500), so that
        # an exact 1 and an exact 2.5 read alike; a rounded value keeps every decimal.
        text = text.rstrip("0")
    return text


def _row(values: np.ndarray, decimals: int, same_width: bool) -> str:
    return " & ".join(num(v, decimals) if not same_width else _fixed(v, decimals) for v in values)


def _fixed(x: float, decimals: int) -> str:
    # In a matrix of non-integers every entry gets the same number of decimals, so columns align.
    if np.isinf(x):
        return num(x)
    text = f"{x:.{decimals}f}"
    return text.replace("-", "") if float(text) == 0 else text


def bmatrix(value: Any, decimals: int = 3) -> str:
    """A scalar, vector (as a row) or matrix as LaTeX (``bmatrix``); a stack as several matrices."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return num(arr, decimals)
    finite = arr[np.isfinite(arr)]
    same_width = bool(finite.size) and not np.all(finite == np.round(finite))
    if same_width:
        # Every entry gets as many decimals as the matrix needs and no more: exact halves
        # as 1.5 and 2.0, anything rounded to ``decimals``.
        decimals = next(
            (k for k in range(1, decimals) if np.all(np.round(finite, k) == finite)), decimals
        )
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim > 2:
        return ",\\ ".join(bmatrix(a, decimals) for a in arr)
    rows = r" \\ ".join(_row(r, decimals, same_width) for r in arr)
    return r"\begin{bmatrix} " + rows + r" \end{bmatrix}"


def and_list(words: Sequence[str]) -> str:
    """``1``, ``1 and 2``, ``1, 2 and 3`` in the current language (Chinese: ``1、2 和 3``)."""
    words = list(words)
    if len(words) == 1:
        return words[0]
    # Translators: the separator of the items of a list but its last ("1, 2 and 3": ", ").
    return _("%(list)s and %(last)s") % {"list": _(", ").join(words[:-1]), "last": words[-1]}


def shape_text(shape: Any) -> str:
    """"3×3 matrix", "vector of 4", "number"."""
    shape = tuple(np.shape(shape)) if not isinstance(shape, tuple) else shape
    if shape and all(isinstance(n, tuple) for n in shape):
        # A list of chunks whose last is shorter: each chunk's own shape, in order.
        sizes = and_list(["×".join(map(str, n)) for n in shape])
        if len(shape[0]) == 1:
            text = ngettext("a list of %(n)s vector (%(sizes)s)", "a list of %(n)s vectors (%(sizes)s)", len(shape))
        else:
            text = ngettext("a list of %(n)s matrix (%(sizes)s)", "a list of %(n)s matrices (%(sizes)s)", len(shape))
        return text % {"n": len(shape), "sizes": sizes}
    if not shape:
        return _("a number")
    if len(shape) == 1:
        return _("a vector of %(n)s") % {"n": shape[0]}
    if len(shape) == 2:
        return _("a %(rows)s×%(cols)s matrix") % {"rows": shape[0], "cols": shape[1]}
    return _("%(dims)s array") % {"dims": "×".join(map(str, shape))}


def mask_sentences(mask: Any) -> list[str]:
    """One sentence per query of a 0/1 mask, counting tokens from 1."""
    out = []
    for i, row in enumerate(np.asarray(mask) > 0.5, start=1):
        keys = [str(j) for j, ok in enumerate(row, start=1) if ok]
        if not keys:
            out.append(_("query %(i)s may attend to no key") % {"i": i})
        elif len(keys) == len(row):
            out.append(_("query %(i)s may attend to every key") % {"i": i})
        else:
            out.append(ngettext("query %(i)s may attend only to key %(keys)s",
                                "query %(i)s may attend only to keys %(keys)s", len(keys))
                       % {"i": i, "keys": and_list(keys)})
    return out


#: A step's symbol that is one capital letter, perhaps with a nabla or an accent (``S``,
#: ``\nabla X``, ``\bar X``); others (``N_{\text{dot}}``, ``B_K``) name what they name.
_CAPITAL_SYMBOL = re.compile(r"((?:\\nabla|\\bar|\\hat|\\tilde)\s*)?([A-Z])")


def label_symbol(symbol: str, ndim: int) -> str:
    """The symbol an answer's boxes are labelled with, matching the prompt's letters: a
    step's capital (``S``, ``Z``, ``\\nabla X``) names its matrix; the same step asked as a
    number or a vector is written in lower case, as the prompt writes it (scalar ``s``,
    vector ``z``)."""
    if ndim >= 2:
        return symbol
    match = _CAPITAL_SYMBOL.fullmatch(symbol.strip())
    if match is None:
        return symbol
    stripped = symbol.strip()
    return stripped[: match.start(2)] + match.group(2).lower() + stripped[match.end(2) :]
