"""Grading a class: read every submission, then compare part by part for all students at once.

Reading is per file and never stops the run: a file that is not JSON, has no student id,
or names a student the key does not know becomes a :class:`FileProblem`. Comparison is
batched: each part's answers of the whole class are read into one array (with a mask of the
readable ones) and checked against the key in one call; invariants, known mistakes and error
carried forward are evaluated the same way, so a class of 10,000 costs a few array calls
per part plus one small record per student and part.

Scoring of one part, in order:

- missing (no answer): 0; format error (given but unreadable): ``credit.format_error`` of
  the points (0 by default);
- every entry within tolerance: ``correct``, full points;
- the answer equals this step re-run on the student's own earlier answers, and those were all
  accepted (right within tolerance, or themselves right for the student's own accepted values):
  ``correct``, full points. Rounding each step to the asked decimals is right work;
- otherwise the larger of the per-entry share (``credit.per_entry``; all-or-nothing gives 0)
  and, when the answer equals this step re-run on the student's own earlier answers,
  ``credit.carried_forward`` of the points (``carried``). No credit is carried from an earlier
  answer that is missing, malformed, or wrong and breaking one of its step's invariants, nor
  to an answer that breaks one of its own step's invariants, nor within a file whose answers
  are another student's variant; the part's ``carry`` sentence names the earlier part and the
  rule it broke.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import DEFAULT_LANG, N_, _, current, ngettext, using
from ..core.inputs import (
    InputError,
    decode_text,
    json_nesting,
    outside_json_strings,
    read_bytes_and_stat,
)
from ..core.pause import collector_paused
from ..core.ragged import fill_absent
from ..core.tolerance import SLACK, Tolerance
from ..core.untrusted import (
    MAX_ID_LENGTH,
    char_name,
    invisible_characters,
    lookalike_key,
)
from ..core.untrusted import terminal_text as _escaped
from ..engine.backend import to_numpy
from ..families import Env, Family
from ..key import Key, KeyItem
from ..spec import Part
from .parallel import chunks_in_workers, forking
from .parse import AnswerFormatError, parse_answer, parse_shape_text


def terminal_text(text: str) -> str:
    """:func:`qkvquiz.core.untrusted.terminal_text`, at once for printable ASCII (nothing to escape)."""
    return text if text.isascii() and text.isprintable() else _escaped(text)


# Limits on a submission file: each is far above what an honest submission needs, and each
# refusal is a sentence in the report, never a crash or a hang.
MAX_SUBMISSION_BYTES = 1_000_000
CARRIED_MESSAGE = N_("Right method: this follows correctly from your own earlier answers.")
MAX_NESTING = 16  # lists and objects inside each other (a 4-d answer sits at depth 6)
MAX_VALUES = 100_000  # numbers, texts, lists and objects in one submission
MAX_TEXT = 10_000  # characters in one text or key
MAX_NUMBER_DIGITS = 400  # characters of one JSON number


@dataclass
class PartResult:
    part: str
    points: float
    score: float = 0.0
    verdict: str = "missing"  # correct | partial | wrong | carried | format | missing
    correct_entries: int = 0
    entries: int = 0
    message: str = ""  # format error or a sentence about the answer
    diagnosis: list[str] = field(default_factory=list)  # sentences of the known mistakes it matches
    mistakes: list[str] = field(default_factory=list)  # their names, in the same order
    invariants: list[str] = field(default_factory=list)  # sentences of the properties it breaks
    broken: list[str] = field(default_factory=list)  # their names, in the same order
    given: Any = None  # the answer as read (JSON form), None when not readable
    expected: Any = None
    entry_ok: Any = None  # per entry, within tolerance (nested like the answer)
    carry: str = ""  # how the part relates to earlier answers: right for rounded ones, or why nothing was carried

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part, "points": self.points, "score": round(self.score, 6), "verdict": self.verdict,
            "correct_entries": self.correct_entries, "entries": self.entries, "message": self.message,
            "diagnosis": self.diagnosis, "mistakes": self.mistakes,
            "broken_invariants": self.broken, "invariants": self.invariants,
            "given": self.given, "expected": self.expected, "entry_ok": self.entry_ok, "carry": self.carry,
        }


@dataclass
class StudentResult:
    student: str
    source: str
    variant: str
    parts: list[PartResult]
    notes: list[str] = field(default_factory=list)  # about the file as a whole (a variant that differs …)
    flags: list[str] = field(default_factory=list)  # short marks for the instructor: other-set, other-variant, copy
    candidates: list[Candidate] = field(default_factory=list)  # every file that claimed the student
    copied_from: str | None = None  # the classmate whose variant the answers match, when flagged

    @property
    def score(self) -> float:
        return sum(p.score for p in self.parts)

    @property
    def total(self) -> float:
        return sum(p.points for p in self.parts)

    def to_json(self, *, parts: bool = True) -> dict[str, Any]:
        """The student's entry of results.json; without ``parts``, all but its last field, "parts"."""
        doc = {
            "student": self.student, "source": terminal_text(self.source), "variant": self.variant,
            "score": round(self.score, 6), "total": self.total, "flags": self.flags, "notes": self.notes,
            "candidates": [c.to_json() for c in self.candidates], "copied_from": self.copied_from,
        }
        if parts:
            doc["parts"] = [p.to_json() for p in self.parts]
        return doc


