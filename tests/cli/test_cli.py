"""The command line, used the way the README shows."""

import json
import re
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from qkvquiz.cli import app

runner = CliRunner()


def generate(tmp_path, *args):
    return runner.invoke(app, ["generate", "attention-basics", "--out", str(tmp_path / "set"), *args])


def test_generate_writes_worksheets_submissions_and_keys(tmp_path):
    result = generate(tmp_path, "--students", "4", "--seed", "9")
    assert result.exit_code == 0, result.output
    out = tmp_path / "set"
    assert (out / "key.json").is_file() and (out / "key.md").is_file()
    for i in range(1, 5):
        folder = out / "students" / f"s{i:02d}"
        sheet = (folder / "worksheet.md").read_text(encoding="utf-8")
        assert f"`s{i:02d}`" in sheet and "Problem 5" in sheet
        blank = json.loads((folder / "submission.json").read_text(encoding="utf-8"))
        assert blank["student"] == f"s{i:02d}" and set(blank["answers"]) >= {"q1.scores", "q5.output"}
    key_md = (out / "key.md").read_text(encoding="utf-8")
    assert key_md.count("## Student") == 4 and "Row 3" in key_md


def test_generate_refuses_to_overwrite_a_key_without_force(tmp_path):
    assert generate(tmp_path, "--students", "2").exit_code == 0
    again = generate(tmp_path, "--students", "2")
    assert again.exit_code != 0 and "--force" in again.output
    assert generate(tmp_path, "--students", "2", "--force").exit_code == 0


