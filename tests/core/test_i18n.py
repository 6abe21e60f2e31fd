"""Languages: the catalogs are complete and current, the glossary is kept, and what a student or
an instructor reads in Chinese has no English word left outside math, ids and code."""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from babel.messages.extract import extract_from_dir
try:
    from babel.messages.frontend import parse_mapping_cfg
except ImportError:  # Babel < 2.15 (our floor is 2.14) names it parse_mapping
    from babel.messages.frontend import parse_mapping as parse_mapping_cfg
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po
from typer.testing import CliRunner

from qkvquiz.core import i18n
from qkvquiz.cli import app
from qkvquiz.families import REGISTRY
from qkvquiz.grade.analysis import item_analysis_markdown
from qkvquiz.grade.audit import audit_markdown, audit_spec
from qkvquiz.grade.feedback import feedback_markdown
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.grade.parse import AnswerFormatError, parse_answer, parse_entry
from qkvquiz.key import key_from_json, key_to_json, load_key
from qkvquiz.spec import SpecError, parse_spec
from qkvquiz.worksheet import build_worksheet

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "qkvquiz" / "locale"
SHIPPED = [lang for lang in i18n.LANGUAGES if lang != i18n.DEFAULT_LANG]
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None, "Np_": (1, 2)}
PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]")
# A placeholder a language may leave out: English's ordinal suffix (2nd → 第 2).
DROPPABLE = {"%(n)s%(suffix)s": {"suffix"}}
runner = CliRunner()


def po(lang: str):
    with open(LOCALE / lang / "LC_MESSAGES" / "qkvquiz.po", "rb") as fh:
        return read_po(fh, locale=lang)


def code_msgids() -> set[str]:
    """Every message the code and templates mark, extracted as ``pybabel extract`` does."""
    with open(ROOT / "babel.cfg") as fh:
        method_map, options_map = parse_mapping_cfg(fh)
    found = set()
    for _file, _line, message, _comments, _context in extract_from_dir(
        str(ROOT), method_map, options_map, keywords=KEYWORDS,
    ):
        found.add(message if isinstance(message, str) else message[0])
    return found


# ----------------------------------------------------------------------------- catalogs


@pytest.mark.parametrize("lang", SHIPPED)
def test_every_message_has_a_translation_with_the_same_placeholders(lang):
    catalog = po(lang)
    wanted = code_msgids()
    have = {m.id if isinstance(m.id, str) else m.id[0]: m for m in catalog if m.id}
    assert not wanted - set(have), f"not in {lang}'s catalog (run pybabel extract/update): {sorted(wanted - set(have))[:5]}"
    problems = []
    for msgid, message in have.items():
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        if "fuzzy" in message.flags or not all(strings):
            problems.append(("untranslated", msgid))
            continue
        expected = set(PLACEHOLDER.findall(" ".join(ids)))
        for text in strings:
            got = set(PLACEHOLDER.findall(text))
            if got != expected and not (got <= expected and expected - got <= DROPPABLE.get(msgid, set())):
                problems.append(("placeholders", msgid, text))
    assert not problems, problems[:5]


@pytest.mark.parametrize("lang", SHIPPED)
def test_the_compiled_catalog_is_the_po_compiled(lang):
    """The .mo in the package holds the .po's messages, as `pybabel compile` makes it today.

    Compared message by message: the catalogs' headers name the Babel that compiled them, which
    differs from machine to machine and says nothing about the translations."""
    with open(LOCALE / lang / "LC_MESSAGES" / "qkvquiz.mo", "rb") as fh:
        shipped = read_mo(fh)
    buf = io.BytesIO()
    write_mo(buf, po(lang))
    buf.seek(0)
    fresh = read_mo(buf)

    def frozen(text):  # a plural message's forms come as a list
        return tuple(text) if isinstance(text, (list, tuple)) else text

    def messages(catalog):
        return {frozen(message.id): frozen(message.string) for message in catalog if message.id}

    assert messages(shipped) == messages(fresh)
    assert messages(shipped), "the compiled catalog is empty"
    # What the package loads at run time is that file, read by the standard library.
    loaded = i18n.translations(lang)
    assert all(loaded.gettext(msgid) == string for msgid, string in messages(shipped).items()
               if isinstance(msgid, str))


