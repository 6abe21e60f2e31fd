"""Grading: read answers, compare within tolerance, diagnose mistakes, credit carried errors."""

from __future__ import annotations

from ..core.submissions import read_submission
from ..core.tolerance import TOLERANCE_DEFAULT, Tolerance
from .grader import grade, grade_files
from .parse import AnswerFormatError, parse_answer, parse_entry
from .results import FileProblem, GradeReport, PartResult, StudentResult

__all__ = ["AnswerFormatError", "FileProblem", "GradeReport", "PartResult", "StudentResult", "TOLERANCE_DEFAULT",
           "Tolerance", "grade", "grade_files", "parse_answer", "parse_entry", "read_submission"]
