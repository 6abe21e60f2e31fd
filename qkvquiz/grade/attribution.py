"""Whom each hand-in of an LMS download is graded as, and which results group members get.

The LMS's word on who handed a file in (:mod:`qkvquiz.exchange.collect` reads it from the
download's names and the roster) comes here as an :class:`Attributed` beside the file's own
submission; these rules then decide the grading:

- **the uploader decides.** A file whose ``"student"`` is not its uploader (nor a member of the
  uploader's group) is graded as the uploader's, with a note and the flag ``MISMATCH_FLAG``;
  the LMS's late mark becomes ``LATE_FLAG``;
- **anonymous submissions agree.** Where the LMS hides the uploader (Canvas' anonymous grading),
  one anonymous id is one student's submission: files of one id that name different students,
  or one student named by files of several ids, are none of them graded;
- **a group's one file counts for every member.** Each file of a group submission (a Moodle
  team, a Gradescope group) is graded as the member it names, against that member's variant. A
  member no file names gets the result of the group's file when the submission holds exactly
  one (graded once, as the member it names: it answers their variant, not the others'), with a
  note; where the submission holds several files, a member no file names is not graded, and
  said. The Gradescope autograder follows the same rule (:func:`group_credit`), then books the
  lowest member's result, since Gradescope holds one score per submission.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.i18n import _
from ..core.submissions import Submission
from ..key import Key
from .choose import KnownStudents, unknown_student_message
from .grader import grade_as_chosen
from .results import Candidate, FileProblem, GradeReport, StudentResult

LATE_FLAG = "late"
MISMATCH_FLAG = "id-differs-from-lms"


@dataclass
class Attributed:
    """A read hand-in and what the LMS says about who handed it in."""

    sub: Submission
    uploader: str | None = None  # the roster's id of the uploader; None: the file's own "student" decides
    via: str = ""  # how the uploader was identified ("Canvas user 340934 ('lovelaceada')")
    late: bool = False
    notes: list[str] = field(default_factory=list)  # said on the student's result when this file is graded
    anonymous: str = ""  # Canvas' anonymous id: the LMS hides who uploaded it
    group: tuple[str, ...] = ()  # a group submission: every member's roster id
    submission: str = ""  # the group submission as the LMS names it ("Moodle group 77 ('Team Red')")


@dataclass
class _Group:
    """A group submission: its files, each graded as the member it names, and its members."""

    label: str
    members: tuple[str, ...]
    files: list[tuple[str, str]] = field(default_factory=list)  # (source, the member it is graded as)


def grade_attributed(key: Key, handed: Sequence[Attributed], problems: list[FileProblem],
                     skipped: list[FileProblem], *, xp: Any = np, duplicates: str = "latest") -> GradeReport:
    """Grade hand-ins as the LMS attributes them (the rules in the module docstring); ``problems``
    and ``skipped``: files already left out, listed first in the report. In the current language,
    on ``xp`` as given (``grade_collected`` chose both)."""
    problems = list(problems)
    kept = anonymous_agree(handed, problems)
    notes: dict[tuple[str, str], list[str]] = {}  # by (file, student): one file may be graded for several
    flags: dict[tuple[str, str], list[str]] = {}
    groups: dict[str, _Group] = {}
    for h in kept:
        sub, said, marks = h.sub, list(h.notes), []
        if h.uploader is not None and sub.student != h.uploader and sub.student not in h.group:
            said.append(_("the file says student %(named)s, but it was uploaded by %(via)s, who is %(student)s "
                          "in the roster: graded as %(student)s")
                        % {"named": repr(sub.student), "via": h.via, "student": repr(h.uploader)})
            marks.append(MISMATCH_FLAG)
            sub.student = h.uploader
        if h.late:
            marks.append(LATE_FLAG)
        if h.group:  # graded as the member it names (else as the uploader), then maybe given to the others
            label = h.submission or h.via
            groups.setdefault(label, _Group(label, h.group)).files.append((sub.source, sub.student))
        notes.setdefault((sub.source, sub.student), []).extend(said)
        flags.setdefault((sub.source, sub.student), []).extend(marks)
    report = grade_as_chosen(key, [h.sub for h in kept], xp=xp, duplicates=duplicates)
    report.problems[:0] = problems
    report.skipped[:0] = skipped
    for r in report.results:
        r.notes[:0] = notes.get((r.source, r.student), [])
        r.flags += [f for f in flags.get((r.source, r.student), []) if f not in r.flags]
    for g in groups.values():
        _credit(key, report, g)
    position = {s: i for i, s in enumerate(key.students)}
    report.results.sort(key=lambda r: position.get(r.student, len(position)))
    return report


def anonymous_agree(handed: Sequence[Attributed], problems: list[FileProblem]) -> list[Attributed]:
    """The hand-ins left once anonymous files that disagree on who they are are refused.

    Canvas does not say who uploaded an anonymous file, but one anonymous id is one student's
    submission: its files must all name one student, and one student is named by one id only.
    Otherwise a student could hand in a file in a classmate's name; all files involved are
    listed instead of guessing which is whose.
    """
    students: dict[str, set[str]] = {}  # anonymous id -> students its files name
    ids: dict[str, set[str]] = {}  # student -> anonymous ids whose files name them
    for h in handed:
        if h.anonymous:
            students.setdefault(h.anonymous, set()).add(h.sub.student)
            ids.setdefault(h.sub.student, set()).add(h.anonymous)
    kept = []
    for h in handed:
        if h.anonymous and len(students[h.anonymous]) > 1:
            problems.append(FileProblem(h.sub.source, _(
                "the files of Canvas' anonymous submission %(id)s name different students (%(students)s): none "
                "of them is graded") % {"id": h.anonymous, "students": ", ".join(sorted(students[h.anonymous]))}))
        elif h.anonymous and len(ids[h.sub.student]) > 1:
            problems.append(FileProblem(h.sub.source, _(
                "files of several anonymous Canvas submissions (%(ids)s) name student %(student)s: none of them "
                "is graded, as the LMS does not say which is theirs")
                % {"ids": ", ".join(sorted(ids[h.sub.student])), "student": repr(h.sub.student)}))
        else:
            kept.append(h)
    return kept


def group_credit(key: Key, report: GradeReport, label: str, members: Sequence[str],
                 files: Sequence[tuple[str, str]]) -> list[StudentResult]:
    """Apply the group rule (module docstring) to one group submission: ``files`` are its files as
    (source, the member each was graded as). Returns the results added for members no file
    names (also appended to ``report.results``); a member left out is a problem of the report."""
    before = len(report.results)
    _credit(key, report, _Group(label, tuple(members), list(files)))
    return report.results[before:]


def _credit(key: Key, report: GradeReport, g: _Group) -> None:
    by_student = {r.student: r for r in report.results}
    graded = [(source, student) for source, student in g.files
              if student in by_student and by_student[student].source == source]
    lacking = [m for m in g.members if m not in by_student]
    if not lacking or not graded:
        return
    if len(g.files) > 1:
        source = g.files[0][0]
        for member in lacking:
            report.problems.append(FileProblem(source, _(
                "%(submission)s holds several files and none names %(student)s: a member is credited with the "
                "group's file only where the group handed in one; not graded")
                % {"submission": g.label, "student": repr(member)}))
        return
    [(source, student)] = graded
    result = by_student[student]
    note = _("a group submission (%(via)s): its file names %(student)s and is graded once, against their "
             "variant; every member of the group gets that result") % {"via": g.label, "student": repr(student)}
    position = set(key.students)
    known: KnownStudents | None = None
    for member in lacking:
        if member not in position:
            known = known or KnownStudents(key.students)
            report.problems.append(FileProblem(source, unknown_student_message(key, member, known)))
            continue
        copied = copy.deepcopy(result)
        copied.student, copied.notes = member, [note, *result.notes]
        copied.candidates = [Candidate(source, True, note)]
        report.results.append(copied)
