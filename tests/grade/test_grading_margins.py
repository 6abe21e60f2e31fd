"""Grades at the margins: sheets that show no work earn only their entries right on their own."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

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


# --- one rule for what follows from what ------------------------------------------------------


def _key(items, n, seed=3):
    from qkvquiz.spec import parse_spec

    spec = parse_spec({"title": "t", "tolerance": "2 decimals", "items": items})
    return key_from_json(json.loads(json.dumps(key_to_json(build_worksheet(spec, [f"s{i}" for i in range(n)], seed)))))


def _worked(item, j: int, wrong: str | None = None, factor: float = 0.0, decimals: int | None = None,
            rng: np.random.Generator | None = None) -> Env:
    """Student ``j``'s steps: each computed from their own earlier ones, ``wrong`` off by ``factor``
    tolerances in every entry (random signs), every step rounded to ``decimals`` when given."""
    env = Env({g: item.env[g][j:j + 1] for g in item.family.given_names})
    for name in item.family.step_names:
        with np.errstate(all="ignore"):
            value = np.asarray(item.family.rerun(name, env, item.params), dtype=float)
        if name == wrong:
            signs = rng.choice([-1.0, 1.0], size=value.shape)
            value = value + factor * signs * item.tolerance_for(name).band(value)
        if decimals is not None:
            value = np.where(np.isfinite(value), np.round(value, decimals), value)
        env[name] = value
    return env


def _hand_in(key, envs) -> list:
    item = key.items[0]
    return [Submission(f"{sid}.json", sid, {p.id: encode(np.asarray(env[p.step])[0]) for p in item.parts})
            for sid, env in zip(key.students, envs)]


def test_an_unasked_step_off_beyond_what_rounding_reaches_keeps_no_full_marks():
    # ∇S from weights off by 2 tolerances, or a row sum off by 5: the weights reach ∇S directly
    # and through the row sum; the allowance nets the two paths, so none of them keeps full marks.
    key = _key([{"family": "backprop.softmax", "ask": ["dS"]}], 60)
    item = key.items[0]
    for step, factor in (("weights", 2.0), ("rowdot", 5.0)):
        rng = np.random.default_rng(1)
        report = grade(key, _hand_in(key, [_worked(item, j, step, factor, rng=rng) for j in range(60)]))
        kept = [r.student for r in report.results if r.score >= r.total - 1e-9]
        assert kept == [], (step, factor, kept)


PARTIAL = [
    {"family": "attention.output", "params": {"tokens": 3, "d_k": 3},
     "ask": {"weights": {"rows": [1]}, "output": {"rows": [2, 3]}}},
    {"family": "attention.output", "params": {"tokens": 3, "d_k": 2, "mask": "causal"},
     "ask": {"weights": {"entries": [[2, 1], [3, 2]]}, "output": 1}},
    {"family": "backprop.attention", "params": {"tokens": 3},
     "ask": {"dS": {"rows": [1, 2]}, "dK": {"entries": [[1, 1], [3, 2]]}}},
]


def test_honest_rounding_loses_nothing_where_only_some_entries_are_asked():
    for spec_item in PARTIAL:
        key = _key([spec_item], 60)
        item = key.items[0]
        for decimals in (2, 3):
            report = grade(key, _hand_in(key, [_worked(item, j, decimals=decimals) for j in range(60)]))
            lost = [(r.student, p.part, p.message) for r in report.results for p in r.parts if p.score < p.points]
            assert lost == [], (spec_item["family"], decimals, lost[:3])


def test_the_audit_agrees_with_itself_whatever_part_of_the_weights_is_claimed():
    # A key typed from 2-decimal work: the output is right whether no weights, all of them or
    # only row 1 are claimed (the unclaimed ones may be rounded as an unasked step may).
    from qkvquiz.grade.audit import audit_spec

    params = {"tokens": 3, "d_k": 2}
    key = _key([{"family": "attention.output", "params": params, "ask": ["weights", "output"]}], 40)
    item = key.items[0]
    items = {"none": [], "all": [], "row 1": []}
    for j in range(40):
        work = _worked(item, j, decimals=2)
        givens = {g: np.asarray(item.env[g][j]).tolist() for g in item.family.given_names}
        weights = np.asarray(work["weights"])[0]
        row_1 = np.full(weights.shape, None, dtype=object)
        row_1[0] = weights[0]
        output = np.asarray(work["output"])[0].tolist()
        for claim, claimed in (("none", {}), ("all", {"weights": weights.tolist()}),
                               ("row 1", {"weights": row_1.tolist()})):
            items[claim].append({"family": "attention.output", "params": params, "ask": ["weights", "output"],
                                 "givens": givens, "claimed": {**claimed, "output": output}})
    for claim, listed in items.items():
        report = audit_spec({"title": "t", "tolerance": "2 decimals", "items": listed})
        wrong = [(c.item, c.step, c.message) for c in report.checks if c.verdict == "wrong"]
        assert wrong == [], (claim, wrong[:2])


def test_work_carried_from_an_answer_written_rounded_is_credited_with_a_true_sentence():
    # Scale forgotten all through; the weights written to 2 decimals, the output computed from
    # the unrounded weights. Recomputing the output from the written weights moves it by more
    # than its tolerance, by no more than the rounding of the weights' last written place.
    key = _key([{"family": "attention.output", "params": {"tokens": 3, "d_k": 4},
                 "ask": ["scores", "weights", "output"]}], 40)
    item = key.items[0]
    subs = []
    moved = 0
    for j, sid in enumerate(key.students):
        q, k, v = (np.asarray(item.env[g][j], dtype=float) for g in ("Q", "K", "V"))
        scores = q @ k.T  # no 1/√d_k
        weights = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        output = weights @ v
        written = np.round(weights, 2)
        moved += bool((np.abs(written @ v - output) > 0.01).any())
        subs.append(Submission(f"{sid}.json", sid, {"q1.scores": encode(scores), "q1.weights": encode(written),
                                                     "q1.output": encode(np.round(output, 2))}))
    assert moved >= 5  # the case the rule is for occurs
    for result in grade(key, subs).results:
        parts = {p.part: p for p in result.parts}
        assert parts["q1.weights"].verdict == "carried", result.student
        assert parts["q1.output"].verdict == "carried", (result.student, parts["q1.output"].carry)
        assert parts["q1.output"].score == parts["q1.output"].points


# --- feedback says what the score says ----------------------------------------------------------


def test_a_part_fully_credited_as_carried_lists_and_marks_nothing_as_missed():
    from qkvquiz.grade.feedback import feedback_markdown

    key, _doc = make_key(CHAIN, students=("a",))
    scores = key.items[0].env["scores"][0].copy()
    scores[0, 0] += 0.7
    report = grade(key, [Submission("a.json", "a", _chain_from_scores(key, scores))])
    text = feedback_markdown(report, report.results[0])
    weights = text[text.index("q1.weights"):text.index("q1.output")]
    assert "follows correctly from your own earlier answers" in weights
    assert "Entries outside the tolerance" not in weights and "**0." not in weights and "**1" not in weights


def test_an_unreadable_box_inside_a_matrix_reaches_the_instructor(tmp_path):
    from qkvquiz.grade.analysis import item_analysis_csv, item_analysis

    key, doc = make_key(CHAIN, students=("a", "b"))
    answers = [dict(s["answers"]) for s in doc["students"]]
    answers[0]["q1.weights"] = [list(row) for row in answers[0]["q1.weights"]]
    answers[0]["q1.weights"][1][0] = "0、21"
    report = grade(key, [Submission(f"{s}.json", s, a) for s, a in zip(("a", "b"), answers)])
    a = report.results[0]
    assert {p.part: p for p in a.parts}["q1.weights"].verdict == "partial"
    assert "unreadable boxes: q1.weights (1)" in a.flags and not report.results[1].flags
    write_reports(report, tmp_path, feedback=False)
    assert "unreadable boxes: q1.weights (1)" in (tmp_path / "results.csv").read_text(encoding="utf-8")
    rows = item_analysis_csv(item_analysis(report)).splitlines()
    header = rows[0].split(",")
    weights = next(r.split(",") for r in rows if r.startswith("q1.weights"))
    assert weights[header.index("share_unreadable_boxes")] == "0.5"


# --- the mask weighs what it teaches ---------------------------------------------------------------


def test_masked_scores_written_as_zero_earn_at_most_half_of_the_part():
    key, doc = make_key([{"family": "attention.masked", "params": {"tokens": 4}, "ask": ["scores"], "points": 2}],
                        students=("a",))
    exact = np.asarray(key.items[0].env["scores"][0])
    answers = {"q1.scores": encode(np.where(np.isneginf(exact), 0.0, exact))}
    (part,) = grade(key, [Submission("a.json", "a", answers)]).results[0].parts
    assert part.score == 1.0 and "together carry 50% of the part" in part.message


@pytest.mark.parametrize("weight", [0.25, 1])
def test_a_spec_sets_the_share_of_the_mask(weight):
    key, doc = make_key([{"family": "attention.masked", "params": {"tokens": 4}, "ask": ["scores"], "points": 2,
                          "credit": {"mask_weight": weight}}], students=("a",))
    assert key.items[0].credit.mask_weight == weight
    exact = np.asarray(key.items[0].env["scores"][0])
    answers = {"q1.scores": encode(np.where(np.isneginf(exact), 0.0, exact))}
    (part,) = grade(key, [Submission("a.json", "a", answers)]).results[0].parts
    assert part.score == pytest.approx(2 * (1 - weight))


def test_keys_of_specs_without_a_mask_weight_say_nothing_of_it():
    _key, doc = make_key(CHAIN, students=("a",))
    assert "mask_weight" not in json.dumps(doc)


@pytest.mark.parametrize("bad", [0, 1.5, -0.2, True, "half", None, float("nan")])
def test_a_bad_mask_weight_is_refused_naming_the_file_item_and_field(tmp_path, bad):
    import yaml
    from typer.testing import CliRunner

    from qkvquiz.cli import app

    spec = tmp_path / "masks.yaml"
    item = {"family": "attention.masked", "credit": {"mask_weight": bad}}
    spec.write_text(yaml.safe_dump({"title": "t", "items": [item]}), encoding="utf-8")
    result = CliRunner().invoke(app, ["generate", str(spec), "--students", "1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "masks.yaml" in result.output and "mask_weight" in result.output and "item 1" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()


# --- diagnosis --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family, ask", [("attention.scores", ["scores"]), ("attention.output", ["scores", "output"]),
                                         ("attention.masked", ["scores"]), ("backprop.attention", ["scores", "dQ"])])
def test_the_scale_taken_from_qs_width_where_another_d_k_is_stated_is_named(family, ask):
    # Q is 2 wide, the problem states d_k = 16: scores divided by √2 instead of 4.
    params = {"d_k": 2, "stated_d_k": 16} if family != "attention.scores" else {"form": "matrix", "d_k": 2,
                                                                                "stated_d_k": 16}
    key, doc = make_key([{"family": family, "params": params, "ask": ask}], students=("a", "b", "c"))
    item = key.items[0]
    q, k = np.asarray(item.env["Q"], dtype=float), np.asarray(item.env["K"], dtype=float)
    raw = q @ np.swapaxes(k, -1, -2) / np.sqrt(2)  # by hand: √(Q's width)
    exact = np.asarray(item.env["scores"], dtype=float)
    subs = []
    for j, s in enumerate(("a", "b", "c")):
        answers = dict(doc["students"][j]["answers"])
        answers["q1.scores"] = encode(np.where(np.isneginf(exact[j]), -np.inf, raw[j]))
        subs.append(Submission(f"{s}.json", s, answers))
    for result in grade(key, subs).results:
        part = {p.part: p for p in result.parts}["q1.scores"]
        assert "scale_from_width" in part.mistakes, (family, result.student, part.mistakes)
        assert any("Q's width" in d for d in part.diagnosis)


def test_the_console_summary_counts_a_part_with_an_unreadable_box(tmp_path):
    from typer.testing import CliRunner

    from qkvquiz.cli import app

    key_path = tmp_path / "key.json"
    _key, doc = make_key(CHAIN, students=("a", "b"))
    key_path.write_text(json.dumps(doc), encoding="utf-8")
    subs = tmp_path / "subs"
    subs.mkdir()
    for s in doc["students"]:
        answers = json.loads(json.dumps(s["answers"]))
        if s["student"] == "a":
            answers["q1.weights"][1][0] = "0、21"
        (subs / f"{s['student']}.json").write_text(json.dumps({"student": s["student"], "answers": answers}),
                                                  encoding="utf-8")
    result = CliRunner().invoke(app, ["grade", str(key_path), str(subs), "--out", str(tmp_path / "g")],
                                env={"COLUMNS": "200"})
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in result.output.splitlines() if line.count("│") >= 5 and line.split("│")[1].strip() in "ab"}
    assert rows["a"][3] == "1" and rows["b"][3] == "", result.output
