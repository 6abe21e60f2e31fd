"""`qkvquiz --help` loads only the command line: what a command needs is imported inside it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from qkvquiz.cli import _common as cli
from qkvquiz.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

# Run `qkvquiz ARGS` as `python -m qkvquiz` does, then print the modules it imported.
PROBE = (
    "import json, runpy, sys\n"
    "sys.argv = ['qkvquiz', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('qkvquiz', run_name='__main__', alter_sys=True)\n"
    "except SystemExit:\n"
    "    pass\n"
    "print('MODULES=' + json.dumps(sorted(sys.modules)))\n"
)


def modules_after(*args: str) -> tuple[str, set[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "COLUMNS": "100"}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    text, _, listed = proc.stdout.rpartition("MODULES=")
    return text, set(json.loads(listed))


def test_help_lists_every_command_without_loading_numpy_families_specs_or_the_grader():
    text, modules = modules_after("--help")
    for command in ("generate", "init", "grade", "audit", "families", "specs", "show", "schema", "export"):
        assert re.search(rf"\b{command}\b", text), command
    heavy = {"numpy", "jinja2", "yaml", "qkvquiz.families", "qkvquiz.spec", "qkvquiz.grade", "qkvquiz.engine",
             "qkvquiz.render", "qkvquiz.capacity", "qkvquiz.core.inputs", "qkvquiz.core.bounded_yaml", "qkvquiz.key"}
    assert not heavy & modules, sorted(heavy & modules)


def test_the_help_of_every_command_and_of_export_still_builds():
    for args in (["generate", "--help"], ["grade", "--help"], ["export", "--help"], ["export", "grades", "--help"],
                 ["show", "--help"], ["audit", "--help"]):
        result = runner.invoke(app, args, env={"COLUMNS": "100"})
        assert result.exit_code == 0, (args, result.output)
        assert "--help" in result.output


def test_grade_help_ends_with_the_default_tolerance_in_words():
    from qkvquiz.core.tolerance import TOLERANCE_DEFAULT

    result = runner.invoke(app, ["grade", "--help"], env={"COLUMNS": "100"})
    flat = " ".join(result.output.split())
    assert TOLERANCE_DEFAULT.describe() in flat
    assert " ".join(cli.tolerance_help().split()) in flat


def test_the_constants_named_in_the_help_are_those_of_their_modules():
    from qkvquiz.engine.backend import BACKENDS
    from qkvquiz.core.secret import SECRET_ENV

    assert cli.BACKEND_NAMES == BACKENDS
    assert cli.SECRET_ENV == SECRET_ENV


def test_grading_a_folder_loads_neither_the_question_banks_nor_the_gradescope_bundle(tmp_path):
    from ..helpers import make_key

    _key, doc = make_key(students=["ada"], seed=1)
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ada.json").write_text(json.dumps({"student": "ada", "answers": doc["students"][0]["answers"]}),
                                   encoding="utf-8")
    text, modules = modules_after("grade", str(tmp_path / "key.json"), str(subs), "--out", str(tmp_path / "out"))
    assert "1 graded" in text or "ada" in text, text
    assert "qkvquiz.exchange.collect" in modules  # what tells a bulk download from plain files
    unused = {"qkvquiz.exchange.questions", "qkvquiz.exchange.question_bank", "qkvquiz.exchange.moodle_xml",
              "qkvquiz.exchange.qti21", "qkvquiz.exchange.canvas_qti", "qkvquiz.exchange.gradescope",
              "qkvquiz.exchange.autograder", "qkvquiz.exchange.gradebook"}
    assert not unused & modules, sorted(unused & modules)


def test_every_name_of_the_exchange_package_is_there_when_asked_for():
    import qkvquiz.exchange as exchange

    assert all(callable(getattr(exchange, name)) for name in exchange.__all__)
    assert set(exchange.__all__) <= set(dir(exchange))