@dataclass(frozen=True)
class Candidate:
    """One of the files that claim a student: whether it was graded, and why (or why not)."""

    source: str
    graded: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"source": terminal_text(self.source), "graded": self.graded, "why": terminal_text(self.why)}


@dataclass(frozen=True)
class FileProblem:
    """A submission file that could not be graded at all, and why."""

    source: str
    message: str

    def to_json(self) -> dict[str, str]:
        # A file name may hold control characters (an escape sequence): reports show them escaped.
        return {"source": terminal_text(self.source), "message": terminal_text(self.message)}


@dataclass
class GradeReport:
    key: Key
    results: list[StudentResult]
    problems: list[FileProblem]
    skipped: list[FileProblem] = field(default_factory=list)  # files deliberately not graded (blank templates)
    lang: str = DEFAULT_LANG  # the language its sentences are in (the reports are written in it)

    @property
    def absent(self) -> list[str]:
        """Students of the key with no graded submission, in key order."""
        graded = {r.student for r in self.results}
        return [s for s in self.key.students if s not in graded]

    def to_json(self, *, students: bool = True) -> dict[str, Any]:
        """results.json as one document; without ``students``, every field but "students"."""
        doc: dict[str, Any] = {"title": self.key.title, "points": self.key.points,
                               "lang": self.lang}  # the language its feedback and notes are in (exports follow it)
        if students:
            doc["students"] = [r.to_json() for r in self.results]
        doc["absent"] = self.absent
        doc["problems"] = [p.to_json() for p in self.problems]
        doc["skipped"] = [p.to_json() for p in self.skipped]
        return doc


@dataclass
class Submission:
    source: str
    student: str
    answers: Mapping[str, Any]
    variant: str | None = None  # the code printed on the worksheet, when the file names one
    set_id: str | None = None  # the set code printed on the worksheet, when the file names one
    saved_at: str | None = None  # when the answer form saved it (ISO 8601), when the file says
    mtime: float | None = None  # the file's modification time, when read from a file


def display_path(path: str | Path) -> str:
    """A path as text that can always be written as UTF-8 (odd bytes in a name become ``\\udcff``)."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


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
    return _read_submission(path)[0]


def _read_submission(path: str | Path) -> tuple[Submission, float]:
    """:func:`read_submission`, and the file's modification time as read."""
    raw, info = _read_limited(path)
    return submission_from_bytes(raw, display_path(path)), info.st_mtime


class _Refused(ValueError):
    """Raised from inside the JSON decoder: the document is readable but not acceptable."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for name, value in pairs:
        if name in doc:
            raise _Refused(_("the key %(name)s appears twice in one object; which one counts would be a guess")
                           % {"name": _quoted(name)})
        doc[name] = value
    return doc


def _no_constant(token: str) -> Any:
    raise _Refused(
        _("%(token)s is not a JSON number; write the value you computed, or the text \"-inf\" for minus infinity")
        % {"token": token}
    )


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
        if plain:
            doc = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
        else:
            doc = json.loads(
                text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant,
                parse_float=_bounded_float, parse_int=_bounded_int,
            )
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


def unknown_student_message(key: Key, student: str) -> str:
    """Why ``student`` is not graded, with the id that was probably meant when there is one.

    Ids that differ only by invisible characters (zero-width space, right-to-left override),
    fullwidth or other compatibility forms, case or surrounding space are reported as such.
    """
    notes = []
    bad = invisible_characters(student)
    if bad:
        notes.append(_("the id contains invisible or control characters (%(chars)s)")
                     % {"chars": ", ".join(char_name(c) for c in bad[:3])})
    target = lookalike_key(student)
    meant = [s for s in key.students if lookalike_key(s) == target]
    if len(meant) == 1:
        notes.append(_("did you mean %(id)s? Write the id exactly as on the worksheet") % {"id": repr(meant[0])})
    elif student != unicodedata.normalize("NFKC", student):
        notes.append(_("it holds fullwidth or other compatibility characters: write the id exactly as on the worksheet"))
    else:
        close = difflib.get_close_matches(student, key.students, 1, 0.75)
        if close:
            notes.append(_("did you mean %(id)s? Write the id exactly as on the worksheet") % {"id": repr(close[0])})
    message = _("student %(student)s is not in the key") % {"student": repr(student)}
    for note in notes:
        message = _("%(message)s; %(note)s") % {"message": message, "note": note}
    return message


def read_submissions(
    paths: Iterable[str | Path], *, progress: Callable[[], None] | None = None
) -> tuple[list[Submission], list[FileProblem]]:
    """Read submission files; a file that cannot be read becomes a :class:`FileProblem`.

    A large class's files are read by forked workers (:mod:`qkvquiz.grade.parallel`), in order."""
    paths = list(paths)
    with collector_paused():
        if not forking(len(paths)):
            return _read_files(paths, progress)
        submissions, problems = [], []
        with chunks_in_workers(_read_files, paths, chunk=250) as finished:
            for lo, hi, (subs, probs) in finished():
                submissions += subs
                problems += probs
                if progress is not None:
                    for _entry in range(hi - lo):
                        progress()
        return submissions, problems


