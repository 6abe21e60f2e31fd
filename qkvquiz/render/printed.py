"""The printed worksheet made to be read back: answer cells, corner marks, a QR code per page,
and the cell map that says where they all lie.

Only the PDF worksheet carries them (:func:`qkvquiz.render.documents.worksheet_document` with
``combs``, from :func:`part_combs`); the HTML worksheet and the answer form are read on a screen and keep their
plain boxes. On the printed sheet each asked entry is a *comb* (:class:`Comb`): a sign cell, a
digit cell per place with the decimal point printed between them, and under them a tick box
for −∞ (where the part's mask gives −∞) and one for "left blank". A grid of entries is one
element whose background is the comb, tiled, as the plain boxes are (cheap to lay out); its
``id`` names the part, the grid's first entry and its size, so that where WeasyPrint puts it
(``Page.anchors``, its public API) gives every cell's place on the page.

Every page also carries four filled discs in its corners and a QR code in its bottom margin
(:mod:`qkvquiz.scan.qr`: set, variant, page): the discs and a frame for the code are fixed
elements (measured the same way); the code itself, different on each page, is the background
of the page's bottom-centre margin box (``@page :nth(n)``), drawn exactly inside that frame.

:func:`printed_cellmap` turns what the layout measured into the :mod:`qkvquiz.scan.cellmap`
that ``generate`` writes beside the key.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.seeding import variant_key
from ..core.tolerance import Tolerance
from ..scan.cellmap import CellMap, Entry, Page, Student
from ..scan.qr import PageCode, qr_modules
from ..spec_types import ItemSpec
from ..worksheet import Worksheet, solve_item
from .page import BOX_PX

PT_PER_PX = 0.75  # CSS px are 1/96 inch, points 1/72
MM = 72 / 25.4  # points per millimetre

# --- one entry's comb, in points from the top-left of its tile -----------------------------------
#: A digit cell: 5.1 mm × 7.1 mm. Cut 12 % inside its border (qkvquiz/scan/cells.py) it is 31 × 42
#: pixels at the reader's 200 dpi, within the cells the digit model learnt from.
CELL_W, CELL_H = 14.5, 20.0
# Around an entry: 6 pt between two entries of a row, nearly all of it on the left, so that the
# last entry's ink ends at the text's right edge as a plain box's does.
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 5.4, 0.6, 3.0, 3.0
SIGN_GAP = 2.0  # between the sign cell and the first digit
POINT_GAP = 4.5  # between the last whole digit and the first decimal, the printed point in it
TICK, TICK_GAP = 8.0, 2.5  # the tick boxes, under the cells
LABEL_INF_W, LABEL_BLANK_W = 11.0, 7.0  # the drawn "−∞" and "∅" beside their boxes
#: The widest a row of combs may be: what the text's width leaves a grid beside its label, under
#: its sentence (a wider part is cut into grids of fewer columns, "columns 6–8").
MAX_ROW_PT = 380.0
#: Whole digits a comb may have (a part whose values need more is printed with plain boxes).
MAX_INTEGER_DIGITS = 12
MAX_DECIMALS = 6

# --- the page's furniture -----------------------------------------------------------------------
#: The worksheet's page margins (templates/style.css), the bottom one widened on the printed sheet
#: so that the QR code sits below the text with a quiet zone around it.
MARGIN_TOP_MM, MARGIN_SIDE_MM, MARGIN_BOTTOM_MM = 14.0, 16.0, 22.0
#: Registration discs: 4.2 mm across, their centres 12 mm from the paper's edges (inside what any
#: printer prints, clear of the running head and the footer, beside the text's corners). At 9 mm a
#: page skewed 3° and scaled up 3 % by a copier that scans just the paper lost a corner's disc.
MARK_DIAMETER = 12.0
MARK_INSET_MM = 12.0
#: The footer's student line and page number move this far in from the text's edges on the
#: printed sheet, so that a bottom disc (its edge 1.9 mm outside the text) stands clear of them.
FOOTER_INSET_MM = 3.0
#: The QR code: 25 modules of 0.5 mm (3 pixels at 150 dpi), centred, 5 mm above the bottom edge.
QR_MM = 12.5
QR_BOTTOM_MM = 5.0
#: The QR codes a document's stylesheet holds unless told how many pages it will have: a worksheet
#: with more pages is laid out again with one for every page (margin boxes change no page's
#: content, so it pages alike).
PAGE_CODES_AHEAD = 8

ANCHOR = "qkvq-"  # every id this module writes starts so
_MARKS = ("nw", "ne", "sw", "se")  # the order of qkvquiz.scan.cellmap.CORNERS
_QR_ID = ANCHOR + "qr"
_GRID_ID = ANCHOR + "cells~"


@dataclass(frozen=True)
class Comb:
    """One entry's cells: ``integer_digits`` whole digits, ``decimals`` after the printed point,
    and a −∞ tick box where ``minus_infinity``."""

    integer_digits: int
    decimals: int
    minus_infinity: bool

    @property
    def digits(self) -> int:
        return self.integer_digits + self.decimals

    @property
    def width_pt(self) -> float:
        cells = PAD_LEFT + PAD_RIGHT + CELL_W * (1 + self.digits) + SIGN_GAP + (POINT_GAP if self.decimals else 0.0)
        ticks = PAD_LEFT + PAD_RIGHT + 2 * TICK + LABEL_INF_W + LABEL_BLANK_W + 6.0
        return max(cells, ticks)

    @property
    def per_row(self) -> int:
        """How many of these combs a grid's row holds (:data:`MAX_ROW_PT`)."""
        return max(1, int(MAX_ROW_PT // self.width_pt))

    @property
    def height_pt(self) -> float:
        return PAD_TOP + CELL_H + TICK_GAP + TICK + PAD_BOTTOM

    @property
    def css_class(self) -> str:
        return f"cmb-{self.integer_digits}-{self.decimals}-{'m' if self.minus_infinity else 'n'}"

    def sign(self) -> tuple[float, float, float, float]:
        return (PAD_LEFT, PAD_TOP, CELL_W, CELL_H)

    def digit_boxes(self) -> list[tuple[float, float, float, float]]:
        boxes, x = [], PAD_LEFT + CELL_W + SIGN_GAP
        for k in range(self.digits):
            if k == self.integer_digits:
                x += POINT_GAP
            boxes.append((x, PAD_TOP, CELL_W, CELL_H))
            x += CELL_W
        return boxes

    def minus_infinity_box(self) -> tuple[float, float, float, float] | None:
        return (PAD_LEFT, PAD_TOP + CELL_H + TICK_GAP, TICK, TICK) if self.minus_infinity else None

    def left_blank_box(self) -> tuple[float, float, float, float]:
        return (self.width_pt - PAD_RIGHT - LABEL_BLANK_W - TICK, PAD_TOP + CELL_H + TICK_GAP, TICK, TICK)

    def tile_svg(self) -> str:
        """The comb drawn in a tile of its size: grey cell frames (the sign cell lighter), the
        decimal point, the tick boxes with "−∞" and "∅" drawn beside them (paths, no font)."""
        w, h = self.width_pt, self.height_pt
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w / PT_PER_PX:.2f}" height="{h / PT_PER_PX:.2f}" '
               f'viewBox="0 0 {w:.2f} {h:.2f}">']

        def frame(box: tuple[float, float, float, float], colour: str) -> None:
            x, y, bw, bh = box
            out.append(f'<rect x="{x + 0.3:.2f}" y="{y + 0.3:.2f}" width="{bw - 0.6:.2f}" height="{bh - 0.6:.2f}" '
                       f'fill="none" stroke="{colour}" stroke-width="0.6"/>')

        frame(self.sign(), "#aaa")
        digits = self.digit_boxes()
        for box in digits:
            frame(box, "#777")
        if self.decimals:
            last = digits[self.integer_digits - 1]
            cx = last[0] + last[2] + POINT_GAP / 2
            out.append(f'<circle cx="{cx:.2f}" cy="{PAD_TOP + CELL_H - 2.2:.2f}" r="0.95" fill="#000"/>')
        label = 'fill="none" stroke="#444" stroke-width="0.6" stroke-linecap="round"'
        minus = self.minus_infinity_box()
        if minus is not None:
            frame(minus, "#777")
            x, cy = minus[0] + TICK + 1.6, minus[1] + TICK / 2
            # "−∞": a short bar, then a lemniscate of two loops.
            c = x + 6.8
            out.append(f'<path {label} d="M{x:.2f} {cy:.2f}h2.6M{c:.2f} {cy:.2f}'
                       f'c0.9 -1.7 2.9 -1.7 2.9 0s-2 1.7 -2.9 0s-2 -1.7 -2.9 0s2 1.7 2.9 0z"/>')
        blank = self.left_blank_box()
        frame(blank, "#777")
        cx, cy = blank[0] + TICK + 1.5 + 2.6, blank[1] + TICK / 2
        # "∅": a circle struck through.
        out.append(f'<circle {label} cx="{cx:.2f}" cy="{cy:.2f}" r="2.3"/>'
                   f'<path {label} d="M{cx - 2.6:.2f} {cy + 3.1:.2f}L{cx + 2.6:.2f} {cy - 3.1:.2f}"/>')
        out.append("</svg>")
        return "".join(out)

    def css(self) -> str:
        """The grid's background: this comb, tiled."""
        data = base64.b64encode(self.tile_svg().encode("ascii")).decode("ascii")
        return (f".boxes.{self.css_class} {{ background-image: url('data:image/svg+xml;base64,{data}'); "
                f"background-size: {self.width_pt / PT_PER_PX:.2f}px {self.height_pt / PT_PER_PX:.2f}px; }}")


