"""Feedback that teaches: numbers and symbols as the pages print them, one unreadable box costs
that entry alone (named, its text kept), masked entries weighed so the lesson of a part decides
its score, and the masking and transposing mistakes named."""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

from qkvquiz.core.i18n import using
from qkvquiz.core.submissions import Submission
from qkvquiz.grade import feedback as fb
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import results_json
from qkvquiz.key import encode

from ..helpers import make_key


def submissions(doc, n=None):
    students = doc["students"] if n is None else doc["students"][:n]
    return [Submission(f"{s['student']}.json", s["student"], copy.deepcopy(s["answers"])) for s in students]


def by_part(result):
    return {p.part: p for p in result.parts}


def step_of(key, part_id):
    item = next(i for i in key.items if any(p.id == part_id for p in i.parts))
    part = next(p for p in item.parts if p.id == part_id)
    return item, part.step


# ----------------------------------------------------------------------------- numbers and symbols


MASKED = [{"family": "attention.masked", "params": {"tokens": 4}, "points": 3}]


def test_feedback_prints_scores_as_the_summary_does_and_math_as_the_pages_do():
    key, doc = make_key(MASKED, students=["a"])
    (sub,) = submissions(doc)
    item, _step = step_of(key, "q1.scores")
    raw = np.asarray(item.env["unmasked"][0]) * 2  # 1/√dₖ forgotten (dₖ = 4)
    sub.answers["q1.scores"] = encode(np.where(np.isinf(item.env["scores"][0]), -np.inf, raw))
    report = grade(key, [sub])
    for lang in ("en", "zh"):
        text = fb.feedback_markdown(report, report.results[0], lang=lang)
        assert "√dₖ" in text and "d_k" not in text  # the pages' subscript, no raw underscore
        assert not re.search(r"(?<![\w`])-\d", text)  # every negative number with U+2212
        assert "−" in text
        # Scores and points with the 2 decimals of the summary and the exports (12.56, not 12.5556).
        assert not re.search(r"\d\.\d{3,}", "\n".join(line for line in text.splitlines() if "|" not in line)), text


@pytest.mark.parametrize(("x", "text"), [(12.5555555, "12.56"), (0.3333333, "0.33"), (2.0, "2"), (1.5, "1.5"),
                                         (12.555, "12.56"), (0.0, "0"), (2 / 3, "0.67")])
def test_points_are_written_with_the_exports_two_decimals(x, text):
    assert fb.points_text(x) == text


def test_a_negative_value_has_the_pages_minus_sign():
    assert fb.number_text(-0.5) == "−0.5" and fb.number_text(-np.inf) == "−∞" and fb.number_text(-2.0) == "−2"


# ----------------------------------------------------------------------------- one unreadable box


def test_one_unreadable_box_costs_that_entry_alone_and_is_named():
    items = [{"family": "attention.weights", "params": {"entries": [-2, 2]}, "points": 3}]
    key, doc = make_key(items, students=["a", "b", "c"])
    subs = submissions(doc)
    subs[0].answers["q1.weights"][1][2] = "0、21"
    report = grade(key, subs)
    part = by_part(report.results[0])["q1.weights"]
    assert part.verdict == "partial" and part.correct_entries == 8
    assert part.score == pytest.approx(3 * 8 / 9)
    assert 'row 2, column 3: cannot read "0、21"' in part.message
    assert part.given[1][2] == "0、21"  # results.json keeps the text, for a regrade request
    line = next(l for l in results_json(report).splitlines() if '"part": "q1.weights"' in l and "0、21" in l)
    assert json.loads(line.rstrip(","))["given"][1][2] == "0、21"
    for lang in ("en", "zh"):
        text = fb.feedback_markdown(report, report.results[0], lang=lang)
        assert "`0、21`" in text and fb.points_text(part.score) in text
    with using("en"):
        assert fb.template_markdown(report, report.results[0]) == fb.FeedbackWriter(report).markdown(report.results[0])


