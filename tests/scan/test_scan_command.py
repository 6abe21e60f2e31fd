"""`qkvquiz scan KEY SCANS… --out DIR`: a real set's pages scanned badly and shuffled, read back,
graded exactly as `grade` grades the submissions written, every page's fate in the summary, the
readings worth a look sent to review, one set written or none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.core.submissions import submission_from_json
from qkvquiz.grade import scanned
from qkvquiz.grade.scanned import ScanInputError, regrade, scan_and_grade, score_changes
from qkvquiz.scan.journal import JOURNAL_NAME, Decision, append_decision, read_decisions

from .corpus import layout
from .scanned_set import exact_answers, make_set, scanned_page

OTHER_SEED = "another"


@lru_cache(maxsize=1)
def _pile(root: str) -> dict[str, object]:
    folder = Path(root)
    key_path, key, cellmap = make_set(folder / "set")
    rng = np.random.default_rng(11)
    ada, bo = key.variants[0], key.variants[1]
    right = exact_answers(key, "ada")
    pages = {
        "a2.png": scanned_page(cellmap, ada, 2, rng, answers=right, degrees=-1.5),
        "b1.jpg": scanned_page(cellmap, bo, 1, rng, degrees=2.0, turn=180),
        "a1.png": scanned_page(cellmap, ada, 1, rng, answers=right, degrees=1.0, scale=1.02),
    }
    for name, image in pages.items():
        image.save(folder / name)
    # The same page scanned twice, inside a PDF (its own image is read, never re-rendered).
    pages["a1.png"].save(folder / "again.pdf", resolution=150)
    # A page of another set (same students, another seed: another set code).
    _k, other_key, other_map = make_set(folder / "other", seed=OTHER_SEED)
    scanned_page(other_map, other_key.variants[0], 1, rng).save(folder / "stranger.png")
    (folder / "notes.txt").write_text("not a scan")
    return {"key": key_path, "key_obj": key, "other_set": other_key.set_id, "folder": folder,
            "scans": [folder / n for n in ("a2.png", "b1.jpg", "stranger.png", "a1.png", "notes.txt", "again.pdf")]}


@pytest.fixture(scope="module")
def pile(tmp_path_factory):
    return _pile(str(tmp_path_factory.mktemp("pile")))


@pytest.fixture(scope="module")
def scanned_out(pile, tmp_path_factory):
    out = tmp_path_factory.mktemp("scan") / "out"
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in pile["scans"]}
    result = CliRunner().invoke(app, ["scan", str(pile["key"]), *map(str, pile["scans"]), "--out", str(out)])
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in pile["scans"]}
    assert before == after  # scans are only read
    return out, result


def test_every_page_goes_to_its_student_or_is_listed_with_its_reason(pile, scanned_out):
    out, result = scanned_out
    assert result.exit_code == 1, result.output  # some page could not be placed
    assert "Traceback" not in result.output
    state = json.loads((out / "scan.json").read_text())
    fate = {Path(p["source"]).name.split(",")[0]: (p["status"], p["student"]) for p in state["pages"]}
    assert fate == {"a2.png": ("read", "ada"), "b1.jpg": ("read", "bo"), "stranger.png": ("other set", None),
                    "a1.png": ("read", "ada"), "notes.txt": ("unreadable", None), "again.pdf": ("duplicate", "ada")}
    assert [p["turned"] for p in state["pages"] if p["student"] == "bo"] == [180]
    assert state["missing_pages"] == {"bo": [2]} and state["absent"] == ["cy"]
    # Each said in the summary, the page of another set by name.
    summary = (out / "summary.md").read_text()
    assert pile["other_set"] in summary and "Pages scanned twice" in summary and "again.pdf" in summary
    assert "`bo`: page 2" in summary and "Students with no pages" in summary and "`cy`" in summary
    for said in ("scanned twice:", "not placed:", pile["other_set"], "missing:", "no pages", "review:"):
        assert said in result.output, said


def test_submissions_are_the_answer_forms_json_and_grades_are_exactly_grades(pile, scanned_out, tmp_path):
    out, _result = scanned_out
    for name in ("ada", "bo"):
        doc = json.loads((out / "submissions" / f"{name}.json").read_text())
        assert set(doc) == {"student", "variant", "set", "answers"} and doc["set"] == pile["key_obj"].set_id
        submission_from_json(doc, name)  # the grader's door takes it
    assert not (out / "submissions" / "cy.json").exists()
    # `qkvquiz grade` on the written submissions gives the very same results, byte for byte.
    again = CliRunner().invoke(app, ["grade", str(pile["key"]), str(out / "submissions"), "--out", str(tmp_path / "g")])
    assert again.exit_code == 0, again.output
    for name in ("results.csv", "results.json", "item-analysis.md"):
        assert (tmp_path / "g" / name).read_text() == (out / "grades" / name).read_text(), name
    # Everything derived is private.
    for path in [out / "scan.json", out / "summary.md", *(out / "submissions").iterdir(), *(out / "readings").iterdir()]:
        assert path.stat().st_mode & 0o077 == 0, path


def test_the_side_file_gives_each_entrys_confidence_and_review_has_its_pictures(scanned_out):
    out, _result = scanned_out
    readings = json.loads((out / "readings" / "ada.json").read_text())
    assert readings["pages"] == [1, 2] and len(readings["entries"]) == 8
    for entry in readings["entries"]:
        assert {"part", "index", "value", "confidence", "doubts", "alternatives", "page", "source", "cells"} <= set(entry)
        assert 0 <= entry["confidence"] <= 1
        for cell in entry["cells"]:  # a digit cell also says how likely its second reading is
            assert ("second_confidence" in cell) == (cell["kind"] == "digit")
            if cell["kind"] == "digit":
                assert 0 <= cell["second_confidence"] <= 1 - cell["confidence"] + 1e-4
    state = json.loads((out / "scan.json").read_text())
    for item in state["review"]:
        assert (out / item["picture"]).read_bytes().startswith(b"\x89PNG")
        assert (out / item["view"]).read_bytes().startswith(b"\xff\xd8")  # JPEG


# --- doubts that would change a score -------------------------------------------------------


def _reading(student: str, entries: list[tuple[str, list[int], str | None, list[str | None], list[str]]],
             chance: float = 0.05) -> dict:
    return {"student": student, "entries": [
        {"part": part, "index": index, "value": value, "doubts": doubts,
         "alternatives": [{"value": v, "cell": 1, "chance": chance} for v in others]}
        for part, index, value, others, doubts in entries]}


def test_an_entry_goes_to_review_when_another_likely_reading_changes_the_score(pile):
    from qkvquiz.core.submissions import Submission

    key = pile["key_obj"]
    right = exact_answers(key, "ada")
    answers = {"q1.scores": [[right[("q1.scores", (i, j))] for j in range(2)] for i in range(2)],
               "q1.weights": [[right[("q1.weights", (i, j))] for j in range(2)] for i in range(2)]}
    s00, w00 = right[("q1.scores", (0, 0))], right[("q1.weights", (0, 0))]
    wrong_s = f"{float(s00) + 7:.2f}"
    reading = _reading("ada", [
        ("q1.scores", [0, 0], s00, [wrong_s], []),       # right; the other reading is wrong: changes the score
        ("q1.weights", [0, 0], w00, [w00], []),         # the other reading spells the same: nothing to look at
        ("q1.weights", [0, 1], right[("q1.weights", (0, 1))], [], []),
        ("q1.scores", [1, 1], right[("q1.scores", (1, 1))], ["98.00"], ["low confidence"]),  # the reader's own doubt
    ])
    sub = Submission("ada.json", "ada", answers)
    changes = score_changes(key, [reading], [sub])
    assert changes == {("ada", "q1.scores", (0, 0)): [wrong_s]}
    # An unlikely other reading is no doubt, whatever it would do to the score.
    unlikely = _reading("ada", [("q1.scores", [0, 0], s00, [wrong_s], [])], chance=scanned.LIKELY / 2)
    assert score_changes(key, [unlikely], [sub]) == {}
    # An alternative that spells a value within tolerance changes nothing.
    within = f"{float(s00) + 0.001:.3f}"
    assert score_changes(key, [_reading("ada", [("q1.scores", [0, 0], s00, [within], [])])], [sub]) == {}
    # A wrong reading whose other reading is the right answer changes the score too (the key only
    # decides what is worth a look; the reading stays what was read).
    wrong_answers = {**answers, "q1.scores": [[wrong_s, answers["q1.scores"][0][1]], answers["q1.scores"][1]]}
    wrong = Submission("ada.json", "ada", wrong_answers)
    assert score_changes(key, [_reading("ada", [("q1.scores", [0, 0], wrong_s, [s00], [])])], [wrong]) == {
        ("ada", "q1.scores", (0, 0)): [s00]}
    assert wrong.answers["q1.scores"][0][0] == wrong_s


def test_a_later_parts_carried_credit_counts_as_a_change_of_score(pile):
    """The weights are right for the student's own (wrong) scores: another reading of a score
    changes what the weights earn, so the score's entry is worth a look."""
    from qkvquiz.core.submissions import Submission
    from qkvquiz.grade.grader import grade

    key = pile["key_obj"]
    right = exact_answers(key, "bo")
    scores = [[float(right[("q1.scores", (i, j))]) for j in range(2)] for i in range(2)]
    scores[0][0] += 1.0  # a slip, carried into the weights
    row = np.exp(np.array(scores[0]) - max(scores[0]))
    weights = [[f"{v:.2f}" for v in row / row.sum()], [right[("q1.weights", (1, j))] for j in range(2)]]
    answers = {"q1.scores": [[f"{v:.2f}" for v in r] for r in scores], "q1.weights": weights}
    sub = Submission("bo.json", "bo", answers)
    (result,) = grade(key, [sub]).results
    assert [p.verdict for p in result.parts] == ["partial", "carried"]
    slipped = answers["q1.scores"][0][0]
    other = f"{float(slipped) + 2:.2f}"  # neither right nor what the weights were computed from
    changes = score_changes(key, [_reading("bo", [("q1.scores", [0, 0], slipped, [other], [])])], [sub])
    assert changes == {("bo", "q1.scores", (0, 0)): [other]}


