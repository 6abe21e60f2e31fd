"""Grades in the import format of each LMS, written from ``results.json`` and the roster.

Every target is one function from rows to CSV text; each follows its importer's documented rules
(cited at the function). Shared rules:

- a score is points out of the key's total (``scale="points"``), optionally rescaled to the
  LMS assignment's points (``out_of``), or a percent; rounded to ``decimals`` places with the
  instructor's rule (``half-up`` by default, ``half-even``, ``up``, ``down``);
- a student of the key without a graded submission gets 0 (``missing="zero"``, as in
  ``results.csv``) or an empty cell (``missing="blank"``: importers leave the grade alone);
- every cell of every target, whatever its source (roster, results, the worksheet Moodle gave),
  is written by :func:`.csvsafe.csv_text`, so a name such as ``=HYPERLINK(…)`` is never run by
  a spreadsheet, while grades stay numbers that the importers read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal
from typing import Any

from ..core.csvsafe import csv_text
from ..core.inputs import MAX_ROSTER_BYTES, InputError, csv_rows, decode_text, read_bytes, shown_path
from ..core.untrusted import terminal_text
from ..roster import Roster, RosterEntry
from .results import Results, StudentScore

TARGETS = ("canvas", "moodle-worksheet", "moodle-gradebook", "blackboard", "plain")
SCALES = ("points", "percent")
ROUNDINGS = {"half-up": ROUND_HALF_UP, "half-even": ROUND_HALF_EVEN, "up": ROUND_CEILING, "down": ROUND_FLOOR}
MISSING = ("zero", "blank")
DECIMALS_DEFAULT = 2

# Moodle's English strings that its offline-grading worksheet is read by
# (mod/assign/feedback/offline/importgradeslib.php: get_string('recordid', 'assign') = "Identifier",
# get_string('grade') = "Grade", get_string('lastmodifiedgrade', 'assign') = "Last modified (grade)";
# the comments plugin's editor field is "Feedback comments"; ids are "Participant " + number).
MOODLE_ID = "Identifier"
MOODLE_GRADE = "Grade"
MOODLE_MODIFIED = "Last modified (grade)"
MOODLE_FEEDBACK = "Feedback comments"
MOODLE_PARTICIPANT = "Participant "

# Canvas' gradebook importer drops, without a word, every column whose header holds one of these
# (app/models/gradebook_importer.rb: NON_ASSIGNMENT_COLUMN_HEADERS, matched anywhere in the
# header, case as written; "Unposted Final Grade" too): such a title would import nothing.
CANVAS_SKIPPED_HEADERS = ("Current Score", "Current Points", "Current Grade", "Final Score", "Final Points",
                          "Final Grade", "Override Score", "Override Grade", "Override Status")


def canvas_title_problem(header: str) -> str | None:
    """Why Canvas' importer would skip an assignment column headed ``header``, or None."""
    words = [w for w in CANVAS_SKIPPED_HEADERS if w in header]
    if not words:
        return None
    return (f"Canvas' gradebook importer skips every column whose title contains {words[0]!r} (its own "
            f"columns: {', '.join(CANVAS_SKIPPED_HEADERS)}), so the column {header!r} would import no grade; "
            "choose another --title")


@dataclass(frozen=True)
class GradeOptions:
    target: str = "plain"
    scale: str = "points"
    decimals: int = DECIMALS_DEFAULT
    rounding: str = "half-up"
    out_of: float | None = None  # rescale points to this many (the LMS assignment's points)
    missing: str = "zero"
    title: str = ""  # the assignment's name in the LMS; results' title when empty
    assignment_id: str = ""  # Canvas assignment id / Blackboard column id, when known
    points_possible: bool = False  # Canvas: write the "Points Possible" row

    def check(self) -> None:
        for value, allowed, what in ((self.target, TARGETS, "target"), (self.scale, SCALES, "scale"),
                                     (self.rounding, tuple(ROUNDINGS), "rounding"), (self.missing, MISSING, "missing")):
            if value not in allowed:
                raise ValueError(f"unknown {what} {value!r}; choose from {', '.join(allowed)}")
        if not 0 <= self.decimals <= 6:
            raise ValueError(f"decimals must be from 0 to 6, not {self.decimals}")
        if self.out_of is not None and not self.out_of > 0:
            raise ValueError(f"out_of must be a positive number of points, not {self.out_of}")


# Why a student is left out of an export.
NO_ID = "no id it reads in the roster"
NOT_IN_WORKSHEET = "the roster's moodle_id has no row in the worksheet"


@dataclass(frozen=True)
class Unmatched:
    """A student of the results whom the export leaves out (or the importer cannot match), and why
    (:data:`NO_ID`, :data:`NOT_IN_WORKSHEET`)."""

    student: str
    reason: str