def test_a_part_with_no_readable_entry_is_still_a_format_problem():
    key, doc = make_key([{"family": "attention.weights"}], students=["a"])
    (sub,) = submissions(doc)
    sub.answers["q1.weights"] = [["x", None, "y"], [None, None, None], ["z", None, None]]
    part = by_part(grade(key, [sub]).results[0])["q1.weights"]
    assert part.verdict == "format" and part.score == 0 and 'cannot read "x"' in part.message


def test_unreadable_boxes_do_not_break_carried_credit_the_rounding_band_or_copies():
    items = [{"family": "attention.output", "params": {"tokens": 3}, "ask": ["scores", "weights", "output"]},
             {"family": "attention.output", "params": {"tokens": 3}, "ask": ["output"]}]  # rounding band of S, A
    key, doc = make_key(items, students=[f"s{i}" for i in range(6)])
    subs = submissions(doc)
    for sub in subs[:3]:
        sub.answers["q1.scores"][0][0] = "1..5"
        sub.answers["q1.weights"][2][1] = "abc"
        sub.answers["q2.output"][1][0] = "?"
    subs[4].answers = copy.deepcopy(subs[3].answers)  # a copy, next to answers with unreadable boxes
    subs[4].student = doc["students"][4]["student"]
    report = grade(key, subs)
    for r in report.results[:3]:
        parts = by_part(r)
        assert parts["q1.scores"].verdict == parts["q1.weights"].verdict == parts["q2.output"].verdict == "partial"
        assert parts["q1.output"].verdict == "correct"
        assert not parts["q1.weights"].invariants  # an unreadable box is named, not taken for a broken property
        fb.feedback_markdown(report, r)
    assert report.results[4].copied_from == doc["students"][3]["student"]


# ----------------------------------------------------------------------------- masked entries


def _masked_scores_case(family="attention.masked", params=None, ask=("scores",)):
    items = [{"family": family, "params": params or {"tokens": 4}, "ask": list(ask), "points": 3}]
    key, doc = make_key(items, students=["a", "b"])
    (item,) = key.items
    return key, doc, item


def test_a_masked_score_written_as_zero_is_named_and_costs_the_masks_half():
    key, doc, item = _masked_scores_case()
    subs = submissions(doc)
    exact = np.asarray(item.env["scores"][0])
    (i, j), *_rest = np.argwhere(np.isneginf(exact))
    subs[0].answers["q1.scores"][i][j] = 0  # one masked score written as 0
    part = by_part(grade(key, subs).results[0])["q1.scores"]
    masked = int(np.isneginf(exact).sum())
    assert masked == 6  # 4×4 causal: 10 free entries, and the 6 masked ones carrying half the part
    assert part.mistakes == ["zero_not_minus_inf"] and "−∞" in part.diagnosis[0]
    assert part.score == pytest.approx(3 / 2)
    assert "the 6 masked entries together carry 50% of the part" in part.message


def test_a_forgotten_scale_keeps_no_more_than_the_masks_share_and_chance_zeros():
    key, doc, item = _masked_scores_case()
    subs = submissions(doc)
    exact = np.asarray(item.env["scores"][0])
    subs[0].answers["q1.scores"] = encode(np.where(np.isinf(exact), exact, exact * 2))  # 1/√dₖ forgotten (dₖ = 4)
    part = by_part(grade(key, subs).results[0])["q1.scores"]
    zeros = int((exact == 0).sum())
    assert "unscaled" in part.mistakes
    assert part.score == pytest.approx(3 * (1 / 2 + zeros / 20))


@pytest.mark.parametrize(("family", "params", "step"), [
    ("attention.masked", {"tokens": 3, "mask": "padding"}, "scores"),
    ("attention.weights", {"tokens": 3, "mask": "causal"}, "scores"),
    ("attention.output", {"tokens": 3, "mask": "causal"}, "scores"),
    ("backprop.attention", {"tokens": 3, "mask": "causal"}, "scores"),
])
def test_every_family_with_a_mask_names_one_masked_score_written_as_zero(family, params, step):
    key, doc, item = _masked_scores_case(family, params, ask=(step,))
    subs = submissions(doc)
    exact = np.asarray(item.env[step][0])
    (i, j), *_rest = np.argwhere(np.isneginf(exact))
    subs[0].answers[f"q1.{step}"][i][j] = "0"
    part = by_part(grade(key, subs).results[0])[f"q1.{step}"]
    assert part.mistakes == ["zero_not_minus_inf"], (family, part.mistakes)
    assert part.score == pytest.approx(3 / 2)  # every unmasked entry right, the mask's half lost