# --- what each part's comb is, the same for every student --------------------------------------


def decimals_for(tolerance: Tolerance) -> int:
    """The places after the point a part's tolerance asks: ``p`` for ``p decimals``; for an
    absolute band the places that write within it; for relative and significant-figure
    tolerances one more than a value from 1 to 10 needs (a smaller value is written rounded)."""
    if tolerance.mode == "decimals":
        places = int(tolerance.value)
    elif tolerance.mode == "abs":
        places = 0 if tolerance.value >= 1 else math.ceil(-math.log10(max(tolerance.value, 1e-12)) - 1e-9)
    elif tolerance.mode == "sigfigs":
        places = int(tolerance.value)
    else:  # rel
        places = 1 + math.ceil(-math.log10(max(tolerance.value, 1e-12)) - 1e-9)
    return max(0, min(MAX_DECIMALS, places))


def _whole_digits(values: np.ndarray, decimals: int) -> int:
    finite = values[np.isfinite(values)]
    if not finite.size:
        return 1
    top = round(float(np.max(np.abs(finite))), decimals)
    return max(1, len(str(int(top))))


#: Variants of an item drawn to learn the range of its values (the same for any roster, seed or
#: secret: a property of the item, as a family's range is).
RANGE_VARIANTS = 256


def item_range_env(item: ItemSpec) -> Any:
    """Every step of :data:`RANGE_VARIANTS` variants of ``item`` drawn from fixed keys."""
    fingerprint = item.fingerprint()
    keys = [variant_key("cell range", item.id, fingerprint, str(k)) for k in range(RANGE_VARIANTS)]
    return solve_item(item, keys)