def test_unknown_languages_are_refused_and_variants_of_a_code_are_read():
    assert i18n.check_lang("zh-CN") == "zh" and i18n.check_lang("ZH_hans") == "zh"
    with pytest.raises(i18n.UnknownLanguage, match="en, zh"):
        i18n.check_lang("fr")


def test_the_zh_catalog_uses_the_glossary_terms():
    terms = yaml.safe_load((LOCALE / "glossary.zh.yaml").read_text(encoding="utf-8"))["terms"]
    misses = []
    for message in po("zh"):
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        english = " ".join(PLACEHOLDER.sub(" ", text) for text in ids)  # %(score)s is not a word
        for term in terms:
            if re.search(rf"\b(?:{term['en']})\b", english, re.IGNORECASE) and not all(term["zh"] in s for s in strings):
                misses.append((term["zh"], ids[0]))
    assert not misses, misses[:5]


# ----------------------------------------------------------------------------- Chinese output

# Words in math and code that read the same in every language.
MATH_WORDS = {
    "softmax", "diag", "tril", "tanh", "rowsum", "sqrt", "exp", "var", "inf", "delta", "logit", "gram",
    "json", "nan", "null", "true", "false", "results", "tab", "enter", "sigfigs",
}
WORD = re.compile(r"(?<![\w.])[A-Za-z]{3,}(?![\w.(])")


def english_words(text: str, ids: set[str]) -> list[str]:
    text = re.sub(r"`[^`]*`", " ", text)  # code: ids, part ids
    text = re.sub(r"\$[^$\n]+\$", " ", text)  # inline math of a prompt ($\bar B_K$), typeset where shown
    text = re.sub(r"\b\w+\.\w+(\.\w+)?\b", " ", text)  # family names, q1.scores, results.json
    found = []
    for m in WORD.finditer(text):
        word = m.group()
        if word.lower() in MATH_WORDS or word in ids:
            continue
        found.append(word)
    return found


def all_family_items() -> list[dict]:
    return [{"family": name, "ask": [s.name for s in fam.steps if s.askable]} for name, fam in sorted(REGISTRY.items())]


def family_ids() -> set[str]:
    ids = set()
    for fam in REGISTRY.values():
        ids |= {s.name for s in fam.steps} | {m.name for m in fam.misconceptions} | set(fam.given_names)
        ids |= {inv.name for s in fam.steps for inv in s.invariants}
    return ids


def mistaken_submissions(key) -> list[Submission]:
    """For student 0: every known mistake of every part, and answers off by one, unreadable,
    missing and right, so that every kind of sentence is rendered."""
    subs = []
    right = dict(key.answers[0])
    student = key.students[0]
    for item in key.items:
        for part in item.parts:
            for mistake in item.family.mistakes_for(part.step, item.params):
                with np.errstate(all="ignore"):
                    wrong = np.asarray(mistake.fn(item.env, item.params, np))[0]
                answers = {**right, part.id: np.where(np.isfinite(wrong), wrong, -1e300).tolist()}
                subs.append(Submission(f"{part.id}-{mistake.name}", student, answers, None, None, None))
    off = {k: (np.asarray(v, dtype=object) if v is not None else v) for k, v in right.items()}
    answers = {}
    for k, (pid, value) in enumerate(right.items()):
        kind = k % 4
        if kind == 0:
            answers[pid] = "1/0" if not isinstance(value, list) else [["(("]]
        elif kind == 1:
            continue
        elif kind == 2:
            answers[pid] = json.loads(json.dumps(value).replace("1", "2"))
        else:
            answers[pid] = value
    del off
    subs.append(Submission("mixed", student, answers, None, None, None))
    return subs


@pytest.fixture(scope="module")
def zh_class_report():
    spec = parse_spec({"title": "注意力练习", "lang": "zh", "items": all_family_items()})
    ws = build_worksheet(spec, ["s01", "s02"], "zh")
    key = key_from_json(json.loads(json.dumps(key_to_json(ws))))
    assert key.lang == "zh"
    reports = [grade(key, [sub], duplicates="first") for sub in mistaken_submissions(key)]
    return key, reports


