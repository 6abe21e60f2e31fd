"""Nothing on a printed page runs past its right margin: not a long formula of the key (a
gradient written as a sum of rows), not a display of definitions, not the grids of a part
with several matrices, not a caption beside its boxes, in English or in Chinese.

The pages are written to PDF and read from the outside (:mod:`.pdf_reading`): every word's
box, and every drawn dot beside the text block, is measured against the page's right text
edge, the page's width less the right margin ``templates/style.css`` sets.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.core.resources import bank_dir
from qkvquiz.families import REGISTRY
from qkvquiz.render.boxes import answer_grid_html
from qkvquiz.render.documents import key_student_document, worksheet_document
from qkvquiz.render.html_page import markdown_to_html
from qkvquiz.render.pdf import pdf_available, render_pdf
from qkvquiz.spec import parse_spec

from .pdf_reading import ink, page_margins, words
from .test_i18n_pages import FORMS, asked_all

pytestmark = [pytest.mark.skipif(not pdf_available(), reason="WeasyPrint's system libraries (Pango) are not installed"),
              pytest.mark.slow, pytest.mark.heavy]

#: How far past the text edge a word or a dot may reach, in points: a glyph's side bearing,
#: a pixel's rounding.
SLACK = 1.0


def past_the_margin(html: str, pdf: Path) -> list[str]:
    """What on the pages of ``html`` (written to ``pdf``) passes the page's right text edge:
    each word whose box ends past it, and each stretch of drawn rows (text, a picture, a
    grid of answer boxes) with ink in the right margin beside the text block. The page's
    header and footer stand in its top and bottom margins, so those are not looked at."""
    render_pdf(html, pdf)
    top, right, bottom, _ = page_margins()
    pages = words(pdf)
    found = []
    # A part's points stand in the margin on purpose ("1 pt", "1 分"), and only they may.
    points: dict[int, list] = {}
    for page in pages:
        edge = page.width - right
        for k, word in enumerate(page.words):
            unit = word.text in ("pt", "分") and k and re.fullmatch(r"[\d.]+", page.words[k - 1].text)
            if unit and page.words[k - 1].x_min > edge + SLACK:
                points.setdefault(page.number, []).extend([page.words[k - 1], word])
        found += [f"page {page.number}: {word.text[:40]!r} ends {word.x_max - edge:.0f}pt past the margin"
                  for word in page.words if word.x_max > edge + SLACK and word not in points.get(page.number, [])]
    width, height = pages[0].width, pages[0].height  # one page size for the whole document
    edge = width - right
    band = (edge + SLACK, top, width, height - bottom)  # the right margin beside the text block
    for drawn in ink(pdf, band):
        marks = points.get(drawn.number, [])
        dots = [(x, y) for x, y in drawn.dark(*band)
                if not any(w.x_min - 1 <= x <= w.x_max + 1 and w.y_min - 1 <= y <= w.y_max + 1 for w in marks)]
        if dots:
            ys = sorted({y for _, y in dots})
            found.append(f"page {drawn.number}: ink up to {max(x for x, _ in dots) + 1 - edge:.0f}pt past the margin "
                         f"in {len(ys)} rows from {ys[0]}pt to {ys[-1] + 1}pt from the top")
    return found


def spec_named(name: str):
    if name == "every step":
        return parse_spec({"title": "Every step", "items": [{"family": f, "ask": asked_all(f)} for f in sorted(REGISTRY)]})
    if name == "teacher forms":
        return parse_spec({"title": "Teacher forms", "items": FORMS})
    return load_spec(bank_dir() / name)


@pytest.mark.parametrize(("name", "lang"), [
    ("all-families.yaml", "en"), ("all-families.yaml", "zh"), ("teacher forms", "en"), ("every step", "zh"),
])
def test_every_page_keeps_within_its_margins(name: str, lang: str, tmp_path: Path) -> None:
    spec = dataclasses.replace(spec_named(name), lang=lang)
    ws = build_worksheet(spec, ["s01", "s02"], seed="fit")
    for kind, html in (("worksheet", worksheet_document(ws, 0)), ("key", key_student_document(ws, 1))):
        found = past_the_margin(html, tmp_path / f"{kind}.pdf")
        assert not found, f"{name} ({lang}) {kind}:\n" + "\n".join(found[:10])


def _at_the_top(html: str, inserted: str) -> str:
    opened = html.index(">", html.index("<body")) + 1
    return html[:opened] + inserted + html[opened:]


def test_the_check_sees_a_line_that_cannot_break(tmp_path: Path) -> None:
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    html = worksheet_document(build_worksheet(spec, ["s01"], seed="fit"), 0)
    assert not past_the_margin(html, tmp_path / "sheet.pdf")
    wide = _at_the_top(html, '<p style="white-space: nowrap">' + "unbroken " * 40 + "</p>")
    found = past_the_margin(wide, tmp_path / "wide.pdf")
    assert any("'unbroken'" in line for line in found) and any("ink" in line for line in found), found


def test_the_check_sees_answer_boxes_past_the_margin_without_a_word_beside_them(tmp_path: Path) -> None:
    # The widest grid, pushed right: its boxes are drawn, not written, and its caption is hidden.
    grid = answer_grid_html("q9.wide", (2, 8))
    html = markdown_to_html(f'<style>.answer-part {{ visibility: hidden }}</style>\n\nBoxes:\n\n'
                            f'<div style="margin-left: 100pt">{grid}</div>\n\nAfter.\n')
    found = past_the_margin(html, tmp_path / "grid.pdf")
    assert found and all("ink" in line for line in found), found
    assert not past_the_margin(html.replace("margin-left: 100pt", "margin-left: 0"), tmp_path / "fits.pdf")


def test_a_bullet_stands_on_the_line_of_its_item_even_beside_a_matrix(tmp_path: Path) -> None:
    tall = r"\frac{1}{2}\begin{bmatrix} 1 & 2 \end{bmatrix}"  # a fraction and a row: a tall line
    for markdown in (f"- $a = {tall}$ first\n- second\n", f"- $a = {tall}$ first\n\n- second\n"):  # tight, loose
        pdf = render_pdf(markdown_to_html(markdown), tmp_path / "list.pdf").path
        (page,) = words(pdf)
        bullets, first = [w for w in page.words if w.text.startswith("\u2022")], page.find("first")
        assert bullets and len(first) == 1, (markdown, page.words)
        assert first[0].level_with(bullets[0]), (bullets[0], first[0])  # the bullet and its item's text share a line
