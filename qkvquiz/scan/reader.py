"""Scanned pages in, submissions out: the library face of the scanner.

:func:`read_pages` takes the cell map and page images (in any order, turned any way) and gives
each student's submission exactly as the answer form writes it (``{"student", "variant",
"set", "answers"}``, every entry the text read or ``null``), the confidence of every reading
beside it, and a report of every page: read, from another set (named), without a code,
unaligned, scanned twice; and which pages and students are missing.

Beside each entry's reading stand its *alternatives*: the values it would spell were one of its
digit cells its next likeliest reading, for every cell the model is less than
:data:`ALTERNATIVE_BELOW` sure of. The reading never changes by them; grading uses them to send
to review the entries where another likely reading would change the student's score. With
``views``, the picture of every entry that has a doubt or an alternative, and of its page, is
kept for the person who reviews it.

A page scanned twice keeps its first reading; an entry the second scan reads otherwise is in
doubt (:data:`OTHER_SCAN`: one of the two is wrong), its picture taken from the second scan where
the first has none.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.i18n import _
from .align import PX_PER_PT, AlignError, fit_page, page_frame
from .cellmap import CellMap, Entry, Student
from .cells import CellReading, EntryReading, page_levels, read_entry, spell
from .crops import entry_png, page_jpeg
from .ink import darkness
from .pages import PageImage, PageProblem, load_pages
from .qr import FoundCode, find_codes


@dataclass
class PageReport:
    source: str
    status: str  # "read", "duplicate", "other set", "unknown variant", "no code", "unaligned", "unreadable"
    reason: str = ""
    variant: str | None = None
    student: str | None = None
    page: int | None = None
    entries: list[EntryReading] = field(default_factory=list)
    turned: int = 0  # degrees the page was turned on the scanner (0, 90, 180, 270)
    mark_error_pt: float | None = None
    alternatives: list[list[dict[str, Any]]] = field(default_factory=list)  # per entry (see ALTERNATIVE_BELOW)
    pictures: dict[int, bytes] = field(default_factory=dict)  # entry's position on the page → its PNG (views)
    view: bytes | None = None  # the whole page, upright, as a JPEG (views; pages with a picture only)


@dataclass
class ScanResult:
    submissions: list[dict[str, Any]]  # one per student with at least one page read, in the map's order
    confidences: list[dict[str, Any]]  # the same students: every entry's reading, confidence and doubts
    pages: list[PageReport]
    missing_pages: dict[str, list[int]]  # student → pages not found (for students with some pages)
    absent: list[str]  # students of whom no page was found


#: The doubt of an entry that another scan of its page reads otherwise (the review's word for it is
#: in qkvquiz.review.page).
OTHER_SCAN = "read otherwise on another scan of the page"

#: A digit cell read with less confidence than this gets an alternative: its next likeliest reading.
#: (1 − confidence bounds the chance of every other reading together.) A far weaker doubt than the
#: reader's own (the SURE of digits.shipped_rule): grading sends such an entry to review only
#: where the other reading is likely enough (grade.scanned.LIKELY) and would change the score.
ALTERNATIVE_BELOW = 0.999


def alternatives(entry: Entry, reading: EntryReading) -> list[dict[str, Any]]:
    """The values the entry would spell with one digit cell read as its next likeliest reading,
    for each cell read with less than :data:`ALTERNATIVE_BELOW` confidence: ``{"value", "cell",
    "chance"}`` (the cell's place among the entry's cells, the sign cell being 0, and 1 − its
    confidence). Empty for an entry settled by a tick box (−∞ or "left blank"): its digits do not
    count."""
    cells = reading.cells
    sign, digits = cells[0], [c for c in cells if c.kind == "digit"]
    if any(c.kind in ("minus_infinity", "left_blank") and c.reading == "ticked" for c in cells):
        return []
    found, seen = [], {reading.value}
    readings = [d.reading for d in digits]
    for k, cell in enumerate(digits):
        if cell.confidence >= ALTERNATIVE_BELOW or not cell.second or cell.second == cell.reading:
            continue
        value = spell(sign.reading, readings[:k] + [cell.second] + readings[k + 1:], entry.integer_digits)
        if value not in seen:
            seen.add(value)
            found.append({"value": value, "cell": k + 1, "chance": round(1.0 - cell.confidence, 4)})
    return found


def _turn(corners: np.ndarray) -> int:
    """How far the page was turned (clockwise, in degrees) from the QR code's top edge."""
    dx, dy = corners[1] - corners[0]
    return int(round(np.degrees(np.arctan2(dy, dx)) / 90.0)) % 4 * 90