def _read_files(paths: Sequence[str | Path], progress: Callable[[], None] | None = None
                ) -> tuple[list[Submission], list[FileProblem]]:
    submissions, problems = [], []
    for path in paths:
        try:
            sub, mtime = _read_submission(path)
            sub.mtime = mtime  # the last tie-break among several files for one student
            submissions.append(sub)
        except ValueError as exc:
            problems.append(FileProblem(display_path(path), str(exc)))
        if progress is not None:
            progress()
    return submissions, problems


def grade_files(key: Key, paths: Iterable[str | Path], *, progress: Callable[[], None] | None = None,
                xp=np, duplicates: str = "latest", lang: str | None = None) -> GradeReport:
    """Grade submission files against ``key``; unreadable files are reported, not fatal.

    ``xp`` is the array backend of the comparisons, ``duplicates`` the rule among several
    files for one student and ``lang`` the language of every sentence (see :func:`grade`).
    """
    with using(lang or key.lang), collector_paused():
        paths = list(paths)
        if forking(len(paths)):
            # A large class: the files are read, and their answers read per part, by workers.
            submissions, problems, read = _read_in_workers(key, paths, progress)
            report = _grade(key, submissions, xp=xp, duplicates=duplicates, read=read)
        else:
            submissions, problems = read_submissions(paths, progress=progress)
            report = grade(key, submissions, xp=xp, duplicates=duplicates, lang=lang)
    report.problems[:0] = problems
    return report


# Each submission read by a worker -> (chunk, position in the chunk); each chunk's columns.
_Read = tuple[dict[int, tuple[int, int]], list[dict[str, "Column"]]]


def _read_chunk(key: Key, paths: Sequence[str | Path]) -> tuple[list[Submission], list[FileProblem], dict[str, Column]]:
    """A worker's share: its files read as :func:`read_submissions` reads them, and the answers
    of those it could read, read per part as :func:`read_columns` reads them."""
    submissions, problems = _read_files(paths)
    columns = read_columns(key, [sub.answers for sub in submissions])
    for sub in submissions:
        # The answers are read into the columns: what the parent still asks of them is which ids
        # they are under and which are blank (choose.py, _explain_file), so only that goes back
        # (unpickling every answer cost the parent more than the rest of a file's reading).
        sub.answers = {name: None if blank_answer(answer) else True for name, answer in sub.answers.items()}
    return submissions, problems, columns


def _read_in_workers(key: Key, paths: list[str | Path], progress: Callable[[], None] | None
                     ) -> tuple[list[Submission], list[FileProblem], _Read]:
    submissions: list[Submission] = []
    problems: list[FileProblem] = []
    rows: dict[int, tuple[int, int]] = {}
    chunks: list[dict[str, Column]] = []
    with chunks_in_workers(partial(_read_chunk, key), paths, chunk=250) as finished:
        for lo, hi, (subs, probs, columns) in finished():  # in path order
            for k, sub in enumerate(subs):
                rows[id(sub)] = (len(chunks), k)
            chunks.append(columns)
            submissions += subs
            problems += probs
            if progress is not None:
                for _entry in range(hi - lo):
                    progress()
    return submissions, problems, (rows, chunks)


