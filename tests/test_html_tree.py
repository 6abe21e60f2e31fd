"""The quick reading of our documents' HTML (qkvquiz/render/html_tree.py) builds the tree that
WeasyPrint's own parser (tinyhtml5) builds, or declines: over every bundled document, over
documents with hostile text, and over random tag soup."""

from __future__ import annotations

import dataclasses
import html

import pytest
import tinyhtml5
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qkvquiz import build_worksheet, load_spec
from qkvquiz.render.documents import key_student_document, worksheet_document
from qkvquiz.render.html_tree import simple_html_tree, tree_of
from qkvquiz.render.pdf import _stylesheets, pdf_available
from qkvquiz.resources import bank_dir

SPECS = sorted(p.name for p in bank_dir().glob("*.yaml"))


def html5_tree(source: str) -> list:
    return tree_of(tinyhtml5.parse(source, namespace_html_elements=False))


def assert_same_or_declined(source: str) -> bool:
    """True where the quick reading took the document (and built WeasyPrint's tree)."""
    tree = simple_html_tree(source)
    if tree is None:
        return False
    assert tree_of(tree) == html5_tree(source), source
    return True


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("spec_name", SPECS)
def test_every_bundled_page_is_read_quickly_to_the_same_tree(spec_name: str, lang: str) -> None:
    spec = dataclasses.replace(load_spec(bank_dir() / spec_name), lang=lang)
    ws = build_worksheet(spec, ["ada", "bob"], seed="tree")
    for document in (worksheet_document(ws, 0, name="Ada <b>&amp;</b> \"Lovelace\""), key_student_document(ws, 1)):
        assert assert_same_or_declined(document)  # the pages a PDF is made of: all read quickly
        assert assert_same_or_declined(_stylesheets(document, "A4")[0])  # and as the PDF worker hands them


def test_hostile_text_in_a_spec_is_escaped_and_read_alike() -> None:
    spec = dataclasses.replace(load_spec(bank_dir() / "attention-basics.yaml"),
                               title="<!-- x --> </body> <p><div> &copy &#0; \u00a0<script>x</script>",
                               instructions="a < b > c & d &amp; </table> <tr> \f\t")
    ws = build_worksheet(spec, ["<img src=x onerror=alert(1)>"], seed="tree")
    for document in (worksheet_document(ws, 0), key_student_document(ws, 0)):
        assert assert_same_or_declined(document)


PAGE = '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>T &amp; t</title>\n' \
       '<style>\n.a > .b { content: "<p>"; }\n</style>\n</head>\n<body class="key">\n{}\n</body>\n</html>\n'


@pytest.mark.parametrize("body", [
    "<p>a<div>b</div></p>",              # a block in a paragraph: HTML5 closes the paragraph
    "<table>x<tr><td>1</td></tr></table>",  # text in a table is moved before it
    "<table><td>1</td></table>",          # a cell without its row
    "<li>a</li>",                         # an item outside a list
    "<ul><li>a<li>b</li></ul>",           # an item left open
    "<p>a<!-- note --></p>",              # a comment
    "<div/>",                             # a self-closed element that is not void
    "<p>a &copy b</p>",                   # a reference without its semicolon
    "<p>&#10;</p>",                       # a numeric reference
    "<b><i>a</b></i>",                    # misnested formatting
    "<span>a</p>",                        # an end tag of another element
    "<p>a",                               # left open at the end
    "<p>a < b</p>",                       # a bare "<"
    "<div a=b>x</div>",                   # an unquoted attribute
    "<h1><h2>a</h2></h1>",                # a heading in a heading
    "<svg><rect/></svg>",                 # foreign content
    "<pre>\n\nx</pre>",                   # read quickly: the first newline goes, as in HTML5
])
def test_what_html5_would_rebuild_is_left_to_it(body: str) -> None:
    source = PAGE.replace("{}", body)
    taken = assert_same_or_declined(source)
    assert taken == body.startswith("<pre>"), body


def test_formatting_nested_in_its_like_is_read_quickly_to_the_same_tree() -> None:
    # HTML5's list of formatting elements (and its limit of three alike) acts only on misnested
    # end tags, which the quick reading leaves to it: nested alike, the trees are the same.
    for body in ("<b><b><b><b>x</b></b></b></b>y", '<i class="a"><i class="a"><i class="a"><i class="a">x</i></i></i></i>',
                 "<table><tr><td><code><code><code><code>c</code></code></code></code></td></tr></table>"):
        assert assert_same_or_declined(PAGE.replace("{}", body)), body


def test_the_page_around_the_body_follows_html5() -> None:
    source = PAGE.replace("{}", "<table><tr><td>1</td></tr></table><pre>\nx</pre>")
    assert assert_same_or_declined(source)
    tree = simple_html_tree(source)
    assert tree is not None
    assert [child.tag for child in tree.find("body/table")] == ["tbody"]  # added, as HTML5 adds it
    assert tree.find("head").tail == "\n" and tree.text is None  # white space before <head> dropped
    assert tree.find("body/pre").text == "x"
    assert simple_html_tree(PAGE.replace("{}", "x").replace("<!DOCTYPE html>\n", "")) is None  # quirks mode
    assert simple_html_tree(PAGE.replace("{}", "x").replace("</body>", "")) is None
    assert simple_html_tree(PAGE.replace("{}", "x").replace("\n<body", "\nx<body")) is None


