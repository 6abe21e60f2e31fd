"""The LMS intake against downloads named as Canvas, Moodle and Gradescope name them
(tests/lms_corpus.py), and against what one student can put into one: a file named like
Gradescope's metadata, a name Canvas writes with '_' or that reads two ways, a member name
that is not UTF-8. Names in any script match the roster."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from qkvquiz.exchange.collect import grade_download
from qkvquiz.inputs import read_zip
from qkvquiz.roster import read_roster_entries

from .helpers import make_key
from .lms_corpus import answers_of, canvas_name, write_zip

STUDENTS = ("ada", "alan", "grace", "li")
ROSTER = (
    "student,name,email,canvas_id,moodle_id,sis_id\n"
    "ada,Ada Lovelace,ada@example.edu,101,5001,S1\n"
    "alan,Alan Turing,alan@example.edu,102,5002,S2\n"
    "grace,Grace Hopper,grace@example.edu,103,5003,S3\n"
    "li,李小龙,li@example.edu,104,5004,S4\n"
)
NAMES_ONLY = "student,name\nada,Ada Lovelace\nalan,Alan Turing\ngrace,Grace Hopper\nli,李小龙\n"
ADA = {"name": "Ada Lovelace", "sid": "S1", "email": "ada@example.edu"}
ALAN = {"name": "Alan Turing", "sid": "S2", "email": "alan@example.edu"}


@pytest.fixture(scope="module")
def class_key():
    return make_key(students=STUDENTS)


def _roster(tmp_path: Path, text: str = ROSTER):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return read_roster_entries(path)


def _hand_in(doc: dict, student: str, **kw) -> str:
    return json.dumps(answers_of(doc, student, **kw))


def _by_student(report) -> dict:
    return {r.student: r for r in report.results}


def _full(result) -> bool:
    return result.score == result.total


# ----------------------------------------------------------------------------- zip member names


def _with_name_bytes(path: Path, good: bytes, bad: bytes) -> None:
    """Replace ``good`` by ``bad`` (as long) in an archive's member names (local headers and directory)."""
    data = path.read_bytes()
    assert len(good) == len(bad) and data.count(good) == 2
    path.write_bytes(data.replace(good, bad))


@pytest.mark.parametrize("zip64", [False, True])
def test_a_member_whose_name_is_not_utf8_is_refused_by_itself(tmp_path, class_key, monkeypatch, zip64):
    key, doc = class_key
    if zip64:  # zipfile then ends the archive with ZIP64 records, as it does past 65,535 members
        monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)
    dl = write_zip(tmp_path / "canvas.zip", {
        canvas_name("Lovelace, Ada", 101, 9001, "answers.json"): _hand_in(doc, "ada"),
        canvas_name("Turing, Alan", 102, 9002, "answé.json"): _hand_in(doc, "alan"),
    })
    with zipfile.ZipFile(dl) as zf:
        assert zf.infolist()[1].flag_bits & 0x800  # the name is marked UTF-8
    monkeypatch.undo()
    assert (b"PK\x06\x06" in dl.read_bytes()) == zip64
    _with_name_bytes(dl, "é".encode(), b"\xff\xfe")
    members, skipped = read_zip(dl)
    assert [m.name for m in members] == ["lovelaceada_101_9001_answers.json"]
    [refused] = skipped
    assert "UTF-8" in refused.reason and str(refused.path).endswith("turingalan_102_9002_answ\\xff\\xfe.json")
    report = grade_download(key, [dl], _roster(tmp_path))
    assert [r.student for r in report.results] == ["ada"]
    assert len(report.problems) == 1 and "UTF-8" in report.problems[0].message


# ----------------------------------------------------------------------------- names in any script


@pytest.mark.parametrize("name", ["李 小龙", "李小龙", "小龙 李", "李\u3000小龙"])
def test_chinese_names_match_with_or_without_a_space_in_either_order(tmp_path, name):
    roster = _roster(tmp_path, NAMES_ONLY)
    assert [e.student for e in roster.by_name(name)] == ["li"]


def test_names_fold_case_width_and_accents_but_stay_apart(tmp_path):
    roster = _roster(tmp_path, "student,name\nzoe,Zoë Ōtake\nli,李小龙\nming,李小明\n")
    assert [e.student for e in roster.by_name("ZOE OTAKE")] == ["zoe"]
    assert [e.student for e in roster.by_name("Ｏｔａｋｅ，Ｚｏë")] == ["zoe"]
    assert [e.student for e in roster.by_name("小明 李")] == ["ming"]
    assert roster.by_name("李") == [] and roster.by_name("") == []
