"""The blocks templates write into the Markdown: answer grids and the student's header (HTML
blocks without a blank line, which pass through Markdown untouched)."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from qkvquiz.render.math_html import math_html
from qkvquiz.render.printed import GridCells

#: Largest answer grid a part may ask for (a 6×6 matrix is the largest a worksheet shows).
ANSWER_GRID_MAX = 8




# --------------------------------------------------------------------------- blocks


def _shape(shape: Sequence[int] | int) -> tuple[int, int] | tuple[()]:
    dims = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
    if len(dims) > 2 or any(d < 1 or d > ANSWER_GRID_MAX for d in dims):
        raise ValueError(
            f"answer grid shape must be (), (n,) or (rows, cols) with 1..{ANSWER_GRID_MAX} "
            f"per side, got {tuple(dims)}"
        )
    if not dims:
        return ()
    if len(dims) == 1:
        return (1, dims[0])
    return (dims[0], dims[1])


def answer_grid_html(
    part_id: str,
    shape: Sequence[int] | int,
    *,
    label: str | None = None,
    caption: str | None = None,
    cells: GridCells | None = None,
) -> str:
    """Blank answer boxes for one asked part: one box per entry of its shape.

    ``shape`` is ``()`` for a scalar (one box), ``(n,)`` for a vector (one row of boxes) or
    ``(rows, cols)`` for a matrix (a bracketed grid). ``label`` is LaTeX shown before the
    boxes (for example ``"A ="``); the part id is printed small beside them, so that a
    student can match the boxes to the submission file, or ``caption`` in its place (one
    grid of several for a part: ``"matrix 2"``; ``""``: none). The result is one HTML block
    without blank lines; put it on its own lines in the Markdown::

        <div class="answer answer-matrix" data-part="q1.weights" data-rows="3"
             data-cols="3">…</div>

    A template may instead write the empty placeholder, which :func:`markdown_to_html`
    fills in (``data-label`` optional; 1×1 means a scalar)::

        <div class="answer-grid" data-part="q1.weights" data-rows="3" data-cols="3"></div>

    The block never breaks across pages and stays on the page of the sentence before it.
    With ``cells`` (the printed worksheet, :mod:`qkvquiz.render.printed`) each box is a comb of
    cells a scanner reads, and the grid's id says where its entries are in the part.
    """
    dims = _shape(shape)
    rows, cols = dims if dims else (1, 1)
    kind = "scalar" if not dims else "matrix"
    # An empty label ("") keeps its room (a further grid of the same part lines up with the
    # first); None leaves none.
    label_html = "" if label is None else (
        f'<span class="answer-label">{math_html(label, text=True) if label else ""}</span>')
    # One element, the boxes its tiled background (see .boxes in the stylesheet).
    grid = f'<span class="boxes r{rows} c{cols}"></span>' if cells is None else cells.span_html(rows, cols)
    if dims:
        # The bracket of a matrix's grid: drawn as a matrix's (see matrix_table_html).
        grid = f'<span class="bracket">{grid}</span>'
    part = html.escape(part_id, quote=True)
    return (
        f'<div class="answer answer-{kind}" data-part="{part}" data-rows="{rows}" '
        f'data-cols="{cols}">{label_html}{grid}'
        + (f'<span class="answer-part">{html.escape(part_id if caption is None else caption)}</span>' if caption != "" else "")
        + "</div>"
    )


_EMPTY_GRID = re.compile(r'<div\s+class="answer(?:-grid)?"([^>]*)>\s*</div>')
_ATTR = re.compile(r'data-(part|rows|cols|label)="([^"]*)"')


def expand_empty_grids(body: str) -> str:
    def expand(match: re.Match[str]) -> str:
        attrs = dict(_ATTR.findall(match.group(1)))
        if "part" not in attrs:
            return match.group(0)
        rows, cols = int(attrs.get("rows", 1)), int(attrs.get("cols", 1))
        shape: tuple[int, ...] = () if (rows, cols) == (1, 1) else (rows, cols)
        return answer_grid_html(
            html.unescape(attrs["part"]),
            shape,
            label=html.unescape(attrs["label"]) if attrs.get("label") else None,
        )

    return _EMPTY_GRID.sub(expand, body)


def header_html(
    title: str, student_id: str, variant_code: str, *, name_line: bool = True, set_id: str = "", name: str = ""
) -> str:
    """The top of a student's sheet: title, a line for the name, student id and variant.

    ``name`` (the roster's name column) is printed on the name line; without one the line
    is left for the student to write on. The student id and variant also run in the footer
    of every page (CSS ``string-set``), so a loose page can be matched to its student.
    """
    from ..core.i18n import _

    label = {"name": _("Name"), "student": _("Student ID"), "variant": _("Variant"), "set": _("Set")}
    name = (
        f'<td class="field-label">{label["name"]}</td><td class="field-fill">{html.escape(name)}</td>'
        if name_line
        else ""
    )
    fields_class = "sheet-fields with-name" if name_line else "sheet-fields"
    sid, variant = html.escape(student_id), html.escape(variant_code)
    return (
        '<header class="sheet-header">'
        f'<h1 class="sheet-title">{html.escape(title)}</h1>'
        f'<table class="{fields_class}"><tr>{name}'
        f'<td class="field-label">{label["student"]}</td><td class="student-id">{sid}</td>'
        f'<td class="field-label">{label["variant"]}</td><td class="variant-code">{variant}</td>'
        + (f'<td class="field-label">{label["set"]}</td><td class="set-id">{html.escape(set_id)}</td>' if set_id else "")
        + "</tr></table></header>"
    )
