"""Every page a student or an instructor reads, in Chinese: worksheets (Markdown and HTML), the
answer form, answer keys with their worked steps, the practice page (its problems, verdict
sentences and worked steps), for every family and the forms a teacher
writes (cross-attention, scales, masks, partial asks, ragged chunks, vector forms). A word of
English left outside math, ids and code fails the test, naming the page and the words."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from qkvquiz.core import i18n
from qkvquiz.families import REGISTRY
from qkvquiz.practice import check, new_problem, page_html, problem_html, worked_html
from qkvquiz.practice.topics import in_language, spec_topics
from qkvquiz.render.documents import key_html_document, worksheet_document
from qkvquiz.render.form import answer_form_html
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.spec import load_spec, parse_spec
from qkvquiz.worksheet import build_worksheet

from ..core.test_i18n import english_words, family_ids

ROOT = Path(__file__).resolve().parents[2]


def asked_all(name: str) -> list[str]:
    return [s.name for s in REGISTRY[name].steps if s.askable]


# The forms a template branches on, beyond each family's defaults.
FORMS: list[dict] = [
    {"family": "attention.scores", "params": {"form": "vector", "d_k": 2, "stated_d_k": 9}},
    {"family": "attention.scores", "params": {"form": "vector", "d_k": 2, "scale": "none"}},
    {"family": "attention.scores", "params": {"queries": 1, "keys": 3, "scale": 0.5}},
    {"family": "attention.scores", "params": {"tokens": 1, "scale": "none"}},
    {"family": "attention.weights", "params": {"queries": 3, "keys": 2, "mask": "random"}},
    {"family": "attention.weights", "params": {"queries": 2, "keys": 3, "mask": "random", "empty_rows": True}},
    {"family": "attention.output", "params": {"queries": 2, "keys": 3, "d_k": 2, "stated_d_k": 16}},
    {"family": "attention.output", "params": {"queries": 1, "keys": 3, "scale": "none"}},
    {"family": "attention.output", "params": {"queries": 2, "keys": 3},
     "ask": {"weights": {"entries": [[1, 2], [2, 3]]}, "output": {"rows": [1]}}},
    {"family": "attention.masked", "params": {"mask": "padding", "tokens": 4, "padded": 2}},
    {"family": "attention.masked", "params": {"mask": "causal_padding", "tokens": 4}},
    {"family": "attention.multihead", "params": {"queries": 1, "keys": 3}},
    {"family": "attention.qk_swap", "params": {"queries": 2, "keys": 3, "scale": "none"}},
    {"family": "attention.layernorm", "params": {"tokens": 1, "gamma": 2, "beta": 0.5, "residual": False}},
    {"family": "backprop.scores", "params": {"queries": 1, "keys": 2, "scale": 0.5}},
    {"family": "backprop.attention", "params": {"tokens": 2, "scale": "none"}},
    {"family": "backprop.projection", "params": {"form": "vector"}},
    {"family": "delta.chunk_forward", "params": {"chunk": 1}},
    {"family": "delta.chunk_forward", "params": {"chunk": 3, "chunks": 2, "last_chunk": 2}},
    {"family": "delta.chunk_backward", "params": {"chunk": 2, "chunks": 2}},
    {"family": "delta.recurrent", "params": {"tokens": 3, "state": "zero"}},
    {"family": "theory.softmax_jacobian", "params": {"case": "saturated"}},
    {"family": "theory.complexity", "params": {"reuse": True}},
    {"family": "theory.shapes", "params": {"bias": True}},
]


def specs() -> list[tuple[str, object]]:
    every = [{"family": name, "ask": asked_all(name)} for name in sorted(REGISTRY)]
    out = [("every family, every step", parse_spec({"title": "注意力练习", "lang": "zh", "items": every})),
           ("teacher forms", parse_spec({"title": "注意力练习", "lang": "zh", "items": FORMS}))]
    for path in sorted((ROOT / "problem_bank").glob("*.yaml")):
        out.append((path.name, load_spec(path)))
    return out


class _Reader(HTMLParser):
    """The text a reader sees of a page, without what is not prose: scripts, styles, code and
    typeset math (``<math>``, the ``math…`` and ``tm`` spans and divs, which hold $…$ of the Markdown)."""

    SKIP = {"script", "style", "code", "math"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "input", "meta", "link", "hr", "col", "wbr"):
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = tag in self.SKIP or any(c.startswith("math") or c == "tm" for c in classes)  # tm: text-set math
        self.stack.append((tag, skip or (bool(self.stack) and self.stack[-1][1])))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if not (self.stack and self.stack[-1][1]):
            self.text.append(data)


def text_of(page: str) -> str:
    reader = _Reader()
    reader.feed(page)
    return " ".join(reader.text)


def spec_words(spec) -> set[str]:
    """The instructor's own words (a bundled spec's English title and intro are not ours to translate)."""
    text = " ".join([spec.title, spec.instructions, *(i.title + " " + i.intro for i in spec.items)])
    return set(re.findall(r"[A-Za-z]+", text))


def practice_text(spec) -> str:
    """The practice page with each item's problem, worked steps and the check's sentences (wrong
    answers: every verdict's message, the diagnosis and carried-credit sentences) as a student sees them."""
    topics = in_language(spec_topics(spec, "t"), "zh")
    shown = [text_of(page_html(topics, mode="server", lang="zh")), text_of(page_html(topics, mode="static", lang="zh"))]
    for topic in topics:
        problem = new_problem(topic, "7")
        shown += [text_of(problem_html(problem)), text_of(worked_html(problem))]
        wrong = {pid: None for pid in problem.key.answers[0]}
        for part in check(problem, wrong).parts:
            shown += [part.message, part.carry, part.tolerance, *part.diagnosis, *part.invariants]
    return " ".join(shown)


@pytest.fixture(scope="module", params=range(len(specs())), ids=[name for name, _ in specs()])
def zh_pages(request):
    name, spec = specs()[request.param]
    with i18n.using("zh"):
        ws = build_worksheet(spec, ["s01", "s02"], seed=7)
        pages = {
            "worksheet.md": worksheet_markdown(ws, 0),
            "key.md": key_markdown(ws),
            "worksheet.html": text_of(worksheet_document(ws, 1)),
            "key.html": text_of(key_html_document(ws)),
            "form.html": text_of(answer_form_html(ws, 0)),
            "practice.html": practice_text(spec),
        }
    # Item and part ids are code, whole or in pieces ("backprop-attention.dV" in a caption).
    ids = family_ids() | spec_words(spec) | {w for i in spec.items for w in re.findall(r"[A-Za-z]+", i.id)}
    return name, pages, ids


@pytest.mark.slow
@pytest.mark.parametrize("page", ["worksheet.md", "key.md", "worksheet.html", "key.html", "form.html", "practice.html"])
def test_every_page_in_chinese_has_no_english_words(zh_pages, page):
    name, pages, ids = zh_pages
    found = english_words(pages[page], ids)
    assert not found, f"{name} {page}: {sorted(set(found))[:20]}"


@pytest.mark.slow
@pytest.mark.parametrize("page", ["worksheet.md", "key.md"])
def test_words_inside_formulas_are_in_chinese_too(zh_pages, page):
    r"""A formula's prose (``\text{ if }``, ``\text{ with biases}``: written with spaces around it) is
    read as words, and translated; a name set upright in one (``\text{model}``) is notation."""
    name, pages, ids = zh_pages
    prose = [t for t in re.findall(r"\\text\{([^{}]*)\}", pages[page]) if t != t.strip() or " " in t]
    found = english_words(" ".join(prose), ids)
    assert not found, f"{name} {page}: {sorted(set(found))[:20]}"
