"""A student's HTML pages: the worksheet, and an answer form that writes the submission file.

``answer-form.html`` is one self-contained page that works offline in any browser: the
student's problems with their givens (math typeset as in the other formats: SVG pictures and
tables of numbers, inline), and for each asked part a grid of text boxes of the part's
shape. Its "Save answers" button downloads the submission JSON that ``qkvquiz grade`` reads::

    {"student": "ada", "variant": "K7QF-2M", "set": "3f9c0a12be47", "answers": {"q1.scores": "5/√2", …},
     "saved_at": "2026-11-23T14:05:00.000Z"}

``set`` names the worksheet set and ``saved_at`` records when the file was saved: among
several files for one student the grader takes the latest saved.

Every entry is the text the student typed (the grader reads exactly that text), an empty box
is ``null``. While the student types, a port of the grader's entry parser
(``templates/answer-form/parse.js``) marks a box the grader could not read; work is kept in
the browser's local storage under the variant code, and a saved file can be loaded back.

The page carries the problem, the part ids and their shapes, never a step's value. Its
Content-Security-Policy forbids every network request, so nothing can be fetched either, and
runs only the form's own two scripts (named by their SHA-256): spec text is Markdown without
raw HTML, and even a ``<script>`` that got in would not run.
Templates: ``templates/answer-form.html.j2`` with ``templates/answer-form/{parse.js,form.js,form.css}``,
rendered by Jinja's sandbox with autoescaping on (student ids come from rosters).
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.sandbox
import numpy as np
from markupsafe import Markup

from ..core.i18n import HTML_LANG, _, current, install_jinja, script_messages
from ..core.places import where
from ..core.resources import templates_dir
from ..worksheet import Worksheet
from .latex import label_symbol, num, shape_text
from .markdown import in_spec_language, ragged_shape, render_items
from .prose_math import prose_math
from .sandbox import Record

FORM_TEMPLATE = "answer-form.html.j2"
ASSET_DIR = "answer-form"
#: The form's text size (``html { font-size: 16px }`` in answer-form/form.css, 12 pt): its
#: pictures of math are drawn to it, not to the printed page's 11 pt.
FORM_FONT_SIZE_PT = 12.0
#: Prefix of the local-storage key; the variant code follows.
STORAGE_PREFIX = "qkvquiz:answers:"

# Names of the levels of a part's shape, counted from the innermost, as the grader names them.
#: A part's letter by its place in its item, "(a)", as the worksheet labels it.
LETTERS = "abcdefghijklmnopqrstuvwxyz"
_FILE_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Box:
    """One input box: where it sits in the answer (0-based) and its name in messages."""

    index: tuple[int, ...]
    where: str  # "row 2, column 3" (counting from 1, the grader's words); "" for a scalar
    asked: bool = True  # False: the part asks other entries; the box is shown disabled and saves null
    # True: padding after a delta sequence's shorter last chunk; the box is hidden and saves null
    # (it stays in the page so that every part keeps one box per entry of its shape, in order).
    absent: bool = False


@dataclass(frozen=True)
class Block:
    """One matrix (or row of a vector, or single box) of a part's grid."""

    label: str  # "matrix 2" for a stack of matrices, "" otherwise
    rows: tuple[tuple[Box, ...], ...]
    bracketed: bool


@dataclass(frozen=True)
class FormPart:
    id: str
    letter: str
    prompt: str
    symbol: Markup  # typeset "S =" (HTML)
    points: float
    shape: tuple[int, ...]
    shape_text: str
    blocks: tuple[Block, ...]
    kind: str = "number"  # "shape": one box that takes a shape as text ("2×4"), of len(shape) sizes
    sizes: int = 0  # with kind "shape": how many sizes the shape has


@dataclass(frozen=True)
class FormProblem:
    number: int
    html: Markup
    parts: tuple[FormPart, ...]
    #: The problem's HTML cut where each part's boxes go (right under the sentence that
    #: asks for it, so that its prompt is printed once, next to its boxes): pieces of HTML,
    #: each followed by the part whose boxes come after it (None after the last piece).
    segments: tuple[tuple[Markup, FormPart | None], ...] = ()
    #: Parts the problem's text names nowhere: their boxes, with their prompt, follow it.
    unplaced: tuple[FormPart, ...] = ()


