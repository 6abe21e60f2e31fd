"""Grade exports checked against each importer's documented header rules (see exchange/gradebook.py)."""

from __future__ import annotations

import csv
import io
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.exchange.gradebook import NOT_IN_WORKSHEET, GradeOptions, export_grades, grade_text
from qkvquiz.exchange.results import Results, StudentScore, load_results
from qkvquiz.core.submissions import submission_from_json
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import write_reports
from qkvquiz.roster import read_roster_entries

from ..helpers import make_key

ROSTER = (
    "student,name,email,canvas_id,moodle_id,sis_id,sis_login,section\n"
    "ada,Ada Lovelace,ada@example.edu,101,5001,S1,alovelace,A\n"
    "alan,Alan Turing,alan@example.edu,102,5002,S2,aturing,A\n"
    "grace,=HYPERLINK(\"http://x\"),grace@example.edu,,5003,S3,ghopper,B\n"
)


@pytest.fixture()
def graded(tmp_path: Path):
    key, doc = make_key(students=("ada", "alan", "grace"))
    subs = []
    for s in doc["students"][:2]:  # grace hands nothing in
        answers = dict(s["answers"])
        if s["student"] == "alan":
            answers = {k: None for k in answers}
        subs.append(submission_from_json({"student": s["student"], "answers": answers}, f"{s['student']}.json"))
    write_reports(grade(key, subs), tmp_path / "g", feedback=True)
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    return load_results(tmp_path / "g"), read_roster_entries(tmp_path / "roster.csv"), key