@dataclass(frozen=True)
class Row:
    """One student's line: their roster entry, the grade as text ("" for blank) and a short comment."""

    entry: RosterEntry
    grade: str
    comment: str  # plain text, lines separated by "\n"
    result: StudentScore

    @property
    def comment_html(self) -> str:
        return comment_html(self.result)


def possible(results: Results, opts: GradeOptions) -> str:
    """The points a full score is written as."""
    if opts.scale == "percent":
        return "100"
    return _num(Decimal(repr(opts.out_of if opts.out_of is not None else results.points)), opts)


def _num(value: Decimal, opts: GradeOptions) -> str:
    q = Decimal(1).scaleb(-opts.decimals)
    text = format(value.quantize(q, rounding=ROUNDINGS[opts.rounding]), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def grade_text(result: StudentScore, results: Results, opts: GradeOptions) -> str:
    """The grade cell of one student (see the module docstring)."""
    if result.score is None:
        if opts.missing == "blank":
            return ""
        score = 0.0
    else:
        score = result.score
    total = result.total or results.points
    # Decimal from the shortest repr: 7.5 / 10 stays exact, and the rounding rule sees the true digits.
    value = Decimal(repr(score))
    if opts.scale == "percent":
        value = value * 100 / Decimal(repr(total)) if total else Decimal(0)
    elif opts.out_of is not None and total:
        value = value * Decimal(repr(opts.out_of)) / Decimal(repr(total))
    return _num(value, opts)


def comment_text(result: StudentScore) -> str:
    """Plain-text feedback for a comment box: the score and one line per part (no expected values)."""
    return "\n".join(comment_lines(result))


def comment_html(result: StudentScore) -> str:
    """The same for Moodle, whose feedback comments are HTML (a plain line break would vanish)."""
    import html

    return "<br>\n".join(html.escape(line, quote=False) for line in comment_lines(result))


def comment_lines(result: StudentScore) -> list[str]:
    if result.score is None:
        return ["No submission was graded."]
    lines = [f"Score {_pts(result.score)} of {_pts(result.total)}."]
    for p in result.parts:
        verdict = {"correct": "correct", "partial": "partly correct", "wrong": "not correct",
                   "carried": "credited as carried forward", "format": "could not be read",
                   "missing": "not answered"}.get(p.verdict, p.verdict)
        lines.append(f"{p.part}: {_pts(p.score)}/{_pts(p.points)} ({verdict})")
    return lines


def _pts(x: float) -> str:
    return f"{x:.4f}".rstrip("0").rstrip(".")


def rows_for(results: Results, roster: Roster | None, opts: GradeOptions) -> list[Row]:
    """One row per student of the results, in roster order (then the rest by id)."""
    order = roster.students if roster is not None else []
    known = [s for s in order if s in results.students]
    rest = sorted(s for s in results.students if s not in set(known))
    rows = []
    for student in known + rest:
        result = results.students[student]
        entry = roster.get(student) if roster is not None else RosterEntry(student)
        rows.append(Row(entry, grade_text(result, results, opts), comment_text(result), result))
    return rows


def _t(text: str) -> str:
    # Roster text with invisible characters (a right-to-left override in a name) shown as escapes;
    # formulas are neutralised by the writer, for every cell.
    return terminal_text(text)


def canvas_csv(results: Results, rows: Sequence[Row], opts: GradeOptions) -> str:
    """Canvas gradebook import (Grades → Import).

    Canvas' rules for the file: the first column is ``Student`` (the sortable name, "Last,
    First"), the second ``ID`` (Canvas' user id), then ``SIS User ID`` and ``SIS Login ID``,
    with ``Section`` the last of the student columns; each assignment column is headed
    ``Title (assignment id)`` so that it updates that assignment; a header without an id updates
    the assignment whose title is exactly the header, and only where none is makes a new one
    (``parse_assignments``). A header that contains one of :data:`CANVAS_SKIPPED_HEADERS` is
    dropped by the importer, so such a title is refused (ValueError). A row whose first cell is
    ``Points Possible`` is read as the points of each column, not as a student. Students are
    matched by ID, else SIS User ID, else SIS Login ID.
    """
    title = opts.title or results.title or "qkvquiz"
    column = f"{title} ({opts.assignment_id})" if opts.assignment_id else title
    problem = canvas_title_problem(column)
    if problem is not None:
        raise ValueError(problem)
    out = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", _t(column)]]
    if opts.points_possible:
        out.append(["Points Possible", "", "", "", "", possible(results, opts)])
    for r in rows:
        e = r.entry
        out.append([_t(e.sortable), _t(e.canvas_id), _t(e.sis_id), _t(e.sis_login), _t(e.section), r.grade])
    return csv_text(out)


def moodle_worksheet_csv(results: Results, rows: Sequence[Row], opts: GradeOptions,
                         now: datetime | None = None) -> str:
    """Moodle assignment "Upload grading worksheet" (offline grading).

    The importer finds its columns by header: ``Identifier`` ("Participant " + the participant
    id), ``Grade`` and ``Last modified (grade)`` are required, ``Feedback comments`` is read
    when the comments plugin is on; other columns are ignored. A grade changed in Moodle more
    than 60 s after the file's ``Last modified (grade)`` is kept unless "Allow updating records
    that have been modified more recently in Moodle" is ticked, so the column holds the time of
    this export. Students without a ``moodle_id`` in the roster cannot be matched and are left out
    (:func:`unmatched` lists them). To keep every column of a worksheet Moodle gave you, use
    :func:`fill_moodle_worksheet` instead.
    """
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S%z")
    out = [[MOODLE_ID, "Full name", "Email address", MOODLE_GRADE, "Maximum Grade", MOODLE_MODIFIED, MOODLE_FEEDBACK]]
    for r in rows:
        e = r.entry
        if not e.moodle_id:
            continue
        out.append([f"{MOODLE_PARTICIPANT}{e.moodle_id}", _t(e.display_name), _t(e.email), r.grade,
                    possible(results, opts), stamp, r.comment_html])
    return csv_text(out)


def _records(text: str) -> list[tuple[str, str]]:
    """The CSV records of ``text`` as written: each record's text and the line break after it
    ("" for the last without one). A line break inside a quoted field stays in its record."""
    records: list[tuple[str, str]] = []
    pieces = re.split(r"(\r\n|\r|\n)", text)  # text, break, text, break, …
    current: list[str] = []
    quotes = 0
    for i in range(0, len(pieces), 2):
        current.append(pieces[i])
        quotes += pieces[i].count('"')
        brk = pieces[i + 1] if i + 1 < len(pieces) else ""
        if quotes % 2 and brk:  # inside a quoted field: the break is part of it
            current.append(brk)
            continue
        record = "".join(current)
        if record or brk:
            records.append((record, brk))
        current, quotes = [], 0
    return records


def fill_moodle_worksheet(template: str, source: str, rows: Sequence[Row]) -> tuple[str, list[Unmatched]]:
    """A grading worksheet downloaded from Moodle with ``Grade`` and ``Feedback comments`` filled in
    for the students of ``rows`` (matched by participant id).

    Only the rows of those students are written anew (each cell through the writer: a cell Moodle
    wrote from a student's own profile may hold a formula). Every other line, the header
    included, is written back byte for byte as Moodle wrote it: its importer compares each
    row's grade and feedback with its own, and a row changed by so much as a quote mark would be
    imported as new feedback. Returns the CSV and every student of ``rows`` left out, with why.
    """
    records = _records(template)
    if not records:
        raise InputError(source, "the worksheet is empty")
    header = next(iter(csv_rows([records[0][0]], source)), [])
    for needed in (MOODLE_ID, MOODLE_GRADE):
        if needed not in header:
            raise InputError(source, f"no {needed!r} column; give the worksheet from Moodle's "
                                     "\"Download grading worksheet\" (English headers)")
    id_col, grade_col = header.index(MOODLE_ID), header.index(MOODLE_GRADE)
    feedback_col = header.index(MOODLE_FEEDBACK) if MOODLE_FEEDBACK in header else None
    by_participant = {r.entry.moodle_id: r for r in rows if r.entry.moodle_id}
    used: set[str] = set()
    out = [records[0][0] + records[0][1]]
    at = 1 + records[0][0].count("\n") + bool(records[0][1])  # the file's line of each record, for messages
    for text, brk in records[1:]:
        line = next(iter(csv_rows([text], source, at)), [])
        at += text.count("\n") + bool(brk)
        participant = (line[id_col].strip().removeprefix(MOODLE_PARTICIPANT.strip()).strip()
                       if len(line) > max(id_col, grade_col) else "")
        row = by_participant.get(participant) if participant else None
        if row is None:
            out.append(text + brk)
            continue
        used.add(participant)
        line[grade_col] = row.grade
        if feedback_col is not None and feedback_col < len(line):
            line[feedback_col] = row.comment_html
        written = csv_text([line], lineterminator=brk or "\r\n")
        out.append(written if brk else written.removesuffix("\r\n"))
    missing = [Unmatched(r.entry.student, NO_ID if not r.entry.moodle_id else NOT_IN_WORKSHEET)
               for r in rows if r.entry.moodle_id not in used]
    return "".join(out), missing


def moodle_gradebook_csv(results: Results, rows: Sequence[Row], opts: GradeOptions) -> str:
    """Moodle gradebook "Import → CSV file".

    Moodle maps columns by hand on import: "Identify user by" one of its user fields (email
    address, ID number or username) from a column of the file, and each other column to a grade
    item or to its feedback. The columns are named as Moodle's own plain-text export names
    them, so that its import preview reads naturally.
    """
    title = opts.title or results.title or "qkvquiz"
    out = [["First name", "Last name", "ID number", "Email address", _t(f"{title} (Real)"), _t(f"{title} (Feedback)")]]
    for r in rows:
        first, last = r.entry.split_name
        out.append([_t(first), _t(last or r.entry.student), _t(r.entry.sis_id), _t(r.entry.email), r.grade,
                    r.comment_html])
    return csv_text(out)


def blackboard_csv(results: Results, rows: Sequence[Row], opts: GradeOptions) -> str:
    """Blackboard Learn Grade Center "Work Offline → Upload" (comma-delimited).

    Each file needs a header row; students are matched by ``Username``; a column header ending
    in ``|<column id>`` updates that column, and a header without one creates a new (text)
    column. In a comma-delimited file every value is quoted.
    """
    title = opts.title or results.title or "qkvquiz"
    column = f"{title} [Total Pts: {possible(results, opts)} Score] |{opts.assignment_id}" if opts.assignment_id else title
    out = [["Last Name", "First Name", "Username", "Student ID", _t(column)]]
    for r in rows:
        first, last = r.entry.split_name
        out.append([_t(last), _t(first), _t(r.entry.sis_login or r.entry.student), _t(r.entry.sis_id), r.grade])
    return csv_text(out, quote_all=True)


def plain_csv(results: Results, rows: Sequence[Row], opts: GradeOptions) -> str:
    """A plain CSV for any other system: ids, name, email, the grade, its maximum and the flags."""
    out = [["student", "name", "email", "sis_id", "grade", "possible", "flags"]]
    for r in rows:
        e = r.entry
        out.append([_t(e.student), _t(e.name), _t(e.email), _t(e.sis_id), r.grade, possible(results, opts),
                    _t("; ".join(r.result.flags))])
    return csv_text(out)


WRITERS: dict[str, Any] = {
    "canvas": canvas_csv, "moodle-worksheet": moodle_worksheet_csv, "moodle-gradebook": moodle_gradebook_csv,
    "blackboard": blackboard_csv, "plain": plain_csv,
}


#: The roster columns each target's importer matches a student by (any one of them will do).
MATCHED_BY = {"canvas": ("canvas_id", "sis_id", "sis_login"), "moodle-worksheet": ("moodle_id",),
              "moodle-gradebook": ("email", "sis_id"), "blackboard": ("sis_login",)}


def unmatched(rows: Sequence[Row], target: str) -> list[Unmatched]:
    """Students the target's importer cannot match, for a warning: no id of the kind it reads."""
    need = MATCHED_BY.get(target)
    if need is None:
        return []
    return [Unmatched(r.entry.student, NO_ID) for r in rows if not any(getattr(r.entry, f) for f in need)]


def export_grades(results: Results, roster: Roster | None, opts: GradeOptions, *,
                  worksheet: str | None = None, now: datetime | None = None) -> tuple[str, list[Unmatched]]:
    """The CSV text for ``opts.target`` and the students it leaves out or its importer will not
    match, each with why.

    ``worksheet``: a grading worksheet's path (Moodle's own download) to fill in instead of
    writing a new one (target ``moodle-worksheet`` only).
    """
    opts.check()
    if roster is None and opts.target in MATCHED_BY and results.students:
        # Without a roster no student has the ids the importer reads: a file that matches no one
        # would be written and uploaded for nothing.
        raise ValueError(f"the {opts.target} importer matches students by "
                         f"{' or '.join(MATCHED_BY[opts.target])}, which come from a roster; none was given")
    rows = rows_for(results, roster, opts)
    if worksheet is not None:
        if opts.target != "moodle-worksheet":
            raise ValueError("a worksheet to fill in goes with the target moodle-worksheet")
        raw = read_bytes(worksheet, MAX_ROSTER_BYTES, "grading worksheet")
        filled, missing = fill_moodle_worksheet(decode_text(raw, shown_path(worksheet), "grading worksheet"),
                                                shown_path(worksheet), rows)
        bom = "\ufeff" if raw.startswith(b"\xef\xbb\xbf") else ""  # kept, as every byte of Moodle's lines
        return bom + filled, missing
    if opts.target == "moodle-worksheet":
        return moodle_worksheet_csv(results, rows, opts, now), unmatched(rows, opts.target)
    return WRITERS[opts.target](results, rows, opts), unmatched(rows, opts.target)
