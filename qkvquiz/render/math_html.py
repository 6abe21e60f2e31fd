"""LaTeX math → HTML that WeasyPrint prints and a reader can search and copy.

* a ``bmatrix`` of plain numbers (decimals, negatives, ``\\infty``) that stands on its own
  becomes a bracketed table of text: its numbers can be searched and copied, and a table
  costs WeasyPrint far less than glyph outlines;
* everything else goes LaTeX → MathML (latex2mathml) → SVG (ziamath, STIX Two Math), with
  a few MathML fixes first. The SVG is the background of a box whose transparent text is
  the expression in plain Unicode (``S = QKᵀ/√d_k``), so a PDF viewer finds and copies it.

SVG pieces are cached by their LaTeX source for the life of the process: the formulas
and labels that every student's document shares are laid out once, and only the numbers
change from student to student.
"""

from __future__ import annotations

import base64
import html
import re
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import Any

from qkvquiz.render.fonts import has_cjk
from qkvquiz.render.textmath import Unsupported, text_math_html

#: Body text size; math is laid out at the same size.
FONT_SIZE_PT_DEFAULT = 11.0
#: CSS pixels per point (CSS px are 1/96 in; ziamath sizes are in px).
PX_PER_PT = 96.0 / 72.0
#: Column gap inside SVG matrices (ziamath's default of 0.3em crowds negative numbers).
MATRIX_COLUMN_SPACING = "1em"

_MINUS = "\u2212"
_NABLA = "\u2207"
_INFINITY = "\u221e"


class MathRenderError(ValueError):
    """A LaTeX expression could not be laid out."""

    def __init__(self, latex: str, cause: BaseException) -> None:
        super().__init__(f"cannot typeset math {latex!r}: {cause}")
        self.latex = latex



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
        return inf.group(1) + _INFINITY
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


_MATHML_NS = "{http://www.w3.org/1998/Math/MathML}"
_SCRIPT_ARITY = {"msub": 2, "msup": 2, "msubsup": 3, "munder": 2, "mover": 2, "munderover": 3}
_FENCES_CLOSE = {")", "]", "}", "|", "\u2016", "\u27e9", "\u230b", "\u2309"}


def _strip_ns(root: ET.Element) -> None:
    for el in root.iter():
        if el.tag.startswith(_MATHML_NS):
            el.tag = el.tag[len(_MATHML_NS) :]


def _improve_mathml(root: ET.Element) -> None:
    """MathML fixes that make ziamath's layout read like TeX.

    * ∇ and ∞ are symbols, not operators: as ``<mi>`` they get no operator spacing
      (``∇_Q L``, ``−∞``).
    * A minus that opens a row, or follows another operator (``(−1``, ``= −3``, ``,−∞``),
      is a sign: as a prefix operator it hugs its operand instead of floating ``( − ∞)``.
    * Matrix columns get 1em between them so that negative entries do not run together.
    * Numerator and denominator are in text style (limits of a sum at its side).
    """
    # latex2mathml gives a scripted environment (``\begin{bmatrix}…\end{bmatrix}^\top``)
    # the fence, table and fence as three separate bases; they are one base.
    for el in list(root.iter()):
        expected = _SCRIPT_ARITY.get(el.tag)
        if expected is not None and len(el) > expected:
            extra = len(el) - expected + 1
            base = ET.Element("mrow")
            for child in list(el)[:extra]:
                el.remove(child)
                base.append(child)
            el.insert(0, base)
    for el in root.iter():
        if el.tag == "mo" and (el.text or "").strip() in (_NABLA, _INFINITY):
            el.tag = "mi"
            el.set("mathvariant", "normal")
        elif el.tag == "mtable" and "columnspacing" not in el.attrib:
            el.set("columnspacing", MATRIX_COLUMN_SPACING)
        elif el.tag == "mfrac":
            # As in TeX, the parts of a displayed fraction are in text style: a sum in a
            # denominator takes its limits at the side instead of stacking them.
            for part in el:
                part.set("displaystyle", "false")
    for parent in list(root.iter()):
        # A bare ∇ as the base of a script leaves a gap before its subscript (∇ _Z);
        # inside an <mrow> ziamath tucks the subscript in as TeX does.
        if (
            parent.tag in ("msub", "msup", "msubsup")
            and len(parent)
            and parent[0].tag == "mi"
            and ((parent[0].text or "").strip() == _NABLA)
        ):
            base = parent[0]
            parent.remove(base)
            wrapper = ET.Element("mrow")
            wrapper.append(base)
            parent.insert(0, wrapper)
    for parent in root.iter():
        previous: ET.Element | None = None
        for child in parent:
            if child.tag == "mo" and (child.text or "").strip() in (_MINUS, "-", "+"):
                opens_row = previous is None and parent.tag in (
                    "mrow",
                    "mtd",
                    "math",
                    "msqrt",
                    "mstyle",
                )
                after_operator = (
                    previous is not None
                    and previous.tag == "mo"
                    and (previous.text or "").strip() not in _FENCES_CLOSE
                )
                if opens_row or after_operator:
                    child.set("form", "prefix")
            previous = child


