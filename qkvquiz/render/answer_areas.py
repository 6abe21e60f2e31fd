"""Answer areas: under each asked part of a printed worksheet, boxes of the part's shape.

One box for a number, a row for a vector, a bracketed grid for a matrix, one grid per matrix
for a stack (:func:`answer_area_html`), cut into tiles of at most :data:`ANSWER_TILE` boxes.
An area goes right after the sentence that names the part's id (every bundled template writes
``part `q1.scores```), or, for a template that names no id, at the end of its problem
(:func:`place_answer_areas`). An area is drawn from the part's id, shape and symbol alone, never
from a value, so a student's pages show nothing that the Markdown worksheet does not.
"""

from __future__ import annotations

import html
import itertools
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from html.parser import HTMLParser

import numpy as np
from markdown_it.common.utils import escapeHtml

from ..core.i18n import N_, _
from ..core.places import where
from ..spec_types import WorkSpace
from ..worksheet import Worksheet
from .boxes import answer_grid_html
from .givens_in_view import PART_ANCHOR
from .latex import label_symbol, num
from .markdown import in_spec_language, ragged_shape
from .math_html import MATRIX_ROWS
from .printed import Comb, GridCells
from .page import ANSWER_ROW_PX, BOX_PX, GRID_FRAME_PX, LABEL_ROOMS_PX, MAX_COLUMN_BOXES, AnswerColumn

#: Boxes per row and rows per grid; a larger part is split into several grids (a 16-wide
#: row of 1.6 cm boxes would not fit on the page, nor could a student write in 1 cm boxes).
ANSWER_TILE = 8


def _ranges(n: int, per: int = ANSWER_TILE) -> list[range]:
    return [range(lo, min(lo + per, n)) for lo in range(0, n, per)]


# The part of a side a tile covers: one place, or a range of places (first–last, from 1).
_SPANS = {
    "rows": (N_("row %(n)s"), N_("rows %(first)s\u2013%(last)s")),
    "columns": (N_("column %(n)s"), N_("columns %(first)s\u2013%(last)s")),
    "entries": (N_("entry %(n)s"), N_("entries %(first)s\u2013%(last)s")),
}


def _span(word: str, r: range, n: int) -> str:
    """``"columns 9–16"`` for a tile of a larger side; ``""`` when the tile is the whole side."""
    if len(r) == n:
        return ""
    one, several = _SPANS[word]
    if len(r) == 1:
        return _(one) % {"n": r.start + 1}
    return _(several) % {"first": r.start + 1, "last": r.stop}


def _caption(*places: str) -> str:
    """A grid's caption: where in its part the grid is (``matrix 2, columns 9–16``); ``""`` for a
    part's only grid. The part's name is not printed: its letter and its label say which part it
    is (an internal id such as ``theory-softmax_jacobian.probs`` is no word for a page)."""
    caption = ""
    for place in places:
        # Translators: a grid's caption, one place after another ("matrix 2, columns 9–16").
        caption = place if not caption else _("%(caption)s, %(place)s") % {"caption": caption, "place": place}
    return caption


def points_html(points: float) -> str:
    """A part's points, printed once, in the right margin beside its letter (as an exam sheet
    has them): ``<span class="part-points">2 pt</span>``."""
    return '<span class="part-points">' + html.escape(_("%(points)s pt") % {"points": num(points, 2)}) + "</span>"


_POINTS_SPAN = re.compile(r'<span class="part-points">[^<]*</span>')


