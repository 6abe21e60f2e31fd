"""One student's flood: a download in which one student uploaded thousands of files costs that
student their excess, never the class its grading; ids that name no one are answered from an
index, not by a scan of the class per file."""

from __future__ import annotations

import importlib
import json
import zipfile
from pathlib import Path

from qkvquiz.core import zips
from qkvquiz.exchange.collect import MAX_FILES_PER_STUDENT, collect, grade_collected
from qkvquiz.grade import choose
from qkvquiz.grade.choose import KnownStudents, unknown_student_message

from ..lms_corpus import ZIP_TIME, answers_of, canvas_name, moodle_path, roster_file, write_folder

ROSTER = "student,name,canvas_id,moodle_id\nada,Ada Lovelace,101,5001\nalan,Alan Turing,102,5002\n" \
         "grace,Grace Hopper,103,5003\n"
FLOOD = 3 * MAX_FILES_PER_STUDENT + 7


def _roster(tmp_path: Path):
    return roster_file(tmp_path, ROSTER)


def _canvas_flood(path: Path, doc: dict) -> Path:
    """Canvas' zip (content_zipper.rb names) where alan uploaded FLOOD files, his real answers last."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for sortable, user, attachment, student in (("Lovelace, Ada", 101, 9001, "ada"),
                                                    ("Hopper, Grace", 103, 9002, "grace")):
            zf.writestr(zipfile.ZipInfo(canvas_name(sortable, user, attachment, "answers.json"), ZIP_TIME),
                        json.dumps(answers_of(doc, student)))
        for i in range(FLOOD):  # junk first, the real hand-in the latest upload
            real = i == FLOOD - 1
            data = json.dumps(answers_of(doc, "alan", wrong=not real))
            zf.writestr(zipfile.ZipInfo(canvas_name("Turing, Alan", 102, 20000 + i, f"a{i}.json"), ZIP_TIME), data)
    return path


def test_one_students_flood_refuses_their_excess_not_the_class(tmp_path, class_key, monkeypatch):
    key, doc = class_key
    read_sizes = []
    real_read = zips.ZipMember

    def counting(name, data, mtime):  # every member read into memory passes here
        read_sizes.append(name)
        return real_read(name, data, mtime)

    monkeypatch.setattr(zips, "ZipMember", counting)
    collected = collect([_canvas_flood(tmp_path / "canvas.zip", doc)], _roster(tmp_path))
    alan_read = [n for n in read_sizes if "_102_" in n]
    assert len(alan_read) == MAX_FILES_PER_STUDENT  # the excess is never read
    assert len(read_sizes) == MAX_FILES_PER_STUDENT + 2
    [problem] = [p for p in collected.problems if "at most" in p.message]
    assert f"{FLOOD:,} files" in problem.message and f"other {FLOOD - MAX_FILES_PER_STUDENT}" in problem.message
    report = grade_collected(key, collected)
    graded = {r.student: r for r in report.results}
    assert set(graded) == {"ada", "alan", "grace"}  # the class is graded, alan on his latest upload
    assert all(r.score == r.total for r in graded.values())


def test_the_limit_on_bytes_holds_for_an_unpacked_moodle_folder(tmp_path, class_key, monkeypatch):
    key, doc = class_key
    monkeypatch.setattr(importlib.import_module("qkvquiz.exchange.collect"), "MAX_BYTES_PER_STUDENT", 40_000)
    real = json.dumps(answers_of(doc, "grace"))
    members = {moodle_path("Ada Lovelace", 5001, "answers.json"): json.dumps(answers_of(doc, "ada"))}
    for i in range(20):
        members[moodle_path("Grace Hopper", 5003, f"pad{i:02d}.json")] = json.dumps(
            {**answers_of(doc, "grace", wrong=True), "padding": "x" * 5_000})
    folder = write_folder(tmp_path / "moodle", members)
    (folder / moodle_path("Grace Hopper", 5003, "answers.json")).write_text(real, encoding="utf-8")
    collected = collect([folder], _roster(tmp_path))
    grace = [h for h in collected.handins if h.student == "grace"]
    assert 0 < sum(len(h.data) for h in grace) <= 40_000
    assert any("grace" not in p.source and "Grace Hopper_5003" in p.source and "at most" in p.message
               for p in collected.problems)
    graded = {r.student: r for r in grade_collected(key, collected).results}
    assert set(graded) == {"ada", "grace"} and graded["ada"].score == graded["ada"].total


def test_ids_that_name_no_one_are_answered_from_an_index_not_a_scan(monkeypatch):
    students = [f"s{i:05d}" for i in range(10_000)]
    calls = []
    real = choose.lookalike_key

    def counted(text):
        calls.append(text)
        return real(text)

    monkeypatch.setattr(choose, "lookalike_key", counted)
    known = KnownStudents(students)
    key = type("K", (), {"students": students})()
    messages = [unknown_student_message(key, f"stranger-{i}", known) for i in range(3_000)]
    assert len(calls) <= len(students) + 3_000  # the class once, then one look-up per unknown id
    assert "did you mean 's00012'" in unknown_student_message(key, "s0012", known)
    assert "did you mean 's00012'" in unknown_student_message(key, "S00012", known)
    assert "did you mean" not in messages[0]
