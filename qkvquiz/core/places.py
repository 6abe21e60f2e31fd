"""Where an entry sits in an answer, in words: ``entry 3``, ``row 2, column 3``, ``matrix 1``.

The one wording of an entry's place, shared by the grader's messages, the answer form and the
worksheets' captions (one whole message per list of coordinates: a language orders them its way).
"""

from __future__ import annotations

from collections.abc import Sequence

from .i18n import N_, _

_INDEX_NAMES = {1: "row", 2: "matrix", 3: "block"}

_PLACES: dict[tuple[str, ...], str] = {
    ("entry",): N_("entry %(a)s"),
    ("row",): N_("row %(a)s"),
    ("row", "column"): N_("row %(a)s, column %(b)s"),
    ("matrix",): N_("matrix %(a)s"),
    ("matrix", "row"): N_("matrix %(a)s, row %(b)s"),
    ("matrix", "row", "column"): N_("matrix %(a)s, row %(b)s, column %(c)s"),
    ("block",): N_("block %(a)s"),
    ("block", "matrix"): N_("block %(a)s, matrix %(b)s"),
    ("block", "matrix", "row"): N_("block %(a)s, matrix %(b)s, row %(c)s"),
    ("block", "matrix", "row", "column"): N_("block %(a)s, matrix %(b)s, row %(c)s, column %(d)s"),
}


def entry_place(path: Sequence[int], ndim: int) -> str:
    """Where an item sits, counting from 1: ``entry 3``, ``row 2, column 3``, ``matrix 1``."""
    if not path:
        return ""
    names = []
    for k in range(len(path)):
        below = ndim - k - 1
        names.append(("column" if ndim >= 2 else "entry") if below == 0 else _INDEX_NAMES[below])
    return _(_PLACES[tuple(names)]) % dict(zip("abcd", path))


def where(index: Sequence[int], ndim: int) -> str:
    """An entry's place in words (``index`` counts from 0), exactly as the grader's messages say it."""
    return entry_place([i + 1 for i in index], ndim)
