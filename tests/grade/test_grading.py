"""Grading: the key scores 100%, a change beyond tolerance costs exactly that part, bad files are reported."""

import copy

import numpy as np
import pytest

from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade, grade_files
from qkvquiz.grade.report import results_csv

from ..helpers import make_key, write_json


def submissions_from(doc):
    return [Submission(f"{s['student']}.json", s["student"], copy.deepcopy(s["answers"])) for s in doc["students"]]


def by_part(result):
    return {p.part: p for p in result.parts}


def test_the_keys_own_answers_score_full_marks():
    key, doc = make_key(students=[f"s{i}" for i in range(12)])
    report = grade(key, submissions_from(doc))
    assert len(report.results) == 12 and not report.problems
    for r in report.results:
        assert r.score == pytest.approx(r.total) and r.total == pytest.approx(key.points)
        assert all(p.verdict == "correct" for p in r.parts)


def test_one_entry_beyond_tolerance_lowers_exactly_that_part():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[1].answers["q3.weights"][1][2] = float(doc["students"][1]["answers"]["q3.weights"][1][2]) + 0.3
    report = grade(key, subs)
    changed = by_part(report.results[1])
    # The masked entries of the weights carry half the part together (grade.checks.entry_credit).
    mask = np.asarray(key.items[2].env["mask"][1]) < 0.5
    masked, free = int(mask.sum()), int((~mask).sum())
    if not masked:
        share = 8 / 9
    elif mask[1, 2]:  # the entry changed is a masked one: the mask's half is lost
        share = 1 / 2
    else:
        share = 1 / 2 + (free - 1) / free / 2
    assert changed["q3.weights"].score == pytest.approx(changed["q3.weights"].points * share)
    assert changed["q3.weights"].correct_entries == 8
    for part, result in changed.items():
        if part != "q3.weights":
            assert result.score == result.points, part
    assert report.results[0].score == pytest.approx(key.points)


def test_a_change_within_tolerance_still_scores():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[0].answers["q3.output"] = np.round(np.array(subs[0].answers["q3.output"], dtype=float), 2).tolist()
    report = grade(key, subs)
    assert report.results[0].score == pytest.approx(key.points)


def test_all_or_nothing_credit():
    items = [{"family": "attention.weights", "credit": {"per_entry": False}}]
    key, doc = make_key(items)
    subs = submissions_from(doc)
    subs[0].answers["q1.weights"][0][0] = 5
    assert grade(key, subs).results[0].score == 0


def test_format_errors_are_reported_per_part_and_do_not_stop_grading():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[0].answers["q2.weights"] = [[1, 0]]  # wrong shape
    subs[1].answers["q3.output"] = [["banana"] * len(row) for row in subs[1].answers["q3.output"]]  # no entry readable
    del subs[2].answers["q1.scores"]
    parts = [by_part(r) for r in grade(key, subs).results]
    assert parts[0]["q2.weights"].verdict == "format" and "3×3" in parts[0]["q2.weights"].message
    assert parts[1]["q3.output"].verdict == "format" and "banana" in parts[1]["q3.output"].message
    assert parts[2]["q1.scores"].verdict == "missing"
    assert parts[0]["q2.scores"].verdict == parts[1]["q3.weights"].verdict == "correct"


def test_exact_forms_as_text_are_accepted():
    items = [{"family": "attention.scores", "params": {"tokens": 2, "d_k": 2}, "givens": {"Q": [[1, 2], [0, 1]], "K": [[2, 1], [1, 1]]}},
             {"family": "attention.weights", "params": {"mask": "causal"}, "ask": ["scores"]}]
    key, doc = make_key(items, students=["a"])
    answers = {"q1.scores": [["4/sqrt(2)", "3/√2"], ["1/√2", "1/sqrt(2)"]]}
    answers["q2.scores"] = [[v if v != "-inf" else "−∞" for v in row] for row in doc["students"][0]["answers"]["q2.scores"]]
    report = grade(key, [Submission("a.json", "a", answers)])
    assert report.results[0].score == pytest.approx(key.points)


def test_malformed_files_are_reported_by_name_and_others_still_graded(tmp_path):
    key, doc = make_key()
    good = [write_json(tmp_path / f"{s['student']}.json", {"student": s["student"], "answers": s["answers"]})
            for s in doc["students"]]
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    write_json(tmp_path / "stranger.json", {"student": "zed", "answers": {}})
    write_json(tmp_path / "noid.json", {"answers": {}})
    write_json(tmp_path / "twice.json", {"student": "a", "answers": {}})
    report = grade_files(key, [tmp_path / "broken.json", *good, tmp_path / "stranger.json",
                               tmp_path / "noid.json", tmp_path / "twice.json"])
    assert sorted(r.student for r in report.results) == ["a", "b", "c"]
    assert all(r.score == pytest.approx(key.points) for r in report.results)
    problems = {p.source.split("/")[-1]: p.message for p in report.problems}
    assert "not valid JSON" in problems["broken.json"]
    assert "'zed' is not in the key" in problems["stranger.json"]
    assert '"student"' in problems["noid.json"]
    # A second, blank file for "a" is not a problem: it loses to the real hand-in, and says so.
    assert "twice.json" not in problems
    (a,) = [r for r in report.results if r.student == "a"]
    why = {c.source.split("/")[-1]: (c.graded, c.why) for c in a.candidates}
    assert why["twice.json"] == (False, "not graded: blank (every part empty)")


