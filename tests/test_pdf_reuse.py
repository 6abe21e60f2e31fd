"""What the PDF workers build once and reuse (font subsets, text-layout setup, texts drawn)
makes the same PDF bytes as making it anew; documents built as the pool takes their jobs (pdf.Deferred)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from qkvquiz.render import pdf
from qkvquiz.render.html import header_html, markdown_to_html

pytestmark = pytest.mark.skipif(not pdf.pdf_available(), reason="WeasyPrint cannot run here")

# Prose, italic and bold, math, a matrix, code, an underline.
PAGE = """
## Problem 1

A query and a key with $d_k = 4$: $q = \\begin{bmatrix} -2 & 1 & 1 \\end{bmatrix}$, and
$s = \\frac{q \\cdot k}{\\sqrt{d_k}}$ in part `q1.scores`. **Bold**, *italic*, <u>underlined</u>.

$$S = \\begin{bmatrix} 0.71 & -\\infty \\\\ -0.71 & 1.41 \\end{bmatrix}$$
"""


def document(student: str) -> str:
    return markdown_to_html(PAGE, title="Sheet", header=header_html("Sheet", student, "V01"))


def test_reused_font_subsets_make_the_same_pdf(tmp_path: Path) -> None:
    pdf.font_config()  # installs the reuse
    pdf._SUBSETS.clear()
    fresh = pdf.render_pdf(document("S1"), tmp_path / "fresh.pdf").path.read_bytes()
    assert pdf._SUBSETS, "the subsets made are kept"
    reused = pdf.render_pdf(document("S1"), tmp_path / "reused.pdf").path.read_bytes()
    assert reused == fresh


@pytest.fixture(scope="module")
def class_documents() -> list[str]:
    """Two students' worksheets and keys: text math (letters, scripts, fractions, matrices),
    the same lines in several fonts (the body's, a bold heading's, a caption's)."""
    from qkvquiz.render.documents import key_student_document, worksheet_document
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    spec = parse_spec({"title": "Attention $d_k = 2$", "items": [
        {"family": "attention.scores", "title": "Scores for $d_k = 2$", "params": {"form": "vector", "d_k": 2}},
        {"family": "attention.masked", "params": {"tokens": 2, "d_k": 2, "d_v": 2, "mask": "causal"}},
    ]})
    ws = build_worksheet(spec, ["s1", "s2"], "reuse")
    return [make(ws, i) for i in range(2) for make in (worksheet_document, key_student_document)]


def test_shared_text_layouts_make_the_same_pdf(class_documents: list[str], tmp_path: Path) -> None:
    from weasyprint.layout import inline, preferred
    from weasyprint.text import line_break

    from weasyprint.css import computed_values, units

    from qkvquiz.render import text_layouts

    pdf.font_config()  # installs them where this WeasyPrint is the one known
    setup, split, strut = line_break.Layout.setup, line_break.split_first_line, line_break.strut
    breaks = line_break.can_break_text
    if not getattr(setup, "shares_setup", False):
        pytest.skip("another WeasyPrint: its own text layouts are used")
    keeping = set(text_layouts._KEEPS_KEYS)
    # Each document meets lines that the ones before it measured.
    shared = [pdf.render_pdf(html, tmp_path / f"shared-{i}.pdf").path.read_bytes()
              for i, html in enumerate(class_documents)]
    line_break.Layout.setup = setup.__wrapped__
    line_break.split_first_line = inline.split_first_line = preferred.split_first_line = split.__wrapped__
    line_break.strut = inline.strut = computed_values.strut = units.strut = strut.__wrapped__
    line_break.can_break_text = inline.can_break_text = preferred.can_break_text = breaks.__wrapped__
    text_layouts._KEEPS_KEYS.clear()  # no style keeps its font key or strut
    try:
        own = [pdf.render_pdf(html, tmp_path / f"own-{i}.pdf").path.read_bytes() for i, html in enumerate(class_documents)]
    finally:
        line_break.Layout.setup = setup
        line_break.split_first_line = inline.split_first_line = preferred.split_first_line = split
        line_break.strut = inline.strut = computed_values.strut = units.strut = strut
        line_break.can_break_text = inline.can_break_text = preferred.can_break_text = breaks
        text_layouts._KEEPS_KEYS.update(keeping)
    assert shared == own


def test_computed_styles_keep_their_font_key_and_strut_and_other_styles_do_not(tmp_path: Path) -> None:
    from weasyprint.css import ComputedStyle, Style
    from weasyprint.css.properties import INITIAL_VALUES
    from weasyprint.text import line_break

    from qkvquiz.render import text_layouts

    pdf.font_config()
    if not getattr(line_break.strut, "__wrapped__", None):
        pytest.skip("another WeasyPrint: its own text layouts are used")
    weasy = pdf.weasyprint_module()
    page = weasy.HTML(string=document("S1")).render(font_config=pdf.font_config()).pages[0]._page_box
    styles = []
    stack = [page]
    while stack:
        box = stack.pop()
        styles.append(box.style)
        stack.extend(getattr(box, "children", ()))
    kept = [style for style in styles if type(style) is ComputedStyle and text_layouts._STRUT_ATTRIBUTE in vars(style)]
    assert kept, "the laid-out boxes' computed styles keep their struts"
    for style in kept[:5]:
        assert line_break.strut(style) == line_break.strut.__wrapped__(style)
    # A style of another kind (as WeasyPrint makes for an SVG text, and changes as it goes).
    plain = Style()
    plain.update(INITIAL_VALUES)
    plain.font_config = pdf.font_config()
    before = text_layouts._font_key(plain)
    plain["font_size"] = 30
    assert text_layouts._font_key(plain) != before
    assert text_layouts._FONT_KEY_ATTRIBUTE not in vars(plain)


def test_texts_drawn_from_records_make_the_same_pdf(class_documents: list[str], tmp_path: Path) -> None:
    from weasyprint import draw
    from weasyprint.draw import text

    from qkvquiz.render.text_layouts import _kept

    pdf.font_config()  # installs it where this WeasyPrint is the one known
    recorded = draw.draw_text
    if not getattr(recorded, "draws_from_records", False):
        pytest.skip("another WeasyPrint: its own text drawing is used")
    # Beside the class's documents: an underline, a text in a font with a synthesised slant,
    # a Chinese word (no glyph in the shipped faces) and text that only a Chinese font draws.
    odd = markdown_to_html("A <u>line</u> and *slanted* `code`, 注意力 and $S_{11} = 1$.", title="Odd")
    documents = [*class_documents, odd]
    _kept(pdf.font_config()).drawn.clear()
    first = [pdf.render_pdf(html, tmp_path / f"first-{i}.pdf").path.read_bytes() for i, html in enumerate(documents)]
    assert _kept(pdf.font_config()).drawn, "texts drawn are recorded"
    # Drawn again, each document is drawn from the records of the first round.
    again = [pdf.render_pdf(html, tmp_path / f"again-{i}.pdf").path.read_bytes() for i, html in enumerate(documents)]
    draw.draw_text = text.draw_text = recorded.__wrapped__
    try:
        own = [pdf.render_pdf(html, tmp_path / f"own-{i}.pdf").path.read_bytes() for i, html in enumerate(documents)]
    finally:
        draw.draw_text = text.draw_text = recorded
    assert first == own
    assert again == own


def test_box_questions_answered_at_once_make_the_same_pdf(class_documents: list[str], tmp_path: Path) -> None:
    import sys

    from weasyprint.formatting_structure import boxes
    from weasyprint.layout import background, percent

    pdf.font_config()  # installs them where this WeasyPrint is the one known
    in_flow, backgrounds = boxes.Box.is_in_normal_flow, background.layout_box_backgrounds
    if not getattr(in_flow, "answers_at_once", False):
        pytest.skip("another WeasyPrint: its own box questions are asked")
    # Beside the class's documents (pictures as backgrounds, borders): floats, a positioned box,
    # a coloured and a shadowed box, a hidden paragraph.
    odd = markdown_to_html(
        '<div style="float: right; background: #eee">floated</div>\n\n'
        '<p>Before <span style="position: absolute; top: 2cm">placed</span> after.</p>\n\n'
        '<p style="box-shadow: 2px 2px #999">shadow</p>\n\n<p style="visibility: hidden">hidden</p>\n\n'
        "$$S = \\begin{bmatrix} 1 & 2 \\end{bmatrix}$$",
        title="Odd",
    )
    documents = [*class_documents, odd]
    answered = [pdf.render_pdf(html, tmp_path / f"a-{i}.pdf").path.read_bytes() for i, html in enumerate(documents)]
    resolve = percent.resolve_percentages
    taking_it = [m for m in list(sys.modules.values())
                 if getattr(m, "__name__", "").startswith("weasyprint.") and getattr(m, "resolve_percentages", None) is resolve]
    boxes.Box.is_in_normal_flow, background.layout_box_backgrounds = in_flow.__wrapped__, backgrounds.__wrapped__
    for module in taking_it:
        module.resolve_percentages = resolve.__wrapped__
    try:
        own = [pdf.render_pdf(html, tmp_path / f"own-{i}.pdf").path.read_bytes() for i, html in enumerate(documents)]
    finally:
        boxes.Box.is_in_normal_flow, background.layout_box_backgrounds = in_flow, backgrounds
        for module in taking_it:
            module.resolve_percentages = resolve
    assert answered == own


def test_used_lengths_follow_a_style_changed_in_place() -> None:
    """WeasyPrint sets a flex or grid item's width in place: the lengths are worked out anew."""
    from weasyprint.css.properties import Dimension
    from weasyprint.formatting_structure import boxes
    from weasyprint.layout import percent

    pdf.font_config()
    resolve = percent.resolve_percentages
    if not hasattr(resolve, "__wrapped__"):
        pytest.skip("another WeasyPrint: its own percentages are resolved")
    weasy = pdf.weasyprint_module()
    page = weasy.HTML(string=document("S1")).render(font_config=pdf.font_config()).pages[0]._page_box
    block = next(child for child in page.descendants() if isinstance(child, boxes.BlockBox))
    style = block.style.copy()
    twin = block.copy()
    twin.style = style
    for width in (Dimension(120, "px"), Dimension(50, "%"), "auto", Dimension(80, "px")):
        style["width"] = width
        resolve(twin, (400, "auto"))
        mine = {name: getattr(twin, name) for name in ("width", "min_width", "margin_left", "padding_top")}
        resolve.__wrapped__(twin, (400, "auto"))
        assert mine == {name: getattr(twin, name) for name in mine}, width


def test_the_flow_question_reads_the_style_each_time() -> None:
    """WeasyPrint changes a style's float and position in place (a marker, a footnote): the
    answer follows."""
    from weasyprint.formatting_structure import boxes

    pdf.font_config()
    if not getattr(boxes.Box.is_in_normal_flow, "answers_at_once", False):
        pytest.skip("another WeasyPrint: its own box questions are asked")

    class Styled(boxes.Box):
        def __init__(self, style: dict) -> None:
            self.style = style

    box = Styled({"float": "none", "position": "static"})
    asked = boxes.Box.is_in_normal_flow.__wrapped__
    for style in ({"float": "none", "position": "static"}, {"float": "left", "position": "static"},
                  {"float": "footnote", "position": "static"}, {"float": "none", "position": "absolute"},
                  {"float": "none", "position": ("running()", "header")}, {"float": "none", "position": ("note()", "n")},
                  {"float": "none", "position": "relative"}):
        box.style.update(style)
        assert box.is_in_normal_flow() == asked(box), style


@contextmanager
def weasyprint_as_it_is() -> Iterator[None]:
    """Every shortcut of qkvquiz.render (text layouts, drawing, box questions) taken out for the
    ``with`` block, and put back after it."""
    import sys

    from weasyprint import draw
    from weasyprint.css import computed_values, units
    from weasyprint.draw import text
    from weasyprint.formatting_structure import boxes
    from weasyprint.layout import background, inline, percent, preferred
    from weasyprint.text import line_break

    from qkvquiz.render import text_layouts

    pdf.font_config()
    resolve = percent.resolve_percentages
    places = [
        (line_break.Layout, "setup"), (boxes.Box, "is_in_normal_flow"), (background, "layout_box_backgrounds"),
        *((module, "split_first_line") for module in (line_break, inline, preferred)),
        *((module, "strut") for module in (line_break, inline, computed_values, units)),
        *((module, "can_break_text") for module in (line_break, inline, preferred)),
        (draw, "draw_text"), (text, "draw_text"),
        *((module, "resolve_percentages") for module in list(sys.modules.values())
          if getattr(module, "__name__", "").startswith("weasyprint.")
          and getattr(module, "resolve_percentages", None) is resolve),
    ]
    ours = [(owner, name, getattr(owner, name)) for owner, name in places]
    if not all(hasattr(value, "__wrapped__") for _, _, value in ours):
        pytest.skip("another WeasyPrint: its own ways are used")
    keeping = set(text_layouts._KEEPS_KEYS)
    for owner, name, value in ours:
        setattr(owner, name, value.__wrapped__)
    text_layouts._KEEPS_KEYS.clear()
    try:
        yield
    finally:
        for owner, name, value in ours:
            setattr(owner, name, value)
        text_layouts._KEEPS_KEYS.update(keeping)


#: Text and boxes of every kind the shortcuts treat apart: justified and spaced text, small
#: caps, right-to-left scripts, tabs, a link and decorations, scripts, lengths in percent and
#: calc() (the same percentages in blocks of two widths), collapsed table borders, an ellipsis.
UNUSUAL = """
<p style="text-align: justify">Justified text that runs over several lines so that the spaces between its
words are stretched to fill every line but the last one, which is set ragged as usual, and more words.</p>

<p style="letter-spacing: 0.1em; word-spacing: 0.3em">Spaced letters and words.</p>

<p style="font-variant: small-caps">Small caps</p> <p style="text-transform: uppercase">upper case</p>

שלום עולם and مرحبا بالعالم mixed with English.

<pre>a\tb\tc
tabbed</pre>

<p><a href="https://example.org">a link</a>, <s>struck</s>, <u>under</u>, <sup>sup</sup> and <sub>sub</sub>.</p>

<div style="width: 50%; padding: 5%; margin: 2% auto; border: 1px solid #000">percent box</div>

<div style="width: calc(100% - 4em); box-sizing: border-box; padding: 1em">calc box</div>

<div style="width: 40%; margin: 0 10%"><div style="width: 50%; border: 1px solid">half of a part</div></div>
<div style="width: 50%; border: 1px solid">half of the page</div>

<table style="border-collapse: collapse"><tr><td style="border: 1px solid">a</td><td style="border: 2px solid">b</td></tr></table>

<p style="text-overflow: ellipsis; overflow: hidden; white-space: nowrap; width: 5em">A long line cut short</p>
"""


def test_every_shortcut_together_makes_the_pdf_weasyprint_makes(class_documents: list[str], tmp_path: Path) -> None:
    documents = [*class_documents, markdown_to_html(UNUSUAL, title="Unusual")]
    # Twice: the second round meets every text, line and style answer the first one kept.
    ours = [pdf.render_pdf(html, tmp_path / f"ours-{i}.pdf").path.read_bytes()
            for i, html in enumerate(documents + documents)]
    with weasyprint_as_it_is():
        own = [pdf.render_pdf(html, tmp_path / f"own-{i}.pdf").path.read_bytes() for i, html in enumerate(documents)]
    assert ours == own + own


def test_a_font_face_added_later_is_used_where_its_family_was_drawn_before(tmp_path: Path) -> None:
    """A template's @font-face adds a face to the configuration the documents share: a family
    drawn (and measured) before in the fallback face is set in the new face from then on."""
    import base64

    from weasyprint.text.fonts import FontConfiguration

    from qkvquiz.resources import templates_dir

    face = base64.b64encode((templates_dir() / "fonts" / "DejaVuSansMono.ttf").read_bytes()).decode()
    body = '<p style="font-family: Later">Hello world, a text 0.71</p>'
    before = f"<html><body>{body}</body></html>"
    after = (f"<html><head><style>@font-face {{ font-family: Later; src: url(data:font/ttf;base64,{face}) }}"
             f"</style></head><body>{body}</body></html>")
    weasy = pdf.weasyprint_module()

    def both(config: object) -> list[bytes]:
        return [weasy.HTML(string=html).render(font_config=config).write_pdf() for html in (before, after)]

    pdf.font_config()  # the shortcuts installed
    ours = both(FontConfiguration())
    with weasyprint_as_it_is():
        own = both(FontConfiguration())
    assert ours == own


def test_a_record_holds_only_where_the_documents_widths_are_the_ones_it_kerned_with() -> None:
    from qkvquiz.render import drawn_text

    class Font:
        hash = "F"

        def __init__(self, widths: dict[int, int]) -> None:
            self.widths = widths

    class Stream:
        def __init__(self, widths: dict[int, int]) -> None:
            self.font = Font(widths)

        def add_font(self, pango_font: object) -> tuple[Font, float]:
            return self.font, 11.0

    # Glyph 7 kerned with 600, its own width in this font at this size.
    plain = drawn_text._Record(["font"], [{7: ("a", 600, 600)}], [(0, ""), (-1, "<0007>")])
    assert drawn_text._fonts_for(Stream({}), plain) is not None  # the document will set 600
    assert drawn_text._fonts_for(Stream({7: 600}), plain) is not None
    assert drawn_text._fonts_for(Stream({7: 601}), plain) is None  # another size drew it first
    # Kerned with 601 (another size had drawn it first where it was recorded).
    inherited = drawn_text._Record(["font"], [{7: ("a", 601, 600)}], [(0, ""), (-1, "<0007>-1")])
    assert drawn_text._fonts_for(Stream({}), inherited) is None
    assert drawn_text._fonts_for(Stream({7: 601}), inherited) is not None


def test_deferred_documents_are_built_once_each_and_written_in_job_order(tmp_path: Path) -> None:
    built: list[int] = []

    def build(i: int) -> str:
        built.append(i)
        return document(f"S{i}")

    jobs = [(pdf.Deferred(lambda i=i: build(i)), tmp_path / f"s{i}.pdf") for i in range(3)]
    jobs.append(([document("A"), document("B")], tmp_path / "joined.pdf"))
    results = pdf.render_pdfs(jobs, workers=2, progress=False)
    assert sorted(built) == [0, 1, 2]
    assert [r.path for r in results] == [target for _, target in jobs]
    assert [r.pages for r in results] == [1, 1, 1, 2]


def test_an_error_building_a_deferred_document_is_raised_as_it_is(tmp_path: Path) -> None:
    class TemplateBroke(Exception):
        pass

    def broken() -> str:
        raise TemplateBroke("a template failed")

    jobs = [(document("S0"), tmp_path / "ok.pdf"), (pdf.Deferred(broken), tmp_path / "bad.pdf"),
            (document("S1"), tmp_path / "ok1.pdf")]
    with pytest.raises(TemplateBroke, match="a template failed"):
        pdf.render_pdfs(jobs, workers=2, progress=False)
    assert not (tmp_path / "bad.pdf").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_users_templates_print_in_the_pdfs(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from qkvquiz.generate import generate_set
    from qkvquiz.spec import parse_spec

    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    own = tmp_path / "templates" / "families"
    own.mkdir(parents=True)
    (own / "attention.scores.problem.md.j2").write_text("Our own words for part `q1.scores`.\n", encoding="utf-8")
    spec = parse_spec({"title": "T", "items": [{"family": "attention.scores", "params": {"form": "vector", "d_k": 2}}]})
    generate_set(spec, ["s1", "s2", "s3"], tmp_path / "out", formats="pdf", templates=tmp_path / "templates",
                 workers=2)
    for pdf_file in (tmp_path / "out" / "students" / "s3" / "worksheet.pdf", tmp_path / "out" / "keys" / "s3.pdf"):
        text = subprocess.run(["pdftotext", str(pdf_file), "-"], capture_output=True, text=True, check=True).stdout
        assert "Our own words" in text
