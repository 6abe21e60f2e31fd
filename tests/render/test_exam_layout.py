"""The printed worksheet set as a typeset exam sets it: one face for text and math, every grid
of a sheet at the text's right edge with its part's points in the margin, parts labelled (a), (b)
hanging at the left, a problem kept on one page with its givens, and no sentence broken after its
first word.

The layout checks read the written PDF from outside (:mod:`tests.render.pdf_reading`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.core import i18n
from qkvquiz.core.resources import bank_dir
from qkvquiz.render.answer_areas import answer_area_html, place_answer_areas
from qkvquiz.render.boxes import answer_grid_html
from qkvquiz.render.documents import worksheet_document
from qkvquiz.render.fonts import fonts_dir
from qkvquiz.render.html_page import html_document, markdown_body_html
from qkvquiz.render.math_html import tags_removed
from qkvquiz.render.page import BOXES_CSS
from qkvquiz.render.pdf import pdf_available
from qkvquiz.render.svg_math import svg_math_html

from .pdf_reading import Page, Word, ink, page_margins, words

pdf_only = pytest.mark.skipif(not pdf_available(), reason="WeasyPrint's system libraries are not installed")


def _advance_px(text: str, font_file: str, size_pt: float) -> float:
    from fontTools.ttLib import TTFont

    with TTFont(fonts_dir() / font_file, lazy=True) as font:
        cmap, metrics, units = font.getBestCmap(), font["hmtx"], font["head"].unitsPerEm
        return sum(metrics[cmap[ord(ch)]][0] for ch in text) / units * size_pt * 96 / 72


def test_a_drawn_formula_is_in_the_face_and_size_of_the_text() -> None:
    """"softmax" in a drawn formula was a smaller, narrower face (STIX) than the text beside it
    (DejaVu Serif): drawn, it is as wide as the text face sets the word at the same size."""
    for size in (11.0, 9.0):
        drawn = svg_math_html(r"\operatorname{softmax}", display=False, font_size_pt=size)
        width = float(re.search(r"width:([0-9.]+)px", drawn).group(1)) - 2.0  # less the 1 px margins
        text = _advance_px("softmax", "DejaVuSerif.ttf", size)
        assert abs(width - text) / text < 0.04, (size, width, text)


def test_a_part_has_its_label_hanging_and_no_bullet() -> None:
    html = markdown_body_html("- **(a)** Compute $x$.\n- **(b)** And $y$.\n- a plain item\n- **bold** word\n", text_math=True)
    items = re.findall(r"<li[^>]*>.*?</li>", html, re.DOTALL)
    assert items[0].startswith('<li class="pi"><strong class="pl">(a)</strong>Compute'), items[0]
    assert items[1].startswith('<li class="pi"><strong class="pl">(b)</strong>And'), items[1]
    assert all("\u2022" not in item for item in items[:2])
    # Other items keep their bullet.
    assert items[2].startswith('<li class="tb">\u2022'), items[2]
    assert items[3].startswith('<li class="tb">\u2022'), items[3]


@pytest.mark.parametrize(
    ("symbol", "expected"),
    [("S_t", ["S1 =", "S2 ="]), ("S^{(h)}", ["S(1) =", "S(2) ="]), ("A", ["A1 =", "A2 ="])],
)
def test_every_matrix_of_a_stack_is_labelled_as_the_prompt_names_it(symbol: str, expected: list[str]) -> None:
    """The second grid of a list answer (S₂, head 2) had no label and stood offset from the first."""
    area = answer_area_html("q1.states", (2, 2, 2), symbol, 1.0)
    labels = re.findall(r'<span class="answer-label">(.*?)</span><span class="bracket">', area)
    assert [" ".join(tags_removed(label).split()) for label in labels] == expected, area


def _text_right_edge(page: Page) -> float:
    return page.width - page_margins()[1]


def _margin_points(pages: list[Page]) -> list[tuple[int, Word]]:
    """Each part's points in the right margin ("1 pt", "1 分"), in the order of the sheet: the
    k-th is the k-th part's, level with its letter."""
    found = []
    for page in pages:
        edge = _text_right_edge(page)
        found += [(page.number, w) for w in page.words if w.text in ("pt", "分") and w.x_min > edge]
    return found


