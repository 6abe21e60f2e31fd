"""The cell map: where every cell of every printed page lies, written beside the key.

A scanned page is mapped back to its student and its answers without guessing: the page's QR
code names the set, the variant and the page number (:mod:`qkvquiz.scan.qr`), and this file says
where on that page the registration marks, the QR code and each answer entry's cells are.
Like the key it is instructor-only: it holds every student's id and variant code.

Coordinates are PDF points (1/72 inch) from the page's top-left corner, y growing downward; a box
is ``[x, y, width, height]``. The file is read as hostile input: every refusal is a
:class:`CellMapError` naming the file, the page or student, and the field.

Format (``docs/formats.md`` describes it for people; ``qkvquiz/schemas/cellmap.schema.json``)::

    {"format": "qkvquiz-cellmap", "version": 1, "set": "3f9c0a12be47", "unit": "pt",
     "students": [{"student": "ada", "variant": "K7QF-2M3X", "pages": 2,
                   "parts": {"q1.scores": [2, 3], "q2.norm": []}}],
     "pages": [{"variant": "K7QF-2M3X", "page": 1, "size": [595.28, 841.89],
                "marks": {"diameter": 14.0, "centres": [[x, y], [x, y], [x, y], [x, y]]},
                "qr": [x, y, w, h],
                "entries": [{"part": "q1.scores", "index": [0, 1],
                             "integer_digits": 2, "decimals": 2,
                             "sign": [x, y, w, h], "digits": [[x, y, w, h], ...],
                             "minus_infinity": [x, y, w, h] or null,
                             "left_blank": [x, y, w, h]}]}]}
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.inputs import InputError, decode_text, json_nesting, read_bytes, shown_path, strict_json
from ..core.outputs import write_file
from ..core.untrusted import id_problem

FORMAT = "qkvquiz-cellmap"
VERSION = 1

# Limits, each far above an honest map (a page holds a few dozen entries of a few cells each).
MAX_CELLMAP_BYTES = 1_000_000_000  # as large as a key may be
MAX_NESTING = 8
MAX_PAGES_PER_STUDENT = 200
MAX_ENTRIES_PER_PAGE = 2_000
MAX_DIGITS = 24  # cells in one comb
MAX_PAGE_PT = 14_400.0  # 200 inches: PDF's own largest page
MAX_TEXT = 200
MAX_RANK = 4  # an answer is at most a block of matrices (places.py names four levels)
MAX_SIZE = 10_000  # one size of an answer's shape

#: The order of the four registration marks in ``marks.centres``.
CORNERS = ("NW", "NE", "SW", "SE")

# What a set code, a variant code and a part id look like (core/seeding.py, spec ids).
_SET = re.compile(r"[0-9a-f]{12}")
_VARIANT = re.compile(r"[0-9A-Z]{4}-[0-9A-Z]{4}")
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")

Box = tuple[float, float, float, float]


class CellMapError(InputError):
    """A cell map that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Entry:
    """One answer entry's cells: a sign cell, a comb of digit cells with a printed decimal point
    after ``integer_digits`` of them, a −∞ tick box where the part's mask allows −∞, and a
    "left blank" tick box."""

    part: str
    index: tuple[int, ...]
    integer_digits: int
    decimals: int
    sign: Box
    digits: tuple[Box, ...]
    minus_infinity: Box | None
    left_blank: Box


@dataclass(frozen=True)
class Page:
    variant: str
    page: int  # counting from 1
    size: tuple[float, float]
    mark_diameter: float
    marks: tuple[tuple[float, float], ...]  # centres, in CORNERS order
    qr: Box
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Student:
    student: str
    variant: str
    pages: int
    parts: Mapping[str, tuple[int, ...]]  # part id → the answer's shape (() for one number)


@dataclass(frozen=True)
class CellMap:
    set_id: str
    students: tuple[Student, ...]
    pages: tuple[Page, ...]
    source: str = "cell map"
    _by_variant: dict[str, Student] = field(default_factory=dict, compare=False, repr=False)
    _pages: dict[tuple[str, int], Page] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_variant.update((s.variant, s) for s in self.students)
        self._pages.update(((p.variant, p.page), p) for p in self.pages)

    def student(self, variant: str) -> Student | None:
        return self._by_variant.get(variant)

    def page(self, variant: str, number: int) -> Page | None:
        return self._pages.get((variant, number))


# --- writing -------------------------------------------------------------------------------


def _box(box: Sequence[float]) -> list[float]:
    return [round(float(v), 3) for v in box]


def cellmap_document(cellmap: CellMap) -> dict[str, Any]:
    """The JSON document of a cell map (what :func:`write_cellmap` writes)."""
    return {
        "format": FORMAT, "version": VERSION, "set": cellmap.set_id, "unit": "pt",
        "students": [{"student": s.student, "variant": s.variant, "pages": s.pages,
                      "parts": {pid: list(shape) for pid, shape in s.parts.items()}} for s in cellmap.students],
        "pages": [{
            "variant": p.variant, "page": p.page, "size": _box(p.size),
            "marks": {"diameter": round(p.mark_diameter, 3), "centres": [_box(c) for c in p.marks]},
            "qr": _box(p.qr),
            "entries": [{
                "part": e.part, "index": list(e.index), "integer_digits": e.integer_digits, "decimals": e.decimals,
                "sign": _box(e.sign), "digits": [_box(d) for d in e.digits],
                "minus_infinity": None if e.minus_infinity is None else _box(e.minus_infinity),
                "left_blank": _box(e.left_blank),
            } for e in p.entries],
        } for p in cellmap.pages],
    }


