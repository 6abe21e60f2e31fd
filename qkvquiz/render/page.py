"""The printed page: its size, the stylesheet every document embeds, and the answer boxes' CSS."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: Page sizes the stylesheet knows, and the CSS ``size`` keyword for each.
PAGE_SIZES: dict[str, str] = {"a4": "A4", "letter": "letter"}


from qkvquiz.core.resources import templates_dir

# --------------------------------------------------------------------------- page setup


def page_size_css(page_size: str) -> str:
    """The CSS ``size`` value for ``"A4"`` or ``"Letter"`` (case-insensitive)."""
    try:
        return PAGE_SIZES[page_size.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown page size {page_size!r}; use A4 or Letter") from None


def stylesheet_path() -> Path:
    """``templates/style.css``: the print stylesheet every document embeds."""
    return templates_dir() / "style.css"


#: Attribute of the ``<style>`` element that holds ``templates/style.css`` unchanged; the
#: PDF writer recognises it and uses a copy of the stylesheet parsed once per process.
BASE_STYLE_MARKER = "data-qkvquiz-base"


@lru_cache(maxsize=4)
def _read_stylesheet(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def base_stylesheet_text() -> str:
    """``templates/style.css`` as text (read once per process)."""
    return _read_stylesheet(stylesheet_path())


def screen_stylesheet_text() -> str:
    """``templates/screen.css``: every page a person opens in a browser, phone first, after the
    print stylesheet; pages embed it in a ``<style media="screen">`` (:data:`SCREEN_STYLE_OPEN`),
    which printing and the PDF renderer leave out."""
    return _read_stylesheet(templates_dir() / "screen.css")


#: The element that holds :func:`screen_stylesheet_text` in every page.
SCREEN_STYLE_OPEN = '<style media="screen">'
#: Every page a person opens lays out at the device's width (without it a phone lays a page out
#: 980 px wide and shrinks its text to a few pixels).
VIEWPORT_META = '<meta name="viewport" content="width=device-width, initial-scale=1">'


#: One answer box as the tile of a grid's background (``.boxes`` in the stylesheet sizes
#: it, 73.28 × 35.49 CSS px): 1.9 cm × 0.9 cm (71.81 × 34.02 px), room for a
#: handwritten ``−0.269``, framed by a grey 0.6pt (0.8 px) line inside its edge, and half
#: the 0.1em gap between boxes around it.
BOX_TILE_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="73.28" height="35.49">'
    '<rect x="1.13" y="1.13" width="71.01" height="33.22" fill="none" stroke="#777" '
    'stroke-width="0.8"/></svg>'
)
#: A part's answer column on a printed worksheet, at the text's right edge (every grid of a page
#: ends there): as wide as the part's widest grid beside its sentence needs: its label's room (as
#: wide as its label, from :data:`LABEL_ROOMS_PX`, right-aligned), the bracket, and 1 to 4 boxes
#: of 73.28 px (``.boxes`` in the stylesheet); the grids of a set one under the other. Wider grids (5 to 8 boxes) and sets
#: taller than ``answer_areas.MAX_STACKED_ROWS`` go under their sentence from the text's left
#: edge. Widths in CSS px.
MAX_COLUMN_BOXES = 4
LABEL_ROOMS_PX: tuple[float, ...] = (50.0, 70.0, 90.0, 110.0, 130.0)
#: A box of a grid (``.boxes`` in the stylesheet), and what a grid adds to its label and boxes:
#: the label's right margin, the bracket's left margin (a relation's space after "=") and the
#: bracket itself.
BOX_PX = 73.28
GRID_FRAME_PX = 18.0
#: The gap between a part's sentence and its answer column (the cell's left padding; in the
#: stylesheet too).
ANSWER_COLUMN_GAP_PX = 12.0
#: The width of a part's row: an A4 page's text width (178 mm) less a list's indent (1.4 em)
#: and the room of a part's label (0.7 em) at 11 pt. (On letter paper the row is wider: both
#: cells share the rest, and the boxes, right-aligned in theirs, still end at the text's edge.)
ANSWER_ROW_PX = 642.0


@dataclass(frozen=True)
class AnswerColumn:
    """A part's answer column: ``boxes`` wide (1 to :data:`MAX_COLUMN_BOXES`), with room
    ``room`` (an index into :data:`LABEL_ROOMS_PX`) for the labels."""

    boxes: int = 1
    room: int = 0

    @property
    def css_class(self) -> str:
        return f"acol-{self.boxes} alab-{self.room}"

    @property
    def width_px(self) -> float:
        return LABEL_ROOMS_PX[self.room] + GRID_FRAME_PX + BOX_PX * self.boxes

    @property
    def sentence_px(self) -> float:
        """How wide a part's sentence is beside the column."""
        return ANSWER_ROW_PX - self.width_px - ANSWER_COLUMN_GAP_PX