@pytest.mark.slow
def test_feedback_and_item_analysis_in_chinese_have_no_english_words(zh_class_report):
    key, reports = zh_class_report
    ids = family_ids() | set(key.students)
    diagnosed = set()
    for report in reports:
        assert report.lang == "zh"
        for result in report.results:
            text = feedback_markdown(report, result)
            assert not english_words(text, ids), (result.source, english_words(text, ids)[:10])
            diagnosed |= {m for p in result.parts for m in p.mistakes}
        text = item_analysis_markdown(report)
        assert not english_words(text, ids), english_words(text, ids)[:10]
    assert len(diagnosed) > 50  # the sentences of most mistakes were rendered


@pytest.mark.slow
def test_english_is_the_default_and_unchanged_in_words(zh_class_report):
    _key, reports = zh_class_report
    text = feedback_markdown(reports[0], reports[0].results[0], lang="en")
    assert "of" in text and "Problem 1:" in text and "题" not in text


def test_an_audit_in_chinese_has_no_english_words():
    example = yaml.safe_load((ROOT / "examples" / "audit-example.yaml").read_text(encoding="utf-8"))
    example["title"] = "手写答案核查"
    for item in example["items"]:
        item.pop("title", None)
    report = audit_spec(example, source="audit.yaml", lang="zh")
    text = audit_markdown(report)
    assert "错误" in text and "已知错误" in text
    assert not english_words(text, family_ids()), english_words(text, family_ids())[:10]
    assert "WRONG" in audit_markdown(report, lang="en")


# ----------------------------------------------------------------------------- choosing the language


def test_spec_lang_is_validated_with_the_file_and_field():
    with pytest.raises(SpecError, match=r"field 'lang'.*en, zh"):
        parse_spec({"title": "t", "lang": "xx", "items": [{"family": "attention.scores"}]}, source="w.yaml")
    assert parse_spec({"title": "t", "items": [{"family": "attention.scores"}]}).lang == "en"


def test_cli_lang_wins_over_the_spec_and_the_key_records_it(tmp_path):
    spec = tmp_path / "zh.yaml"
    spec.write_text("title: 练习\nlang: zh\nitems:\n  - family: attention.scores\n", encoding="utf-8")
    out = tmp_path / "zh"
    assert runner.invoke(app, ["generate", str(spec), "-n", "1", "--out", str(out), "--public"]).exit_code == 0
    assert load_key(out / "key.json").lang == "zh"
    en = tmp_path / "en"
    assert runner.invoke(app, ["generate", str(spec), "-n", "1", "--out", str(en), "--public", "--lang", "en"]).exit_code == 0
    assert load_key(en / "key.json").lang == "en"
    bad = runner.invoke(app, ["generate", str(spec), "-n", "1", "--out", str(tmp_path / "x"), "--public", "--lang", "fr"])
    assert bad.exit_code == 2 and "--lang" in bad.output

    # grade answers in the key's language unless --lang says otherwise
    sub = json.loads((out / "students" / "s01" / "submission.json").read_text())
    sub["answers"] = {k: "abc" for k in sub["answers"]}
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(sub), encoding="utf-8")
    for lang, word in ((None, "无法读取"), ("en", "could not be read")):
        graded = tmp_path / f"graded-{lang}"
        args = ["grade", str(out / "key.json"), str(path), "--out", str(graded)] + (["--lang", lang] if lang else [])
        assert runner.invoke(app, args).exit_code == 0
        assert word in (graded / "feedback" / "s01.md").read_text(encoding="utf-8")
        assert word in (graded / "item-analysis.md").read_text(encoding="utf-8") or lang is None


# ----------------------------------------------------------------------------- entries and the form


def test_fullwidth_entries_read_and_ambiguous_ones_refused_in_the_students_language():
    assert parse_entry("０．５") == 0.5 and parse_entry("－∞") == -np.inf and parse_entry("５／３") == 5 / 3
    assert parse_entry("（１＋√５）／２") == pytest.approx((1 + 5**0.5) / 2) and parse_entry("０。２５") == 0.25
    with i18n.using("zh"):
        with pytest.raises(AnswerFormatError, match="、.*每个格子只填一个元素"):
            parse_entry("１、５")
        with pytest.raises(AnswerFormatError, match="第 1 行第 2 列：无法把“x”识别为数字"):
            parse_answer([[1, "x"], [1, 2]], (2, 2))
    with pytest.raises(AnswerFormatError, match="could separate two entries"):
        parse_entry("1、5")


