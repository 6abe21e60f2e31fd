"""Markdown with LaTeX math → one self-contained HTML document, ready for print.

Math arrives as ``$...$`` (inline) and ``$$...$$`` (display). WeasyPrint runs no
JavaScript and does not lay out MathML, so every expression reaches it laid out already
(:mod:`qkvquiz.render.math_html`). Answer boxes and the student header are HTML blocks
(:mod:`qkvquiz.render.boxes`) that templates write into the Markdown. The look lives in
``templates/style.css`` (:mod:`qkvquiz.render.page`), embedded in every document.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from mdit_py_plugins.dollarmath import dollarmath_plugin

from qkvquiz.render.boxes import expand_empty_grids
from qkvquiz.render.cjk_text import chinese_text_html
from qkvquiz.render.fonts import has_cjk
from qkvquiz.render.math_html import FONT_SIZE_PT_DEFAULT, ZERO_WIDTH_SPACE, breakable, math_html
from qkvquiz.render.page import (
    BASE_STYLE_MARKER,
    BOXES_CSS,
    SCREEN_STYLE_OPEN,
    VIEWPORT_META,
    base_stylesheet_text,
    page_css,
    page_words_css,
    screen_stylesheet_text,
)

# --------------------------------------------------------------------------- markdown


#: The bullet of a tight list's item, written as text at the start of its first line
#: (``li.tb`` in the stylesheet hangs it in the margin): BULLET and NO-BREAK SPACE, 0.908
#: em in DejaVu Serif, as wide as WeasyPrint's own marker. Text sits on the baseline of
#: its line; WeasyPrint's marker is a box of its own that it sets at the top of a line
#: made tall by a fraction or a matrix, and it cost the PDF renderer a box per item.
TEXT_BULLET = "\u2022\u00a0"

_TM_OPEN = '<span class="tm">'

def _markbreakable(body: str) -> str:
    """``body`` with its outermost text-math spans marked ``brk`` where the whole is long."""
    return body.replace(_TM_OPEN, '<span class="tm brk">') if breakable(body) else body


def _lone_text_math(body: str) -> bool:
    """Whether ``body`` (from :func:`math_html`) is one expression set as text and nothing
    else: every other piece is a picture or a matrix, and only a matrix brings a comma."""
    return (
        body.startswith(_TM_OPEN)
        and body.count(_TM_OPEN) == 1
        and 'class="math-svg"' not in body
        and 'class="bmat"' not in body
    )


#: An environment of rows (a matrix, a ``cases``) in an inline formula; a matrix of one
#: row (a vector) may stay in its line.
_HAS_MATRIX = re.compile(r"\\begin\{(?:[bpvBV]?matrix|array|cases)\}(.*?)\\end\{", re.DOTALL)


#: Punctuation that ends a sentence's displayed matrix: Latin, and the full-width Chinese marks.
_TRAILING_PUNCTUATION = re.compile(r"\s*([.,;:。，；：])(?!\d)")


#: The longest code span kept on one line (`-inf`, `submission.json`); a longer one may wrap.
MAX_UNBROKEN_CODE = 24

#: A part id as the templates write it in code: an item id and a step, ``q1.scores`` or
#: ``attention-layernorm.var`` (words of letters, digits, "_" and "-", joined by dots).
_PART_ID = re.compile(r"[\w-]+(?:\.[\w-]+)+")


def _wide_punctuation(char: str | None) -> bool:
    """Whether ``char`` is a full-width punctuation mark (。，；：（）…): it carries its own space."""
    return char is not None and unicodedata.category(char)[0] == "P" and unicodedata.east_asian_width(char) in "WF"


def _edge_char(tokens: Any, idx: int, step: int) -> str | None:
    """The character next to inline token ``idx`` on one side (``step`` -1: before, 1: after):
    the nearest text's; ``"x"`` for math (set like Latin text); None at a line's end."""
    i = idx + step
    while 0 <= i < len(tokens):
        token = tokens[i]
        if token.type in ("text", "code_inline") and token.content:
            return token.content[-1] if step < 0 else token.content[0]
        if token.type.startswith("math"):
            return "x"
        if token.type in ("softbreak", "hardbreak"):
            return None
        i += step
    return None


def _joins_without_space(before: str | None, after: str | None) -> bool:
    """Whether a line break in the Markdown between ``before`` and ``after`` prints as nothing:
    beside a full-width mark (。，；：（）), or between two CJK characters, a space is wrong in
    Chinese text (CSS's rule for segment breaks, which WeasyPrint and browsers do not apply)."""
    return _wide_punctuation(before) or _wide_punctuation(after) or (
        before is not None and after is not None and has_cjk(before) and has_cjk(after))


#: A part's label as the templates write it at the start of its item: ``**(a)**``.
_PART_LABEL = re.compile(r"\([a-z]{1,2}\)|\([ivx]{1,4}\)")


def _part_label(inline: Any) -> bool:
    """Whether an item's text opens with a part label in bold (``**(a)** Compute …``); if so,
    the label is marked to hang (``class="pl"``) and the space after it goes."""
    kids = list(inline.children or [])
    while kids and kids[0].type == "text" and not kids[0].content:
        kids.pop(0)  # the parser opens with an empty text token
    if (
        len(kids) >= 4
        and kids[0].type == "strong_open"
        and kids[1].type == "text"
        and _PART_LABEL.fullmatch(kids[1].content)
        and kids[2].type == "strong_close"
        and kids[3].type == "text"
        and kids[3].content.startswith(" ")
    ):
        kids[0].attrSet("class", "pl")
        kids[3].content = kids[3].content.lstrip(" ")
        return True
    return False


#: A paragraph's last word, when short (a few letters and its full stop), after a space.
_LAST_WORD = re.compile(r" (\S{1,6})$")
#: What may follow a paragraph's last word in the same line of text: its punctuation.
_CLOSING = re.compile(r"[.,;:!?)\]\u3002]*")


def _ends_paragraph(tokens: Any, idx: int) -> bool:
    """Whether inline token ``idx`` is the last of its paragraph but for closing punctuation."""
    return all(t.type == "text" and _CLOSING.fullmatch(t.content) for t in tokens[idx + 1 :])


# Rules of the renderer that need nothing of the document (markdown-it's add_render_rule).


def _list_item_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    following = tokens[idx + 1] if idx + 1 < len(tokens) else None
    inline = tokens[idx + 2] if idx + 2 < len(tokens) else None
    if token.markup in ("-", "*", "+") and following is not None and following.type == "paragraph_open":
        if inline is not None and inline.type == "inline" and _part_label(inline):
            # A part of a problem, "- **(a)** Compute …": as in a typeset exam, no bullet;
            # its label hangs at the left of the text (.pl), which lines up under its right.
            token.attrSet("class", "pi")
            return self.renderToken(tokens, idx, options, env)
        # An item of a bullet list, tight or loose: its bullet is text that opens its first
        # line (see TEXT_BULLET), on the line's baseline even where a matrix makes it tall.
        token.attrSet("class", "tb")
        following.meta["text_bullet"] = True
    return self.renderToken(tokens, idx, options, env)

def _paragraph_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    out = self.renderToken(tokens, idx, options, env)
    return out + TEXT_BULLET if tokens[idx].meta.get("text_bullet") else out

def _softbreak(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    # A line break of the source: a space as printed, except in Chinese text after "。"
    # and the like, where it printed as a stray half-width space.
    if _joins_without_space(_edge_char(tokens, idx, -1), _edge_char(tokens, idx, 1)):
        return ""
    return "\n"

def _text(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    content = tokens[idx].content
    following = tokens[idx + 1] if idx + 1 < len(tokens) else None
    math_after = following is not None and following.type == "math_inline"
    if has_cjk(content):
        previous = tokens[idx - 2] if idx >= 2 and tokens[idx - 1].type in ("em_close", "strong_close") else None
        if previous is not None and content.startswith(" ") and has_cjk(content[1:2]) and has_cjk(previous.content[-1:]):
            content = content[1:]  # "*点积注意力* 为每个…": no space between Chinese words
        # A number set as math is tied to the Chinese word before it ("键 $1$"); a longer
        # formula is not (tied, it pulled the word with it and left a short line: "然 ⏎ 后 Y = …").
        out = chinese_text_html(content, math_after and len(following.content) <= 8)
        return out + ZERO_WIDTH_SPACE if math_after and out.endswith(" ") else out
    # The last word of a paragraph never stands alone on its line ("…inside the square ⏎
    # root.", "…do not invert ⏎ A."): a short one is tied to the word before, as a typesetter
    # ties it (invert~$A$).
    if _ends_paragraph(tokens, idx):
        content = _LAST_WORD.sub("\u00a0\\1", content)
    elif math_after and content.endswith(" ") and len(following.content) <= 6 and _ends_paragraph(tokens, idx + 1):
        return escapeHtml(content[:-1]) + "\u00a0"
    out = escapeHtml(content)
    if math_after and out.endswith(" "):
        # The space before a formula as a break the PDF renderer sees: without it, a formula
        # too long for the rest of the line made it break the sentence at its *first* space
        # ("(b) Compute ⏎ W by forward substitution: ⏎ W = A⁻¹B_K."). The zero-width space
        # prints nothing and is not in the PDF's text.
        out += ZERO_WIDTH_SPACE
    return out


def _markdown_parser(font_size_pt: float, text_math: bool = False, raw_html: bool = False) -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": raw_html}).enable("table")
    if not raw_html:
        # Text from a spec or a user's template: <img>, <a rel="attachment" href="file:…">,
        # <script> stay text, and ![](http://…) is no picture (a page or PDF would fetch it).
        md.disable("image")
    md.use(dollarmath_plugin, double_inline=True, allow_digits=False)

    def inline(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        if any("\\\\" in m.group(1) for m in _HAS_MATRIX.finditer(tokens[idx].content)):
            # A matrix inside a line of text pushes the lines apart (a 4×4 mask in a
            # sentence): as in a LaTeX exam, it is displayed on a line of its own, and the
            # punctuation that follows it ends the display instead of opening a line.
            following = tokens[idx + 1] if idx + 1 < len(tokens) else None
            if following is not None and following.type == "text":
                mark = _TRAILING_PUNCTUATION.match(following.content)
                if mark:
                    following.content = following.content[mark.end() :].lstrip()
                    tokens[idx].content += mark.group(1)
            return display_in_text(self, tokens, idx, options, env)
        body = math_html(tokens[idx].content, font_size_pt=font_size_pt, text=text_math)
        brk = " brk" if breakable(body) else ""
        if _lone_text_math(body):
            # One element instead of two (.math only keeps the expression on one line,
            # as .tm does): a key has dozens of these per student.
            return f'<span class="math tm{brk}">' + body[len(_TM_OPEN) :]
        return f'<span class="math{brk}">{body}</span>'

    def display_in_text(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        body = math_html(
            tokens[idx].content, display=True, font_size_pt=font_size_pt, text=text_math
        )
        return f'<span class="math-display">{body}</span>'

    def display(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        body = math_html(
            tokens[idx].content, display=True, font_size_pt=font_size_pt, text=text_math
        )
        if "math-group" not in body:  # groups wrap between them, each whole
            body = _markbreakable(body)
        return f'<div class="math-display">{body}</div>\n'

    plain_code = md.renderer.rules["code_inline"]

    def code_inline(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        content = tokens[idx].content
        if _PART_ID.fullmatch(content):
            # A part id is one unbreakable run (code is nowrap in the stylesheet): broken at its
            # hyphen, the line showed "attention-" and "layernorm.var" apart. The hyphen stays
            # ASCII "-", so a copied id is the one the submission file spells.
            tokens[idx].attrSet("class", "part-id")
        elif len(content) > MAX_UNBROKEN_CODE or " " in content.strip():
            tokens[idx].attrSet("class", "wrap")  # long: it may wrap, at its spaces or anywhere
        return plain_code(tokens, idx, options, env)

    md.add_render_rule("text", _text)
    md.add_render_rule("code_inline", code_inline)
    md.add_render_rule("softbreak", _softbreak)
    md.add_render_rule("list_item_open", _list_item_open)
    md.add_render_rule("paragraph_open", _paragraph_open)
    md.add_render_rule("math_inline", inline)
    md.add_render_rule("math_inline_double", display_in_text)
    md.add_render_rule("math_block", display)
    md.add_render_rule("math_block_label", display)
    return md


@lru_cache(maxsize=8)
def _parser(font_size_pt: float, text_math: bool = False, raw_html: bool = False) -> MarkdownIt:
    return _markdown_parser(font_size_pt, text_math, raw_html)


def markdown_body_html(
    markdown: str, *, font_size_pt: float = FONT_SIZE_PT_DEFAULT, text_math: bool = False,
    raw_html: bool = False,
) -> str:
    """Markdown with math → the HTML that goes inside ``<body>``.

    ``text_math`` sets the math it can as HTML text rather than pictures (see
    :func:`math_html`). Raw HTML and Markdown images are text unless ``raw_html``: spec
    text and template output come from users; pass ``raw_html=True`` only for Markdown you
    wrote yourself (such as answer boxes from :func:`answer_grid_html`).
    """
    return expand_empty_grids(_parser(float(font_size_pt), text_math, raw_html).render(markdown))


def inline_markdown_html(markdown: str, *, font_size_pt: float = FONT_SIZE_PT_DEFAULT) -> str:
    """One line of Markdown with math (a step's prompt) as inline HTML, without ``<p>``."""
    md = _parser(float(font_size_pt), True, False)
    return md.renderInline(markdown)


def markdown_to_html(
    markdown: str,
    *,
    title: str = "",
    header: str = "",
    page_size: str = "A4",
    extra_css: Iterable[str] = (),
) -> str:
    """Markdown with ``$…$``/``$$…$$`` math → one self-contained HTML document.

    ``header`` is HTML placed before the body (usually :func:`header_html`); the stylesheet
    (``templates/style.css``, page size applied) is embedded, and so is every picture.
    ``markdown`` is trusted: raw HTML in it (answer boxes) passes through.
    """
    return html_document(
        f"{header}\n{markdown_body_html(markdown, raw_html=True)}",
        title=title,
        page_size=page_size,
        extra_css=extra_css,
    )


#: A document's pictures are data: URLs and its style is inline; it runs no script and
#: loads nothing, so a browser that opens it fetches nothing either.
DOCUMENT_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; form-action 'none'; base-uri 'none'"


def html_document(
    body: str,
    *,
    title: str = "",
    page_size: str = "A4",
    extra_css: Iterable[str] = (),
    body_class: str = "",
) -> str:
    """HTML for inside ``<body>`` → one self-contained document with the print stylesheet.

    ``body_class`` names the kind of document (``"worksheet"``, ``"key"``) for the
    stylesheet's rules that apply to one kind only. The page's ``lang`` is the current output
    language (:mod:`qkvquiz.core.i18n`): it also makes the PDF renderer choose a font's Chinese
    forms for Chinese text rather than its Japanese ones.
    """
    from ..core.i18n import DEFAULT_LANG, HTML_LANG, current

    lang = HTML_LANG.get(current(), current())
    words = [] if current() == DEFAULT_LANG else [page_words_css()]
    own_css = "\n".join([page_css(page_size), BOXES_CSS, *words, *extra_css])
    body_attr = f' class="{html.escape(body_class, quote=True)}"' if body_class else ""
    return (
        f'<!DOCTYPE html>\n<html lang="{html.escape(lang)}">\n<head>\n<meta charset="utf-8">\n{VIEWPORT_META}\n'
        f'<meta http-equiv="Content-Security-Policy" content="{DOCUMENT_CSP}">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style {BASE_STYLE_MARKER}>\n{base_stylesheet_text()}\n</style>\n"
        f"<style>\n{own_css}\n</style>\n"
        f"{SCREEN_STYLE_OPEN}\n{screen_stylesheet_text()}\n</style>\n</head>\n"
        f"<body{body_attr}>\n{body}</body>\n</html>\n"
    )
