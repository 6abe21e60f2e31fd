"""A synthetic scan corpus: pages drawn from a cell map, filled with held-out handwriting, scanned.

The pages are drawn here with Pillow from a cell map itself: corner discs, the QR code, cell
borders in grey with the printed decimal point, tick boxes, and some print-like clutter. (Real
printed worksheets, rendered from their PDFs, come from ``tests/scan/printed.py``; they are
filled by :func:`fill_printed`.) Cells are filled with MNIST test digits, by writers the model
never learnt from, on which nothing was chosen (1,000 of the measuring half,
``heldout_digits.npz``, written by ``tools/train_digits.py``), minus strokes and ticks; then each
page is "scanned": turned a few degrees, scaled, blurred, speckled, JPEG-coded.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from qkvquiz.scan.cellmap import CellMap, Entry, Page, Student
from qkvquiz.scan.qr import PageCode, qr_modules
from qkvquiz.scan.synthetic import handwritten, paste

HELD_OUT = Path(__file__).with_name("heldout_digits.npz")
A4 = (595.28, 841.89)
CELL_W, CELL_H, POINT_GAP, TICK = 18.0, 22.0, 6.0, 11.0


def held_out_digits() -> tuple[np.ndarray, np.ndarray]:
    with np.load(HELD_OUT) as data:
        return data["digits"].astype(np.float64) / 255.0, data["labels"]


def _entry(part: str, index: tuple[int, ...], x: float, y: float, integer_digits: int, decimals: int,
           allow_inf: bool) -> Entry:
    sign = (x, y, CELL_W, CELL_H)
    digits, cx = [], x + CELL_W + 4
    for k in range(integer_digits + decimals):
        if k == integer_digits:
            cx += POINT_GAP
        digits.append((cx, y, CELL_W, CELL_H))
        cx += CELL_W
    cx += 8
    minus = (cx, y + (CELL_H - TICK) / 2, TICK, TICK) if allow_inf else None
    blank = (cx + TICK + 22, y + (CELL_H - TICK) / 2, TICK, TICK)
    return Entry(part, index, integer_digits, decimals, sign, tuple(digits), minus, blank)


def layout(set_id: str, people: list[tuple[str, str]], parts: dict[str, tuple[int, ...]],
           pages: int = 2, decimals: int = 2) -> CellMap:
    """A cell map: each student's entries laid out in two columns over ``pages`` A4 pages."""
    students, all_pages = [], []
    places = [(pid, tuple(int(i) for i in idx)) for pid, shape in parts.items() for idx in np.ndindex(*shape)]
    per_page = -(-len(places) // pages)
    for sid, variant in people:
        students.append(Student(sid, variant, pages, dict(parts)))
        for number in range(1, pages + 1):
            entries = []
            for k, (pid, idx) in enumerate(places[(number - 1) * per_page: number * per_page]):
                column, row = divmod(k, 16)
                x, y = 50 + column * 275, 140 + row * 40
                entries.append(_entry(pid, idx, x, y, 2, decimals, allow_inf=pid.endswith("scores")))
            marks = ((34.0, 34.0), (A4[0] - 34, 34.0), (34.0, A4[1] - 34), (A4[0] - 34, A4[1] - 34))
            all_pages.append(Page(variant, number, A4, 14.0, marks, (455.0, 40.0, 62.0, 62.0), tuple(entries)))
    return CellMap(set_id, tuple(students), tuple(all_pages))


@dataclass
class Truth:
    """What was written: per (variant, page), each entry's value and each cell's reading."""

    values: dict[tuple[str, str, tuple[int, ...]], str | None] = field(default_factory=dict)
    cells: dict[tuple[str, str, tuple[int, ...]], list[str]] = field(default_factory=dict)


def draw_page(page: Page, set_id: str, dpi: int, rng: np.random.Generator, digits: np.ndarray,
              labels: np.ndarray, truth: Truth, fill: bool = True,
              answers: Mapping[tuple[str, tuple[int, ...]], str | None] | None = None) -> Image.Image:
    """The printed page at ``dpi``, filled by a student (grey levels): random values, or the
    values of ``answers`` (part, index → text, as :func:`write_value` writes them) where given."""
    s = dpi / 72
    img = Image.new("L", (int(page.size[0] * s), int(page.size[1] * s)), 255)
    draw = ImageDraw.Draw(img)
    r = page.mark_diameter / 2
    for x, y in page.marks:
        draw.ellipse([(x - r) * s, (y - r) * s, (x + r) * s, (y + r) * s], fill=0)
    modules = qr_modules(PageCode(set_id, page.variant, page.page))
    qx, qy, qw, _qh = page.qr
    unit = qw / modules.shape[0]
    for row, col in zip(*np.nonzero(modules)):
        draw.rectangle([(qx + col * unit) * s, (qy + row * unit) * s,
                        (qx + (col + 1) * unit) * s - 1, (qy + (row + 1) * unit) * s - 1], fill=0)
    for _ in range(40):  # print-like clutter: words of the problems, between the answer rows
        x, y = rng.uniform(60, 520), rng.uniform(110, 780)
        if any(abs(y - e.sign[1] - 11) < 20 for e in page.entries):
            continue
        draw.rectangle([x * s, y * s, (x + rng.uniform(10, 60)) * s, (y + 6) * s], fill=40)
    ink = np.zeros((img.height, img.width), dtype=np.float32)
    for entry in page.entries:
        for box in (entry.sign, *entry.digits):
            draw.rectangle([box[0] * s, box[1] * s, (box[0] + box[2]) * s, (box[1] + box[3]) * s], outline=150, width=max(1, int(s * 0.6)))
        px = entry.digits[entry.integer_digits - 1]
        dot = (px[0] + px[2] + POINT_GAP / 2, px[1] + px[3] - 3)
        draw.ellipse([(dot[0] - 1.2) * s, (dot[1] - 1.2) * s, (dot[0] + 1.2) * s, (dot[1] + 1.2) * s], fill=60)
        for box in (entry.minus_infinity, entry.left_blank):
            if box:
                draw.rectangle([box[0] * s, box[1] * s, (box[0] + box[2]) * s, (box[1] + box[3]) * s], outline=110, width=max(1, int(s * 0.6)))
        key = (page.variant, entry.part, entry.index)
        if not fill:
            truth.values[key], truth.cells[key] = None, ["blank"] * (len(entry.digits) + 1)
            continue
        if answers is not None and (entry.part, entry.index) in answers:
            value = answers[(entry.part, entry.index)]
            cells = write_value(entry, value, ink, s, rng, digits, labels)
        else:
            value, cells = _fill(entry, ink, s, rng, digits, labels)
        truth.values[key], truth.cells[key] = value, cells
    out = np.minimum(np.asarray(img, dtype=np.float32), 255 - 235 * ink)
    return Image.fromarray(out.astype(np.uint8))


def fill_printed(picture: Image.Image, page: Page, dpi: int, rng: np.random.Generator, digits: np.ndarray,
                 labels: np.ndarray, truth: Truth, fill: bool = True) -> Image.Image:
    """A page as printed (a grey image at ``dpi``, e.g. a real worksheet PDF rendered), filled by a
    student as :func:`draw_page` fills the pages it draws."""
    s = dpi / 72
    ink = np.zeros((picture.height, picture.width), dtype=np.float32)
    for entry in page.entries:
        key = (page.variant, entry.part, entry.index)
        if not fill:
            truth.values[key], truth.cells[key] = None, ["blank"] * (len(entry.digits) + 1)
            continue
        value, cells = _fill(entry, ink, s, rng, digits, labels)
        # A comb without decimals has no point: "12." is written 12.
        truth.values[key], truth.cells[key] = value.rstrip(".") if value else value, cells
    out = np.minimum(np.asarray(picture.convert("L"), dtype=np.float32), 255 - 235 * ink)
    return Image.fromarray(out.astype(np.uint8))


def _fill(entry: Entry, ink: np.ndarray, s: float, rng: np.random.Generator, digits: np.ndarray,
          labels: np.ndarray) -> tuple[str | None, list[str]]:
    choice = rng.random()
    n = len(entry.digits)
    if choice < 0.06:
        _tick(ink, entry.left_blank, s, rng)
        return None, ["blank"] * (n + 1)
    if choice < 0.12 and entry.minus_infinity:
        _tick(ink, entry.minus_infinity, s, rng)
        return "-inf", ["blank"] * (n + 1)
    whole = int(rng.integers(1, entry.integer_digits + 1))
    written = ["blank"] * (entry.integer_digits - whole) + [str(int(d)) for d in rng.integers(0, 10, whole)]
    if written[entry.integer_digits - whole] == "0" and whole > 1:
        written[entry.integer_digits - whole] = str(int(rng.integers(1, 10)))
    written += [str(int(d)) for d in rng.integers(0, 10, entry.decimals)]
    negative = rng.random() < 0.4
    cells = ["minus" if negative else "blank", *written]
    _write_cells(entry, negative, written, ink, s, rng, digits, labels)
    whole_text = "".join(c for c in written[:entry.integer_digits] if c != "blank").lstrip("0") or "0"
    value = ("-" if negative else "") + whole_text + "." + "".join(written[entry.integer_digits:])
    return value, cells


def _write_cells(entry: Entry, negative: bool, written: list[str], ink: np.ndarray, s: float,
                 rng: np.random.Generator, digits: np.ndarray, labels: np.ndarray) -> None:
    """A minus stroke in the sign cell (where ``negative``) and a held-out digit in each cell not "blank"."""
    if negative:
        x, y, w, h = entry.sign
        length = w * rng.uniform(0.45, 0.7)
        x0 = x + (w - length) / 2 + rng.normal(0, 1)
        yy = y + h / 2 + rng.normal(0, 1.5)
        stroke = np.ones((max(2, int(rng.uniform(1.0, 1.8) * s)), int(length * s))) * rng.uniform(0.8, 1.0)
        paste(ink, stroke, int(yy * s), int(x0 * s))
    for box, label in zip(entry.digits, written):
        if label == "blank":
            continue
        pool = np.nonzero(labels == int(label))[0]
        picture = digits[int(rng.choice(pool))]
        height = int(box[3] * s * rng.uniform(0.55, 0.8))
        drawn = handwritten(picture, height, rng)
        top = int((box[1] + box[3] / 2) * s - drawn.shape[0] / 2 + rng.normal(0, 0.05) * box[3] * s)
        left = int((box[0] + box[2] / 2) * s - drawn.shape[1] / 2 + rng.normal(0, 0.06) * box[2] * s)
        paste(ink, drawn, top, left)


def write_value(entry: Entry, value: str | None, ink: np.ndarray, s: float, rng: np.random.Generator,
                digits: np.ndarray, labels: np.ndarray) -> list[str]:
    """A given answer written into the entry's cells as a student writes it: ``"-1.50"`` (digits
    right of the point fill the comb's decimals, left of it end at the point), ``"-inf"`` (the −∞
    box ticked) or None (the "left blank" box ticked). Returns each cell's reading."""
    n = len(entry.digits)
    if value is None or value == "-inf":
        _tick(ink, entry.left_blank if value is None else entry.minus_infinity, s, rng)
        return ["blank"] * (n + 1)
    negative = value.startswith("-")
    whole, _, fraction = value.lstrip("-").partition(".")
    if len(whole) > entry.integer_digits or len(fraction) > entry.decimals:
        raise ValueError(f"{value} does not fit {entry.integer_digits} digits and {entry.decimals} decimals")
    written = ["blank"] * (entry.integer_digits - len(whole)) + list(whole) + list(fraction.ljust(entry.decimals, "0"))
    _write_cells(entry, negative, written, ink, s, rng, digits, labels)
    return ["minus" if negative else "blank", *written]


def _tick(ink: np.ndarray, box: tuple[float, float, float, float], s: float, rng: np.random.Generator) -> None:
    x, y, w, h = box
    canvas = Image.new("L", ink.shape[::-1], 0)
    draw = ImageDraw.Draw(canvas)
    width = max(2, int(1.3 * s))
    jitter = lambda: rng.normal(0, 0.8)  # noqa: E731
    if rng.random() < 0.5:  # a check mark
        draw.line([((x + 2 + jitter()) * s, (y + h * 0.55) * s), ((x + w * 0.4) * s, (y + h - 1.5) * s),
                   ((x + w + 2 + jitter()) * s, (y - 2 + jitter()) * s)], fill=255, width=width)
    else:  # a cross
        draw.line([((x + 1) * s, (y + 1) * s), ((x + w - 1) * s, (y + h - 1) * s)], fill=255, width=width)
        draw.line([((x + w - 1) * s, (y + 1) * s), ((x + 1) * s, (y + h - 1) * s)], fill=255, width=width)
    np.maximum(ink, np.asarray(canvas, dtype=np.float32) / 255, out=ink)


def scan(page: Image.Image, rng: np.random.Generator, *, degrees: float = 0.0, scale: float = 1.0,
         turn: int = 0, blur: float = 0.6, speckle: float = 0.0005, jpeg: int | None = 75) -> Image.Image:
    """What a copier makes of a page: turned a few degrees and scaled about its centre, blurred,
    speckled, JPEG-coded, and possibly upside down or sideways (``turn`` in multiples of 90°)."""
    w, h = page.size
    out = page.rotate(degrees, resample=Image.Resampling.BILINEAR, fillcolor=255)
    if scale != 1.0:
        out = out.resize((int(w * scale), int(h * scale)), Image.Resampling.BILINEAR)
        canvas = Image.new("L", (w, h), 255)
        canvas.paste(out, ((w - out.width) // 2, (h - out.height) // 2))
        out = canvas
    out = out.filter(ImageFilter.GaussianBlur(blur))
    arr = np.asarray(out, dtype=np.float32) + 4 * rng.standard_normal((h, w), dtype=np.float32)
    count = rng.poisson(speckle * h * w)
    arr[rng.integers(0, h, count), rng.integers(0, w, count)] = rng.uniform(0, 120, count)
    out = Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))
    if turn:
        out = out.rotate(turn, expand=True)
    if jpeg:
        buffer = io.BytesIO()
        out.save(buffer, "JPEG", quality=jpeg)
        out = Image.open(io.BytesIO(buffer.getvalue()))
        out.load()
    return out
