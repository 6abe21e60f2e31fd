"""One word for "which LMS or format": every `export` names its target with --to (and `grade` the
download's LMS with --from); the old spellings (--format, --moodle-zip, --lms) still work, hidden
from --help, with a note on the new name; both spellings given differently is an error."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from qkvquiz.cli import app

from ..helpers import make_key

runner = CliRunner()
OLD_NAMES = {"--format", "--moodle-zip", "--lms"}


def command(*path: str):
    group = typer.main.get_command(app)
    for name in path:
        group = group.commands[name]
    return group


def visible_options(*path: str) -> set[str]:
    return {o for p in command(*path).params if not getattr(p, "hidden", False) for o in p.opts}


@pytest.mark.parametrize("sub", ["grades", "questions", "feedback"])
def test_every_export_with_a_choice_of_target_names_it_to(sub):
    assert "--to" in visible_options("export", sub)
    assert not visible_options("export", sub) & OLD_NAMES
    shown = runner.invoke(app, ["export", sub, "--help"], env={"COLUMNS": "200"}).output
    assert "--to" in shown and not any(f"{old} " in shown for old in OLD_NAMES)


def test_no_export_offers_an_old_spelling_in_help():
    for name in command("export").commands:
        assert not visible_options("export", name) & OLD_NAMES, name


def test_grade_names_the_downloads_lms_from():
    assert "--from" in visible_options("grade") and "--lms" not in visible_options("grade")


@pytest.mark.parametrize("spelling", [["--to", "moodle"], ["--format", "moodle"]])
def test_export_questions_takes_both_spellings(tmp_path, spelling):
    result = runner.invoke(app, ["export", "questions", "masking", "-n", "1", *spelling, "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["questions-moodle.xml"]
    assert ("old name of --to" in result.output) == (spelling[0] == "--format")


def test_export_questions_refuses_two_spellings_that_disagree(tmp_path):
    result = runner.invoke(app, ["export", "questions", "masking", "--to", "qti", "--format", "moodle",
                                 "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "--to and --format" in result.output
    assert not (tmp_path / "b").exists()


def test_export_questions_in_chinese_titles_the_bank_in_chinese(tmp_path):
    result = runner.invoke(app, ["export", "questions", "masking", "-n", "1", "--to", "moodle", "--lang", "zh",
                                 "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    xml = (tmp_path / "b" / "questions-moodle.xml").read_text(encoding="utf-8")
    assert "带掩码的注意力" in xml and "因果掩码" in xml and "Masked attention" not in xml
    assert "答案：" not in xml  # the worksheet's answer lines give way to the boxes, in Chinese too


@pytest.fixture
def graded(tmp_path):
    key, doc = make_key(students=("ada",))
    key_path = tmp_path / "key.json"
    key_path.write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "ada.json").write_text(json.dumps({"student": "ada", "answers": doc["students"][0]["answers"]}),
                                             encoding="utf-8")
    (tmp_path / "roster.csv").write_text("student,name,moodle_id\nada,Ada,5001\n", encoding="utf-8")
    return key_path


@pytest.mark.parametrize("spelling", [["--from", "none"], ["--lms", "none"]])
def test_grade_takes_both_spellings(tmp_path, graded, spelling):
    result = runner.invoke(app, ["grade", str(graded), str(tmp_path / "in"), *spelling, "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "g" / "results.csv").exists()


@pytest.mark.parametrize("spelling", [["--to", "moodle"], ["--moodle-zip"]])
def test_export_feedback_takes_both_spellings(tmp_path, graded, spelling):
    assert runner.invoke(app, ["grade", str(graded), str(tmp_path / "in"), "--out", str(tmp_path / "g")]).exit_code == 0
    result = runner.invoke(app, ["export", "feedback", str(tmp_path / "g"), "--roster", str(tmp_path / "roster.csv"),
                                 *spelling, "--out", str(tmp_path / "ret")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ret" / "moodle-feedback.zip").exists()


def test_export_feedback_refuses_an_unknown_target(tmp_path, graded):
    result = runner.invoke(app, ["export", "feedback", str(tmp_path), "--to", "blackboard"])
    assert result.exit_code == 2 and "--to must be one of html, moodle" in result.output