def test_the_chinese_form_carries_its_messages_as_data_and_keeps_its_script_hashes(tmp_path):
    from qkvquiz.render.form import answer_form_html

    spec = parse_spec({"title": "练习", "items": [{"family": "attention.weights"}]})
    ws = build_worksheet(spec, ["s01"], "0")
    en = answer_form_html(ws, 0)
    with i18n.using("zh"):
        zh = answer_form_html(ws, 0)
    hashes = re.compile(r"script-src ([^;]+);")
    assert hashes.search(en).group(1) == hashes.search(zh).group(1)  # the same two scripts
    assert '<html lang="zh-Hans">' in zh and "保存答案" in zh and "Save answers" not in zh
    messages = json.loads(html.unescape(re.search(r'data-messages="([^"]*)"', zh).group(1)))
    assert messages['cannot read "%(text)s" as a number (%(why)s)'] == "无法把“%(text)s”识别为数字（%(why)s）"
    assert json.loads(html.unescape(re.search(r'data-messages="([^"]*)"', en).group(1))) == {}
    assert len(re.findall(r"<script\b", zh)) == 2


# ----------------------------------------------------------------------------- fonts


def test_chinese_pdfs_without_a_cjk_font_warn_naming_the_package(monkeypatch):
    from qkvquiz.render import fonts

    monkeypatch.setattr(fonts, "cjk_fonts", lambda: ())
    assert fonts.cjk_font_problem(["<p>only Latin</p>"]) is None
    problem = fonts.cjk_font_problem(["<p>Latin</p>", "<p>注意力权重</p>"])
    assert problem and "fonts-noto-cjk" in problem and "empty box" in problem
    with pytest.warns(fonts.MissingCjkFont, match="fonts-noto-cjk"):
        fonts.warn_if_no_cjk_font(["<p>０．５</p>"])
    monkeypatch.setattr(fonts, "cjk_fonts", lambda: ("Noto Sans CJK SC",))
    assert fonts.cjk_font_problem(["<p>注意力权重</p>"]) is None
    monkeypatch.setattr(fonts, "cjk_fonts", lambda: None)
    assert "fc-list is missing" in fonts.cjk_font_problem(["注意力"])


@pytest.mark.slow
def test_render_pdfs_checks_the_fonts_before_writing(monkeypatch, tmp_path):
    pdf = pytest.importorskip("qkvquiz.render.pdf")
    try:
        pdf.weasyprint_module()
    except pdf.PdfUnavailable:
        pytest.skip("WeasyPrint's libraries are not installed")
    from qkvquiz.render import fonts

    monkeypatch.setattr(fonts, "cjk_fonts", lambda: ())
    with pytest.warns(fonts.MissingCjkFont):
        pytest.importorskip("qkvquiz.render.pdf_batch").render_pdfs([("<html><body><p>注意力</p></body></html>", tmp_path / "a.pdf")], workers=1, progress=False)


def test_custom_templates_get_gettext_in_the_runs_language(tmp_path):
    from qkvquiz.render.markdown import render_template

    (tmp_path / "hello.md.j2").write_text('{{ _("Correct") }} {% trans n=2 %}{{ n }} rows{% endtrans %}', encoding="utf-8")
    assert render_template(["hello.md.j2"], {}, str(tmp_path)) == "Correct 2 rows"
    with i18n.using("zh"):
        assert render_template(["hello.md.j2"], {}, str(tmp_path)).startswith("正确 ")
    (tmp_path / "wide.md.j2").write_text('{{ _("%(x)99999999d", x=1) }}', encoding="utf-8")
    with pytest.raises(Exception, match="wide"):
        render_template(["wide.md.j2"], {}, str(tmp_path))


def test_show_takes_a_language():
    result = runner.invoke(app, ["show", "attention.scores", "--lang", "zh"])
    assert result.exit_code == 0, result.output
