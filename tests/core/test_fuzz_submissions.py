"""Fuzzing the grader with malformed submissions: every one is graded or refused, none crashes.

Hypothesis draws plausible submissions (right and wrong shapes, tricky entries, look-alike
ids); each is then mutated cheaply in memory, as bytes (truncated, spliced with NaN,
Infinity, huge numbers, duplicate keys, deep brackets, invalid UTF-8, lone surrogates, BOMs)
and as a Python document (a node replaced by NaN, a huge int, a cycle …), so that one example
throws a batch of 100 files at the reader and the accepted ones at ``grade`` together.

Invariants: reading either returns a submission or raises ValueError with a short printable
sentence; grading the batch never raises, every score lies in [0, points]; the report can be
written (JSON without NaN, encodable as UTF-8, a CSV).
"""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qkvquiz.core.submissions import submission_from_bytes, submission_from_json
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import results_csv
from qkvquiz.json_rows import dumps
from qkvquiz.key import key_from_json

from ..helpers import make_key_doc

EXAMPLES = 110
BATCH = 100  # documents per example: 5 drawn by hypothesis, each with 19 mutants
REQUIRED = 10_000
VERDICTS = {"correct", "partial", "wrong", "carried", "format", "missing"}

ROSTER = ("ada", "Zoë", *(f"s{i:02d}" for i in range(1, 31)))
KEY_DOC = make_key_doc(students=ROSTER, seed=11)
KEY = key_from_json(KEY_DOC)
SHAPES = {part.id: item.shapes[part.id] for item, part in KEY.parts}
PART_IDS = sorted(SHAPES)

TRICKY_TEXTS = [
    "-inf", "−∞", "inf", "nan", "NaN", "1/0", "0/0", "sqrt(-1)", "e^9999", "exp(1e308)", "((((((((((1", "5/√2",
    "０.５", "1,5", "1e999", "9" * 300, "", " ", "\u200b1", "\u202e1.5", "1\x00", "\ud800", "'; DROP TABLE", "{{7*7}}",
    "__import__('os')", "2**2**2**2**2", "√" * 50 + "2", "-" * 150 + "1",
]
STUDENTS = ["s01", "ada", "Zoë", "ｓ０１", "s01\u200b", "\u202eada", "ADA", "Zoe\u0308", "[/x]", "", "x" * 300, "s\x1b[2J"]


def nested(depth: int) -> list:
    value: list = [1]
    for _ in range(depth):
        value = [value]
    return value


PYTHON_ODDITIES = [
    None, True, -0.0, 1e308, -1e308, 10**400, float("nan"), float("inf"), -float("inf"), "", "\u202e", "ｓ０１",
    [], {}, "x" * 20_000, (1, 2), {1: 2}, b"bytes", 2**2000, nested(20), nested(3000),
]
BYTE_SPLICES = [
    b"NaN", b"Infinity", b"-Infinity", b"1e999", b"9" * 500, b'"\\ud800"', b"\xff", b"\xc3", b"\xef\xbb\xbf",
    b"\x00", b"{", b"}", b"[", b"]", b'"', b",", b":", b"\\", b"null", b"true", b'"student": "ada", ',
    b"[" * 40, b"]" * 40, b"-", b"0", b".", b"e", b"\x1b[2J", "\u202e".encode(),
]


def entries() -> st.SearchStrategy:
    return st.one_of(
        st.integers(min_value=-10**30, max_value=10**30), st.floats(), st.sampled_from(TRICKY_TEXTS),
        st.text(max_size=12), st.none(), st.booleans(),
    )


def shaped(shape: tuple[int, ...]) -> st.SearchStrategy:
    if not shape:
        return entries()
    return st.lists(shaped(shape[1:]), min_size=shape[0], max_size=shape[0])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)


def answers_for(part: str) -> st.SearchStrategy:
    shape = SHAPES[part]
    wrong = (shape[0] + 1, *shape[1:]) if shape else (2,)
    return st.one_of(shaped(shape), shaped(wrong), shaped(shape[1:]), json_values)


submissions = st.one_of(
    st.fixed_dictionaries(
        {
            "student": st.sampled_from(ROSTER) | st.sampled_from(STUDENTS) | st.text(max_size=8),
            "answers": st.fixed_dictionaries({}, optional={p: answers_for(p) for p in PART_IDS}),
        },
        optional={"variant": st.text(max_size=10), "extra": json_values},
    ),
    json_values,
)


