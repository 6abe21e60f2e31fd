"""Writing a class's results.

Into the output folder::

    results.csv            one row per student: each part's score, the score and the total
    results.json           every part of every student: expected, given, verdict per entry, diagnosis
    item-analysis.csv      one row per part: mean score, share per verdict, common mistakes
    item-analysis.md       the same for reading, with each mistake's sentence
    feedback/<name>.md     one file per student, readable on its own

Same key and submissions, same bytes: students are sorted by id and nothing records a time.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

from ..files import safe_name, write_atomic, write_atomic_all
from ..untrusted import csv_cell
from .analysis import item_analysis, item_analysis_csv, item_analysis_markdown
from .feedback import feedback_markdown
from .grader import GradeReport

FEEDBACK_DIR = "feedback"


def results_csv(report: GradeReport) -> str:
    """One row per graded student: each part's score, then the total; sorted by student id."""
    parts = [part.id for _, part in report.key.parts]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", "variant", "source", *parts, "score", "total"])
    for r in sorted(report.results, key=lambda r: r.student):
        by_part = {p.part: p.score for p in r.parts}
        writer.writerow([csv_cell(r.student), csv_cell(r.variant), csv_cell(r.source),
                         *(_pts(by_part[p]) for p in parts), _pts(r.score), _pts(r.total)])
    return buf.getvalue()


def _pts(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def results_json(report: GradeReport) -> str:
    """Every student's every part, sorted by student id; one part per line, so that a class of
    thousands is written by the C JSON encoder and a diff shows which parts changed."""
    doc = report.to_json()
    students = sorted(doc.pop("students"), key=lambda s: s["student"])
    problems = doc.pop("problems")
    lines = ["{"]
    lines += [f"  {_ENCODE(k)}: {_ENCODE(v)}," for k, v in doc.items()]
    lines.append('  "students": [')
    for i, student in enumerate(students):
        parts = student.pop("parts")
        head = ", ".join(f"{_ENCODE(k)}: {_ENCODE(v)}" for k, v in student.items())
        lines.append(f'    {{{head}, "parts": [')
        lines += [f"      {_ENCODE(p)}{',' if k < len(parts) - 1 else ''}" for k, p in enumerate(parts)]
        lines.append(f"    ]}}{',' if i < len(students) - 1 else ''}")
    lines.append("  ],")
    lines.append('  "problems": [')
    lines += [f"    {_ENCODE(p)}{',' if k < len(problems) - 1 else ''}" for k, p in enumerate(problems)]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def feedback_names(report: GradeReport) -> dict[str, str]:
    """Student id -> feedback file name (without ``.md``), safe and unique, assigned in id order."""
    taken: set[str] = set()
    return {r.student: safe_name(r.student, taken) for r in sorted(report.results, key=lambda r: r.student)}


def write_reports(
    report: GradeReport, out: str | Path, *, feedback: bool = True, progress: Callable[[], None] | None = None
) -> list[Path]:
    """Write the class's results to ``out``; returns the summary files written (not each feedback file).

    ``progress`` is called once per feedback file written.
    """
    out = Path(out)
    paths = [out / "results.csv", out / "results.json", out / "item-analysis.csv", out / "item-analysis.md"]
    stats = item_analysis(report)
    # All four or none: an interrupted run leaves the previous reports as they were.
    write_atomic_all({
        paths[0]: results_csv(report), paths[1]: results_json(report),
        paths[2]: item_analysis_csv(stats), paths[3]: item_analysis_markdown(report, stats),
    })
    if feedback:
        names = feedback_names(report)
        for result in sorted(report.results, key=lambda r: r.student):
            write_atomic(out / FEEDBACK_DIR / f"{names[result.student]}.md", feedback_markdown(report, result))
            if progress is not None:
                progress()
    return paths
