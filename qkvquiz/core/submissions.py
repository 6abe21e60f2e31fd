"""The door for a student's submission file: read within limits, every refusal a sentence.

A submission is untrusted: its size, JSON nesting, number of values, length of texts and numbers,
duplicate keys, invisible characters and lone surrogates are all bounded or refused here, before
anything of it reaches grading; a refusal is a ``ValueError`` whose message names the file and
the field, never a crash or a hang."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import N_, _
from ..core.inputs import (
    InputError,
    JsonRefused,
    decode_text,
    json_nesting,
    outside_json_strings,
    read_bytes_and_stat,
    shown_path,
    strict_json,
)
from ..core.untrusted import (
    MAX_ID_LENGTH,
)

# Limits on a submission file: each is far above what an honest submission needs, and each
# refusal is a sentence in the report, never a crash or a hang.
MAX_SUBMISSION_BYTES = 1_000_000
MAX_NESTING = 16  # lists and objects inside each other (a 4-d answer sits at depth 6)
MAX_VALUES = 100_000  # numbers, texts, lists and objects in one submission
MAX_TEXT = 10_000  # characters in one text or key
MAX_NUMBER_DIGITS = 400  # characters of one JSON number


@dataclass
class Submission:
    source: str
    student: str
    answers: Mapping[str, Any]
    variant: str | None = None  # the code printed on the worksheet, when the file names one
    set_id: str | None = None  # the set code printed on the worksheet, when the file names one
    saved_at: str | None = None  # when the answer form saved it (ISO 8601), when the file says
    mtime: float | None = None  # the file's modification time, when read from a file


def _read_limited(path: str | Path) -> tuple[bytes, os.stat_result]:
    """At most MAX_SUBMISSION_BYTES bytes of a regular file, and its ``fstat``
    (:func:`qkvquiz.core.inputs.read_bytes`: never blocks on a pipe, never reads a device);
    ValueError says why not, without the name (the report names the file)."""
    try:
        return read_bytes_and_stat(path, MAX_SUBMISSION_BYTES, "submission")
    except InputError as exc:
        raise ValueError(exc.message) from None


def read_submission(path: str | Path) -> Submission:
    """Read one submission file; raises ValueError with a sentence naming what is wrong."""
    return read_submission_with_mtime(path)[0]


def read_submission_with_mtime(path: str | Path) -> tuple[Submission, float]:
    """:func:`read_submission`, and the file's modification time as read."""
    raw, info = _read_limited(path)
    return submission_from_bytes(raw, shown_path(path)), info.st_mtime


class _Refused(ValueError):
    """Raised from inside the JSON decoder: the document is readable but not acceptable."""


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS:
        raise _Refused(_("the number %(text)s has %(n)s characters; at most %(max)s are allowed")
                       % {"text": _quoted(text), "n": len(text), "max": MAX_NUMBER_DIGITS})
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(_("the number %(text)s is too large for a float (at most about 1.8e308)") % {"text": _quoted(text)})
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _Refused(_("the number %(text)s has %(n)s digits; at most %(max)s are allowed")
                       % {"text": _quoted(text), "n": len(text.lstrip("-")), "max": MAX_NUMBER_DIGITS})
    return int(text)