def _gathered(key: Key, accepted: Sequence[tuple[int, Submission]], read: _Read) -> dict[str, Column]:
    """The columns of the accepted submissions, from the columns the workers read."""
    rows, chunks = read
    where = [rows[id(sub)] for _index, sub in accepted]
    out = {}
    for _item, part in key.parts:
        parts = [chunk[part.id] for chunk in chunks]
        offsets = np.cumsum([0] + [len(c.readable) for c in parts])
        index = np.array([offsets[c] + k for c, k in where], dtype=np.int64)
        problems, notes, raw = {}, {}, {}
        for j, (c, k) in enumerate(where):
            column = parts[c]
            if k in column.problems:
                problems[j] = column.problems[k]
            if k in column.notes:
                notes[j] = column.notes[k]
            if k in column.raw:
                raw[j] = column.raw[k]
        values = np.concatenate([c.values for c in parts])[index]
        readable = np.concatenate([c.readable for c in parts])[index]
        out[part.id] = Column(values, readable, problems, notes, raw)
    return out


def grade(key: Key, submissions: Iterable[Submission], *, xp=np, duplicates: str = "latest",
          lang: str | None = None) -> GradeReport:
    """Grade already-read submissions: one per student, chosen by :func:`select_submissions`.

    The comparisons, known mistakes and carried-forward re-runs of each part are computed for
    the whole class on ``xp`` (NumPy or CuPy); verdicts come back to the host, so the same key
    and answers give the same report on either backend. Messages, diagnoses and notes are in
    ``lang`` (default: the key's language, which ``generate`` recorded).
    """
    with using(lang or key.lang), collector_paused():
        return _grade(key, submissions, xp=xp, duplicates=duplicates)


def _grade(key: Key, submissions: Iterable[Submission], *, xp: Any, duplicates: str,
           read: _Read | None = None) -> GradeReport:
    from .choose import select_submissions

    chosen = select_submissions(key, submissions, duplicates)
    if read is None:
        columns = read_columns(key, [sub.answers for _index, sub in chosen.accepted])
    else:
        columns = _gathered(key, chosen.accepted, read)
    report = grade_columns(key, chosen.accepted, columns, chosen.problems, xp=xp)
    for result in report.results:
        result.candidates = chosen.candidates.get(result.student, [])
    report.skipped = chosen.skipped
    return report


def match_students(key: Key, submissions: Iterable[Submission], duplicates: str = "latest"
                   ) -> tuple[list[tuple[int, Submission]], list[FileProblem]]:
    """Each chosen submission with its student's row in the key; unknown students are problems."""
    from .choose import select_submissions

    chosen = select_submissions(key, submissions, duplicates)
    return chosen.accepted, chosen.problems


def read_columns(key: Key, answers: Sequence[Mapping[str, Any]]) -> dict[str, Column]:
    """Every part's answers of the class (one mapping of part id: answer per student), read."""
    with collector_paused():
        return _read_columns(key, answers)


def _read_columns(key: Key, answers: Sequence[Mapping[str, Any]]) -> dict[str, Column]:
    return {part.id: read_column([a.get(part.id) for a in answers], item.shapes[part.id],
                                 part.asked(item.shapes[part.id]), item.family.step(part.step).kind)
            for item, part in key.parts}


def grade_columns(key: Key, accepted: Sequence[tuple[int, Submission]], columns: Mapping[str, Column],
                  problems: list[FileProblem], *, xp=np) -> GradeReport:
    """Grade answers already read by :func:`read_columns`, item by item for the whole class."""
    with collector_paused():
        return _grade_columns(key, accepted, columns, problems, xp=xp)


def _grade_columns(key: Key, accepted: Sequence[tuple[int, Submission]], columns: Mapping[str, Column],
                   problems: list[FileProblem], *, xp=np) -> GradeReport:
    from .copies import COPY_NOTE, detect_copies

    results = [StudentResult(sub.student, sub.source, key.variants[index], []) for index, sub in accepted]
    rows = np.array([index for index, _sub in accepted], dtype=np.int64)
    # Copies first: answers of another student's variant earn no carried credit.
    copies = detect_copies(key, rows, columns)
    no_carry = np.zeros(len(rows), dtype=bool)
    no_carry[list(copies)] = True
    for j, match in copies.items():
        results[j].copied_from = match.other
        results[j].flags.append(match.flag())
        results[j].notes.append(_(COPY_NOTE))
    for item in key.items:
        for part_results in grade_item(item, rows, columns, xp, no_carry).values():
            for result, part_result in zip(results, part_results):
                result.parts.append(part_result)
    for (index, sub), result in zip(accepted, results):
        _explain_file(sub, key.variants[index], result, key.set_id)
    return GradeReport(key, results, problems, lang=current())