def part_combs(ws: Worksheet) -> dict[str, Comb | None]:
    """Each asked part's comb, the same for every student (the sheet says nothing of one
    student's answer, whoever else is in the class): as many whole digits as the largest value
    the part takes over :data:`RANGE_VARIANTS` variants drawn from fixed keys and over the
    class, right or (up to a digit more) by one of the family's known mistakes, the
    decimals its tolerance asks (none for a shape's sizes), and a −∞ box where the part can be −∞
    (a mask). None for a part printed with a plain box: values too large for a comb."""
    out: dict[str, Comb | None] = {}
    for item, env in zip(ws.spec.items, ws.envs):
        reference = item_range_env(item)
        for part in item.parts:
            step = item.family.step(part.step)
            right, wrong = [], []
            for drawn in (reference, env):
                right.append(np.asarray(drawn[part.step], dtype=np.float64))
                with np.errstate(all="ignore"):  # a mistake may divide by zero: its ∞ is left out
                    for mistake in item.family.mistakes_for(part.step, item.params):
                        wrong.append(np.asarray(mistake.fn(drawn, item.params, np), dtype=np.float64))
            decimals = decimals_for(item.tolerance_for(part.step)) if step.kind == "number" else 0
            whole = max(_whole_digits(v, decimals) for v in right)
            # A mistake's answer fits too, up to a digit more (one a hundred times too large would
            # make every comb of the part long for a slip few make).
            whole = max([whole, *(min(whole + 1, _whole_digits(v, decimals)) for v in wrong)])
            if whole > MAX_INTEGER_DIGITS:
                out[part.id] = None
                continue
            minus_inf = bool(np.isneginf(np.asarray(reference[part.step])).any()
                             or np.isneginf(np.asarray(env[part.step])).any())
            out[part.id] = Comb(whole, decimals, minus_inf)
    return out


