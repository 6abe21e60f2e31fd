"""`qkvquiz practice` on the command line: a static site written as one set, and every bad input
one message with exit status 2, never a traceback."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from qkvquiz.cli import app


def run(*args: str):
    return CliRunner().invoke(app, ["practice", *args])


def test_a_static_site_is_written_and_not_replaced_without_force(tmp_path):
    out = tmp_path / "site"
    result = run("attention.scores", "--static", "2", "--out", str(out), "--seed", "cli", "--lang", "zh")
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text(encoding="utf-8")
    assert '<html lang="zh-Hans">' in page and "练习题是公开的" in page
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert csp.startswith("default-src 'none'") and "connect-src" not in csp and "http" not in csp
    assert "public" in result.output
    # The instructor who publishes it is told that its source carries every answer (in English:
    # command-line messages stay English whatever the page's language).
    assert "carries every answer in its source" in " ".join(result.output.split())
    again = run("attention.scores", "--static", "2", "--out", str(out))
    assert again.exit_code == 2 and "--force" in again.output
    assert run("attention.scores", "--static", "2", "--out", str(out), "--force").exit_code == 0


def test_bad_input_is_one_message_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("title: x\nitems:\n  - family: attention.nope\n", encoding="utf-8")
    cases = [
        (["attention.nope", "--no-browser"], "neither a family"),
        ([str(bad), "--no-browser"], "bad.yaml"),
        (["attention.scores", "--static", "2"], "--static N needs --out"),
        (["attention.scores", "--out", str(tmp_path / "o")], "go with --static"),
        (["attention.scores", "--seed", "../x", "--no-browser"], "--seed"),
        (["attention.scores", "--lang", "xx", "--no-browser"], "--lang"),
        (["attention.scores", "--static", "0", "--out", str(tmp_path / "o")], "0"),
    ]
    for args, words in cases:
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.output and "Traceback" not in result.output, (args, result.output)