_MATHML_TEXT_TAGS = {"mi", "mn", "mo", "mtext", "ms"}
_SUPERSCRIPT_CHARS = {
    "\u22a4": "\u1d40",
    "T": "\u1d40",
    "2": "\u00b2",
    "3": "\u00b3",
    "\u2032": "\u2032",
}
_SCRIPT_TAGS = {"msup", "msub", "msubsup", "munder", "mover", "munderover"}
_JOIN_WITH_SPACE = _SCRIPT_TAGS | {"mfrac", "msqrt", "mroot"}
_SPACED_OPERATORS = {
    "=",
    "\u2248",
    "\u2261",
    "<",
    ">",
    "\u2264",
    "\u2265",
    "\u2190",
    "\u2192",
    "+",
    _MINUS,
    "-",
    "\u2299",
    "\u00d7",
    "\u22c5",
}


def _group(text: str) -> str:
    """Parenthesise a linear-text operand unless it is one symbol, number or √symbol."""
    if len(text) <= 1 or re.fullmatch(r"\u221a?[\w.]+|\(.*\)|\[.*\]", text):
        return text
    return f"({text})"


def _script(text: str) -> str:
    """A sub- or superscript: compact (no spaces) and grouped."""
    return _group(text.replace(" ", ""))


def _linear_text(el: ET.Element) -> str:
    """The expression as one line of Unicode (``S = QKᵀ/√d_k``), for search and copy."""
    tag = el.tag
    kids = list(el)
    if tag in _MATHML_TEXT_TAGS:
        text = (el.text or "").strip()
        if tag == "mo" and text in _SPACED_OPERATORS and el.get("form") != "prefix":
            return f" {text} "
        return text
    if tag == "mspace":
        return " "
    if tag in _SCRIPT_TAGS and kids:
        base = _linear_text(kids[0])
        if tag in ("msup", "mover") and len(kids) > 1:
            sup = _linear_text(kids[1]).strip()
            if tag == "mover":
                return base + sup
            return base + _SUPERSCRIPT_CHARS.get(sup, "^" + _script(sup))
        if tag in ("msub", "munder") and len(kids) > 1:
            return base + "_" + _script(_linear_text(kids[1]))
        if len(kids) > 2:
            sub = _script(_linear_text(kids[1]))
            sup = _linear_text(kids[2]).strip()
            return f"{base}_{sub}" + _SUPERSCRIPT_CHARS.get(sup, "^" + _script(sup))
        return base
    if tag == "mfrac" and len(kids) == 2:
        return f"{_group(_linear_text(kids[0]).strip())}/{_group(_linear_text(kids[1]).strip())}"
    if tag == "msqrt":
        return "\u221a" + _group("".join(_linear_text(k) for k in kids).strip())
    if tag == "mroot" and len(kids) == 2:
        return f"{_linear_text(kids[1])}\u221a{_group(_linear_text(kids[0]).strip())}"
    if tag == "mtable":
        rows = ["  ".join(_linear_text(cell).strip() for cell in row) for row in kids]
        return "; ".join(rows)
    out = ""
    previous: ET.Element | None = None
    for kid in kids:
        text = _linear_text(kid)
        # "∇_Z L", "e_i e_j", "1/√d_k ∇_S L": a space after a script or a fraction keeps
        # the next symbol out of it.
        if (
            previous is not None
            and previous.tag in _JOIN_WITH_SPACE
            and (text[:1].isalnum() or text[:1] in ("\u2207", "\u2211", "\u221a", "\u2202"))
        ):
            out += " "
        out += text
        previous = kid
    return out