def grid_blocks(shape: Sequence[int], asked: np.ndarray | None = None,
                real: np.ndarray | None = None) -> tuple[Block, ...]:
    """The boxes of a part of ``shape``, grouped as the page shows them: a scalar is one box,
    a vector one row, a matrix a bracketed grid, a stack one grid per matrix (row by row, so
    that the tab order runs along each row). ``asked`` (bool, ``shape``) marks the boxes of
    a part that asks only some entries; the others are drawn disabled. ``real`` (bool,
    ``shape``) marks the entries of a ragged delta sequence that exist; the others are hidden."""
    shape = tuple(int(n) for n in shape)
    if asked is not None or real is not None:
        blocks = grid_blocks(shape)
        return tuple(Block(b.label, tuple(tuple(
            Box(x.index, x.where, asked is None or bool(asked[x.index]), real is not None and not real[x.index])
            for x in row) for row in b.rows), b.bracketed) for b in blocks)
    ndim = len(shape)
    if ndim == 0:
        return (Block("", ((Box((), ""),),), bracketed=False),)
    if ndim == 1:
        return (Block("", (tuple(Box((j,), where((j,), 1)) for j in range(shape[0])),), bracketed=True),)
    rows, cols = shape[-2:]
    blocks = []
    for lead in itertools.product(*(range(n) for n in shape[:-2])):
        grid = tuple(
            tuple(Box((*lead, r, c), where((*lead, r, c), ndim)) for c in range(cols)) for r in range(rows)
        )
        label = where(lead, ndim) if lead else ""
        blocks.append(Block(label, grid, bracketed=True))
    return tuple(blocks)


def submission_filename(student: str, variant: str) -> str:
    """The name the saved file gets: ``submission-<student>-<variant>.json`` made file-safe."""
    stem = _FILE_UNSAFE.sub("_", f"{student}-{variant}").strip("_-")[:80] or "answers"
    return f"submission-{stem}.json"


@lru_cache(maxsize=1)
def _html_module() -> Any:
    """What the form takes from the HTML renderer, imported on first use: HTML rendering pulls in
    markdown-it and ziamath, which Markdown-only runs never need."""
    from types import SimpleNamespace

    from .html_page import inline_markdown_html, markdown_body_html
    from .math_html import math_html
    from .page import screen_stylesheet_text, stylesheet

    return SimpleNamespace(inline_markdown_html=inline_markdown_html, markdown_body_html=markdown_body_html,
                           math_html=math_html, stylesheet=stylesheet, screen_css=screen_stylesheet_text)


def _real(item: Any, step: str, shape: tuple[int, ...]) -> np.ndarray | None:
    """Which entries of a step exist where a delta sequence's last chunk is shorter (else None)."""
    present = item.family.extra.get("present")
    return None if present is None else present(item.params, step, shape)


def _seen_shape(item: Any, step: str, shape: tuple[int, ...]) -> Any:
    """The shape a student reads for a step: per chunk where a delta sequence's last chunk is shorter."""
    return ragged_shape(shape, _real(item, step, shape))


