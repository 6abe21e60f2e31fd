"""Paper in, grades out: a pile of scanned worksheets read, graded as ``grade`` grades files, and
only the doubts worth a person's look sent to review.

:func:`scan_and_grade` is the whole of ``qkvquiz scan KEY SCANS… --out DIR``:

1. the key and its cell map are read (the map lies beside the key: ``cellmap.json``) and checked
   against each other: the same set, students, variants and part shapes;
2. every page of every scan is read (:func:`qkvquiz.scan.reader.read_scans`): one bad page is
   listed with its reason, never stops the others;
3. each student's submission, in exactly the answer form's JSON, is read back through the
   submission door and graded by :func:`qkvquiz.grade.grader.grade`, the function ``grade`` calls
   for files: the grades are those of ``qkvquiz grade KEY DIR/submissions --out DIR/grades``;
4. an entry goes to review when the reader doubts it, or when one of its likely other readings
   (a digit cell's next likeliest reading, :data:`qkvquiz.scan.reader.ALTERNATIVE_BELOW`) would
   change the student's score: each alternative is graded as the student's whole submission
   with that one entry changed, carried credit included. The key never decides a reading; it only
   decides which readings are worth a look;
5. everything is written into DIR as one set (:mod:`qkvquiz.core.outputs`): ``submissions/``,
   ``readings/`` (each entry's confidence, the side file), ``review/`` (the pictures),
   ``grades/`` (grade's own set), ``scan.json`` and ``summary.md``.

A person's decisions (``qkvquiz scan review DIR``) are kept in ``DIR/decisions.jsonl``
(:mod:`qkvquiz.scan.journal`), outside the set, so scanning again keeps them; :func:`regrade`
grades again on the confirmed readings.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import N_, _, entered
from ..core.inputs import InputError, read_bytes, shown_path
from ..core.outputs import claim, owned_present, write_set
from ..core.submissions import Submission, submission_from_bytes
from ..engine.backend import placed
from ..files import safe_name
from ..key import Key, KeyFileError, load_key
from ..scan.cellmap import CellMap, CellMapError, read_cellmap
from ..scan.crops import entry_box
from ..scan.journal import MAX_VALUE, Decision, read_decisions
from ..scan.reader import PageReport, ScanResult, read_scans
from .grader import grade, grade_columns, read_columns
from .report import write_reports
from .results import GradeReport, terminal_text
from .workload import grading_seconds

CELLMAP_NAME = "cellmap.json"
SUBMISSIONS, READINGS, REVIEW, GRADES = "submissions", "readings", "review", "grades"
STATE, SUMMARY = "scan.json", "summary.md"
#: The entries ``scan`` owns in its folder, all private: they hold what students wrote, their
#: grades, and (scan.json) every student's id and variant. ``decisions.jsonl`` is not among them.
OWNED: dict[str, bool] = {SUBMISSIONS: True, READINGS: True, REVIEW: True, GRADES: True, SUMMARY: True, STATE: True}
#: What grading again after a review replaces; the readings, pictures and scan.json stay.
REGRADED: dict[str, bool] = {SUBMISSIONS: True, GRADES: True, SUMMARY: True}
STATE_FORMAT, STATE_VERSION = "qkvquiz-scan", 1
MAX_STATE_BYTES = 200_000_000
MAX_READINGS_BYTES = 50_000_000
#: The review reason of an entry whose other likely reading would change the score.
CHANGES_SCORE = "another likely reading changes the score"
#: Another reading of a digit cell is likely when the model leaves it at least this chance (1 − its
#: confidence in the reading). benchmarks/scan_review.py measures the choice (docs/scanning.md):
#: lower sends many right answers to review and finds few more wrong readings.
LIKELY = 0.02

EntryId = tuple[str, str, tuple[int, ...]]  # student, part, index
_PICTURE = re.compile(rf"{REVIEW}/cells/[1-9][0-9]{{0,6}}\.png")
_VIEW = re.compile(rf"{REVIEW}/pages/[0-9A-Z]{{4}}-[0-9A-Z]{{4}}-p[1-9][0-9]{{0,2}}\.jpg")


class ScanInputError(ValueError):
    """A key, cell map or scan folder that cannot be used; the message names the file and field."""


@dataclass
class ReviewItem:
    """One entry sent to review: what was read, why it is in doubt, and its pictures."""

    id: int
    student: str
    variant: str
    part: str
    index: tuple[int, ...]
    read: str | None
    reasons: list[str]
    alternatives: list[str | None]  # the other likely readings that would change the score
    cells: int  # how many of its cells are in doubt (their own doubt, or an alternative that counts; at least 1)
    page: int
    source: str
    picture: str  # relative to the scan folder
    view: str
    box: list[float] = field(default_factory=list)  # where on its page: x, y, width, height as shares of the page

    @property
    def entry(self) -> EntryId:
        return (self.student, self.part, self.index)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "student": self.student, "variant": self.variant, "part": self.part,
                "index": list(self.index), "read": self.read, "reasons": self.reasons,
                "alternatives": self.alternatives, "cells": self.cells, "page": self.page, "source": self.source,
                "picture": self.picture, "view": self.view, "box": self.box}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ReviewItem:
        """An item of scan.json; KeyError, TypeError or ValueError where a field is not one."""
        texts = [doc["read"], *doc["alternatives"]]
        if not all(t is None or isinstance(t, str) for t in texts) or not all(isinstance(r, str) for r in doc["reasons"]):
            raise ValueError("read")
        box = doc.get("box", [])
        if not isinstance(box, list) or len(box) not in (0, 4) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in box):
            raise ValueError("box")
        return cls(int(doc["id"]), str(doc["student"]), str(doc["variant"]), str(doc["part"]),
                   tuple(int(i) for i in doc["index"]), doc["read"], list(doc["reasons"]),
                   list(doc["alternatives"]), int(doc["cells"]), int(doc["page"]), str(doc["source"]),
                   str(doc["picture"]), str(doc["view"]), [float(v) for v in box])


@dataclass
class ScanGrading:
    """What one scan gave: every page, every reading, the grades, and what goes to review."""

    key: Key
    out: Path
    state: dict[str, Any]  # scan.json: pages, missing, absent, students, review
    readings: list[dict[str, Any]]  # per student with pages: the side file
    submissions: list[dict[str, Any]]  # per student, as graded (decisions applied)
    report: GradeReport
    review: list[ReviewItem]
    decisions: dict[EntryId, Decision] = field(default_factory=dict)  # those applied
    notes: list[str] = field(default_factory=list)  # decisions set aside, journal lines skipped

    @property
    def pages(self) -> list[dict[str, Any]]:
        return self.state["pages"]

    def summary(self) -> dict[str, Any]:
        """The counts a person reads first."""
        statuses = [p["status"] for p in self.pages]
        entries = sum(len(r["entries"]) for r in self.readings)
        cells = sum(len(e["cells"]) for r in self.readings for e in r["entries"])
        open_items = [i for i in self.review if i.entry not in self.decisions]
        return {
            "pages": len(statuses), "read": statuses.count("read"),
            "twice": [p for p in self.pages if p["status"] == "duplicate"],
            "not placed": [p for p in self.pages if p["status"] not in ("read", "duplicate")],
            "missing pages": self.state["missing_pages"], "no pages": self.state["absent"],
            "entries": entries, "cells": cells,
            "review entries": len(self.review), "review cells": sum(i.cells for i in self.review),
            "changes score": sum(CHANGES_SCORE in i.reasons for i in self.review),
            "decided": len(self.review) - len(open_items), "open": len(open_items),
        }


# --------------------------------------------------------------------------- inputs


def _key_hash(path: Path) -> str:
    try:
        raw = read_bytes(path, 1 << 30, "key")
    except InputError as exc:
        raise ScanInputError(str(exc)) from None
    return hashlib.sha256(raw).hexdigest()


def load_inputs(key_path: str | Path, cellmap_path: str | Path | None = None) -> tuple[Key, CellMap]:
    """The key and its cell map (beside the key unless named), checked against each other."""
    key_path = Path(key_path)
    try:
        key = load_key(key_path)
    except KeyFileError as exc:
        raise ScanInputError(str(exc)) from None
    path = Path(cellmap_path) if cellmap_path is not None else key_path.parent / CELLMAP_NAME
    if cellmap_path is None and not os.path.lexists(path):
        raise ScanInputError(
            f"{shown_path(path)}: no cell map beside the key; it is written by `qkvquiz generate` with the "
            "worksheets that carry answer cells (or name one with --cellmap)")
    try:
        cellmap = read_cellmap(path)
    except CellMapError as exc:
        raise ScanInputError(str(exc)) from None
    check_cellmap(key, cellmap)
    return key, cellmap


def check_cellmap(key: Key, cellmap: CellMap) -> None:
    """The map belongs to the key: its set, and each of its students with the key's variant and part shapes."""
    where = cellmap.source
    if key.set_id and cellmap.set_id != key.set_id:
        raise ScanInputError(f"{where}: field \"set\" is {cellmap.set_id}, but the key is set {key.set_id}: "
                             "the cell map belongs to another set")
    shapes = {part.id: item.shapes[part.id] for item, part in key.parts}
    for student in cellmap.students:
        row = key.index(student.student)
        if row is None:
            raise ScanInputError(f"{where}: student {student.student!r} is not in the key")
        if key.variants[row] != student.variant:
            raise ScanInputError(f"{where}: student {student.student!r}, field \"variant\" is {student.variant}, "
                                 f"but the key gives {key.variants[row]}")
        for part, shape in student.parts.items():
            if shapes.get(part) != tuple(shape):
                expected = "not a part of the key" if part not in shapes else f"of shape {list(shapes[part])} in the key"
                raise ScanInputError(f"{where}: student {student.student!r}, field \"parts\": {part} "
                                     f"{list(shape)} is {expected}")