@lru_cache(maxsize=1)
def _ziamath() -> ModuleType:
    """ziamath, imported on first use (it loads its font then)."""
    # It finds its bundled font through a deprecated importlib.resources call; the
    # warning is theirs to fix and says nothing to our users.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import ziamath
        import ziamath.tex
    return ziamath


def _mathml(latex: str, display: bool) -> ET.Element:
    root = ET.fromstring(_ziamath().tex.tex2mml(latex, inline=not display))
    _strip_ns(root)
    _improve_mathml(root)
    if not display:
        _legible_inline_fractions(root)
    return root


def _legible_inline_fractions(root: ET.Element) -> None:
    """A fraction in a line of text set as TeX's ``\\dfrac``: numerator and denominator at
    the size of the text, not of a script (``softmax(QKᵀ/√d_k)`` was hard to read).
    Only fractions outside any script or other fraction: those stay small."""
    small = {"mfrac", *_SCRIPT_TAGS, "mroot"}

    def visit(el: ET.Element, inside: bool) -> None:
        if el.tag == "mfrac" and not inside:
            el.set("displaystyle", "true")
        for k, child in enumerate(el):
            # A script's base (its first child) is at the size of the text.
            visit(child, inside or (el.tag in small and not (el.tag in _SCRIPT_TAGS and k == 0)))

    visit(root, False)


#: Baseline of the overlay text below its line top, in em, at ``line-height: 1`` in
#: DejaVu Sans ((1 + ascent − descent) / 2 with ascent 0.928 and descent 0.236).
_OVERLAY_BASELINE_EM = 0.846

_SVG_PATH = re.compile(r'<path d="([^"]*)"([^>]*?)\s*/>')


def _merge_paths(svg: str) -> str:
    """Join the glyph outlines of one expression into a single ``<path>``.

    WeasyPrint's cost for SVG is per element as much as per point; one path instead of a
    path per glyph draws the same picture (glyphs of one font share their winding, so
    the nonzero fill rule keeps overlapping pieces of a stretched bracket solid).
    """
    found = _SVG_PATH.findall(svg)
    if len(found) < 2 or len({attrs for _text, attrs in found}) != 1:
        return svg
    merged = "".join(d for d, _attrs in found)
    body = _SVG_PATH.sub("", svg)
    return body.replace("</svg>", f'<path d="{merged}"{found[0][1]} /></svg>')


def _ziamath_svg(root: ET.Element, size_px: float) -> tuple[str, float, float]:
    """SVG text, baseline offset (px, negative below) and margin for one MathML tree.

    Glyphs are written as plain paths (``svg2 = False``) rather than ``<symbol>``/``<use>``
    pairs: WeasyPrint resolves each ``<use>`` as a nested viewport, which doubled the
    time it spent drawing math.
    """
    ziamath = _ziamath()
    previous = ziamath.config.svg2, ziamath.config.precision
    # Hundredths of a CSS pixel (under 0.003 mm) are finer than any printer; fewer digits
    # make smaller documents.
    ziamath.config.svg2, ziamath.config.precision = False, 2
    try:
        math = ziamath.Math(root, size=size_px)
        svg = math.svg()
    finally:
        ziamath.config.svg2, ziamath.config.precision = previous
    # ziamath 0.13 made the padding an attribute; before it, a fixed pixel (the same default)
    return _merge_paths(svg), float(math.node.bbox.ymin), float(getattr(math, "margin", 1.0))


