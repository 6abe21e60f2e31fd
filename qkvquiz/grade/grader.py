"""Grading a class: read every submission, then compare part by part for all students at once.

Reading is per file and never stops the run: a file that is not JSON, has no student id,
or names a student the key does not know becomes a :class:`FileProblem`. Comparison is
batched: each part's answers of the whole class are read into one array (with a mask of the
readable ones) and checked against the key in one call; invariants, known mistakes and error
carried forward are evaluated the same way, so a class of 10,000 costs a few array calls
per part plus one small record per student and part.

Scoring of one part, in order:

- missing (no answer): 0; format error (given but unreadable): ``credit.format_error`` of
  the points (0 by default);
- every entry within tolerance: ``correct``, full points;
- the answer equals this step re-run on the student's own earlier answers, and those were all
  accepted (right within tolerance, or themselves right for the student's own accepted values):
  ``correct``, full points. Rounding each step to the asked decimals is right work;
- otherwise the larger of the per-entry share (``credit.per_entry``; all-or-nothing gives 0)
  and, when the answer equals this step re-run on the student's own earlier answers,
  ``credit.carried_forward`` of the points (``carried``). No credit is carried from an earlier
  answer that is missing, malformed, or wrong and breaking one of its step's invariants, nor
  to an answer that breaks one of its own step's invariants, nor within a file whose answers
  are another student's variant; the part's ``carry`` sentence names the earlier part and the
  rule it broke.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import N_, _, current, entered
from ..core.inputs import shown_path
from ..core.collector import collector_paused
from ..core.submissions import (
    Submission,
    blank_answer,
    read_submission_with_mtime,
)
from ..engine.backend import placed
from ..key import Key
from .checks import grade_item
from .choose import select_submissions
from .columns import Column, read_column
from .copies import COPY_NOTE, detect_copies
from .parallel import chunks_in_workers, forking
from .workload import grading_seconds
from .results import FileProblem, GradeReport, StudentResult, terminal_text


def read_submissions(
    paths: Iterable[str | Path], *, progress: Callable[[], None] | None = None
) -> tuple[list[Submission], list[FileProblem]]:
    """Read submission files; a file that cannot be read becomes a :class:`FileProblem`.

    A large class's files are read by forked workers (:mod:`qkvquiz.grade.parallel`), in order."""
    paths = list(paths)
    with collector_paused():
        if not forking(len(paths)):
            return _read_files(paths, progress)
        submissions, problems = [], []
        with chunks_in_workers(_read_files, paths, chunk=250) as finished:
            for lo, hi, (subs, probs) in finished():
                submissions += subs
                problems += probs
                if progress is not None:
                    for _entry in range(hi - lo):
                        progress()
        return submissions, problems


def _read_files(paths: Sequence[str | Path], progress: Callable[[], None] | None = None
                ) -> tuple[list[Submission], list[FileProblem]]:
    submissions, problems = [], []
    for path in paths:
        try:
            sub, mtime = read_submission_with_mtime(path)
            sub.mtime = mtime  # the last tie-break among several files for one student
            submissions.append(sub)
        except ValueError as exc:
            problems.append(FileProblem(shown_path(path), str(exc)))
        if progress is not None:
            progress()
    return submissions, problems


def grade_files(key: Key, paths: Iterable[str | Path], *, progress: Callable[[], None] | None = None,
                xp: Any = np, duplicates: str = "latest", lang: str | None = None,
                notes: Callable[[str], None] | None = None) -> GradeReport:
    """Grade submission files against ``key``; unreadable files are reported, not fatal.

    ``xp`` is the array backend of the comparisons, ``duplicates`` the rule among several
    files for one student and ``lang`` the language of every sentence (see :func:`grade`).
    """
    with entered(lang, key.lang), collector_paused():
        paths = list(paths)
        xp = placed(xp, lambda: grading_seconds(key, len(paths)), notes)
        if forking(len(paths)):
            # A large class: the files are read, and their answers read per part, by workers.
            submissions, problems, read = _read_in_workers(key, paths, progress)
            report = grade_as_chosen(key, submissions, xp=xp, duplicates=duplicates, read=read)
        else:
            submissions, problems = read_submissions(paths, progress=progress)
            report = grade_as_chosen(key, submissions, xp=xp, duplicates=duplicates)
    report.problems[:0] = problems
    return report


# Each submission read by a worker -> (chunk, position in the chunk); each chunk's columns.
_Read = tuple[dict[int, tuple[int, int]], list[dict[str, "Column"]]]