def _part_pages(pdf: Path, items: list) -> dict[str, int]:
    """The page of each part's letter, read from its points in the margin."""
    parts = [part.id for item in items for part in item.parts]
    points = _margin_points(words(pdf))
    assert len(points) == len(parts), (len(points), len(parts))
    return {part: number for part, (number, _word) in zip(parts, points)}


def _worksheet_pdf(spec_name: str, lang: str, seed: str, tmp_path: Path,
                   printed: bool = False) -> tuple[Path, set[str], list]:
    """A student's worksheet PDF; ``printed``: the sheet made to be scanned (answer cells)."""
    from qkvquiz.render.pdf import render_pdf
    from qkvquiz.render.printed import part_combs

    spec = load_spec(bank_dir() / spec_name)
    with i18n.using(lang):
        ws = build_worksheet(spec, ["ada"], seed=seed)
        html = worksheet_document(ws, 0, combs=part_combs(ws) if printed else None)
    pdf = render_pdf(html, tmp_path / f"{spec_name}-{lang}-{seed}.pdf").path
    ids = {part.id for item in ws.spec.items for part in item.parts}
    return pdf, ids, list(ws.spec.items)


@pytest.mark.slow
@pdf_only
@pytest.mark.parametrize(("spec_name", "lang", "printed"), [
    ("attention-basics.yaml", "en", False), ("attention-basics.yaml", "zh", False),
    ("all-families.yaml", "en", False), ("all-families.yaml", "zh", False),
    # The printed sheet's answer cells keep the same edge.
    ("attention-basics.yaml", "zh", True), ("all-families.yaml", "en", True),
])
def test_every_grid_beside_or_under_a_long_formula_ends_at_the_texts_right_edge(
    spec_name: str, lang: str, printed: bool, tmp_path: Path
) -> None:
    """Grids started where the sheet's widest label put them, and a problem of one-box answers had
    a column of its own 17 mm to the left of the next problem's boxes on the same page: every grid
    beside its sentence (or under a long formula) now ends at the text's right edge, as an exam
    sheet has its boxes, with the part's points in the margin beside it and nowhere else."""
    from qkvquiz.render.documents import worksheet_body_html

    from qkvquiz.render.printed import part_combs

    pdf, _ids, items = _worksheet_pdf(spec_name, lang, "edge", tmp_path, printed)
    spec = load_spec(bank_dir() / spec_name)
    with i18n.using(lang):
        ws = build_worksheet(spec, ["ada"], seed="edge")
        body = worksheet_body_html(ws, 0, combs=part_combs(ws) if printed else None)
    kinds = re.findall(r'<div class="part-row( under)?[^"]*" id="[^"]*"><div class="part-text">', body)
    assert len(kinds) == sum(len(item.parts) for item in items)
    pages = words(pdf)
    edge = _text_right_edge(pages[0])
    drawn = {page.number: page for page in ink(pdf, (edge - 60, 0, edge + 3, pages[0].height))}
    points = _margin_points(pages)
    checked = 0
    for k, ((number, word), under) in enumerate(zip(points, kinds)):
        # The part's band: from its letter to the next part's letter on the same page (or the foot).
        following = points[k + 1] if k + 1 < len(points) else None
        bottom = following[1].y_min if following and following[0] == number else pages[0].height - page_margins()[2]
        dark = drawn[number].dark(edge - 60, word.y_min - 2, edge + 3, bottom)
        if under:
            continue
        assert dark, (number, word)
        assert abs(max(x for x, _y in dark) + 1 - edge) <= 1.5, (k, number, max(x for x, _y in dark), edge)
        checked += 1
    assert checked >= 5
    # No caption names a part: the points are in the margin, once.
    assert not any(w.text.endswith(("_jacobian.probs", ".scores", ".weights")) for page in pages for w in page.words)


def _headings(page: Page) -> list[int]:
    """The problem numbers whose headings ("Problem 4:", "第 4 题：") are on ``page``, in order."""
    found, ws_ = [], page.words
    for k in range(len(ws_) - 2):
        en = ws_[k].text == "Problem" and re.fullmatch(r"\d+:", ws_[k + 1].text)
        # ("第 2 题的已知条件：" over repeated givens is no heading.)
        zh = ws_[k].text == "第" and ws_[k + 1].text.isdigit() and ws_[k + 2].text.startswith("题：")
        if en or zh:
            found.append(int(ws_[k + 1].text.rstrip(":")))
    return found


