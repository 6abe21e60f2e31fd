"""Checking practice answers goes through the grader: right, wrong entries, format errors, a known
mistake's diagnosis and carried credit, as ``grade`` would give them; the library API a notebook uses."""

from __future__ import annotations

import json
import re

import numpy as np

import pytest

from qkvquiz import practice
from qkvquiz.practice.topics import TopicError

from .helpers import as_texts, carried_value, mistake_value, part_of, right_answers


def full_width(value):
    """What a Chinese input method types: full-width digits, signs and points."""
    if isinstance(value, list):
        return [full_width(v) for v in value]
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" and not c.isalpha() else c for c in value)


@pytest.fixture(scope="module")
def problem():
    (topic,) = practice.topics_for(["attention.output"])
    return practice.new_problem(topic, "unit-1")


def verdicts(result):
    return {p.part: p.verdict for p in result.parts}


def test_the_right_answers_are_right(problem):
    result = practice.check(problem, right_answers(problem))
    assert set(verdicts(result).values()) == {"correct"} and result.right == len(result.parts)


def test_a_seed_draws_the_same_problem_and_no_seed_a_fresh_one(problem):
    (topic,) = practice.topics_for(["attention.output"])
    again = practice.new_problem(topic, "unit-1")
    assert again.key.answers == problem.key.answers
    fresh = {practice.new_problem(topic).seed for _ in range(5)}
    assert len(fresh) == 5


def test_unscaled_scores_get_their_diagnosis_and_the_weights_from_them_carried_credit(problem):
    scores, wrong = mistake_value(problem, "unscaled")
    answers = right_answers(problem)
    answers[scores] = as_texts(wrong)
    weights = part_of(problem, "weights")
    answers[weights] = as_texts(carried_value(problem, "weights", {"scores": wrong}))
    result = practice.check(problem, answers)
    by_part = {p.part: p for p in result.parts}
    assert by_part[scores].verdict in ("partial", "wrong") and by_part[scores].mistakes == ["unscaled"]
    assert "√" in by_part[scores].diagnosis[0]
    assert by_part[weights].verdict == "carried"
    assert by_part[part_of(problem, "output")].verdict == "correct"


def test_a_slip_in_one_score_is_carried_into_the_weights(problem):
    scores = part_of(problem, "scores")
    own = problem.key.items[0].env["scores"][0].copy()
    own[0, 0] += 1.0  # an arithmetic slip
    answers = right_answers(problem)
    answers[scores] = as_texts(own)
    answers[part_of(problem, "weights")] = as_texts(carried_value(problem, "weights", {"scores": own}))
    result = verdicts(practice.check(problem, answers))
    assert result[scores] in ("partial", "wrong") and result[part_of(problem, "weights")] == "carried"


def test_softmax_over_the_wrong_axis_is_diagnosed(problem):
    weights, wrong = mistake_value(problem, "column_softmax")
    answers = right_answers(problem)
    answers[weights] = as_texts(wrong)
    part = next(p for p in practice.check(problem, answers).parts if p.part == weights)
    assert part.mistakes == ["column_softmax"] and part.entry_ok.count(False) > 0


def test_mask_after_softmax_is_diagnosed():
    (topic,) = practice.topics_for(["attention.masked"])
    problem = practice.new_problem(topic, "unit-2")
    weights, wrong = mistake_value(problem, "mask_after_softmax")
    answers = right_answers(problem)
    answers[weights] = as_texts(wrong)
    part = next(p for p in practice.check(problem, answers).parts if p.part == weights)
    assert "mask_after_softmax" in part.mistakes


def test_unreadable_boxes_and_empty_parts_are_the_graders_format_and_missing(problem):
    answers = right_answers(problem)
    scores = part_of(problem, "scores")
    answers[scores][0][0] = "abc"
    answers[part_of(problem, "output")] = [["", ""], [" ", ""], ["", ""]]
    result = {p.part: p for p in practice.check(problem, answers).parts}
    # One unreadable box among readable ones is a wrong entry, named (the grader's rule for a hand-edited file).
    assert result[scores].verdict == "partial" and 'row 1, column 1: cannot read "abc"' in result[scores].message
    assert result[part_of(problem, "output")].verdict == "missing"
    answers[scores] = [["abc"] * len(row) for row in answers[scores]]  # no box readable: the answer's format
    result = {p.part: p for p in practice.check(problem, answers).parts}
    assert result[scores].verdict == "format" and 'cannot read "abc"' in result[scores].message


def test_full_width_fractions_and_minus_infinity_read_as_on_the_answer_form():
    (topic,) = practice.topics_for(["attention.weights"], lang="zh")
    problem = practice.new_problem(topic, "unit-3")
    answers = {pid: full_width(value) for pid, value in right_answers(problem).items()}
    assert "．" in json.dumps(answers, ensure_ascii=False)
    result = practice.check(problem, answers)
    assert all(p.verdict == "correct" for p in result.parts)
    assert "精确值" in result.parts[0].tolerance  # sentences in the problem's language


def test_topics_name_what_is_wrong(tmp_path):
    with pytest.raises(TopicError, match="neither a family nor a bundled spec, and no spec file attention.nope"):
        practice.topics_for(["attention.nope"])
    # A file that was meant (a path, a .yaml name) and is not there is called missing, by its path.
    for missing in (str(tmp_path / "week3.yaml"), "week3.yml", str(tmp_path / "sub" / "week3")):
        with pytest.raises(TopicError, match=rf"^{re.escape(missing)}: no such spec file \(it does not exist\)"):
            practice.topics_for([missing])
    ids = [t.id for t in practice.topics_for(["attention-basics", "attention.scores"])]
    assert ids[:2] == ["attention-basics/1", "attention-basics/2"] and ids[-1] == "attention.scores"
    assert len(practice.topics_for()) > 18  # every family, then every bundled spec's items


def test_worked_steps_show_this_variants_numbers(problem):
    html = practice.worked_html(problem)
    scores = problem.key.items[0].env["scores"][0]
    for (i, j), value in np.ndenumerate(scores):  # each score worked out, ending in its own value
        line = re.search(rf"<i>S</i><sub>{i + 1}{j + 1}</sub>\s=\s.*?</li>", html)
        assert line and re.search(rf"\s=\s{value:g}</span></li>$".replace("-", "−"), line.group()), (i, j)
