"""A large class's feedback files are written by a forked worker while this process writes the
summaries: the same files, byte for byte, as written in one process; errors name the file."""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

from qkvquiz.grade import parallel
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import write_reports
from qkvquiz.core.outputs import OutputError

from ..helpers import make_key

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


@pytest.fixture(scope="module")
def report():
    ids = [f"s{i:02d}" for i in range(30)]
    key, doc = make_key(students=ids, seed=4)
    subs = []
    for i, s in enumerate(doc["students"]):
        answers = copy.deepcopy(s["answers"])
        part = list(answers)[i % len(answers)]
        if i % 3 == 0:
            answers[part] = (np.array(answers[part], dtype=float) + 0.5).tolist()
        elif i % 3 == 1:
            answers[part] = "banana"
        subs.append(Submission(f"{s['student']}.json", s["student"], answers))
    return grade(key, subs)


def tree(folder):
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def forked(monkeypatch):
    monkeypatch.setattr(parallel, "FORK_FROM", 1)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    # Threads an earlier test left (the fused engine keeps a pool) would turn forking off.
    count, before = parallel.threading.active_count, parallel.threading.active_count()
    monkeypatch.setattr(parallel.threading, "active_count", lambda: count() - before + 1)
    assert parallel.forking(2)


def test_feedback_written_by_a_worker_is_what_one_process_writes(report, tmp_path, monkeypatch):
    write_reports(report, tmp_path / "one")
    forked(monkeypatch)
    calls = []
    write_reports(report, tmp_path / "two", progress=lambda: calls.append(1))
    assert tree(tmp_path / "two") == tree(tmp_path / "one")
    feedback = {name: mode for name, (_, mode) in tree(tmp_path / "two").items() if name.startswith("feedback/")}
    assert len(feedback) == len(report.results) and set(feedback.values()) == {0o600}  # the workers' own modes
    assert len(calls) == len(report.results)
    assert not list((tmp_path / "two").glob(".qkvquiz-*"))  # staging folder gone


def test_a_feedback_file_that_cannot_be_written_is_named(report, tmp_path, monkeypatch):
    forked(monkeypatch)
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path).endswith("s07.md"):
            raise OSError(28, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(OutputError, match=r"s07\.md.*No space left on device"):
        write_reports(report, tmp_path / "out")
    monkeypatch.setattr(os, "open", real_open)
    assert not (tmp_path / "out" / "results.json").exists()  # nothing of the set was switched in


def test_an_error_in_a_worker_is_raised_here(report, tmp_path, monkeypatch):
    forked(monkeypatch)
    from qkvquiz.grade import feedback

    def broken(self, result):
        raise RuntimeError(f"cannot write feedback for {result.student}")

    monkeypatch.setattr(feedback.FeedbackWriter, "markdown", broken)
    with pytest.raises(RuntimeError, match="cannot write feedback for s00"):
        write_reports(report, tmp_path / "out")