# --- a grid of combs in the document -------------------------------------------------------------


@dataclass(frozen=True)
class GridCells:
    """A grid of combs for the entries of one part: the grid's first entry ``base`` (a full index
    of the part), and how its rows and columns step through the part: ``axes`` 0 (one number),
    1 (a row: the last index), 2 (rows and columns: the last two)."""

    part: str
    comb: Comb
    base: tuple[int, ...]
    axes: int

    def span_html(self, rows: int, cols: int) -> str:
        """The grid's element: as wide and tall as its combs, counted in plain boxes in its
        classes (``c``/``r``) so that the answer column makes room for it as for boxes."""
        w, h = cols * self.comb.width_pt / PT_PER_PX, rows * self.comb.height_pt / PT_PER_PX
        wide, tall = math.ceil(w / BOX_PX - 1e-6), math.ceil(h / BOX_ROW_PX - 1e-6)
        anchor = html.escape(grid_id(self, rows, cols), quote=True)
        return (f'<span class="boxes r{tall} c{wide} {self.comb.css_class}" id="{anchor}" '
                f'style="width:{w:.2f}px;height:{h:.2f}px"></span>')


#: A plain box's height (``.boxes`` in templates/style.css).
BOX_ROW_PX = 35.49


def grid_id(grid: GridCells, rows: int, cols: int) -> str:
    c = grid.comb
    return (f"{_GRID_ID}{grid.part}~{'-'.join(map(str, grid.base))}~{grid.axes}~{rows}x{cols}"
            f"~{c.integer_digits}.{c.decimals}.{int(c.minus_infinity)}")


_GRID_ANCHOR = re.compile(re.escape(_GRID_ID)
                          + r"([^~]+)~([0-9-]*)~([012])~([0-9]+)x([0-9]+)~([0-9]+)\.([0-9]+)\.([01])")


def _parse_grid(anchor: str) -> tuple[GridCells, int, int] | None:
    m = _GRID_ANCHOR.fullmatch(anchor)
    if m is None:
        return None
    base = tuple(int(i) for i in m.group(2).split("-")) if m.group(2) else ()
    comb = Comb(int(m.group(6)), int(m.group(7)), m.group(8) == "1")
    return GridCells(m.group(1), comb, base, int(m.group(3))), int(m.group(4)), int(m.group(5))


# --- the page: marks, QR frame, stylesheet --------------------------------------------------------


def _offsets() -> dict[str, str]:
    """Each mark's place as a fixed element, from the page area's edges (pt)."""
    r = MARK_DIAMETER / 2
    side = -(MARGIN_SIDE_MM - MARK_INSET_MM) * MM - r
    top = -(MARGIN_TOP_MM - MARK_INSET_MM) * MM - r
    bottom = -(MARGIN_BOTTOM_MM - MARK_INSET_MM) * MM - r
    return {"nw": f"top:{top:.3f}pt;left:{side:.3f}pt", "ne": f"top:{top:.3f}pt;right:{side:.3f}pt",
            "sw": f"bottom:{bottom:.3f}pt;left:{side:.3f}pt", "se": f"bottom:{bottom:.3f}pt;right:{side:.3f}pt"}


