"""Grading a class: read every submission, then compare part by part for all students at once.

Reading is per file and never stops the run: a file that is not JSON, has no student id,
or names a student the key does not know becomes a :class:`FileProblem`. Comparison is
batched: for each part, every readable answer of the class is stacked and checked against
the key in one call; known mistakes and error carried forward are evaluated the same way.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np

from ..families import Env
from ..key import Key, KeyItem, encode
from ..spec import Part
from ..untrusted import MAX_ID_LENGTH, char_name, invisible_characters, lookalike_key
from .parse import AnswerFormatError, parse_answer

# Limits on a submission file: each is far above what an honest submission needs, and each
# refusal is a sentence in the report, never a crash or a hang.
MAX_SUBMISSION_BYTES = 1_000_000
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
    diagnosis: list[str] = field(default_factory=list)
    given: Any = None
    expected: Any = None

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part, "points": self.points, "score": round(self.score, 6), "verdict": self.verdict,
            "correct_entries": self.correct_entries, "entries": self.entries, "message": self.message,
            "diagnosis": self.diagnosis, "given": self.given, "expected": self.expected,
        }


@dataclass
class StudentResult:
    student: str
    source: str
    variant: str
    parts: list[PartResult]

    @property
    def score(self) -> float:
        return sum(p.score for p in self.parts)

    @property
    def total(self) -> float:
        return sum(p.points for p in self.parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "student": self.student, "source": self.source, "variant": self.variant,
            "score": round(self.score, 6), "total": self.total, "parts": [p.to_json() for p in self.parts],
        }


@dataclass(frozen=True)
class FileProblem:
    """A submission file that could not be graded at all, and why."""

    source: str
    message: str


@dataclass
class GradeReport:
    key: Key
    results: list[StudentResult]
    problems: list[FileProblem]

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.key.title,
            "points": self.key.points,
            "students": [r.to_json() for r in self.results],
            "problems": [{"source": p.source, "message": p.message} for p in self.problems],
        }


@dataclass
class Submission:
    source: str
    student: str
    answers: Mapping[str, Any]


def display_path(path: str | Path) -> str:
    """A path as text that can always be written as UTF-8 (odd bytes in a name become ``\udcff``)."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _read_limited(path: Path) -> bytes:
    """At most MAX_SUBMISSION_BYTES + 1 bytes of a regular file; never blocks on a pipe or device."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise ValueError(f"cannot read the file ({exc.strerror})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file (a folder, pipe or device), so it was not read")
        if info.st_size > MAX_SUBMISSION_BYTES:
            raise ValueError(f"the file is {info.st_size} bytes; a submission may be at most {MAX_SUBMISSION_BYTES}")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_SUBMISSION_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"cannot read the file ({exc.strerror})") from exc
    finally:
        os.close(fd)


def read_submission(path: str | Path) -> Submission:
    """Read one submission file; raises ValueError with a sentence naming what is wrong."""
    path = Path(path)
    return submission_from_bytes(_read_limited(path), display_path(path))


class _Refused(ValueError):
    """Raised from inside the JSON decoder: the document is readable but not acceptable."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for name, value in pairs:
        if name in doc:
            raise _Refused(f"the key {_quoted(name)} appears twice in one object; which one counts would be a guess")
        doc[name] = value
    return doc


def _no_constant(token: str) -> Any:
    raise _Refused(
        f"{token} is not a JSON number; write the value you computed, or the text \"-inf\" for minus infinity"
    )


def _bounded_float(text: str) -> float:
    if len(text) > MAX_NUMBER_DIGITS:
        raise _Refused(f"the number {_quoted(text)} has {len(text)} characters; at most {MAX_NUMBER_DIGITS} are allowed")
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"the number {_quoted(text)} is too large for a float (at most about 1.8e308)")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_DIGITS:
        raise _Refused(f"the number {_quoted(text)} has {len(text.lstrip('-'))} digits; at most {MAX_NUMBER_DIGITS} are allowed")
    return int(text)


