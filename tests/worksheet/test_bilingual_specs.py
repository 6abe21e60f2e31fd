"""A spec's prose in several languages: ``title: {en: …, zh: …}`` (and instructions, an item's
title and intro) shows the set's language wherever the spec's text appears; a plain string reads
the same in every language; English stands in, and is named, where the set's language is
missing; a hostile mapping is refused naming the file, the item and the field; and the wording,
in any language, changes no variant."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.core.resources import bank_dir
from qkvquiz.grade.audit import audit_markdown, audit_spec
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.spec import SpecError, load_spec, parse_spec
from qkvquiz.worksheet import build_worksheet

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted(bank_dir().glob("*.yaml"))
PROSE = ("title", "instructions")
ITEM_PROSE = ("title", "intro")
HAN = re.compile(r"[\u4e00-\u9fff]")

BILINGUAL = {
    "title": {"en": "Week 3", "zh": "第三周"},
    "instructions": {"en": "Show your work.", "zh": "写出过程。"},
    "items": [{"family": "attention.output", "title": {"en": "A layer", "zh": "一层"},
               "intro": {"en": "Read carefully.", "zh": "仔细读题。"}}],
}


def english_only(data: dict) -> dict:
    """``data`` with every prose mapping reduced to its English, as a spec written before."""
    out = copy.deepcopy(data)
    for holder, names in [(out, PROSE)] + [(item, ITEM_PROSE) for item in out["items"]]:
        for name in names:
            if isinstance(holder.get(name), dict):
                holder[name] = holder[name]["en"]
    return out


def test_a_bilingual_spec_shows_the_sets_language():
    spec = parse_spec(BILINGUAL)
    assert (spec.title, spec.instructions, spec.items[0].title, spec.items[0].intro) == (
        "Week 3", "Show your work.", "A layer", "Read carefully.")
    zh = spec.in_language("zh")
    assert (zh.title, zh.instructions, zh.items[0].title, zh.items[0].intro) == ("第三周", "写出过程。", "一层", "仔细读题。")
    assert parse_spec({**BILINGUAL, "lang": "zh"}).title == "第三周"
    assert zh.untranslated() == []


def test_a_language_code_is_read_as_lang_reads_it():
    spec = parse_spec({"title": {"EN": "Week 3", "zh-CN": "第三周"}, "items": [{"family": "attention.output"}]})
    assert spec.title == "Week 3" and spec.in_language("zh").title == "第三周"


def test_plain_strings_are_kept_as_written_in_either_language():
    spec = parse_spec({"title": "注意力练习", "instructions": "Show work.", "items": [{"family": "attention.output",
                                                                                   "title": "Eine Schicht"}]})
    for lang in ("en", "zh"):
        shown = spec.in_language(lang)
        assert (shown.title, shown.instructions, shown.items[0].title) == ("注意力练习", "Show work.", "Eine Schicht")
        assert shown.untranslated() == []


def test_a_missing_language_falls_back_to_english_and_is_named():
    data = copy.deepcopy(BILINGUAL)
    data["instructions"] = {"en": "Show your work."}
    del data["items"][0]["intro"]["zh"]
    zh = parse_spec(data).in_language("zh")
    assert zh.title == "第三周" and zh.instructions == "Show your work." and zh.items[0].intro == "Read carefully."
    assert zh.untranslated() == ["instructions", "q1.intro"]


def test_generate_says_which_fields_fall_back_to_english(tmp_path):
    data = copy.deepcopy(BILINGUAL)
    data["title"] = {"en": "Week 3"}
    path = tmp_path / "week3.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(app, ["generate", str(path), "-n", "1", "--public", "--lang", "zh",
                                      "--out", str(tmp_path / "set")])
    assert result.exit_code == 0, result.output
    # The note is a command-line message: English, whatever the set's language (docs/languages.md).
    assert "no Chinese text for title; shown in English" in " ".join(result.output.split())
    assert "英文" not in result.output
    assert "# Week 3" in (tmp_path / "set" / "students" / "s01" / "worksheet.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "change, where, says",
    [
        (lambda d: d.update(title={"en": "A", "fr": "B"}), "field 'title.fr'", "unknown language 'fr'; a text is written in: en, zh"),
        (lambda d: d.update(title={"zh": "第三周"}), "field 'title'", "needs en"),
        (lambda d: d.update(title={}), "field 'title'", "needs en"),
        (lambda d: d.update(title={"en": "A", "zh": ["x"]}), "field 'title.zh'", "non-empty text, got a list"),
        (lambda d: d.update(title={"en": "A", "zh": " "}), "field 'title.zh'", "leave a language out"),
        (lambda d: d.update(title={"en": "A", 3: "B"}), "field 'title.3'", "unknown language 3"),
        (lambda d: d.update(title={"en": None}), "field 'title.en'", "got nothing"),
        (lambda d: d.update(title={"en": "A", "zh": "甲", "zh-CN": "乙"}), "field 'title.zh-CN'", "written twice"),
        (lambda d: d.update(title=["A"]), "field 'title'", "{en: …, zh: …}"),
        (lambda d: d.update(instructions=7), "field 'instructions'", "got a number"),
        (lambda d: d["items"][0].update(title={"en": "A", "de": "B"}),
         "item 1 (q1, attention.output) field 'title.de'", "unknown language 'de'"),
        (lambda d: d["items"][0].update(intro={"zh": "仔细"}), "item 1 (q1, attention.output) field 'intro'", "needs en"),
        (lambda d: d["items"][0].update(intro={"en": {"text": "A"}}),
         "item 1 (q1, attention.output) field 'intro.en'", "got a mapping"),
    ],
)
def test_hostile_prose_is_refused_naming_file_item_and_field(tmp_path, change, where, says):
    data = copy.deepcopy(BILINGUAL)
    change(data)
    with pytest.raises(SpecError) as caught:
        parse_spec(data, source="week3.yaml")
    assert caught.value.source == "week3.yaml" and caught.value.where == where
    assert says in caught.value.message


def test_hostile_prose_on_the_command_line_exits_2_without_a_traceback(tmp_path):
    path = tmp_path / "week3.yaml"
    path.write_text("title: {en: Week 3, xx: Woche 3}\nitems:\n  - family: attention.output\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["generate", str(path), "-n", "1", "--public", "--out", str(tmp_path / "set")])
    assert result.exit_code == 2
    assert "week3.yaml: field 'title.xx': unknown language 'xx'" in result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, SpecError)


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_every_bundled_spec_is_written_in_both_languages(path):
    spec = load_spec(path)
    assert spec.untranslated("zh") == [], path.name
    zh = spec.in_language("zh")
    texts = [zh.title, zh.instructions, *(t for i in zh.items for t in (i.title, i.intro) if t)]
    assert all(HAN.search(t) for t in texts), [t for t in texts if not HAN.search(t)]
    english = [spec.title, spec.instructions, *(t for i in spec.items for t in (i.title, i.intro))]
    assert not any(HAN.search(t) for t in english)


@pytest.mark.parametrize("path", BUNDLED, ids=[p.stem for p in BUNDLED])
def test_translating_a_spec_changes_no_variant(path):
    """Wording is not part of the set: the English-only spec, the bilingual one in English and in
    Chinese give the same set id, the same variant codes and the same givens."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    sets = [build_worksheet(spec, ["s1", "s2"], seed=5, secret=b"k" * 32)
            for spec in (parse_spec(english_only(data)), load_spec(path), load_spec(path).in_language("zh"))]
    first = sets[0]
    for ws in sets[1:]:
        assert ws.set_id == first.set_id and ws.codes == first.codes
        for a, b in zip(ws.envs, first.envs):
            assert all((a[name] == b[name]).all() for name in a)


def test_the_key_feedback_and_item_titles_carry_the_sets_language():
    spec = parse_spec(BILINGUAL).in_language("zh")
    key = key_from_json(json.loads(json.dumps(key_to_json(build_worksheet(spec, ["s1"], seed=1)))))
    assert key.title == "第三周" and key.lang == "zh"
    assert key.items[0].title == "一层"


def test_an_audit_titles_itself_in_its_language():
    data = yaml.safe_load((ROOT / "examples" / "audit-example.yaml").read_text(encoding="utf-8"))
    data["title"] = {"en": "Hand-written key", "zh": "手写答案核查"}
    assert "手写答案核查" in audit_markdown(audit_spec(data, lang="zh")).splitlines()[0]
    assert "Hand-written key" in audit_markdown(audit_spec(data)).splitlines()[0]