def _find_code(image: np.ndarray) -> list[FoundCode]:
    found = find_codes(image)
    if not found and max(image.shape) > 2400:
        # Decoders miss codes in large scans; a half-size copy often reads (Plom does the same).
        half = image[: image.shape[0] // 2 * 2, : image.shape[1] // 2 * 2]
        half = half.reshape(half.shape[0] // 2, 2, half.shape[1] // 2, 2).mean(axis=(1, 3)).astype(np.uint8)
        found = [FoundCode(f.code, f.corners * 2) for f in find_codes(half)]
    return found


def read_page(cellmap: CellMap, page_image: PageImage, *, views: bool = False,
              earlier: Mapping[tuple[str, int], PageReport] | None = None) -> PageReport:
    """One page: its code, its fit, every entry on it (with ``views``, the pictures a review needs,
    and where ``earlier`` holds this page already read, those of the entries read otherwise there)."""
    source = page_image.source
    codes = _find_code(page_image.image)
    if not codes:
        return PageReport(source, "no code", _("no qkvquiz page code (QR) found on the page"))
    others = [f for f in codes if f.code.set_id != cellmap.set_id]
    ours = [f for f in codes if f.code.set_id == cellmap.set_id]
    if not ours:
        code = others[0].code
        return PageReport(source, "other set",
                          _("the page belongs to set %(set)s (variant %(variant)s, page %(page)s), not to set "
                            "%(ours)s of this cell map") % {"set": code.set_id, "variant": code.variant,
                                                            "page": code.page, "ours": cellmap.set_id},
                          code.variant, None, code.page)
    found = ours[0]
    code = found.code
    student = cellmap.student(code.variant)
    page = cellmap.page(code.variant, code.page)
    if student is None or page is None:
        return PageReport(source, "unknown variant",
                          _("set %(set)s has no page %(page)s of variant %(variant)s in the cell map")
                          % {"set": code.set_id, "page": code.page, "variant": code.variant},
                          code.variant, None, code.page)
    report = PageReport(source, "read", "", code.variant, student.student, code.page, turned=_turn(found.corners))
    try:
        fit = fit_page(page_image.image, page, found.corners)
    except AlignError as exc:
        report.status, report.reason = "unaligned", str(exc)
        return report
    report.mark_error_pt = fit.error_pt
    frame = page_frame(page_image.image, page, fit)
    marks_px = np.array(page.marks) * PX_PER_PT
    white, black = page_levels(frame, marks_px, page.mark_diameter * PX_PER_PT / 2)
    dark = darkness(frame, white, black)
    report.entries = [read_entry(dark, entry) for entry in page.entries]
    report.alternatives = [alternatives(entry, reading) for entry, reading in zip(page.entries, report.entries)]
    if views:
        before = (earlier or {}).get((code.variant, code.page))
        for k, (entry, reading) in enumerate(zip(page.entries, report.entries)):
            otherwise = before is not None and k < len(before.entries) and before.entries[k].value != reading.value
            if reading.doubts or report.alternatives[k] or otherwise:
                report.pictures[k] = entry_png(frame, entry)
        if report.pictures:
            report.view = page_jpeg(frame)
    return report


def _empty_answer(shape: tuple[int, ...]) -> Any:
    answer: Any = None
    for size in reversed(shape):
        answer = [copy.deepcopy(answer) for _row in range(size)]
    return answer


def _cell_json(cell: CellReading) -> dict:
    """A cell as the side file gives it: only the fields that apply to it."""
    out = {"kind": cell.kind, "reading": cell.reading, "confidence": round(cell.confidence, 4)}
    if cell.second:
        out["second"] = cell.second
    if cell.second_confidence is not None:
        out["second_confidence"] = round(cell.second_confidence, 4)
    if cell.doubt:
        out["doubt"] = cell.doubt
    return out


def _submission(cellmap: CellMap, student: Student, reports: list[PageReport]) -> tuple[dict, dict]:
    answers = {part: _empty_answer(shape) for part, shape in student.parts.items()}
    entries = []
    for report in sorted(reports, key=lambda r: r.page or 0):
        for e, others in zip(report.entries, report.alternatives or [[]] * len(report.entries)):
            if e.index:
                row = answers[e.part]
                for i in e.index[:-1]:
                    row = row[i]
                row[e.index[-1]] = e.value
            else:
                answers[e.part] = e.value
            entries.append({
                "part": e.part, "index": list(e.index), "value": e.value, "confidence": round(e.confidence, 4),
                "doubts": e.doubts, "alternatives": others, "page": report.page, "source": report.source,
                "cells": [_cell_json(c) for c in e.cells],
            })
    head = {"student": student.student, "variant": student.variant, "set": cellmap.set_id}
    confidences = {**head, "pages": sorted(r.page for r in reports if r.page),
                   "review": sum(1 for e in entries if e["doubts"]), "entries": entries}
    return {**head, "answers": answers}, confidences


def read_pages(cellmap: CellMap, images: Iterable[PageImage | PageProblem], *, views: bool = False,
               progress: Callable[[PageReport], None] | None = None) -> ScanResult:
    """Read every page and gather the students' submissions (see the module's description);
    ``progress`` is called with each page's report as it is read."""
    reports: list[PageReport] = []
    kept: dict[tuple[str, int], PageReport] = {}
    for item in images:
        if isinstance(item, PageProblem):
            reports.append(PageReport(item.source, "unreadable", item.reason))
            if progress is not None:
                progress(reports[-1])
            continue
        try:
            report = read_page(cellmap, item, views=views, earlier=kept)
        except Exception as exc:  # noqa: BLE001 - one page that breaks the reader never stops the others
            report = PageReport(item.source, "unreadable", _("the page could not be read (%(error)s)")
                                % {"error": f"{type(exc).__name__}: {exc}"})
        if report.status == "read":
            key = (report.variant, report.page)
            first = kept.get(key)
            if first is not None:
                same = [e.value for e in first.entries] == [e.value for e in report.entries]
                _doubt_what_differs(first, report)
                report.status = "duplicate"
                words = {"page": report.page, "student": report.student, "first": first.source}
                report.reason = (_("page %(page)s of %(student)s was scanned twice (first: %(first)s); the readings "
                                   "agree, the first is kept") if same else
                                 _("page %(page)s of %(student)s was scanned twice (first: %(first)s); the readings "
                                   "differ: the first is kept, the entries read otherwise go to review")) % words
            else:
                kept[key] = report
        reports.append(report)
        if progress is not None:
            progress(report)
    submissions, confidences, missing, absent = [], [], {}, []
    for student in cellmap.students:
        own = [r for (variant, _page), r in kept.items() if variant == student.variant]
        if not own:
            absent.append(student.student)
            continue
        seen = {r.page for r in own}
        lacking = [n for n in range(1, student.pages + 1) if n not in seen]
        if lacking:
            missing[student.student] = lacking
        submission, confidence = _submission(cellmap, student, own)
        submissions.append(submission)
        confidences.append(confidence)
    return ScanResult(submissions, confidences, reports, missing, absent)


def _doubt_what_differs(first: PageReport, again: PageReport) -> None:
    """The entries of ``first`` that ``again`` (the same page scanned again) reads otherwise are in
    doubt; a picture the first has not is taken from the second scan (the same cells of the same paper)."""
    for k, (kept, other) in enumerate(zip(first.entries, again.entries)):
        if kept.value == other.value:
            continue
        if OTHER_SCAN not in kept.doubts:
            kept.doubts.append(OTHER_SCAN)
        if k not in first.pictures and k in again.pictures:
            first.pictures[k] = again.pictures[k]
    if first.view is None and first.pictures:
        first.view = again.view


def read_scans(cellmap: CellMap, paths: Iterable[str], *, views: bool = False,
               progress: Callable[[PageReport], None] | None = None) -> ScanResult:
    """:func:`read_pages` over every page of scan files (PDF, PNG, JPEG, TIFF)."""
    return read_pages(cellmap, load_pages(paths), views=views, progress=progress)


__all__ = ["ALTERNATIVE_BELOW", "PageReport", "ScanResult", "alternatives", "read_page", "read_pages", "read_scans"]