def _svg_math_html(latex: str, display: bool, font_size_pt: float) -> str:
    """One expression: a box with the SVG as background and the plain text, invisible,
    as content."""
    size_px = font_size_pt * PX_PER_PT
    try:
        root = _mathml(latex, display)
        text = re.sub(r"\s+", " ", _linear_text(root)).strip()
        svg, ymin, margin = _ziamath_svg(root, size_px)
    except Exception as exc:  # latex2mathml and ziamath raise assorted errors
        raise MathRenderError(latex, exc) from exc
    size = re.search(r'width="([\d.]+)" height="([\d.]+)"', svg)
    if size is None:
        raise MathRenderError(latex, ValueError("ziamath returned an SVG without a size"))
    width, height = float(size.group(1)), float(size.group(2))
    # ziamath pads its drawing by `margin` on every side and the baseline sits `ymin`
    # above the bottom of the ink (negative: below), so the image is lowered by both.
    shift = ymin - margin
    src = "data:image/svg+xml;base64," + base64.b64encode(svg.encode("utf-8")).decode("ascii")
    # One box: the picture is its background and the expression as text, transparent, is
    # its content, so a PDF viewer finds and copies the math while the paper shows only the
    # picture. (An <img> plus an absolutely positioned overlay cost twice the layout.) The
    # text shrinks to fit the picture's width; `overflow: hidden` puts the box's baseline
    # at its bottom edge, which `vertical-align` then lowers to the math baseline. The URL
    # is quoted: the CSS tokenizer reads an unquoted url() a character at a time, and
    # that cost about 2% of a page.
    text_px = min(size_px * 0.8, width / max(1.0, 0.62 * len(text))) if text else size_px
    # Padding puts the text's baseline on the math baseline, so that text extraction
    # reads it as part of the surrounding line (the box is border-box sized).
    pad = max(0.0, height + shift - _OVERLAY_BASELINE_EM * text_px)
    return (
        f'<span class="math-svg" style="width:{width:.2f}px;height:{height:.2f}px;'
        f"vertical-align:{shift:.2f}px;font-size:{text_px:.2f}px;padding-top:{pad:.2f}px;"
        f"background-image:url('{src}')\">{html.escape(text)}</span>"
    )


def _matrix_cell_text(text: str) -> str:
    """A number as it prints: a leading sign becomes the minus sign U+2212.

    Plain text (no markup around the sign) keeps every number one word for text
    extraction: spans that drew a longer minus over an ASCII hyphen split "-3" into two
    words, or moved them to another line, in pdftotext. Copied text reads "−0.25".
    """
    if text.startswith("-"):
        text = _MINUS + text[1:]
    elif text.startswith("+"):
        text = text[1:]
    return text


#: Advance widths (em) in DejaVu Serif, the body face, of what a matrix of numbers holds.
#: Its digits all have one width (that of FIGURE SPACE) and the full stop half of it.
_GLYPH_EM = {**{d: 0.6362 for d in "0123456789"}, ".": 0.3179, _MINUS: 0.8379, _INFINITY: 0.833}
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
    return _svg_math_html(latex, display, font_size_pt)


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
        return " ".join(
            f'<span class="math-group">{_pieces_html(group, display, font_size_pt, text)}</span>'
            for group in _matrix_groups(pieces)
        )
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


_LEADING_COMMA = re.compile(r"\s*,")
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
                groups[-1].append(",")
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


def _pieces_html(
    pieces: Sequence[str | _NumericMatrix], display: bool, font_size_pt: float, text: bool
) -> str:
    parts = []
    for piece in pieces:
        if isinstance(piece, _NumericMatrix):
            parts.append(matrix_table_html(piece.rows))
            continue
        source = piece.strip()
        if source == ",":
            parts.append(",")  # a comma after a matrix: plain text, no picture needed
            continue
        # Chinese words in a formula (a translated \text{…}) are set as text where they can be:
        # the pictures' math font has no CJK glyphs and would draw empty boxes.
        if text or has_cjk(source):
            after_matrix = bool(parts) and parts[-1].startswith('<span class="bmat">')
            set_as_text = _text_piece_cached(source, display, after_matrix)
            if set_as_text is not None:
                parts.append(set_as_text)
                continue
        parts.append(_svg_piece_cached(source, display, float(font_size_pt)))
    return "".join(parts)


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
_MATRIX_ROWS = re.compile(r'<span class="bm">([^<]*)</span>')


def tags_removed(markup: str) -> str:
    """``markup`` (our own HTML) with its tags taken out: the text it shows, entities as written."""
    return _TAG.sub("", markup)


def breakable(body: str) -> bool:
    """Whether a formula's HTML is long enough to break across lines (a matrix counts its widest row)."""
    rows = _MATRIX_ROWS.sub(lambda m: max(m.group(1).split("\n"), key=len), body)
    return len(tags_removed(rows)) >= BREAK_FORMULA
