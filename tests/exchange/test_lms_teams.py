"""Moodle team submissions, named as Moodle's downloader names them (``mod/assign``
``downloader.php``, ``get_student_prefix``): ``<group name>_<group id>_assignsubmission_file/`` for
a group, ``Default group_assignsubmission_file/`` for the students in none. The group's id is
Moodle's id of the group, which may equal a participant's id: it is never read as one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qkvquiz.exchange.collect import grade_download
from qkvquiz.roster import with_moodle_groups

from ..lms_corpus import STUDENTS, by_student, full, hand_in, moodle_download, moodle_team_path, roster_file, \
    write_folder, write_zip

# li's participant id, 5004, is also the id of group "Team Red" in the collision tests.
ROSTER = (
    "student,name,email,moodle_id\n"
    "ada,Ada Lovelace,ada@example.edu,5001\n"
    "alan,Alan Turing,alan@example.edu,5002\n"
    "grace,Grace Hopper,grace@example.edu,5003\n"
    "li,李小龙,li@example.edu,5004\n"
)
GROUPS = {"ada": "Team Red", "alan": "Team Red", "grace": "Team Blue"}


def _roster(tmp_path: Path, groups: dict[str, str] | None = GROUPS, ids: dict[str, str] | None = None):
    lines = ROSTER.splitlines()
    if groups is not None:
        lines[0] += ",group" + (",group_id" if ids else "")
        for i, line in enumerate(lines[1:], start=1):
            student = line.split(",")[0]
            lines[i] += "," + groups.get(student, "") + ("," + ids.get(student, "") if ids else "")
    return roster_file(tmp_path, "\n".join(lines) + "\n")


@pytest.mark.parametrize("layout", ["folders", "folders-old", "flat"])
def test_a_teams_folder_credits_every_member_of_its_group_and_no_one_else(tmp_path, class_key, layout):
    key, doc = class_key
    members = {moodle_team_path("Team Red", 77, "answers.json", layout=layout): hand_in(doc, "ada"),
               moodle_team_path("Team Blue", 78, "answers.json", layout=layout): hand_in(doc, "grace")}
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path))
    graded = by_student(report)
    assert set(graded) == {"ada", "alan", "grace"}, report.problems
    assert all(full(graded[s]) for s in graded)
    # alan's result is the team's file, graded once against ada's variant, with a note saying so.
    assert graded["alan"].source == graded["ada"].source
    assert any("Moodle group 77" in n for n in graded["alan"].notes)
    assert not report.problems


def test_a_group_id_equal_to_a_participant_id_is_the_group_not_that_participant(tmp_path, class_key):
    key, doc = class_key
    # Team Red's id in Moodle is 5004, li's participant id: li is not in the team.
    members = {moodle_team_path("Team Red", 5004, "answers.json"): hand_in(doc, "ada")}
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path))
    graded = by_student(report)
    assert set(graded) == {"ada", "alan"}
    assert "li" not in graded


def test_without_groups_in_the_roster_a_team_folder_is_refused_not_given_to_the_participant_with_its_id(
        tmp_path, class_key):
    key, doc = class_key
    members = {moodle_team_path("Team Red", 5004, "answers.json"): hand_in(doc, "ada")}
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path, groups=None))
    assert report.results == []
    assert len(report.problems) == 1
    message = report.problems[0].message
    assert "moodle_id 5004" in message and "'Team Red'" in message and "--groups" in message


def test_the_roster_group_id_decides_where_given(tmp_path, class_key):
    key, doc = class_key
    # Two groups print alike once Moodle has cleaned their names; the ids tell them apart.
    groups = {"ada": "R&D", "alan": "R&D", "grace": "R_D"}
    ids = {"ada": "77", "alan": "77", "grace": "78"}
    members = {moodle_team_path("R&D", 77, "answers.json"): hand_in(doc, "alan"),
               moodle_team_path("R_D", 78, "answers.json"): hand_in(doc, "grace")}
    assert list(members)[0].startswith("Ramp;D_77_")  # format_string's &amp;, cleaned
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path, groups, ids))
    graded = by_student(report)
    assert set(graded) == {"ada", "alan", "grace"}, report.problems
    assert graded["ada"].source == graded["alan"].source != graded["grace"].source


def test_the_default_group_is_the_students_in_no_group(tmp_path, class_key):
    key, doc = class_key
    members = {moodle_team_path(None, None, "answers.json"): hand_in(doc, "li"),
               moodle_team_path("Team Red", 77, "answers.json"): hand_in(doc, "ada")}
    assert list(members)[0] == "Default group_assignsubmission_file/answers.json"
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path))
    graded = by_student(report)
    assert set(graded) == {"ada", "alan", "li"}, report.problems
    assert full(graded["li"]) and "grace" not in graded


def test_the_default_group_without_groups_in_the_roster_is_graded_as_the_student_it_names_and_said(
        tmp_path, class_key):
    key, doc = class_key
    members = {moodle_team_path(None, None, "answers.json"): hand_in(doc, "grace")}
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path, groups=None))
    graded = by_student(report)
    assert set(graded) == {"grace"}
    assert any("default group" in n for n in graded["grace"].notes)


def test_a_student_in_two_groups_is_in_moodles_default_group_not_a_team(tmp_path, class_key):
    key, doc = class_key
    roster = _roster(tmp_path)
    groups_csv = tmp_path / "groups.csv"
    groups_csv.write_text("Group name,Full name,Email address\nTeam Blue,Alan Turing,alan@example.edu\n",
                          encoding="utf-8")
    roster, unmatched = with_moodle_groups(roster, groups_csv)
    assert unmatched == []
    members = {moodle_team_path("Team Red", 77, "answers.json"): hand_in(doc, "ada"),
               moodle_team_path(None, None, "answers.json"): hand_in(doc, "li")}
    graded = by_student(grade_download(key, [write_zip(tmp_path / "teams.zip", members)], roster))
    assert graded["ada"].source != graded["alan"].source == graded["li"].source


def test_moodles_list_of_group_members_gives_the_teams(tmp_path, class_key):
    key, doc = class_key
    roster = _roster(tmp_path, groups=None)
    groups_csv = tmp_path / "groups.csv"
    groups_csv.write_text(
        "Course full name with link,Group name,Full name,Email address\n"
        "Attention 101,Team Red,Ada Lovelace,ada@example.edu\n"
        "Attention 101,Team Red,Alan Turing,ALAN@example.edu\n"
        "Attention 101,Team Blue,Grace Hopper,\n"
        "Attention 101,Team Blue,Someone Else,someone@example.edu\n", encoding="utf-8")
    roster, unmatched = with_moodle_groups(roster, groups_csv)
    assert len(unmatched) == 1 and "line 5" in unmatched[0]
    members = {moodle_team_path("Team Red", 5004, "answers.json"): hand_in(doc, "alan"),
               moodle_team_path("Team Blue", 78, "answers.json"): hand_in(doc, "grace")}
    folder = write_folder(tmp_path / "unpacked", members)
    graded = by_student(grade_download(key, [folder], roster))
    assert set(graded) == {"ada", "alan", "grace"}


def test_an_individual_folder_whose_name_fits_its_participant_is_still_theirs(tmp_path, class_key):
    key, doc = class_key
    members = moodle_download([("Ada Lovelace", 5001, "answers.json", hand_in(doc, "ada")),
                               ("Turing Alan", 5002, "answers.json", hand_in(doc, "alan"))])
    graded = by_student(grade_download(key, [write_zip(tmp_path / "m.zip", members)], _roster(tmp_path, groups=None)))
    assert set(graded) == {"ada", "alan"}


def test_a_team_with_several_files_credits_only_the_members_they_name(tmp_path, class_key):
    key, doc = class_key
    groups = {"ada": "Team Red", "alan": "Team Red", "grace": "Team Red"}
    members = {moodle_team_path("Team Red", 77, "ada.json"): hand_in(doc, "ada"),
               moodle_team_path("Team Red", 77, "alan.json"): hand_in(doc, "alan")}
    report = grade_download(key, [write_zip(tmp_path / "teams.zip", members)], _roster(tmp_path, groups))
    graded = by_student(report)
    assert set(graded) == {"ada", "alan"}  # each their own file; grace is named by neither
    [problem] = report.problems
    assert "none names 'grace'" in problem.message and "Moodle group 77" in problem.message


def test_grade_groups_option_reads_moodles_list_of_group_members(tmp_path, class_key):
    from typer.testing import CliRunner

    from qkvquiz.cli import app
    from ..helpers import make_key_doc

    doc = make_key_doc(students=STUDENTS)
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    _roster(tmp_path, groups=None)  # writes roster.csv
    (tmp_path / "groups.csv").write_text("Group name,Email address\nTeam Red,ada@example.edu\n"
                                         "Team Red,alan@example.edu\nTeam Red,nobody@example.edu\n", encoding="utf-8")
    dl = write_zip(tmp_path / "teams.zip", {moodle_team_path("Team Red", 5004, "answers.json"): hand_in(doc, "ada")})
    args = ["grade", str(tmp_path / "key.json"), str(dl), "--roster", str(tmp_path / "roster.csv"), "--out",
            str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*args, "--groups", str(tmp_path / "groups.csv")])
    assert result.exit_code == 0, result.output
    graded = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert sorted(s["student"] for s in graded["students"]) == ["ada", "alan"]
    assert "line 4" in " ".join(result.output.split())  # the member the roster lacks, said
    without = CliRunner().invoke(app, [*args[:3], "--groups", str(tmp_path / "groups.csv"), "--out",
                                       str(tmp_path / "o2")])
    assert without.exit_code == 2 and "--groups needs --roster" in without.output