def answer_area_html(part_id: str, shape: Sequence[int], symbol: str, points: float | None = None,
                     comb: Comb | None = None) -> str:
    """The boxes for one asked part, labelled ``symbol =`` (LaTeX), after its points (for the
    right margin) where given.

    A number is one box, a vector a row of boxes, a matrix a bracketed grid. A stack of
    matrices (one per head, chunk or time step) is one grid per matrix, side by side where
    they fit, each captioned with its place as the grader names it (``matrix 2``). A side
    longer than :data:`ANSWER_TILE` is cut into grids of at most that many boxes
    (``columns 9–16``), so that every box stays big enough to write in. With ``comb`` (the
    printed worksheet) every box is that comb of cells (:mod:`qkvquiz.render.printed`).
    """
    shape = tuple(int(n) for n in shape)
    label = f"{symbol} ="
    worth = "" if points is None else points_html(points)
    # A row of combs (the printed sheet) holds as many as the text's width does, at most a tile's.
    across = ANSWER_TILE if comb is None else comb.per_row
    fits = len(shape) <= 2 and all(n <= ANSWER_TILE for n in shape) and (not shape or shape[-1] <= across)
    if fits:
        cells = None if comb is None else GridCells(part_id, comb, (0,) * len(shape), len(shape))
        return worth + answer_grid_html(part_id, shape, label=label, caption="", cells=cells)
    if len(shape) == 1:
        shape2 = (1, shape[0])
    else:
        shape2 = shape[-2:]
    grids = []
    for lead in itertools.product(*(range(n) for n in shape[:-2])):
        # Each matrix of a stack is labelled with its own name (S₁ =, S₂ =), as the prompt
        # names them; a further tile of the same matrix keeps the label's room, unlabelled,
        # so that its boxes line up with the tile before.
        own = _indexed(symbol, lead) + " =" if lead else label
        for rows in _ranges(shape2[0]):
            for cols in _ranges(shape2[1], across):
                first_tile = rows.start == 0 and cols.start == 0
                words = [
                    # A matrix's first tile says which it is by its label (S₂ =); a further
                    # tile, unlabelled, by its caption.
                    where(lead, len(shape)) if lead and not first_tile else "",
                    "" if len(shape) == 1 else _span("rows", rows, shape2[0]),
                    _span("entries" if len(shape) == 1 else "columns", cols, shape2[1]),
                ]
                tile: tuple[int, ...] = (len(cols),) if len(shape) == 1 else (len(rows), len(cols))
                base = (cols.start,) if len(shape) == 1 else (*lead, rows.start, cols.start)
                cells = None if comb is None else GridCells(part_id, comb, base, len(tile))
                grids.append(
                    answer_grid_html(
                        part_id,
                        tile,
                        label=own if first_tile else "",
                        caption=_caption(*(w for w in words if w)),
                        cells=cells,
                    )
                )
    part = html.escape(part_id, quote=True)
    return f'{worth}<div class="answer-set" data-part="{part}">{"".join(grids)}</div>'


#: A symbol that takes an index as a subscript: a letter, maybe under an accent or after ∇.
_SUBSCRIPTABLE = re.compile(r"(?:\\nabla\s*)?(?:\\(?:tilde|hat|bar)\s*)?(?:[A-Za-z]|\\[a-zA-Z]+|\{[A-Za-z]\})")
#: A symbol that names its matrices by a letter standing for the index: ``S_t`` (the state after
#: token t), ``S^{(h)}`` (head h). The letter is replaced by the number.
_INDEX_LETTER = re.compile(r"(_\{?|\^\{\()([a-z])(\}?|\)\})$")


def _indexed(symbol: str, lead: Sequence[int]) -> str:
    """The name of one matrix of a stack, counting from 1, as the prompt names it: ``S_{2}``
    for the second of ``S_t``, ``S^{(2)}`` for head 2 of ``S^{(h)}``, ``A_{2}`` for the second of
    ``A``; ``W_{Q}^{(2)}`` where the symbol has a subscript of its own."""
    index = ",".join(str(i + 1) for i in lead)
    symbol = symbol.strip()
    letter = _INDEX_LETTER.search(symbol)
    if letter is not None and len(lead) == 1:
        close = "}" if letter.group(1) == "_{" else letter.group(3)
        opening = "_{" if letter.group(1).startswith("_") else letter.group(1)
        return symbol[: letter.start()] + opening + index + (close if close else "}")
    if _SUBSCRIPTABLE.fullmatch(symbol):
        return f"{symbol}_{{{index}}}"
    return f"{{{symbol}}}^{{({index})}}"


def _part_code(part_id: str) -> re.Pattern[str]:
    """``<code>part_id</code>`` as Markdown renders it, with or without the class our renderer
    gives a part id (``part-id``: one unbreakable run)."""
    return re.compile(r'<code(?: class="part-id")?>' + re.escape(escapeHtml(part_id)) + "</code>")


