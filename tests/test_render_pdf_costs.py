"""What the PDF renderer does to cost less per page, and that each draws the same page:
the lean HTML stylesheet, pictures drawn once and replayed, pictures passed by a short name,
and a part's sentence beside its boxes laid out as a table row."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from qkvquiz.render import pdf as pdf_module
from qkvquiz.render.documents import answer_area_html, place_answer_areas
from qkvquiz.render.html import header_html, html_document, markdown_to_html
from qkvquiz.render.pdf import (
    FetchRefused,
    ImageCache,
    layout,
    pdf_available,
    render_pdf,
)

pytestmark = pytest.mark.skipif(not pdf_available(), reason="WeasyPrint cannot run here")

#: Drawn as a picture (a stretched bracket is beyond the text setter), in a list, with boxes.
FORMULA = r"Compute $Z = \operatorname{softmax}\left(\frac{QK^\top}{\sqrt{d_k}} + M\right)V$."
MARKDOWN = f"""
## 1. Attention

{FORMULA}

- (a) The weights, part `q1.a`.
- (b) A number $s = \\frac{{q \\cdot k}}{{\\sqrt{{d_k}}}}$.
"""


def png(pdf: Path) -> bytes:
    """Every page of ``pdf`` as pictures (poppler), to compare what two PDFs draw."""
    tool = shutil.which("pdftoppm")
    if tool is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed")
    return subprocess.run([tool, "-r", "72", "-png", str(pdf)], check=True, capture_output=True).stdout


def document(markdown: str = MARKDOWN) -> str:
    return markdown_to_html(markdown, title="Sheet", header=header_html("Sheet", "S1", "V1"))


def test_our_documents_get_the_lean_html_stylesheet_and_it_draws_the_same_pages(tmp_path, monkeypatch) -> None:
    full, lean = pdf_module._html_classes()
    assert full is not lean
    assert type(pdf_module._html(pdf_module._stylesheets(document(), "A4")[0])) is lean
    lean_pdf = render_pdf(document(), tmp_path / "lean.pdf")
    monkeypatch.setattr(pdf_module, "_NEEDS_FULL_UA", re.compile(""))  # every document: WeasyPrint's own
    full_pdf = render_pdf(document(), tmp_path / "full.pdf")
    assert lean_pdf.pages == full_pdf.pages
    assert png(lean_pdf.path) == png(full_pdf.path)


@pytest.mark.parametrize(
    "body",
    [
        '<p dir="rtl">x</p>',
        '<p><span style="float: footnote">a note</span></p>',
        '<div style="display: list-item">x</div>',
    ],
)
def test_a_document_that_needs_a_rule_the_lean_stylesheet_leaves_out_gets_weasyprints_own(body: str) -> None:
    full, lean = pdf_module._html_classes()
    assert type(pdf_module._html(html_document("<p>x</p>"))) is lean
    assert type(pdf_module._html(html_document(body))) is full


def test_the_lean_stylesheet_keeps_markers_for_list_items_only_and_drops_footnote_and_dir_rules() -> None:
    lean = pdf_module._lean_ua_text(pdf_module.weasyprint_module().html.UA)
    assert "li::marker" in lean and not re.search(r"(?m)^::marker", lean)
    assert "::footnote-call" not in lean and "[dir" not in lean and "@counter-style" not in lean
    assert "h1 { bookmark-level: 1 }" in lean  # everything else stays


def test_a_picture_is_drawn_once_per_size_and_replayed_the_same_into_the_next_documents(tmp_path: Path) -> None:
    cache = ImageCache()
    render_pdf(document(), tmp_path / "first.pdf", image_cache=cache)
    second = render_pdf(document(), tmp_path / "second.pdf", image_cache=cache)
    replays = [vars(image)["draw"] for image in cache.values() if image is not None and "draw" in vars(image)]
    assert replays, "the formula's picture is replayed"
    assert all(r.recorded and None not in r.recorded.values() for r in replays)
    drawn = render_pdf(document(), tmp_path / "drawn.pdf", image_cache={})  # a plain cache: drawn each time
    assert png(second.path) == png(drawn.path)


def _svg_url(svg: str) -> str:
    return "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode()


def test_only_pictures_of_plain_shapes_are_replayed() -> None:
    ns = 'xmlns="http://www.w3.org/2000/svg"'
    assert pdf_module._simple_svg(_svg_url(f'<svg {ns}><path d="M 0 0 L 1 1 Z"/><rect width="1" height="1"/></svg>'))
    for inner in (
        "<text>x</text>",
        '<defs><linearGradient id="g"/></defs><rect fill="url(#g)" width="1" height="1"/>',
        '<path clip-path="url(#c)" d="M 0 0"/>',
        '<image href="x.png"/>',
    ):
        assert not pdf_module._simple_svg(_svg_url(f"<svg {ns}>{inner}</svg>")), inner
    assert not pdf_module._simple_svg("data:image/png;base64,AAAA")


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
