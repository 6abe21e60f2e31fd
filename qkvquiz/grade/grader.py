"""Grading a class: read every submission, then compare part by part for all students at once.

Reading is per file and never stops the run: a file that is not JSON, has no student id,
or names a student the key does not know becomes a :class:`FileProblem`. Comparison is
batched: for each part, every readable answer of the class is stacked and checked against
the key in one call; known mistakes and error carried forward are evaluated the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.backend import to_numpy
from ..families import Env
from ..key import Key, KeyItem, encode
from ..spec import Part
from .parse import AnswerFormatError, parse_answer

MAX_SUBMISSION_BYTES = 1_000_000


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


def read_submission(path: str | Path) -> Submission:
    """Read one submission file; raises ValueError with a sentence naming what is wrong."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the file ({exc.strerror})") from exc
    if len(raw) > MAX_SUBMISSION_BYTES:
        raise ValueError(f"the file is {len(raw)} bytes; a submission may be at most {MAX_SUBMISSION_BYTES}")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("the file is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    return submission_from_json(doc, str(path))


def submission_from_json(doc: Any, source: str) -> Submission:
    if not isinstance(doc, Mapping):
        raise ValueError('a submission is a JSON object {"student": ID, "answers": {...}}')
    student = doc.get("student")
    if not isinstance(student, str) or not student:
        raise ValueError('field "student" is missing or not a text')
    answers = doc.get("answers")
    if not isinstance(answers, Mapping):
        raise ValueError('field "answers" is missing or not an object of part id: answer')
    return Submission(source, student, answers)


def grade_files(key: Key, paths: Iterable[str | Path], *, progress=None, xp=np) -> GradeReport:
    """Grade submission files against ``key``; unreadable files are reported, not fatal.

    ``xp`` is the array backend of the comparisons (see :func:`grade`)."""
    submissions, problems = [], []
    for path in paths:
        try:
            submissions.append(read_submission(path))
        except ValueError as exc:
            problems.append(FileProblem(str(path), str(exc)))
        if progress is not None:
            progress()
    report = grade(key, submissions, xp=xp)
    report.problems[:0] = problems
    return report


def grade(key: Key, submissions: Iterable[Submission], *, xp=np) -> GradeReport:
    """Grade already-read submissions (one per student; a second one is reported).

    The comparisons, known mistakes and carried-forward re-runs of each part are computed
    for the whole class on ``xp`` (NumPy or CuPy); verdicts come back to the host, and the
    same key and answers give the same report on either backend.
    """
    accepted: list[tuple[int, Submission]] = []
    problems: list[FileProblem] = []
    seen: dict[str, str] = {}
    for sub in submissions:
        index = key.index(sub.student)
        if index is None:
            problems.append(FileProblem(sub.source, f"student {sub.student!r} is not in the key"))
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
            for result, part_result in zip(results, _grade_part(item, part, rows, parsed, xp)):
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


def _grade_part(item: KeyItem, part: Part, rows: np.ndarray, parsed, xp=np) -> list[PartResult]:
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
    env = Env({name: xp.asarray(value[rows[idx]]) for name, value in item.env.items()})
    given_x = xp.asarray(given)
    # One entry per column; verdicts come back to the host.
    flat = lambda a: to_numpy(a).reshape(len(idx), -1)  # noqa: E731
    correct = flat(item.tolerance.passes(given_x, xp.asarray(exact), xp=xp))
    share = correct.mean(axis=1)

    # Known mistakes: the answer matches what the mistake gives, within tolerance.
    diagnoses: list[list[str]] = [[] for _ in readable]
    for mistake in item.family.mistakes_for(part.step, item.params):
        wrong = mistake.fn(env, item.params, xp)
        if wrong.shape != given.shape:
            continue
        hit = flat(item.tolerance.passes(given_x, wrong, xp=xp)).all(axis=1) & (share < 1)
        for k in np.flatnonzero(hit):
            diagnoses[k].append(mistake.feedback)

    # Error carried forward: the step recomputed from the student's own earlier answers.
    carried = _carried_forward(item, part, idx, parsed, env, given_x, xp)

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


def _carried_forward(item: KeyItem, part: Part, idx, parsed, env: Env, given, xp=np) -> np.ndarray | None:
    """True per readable answer that equals this step re-run on the student's earlier answers."""
    step = item.family.step(part.step)
    earlier = {p.step: p.id for p in item.parts if p.step in step.needs}
    if not earlier or item.credit.carried_forward <= 0:
        return None
    own = Env(env)
    usable = np.ones(len(idx), dtype=bool)
    for name, part_id in earlier.items():
        answers = [parsed[part_id][j] for j in idx]
        have = np.array([isinstance(a, np.ndarray) for a in answers], dtype=bool)
        usable &= have  # no credit carried from a missing or malformed answer
        values = to_numpy(own[name]).copy()
        if have.any():
            values[have] = np.stack([a for a in answers if isinstance(a, np.ndarray)])
        own[name] = xp.asarray(values)
    with np.errstate(all="ignore"):
        redo = item.family.rerun(part.step, own, item.params, xp)
    flat = lambda a: to_numpy(a).reshape(len(idx), -1)  # noqa: E731
    return usable & flat(item.tolerance.passes(given, redo, xp=xp)).all(axis=1)