def _explain_file(sub: Submission, variant: str, result: StudentResult, set_id: str = "") -> None:
    """Notes on what a file holds beyond its parts: another set's or variant's code, answers under unknown ids."""
    if sub.set_id and set_id and sub.set_id != set_id:
        result.flags.append(_("other set %(set)s") % {"set": terminal_text(sub.set_id)})
        result.notes.append(_(
            "the file is from set %(file_set)s, but the key is set %(key_set)s: it belongs to another worksheet "
            "set (another spec, seed or secret); it was graded against this student's variant of this set"
        ) % {"file_set": repr(sub.set_id), "key_set": repr(set_id)})
    if sub.variant and variant and sub.variant != variant:
        result.flags.append(_("other variant %(variant)s") % {"variant": terminal_text(sub.variant)})
        result.notes.append(_(
            "the file names variant %(file_variant)s, but %(student)s has variant %(variant)s: it may be "
            "another student's file or an older worksheet; it was graded against this student's key"
        ) % {"file_variant": repr(sub.variant), "student": repr(sub.student), "variant": repr(variant)})
    known = {p.part for p in result.parts}
    unknown = [k for k in sub.answers if k not in known]
    if not unknown:
        return
    for part in result.parts:
        if part.verdict != "missing":
            continue
        near = [k for k in unknown if k.lower() == part.part.lower()] or difflib.get_close_matches(part.part, unknown, 1, 0.75)
        if near:
            part.message = _("no answer under %(part)s; the file has one under %(near)s: "
                             "use the part id exactly as on the worksheet") % {
                "part": repr(part.part), "near": repr(near[0])}
    result.notes.append(_("answers under ids that are not parts of this worksheet were ignored: %(ids)s") % {
        "ids": ", ".join(repr(k) for k in unknown[:5]) + (" …" if len(unknown) > 5 else "")})


# ----------------------------------------------------------------------------- reading a column


@dataclass
class Column:
    """One part's answers for a whole class: the values where readable, and why not elsewhere."""

    values: np.ndarray  # (students, *shape); 0 where not readable, NaN in an empty box
    readable: np.ndarray  # bool (students,)
    problems: dict[int, tuple[str, str]]  # student position -> ("missing" | "format", message)
    notes: dict[int, str] = field(default_factory=dict)  # student position -> a remark on a readable answer
    raw: dict[int, Any] = field(default_factory=dict)  # student position -> an unreadable answer, as handed in


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
        if arr is None:
            try:
                arr = parse_answer(answer, shape)
            except AnswerFormatError as exc:
                problems[j] = ("format", str(exc))
                raw[j] = _as_handed_in(answers[j])
                notes.pop(j, None)
                continue
        if blank is not None:
            arr[blank] = np.nan  # an empty box never passes
        values[j] = arr
        readable[j] = True
    return Column(values, readable, problems, notes, raw)


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


# ----------------------------------------------------------------------------- grading an item


@dataclass
class PartCheck:
    """A part's answers against the key, for the whole class at once."""

    ok: np.ndarray  # bool (students, entries): entry within tolerance
    right: np.ndarray  # bool (students,): readable and every entry within tolerance
    broken: list[tuple[str, str, np.ndarray]]  # (name, sentence, bool per student) per invariant
    holds: np.ndarray  # bool (students,): readable and every invariant of the step holds
    sound: np.ndarray  # bool (students,): usable as an earlier answer for carried credit
    asked: np.ndarray | None = None  # bool (entries,): the entries a part asks, when only some


def entry_band(tol: Tolerance, values: np.ndarray) -> np.ndarray:
    """The error each entry of a student's ``values`` may carry, for invariant checks.

    The tolerance's band around the student's own value, at least its band around 0 (so an
    entry that should be 0 is judged like an exact 0), plus the float slack.
    """
    finite = np.where(np.isfinite(values), np.abs(values), 0.0)
    band = np.maximum(tol.band(values), tol.band(np.zeros_like(values)))
    return band + SLACK * np.maximum(finite, band)


def check_part(item: KeyItem, part: Part, column: Column, env: Env, xp=np) -> PartCheck:
    """Entries within tolerance and invariants of every student's answer to ``part``.

    ``env`` holds the key's values on ``xp``; the verdicts come back to the host.
    """
    n = len(column.readable)
    tol = item.tolerance_for(part.step)
    values = xp.asarray(column.values)
    asked = part.asked(tuple(column.values.shape[1:]))
    flat = None if asked is None else asked.reshape(-1)
    with np.errstate(all="ignore"):
        ok = to_numpy(tol.passes(values, env[part.step], xp=xp)).reshape(n, -1) & column.readable[:, None]
        if flat is not None:
            ok = ok | ~flat  # entries not asked never count against an answer
        right = column.readable & ok.all(axis=1)
        broken = []
        holds_all = np.ones(n, dtype=bool)
        invariants = item.family.invariants_for(part.step, item.params)
        if invariants:
            band = xp.asarray(entry_band(tol, column.values))
            for inv in invariants:
                holds = to_numpy(inv.holds(values, env, item.params, band, xp)).astype(bool)
                holds_all &= holds
                broken.append((inv.name, _(inv.feedback), column.readable & ~holds))
    holds_all &= column.readable
    return PartCheck(ok, right, broken, holds_all, right | holds_all, flat)


