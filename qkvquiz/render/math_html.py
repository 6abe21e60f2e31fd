"""LaTeX math → HTML that WeasyPrint prints and a reader can search and copy.

* a ``bmatrix`` of plain numbers (decimals, negatives, ``\\infty``) that stands on its own
  becomes a bracketed table of text: its numbers can be searched and copied, and a table
  costs WeasyPrint far less than glyph outlines;
* everything else goes LaTeX → MathML → SVG (:mod:`qkvquiz.render.svg_math`), the SVG the
  background of a box whose transparent text is the expression in plain Unicode, so a PDF
  viewer finds and copies it.

SVG pieces are cached by their LaTeX source for the life of the process: the formulas
and labels that every student's document shares are laid out once, and only the numbers
change from student to student.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from qkvquiz.render.fonts import has_cjk
from qkvquiz.render.svg_math import INFINITY, MINUS, MathRenderError, svg_math_html
from qkvquiz.render.textmath import Unsupported, text_math_html

_log = logging.getLogger(__name__)

#: Body text size; math is laid out at the same size.
FONT_SIZE_PT_DEFAULT = 11.0



# --------------------------------------------------------------------------- math


@dataclass(frozen=True)
class _NumericMatrix:
    rows: tuple[tuple[str, ...], ...]


_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_INF = re.compile(r"([+-]?)\\infty")
# Spacing and alignment helpers that carry no value; a table aligns its own cells.
_CELL_NOISE = re.compile(r"\\(?:h?phantom\{[^{}]*\}|[,;:! ]|quad|qquad)|\{\}|\s+")


def _numeric_cell(cell: str) -> str | None:
    """The cell's display text when it is a plain number or ±∞, else None."""
    text = _CELL_NOISE.sub("", cell)
    if _NUMBER.fullmatch(text):
        return text
    inf = _INF.fullmatch(text)
    if inf:
        return inf.group(1) + INFINITY
    return None


def _numeric_matrix(body: str) -> _NumericMatrix | None:
    if "\\begin" in body:
        return None
    lines = re.split(r"\\\\", body)
    # A trailing "\\" before \end{bmatrix} leaves an empty last row.
    if lines and not lines[-1].strip():
        lines.pop()
    rows: list[tuple[str, ...]] = []
    for line in lines:
        cells = [_numeric_cell(c) for c in line.split("&")]
        if any(c is None for c in cells):
            return None
        rows.append(tuple(c for c in cells if c is not None))
    if not rows or len({len(r) for r in rows}) != 1:
        return None
    return _NumericMatrix(tuple(rows))


_TOKEN = re.compile(
    r"\\begin\{(\w+\*?)\}|\\end\{(\w+\*?)\}|\\left\b|\\right\b|\\[A-Za-z]+|\\.|[{}]|[^\\{}]+"
)


def _split_numeric_matrices(latex: str) -> list[str | _NumericMatrix]:
    """Cut top-level ``bmatrix`` environments of plain numbers out of an expression.

    Only a matrix that stands on its own is cut out: not inside braces, ``\\left…\\right``
    or another environment, and not carrying a sub- or superscript (``B^\\top`` must stay
    one piece of math). The pieces between stay LaTeX.
    """
    pieces: list[str | _NumericMatrix] = []
    depth = 0  # braces + \left/\right + environments: a cut is only safe at depth 0
    start = 0  # where the current LaTeX piece began
    tokens = list(_TOKEN.finditer(latex))
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if depth == 0 and tok.group(1) == "bmatrix":
            # Find the matching \end{bmatrix}.
            level, j = 1, i + 1
            while j < len(tokens) and level:
                if tokens[j].group(1):
                    level += 1
                elif tokens[j].group(2):
                    level -= 1
                j += 1
            if level:
                raise MathRenderError(latex, ValueError("\\begin{bmatrix} without \\end{bmatrix}"))
            end = tokens[j - 1]
            body = latex[tok.end() : end.start()]
            before = latex[start : tok.start()]
            after = latex[end.end() :].lstrip()
            scripted = after[:1] in ("^", "_", "'") or before.rstrip()[-1:] in ("^", "_")
            matrix = None if scripted else _numeric_matrix(body)
            if matrix is not None:
                if before.strip():
                    pieces.append(before)
                pieces.append(matrix)
                start = end.end()
            i = j
            continue
        if tok.group(1) or tok.group(0) in ("{", "\\left"):
            depth += 1
        elif tok.group(2) or tok.group(0) in ("}", "\\right"):
            depth -= 1
        i += 1
    rest = latex[start:]
    if rest.strip() or not pieces:
        pieces.append(rest)
    return pieces