def answer_points(problem_html: str, part_ids: Sequence[str]) -> list[int | None]:
    """Where each part's answer area goes in ``problem_html``: the end of the list item, or
    just after the paragraph, that names ``<code>part_id</code>`` (as every bundled
    template writes it), in the order of the parts; None for a part named nowhere."""
    points: list[int | None] = []
    cursor = 0
    for part_id in part_ids:
        needle = _part_code(part_id)
        found = needle.search(problem_html, cursor) or needle.search(problem_html)
        if found is None:
            points.append(None)
            continue
        after = found.end()
        ends = [(i, tag) for tag in ("</li>", "</p>") if (i := problem_html.find(tag, after)) >= 0]
        if not ends:
            points.append(None)
            continue
        end, tag = min(ends)
        # In a list item the boxes stay inside it (indented under its bullet); after a
        # paragraph they follow it.
        insert = end if tag == "</li>" else end + len(tag)
        points.append(insert)
        cursor = insert
    return points


def answer_column(areas_html: Iterable[str]) -> AnswerColumn:
    """The answer column of a part with these areas, at the right edge of the text: as many
    boxes wide as its widest grid with at most ``MAX_COLUMN_BOXES`` to a row (wider grids and
    tall sets of grids go under their sentence), its labels' room as wide as its widest label,
    room for its captions."""
    widest, label, caption = 1, 0.0, 0.0
    for area in areas_html:
        if _goes_under(area):
            continue  # these boxes are not in the column
        for grid in _GRID.finditer(area):
            columns = int(grid.group(2))
            if columns <= MAX_COLUMN_BOXES:
                widest = max(widest, columns)
                label = max(label, _label_px(grid.group(1)))
                under = _CAPTION.search(area, grid.end())
                if under is not None:
                    caption = max(caption, len(html.unescape(under.group(1))) * _CAPTION_CHAR_PX)
    # The caption under the boxes starts at their left edge: the column holds it too (a long
    # part id under one box widened its cell and pushed the box out of line).
    widest = max(widest, min(MAX_COLUMN_BOXES, math.ceil((caption - GRID_FRAME_PX) / BOX_PX)))
    room = next((k for k, px in enumerate(LABEL_ROOMS_PX) if label <= px), len(LABEL_ROOMS_PX) - 1)
    return AnswerColumn(widest, room)


#: A grid of boxes: its label's HTML and how many boxes a row has.
_GRID = re.compile(r'<span class="answer-label">(.*?)</span>(?:<span class="bracket">)?'
                   r'<span class="boxes r\d+ c(\d+)[ "]')
_TAG = re.compile(r"<[^>]+>")
_CAPTION = re.compile(r'<span class="answer-part">([^<]*)</span>')
#: A caption's character (7 pt sans), on average, in CSS px.
_CAPTION_CHAR_PX = 5.0
# (A printed grid of combs has a class and an id more: qkvquiz/render/printed.py.)
_BOXES_WIDE = re.compile(r'<span class="boxes r\d+ c(\d+)[ "]')
_BOXES_ROWS = re.compile(r'<span class="boxes r(\d+) c\d+[ "]')
#: The most rows of boxes a set of grids stacks in the answer column (two 4×4 heads, four
#: 2×2 states); a taller set would hold a whole part on one page, so it goes under its sentence.
MAX_STACKED_ROWS = 8


def _goes_under(area_html: str) -> bool:
    """Whether a part's boxes go under its sentence, from the text's edge, rather than in the
    answer column: a grid wider than the column (5 to 8 boxes to a row), or a set of grids
    taller than :data:`MAX_STACKED_ROWS` one under the other (under its sentence it may break
    between its grids)."""
    return any(int(c) > MAX_COLUMN_BOXES for c in _BOXES_WIDE.findall(area_html)) or (
        'class="answer-set"' in area_html and sum(map(int, _BOXES_ROWS.findall(area_html))) > MAX_STACKED_ROWS)


def _label_px(label_html: str) -> float:
    """About how wide a grid's label is, in CSS px: a formula drawn as a picture states its
    width; text counts by its characters (a fraction's two lines both, so a little over)."""
    pictures = [float(w) for w in _PICTURE_WIDTH.findall(label_html)]
    text = html.unescape(_TAG.sub("", re.sub(r'<span class="math-svg".*?</span>', "", label_html)))
    return sum(pictures) + _width_units(text.strip()) * _LABEL_CHAR_PX