def carried_inputs(family: Family, step: str, asked: Iterable[str]) -> tuple[list[str], list[str]]:
    """For error carried forward: the asked steps that feed ``step``, and the unasked steps between.

    Walks ``needs`` back from ``step``, stopping at asked steps (the student's own values are
    used there) and at givens. Both lists are in the family's step order.
    """
    asked = set(asked)
    inputs: set[str] = set()
    between: set[str] = set()
    stack = list(family.step(step).needs)
    while stack:
        name = stack.pop()
        if name in asked:
            inputs.add(name)
        elif name in family.step_names and name not in between:
            between.add(name)
            stack.extend(family.step(name).needs)
    order = family.step_names
    return [s for s in order if s in inputs], [s for s in order if s in between]


def rerun_on_own(family: Family, step: str, env: Env, own: Mapping[str, np.ndarray], between: Sequence[str], params,
                 xp=np) -> Any:
    """``step`` recomputed with the steps in ``own`` replaced, re-running ``between`` first (on ``xp``)."""
    redo = Env(env)
    redo.update({name: xp.asarray(value) for name, value in own.items()})
    with np.errstate(all="ignore"):
        for name in between:
            redo[name] = family.rerun(name, redo, params, xp)
        return family.rerun(step, redo, params, xp)


def grade_item(item: KeyItem, rows: np.ndarray, columns: Mapping[str, Column], xp=np,
               no_carry: np.ndarray | None = None) -> dict[str, list[PartResult]]:
    """Every part of one item for the students at ``rows`` of the key (in submission order).

    The comparisons, known mistakes and carried-forward re-runs run for the whole class on
    ``xp`` (NumPy or CuPy); only booleans come back to the host. ``no_carry`` (bool per
    student) marks submissions that earn no carried credit (answers of another variant).
    """
    if len(rows) == 0:
        return {part.id: [] for part in item.parts}
    host = Env({name: value[rows] for name, value in item.env.items()})
    env = host if xp is np else Env({name: xp.asarray(value) for name, value in host.items()})
    columns = _with_unasked_filled(item, columns, host)
    checks = {part.id: check_part(item, part, columns[part.id], env, xp) for part in item.parts}
    if no_carry is None:
        no_carry = np.zeros(len(rows), dtype=bool)
    chains = chain_checks(item, columns, checks, env, no_carry, xp)
    return {part.id: _part_results(item, part, columns, checks, chains[part.id], env, host, xp) for part in item.parts}


def _with_unasked_filled(item: KeyItem, columns: Mapping[str, Column], host: Env) -> dict[str, Column]:
    """Columns whose entries a part does not ask hold the key's values there.

    A later step re-run on a student's own partial answer then uses the right values for what
    was not asked, and invariants see whole rows; verdicts count only the asked entries.
    """
    out = dict(columns)
    for part in item.parts:
        asked = part.asked(item.shapes[part.id])
        if asked is None or part.id not in columns:
            continue
        column = columns[part.id]
        values = column.values.copy()
        values[:, ~asked] = host[part.step][:, ~asked]
        out[part.id] = Column(values, column.readable, column.problems, column.notes, column.raw)
    return out


@dataclass
class ChainCheck:
    """How each student's answer to a part relates to their own earlier answers."""

    accepted: np.ndarray  # bool (students,): right, or right for their own accepted earlier answers
    from_own: np.ndarray  # bool (students,): accepted only because it follows from accepted rounded values
    carried: np.ndarray  # bool (students,): wrong only because an earlier answer was wrong: carried credit
    inputs: list[str]  # part ids of the earlier answers it is computed from
    why_not: dict[int, str] = field(default_factory=dict)  # student position -> why no credit was carried


def chain_checks(item: KeyItem, columns: Mapping[str, Column], checks: Mapping[str, PartCheck], env: Env,
                 no_carry: np.ndarray, xp=np) -> dict[str, ChainCheck]:
    """Every part's :class:`ChainCheck`, in the family's step order.

    An earlier answer that is itself accepted (right, or right for the student's own accepted
    values: rounding at each step) makes a later answer computed from it correct, not carried;
    so parts are checked in step order and each one sees its inputs' verdicts.
    """
    order = sorted(item.parts, key=lambda p: item.family.step_names.index(p.step))
    by_step = {p.step: p.id for p in item.parts}
    chains: dict[str, ChainCheck] = {}
    for part in order:
        chains[part.id] = _chain(item, part, by_step, columns, checks, chains, env, no_carry, xp)
    return chains


