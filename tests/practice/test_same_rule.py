"""One rule everywhere: the grader, the audit and the static practice page (practice.js, run
under node) decide the same cases alike: honest rounding, an unasked step off by five
tolerances, masked entries written as 0. (The practice server grades with the grader itself.)"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.core.submissions import Submission
from qkvquiz.families import Env
from qkvquiz.grade.audit import audit_spec
from qkvquiz.grade.grader import grade
from qkvquiz.key import encode, key_from_json, key_to_json
from qkvquiz.practice.problem import PRACTICE_STUDENT, Problem
from qkvquiz.practice.static import check_data
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("check_variant_runner.js")
ITEMS = [
    {"family": "attention.output", "params": {"tokens": 3, "mask": "causal"}, "ask": ["output"]},
    {"family": "backprop.softmax", "ask": ["dS"]},
    {"family": "attention.masked", "params": {"tokens": 3}, "ask": ["scores", "weights"]},
]
STUDENTS = 12


def _worked(item, wrong: str | None, factor: float, decimals: int | None, rng) -> Env:
    env = Env({g: item.env[g][:1] for g in item.family.given_names})
    for name in item.family.step_names:
        with np.errstate(all="ignore"):
            value = np.asarray(item.family.rerun(name, env, item.params), dtype=float)
        if name == wrong:
            value = value + factor * rng.choice([-1.0, 1.0], size=value.shape) * item.tolerance_for(name).band(value)
        if decimals is not None:
            value = np.where(np.isfinite(value), np.round(value, decimals), value)
        env[name] = value
    return env


def _answers(item, kind: str, rng) -> dict:
    unasked = [s for s in item.family.step_names
               if s not in {p.step for p in item.parts} and item.family.step(s).kind == "number"
               and s in {n for p in item.parts for n in item.family.step(p.step).needs}]
    if kind == "masked zeros":
        env = Env({p.step: np.where(np.isneginf(item.env[p.step][:1]), 0.0, item.env[p.step][:1]) for p in item.parts})
    elif kind == "unasked ×5" and unasked:
        env = _worked(item, unasked[0], 5.0, None, rng)
    else:
        env = _worked(item, None, 0.0, 2, rng)
    return {p.id: np.asarray(env[p.step])[0] for p in item.parts}


def _js(cases: list[dict]) -> list[list[dict]]:
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed (the browser test checks the page too)")
    # JSON has no ±∞; the page reads a masked −∞ as a number: 1e999 parses to it.
    text = json.dumps(cases).replace("-Infinity", "-1e999").replace("Infinity", "1e999")
    run = subprocess.run([node, str(RUNNER), str(ROOT / "templates/answer-form/parse.js"),
                          str(ROOT / "templates/practice/practice.js")],
                         input=text, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(run.stdout)


@pytest.mark.parametrize("spec_item", ITEMS, ids=[i["family"] for i in ITEMS])
def test_grader_audit_and_practice_page_decide_alike(spec_item):
    rng = np.random.default_rng(5)
    graded, cases, claims = [], [], []
    for s in range(STUDENTS):
        for kind in ("honest", "unasked ×5", "masked zeros"):
            spec = parse_spec({"title": "t", "items": [spec_item]})
            ws = build_worksheet(spec, [PRACTICE_STUDENT], seed=s)
            key = key_from_json(json.loads(json.dumps(key_to_json(ws))))
            item = key.items[0]
            answers = _answers(item, kind, rng)
            sub = Submission("a.json", PRACTICE_STUDENT, {k: encode(v) for k, v in answers.items()})
            result = grade(key, [sub]).results[0]
            # Carried credit from an earlier slip no known mistake names needs the step re-run on
            # the student's answer, which the static page cannot do: it carries from known mistakes.
            graded.append({p.part: p.score / p.points for p in result.parts if p.verdict != "carried"})
            data = check_data(Problem(None, "x", ws, key))
            cases.append({"variant": data, "readings": {
                pid: {"state": "ok", "values": np.asarray(v, dtype=float).ravel().tolist()} for pid, v in answers.items()}})
            claims.append((item, answers, result))
    pages = _js(cases)
    for grader, page in zip(graded, pages, strict=True):
        shares = {r["part"]: (1.0 if r["verdict"] == "correct" else r.get("share", 0.0)) for r in page
                  if r["part"] in grader}
        assert shares == pytest.approx(grader), (grader, shares)
    # The audit of the same answers as claims: right exactly where the grader finds them right.
    for item, answers, result in claims:
        givens = {g: np.asarray(item.env[g][0]).tolist() for g in item.family.given_names}
        claimed = {p.step: json.loads(json.dumps(encode(answers[p.id]))) for p in item.parts}
        params = {k: list(v) if isinstance(v, tuple) else v for k, v in item.params.items()}
        report = audit_spec({"title": "t", "tolerance": "2 decimals", "items": [{
            "family": item.family.name, "params": params, "ask": [p.step for p in item.parts],
            "givens": givens, "claimed": claimed}]})
        right = {c.step: c.verdict != "wrong" for c in report.checks}
        full = {p.part.split(".")[1]: p.verdict == "correct" for p in result.parts}
        assert right == full, (item.family.name, right, full)
