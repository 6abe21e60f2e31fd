"""Grading: read answers, compare within tolerance, diagnose mistakes, credit carried errors."""

from __future__ import annotations

from typing import Any

from ..core.tolerance import TOLERANCE_DEFAULT, Tolerance
from .parse import AnswerFormatError, parse_answer, parse_entry

_GRADER = {"FileProblem", "GradeReport", "PartResult", "StudentResult", "grade", "grade_files", "read_submission"}


def __getattr__(name: str) -> Any:
    # The grader needs the key module, which needs this package's tolerance: importing it
    # lazily keeps ``spec -> grade.tolerance`` free of a cycle.
    if name in _GRADER:
        from . import grader

        return getattr(grader, name)
    raise AttributeError(name)


__all__ = ["AnswerFormatError", "TOLERANCE_DEFAULT", "Tolerance", "parse_answer", "parse_entry", *sorted(_GRADER)]