# --- decisions, grading again ------------------------------------------------------------------


def test_the_journal_keeps_the_last_decision_per_entry_and_skips_a_torn_line(tmp_path):
    append_decision(tmp_path, Decision("ada", "q1.scores", (0, 1), "1.50", "1.30", "t1"))
    append_decision(tmp_path, Decision("ada", "q1.scores", (0, 1), "1.50", "1.80", "t2"))
    append_decision(tmp_path, Decision("bo", "q1.weights", (), None, None, "t3"))
    with open(tmp_path / JOURNAL_NAME, "a") as fh:
        fh.write('{"student": "ada", "part": "q1.sc')  # cut short by a power cut
    decisions, notes = read_decisions(tmp_path)
    assert decisions[("ada", "q1.scores", (0, 1))].value == "1.80"
    assert decisions[("bo", "q1.weights", ())].value is None
    assert len(notes) == 1 and "line 4" in notes[0]
    assert (tmp_path / JOURNAL_NAME).stat().st_mode & 0o077 == 0


def test_a_journal_that_is_a_link_is_not_followed(tmp_path):
    (tmp_path / "elsewhere").write_text("")
    os.symlink(tmp_path / "elsewhere", tmp_path / JOURNAL_NAME)
    with pytest.raises(OSError):
        append_decision(tmp_path, Decision("ada", "q1.scores", (0, 1), "1.50", "1.30", "t"))
    assert (tmp_path / "elsewhere").read_text() == ""
    decisions, notes = read_decisions(tmp_path)
    assert decisions == {} and notes


