"""The words qkvquiz itself puts on a page (headers, captions, the seed sentence, shapes, partial
asks) and in grading reports, in the page's language; which language a renderer writes in."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from qkvquiz.core import i18n
from qkvquiz.core.submissions import Submission, submission_from_bytes
from qkvquiz.exchange.autograder import results_document
from qkvquiz.grade.choose import unknown_student_message
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.documents import key_html_document, worksheet_document
from qkvquiz.render.form import answer_form_html
from qkvquiz.render.html_page import html_document
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

RAGGED = {"family": "delta.chunk_forward", "params": {"chunk": 3, "chunks": 2, "last_chunk": 2}}


def worksheet(lang: str, items: list[dict] | None = None):
    spec = parse_spec({"title": "T", "lang": lang, "items": items or [{"family": "attention.weights"}]})
    return build_worksheet(spec, ["a"], seed=1)


def test_renderers_write_in_the_specs_language_unless_the_caller_chose_one():
    zh, en = worksheet("zh"), worksheet("en")
    assert "**姓名：**" in worksheet_markdown(zh, 0) and "**Name:**" in worksheet_markdown(en, 0)
    assert "参考答案" in key_markdown(zh) and "学号" in worksheet_document(zh, 0)
    assert '<html lang="zh-Hans">' in answer_form_html(zh, 0)
    with i18n.using(None):  # no choice: still the spec's
        assert "**姓名：**" in worksheet_markdown(zh, 0)
    with i18n.using("en"):  # the caller's choice wins (generate's --lang does the same)
        assert "**Name:**" in worksheet_markdown(zh, 0) and "Student ID" in worksheet_document(zh, 0)
        assert '<html lang="en">' in answer_form_html(zh, 0)
    with i18n.using("zh"):
        assert "**姓名：**" in worksheet_markdown(en, 0)
    assert i18n.chosen() is None


def test_the_views_of_a_spec_are_kept_per_language():
    ws = worksheet("en")
    with i18n.using("en"):
        assert "Softmax attention weights" in worksheet_markdown(ws, 0)
    with i18n.using("zh"):
        assert "Softmax attention weights" not in worksheet_markdown(ws, 0)
    with i18n.using("en"):
        assert "Softmax attention weights" in worksheet_markdown(ws, 0)


def test_the_seed_sentence_and_page_words_of_a_chinese_key():
    ws = worksheet("zh")
    text = key_markdown(ws)
    assert text.startswith("# 参考答案：T\n") and "共 1 名学生，每人满分" in text and "## 学生 `a`（变体 `" in text
    page = key_html_document(ws)
    assert "参考答案：T" in page and '"第 " counter(page) " 页，共 " counter(pages) " 页"' in page
    assert "counter(page)" not in html_document("<p>x</p>").split("</style>", 1)[1]  # English: style.css's words


def test_a_partial_ask_in_a_ragged_part_names_its_entries_per_chunk():
    item = {**RAGGED, "ask": {"X": {"entries": [[2, 1, 1], [2, 2, 2], [1, 3, 1]]}}}
    en = worksheet_markdown(worksheet("en", [item]), 0)
    assert "Only these entries asked: (3, 1) of matrix 1; (1, 1) and (2, 2) of matrix 2." in en
    zh = worksheet_markdown(worksheet("zh", [item]), 0)
    assert "只需填写以下元素：第 1 个矩阵的 (3, 1)；第 2 个矩阵的 (1, 1) 和 (2, 2)。" in zh
    assert "由 2 个矩阵组成的列表（3×2 和 2×2）" in zh


def test_mask_sentences_and_lists_in_chinese():
    from qkvquiz.render.latex import mask_sentences

    mask = np.array([[1, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 0]])
    assert mask_sentences(mask)[0] == "query 1 may attend only to key 1"
    assert mask_sentences(mask)[3] == "query 4 may attend only to keys 1 and 2"
    with i18n.using("zh"):
        assert mask_sentences(mask) == ["查询 1 只能关注键 1", "查询 2 可以关注所有键", "查询 3 不能关注任何键",
                                        "查询 4 只能关注键 1 和 2"]


def graded(lang: str):
    items = [{**RAGGED, "ask": {"X": {"entries": [[2, 1, 1], [1, 3, 1]]}, "O": 1}},
             {"family": "attention.output", "params": {"queries": 2, "keys": 3}, "ask": {"output": {"entries": [[1, 1]]}}}]
    key = key_from_json(json.loads(json.dumps(key_to_json(worksheet(lang, items)))))
    wrong = {pid: json.loads(re.sub(r"-?\d+(\.\d+)?", "99", json.dumps(v))) for pid, v in key.answers[0].items()}
    report = grade(key, [Submission("a.json", "a", wrong)])
    return results_document(report, "a", {"visibility": "visible", "summary_visibility": "visible"}, [])


def test_gradescope_shows_the_asked_entries_of_a_part_in_the_keys_language():
    tests = {t["name"].split(" ")[0]: t["output"] for t in graded("en")["tests"]}
    expected = {name: out.split("Expected: ", 1)[1] for name, out in tests.items() if "Expected: " in out}
    assert re.fullmatch(r"matrix 1, row 3, column 1: \S+; matrix 2, row 1, column 1: \S+", expected["q1.X"])
    chunks = json.loads(expected["q1.O"])
    assert [len(c) for c in chunks] == [3, 2]  # the shorter last chunk at its length, no padding
    assert re.fullmatch(r"row 1, column 1: \S+", expected["q2.output"])
    doc = graded("zh")
    assert doc["tests"][0]["name"] == "汇总" and "q1.X：0/1（错误）" in doc["tests"][0]["output"]
    outputs = "\n".join(t["output"] for t in doc["tests"])
    assert "正确答案：第 1 个矩阵第 3 行第 1 列：" in outputs and "Expected" not in outputs


def test_reading_errors_and_unknown_students_in_chinese():
    key = key_from_json(json.loads(json.dumps(key_to_json(worksheet("zh")))))
    with i18n.using("zh"):
        with pytest.raises(ValueError, match="文件是空的"):
            submission_from_bytes(b" ", "a.json")
        with pytest.raises(ValueError, match="不是有效的 JSON：第 1 行第 2 列：应为一个值"):
            submission_from_bytes(b"[", "a.json")
        assert unknown_student_message(key, "A") == "学生 'A' 不在参考答案的学生名单中；是不是 'a'？请照练习卷上的写法准确填写学号"
    assert unknown_student_message(key, "A") == "student 'A' is not in the key; did you mean 'a'? Write the id exactly as on the worksheet"
