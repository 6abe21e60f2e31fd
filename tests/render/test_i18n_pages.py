"""Every page a student or an instructor reads, in Chinese: worksheets (Markdown and HTML), the
answer form, answer keys with their worked steps, the practice page (its problems, verdict
sentences and worked steps), for every family and the forms a teacher writes (cross-attention,
scales, masks, partial asks, ragged chunks, vector forms), and every bundled spec with its own
text (titles, instructions), through the library and through ``generate --lang zh`` (md, html,
the form and the PDFs). A word of English left outside math, ids and code fails the test, naming
the page and the words; so does a Chinese character in the English pages of a bundled spec."""

from __future__ import annotations

import re
import shutil
import subprocess
import unicodedata
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app

from qkvquiz.core import i18n
from qkvquiz.families import REGISTRY
from qkvquiz.practice import check, new_problem, page_html, problem_html, worked_html
from qkvquiz.practice.topics import in_language, spec_topics
from qkvquiz.render.documents import key_html_document, worksheet_document
from qkvquiz.render.form import answer_form_html
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.render.pdf import pdf_available
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
        self.math: list[str] = []  # the text of each piece left out, as one run of characters

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "input", "meta", "link", "hr", "col", "wbr"):
            return
        classes = (dict(attrs).get("class") or "").split()
        skip = tag in self.SKIP or any(c.startswith("math") or c == "tm" for c in classes)  # tm: text-set math
        inside = bool(self.stack) and self.stack[-1][1]
        if skip and not inside:
            self.math.append("")
        self.stack.append((tag, skip or inside))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if not (self.stack and self.stack[-1][1]):
            self.text.append(data)
        elif self.math:
            self.math[-1] += "".join(data.split())


def text_of(page: str) -> str:
    reader = _Reader()
    reader.feed(page)
    return " ".join(reader.text)


def math_of(page: str) -> str:
    """The page's math and code, each piece one run of characters: a PDF's text runs a formula's
    letters together (A with subscript ij is "Aij"), so a word found inside it is notation."""
    reader = _Reader()
    reader.feed(page)
    # Without combining marks (S̃ is S and a tilde), which the PDF's text may set apart.
    return "".join(c for c in "\n".join(reader.math) if not unicodedata.combining(c))


BUNDLED = sorted((ROOT / "problem_bank").glob("*.yaml"))
HAN = re.compile(r"[\u4e00-\u9fff\u3000-\u303f\uff01-\uff5e]")  # CJK ideographs and punctuation


def item_ids(spec) -> set[str]:
    """Item and part ids are code, whole or in pieces ("backprop-attention.dV" in a caption)."""
    return {w for i in spec.items for w in re.findall(r"[A-Za-z]+", i.id)}


def practice_text(spec, lang: str) -> str:
    """The practice page with each item's problem, worked steps and the check's sentences (wrong
    answers: every verdict's message, the diagnosis and carried-credit sentences) as a student sees them."""
    topics = in_language(spec_topics(spec, "t"), lang)
    shown = [text_of(page_html(topics, mode="server", lang=lang)), text_of(page_html(topics, mode="static", lang=lang))]
    for topic in topics:
        problem = new_problem(topic, "7")
        shown += [text_of(problem_html(problem)), text_of(worked_html(problem))]
        wrong = {pid: None for pid in problem.key.answers[0]}
        for part in check(problem, wrong).parts:
            shown += [part.message, part.carry, part.tolerance, *part.diagnosis, *part.invariants]
    return " ".join(shown)


def pages_of(spec, lang: str) -> dict[str, str]:
    with i18n.using(lang):
        ws = build_worksheet(spec, ["s01", "s02"], seed=7)
        return {
            "worksheet.md": worksheet_markdown(ws, 0),
            "key.md": key_markdown(ws),
            "worksheet.html": text_of(worksheet_document(ws, 1)),
            "key.html": text_of(key_html_document(ws)),
            "form.html": text_of(answer_form_html(ws, 0)),
            "practice.html": practice_text(spec, lang),
        }


@pytest.fixture(scope="module", params=range(len(specs())), ids=[name for name, _ in specs()])
def zh_pages(request):
    # A bundled spec's own words are checked too: its text is written in Chinese as well.
    name, spec = specs()[request.param]
    return name, pages_of(spec, "zh"), family_ids() | item_ids(spec)


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


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_the_english_pages_of_a_bundled_spec_have_no_chinese(path):
    for page, text in pages_of(load_spec(path), "en").items():
        assert not HAN.search(text), f"{path.name} {page}: {sorted(set(HAN.findall(text)))[:20]}"


def pdftotext(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-raw", str(pdf), "-"], check=True, capture_output=True, text=True).stdout


def generated(tmp_path: Path, spec: str, lang: str, formats: str) -> dict[str, str]:
    """The files ``qkvquiz generate SPEC --lang LANG`` writes for one student, as text a reader sees."""
    out = tmp_path / f"{spec}-{lang}"
    result = CliRunner().invoke(app, ["generate", spec, "-n", "1", "--public", "--seed", "3", "--lang", lang,
                                      "--format", formats, "--out", str(out)])
    assert result.exit_code == 0, result.output
    files = {p.relative_to(out).as_posix(): p for p in out.rglob("*")
             if p.suffix in (".md", ".html", ".pdf") and p.is_file()}
    return {name: (pdftotext(p) if p.suffix == ".pdf" else
                   text_of(p.read_text(encoding="utf-8")) if p.suffix == ".html" else p.read_text(encoding="utf-8"))
            for name, p in files.items()} | {
        f"math of {name}": math_of(p.read_text(encoding="utf-8")) for name, p in files.items() if p.suffix == ".html"}


# The HTML page a PDF is printed from, whose math tells a formula's letters from words.
PRINTED_FROM = {"students/s01/worksheet.pdf": "students/s01/worksheet.html", "keys/s01.pdf": "key.html"}


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_generate_lang_zh_writes_no_english_in_any_page_of_a_bundled_spec(tmp_path, path):
    formats = "md,html,pdf" if pdf_available() and shutil.which("pdftotext") else "md,html"
    pages = generated(tmp_path, path.stem, "zh", formats)
    assert {"key.md", "students/s01/worksheet.md", "students/s01/answer-form.html"} <= set(pages)
    ids = family_ids() | item_ids(load_spec(path))
    for name, text in pages.items():
        if name.startswith("math of "):
            continue
        found = english_words(text, ids)
        if name.endswith(".pdf"):
            found = [w for w in found if w not in pages["math of " + PRINTED_FROM[name]]]
        assert not found, f"{path.name} {name}: {sorted(set(found))[:20]}"
    english = generated(tmp_path, path.stem, "en", formats)
    for name, text in english.items():
        if name.startswith("math of "):
            continue
        assert not HAN.search(text), f"{path.name} {name} (en): {sorted(set(HAN.findall(text)))[:20]}"
