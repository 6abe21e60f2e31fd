"""Nothing on a printed page runs past its right margin: not a long formula of the key (a
gradient written as a sum of rows), not a display of definitions, not the grids of a part
with several matrices, not a caption beside its boxes, in English or in Chinese.

The pages are laid out by WeasyPrint and every text, picture and inline block is measured
against the page's content box.
"""

from __future__ import annotations

import dataclasses

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.families import REGISTRY
from qkvquiz.render.documents import key_student_document, worksheet_document
from qkvquiz.render.pdf import pdf_available
from qkvquiz.core.resources import bank_dir
from qkvquiz.spec import parse_spec

from .test_i18n_pages import FORMS, asked_all

pytestmark = [pytest.mark.skipif(not pdf_available(), reason="WeasyPrint's system libraries (Pango) are not installed"),
              pytest.mark.slow]


def past_the_margin(html: str) -> list[str]:
    """Each box of the laid-out ``html`` whose right edge passes the page's text width."""
    from weasyprint.formatting_structure import boxes

    from qkvquiz.render.pdf import layout

    measured = (boxes.TextBox, boxes.InlineReplacedBox, boxes.BlockReplacedBox, boxes.InlineBlockBox)
    found = []
    for number, page in enumerate(layout(html).pages, start=1):
        root = page._page_box
        edge = root.content_box_x() + root.width
        for box in root.descendants():
            if isinstance(box, measured) and box.border_box_x() + box.border_width() > edge + 1:
                what = box.element.get("class") if box.element is not None else box.element_tag
                found.append(f"page {number}: <{box.element_tag} class={what}> "
                             f"{box.border_box_x() + box.border_width() - edge:.0f}px past: {getattr(box, 'text', '')[:40]!r}")
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
def test_every_page_keeps_within_its_margins(name: str, lang: str) -> None:
    spec = dataclasses.replace(spec_named(name), lang=lang)
    ws = build_worksheet(spec, ["s01", "s02"], seed="fit")
    for kind, html in (("worksheet", worksheet_document(ws, 0)), ("key", key_student_document(ws, 1))):
        found = past_the_margin(html)
        assert not found, f"{name} ({lang}) {kind}:\n" + "\n".join(found[:10])


def test_the_check_sees_a_line_that_cannot_break() -> None:
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    html = worksheet_document(build_worksheet(spec, ["s01"], seed="fit"), 0)
    assert not past_the_margin(html)
    opened = html.index(">", html.index("<body")) + 1
    wide = html[:opened] + '<p style="white-space: nowrap">' + "unbroken " * 40 + "</p>" + html[opened:]
    assert past_the_margin(wide)


def test_a_bullet_stands_on_the_line_of_its_item_even_beside_a_matrix() -> None:
    from weasyprint.formatting_structure import boxes

    from qkvquiz.render.html import markdown_to_html
    from qkvquiz.render.pdf import layout

    tall = r"\frac{1}{2}\begin{bmatrix} 1 & 2 \end{bmatrix}"  # a fraction and a row: a tall line
    for markdown in (f"- $a = {tall}$ first\n- second\n", f"- $a = {tall}$ first\n\n- second\n"):  # tight, loose
        page = layout(markdown_to_html(markdown)).pages[0]._page_box
        lines = [box for box in page.descendants() if isinstance(box, boxes.LineBox)]
        first = next((line for line in lines if any(getattr(b, "text", "").startswith("\u2022")
                                                    for b in line.descendants())), None)
        assert first is not None, f"no line opens with a bullet: {markdown!r}"
        words = "".join(getattr(b, "text", "") for b in first.descendants())
        assert "first" in words, words  # the bullet and its item's text share a line
