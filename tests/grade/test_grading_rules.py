"""The grading rules of the issue: credit for rounded work, why carried credit is refused,
which of several files for one student is graded, set identity, copied work, escaped names."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from qkvquiz.families import Env
from qkvquiz.grade.audit import audit_spec
from qkvquiz.grade.feedback import feedback_markdown
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import make_key

BANK = Path(__file__).resolve().parents[2] / "problem_bank"


def parts_of(report, i=0):
    return {p.part: p for p in report.results[i].parts}


def as_json(value: np.ndarray):
    """An array in the submission format (−∞ as text)."""
    return json.loads(json.dumps(np.asarray(value).tolist()).replace("-Infinity", '"-inf"'))


def rounding_answers(key, row: int, decimals: int = 2) -> dict:
    """What a careful student hands in who rounds every step to ``decimals`` and goes on from there."""
    answers = {}
    for item in key.items:
        env = Env({name: value[row:row + 1] for name, value in item.env.items()})
        asked = {p.step: p.id for p in item.parts}
        for name in item.family.step_names:
            value = item.family.rerun(name, env, item.params, np)
            if name in asked:
                value = np.round(value, decimals)
                answers[asked[name]] = as_json(value[0])
            env[name] = value
    return answers


# --- credit for rounded work ----------------------------------------------------------------


def multihead_key(students, carried=0.5):
    raw = yaml.safe_load((BANK / "multihead.yaml").read_text(encoding="utf-8"))
    for item in raw["items"]:
        item["credit"] = {"carried_forward": carried}
    ws = build_worksheet(parse_spec(raw, source="multihead.yaml"), students, 1)
    return key_from_json(json.loads(json.dumps(key_to_json(ws))))


def test_a_student_who_rounds_every_step_loses_no_points_under_half_carried_credit():
    students = [f"s{i}" for i in range(40)]
    key = multihead_key(students)
    subs = [Submission(f"{s}.json", s, rounding_answers(key, i)) for i, s in enumerate(students)]
    report = grade(key, subs)
    lost = [(r.student, p.part, p.verdict) for r in report.results for p in r.parts if p.score < p.points - 1e-9]
    assert lost == []
    assert all(p.verdict == "correct" for r in report.results for p in r.parts)
    # Some parts are off the exact value by more than the tolerance: those say why they are right.
    noted = [p for r in report.results for p in r.parts if p.carry]
    assert noted and all("rounded" in p.carry for p in noted)


def test_a_part_from_a_wrong_earlier_answer_still_gets_carried_credit_only():
    key, doc = make_key([{"family": "attention.output", "ask": ["weights", "output"],
                          "credit": {"carried_forward": 0.5}}], students=["a"])
    env = key.items[0].env
    w = np.array(env["weights"][0])
    w[0] = w[0][::-1]  # a slip that keeps rows summing to 1
    answers = {"q1.weights": w.tolist(), "q1.output": (w @ env["V"][0]).tolist()}
    out = parts_of(grade(key, [Submission("a", "a", answers)]))["q1.output"]
    if out.correct_entries < out.entries:
        assert out.verdict in ("carried", "partial")
        assert out.verdict == "carried" or "follows from your earlier answers" in out.carry


def test_refused_carried_credit_names_the_earlier_part_and_the_rule():
    key, doc = make_key([{"family": "attention.output", "ask": ["weights", "output"]}], students=["a", "b"])
    env = key.items[0].env
    zero_row = np.array(env["weights"][0])
    zero_row[0] = 0.0  # breaks "each row sums to 1"
    subs = [Submission("a", "a", {"q1.weights": zero_row.tolist(), "q1.output": (zero_row @ env["V"][0]).tolist()}),
            Submission("b", "b", {"q1.output": (np.array(env["output"][1]) + 1).tolist()})]
    report = grade(key, subs)
    a, b = parts_of(report, 0)["q1.output"], parts_of(report, 1)["q1.output"]
    assert a.verdict in ("partial", "wrong")
    assert "q1.weights" in a.carry and "sum" in a.carry
    assert "q1.weights" in b.carry and "not answered" in b.carry
    text = feedback_markdown(report, report.results[0])
    assert a.carry[1:].replace("q1.weights", "`q1.weights`") in text  # the feedback names the part in code


def test_a_wrong_answer_that_does_not_follow_either_says_so():
    key, doc = make_key([{"family": "attention.output", "ask": ["weights", "output"]}], students=["a"])
    env = key.items[0].env
    answers = {"q1.weights": env["weights"][0].tolist(), "q1.output": (env["output"][0] + 1).tolist()}
    out = parts_of(grade(key, [Submission("a", "a", answers)]))["q1.output"]
    assert out.verdict in ("partial", "wrong") and "does not follow" in out.carry and "q1.weights" in out.carry


def test_audit_accepts_a_claim_built_from_the_claimants_rounded_values():
    students = ["s0"]
    key = multihead_key(students)
    item = key.items[1]  # four heads: rounding shows in the later steps
    givens = {g: item.env[g][0].tolist() for g in item.family.given_names}
    claimed = rounding_answers(key, 0)
    claims = {p.step: claimed[p.id] for p in item.parts}
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in item.params.items()}
    raw = {"title": "t", "items": [{"family": item.family.name, "params": params, "givens": givens, "claimed": claims}]}
    report = audit_spec(raw)
    assert [c.verdict for c in report.checks] == ["right"] * len(claims)
    # A claim off the exact value by more than the tolerance says why it is right.
    assert any(c.follows_own for c in report.checks)
    for c in report.checks:
        exact = np.asarray(c.expected, dtype=float)
        if not np.allclose(np.asarray(c.claimed, dtype=float), exact, atol=0.01 + 1e-9):
            # from the claimed earlier steps, or from rounding the unclaimed ones in between
            assert "rounded" in c.message


# --- the set's identity ---------------------------------------------------------------------

SET_SPEC = {"title": "Sets", "items": [{"family": "attention.weights", "ask": ["scores", "weights"]}]}


def set_of(students, seed=1, secret=None, spec=SET_SPEC):
    return build_worksheet(parse_spec(copy.deepcopy(spec)), students, seed, secret=secret).set_id


def test_the_set_id_names_the_problems_not_the_roster():
    base = set_of(["a", "b"])
    assert len(base) == 12 and int(base, 16) >= 0
    assert set_of(["a", "b", "c"]) == base  # adding a student keeps the set
    assert set_of(["a", "b"], seed=2) != base
    keyed = set_of(["a"], secret=b"k" * 32)
    assert keyed != base and keyed == set_of(["b"], secret=b"k" * 32) != set_of(["a"], secret=b"j" * 32)
    other = copy.deepcopy(SET_SPEC)
    other["items"][0]["params"] = {"tokens": 4}
    assert set_of(["a"], spec=other) != base
    retitled = dict(SET_SPEC, title="Another wording")
    assert set_of(["a"], spec=retitled) == base


def test_every_student_file_carries_the_set(tmp_path):
    from qkvquiz.generate import generate_set

    result = generate_set(parse_spec(copy.deepcopy(SET_SPEC)), ["ada"], tmp_path / "w", seed=3, formats="md,html")
    set_id = result.worksheet.set_id
    key = json.loads(result.key_path.read_text(encoding="utf-8"))
    assert key["set"] == set_id
    folder = result.folders["ada"]
    assert json.loads((folder / "submission.json").read_text(encoding="utf-8"))["set"] == set_id
    for name in ("worksheet.md", "worksheet.html", "answer-form.html"):
        assert set_id in (folder / name).read_text(encoding="utf-8"), name
    form = (folder / "answer-form.html").read_text(encoding="utf-8")
    assert f'data-set="{set_id}"' in form and "saved_at" in form


def test_an_old_key_without_a_set_still_loads_and_grades():
    key, doc = make_key()
    assert key.set_id
    del doc["set"]
    old = key_from_json(doc)
    assert old.set_id == ""
    subs = [Submission(f"{s['student']}.json", s["student"], copy.deepcopy(s["answers"]), s["variant"], "abcdef012345")
            for s in doc["students"]]
    assert all(not r.flags for r in grade(old, subs).results)


def test_a_file_of_another_set_or_variant_is_flagged_per_student():
    key, doc = make_key()
    students = doc["students"]
    subs = [
        Submission("a.json", "a", copy.deepcopy(students[0]["answers"]), students[0]["variant"], key.set_id),
        Submission("b.json", "b", copy.deepcopy(students[1]["answers"]), students[1]["variant"], "0123456789ab"),
        Submission("c.json", "c", copy.deepcopy(students[2]["answers"]), students[0]["variant"], key.set_id),
    ]
    report = grade(key, subs)
    flags = {r.student: r.flags for r in report.results}
    assert flags["a"] == []
    assert flags["b"] == ["other set 0123456789ab"]
    assert flags["c"] == [f"other variant {students[0]['variant']}"]
    notes = {r.student: " ".join(r.notes) for r in report.results}
    assert "another worksheet set" in notes["b"] and "variant" in notes["c"]
    from qkvquiz.grade.report import results_csv

    rows = {line.split(",")[0]: line for line in results_csv(report).splitlines()[1:]}
    assert "other set 0123456789ab" in rows["b"]


# --- several files for one student ----------------------------------------------------------


@pytest.fixture
def week3(tmp_path):
    """A generated set (its blank templates under students/) and a folder of hand-ins."""
    from qkvquiz.generate import generate_set

    result = generate_set(parse_spec(copy.deepcopy(SET_SPEC)), ["ada", "alan", "grace"], tmp_path / "week3", seed=3)
    doc = json.loads(result.key_path.read_text(encoding="utf-8"))
    return result.out, doc


def hand_in(path: Path, entry: dict, set_id: str, *, answers=None, variant=None, **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"student": entry["student"], "variant": entry["variant"] if variant is None else variant, "set": set_id,
           "answers": copy.deepcopy(entry["answers"]) if answers is None else answers, **extra}
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def grade_folder(folder, *args):
    from typer.testing import CliRunner

    from qkvquiz.cli import app

    out = folder.parent / "grades"
    result = CliRunner().invoke(app, ["grade", str(folder / "key.json"), str(folder), "--out", str(out), *args])
    return result, json.loads((out / "results.json").read_text(encoding="utf-8")) if (out / "results.json").exists() else None


def test_the_blank_template_beside_a_real_submission_is_never_graded(week3):
    folder, doc = week3
    ada = doc["students"][0]
    hand_in(folder / "submissions" / "ada.json", ada, doc["set"])
    result, detail = grade_folder(folder)
    assert result.exit_code == 0, result.output
    graded = {s["student"]: s for s in detail["students"]}
    assert set(graded) == {"ada"}  # alan and grace handed in nothing: their templates are skipped
    assert graded["ada"]["score"] == graded["ada"]["total"]
    (chosen,) = [c for c in graded["ada"]["candidates"] if c["graded"]]
    assert chosen["source"].endswith("ada.json")
    assert any("blank submission that generate wrote" in c["why"] for c in graded["ada"]["candidates"])
    assert sorted(Path(s["source"]).parent.name for s in detail["skipped"]) == ["alan", "grace"]
    assert "claim ada" in result.output and "skipped:" in result.output


def test_files_planted_to_claim_a_student_lose_to_the_real_one(week3):
    folder, doc = week3
    ada, alan = doc["students"][0], doc["students"][1]
    hand_in(folder / "submissions" / "zz-ada.json", ada, doc["set"], saved_at="2026-01-01T00:00:00Z")
    empty = {k: None for k in ada["answers"]}
    for k in range(10):  # blank files that sort first, with and without ada's variant
        hand_in(folder / "submissions" / f"0000-{k}-ada.json", ada, doc["set"], answers=empty,
                variant=ada["variant"] if k % 2 else "", saved_at="2030-01-01T00:00:00Z")
    # A filled file, saved later, but with another student's answers and variant.
    hand_in(folder / "submissions" / "0001-ada.json", dict(alan, student="ada"), doc["set"],
            saved_at="2031-01-01T00:00:00Z")
    result, detail = grade_folder(folder)
    assert result.exit_code == 0, result.output
    (graded,) = [s for s in detail["students"] if s["student"] == "ada"]
    assert graded["source"].endswith("zz-ada.json") and graded["score"] == graded["total"]
    assert len(graded["candidates"]) == 13
    why = {Path(c["source"]).name: c["why"] for c in graded["candidates"]}
    assert "another variant" in why["0001-ada.json"] and "blank" in why["0000-1-ada.json"]
    assert "names this student's variant" in why["zz-ada.json"]
    assert not detail["problems"]


def test_the_latest_saved_wins_and_first_and_error_are_chosen_by_flag(week3):
    folder, doc = week3
    ada = doc["students"][0]
    wrong = copy.deepcopy(ada["answers"])
    wrong["q1.scores"] = (np.array(wrong["q1.scores"], dtype=float) + 1).tolist()
    hand_in(folder / "in" / "a-early.json", ada, doc["set"], answers=wrong, saved_at="2026-11-20T10:00:00Z")
    hand_in(folder / "in" / "b-late.json", ada, doc["set"], saved_at="2026-11-21T10:00:00.000Z")
    _, latest = grade_folder(folder)
    (s,) = latest["students"]
    assert s["source"].endswith("b-late.json") and "latest saved" in next(c["why"] for c in s["candidates"] if c["graded"])
    _, first = grade_folder(folder, "--duplicates", "first")
    assert first["students"][0]["source"].endswith("a-early.json")
    result, error = grade_folder(folder, "--duplicates", "error")
    assert result.exit_code == 1 and error["students"] == []
    assert sorted(Path(p["source"]).name for p in error["problems"]) == ["a-early.json", "b-late.json"]
    assert all("--duplicates error" in p["message"] for p in error["problems"])


def test_without_saved_at_the_file_time_decides(tmp_path):
    import os

    key, doc = make_key()
    a = doc["students"][0]
    paths = [hand_in(tmp_path / name, a, key.set_id) for name in ("x.json", "y.json")]
    os.utime(paths[0], (2_000_000_000, 2_000_000_000))
    os.utime(paths[1], (1_000_000_000, 1_000_000_000))
    from qkvquiz.grade.grader import grade_files

    report = grade_files(key, paths)
    assert report.results[0].source.endswith("x.json")
    assert "file time 2033" in next(c.why for c in report.results[0].candidates if c.graded)
    with pytest.raises(ValueError, match="duplicates"):
        grade_files(key, paths, duplicates="newest")


# --- copied work ----------------------------------------------------------------------------

CLASS = [f"s{i:02d}" for i in range(24)]


def test_a_classmates_whole_submission_is_flagged_and_earns_no_carried_credit():
    key, doc = make_key(students=CLASS)
    n = len(CLASS)
    copied = [Submission(f"{s}.json", s, copy.deepcopy(doc["students"][(i + 1) % n]["answers"]))
              for i, s in enumerate(CLASS)]
    report = grade(key, copied)
    for i, r in enumerate(report.results):
        other = CLASS[(i + 1) % n]
        assert r.copied_from == other
        assert r.flags and r.flags[0].startswith(f"copy of {other}:")
        assert all(p.verdict != "carried" for p in r.parts)
        assert any("no credit is carried forward" in p.carry for p in r.parts if p.verdict in ("partial", "wrong"))
        assert other not in " ".join(r.notes)  # the student's feedback names no classmate
    from qkvquiz.grade.report import results_csv

    rows = {line.split(",")[0]: line for line in results_csv(report).splitlines()[1:]}
    assert f"copy of {CLASS[1]}" in rows[CLASS[0]]
    detail = json.loads(json.dumps(report.to_json()))
    assert detail["students"][0]["copied_from"] == CLASS[1]


def test_honest_work_is_never_flagged():
    key, doc = make_key(students=CLASS)
    subs = []
    for i, s in enumerate(CLASS):
        answers = rounding_answers(key, i) if i % 2 else copy.deepcopy(doc["students"][i]["answers"])
        if i % 3 == 0:  # a slip in one part
            answers["q1.scores"] = (np.array(answers["q1.scores"], dtype=float) + 1).tolist()
        subs.append(Submission(f"{s}.json", s, answers))
    subs.append(Submission("blank.json", "s00", {}))
    report = grade(key, subs)
    assert all(r.copied_from is None and not r.flags for r in report.results)


def test_a_partly_copied_submission_below_the_threshold_is_not_flagged():
    key, doc = make_key(students=CLASS)
    mine, theirs = doc["students"][0]["answers"], doc["students"][1]["answers"]
    ids = list(mine)
    answers = {k: copy.deepcopy(theirs[k] if k == ids[0] else mine[k]) for k in ids}
    report = grade(key, [Submission("s00.json", "s00", answers)])
    assert report.results[0].copied_from is None


# --- names with control characters ----------------------------------------------------------


def test_control_characters_in_file_names_are_shown_escaped_everywhere(week3):
    folder, doc = week3
    ada = doc["students"][0]
    odd = "ada\x1b[2J\u202egnp.json"
    hand_in(folder / "in" / odd, ada, doc["set"])
    hand_in(folder / "in" / "ada-old\x07.json", ada, doc["set"], saved_at="2020-01-01T00:00:00Z")
    (folder / "in" / "junk\x1b]0;x\x07.json").write_text("{", encoding="utf-8")
    result, detail = grade_folder(folder)
    out = folder.parent / "grades"
    texts = {"terminal": result.output, "results.csv": (out / "results.csv").read_text(encoding="utf-8"),
             "results.json": (out / "results.json").read_text(encoding="utf-8")}
    for name, text in texts.items():
        for raw in ("\x1b", "\x07", "\u202e"):
            assert raw not in text, (name, raw)
    terminal = "".join(texts["terminal"].split())  # the summary wraps long lines
    assert "\\x1b[2J\\u202egnp.json" in terminal and "\\x1b[2J\\u202egnp.json" in texts["results.csv"]
    (graded,) = detail["students"]
    assert graded["source"].endswith("\\x1b[2J\\u202egnp.json")
    assert any(c["source"].endswith("ada-old\\x07.json") for c in graded["candidates"])
    assert any(p["source"].endswith("junk\\x1b]0;x\\x07.json") for p in detail["problems"])


def test_copy_detection_agrees_with_a_pair_by_pair_count():
    # Oracle: for every submission and every other variant, count the telling entries answered
    # within tolerance of each, one pair at a time, and apply the documented rule.
    from qkvquiz.grade.copies import COPY_MIN_ENTRIES, COPY_SHARE, detect_copies
    from qkvquiz.grade.grader import read_columns

    key, doc = make_key(students=CLASS)
    n, rng = len(CLASS), np.random.default_rng(7)
    answers = []
    for i in range(n):
        source = doc["students"][(i * 5) % n if i % 4 == 0 else i]["answers"]  # every 4th copies someone
        mine = copy.deepcopy(source)
        for part in list(mine)[: i % 3]:  # and slips here and there
            mine[part] = (np.array(mine[part], dtype=float) + rng.integers(1, 3)).tolist()
        answers.append(mine)
    rows = np.arange(n)
    columns = read_columns(key, answers)
    found = detect_copies(key, rows, columns)
    expected = {}
    for j in range(n):
        counts, own, answered = np.zeros(n, dtype=int), 0, 0
        for item, part in key.parts:
            exact = item.env[part.step].reshape(n, -1)
            telling = ~(exact == exact[:1]).all(axis=0)
            values = columns[part.id].values.reshape(n, -1)[j]
            tol = item.tolerance_for(part.step)
            for e in np.flatnonzero(telling):
                if not columns[part.id].readable[j] or np.isnan(values[e]):
                    continue
                answered += 1
                for v in range(n):
                    with np.errstate(all="ignore"):
                        hit = bool(tol.passes(np.array([values[e]]), np.array([exact[v, e]]))[0])
                    if v == j:
                        own += hit
                    else:
                        counts[v] += hit
        best = int(np.argmax(counts))
        if answered >= COPY_MIN_ENTRIES and counts[best] >= COPY_SHARE * answered and counts[best] > own:
            expected[j] = (CLASS[best], int(counts[best]), own, answered)
    assert {j: (m.other, m.matched, m.own, m.answered) for j, m in found.items()} == expected
    assert len(expected) == 4  # students 4, 8, 16 and 20 copied (0 and 12 drew their own sheets)
