"""Markdown + LaTeX → print HTML: matrices as text tables, the rest as SVG, answer boxes."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from qkvquiz.render import boxes as render_boxes
from qkvquiz.render import svg_math
from qkvquiz.render import page as render_page
from qkvquiz.render.boxes import answer_grid_html, header_html
from qkvquiz.render.html_page import markdown_body_html, markdown_to_html
from qkvquiz.render.math_html import MathRenderError, clear_math_cache, math_cache_info, math_html
from qkvquiz.render.page import BASE_STYLE_MARKER

MINUS = "\u2212"


def svg_pictures(fragment: str) -> list[str]:
    """The SVG documents embedded (as data: URLs) in an HTML fragment."""
    return [
        base64.b64decode(b64).decode("utf-8")
        for b64 in re.findall(r"url\('data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)'\)", fragment)
    ]


def overlay_texts(fragment: str) -> list[str]:
    return re.findall(r'<span class="math-svg"[^>]*>([^<]*)</span>', fragment)


class _Matrices(HTMLParser):
    """Collects every text matrix (``span.bmat``: one line of text per row, entries apart by
    spaces) as rows of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self._open: list[str] = []

    @property
    def matrices(self) -> list[list[list[str]]]:
        return [[line.split() for line in text.split("\n")] for text in self.texts]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class") or ""
        self._open.append(cls)
        if cls == "bmat":
            self.texts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._open.pop()

    def handle_data(self, data: str) -> None:
        if "bmat" in self._open:
            self.texts[-1] += data


def matrix_rows(fragment: str) -> list[list[list[str]]]:
    """Every text matrix in the fragment, as rows of cell texts."""
    parser = _Matrices()
    parser.feed(fragment)
    return parser.matrices


def box_grids(fragment: str) -> list[tuple[int, int]]:
    """(rows, columns) of every grid of answer boxes: one element whose classes size it,
    the boxes its tiled background."""
    return [(int(r), int(c)) for r, c in re.findall(r'<span class="boxes r(\d) c(\d)"></span>', fragment)]


def test_a_grid_of_boxes_is_as_many_tiles_as_its_shape() -> None:
    # The stylesheet sizes a grid in whole tiles of its background, so that every box is
    # drawn whole and none is cut off at an edge.
    css = render_page.base_stylesheet_text()
    tile = re.search(r"\.boxes \{[^}]*background-size: ([\d.]+)px ([\d.]+)px", css)
    assert tile is not None
    width, height = float(tile.group(1)), float(tile.group(2))
    (b64,) = re.findall(r"base64,([A-Za-z0-9+/=]+)", render_page.BOXES_CSS)
    svg = base64.b64decode(b64).decode()
    assert f'width="{tile.group(1)}" height="{tile.group(2)}"' in svg  # the picture is one tile
    for n in range(1, render_boxes.ANSWER_GRID_MAX + 1):
        assert f".boxes.c{n} {{ width: {n * width:.2f}px; }}" in css
        assert f".boxes.r{n} {{ height: {n * height:.2f}px; }}" in css
    # A box is 1.6 cm × 0.68 cm (CSS px: 96 per inch) inside its tile.
    assert abs(width - 1.9 / 2.54 * 96) < 2 and abs(height - 0.9 / 2.54 * 96) < 2
    # Every document with boxes brings the tile; the stylesheet loads nothing.
    assert render_page.BOXES_CSS in markdown_to_html("x") and "url(" not in css