def test_grading_again_uses_the_confirmed_readings_and_scanning_again_keeps_them(pile, tmp_path):
    out = tmp_path / "out"
    first = scan_and_grade(pile["key"], [pile["folder"] / "a1.png", pile["folder"] / "a2.png"], out)
    entry = first.readings[0]["entries"][0]
    read, eid = entry["value"], ("ada", entry["part"], tuple(entry["index"]))
    score = first.report.results[0].score
    decided = "-77.00" if read != "-77.00" else "-76.00"
    append_decision(out, Decision(*eid, read, decided, "now"))
    again = regrade(out)
    doc = json.loads((out / "submissions" / "ada.json").read_text())
    part = doc["answers"][entry["part"]]
    for i in entry["index"]:
        part = part[i]
    assert part == decided and eid in again.decisions
    assert again.report.results[0].score < score or read != exact_answers(pile["key_obj"], "ada")[eid[1:]]
    results = json.loads((out / "grades" / "results.json").read_text())
    assert results["students"][0]["source"].endswith("submissions/ada.json")
    # The readings stay as read; scanning again keeps the decision (its reading is the same).
    assert json.loads((out / "readings" / "ada.json").read_text())["entries"][0]["value"] == read
    rescanned = scan_and_grade(pile["key"], [pile["folder"] / "a1.png", pile["folder"] / "a2.png"], out)
    assert eid in rescanned.decisions and rescanned.summary()["decided"] >= 0
    # A decision made on another reading than the one the pages now give is set aside, said.
    append_decision(out, Decision(*eid, "12.34" if read != "12.34" else "12.35", "0", "later"))
    set_aside = regrade(out)
    assert eid not in set_aside.decisions and any("set aside" in n for n in set_aside.notes)


