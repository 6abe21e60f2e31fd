"""One part's answers for the whole class as one array: read once, with why each unreadable box is."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

from ..core.i18n import N_, _
from ..core.places import where
from ..core.ragged import fill_absent
from .parse import AnswerFormatError, parse_answer, parse_entry, parse_shape_text

NO_ANSWER = N_("no answer given")
NO_ANSWER_BLANK = N_("no answer given (every box is empty)")


@dataclass
class Column:
    """One part's answers for a whole class: the values where readable, and why not elsewhere."""

    values: np.ndarray  # (students, *shape); 0 where not readable, NaN in an empty box
    readable: np.ndarray  # bool (students,)
    problems: dict[int, tuple[str, str]]  # student position -> ("missing" | "format", message)
    notes: dict[int, str] = field(default_factory=dict)  # student position -> a remark on a readable answer
    # student position -> an answer as handed in: one not readable, or one with unreadable entries
    raw: dict[int, Any] = field(default_factory=dict)


def read_column(answers: Sequence[Any], shape: tuple[int, ...], asked: np.ndarray | None = None,
                kind: str = "number") -> Column:
    """Read every student's answer to one part (``None``: not answered).

    A grid of the part's shape whose boxes are all ``null`` (the blank submission, an untouched
    grid of the answer form) is not answered; one with some ``null`` boxes is read with those
    entries empty (NaN), so they count as wrong entries and the rest still earn their credit.
    ``asked`` (bool, the part's shape) marks the entries a part asks for when it asks only
    some: whatever stands in the other boxes is ignored (read as empty).
    """
    shape = tuple(shape)
    if asked is not None:
        # A shorter last chunk (or any trailing boxes not asked) may be left out of the answer.
        answers = [_only_asked(fill_absent(a, shape, ~asked), shape, asked) for a in answers]
    shape_texts: dict[int, str] = {}
    if kind == "shape":  # a shape may be one text, "2×4" or "[2, 4]", as well as a list of sizes
        answers = list(answers)
        for j, answer in enumerate(answers):
            if isinstance(answer, str) and len(shape) == 1:
                try:
                    answers[j] = parse_shape_text(answer, shape[0])
                except AnswerFormatError as exc:
                    shape_texts[j] = str(exc)
    values = np.zeros((len(answers), *shape))
    readable = np.zeros(len(answers), dtype=bool)
    problems: dict[int, tuple[str, str]] = {}
    notes: dict[int, str] = {}
    raw: dict[int, Any] = {}
    # Answers of plain numbers (no text, no empty box) are read together, by one NumPy call.
    plain = [j for j, answer in enumerate(answers) if j not in shape_texts and _plain_shaped(answer, shape)]
    if plain:
        try:
            block = np.array([answers[j] for j in plain], dtype=np.float64)
        except (ValueError, OverflowError):  # a whole number too large for a float
            block = None
        if block is not None and block.shape == (len(plain), *shape) and not np.isnan(block).any():
            values[plain] = block
            readable[plain] = True
        else:
            plain = []  # each read on its own below, which tells what is wrong with which
    done = set(plain)
    for j, answer in enumerate(answers):
        if j in done:
            continue
        if answer is None:
            problems[j] = ("missing", _(NO_ANSWER))
            continue
        if j in shape_texts:
            problems[j] = ("format", shape_texts[j])
            raw[j] = answer
            continue
        blank = _blank_boxes(answer, shape)
        if blank is not None:
            if blank.all() or (asked is not None and blank[asked].all()):
                problems[j] = ("missing", _(NO_ANSWER_BLANK))
                continue
            answer = np.where(blank, 0, np.array(answer, dtype=object)).tolist()
            empty = int(blank.sum()) if asked is None else int(blank[asked].sum())
            if empty:
                notes[j] = _("%(empty)s of %(boxes)s boxes are empty") % {
                    "empty": empty, "boxes": blank.size if asked is None else int(asked.sum())}
        arr = _plain_numbers(answer, shape)
        unread: list[str] = []
        if arr is None:
            try:
                arr = parse_answer(answer, shape)
            except AnswerFormatError as exc:
                # A hand-edited file may hold one box the answer form would have refused: the
                # other entries are still graded, and that one counts as wrong, named.
                read = _read_entries(answer, shape, blank, asked)
                if read is None:
                    problems[j] = ("format", str(exc))
                    raw[j] = _as_handed_in(answers[j])
                    notes.pop(j, None)
                    continue
                arr, unread = read
                raw[j] = _as_handed_in(answers[j])  # kept as handed in, for a regrade request
        if blank is not None:
            arr[blank] = np.nan  # an empty box never passes
        for note in unread:
            notes[j] = _("%(message)s; %(note)s") % {"message": notes[j], "note": note} if j in notes else note
        values[j] = arr
        readable[j] = True
    return Column(values, readable, problems, notes, raw)


