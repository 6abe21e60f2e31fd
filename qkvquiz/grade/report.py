"""Writing a class's results: results.csv (one row per student) and results.json (every entry)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..files import write_atomic_all
from ..key import dumps
from ..untrusted import csv_cell
from .grader import GradeReport


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


def write_reports(report: GradeReport, out: str | Path) -> list[Path]:
    """Write results.csv and results.json to ``out`` (together, atomically); returns the paths written."""
    out = Path(out)
    paths = [out / "results.csv", out / "results.json"]
    doc = report.to_json()
    doc["students"].sort(key=lambda s: s["student"])
    # Both files or neither: an interrupted run leaves the previous pair as it was.
    write_atomic_all({paths[0]: results_csv(report), paths[1]: dumps(doc)})
    return paths
