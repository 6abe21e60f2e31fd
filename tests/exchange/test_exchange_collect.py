"""Grading an LMS's bulk download: Canvas and Moodle zips (both layouts), Gradescope's export,
late and resubmitted files, roster matching, and the bounds on reading a zip.

Fixtures follow each LMS's documented naming (see qkvquiz/exchange/lms_names.py)."""

from __future__ import annotations

import json
import stat
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.exchange.collect import grade_download
from qkvquiz.grade.attribution import LATE_FLAG, MISMATCH_FLAG
from qkvquiz.exchange.lms_names import detect, parse_canvas, parse_moodle
from qkvquiz.core.inputs import InputError
from qkvquiz.core.zips import MAX_ZIP_MEMBER_BYTES, read_zip
from qkvquiz.roster import read_roster_entries

from ..lms_corpus import answers_of, roster_file, write_zip

ROSTER = (
    "student,name,email,canvas_id,moodle_id,sis_id,section\n"
    "ada,Ada Lovelace,ada@example.edu,101,5001,S1,A\n"
    "alan,Alan Turing,alan@example.edu,102,5002,S2,A\n"
    "grace,Grace Hopper,grace@example.edu,103,5003,S3,B\n"
)


@pytest.fixture()
def roster(tmp_path: Path):
    return roster_file(tmp_path, ROSTER)


def test_names_of_each_lms_are_read():
    c = parse_canvas("lovelaceada_late_101_208490284_answers-1.json")
    assert (c.lms_id, c.name, c.late, c.original) == ("101", "lovelaceada", True, "answers-1.json")
    assert parse_canvas("turingalan_LATE_102_7_a.json").late
    assert not parse_canvas("turingalan_102_7_my_answers.json").late
    assert parse_canvas("turingalan_102_7_my_answers.json").original == "my_answers.json"
    flat = parse_moodle("Ada Lovelace_5001_assignsubmission_file_answers.json")
    assert (flat.lms_id, flat.name, flat.original) == ("5001", "Ada Lovelace", "answers.json")
    folder = parse_moodle("Ada Lovelace_5001_assignsubmission_file/sub/answers.json")
    assert (folder.lms_id, folder.original) == ("5001", "sub/answers.json")
    old = parse_moodle("Ada Lovelace_5001_assignsubmission_file_/answers.json")
    assert (old.lms_id, old.original) == ("5001", "answers.json")
    assert parse_canvas("Ada Lovelace_5001_assignsubmission_file_a.json") is None
    assert detect(["lovelaceada_101_1_a.json"]) == "canvas"
    assert detect(["Ada Lovelace_5001_assignsubmission_file/a.json"]) == "moodle"
    assert detect(["answers.json"]) is None


def test_canvas_zip_graded_end_to_end_with_late_and_resubmitted(tmp_path, class_key, roster):
    key, doc = class_key
    # Canvas names; alan handed in twice (the second upload of the same name gets "-1") and late.
    members = {
        "lovelaceada_101_9001_answers.json": json.dumps(answers_of(doc, "ada")),
        "turingalan_late_102_9002_answers.json": json.dumps(answers_of(doc, "alan", wrong=True)),
        "turingalan_late_102_9003_answers-1.json": json.dumps(answers_of(doc, "alan")),
        "hoppergrace_103_9004_scan.pdf": b"%PDF-1.4",
        "strangerjoe_999_9005_answers.json": json.dumps(answers_of(doc, "grace")),
    }
    times = {"turingalan_late_102_9003_answers-1.json": (2026, 11, 2, 9, 0, 0)}
    dl = write_zip(tmp_path / "submissions.zip", members, times)
    report = grade_download(key, [dl], roster)
    by = {r.student: r for r in report.results}
    assert set(by) == {"ada", "alan"}
    assert by["ada"].score == by["ada"].total
    assert by["alan"].score == by["alan"].total  # the later upload is graded
    assert by["alan"].source.endswith("answers-1.json")
    assert LATE_FLAG in by["alan"].flags and LATE_FLAG not in by["ada"].flags
    unmatched = [p for p in report.problems if "strangerjoe" in p.source]
    assert unmatched and "canvas_id 999" in unmatched[0].message
    assert any(s.source.endswith("scan.pdf") for s in report.skipped)


