"""The fonts every PDF is set in, shipped with qkvquiz, and checks that they suffice.

A PDF must look the same on every machine, so it does not take whatever fonts the system
has: ``templates/fonts/`` holds the DejaVu faces (Bitstream Vera licence, in
``LICENSE-DejaVu.txt`` beside them) under family names of our own (``qkvquiz Serif``,
``qkvquiz Sans``, ``qkvquiz Mono``), declared to WeasyPrint by :func:`font_face_css`. The
stylesheet names these families first; the system families after them are only what a
browser falls back to for the HTML pages (which load no font file).

Formulas drawn as pictures (:mod:`qkvquiz.render.svg_math`) are set in DejaVu Math TeX Gyre
(:data:`MATH_FONT`, same licence; its math extensions are in the public domain), the DejaVu
Serif design with the OpenType MATH table a formula layout needs: a drawn formula and the math
set as text (:mod:`qkvquiz.render.textmath`) are one face at one size on the page.

:func:`missing_glyphs` finds text a face cannot draw and :func:`latex_leaks` LaTeX source
left in prose; the test suite runs both over every family's worksheet, key and form.
CJK text (a Chinese set, ``--lang zh``, or an instructor's own text) is out of reach of these
faces (a CJK font is 10–20 MB): WeasyPrint (Pango) falls back glyph by glyph through
fontconfig to any installed CJK font. Without one, every such character prints as an empty
box; :func:`cjk_font_problem` (alias :func:`cjk_warning`) says so, naming the package to
install, and :func:`warn_if_no_cjk_font` raises it as a :class:`MissingCjkFont` warning
before a PDF is written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

from qkvquiz.core.resources import templates_dir

SERIF = "qkvquiz Serif"
SANS = "qkvquiz Sans"
MONO = "qkvquiz Mono"
#: Where the shipped font files are, inside the bundled templates (so that the PDF URL
#: fetcher, which serves only that folder, serves them).
FONT_FOLDER = "fonts"


@dataclass(frozen=True)
class Face:
    family: str
    bold: bool
    italic: bool
    file: str


#: Every shipped face. A weight or style not listed is synthesised by Pango from the
#: nearest face, with the same glyphs.
FACES: tuple[Face, ...] = (
    Face(SERIF, False, False, "DejaVuSerif.ttf"),
    Face(SERIF, True, False, "DejaVuSerif-Bold.ttf"),
    Face(SERIF, False, True, "DejaVuSerif-Italic.ttf"),
    Face(SERIF, True, True, "DejaVuSerif-BoldItalic.ttf"),
    Face(SANS, False, False, "DejaVuSans.ttf"),
    Face(SANS, True, False, "DejaVuSans-Bold.ttf"),
    Face(SANS, False, True, "DejaVuSans-Oblique.ttf"),
    Face(MONO, False, False, "DejaVuSansMono.ttf"),
)

#: Characters a face maps but draws wrongly: DejaVu Serif Bold's MODIFIER LETTER CAPITAL T
#: (U+1D40) is a small superscript S. Text in these faces must not use them.
BROKEN_GLYPHS: dict[str, frozenset[str]] = {
    "DejaVuSerif-Bold.ttf": frozenset("\u1d40"),
    "DejaVuSerif-BoldItalic.ttf": frozenset("\u1d40"),
}

#: Combining marks the serif faces do not position over a Greek letter with an ascender
#: (β̄ prints as β and a loose bar; σ̂ and ᾱ are fine); textmath draws a bar over a Greek
#: letter with CSS instead.
UNPLACED_MARKS = frozenset("\u0302\u0303\u0304\u0305\u0307\u20d7")
UNPLACED_BASES = frozenset("βδζθλξ")


#: The face of the drawn formulas: DejaVu Serif's letters, digits and operators, with a MATH table.
MATH_FONT = "DejaVuMathTeXGyre.ttf"


def fonts_dir() -> Path:
    return templates_dir() / FONT_FOLDER


def math_font_path() -> Path:
    """The font file every drawn formula is set in (:data:`MATH_FONT`)."""
    return fonts_dir() / MATH_FONT


def font_face_css() -> str:
    """``@font-face`` rules for the shipped faces, by ``file:`` URL (PDF rendering only)."""
    rules = []
    for face in FACES:
        url = (fonts_dir() / face.file).resolve().as_uri()
        rules.append(
            f'@font-face {{ font-family: "{face.family}"; src: url("{url}"); '
            f"font-weight: {700 if face.bold else 400}; "
            f"font-style: {'italic' if face.italic else 'normal'}; }}"
        )
    return "\n".join(rules)


@lru_cache(maxsize=None)
def _cmap(file: str) -> frozenset[str]:
    from fontTools.ttLib import TTFont

    with TTFont(fonts_dir() / file, lazy=True) as font:
        return frozenset(chr(c) for c in font.getBestCmap())


def face_for(families: Iterable[str], bold: bool, italic: bool) -> Face | None:
    """The shipped face a CSS font-family list, weight and style select (None: not ours)."""
    first = next(iter(families), "")
    candidates = [f for f in FACES if f.family == first]
    if not candidates:
        return None
    # Pango picks the nearest style, then the nearest weight, as CSS font matching does.
    return min(candidates, key=lambda f: (f.italic != italic, f.bold != bold))


def coverage(face: Face) -> frozenset[str]:
    """The characters ``face`` draws correctly."""
    return _cmap(face.file) - BROKEN_GLYPHS.get(face.file, frozenset())


#: Characters that draw nothing and need no glyph: spaces the layout handles, joiners,
#: line breaks.
_INVISIBLE = frozenset("\n\r\t\u00ad\u200b\u200c\u200d\u2060\ufeff")


@dataclass(frozen=True)
class TextRun:
    """Text printed in one face, and where it came from (for messages)."""

    text: str
    face: Face | None
    where: str = ""


def missing_glyphs(runs: Iterable[TextRun]) -> dict[tuple[str, str], str]:
    """``{(face file, character): example text}`` for each character a run's face cannot
    draw, and each run not set in a shipped face (``("-", char)``)."""
    out: dict[tuple[str, str], str] = {}
    for run in runs:
        if run.face is None:
            for ch in set(run.text) - _INVISIBLE:
                if not ch.isspace():
                    out.setdefault(("-", ch), f"{run.where}: {run.text[:60]!r}")
            continue
        have = coverage(run.face)
        for i, ch in enumerate(run.text):
            unplaced = (
                ch in UNPLACED_MARKS and run.face.family == SERIF and i > 0 and run.text[i - 1] in UNPLACED_BASES
            )
            if ch in _INVISIBLE or ch in have and not unplaced:
                continue
            out.setdefault((run.face.file, ch), f"{run.where}: {run.text[max(0, i - 30):i + 30]!r}")
    return out


#: LaTeX left in prose: a sub- or superscript, a command, a math delimiter.
_LEAK = re.compile(r"[_$]|\\[A-Za-z{}()\[\]]|\^[{\w]")


def latex_leaks(runs: Iterable[TextRun]) -> list[str]:
    """Each run of prose that still holds LaTeX source, with its place."""
    return [f"{r.where}: {r.text[:80]!r}" for r in runs if _LEAK.search(r.text)]


# --------------------------------------------------------------------------- from HTML


class _Runs(HTMLParser):
    """Text runs of one of our HTML documents, with the face its stylesheet gives each.

    A reading of ``templates/style.css`` for the elements our documents use. The PDFs are
    checked from the outside: every face they embed is a shipped one (``pdffonts``), which a
    glyph missing from the shipped faces would break (fontconfig would fall back to another).
    """

    _SANS_CLASSES = frozenset({"sheet-fields", "answer-part", "key-roster", "math-svg", "hand-in-sans"})
    _VOID = frozenset({"br", "img", "input", "meta", "link", "hr", "wbr", "col", "area", "source"})

    def __init__(self, where: str) -> None:
        super().__init__(convert_charrefs=True)
        self.where = where
        # (tag, family, bold, italic, code) per open element
        self.stack: list[tuple[str, str, bool, bool, bool]] = [("", SERIF, False, False, False)]
        self.runs: list[TextRun] = []
        self.code_runs: list[TextRun] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._VOID:
            return
        _, family, bold, italic, code = self.stack[-1]
        classes = set((dict(attrs).get("class") or "").split())
        if tag in ("script", "style", "title", "svg", "textarea"):
            self.skip += 1
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            family, bold = SANS, True
        if tag in ("strong", "b", "th"):
            bold = True
        if tag in ("em", "i") or (tag in ("sub", "sup") and "i" in classes):  # a script of letters alone
            italic = True
        if tag in ("code", "kbd", "pre", "samp"):
            family, code = MONO, True
        if classes & self._SANS_CLASSES:
            family = SANS
        if classes & {"answer-part", "part-id", "math-svg"}:
            # A part id, as the submission file spells it, or the transparent linear text
            # laid over a picture of math (``S = QKᵀ/√d_k``, for search and copy).
            code = True
        if "tm" in classes:
            family = SERIF
        if "sy" in classes:
            family, italic = SANS, False
        if "fn" in classes or "tx" in classes:
            italic = False
        self.stack.append((tag, family, bold, italic, code))

    def handle_endtag(self, tag: str) -> None:
        if tag in self._VOID:
            return
        if tag in ("script", "style", "title", "svg", "textarea") and self.skip:
            self.skip -= 1
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if self.skip or not data.strip():
            return
        _, family, bold, italic, code = self.stack[-1]
        run = TextRun(data, face_for([family], bold, italic), self.where)
        (self.code_runs if code else self.runs).append(run)


def html_text_runs(document: str, where: str = "") -> tuple[list[TextRun], list[TextRun]]:
    """(prose runs, code runs) of an HTML document made by qkvquiz."""
    parser = _Runs(where)
    parser.feed(document)
    parser.close()
    return parser.runs, parser.code_runs


# --------------------------------------------------------------------------- CJK

# CJK ideographs (with extension A and compatibility forms), kana, Hangul, CJK punctuation,
# full-width forms.
_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
#: The system package that gives PDFs their CJK faces (named in warnings and the README).
CJK_PACKAGE = "fonts-noto-cjk"
CJK_FONT_PACKAGE = CJK_PACKAGE
#: The families the stylesheet falls back to for CJK text.
CJK_FAMILIES = ("Noto Serif CJK SC", "Noto Sans CJK SC")


class MissingCjkFont(UserWarning):
    """A document has CJK text and this machine has no font that can show it."""


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a character only a CJK font has."""
    return _CJK.search(text) is not None