def furniture_html() -> str:
    """The marks and the QR code's frame: fixed elements, on every page."""
    marks = "".join(f'<div class="qkvq-mark" id="{ANCHOR}mark-{corner}"></div>' for corner in _MARKS)
    return f'{marks}<div class="qkvq-qr" id="{_QR_ID}"></div>\n'


def printed_css(combs: Sequence[Comb]) -> str:
    """The printed sheet's own rules: the wider bottom margin, the marks, the QR frame, the combs."""
    offsets = _offsets()
    rules = [
        f"@page {{ margin-bottom: {MARGIN_BOTTOM_MM}mm; @bottom-left {{ padding-left: {FOOTER_INSET_MM}mm; }} "
        f"@bottom-right {{ padding-right: {FOOTER_INSET_MM}mm; }} }}",
        f".qkvq-mark {{ position: fixed; width: {MARK_DIAMETER}pt; height: {MARK_DIAMETER}pt; "
        "border-radius: 50%; background: #000; }",
        *(f"#{ANCHOR}mark-{corner} {{ {offsets[corner]}; }}" for corner in _MARKS),
        f".qkvq-qr {{ position: fixed; bottom: {QR_BOTTOM_MM - MARGIN_BOTTOM_MM}mm; left: 50%; "
        f"margin-left: {-QR_MM / 2}mm; width: {QR_MM}mm; height: {QR_MM}mm; }}",
        *(comb.css() for comb in sorted(set(combs), key=lambda c: c.css_class)),
    ]
    return "\n".join(rules)


def qr_svg(code: PageCode) -> str:
    """The QR code as an SVG of its modules (one path, a run of dark modules to a subpath)."""
    modules = qr_modules(code)
    n = modules.shape[0]
    runs = []
    for r, row in enumerate(modules):
        c = 0
        while c < n:
            if row[c]:
                start = c
                while c < n and row[c]:
                    c += 1
                runs.append(f"M{start} {r}h{c - start}v1h{start - c}z")
            else:
                c += 1
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {n} {n}" width="{n}" height="{n}" '
            f'shape-rendering="crispEdges"><path d="{"".join(runs)}"/></svg>')


def page_code_rules(set_id: str, variant: str, pages: range) -> str:
    """Each page's QR code as the background of its bottom-centre margin box, which is exactly
    as wide as the code and as tall as the bottom margin: the code lands in the fixed frame."""
    rules = []
    for n in pages:
        data = base64.b64encode(qr_svg(PageCode(set_id, variant, n)).encode("ascii")).decode("ascii")
        rules.append(f"@page :nth({n}) {{ @bottom-center {{ content: ''; width: {QR_MM}mm; "
                     f"background: url('data:image/svg+xml;base64,{data}') no-repeat; "
                     f"background-position: center bottom {QR_BOTTOM_MM}mm; "
                     f"background-size: {QR_MM}mm {QR_MM}mm; }} }}")
    return "\n".join(rules)


#: The element that holds a printed document's QR codes; it says whose and how many pages.
_CODES = re.compile(r'<style data-qkvquiz-page-codes="([0-9a-f]{12}) ([0-9A-Z]{4}-[0-9A-Z]{4}) ([0-9]+)">')


def page_codes_style(set_id: str, variant: str, pages: int = PAGE_CODES_AHEAD) -> str:
    return (f'<style data-qkvquiz-page-codes="{set_id} {variant} {pages}">\n'
            f"{page_code_rules(set_id, variant, range(1, pages + 1))}\n</style>")


def laid_out_with_page_codes(source: str, layout: Callable[[str], Any]) -> Any:
    """``layout(source)``, laid out again with a QR code for every page where the document has
    more pages than its stylesheet had codes for. A document without codes is laid out once."""
    document = layout(source)
    found = _CODES.search(source)
    if found is None or len(document.pages) <= int(found.group(3)):
        return document
    set_id, variant, pages = found.group(1), found.group(2), len(document.pages)
    start = source.index("</style>", found.end()) + len("</style>")
    return layout(source[:found.start()] + page_codes_style(set_id, variant, pages) + source[start:])