def _read_chunk(key: Key, paths: Sequence[str | Path]) -> tuple[list[Submission], list[FileProblem], dict[str, Column]]:
    """A worker's share: its files read as :func:`read_submissions` reads them, and the answers
    of those it could read, read per part as :func:`read_columns` reads them."""
    submissions, problems = _read_files(paths)
    columns = read_columns(key, [sub.answers for sub in submissions])
    for sub in submissions:
        # The answers are read into the columns: what the parent still asks of them is which ids
        # they are under and which are blank (choose.py, _explain_file), so only that goes back
        # (unpickling every answer cost the parent more than the rest of a file's reading).
        sub.answers = {name: None if blank_answer(answer) else True for name, answer in sub.answers.items()}
    return submissions, problems, columns


def _read_in_workers(key: Key, paths: list[str | Path], progress: Callable[[], None] | None
                     ) -> tuple[list[Submission], list[FileProblem], _Read]:
    submissions: list[Submission] = []
    problems: list[FileProblem] = []
    rows: dict[int, tuple[int, int]] = {}
    chunks: list[dict[str, Column]] = []
    with chunks_in_workers(partial(_read_chunk, key), paths, chunk=250) as finished:
        for lo, hi, (subs, probs, columns) in finished():  # in path order
            for k, sub in enumerate(subs):
                rows[id(sub)] = (len(chunks), k)
            chunks.append(columns)
            submissions += subs
            problems += probs
            if progress is not None:
                for _entry in range(hi - lo):
                    progress()
    return submissions, problems, (rows, chunks)


def _gathered(key: Key, accepted: Sequence[tuple[int, Submission]], read: _Read) -> dict[str, Column]:
    """The columns of the accepted submissions, from the columns the workers read."""
    rows, chunks = read
    where = [rows[id(sub)] for _index, sub in accepted]
    out = {}
    for _item, part in key.parts:
        parts = [chunk[part.id] for chunk in chunks]
        offsets = np.cumsum([0] + [len(c.readable) for c in parts])
        index = np.array([offsets[c] + k for c, k in where], dtype=np.int64)
        problems, notes, raw = {}, {}, {}
        for j, (c, k) in enumerate(where):
            column = parts[c]
            if k in column.problems:
                problems[j] = column.problems[k]
            if k in column.notes:
                notes[j] = column.notes[k]
            if k in column.raw:
                raw[j] = column.raw[k]
        values = np.concatenate([c.values for c in parts])[index]
        readable = np.concatenate([c.readable for c in parts])[index]
        out[part.id] = Column(values, readable, problems, notes, raw)
    return out


def grade(key: Key, submissions: Iterable[Submission], *, xp: Any = np, duplicates: str = "latest",
          lang: str | None = None, notes: Callable[[str], None] | None = None) -> GradeReport:
    """Grade already-read submissions: one per student, chosen by :func:`select_submissions`.

    The comparisons, known mistakes and carried-forward re-runs of each part are computed for
    the whole class on ``xp`` (NumPy or CuPy, a module or its name: CuPy only where the work is
    large enough to gain from a GPU, else the CPU, said to ``notes``, see
    :func:`qkvquiz.engine.backend.placed`); verdicts come back to the host, so the same key
    and answers give the same report on either backend. Messages, diagnoses and notes are in
    ``lang`` (default: the language chosen around the call, else the key's, which ``generate``
    recorded).
    """
    with entered(lang, key.lang), collector_paused():
        submissions = list(submissions)
        xp = placed(xp, lambda: grading_seconds(key, len(submissions)), notes)
        return grade_as_chosen(key, submissions, xp=xp, duplicates=duplicates)


def grade_as_chosen(key: Key, submissions: Iterable[Submission], *, xp: Any, duplicates: str,
                    read: _Read | None = None) -> GradeReport:
    """:func:`grade` in the current language, on ``xp`` as given: for an entry point that has
    entered its language and placed its work already (``grade_collected``)."""
    chosen = select_submissions(key, submissions, duplicates)
    if read is None:
        columns = read_columns(key, [sub.answers for _index, sub in chosen.accepted])
    else:
        columns = _gathered(key, chosen.accepted, read)
    report = grade_columns(key, chosen.accepted, columns, chosen.problems, xp=xp)
    for result in report.results:
        result.candidates = chosen.candidates.get(result.student, [])
    report.skipped = chosen.skipped
    return report


def match_students(key: Key, submissions: Iterable[Submission], duplicates: str = "latest"
                   ) -> tuple[list[tuple[int, Submission]], list[FileProblem]]:
    """Each chosen submission with its student's row in the key; unknown students are problems."""
    chosen = select_submissions(key, submissions, duplicates)
    return chosen.accepted, chosen.problems


def read_columns(key: Key, answers: Sequence[Mapping[str, Any]]) -> dict[str, Column]:
    """Every part's answers of the class (one mapping of part id: answer per student), read."""
    with collector_paused():
        return _read_columns(key, answers)


def _read_columns(key: Key, answers: Sequence[Mapping[str, Any]]) -> dict[str, Column]:
    return {part.id: read_column([a.get(part.id) for a in answers], item.shapes[part.id],
                                 part.asked(item.shapes[part.id]), item.family.step(part.step).kind)
            for item, part in key.parts}


