"""Writing a class's results.

Into the output folder::

    results.csv            one row per student: each part's score, the score and the total
    results.json           every part of every student: expected, given, verdict per entry, diagnosis
    item-analysis.csv      one row per part: mean score, share per verdict, common mistakes
    item-analysis.md       the same for reading, with each mistake's sentence
    feedback/<name>.md     one file per student, readable on its own

Same key and submissions, same bytes: students are sorted by id and nothing records a time.
These entries are the set ``grade`` owns (:data:`OWNED`), written as one unit by
:mod:`qkvquiz.core.outputs`: a regrade replaces ``feedback/`` wholly (no feedback is left from an
earlier run), and an interrupted one leaves the previous set exactly as it was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..core.csvsafe import csv_text
from ..core.i18n import entered
from ..core.outputs import write_set
from ..core.collector import collector_paused
from ..files import safe_name
from .analysis import item_analysis, item_analysis_csv, item_analysis_markdown
from .feedback import FeedbackWriter
from .parallel import chunks_in_workers, forking
from .results import GradeReport, PartResult, StudentResult, terminal_text

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
    header = ["student", "variant", "source", "flags", *parts, "score", "total"]
    body = ([student, variant, terminal_text(source), terminal_text(flags), *scores, score, total]
            for student, variant, source, flags, scores, score, total in sorted(rows, key=lambda row: row[0]))
    return csv_text([header, *body], lineterminator="\n")


def _pts(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode


def results_json(report: GradeReport) -> str:
    """Every student's every part, sorted by student id; one part per line, so that a class of
    thousands is written by the C JSON encoder and a diff shows which parts changed.

    The text is exactly that of encoding each part's :meth:`PartResult.to_json` on its own
    (tests/grade/test_results_json.py); what many parts share is encoded once (:class:`_PartLines`).
    A large class's students are encoded in slices by :func:`write_reports`' workers: the text
    is ``head + students_json(every slice) + tail`` of :func:`results_json_frame`."""
    students = sorted(report.results, key=lambda r: r.student)
    head, tail = results_json_frame(report)
    return head + students_json(students, last=True) + tail


def results_json_frame(report: GradeReport) -> tuple[str, str]:
    """results.json before its students (the class's fields) and after them (the problems)."""
    doc = report.to_json(students=False)
    problems = doc.pop("problems")
    head = ["{"] + [f"  {_ENCODE(k)}: {_ENCODE(v)}," for k, v in doc.items()] + ['  "students": [']
    tail = ["  ],", '  "problems": [']
    tail += [f"    {_ENCODE(p)}{',' if k < len(problems) - 1 else ''}" for k, p in enumerate(problems)]
    tail += ["  ]", "}"]
    return "\n".join(head) + "\n", "\n".join(tail) + "\n"


def students_json(students: Sequence[StudentResult], *, last: bool) -> str:
    """The lines of results.json of ``students`` (in the order given), each student's followed
    by a comma unless ``last`` and it is the last one."""
    if not students:
        return ""
    heads = _encode_each([r.to_json(parts=False) for r in students], "student")  # {"student": …, …}
    parts = _PartLines([p for r in students for p in r.parts])
    lines = []
    final = len(students) - 1
    for i, (student, head) in enumerate(zip(students, heads)):
        lines.append(f'    {{{head[1:-1]}, "parts": [')
        end = len(student.parts) - 1
        lines += [f"      {parts.line()}{',' if k < end else ''}" for k in range(len(student.parts))]
        lines.append(f"    ]}}{'' if last and i == final else ','}")
    return "\n".join(lines) + "\n"


class _PartLines:
    """``_ENCODE(part.to_json())`` of each of ``parts`` in turn (:meth:`line`), without encoding
    what parts share again: the fields before "given" are the same for most of a class's
    correct parts (encoded once per distinct value), and an answer equal to the exact one is
    the very object of "expected" (:func:`qkvquiz.grade.checks.encode_rows_like`), encoded once.
    The rest (answers, expected values, entry marks, carry sentences) is encoded by one call
    of the encoder for the class (:func:`_encode_values`)."""

    _TAIL = ("given", "expected", "entry_ok", "carry")  # PartResult.to_json's last fields, in order

    def __init__(self, parts: Sequence[PartResult]) -> None:
        self._parts = iter(parts)
        self._heads: dict[tuple, str] = {}
        values: list[Any] = []
        for p in parts:
            if p.given is not p.expected:
                values.append(p.given)
            values += (p.expected, p.entry_ok, p.carry)
        self._texts = iter(_encode_values(values))

    def _head(self, p: PartResult) -> str:
        """The part's encoded fields before "given", as ``{"part": …, "invariants": […]`` (open)."""
        if p.diagnosis or p.mistakes or p.broken or p.invariants:  # a part's own findings: not shared
            return self._encode_head(p)
        # Texts are keys as they are; numbers by repr, which tells 1 from 1.0 and True, as JSON does.
        key = (p.part, p.verdict, p.message, repr(p.points), repr(p.score), repr(p.correct_entries), repr(p.entries))
        head = self._heads.get(key)
        if head is None:
            head = self._heads[key] = self._encode_head(p)
        return head

    def _encode_head(self, p: PartResult) -> str:
        doc = p.to_json()
        for name in self._TAIL:
            del doc[name]
        return _ENCODE(doc)[:-1]

    def line(self) -> str:
        p = next(self._parts)
        texts = self._texts
        given = None if p.given is p.expected else next(texts)
        expected = next(texts)
        return (f'{self._head(p)}, "given": {expected if given is None else given}, "expected": {expected}, '
                f'"entry_ok": {next(texts)}, "carry": {next(texts)}}}')


def _encode_values(values: list[Any]) -> list[str]:
    """``[_ENCODE(v) for v in values]``, by one call of the encoder for the whole list."""
    return [text[5:-1] for text in _encode_each([{"": v} for v in values], "")]  # {"": …}


def _encode_each(objects: list[dict[str, Any]], first: str) -> list[str]:
    """``[_ENCODE(o) for o in objects]``, by one call of the encoder for the whole list.

    Every object's first key is ``first``: in the encoded list, the objects are parted by
    ``, {"first": `` (no text holds an unescaped quote, so only a nested object with that first
    key could hold it too; then the count is off and each object is encoded on its own).
    """
    if not objects:
        return []
    mark = f", {{{_ENCODE(first)}: "
    pieces = _ENCODE(objects)[1:-1].split(mark)
    if len(pieces) != len(objects) or any(next(iter(o), None) != first for o in objects):
        return [_ENCODE(o) for o in objects]
    return [pieces[0], *(mark[2:] + piece for piece in pieces[1:])]


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
    ``lang`` is the language of the item analysis and feedback (default: the one chosen around
    the call, else the report's, i.e. the one it was graded in, so that every sentence of a file
    is in one language).
    Raises :class:`qkvquiz.core.outputs.SetBusy` when another run writes to ``out``, and
    :class:`qkvquiz.core.outputs.OutputError` (naming the path) when it cannot be written.
    """
    out = Path(out)
    names = ["results.csv", "results.json", "item-analysis.csv", "item-analysis.md"]
    stats = item_analysis(report)
    with collector_paused(), entered(lang, report.lang), write_set(out, OWNED, anchor="results.json") as files:
        students = sorted(report.results, key=lambda r: r.student)
        writer, folder, jobs = None, "", [(None, r) for r in students]
        if feedback and students:
            feedback_name = feedback_names(report)
            writer = FeedbackWriter(report)  # one per class: what students share is written once
            jobs = [(f"{FEEDBACK_DIR}/{feedback_name[r.student]}.md", r) for r in students]
            # feedback/ in the staging folder, made; its files are made 0600 (_write_feedback)
            folder = str(files.path(jobs[0][0], own_modes=True).parent)

        def analysis() -> None:
            files.write("item-analysis.csv", item_analysis_csv(stats))
            files.write("item-analysis.md", item_analysis_markdown(report, stats))

        if forking(len(jobs)):
            # A worker per core writes the feedback files of a slice of the class (creating a file
            # costs the kernel more than rendering it) and encodes its lines of results.json,
            # while this process writes the other summaries.
            head, tail = results_json_frame(report)
            pieces = [head.encode("utf-8")]
            work = partial(_report_slice, writer, folder, students[-1])
            with chunks_in_workers(work, jobs) as finished:
                files.write("results.csv", results_csv(report))
                analysis()
                for lo, hi, (failed, text) in finished():
                    pieces.append(text)
                    if writer is not None:
                        _done(files, writer, jobs, lo, hi, failed, progress)
            pieces.append(tail.encode("utf-8"))
            files.write("results.json", b"".join(pieces))
        else:
            files.write("results.csv", results_csv(report))
            files.write("results.json", results_json(report))
            analysis()
            if writer is not None:
                for lo in range(0, len(jobs), 500):
                    hi = min(lo + 500, len(jobs))
                    _done(files, writer, jobs, lo, hi, _write_feedback(writer, folder, jobs[lo:hi]), progress)
    return [out / name for name in names]


def _report_slice(writer: FeedbackWriter | None, folder: str, last: StudentResult | None,
                  jobs: Sequence[tuple[str | None, StudentResult]]) -> tuple[list[int], bytes]:
    """A slice of the class, sorted by id: its feedback files written (with a ``writer``; the
    positions of those that failed) and its lines of results.json, encoded."""
    failed = [] if writer is None else _write_feedback(writer, folder, jobs)
    students = [result for _rel, result in jobs]
    return failed, students_json(students, last=students[-1] is last).encode("utf-8")


_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_BINARY", 0)  # bytes as they are, on Windows too


def _write_feedback(writer: FeedbackWriter, folder: str, jobs: Sequence[tuple[str | None, StudentResult]]) -> list[int]:
    """Write the feedback files of ``jobs`` (in the staging folder ``folder``, as
    :meth:`qkvquiz.core.outputs.OutputSet.path` allows); the positions of those that failed."""
    failed = []
    for k, (rel, result) in enumerate(jobs):
        text = writer.markdown(result).encode("utf-8")
        try:
            fd = os.open(os.path.join(folder, rel.rpartition("/")[2]), _FLAGS, 0o600)
            try:
                written = os.write(fd, text)
                while written < len(text):  # a short write (rare): the rest
                    written += os.write(fd, text[written:])
            finally:
                os.close(fd)
        except OSError:
            failed.append(k)
    return failed


def _done(files, writer: FeedbackWriter, jobs: Sequence[tuple[str, StudentResult]], lo: int, hi: int,
          failed: list[int], progress: Callable[[], None] | None) -> None:
    """Feedback files ``lo`` to ``hi`` are written: those that failed are written again the
    ordinary way, which says why (:class:`qkvquiz.core.outputs.OutputError`, naming the file)."""
    for k in failed:
        rel, result = jobs[lo + k]
        files.write(rel, writer.markdown(result))
    if progress is not None:
        for _ in range(hi - lo):
            progress()