def place_answer_areas(problem_html: str, areas: Sequence[tuple[str, str]]) -> str:
    """Put each ``(part_id, area_html)`` after the sentence that names the part.

    The sentence is the list item or paragraph holding ``<code>part_id</code>``, as every
    bundled template writes it; areas follow one another in the order of the parts. An
    area whose part is not named anywhere goes at the end of the problem. A part's boxes
    stand at the right edge of the text, as an exam sheet has them, in a column as wide as
    they need (:func:`answer_column`): its sentence takes the rest of the line.
    """
    points = answer_points(problem_html, [part_id for part_id, _area in areas])
    # Areas that go to the end of one list item: that item becomes a row, its text on the
    # left and its boxes beside it (below it where they leave the text too little room).
    by_item: dict[int, list[str]] = {}
    named: dict[int, list[str]] = {}
    unplaced: list[str] = []
    for (part_id, area), at in zip(areas, points):
        if at is None:
            unplaced.append(area)
        else:
            by_item.setdefault(at, []).append(area)
            named.setdefault(at, []).append(part_id)
    out, last = [], 0
    for at in sorted(by_item):
        joined = "".join(by_item[at])
        # Room to work spans the text's width, under the sentence and its boxes.
        spaces = "".join(_WORK_SPACE_DIV.findall(joined))
        joined = _WORK_SPACE_DIV.sub("", joined)
        opening = problem_html.rfind("<li", last, at)
        if problem_html.startswith("</li>", at) and opening >= 0 and problem_html.find("</li>", opening) == at:
            start = problem_html.index(">", opening) + 1
            column = answer_column([joined])
            beside = column.sentence_px
            # A formula too long to share its line with the answer column puts the boxes under
            # the sentence, in the same column (it cannot break: the boxes would be pushed
            # past the margin).
            sentence = problem_html[start:at]
            longest = _longest_formula(sentence)
            unbreakable = max(longest * _MATH_CHAR_PX, *map(float, _PICTURE_WIDTH.findall(sentence)), 0.0)
            # A sentence that would take three lines or more beside its boxes and fits on one
            # or two of the whole width takes the width, its boxes under it at the right, as an
            # exam sheet sets a long question over a large grid.
            words_px = _sentence_px(drop_answer_sentences(sentence, named[at]))
            squeezed = words_px > 2 * beside and words_px <= 2 * ANSWER_ROW_PX
            wide = longest > WIDE_FORMULA or unbreakable > beside or squeezed
            # Boxes that are not in the column go under the sentence ("under"); boxes under a
            # long formula keep to the column ("wide"); the rest, sets of grids one under the
            # other too, stand beside their sentence.
            kind = ("part-row under" if _goes_under(joined) else "part-row wide " + column.css_class if wide
                    else "part-row " + column.css_class)
            # The points open the row, so that they stand in the margin level with its letter
            # (and go to the next page with it).
            worth = "".join(_POINTS_SPAN.findall(joined))
            joined = _POINTS_SPAN.sub("", joined)
            out += [
                problem_html[last:start],
                # The row's id is an anchor: the PDF writer reads the page each part opens on
                # (qkvquiz/render/givens_in_view.py).
                f'<div class="{kind}" id="{PART_ANCHOR}{html.escape(named[at][0], quote=True)}">'
                f'<div class="part-text">{worth}',
                problem_html[start:at],
                f'</div><div class="part-boxes">{joined}</div></div>{spaces}',
            ]
        else:
            out += [problem_html[last:at], joined, spaces]
        last = at
    out.append(problem_html[last:])
    if unplaced:
        out.append('<div class="answers">' + "".join(unplaced) + "</div>")
    return "".join(out)


#: Characters of one formula (text math) in a part's sentence beyond which the sentence takes
#: the whole width and its boxes go under it (a Chinese character counts as two).
WIDE_FORMULA = 36


#: The width of a character of a formula (11 pt serif), on average, in CSS pixels: for telling
#: whether a part's sentence fits beside the answer column.
_MATH_CHAR_PX = 6.6
#: The same for a grid's label, whose words ("shape", "Var") are upright and wider.
_LABEL_CHAR_PX = 7.6
#: A formula drawn as a picture states its width (qkvquiz/render/html_page.py).
_PICTURE_WIDTH = re.compile(r'class="math-svg" style="width:([0-9.]+)px')


#: The width of a character of a part's sentence (11 pt serif, words and spaces), on average,
#: in CSS pixels.
_TEXT_CHAR_PX = 7.5