# --- from the laid-out pages to the cell map -----------------------------------------------------


@dataclass(frozen=True)
class PageAnchors:
    """What one laid-out page says of the printed sheet: its size and the places (CSS px from the
    top-left corner) of this module's elements (``Page.anchors``)."""

    size_px: tuple[float, float]
    anchors: Mapping[str, tuple[float, float]]


def page_anchors(page: Any) -> PageAnchors:
    """The public ``width``, ``height`` and ``anchors`` of a WeasyPrint page, this module's ids only."""
    return PageAnchors((float(page.width), float(page.height)),
                       {name: (float(place[0]), float(place[1])) for name, place in page.anchors.items()
                        if name.startswith(ANCHOR)})


def _pt(box: tuple[float, float, float, float], x: float, y: float) -> tuple[float, float, float, float]:
    return (x + box[0], y + box[1], box[2], box[3])


def _entries(anchor: str, at: tuple[float, float]) -> list[Entry]:
    parsed = _parse_grid(anchor)
    if parsed is None:
        return []
    grid, rows, cols = parsed
    comb = grid.comb
    x0, y0 = at[0] * PT_PER_PX, at[1] * PT_PER_PX
    out = []
    for r in range(rows):
        for c in range(cols):
            index = list(grid.base)
            if grid.axes == 1:
                index[-1] += c
            elif grid.axes == 2:
                index[-2] += r
                index[-1] += c
            x, y = x0 + c * comb.width_pt, y0 + r * comb.height_pt
            minus = comb.minus_infinity_box()
            out.append(Entry(grid.part, tuple(index), comb.integer_digits, comb.decimals, _pt(comb.sign(), x, y),
                             tuple(_pt(b, x, y) for b in comb.digit_boxes()),
                             None if minus is None else _pt(minus, x, y), _pt(comb.left_blank_box(), x, y)))
    return out


class PrintedLayoutError(RuntimeError):
    """A printed worksheet whose layout lacks its marks or its QR frame (a template that
    drops them): no cell map can be written for it."""


def printed_page(variant: str, number: int, laid: PageAnchors) -> Page:
    """One page of the cell map, from what its layout measured."""
    a = laid.anchors
    missing = [name for name in (*(f"{ANCHOR}mark-{c}" for c in _MARKS), _QR_ID) if name not in a]
    if missing:
        raise PrintedLayoutError(f"page {number} of variant {variant} lacks {', '.join(missing)}")
    r = MARK_DIAMETER / 2
    marks = tuple((a[f"{ANCHOR}mark-{c}"][0] * PT_PER_PX + r, a[f"{ANCHOR}mark-{c}"][1] * PT_PER_PX + r)
                  for c in _MARKS)
    qr_x, qr_y = a[_QR_ID]
    qr = (qr_x * PT_PER_PX, qr_y * PT_PER_PX, QR_MM * MM, QR_MM * MM)
    entries = [e for name, at in a.items() for e in _entries(name, at)]
    size = (laid.size_px[0] * PT_PER_PX, laid.size_px[1] * PT_PER_PX)
    return Page(variant, number, size, MARK_DIAMETER, marks, qr, tuple(entries))


def answer_shapes(ws: Worksheet) -> dict[str, tuple[int, ...]]:
    """Every asked part's answer shape (the same for every student)."""
    return {part.id: tuple(np.shape(env[part.step])[1:]) for item, env in zip(ws.spec.items, ws.envs)
            for part in item.parts}


def printed_cellmap(ws: Worksheet, laid_out: Sequence[Sequence[PageAnchors]]) -> CellMap:
    """The cell map of a class's printed worksheets: ``laid_out[i]`` is student i's pages."""
    shapes = answer_shapes(ws)
    students, pages = [], []
    for i, own in enumerate(laid_out):
        students.append(Student(ws.students[i], ws.codes[i], len(own), shapes))
        pages += [printed_page(ws.codes[i], n, laid) for n, laid in enumerate(own, start=1)]
    return CellMap(ws.set_id, tuple(students), tuple(pages))