@in_spec_language
def form_problems(ws: Worksheet, student: int, *, text_math: bool = False) -> list[FormProblem]:
    """One student's problems as HTML, each with the answer grids of its asked parts.

    ``text_math`` sets the math it can as HTML text rather than pictures (a tenth of the size:
    the practice site keeps many variants in one page)."""
    html = _html_module()
    problems = []
    for number, (markdown, variant) in enumerate(
        zip(render_items(ws, student, "problem"), ws.variant(student)), start=1
    ):
        item = variant["item"]
        parts = []
        for k, part in enumerate(item.parts):
            step = item.family.step(part.step)
            shape = tuple(np.shape(variant["steps"][part.step]))
            if step.kind == "shape":
                # One box for the whole shape, read as "2×4" by parse.js and by the grader.
                parts.append(FormPart(
                    id=part.id, letter=LETTERS[k % len(LETTERS)],
                    prompt=Markup(html.inline_markdown_html(prose_math(_(step.prompt_for(item.params))), font_size_pt=FORM_FONT_SIZE_PT)),
                    symbol=Markup(html.math_html(f"{step.symbol} =", font_size_pt=FORM_FONT_SIZE_PT)),
                    points=part.points, shape=(),
                    shape_text=_("a shape rows × columns, such as 2×4"), blocks=grid_blocks(()),
                    kind="shape", sizes=shape[0] if shape else 0,
                ))
                continue
            parts.append(FormPart(
                id=part.id,
                letter=LETTERS[k % len(LETTERS)],
                # A prompt may hold inline math ($\bar B_K$): typeset as in the worksheet.
                prompt=Markup(html.inline_markdown_html(prose_math(_(step.prompt_for(item.params))), font_size_pt=FORM_FONT_SIZE_PT)),
                symbol=Markup(html.math_html(f"{label_symbol(step.symbol, len(shape))} =",
                                             font_size_pt=FORM_FONT_SIZE_PT)),
                points=part.points,
                shape=shape,
                # A ragged delta sequence: each chunk's own size (its padded boxes are disabled).
                shape_text=shape_text(_seen_shape(item, part.step, shape)),
                blocks=grid_blocks(shape, part.asked(shape), _real(item, part.step, shape)),
            ))
        body = html.markdown_body_html(markdown, font_size_pt=FORM_FONT_SIZE_PT, text_math=text_math)
        from .answer_areas import answer_points

        points = answer_points(body, [part.id for part in parts])
        placed = sorted(
            ((at, k) for k, at in enumerate(points) if at is not None), key=lambda pair: pair
        )
        segments: list[tuple[Markup, FormPart | None]] = []
        last = 0
        from .answer_areas import drop_answer_sentences

        placed_ids = [parts[k].id for _place, k in placed]
        for at, k in placed:
            # The legend of the boxes gives the part's shape, id and points.
            segments.append((Markup(drop_answer_sentences(body[last:at], placed_ids)), parts[k]))
            last = at
        segments.append((Markup(body[last:]), None))
        unplaced = tuple(part for part, at in zip(parts, points) if at is None)
        problems.append(FormProblem(number, Markup(body), tuple(parts), tuple(segments), unplaced))
    return problems


@lru_cache(maxsize=2)
def environment(directory: str | None = None) -> jinja2.Environment:
    """Jinja's sandbox with autoescaping: ids and titles are text, never markup."""
    env = jinja2.sandbox.SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(directory or str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = num
    return install_jinja(env)  # labels and buttons in the current language


def _asset(name: str, closing_tag: str) -> Markup:
    """A file inlined into a ``<script>`` or ``<style>`` element, checked not to end it early."""
    text = (templates_dir() / ASSET_DIR / name).read_text(encoding="utf-8")
    if closing_tag in text.lower():
        raise ValueError(f"{ASSET_DIR}/{name} contains {closing_tag!r} and cannot be inlined")
    return Markup(text)


def script_hash(text: str) -> str:
    """A CSP source that allows the inline script whose text is exactly ``text``."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


@in_spec_language
def answer_form_html(ws: Worksheet, student: int) -> str:
    """The answer form of one student (a complete HTML document)."""
    html = _html_module()
    sid, code = ws.students[student], ws.codes[student]
    instructions = (
        Markup(html.markdown_body_html(ws.spec.instructions, font_size_pt=FORM_FONT_SIZE_PT))
        if ws.spec.instructions else ""
    )
    parse_js, form_js = _asset("parse.js", "</script"), _asset("form.js", "</script")
    return environment().get_template(FORM_TEMPLATE).render(
        html_lang=HTML_LANG[current()],
        messages=form_messages(),
        spec=Record(title=ws.spec.title),  # plain data; autoescaping makes it text
        script_hashes=Markup(" ".join(script_hash(js) for js in (parse_js, form_js))),
        student=sid,
        variant=code,
        set_id=ws.set_id,
        instructions=instructions,
        problems=form_problems(ws, student),
        filename=submission_filename(sid, code),
        storage_key=STORAGE_PREFIX + code,
        stylesheet=Markup(html.stylesheet()),
        screen_css=Markup(html.screen_css()),
        form_css=_asset("form.css", "</style"),
        parse_js=parse_js,
        form_js=form_js,
    )


def form_messages() -> str:
    """The messages the form's scripts show, in the current language, as JSON for the form's
    ``data-messages`` attribute (escaped there like any text): data, never run, so the page
    still runs only its two scripts, named by their hashes."""
    scripts = [templates_dir() / ASSET_DIR / name for name in ("parse.js", "form.js")]
    return json.dumps(script_messages(scripts), ensure_ascii=False, sort_keys=True)


@in_spec_language
def worksheet_html(ws: Worksheet, student: int, *, page_size: str = "A4") -> str:
    """The worksheet of one student as a self-contained HTML page: typeset, with a header for
    the name and answer boxes under each part (see :mod:`qkvquiz.render.documents`)."""
    from .documents import worksheet_document

    return worksheet_document(ws, student, page_size=page_size)
