"""A class of 30 graded in one command: perfect, perturbed, misconceived, carried-forward and
malformed submissions each get the score and feedback worked out here, and none stops the run.

Expected scores are computed in this file from the key's exact values with a plain
"within 0.01" comparison (the spec's 2 decimals), not with the grader's code.
"""

import copy
import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app

runner = CliRunner()
TOL = 0.01  # attention-basics: 2 decimals
POINTS = {"q1.scores": 1, "q2.scores": 2, "q3.weights": 2, "q4.scores": 1, "q4.weights": 2,
          "q5.scores": 1, "q5.weights": 2, "q5.output": 2}
TOTAL = sum(POINTS.values())


def arr(value):
    return np.array(value, dtype=np.float64)  # reads the key's "-inf" texts too


def within(given, exact):
    given, exact = arr(given), arr(exact)
    return np.where(np.isinf(exact), given == exact, np.abs(given - exact) <= TOL + 1e-12)


def share(given, exact):
    return float(within(given, exact).mean())


def softmax_rows(s, axis=-1):
    e = np.exp(s - s.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def text_form(value):
    """Every entry as text, the way a student types it (−∞ as "-inf", a decimal comma sometimes)."""
    if isinstance(value, list):
        return [text_form(v) for v in value]
    if isinstance(value, str):
        return value
    return repr(float(value)).replace(".", ",") if abs(value) < 1 else repr(float(value))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    made = runner.invoke(app, ["generate", "attention-basics", "--students", "30", "--seed", "term",
                               "--out", str(tmp / "set")])
    assert made.exit_code == 0, made.output
    key = json.loads((tmp / "set" / "key.json").read_text(encoding="utf-8"))
    students = key["students"]
    expected: dict[str, dict] = {}
    subs = tmp / "subs"
    subs.mkdir()

    def hand_in(i, answers, score, says=(), raw=None):
        sid = students[i]["student"]
        expected[sid] = {"score": score, "says": says}
        text = raw if raw is not None else json.dumps({"student": sid, "answers": answers})
        (subs / f"{sid}.json").write_text(text, encoding="utf-8")

    for i, s in enumerate(students):
        answers = copy.deepcopy(s["answers"])
        g, st = s["givens"], s["steps"]
        if i < 6:  # perfect: plain numbers, text forms, or rounded to 2 decimals
            if i in (2, 3):
                answers = {k: text_form(v) for k, v in answers.items()}
            if i in (4, 5):
                answers = {k: np.where(np.isinf(arr(v)), arr(v), np.round(arr(v), 2)).tolist() if isinstance(v, list)
                           else round(v, 2) for k, v in answers.items()}
                answers = json.loads(json.dumps(answers).replace("-Infinity", '"-inf"'))
            hand_in(i, answers, TOTAL, ("8 of 8 parts correct",))
        elif i < 12:  # one weight off by 0.3; one score off by less than the tolerance
            answers["q3.weights"][1][2] = float(answers["q3.weights"][1][2]) + 0.3
            answers["q2.scores"][0][0] = float(answers["q2.scores"][0][0]) + 0.009
            hand_in(i, answers, TOTAL - 2 / 9, ("A₂₃: you wrote", "Partly correct"))
        elif i < 18:  # a known mistake
            if i % 2 == 0:
                wrong = arr(g["q2"]["Q"]) @ arr(g["q2"]["K"]).T
                answers["q2.scores"] = wrong.tolist()
                score = TOTAL - 2 + 2 * share(wrong, st["q2"]["scores"])
                says = ("The scores were not divided by √dₖ.",)
            else:
                wrong = softmax_rows(arr(g["q3"]["S"]), axis=0)
                answers["q3.weights"] = wrong.tolist()
                score = TOTAL - 2 + 2 * share(wrong, st["q3"]["weights"])
                says = ("The softmax was taken down each column",)
            hand_in(i, answers, score, says)
        elif i < 23:  # a slip in the weights, the output done right from them
            w = arr(st["q5"]["weights"])
            row = next(r for r in range(3) if not within(np.roll(w[r], 1), w[r]).all())
            w[row] = np.roll(w[row], 1)
            out = w @ arr(g["q5"]["V"])
            answers["q5.weights"], answers["q5.output"] = w.tolist(), out.tolist()
            carried = not within(out, st["q5"]["output"]).all()
            score = TOTAL - 2 + 2 * share(w, st["q5"]["weights"])
            hand_in(i, answers, score, ("Credited as carried forward",) if carried else ())
        elif i == 23:  # weights whose first row sums to 3: nothing is carried from them
            w = arr(st["q5"]["weights"])
            w[0] = 1.0
            out = w @ arr(g["q5"]["V"])
            answers["q5.weights"], answers["q5.output"] = w.tolist(), out.tolist()
            score = TOTAL - 4 + 2 * share(w, st["q5"]["weights"]) + 2 * share(out, st["q5"]["output"])
            hand_in(i, answers, score, ("Each row of A must sum to 1",))
        elif i == 24:
            answers["q2.scores"] = [[1, 2]]
            hand_in(i, answers, TOTAL - 2, ("expected a 3×3 matrix", "Could not be read"))
        elif i == 25:
            answers["q3.weights"][0][1] = "banana"  # one unreadable box: a wrong entry, named
            hand_in(i, answers, TOTAL - 2 / 9, ('row 1, column 2: cannot read "banana"',))
        elif i == 26:
            del answers["q5.output"]
            answers["q1.scores"] = None
            hand_in(i, answers, TOTAL - 3, ("Not answered",))
        elif i == 27:
            # The text "nan" is a format error of this part; a bare NaN token would make the
            # whole file invalid JSON (refused by name, see test_integrity).
            answers["q4.weights"][2][0] = "nan"
            answers["q2.scores"][1][1] = True
            # q4's causal weights (2 points): the 6 masked entries carry half, each of the 10 others 1/20.
            hand_in(i, answers, TOTAL - 2 / 20 - 2 / 9, ("NaN", "found true"))
        elif i == 28:
            answers["q4.scores"][1] = answers["q4.scores"][1][:2]
            answers["q1.scores"] = "1/0"
            hand_in(i, answers, TOTAL - 2, ("row 2 has 2 entries, expected 4",))
        else:
            answers = {k: "" for k in answers}
            hand_in(i, answers, 0, ("0 of 8 parts correct",))
    (subs / "garbage.json").write_text('{"student": "s01", "answers": [1, 2', encoding="utf-8")
    (subs / "stranger.json").write_text(json.dumps({"student": "zed", "answers": {}}), encoding="utf-8")

    result = runner.invoke(app, ["grade", str(tmp / "set" / "key.json"), str(subs), "--out", str(tmp / "grades")])
    return tmp / "grades", expected, result


def test_everyone_is_graded_in_one_command_and_bad_files_are_named(graded):
    out, expected, result = graded
    assert result.exit_code == 1, result.output  # two files could not be graded; the rest were
    assert "garbage.json" in result.output and "stranger.json" in result.output
    rows = list(csv.DictReader((out / "results.csv").read_text(encoding="utf-8").splitlines()))
    assert sorted(r["student"] for r in rows) == sorted(expected)
    problems = json.loads((out / "results.json").read_text(encoding="utf-8"))["problems"]
    assert sorted(p["source"].rsplit("/", 1)[-1] for p in problems) == ["garbage.json", "stranger.json"]


def test_each_student_gets_the_expected_score(graded):
    out, expected, _ = graded
    rows = {r["student"]: r for r in csv.DictReader((out / "results.csv").read_text(encoding="utf-8").splitlines())}
    for sid, want in expected.items():
        assert float(rows[sid]["score"]) == pytest.approx(want["score"], abs=1e-4), sid
        assert float(rows[sid]["total"]) == TOTAL


def test_each_student_gets_feedback_that_says_what_happened(graded):
    out, expected, _ = graded
    for sid, want in expected.items():
        text = (out / "feedback" / f"{sid}.md").read_text(encoding="utf-8")
        assert f"`{sid}`" in text
        for phrase in want["says"]:
            assert phrase in text, (sid, phrase)


def test_item_analysis_counts_the_class(graded):
    out, _, _ = graded
    rows = {r["part"]: r for r in csv.DictReader((out / "item-analysis.csv").read_text(encoding="utf-8").splitlines())}
    assert set(rows) == set(POINTS)
    assert all(r["students"] == "30" for r in rows.values())
    assert rows["q2.scores"]["top_mistakes"].startswith("unscaled (3)")
    assert rows["q3.weights"]["top_mistakes"].startswith("column_softmax (3)")
    assert "rows_sum_to_one (1)" in rows["q5.weights"]["broken_invariants"]
    assert float(rows["q1.scores"]["share_missing"]) == pytest.approx(1 / 30, abs=1e-4)
    md = (out / "item-analysis.md").read_text(encoding="utf-8")
    assert "**unscaled**: 3 students" in md and "not divided by √dₖ" in md