def _quoted(text: str, limit: int = 40) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return json.dumps(shown)  # quotes, and control characters written as escapes


# A JSON string (the unrolled form of "(?:[^"\\]|\\.)*" runs in linear time on long strings).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _nesting(text: str) -> int:
    """How deeply arrays and objects nest in JSON text (brackets inside strings ignored)."""
    brackets = re.sub(r"[^\[\]{}]+", "", _JSON_STRING.sub("", text))
    return max(accumulate(1 if ch in "[{" else -1 for ch in brackets), default=0)


def submission_from_bytes(raw: bytes, source: str) -> Submission:
    """Read a submission from the bytes of a file; ValueError says what is wrong.

    Refused, each with a sentence: more than ``MAX_SUBMISSION_BYTES``, text that is not UTF-8
    (a leading byte-order mark is fine), invalid JSON, arrays and objects nested deeper than
    ``MAX_NESTING``, a key twice in one object, ``NaN`` and ``Infinity``, numbers too large for
    a float or longer than ``MAX_NUMBER_DIGITS`` digits; then :func:`submission_from_json`.
    """
    if len(raw) > MAX_SUBMISSION_BYTES:
        raise ValueError(f"the file is {len(raw)} bytes or more; a submission may be at most {MAX_SUBMISSION_BYTES}")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    depth = _nesting(text)
    if depth > MAX_NESTING:
        raise ValueError(f"lists and objects are nested {depth} deep; at most {MAX_NESTING} levels are allowed")
    try:
        doc = json.loads(
            text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant,
            parse_float=_bounded_float, parse_int=_bounded_int,
        )
    except _Refused as exc:
        raise ValueError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:  # the nesting check above should make this unreachable
        raise ValueError(f"lists and objects are nested too deeply; at most {MAX_NESTING} levels are allowed") from None
    return submission_from_json(doc, source)


def _where(path: tuple[Any, ...]) -> str:
    """A place in a submission, counting list items from 1: ``"answers" → "q1.scores" → item 2``."""
    if not path:
        return "the submission"
    return " → ".join(f"item {p + 1}" if isinstance(p, int) else _quoted(p) for p in path)


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
            raise ValueError(f"the submission holds more than {MAX_VALUES} values")
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            count += value.size
            if value.ndim > MAX_NESTING or count > MAX_VALUES:
                raise ValueError(f"{_where(path)}: the array is too large ({value.shape})")
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                raise ValueError(f"{_where(path)}: NaN or infinity is not a number a submission can hold")
            continue
        if isinstance(value, np.generic) and value.dtype.kind in "biuf":
            value = value.item()
        if value is None or isinstance(value, bool):
            continue
        if isinstance(value, str):
            _check_text(value, path)
        elif isinstance(value, int):
            if value.bit_length() > 3.33 * MAX_NUMBER_DIGITS:
                raise ValueError(f"{_where(path)}: a number with more than {MAX_NUMBER_DIGITS} digits")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{_where(path)}: {value!r} is not a number a submission can hold; "
                                 "write the value you computed, or the text \"-inf\"")
        elif isinstance(value, Mapping):
            if len(path) >= MAX_NESTING:
                raise ValueError(f"{_where(path)}: nested more than {MAX_NESTING} levels deep")
            for name, child in value.items():
                if not isinstance(name, str):
                    raise ValueError(f"{_where(path)}: a key is {type(name).__name__}, not text")
                _check_text(name, (*path, name))
                stack.append((child, (*path, name)))
        elif isinstance(value, (list, tuple)):
            if len(path) >= MAX_NESTING:
                raise ValueError(f"{_where(path)}: nested more than {MAX_NESTING} levels deep")
            stack.extend((child, (*path, i)) for i, child in enumerate(value))
        else:
            raise ValueError(f"{_where(path)}: a value of type {type(value).__name__} cannot be in a submission")


