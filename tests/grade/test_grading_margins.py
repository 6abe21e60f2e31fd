"""Grades at the margins: sheets that show no work earn only their entries right on their own."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from qkvquiz.core.submissions import Submission
from qkvquiz.families import Env
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import write_reports
from qkvquiz.key import encode, key_from_json, key_to_json
from qkvquiz.spec import load_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import make_key

BANK = Path(__file__).resolve().parents[2] / "problem_bank"
CHAIN = [{"family": "attention.output", "params": {"mask": "none"}, "ask": ["scores", "weights", "output"]}]


def _chain_from_scores(key, scores: np.ndarray, row: int = 0) -> dict:
    """Weights and output computed right from the given ``scores`` (as a student carries them)."""
    item = key.items[0]
    env = Env({name: value[row:row + 1] for name, value in item.env.items()})
    env["scores"] = scores[None]
    answers = {"q1.scores": encode(scores)}
    for name, part in (("weights", "q1.weights"), ("output", "q1.output")):
        env[name] = item.family.rerun(name, env, item.params, np)
        answers[part] = encode(env[name][0])
    return answers


def test_work_carried_from_zeros_earns_no_carried_credit():
    key, _doc = make_key(CHAIN, students=("a",))
    scores = np.zeros_like(key.items[0].env["scores"][0])
    parts = {p.part: p for p in grade(key, [Submission("a.json", "a", _chain_from_scores(key, scores))]).results[0].parts}
    assert parts["q1.weights"].verdict != "carried" and parts["q1.output"].verdict != "carried"
    assert "0 in every entry" in parts["q1.weights"].carry
    assert parts["q1.weights"].score < parts["q1.weights"].points


def test_work_carried_from_a_real_slip_keeps_its_carried_credit():
    key, _doc = make_key(CHAIN, students=("a",))
    scores = key.items[0].env["scores"][0].copy()
    scores[0, 0] += 0.7  # a slip: informative, wrong
    parts = {p.part: p for p in grade(key, [Submission("a.json", "a", _chain_from_scores(key, scores))]).results[0].parts}
    assert parts["q1.weights"].verdict == "carried" and parts["q1.weights"].score == parts["q1.weights"].points


def _sheet(key, j: int, fill) -> dict:
    out = {}
    for item in key.items:
        for p in item.parts:
            exact = np.asarray(item.env[p.step][j], dtype=float)
            out[p.id] = encode(np.where(np.isneginf(exact), -np.inf, fill(exact)))
    return out


def test_zeros_and_one_number_earn_little_on_all_families_and_are_flagged(tmp_path):
    students = [f"s{i}" for i in range(4)]
    key = key_from_json(json.loads(json.dumps(key_to_json(
        build_worksheet(load_spec(BANK / "all-families.yaml"), students, 5)))))
    fills = [lambda x: np.zeros_like(x), lambda x: np.full_like(x, 0.5)] * 2
    subs = [Submission(f"{s}.json", s, _sheet(key, j, fill)) for j, (s, fill) in enumerate(zip(students, fills))]
    report = grade(key, subs)
    for result in report.results:
        assert result.score <= 0.15 * result.total, (result.student, result.score, result.total)
        assert any(flag.startswith("no work shown") for flag in result.flags)
    write_reports(report, tmp_path, feedback=False)
    assert "no work shown: zeros" in (tmp_path / "results.csv").read_text(encoding="utf-8")