def _answer_column_css() -> str:
    rules = []
    for room, label in enumerate(LABEL_ROOMS_PX):
        rules.append(f".alab-{room} .part-boxes .answer-label {{ min-width: {label:.0f}px; }}")
        # The part's name and points go under its boxes, from their left edge.
        rules.append(f".alab-{room} .part-boxes .answer-part {{ margin-left: {label + 4.4:.1f}px; }}")
        for boxes in range(1, MAX_COLUMN_BOXES + 1):
            column = AnswerColumn(boxes, room)
            at = f".acol-{boxes}.alab-{room}"
            # Both cells have a width: with the sentence's left to the table's automatic
            # layout, the PDF renderer broke a sentence after its first word where a formula
            # followed it.
            rules.append(f"{at} .part-boxes {{ width: {column.width_px:.2f}px; }}")
            rules.append(f"{at} .part-text {{ width: {column.sentence_px:.2f}px; }}")
    # A sentence with its boxes under it takes the whole line, and boxes under it from the
    # text's edge (`under`) take what they need. Here, not in style.css: the PDF renderer takes
    # that file as a user stylesheet, which loses to these rules whatever its selectors.
    rules.append(".problem .part-row.wide > .part-text, .problem .part-row.under > .part-text { width: auto; }")
    rules.append(".problem .part-row.under > .part-boxes { width: auto; }")
    # Grids under their sentence are not in the column: their labels take the least room, so
    # that the grids of a set stand side by side.
    first = LABEL_ROOMS_PX[0]
    rules.append(f".problem .part-row.under .answer-label {{ min-width: {first:.0f}px; }}")
    rules.append(f".problem .part-row.under .answer-part {{ margin-left: {first + 4.4:.1f}px; }}")
    # A lone grid of 5 to 8 boxes to a row: its label takes only its own width and stands in
    # the part's indent, so that label and grid fit on one line (8 boxes and "Z_cat =" are
    # wider than the text).
    lone = ".problem .part-row.under > .part-boxes > .answer"
    rules.append(f"{lone} {{ margin-left: -2.1em; }}")
    rules.append(f"{lone} > .answer-label {{ min-width: 0; }}")
    rules.append(f"{lone} > .answer-part {{ margin-left: 0; }}")
    return "\n".join(rules)


#: The tile, for the documents that have answer boxes, and the answer column's widths. It is
#: not in ``style.css``: the answer form embeds that stylesheet under a Content-Security-Policy
#: that loads nothing, not even a ``data:`` picture, and has boxes of its own.
BOXES_CSS = (
    ".boxes { background-image: url('data:image/svg+xml;base64,"
    + base64.b64encode(BOX_TILE_SVG.encode("ascii")).decode("ascii")
    + "'); }\n"
    + _answer_column_css()
)


def page_css(page_size: str = "A4") -> str:
    """The rule that sets the page size (``@page`` cannot take a CSS variable), and a key's first
    page without the running head: its title block says it (a document's own rules, as here,
    outweigh ``style.css``, which the PDF renderer takes as a user stylesheet)."""
    return (f"@page {{ size: {page_size_css(page_size)}; }}\n"
            "@page key:first { @top-left { content: none; } @top-right { content: none; } }")


def css_content(message: str, values: dict[str, str]) -> str:
    """A CSS ``content`` value from a message: its text as CSS strings, each ``%(name)s`` the
    CSS of ``values[name]`` (``"Page " counter(page) " of " counter(pages)``)."""
    out = []
    for k, piece in enumerate(re.split(r"%\((\w+)\)s", message)):
        if k % 2:
            out.append(values[piece])
        elif piece:
            out.append('"' + piece.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\A ") + '"')
    return " ".join(out)


def page_words_css() -> str:
    """The words of the stylesheet's running footers, headers and bookmarks in the current
    language (``templates/style.css`` has them in English)."""
    from ..core.i18n import _

    page = css_content(_("Page %(page)s of %(pages)s"), {"page": "counter(page)", "pages": "counter(pages)"})
    student = css_content(_("Student %(student)s"), {"student": "string(student-id) string(variant-code)"})
    bookmark = css_content(_("Student %(student)s"), {"student": "content()"})
    # Translators: the running head of a worksheet page that opens inside a problem.
    continued = css_content(_("Problem %(number)s (continued)"), {"number": "counter(problem)"})
    return (f"@page {{ @bottom-right {{ content: {page}; }} }}\n"
            f"@page key {{ @top-right {{ content: {student}; }} }}\n"
            f".sheet-fields .student-id {{ bookmark-label: {bookmark}; }}\n"
            f"body.worksheet .problem > :not(h3) {{ string-set: continued {continued}; }}")


def stylesheet(page_size: str = "A4") -> str:
    """The whole print stylesheet for one page size."""
    return base_stylesheet_text() + "\n" + page_css(page_size) + "\n"
