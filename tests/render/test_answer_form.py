"""The answer form as a file: its grids, what it may load, what it must never contain, and
`generate --format`. What it does in a browser is tested in test_answer_form_browser.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import sys
from html.parser import HTMLParser

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.families import Env
from qkvquiz.generate import generate_set, parse_formats
from qkvquiz.grade.parse import AnswerFormatError, parse_answer
from qkvquiz.render.form import answer_form_html, grid_blocks, submission_filename, worksheet_html
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

if importlib.util.find_spec("qkvquiz.render.html_page") is None:
    pytest.skip("the HTML renderer (qkvquiz.render.html_page) is not installed", allow_module_level=True)

ITEMS = [
    {"family": "attention.scores", "params": {"form": "vector"}},
    {"family": "attention.weights", "params": {"tokens": 4, "mask": "causal"}, "ask": ["scores", "weights"]},
    {"family": "attention.output", "params": {"tokens": 3, "d_k": 4, "d_v": 2}},
]


@pytest.fixture(scope="module")
def ws():
    return build_worksheet(parse_spec({"title": "Form test", "items": ITEMS}), ["ada", "alan"], seed=3)


class Page(HTMLParser):
    """What a browser would see: the inputs, every element's attributes, the text and scripts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inputs: list[dict[str, str]] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        self.tags.append((tag, a))
        if tag == "input" and "entry" in a.get("class", "").split():
            self.inputs.append(a)
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        {"script": self.scripts, "style": self.styles}.get(self._in, self.text).append(data)


def page(html: str) -> Page:
    p = Page()
    p.feed(html)
    return p


def test_each_asked_part_gets_a_grid_of_its_shape_in_row_order(ws):
    p = page(answer_form_html(ws, 0))
    by_part: dict[str, list[tuple[int, ...]]] = {}
    for a in p.inputs:
        by_part.setdefault(a["name"].split("[")[0], []).append(tuple(map(int, a["data-index"].split(","))) if a["data-index"] else ())
    expected = {part.id: env[part.step].shape[1:] for item, env in zip(ws.spec.items, ws.envs) for part in item.parts}
    assert set(by_part) == set(expected)
    for pid, shape in expected.items():
        # Document order is the tab order: row by row, i.e. C order of the indices.
        assert by_part[pid] == [tuple(int(i) for i in ix) for ix in np.ndindex(*shape)] if shape else [()], pid
    fieldsets = [a for t, a in p.tags if t == "fieldset"]
    assert [(f["data-part"], f["data-shape"]) for f in fieldsets] == [
        (pid, ",".join(map(str, shape))) for pid, shape in expected.items()
    ]
    # Nothing reorders the tab sequence.
    assert not [a for t, a in p.tags if "tabindex" in a]


def test_box_locations_are_named_as_the_grader_names_them():
    # For every box of a stack of matrices, a bad entry there draws a grader message that
    # starts with the box's name.
    shape = (2, 2, 3)
    for block in grid_blocks(shape):
        assert block.label.startswith("matrix ")
        for row in block.rows:
            for box in row:
                answer = np.ones(shape, dtype=object)
                answer[box.index] = "x"
                with pytest.raises(AnswerFormatError) as err:
                    parse_answer(answer.tolist(), shape)
                assert str(err.value).startswith(box.where + ":"), (box, str(err.value))
    assert [b.where for b in grid_blocks((3,))[0].rows[0]] == ["entry 1", "entry 2", "entry 3"]
    assert grid_blocks(())[0].rows == ((grid_blocks(())[0].rows[0][0],),)


def test_the_form_is_one_file_that_loads_nothing(ws):
    html = answer_form_html(ws, 0)
    p = page(html)
    for tag, attrs in p.tags:
        for name in ("src", "href", "action", "data", "srcset", "poster"):
            if name in attrs:
                assert attrs[name].startswith("data:"), (tag, name, attrs[name][:60])
        assert tag not in ("link", "iframe", "object", "embed", "base")
        if tag == "script":
            assert "src" not in attrs
    css = "".join(p.styles)
    assert "@import" not in css and "url(" not in css and "@font-face" not in css
    scripts = "".join(p.scripts)
    for call in ("fetch(", "XMLHttpRequest", "WebSocket", "sendBeacon", "eval(", "new Function", "import("):
        assert call not in scripts
    csp = [a["content"] for t, a in p.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]


def _with_other_steps(ws, shift: float):
    """The same worksheet with every step value (never a given) changed."""
    envs = []
    for item, env in zip(ws.spec.items, ws.envs):
        steps = set(item.family.step_names)
        envs.append(Env({k: (v + shift if k in steps else v) for k, v in env.items()}))
    return dataclasses.replace(ws, envs=tuple(envs))