class _Tree(HTMLParser):
    """Records, for every start tag, the stack of open tags (as a browser parser keeps)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.seen: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class") or ""
        self.seen.append((f"{tag}.{classes}", tuple(self.stack)))
        if tag not in ("img", "br", "meta"):
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass


# --------------------------------------------------------------------------- matrices


def test_numeric_bmatrix_becomes_a_text_table_with_minus_signs_and_infinity() -> None:
    out = math_html(r"\begin{bmatrix} 0.5 & -\infty \\ -1.25 & 3 \end{bmatrix}", display=True)
    assert matrix_rows(out) == [[["0.5", MINUS + "\u221e"], [MINUS + "1.25", "3"]]]
    assert svg_pictures(out) == []  # nothing left to draw as outlines


def test_a_six_by_six_matrix_keeps_every_entry_in_order() -> None:
    values = [
        [f"{(i - j) * 0.25:.2f}" if j <= i else r"-\infty" for j in range(6)] for i in range(6)
    ]
    latex = r"\begin{bmatrix}" + r"\\".join(" & ".join(row) for row in values) + r"\end{bmatrix}"
    (rows,) = matrix_rows(math_html(latex, display=True))
    expected = [
        [v.replace("-", MINUS).replace(MINUS + r"\infty", MINUS + "\u221e") for v in row]
        for row in values
    ]
    assert rows == expected


def test_labels_around_matrices_stay_math_and_matrices_stay_tables() -> None:
    out = math_html(
        r"Q = \begin{bmatrix} 1 & 2 \end{bmatrix}, \quad K = \begin{bmatrix} 3 \\ 4 \end{bmatrix}",
        display=True,
    )
    assert matrix_rows(out) == [[["1", "2"]], [["3"], ["4"]]]
    # Two matrices side by side: the comma stays with the first as text, the line may wrap
    # before "K =".
    assert overlay_texts(out) == ["Q =", "K ="]
    assert "</span></span>,</span>" in out


@pytest.mark.parametrize(
    "latex",
    [
        r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}^\top",  # scripted: one base
        r"\left( \begin{bmatrix} 1 & 2 \end{bmatrix} \right)",  # inside a fence
        r"{\begin{bmatrix} 1 & 2 \end{bmatrix}}",  # inside braces
        r"\begin{bmatrix} a & -b \\ c & d \end{bmatrix}",  # not numbers
    ],
)
def test_matrices_that_are_not_plain_numbers_on_their_own_are_drawn_whole(latex: str) -> None:
    out = math_html(latex, display=True)
    assert matrix_rows(out) == []
    assert len(svg_pictures(out)) == 1


def test_transposed_matrix_lays_out_instead_of_failing() -> None:
    # latex2mathml hands ziamath fence, table and fence as three bases of one msup.
    (svg,) = svg_pictures(
        math_html(r"\begin{bmatrix} a & b \\ c & d \end{bmatrix}^\top", display=True)
    )
    assert "<path" in svg


def _font_file(family: str) -> str:
    try:
        found = subprocess.run(
            ["fc-match", "-f", "%{file}", family], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("fontconfig (fc-match) is not installed")
    if "DejaVuSerif" not in found.replace("-", ""):
        pytest.skip(f"{family} is not installed")
    return found


def test_matrix_columns_line_up_in_the_body_font() -> None:
    # The oracle: advance widths read from the font file itself.
    ttlib = pytest.importorskip("fontTools.ttLib")
    font = ttlib.TTFont(_font_file("DejaVu Serif"))
    cmap, hmtx, upm = font.getBestCmap(), font["hmtx"], font["head"].unitsPerEm

    def em(ch: str) -> float:
        return hmtx[cmap[ord(ch)]][0] / upm

    values = [["0.5", "-10.25", r"-\infty"], ["-1", "3", "0.125"], ["100", "-0.5", "7"]]
    latex = r"\begin{bmatrix}" + r"\\".join(" & ".join(r) for r in values) + r"\end{bmatrix}"
    (text,) = re.findall(r'<span class="bm">([^<]*)</span>', math_html(latex, display=True))
    centres: list[list[float]] = []
    for line in text.split("\n"):
        x, row, start = 0.0, [], None
        for ch in line + " ":
            if ch.isspace():
                if start is not None:
                    row.append((start + x) / 2)
                    start = None
            elif start is None:
                start = x
            x += em(ch) if ch != " " else 0.0
        centres.append(row)
    assert [len(r) for r in centres] == [3, 3, 3]
    for column in zip(*centres):  # every entry centred in its column, to within 0.06 em
        assert max(column) - min(column) < 0.06, column
    for row in centres:  # and the columns well apart
        assert all(b - a > 1.5 for a, b in zip(row, row[1:])), row


# --------------------------------------------------------------------------- SVG math


def test_every_construct_lays_out_as_one_merged_path_picture() -> None:
    constructs = [
        r"S = QK^\top/\sqrt{d_k}",
        r"A_{ij} = \frac{e^{S_{ij}}}{\sum_{j=1}^{n} e^{S_{ij}}}",
        r"\nabla_S L = A \odot (\nabla_A L - \operatorname{rowsum}(\nabla_A L \odot A))",
        r"\operatorname{tril}(X, -1)",
        r"\operatorname{softmax}(x)_i",
        r"M_{ij} = -\infty",
    ]
    for latex in constructs:
        (svg,) = svg_pictures(math_html(latex))
        assert svg.count("<path") == 1, latex  # glyphs joined: one element to draw
        assert "<use" not in svg and "<symbol" not in svg, latex


def test_invisible_text_reads_as_plain_unicode_math() -> None:
    cases = {
        r"S = QK^\top/\sqrt{d_k}": "S = QK\u1d40/\u221ad_k",
        r"\nabla_Z L": "\u2207_Z L",
        r"\sum_{j=1}^{n} A_{1j}": "\u2211_(j=1)^n A_1j",
        r"M_{ij} = -\infty": f"M_ij = {MINUS}\u221e",
        r"\operatorname{tril}(X, -1)": f"tril(X,{MINUS}1)",
    }
    for latex, text in cases.items():
        assert [t.strip() for t in overlay_texts(math_html(latex))] == [text], latex


def test_mathml_fixes_signs_symbols_and_matrix_spacing() -> None:
    root = svg_math._mathml(r"(-\infty) = -1 + \nabla_Q x", display=False)
    minus_forms = [el.get("form") for el in root.iter("mo") if el.text == MINUS]
    assert minus_forms == ["prefix", "prefix"]  # after "(" and after "="
    assert {el.text for el in root.iter("mi")} >= {"\u221e", "\u2207"}
    assert not [el for el in root.iter("mo") if el.text in ("\u221e", "\u2207")]
    table = svg_math._mathml(r"\begin{bmatrix} a & b \end{bmatrix}", display=True)
    assert next(table.iter("mtable")).get("columnspacing") == svg_math.MATRIX_COLUMN_SPACING


def test_a_binary_minus_keeps_its_spacing() -> None:
    root = svg_math._mathml(r"a - b", display=False)
    assert [el.get("form") for el in root.iter("mo")] == [None]


def test_shared_pieces_are_laid_out_once_per_process() -> None:
    clear_math_cache()
    for i in range(5):
        math_html(rf"Q = \begin{{bmatrix}} {i} & {i + 1} \end{{bmatrix}}", display=True)
    info = math_cache_info()
    assert (info.misses, info.hits) == (1, 4)  # "Q =" once; the numbers never reach ziamath


def test_broken_latex_raises_a_math_error_naming_the_source() -> None:
    with pytest.raises(MathRenderError, match=r"frac"):
        math_html(r"\frac{1}{")


def test_unclosed_matrix_raises_a_math_error() -> None:
    with pytest.raises(MathRenderError, match="bmatrix"):
        math_html(r"\begin{bmatrix} 1 & 2")


# --------------------------------------------------------------------------- markdown


def test_inline_and_display_math_in_markdown() -> None:
    body = markdown_body_html("Let $x_1$ be given.\n\n$$y = \\frac{1}{2}$$\n")
    assert '<span class="math">' in body and '<div class="math-display">' in body
    assert "$" not in body


def test_an_inline_matrix_stays_inside_its_paragraph() -> None:
    # A <table> would make an HTML parser close the paragraph around it.
    body = markdown_body_html(r"Given $A = \begin{bmatrix} 1 & 2 \end{bmatrix}$ and more." + "\n")
    tree = _Tree()
    tree.feed(body)
    (matrix_parents,) = [stack for tag, stack in tree.seen if tag == "span.bmat"]
    assert "p" in matrix_parents
    assert "<table" not in body


def test_a_bullet_list_writes_its_bullets_as_text() -> None:
    body = markdown_body_html("- one $x_1$\n- two\n\n1. first\n2. second\n\n- loose\n\n- list\n")
    assert body.count('<li class="tb">\u2022\u00a0') == 2  # on the line, not a marker box
    assert "<li>first</li>" in body  # numbers stay the list's own markers
    # An item of paragraphs: the bullet opens its first paragraph (a marker box would sit at
    # the top of a line that a matrix makes tall, above the text).
    assert body.count('<li class="tb">\n<p>\u2022\u00a0') == 2


def test_markdown_tables_pass_through() -> None:
    body = markdown_body_html("| a | b |\n|---|---|\n| 1 | $x$ |\n")
    assert "<table>" in body and '<span class="math">' in body


# --------------------------------------------------------------------------- blocks


@pytest.mark.parametrize(
    ("shape", "rows", "cols", "kind"),
    [
        ((), 1, 1, "scalar"),
        ((4,), 1, 4, "matrix"),
        ((3, 2), 3, 2, "matrix"),
        ((6, 6), 6, 6, "matrix"),
    ],
)
def test_answer_grid_has_one_box_per_entry(
    shape: tuple[int, ...], rows: int, cols: int, kind: str
) -> None:
    out = answer_grid_html("q1.weights", shape, label="A =")
    assert box_grids(out) == [(rows, cols)]
    assert f'data-rows="{rows}" data-cols="{cols}"' in out
    assert 'data-part="q1.weights"' in out and f"answer-{kind}" in out
    assert "\n\n" not in out  # a blank line would end the Markdown HTML block


@pytest.mark.parametrize("shape", [(0,), (2, 0), (9, 2), (2, 2, 2)])
def test_answer_grid_rejects_shapes_it_cannot_draw(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="shape"):
        answer_grid_html("q", shape)


def test_answer_grid_placeholder_in_markdown_is_filled_in() -> None:
    md = (
        'Fill in:\n\n<div class="answer-grid" data-rows="2" data-cols="3" data-part="q1.w"></div>\n'
    )
    body = markdown_body_html(md, raw_html=True)
    assert box_grids(body) == [(2, 3)] and 'data-part="q1.w"' in body
    assert box_grids(markdown_body_html(md)) == []  # from a spec or a user's template it stays text


def test_answer_grid_from_the_helper_survives_markdown() -> None:
    body = markdown_body_html(
        "(a) The weights.\n\n" + answer_grid_html("q1.weights", (2, 2)) + "\n", raw_html=True
    )
    assert box_grids(body) == [(2, 2)]


def test_header_shows_and_escapes_the_student_fields() -> None:
    out = header_html("Quiz <3>", "S&001", "V7", name_line=True)
    assert "Quiz &lt;3&gt;" in out and "S&amp;001" in out and ">V7<" in out and "Name" in out
    assert "Name" not in header_html("Key", "S1", "V1", name_line=False)


def test_document_embeds_the_stylesheet_and_the_page_size() -> None:
    doc = markdown_to_html("# Hi", title="T", page_size="Letter")
    assert f"<style {BASE_STYLE_MARKER}>" in doc and "@page { size: letter; }" in doc
    assert "<title>T</title>" in doc
    assert "@page { size: A4; }" in markdown_to_html("x", page_size="a4")
    with pytest.raises(ValueError, match="A4 or Letter"):
        markdown_to_html("x", page_size="A5")


def test_stylesheet_keeps_matrices_and_answers_whole_and_numbers_pages() -> None:
    css = render_page.base_stylesheet_text()
    for rule in (".bmat {", ".math-display {", ".answer {"):
        block = css[css.index(rule) :].split("}", 1)[0]
        assert "break-inside: avoid" in block, rule
    assert "counter(page)" in css and "counter(pages)" in css


def test_html_output_works_without_weasyprint() -> None:
    code = (
        "import sys; sys.modules['weasyprint'] = None\n"
        "from qkvquiz.render.html_page import markdown_to_html\n"
        "doc = markdown_to_html('$x$ and $$\\\\begin{bmatrix} 1 & 2 \\\\end{bmatrix}$$')\n"
        "assert 'bmat' in doc and 'math-svg' in doc\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_sum_in_a_denominator_keeps_its_limits_at_the_side() -> None:
    # Stacked limits (display style) make the fraction much taller than TeX sets it.
    (svg,) = svg_pictures(math_html(r"\frac{1}{\sum_{j=1}^{n} x_j}", display=True))
    (stacked,) = svg_pictures(math_html(r"\sum_{j=1}^{n} x_j", display=True))
    height = float(re.search(r'height="([\d.]+)"', svg).group(1))
    stacked_height = float(re.search(r'height="([\d.]+)"', stacked).group(1))
    assert height < stacked_height * 1.25


def test_a_formula_too_long_to_share_its_line_puts_the_boxes_under_its_sentence():
    # delta.chunk_backward's β̄ prompt holds one long formula set as text: beside the boxes it
    # pushed them past the right margin; its row now wraps the boxes under the sentence.
    from qkvquiz.render.answer_areas import WIDE_FORMULA, _longest_formula
    from qkvquiz.render.documents import worksheet_body_html
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    ws = build_worksheet(parse_spec({"title": "t", "items": [{"family": "delta.chunk_backward"}]}), ["a"], "x")
    page = worksheet_body_html(ws, 0)
    rows = re.findall(r'<div class="(part-row[^"]*)" id="[^"]*"><div class="part-text">(.*?)</div><div class="part-boxes">',
                      page, re.S)
    wide = [text for kind, text in rows if kind.startswith("part-row wide")]
    # The β̄ prompt, and K̄'s (set as text too since it is no longer a picture).
    assert len(wide) == 2 and "rowsum" in wide[0] and "diag" in wide[1]
    beside = [text for kind, text in rows if not kind.startswith(("part-row wide", "part-row under"))]
    assert beside and all(_longest_formula(text) <= WIDE_FORMULA for text in beside)
    assert _longest_formula('a <span class="math tm"><i>x</i> + <span class="fn">f</span>(y)</span> b') == len("x + f(y)")


def test_a_sentence_three_lines_long_beside_its_grid_takes_the_width_over_it():
    # The masked scores' sentence goes on after its "Answer: …" sentence ("The masked entries
    # together carry 50% of this part."): the width was told without it and the sentence took
    # four lines beside its 3×3 grid. Told as printed, it takes the width, its grid under it.
    from qkvquiz.render.answer_areas import answer_area_html, place_answer_areas
    from qkvquiz.render.documents import worksheet_body_html
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    item = {"family": "attention.weights", "params": {"tokens": 3, "mask": "causal"}, "ask": ["scores", "weights"]}
    ws = build_worksheet(parse_spec({"title": "t", "items": [item]}), ["a"], "x")
    kinds = re.findall(r'<div class="(part-row[^"]*)" id="[^"]*"><div class="part-text">', worksheet_body_html(ws, 0))
    assert [kind.split()[1] for kind in kinds] == ["wide", "wide"], kinds
    # The "Answer: …" sentence itself is not printed and does not count; what follows it does.
    def kind(after: str) -> str:
        problem = ('<ul>\n<li class="pi"><strong class="pl">(a)</strong>Write the scores.\nAnswer: a 3×3 matrix, '
                'part <code>q1.a</code>\u00a0(1\u00a0pt).' + after + "</li>\n</ul>")
        (found,) = re.findall(r'<div class="(part-row[^"]*)"', place_answer_areas(problem, [("q1.a", answer_area_html("q1.a", (3, 3), "S", 1))]))
        return found.split()[1]

    assert kind("") == "acol-3"
    assert kind(" Each entry is a dot product of a query and a key, divided by the root of their length.") == "wide"


def test_a_long_formula_may_break_and_a_short_one_stays_whole() -> None:
    from qkvquiz.render.html_page import markdown_body_html

    short = markdown_body_html("Compute $s = q \\cdot k$.", text_math=True)
    assert 'class="math tm"' in short and "brk" not in short
    terms = " + ".join(f"({i})(-{i})" for i in range(1, 10))
    long = markdown_body_html(f"Compute ${terms} = 5$.", text_math=True)
    assert 'class="math tm brk"' in long  # breaks at its operators (style.css: .brk)
    # A display of several definitions wraps between them, each one whole.
    parts = [f"A_{i} = B_{i} + C_{i}" for i in range(8)]
    display = markdown_body_html("$$" + r", \quad ".join(parts) + "$$", text_math=True)
    assert display.count('class="math-group"') == 8
    few = markdown_body_html(r"$$A = B, \quad C = D$$", text_math=True)
    assert "math-group" not in few


def test_the_full_stop_after_a_matrix_in_a_sentence_ends_its_display_in_chinese_too() -> None:
    # A matrix in a sentence is displayed on a line of its own; the mark after it ends the
    # display rather than opening the next line alone (Chinese keys printed a lone "。").
    matrix = r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}"
    for stop in (".", "。", "："):
        body = markdown_body_html(f"输出 $Z = {matrix}${stop}然后", text_math=True)
        inside, after = body.rsplit("</span>", 1)
        assert inside.endswith(stop) or f">{stop}<" in inside[-200:], body[-200:]
        assert after.startswith("然后"), after