def _chain(item: KeyItem, part: Part, by_step: Mapping[str, str], columns: Mapping[str, Column],
           checks: Mapping[str, PartCheck], chains: Mapping[str, ChainCheck], env: Env, no_carry: np.ndarray,
           xp=np) -> ChainCheck:
    column, check = columns[part.id], checks[part.id]
    n = len(column.readable)
    none = np.zeros(n, dtype=bool)
    steps, between = carried_inputs(item.family, part.step, by_step)
    inputs = [by_step[s] for s in steps]
    if not inputs:
        return ChainCheck(check.right.copy(), none, none.copy(), [])
    readable = column.readable & np.logical_and.reduce([columns[i].readable for i in inputs])
    redo = rerun_on_own(item.family, part.step, env, {s: columns[by_step[s]].values for s in steps}, between,
                        item.params, xp)
    with np.errstate(all="ignore"):
        same = to_numpy(item.tolerance_for(part.step).passes(xp.asarray(column.values), redo, xp=xp))
    if check.asked is not None:
        same = same.reshape(n, -1) | ~check.asked
    follows = readable & same.reshape(n, -1).all(axis=1)
    inputs_accepted = np.logical_and.reduce([chains[i].accepted for i in inputs])
    # No credit is carried from a missing or malformed earlier answer, or from one that is
    # wrong and breaks its step's invariants (weights whose rows do not sum to 1).
    inputs_sound = np.logical_and.reduce([checks[i].sound for i in inputs])
    from_own = follows & inputs_accepted & check.holds & ~check.right
    accepted = check.right | from_own
    carried = follows & inputs_sound & check.holds & ~accepted & ~no_carry
    if item.credit.carried_forward <= 0:
        carried = none.copy()
    chain = ChainCheck(accepted, from_own, carried, inputs)
    if item.credit.carried_forward > 0:
        for j in np.flatnonzero(column.readable & ~accepted & ~carried).tolist():
            chain.why_not[j] = _why_not_carried(j, inputs, columns, checks, follows, check, no_carry)
    return chain


def _why_not_carried(j: int, inputs: Sequence[str], columns: Mapping[str, Column], checks: Mapping[str, PartCheck],
                     follows: np.ndarray, check: PartCheck, no_carry: np.ndarray) -> str:
    """Why student ``j``'s wrong answer earns no carried credit, naming the earlier part and the rule."""
    if no_carry[j]:
        return _("no credit is carried forward: the answers in this file match another student's worksheet")
    for part in inputs:
        if not columns[part].readable[j]:
            kind = columns[part].problems.get(j, ("missing", ""))[0]
            if kind == "missing":
                return _("no credit is carried forward: it is computed from your answer to %(part)s, "
                         "which is not answered") % {"part": part}
            return _("no credit is carried forward: it is computed from your answer to %(part)s, "
                     "which could not be read") % {"part": part}
    for part in inputs:
        if not checks[part].sound[j]:
            broken = [sentence for _name, sentence, hits in checks[part].broken if hits[j]]
            if broken:
                return _("no credit is carried forward from your answer to %(part)s: it is wrong and breaks a "
                         "property every right value has (%(rule)s)") % {"part": part, "rule": broken[0].rstrip(".。")}
            return _("no credit is carried forward from your answer to %(part)s: it is wrong and breaks a "
                     "property every right value has") % {"part": part}
    if follows[j] and not check.holds[j]:
        return _("it follows from your earlier answers, but no credit is carried forward to an answer that breaks "
                 "a property of its own step")
    return _("no credit is carried forward: it does not follow from your own answers to %(parts)s either") % {
        "parts": ", ".join(inputs)}


FROM_OWN_MESSAGE = N_("Correct for your own rounded earlier answers (%(inputs)s), which were accepted: full points.")
NO_ANSWER = N_("no answer given")
NO_ANSWER_BLANK = N_("no answer given (every box is empty)")