def test_the_pages_depend_on_the_givens_alone(ws):
    # If a template showed any step's value, the page would change with the step values.
    other = _with_other_steps(ws, 1234.5678)
    for i in range(len(ws.students)):
        assert answer_form_html(other, i) == answer_form_html(ws, i)
        assert worksheet_html(other, i) == worksheet_html(ws, i)


def _numbers_shown(html: str) -> set[str]:
    """Every number a reader or a script could find: text, attributes, scripts (pictures'
    data, layout styles and box indices aside; each SVG carries its expression as text beside it)."""
    p = page(html)
    chunks = p.text + p.scripts + [
        v for _, a in p.tags for k, v in a.items() if k not in ("src", "style", "data-index", "data-shape")
    ]
    return set(re.findall(r"\d+(?:[.,]\d+)?", " ".join(chunks)))


def test_no_step_value_that_is_not_a_given_appears(ws):
    for i in range(len(ws.students)):
        shown = _numbers_shown(answer_form_html(ws, i))
        for variant in ws.variant(i):
            givens = np.concatenate([np.ravel(g) for g in variant["givens"].values()])
            for name, value in variant["steps"].items():
                for v in np.ravel(value):
                    if not np.isfinite(v) or np.any(np.isclose(givens, v)) or float(v).is_integer():
                        continue
                    # The renderings a template or key would use: 3 and 4 decimals, and full
                    # precision where that is longer (a short "1.5" also stands in the help text).
                    texts = {f"{abs(v):.3f}", f"{abs(v):.4f}"}
                    if len(repr(abs(float(v))).partition(".")[2]) > 3:
                        texts.add(repr(abs(float(v))))
                    for text in texts:
                        assert text not in shown and text.replace(".", ",") not in shown, (name, v)


def test_ids_are_escaped_and_the_file_name_is_safe():
    nasty = '<script>alert("x")</script>'
    ws = build_worksheet(parse_spec({"title": "T <b>", "items": ITEMS[:1]}), [nasty, "../../etc/passwd"], seed=1)
    html = answer_form_html(ws, 0)
    assert nasty not in html and "&lt;script&gt;" in html and "T <b>" not in html
    form = [a for t, a in page(html).tags if t == "form"][0]
    assert form["data-student"] == nasty  # the saved file names the student exactly
    name = submission_filename("../../etc/passwd", "AB-CD")
    assert "/" not in name and not name.startswith(".") and name.endswith(".json")


def test_format_option_names_the_files(tmp_path):
    spec = parse_spec({"title": "T", "items": ITEMS[:1]})
    result = generate_set(spec, ["ada"], tmp_path / "a", formats="html")
    folder = result.folders["ada"]
    assert sorted(p.name for p in folder.iterdir()) == ["answer-form.html", "submission.json", "worksheet.html"]
    assert (tmp_path / "a" / "key.md").is_file()
    result = generate_set(spec, ["ada"], tmp_path / "b")
    assert sorted(p.name for p in result.folders["ada"].iterdir()) == ["submission.json", "worksheet.md"]
    assert parse_formats(" md, HTML,md ") == ("md", "html")
    for bad, words in (("docx", "unknown format 'docx'"), ("", "no format"), (",", "no format")):
        with pytest.raises(ValueError, match=words):
            parse_formats(bad)


def test_pdf_is_refused_where_weasyprint_is_missing(tmp_path, monkeypatch):
    from qkvquiz.render.pdf import weasyprint_module

    for name in [m for m in sys.modules if m == "weasyprint" or m.startswith("weasyprint.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # as without the package
    weasyprint_module.cache_clear()
    try:
        assert parse_formats("md,pdf") == ("md", "pdf")  # a known format; whether it can print is checked next
        with pytest.raises(ValueError, match="cannot import weasyprint"):
            generate_set(parse_spec({"title": "T", "items": ITEMS[:1]}), ["ada"], tmp_path / "lib", formats="md,pdf")
        result = CliRunner().invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(tmp_path / "o"),
                                          "--format", "md,pdf"])
        assert result.exit_code == 2 and "Markdown and HTML output work" in result.output, result.output
        assert not (tmp_path / "o").exists() and not (tmp_path / "lib").exists()
    finally:
        weasyprint_module.cache_clear()