def grade_columns(key: Key, accepted: Sequence[tuple[int, Submission]], columns: Mapping[str, Column],
                  problems: list[FileProblem], *, xp=np) -> GradeReport:
    """Grade answers already read by :func:`read_columns`, item by item for the whole class."""
    with collector_paused():
        return _grade_columns(key, accepted, columns, problems, xp=xp)


def _grade_columns(key: Key, accepted: Sequence[tuple[int, Submission]], columns: Mapping[str, Column],
                   problems: list[FileProblem], *, xp=np) -> GradeReport:
    results = [StudentResult(sub.student, sub.source, key.variants[index], []) for index, sub in accepted]
    rows = np.array([index for index, _sub in accepted], dtype=np.int64)
    # Copies first: answers of another student's variant earn no carried credit.
    copies = detect_copies(key, rows, columns)
    no_carry = np.zeros(len(rows), dtype=bool)
    no_carry[list(copies)] = True
    for j, match in copies.items():
        results[j].copied_from = match.other
        results[j].flags.append(match.flag())
        results[j].notes.append(_(COPY_NOTE))
    for item in key.items:
        for part_results in grade_item(item, rows, columns, xp, no_carry).values():
            for result, part_result in zip(results, part_results):
                result.parts.append(part_result)
    for (index, sub), result in zip(accepted, results):
        _explain_file(sub, key.variants[index], result, key.set_id)
        _flag_no_work(result)
        _flag_unread_boxes(result)
    return GradeReport(key, results, problems, lang=current())


def _flag_unread_boxes(result: StudentResult) -> None:
    """Flag the parts graded with boxes that could not be read (each counted as a wrong entry):
    a regrade request may follow, and only the student's feedback says which boxes."""
    parts = [f"{p.part} ({p.unread_boxes})" for p in result.parts if p.unread_boxes]
    if parts:
        result.flags.append(_("unreadable boxes: %(parts)s") % {"parts": ", ".join(parts)})


NO_WORK_FLAGS = {"zeros": N_("zeros"), "constant": N_("one number everywhere"), "given": N_("givens copied")}


def _flag_no_work(result: StudentResult) -> None:
    """Flag a sheet most of whose answers show no work: 0 in every box, one number everywhere or
    the givens copied through. Such a sheet earns only its entries right on their own (no carried
    credit flows from an answer that shows no work); the flag tells the instructor to look."""
    answered = [p for p in result.parts if p.verdict not in ("missing", "format")]
    empty = [p.no_work for p in answered if p.no_work]
    if len(empty) >= 2 and 2 * len(empty) >= len(answered):
        kinds = sorted(set(empty), key=list(NO_WORK_FLAGS).index)
        result.flags.append(_("no work shown: %(kinds)s") % {"kinds": ", ".join(_(NO_WORK_FLAGS[k]) for k in kinds)})


def _explain_file(sub: Submission, variant: str, result: StudentResult, set_id: str = "") -> None:
    """Notes on what a file holds beyond its parts: another set's or variant's code, answers under unknown ids."""
    if sub.set_id and set_id and sub.set_id != set_id:
        result.flags.append(_("other set %(set)s") % {"set": terminal_text(sub.set_id)})
        result.notes.append(_(
            "the file is from set %(file_set)s, but the key is set %(key_set)s: it belongs to another worksheet "
            "set (another spec, seed or secret); it was graded against this student's variant of this set"
        ) % {"file_set": repr(sub.set_id), "key_set": repr(set_id)})
    if sub.variant and variant and sub.variant != variant:
        result.flags.append(_("other variant %(variant)s") % {"variant": terminal_text(sub.variant)})
        result.notes.append(_(
            "the file names variant %(file_variant)s, but %(student)s has variant %(variant)s: it may be "
            "another student's file or an older worksheet; it was graded against this student's key"
        ) % {"file_variant": repr(sub.variant), "student": repr(sub.student), "variant": repr(variant)})
    known = {p.part for p in result.parts}
    unknown = [k for k in sub.answers if k not in known]
    if not unknown:
        return
    for part in result.parts:
        if part.verdict != "missing":
            continue
        near = [k for k in unknown if k.lower() == part.part.lower()] or difflib.get_close_matches(part.part, unknown, 1, 0.75)
        if near:
            part.message = _("no answer under %(part)s; the file has one under %(near)s: "
                             "use the part id exactly as on the worksheet") % {
                "part": repr(part.part), "near": repr(near[0])}
    result.notes.append(_("answers under ids that are not parts of this worksheet were ignored: %(ids)s") % {
        "ids": ", ".join(repr(k) for k in unknown[:5]) + (" …" if len(unknown) > 5 else "")})