def _sentence_px(sentence_html: str) -> float:
    """About how wide a part's sentence is on one line, in CSS px, as the page prints it (the
    caller leaves out the templates' "Answer: …" sentence, :func:`drop_answer_sentences`; what
    follows it, "The masked entries together carry 50% of this part.", is printed and counts)."""
    return _width_units(html.unescape(_TAG.sub("", sentence_html)).strip()) * _TEXT_CHAR_PX


def _width_units(text: str) -> int:
    """How many average Latin characters ``text`` is as wide as: a Chinese character (a wide or
    full-width one) counts twice."""
    return len(text) + sum(1 for ch in text if ch >= "\u1100" and unicodedata.east_asian_width(ch) in "WF")


#: A problem at most this tall (CSS px, by :func:`problem_height_px`; three quarters of an A4
#: page's text) is kept whole, on the next page where it does not fit on this one, as a typeset
#: exam keeps a question; a taller one breaks between its parts (``.problem.whole`` in the
#: stylesheet): moved whole, it left a page with nothing but the sheet's title.
WHOLE_PROBLEM_PX = 750.0
_DISPLAYS = re.compile(r'<(?:div|span) class="math-display">.*?</(?:div|span)>\s*(?=<|$)', re.DOTALL)


def problem_height_px(body_html: str) -> float:
    """About how tall a worksheet problem prints, in CSS px, erring high: its text at 80
    characters a line (a part's sentence at 40, beside its boxes), each display as tall as its
    tallest matrix, a part as tall as the taller of its sentence and its grids with captions."""

    def text_px(html_: str, per_line: int) -> float:
        text = _TAG.sub("", MATRIX_ROWS.sub("", html_))
        return 20.0 * (len(text) // per_line + 1) if text.strip() else 0.0

    def grids_px(html_: str) -> float:
        return sum(35.5 * int(rows) + 18.0 for rows in _BOXES_ROWS.findall(html_))

    parts = re.findall(r"<li class=\"pi\">.*?</li>", body_html, re.DOTALL)
    rest = re.sub(r"<li class=\"pi\">.*?</li>", "", body_html, flags=re.DOTALL)
    height = 34.0 * rest.count("<h3") + text_px(_DISPLAYS.sub("", rest), 80)
    for display in _DISPLAYS.findall(rest):
        rows = [m.count("\n") + 1 for m in MATRIX_ROWS.findall(display)]
        height += 18.0 * max(rows, default=1) + 20.0
    for part in parts:
        height += max(text_px(part, 40), grids_px(part)) + 10.0
    return height + grids_px(rest)


class _FormulaLengths(HTMLParser):
    """The text length of each outermost ``<span class="... tm ...">`` (a formula set as text)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth, self.lengths = 0, []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "span":
            return
        if self.depth:
            self.depth += 1
        elif "tm" in (dict(attrs).get("class") or "").split():
            self.depth = 1
            self.lengths.append(0)

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and self.depth:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.lengths[-1] += _width_units(data)


def _longest_formula(sentence_html: str) -> int:
    parser = _FormulaLengths()
    parser.feed(sentence_html)
    parser.close()
    return max(parser.lengths, default=0)


def drop_answer_sentences(problem_html: str, part_ids: Sequence[str]) -> str:
    """Without the templates' "Answer: a 3×3 matrix, part ``q2.scores`` (2 pt)." where the
    part's boxes say the same (their shape, and the points in the margin): each
    prompt is printed once, next to its boxes. The Markdown worksheet keeps the sentence.

    In another language the sentence starts with the translation of "Answer:" and ends with
    the points in brackets after the part's id ("答案：3×3 矩阵，小题 ``q2.scores``（2 分）。", its
    closing bracket at half width before the full stop: :mod:`qkvquiz.render.html_page`)."""
    # Translators: the word that starts the templates' sentence naming a part's answer
    # ("Answer: a 3×3 matrix, part `q2.scores` (2 pt)."), exactly as their translation starts it.
    word = _("Answer:")
    for part_id in part_ids:
        code = _part_code(part_id).pattern
        # The English sentence (bundled templates in English, or a user's English template).
        patterns = [r"\s*Answer: (?:(?!</?(?:li|p|div)\b).)*?,? part " + code + r"[ \u00a0]\([^()]*\bpt\)\."]
        if word != "Answer:":
            patterns.insert(0, r"\s*" + re.escape(word) + r"\s*(?:(?!</?(?:li|p|div)\b).)*?" + code
                            + r"\s*\u2060?[(（][^()（）<]*(?:<span class=\"halt\">)?[)）](?:</span>)?[.。]?")
        for pattern in patterns:
            problem_html, found = re.compile(pattern, re.DOTALL).subn("", problem_html, count=1)
            if found:
                break
    return problem_html


_WORK_SPACE_DIV = re.compile(r'<div class="work-space[^"]*" style="[^"]*"></div>')


def work_space_html(space: WorkSpace | None) -> str:
    """Blank room to work in: a light frame of the asked height, ruled when asked in lines."""
    if space is None:
        return ""
    ruled = " ruled" if space.lines else ""
    return f'<div class="work-space{ruled}" style="height:{space.css_height()}"></div>'


def partial_area_html(part_id: str, entries: Sequence[Sequence[int]], symbol: str, points: float,
                      comb: Comb | None = None) -> str:
    """A box for each asked entry of a part that asks some entries only, labelled with the
    entry's place (``S_{1,2} =``, counting from 1), side by side where they fit: a student sees
    boxes for what is asked and nothing else."""
    boxes = []
    for entry in entries:
        place = ",".join(str(i + 1) for i in entry)
        cells = None if comb is None else GridCells(part_id, comb, tuple(entry), 0)
        boxes.append(answer_grid_html(part_id, (), label=f"{{{symbol}}}_{{{place}}} =", caption="", cells=cells))
    return (points_html(points)
            + f'<div class="answer-set" data-part="{html.escape(part_id, quote=True)}">{"".join(boxes)}</div>')


def ragged_area_html(part_id: str, chunks: Sequence[Sequence[int]], symbol: str, points: float,
                     comb: Comb | None = None) -> str:
    """One grid per chunk of a delta sequence whose last chunk is shorter, each at its own
    size and captioned with its place as the grader names it (``matrix 2``)."""
    grids = [answer_grid_html(part_id, shape, label=f"{symbol} =" if c == 0 else None,
                              caption=_caption(where((c,), len(shape) + 1)),
                              cells=None if comb is None else GridCells(part_id, comb, (c, *(0,) * len(shape)),
                                                                        len(shape)))
             for c, shape in enumerate(chunks)]
    return (points_html(points)
            + f'<div class="answer-set" data-part="{html.escape(part_id, quote=True)}">{"".join(grids)}</div>')


@in_spec_language
def problem_areas(
    ws: Worksheet, student: int, work_space: WorkSpace | None = None,
    combs: Mapping[str, Comb | None] | None = None,
) -> list[list[tuple[str, str]]]:
    """Each item's answer areas for one student: ``(part_id, html)`` in the order asked,
    each followed by its work space where the item (else ``work_space``) asks for one per
    part. With ``combs`` (the printed worksheet: :func:`qkvquiz.render.printed.part_combs`) a
    part's boxes are combs of cells."""
    out = []
    for item, env in zip(ws.spec.items, ws.envs):
        space = item.work_space or work_space
        after = work_space_html(space) if space is not None and space.per == "part" else ""
        areas = []
        # A delta sequence with a shorter last chunk: which entries of a step are real.
        present = item.family.extra.get("present")
        taken = set(item.params) | {given.symbol.strip() for given in item.family.givens}
        for part in item.parts:
            comb = None if combs is None else combs.get(part.id)
            shape = np.shape(env[part.step][student])
            step = item.family.step(part.step)
            symbol = label_symbol(step.symbol, len(shape))
            if symbol != step.symbol and symbol.strip() in taken:
                # The lower-case letter already names something of the problem (a count N of
                # weights beside n tokens): the label keeps the step's own letter.
                symbol = step.symbol
            if step.kind == "shape" and comb is None:  # one box, for "2×4"
                area = points_html(part.points) + answer_grid_html(part.id, (), label=f"{step.symbol} =", caption="")
            elif step.kind == "shape":  # on the printed sheet a comb for each size: [rows, columns]
                area = answer_area_html(part.id, shape, step.symbol, part.points, comb)
            elif present is not None and (real := present(item.params, part.step, shape)) is not None:
                area = ragged_area_html(part.id, ragged_shape(shape, real), symbol, part.points, comb)
            elif part.entries is not None:
                area = partial_area_html(part.id, part.entries, step.symbol, part.points, comb)
            else:
                area = answer_area_html(part.id, shape, symbol, part.points, comb)
            areas.append((part.id, area + after))
        out.append(areas)
    return out


