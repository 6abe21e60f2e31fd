"""Properties of grading: a perfect submission always scores 100 %; a value within tolerance
always passes and one beyond it always fails, in every mode, through the grader; grading any
submission, however malformed, is deterministic to the byte and never raises."""

import copy
import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from qkvquiz.grade.analysis import item_analysis_csv, item_analysis_markdown, item_analysis
from qkvquiz.grade.feedback import feedback_markdown
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import results_csv, results_json, write_reports
from qkvquiz.worksheet import GenerationError

from ..helpers import make_key

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOLERANCES = st.one_of(
    st.integers(2, 8).map(lambda p: f"{p} decimals"),
    st.integers(2, 8).map(lambda s: f"{s} sigfigs"),
    st.floats(1e-6, 0.01).map(lambda a: {"mode": "abs", "value": a}),
    st.floats(1e-6, 0.01).map(lambda r: {"mode": "rel", "value": r}),
)

ITEMS = st.one_of(
    st.builds(lambda form, d_k: {"family": "attention.scores", "params": {"form": form, "d_k": d_k}},
              st.sampled_from(["vector", "matrix"]), st.sampled_from([1, 2, 4, 9])),
    # A padding mask needs 3 or more tokens (two keys must stay visible).
    st.builds(lambda n, mask: {"family": "attention.weights",
                               "params": {"tokens": max(n, 3) if mask == "padding" else n, "mask": mask},
                               "ask": ["scores", "weights"]},
              st.integers(2, 4), st.sampled_from(["none", "causal", "padding", "random"])),
    st.builds(lambda n, mask: {"family": "attention.output", "params": {"tokens": n, "mask": mask}},
              st.integers(2, 4), st.sampled_from(["none", "causal", "random"])),
)


def build(items, students=("a", "b"), seed=1):
    try:
        return make_key(items, students=students, seed=seed)
    except GenerationError:
        reject()


def as_text(value):
    if isinstance(value, list):
        return [as_text(v) for v in value]
    return value if isinstance(value, str) else repr(float(value))


@SETTINGS
@given(items=st.lists(ITEMS, min_size=1, max_size=2), tolerance=TOLERANCES, seed=st.integers(0, 10**6),
       text=st.booleans())
def test_a_perfect_submission_always_scores_full_marks(items, tolerance, seed, text):
    items = [{**item, "tolerance": tolerance} for item in items]
    key, doc = build(items, seed=seed)
    subs = []
    for s in doc["students"]:
        answers = {k: as_text(v) for k, v in s["answers"].items()} if text else s["answers"]
        subs.append(Submission(s["student"], s["student"], answers))
    report = grade(key, subs)
    for r in report.results:
        assert [p.verdict for p in r.parts] == ["correct"] * len(r.parts)
        assert r.score == pytest.approx(key.points)


def band(tolerance, x):
    """The allowed |given − exact| from the definitions (independent of the grader's code)."""
    if isinstance(tolerance, dict):
        return tolerance["value"] * (abs(x) if tolerance["mode"] == "rel" else 1.0)
    count, mode = tolerance.split()
    if mode == "decimals":
        return 10.0 ** -int(count)
    leading = Decimal(repr(abs(float(x)))).adjusted()  # exponent of the leading digit, exactly
    return 10.0 ** (leading - int(count) + 1)


@SETTINGS
@given(tolerance=TOLERANCES, seed=st.integers(0, 10**6), entry=st.integers(0, 8),
       sign=st.sampled_from([-1.0, 1.0]), per_part=st.booleans(), inside=st.booleans())
def test_within_tolerance_passes_and_beyond_fails_in_every_mode(tolerance, seed, entry, sign, per_part, inside):
    item = {"family": "attention.weights", "params": {"tokens": 3}, "ask": ["scores", "weights"]}
    # Per part: the weights get this tolerance and the scores keep another.
    item["tolerance"] = {"default": "3 decimals", "weights": tolerance} if per_part else tolerance
    key, doc = build([item], students=("a",), seed=seed)
    answers = copy.deepcopy(doc["students"][0]["answers"])
    weights = np.array(answers["q1.weights"], dtype=float)
    i, j = divmod(entry, 3)
    x = weights[i, j]
    assert x != 0 and math.isfinite(x)
    weights[i, j] = x + sign * band(tolerance, x) * (0.98 if inside else 1.02)
    answers["q1.weights"] = weights.tolist()
    part = {p.part: p for p in grade(key, [Submission("a", "a", answers)]).results[0].parts}["q1.weights"]
    if inside:
        assert part.verdict == "correct" and part.score == part.points
    else:
        assert part.correct_entries == 8
        assert part.score == pytest.approx(part.points * 8 / 9)


JUNK = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30), st.floats(allow_nan=True),
              st.sampled_from(["-inf", "5/3", "√2", "0,25", "banana", "", "1/0", "e^999", "NaN", "(", "2pi"]),
              st.text(max_size=8)),
    lambda inner: st.lists(inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 1000), changes=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5), JUNK), max_size=6))
def test_grading_any_submissions_is_deterministic_to_the_byte(tmp_path_factory, seed, changes):
    key, doc = make_key(seed=seed)
    parts = [p.id for _, p in key.parts]

    def submissions():
        subs = [Submission(f"{s['student']}.json", s["student"], copy.deepcopy(s["answers"])) for s in doc["students"]]
        for student, part, value in changes:
            subs[student].answers[parts[part % len(parts)]] = value
        return subs

    first, second = grade(key, submissions()), grade(key, submissions())
    assert len(first.results) == 3
    assert results_csv(first) == results_csv(second)
    assert results_json(first) == results_json(second)
    assert item_analysis_csv(item_analysis(first)) == item_analysis_csv(item_analysis(second))
    assert item_analysis_markdown(first) == item_analysis_markdown(second)
    for a, b in zip(first.results, second.results):
        assert feedback_markdown(first, a) == feedback_markdown(second, b)
    out = [tmp_path_factory.mktemp("run"), tmp_path_factory.mktemp("run")]
    write_reports(first, out[0])
    write_reports(second, out[1])
    files = sorted(p.relative_to(out[0]) for p in out[0].rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out[1]) for p in out[1].rglob("*") if p.is_file())
    assert len(files) == 4 + 3
    for name in files:
        assert (out[0] / name).read_bytes() == (out[1] / name).read_bytes(), name