def _matrix_cell_text(text: str) -> str:
    """A number as it prints: a leading sign becomes the minus sign U+2212.

    Plain text (no markup around the sign) keeps every number one word for text
    extraction: spans that drew a longer minus over an ASCII hyphen split "-3" into two
    words, or moved them to another line, in pdftotext. Copied text reads "−0.25".
    """
    if text.startswith("-"):
        text = MINUS + text[1:]
    elif text.startswith("+"):
        text = text[1:]
    return text


#: Advance widths (em) in DejaVu Serif, the body face, of what a matrix of numbers holds.
#: Its digits all have one width (that of FIGURE SPACE) and the full stop half of it.
_GLYPH_EM = {**{d: 0.6362 for d in "0123456789"}, ".": 0.3179, MINUS: 0.8379, INFINITY: 0.833}
#: Fixed-width spaces and their widths (em) in DejaVu Serif, widest first: EM, FIGURE,
#: EN, THREE-PER-EM, PUNCTUATION, FOUR-PER-EM, THIN, SIX-PER-EM, HAIR.
_SPACES_EM = (
    ("\u2003", 1.0), ("\u2007", 0.6362), ("\u2002", 0.5), ("\u2004", 0.3296),
    ("\u2008", 0.3179), ("\u2005", 0.25), ("\u2009", 0.1997), ("\u2006", 0.167),
    ("\u200a", 0.0996),
)
#: Space between two columns of a matrix (em), as TeX's bmatrix leaves about.
MATRIX_COLUMN_GAP_EM = 0.84


def _text_em(text: str) -> float:
    return sum(_GLYPH_EM.get(ch, 0.6362) for ch in text)


def _space(width_em: float) -> str:
    """Fixed-width spaces that add up to ``width_em`` (to within 0.05 em)."""
    out = []
    left = width_em
    for char, width in _SPACES_EM:
        while left >= width - 0.05:
            out.append(char)
            left -= width
    return "".join(out)


def matrix_table_html(rows: Sequence[Sequence[str]]) -> str:
    """A matrix of plain numbers (strings as they should print) in brackets.

    Each row is one line of text, its entries centred in their columns by fixed-width
    spaces (U+2007 FIGURE SPACE is as wide as a digit, and so on), the lines one under
    the other in a ``white-space: pre`` box. A CSS table of one element per entry looked
    the same and cost four times as much to lay out; as text, each row also reads left to
    right when searched or copied. Spans, not ``<table>``: an HTML parser closes an open
    ``<p>`` at ``<table>``, which would break a sentence around an inline matrix.

    The brackets are a border all round the outer box; the inner box, on white, covers
    the middle of its top and bottom and leaves the corner ticks (four gradients drew the
    ticks before and cost more than the whole table).
    """
    cells = [[_matrix_cell_text(c) for c in row] for row in rows]
    ncols = max((len(r) for r in cells), default=0)
    widths = [max((_text_em(r[j]) for r in cells if j < len(r)), default=0.0) for j in range(ncols)]
    lines = []
    for row in cells:
        parts = []
        carry = 0.0  # space still owed to the right of the previous entry
        for j, cell in enumerate(row):
            spare = widths[j] - _text_em(cell)
            gap = carry + (MATRIX_COLUMN_GAP_EM if j else 0.0) + spare / 2
            parts.append(_space(gap) + html.escape(cell))
            carry = spare / 2
        parts.append(_space(carry))
        lines.append("".join(parts))
    return f'<span class="bmat"><span class="bm">{chr(10).join(lines)}</span></span>'


@lru_cache(maxsize=16384)
def _svg_piece_cached(latex: str, display: bool, font_size_pt: float) -> str:
    return svg_math_html(latex, display, font_size_pt)


