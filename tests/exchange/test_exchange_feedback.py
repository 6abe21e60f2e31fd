"""Feedback pages and Moodle's feedback zip, checked against Moodle's importer's reading of names."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.exchange.feedback_export import feedback_pages, moodle_feedback_zip
from qkvquiz.exchange.results import load_results
from qkvquiz.core.submissions import submission_from_json
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import write_reports
from qkvquiz.roster import read_roster_entries

from ..helpers import make_key

ROSTER = ("student,name,moodle_id\n"
          "ada,Ada_Lovelace <b>,5001\n"
          "Alan,Alan Turing,5002\n"
          "alan,Alan Other,\n")


def graded(tmp_path: Path):
    key, doc = make_key(students=("ada", "Alan", "alan"))
    subs = [submission_from_json({"student": s["student"], "answers": s["answers"]}, f"{s['student']}.json")
            for s in doc["students"]]
    write_reports(grade(key, subs), tmp_path / "g")
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    return load_results(tmp_path / "g"), read_roster_entries(tmp_path / "roster.csv")


def moodle_reading(path: str) -> tuple[str, str, str, str] | None:
    """importziplib.php's is_valid_filename_for_import: the first path part with 4+ '_' fields."""
    parts = path.split("/")
    while parts:
        info = parts.pop(0).split("_", 4)
        if len(info) >= 4 and info[1].isdigit():
            return info[1], info[2], info[3], "/".join([info[4] if len(info) == 5 else "", *parts]).lstrip("/")
    return None


def test_pages_and_moodle_zip(tmp_path):
    results, roster = graded(tmp_path)
    pages, missing = feedback_pages(results, roster)
    assert not missing and {p.student for p in pages} == {"ada", "Alan", "alan"}
    ada = next(p for p in pages if p.student == "ada")
    assert "<!DOCTYPE html>" in ada.html and "Ada_Lovelace &lt;b&gt;" in ada.html and "<b>" not in ada.html
    data, left_out = moodle_feedback_zip(pages, roster)
    assert left_out == ["alan"]
    names = zipfile.ZipFile(__import__("io").BytesIO(data)).namelist()
    readings = sorted(moodle_reading(n) for n in names)
    assert readings == [("5001", "assignfeedback", "file", "feedback.html"),
                        ("5002", "assignfeedback", "file", "feedback.html")]
    assert any(n.startswith("Ada Lovelace b_5001_") for n in names)  # '_' and '<>' never reach the name


def test_cli_feedback(tmp_path):
    graded(tmp_path)
    result = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--roster", str(tmp_path / "roster.csv"),
                                      "--to", "moodle", "--out", str(tmp_path / "ret")])
    assert result.exit_code == 0, result.output
    assert "alan" in result.output  # left out of the zip, said so
    html_files = sorted(p.name for p in (tmp_path / "ret" / "html").iterdir())
    assert len(html_files) == 3
    for p in (tmp_path / "ret" / "html").iterdir():
        assert os.stat(p).st_mode & 0o077 == 0
    none = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--to", "moodle"])
    assert none.exit_code == 2 and "moodle_id" in none.output


def test_exported_feedback_keeps_the_language_it_was_graded_in(tmp_path):
    key, doc = make_key(students=("ada",))
    subs = [submission_from_json({"student": "ada", "answers": doc["students"][0]["answers"]}, "ada.json")]
    write_reports(grade(key, subs, lang="zh"), tmp_path / "g")
    assert load_results(tmp_path / "g").lang == "zh"
    result = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--out", str(tmp_path / "ret")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "ret" / "html" / "ada.html").read_text(encoding="utf-8")
    # The page says it is Chinese (a PDF then sets it with a Chinese font's Simplified forms).
    assert '<html lang="zh-Hans">' in page and "反馈" in page


def test_chinese_feedback_pdfs_without_a_cjk_font_stop_before_anything_is_written(tmp_path, monkeypatch):
    # As `generate` does (tests/render/test_cjk_typesetting.py): the font lookup finds no CJK font.
    from qkvquiz.render import fonts

    key, doc = make_key(students=("ada",))
    subs = [submission_from_json({"student": "ada", "answers": doc["students"][0]["answers"]}, "ada.json")]
    write_reports(grade(key, subs, lang="zh"), tmp_path / "g")
    monkeypatch.setattr(fonts, "cjk_fonts", lambda: ())
    out = tmp_path / "ret"
    result = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--pdf", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.output.count("fonts-noto-cjk") == 1 and "--allow-missing-fonts" in result.output
    assert not out.exists()  # no pages, no PDFs: nothing half written
    # Without --pdf no font is needed; with --allow-missing-fonts the PDFs are written, said once.
    result = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--out", str(out)])
    assert result.exit_code == 0 and "fonts-noto-cjk" not in result.output, result.output
    result = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--pdf", "--allow-missing-fonts",
                                      "--out", str(tmp_path / "ret2")])
    assert result.exit_code == 0, result.output
    assert result.output.count("fonts-noto-cjk") == 1
    assert (tmp_path / "ret2" / "pdf" / "ada.pdf").is_file()


def test_a_moodle_zip_for_a_roster_without_any_moodle_id_is_refused_before_writing(tmp_path):
    graded(tmp_path)
    (tmp_path / "no-ids.csv").write_text("student,name\nada,Ada\nAlan,Alan\nalan,alan\n", encoding="utf-8")
    out = tmp_path / "ret"
    result = CliRunner().invoke(app, ["export", "feedback", str(tmp_path / "g"), "--roster", str(tmp_path / "no-ids.csv"),
                                      "--to", "moodle", "--out", str(out)])
    assert result.exit_code == 2 and "--to moodle" in result.output and "moodle_id" in result.output, result.output
    assert not out.exists()  # no pages and no empty zip
    results, roster = load_results(tmp_path / "g"), read_roster_entries(tmp_path / "no-ids.csv")
    with pytest.raises(ValueError, match="moodle_id"):
        moodle_feedback_zip(feedback_pages(results, roster)[0], roster)


def test_the_feedback_help_names_its_files(tmp_path):
    result = CliRunner().invoke(app, ["export", "feedback", "--help"], terminal_width=200)
    assert "html/STUDENT.html" in result.output and "pdf/STUDENT.pdf" in result.output