def _part_results(item: KeyItem, part: Part, columns: Mapping[str, Column], checks: Mapping[str, PartCheck],
                  chain: ChainCheck, env: Env, host: Env, xp=np) -> list[PartResult]:
    column, check = columns[part.id], checks[part.id]
    n = len(column.readable)
    tol = item.tolerance_for(part.step)
    pending = column.readable & ~chain.accepted  # answers that earn less than full points

    # Known mistakes: the answer matches what the mistake gives, within tolerance.
    mistakes: list[tuple[str, str, np.ndarray]] = []
    values = xp.asarray(column.values)
    for mistake in item.family.mistakes_for(part.step, item.params):
        with np.errstate(all="ignore"):
            wrong = mistake.fn(env, item.params, xp)
        if wrong.shape != column.values.shape:
            continue
        hit = to_numpy(tol.passes(values, wrong, xp=xp)).reshape(n, -1)
        if check.asked is not None:
            hit = hit | ~check.asked
        mistakes.append((mistake.name, _(mistake.feedback), pending & hit.all(axis=1)))

    points = part.points
    ok = check.ok if check.asked is None else check.ok[:, check.asked]  # the asked entries only
    share = ok.mean(axis=1) if ok.shape[1] else np.ones(n)
    entry_score = points * share if item.credit.per_entry else np.zeros(n)
    carried_score = np.where(chain.carried, points * item.credit.carried_forward, 0.0)
    expected = encode_rows(host[part.step])
    given = encode_rows_like(column.values, host[part.step], expected)
    entry_ok = check.ok.reshape(column.values.shape).tolist()
    correct_entries = ok.sum(axis=1).tolist()
    entries = int(ok.shape[1])
    findings = [np.flatnonzero(hit).tolist() for *_about, hit in mistakes]
    broken = [np.flatnonzero(hit & pending).tolist() for *_about, hit in check.broken]

    out = []
    for j in range(n):
        r = PartResult(part.id, points, expected=expected[j], entries=entries)
        if not column.readable[j]:
            r.verdict, r.message = column.problems[j]
            if r.verdict == "format":
                r.score = points * item.credit.format_error
                r.given = column.raw.get(j)  # kept as handed in, so a regrade request can be checked
        else:
            r.given, r.entry_ok, r.correct_entries = given[j], entry_ok[j], correct_entries[j]
            if chain.accepted[j]:
                r.verdict, r.score = "correct", points
                if chain.from_own[j]:
                    r.carry = _(FROM_OWN_MESSAGE) % {"inputs": ", ".join(chain.inputs)}
            elif carried_score[j] > entry_score[j]:
                r.verdict, r.score, r.message = "carried", float(carried_score[j]), _(CARRIED_MESSAGE)
            else:
                r.score = float(entry_score[j])
                r.verdict = "partial" if r.score > 0 else "wrong"
                counts = {"correct": r.correct_entries, "entries": entries}
                if item.credit.per_entry:
                    r.message = ngettext("%(correct)s of %(entries)s entry within tolerance",
                                         "%(correct)s of %(entries)s entries within tolerance", entries) % counts
                else:
                    r.message = ngettext(
                        "%(correct)s of %(entries)s entry within tolerance (this part is all or nothing)",
                        "%(correct)s of %(entries)s entries within tolerance (this part is all or nothing)",
                        entries) % counts
                if chain.carried[j]:  # carried credit was less than the per-entry share
                    r.carry = _("it follows from your earlier answers, but its correct entries earn more than "
                                "carried credit")
                else:
                    r.carry = chain.why_not.get(j, "")
            if j in column.notes:
                r.message = (_("%(message)s; %(note)s") % {"message": r.message, "note": column.notes[j]}
                             if r.message else column.notes[j])
        out.append(r)
    for (name, sentence, _hit), hits in zip(mistakes, findings):
        for j in hits:
            out[j].mistakes.append(name)
            out[j].diagnosis.append(sentence)
    for (name, sentence, _hit), hits in zip(check.broken, broken):
        for j in hits:
            out[j].broken.append(name)
            out[j].invariants.append(sentence)
    return out


def encode_rows_like(values: np.ndarray, like: np.ndarray, encoded_like: list[Any]) -> list[Any]:
    """``encode_rows(values)``, where each row that is bit for bit the row of ``like`` is the very
    object of ``encoded_like`` (``encode_rows(like)``): an answer equal to the exact one is then
    written once by results.json, which encodes a part's "given" that *is* its "expected" once."""
    if values.shape != like.shape or values.dtype != np.float64 or like.dtype != np.float64 or not len(values):
        return encode_rows(values)
    n = len(values)
    bits = np.ascontiguousarray(values).reshape(n, -1).view(np.int64)
    same = (bits == np.ascontiguousarray(like).reshape(n, -1).view(np.int64)).all(axis=1)
    out = list(encoded_like)
    differ = np.flatnonzero(~same)
    if len(differ):
        for j, row in zip(differ.tolist(), encode_rows(values[differ])):
            out[j] = row
    return out


def encode_rows(values: np.ndarray) -> list[Any]:
    """:func:`qkvquiz.key.encode` of each row of a batch, in a few array calls.

    Whole numbers become ints, ±∞ the texts "inf" and "-inf", other entries floats.
    """
    out = values.astype(object)
    finite = np.isfinite(values)
    whole = finite & (values == np.round(values)) & (np.abs(values) < 2**53)
    out[whole] = values[whole].astype(np.int64).astype(object)
    out[values == np.inf] = "inf"
    out[values == -np.inf] = "-inf"
    out[np.isnan(values)] = None  # an empty box
    return out.tolist()