@pytest.mark.slow
@pdf_only
@pytest.mark.parametrize(("spec_name", "lang", "strict", "printed"), [
    ("attention-basics.yaml", "en", True, False), ("attention-basics.yaml", "zh", True, False),
    ("masking.yaml", "en", True, False), ("layernorm.yaml", "en", True, False),
    ("multihead.yaml", "en", True, False), ("delta-rule.yaml", "zh", False, False),
    # The printed sheet's corner marks and QR frame (fixed boxes on every page) must not make a
    # page that opens with a new problem say the last one continues.
    ("attention-basics.yaml", "en", True, True), ("masking.yaml", "zh", True, True),
])
def test_a_problems_givens_stay_with_its_first_part_and_a_continued_page_says_so(
    spec_name: str, lang: str, strict: bool, printed: bool, tmp_path: Path
) -> None:
    """Problem 4's givens were on one page and its parts on the next; kept whole instead, a long
    problem left a page with nothing but the sheet's title. A problem's heading is on the page of
    its first part (``strict``; the delta rule's two-chunk givens with their first part are
    taller than a page in Chinese, so there the first part may be on the next page); a page that
    opens inside a problem names it at the top, and no other does."""
    for seed in ("a", "b"):
        pdf, ids, items = _worksheet_pdf(spec_name, lang, seed, tmp_path, printed)
        pages = words(pdf)
        first_caption = _part_pages(pdf, items)  # the page of each part's letter
        for number, item in enumerate(items, start=1):
            heading_page = next(page.number for page in pages if number in _headings(page))
            allowed = {heading_page} if strict else {heading_page, heading_page + 1}
            assert first_caption[item.parts[0].id] in allowed, (seed, item.id, heading_page)
        for page in pages[1:]:
            top = [w for w in page.words if w.y_max < 32]  # the running head, above the text (from 39.7 pt)
            text = " ".join(w.text for w in top)
            body = [w for w in page.words if w.y_min >= 32]
            opens_with_heading = bool(_headings(page)) and (
                body[0].text in ("Problem", "第") and _headings(Page(0, 0, 0, tuple(body[:3])))
            )
            if opens_with_heading:
                assert not top, (seed, page.number, text)
            else:
                previous = [n for p in pages[: page.number - 1] for n in _headings(p)][-1]
                expected = f"Problem {previous} (continued)" if lang == "en" else f"第 {previous} 题（续）"
                assert text == expected, (seed, page.number, text)


@pdf_only
def test_a_sentence_beside_its_boxes_is_not_broken_after_its_first_word(tmp_path: Path) -> None:
    """"(b) Compute ⏎ W by forward substitution: ⏎ W = A⁻¹B_K": with its width left to the
    table's automatic layout the sentence broke after its first word where a formula followed."""
    from qkvquiz.render.pdf import render_pdf

    markdown = "- **(b)** Compute W by forward substitution: $W = A^{-1}B_K$. Part `q1.W`.\n"
    area = answer_grid_html("q1.X", (3, 4), label="X =", caption="")  # the widest grid beside a sentence
    body = place_answer_areas(markdown_body_html(markdown, text_math=True), [("q1.W", area)])
    html = html_document(f'<section class="problem">{body}</section>', body_class="worksheet")
    (page,) = words(render_pdf(html, tmp_path / "part.pdf").path)
    compute, forward = page.find("Compute"), page.find("forward")
    assert compute and forward and compute[0].level_with(forward[0]), page.words


def test_the_matrices_of_a_product_stand_together_and_a_list_keeps_its_space() -> None:
    """"r₁ = S₀k₁ = [..]   [..]   = [..]": the factors of a product stood a quad apart, as if
    they were a list. A product's next factor follows its neighbour (a zero-width break between),
    the rest of an equation is spaced as its operator is, and a list ("[..], [..]") keeps its room."""
    from qkvquiz.render.math_html import math_html

    m = r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}"
    v = r"\begin{bmatrix} 1 \\ 3 \end{bmatrix}"
    product = math_html(f"r = S k = {m}{v} = {v}", display=True, text=True)
    assert product.count('class="math-group cont"') == 2, product
    assert '\u200b<span class="math-group cont"><span class="bmat">' in product  # the second factor
    assert ' <span class="math-group cont"><span class="tm">=' in product  # "= [..]"
    listed = math_html(f"S_t = {m}, {m}", display=True, text=True)
    assert "cont" not in listed and "\u200b" not in listed, listed
    givens = math_html(rf"Q = {m}, \quad K = {m}", display=True, text=True)
    assert "cont" not in givens, givens


