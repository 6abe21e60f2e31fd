"""JSON text for people and diffs, written fast: a row of numbers stays on one line.

``key.json`` holds millions of numbers for a large class; :func:`dumps` lays any document out
with two-space indents and every innermost list of numbers on one line, and the same input
always gives the same bytes. :class:`Dumped` marks a piece already written at its depth, so a
part that many documents share (every student's blank answers) is written once, and
:func:`row_texts` / :func:`same_layout` write a class's arrays and documents of one layout in a
few calls instead of one per number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

def dumps(doc: Any) -> str:
    """JSON text for people and diffs: a row of numbers stays on one line; same input, same bytes."""
    return _dump(doc, 0) + "\n"


class Dumped(str):
    """A value already written as :func:`dumps` writes it at some depth (:func:`dumped`): a part
    that many documents share (every student's blank answers) is written once."""


def dumped(value: Any, depth: int) -> Dumped:
    """``value`` as :func:`dumps` writes it ``depth`` levels down in a document."""
    return Dumped(_dump(value, depth))


# One encoder, made once, for every leaf and text (json.dumps with options builds a new encoder
# per call, and a class's results hold about a hundred leaves per student). Its public encode()
# only: a 10,000-student key is written in the same time as through the json module's private
# C encoder, which an earlier version called directly.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_LEAVES = (int, float, str, bool, type(None))
_LEAF = _TEXT = _ENCODE
_PADS = ["  " * depth for depth in range(64)]


def row_texts(values: list[Any], shape: tuple[int, ...], depth: int) -> list[Dumped]:
    """Each of ``values`` (encoded arrays of ``shape``: numbers and "inf"/"-inf", no other text)
    as :func:`_dump` writes it ``depth`` levels down.

    The whole column is written by one call of the C encoder and cut between students, where
    ``k`` lists end at once ("]" * k + ", " + "[" * k, deeper than any break inside a value)."""
    k = len(shape)
    if not values or 0 in shape:
        return [Dumped(_dump(v, depth)) for v in values]
    whole = _LEAF(values)
    pieces = whole[k + 1:-(k + 1)].split("]" * k + ", " + "[" * k)
    if len(pieces) != len(values):  # pragma: no cover - not arrays of this shape after all
        return [Dumped(_dump(v, depth)) for v in values]
    if k == 0:
        return [Dumped(piece) for piece in pieces]
    if k == 1:  # a row stays on one line
        return [Dumped("[" + piece + "]") for piece in pieces]
    pads = [_PADS[depth + j] if depth + j < len(_PADS) else "  " * (depth + j) for j in range(k)]
    # Laid out, every list of lists is one entry per line: a break where m axes end at once
    # closes m - 1 lists on lines of their own and opens as many; the largest breaks first.
    breaks = [("]" * m + ", " + "[" * m,
               "]" + "".join("\n" + pads[j] + "]" for j in range(k - 2, k - m - 1, -1)) + ",\n" + pads[k - m] + "["
               + "".join("\n" + pads[j] + "[" for j in range(k - m + 1, k)))
              for m in range(k - 1, 0, -1)]
    head = "[" + "".join("\n" + pads[j] + "[" for j in range(1, k))
    tail = "]" + "".join("\n" + pads[j] + "]" for j in range(k - 2, 0, -1)) + "\n" + pads[0] + "]"
    out = []
    for text in pieces:
        for compact, laid_out in breaks:
            text = text.replace(compact, laid_out)
        out.append(Dumped(head + text + tail))
    return out


_SLOT = Dumped("\x00")  # where a value goes in a layout (a key's text is encoded, so it never holds \x00)


def same_layout(docs: list[dict[str, Any]], depth: int) -> list[dict[str, Any]] | Dumped:
    """``_dump(docs, depth)`` for documents that differ only in their texts (every student's entry
    of a key: the same items, names and shapes), written faster: the layout of the first, with a
    slot for each text, is written once and each document's texts are put in its slots (a
    student's entry was a hundred calls of _dump). Anything else is left to _dump (``docs``)."""
    if not docs:
        return docs
    slotted = _slots(docs[0])
    pieces = _dump(slotted, depth + 1).split(_SLOT)
    out = []
    for doc in docs:
        texts: list[str] = []
        if not _fill(doc, texts) or len(texts) != len(pieces) - 1:
            return docs
        joined = [pieces[0]]
        for text, piece in zip(texts, pieces[1:]):
            joined += (text, piece)
        out.append("".join(joined))
    pad, below = ("  " * k for k in (depth, depth + 1))  # as _lines lays out a list of entries
    return Dumped("[\n" + below + (",\n" + below).join(out) + "\n" + pad + "]")


def _slots(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with a slot in place of each text (non-empty mappings kept, walked in order)."""
    return {k: (_slots(v) if isinstance(v, Mapping) and v else _SLOT if isinstance(v, str) else v)
            for k, v in doc.items()}


def _fill(doc: Mapping[str, Any], texts: list[str]) -> bool:
    """Append ``doc``'s texts as _dump writes them, in the order of :func:`_slots`; False where a
    value is neither a text nor a mapping (its layout could differ from one document to the next)."""
    for v in doc.values():
        kind = type(v)
        if kind is Dumped:
            if _SLOT in v:
                return False
            texts.append(v)
        elif kind is dict or isinstance(v, Mapping):
            if v and not _fill(v, texts):
                return False
        elif kind is str:
            texts.append(_TEXT(v))
        else:
            return False
    return True


def _nested(value: Any) -> bool:
    return type(value) not in _LEAVES and isinstance(value, (list, Mapping))


_LEAF_TYPES = frozenset(_LEAVES)


def _dump(obj: Any, depth: int) -> str:
    kind = type(obj)
    if kind is Dumped:
        return obj
    if kind is str:
        return _TEXT(obj)
    if kind is list:
        # A list of plain values (a row of numbers) stays on one line.
        if _LEAF_TYPES.issuperset(map(type, obj)) or not any(map(_nested, obj)):
            return _LEAF(obj)
        return _lines(obj, depth)
    if kind in _LEAF_TYPES:
        return _LEAF(obj)
    if isinstance(obj, Mapping) and obj:
        below = depth + 1
        inner = _PADS[below] if below < len(_PADS) else "  " * below
        body = ",\n".join([f"{inner}{_TEXT(str(k))}: {_dump(v, below)}" for k, v in obj.items()])
        return "{\n" + body + "\n" + (_PADS[depth] if depth < len(_PADS) else "  " * depth) + "}"
    if isinstance(obj, list) and any(map(_nested, obj)):
        return _lines(obj, depth)
    return _ENCODE(obj)


def _lines(obj: list, depth: int) -> str:
    """A list with a list or mapping in it: one entry per line (rows of plain values on one line each)."""
    below = depth + 1
    inner = _PADS[below] if below < len(_PADS) else "  " * below
    leaves = _LEAF_TYPES.issuperset
    entries = [_LEAF(v) if type(v) is list and leaves(map(type, v)) else _dump(v, below) for v in obj]
    return "[\n" + inner + (",\n" + inner).join(entries) + "\n" + (_PADS[depth] if depth < len(_PADS) else "  " * depth) + "]"


