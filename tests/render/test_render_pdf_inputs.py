"""What the PDF renderer hands WeasyPrint to cost less per page: pictures passed by a short name
that serves the same picture, and a part's sentence beside its boxes laid out as a table row."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from qkvquiz.render import pdf as pdf_module
from qkvquiz.render.answer_areas import answer_area_html, place_answer_areas
from qkvquiz.render.boxes import header_html
from qkvquiz.render.html_page import html_document, markdown_to_html
from qkvquiz.render.pdf import (
    FetchRefused,
    pdf_available,
    render_pdf,
)

from .pdf_reading import Word, ink, page_margins, words

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


#: The part's sentence as the page prints it, word by word.
SENTENCE = ["\u2022", "(a)", "Write", "it", "down,", "part", "q1.a", "."]


def _sentence_and_boxes(pdf: Path) -> tuple[tuple[int, int, int, int], tuple[int, int, int]]:
    """Where the ink of the sentence lies (left, top, right, bottom) and where the rest of the
    ink, the boxes with their label and caption, lies (left, top, right). The part's points,
    the words in the right margin, are neither."""
    (page,) = words(pdf)
    sentence = page.words[: len(SENTENCE)]
    assert [word.text for word in sentence] == SENTENCE, page.words
    top, right, bottom, _ = page_margins()
    margin = [word for word in page.words if word.x_min >= page.width - right]
    (drawn,) = ink(pdf)

    def on(found: list[Word], x: int, y: int) -> bool:
        return any(w.x_min - 1 <= x <= w.x_max + 1 and w.y_min - 1 <= y <= w.y_max + 1 for w in found)

    dots = drawn.dark(0, top, page.width, page.height - bottom)  # the footer stands below
    text = [d for d in dots if on(sentence, *d)]
    boxes = [d for d in dots if not on(sentence, *d) and not on(margin, *d)]
    assert text and boxes, (text, boxes)
    xs, ys = [x for x, _ in text], [y for _, y in text]
    return ((min(xs), min(ys), max(xs) + 1, max(ys) + 1),
            (min(x for x, _ in boxes), min(y for _, y in boxes), max(x for x, _ in boxes) + 1))


@pytest.mark.parametrize("shape, beside", [((), True), ((3, 3), True), ((2, 6), False), ((2, 2, 2), True),
                                           ((3, 4, 4), False)])
def test_a_parts_sentence_stands_beside_narrow_boxes_and_over_wide_ones(
    shape: tuple[int, ...], beside: bool, tmp_path: Path
) -> None:
    pdf = render_pdf(html_document(_part_row(shape), body_class="worksheet"), tmp_path / "part.pdf").path
    (text_left, text_top, _, text_bottom), (boxes_left, boxes_top, boxes_right) = _sentence_and_boxes(pdf)
    (page,) = words(pdf)
    edge = page.width - page_margins()[1]
    if beside:  # the boxes at the text's right edge, level with the sentence's first line
        assert boxes_left > text_left + 200
        assert abs(boxes_right - edge) <= 2  # a pixel is a point: a pixel of rounding each way
        assert abs(boxes_top - text_top) <= 2
    else:  # the boxes under the sentence, from its left edge
        assert boxes_top >= text_bottom - 1
        assert abs(boxes_left - text_left) < 30
    # The part's points, once, in the right margin level with its sentence's first line.
    (letter,) = page.find("(a)")
    margin = [word for word in page.words if word.x_min >= edge]
    assert [word.text for word in margin] == ["1", "pt"]
    assert all(word.level_with(letter) for word in margin)
