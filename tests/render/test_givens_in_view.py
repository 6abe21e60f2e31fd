"""Givens in view: a part that opens a page away from its problem's givens has them repeated
above it, and a document whose problems fit where they start is laid out once."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.core import i18n
from qkvquiz.core.resources import bank_dir
from qkvquiz.render.documents import worksheet_document
from qkvquiz.render.givens_in_view import laid_out_with_givens_in_view, parts_out_of_view
from qkvquiz.render.pdf import pdf_available

from .pdf_reading import words

DISPLAY = '<div class="math-display"><span class="tm">Q = [1]</span></div>\n'


def _problem(number: int, parts: list[str], givens: str = DISPLAY) -> str:
    rows = "".join(f'<li class="pi"><div class="part-row acol-1 alab-0" id="part-{p}"><div class="part-text">'
                   f"({p})</div></div></li>" for p in parts)
    return (f'<section class="problem" id="problem-{number}" data-givens-label="Given in Problem {number}:">'
            f"\n<h3>Problem {number}</h3><p>Givens:</p>{givens}<ul>{rows}</ul></section>")


@dataclass
class _Page:
    anchors: dict


@dataclass
class _Layout:
    """A stand-in for the renderer: each anchor's page is given, as a laid-out document has them."""

    pages_of: dict
    sources: list = field(default_factory=list)

    def __call__(self, source: str):
        self.sources.append(source)
        pages: dict[int, dict] = {}
        for name, page in self.pages_of.items():
            pages.setdefault(page, {})[name] = (0, 0, 0, 0)
        return type("Doc", (), {"pages": [_Page(pages.get(k, {})) for k in range(max(pages) + 1)]})()


def test_a_part_that_opens_a_later_page_gets_its_problems_givens_repeated_above_it() -> None:
    source = _problem(1, ["a", "b", "c"]) + _problem(2, ["d"])
    lay_out = _Layout({"problem-1": 0, "part-a": 0, "part-b": 1, "part-c": 1, "problem-2": 1, "part-d": 1})
    laid_out_with_givens_in_view(source, lay_out)
    assert len(lay_out.sources) == 2  # laid out again, once: the repeat is there the second time
    final = lay_out.sources[-1]
    repeat = final.index('data-repeats="part-b"')
    assert final.index("Given in Problem 1:", repeat) < final.index('id="part-b"') and DISPLAY in final[repeat:]
    assert final.count("data-repeats=") == 1  # (c) follows (b) on its page; problem 2 starts on its own


def test_a_worksheet_whose_problems_fit_where_they_start_is_laid_out_once() -> None:
    source = _problem(1, ["a", "b"]) + _problem(2, ["c"])
    lay_out = _Layout({"problem-1": 0, "part-a": 0, "part-b": 0, "problem-2": 1, "part-c": 1})
    laid_out_with_givens_in_view(source, lay_out)
    assert len(lay_out.sources) == 1
    # A problem with no displayed givens has nothing to repeat.
    bare = _problem(1, ["a", "b"], givens="")
    doc = _Layout({"problem-1": 0, "part-a": 0, "part-b": 1})(bare)
    assert parts_out_of_view(bare, doc) == []


@pytest.mark.slow
@pytest.mark.skipif(not pdf_available(), reason="WeasyPrint's system libraries are not installed")
@pytest.mark.parametrize(("spec_name", "lang"), [("all-families.yaml", "en"), ("delta-rule.yaml", "zh")])
def test_every_continued_problem_shows_its_givens_on_the_page_its_part_opens(
    spec_name: str, lang: str, tmp_path: Path
) -> None:
    """all-families' Problem 12 (e)–(j) and 13 (b)–(f), and the delta rule's long problems,
    started a page after their matrices with only "Problem 12 (continued)" to say so."""
    from qkvquiz.render.pdf import render_pdf

    with i18n.using(lang):
        ws = build_worksheet(load_spec(bank_dir() / spec_name), ["ada"], seed="view")
        html = worksheet_document(ws, 0)
        label = i18n._("Given in Problem %(number)s:")
    pages = words(render_pdf(html, tmp_path / "sheet.pdf").path)
    continued = 0
    for page in pages[1:]:
        head = " ".join(w.text for w in page.words if w.y_max < 32)
        if not head:
            continue  # the page opens with a problem's heading
        number = re.search(r"\d+", head).group(0)
        text = " ".join(w.text for w in page.words if w.y_min >= 32)
        given = label % {"number": number}
        assert text.replace(" ", "").startswith(given.replace(" ", "")), (page.number, head, text[:80])
        continued += 1
    assert continued >= 1