@pytest.mark.parametrize("family", ["attention.masked", "attention.weights", "attention.output", "backprop.attention"])
def test_every_unmasked_entry_wrong_keeps_no_more_than_the_masks_share(family):
    from qkvquiz.grade.checks import entry_credit, fixed_entries

    for tokens in (2, 3, 4):
        params = {"tokens": tokens} if family == "attention.masked" else {"tokens": tokens, "mask": "causal"}
        key, _doc, item = _masked_scores_case(family, params, ask=("scores", "weights"))
        for part in item.parts:
            fixed = fixed_entries(item, part, item.env, 2)
            assert fixed is not None and fixed.any(axis=1).all(), (family, part.step)
            share = entry_credit(fixed.copy(), fixed)  # the masked entries right, every other one wrong
            assert (share <= 1 / 2 + 1e-12).all(), (family, tokens, part.step, share)
            assert (entry_credit(fixed.copy(), fixed, 0.3) <= 0.3 + 1e-12).all()


def test_the_credit_rule_gives_the_masked_entries_their_share_together():
    from qkvquiz.grade.checks import entry_credit

    fixed = np.array([[False, True, True, False]] * 4)
    ok = np.array([[True, True, True, True], [True, False, True, True], [False, True, True, False],
                   [True, True, True, False]])
    assert entry_credit(ok, fixed).tolist() == pytest.approx([1, 1 / 2, 1 / 2, 3 / 4])
    assert entry_credit(ok, fixed, 0.2).tolist() == pytest.approx([1, 4 / 5, 1 / 5, 3 / 5])
    only_masked = np.array([[True, True]])
    assert entry_credit(np.array([[True, False]]), only_masked).tolist() == [0.0]  # nothing else asked: all of it
    assert entry_credit(ok, None).tolist() == pytest.approx([1, 3 / 4, 1 / 2, 3 / 4])


# ----------------------------------------------------------------------------- transposed weights


@pytest.mark.parametrize(("family", "params"), [
    ("attention.weights", {"tokens": 3}), ("attention.weights", {"tokens": 3, "mask": "causal"}),
    ("attention.output", {"tokens": 3, "mask": "random"}), ("attention.masked", {"tokens": 3}),
])
def test_transposed_weights_are_named(family, params):
    items = [{"family": family, "params": params, "ask": ["weights"]}]
    key, doc = make_key(items, students=["a", "b", "c"])
    subs = submissions(doc)
    (item,) = key.items
    for k, sub in enumerate(subs):
        sub.answers["q1.weights"] = encode(np.asarray(item.env["weights"][k]).T)
    for r in grade(key, subs).results:
        part = by_part(r)["q1.weights"]
        assert "transposed" in part.mistakes and "row i holds query i's weights" in " ".join(part.diagnosis)
    with using("zh"):
        report = grade(key, subs, lang="zh")
    assert "权重矩阵被转置了" in by_part(report.results[0])["q1.weights"].diagnosis[0]


def test_one_token_has_no_transposed_weights():
    from qkvquiz.families import get_family

    for name in ("attention.weights", "attention.output", "attention.masked"):
        family = get_family(name)
        for params, listed in (({"tokens": 1}, False), ({"tokens": 2}, True), ({"queries": 2, "keys": 3}, False)):
            if name == "attention.masked" and params.get("tokens") == 1:
                continue  # one token has nothing to mask
            p = family.resolve(params)
            assert ("transposed" in {m.name for m in family.mistakes_for("weights", p)}) == listed, (name, params)