UNREAD_ENTRY = N_("%(where)s: %(error)s; it counts as a wrong entry")


def _read_entries(answer: Any, shape: tuple[int, ...], blank: np.ndarray | None,
                  asked: np.ndarray | None) -> tuple[np.ndarray, list[str]] | None:
    """An answer of the part's exact shape read entry by entry: each entry that cannot be read
    is NaN (a wrong entry), with a note naming its place and why. None when the answer is not
    such a grid, or when no entry it holds (an asked, filled box) can be read: then the whole
    answer is a format problem."""
    grid = _grid(answer, shape) if shape else None
    if grid is None:
        return None
    arr = np.zeros(shape)
    unread: list[str] = []
    readable = 0
    for index in np.ndindex(*shape):
        if blank is not None and blank[index]:
            continue  # an empty box (0 here): the caller empties it
        try:
            arr[index] = parse_entry(grid[index])
        except AnswerFormatError as exc:
            arr[index] = np.nan
            if asked is None or asked[index]:
                unread.append(_(UNREAD_ENTRY) % {"where": where(index, len(shape)), "error": str(exc)})
            continue
        readable += 1 if asked is None or asked[index] else 0
    return (arr, unread) if readable and unread else None


def _grid(answer: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """A list answer as an object array when it has exactly ``shape``; None otherwise (a ragged
    or misshapen answer is left to parse_answer, which words the error)."""
    if not isinstance(answer, list):
        return None
    try:
        grid = np.array(answer, dtype=object)
    except ValueError:  # ragged
        return None
    return grid if grid.shape == shape else None


def _only_asked(answer: Any, shape: tuple[int, ...], asked: np.ndarray) -> Any:
    """An answer of the part's shape with the boxes not asked emptied (``null``)."""
    grid = _grid(answer, shape)
    if grid is None:
        return answer
    grid[~asked] = None
    return grid.tolist()


def _as_handed_in(value: Any) -> Any:
    """An unreadable answer as JSON can hold it: arrays as lists, NaN and ±∞ floats as text."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [_as_handed_in(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def _blank_boxes(answer: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where a list of the part's exact shape has ``null`` entries; None if it has none or another shape."""
    grid = _grid(answer, shape) if shape else None
    if grid is None:
        return None
    blank = np.equal(grid, None)
    return blank if blank.any() else None


def _all_plain(value: Any, depth: int) -> bool:
    """Nested lists ``depth`` deep of plain JSON numbers (int or float, never bool)."""
    if depth == 0:
        return type(value) is float or type(value) is int
    if type(value) is not list:
        return False
    if depth == 1:
        return all(type(x) is float or type(x) is int for x in value)
    return all(_all_plain(v, depth - 1) for v in value)


def _plain_shaped(value: Any, shape: tuple[int, ...]) -> bool:
    """Nested lists of exactly ``shape`` of plain JSON numbers (int or float, never bool)."""
    level = [value]
    for size in shape:  # one level of lists at a time, each checked by C loops
        if set(map(type, level)) != _LIST or set(map(len, level)) != {size}:
            return False
        level = list(chain.from_iterable(level))
    return _NUMBER_TYPES.issuperset(map(type, level))


_LIST = {list}
_NUMBER_TYPES = frozenset({int, float})


def _plain_numbers(value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """The fast path: an answer of plain numbers of the right shape, read by one NumPy call.

    Anything else (text entries, a wrong shape, NaN, a huge integer) returns None and goes to
    :func:`parse_answer`, which reads exact forms and words the format errors.
    """
    if not _all_plain(value, len(shape)):
        return None
    try:
        arr = np.array(value, dtype=np.float64)
    except (ValueError, OverflowError):
        return None
    if arr.shape != shape or np.isnan(arr).any():
        return None
    return arr
