"""A generated Gradescope bundle, run locally on a folder laid out as Gradescope's /autograder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.exchange.gradescope import RUNTIME_PACKAGES, VISIBILITIES

from .helpers import make_key

ROSTER = "student,name,email,sis_id\nada,Ada Lovelace,ada@example.edu,S1\nalan,Alan Turing,alan@example.edu,S2\n"


def autograder(tmp_path: Path, roster: bool) -> tuple[Path, dict]:
    _key, doc = make_key(students=("ada", "alan"))
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "roster.csv").write_text(ROSTER, encoding="utf-8")
    args = ["export", "gradescope", str(tmp_path / "key.json"), "--out", str(tmp_path / "ag.zip")]
    if roster:
        args += ["--roster", str(tmp_path / "roster.csv")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert os.stat(tmp_path / "ag.zip").st_mode & 0o077 == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "ag.zip") as zf:
        names = zf.namelist()
        assert {"setup.sh", "run_autograder", "key.json", "requirements.txt"} <= set(names)  # at the zip's top
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    return root, doc


def run_bundle(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"QKVQUIZ_AUTOGRADER_ROOT": str(root), "QKVQUIZ_PYTHON": sys.executable})
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=root, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def check_format(doc: dict) -> None:
    """Gradescope's results.json: a score, tests with name/score/max_score/output/visibility."""
    assert isinstance(doc["score"], (int, float))
    for test in doc["tests"]:
        assert set(test) <= {"name", "score", "max_score", "output", "visibility", "status", "name_format",
                             "number", "tags", "extra_data", "output_format"}
        assert test["visibility"] in VISIBILITIES and isinstance(test["name"], str)
    assert doc["visibility"] in VISIBILITIES


def test_bundle_grades_a_submission(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    entry = doc["students"][1]  # alan, who writes ada's id by mistake: Gradescope's identity wins
    hand_in = {"student": "ada", "variant": entry["variant"], "answers": entry["answers"]}
    (root / "submission" / "submission.json").write_text(json.dumps(hand_in), encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps(
        {"id": 1, "users": [{"email": "alan@example.edu", "id": 7, "name": "Alan Turing"}]}), encoding="utf-8")
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == pytest.approx(sum(p["points"] for i in doc["items"] for p in i["parts"]))
    parts = [t for t in result["tests"] if t["name"] != "Summary"]
    assert len(parts) == sum(len(i["parts"]) for i in doc["items"])
    assert all(t["visibility"] == "after_due_date" and t["score"] == t["max_score"] for t in parts)
    summary = next(t for t in result["tests"] if t["name"] == "Summary")
    assert summary["visibility"] == "visible" and "'alan'" in summary["output"]


def test_bundle_wrong_answers_show_expected_only_in_hidden_tests(tmp_path):
    root, doc = autograder(tmp_path, roster=False)
    entry = doc["students"][0]
    answers = {k: (0 if not isinstance(v, list) else json.loads(json.dumps(v).replace("1", "7")))
               for k, v in entry["answers"].items()}
    (root / "submission" / "a.json").write_text(json.dumps({"student": "ada", "answers": answers}), encoding="utf-8")
    result = run_bundle(root)
    check_format(result)
    summary = next(t for t in result["tests"] if t["name"] == "Summary")
    assert "Expected" not in summary["output"] and "Expected" not in result["output"]
    assert any("Expected" in t["output"] for t in result["tests"] if t["name"] != "Summary")


def test_bundle_without_a_json_file(tmp_path):
    root, _ = autograder(tmp_path, roster=False)
    (root / "submission" / "notes.txt").write_text("hi", encoding="utf-8")
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == 0 and "No .json file" in result["output"]


def test_runtime_packages_are_all_grading_needs():
    code = ("import sys; import qkvquiz.exchange.gradescope as g, qkvquiz.grade.grader, qkvquiz.grade.choose, "
            "qkvquiz.roster, qkvquiz.key; "
            "print(sorted({m.split('.')[0] for m in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    imported = set(eval(out))
    third_party = {"numpy", "jinja2", "markupsafe", "yaml"}
    assert {"yaml" if p == "pyyaml" else p for p in RUNTIME_PACKAGES} == third_party
    heavy = {"weasyprint", "ziamath", "typer", "rich", "markdown_it", "jsonschema"} & imported
    assert not heavy, heavy