@pytest.mark.parametrize("layout", ["folders", "folders-old", "flat"])
def test_moodle_zip_both_layouts(tmp_path, class_key, roster, layout):
    key, doc = class_key
    prefix = {"ada": "Ada Lovelace_5001", "grace": "Grace Hopper_5003"}

    def name(student: str, original: str) -> str:
        if layout == "flat":
            return f"{prefix[student]}_assignsubmission_file_{original}"
        tail = "_" if layout == "folders-old" else ""
        return f"{prefix[student]}_assignsubmission_file{tail}/{original}"

    # grace's file names ada as its student: the LMS's identity wins, with a note and a flag.
    members = {name("ada", "answers.json"): json.dumps(answers_of(doc, "ada")),
               name("grace", "attempt.json"): json.dumps({**answers_of(doc, "grace"), "student": "ada"})}
    dl = write_zip(tmp_path / "moodle.zip", members)
    report = grade_download(key, [dl], roster)
    by = {r.student: r for r in report.results}
    assert set(by) == {"ada", "grace"}, report.problems
    assert by["grace"].score == by["grace"].total
    assert MISMATCH_FLAG in by["grace"].flags and any("uploaded by Moodle participant 5003" in n
                                                      for n in by["grace"].notes)
    assert not report.problems


def test_moodle_unpacked_folder_and_name_fallback(tmp_path, class_key):
    key, doc = class_key
    roster_path = tmp_path / "names.csv"
    roster_path.write_text("student,name\nada,Ada Lovelace\nalan,Alan Turing\ngrace,Grace Hopper\n", encoding="utf-8")
    folder = tmp_path / "unpacked" / "Alan Turing_777_assignsubmission_file"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text(json.dumps(answers_of(doc, "alan")), encoding="utf-8")
    report = grade_download(key, [tmp_path / "unpacked"], read_roster_entries(roster_path))
    assert [r.student for r in report.results] == ["alan"]


def test_blind_marking_needs_participant_ids(tmp_path, class_key):
    key, doc = class_key
    roster_path = tmp_path / "names.csv"
    roster_path.write_text("student,name\nada,Ada Lovelace\n", encoding="utf-8")
    dl = write_zip(tmp_path / "blind.zip", {"Participant_5001_assignsubmission_file/a.json": json.dumps(answers_of(doc, "ada"))})
    report = grade_download(key, [dl], read_roster_entries(roster_path))
    assert not report.results and "blind marking" in report.problems[0].message


def test_gradescope_export(tmp_path, class_key, roster):
    key, doc = class_key
    metadata = (
        "submission_111:\n  :submitters:\n  - :name: Ada Lovelace\n    :sid: 'S1'\n    :email: ada@example.edu\n"
        "  :created_at: 2026-11-01 10:00:00.000000000 -08:00\n"
        "submission_222:\n  :submitters:\n  - :name: Somebody Else\n    :sid: 'X9'\n    :email: x@example.edu\n"
    )
    dl = write_zip(tmp_path / "gs.zip", {
        "assignment_1_export/submission_metadata.yml": metadata,
        "assignment_1_export/submission_111/answers.json": json.dumps(answers_of(doc, "ada")),
        "assignment_1_export/submission_222/answers.json": json.dumps(answers_of(doc, "alan")),
    })
    report = grade_download(key, [dl], roster)
    assert [r.student for r in report.results] == ["ada"]
    assert "X9" in report.problems[0].message


def test_without_a_roster_the_files_own_id_decides(tmp_path, class_key):
    key, doc = class_key
    dl = write_zip(tmp_path / "c.zip", {"whoever_1_2_a.json": json.dumps(answers_of(doc, "grace"))})
    report = grade_download(key, [dl])
    assert [r.student for r in report.results] == ["grace"]