# --------------------------------------------------------------------------- random tag soup

# Well-written markup in any nesting (where HTML5 would rebuild the tree, the quick reading must
# decline), and messy markup besides.
TAKEN_TAGS = ["div", "p", "span", "i", "b", "sub", "sup", "strong", "code", "ul", "ol", "li", "table", "tbody", "tr",
              "td", "th", "caption", "colgroup", "col", "h1", "h3", "section", "pre", "br", "hr", "img"]
OTHER_TAGS = ["a", "font", "form", "input", "select", "option", "title", "style", "head", "body", "html", "meta", "dd",
              "nobr", "svg"]
VOID = {"br", "hr", "img", "col", "input", "meta"}
CLEAN_TEXT = ["x", " ", "\n", "中", "&amp;", "&lt;", "&gt;", "&quot;", "&#39;", "&nbsp;", "a b", "\n\n", "\t", "\f"]
MESSY_TEXT = ["&copy", "&#128;", "<", ">", "&", "\r", "\x00", "<!-- c -->", "&#10;"]
CLEAN_ATTRIBUTES = ["", ' class="tm"', " class='a b'", ' data-part="q1.s"', ' title="&quot;a&gt;"', ' a="1" a="2"',
                    ' style="width:1px"', " hidden"]
MESSY_ATTRIBUTES = [" class=tm", ' CLASS="A"', ' a="<"', ' a="1"b="2"']


@st.composite
def markup(draw, messy: bool, depth: int = 0) -> str:
    tags = TAKEN_TAGS + (OTHER_TAGS if messy else [])
    texts = CLEAN_TEXT * 3 + (MESSY_TEXT if messy else [])
    attributes = CLEAN_ATTRIBUTES + (MESSY_ATTRIBUTES if messy else [])
    closings = ["</{}>"] * 12 + (["", "</{} >", "<{}/>", "</p>"] if messy else [])
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        if depth >= 4 or draw(st.booleans()):
            pieces.append("".join(draw(st.lists(st.sampled_from(texts), max_size=3))))
            continue
        tag = draw(st.sampled_from(tags))
        start = f"<{tag}{draw(st.sampled_from(attributes))}>"
        if tag in VOID and not messy:
            pieces.append(start)
            continue
        inner = draw(markup(messy, depth + 1))
        pieces.append(start + inner + draw(st.sampled_from(closings)).format(tag))
    return "".join(pieces)


@given(markup(messy=False))
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_well_written_markup_in_any_nesting_is_read_alike_or_left_to_html5(body: str) -> None:
    assert_same_or_declined(PAGE.replace("{}", body))


@given(markup(messy=True))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_messy_markup_is_read_alike_or_left_to_html5(body: str) -> None:
    assert_same_or_declined(PAGE.replace("{}", body))


def test_random_soup_is_often_read_quickly() -> None:
    # The property above means little if the quick reading declined everything it met.
    taken = 0
    for body in ["<div><p>a <i>b</i><sub>1</sub></p><ul><li>x</li></ul></div>", "<table><tr><td>a</td></tr></table>",
                 '<section class="s"><h3>T</h3><p>&lt;b&gt; &amp; &quot;</p><hr><br></section>',
                 html.escape("<p>")]:
        taken += assert_same_or_declined(PAGE.replace("{}", body))
    assert taken == 4


# --------------------------------------------------------------------------- in the PDF renderer

pdf_only = pytest.mark.skipif(not pdf_available(), reason="WeasyPrint's system libraries (Pango) are not installed")


@pdf_only
def test_a_pdf_from_the_quick_tree_is_the_same_file(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qkvquiz.render import html_tree, pdf

    ws = build_worksheet(load_spec(bank_dir() / "attention-basics.yaml"), ["ada"], seed="tree")
    documents = [worksheet_document(ws, 0), key_student_document(ws, 0)]
    read: list[str] = []
    monkeypatch.setattr(pdf, "simple_html_tree", lambda source: read.append(source) or html_tree.simple_html_tree(source))
    quick = [pdf.render_pdf(document, tmp_path / f"quick{i}.pdf") for i, document in enumerate(documents)]
    assert len(read) == 2 and pdf._html_takes_a_tree()
    # Another WeasyPrint (its HTML.__init__ not the one known): WeasyPrint parses every document.
    monkeypatch.setattr(pdf, "_HTML_INIT_SOURCE", "0" * 16)
    pdf._html_takes_a_tree.cache_clear()
    try:
        slow = [pdf.render_pdf(document, tmp_path / f"slow{i}.pdf") for i, document in enumerate(documents)]
        assert len(read) == 2
    finally:
        pdf._html_takes_a_tree.cache_clear()
    for a, b in zip(quick, slow):
        assert a.path.read_bytes() == b.path.read_bytes()
