"""The LMS intake against downloads named as Canvas, Moodle and Gradescope name them
(tests/lms_corpus.py), and against what one student can put into one: a file named like
Gradescope's metadata, a name Canvas writes with '_' or that reads two ways, a member name
that is not UTF-8. Names in any script match the roster."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from qkvquiz.exchange.collect import collect, grade_download
from qkvquiz.grade.attribution import LATE_FLAG, MISMATCH_FLAG
from qkvquiz.core.zips import read_zip

from ..lms_corpus import (
    by_student,
    canvas_download,
    canvas_name,
    gradescope_export,
    full,
    gradescope_metadata,
    hand_in,
    moodle_download,
    moodle_path,
    roster_file,
    write_folder,
    write_zip,
)

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


def _roster(tmp_path: Path, text: str = ROSTER):
    return roster_file(tmp_path, text)


# ----------------------------------------------------------------------------- steering files


@pytest.mark.parametrize("layout", ["folders", "folders-old"])
def test_a_moodle_students_file_named_like_gradescopes_metadata_is_refused_and_the_download_stays_moodle(
        tmp_path, class_key, layout):
    key, doc = class_key
    members = moodle_download([
        ("Ada Lovelace", 5001, "answers.json", hand_in(doc, "ada")),
        ("Alan Turing", 5002, "answers.json", hand_in(doc, "alan")),
        ("Grace Hopper", 5003, "answers.json", hand_in(doc, "grace")),
        ("Grace Hopper", 5003, "submission_metadata.yml", gradescope_metadata({"1": [ADA]})),
    ], layout=layout)
    dl = write_zip(tmp_path / "moodle.zip", members)
    roster = _roster(tmp_path)
    assert collect([dl], roster).lms == {str(dl): "moodle"}
    report = grade_download(key, [dl], roster)
    by = by_student(report)
    assert set(by) == {"ada", "alan", "grace"} and all(full(r) for r in by.values())
    [refused] = report.problems
    assert refused.source == f"{dl}/{moodle_path('Grace Hopper', 5003, 'submission_metadata.yml', layout=layout)}"
    assert "root" in refused.message


@pytest.mark.parametrize("unpacked", [False, True])
def test_one_moodle_student_cannot_make_their_folder_pass_for_a_gradescope_export(tmp_path, class_key, unpacked):
    key, doc = class_key
    # Grace alone in the download, her upload laid out like an export that credits it to Ada.
    members = moodle_download([
        ("Grace Hopper", 5003, "submission_metadata.yml", gradescope_metadata({"1": [ADA]})),
        ("Grace Hopper", 5003, "submission_1/answers.json", hand_in(doc, "grace")),
    ])
    dl = write_folder(tmp_path / "dl", members) if unpacked else write_zip(tmp_path / "moodle.zip", members)
    report = grade_download(key, [dl], _roster(tmp_path))
    assert [r.student for r in report.results] == ["grace"]
    assert not report.results[0].flags
    assert [p.source.rsplit("/", 1)[-1] for p in report.problems] == ["submission_metadata.yml"]


@pytest.mark.parametrize("wrapper", ["assignment_4411_export", None])
def test_gradescope_metadata_is_read_only_at_the_exports_root(tmp_path, class_key, wrapper):
    key, doc = class_key
    members = gradescope_export({
        "111": ([ADA], {"answers.json": hand_in(doc, "ada")}),
        "222": ([ALAN], {"answers.json": hand_in(doc, "alan")}),
    }, wrapper=wrapper)
    # Alan's own upload holds a metadata file that swaps the two; it comes last in the zip.
    planted = f"{wrapper + '/' if wrapper else ''}submission_222/submission_metadata.yml"
    members[planted] = gradescope_metadata({"111": [ALAN], "222": [ADA]})
    dl = write_zip(tmp_path / "gs.zip", members)
    report = grade_download(key, [dl], _roster(tmp_path))
    by = by_student(report)
    assert by["ada"].source.endswith("submission_111/answers.json")
    assert by["alan"].source.endswith("submission_222/answers.json")
    assert not by["ada"].flags and not by["alan"].flags
    assert [p.source for p in report.problems] == [f"{dl}/{planted}"]


def test_an_unpacked_gradescope_export_reads_its_root_metadata_and_refuses_a_students(tmp_path, class_key):
    key, doc = class_key
    members = gradescope_export({"111": ([ADA], {"answers.json": hand_in(doc, "ada")}),
                                 "222": ([ALAN], {"answers.json": hand_in(doc, "alan")})})
    members["assignment_4411_export/submission_222/submission_metadata.yml"] = gradescope_metadata({"111": [ALAN]})
    folder = write_folder(tmp_path / "export", members)
    report = grade_download(key, [folder], _roster(tmp_path))
    assert {r.student: r.source.split("/")[-2] for r in report.results} == {"ada": "submission_111",
                                                                           "alan": "submission_222"}
    assert [p.source.split("/")[-2:] for p in report.problems] == [["submission_222", "submission_metadata.yml"]]


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
        canvas_name("Lovelace, Ada", 101, 9001, "answers.json"): hand_in(doc, "ada"),
        canvas_name("Turing, Alan", 102, 9002, "answé.json"): hand_in(doc, "alan"),
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


# ----------------------------------------------------------------------------- Canvas names


def test_canvas_names_that_keep_underscores_are_read(tmp_path, class_key):
    key, doc = class_key
    dl = write_zip(tmp_path / "canvas.zip", canvas_download([
        ("ada_l", 101, 9011, "x.json", hand_in(doc, "ada")),
        ("Turing, Alan", 102, 9012, "my_answers_2.json", hand_in(doc, "alan")),
        ("Hopper_, Grace", 103, 9013, "a.json", hand_in(doc, "grace")),
    ]))
    assert "ada_l_101_9011_x.json" in zipfile.ZipFile(dl).namelist()
    report = grade_download(key, [dl], _roster(tmp_path))
    assert not report.problems
    assert set(by_student(report)) == {"ada", "alan", "grace"}


def test_a_canvas_name_that_reads_as_a_classmates_id_is_not_credited_to_them(tmp_path, class_key):
    key, doc = class_key
    # Ada (user 101) named herself "x_102": her file's name starts like Alan's (user 102).
    dl = write_zip(tmp_path / "canvas.zip", canvas_download([
        ("x_102", 101, 9001, "answers.json", hand_in(doc, "ada", wrong=True)),
    ]))
    report = grade_download(key, [dl], _roster(tmp_path))
    assert not report.results
    assert any("x_102_101_9001" in p.source and "101" in p.message and "102" in p.message for p in report.problems)
    # A name ending in digits that are nobody's id is read the one way that fits the roster.
    dl2 = write_zip(tmp_path / "canvas2.zip", canvas_download([("x_77", 101, 9003, "a.json", hand_in(doc, "ada"))]))
    assert [r.student for r in grade_download(key, [dl2], _roster(tmp_path)).results] == ["ada"]


def test_canvas_anonymous_grading_is_read_as_canvas(tmp_path, class_key):
    key, doc = class_key
    dl = write_zip(tmp_path / "anon.zip", canvas_download([
        (None, None, 9001, "answers.json", hand_in(doc, "ada")),
        (None, None, 9002, "answers.json", hand_in(doc, "alan")),
    ], late=[1], anonymous={0: "Xy7Qz", 1: "Ab3cD"}))
    assert sorted(zipfile.ZipFile(dl).namelist()) == ["LATE_anon_Ab3cD_9002_answers.json",
                                                     "anon_Xy7Qz_9001_answers.json"]
    roster = _roster(tmp_path)
    assert collect([dl], roster).lms == {str(dl): "canvas"}
    report = grade_download(key, [dl], roster)
    by = by_student(report)
    assert set(by) == {"ada", "alan"} and not report.problems
    assert LATE_FLAG in by["alan"].flags and LATE_FLAG not in by["ada"].flags
    assert any("anonymous" in n for n in by["ada"].notes)


def test_anonymous_canvas_files_that_disagree_on_who_they_are_are_not_graded(tmp_path, class_key):
    key, doc = class_key
    dl = write_zip(tmp_path / "anon.zip", canvas_download([
        (None, None, 9001, "answers.json", hand_in(doc, "ada")),
        (None, None, 9002, "other.json", hand_in(doc, "alan")),  # one submission, two students named
        (None, None, 9003, "answers.json", hand_in(doc, "grace")),
        (None, None, 9004, "answers.json", hand_in(doc, "grace", wrong=True)),  # another submission claims grace
    ], anonymous={0: "Xy7Qz", 1: "Xy7Qz", 2: "Ab3cD", 3: "Zz9Kq"}))
    report = grade_download(key, [dl], _roster(tmp_path))
    assert not report.results
    assert len(report.problems) == 4 and all("anon_" in p.message for p in report.problems)


def test_with_a_roster_a_download_without_lms_names_says_the_roster_was_not_used(tmp_path, class_key):
    key, doc = class_key
    dl = write_zip(tmp_path / "plain.zip", {"answers-ada.json": hand_in(doc, "ada")})
    report = grade_download(key, [dl], _roster(tmp_path))
    [result] = report.results
    assert any("roster" in n for n in result.notes)


@pytest.mark.parametrize("ids", [(9004, 9005), (999, 1000)])
def test_a_canvas_resubmission_is_ordered_by_attachment_id(tmp_path, class_key, ids):
    key, doc = class_key
    older, newer = ids
    dl = write_zip(tmp_path / "canvas.zip", canvas_download([
        ("Turing, Alan", 102, older, "submission.json", hand_in(doc, "alan", wrong=True)),
        ("Turing, Alan", 102, newer, "submission.json".replace(".json", "-1.json"), hand_in(doc, "alan")),
    ]))
    report = grade_download(key, [dl], _roster(tmp_path))
    [alan] = report.results
    assert f"_{newer}_" in alan.source and full(alan)
    assert any(str(newer) in n for n in alan.notes)


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


def test_a_chinese_name_is_matched_in_moodle_canvas_and_gradescope_downloads(tmp_path, class_key):
    key, doc = class_key
    roster = _roster(tmp_path, NAMES_ONLY)
    moodle = write_zip(tmp_path / "moodle.zip", moodle_download([("李 小龙", 7004, "answers.json", hand_in(doc, "li"))]))
    canvas = write_zip(tmp_path / "canvas.zip", canvas_download([("李, 小龙", 704, 9001, "a.json", hand_in(doc, "li"))]))
    gs = write_zip(tmp_path / "gs.zip", gradescope_export(
        {"333": ([{"name": "小龙 李", "sid": "X4", "email": "x@example.edu"}], {"a.json": hand_in(doc, "li")})}))
    assert "李小龙_704_9001_a.json" in zipfile.ZipFile(canvas).namelist()
    for dl in (moodle, canvas, gs):
        report = grade_download(key, [dl], roster)
        assert [r.student for r in report.results] == ["li"], (dl.name, report.problems)
        assert not report.problems


# ----------------------------------------------------------------------------- Gradescope groups


def test_every_submitter_of_a_gradescope_group_submission_is_graded(tmp_path, class_key):
    key, doc = class_key
    stranger = {"name": "Somebody Else", "sid": "X9", "email": "x9@example.edu"}
    dl = write_zip(tmp_path / "gs.zip", gradescope_export({
        "111": ([ALAN, ADA, stranger], {"answers.json": hand_in(doc, "ada")}),
        "222": ([{"name": "Grace Hopper", "sid": "S3"}], {"answers.json": hand_in(doc, "grace")}),
    }))
    report = grade_download(key, [dl], _roster(tmp_path))
    by = by_student(report)
    assert set(by) == {"ada", "alan", "grace"} and "alan" not in report.absent
    assert by["alan"].score == by["ada"].score == by["ada"].total
    assert not by["ada"].flags and MISMATCH_FLAG not in by["alan"].flags
    assert any("group" in n and "ada" in n for n in by["alan"].notes)
    [problem] = report.problems
    assert "X9" in problem.message and problem.source.endswith("submission_111/answers.json")