def test_cli_writes_forms_whose_blank_matches_the_blank_submission(tmp_path):
    out = tmp_path / "set"
    result = CliRunner().invoke(app, ["generate", "attention-basics", "-n", "2", "--out", str(out), "--format", "md,html"])
    assert result.exit_code == 0, result.output
    for sid in ("s01", "s02"):
        folder = out / "students" / sid
        blank = json.loads((folder / "submission.json").read_text(encoding="utf-8"))
        p = page((folder / "answer-form.html").read_text(encoding="utf-8"))
        form = [a for t, a in p.tags if t == "form"][0]
        assert (form["data-student"], form["data-variant"]) == (blank["student"], blank["variant"])
        shapes = {f["data-part"]: f["data-shape"] for t, f in p.tags if t == "fieldset"}
        assert shapes == {k: ",".join(map(str, np.shape(np.array(v, dtype=object)))) for k, v in blank["answers"].items()}
        assert (folder / "worksheet.md").is_file() and (folder / "worksheet.html").is_file()


@pytest.mark.slow
def test_pdf_format_prints_the_worksheet_and_key_where_the_renderer_is_installed(tmp_path):
    if importlib.util.find_spec("qkvquiz.render.pdf") is None:
        pytest.skip("no PDF renderer (qkvquiz.render.pdf) in this installation")
    from qkvquiz.render.pdf import pdf_available

    if not pdf_available():
        pytest.skip("WeasyPrint or its system libraries are missing")
    result = generate_set(parse_spec({"title": "T", "items": ITEMS[:1]}), ["ada"], tmp_path, formats="pdf")
    folder = result.folders["ada"]
    assert sorted(p.name for p in folder.iterdir()) == ["submission.json", "worksheet.pdf"]
    for path in (folder / "worksheet.pdf", tmp_path / "keys" / "ada.pdf"):
        assert path.read_bytes().startswith(b"%PDF-")


def test_the_forms_pictures_of_math_are_drawn_at_its_text_size(monkeypatch) -> None:
    """The form's text is 16 px (12 pt); its formulas were drawn for the printed page's 11 pt."""
    from qkvquiz import build_worksheet, load_spec
    from qkvquiz.render import math_html as render_math
    from qkvquiz.render.form import FORM_FONT_SIZE_PT, answer_form_html
    from qkvquiz.core.resources import bank_dir

    drawn: list[float] = []
    real = render_math.svg_math_html
    monkeypatch.setattr(render_math, "svg_math_html",
                        lambda latex, display, font_size_pt: drawn.append(font_size_pt) or real(latex, display, font_size_pt))
    render_math.clear_math_cache()
    try:
        answer_form_html(build_worksheet(load_spec(bank_dir() / "attention-basics.yaml"), ["ada"], seed=3), 0)
    finally:
        render_math.clear_math_cache()
    assert drawn and set(drawn) == {FORM_FONT_SIZE_PT} and FORM_FONT_SIZE_PT * 4 / 3 == 16


def test_chinese_words_in_a_formula_are_never_drawn_as_a_picture() -> None:
    """The pictures' math font has no Chinese glyphs (they came out as empty boxes): a formula
    with translated words (the masked scores' 若 … 否则为) is set as text on every page."""
    from qkvquiz import build_worksheet, load_spec
    from qkvquiz.render.documents import worksheet_document
    from qkvquiz.render.fonts import has_cjk
    from qkvquiz.core.resources import bank_dir

    spec = dataclasses.replace(load_spec(bank_dir() / "masking.yaml"), lang="zh")
    ws = build_worksheet(spec, ["ada"], seed=3)
    for page in (answer_form_html(ws, 0), worksheet_document(ws, 0)):
        assert "否则为" in page
        pictured = re.findall(r'class="math-svg"[^>]*>([^<]*)<', page)
        assert not [text for text in pictured if has_cjk(text)]  # (the bundled formulas are all text now)


def test_each_legend_keeps_its_part_id_whole(ws):
    """A line may break a part id at "." or "-" (q2.dS-row): in each legend the id is a
    ``code.part-id`` that the form's own stylesheet keeps on one line, as the printed pages do."""
    html = answer_form_html(ws, 0)
    legends = re.findall(r"<legend[^>]*>(.*?)</legend>", html, re.S)
    ids = [p.id for item in ws.spec.items for p in item.parts]
    assert len(legends) == len(ids)
    for legend, part_id in zip(legends, ids):
        assert f'<code class="part-id">{part_id}</code>' in legend, legend
    css = "".join(page(html).styles)
    form_css = css[css.index("The answer form on a screen"):]  # answer-form/form.css, after style.css
    rules = re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", form_css, flags=re.S))
    assert any("code.part-id" in [s.strip() for s in sel.split(",")] and "white-space: nowrap" in body
               for sel, body in rules)