def cellmap_json(cellmap: CellMap) -> str:
    """The file's text: one page per line, so that a diff of two maps reads page by page."""
    doc = cellmap_document(cellmap)
    pages = doc.pop("pages")
    head = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))[:-1]
    lines = ",\n".join(json.dumps(p, ensure_ascii=False, separators=(",", ":")) for p in pages)
    return f'{head},"pages":[\n{lines}\n]}}\n'


def write_cellmap(cellmap: CellMap, path: str | Path) -> None:
    """Write the map as one private file, atomically. (``generate`` puts :func:`cellmap_json` in its
    output set beside the key instead, made by :func:`qkvquiz.render.printed.printed_cellmap`.)"""
    write_file(path, cellmap_json(cellmap), private=True)


# --- reading -------------------------------------------------------------------------------


def read_cellmap(path: str | Path) -> CellMap:
    """Read and check a cell map file; :class:`CellMapError` names the file and the field."""
    source = shown_path(path)
    try:
        raw = read_bytes(path, MAX_CELLMAP_BYTES, "cell map")
    except InputError as exc:
        raise CellMapError(exc.source, exc.message, exc.line) from None
    return cellmap_from_bytes(raw, source)


def cellmap_from_bytes(raw: bytes, source: str) -> CellMap:
    try:
        text = decode_text(raw, source, "cell map")
    except InputError as exc:
        raise CellMapError(exc.source, exc.message, exc.line) from None
    if json_nesting(text) > MAX_NESTING:
        raise CellMapError(source, f"lists and objects are nested more than {MAX_NESTING} deep; a cell map is not")
    try:
        doc = strict_json(text)
    except json.JSONDecodeError as exc:
        raise CellMapError(source, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except ValueError as exc:
        raise CellMapError(source, str(exc)) from None
    return cellmap_from_document(doc, source)


class _Fields:
    """Typed look-ups in one object of the document; each refusal names where it is."""

    def __init__(self, source: str, where: str, obj: Any) -> None:
        self.source, self.where = source, where
        if not isinstance(obj, Mapping):
            self.fail("", "is not an object")
        self.obj = obj

    def fail(self, name: str, why: str) -> None:
        place = ", ".join(p for p in (self.where, f'field "{name}"' if name else "") if p)
        joint = " " if why.startswith(("is ", "does ")) else ": "
        raise CellMapError(self.source, f"{place}{joint}{why}" if place else why)

    def get(self, name: str) -> Any:
        if name not in self.obj:
            self.fail(name, "is missing")
        return self.obj[name]

    def text(self, name: str, pattern: re.Pattern[str] | None = None) -> str:
        value = self.get(name)
        if not isinstance(value, str) or not value or len(value) > MAX_TEXT:
            self.fail(name, f"is not a text of 1 to {MAX_TEXT} characters")
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(name, f"{json.dumps(value[:40])} does not have the form {pattern.pattern}")
        return value

    def integer(self, name: str, low: int, high: int) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(name, f"is not a whole number from {low} to {high}")
        return value

    def number(self, name: str, value: Any, low: float, high: float) -> float:
        # A range check alone refuses NaN and ±∞ too, and never converts a huge integer to a float.
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
            self.fail(name, f"holds {json.dumps(value)[:40]}, not a number from {low:g} to {high:g}")
        return float(value)

    def pair(self, name: str, value: Any, high: Sequence[float]) -> tuple[float, float]:
        if not isinstance(value, list) or len(value) != 2:
            self.fail(name, "is not a list of two numbers")
        return (self.number(name, value[0], 0.0, high[0]), self.number(name, value[1], 0.0, high[1]))

    def box(self, name: str, value: Any, page: tuple[float, float]) -> Box:
        """A box that lies on the page and has an area."""
        if not isinstance(value, list) or len(value) != 4:
            self.fail(name, "is not a box [x, y, width, height]")
        x, y, w, h = (self.number(name, v, 0.0, MAX_PAGE_PT) for v in value)
        if w <= 0 or h <= 0 or x + w > page[0] + 1e-6 or y + h > page[1] + 1e-6:
            self.fail(name, f"the box {value} has no area or does not lie on the {page[0]:g}×{page[1]:g} page")
        return (x, y, w, h)


def cellmap_from_document(doc: Any, source: str) -> CellMap:
    """A cell map from a document already read; :class:`CellMapError` says what is wrong."""
    top = _Fields(source, "", doc)
    if top.get("format") != FORMAT:
        top.fail("format", f'is not "{FORMAT}": this is not a cell map')
    if top.get("version") != VERSION:
        top.fail("version", f"is {json.dumps(top.get('version'))[:20]}; this qkvquiz reads version {VERSION}")
    if top.get("unit") != "pt":
        top.fail("unit", 'is not "pt" (points, 1/72 inch)')
    set_id = top.text("set", _SET)
    students = _students(source, top.get("students"))
    known = {s.variant: s for s in students}
    pages = _pages(source, top.get("pages"), known)
    return CellMap(set_id, students, pages, source)


def _students(source: str, value: Any) -> tuple[Student, ...]:
    if not isinstance(value, list):
        _Fields(source, "", {}).fail("students", "is not a list")
    students, ids, variants = [], set(), set()
    for n, obj in enumerate(value, start=1):
        f = _Fields(source, f"student {n}", obj)
        sid, variant = f.text("student"), f.text("variant", _VARIANT)
        problem = id_problem(sid)
        if problem:
            f.fail("student", problem)
        if sid in ids:
            f.fail("student", f"{json.dumps(sid[:40])} appears twice")
        if variant in variants:
            f.fail("variant", f"{variant} appears twice")
        ids.add(sid)
        variants.add(variant)
        parts_obj = f.get("parts")
        if not isinstance(parts_obj, Mapping):
            f.fail("parts", "is not an object of part id: shape")
        parts = {}
        for pid, shape in parts_obj.items():
            if not _PART.fullmatch(pid):
                f.fail("parts", f"{json.dumps(pid[:40])} is not a part id")
            if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(
                    isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= MAX_SIZE for s in shape):
                f.fail("parts", f"the shape of {pid} is not a list of up to {MAX_RANK} sizes")
            parts[pid] = tuple(shape)
        students.append(Student(sid, variant, f.integer("pages", 1, MAX_PAGES_PER_STUDENT), parts))
    return tuple(students)


def _pages(source: str, value: Any, students: Mapping[str, Student]) -> tuple[Page, ...]:
    if not isinstance(value, list):
        _Fields(source, "", {}).fail("pages", "is not a list")
    pages, seen = [], set()
    for n, obj in enumerate(value, start=1):
        f = _Fields(source, f"page {n}", obj)
        variant = f.text("variant", _VARIANT)
        student = students.get(variant)
        if student is None:
            f.fail("variant", f"{variant} is no student's in the map's student list")
        number = f.integer("page", 1, student.pages)
        if (variant, number) in seen:
            f.fail("page", f"page {number} of {variant} appears twice")
        seen.add((variant, number))
        f.where = f"page {number} of {variant}"
        size = f.pair("size", f.get("size"), (MAX_PAGE_PT, MAX_PAGE_PT))
        if min(size) < 72:
            f.fail("size", "a page is at least an inch each way")
        marks = _Fields(source, f.where + ', field "marks"', f.get("marks"))
        diameter = marks.number("diameter", marks.get("diameter"), 1.0, 72.0)
        centres = marks.get("centres")
        if not isinstance(centres, list) or len(centres) != len(CORNERS):
            marks.fail("centres", "is not a list of four points (NW, NE, SW, SE)")
        points = tuple(marks.pair("centres", c, size) for c in centres)
        (nw, ne, sw, se) = points
        if not (nw[0] < ne[0] and sw[0] < se[0] and nw[1] < sw[1] and ne[1] < se[1]):
            marks.fail("centres", "the four marks are not in the order NW, NE, SW, SE")
        qr = f.box("qr", f.get("qr"), size)
        entries_obj = f.get("entries")
        if not isinstance(entries_obj, list) or len(entries_obj) > MAX_ENTRIES_PER_PAGE:
            f.fail("entries", f"is not a list of at most {MAX_ENTRIES_PER_PAGE} entries")
        entries = tuple(_entry(source, f"{f.where}, entry {k}", e, size, student)
                        for k, e in enumerate(entries_obj, start=1))
        pages.append(Page(variant, number, size, diameter, points, qr, entries))
    return tuple(pages)


def _entry(source: str, where: str, obj: Any, size: tuple[float, float], student: Student) -> Entry:
    f = _Fields(source, where, obj)
    part = f.text("part", _PART)
    shape = student.parts.get(part)
    if shape is None:
        f.fail("part", f"{part} is not among the parts of {student.variant}")
    index = f.get("index")
    if not isinstance(index, list) or len(index) != len(shape) or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < s for i, s in zip(index, shape)):
        f.fail("index", f"is not a place inside the part's shape {list(shape)}")
    integer_digits = f.integer("integer_digits", 0, MAX_DIGITS)
    decimals = f.integer("decimals", 0, MAX_DIGITS)
    digits = f.get("digits")
    if not isinstance(digits, list) or len(digits) != integer_digits + decimals or not digits:
        f.fail("digits", "does not hold integer_digits + decimals boxes (at least one)")
    minus = f.get("minus_infinity")
    return Entry(
        part, tuple(index), integer_digits, decimals, f.box("sign", f.get("sign"), size),
        tuple(f.box("digits", d, size) for d in digits),
        None if minus is None else f.box("minus_infinity", minus, size),
        f.box("left_blank", f.get("left_blank"), size),
    )
