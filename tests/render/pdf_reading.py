"""Reading a written PDF from the outside, as a reader of the page would: the words and where
they stand (``pdftotext -bbox-layout``), the text of each page (``pdftotext``) and the ink of
each page (``pdftoppm``). The tests that ask where things landed on a page ask these, not the
renderer's own layout tree.

Every position is in PDF points (1/72 inch) from the page's top left corner.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from qkvquiz.render.page import stylesheet_path

_XHTML = "{http://www.w3.org/1999/xhtml}"
#: One CSS length in points.
_POINTS = {"mm": 72 / 25.4, "cm": 72 / 2.54, "in": 72.0, "pt": 1.0, "px": 0.75, "pc": 12.0}


def tool(name: str) -> str:
    """The path of a poppler-utils program; the test is skipped where it is not installed."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (poppler-utils) is not installed")
    return path


@dataclass(frozen=True)
class Word:
    text: str
    x_min: float
    y_min: float
    x_max: float
    y_max: float

    def level_with(self, other: Word) -> bool:
        """Whether the two words share a line: their heights overlap."""
        return self.y_min < other.y_max and other.y_min < self.y_max


@dataclass(frozen=True)
class Page:
    number: int  # from 1
    width: float
    height: float
    words: tuple[Word, ...]

    def find(self, text: str) -> list[Word]:
        return [word for word in self.words if word.text == text]


def words(pdf: Path) -> list[Page]:
    """Each page of ``pdf`` with its size and every word's box (``pdftotext -bbox-layout``)."""
    out = subprocess.run(
        [tool("pdftotext"), "-bbox-layout", str(pdf), "-"], check=True, capture_output=True
    ).stdout
    pages = []
    for number, page in enumerate(ET.fromstring(out).iter(_XHTML + "page"), start=1):
        found = tuple(
            Word(word.text or "", *(float(word.get(k)) for k in ("xMin", "yMin", "xMax", "yMax")))
            for word in page.iter(_XHTML + "word")
        )
        pages.append(Page(number, float(page.get("width")), float(page.get("height")), found))
    return pages


def page_texts(pdf: Path) -> list[str]:
    """The text of each page of ``pdf`` (``pdftotext -layout``), one string per page."""
    out = subprocess.run(
        [tool("pdftotext"), "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout
    return out.split("\f")[:-1]  # every page ends with a form feed


def page_margins() -> tuple[float, float, float, float]:
    """The page's margins (top, right, bottom, left) in points, as ``templates/style.css``
    sets them in its ``@page`` rule."""
    css = re.sub(r"/\*.*?\*/", "", stylesheet_path().read_text(encoding="utf-8"), flags=re.DOTALL)
    rule = re.search(r"@page\s*\{(.*?)\}", css, flags=re.DOTALL)
    assert rule, "templates/style.css has no @page rule"
    margin = re.search(r"(?:^|[;{\s])margin\s*:\s*([^;}]+)", rule.group(1))
    assert margin, "the @page rule of templates/style.css sets no margin"
    values = []
    for length in margin.group(1).split():
        number, unit = re.fullmatch(r"([\d.]+)([a-z]*)", length).groups()  # type: ignore[union-attr]
        values.append(float(number) * (_POINTS[unit] if unit else 0.0))
    # CSS shorthand: one value for every side, two for (top and bottom, sides), three for
    # (top, sides, bottom), four clockwise from the top.
    top, right, bottom, left = {1: values * 4, 2: values * 2, 3: [*values, values[1]], 4: values}[len(values)]
    return top, right, bottom, left


@dataclass(frozen=True)
class Ink:
    """A page, or a part of one, drawn at 72 dots per inch in shades of grey: a pixel is a
    point square, and pixel (x, y) of the page covers x ≤ … < x + 1, y ≤ … < y + 1 in points."""

    number: int  # the page, from 1
    left: int  # where the drawn part starts on the page
    top: int
    rows: tuple[bytes, ...]  # 0 black … 255 white

    def dark(self, x0: float, y0: float, x1: float, y1: float, *, below: int = 245) -> list[tuple[int, int]]:
        """Each pixel (x, y) of the page darker than ``below`` whose square lies inside
        x0 ≤ x < x1, y0 ≤ y < y1 (and inside the drawn part)."""
        width = len(self.rows[0]) if self.rows else 0
        left, right = max(math.ceil(x0) - self.left, 0), min(math.floor(x1) - self.left, width)
        top, bottom = max(math.ceil(y0) - self.top, 0), min(math.floor(y1) - self.top, len(self.rows))
        found = []
        for y in range(top, bottom):
            band = self.rows[y][left:right]
            if band and min(band) < below:
                found.extend((self.left + left + x, self.top + y) for x, value in enumerate(band) if value < below)
        return found


def ink(pdf: Path, region: tuple[float, float, float, float] | None = None) -> list[Ink]:
    """Each page of ``pdf`` drawn by ``pdftoppm`` in grey at 72 dpi; only the part of it
    inside ``region`` (x0, y0, x1, y1 in points, the same on every page) where given, which
    costs a tenth of a whole page when the part is a margin."""
    command = [tool("pdftoppm"), "-gray", "-r", "72"]
    left = top = 0
    if region is not None:
        x0, y0, x1, y1 = region
        left, top = math.floor(x0), math.floor(y0)
        command += ["-x", str(left), "-y", str(top), "-W", str(math.ceil(x1) - left), "-H", str(math.ceil(y1) - top)]
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([*command, str(pdf), f"{folder}/p"], check=True, capture_output=True)
        files = sorted(Path(folder).glob("p-*.pgm"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        return [_pgm(number, left, top, path.read_bytes()) for number, path in enumerate(files, start=1)]


def _pgm(number: int, left: int, top: int, data: bytes) -> Ink:
    # Binary PGM: "P5", width, height, maximum value, each separated by white space, then the pixels.
    fields = re.match(rb"P5\s+(\d+)\s+(\d+)\s+(\d+)\s", data)
    assert fields and int(fields.group(3)) == 255, data[:20]
    width, height = int(fields.group(1)), int(fields.group(2))
    start = fields.end()
    rows = tuple(data[start + y * width : start + (y + 1) * width] for y in range(height))
    return Ink(number, left, top, rows)
