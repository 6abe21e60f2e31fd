"""A formula as an SVG picture: LaTeX → MathML (latex2mathml) → SVG (ziamath).

The picture is set in the face of the text around it (DejaVu Math TeX Gyre, the DejaVu Serif
design with a MATH table: :func:`qkvquiz.render.fonts.math_font_path`) at the text's size, so
that "softmax" in a drawn formula and the words and text math beside it read as one face.

A few MathML fixes come first (legible inline fractions, spaced operators), and the picture
is the background of a box whose transparent text is the expression in plain Unicode
(``S = QKᵀ/√d_k``), so a PDF viewer finds and copies it.
"""

from __future__ import annotations

import base64
import html
import re
import warnings
import xml.etree.ElementTree as ET
from functools import lru_cache
from types import ModuleType

from qkvquiz.render.fonts import math_font_path

#: CSS pixels per point (CSS px are 1/96 in; ziamath sizes are in px).
PX_PER_PT = 96.0 / 72.0
#: Column gap inside SVG matrices (ziamath's default of 0.3em crowds negative numbers).
MATRIX_COLUMN_SPACING = "1em"

MINUS = "\u2212"
NABLA = "\u2207"
INFINITY = "\u221e"


_MATHML_NS = "{http://www.w3.org/1998/Math/MathML}"
_SCRIPT_ARITY = {"msub": 2, "msup": 2, "msubsup": 3, "munder": 2, "mover": 2, "munderover": 3}
_FENCES_CLOSE = {")", "]", "}", "|", "\u2016", "\u27e9", "\u230b", "\u2309"}


class MathRenderError(ValueError):
    """A LaTeX expression could not be laid out."""

    def __init__(self, latex: str, cause: BaseException) -> None:
        super().__init__(f"cannot typeset math {latex!r}: {cause}")
        self.latex = latex


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
        if el.tag == "mo" and (el.text or "").strip() in (NABLA, INFINITY):
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
            and ((parent[0].text or "").strip() == NABLA)
        ):
            base = parent[0]
            parent.remove(base)
            wrapper = ET.Element("mrow")
            wrapper.append(base)
            parent.insert(0, wrapper)
    for parent in root.iter():
        previous: ET.Element | None = None
        for child in parent:
            if child.tag == "mo" and (child.text or "").strip() in (MINUS, "-", "+"):
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
    MINUS,
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
        math = ziamath.Math(root, size=size_px, font=str(math_font_path()))
        svg = math.svg()
    finally:
        ziamath.config.svg2, ziamath.config.precision = previous
    # ziamath 0.13 made the padding an attribute; before it, a fixed pixel (the same default)
    return _merge_paths(svg), float(math.node.bbox.ymin), float(getattr(math, "margin", 1.0))


def svg_math_html(latex: str, display: bool, font_size_pt: float) -> str:
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
