"""Partial asks: a part that asks some entries of a step keeps them through the key, is graded on
them alone, has boxes for them only (in the answer form and on the printed page), and its feedback
never shows the value of an entry not asked.
"""

from __future__ import annotations

import pytest

from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.form import form_problems
from qkvquiz.render.markdown import worksheet_markdown
from qkvquiz.spec import SpecError, parse_spec
from qkvquiz.worksheet import build_worksheet

PARTIAL = {"family": "attention.output", "params": {"queries": 2, "keys": 3},
           "ask": {"scores": {"points": 2, "entries": [[1, 2], [1, 3]]}, "weights": {"rows": [1]}}}


def partial_key():
    spec = parse_spec({"title": "T", "items": [PARTIAL]})
    ws = build_worksheet(spec, ["a", "b"], seed=1)
    return ws, key_from_json(key_to_json(ws))


def test_a_partial_ask_keeps_its_entries_through_the_key():
    ws, key = partial_key()
    scores, weights = key.items[0].parts
    assert scores.entries == ((0, 1), (0, 2)) and scores.points == 2
    assert weights.entries == ((0, 0), (0, 1), (0, 2))
    text = worksheet_markdown(ws, 0)
    assert "Only entries (1, 2) and (1, 3) asked" in text and "Only row 1 asked" in text


def test_a_partial_part_is_graded_on_its_entries_only():
    ws, key = partial_key()
    env = ws.envs[0]
    s, a = env["scores"][0], env["weights"][0]
    # The asked entries right, everything else wrong or empty: full marks.
    scores = [[99, float(s[0, 1]), float(s[0, 2])], [None, None, None]]
    weights = [[float(x) for x in a[0]], [5, 5, 5]]
    report = grade(key, [Submission("a.json", "a", {"q1.scores": scores, "q1.weights": weights})])
    parts = {p.part: p for p in report.results[0].parts}
    assert parts["q1.scores"].verdict == "correct" and parts["q1.scores"].entries == 2
    assert parts["q1.weights"].verdict == "correct" and parts["q1.weights"].entries == 3
    # One asked entry wrong: half the points of the scores part.
    scores[0][1] = float(s[0, 1]) + 1
    report = grade(key, [Submission("a.json", "a", {"q1.scores": scores})])
    part = report.results[0].parts[0]
    assert part.verdict == "partial" and part.score == pytest.approx(1.0)
    # Only boxes outside the asked entries filled: not answered.
    report = grade(key, [Submission("a.json", "a", {"q1.scores": [[1, None, None], [1, 2, 3]]})])
    assert report.results[0].parts[0].verdict == "missing"


def test_the_form_disables_the_boxes_not_asked():
    ws, _ = partial_key()
    part = form_problems(ws, 0)[0].parts[0]
    asked = [box.asked for block in part.blocks for row in block.rows for box in row]
    assert asked == [False, True, True, False, False, False]


def test_a_spec_asking_entries_outside_the_step_is_refused():
    bad = {**PARTIAL, "ask": {"scores": {"entries": [[3, 1]]}}}
    with pytest.raises(SpecError, match="not in the step's 2×3 shape"):
        parse_spec({"title": "T", "items": [bad]})
    bad = {**PARTIAL, "ask": {"scores": {"rows": [1], "entries": [[1, 1]]}}}
    with pytest.raises(SpecError, match="either"):
        parse_spec({"title": "T", "items": [bad]})


def test_html_worksheet_shows_boxes_for_the_asked_entries_only_and_gives_a_shape_one_box():
    from qkvquiz.render.answer_areas import problem_areas

    ws, _ = partial_key()
    areas = dict(problem_areas(ws, 0)[0])
    scores = areas["q1.scores"]
    # Two entries asked of a matrix: two single boxes, each named by its place, and no grid.
    assert scores.count('class="boxes r1 c1"') == 2 and "answer-matrix" not in scores
    assert "<sub>1,2</sub>" in scores and "<sub>1,3</sub>" in scores  # labelled S₁,₂ =, S₁,₃ =
    assert "answer-part" not in scores and scores.count("2 pt") == 1  # no internal id; points once
    spec = parse_spec({"title": "T", "items": [{"family": "theory.shapes", "ask": ["d_k", "concat_shape"]}]})
    areas = dict(problem_areas(build_worksheet(spec, ["a"], seed=0), 0)[0])
    assert "answer-scalar" in areas["q1.concat_shape"]


def test_feedback_shows_only_the_asked_entries_of_the_right_value():
    from qkvquiz.grade.feedback import feedback_markdown
    from qkvquiz.core.submissions import Submission
    from qkvquiz.grade.grader import grade
    from qkvquiz.key import key_from_json, key_to_json

    spec = parse_spec({"title": "T", "items": [
        {"family": "attention.output", "params": {"queries": 2, "keys": 3, "d_k": 4},
         "ask": {"scores": {"entries": [[1, 2], [1, 3]]}}},
        {"family": "delta.chunk_forward", "params": {"chunks": 2, "chunk": 3, "last_chunk": 2}, "ask": ["X"]}]})
    ws = build_worksheet(spec, ["a"], seed=0)
    key = key_from_json(key_to_json(ws))
    scores, x = ws.envs[0]["scores"][0], ws.envs[1]["X"][0]
    answers = {"q1.scores": [[None, float(scores[0, 1]) + 3, float(scores[0, 2])], [None] * 3],
               "q2.X": [(x[0] + 5).tolist(), (x[1][:2] + 5).tolist()]}  # chunk 2 written at its 2 tokens
    report = grade(key, [Submission("a.json", "a", answers)])
    text = feedback_markdown(report, report.results[0])
    scores_table = text.split("q1.scores", 1)[1].split("q2.X", 1)[0]
    # Four entries of the 2×3 scores are not asked: "—", never their values; one wrong entry is listed.
    assert "| row 2 | — | — | — |" in scores_table and scores_table.count("| row 1 | — | ") == 1
    assert "S₁₂: you wrote" in scores_table and "S₁₃" not in scores_table
    # The padding token of chunk 2 (its third row) is "—" in each column, not a 0 to copy.
    matrix2 = text.split("q2.X", 1)[1].split("Matrix 2:", 1)[1]
    assert "| row 3 | — | — |" in matrix2 and "matrix 2, row 3" not in text
