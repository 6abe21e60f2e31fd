"""A large class's files are read by forked workers, each its share of the files and of their
answers; the report is the one a single process makes, file problems and choices included."""

from __future__ import annotations

import copy
import json
import os

import pytest

from qkvquiz.grade import parallel
from qkvquiz.grade.grader import grade_files
from qkvquiz.grade.report import results_json

from ..helpers import make_key

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


def test_workers_read_the_files_as_one_process_does(tmp_path, monkeypatch):
    ids = [f"s{i:03d}" for i in range(40)]
    key, doc = make_key(students=ids, seed=9)
    folder = tmp_path / "in"
    folder.mkdir()
    paths = []
    for i, s in enumerate(doc["students"]):
        answers = copy.deepcopy(s["answers"])
        part = list(answers)[i % len(answers)]
        kind = i % 8
        if kind == 1:
            answers[part] = json.loads(json.dumps(answers[part]).replace("0.", "0,"))  # text below
            answers[part] = json.dumps(answers[part])
        elif kind == 2:
            answers[part] = [[None] * 2]
        elif kind == 3:
            answers[part] = None
        elif kind == 4:
            answers[part] = "1/3"
        elif kind == 7 and i % 16 == 7:  # a blank file: every part empty
            answers = {name: None for name in answers}
        elif kind == 7:  # an answer under a misspelled part id
            answers[part + "x"] = answers.pop(part)
        body = {"student": s["student"] if kind != 5 else "nobody", "variant": s.get("variant"), "answers": answers}
        path = folder / f"{s['student']}.json"
        path.write_text(json.dumps(body) if kind != 6 else "{not json", encoding="utf-8")
        paths.append(path)
    dup = folder / "s000-again.json"
    dup.write_text(json.dumps({"student": "s000", "answers": doc["students"][1]["answers"]}), encoding="utf-8")
    blank = folder / "s001-blank.json"  # loses to the student's filled file
    blank.write_text(json.dumps({"student": "s001", "variant": doc["students"][1].get("variant"),
                                 "answers": {name: None for name in doc["students"][1]["answers"]}}),
                     encoding="utf-8")
    paths += [dup, blank]
    paths.sort()

    one = grade_files(key, paths)
    monkeypatch.setattr(parallel, "FORK_FROM", 1)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    ticks = []
    many = grade_files(key, paths, progress=lambda: ticks.append(1))
    assert results_json(many) == results_json(one)
    assert [(p.source, p.message) for p in many.problems] == [(p.source, p.message) for p in one.problems]
    assert len(one.problems) >= 2 and len(ticks) == len(paths)
    assert [r.candidates for r in many.results] == [r.candidates for r in one.results]
    assert any("were ignored" in note for r in one.results for note in r.notes)  # the misspelled id
    assert any("blank" in c.why for r in one.results for c in r.candidates)


def test_the_chunks_of_a_pool_come_back_in_order_with_their_bounds(monkeypatch):
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    with parallel.chunks_in_workers(lambda xs: [x * x for x in xs], list(range(23)), chunk=5) as finished:
        got = list(finished())
    assert [(lo, hi) for lo, hi, _ in got] == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 23)]
    assert [y for _, _, ys in got for y in ys] == [x * x for x in range(23)]


def test_no_worker_is_forked_beside_another_thread(monkeypatch):
    import threading

    monkeypatch.setattr(parallel, "FORK_FROM", 1)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    # Threads an earlier test left (the fused engine keeps a pool) are not this test's business.
    count, before = threading.active_count, threading.active_count()
    monkeypatch.setattr(parallel.threading, "active_count", lambda: count() - before + 1)
    assert parallel.forking(10) == parallel.sys.platform.startswith("linux")
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel.forking(10)
    finally:
        stop.set()
        other.join()


def test_read_submissions_in_workers_gives_the_files_in_order(tmp_path, monkeypatch):
    from qkvquiz.grade.grader import read_submissions

    paths = []
    for i in range(12):
        path = tmp_path / f"f{i:02d}.json"
        path.write_text("{broken" if i % 5 == 0 else json.dumps({"student": f"s{i}", "answers": {"a": i}}),
                        encoding="utf-8")
        paths.append(path)
    one = read_submissions(paths)
    monkeypatch.setattr(parallel, "FORK_FROM", 1)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    many = read_submissions(paths)
    assert [(s.source, s.student, dict(s.answers), s.mtime) for s in many[0]] == [
        (s.source, s.student, dict(s.answers), s.mtime) for s in one[0]]
    assert [(p.source, p.message) for p in many[1]] == [(p.source, p.message) for p in one[1]]