def test_a_failure_while_writing_leaves_the_previous_scan_as_it_was(pile, tmp_path, monkeypatch):
    out = tmp_path / "out"
    scan_and_grade(pile["key"], [pile["folder"] / "b1.jpg"], out)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(grading):
        raise KeyboardInterrupt

    monkeypatch.setattr(scanned, "summary_markdown", broken)
    with pytest.raises(KeyboardInterrupt):
        scan_and_grade(pile["key"], [pile["folder"] / "a1.png"], out)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not [p for p in out.iterdir() if p.name.startswith(".qkvquiz")]


# --- bad input -------------------------------------------------------------------------------


def test_a_key_without_its_cell_map_or_with_another_sets_is_refused_by_name(pile, tmp_path):
    runner = CliRunner()
    lone = tmp_path / "lone"
    lone.mkdir()
    (lone / "key.json").write_bytes(pile["key"].read_bytes())
    result = runner.invoke(app, ["scan", str(lone / "key.json"), str(pile["folder"] / "a1.png"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "cellmap.json" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()
    key = pile["key_obj"]
    parts = {part.id: item.shapes[part.id] for item, part in key.parts}
    from qkvquiz.scan.cellmap import write_cellmap

    write_cellmap(layout("0123456789ab", list(zip(key.students, key.variants)), parts), tmp_path / "map.json")
    result = runner.invoke(app, ["scan", str(pile["key"]), str(pile["folder"] / "a1.png"), "--out", str(tmp_path / "o"),
                                 "--cellmap", str(tmp_path / "map.json")])
    assert result.exit_code == 2 and "map.json" in result.output and 'field "set"' in result.output
    wrong_shapes = {**parts, "q1.scores": (3, 3)}
    write_cellmap(layout(key.set_id, list(zip(key.students, key.variants)), wrong_shapes), tmp_path / "map.json")
    with pytest.raises(ScanInputError, match="q1.scores"):
        scan_and_grade(pile["key"], [], tmp_path / "o", cellmap=tmp_path / "map.json")
    result = runner.invoke(app, ["scan", str(pile["key"]), str(tmp_path / "absent.png"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "absent.png does not exist" in result.output


def test_scan_and_scan_read_are_one_command_and_help_teaches_both(pile, tmp_path):
    runner = CliRunner()
    short = runner.invoke(app, ["scan", "--out", str(tmp_path / "a"), str(pile["key"]), str(pile["folder"] / "b1.jpg")])
    long = runner.invoke(app, ["scan", "read", str(pile["key"]), str(pile["folder"] / "b1.jpg"), "--out", str(tmp_path / "b")])
    assert short.exit_code == long.exit_code == 0, short.output + long.output
    assert (tmp_path / "a" / "grades" / "results.csv").read_text().replace("/a/", "/b/") == (
        tmp_path / "b" / "grades" / "results.csv").read_text()
    shown = " ".join(runner.invoke(app, ["scan", "--help"]).output.split())
    assert "`qkvquiz scan KEY SCANS… --out DIR` (short for `qkvquiz scan read …`)" in shown
    assert "`qkvquiz scan review DIR`" in shown


def test_a_folder_with_submissions_or_grades_not_of_a_scan_is_not_scanned_into(pile, tmp_path):
    course = tmp_path / "week3"
    (course / "submissions").mkdir(parents=True)
    (course / "submissions" / "ada.json").write_text("{}")
    result = CliRunner().invoke(app, ["scan", str(pile["key"]), str(pile["folder"] / "b1.jpg"), "--out", str(course)])
    assert result.exit_code == 2 and "submissions" in result.output and "choose another --out" in result.output
    assert (course / "submissions" / "ada.json").read_text() == "{}" and sorted(os.listdir(course)) == ["submissions"]


def test_a_chinese_scans_summary_and_page_reasons_are_chinese(pile, tmp_path):
    """summary.md and the reasons a page was not placed are written for the instructor, in the
    set's language (or --lang), as grade's item analysis and its reasons are; the command's own
    words stay English."""
    import re

    out = tmp_path / "zh"
    result = CliRunner().invoke(app, ["scan", str(pile["key"]), *map(str, pile["scans"]), "--out", str(out),
                                      "--lang", "zh"])
    assert result.exit_code == 1, result.output
    assert "not placed:" in result.output and "no pages" in result.output
    state = json.loads((out / "scan.json").read_text())
    (stranger,) = [p for p in state["pages"] if p["status"] == "other set"]
    assert pile["other_set"] in stranger["reason"] and "belongs" not in stranger["reason"]
    summary = (out / "summary.md").read_text()
    assert pile["other_set"] in summary
    # No English word but the spec's title, names (files, students, folders) and a library's own
    # words on a file it cannot read.
    title = json.loads(pile["key"].read_text())["title"]
    # (A library's words stand in full-width brackets that hold no Chinese.)
    plain = re.sub(r"`[^`]*`|\S*/\S*|（[^）\u4e00-\u9fff]*）", " ", summary.replace(title, " "))
    assert not set(re.findall(r"[A-Za-z]{3,}", plain)) - {"ada", "Pillow", "pypdf"}, plain


def test_a_broken_scan_and_a_planted_file_are_listed_in_words_not_pythons(pile, tmp_path):
    # A cut-off PDF and a text file named like a picture: each listed with the reading library's
    # own reason, without Python's class names or object addresses, and with no stray warning.
    half = tmp_path / "half.pdf"
    half.write_bytes((pile["folder"] / "again.pdf").read_bytes()[:100])
    planted = tmp_path / "planted.png"
    planted.write_text("not a picture")
    out = tmp_path / "out"
    # A process of its own: pytest would catch what a library logs, a terminal shows it.
    result = subprocess.run([sys.executable, "-m", "qkvquiz", "scan", str(pile["key"]), str(half), str(planted),
                             str(pile["folder"] / "b1.jpg"), "--out", str(out)], capture_output=True, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 1, result.stdout + result.stderr
    said = " ".join((result.stdout + result.stderr).split())
    assert "half.pdf: unreadable: not a PDF pypdf can read" in said
    assert "planted.png: unreadable: not an image Pillow can read (cannot identify image file)" in said
    import re

    assert not re.search(r"\w+Error\b|\bat 0x[0-9a-f]+|EOF marker", said), said