def _check_text(text: str, path: tuple[Any, ...]) -> None:
    if len(text) > MAX_TEXT:
        raise ValueError(f"{_where(path)}: a text of {len(text)} characters; at most {MAX_TEXT} are allowed")
    surrogate = next((ch for ch in text if "\ud800" <= ch <= "\udfff"), None)
    if surrogate is not None:
        raise ValueError(f"{_where(path)}: the text holds {ascii(surrogate)}, half of a character (a lone surrogate)")


def submission_from_json(doc: Any, source: str) -> Submission:
    """A submission from a document already read (JSON, or built in Python); ValueError says what is wrong."""
    check_document(doc)
    if not isinstance(doc, Mapping):
        raise ValueError('a submission is a JSON object {"student": ID, "answers": {...}}')
    student = doc.get("student")
    if not isinstance(student, str) or not student:
        raise ValueError('field "student" is missing or not a text')
    if len(student) > MAX_ID_LENGTH:
        raise ValueError(f'field "student" is {len(student)} characters long; an id has at most {MAX_ID_LENGTH}')
    answers = doc.get("answers")
    if not isinstance(answers, Mapping):
        raise ValueError('field "answers" is missing or not an object of part id: answer')
    return Submission(source, student, answers)


def unknown_student_message(key: Key, student: str) -> str:
    """Why ``student`` is not graded, with the id that was probably meant when there is one.

    Ids that differ only by invisible characters (zero-width space, right-to-left override),
    fullwidth or other compatibility forms, case or surrounding space are reported as such.
    """
    message = f"student {student!r} is not in the key"
    bad = invisible_characters(student)
    if bad:
        message += f"; the id contains invisible or control characters ({', '.join(char_name(c) for c in bad[:3])})"
    target = lookalike_key(student)
    meant = [s for s in key.students if lookalike_key(s) == target]
    if len(meant) == 1:
        message += f"; did you mean {meant[0]!r}? Write the id exactly as on the worksheet"
    elif student != unicodedata.normalize("NFKC", student):
        message += "; it holds fullwidth or other compatibility characters: write the id exactly as on the worksheet"
    return message


def grade_files(key: Key, paths: Iterable[str | Path], *, progress=None) -> GradeReport:
    """Grade submission files against ``key``; unreadable files are reported, not fatal."""
    submissions, problems = [], []
    for path in paths:
        try:
            submissions.append(read_submission(path))
        except ValueError as exc:
            problems.append(FileProblem(display_path(path), str(exc)))
        if progress is not None:
            progress()
    report = grade(key, submissions)
    report.problems[:0] = problems
    return report


def grade(key: Key, submissions: Iterable[Submission]) -> GradeReport:
    """Grade already-read submissions (one per student; a second one is reported)."""
    accepted: list[tuple[int, Submission]] = []
    problems: list[FileProblem] = []
    seen: dict[str, str] = {}
    for sub in submissions:
        index = key.index(sub.student)
        if index is None:
            problems.append(FileProblem(sub.source, unknown_student_message(key, sub.student)))
        elif sub.student in seen:
            problems.append(FileProblem(
                sub.source, f"a second submission for student {sub.student!r} (graded {seen[sub.student]} instead)"
            ))
        else:
            seen[sub.student] = sub.source
            accepted.append((index, sub))

    results = [
        StudentResult(sub.student, sub.source, key.variants[index], []) for index, sub in accepted
    ]
    rows = np.array([index for index, _ in accepted], dtype=np.int64)
    for item in key.items:
        parsed = _parse_item(item, [sub for _, sub in accepted])
        for part in item.parts:
            for result, part_result in zip(results, _grade_part(item, part, rows, parsed)):
                result.parts.append(part_result)
    return GradeReport(key, results, problems)


