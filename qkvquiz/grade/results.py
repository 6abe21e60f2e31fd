"""What grading a class gives: per part, per student, per file refused, and the report of them all."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.i18n import DEFAULT_LANG
from ..core.untrusted import terminal_text as _escaped
from ..key import Key


def terminal_text(text: str) -> str:
    """:func:`qkvquiz.core.untrusted.terminal_text`, at once for printable ASCII (nothing to escape)."""
    return text if text.isascii() and text.isprintable() else _escaped(text)



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
    # wrong and showing no work: "zeros", "constant" or "given" (grade.checks.uninformative); not in results.json
    no_work: str = ""
    unread_boxes: int = 0  # boxes of a readable answer that could not be read (each counted wrong)

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