def table(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_canvas_header_rules(graded):
    results, roster, key = graded
    text, unmatched = export_grades(results, roster, GradeOptions("canvas", assignment_id="4411", points_possible=True,
                                                                  title="Week 3"))
    rows = table(text)
    assert rows[0][:2] == ["Student", "ID"]  # first Student, second ID
    assert rows[0][2:5] == ["SIS User ID", "SIS Login ID", "Section"]  # Section last of the student columns
    assert rows[0][5] == "Week 3 (4411)"  # Title (assignment id)
    assert rows[1][0] == "Points Possible" and rows[1][5] == f"{key.points:g}"
    ada = next(r for r in rows if r[1] == "101")
    assert ada[0] == "Lovelace, Ada" and float(ada[5]) == key.points and ada[4] == "A"
    alan = next(r for r in rows if r[1] == "102")
    assert float(alan[5]) == 0
    grace = next(r for r in rows if r[2] == "S3")
    assert grace[0].startswith("'")  # a formula in a name is never run
    assert grace[5] == "0" and unmatched == []  # grace has SIS ids: Canvas can match her


def test_moodle_worksheet_header_rules_and_fill(graded, tmp_path):
    results, roster, key = graded
    now = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
    text, _ = export_grades(results, roster, GradeOptions("moodle-worksheet", missing="blank"), now=now)
    rows = table(text)
    header = rows[0]
    for needed in ("Identifier", "Grade", "Last modified (grade)", "Feedback comments"):
        assert needed in header
    ada = rows[1]
    assert ada[header.index("Identifier")] == "Participant 5001"
    assert float(ada[header.index("Grade")]) == key.points
    assert ada[header.index("Last modified (grade)")] == "2026-11-23T14:00:00+0000"
    assert "Score" in ada[header.index("Feedback comments")]
    grace = next(r for r in rows if r[0] == "Participant 5003")
    assert grace[header.index("Grade")] == ""  # blank: Moodle's importer skips it
    # Filling the worksheet Moodle gave keeps its own columns and rows.
    given = tmp_path / "worksheet.csv"
    given.write_text('Identifier,"Full name","Email address",Status,Grade,"Maximum Grade","Grade can be changed",'
                     '"Last modified (submission)","Last modified (grade)","Feedback comments"\n'
                     '"Participant 5002","Alan Turing",alan@example.edu,Submitted,,10.00,Yes,-,-,\n'
                     '"Participant 9999","Other Person",o@example.edu,"No submission",,10.00,Yes,-,-,\n',
                     encoding="utf-8")
    filled, missing = export_grades(results, roster, GradeOptions("moodle-worksheet"), worksheet=str(given))
    frows = table(filled)
    assert frows[0] == table(given.read_text())[0]
    assert frows[1][4] == "0" and frows[1][9].startswith("Score 0")
    assert frows[2] == table(given.read_text())[2]
    # ada has a moodle_id with no row in this worksheet; grace too (each with why).
    assert {(m.student, m.reason) for m in missing} == {("ada", NOT_IN_WORKSHEET), ("grace", NOT_IN_WORKSHEET)}


MOODLE_WORKSHEET = (  # as Moodle writes it (fputcsv: quotes only where needed, "\n" line breaks)
    "Identifier,\"Full name\",\"Email address\",Status,Grade,\"Maximum Grade\",\"Grade can be changed\","
    "\"Last modified (submission)\",\"Last modified (grade)\",\"Feedback comments\"\n"
    "\"Participant 5001\",\"Ada Lovelace\",ada@example.edu,Submitted,,10.00,Yes,-,-,\n"
    "\"Participant 7001\",\"Other Person\",o@example.edu,\"Submitted for grading\",6.50,10.00,Yes,-,"
    "\"Friday, 6 November 2026, 9:14 AM\",\"- q2: 2/5\n- q3: right\"\n"
    "\"Participant 7002\",\"=Odd Name\",e@example.edu,\"No submission\",-,10.00,Yes,-,-,\"+ late, see me\"\n"
)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_filled_worksheet_keeps_other_students_lines_byte_for_byte(graded, tmp_path, newline):
    results, roster, _key = graded
    given = tmp_path / "worksheet.csv"
    text = MOODLE_WORKSHEET.replace("\n", newline).replace("q2: 2/5" + newline, "q2: 2/5\n")
    given.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    filled, missing = export_grades(results, roster, GradeOptions("moodle-worksheet"), worksheet=str(given))
    header, _ada, rest = text.split(newline, 2)
    out = filled.removeprefix("\ufeff")
    assert filled.startswith("\ufeff")  # Moodle's byte-order mark, where it wrote one
    # The header and the students not graded here, as Moodle wrote them; ada's line filled in.
    assert out.startswith(header + newline) and out.endswith(newline + rest)
    [ada] = table(out[len(header + newline):len(out) - len(rest)])
    assert ada[0] == "Participant 5001" and ada[4] == f"{results.students['ada'].score:g}"
    assert {(m.student, m.reason) for m in missing} == {("alan", NOT_IN_WORKSHEET), ("grace", NOT_IN_WORKSHEET)}


def test_the_cli_says_why_each_student_is_left_out_of_a_worksheet(graded, tmp_path):
    results, _roster, _key = graded
    (tmp_path / "r2.csv").write_text("student,name,moodle_id\nada,Ada Lovelace,5001\nalan,Alan Turing,5002\n"
                                     "grace,Grace Hopper,\n", encoding="utf-8")
    (tmp_path / "w.csv").write_text(MOODLE_WORKSHEET, encoding="utf-8")
    result = CliRunner().invoke(app, [
        "export", "grades", str(results.folder), "--to", "moodle-worksheet", "--roster", str(tmp_path / "r2.csv"),
        "--worksheet", str(tmp_path / "w.csv"), "--out", str(tmp_path / "up.csv")])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "(1: the roster's moodle_id has no row in the worksheet): alan" in said
    assert "(1: no id it reads in the roster): grace" in said


def test_blackboard_and_moodle_gradebook_and_plain(graded):
    results, roster, key = graded
    bb, _ = export_grades(results, roster, GradeOptions("blackboard", assignment_id="_123_1", title="W3"))
    assert bb.splitlines()[0] == f'"Last Name","First Name","Username","Student ID","W3 [Total Pts: {key.points:g} Score] |_123_1"'
    assert '"Lovelace","Ada","alovelace","S1"' in bb
    mg, _ = export_grades(results, roster, GradeOptions("moodle-gradebook", title="W3"))
    assert table(mg)[0] == ["First name", "Last name", "ID number", "Email address", "W3 (Real)", "W3 (Feedback)"]
    plain, _ = export_grades(results, roster, GradeOptions("plain", scale="percent"))
    rows = table(plain)
    assert rows[0][:5] == ["student", "name", "email", "sis_id", "grade"]
    assert rows[1][4] == "100" and rows[1][5] == "100"


def test_rounding_and_scales():
    results = Results("T", 3.0)
    s = StudentScore("a", 2.0, 3.0)
    assert grade_text(s, results, GradeOptions(scale="percent")) == "66.67"
    assert grade_text(s, results, GradeOptions(scale="percent", rounding="down", decimals=0)) == "66"
    assert grade_text(s, results, GradeOptions(scale="percent", rounding="up", decimals=1)) == "66.7"
    assert grade_text(StudentScore("a", 0.125, 1), results, GradeOptions(decimals=2, rounding="half-even")) == "0.12"
    assert grade_text(StudentScore("a", 0.125, 1), results, GradeOptions(decimals=2)) == "0.13"
    assert grade_text(s, results, GradeOptions(out_of=20)) == "13.33"
    assert grade_text(StudentScore("a", None, 3), results, GradeOptions(missing="blank")) == ""


def test_cli_export_grades(graded, tmp_path):
    result = CliRunner().invoke(app, ["export", "grades", str(tmp_path / "g"), "--to", "canvas", "--roster",
                                      str(tmp_path / "roster.csv"), "--out", str(tmp_path / "c.csv")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "c.csv").read_text(encoding="utf-8").startswith("Student,ID,")
    assert os.stat(tmp_path / "c.csv").st_mode & 0o077 == 0  # private
    bad = CliRunner().invoke(app, ["export", "grades", str(tmp_path / "g"), "--to", "d2l"])
    assert bad.exit_code == 2 and "d2l" in bad.output
    missing = CliRunner().invoke(app, ["export", "grades", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "results" in bad.output + missing.output
    (tmp_path / "broken.json").write_text(json.dumps({"students": [{"x": 1}]}), encoding="utf-8")
    broken = CliRunner().invoke(app, ["export", "grades", str(tmp_path / "broken.json")])
    assert broken.exit_code == 2 and "broken.json" in broken.output and "Traceback" not in broken.output


# ----------------------------------------------------------------------------- Canvas' importer, ported


def canvas_import_assignments(text: str) -> list[str]:
    """The assignment columns Canvas' gradebook importer reads from a CSV (a port of
    ``app/models/gradebook_importer.rb``: ``header?``, ``update_column_count``,
    ``strip_non_assignment_columns`` with ``NON_ASSIGNMENT_COLUMN_HEADERS``)."""
    import re

    header = next(csv.reader(io.StringIO(text)))
    assert len(header) > 3 and re.search("Student", header[0]) and re.search("ID", header[1])
    student_columns = 3  # name, user id, section
    if re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3]):
        student_columns += 2
    assert re.search("Section", header[student_columns - 1])
    skipped = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                         "Override Score|Override Grade|Override Status")
    return [h for h in header[student_columns:] if not skipped.search(h)]


@pytest.mark.parametrize("title", ["Week 3", "Week 3 — Final Score practice", "Current Grade check", "final grade"])
def test_canvas_reads_our_column_or_the_title_is_refused(graded, title):
    results, roster, _key = graded
    opts = GradeOptions("canvas", assignment_id="4411", title=title)
    try:
        text, _unmatched = export_grades(results, roster, opts)
    except ValueError as exc:  # refused: Canvas would drop the column without a word
        assert "Canvas" in str(exc) and "--title" in str(exc)
        assert canvas_import_assignments(
            export_grades(results, roster, GradeOptions("canvas", assignment_id="4411", title="x"))[0]) == ["x (4411)"]
        assert any(w in title for w in ("Final Score", "Current Grade"))
        return
    assert canvas_import_assignments(text) == [f"{title} (4411)"]


def test_cli_refuses_a_title_canvas_drops(graded, tmp_path):
    results, _roster, _key = graded
    result = CliRunner().invoke(app, ["export", "grades", str(results.folder), "--to", "canvas", "--roster",
                                      str(tmp_path / "roster.csv"), "--title", "Final Grade", "--out",
                                      str(tmp_path / "c.csv")])
    assert result.exit_code == 2 and "Final Grade" in result.output
    assert not (tmp_path / "c.csv").exists()


@pytest.mark.parametrize(("doc", "said"), [
    ({"students": [{"student": "a"}]}, "student entry 1 has no 'score' field"),
    ({"students": [{"student": "a", "score": "x"}]}, "student entry 1 cannot be read: a field holds the wrong kind"),
    ({"students": [{"student": "a", "score": 1, "parts": [5]}]}, "student entry 1, part 1 cannot be read"),
    ({"students": [{"student": "a", "score": 1, "parts": [{"part": "q1.s"}]}]},
     "student entry 1, part 1 has no 'points' field"),
])
def test_a_broken_results_file_is_named_by_entry_and_field_without_python(tmp_path, doc, said):
    (tmp_path / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    result = CliRunner().invoke(app, ["export", "grades", str(tmp_path), "--to", "plain", "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 2
    assert said in result.output and "results.json" in result.output, result.output
    for python in ("Error(", "Traceback", "object is not", "could not convert"):
        assert python not in result.output, result.output
