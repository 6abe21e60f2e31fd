"""Checking a student's answers to a practice problem: the grader itself, on a submission of one.

Nothing here compares a number: the answers become a submission (read by the same door as a
handed-in file, :func:`qkvquiz.core.submissions.submission_from_json`) and go through
:func:`qkvquiz.grade.grade` with the problem's key; what comes back is the grader's verdict,
entry marks, diagnosis and carried-credit sentences for each part, in the problem's language.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ..core.i18n import entered
from ..core.submissions import submission_from_json
from ..grade import grade
from ..render.form import LETTERS
from .problem import PRACTICE_STUDENT, Problem

#: The grader's verdicts that a practice page shows as right.
RIGHT = ("correct",)


@dataclass
class PartFeedback:
    """What the page shows for one part after "Check"."""

    part: str
    verdict: str  # the grader's: correct, carried, partial, wrong, format, missing
    entry_ok: list[bool] | None  # per box (flattened, row by row); None where unreadable
    message: str = ""  # the grader's sentence (entries within tolerance, why unreadable)
    diagnosis: list[str] = field(default_factory=list)  # known mistakes the answer matches
    mistakes: list[str] = field(default_factory=list)  # their names (for the progress table)
    carry: str = ""  # a remark on carried work
    invariants: list[str] = field(default_factory=list)  # properties every right value has that it lacks
    tolerance: str = ""  # the tolerance, in words
    score: float = 0.0  # the grader's points for it (the static page's own check gives the same share)
    points: float = 0.0

    @property
    def right(self) -> bool:
        return self.verdict in RIGHT


@dataclass
class CheckResult:
    parts: list[PartFeedback]

    @property
    def right(self) -> int:
        return sum(p.right for p in self.parts)

    def to_json(self) -> dict[str, Any]:
        return {"parts": [asdict(p) for p in self.parts], "right": self.right, "total": len(self.parts)}


def check(problem: Problem, answers: Mapping[str, Any]) -> CheckResult:
    """Grade ``answers`` (part id → the part's answer: a text or number, nested lists for a
    matrix, ``None`` or ``""`` for an empty box) against ``problem``'s key.

    Raises ValueError (a sentence) where the answers could not be a submission at all (too
    deep, too long, not an object); an unreadable entry is a part's ``format`` verdict."""
    doc = {"student": PRACTICE_STUDENT, "variant": problem.code, "set": problem.key.set_id,
           "answers": {k: _blank_as_none(v) for k, v in dict(answers).items()}}
    with entered(None, problem.lang):
        submission = submission_from_json(doc, "<practice>")
        report = grade(problem.key, [submission])
        tolerances = {part.id: item.tolerance_for(part.step).describe() for item, part in problem.key.parts}
    (result,) = report.results
    named = labels(problem)
    out = []
    for r in result.parts:
        entry_ok = None if r.entry_ok is None else np.ravel(np.asarray(r.entry_ok, dtype=bool)).tolist()
        out.append(PartFeedback(r.part, r.verdict, entry_ok, named(r.message), [named(d) for d in r.diagnosis],
                                list(r.mistakes), named(r.carry), [named(i) for i in r.invariants],
                                tolerances.get(r.part, ""), r.score, r.points))
    return CheckResult(out)


def labels(problem: Problem) -> Callable[[str], str]:
    """A function that writes each part id in a sentence as the page labels the part, "(a)": the
    page shows no ids (no file is handed in), and "q5.scores" under "Problem 1" named nothing the
    student could see. The letters are the answer form's (a part's place in its item)."""
    ids = sorted(((p.id, f"({LETTERS[k % len(LETTERS)]})") for item in problem.key.items
                  for k, p in enumerate(item.parts)), key=lambda pair: -len(pair[0]))
    pattern = re.compile("|".join(rf"(?<![\w.-]){re.escape(pid)}(?![\w-])" for pid, _label in ids)) if ids else None
    table = dict(ids)

    def named(text: str) -> str:
        return pattern.sub(lambda m: table[m.group()], text) if pattern is not None and text else text

    return named


def _blank_as_none(value: Any) -> Any:
    """A box left empty (``""``, spaces) is an empty box to the grader (``null``), as the answer
    form saves it."""
    if isinstance(value, list):
        return [_blank_as_none(v) for v in value]
    if isinstance(value, str) and not value.strip():
        return None
    return value
