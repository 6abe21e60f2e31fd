"""results.json is written by one call of the JSON encoder for the class, and reads exactly as
when each student and each part is encoded on its own, whatever the answers hold."""

from __future__ import annotations

import copy
import json

from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.grade.report import _ENCODE, _encode_each, results_json

from ..helpers import make_key


def part_by_part(report) -> str:
    """results.json as written one encoder call per key and per part (the layout it documents)."""
    doc = report.to_json()
    students = sorted(doc.pop("students"), key=lambda s: s["student"])
    problems = doc.pop("problems")
    lines = ["{"] + [f"  {_ENCODE(k)}: {_ENCODE(v)}," for k, v in doc.items()] + ['  "students": [']
    for i, student in enumerate(students):
        parts = student.pop("parts")
        head = ", ".join(f"{_ENCODE(k)}: {_ENCODE(v)}" for k, v in student.items())
        lines.append(f'    {{{head}, "parts": [')
        lines += [f"      {_ENCODE(p)}{',' if k < len(parts) - 1 else ''}" for k, p in enumerate(parts)]
        lines.append(f"    ]}}{',' if i < len(students) - 1 else ''}")
    lines += ["  ],", '  "problems": [']
    lines += [f"    {_ENCODE(p)}{',' if k < len(problems) - 1 else ''}" for k, p in enumerate(problems)]
    return "\n".join(lines + ["  ]", "}"]) + "\n"


def test_results_json_is_the_part_by_part_layout_even_when_answers_hold_objects_named_like_parts():
    students = ["ada", "bob", "cy", "dee"]
    key, doc = make_key(students=students)
    subs = []
    for i, s in enumerate(doc["students"]):
        answers = copy.deepcopy(s["answers"])
        first, second = list(answers)[:2]
        if i == 1:  # an unreadable answer kept as handed in: objects whose first key is "part"
            answers[first] = [{"part": 'x", {"part": '}, {"part": 2, "student": "ada"}]
        if i == 2:
            answers[second] = {"student": [1, {"student": "z"}], "part": "q"}
        subs.append(Submission(f"{s['student']}\u202e.json", s["student"], answers, set_id="other" if i == 3 else None))
    report = grade(key, subs)
    text = results_json(report)
    assert text == part_by_part(report)
    json.loads(text)


def test_encoding_each_object_by_one_call_matches_encoding_them_one_by_one():
    objects = [{"part": "a", "given": [1.5, None, "x, {\"part\": "]}, {"part": "b", "given": {"part": 1}},
               {"part": "c"}]
    assert _encode_each(objects, "part") == [_ENCODE(o) for o in objects]
    assert _encode_each(objects[::2], "part") == [_ENCODE(o) for o in objects[::2]]
    assert _encode_each([{"b": 1, "part": 2}, {"part": 3}], "part") == ['{"b": 1, "part": 2}', '{"part": 3}']
    assert _encode_each([], "part") == []
