"""Every reader of a grade set finishes a switch that a killed `grade` left half-done, and `grade`
holds its output folder from before it grades, so that of two runs the later one is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.core import outputs
from qkvquiz.core.outputs import SetBusy, claim, write_set
from qkvquiz.exchange.results import load_results
from qkvquiz.grade.grader import grade_files
from qkvquiz.grade.report import write_reports
from qkvquiz.key import key_from_json

from ..helpers import Killed, kill_at_rename, make_key_doc

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX flock")


@pytest.fixture()
def graded(tmp_path):
    doc = make_key_doc(students=("a", "b", "c"))
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    key = key_from_json(doc)
    files = []
    for s in doc["students"]:
        files.append(tmp_path / f"{s['student']}.json")
        files[-1].write_text(json.dumps({"student": s["student"], "answers": s["answers"]}), encoding="utf-8")
    out = tmp_path / "grades"
    write_reports(grade_files(key, files), out)  # the old set: three students
    return key, files, out


@pytest.mark.parametrize("stop_at", [1, 2, 6, 10])  # the journal; the anchor out; anchor out and in between
def test_export_finishes_a_half_switched_grade_set(stop_at, graded, monkeypatch, tmp_path):
    key, files, out = graded
    report = grade_files(key, files[:2])  # the new set: two students
    real = os.replace
    kill_at_rename(monkeypatch, stop_at)
    with pytest.raises(Killed):
        write_reports(report, out)
    monkeypatch.setattr(os, "replace", real)
    assert (out / outputs.JOURNAL).exists()
    assert (out / "results.json").exists() == (stop_at == 1)  # the anchor is out once the switch has begun
    graded = [s for s, r in load_results(out).students.items() if r.score is not None]
    assert sorted(graded) == ["a", "b"]  # the new set, finished as `grade` would finish it
    assert not (out / outputs.JOURNAL).exists()
    result = CliRunner().invoke(app, ["export", "grades", str(out), "--out", str(tmp_path / "g.csv")])
    assert result.exit_code == 0, result.output


def test_grade_holds_its_folder_before_it_grades(graded, tmp_path):
    _key, files, _out = graded
    out = tmp_path / "fresh"
    code = f"""
import time
import qkvquiz.grade.grader as grader
real = grader.grade_files
def slow(*args, **kw):
    print("GRADING", flush=True)
    time.sleep(20)
    return real(*args, **kw)
grader.grade_files = slow
from qkvquiz.cli import app
app({["grade", str(tmp_path / "key.json"), *map(str, files), "--out", str(out)]!r}, prog_name="qkvquiz")
"""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "GRADING", proc.stderr.read()
        with pytest.raises(SetBusy):  # a second run is refused now, while the first still grades
            with write_set(out, {"results.json": False}, anchor="results.json"):
                pass
        result = CliRunner().invoke(app, ["grade", str(tmp_path / "key.json"), str(files[0]), "--out", str(out)])
        assert result.exit_code == 2 and "another qkvquiz run" in result.output
    finally:
        proc.kill()
        proc.wait()


def test_a_claimed_folder_is_written_and_recovered_under_the_claim(tmp_path):
    out = tmp_path / "set"
    with claim(out):
        with claim(out):  # the same process again: no second lock to wait for
            pass
        with write_set(out, {"results.json": False}, anchor="results.json") as files:
            files.write("results.json", "{}")
        outputs.settle(out)
        assert (out / "results.json").read_text() == "{}"
    with write_set(out, {"results.json": False}, anchor="results.json") as files:  # released
        files.write("results.json", "[]")
    start = time.monotonic()
    assert (out / "results.json").read_text() == "[]" and time.monotonic() - start < 5