def test_roster_file_and_grade_round_trip(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("student,name\nada,Ada L\nalan,Alan T\n", encoding="utf-8")
    assert generate(tmp_path, "--roster", str(roster)).exit_code == 0
    key = json.loads((tmp_path / "set" / "key.json").read_text(encoding="utf-8"))
    subs = tmp_path / "subs"
    subs.mkdir()
    for s in key["students"]:
        (subs / f"{s['student']}.json").write_text(json.dumps({"student": s["student"], "answers": s["answers"]}), encoding="utf-8")
    (subs / "garbage.json").write_text("[1, 2", encoding="utf-8")
    result = runner.invoke(app, ["grade", str(tmp_path / "set" / "key.json"), str(subs), "--out", str(tmp_path / "g")])
    assert result.exit_code == 1  # one file could not be graded; the others were
    assert "garbage.json" in result.output
    rows = (tmp_path / "g" / "results.csv").read_text(encoding="utf-8").strip().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["ada", "alan"]
    assert all(r.split(",")[-2] == r.split(",")[-1] == "13" for r in rows[1:])
    detail = json.loads((tmp_path / "g" / "results.json").read_text(encoding="utf-8"))
    assert detail["problems"][0]["source"].endswith("garbage.json")


def test_bad_spec_is_a_clear_error_not_a_traceback(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("title: x\nitems:\n  - family: attention.output\n    params: {tokens: 0}\n", encoding="utf-8")
    result = runner.invoke(app, ["generate", str(spec), "--students", "1", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "bad.yaml" in result.output and "params.tokens" in result.output
    assert "Traceback" not in result.output


def test_a_missing_spec_file_is_called_missing_by_its_path(tmp_path):
    missing = tmp_path / "week3.yaml"
    for args in (["generate", str(missing), "-n", "1", "--out", str(tmp_path / "o")],
                 ["export", "questions", str(missing), "--out", str(tmp_path / "bank")],
                 ["practice", str(missing), "--no-browser"]):
        result = runner.invoke(app, args)
        said = " ".join(result.output.split())
        assert result.exit_code == 2, (args, result.output)
        assert f"{missing}: no such spec file (it does not exist)" in said and "Traceback" not in said, args
    assert not (tmp_path / "o").exists() and not (tmp_path / "bank").exists()


def test_families_show_and_schema():
    listed = runner.invoke(app, ["families"])
    assert listed.exit_code == 0 and "attention.output" in listed.output
    shown = runner.invoke(app, ["show", "attention.weights", "-p", "mask=causal"])
    assert shown.exit_code == 0 and "Solution" in shown.output
    for which in ("key", "submission"):
        schema = json.loads(runner.invoke(app, ["schema", which]).output)
        assert schema["type"] == "object"


def test_key_and_blank_submission_validate_against_the_shipped_schemas(tmp_path):
    import jsonschema

    assert generate(tmp_path, "--students", "2").exit_code == 0
    key = json.loads((tmp_path / "set" / "key.json").read_text(encoding="utf-8"))
    jsonschema.validate(key, json.loads(runner.invoke(app, ["schema", "key"]).output))
    sub_schema = json.loads(runner.invoke(app, ["schema", "submission"]).output)
    jsonschema.validate(json.loads((tmp_path / "set" / "students" / "s01" / "submission.json").read_text(encoding="utf-8")), sub_schema)
    jsonschema.validate({"student": "s01", "answers": key["students"][0]["answers"]}, sub_schema)


def test_python_dash_m_works():
    result = subprocess.run([sys.executable, "-m", "qkvquiz", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "generate" in result.stdout


def test_regenerating_with_a_smaller_roster_replaces_the_students_folder_wholly(tmp_path):
    # A long folder name: messages read whole whatever the path's length (no wrapping at 80
    # columns where the output is no terminal).
    deep = tmp_path / ("a-long-folder-name-" * 6)
    assert generate(deep, "--students", "3").exit_code == 0
    again = generate(deep, "--students", "2", "--force")
    assert again.exit_code == 0
    assert f"to {deep / 'set'}/students/" in again.output
    assert sorted(p.name for p in (deep / "set" / "students").iterdir()) == ["s01", "s02"]


@pytest.mark.slow
def test_a_large_class_gets_a_summary_line_not_a_table_row_per_student(tmp_path):
    from qkvquiz.cli._common import SUMMARY_TABLE_MAX

    n = SUMMARY_TABLE_MAX + 1
    assert generate(tmp_path, "--students", str(n), "--public").exit_code == 0
    doc = json.loads((tmp_path / "set" / "key.json").read_text(encoding="utf-8"))
    subs = tmp_path / "subs"
    subs.mkdir()
    for s in doc["students"]:
        (subs / f"{s['student']}.json").write_text(json.dumps({"student": s["student"], "answers": s["answers"]}),
                                                   encoding="utf-8")
    result = runner.invoke(app, ["grade", str(tmp_path / "set" / "key.json"), str(subs), "--out", str(tmp_path / "g"),
                                 "--no-feedback"])
    assert result.exit_code == 0, result.output
    assert f"{n} graded; score of 13: mean 13.00, median 13.00" in result.output
    assert "s001 " not in result.output and "┃ student" not in result.output


def test_the_progress_bar_draws_on_a_terminal_and_is_not_even_imported_elsewhere(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from qkvquiz.cli import _common

    # A terminal that moves its cursor, whatever TERM the tests themselves run under.
    monkeypatch.setenv("TERM", "xterm-256color")
    screen = io.StringIO()
    monkeypatch.setattr(_common, "err", Console(file=screen, force_terminal=True, width=100))
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "3", "--out", str(tmp_path / "tty")])
    assert result.exit_code == 0, result.output
    assert "writing worksheets" in screen.getvalue()

    # A dumb terminal (TERM=dumb: an editor's shell) cannot redraw a bar: none is drawn.
    monkeypatch.setenv("TERM", "dumb")
    screen = io.StringIO()
    monkeypatch.setattr(_common, "err", Console(file=screen, force_terminal=True, width=100))
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "3", "--out", str(tmp_path / "dumb")])
    assert result.exit_code == 0, result.output
    assert screen.getvalue() == "", "no bar, and no blank line where a bar was"

    # Not a terminal (a script, a log, CI): nothing drawn, and rich.progress never imported.
    code = (
        "import sys\n"
        "from qkvquiz.cli import app\n"
        f"sys.argv = ['qkvquiz', 'generate', 'attention-basics', '-n', '3', '--out', {str(tmp_path / 'pipe')!r}]\n"
        "try:\n    app()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print('rich.progress' in sys.modules)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "False"
    assert "writing worksheets" not in run.stderr


def test_init_into_a_folder_it_cannot_write_says_so_in_words(tmp_path, monkeypatch):
    import errno

    def read_only(path):
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr("qkvquiz.core.secret.create_secret", read_only)
    result = runner.invoke(app, ["init", str(tmp_path / "secret")])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert f"cannot write the secret to {tmp_path / 'secret'}: Read-only file system" in said
    assert "[Errno" not in said


COMMANDS = [["generate"], ["init"], ["grade"], ["audit"], ["families"], ["specs"], ["show"], ["schema"],
            ["practice"], ["export", "grades"], ["export", "questions"], ["export", "feedback"],
            ["export", "gradescope"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_read_from_a_pipe_fits_80_columns_and_cuts_no_option(command, monkeypatch):
    from qkvquiz.cli import app

    monkeypatch.setenv("COLUMNS", "80")
    result = CliRunner().invoke(app, [*command, "--help"])  # output to a pipe, not a terminal
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(map(len, lines)) <= 80 and not [line for line in lines if line.rstrip(" │").endswith("…")]
    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.commands[name]
    for param in cmd.params:
        if param.param_type_name == "option" and not param.hidden:
            assert all(opt in result.output for opt in param.opts), (command, param.opts)


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_at_80_columns_keeps_every_placeholder_and_path_of_its_options(command, monkeypatch):
    # "Folder for html/STUDENT.html and the zip" once printed as "Folder for html/.html and the
    # zip": a placeholder read as markup and dropped.
    from qkvquiz.cli import app

    monkeypatch.setenv("COLUMNS", "80")
    shown = " ".join(CliRunner().invoke(app, [*command, "--help"]).output.split())
    shown = re.sub(r"(\w)- (\w)", r"\1-\2", shown)  # a hyphenated word wrapped at its hyphen
    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.commands[name]
    for param in cmd.params:
        text = " ".join((getattr(param, "help", None) or "").split())
        for token in re.findall(r"\S*\b[A-Z]{2,}\b\S*|\S+/\S+|<[^>\s]+>", text):
            token = token.strip(".,;:()'\"`")
            assert token in shown, (command, param.name, token)


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 100, 130])
def test_help_on_a_terminal_cuts_no_word_at_any_width(columns):
    # Rich's boxed help cut long words with "…" below about 110 columns ("--allow-missing-…",
    # "~/.config/qkvquiz…"): narrower terminals get the plain help that a pipe gets.
    import os
    import pty

    for command in (["generate"], ["practice"]):
        main, child = pty.openpty()
        env = {**os.environ, "COLUMNS": str(columns), "LINES": "50"}
        proc = subprocess.Popen([sys.executable, "-m", "qkvquiz", *command, "--help"], stdin=child,
                                stdout=child, stderr=child, env=env, close_fds=True)
        os.close(child)
        chunks = []
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=60)
        os.close(main)
        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8", "replace"))
        assert proc.returncode == 0, text
        lines = text.splitlines()
        assert max(len(line) for line in lines) <= columns, (command, columns)
        assert not re.search(r"[^\s,(]…", text), (command, columns, [line for line in lines if "…" in line])
        assert "--allow-missing-fonts" in text or command == ["practice"]