@lru_cache(maxsize=1)
def cjk_fonts() -> tuple[str, ...] | None:
    """The font families fontconfig (what WeasyPrint uses) knows for Chinese
    (``fc-list :lang=zh family``); ``None`` where fontconfig's tools are missing and it cannot
    be told. The one detection every CJK check here goes through."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return None
    try:
        run = subprocess.run([fc_list, ":lang=zh", "family"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return tuple(sorted({line.split(",")[0].strip() for line in run.stdout.splitlines() if line.strip()}))


def cjk_font_available() -> bool:
    """Whether fontconfig knows a font with CJK glyphs."""
    return bool(cjk_fonts())


#: Output languages written in CJK characters: every page of a set in one of them needs a CJK font.
CJK_LANGUAGES = frozenset({"zh"})


def cjk_font_problem(texts: Iterable[str], *, lang: str | None = None,
                     instead: str = "generate again, or use md/html output") -> str | None:
    """The warning when some text (a document, or the spec's text and names) has CJK characters,
    or the pages are written in a CJK language (``lang``), and no installed font has CJK glyphs,
    else None. ``instead`` ends it: what to do once the font is installed, or instead."""
    needed = lang in CJK_LANGUAGES or any(has_cjk(t) for t in texts if t)
    if not needed or cjk_font_available():
        return None
    found = (
        "fontconfig's fc-list is missing, so no font with those glyphs could be found"
        if cjk_fonts() is None
        else "no font with those glyphs is installed"
    )
    return (
        f"the PDFs hold Chinese, Japanese or Korean text, but {found}: every such character would "
        f"print as an empty box. Install one, e.g. `sudo apt-get install {CJK_PACKAGE}` (Debian, "
        f"Ubuntu), then {instead}."
    )


#: The name the spec-text check in ``generate`` uses; the same check and wording.
cjk_warning = cjk_font_problem


def warn_if_no_cjk_font(documents: Iterable[str]) -> None:
    """Warn (:class:`MissingCjkFont`) when :func:`cjk_font_problem` finds one."""
    problem = cjk_font_problem(documents)
    if problem is not None:
        warnings.warn(problem, MissingCjkFont, stacklevel=3)