def test_diagnosis_names_a_known_mistake():
    key, doc = make_key([{"family": "attention.scores"}])
    subs = submissions_from(doc)
    q = key.items[0].env["Q"][0]
    k = key.items[0].env["K"][0]
    subs[0].answers["q1.scores"] = (q @ k.T).tolist()  # forgot 1/√d_k
    result = by_part(grade(key, subs).results[0])["q1.scores"]
    assert result.verdict in ("wrong", "partial")
    assert any("√dₖ" in d for d in result.diagnosis)


def test_a_later_step_right_from_an_earlier_slip_earns_carried_credit():
    key, doc = make_key([{"family": "attention.output", "ask": ["weights", "output"]}])
    subs = submissions_from(doc)
    env = key.items[0].env
    wrong_weights = np.array(env["weights"][0])
    wrong_weights[0] = wrong_weights[0][::-1]  # a slip in row 1
    subs[0].answers["q1.weights"] = wrong_weights.tolist()
    subs[0].answers["q1.output"] = (wrong_weights @ env["V"][0]).tolist()
    result = by_part(grade(key, subs).results[0])
    assert result["q1.weights"].score < result["q1.weights"].points
    assert result["q1.output"].verdict == "carried"
    assert result["q1.output"].score == pytest.approx(result["q1.output"].points)


def test_results_csv_has_one_row_per_student_with_each_part():
    key, doc = make_key()
    csv_text = results_csv(grade(key, submissions_from(doc)))
    lines = csv_text.strip().splitlines()
    assert lines[0].split(",")[:3] == ["student", "variant", "source"]
    assert lines[0].split(",")[-2:] == ["score", "total"]
    assert len(lines) == 4
    assert all(line.split(",")[-1] == line.split(",")[-2] for line in lines[1:])


def test_a_blank_grid_is_not_answered_and_earns_no_format_credit():
    items = [{"family": "attention.weights", "credit": {"format_error": 0.25}}]
    key, doc = make_key(items)
    subs = submissions_from(doc)
    subs[0].answers["q1.weights"] = [[None] * 3 for _ in range(3)]  # as generate's blank file holds
    result = by_part(grade(key, subs).results[0])["q1.weights"]
    assert result.verdict == "missing" and result.score == 0


def test_empty_boxes_in_a_grid_count_as_wrong_entries_and_the_rest_still_earn_credit():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[0].answers["q3.weights"][0][0] = None
    subs[0].answers["q3.weights"][2][1] = None
    report = grade(key, subs)
    result = by_part(report.results[0])["q3.weights"]
    assert result.verdict == "partial" and result.correct_entries == 7
    masked = np.asarray(key.items[2].env["mask"][0]) < 0.5  # carry half the part together
    empty = np.zeros((3, 3), dtype=bool)
    empty[0, 0] = empty[2, 1] = True
    free_right = (~masked & ~empty).sum() / (~masked).sum()
    if masked.any():
        share = (not (masked & empty).any()) / 2 + free_right / 2
    else:
        share = free_right
    assert result.score == pytest.approx(result.points * share)
    assert "2 of 9 boxes are empty" in result.message
    assert result.given[0][0] is None  # results.json stays valid JSON (no NaN)


def test_every_student_of_the_key_has_a_gradebook_row_even_without_a_submission():
    key, doc = make_key()
    report = grade(key, submissions_from(doc)[:1])
    assert report.absent == ["b", "c"]
    rows = [line.split(",") for line in results_csv(report).strip().splitlines()[1:]]
    assert [r[0] for r in rows] == ["a", "b", "c"]
    assert rows[1][2] == rows[2][2] == "(no submission)" and rows[1][-2] == "0"


def test_a_file_with_another_variant_code_is_graded_with_a_note():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[0].variant = doc["students"][1]["variant"]
    result = grade(key, subs).results[0]
    assert any("variant" in note for note in result.notes)
    assert result.score == pytest.approx(key.points)


def test_an_answer_under_a_mistyped_part_id_is_pointed_out():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[0].answers["q3.weight"] = subs[0].answers.pop("q3.weights")
    result = grade(key, subs).results[0]
    part = by_part(result)["q3.weights"]
    assert part.verdict == "missing" and "'q3.weight'" in part.message
    assert any("q3.weight" in note for note in result.notes)


def test_an_unknown_student_id_close_to_a_known_one_gets_a_suggestion():
    key, doc = make_key(students=["linus", "ada"])
    sub = Submission("x.json", "linsu", doc["students"][0]["answers"])
    (problem,) = grade(key, [sub]).problems
    assert "did you mean 'linus'" in problem.message


def test_an_unreadable_answer_is_kept_as_handed_in():
    key, doc = make_key()
    subs = submissions_from(doc)
    subs[1].answers["q3.output"][0][1] = "banana"  # one box: the others are graded, the text is kept
    subs[2].answers["q3.output"] = [["banana", True]] * len(subs[2].answers["q3.output"])  # none readable
    results = grade(key, subs).results
    part = by_part(results[1])["q3.output"]
    assert part.verdict == "partial" and part.given[0][1] == "banana"
    part = by_part(results[2])["q3.output"]
    assert part.verdict == "format" and part.given[0] == ["banana", True]