# --------------------------------------------------------------------------- submissions


def _set_entry(answers: dict[str, Any], part: str, index: Sequence[int], value: Any) -> None:
    if not index:
        answers[part] = value
        return
    answers[part] = row = copy.deepcopy(answers[part])
    for i in index[:-1]:
        row = row[i]
    row[index[-1]] = value


def _apply(readings: Sequence[Mapping[str, Any]], submissions: Sequence[Mapping[str, Any]],
           decisions: Mapping[EntryId, Decision]) -> tuple[list[dict[str, Any]], dict[EntryId, Decision], list[str]]:
    """The submissions with each decision made on the reading it names; decisions on a reading
    that has changed since (the pages scanned again) are set aside with a note."""
    out, used, notes = [], {}, []
    for reading, submission in zip(readings, submissions):
        answers = dict(submission["answers"])
        for entry in reading["entries"]:
            eid = (reading["student"], entry["part"], tuple(entry["index"]))
            decision = decisions.get(eid)
            if decision is None:
                continue
            if decision.read != entry["value"]:
                notes.append(_("the decision on %(student)s's %(part)s %(index)s was made on the reading %(then)s, "
                               "but it now reads %(now)s: it was set aside")
                             % {"student": eid[0], "part": eid[1], "index": list(eid[2]), "then": repr(decision.read),
                                "now": repr(entry["value"])})
                continue
            _set_entry(answers, entry["part"], entry["index"], decision.value)
            used[eid] = decision
        out.append({**submission, "answers": answers})
    return out, used, notes