def test_one_bad_member_never_stops_the_others(tmp_path, class_key, roster):
    key, doc = class_key
    dl = write_zip(tmp_path / "c.zip", {
        "lovelaceada_101_1_a.json": "{not json",
        "turingalan_102_2_a.json": json.dumps(answers_of(doc, "alan")),
    })
    report = grade_download(key, [dl], roster)
    assert [r.student for r in report.results] == ["alan"]
    assert "not valid JSON" in report.problems[0].message and "lovelaceada" in report.problems[0].source


def test_zip_bounds(tmp_path):
    path = tmp_path / "evil.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("../escape.json", "{}")
        zf.writestr("/abs.json", "{}")
        zf.writestr("bomb.json", b"0" * (MAX_ZIP_MEMBER_BYTES - 10))  # compresses about 1000:1
        zf.writestr("big.json", b"1" * (MAX_ZIP_MEMBER_BYTES + 10))
        link = zipfile.ZipInfo("link.json")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(link, "/etc/passwd")
        zf.writestr("__MACOSX/._x.json", "junk")
        zf.writestr("ok.json", "{}")
    members, skipped = read_zip(path)
    assert [m.name for m in members] == ["ok.json"]
    reasons = {Path(s.path).name: s.reason for s in skipped}
    assert "'..'" in reasons["escape.json"] and "absolute" in reasons["abs.json"]
    assert "zip bomb" in reasons["bomb.json"] and "at most" in reasons["big.json"]
    assert "link" in reasons["link.json"]
    bad = tmp_path / "notzip.zip"
    bad.write_bytes(b"hello")
    with pytest.raises(InputError, match="not a zip"):
        read_zip(bad)


def test_roster_columns_are_optional_and_old_rosters_still_read(tmp_path):
    plain = tmp_path / "ids.txt"
    plain.write_text("ada\nalan\n", encoding="utf-8")
    assert read_roster_entries(plain).students == ["ada", "alan"]
    csv_path = tmp_path / "r.csv"
    csv_path.write_text("Student,Full Name,Email Address,Participant\nada,Ada Lovelace,A@x.org,Participant 77\n",
                        encoding="utf-8")
    r = read_roster_entries(csv_path)
    e = r.get("ada")
    assert (e.name, e.email, e.moodle_id, e.sortable, e.split_name) == (
        "Ada Lovelace", "A@x.org", "77", "Lovelace, Ada", ("Ada", "Lovelace"))
    assert r.by("email", "a@X.org") is e
    dup = tmp_path / "dup.csv"
    dup.write_text("student,canvas_id\na,1\nb,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 3: canvas_id '1' is also on line 2"):
        read_roster_entries(dup)


def test_cli_grades_a_canvas_zip_with_a_roster(tmp_path, class_key):
    _key, doc = class_key
    key_path = tmp_path / "key.json"
    key_path.write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    dl = write_zip(tmp_path / "dl.zip", {
        "lovelaceada_101_1_a.json": json.dumps(answers_of(doc, "ada")),
        "nobody_55_2_a.json": json.dumps(answers_of(doc, "alan")),
    })
    result = CliRunner().invoke(app, ["grade", str(key_path), str(dl), "--roster", str(tmp_path / "roster.csv"),
                                      "--out", str(tmp_path / "g")])
    assert result.exit_code == 1, result.output  # one file could not be matched
    assert "nobody_55_2_a.json" in result.output and "canvas_id 55" in result.output
    rows = (tmp_path / "g" / "results.csv").read_text(encoding="utf-8").splitlines()
    assert any(r.startswith("ada,") for r in rows)
    bad = CliRunner().invoke(app, ["grade", str(key_path), str(tmp_path / "roster.csv"), "--from", "blackboard",
                                   "--out", str(tmp_path / "g2")])
    assert bad.exit_code == 2 and "--from must be one of" in bad.output


def test_zip_directory_checked_before_it_is_read(tmp_path):
    import struct

    # An end record announcing a 100 MB directory: refused before zipfile parses anything.
    fake = tmp_path / "huge-dir.zip"
    fake.write_bytes(b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, 10, 10, 100_000_000, 0, 0))
    with pytest.raises(InputError, match="directory"):
        read_zip(fake)
    fifo = tmp_path / "pipe.zip"
    import os

    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_zip(fifo)