def mutate_bytes(raw: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        at = rng.randint(0, len(raw))
        if op == 0:
            raw = raw[:at]
        elif op == 1:
            raw = raw[:at] + rng.choice(BYTE_SPLICES) + raw[at:]
        elif op == 2:
            raw = raw[:at] + raw[at + rng.randint(1, 8):]
        elif op == 3:
            depth = rng.randint(1, 40)
            raw = b"[" * depth + raw + b"]" * depth
        elif op == 4:
            raw = raw.replace(b"1", rng.choice(BYTE_SPLICES[:5]), 1)
        else:
            raw = raw[:at] + bytes([rng.randrange(256)]) + raw[at:]
    return raw


def mutate_doc(doc, rng: random.Random):
    if not isinstance(doc, dict):
        return rng.choice(PYTHON_ODDITIES)
    doc = json.loads(json.dumps(doc, allow_nan=True))  # a fresh copy
    doc["student"] = rng.choice(ROSTER) if rng.random() < 0.7 else doc.get("student")
    op = rng.choice([0, 0, 0, 0, 0, 0, 1, 2, 3])
    if op == 0 and isinstance(doc.get("answers"), dict):
        part = rng.choice(PART_IDS)
        value = doc["answers"].get(part)
        # Somewhere inside the answer (or the answer itself): an odd value or a tricky text.
        odd = rng.choice(PYTHON_ODDITIES) if rng.random() < 0.4 else rng.choice(TRICKY_TEXTS)
        holder, at = None, 0
        while isinstance(value, list) and value and rng.random() < 0.8:
            holder, at = value, rng.randrange(len(value))
            value = value[at]
        if holder is None:
            doc["answers"][part] = odd
        else:
            holder[at] = odd
    elif op == 1:
        doc[rng.choice(["student", "answers", "variant"])] = rng.choice(PYTHON_ODDITIES)
    elif op == 2:
        looped: list = [1]
        looped.append(looped)
        doc.setdefault("answers", {})
        if isinstance(doc["answers"], dict):
            doc["answers"][rng.choice(PART_IDS)] = looped
    else:
        doc.pop(rng.choice(["student", "answers"]), None)
    return doc


def check_refusal(exc: ValueError) -> None:
    message = str(exc)
    assert message and len(message) < 500 and message.isprintable(), message


def throw(batch: list[tuple[str, object]]):
    """Read every document of the batch, grade the readable ones together, write the report in memory."""
    accepted = []
    for n, (kind, item) in enumerate(batch):
        try:
            if kind == "bytes":
                sub = submission_from_bytes(item, f"f{n}.json")
            else:
                sub = submission_from_json(item, f"d{n}.json")
        except ValueError as exc:
            check_refusal(exc)
            continue
        accepted.append(sub)
    # One call with everything (second submissions of a student are reported), then rounds of
    # distinct students so that every accepted submission is graded.
    rounds: list[list] = []
    for sub in accepted:
        free = next((r for r in rounds if all(o.student != sub.student for o in r)), None)
        rounds.append([sub]) if free is None else free.append(sub)
    graded = 0
    for group in [accepted, *rounds]:
        report = grade(KEY, group)
        for problem in report.problems:
            assert problem.message.isprintable(), problem.message
        for result in report.results:
            for part in result.parts:
                assert part.verdict in VERDICTS
                assert 0 <= part.score <= part.points + 1e-9 and math.isfinite(part.score)
        dumps(report.to_json()).encode("utf-8")
        results_csv(report).encode("utf-8")
        graded += len(report.results) if group is not accepted else 0
    return len(accepted), graded


@pytest.mark.slow
def test_ten_thousand_malformed_submissions_never_crash_the_grader():
    thrown = {"documents": 0, "accepted": 0, "graded": 0}

    @given(st.lists(submissions, min_size=5, max_size=5), st.randoms(use_true_random=False))
    @settings(max_examples=EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    def batch_of_hostile_files(docs, rng):
        batch: list[tuple[str, object]] = []
        for doc in docs:
            raw = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
            batch.append(("bytes", raw))
            batch += [("bytes", mutate_bytes(raw, rng)) for _ in range(10)]
            batch += [("doc", mutate_doc(doc, rng)) for _ in range(9)]
        assert len(batch) == BATCH
        accepted, graded = throw(batch)
        thrown["documents"] += len(batch)
        thrown["accepted"] += accepted
        thrown["graded"] += graded

    batch_of_hostile_files()
    assert thrown["documents"] >= REQUIRED, thrown
    assert thrown["graded"] > REQUIRED // 10  # many made it all the way through grading


@pytest.mark.parametrize("student", ["s01", "ada", "Zoë"])
def test_the_keys_own_answers_survive_the_same_path(student):
    index = KEY.students.index(student)
    raw = json.dumps({"student": student, "answers": KEY_DOC["students"][index]["answers"]}).encode()
    report = grade(KEY, [submission_from_bytes(raw, "k.json")])
    assert report.results[0].score == pytest.approx(KEY.points)