def _file_name(names: Mapping[str, str], student: str, folder: str) -> str:
    return f"{folder}/{names[student]}.json"


def _as_graded(out: Path, names: Mapping[str, str], docs: Sequence[Mapping[str, Any]]) -> list[Submission]:
    """Each submission as ``grade`` reads its file: the very bytes written, through the same door."""
    return [submission_from_bytes(submission_text(doc).encode("utf-8"),
                                  shown_path(out / _file_name(names, doc["student"], SUBMISSIONS))) for doc in docs]


def submission_text(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def _scores(key: Key, rows: Sequence[tuple[int, Submission]], xp: Any) -> list[float]:
    """Each row's score, graded by the grader's own batched code (several rows may be one student's)."""
    columns = read_columns(key, [sub.answers for _row, sub in rows])
    report = grade_columns(key, rows, columns, [], xp=xp)
    return [r.score for r in report.results]


def score_changes(key: Key, readings: Sequence[Mapping[str, Any]], submissions: Sequence[Submission], *,
                  xp: Any = np, likely: float | None = None) -> dict[EntryId, list[str | None]]:
    """Per entry the reader does not doubt, its other likely readings (a chance of at least
    ``likely``, default :data:`LIKELY`) that would change the student's score: each graded as
    the whole submission with that entry changed."""
    likely = LIKELY if likely is None else likely
    rows: list[tuple[int, Submission]] = []
    owners: list[tuple[int, EntryId | None, str | None]] = []  # (base row, entry, alternative)
    for reading, sub in zip(readings, submissions):
        index = key.index(sub.student)
        if index is None:
            continue
        base = len(rows)
        rows.append((index, sub))
        owners.append((base, None, None))
        for entry in reading["entries"]:
            if entry["doubts"]:
                continue
            for alternative in entry.get("alternatives", []):
                if alternative.get("chance", 1.0) < likely:
                    continue
                answers = dict(sub.answers)
                _set_entry(answers, entry["part"], entry["index"], alternative["value"])
                rows.append((index, Submission(sub.source, sub.student, answers, sub.variant, sub.set_id)))
                owners.append((base, (sub.student, entry["part"], tuple(entry["index"])), alternative["value"]))
    if len(rows) == len(readings):
        return {}
    scores = _scores(key, rows, xp)
    changed: dict[EntryId, list[str | None]] = {}
    for (base, eid, value), score in zip(owners, scores):
        if eid is not None and abs(score - scores[base]) > 1e-9:
            changed.setdefault(eid, []).append(value)
    return changed


def _box(cells: CellMap, variant: str, page_number: int, part: str, index: tuple[int, ...]) -> list[float]:
    """Where the entry's cells lie on their page, as shares of its width and height."""
    page = cells.page(variant, page_number)
    for entry in page.entries if page is not None else ():
        if entry.part == part and entry.index == index:
            x, y, w, h = entry_box(entry)
            width, height = page.size
            return [round(x / width, 5), round(y / height, 5), round(w / width, 5), round(h / height, 5)]
    return []


def _review(readings: Sequence[Mapping[str, Any]], changes: Mapping[EntryId, list[str | None]],
            views: Mapping[tuple[str, int], str], cells: CellMap) -> list[ReviewItem]:
    items: list[ReviewItem] = []
    for reading in readings:
        for entry in reading["entries"]:
            eid = (reading["student"], entry["part"], tuple(entry["index"]))
            alternatives = changes.get(eid, [])
            if not entry["doubts"] and not alternatives:
                continue
            reasons = list(entry["doubts"]) + ([CHANGES_SCORE] if alternatives else [])
            doubted = {k for k, c in enumerate(entry["cells"]) if c.get("doubt")}
            doubted |= {a["cell"] for a in entry.get("alternatives", []) if a["value"] in alternatives}
            number = len(items) + 1
            items.append(ReviewItem(number, reading["student"], reading["variant"], entry["part"], eid[2],
                                    entry["value"], reasons, alternatives, max(1, len(doubted)), entry["page"],
                                    entry["source"], f"{REVIEW}/cells/{number}.png",
                                    views.get((reading["variant"], entry["page"]), ""),
                                    _box(cells, reading["variant"], entry["page"], entry["part"], eid[2])))
    return items


# --------------------------------------------------------------------------- the whole


def _page_json(report: PageReport) -> dict[str, Any]:
    return {"source": report.source, "status": report.status, "reason": report.reason, "student": report.student,
            "variant": report.variant, "page": report.page, "turned": report.turned}


def scan_and_grade(key: str | Path, scans: Iterable[str | Path], out: str | Path, *,
                   cellmap: str | Path | None = None, feedback: bool = True, lang: str | None = None, xp: Any = np,
                   progress: Callable[[PageReport], None] | None = None,
                   notes: Callable[[str], None] | None = None) -> ScanGrading:
    """Read the scans, grade them and write the scan folder ``out`` (see the module's description).

    ``cellmap`` defaults to ``cellmap.json`` beside the key; ``progress`` is called once per page
    read; ``lang``, ``xp`` and ``notes`` as :func:`qkvquiz.grade.grader.grade` takes them. Raises :class:`ScanInputError` for a key or cell map that cannot be used, and
    :class:`qkvquiz.core.outputs.OutputError` when ``out`` cannot be written.
    """
    key_path, out = Path(key), Path(out)
    loaded, cells = load_inputs(key_path, cellmap)
    _not_anothers(out)
    with entered(lang, loaded.lang), claim(out):  # the folder is this run's before the long reading starts
        xp = placed(xp, lambda: grading_seconds(loaded, len(loaded.students)), notes)
        result = read_scans(cells, [Path(p) for p in scans], views=True, progress=progress)
        decisions, notes = read_decisions(out)
        grading = _grade_readings(loaded, key_path, cells, result, out, decisions, notes, xp=xp)
        _write_scan(grading, result, feedback=feedback)
    return grading


def _not_anothers(out: Path) -> None:
    """Refuse a folder whose entries of our names are not a scan's: ``--out week3`` would
    otherwise replace the students' ``submissions/`` and ``grade``'s ``grades/`` there."""
    if os.path.lexists(out / STATE):
        return
    theirs = owned_present(out, OWNED)
    if theirs:
        raise ScanInputError(f"{shown_path(out)} holds {', '.join(theirs)} but no {STATE}: it is not a folder "
                             "`qkvquiz scan` wrote, and scanning into it would replace them; choose another --out")


def _grade_readings(key: Key, key_path: Path, cells: CellMap, result: ScanResult, out: Path,
                    decisions: Mapping[EntryId, Decision], notes: list[str], *, xp: Any) -> ScanGrading:
    taken: set[str] = set()
    names = {s: safe_name(s, taken) for s in key.students}  # the names generate gave their folders
    as_read = _as_graded(out, names, result.submissions)
    changes = score_changes(key, result.confidences, as_read, xp=xp)
    views = {(r.variant, r.page): f"{REVIEW}/pages/{r.variant}-p{r.page}.jpg"
             for r in result.pages if r.status == "read" and r.view is not None}
    review = _review(result.confidences, changes, views, cells)
    state = {
        "format": STATE_FORMAT, "version": STATE_VERSION, "title": key.title, "set": cells.set_id,
        "key": os.path.abspath(key_path), "key_sha256": _key_hash(key_path), "cellmap": cells.source,
        "pages": [_page_json(r) for r in result.pages], "missing_pages": result.missing_pages,
        "absent": result.absent,
        "students": [{"student": s["student"], "variant": s["variant"],
                      "readings": _file_name(names, s["student"], READINGS),
                      "submission": _file_name(names, s["student"], SUBMISSIONS)} for s in result.submissions],
        "review": [item.to_json() for item in review],
    }
    return _graded(key, out, state, result.confidences, result.submissions, review, decisions, notes, names, xp=xp)


def _graded(key: Key, out: Path, state: dict[str, Any], readings: list[dict[str, Any]],
            submissions: list[dict[str, Any]], review: list[ReviewItem], decisions: Mapping[EntryId, Decision],
            notes: list[str], names: Mapping[str, str], *, xp: Any) -> ScanGrading:
    confirmed, used, set_aside = _apply(readings, submissions, decisions)
    report = grade(key, _as_graded(out, names, confirmed), xp=xp)
    return ScanGrading(key, out, state, readings, confirmed, report, review, used, notes + set_aside)


def _write_scan(grading: ScanGrading, result: ScanResult, *, feedback: bool) -> None:
    pictures = {(r.variant, r.page): r for r in result.pages if r.status == "read"}
    with write_set(grading.out, OWNED, anchor=STATE) as files:
        _write_graded(files, grading, feedback=feedback)
        for reading in grading.readings:
            files.write(_name_of(grading, reading["student"], "readings"), json.dumps(reading, ensure_ascii=False) + "\n")
        written: set[str] = set()
        for item in grading.review:
            report = pictures[(item.variant, item.page)]
            position = _position(report, item)
            files.write(item.picture, report.pictures[position])
            if item.view and item.view not in written:
                files.write(item.view, report.view)
                written.add(item.view)
        files.write(STATE, json.dumps(grading.state, ensure_ascii=False, indent=1) + "\n")


def _position(report: PageReport, item: ReviewItem) -> int:
    for k, entry in enumerate(report.entries):
        if entry.part == item.part and tuple(entry.index) == item.index:
            return k
    raise KeyError(item.entry)  # cannot happen: the item was made from this page's entries


def _name_of(grading: ScanGrading, student: str, what: str) -> str:
    """The file of ``student`` in the set: ``what`` is "readings" or "submission"."""
    for s in grading.state["students"]:
        if s["student"] == student:
            return s[what]
    raise KeyError(student)


def _write_graded(files: Any, grading: ScanGrading, *, feedback: bool) -> None:
    """The submissions as graded, the grades (grade's own set, staged inside this one) and the summary."""
    for doc in grading.submissions:
        files.write(_name_of(grading, doc["student"], "submission"), submission_text(doc))
    write_reports(grading.report, files.path(GRADES), feedback=feedback)
    files.write(SUMMARY, summary_markdown(grading))


# --------------------------------------------------------------------------- after review


def _read_json(path: Path, limit: int, what: str) -> Any:
    try:
        return json.loads(read_bytes(path, limit, what).decode("utf-8"))
    except InputError as exc:
        raise ScanInputError(str(exc)) from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ScanInputError(f"{shown_path(path)}: not the JSON a scan writes ({exc})") from None


def load_scan(out: str | Path, key: str | Path | None = None) -> tuple[Key, dict[str, Any], list[dict[str, Any]], list[ReviewItem]]:
    """A scan folder written by :func:`scan_and_grade`: its key (as recorded, unless named, and
    unchanged since), its scan.json, its readings and its review items."""
    out = Path(out)
    state = _read_json(out / STATE, MAX_STATE_BYTES, "scan record")
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
        raise ScanInputError(f"{shown_path(out / STATE)}: not a scan record written by `qkvquiz scan`")
    try:
        str(state["title"]).strip()
        key_path = Path(key) if key is not None else Path(state["key"])
        recorded = str(state["key_sha256"])
        students = [(str(s["student"]), str(s["readings"]), str(s["submission"])) for s in state["students"]]
        review = [ReviewItem.from_json(doc) for doc in state["review"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ScanInputError(f"{shown_path(out / STATE)}: field {exc} is missing or wrong") from None
    for item in review:  # the pictures are served: only the scan's own files, by their own names
        if not _PICTURE.fullmatch(item.picture) or not (item.view == "" or _VIEW.fullmatch(item.view)):
            raise ScanInputError(f"{shown_path(out / STATE)}: review entry {item.id}: field \"picture\" or \"view\" "
                                 f"is not a picture of {REVIEW}/")
    if _key_hash(key_path) != recorded:
        raise ScanInputError(f"{shown_path(key_path)}: the key differs from the one the pages were scanned with; "
                             "scan them again with this key")
    try:
        loaded = load_key(key_path)
    except KeyFileError as exc:
        raise ScanInputError(str(exc)) from None
    shapes = {part.id: item.shapes[part.id] for item, part in loaded.parts}
    readings = []
    for student, path, submission in students:
        for name, value, folder in (("readings", path, READINGS), ("submission", submission, SUBMISSIONS)):
            if not _plain_file(value, folder):
                raise ScanInputError(f"{shown_path(out / STATE)}: student {student!r}: field \"{name}\" is not a "
                                     f"file name in {folder}/")
        reading = _read_json(out / path, MAX_READINGS_BYTES, "readings")
        problem = _reading_problem(reading, student, shapes)
        if problem:
            raise ScanInputError(f"{shown_path(out / path)}: {problem}")
        readings.append(reading)
    return loaded, state, readings, review


def _reading_problem(reading: Any, student: str, shapes: Mapping[str, tuple[int, ...]]) -> str:
    """Why a side file is not the readings of ``student`` for this key ("" when it is)."""
    if not isinstance(reading, dict) or reading.get("student") != student or not isinstance(reading.get("entries"), list) \
            or not all(isinstance(reading.get(name), str) for name in ("variant", "set")):
        return f"not the readings of {student!r}"
    for n, entry in enumerate(reading["entries"], start=1):
        shape = shapes.get(entry.get("part")) if isinstance(entry, dict) else None
        index = entry.get("index") if isinstance(entry, dict) else None
        if shape is None or not isinstance(index, list) or len(index) != len(shape) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < size for i, size in zip(index, shape)):
            return f"entry {n}: field \"part\" or \"index\" is no entry of the key"
        value = entry.get("value")
        if not (value is None or (isinstance(value, str) and len(value) <= MAX_VALUE)) or not isinstance(entry.get("cells"), list):
            return f"entry {n}: field \"value\" or \"cells\" is not what the reader writes"
    return ""


def _plain_file(path: str, folder: str) -> bool:
    head, _slash, name = path.partition("/")
    return head == folder and name.endswith(".json") and name not in ("", ".json") and "/" not in name \
        and "\\" not in name and not name.startswith(".")


def _submission_of(reading: Mapping[str, Any], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Any]:
    """The submission as read, rebuilt from the side file (the reader's own values)."""
    answers: dict[str, Any] = {}
    for part, shape in shapes.items():
        answer: Any = None
        for size in reversed(shape):
            answer = [copy.deepcopy(answer) for _row in range(size)]
        answers[part] = answer
    for entry in reading["entries"]:
        _set_entry(answers, entry["part"], entry["index"], entry["value"])
    return {"student": reading["student"], "variant": reading["variant"], "set": reading["set"], "answers": answers}


def regrade(out: str | Path, *, key: str | Path | None = None, feedback: bool = True, lang: str | None = None,
            xp: Any = np) -> ScanGrading:
    """Grade a scan folder again on its confirmed readings: every decision of its journal made,
    ``submissions/``, ``grades/`` and ``summary.md`` replaced as one set (the readings and
    pictures stay as the scan wrote them)."""
    out = Path(out)
    with claim(out):
        loaded, state, readings, review = load_scan(out, key)
        with entered(lang, loaded.lang):
            xp = placed(xp, lambda: grading_seconds(loaded, len(readings)))
            shapes = {part.id: item.shapes[part.id] for item, part in loaded.parts}
            as_read = [_submission_of(r, shapes) for r in readings]
            names = {s["student"]: Path(s["submission"]).stem for s in state["students"]}
            decisions, notes = read_decisions(out)
            grading = _graded(loaded, out, state, readings, as_read, review, decisions, notes, names, xp=xp)
            with write_set(out, REGRADED, anchor=GRADES) as files:
                _write_graded(files, grading, feedback=feedback)
    return grading


# --------------------------------------------------------------------------- the summary


#: The status of a page not placed, as the summary names it (scan.json keeps the reader's words).
STATUS_WORDS = {"other set": N_("another set's"), "unknown variant": N_("unknown variant"), "no code": N_("no code"),
                "unaligned": N_("unaligned"), "unreadable": N_("unreadable")}


def summary_markdown(grading: ScanGrading) -> str:
    """summary.md: what became of every page, what is missing, what went to review, the grades; in
    the language entered (the set's, or ``--lang``), as grade's item analysis is."""
    s = grading.summary()
    lines = [_("# Scan: %(title)s") % {"title": grading.state["title"]}, "",
             _("- pages: %(pages)d found, %(read)d read") % s,
             _("- entries: %(entries)d read (%(cells)d cells); sent to review: %(review_entries)d entries "
               "(%(review_cells)d cells), %(changes)d of them because another likely reading changes the score; "
               "decided: %(decided)d, open: %(open)d")
             % {"entries": s["entries"], "cells": s["cells"], "review_entries": s["review entries"],
                "review_cells": s["review cells"], "changes": s["changes score"], "decided": s["decided"],
                "open": s["open"]}]
    if s["twice"]:
        lines += ["", _("## Pages scanned twice"), ""] + [f"- {_md(p['source'])}: {_md(p['reason'])}" for p in s["twice"]]
    if s["not placed"]:
        lines += ["", _("## Pages not placed"), "", "| %s | %s |" % (_("source"), _("why")), "|---|---|"]
        lines += [f"| {_md(p['source'])} | {_(STATUS_WORDS.get(p['status'], p['status']))}: {_md(p['reason'])} |"
                  for p in s["not placed"]]
    if s["missing pages"]:
        lines += ["", _("## Missing pages"), ""] + [
            "- " + _("`%(student)s`: page %(pages)s") % {"student": _md(student), "pages": ", ".join(str(n) for n in pages)}
            for student, pages in s["missing pages"].items()]
    if s["no pages"]:
        lines += ["", _("## Students with no pages"), "", ", ".join(f"`{_md(x)}`" for x in s["no pages"])]
    if grading.notes:
        lines += ["", _("## Notes"), ""] + [f"- {_md(n)}" for n in grading.notes]
    report = grading.report
    scores = [r.score for r in report.results]
    graded = _("%(graded)d graded of %(students)d (as `%(command)s` grades them): `%(results)s`") % {
        "graded": len(scores), "students": len(report.key.students),
        "command": f"qkvquiz grade KEY {SUBMISSIONS} --out {GRADES}", "results": f"{GRADES}/results.csv"}
    if scores:
        graded += _("; mean %(mean)s of %(points)s") % {"mean": f"{np.mean(scores):.2f}", "points": f"{report.key.points:g}"}
    lines += ["", _("## Grades"), "", graded]
    return "\n".join(lines) + "\n"


def _md(text: Any) -> str:
    return terminal_text(str(text)).replace("|", "\\|").replace("`", "'").replace("<", "&lt;")


__all__ = ["CHANGES_SCORE", "OWNED", "ReviewItem", "ScanGrading", "ScanInputError", "check_cellmap", "load_inputs",
           "load_scan", "regrade", "scan_and_grade", "score_changes", "summary_markdown"]