def test_a_paragraphs_last_short_word_is_tied_to_the_one_before() -> None:
    """"…inside the square ⏎ root.", "…do not invert ⏎ A.": a paragraph's short last word, or a
    short formula that ends it, is tied to the word before; a long last word or formula is not."""
    assert "square\u00a0root.</p>" in markdown_body_html("adds it inside the square root.")
    assert "invert\u00a0<span" in markdown_body_html("Find them; do not invert $A$.", text_math=True)
    assert "the\u00a0" not in markdown_body_html("it is the denominator.")
    long_formula = markdown_body_html("Compute the state $S_t = S_{t-1} + v_t k_t^\\top$.", text_math=True)
    assert "state \u200b<span" in long_formula, long_formula


def test_a_parts_sentence_takes_the_width_its_boxes_leave() -> None:
    """"(b) Compute the attention weights row ⏎ by row" beside a 3-box grid in the sheet's 4-box
    column, and a count's sentence four lines long: each part's boxes now take a column as wide as
    they need at the right, its sentence the rest of the line."""
    from qkvquiz.render.documents import worksheet_body_html
    from qkvquiz.render.page import AnswerColumn

    for spec_name in ("theory.yaml", "attention-basics.yaml"):
        body = worksheet_body_html(build_worksheet(load_spec(bank_dir() / spec_name), ["ada"], seed="own"), 0)
        rows = re.findall(r'<div class="part-row(?: wide)? acol-(\d) alab-(\d)" id="[^"]*">(.*?)</div></div>(?=</li>)',
                          body, re.S)
        assert rows
        for boxes, room, row in rows:
            widest = max(int(c) for c in re.findall(r'class="boxes r\d+ c(\d+)"', row))
            assert int(boxes) == widest, (spec_name, boxes, widest)
        # A one-box part's sentence has more room than a 4-box part's, and the two cells fill the row.
        one, four = AnswerColumn(1, 0), AnswerColumn(4, 0)
        assert one.sentence_px > four.sentence_px + 3 * 73
        assert f".acol-1.alab-0 .part-text {{ width: {one.sentence_px:.2f}px; }}" in BOXES_CSS


@pytest.mark.slow
@pdf_only
@pytest.mark.parametrize(("spec_name", "lang"), [("attention-basics.yaml", "en"), ("attention-basics.yaml", "zh"),
                                                  ("masking.yaml", "en")])
def test_a_problem_shorter_than_three_quarters_of_a_page_is_kept_whole(spec_name: str, lang: str, tmp_path: Path) -> None:
    """Broken between parts, attention-basics' problem 5 left (b) and (c) alone on a page and
    masking's problem 4 its (c): a problem that fits on a page with room to spare is kept whole."""
    from qkvquiz.render.answer_areas import WHOLE_PROBLEM_PX, problem_height_px
    from qkvquiz.render.documents import worksheet_body_html

    for seed in ("a", "b"):
        pdf, ids, items = _worksheet_pdf(spec_name, lang, seed, tmp_path)
        spec = load_spec(bank_dir() / spec_name)
        with i18n.using(lang):
            body = worksheet_body_html(build_worksheet(spec, ["ada"], seed=seed), 0)
        sections = re.findall(r'<section class="problem[^"]*">(.*?)</section>', body, re.DOTALL)
        pages_of = defaultdict(set)
        for part, number in _part_pages(pdf, items).items():
            pages_of[part.split(".")[0]].add(number)
        for item, section in zip(items, sections):
            if problem_height_px(section) <= WHOLE_PROBLEM_PX:
                prefix = item.parts[0].id.split(".")[0]
                assert len(pages_of[prefix]) == 1, (seed, item.id, pages_of[prefix])
