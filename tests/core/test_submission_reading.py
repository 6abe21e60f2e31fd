"""Reading a submission takes a quicker way where nothing in the text can be refused (numbers read
by json's C code, no walk of the document), and reads every file exactly as the full checks do."""

from __future__ import annotations

import json

import numpy as np
import pytest

from qkvquiz.core import submissions
from qkvquiz.core.submissions import MAX_NUMBER_DIGITS, MAX_TEXT, MAX_VALUES, submission_from_bytes


def outcome(raw: bytes):
    try:
        sub = submission_from_bytes(raw, "x.json")
    except ValueError as exc:
        return ("refused", str(exc))
    return ("read", sub.student, json.dumps(sub.answers, sort_keys=True), sub.variant, sub.set_id, sub.saved_at)


def corpus() -> list[bytes]:
    rng = np.random.default_rng(3)
    docs = []
    body = {"q1.scores": 0.5, "q2": [[1, -2.25, 3e5], [0.1, 2, "1/3"]], "q3": "-inf", "q4": [None, 1]}
    docs.append({"student": "ada", "variant": "AB-12", "set": "s1", "answers": body})
    docs.append({"student": "ada", "answers": {"a": "x" * MAX_TEXT}})
    docs.append({"student": "ada", "answers": {"a": "x" * (MAX_TEXT + 1)}})
    docs.append({"student": "ada", "answers": {"a": "\u00e9\u4e2d" * 3000}})
    docs.append({"student": "ada", "answers": {"a": list(range(MAX_VALUES - 10))}})
    docs.append({"student": "ada", "answers": {"a": list(range(MAX_VALUES + 10))}})
    docs.append({"student": "ada", "answers": {"a": [[0] * 10] * (MAX_VALUES // 10 - 1)}})
    docs.append({"student": "", "answers": {}})
    docs.append({"student": "ada", "answers": []})
    docs.append([1, 2])
    texts = [json.dumps(d) for d in docs]
    texts += [json.dumps(d, ensure_ascii=False) for d in docs[:4]]
    texts += [
        '{"student": "ada", "answers": {"a": "\\ud800"}}',  # a lone surrogate, escaped
        '{"student": "ada", "answers": {"a": "\\ud83d\\ude00"}}',  # a pair: one character
        '{"student": "ada\\n", "answers": {"a\\"b": "\\\\"}}',
        '{"student": "ada", "answers": {"a": 1e308, "b": 1e309}}',
        '{"student": "ada", "answers": {"a": -1e999}}',
        '{"student": "ada", "answers": {"a": 1e-400}}',
        '{"student": "ada", "answers": {"a": NaN}}',
        '{"student": "ada", "answers": {"a": Infinity}}',
        '{"student": "ada", "answers": {"a": 1, "a": 2}}',
        '{"student": "ada", "student": "bob", "answers": {}}',
        '{"student": "ada", "answers": {"a": ' + "9" * MAX_NUMBER_DIGITS + "}}",
        '{"student": "ada", "answers": {"a": ' + "9" * (MAX_NUMBER_DIGITS + 1) + "}}",
        '{"student": "ada", "answers": {"a": -' + "9" * MAX_NUMBER_DIGITS + "}}",
        '{"student": "ada", "answers": {"a": 0.' + "1" * 500 + "}}",
        '{"student": "ada", "answers": {"a": 1' + "0" * 300 + ".5}}",
        '{"student": "ada", "answers": {"a": "' + "e123 " * 50 + '"}}',
        '{"student": "ada", "answers": {"a": ' + "[" * 16 + "]" * 16 + "}}",
        '{"student": "ada", "answers": {"a": ' + "[" * 15 + "]" * 15 + "}}",
        '{"student": "ada", "answers": {"a": 1,}}',
        # Numbers beside texts that look like numbers (a variant code, digits in an answer).
        '{"student": "ada", "variant": "3e456a", "answers": {"a": 1e999, "b": "1e999"}}',
        '{"student": "ada", "variant": "3e456a", "answers": {"a": "' + "0" * 300 + '", "b": 2}}',
        '{"student": "ada", "variant": "3e456a", "answers": {"a": "x", "b": ' + "1" * 300 + "}}",
        '{"student": "ada", "variant": "e1", "answers": {"a":"e"' + "1" * 300 + "}}",
        '{"student": "ada", "variant": "3e456a", "answers": {"a": "\\"' + ", " + '"b": 1e-999}}',
        '{"student": "ada", "variant": "3e456\\", "answers": {"a": 1.5}}',
        '{"student": "ada", "answers": {"a": "x\x01"}}',
        "",
        "   ",
    ]
    for _ in range(300):  # random small documents
        n = int(rng.integers(0, 6))
        answers = {f"p{i}": (rng.normal(size=rng.integers(1, 4)) * 10.0 ** rng.integers(-5, 6)).round(
            int(rng.integers(0, 8))).tolist() for i in range(n)}
        texts.append(json.dumps({"student": f"s{int(rng.integers(100))}", "answers": answers}))
    raws = [t.encode("utf-8", "surrogatepass") for t in texts]
    raws.append(b"\xef\xbb\xbf" + raws[0])  # a byte-order mark
    return raws


@pytest.fixture(scope="module")
def raws():
    return corpus()


def test_every_file_reads_as_with_every_check(raws, monkeypatch):
    quick = [outcome(raw) for raw in raws]
    monkeypatch.setattr(submissions, "_risky_numbers", lambda raw: True)  # every file the slow way: hooks and walk
    slow = [outcome(raw) for raw in raws]
    assert quick == slow
    kinds = {q[0] for q in quick}
    assert kinds == {"read", "refused"}


def test_the_quick_way_is_taken_for_an_ordinary_submission(raws, monkeypatch):
    walked = []
    monkeypatch.setattr(submissions, "check_document", lambda doc: walked.append(doc))
    submission_from_bytes(raws[0], "x.json")
    # Variant codes and set ids are hex: "3e456…" inside a text is no exponent of a number.
    coded = {"student": "s00001", "variant": "93e451c0e8", "set": "4e1234ffe00", "answers": {"q1.a": [1.25, -3e2]}}
    submission_from_bytes(json.dumps(coded).encode(), "y.json")
    assert walked == []