def math_html(
    latex: str,
    *,
    display: bool = False,
    font_size_pt: float = FONT_SIZE_PT_DEFAULT,
    text: bool = False,
) -> str:
    """One LaTeX expression as inline HTML (SVG pictures and matrix tables).

    Numeric matrices are cut out first (they differ per student); the LaTeX around them
    (``Q =``, ``, \\quad K =``) and every other expression is laid out once per process and
    cached by ``(latex, display, font_size_pt)``.

    With ``text``, a piece that :mod:`qkvquiz.render.textmath` can set as HTML text is set
    so (an answer key's worked steps: many expressions, each with its student's numbers,
    where pictures would cost ten times as much); the rest are pictures as above.
    """
    pieces = _split_numeric_matrices(latex.strip())
    if display and sum(isinstance(p, _NumericMatrix) for p in pieces) > 1:
        # Several matrices side by side (Q =, K =, V = …) may be wider than the page: each
        # labelled matrix is one unbreakable group, and the line may wrap between groups.
        out = []
        previous: list[str | _NumericMatrix] = []
        for k, group in enumerate(_matrix_groups(pieces)):
            inner = _pieces_html(group, display, font_size_pt, text)
            first = group[0]
            listed = bool(previous) and isinstance(previous[-1], str) and previous[-1].rstrip().endswith(",")
            previous = group
            if k and isinstance(first, _NumericMatrix) and not listed:
                # A factor of a product ("S₀k₁ = [..][..]"): next to the one before, as TeX
                # sets them, with a zero-width break between in case the line is full.
                out.append(f'{ZERO_WIDTH_SPACE}<span class="math-group cont">{inner}</span>')
            elif k and isinstance(first, str) and re.match(r"\s*(?:[=+\-<>]|\\(?:approx|cdot|odot|times|le|ge)(?![A-Za-z]))", first):
                # The rest of one equation ("= [..]", "+ [..]"): spaced as its operator is.
                out.append(f' <span class="math-group cont">{inner}</span>')
            else:
                out.append(f'{" " if k else ""}<span class="math-group">{inner}</span>')
        return "".join(out)
    body = _pieces_html(pieces, display, font_size_pt, text)
    if display and breakable(body):
        definitions = _quad_separated(latex.strip())
        if len(definitions) > 1:
            # A long display of several definitions (``G = KK^\top, \quad A = …``) wraps
            # between them, each kept whole, rather than inside one.
            return " ".join(
                f'<span class="math-group">{_pieces_html(_split_numeric_matrices(d), display, font_size_pt, text)}</span>'
                for d in definitions
            )
    return body


_QUAD = re.compile(r"\\q?quad(?![A-Za-z])")


def _quad_separated(latex: str) -> list[str]:
    """``latex`` cut at each ``\\quad`` or ``\\qquad`` outside braces (a comma before one stays
    with the part it ends); one part where there is none."""
    parts, depth, start, at = [], 0, 0, 0
    while at < len(latex):
        char = latex[at]
        if char == "\\":
            match = _QUAD.match(latex, at)
            if match and depth == 0:
                parts.append(latex[start:at].strip())
                start = at = match.end()
                continue
            at += 2
            continue
        depth += (char == "{") - (char == "}")
        at += 1
    parts.append(latex[start:].strip())
    return [part for part in parts if part]


#: A comma after a matrix, Latin or full-width: it stays with the matrix it follows.
_LEADING_COMMA = re.compile(r"\s*([,\uff0c])")
_LEADING_SPACE = re.compile(r"(?:\s+|\\(?:qquad|quad|[,;: ])(?![A-Za-z]))+")


def _matrix_groups(
    pieces: list[str | _NumericMatrix],
) -> list[list[str | _NumericMatrix]]:
    """Pieces cut into groups that each end with a matrix; a comma that follows a matrix
    stays with it, and the space that separates two groups becomes the gap between them."""
    groups: list[list[str | _NumericMatrix]] = [[]]
    for piece in pieces:
        if isinstance(piece, str) and groups[-1] and isinstance(groups[-1][-1], _NumericMatrix):
            comma = _LEADING_COMMA.match(piece)
            if comma:
                groups[-1].append(comma.group(1))
                piece = piece[comma.end() :]
            piece = _LEADING_SPACE.sub("", piece, count=1) if _LEADING_SPACE.match(piece) else piece
            if piece.strip():
                groups.append([piece])
            else:
                groups.append([])
            continue
        if isinstance(piece, _NumericMatrix) and groups[-1] and isinstance(groups[-1][-1], _NumericMatrix):
            groups.append([])
        groups[-1].append(piece)
    groups = [g for g in groups if g]
    # What follows the last matrix (a full stop) stays with it.
    if len(groups) > 1 and not any(isinstance(p, _NumericMatrix) for p in groups[-1]):
        groups[-2].extend(groups.pop())
    return groups