def _parse_item(item: KeyItem, subs: list[Submission]) -> dict[str, list[np.ndarray | AnswerFormatError | None]]:
    """Each part's answers, read into arrays of the part's shape (or the reason they can't be)."""
    parsed: dict[str, list[np.ndarray | AnswerFormatError | None]] = {}
    for part in item.parts:
        column: list[np.ndarray | AnswerFormatError | None] = []
        for sub in subs:
            if part.id not in sub.answers or sub.answers[part.id] is None:
                column.append(None)
                continue
            try:
                column.append(parse_answer(sub.answers[part.id], item.shapes[part.id]))
            except AnswerFormatError as exc:
                column.append(exc)
        parsed[part.id] = column
    return parsed


def _grade_part(item: KeyItem, part: Part, rows: np.ndarray, parsed) -> list[PartResult]:
    column = parsed[part.id]
    exact_all = item.env[part.step][rows] if rows.size else np.empty((0, *item.shapes[part.id]))
    out = []
    for j, answer in enumerate(column):
        r = PartResult(part.id, part.points, expected=encode(exact_all[j]))
        r.entries = int(np.prod(item.shapes[part.id], dtype=np.int64))
        if answer is None:
            r.verdict, r.message = "missing", "no answer given"
        elif isinstance(answer, AnswerFormatError):
            r.verdict, r.message = "format", str(answer)
        else:
            r.given = encode(answer)
        out.append(r)

    readable = [j for j, a in enumerate(column) if isinstance(a, np.ndarray)]
    if not readable:
        return out
    idx = np.array(readable)
    given = np.stack([column[j] for j in readable])
    exact = exact_all[idx]
    env = Env({name: value[rows[idx]] for name, value in item.env.items()})
    flat = lambda a: a.reshape(len(idx), -1)  # noqa: E731 - one entry per column
    correct = flat(item.tolerance.passes(given, exact))
    share = correct.mean(axis=1)

    # Known mistakes: the answer matches what the mistake gives, within tolerance.
    diagnoses: list[list[str]] = [[] for _ in readable]
    for mistake in item.family.mistakes_for(part.step, item.params):
        wrong = mistake.fn(env, item.params, np)
        if wrong.shape != given.shape:
            continue
        hit = flat(item.tolerance.passes(given, wrong)).all(axis=1) & (share < 1)
        for k in np.flatnonzero(hit):
            diagnoses[k].append(mistake.feedback)

    # Error carried forward: the step recomputed from the student's own earlier answers.
    carried = _carried_forward(item, part, rows, idx, parsed, env, given)

    for k, j in enumerate(readable):
        r = out[j]
        r.correct_entries = int(correct[k].sum())
        r.diagnosis = diagnoses[k]
        if share[k] == 1:
            r.verdict, r.score = "correct", part.points
            continue
        entry_score = part.points * share[k] if item.credit.per_entry else 0.0
        carried_score = part.points * item.credit.carried_forward if carried is not None and carried[k] else 0.0
        if carried_score > entry_score:
            r.verdict, r.score = "carried", carried_score
            r.message = "Right method: this follows correctly from your own earlier answers."
        else:
            r.verdict = "partial" if entry_score > 0 else "wrong"
            r.score = entry_score
            r.message = f"{r.correct_entries} of {r.entries} entries within tolerance"
    return out


def _carried_forward(item: KeyItem, part: Part, rows, idx, parsed, env: Env, given) -> np.ndarray | None:
    """True per readable answer that equals this step re-run on the student's earlier answers."""
    step = item.family.step(part.step)
    earlier = {p.step: p.id for p in item.parts if p.step in step.needs}
    if not earlier or item.credit.carried_forward <= 0:
        return None
    own = Env(env)
    usable = np.ones(len(idx), dtype=bool)
    for name, part_id in earlier.items():
        values = own[name].copy()
        for k, j in enumerate(idx):
            answer = parsed[part_id][j]
            if isinstance(answer, np.ndarray):
                values[k] = answer
            else:
                usable[k] = False  # no credit carried from a missing or malformed answer
        own[name] = values
    with np.errstate(all="ignore"):
        redo = item.family.rerun(part.step, own, item.params, np)
    flat = lambda a: a.reshape(len(idx), -1)  # noqa: E731
    return usable & flat(item.tolerance.passes(given, redo)).all(axis=1)
