"""Item analysis for the instructor: how the class did on each part, and its common mistakes.

For every part: the students graded, the mean score (points and share of the part's points),
the share of students per verdict (correct, carried forward, partly correct, not correct,
format error, not answered), the known mistakes diagnosed most often and the invariants
broken most often. Written as ``item-analysis.csv`` (one row per part) and
``item-analysis.md`` (``templates/item-analysis.md.j2``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..core.csvsafe import csv_text
from ..core.i18n import entered
from ..render.environment import environment
from .feedback import points_text
from .results import GradeReport

VERDICT_ORDER = ("correct", "carried", "partial", "wrong", "format", "missing")
TOP_MISTAKES = 3  # in the CSV's summary column; the Markdown lists them all


@dataclass(frozen=True)
class Finding:
    name: str
    sentence: str
    count: int
    share: float  # of the students graded


@dataclass(frozen=True)
class PartStats:
    part: str
    item: str
    step: str
    points: float
    students: int
    mean_score: float
    shares: dict[str, float]  # verdict -> share of students
    mistakes: tuple[Finding, ...]  # most common first (ties by name)
    broken: tuple[Finding, ...]
    unread: float = 0.0  # share of students graded with boxes of this part that could not be read

    @property
    def mean_share(self) -> float:
        return self.mean_score / self.points if self.points else 0.0


def _findings(names: Counter, sentences: dict[str, str], students: int) -> tuple[Finding, ...]:
    ranked = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(Finding(name, sentences[name], count, count / students) for name, count in ranked)


def item_analysis(report: GradeReport) -> list[PartStats]:
    """Per part of the key, in the key's order."""
    stats = []
    students = len(report.results)
    for position, (item, part) in enumerate(report.key.parts):
        verdicts: Counter = Counter()
        mistakes: Counter = Counter()
        broken: Counter = Counter()
        sentences: dict[str, str] = {}
        total = 0.0
        unread = 0
        for result in report.results:
            r = result.parts[position]
            total += r.score
            unread += r.unread_boxes > 0
            verdicts[r.verdict] += 1
            for name, sentence in zip(r.mistakes, r.diagnosis):
                mistakes[name] += 1
                sentences[name] = sentence
            for name, sentence in zip(r.broken, r.invariants):
                broken[name] += 1
                sentences[name] = sentence
        n = max(students, 1)
        stats.append(PartStats(
            part=part.id, item=item.id, step=part.step, points=part.points, students=students,
            mean_score=total / n, shares={v: verdicts[v] / n for v in VERDICT_ORDER},
            mistakes=_findings(mistakes, sentences, n), broken=_findings(broken, sentences, n),
            unread=unread / n,
        ))
    return stats


def _share(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


def _summary(findings: tuple[Finding, ...], limit: int | None = None) -> str:
    return "; ".join(f"{f.name} ({f.count})" for f in findings[:limit])


def item_analysis_csv(stats: list[PartStats]) -> str:
    """One row per part: shares are fractions of the students graded (0 to 1)."""
    header = ["part", "item", "step", "points", "students", "mean_score", "mean_share",
              *(f"share_{v}" for v in VERDICT_ORDER), "top_mistakes", "broken_invariants", "share_unreadable_boxes"]
    rows = ([s.part, s.item, s.step, points_text(s.points), s.students, points_text(s.mean_score),
             _share(s.mean_share), *(_share(s.shares[v]) for v in VERDICT_ORDER),
             _summary(s.mistakes, TOP_MISTAKES), _summary(s.broken), _share(s.unread)] for s in stats)
    return csv_text([header, *rows], lineterminator="\n")


def _percent(x: float) -> str:
    return f"{100 * x:.0f} %"


def item_analysis_context(report: GradeReport, stats: list[PartStats]) -> dict[str, Any]:
    rows = [{
        "part": s.part, "step": s.step, "points": points_text(s.points),
        "mean": points_text(round(s.mean_score, 2)), "mean_share": _percent(s.mean_share),
        **{v: _percent(s.shares[v]) for v in VERDICT_ORDER}, "unread": _percent(s.unread),
        "mistakes": [{"name": f.name, "sentence": f.sentence, "count": f.count, "share": _percent(f.share)}
                     for f in s.mistakes],
        "broken": [{"name": f.name, "sentence": f.sentence, "count": f.count, "share": _percent(f.share)}
                   for f in s.broken],
    } for s in stats]
    scores = sorted(r.score for r in report.results)
    return {
        "title": report.key.title, "students": len(report.results), "points": points_text(report.key.points),
        "mean": points_text(round(sum(scores) / len(scores), 2)) if scores else "–",
        "median": points_text(round(_median(scores), 2)) if scores else "–",
        "problems": len(report.problems), "rows": rows,
    }


def _median(xs: list[float]) -> float:
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


def item_analysis_markdown(report: GradeReport, stats: list[PartStats] | None = None, *, lang: str | None = None) -> str:
    """The item analysis as Markdown, in ``lang`` (default: the one chosen around the call, else
    the report's)."""
    stats = item_analysis(report) if stats is None else stats
    with entered(lang, report.lang):
        return environment().get_template("item-analysis.md.j2").render(item_analysis_context(report, stats))