#: A piece that is only punctuation, set as text: the Latin comma, and the full-width marks
#: that end or part a Chinese sentence (、。，：；！？).
_PUNCTUATION_ONLY = re.compile(r",|[\u3001\u3002\uff0c\uff1a\uff1b\uff01\uff1f]+")


def _pieces_html(
    pieces: Sequence[str | _NumericMatrix], display: bool, font_size_pt: float, text: bool
) -> str:
    parts = []
    for piece in pieces:
        if isinstance(piece, _NumericMatrix):
            parts.append(matrix_table_html(piece.rows))
            continue
        source = piece.strip()
        if _PUNCTUATION_ONLY.fullmatch(source):
            # Punctuation after a matrix (",", or the "。" that ends a Chinese sentence): plain
            # text in the body's faces. The pictures' math face has no CJK glyphs and drew an
            # empty box for "。" and "，".
            parts.append(html.escape(source))
            continue
        # Chinese words in a formula (a translated \text{…}) are set as text where they can be:
        # the pictures' math font has no CJK glyphs and would draw empty boxes.
        if text or has_cjk(source):
            after_matrix = bool(parts) and parts[-1].startswith('<span class="bmat">')
            set_as_text = _text_piece_cached(source, display, after_matrix)
            if set_as_text is not None:
                parts.append(set_as_text)
                continue
        if has_cjk(source):
            _say_cjk_in_picture(source)
        parts.append(_svg_piece_cached(source, display, float(font_size_pt)))
    return "".join(parts)


@lru_cache(maxsize=256)
def _say_cjk_in_picture(source: str) -> None:
    """Say (once per expression) that a picture of math holds CJK text: its face has no such
    glyphs, so the page would show empty boxes where nothing else warns of them."""
    _log.warning("math with CJK text is drawn as a picture whose face lacks those glyphs "
                 "(empty boxes): %s", source)


@lru_cache(maxsize=16384)
def _text_piece_cached(source: str, display: bool, continues: bool) -> str | None:
    """A piece set as text (:func:`text_math_html`), or None where it cannot be: a key sets
    the same pieces for every student (``S_{ij} =``, ``\\sqrt{d_k}``), nine in ten of them."""
    try:
        return text_math_html(source, display=display, continues=continues)
    except Unsupported:
        return None


def math_cache_info() -> Any:
    """Hits and misses of the expression cache (``functools`` cache statistics)."""
    return _svg_piece_cached.cache_info()


def clear_math_cache() -> None:
    """Forget every rendered expression."""
    _svg_piece_cached.cache_clear()
    _text_piece_cached.cache_clear()


#: Characters of text in one formula from which it may break across lines (class ``brk``):
#: a line holds about 80, and a longer formula kept whole ran past the right margin (a
#: gradient written as a sum of rows, the delta rule's chain of definitions).
BREAK_FORMULA = 50
_TAG = re.compile(r"<[^>]*>")
#: The rows of a matrix set as text (:func:`matrix_table_html`), one line each.
MATRIX_ROWS = re.compile(r'<span class="bm">([^<]*)</span>')
#: A break that prints nothing (and is not in a PDF's text).
ZERO_WIDTH_SPACE = "\u200b"


def tags_removed(markup: str) -> str:
    """``markup`` (our own HTML) with its tags taken out: the text it shows, entities as written."""
    return _TAG.sub("", markup)


def breakable(body: str) -> bool:
    """Whether a formula's HTML is long enough to break across lines (a matrix counts its widest row)."""
    rows = MATRIX_ROWS.sub(lambda m: max(m.group(1).split("\n"), key=len), body)
    return len(tags_removed(rows)) >= BREAK_FORMULA
