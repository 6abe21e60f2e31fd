"""The language has one way in per entry point: a library entry point takes ``lang=`` and enters
it once (``i18n.entered``: the given one, else the one chosen around the call, else its data's
own); a command enters ``--lang`` once; nothing below passes a language along."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from qkvquiz import practice
from qkvquiz.core import i18n
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.audit import audit_spec
from qkvquiz.grade.grader import grade, grade_files
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

PACKAGE = Path(__file__).resolve().parents[2] / "qkvquiz"

#: Every function of the package with a ``lang`` parameter, and why it has one. A new one is
#: either an entry point (add it here and enter the language with ``i18n.entered`` at its top)
#: or a helper that should read the current language instead.
TAKES_LANG = {
    # the language machinery itself
    "core/i18n.py": {"check_lang", "translations", "using", "entered", "translator", "script_messages", "has", "text"},
    # a text, a spec, a practice topic shown in a language: data turned into another language's data
    "spec_types.py": {"in_language", "untranslated"},
    "practice/topics.py": {"in_language", "topics_for"},
    # the pages' language as data (a CJK language needs a CJK font), not the language sentences are made in
    "render/fonts.py": {"cjk_font_problem"},
    # commands: --lang, entered once (grade's body is split from the command for the collector)
    "cli/_common.py": {"chosen_lang"},
    "cli/browse.py": {"show"},
    "cli/export.py": {"questions"},
    "cli/generate.py": {"generate"},
    "cli/grade.py": {"grade", "_grade_command", "audit"},
    "cli/practice.py": {"practice"},
    "cli/scan.py": {"read", "_read", "review"},
    # library entry points
    "generate.py": {"generate_set", "_checked_options"},
    "grade/grader.py": {"grade_files", "grade"},
    "grade/report.py": {"write_reports"},
    "grade/feedback.py": {"feedback_markdown"},
    "grade/analysis.py": {"item_analysis_markdown"},
    "grade/audit.py": {"audit_file", "audit_spec", "audit_markdown"},
    "exchange/collect.py": {"collect", "grade_collected"},
    "exchange/questions.py": {"export_questions"},
    "practice/pages.py": {"page_html"},
    "practice/static.py": {"build_static"},
    "practice/server.py": {"serve", "__init__"},
    "grade/scanned.py": {"scan_and_grade", "regrade"},
    "review/server.py": {"__init__"},
}


def functions_taking(name: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                if name in [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]:
                    found.setdefault(path.relative_to(PACKAGE).as_posix(), set()).add(node.name)
    return found


def test_only_entry_points_and_data_take_a_language():
    assert functions_taking("lang") == TAKES_LANG


def test_an_entry_point_speaks_the_given_language_else_the_chosen_else_its_datas():
    assert i18n.chosen() is None
    with i18n.entered(None, "zh") as code:
        assert code == "zh" == i18n.current()
    with i18n.using("en"):
        with i18n.entered(None, "zh") as code:  # a caller's choice wins over the data's
            assert code == "en"
        with i18n.entered("zh-CN", "en") as code:  # the argument wins over both, read as --lang reads it
            assert code == "zh"
    with i18n.entered(None, None) as code:
        assert code == i18n.DEFAULT_LANG
    assert i18n.chosen() is None


def english_key():
    spec = parse_spec({"title": "Week", "items": [{"family": "attention.scores"}]})
    return key_from_json(json.loads(json.dumps(key_to_json(build_worksheet(spec, ["s1"], "one-way")))))


def test_grading_follows_the_language_chosen_around_it_and_records_it():
    key = english_key()
    sub = Submission("s1.json", "s1", {p: 1 for p in key.answers[0]}, key.variants[0], key.set_id, None)
    assert grade(key, [sub]).lang == "en"  # nothing chosen: the key's
    with i18n.using("zh"):
        chinese = grade(key, [sub])
        assert grade(key, [sub], lang="en").lang == "en"
    assert chinese.lang == "zh"
    assert any("\u4e00" <= ch <= "\u9fff" for part in chinese.results[0].parts for ch in part.message)


def test_a_hand_in_graded_from_files_in_a_chosen_language(tmp_path):
    key = english_key()
    path = tmp_path / "s1.json"
    path.write_text(json.dumps({"student": "s1", "variant": key.variants[0], "set": key.set_id,
                                "answers": {p: "((" for p in key.answers[0]}}), encoding="utf-8")
    with i18n.using("zh"):
        report = grade_files(key, [path])
    assert report.lang == "zh"
    assert any("\u4e00" <= ch <= "\u9fff" for part in report.results[0].parts for ch in part.message)


def test_an_audit_and_a_practice_page_follow_the_chosen_language(tmp_path):
    data = {"title": "T", "items": [{"family": "attention.scores", "claimed": {"scores": [[0, 0], [0, 0]]},
                                     "givens": {"Q": [[1, 0], [0, 1]], "K": [[1, 0], [0, 1]]},
                                     "params": {"tokens": 2, "d_k": 2}}]}
    with i18n.using("zh"):
        assert audit_spec(data).lang == "zh"
        page = practice.build_static(practice.topics_for(["attention.scores"]), 1, tmp_path / "site", seed="w")
    assert '<html lang="zh-Hans"' in page.read_text(encoding="utf-8")
    assert audit_spec(data).lang == "en"
