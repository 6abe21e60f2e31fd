"""Chinese pages as a typesetter reads them: every mark in a face that has it (no empty box
for "。" after a matrix), one clear word when no CJK font is installed, and Chinese
punctuation without stray spaces."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.core import i18n
from qkvquiz.core.resources import bank_dir
from qkvquiz.render.documents import key_student_document
from qkvquiz.render.fonts import has_cjk
from qkvquiz.render.math_html import math_html

ROOT = Path(__file__).resolve().parents[2]

#: The transparent text of a picture of math: what the picture draws, in its math face.
_PICTURE_TEXT = re.compile(r'<span class="math-svg"[^>]*>([^<]*)</span>')


def test_punctuation_after_a_displayed_matrix_is_text_not_a_picture():
    r"""The math face of the pictures has no "。": set in it, the mark printed as an empty box."""
    for mark in ("。", "，", "；", "："):
        body = math_html(r"H = \begin{bmatrix} 1 & -2 \\ 3 & 4 \end{bmatrix}" + mark, display=True, text=True)
        assert "math-svg" not in body, mark
        assert body.endswith(mark), body
    # Between matrices, the full-width comma stays with the matrix it follows.
    two = math_html(r"Q = \begin{bmatrix} 1 & 2 \end{bmatrix}，\quad K = \begin{bmatrix} 3 & 4 \end{bmatrix}。",
                    display=True, text=True)
    groups = re.findall(r'<span class="math-group">(.*?)</span>(?= <span class="math-group">|$)', two, re.S)
    assert len(groups) == 2 and groups[0].endswith("，") and groups[1].endswith("。"), two
    assert "math-svg" not in two


@pytest.mark.slow
def test_no_picture_of_math_in_a_chinese_key_holds_cjk_text():
    """A Chinese key of every family: no piece of math drawn as a picture (whose face has no
    CJK glyph) holds a Chinese character or mark."""
    spec = load_spec(bank_dir() / "all-families.yaml")
    with i18n.using("zh"):
        ws = build_worksheet(spec, ["s01"], seed=0)
        key = key_student_document(ws, 0)
    drawn = [text for text in _PICTURE_TEXT.findall(key) if has_cjk(text)]
    assert not drawn, drawn[:10]
    assert key.count("。") > 100


# ----------------------------------------------------------------------------- no CJK font


def _no_cjk_font(monkeypatch: pytest.MonkeyPatch) -> None:
    from qkvquiz.render import fonts

    monkeypatch.setattr(fonts, "cjk_fonts", lambda: ())


def test_a_chinese_pdf_set_without_a_cjk_font_stops_before_any_work(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from qkvquiz.cli import app

    _no_cjk_font(monkeypatch)
    out = tmp_path / "set"
    result = CliRunner().invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(out),
                                      "--lang", "zh", "--format", "md,pdf"])
    assert result.exit_code == 2, result.output
    assert result.output.count("fonts-noto-cjk") == 1 and "--allow-missing-fonts" in result.output
    assert not out.exists()
    # Markdown and HTML need no font: the same set without PDFs is written.
    result = CliRunner().invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(out),
                                      "--lang", "zh", "--format", "md"])
    assert result.exit_code == 0 and "fonts-noto-cjk" not in result.output


def test_an_english_set_with_a_chinese_name_stops_too(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from qkvquiz.cli import app

    _no_cjk_font(monkeypatch)
    roster = tmp_path / "roster.csv"
    roster.write_text("student,name\ns01,李雷\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["generate", "attention-basics", "--roster", str(roster),
                                      "--out", str(tmp_path / "set"), "--format", "pdf"])
    assert result.exit_code == 2 and "fonts-noto-cjk" in result.output


def test_missing_glyphs_are_one_line_and_cjk_ones_none_after_the_font_warning(monkeypatch, caplog):
    """WeasyPrint notes every character it draws as an empty box: thousands of lines for a
    Chinese class without a CJK font, which buried the one warning naming the package."""
    from qkvquiz.render.pdf import PdfResult, missing_glyph
    from qkvquiz.render.pdf_batch import _log_warnings

    def notdef(char: str) -> str:
        return f'.notdef glyph rendered for Unicode string unsupported by fonts: "{char}" (U+{ord(char):04X})'

    assert missing_glyph(notdef("注")) == "注" and missing_glyph("Ignored CSS property") is None
    flood = tuple(notdef(c) for c in "注意力权重" * 300) + (notdef("\U0001d504"), "an other warning")
    results = [PdfResult(Path(f"s{i}.pdf"), 2, flood) for i in range(3)]
    _no_cjk_font(monkeypatch)
    with caplog.at_level("WARNING", logger="qkvquiz.render.pdf_batch"):
        _log_warnings(results)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines  # the other warning of each PDF, and one line for the rest
    assert lines[-1] == "3 PDFs print empty boxes for 1 character that no installed font has: \U0001d504"
    caplog.clear()
    monkeypatch.setattr("qkvquiz.render.fonts.cjk_fonts", lambda: ("Noto Sans CJK SC",))
    with caplog.at_level("WARNING", logger="qkvquiz.render.pdf_batch"):
        _log_warnings(results[:1])
    assert caplog.records[-1].getMessage().endswith(": 注意力权重\U0001d504")


#: A font configuration with only the shipped faces: a machine without a CJK font.
_LATIN_ONLY_FONTS = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>{fonts}</dir><cachedir>{cache}</cachedir></fontconfig>
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("fc-list") is None, reason="fontconfig's tools are not installed")
def test_without_a_cjk_font_the_warning_is_said_once_and_no_notdef_flood(tmp_path):
    pytest.importorskip("qkvquiz.render.pdf")
    from qkvquiz.render.fonts import fonts_dir
    from qkvquiz.render.pdf import pdf_available

    if not pdf_available():
        pytest.skip("WeasyPrint's libraries are not installed")
    conf = tmp_path / "fonts.conf"
    conf.write_text(_LATIN_ONLY_FONTS.format(fonts=fonts_dir(), cache=tmp_path / "fc-cache"), encoding="utf-8")
    env = {**os.environ, "FONTCONFIG_FILE": str(conf), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "qkvquiz", "generate", "attention-basics", "-n", "1", "--lang", "zh",
               "--format", "pdf", "--public", "--out", str(tmp_path / "set")]
    stopped = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert stopped.returncode == 2 and stopped.stderr.count("fonts-noto-cjk") == 1, stopped.stderr
    went_on = subprocess.run([*command, "--allow-missing-fonts"], env=env, capture_output=True, text=True, timeout=600)
    assert went_on.returncode == 0, went_on.stderr
    assert went_on.stderr.count("fonts-noto-cjk") == 1 and ".notdef" not in went_on.stderr, went_on.stderr[:2000]
    assert len(went_on.stderr.splitlines()) <= 3, went_on.stderr[:2000]


# ----------------------------------------------------------------------------- punctuation

#: Full-width marks that carry their own space: none may be followed (or preceded) by another.
_WIDE = "、。，；：！？（）"
_CATALOG = ROOT / "qkvquiz" / "locale" / "zh" / "LC_MESSAGES" / "qkvquiz.po"


def _zh_messages() -> list[tuple[str, str]]:
    from babel.messages.pofile import read_po

    with _CATALOG.open("rb") as handle:
        catalog = read_po(handle)
    out = []
    for message in catalog:
        strings = message.string if isinstance(message.string, (list, tuple)) else [message.string]
        out += [(str(message.id), s) for s in strings if s]
    return out


def test_catalog_has_no_half_width_space_beside_a_full_width_mark():
    stray = re.compile(f"[{_WIDE}][ \u00a0]|[ \u00a0][{_WIDE}]")
    found = [s for _, s in _zh_messages() if stray.search(s)]
    assert not found, found[:10]


def test_catalog_words_a_typesetter_asked_for():
    messages = _zh_messages()
    assert not [s for _, s in messages if "读作" in s]  # "无法读作数" → "无法识别为数字"
    by_id = dict(messages)
    assert "识别为数字" in by_id['cannot read "%(text)s" as a number (%(why)s)']
    # A heading over a list of answers ends with no full stop.
    assert by_id["**Answers.**"] == "**答案**" and by_id["Answers."] == "答案"


def _zh_key(spec_name: str = "all-families.yaml") -> str:
    spec = load_spec(bank_dir() / spec_name)
    with i18n.using("zh"):
        ws = build_worksheet(spec, ["s01"], seed=0)
        return key_student_document(ws, 0)


def test_a_line_break_after_a_chinese_mark_prints_no_space():
    """Markdown's line break between two sentences is a space in HTML: after "。" it printed as a
    stray half-width space ("H = X + Z。 答案：…")."""
    from qkvquiz.render.html_page import markdown_body_html

    html = markdown_body_html("加上残差：$H = X + Z$。\n答案：2×4 矩阵\n（0.4 分）；\n方差")
    # (A number and its Chinese word are tied: a no-break space, see the test below.)
    assert "。答案：2×4 矩阵（0.4 分）；方差" in re.sub(r"<[^>]+>", "", html).replace("\xa0", " "), html
    # Between Chinese and Latin text or math the space stays, as in English.
    assert markdown_body_html("每个词元\n`t` 与\nsoftmax") == "<p>每个词元\n<code>t</code> 与\nsoftmax</p>\n"
    assert markdown_body_html("One.\nTwo") == "<p>One.\nTwo</p>\n"


@pytest.mark.slow
def test_a_chinese_key_has_no_space_beside_a_full_width_mark():
    page = re.sub(r"<style.*?</style>", "", _zh_key("attention-basics.yaml"), flags=re.S)
    stray = re.compile(f"[{_WIDE}]\\s+(?=[^\\s<]|<(?:span|code|strong|em)\\b)")
    found = [page[m.start() - 20 : m.end() + 20] for m in stray.finditer(page)]
    assert not found, found[:5]


def test_a_part_id_is_one_unbreakable_run_and_copies_as_written():
    from qkvquiz.core.resources import templates_dir
    from qkvquiz.render.html_page import markdown_body_html

    html = markdown_body_html("小题 `attention-layernorm.var`（0.4 分），种子 `0`。")
    assert '<code class="part-id">attention-layernorm.var</code>' in html  # ASCII "-", as the file spells it
    assert "<code>0</code>" in html
    css = (templates_dir() / "style.css").read_text(encoding="utf-8")
    assert re.search(r"(^|\n)code\s*\{[^}]*white-space:\s*nowrap", css)  # every short code span, ids included


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils (pdftotext) is not installed")
def test_no_part_id_is_broken_across_lines_in_a_chinese_key_pdf(tmp_path):
    from qkvquiz.render.pdf import pdf_available, render_pdf

    if not pdf_available():
        pytest.skip("WeasyPrint's libraries are not installed")
    render_pdf(_zh_key(), tmp_path / "key.pdf")
    # -raw: the text in the order it is drawn, each printed line a line ("小题 theory-" and the
    # rest of the id on the next one, where a line broke at the hyphen).
    text = subprocess.run(["pdftotext", "-raw", str(tmp_path / "key.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    broken = re.findall(r"[A-Za-z][\w.]*-$", text, re.M)
    assert not broken, broken[:5]
    assert "attention-layernorm.var" in text
    assert "\ufffd" not in text and ".notdef" not in text


# ----------------------------------------------------------------------------- names and header


def test_the_markdown_worksheet_header_is_its_own_paragraph_and_carries_the_name():
    from qkvquiz.render.html_page import markdown_body_html
    from qkvquiz.render.markdown import worksheet_markdown

    ws = build_worksheet(load_spec(bank_dir() / "attention-basics.yaml"), ["ada", "alan"], seed=1)
    sheet = worksheet_markdown(ws, 0, name="Ada *Lovelace* <b>")
    header = next(line for line in sheet.splitlines() if line.startswith("**Name:**"))
    assert header.startswith(r"**Name:** Ada \*Lovelace\* \<b\> **Student:** `ada`"), header
    body = markdown_body_html(sheet)
    # The header line and the instructions are two paragraphs, and the name is text, as written.
    assert re.search(r"<p><strong>Name:</strong> Ada \*Lovelace\* &lt;b&gt; <strong>Student:</strong>.*?</p>\n<p>Work each",
                     body), body[:600]
    # Without a name, a line to write it on.
    assert "**Name:** ________________________ **Student:** `alan`" in worksheet_markdown(ws, 1)


def test_generate_puts_roster_names_on_the_markdown_worksheet_and_in_key_html(tmp_path):
    from qkvquiz.generate import generate_set

    spec = load_spec(bank_dir() / "attention-basics.yaml")
    made = generate_set(spec, ["ada", "alan"], tmp_path / "out", formats="md,html",
                        names={"ada": "Ada Lovelace"})
    assert "**Name:** Ada Lovelace **Student:** `ada`" in (made.folders["ada"] / "worksheet.md").read_text(encoding="utf-8")
    key = (made.out / "key.html").read_text(encoding="utf-8")
    assert ('<a href="#student-1"><span class="roster-id">ada</span></a> '
            '<span class="roster-name">Ada Lovelace</span>') in key
    assert '<span class="roster-id">alan</span></a> <span class="roster-code">' in key


def test_the_key_cover_names_the_students_in_either_language():
    from qkvquiz.render.documents import key_cover_document

    ws = build_worksheet(load_spec(bank_dir() / "attention-basics.yaml"), ["ada", "alan"], seed=1)
    cover = key_cover_document(ws, names={"alan": "阿兰"})
    assert '<span class="roster-name">阿兰</span>' in cover and "(student id, name, variant)" in cover
    with i18n.using("zh"):
        assert "（学号、姓名、变体）" in key_cover_document(ws, names={"alan": "阿兰"})
        assert "（学号、变体）" in key_cover_document(ws)


@pytest.mark.parametrize("tokens, written", [(2, r"1,\ 2"), (3, r"1,\ 2,\ 3"), (5, r"1, \dots, 5")])
def test_the_delta_rule_writes_few_tokens_out(tokens, written):
    """"for each token t = 1,…,2" read oddly: two or three tokens are written out."""
    from qkvquiz.render.markdown import worksheet_markdown
    from qkvquiz.spec import parse_spec

    spec = parse_spec({"title": "t", "items": [{"family": "delta.recurrent", "params": {"tokens": tokens}}]})
    ws = build_worksheet(spec, ["a"], seed=1)
    assert f"For each token $t = {written}$ it" in worksheet_markdown(ws, 0)
    with i18n.using("zh"):
        assert f"对每个词元 $t = {written}$，" in worksheet_markdown(ws, 0)


def test_a_number_stays_on_the_line_of_its_chinese_word():
    """"四舍五入到 2 ⏎ 位小数", "只能关注键 ⏎ 1": the space between a number (or a Latin word) and a
    Chinese character is tied, also before a number set as math; English spaces stay spaces."""
    from qkvquiz.render.html_page import markdown_body_html

    assert "到\xa02\xa0位小数" in markdown_body_html("四舍五入到 2 位小数")
    assert "关注键\xa0<span" in markdown_body_html("只能关注键 $1$。")
    # A long formula is not tied: it pulled the Chinese word with it ("然 ⏎ 后 Y = …").
    assert "然后 \u200b<span" in markdown_body_html("然后 $Y = [Z^{(1)} \\mid Z^{(2)}] W^O$。", text_math=True)
    assert "round to 2 decimals, key " in markdown_body_html("round to 2 decimals, key $1$ of the set.")


def test_two_chinese_marks_in_a_row_set_the_first_at_half_width():
    """"）：" drawn as two full ems showed half an em of blank between the marks; the first of a
    pair takes the font's half-width forms (halt), a lone mark keeps its full width."""
    from qkvquiz.render.html_page import markdown_body_html

    html = markdown_body_html("（每个词元一行）：查询 1。（注）")
    assert '<span class="halt">）</span>：' in html
    assert '<span class="halt">。</span>（' in html
    assert html.count('class="halt"') == 2, html
    assert "halt" not in markdown_body_html("(one row per token): query 1.")


def test_words_in_a_formula_follow_the_chinese_rules_and_emphasis_takes_no_space():
    """"（若 Mᵢⱼ = 1），否则为 −∞" inside a formula's \\text{} kept its pair of marks at full
    width; "*点积注意力* 为每个查询" printed a Latin space between Chinese words."""
    from qkvquiz.render.html_page import markdown_body_html

    html = markdown_body_html(r"$\tilde S_{ij} = S_{ij}\text{（若 }M_{ij} = 1\text{），否则为 }-\infty$", text_math=True)
    assert '<span class="halt">）</span>，' in html, html
    assert "<em>点积注意力</em>为每个查询" in markdown_body_html("*点积注意力* 为每个查询")
    assert "<em>dot product</em> for" in markdown_body_html("*dot product* for each query")
