"""What the PDF renderer hands WeasyPrint to cost less per page: pictures passed by a short name
that serves the same picture, and a part's sentence beside its boxes laid out as a table row."""

from __future__ import annotations

import base64
import re

import pytest

from qkvquiz.render import pdf as pdf_module
from qkvquiz.render.answer_areas import answer_area_html, place_answer_areas
from qkvquiz.render.boxes import header_html
from qkvquiz.render.html import html_document, markdown_to_html
from qkvquiz.render.pdf import (
    FetchRefused,
    layout,
    pdf_available,
)

pytestmark = [pytest.mark.skipif(not pdf_available(), reason="WeasyPrint cannot run here"),
              pytest.mark.slow]

#: Drawn as a picture (a stretched bracket is beyond the text setter), in a list, with boxes.
FORMULA = r"Compute $Z = \operatorname{softmax}\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V$."
MARKDOWN = f"""
## 1. Attention

{FORMULA}

- (a) The weights, part `q1.a`.
- (b) A number $s = \\frac{{q \\cdot k}}{{\\sqrt{{d_k}}}}$.
"""


def document(markdown: str = MARKDOWN) -> str:
    return markdown_to_html(markdown, title="Sheet", header=header_html("Sheet", "S1", "V1"))


def test_a_long_picture_url_reaches_the_renderer_by_a_short_name_that_serves_the_same_picture() -> None:
    html = document()
    urls = re.findall(r"url\('(data:image/svg\+xml;base64,[^']{1024,})'\)", html)
    assert urls, "the formula is a picture"
    source, _ = pdf_module._stylesheets(html, "A4")
    assert "data:image/svg+xml;base64," + urls[0][26:100] not in source
    names = re.findall(r"url\('(qkvquiz-picture:[0-9a-f]+)'\)", source)
    assert len(names) == len(urls)
    assert pdf_module._own_resource(names[0]) == base64.b64decode(urls[0].split(",", 1)[1])
    assert pdf_module._mime(names[0]) == "image/svg+xml"
    assert pdf_module._stylesheets(html, "A4")[0] == source  # the same name every time
    with pytest.raises(FetchRefused):
        pdf_module._own_resource("qkvquiz-picture:0000")


def _part_row(shape: tuple[int, ...]) -> str:
    problem = '<ul>\n<li class="tb">\u2022\u00a0(a) Write it down, part <code>q1.a</code>.</li>\n</ul>'
    return place_answer_areas(problem, [("q1.a", answer_area_html("q1.a", shape, "A", 1))])


def _boxes(document: object, name: str) -> list[object]:
    return [
        box
        for page in document.pages  # type: ignore[attr-defined]
        for box in page._page_box.descendants()
        if getattr(box, "element", None) is not None
        and name in (box.element.get("class") or "").split()
        and type(box).__name__ not in ("LineBox", "TextBox", "InlineBox")
    ]


@pytest.mark.parametrize("shape, beside", [((), True), ((3, 3), True), ((2, 6), False), ((2, 2, 2), False)])
def test_a_parts_sentence_stands_beside_narrow_boxes_and_over_wide_ones(shape: tuple[int, ...], beside: bool) -> None:
    laid_out = layout(html_document(_part_row(shape), body_class="worksheet"))
    (text,), (boxes,) = _boxes(laid_out, "part-text"), _boxes(laid_out, "part-boxes")
    if beside:  # the boxes at the right, level with the sentence's first line
        assert boxes.position_x > text.position_x + 200
        assert abs(boxes.position_y - text.position_y) < 1
    else:  # the boxes under the sentence, from its left edge
        assert boxes.position_y >= text.position_y + text.height - 1
        assert abs(boxes.position_x - text.position_x) < 30
