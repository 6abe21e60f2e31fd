"""The shared table of entry texts and shape texts (tests/entry_cases.json): the grader's parser
follows it, and the answer form's JavaScript port reads every text exactly as Python does.

The browser test runs the same table inside the answer form; here node runs the port
where it is installed (the comparison skips cleanly where it is not).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import pytest

from qkvquiz.core.resources import templates_dir
from qkvquiz.grade.parse import AnswerFormatError, parse_entry, parse_shape_text

CASES_PATH = Path(__file__).parent.parent / "entry_cases.json"
CASES = json.loads(CASES_PATH.read_text(encoding="utf-8"))["cases"]
PARSE_JS = templates_dir() / "answer-form" / "parse.js"


def expected_value(case: dict) -> float:
    v = case["value"]
    return {"inf": math.inf, "-inf": -math.inf}[v] if isinstance(v, str) else float(v)


def python_reading(text: str) -> dict:
    """What the grader makes of a text: its value, or its error message."""
    try:
        value = parse_entry(text)
    except AnswerFormatError as err:
        return {"error": str(err)}
    return {"value": value if math.isfinite(value) else ("inf" if value > 0 else "-inf")}


def same_value(a: object, b: object) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a == b or math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-300)


def test_the_table_covers_what_the_form_promises():
    texts = {c["text"] for c in CASES}
    for promised in ("0,25", "5/3", "-inf", "−∞", "5/√2", "5/sqrt(2)", "e", "exp(1.5)", "abc"):
        assert promised in texts
    assert sum("error" in c for c in CASES) >= 30 and sum("value" in c for c in CASES) >= 50


@pytest.mark.parametrize("case", CASES, ids=[repr(c["text"])[:30] for c in CASES])
def test_python_parser_follows_the_table(case):
    got = python_reading(case["text"])
    if "error" in case:
        assert "error" in got, f"{case['text']!r} was read as {got}"
        assert case["error"] in got["error"]
    else:
        assert "value" in got, got
        assert same_value(got["value"], case["value"] if isinstance(case["value"], str) else expected_value(case))


NODE_RUNNER = """
const p = require(process.argv[1]);
const texts = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = texts.map((t) => {
  try {
    const v = p.parseEntry(t);
    return {value: v === Infinity ? "inf" : v === -Infinity ? "-inf" : v};
  } catch (e) { return {error: e.message}; }
});
process.stdout.write(JSON.stringify(out));
"""


def js_readings_with_node(texts: list[str]) -> list[dict]:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed (the browser test compares the parsers too)")
    run = subprocess.run(
        [node, "-e", NODE_RUNNER, str(PARSE_JS)], input=json.dumps(texts), capture_output=True,
        text=True, timeout=60, check=True,
    )
    return json.loads(run.stdout)


def assert_js_agrees_with_python(texts: list[str], readings: list[dict]) -> None:
    mismatches = []
    for text, js in zip(texts, readings, strict=True):
        py = python_reading(text)
        if "error" in py:
            ok = js.get("error") == py["error"]
        else:
            ok = "value" in js and same_value(js["value"], py["value"])
        if not ok:
            mismatches.append((text, py, js))
    assert not mismatches, mismatches[:5]


def test_javascript_port_reads_every_text_like_python():
    texts = [c["text"] for c in CASES]
    # A few more texts than the table: messages for the student must match word for word.
    texts += ["1/3", "0,1e1", " 2 √ 3 ", "(1,5", "e^(1/2)", "2^0.5^2", "1.5.", "2√-1", "1e-400", "++2"]
    assert_js_agrees_with_python(texts, js_readings_with_node(texts))


# --------------------------------------------------------------------------- shape texts


SHAPE_TABLE = json.loads((Path(__file__).parent.parent / "entry_cases.json").read_text(encoding="utf-8"))["shape_cases"]


@pytest.mark.parametrize("case", SHAPE_TABLE, ids=[repr(c["text"]) for c in SHAPE_TABLE])
def test_shape_texts_follow_the_shared_table(case):
    if "error" in case:
        with pytest.raises(AnswerFormatError, match=re_escape(case["error"])):
            parse_shape_text(case["text"], 2)
    else:
        assert parse_shape_text(case["text"], 2) == case["value"]


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_the_form_reads_shape_texts_like_the_grader():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    runner = """
const p = require(process.argv[1]);
const texts = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => {
  try { return {value: p.parseShape(t, 2)}; } catch (e) { return {error: e.message}; }
})));
"""
    texts = [c["text"] for c in SHAPE_TABLE] + ["[2,4)", " ( 3 , 5 ) ", "2×4 ", "２×4", "1" * 300]
    run = subprocess.run([node, "-e", runner, str(templates_dir() / "answer-form" / "parse.js")],
                         input=json.dumps(texts), capture_output=True, text=True, timeout=60, check=True)
    for text, js in zip(texts, json.loads(run.stdout), strict=True):
        try:
            py = {"value": parse_shape_text(text, 2)}
        except AnswerFormatError as exc:
            py = {"error": str(exc)}
        assert js == py, (text, js, py)