def _quoted(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(shown)  # quotes, and control characters written as escapes


def _nesting(text: str) -> int:
    """How deeply arrays and objects nest in JSON text (brackets inside strings ignored); linear time."""
    return json_nesting(text)


def submission_from_bytes(raw: bytes, source: str) -> Submission:
    """Read a submission from the bytes of a file; ValueError says what is wrong.

    Refused, each with a sentence: more than ``MAX_SUBMISSION_BYTES``, text that is not UTF-8
    (a leading byte-order mark is fine), invalid JSON, arrays and objects nested deeper than
    ``MAX_NESTING``, a key twice in one object, ``NaN`` and ``Infinity``, numbers too large for
    a float or longer than ``MAX_NUMBER_DIGITS`` digits; then :func:`submission_from_json`.
    """
    if len(raw) > MAX_SUBMISSION_BYTES:
        raise ValueError(_("the file is %(size)s bytes or more; a submission may be at most %(max)s")
                         % {"size": len(raw), "max": MAX_SUBMISSION_BYTES})
    try:
        text = decode_text(raw, source, "submission")
    except InputError as exc:  # the report names the file; say where in it
        raise ValueError(_("the file is not UTF-8 text: line %(line)s, %(why)s") % {"line": exc.line, "why": exc.message}) \
            from None
    depth = _nesting(text)
    if depth > MAX_NESTING:
        raise ValueError(_("lists and objects are nested %(depth)s deep; at most %(max)s levels are allowed")
                         % {"depth": depth, "max": MAX_NESTING})
    # Numbers are read by json's own C code where no number can be too long or too large
    # (then float() and int() give what _bounded_float and _bounded_int would); else each by them.
    plain = not _risky_numbers(raw)
    try:
        doc = strict_json(text) if plain else strict_json(text, parse_float=_bounded_float, parse_int=_bounded_int)
    except JsonRefused as exc:  # said to the student, in their language
        if exc.key is not None:
            raise ValueError(_("the key %(name)s appears twice in one object; which one counts would be a guess")
                             % {"name": _quoted(exc.key)}) from None
        raise ValueError(
            _("%(token)s is not a JSON number; write the value you computed, or the text \"-inf\" for minus infinity")
            % {"token": exc.constant}) from None
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise ValueError(_("the file is empty")) from None
        raise ValueError(_("not valid JSON: %(why)s at line %(line)s, column %(column)s")
                         % {"why": _(JSON_ERRORS.get(exc.msg, exc.msg)), "line": exc.lineno, "column": exc.colno}) from None
    except RecursionError:  # the nesting check above should make this unreachable
        raise ValueError(_("lists and objects are nested too deeply; at most %(max)s levels are allowed")
                         % {"max": MAX_NESTING}) from None
    if plain and _checked_by_reading(text):
        return _submission_fields(doc, source)
    return submission_from_json(doc, source)


# What Python's JSON reader says is wrong (``json.JSONDecodeError.msg``), in the current language.
JSON_ERRORS = {message: message for message in (
    N_("Expecting value"), N_("Expecting property name enclosed in double quotes"), N_("Expecting ':' delimiter"),
    N_("Expecting ',' delimiter"), N_("Unterminated string starting at"), N_("Invalid control character at"),
    N_("Invalid \\escape"), N_("Invalid \\uXXXX escape"), N_("Extra data"),
    N_("Illegal trailing comma before end of object"), N_("Illegal trailing comma before end of array"),
)}


# Where a number could be longer than MAX_NUMBER_DIGITS or too large for a float: a run of 200
# number characters, or an exponent of 100 or more (e, a sign maybe, three digits), outside texts.
# Looked for in the bytes with every character mapped to its kind, by C's substring search.
_NUMBER_RUN = bytes(0x30 if chr(b) in "-+.0123456789eE" else 0x20 for b in range(256))
_EXPONENT = bytes(0x64 if chr(b).isdigit() and b < 128 else 0x65 if chr(b) in "eE" else 0x73 if chr(b) in "+-" else 0x20
                  for b in range(256))


def _risky_numbers(raw: bytes) -> bool:
    raw = outside_json_strings(raw)  # a variant code such as "3e456a" is text, not a number
    kinds = raw.translate(_EXPONENT)
    return b"eddd" in kinds or b"esddd" in kinds or b"0" * 200 in raw.translate(_NUMBER_RUN)


def _checked_by_reading(text: str) -> bool:
    """Whether :func:`check_document` has nothing left to refuse in what ``json.loads`` read from
    ``text`` (after the nesting check, with no risky number): so few values that there cannot
    be MAX_VALUES of them (each but the first follows a comma or opens a list or object), no
    text longer than MAX_TEXT (every text lies between two quotes when there is no escape),
    and no ``\\u`` escape (the only way to a lone surrogate). Read JSON holds only JSON's types,
    keys that are texts, and numbers already bounded."""
    if text.count(",") + text.count("[") + text.count("{") + 1 > MAX_VALUES:
        return False
    if "\\" in text:
        return len(text) <= MAX_TEXT and "\\u" not in text
    return len(text) <= MAX_TEXT or max(map(len, text.split('"'))) <= MAX_TEXT


def _where(path: tuple[Any, ...]) -> str:
    """A place in a submission, counting list items from 1: ``"answers" → "q1.scores" → item 2``."""
    if not path:
        return _("the submission")
    return " → ".join(_("item %(n)s") % {"n": p + 1} if isinstance(p, int) else _quoted(p) for p in path)


def check_document(doc: Any) -> None:
    """Refuse what no submission holds, wherever it sits: ValueError names the place.

    Limits: ``MAX_NESTING`` levels of lists and objects, ``MAX_VALUES`` values in all, texts
    (and keys) of at most ``MAX_TEXT`` characters, no lone surrogates (they cannot be written as
    UTF-8, so no report could hold them), keys that are texts, numbers that are finite and
    have at most ``MAX_NUMBER_DIGITS`` digits, and only JSON's types (NumPy numbers and arrays
    are accepted from Python callers). The walk uses its own stack, never recursion, so a
    deeply nested or self-containing object from Python cannot crash it.
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(doc, ())]
    count = 0
    while stack:
        value, path = stack.pop()
        count += 1
        if count > MAX_VALUES:
            raise ValueError(_("the submission holds more than %(max)s values") % {"max": MAX_VALUES})
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            count += value.size
            if value.ndim > MAX_NESTING or count > MAX_VALUES:
                raise ValueError(_("%(where)s: the array is too large (%(shape)s)") % {"where": _where(path), "shape": value.shape})
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                raise ValueError(_("%(where)s: NaN or infinity is not a number a submission can hold") % {"where": _where(path)})
            continue
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            value = value.item()
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, int):
            if value.bit_length() > 3.33 * MAX_NUMBER_DIGITS:
                raise ValueError(_("%(where)s: a number with more than %(max)s digits")
                                 % {"where": _where(path), "max": MAX_NUMBER_DIGITS})
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(_("%(where)s: %(value)s is not a number a submission can hold; "
                                   "write the value you computed, or the text \"-inf\"")
                                 % {"where": _where(path), "value": repr(value)})
        elif isinstance(value, Mapping):
            if len(path) >= MAX_NESTING:
                raise ValueError(_("%(where)s: nested more than %(max)s levels deep") % {"where": _where(path), "max": MAX_NESTING})
            for name, child in value.items():
                if not isinstance(name, str):
                    raise ValueError(_("%(where)s: a key is %(type)s, not text") % {"where": _where(path), "type": type(name).__name__})
                _check_text(name, (*path, name))
                stack.append((child, (*path, name)))
        elif isinstance(value, (list, tuple)):
            if len(path) >= MAX_NESTING:
                raise ValueError(_("%(where)s: nested more than %(max)s levels deep") % {"where": _where(path), "max": MAX_NESTING})
            stack.extend((child, (*path, i)) for i, child in enumerate(value))
        else:
            raise ValueError(_("%(where)s: a value of type %(type)s cannot be in a submission")
                             % {"where": _where(path), "type": type(value).__name__})


def _check_text(text: str, path: tuple[Any, ...]) -> None:
    if len(text) > MAX_TEXT:
        raise ValueError(_("%(where)s: a text of %(n)s characters; at most %(max)s are allowed")
                         % {"where": _where(path), "n": len(text), "max": MAX_TEXT})
    surrogate = next((ch for ch in text if "\ud800" <= ch <= "\udfff"), None)
    if surrogate is not None:
        raise ValueError(_("%(where)s: the text holds %(char)s, half of a character (a lone surrogate)")
                         % {"where": _where(path), "char": ascii(surrogate)})


def blank_answer(answer: Any) -> bool:
    """No answer, or a grid whose every box is ``null``; walked without recursion."""
    stack = [answer]
    while stack:
        value = stack.pop()
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif value is not None:
            return False
    return True


def submission_from_json(doc: Any, source: str) -> Submission:
    """A submission from a document already read (JSON, or built in Python); ValueError says what is wrong."""
    check_document(doc)
    return _submission_fields(doc, source)


def _submission_fields(doc: Any, source: str) -> Submission:
    """The submission in a document that :func:`check_document` accepts."""
    if not isinstance(doc, Mapping):
        raise ValueError(_('a submission is a JSON object {"student": ID, "answers": {...}}'))
    student = doc.get("student")
    if not isinstance(student, str) or not student:
        raise ValueError(_('field "student" is missing or not a text'))
    if len(student) > MAX_ID_LENGTH:
        raise ValueError(_('field "student" is %(n)s characters long; an id has at most %(max)s')
                         % {"n": len(student), "max": MAX_ID_LENGTH})
    answers = doc.get("answers")
    if not isinstance(answers, Mapping):
        raise ValueError(_('field "answers" is missing or not an object of part id: answer'))
    variant, set_id, saved_at = (doc.get(name) for name in ("variant", "set", "saved_at"))
    return Submission(source, student, answers, variant if isinstance(variant, str) else None,
                      set_id if isinstance(set_id, str) else None, saved_at if isinstance(saved_at, str) else None)
