"""Every HTML page a person opens lays out at the device's width with the one screen stylesheet.

Without a viewport a phone lays a page out 980 px wide and shrinks its text to a few pixels;
the pages students open from their LMS (worksheet, feedback) are read on phones more than
anywhere. The browser checks of the same pages (width, text size, focus) are in
test_pages_in_browser.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.practice.pages import page_html
from qkvquiz.practice.topics import family_topic
from qkvquiz.render.page import SCREEN_STYLE_OPEN, VIEWPORT_META, screen_stylesheet_text

BANK = Path(__file__).resolve().parents[2] / "problem_bank"


def _pages(tmp_path: Path) -> list[Path]:
    runner = CliRunner()
    out = tmp_path / "set"
    result = runner.invoke(app, ["generate", str(BANK / "attention-basics.yaml"), "--students", "2", "--seed", "v",
                                 "--public", "--format", "md,html", "--out", str(out)])
    assert result.exit_code == 0, result.output
    key = json.loads((out / "key.json").read_text(encoding="utf-8"))
    subs = tmp_path / "subs"
    subs.mkdir()
    for student in key["students"]:
        (subs / f"{student['student']}.json").write_text(json.dumps(
            {"student": student["student"], "answers": student["answers"]}), encoding="utf-8")
    result = runner.invoke(app, ["grade", str(out / "key.json"), str(subs), "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["export", "feedback", str(tmp_path / "g"), "--out", str(tmp_path / "back")])
    assert result.exit_code == 0, result.output
    return sorted(out.rglob("*.html")) + sorted((tmp_path / "back").rglob("*.html"))


def test_every_page_written_has_a_viewport_and_the_screen_stylesheet(tmp_path):
    pages = _pages(tmp_path)
    kinds = {p.name if p.parent.name != "html" else "feedback" for p in pages}
    assert kinds == {"key.html", "worksheet.html", "answer-form.html", "feedback"}
    screen = screen_stylesheet_text()
    for path in pages:
        text = path.read_text(encoding="utf-8")
        head = text[:text.index("</head>")]
        assert VIEWPORT_META in head, path
        assert f"{SCREEN_STYLE_OPEN}\n{screen}" in head, path


def test_the_practice_page_has_the_same_viewport_and_screen_stylesheet():
    text = page_html([family_topic("attention.scores")], mode="server", lang="en")
    assert VIEWPORT_META in text
    assert f"{SCREEN_STYLE_OPEN}\n{screen_stylesheet_text()}" in text

