"""Writing a class's results.

Into the output folder::

    results.csv            one row per student: each part's score, the score and the total
    results.json           every part of every student: expected, given, verdict per entry, diagnosis
    item-analysis.csv      one row per part: mean score, share per verdict, common mistakes
    item-analysis.md       the same for reading, with each mistake's sentence
    feedback/<name>.md     one file per student, readable on its own

Same key and submissions, same bytes: students are sorted by id and nothing records a time.
These entries are the set ``grade`` owns (:data:`OWNED`), written as one unit by
:mod:`qkvquiz.outputs`: a regrade replaces ``feedback/`` wholly (no feedback is left from an
earlier run), and an interrupted one leaves the previous set exactly as it was.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

from ..files import safe_name
from ..i18n import using
from ..outputs import write_set
from ..untrusted import csv_cell, terminal_text
from .analysis import item_analysis, item_analysis_csv, item_analysis_markdown
from .feedback import FeedbackWriter
from .grader import GradeReport

FEEDBACK_DIR = "feedback"
#: The entries ``grade`` owns in its folder, and whether each is private (0600 files, 0700
#: folders): results hold every expected value, and feedback is one student's business. The
#: item analysis holds only class-wide shares and mistakes' sentences.
OWNED: dict[str, bool] = {
    "results.json": True, "results.csv": True, "item-analysis.csv": False, "item-analysis.md": False,
    FEEDBACK_DIR: True,
}


NO_SUBMISSION = "(no submission)"


def results_csv(report: GradeReport) -> str:
    """One row per student of the key, sorted by id: each part's score, then the total.

    ``flags`` marks what the instructor should look at: a file of another set or variant, and
    answers that match another student's variant (``copy of <id>``).

    A student with no graded submission gets a row too (source "(no submission)", every score
    0), so the file is a complete gradebook.
    """
    parts = [part.id for _, part in report.key.parts]
    rows = []
    for r in report.results:
        by_part = {p.part: p.score for p in r.parts}
        rows.append((r.student, r.variant, r.source, "; ".join(r.flags), [_pts(by_part[p]) for p in parts],
                     _pts(r.score), _pts(r.total)))
    variants = dict(zip(report.key.students, report.key.variants))
    for student in report.absent:
        rows.append((student, variants[student], NO_SUBMISSION, "", ["0"] * len(parts), "0", _pts(report.key.points)))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student", "variant", "source", "flags", *parts, "score", "total"])
    for student, variant, source, flags, scores, score, total in sorted(rows, key=lambda row: row[0]):
        writer.writerow([csv_cell(student), csv_cell(variant), csv_cell(terminal_text(source)),
                         csv_cell(terminal_text(flags)), *scores, score, total])
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
    """Student id -> feedback file name (without ``.md``): the name of the student's folder that
    ``generate`` made, since names are assigned the same way, in the key's (roster) order."""
    taken: set[str] = set()
    names = {student: safe_name(student, taken) for student in report.key.students}
    return {r.student: names[r.student] for r in report.results}


def write_reports(
    report: GradeReport, out: str | Path, *, feedback: bool = True, progress: Callable[[], None] | None = None,
    lang: str | None = None,
) -> list[Path]:
    """Write the class's results to ``out`` as one set; returns the summary files written (not
    each feedback file).

    The set replaces the previous one wholly: without ``feedback`` (or with fewer students) no
    earlier feedback file is left behind. ``progress`` is called once per feedback file written.
    ``lang`` is the language of the item analysis and feedback (default: the report's, i.e. the
    one it was graded in, so that every sentence of a file is in one language).
    Raises :class:`qkvquiz.outputs.SetBusy` when another run writes to ``out``, and
    :class:`qkvquiz.outputs.OutputError` (naming the path) when it cannot be written.
    """
    out = Path(out)
    names = ["results.csv", "results.json", "item-analysis.csv", "item-analysis.md"]
    stats = item_analysis(report)
    with using(lang or report.lang), write_set(out, OWNED, anchor="results.json") as files:
        files.write("results.csv", results_csv(report))
        files.write("results.json", results_json(report))
        files.write("item-analysis.csv", item_analysis_csv(stats))
        files.write("item-analysis.md", item_analysis_markdown(report, stats))
        if feedback:
            feedback_name = feedback_names(report)
            writer = FeedbackWriter(report)  # one per class: what students share is written once
            for result in sorted(report.results, key=lambda r: r.student):
                files.write(f"{FEEDBACK_DIR}/{feedback_name[result.student]}.md", writer.markdown(result))
                if progress is not None:
                    progress()
    return [out / name for name in names]
