"""Numbers and arrays as LaTeX for the templates (−∞ as \\infty, integers without decimals)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from math import isfinite
from typing import Any

import numpy as np

from ..core.i18n import _, ngettext


def _num(x: float, decimals: int) -> str:
    if x == _INF or x == -_INF:
        return r"-\infty" if x < 0 else r"\infty"
    if x.is_integer():
        return str(int(x))
    text = f"{x:.{decimals}f}"
    back = float(text)
    if back == 0:
        return "0"  # never "−0": a value that rounds to zero is 0
    if back == x:
        # Exact at this many decimals: written as short as it is (2.5, not 2.500), so that
        # an exact 1 and an exact 2.5 read alike; a rounded value keeps every decimal.
        text = text.rstrip("0")
    return text


def _fixed(x: float, decimals: int) -> str:
    # In a matrix of non-integers every entry gets the same number of decimals, so columns align;
    # an exact integer stays one (−2, as the worked steps write it, not −2.0).
    if x == _INF or x == -_INF:
        return r"-\infty" if x < 0 else r"\infty"
    if x.is_integer():
        return str(int(x)) if x else "0"
    text = f"{x:.{decimals}f}"
    return text.replace("-", "") if float(text) == 0 else text


def _fixed_texts(values: list[float], decimals: int) -> list[str]:
    """``[_fixed(v, decimals) for v in values]`` in one pass: a matrix's entries rarely repeat,
    so they are formatted directly rather than looked up (%-formatting writes what format() does)."""
    spec = "%." + str(decimals) + "f"
    out = [spec % v for v in values]
    for i, v in enumerate(values):
        if v.is_integer():
            out[i] = str(int(v)) if v else "0"  # an exact integer as the steps write it
    for i, text in enumerate(out):
        first = text[0]
        if first == "-":
            if text == "-inf":
                out[i] = r"-\infty"
            elif float(text) == 0:
                out[i] = text[1:]  # never "−0.00"
        elif first == "i":  # "inf"
            out[i] = r"\infty"
    return out


_INF = float("inf")
# The text of each number already written, per (way, decimals): a class's worksheets and keys
# write the same values (0, 1, 0.5, a row's sum …) over and over. Equal floats give equal
# text (0.0 and -0.0 both read "0"); NaN, never equal to itself, is not kept.
_MEMO_LIMIT = 1 << 17
_MEMOS: dict[tuple[Any, int], dict[float, str]] = {}


def _memo(way: Any, decimals: int) -> dict[float, str]:
    table = _MEMOS.get((way, decimals))
    if table is None or len(table) >= _MEMO_LIMIT:
        table = _MEMOS[(way, decimals)] = {}
    return table


def _texts(values: list[float], decimals: int, way: Any) -> list[str]:
    """``way(v, decimals)`` of every value (Python floats), each distinct value worked out once."""
    table = _memo(way, decimals)
    out = []
    for v in values:
        text = table.get(v)
        if text is None:
            text = way(v, decimals)
            if v == v:
                table[v] = text
        out.append(text)
    return out


def num(x: Any, decimals: int = 3) -> str:
    """One number: integers as integers, others rounded to ``decimals``; ±∞ as LaTeX."""
    x = float(x)
    if type(decimals) is not int:  # noqa: E721  (2.0 and True are refused by the format, as before)
        return _num(x, decimals)
    table = _MEMOS.get((_num, decimals))
    if table is not None:
        text = table.get(x)
        if text is not None:
            return text
    return _texts([x], decimals, _num)[0]


def nums(values: Any, decimals: int = 3) -> list[str]:
    """:func:`num` of every entry of ``values`` (an array or a list of numbers), row-major, in one call."""
    return _texts(np.asarray(values, dtype=np.float64).ravel().tolist(), decimals, _num)


_POWERS = tuple(10.0 ** k for k in range(8))
_EXACT = 2.0 ** 52  # every float at least this large is an integer


def _decisions(values: list[float], decimals: int) -> tuple[bool, int, bool]:
    """Whether entries get the same width, how many decimals (as NumPy would decide it), and
    whether every entry is finite."""
    all_finite = all(map(isfinite, values))
    finite = values if all_finite else [v for v in values if isfinite(v)]
    if all(v.is_integer() for v in finite):
        return False, decimals, all_finite
    if decimals >= len(_POWERS):  # np.round's power of ten is computed differently past 1e7
        arr = np.array(finite)
        return True, next((k for k in range(1, decimals) if np.all(np.round(arr, k) == arr)), decimals), all_finite
    for k in range(1, decimals):
        # np.round(v, k) == v for every entry: v·10^k to the nearest integer (ties to even),
        # divided by 10^k, in float64 as NumPy does it (a product past 2^52 is an integer already).
        f = _POWERS[k]
        for v in finite:
            y = v * f
            if (round(y) / f if -_EXACT < y < _EXACT else y / f) != v:
                break
        else:
            return True, k, all_finite
    return True, decimals, all_finite


def bmatrix(value: Any, decimals: int = 3) -> str:
    """A scalar, vector (as a row) or matrix as LaTeX (``bmatrix``); a stack as several matrices."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return num(arr, decimals)
    if type(decimals) is int and arr.ndim <= 2:  # noqa: E721
        # A worked solution writes the same rows again (V's rows in every output row): the text
        # of each small matrix is kept, by its exact bytes, shape and decimals.
        key = (arr.tobytes(), arr.shape, decimals) if arr.size <= _MATRIX_MEMO_SIZE else None
        text = _MATRICES.get(key) if key is not None else None
        if text is None:
            # Decided and formatted on Python floats: one pass, no NumPy call per matrix.
            values = arr.ravel().tolist()
            same_width, chosen, all_finite = _decisions(values, decimals)
            if not arr.shape[-1]:
                text = _layout(arr, [])
            elif same_width and chosen and all_finite and not any(v.is_integer() for v in values):
                # Every entry with ``chosen`` decimals: the whole matrix in one %-format (what
                # _fixed writes entry by entry), then any −0.00 unsigned.
                text = _layout_format(arr.shape, "%." + str(chosen) + "f") % tuple(values)
                if "-0." in text:
                    zero = " 0." + "0" * chosen + " "
                    text = text.replace(" -" + zero[1:], zero)
            else:
                texts = _fixed_texts(values, chosen) if same_width else _texts(values, chosen, _num)
                text = _layout_format(arr.shape, "%s") % tuple(texts)
            if key is not None:
                if len(_MATRICES) >= _MEMO_LIMIT:
                    _MATRICES.clear()
                _MATRICES[key] = text
        return text
    finite = arr[np.isfinite(arr)]
    same_width = bool(finite.size) and not np.all(finite == np.round(finite))
    if same_width:
        # Every entry gets as many decimals as the matrix needs and no more: exact halves
        # as 1.5 and 2.0, anything rounded to ``decimals``.
        decimals = next(
            (k for k in range(1, decimals) if np.all(np.round(finite, k) == finite)), decimals
        )
    if arr.ndim > 2:
        return ",\\ ".join(bmatrix(a, decimals) for a in arr)
    way = _fixed if same_width else _num
    return _layout(arr, [way(v, decimals) for v in arr.ravel().tolist()])


_MATRIX_MEMO_SIZE = 256  # entries of the largest matrix whose text is kept
_MATRICES: dict[tuple[bytes, tuple[int, ...], int], str] = {}


_LAYOUTS: dict[tuple[tuple[int, ...], str], str] = {}


def _layout_format(shape: tuple[int, ...], entry: str) -> str:
    """:func:`_layout` of a vector or matrix of ``shape`` (at least one column) as a %-format
    with ``entry`` (``%s``, ``%.2f``) for each entry, made once per shape."""
    layout = _LAYOUTS.get((shape, entry))
    if layout is None:
        rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
        row = " & ".join([entry] * cols)
        layout = _LAYOUTS[(shape, entry)] = r"\begin{bmatrix} " + r" \\ ".join([row] * rows) + r" \end{bmatrix}"
    return layout


def _layout(arr: np.ndarray, texts: list[str]) -> str:
    """A vector or matrix's entries (as text, row by row) as a LaTeX bmatrix."""
    cols = arr.shape[-1]
    if cols:
        rows = r" \\ ".join([" & ".join(texts[i:i + cols]) for i in range(0, len(texts), cols)])
    else:
        rows = r" \\ ".join([""] * (arr.shape[0] if arr.ndim == 2 else 1))
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
