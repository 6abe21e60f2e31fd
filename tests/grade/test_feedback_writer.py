"""A class's feedback files written by FeedbackWriter are the bytes feedback.md.j2 renders."""

from __future__ import annotations

import copy
import hashlib

import numpy as np
import pytest
import yaml

from qkvquiz.families import Env
from qkvquiz.grade import feedback as fb
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.checks import carried_inputs, rerun_on_own
from qkvquiz.grade.grader import grade
from qkvquiz.core.i18n import using
from qkvquiz.key import encode, key_from_json, key_to_json
from qkvquiz.core.resources import bank_dir, templates_dir
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet


def varied_class():
    """Every family of the bank, 24 students, and answers of every kind: right, slipped in one
    entry or in many (more than the listed ones), a known mistake's value, text, blank boxes,
    the wrong shape, nothing, an answer under a near id, a file of another set, a copy."""
    doc = yaml.safe_load((bank_dir() / "all-families.yaml").read_text(encoding="utf-8"))
    doc["items"] += [
        {"family": "attention.output", "id": "big", "params": {"tokens": 5}},  # more wrong entries than listed
        {"family": "attention.output", "id": "some", "params": {"queries": 2, "keys": 3},  # entries not asked: —
         "ask": {"scores": {"points": 2, "entries": [[1, 2], [1, 3]]}, "weights": {"rows": [1]}}},
    ]
    spec = parse_spec(doc, source="all-families.yaml")
    ids = [f"s{i:02d}" for i in range(24)]
    doc = key_to_json(build_worksheet(spec, ids, seed="feedback"))
    key = key_from_json(doc)
    subs = []
    for i, student in enumerate(doc["students"]):
        source = doc["students"][(i + 1) % len(ids)] if i % 11 == 5 else student  # a copy
        answers = copy.deepcopy(source["answers"])
        for k, part in enumerate(list(answers)):
            kind = (i + 3 * k) % 9
            value = answers[part]
            arr = np.array(value, dtype=object)
            if kind == 1:  # one entry off
                flat = arr.reshape(-1)
                if flat.size and not isinstance(flat[0], str):
                    flat[0] = float(flat[0]) + 0.5
                answers[part] = flat.reshape(arr.shape).tolist()
            elif kind == 2:  # every entry off: more wrong entries than are listed
                answers[part] = np.vectorize(lambda x: x if isinstance(x, str) else float(x) * 1.7 + 0.3,
                                             otypes=[object])(arr).tolist()
            elif kind == 3 and i % 2:
                answers[part] = "banana"
            elif kind == 4 and i % 3 == 0:
                answers[part] = None
            elif kind == 5 and arr.ndim >= 1 and arr.size > 1:  # some boxes left blank
                flat = arr.reshape(-1)
                flat[-1] = None
                answers[part] = flat.reshape(arr.shape).tolist()
            elif kind == 6 and i % 4 == 1:  # under a near id
                answers[part.upper()] = answers.pop(part)
            elif kind == 7:  # text forms
                answers[part] = np.vectorize(str, otypes=[object])(arr).tolist() if arr.ndim else str(value)
        if i % 6 == 2:
            _known_mistake(key, i, answers)
        if i % 6 == 4:
            _carried(key, i, answers)
        subs.append(Submission(f"{student['student']}.json", student["student"], answers,
                               set_id="another-set" if i == 7 else doc["set"]))
    return key, subs


def _env_of(item, i):
    return Env({name: value[i:i + 1] for name, value in item.env.items()})


def _known_mistake(key, i, answers):
    """The value of each part's first known mistake, for the parts that have one."""
    for item in key.items:
        for part in item.parts:
            for mistake in item.family.mistakes_for(part.step, item.params):
                with np.errstate(all="ignore"):
                    wrong = np.asarray(mistake.fn(_env_of(item, i), item.params, np))
                if wrong.shape[1:] == item.shapes[part.id] and np.isfinite(wrong).any():
                    answers[part.id] = encode(wrong[0])
                    break


def _carried(key, i, answers):
    """An earlier part slipped and a later one computed from the slip (carried credit)."""
    for item in key.items:
        asked = {p.step: p.id for p in item.parts}
        for part in item.parts:
            inputs, between = carried_inputs(item.family, part.step, asked)
            if not inputs:
                continue
            env = _env_of(item, i)
            slipped = np.array(env[inputs[0]], dtype=float)
            finite = np.isfinite(slipped)
            slipped[finite] = slipped[finite] + 0.25
            own = {s: (slipped if s == inputs[0] else env[s]) for s in inputs}
            redo = rerun_on_own(item.family, part.step, env, own, between, item.params)
            answers[asked[inputs[0]]] = encode(slipped[0])
            answers[part.id] = encode(np.asarray(redo)[0])
            break


@pytest.fixture(scope="module")
def graded():
    key, subs = varied_class()
    return {lang: grade(key, subs, lang=lang) for lang in ("en", "zh")}


def test_the_bundled_template_is_the_one_the_writer_follows():
    # Edited feedback.md.j2? Make FeedbackWriter write what it now renders, then update the hash.
    digest = hashlib.sha256((templates_dir() / fb.TEMPLATE).read_bytes()).hexdigest()
    assert digest == fb.TEMPLATE_SHA256
    assert fb.FeedbackWriter.__init__ and fb._template_followed()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_feedback_file_is_byte_for_byte_the_templates(graded, lang):
    report = graded[lang]
    verdicts = {p.verdict for r in report.results for p in r.parts}
    assert verdicts >= {"correct", "partial", "wrong", "format", "missing", "carried"}  # the case covers them
    parts = [p for r in report.results for p in r.parts]
    assert any(r.notes for r in report.results) and any(r.copied_from for r in report.results)
    assert any(p.diagnosis for p in parts) and any(p.invariants for p in parts) and any(p.carry for p in parts)
    assert any(p.verdict == "missing" and p.message for p in parts)
    views = [v for r in report.results for item in fb.feedback_context(report, r)["items"] for v in item["parts"]]
    assert any(v["more"] for v in views) and any(v["expected"] for v in views)
    assert any("—" in line for v in views for line in v["expected_table"])
    with using(lang):
        writer = fb.FeedbackWriter(report)
        assert writer.fast
        for result in report.results:
            assert writer.markdown(result) == fb.template_markdown(report, result), result.student


def test_another_template_is_rendered_by_jinja(graded, monkeypatch):
    report = graded["en"]
    monkeypatch.setattr(fb, "TEMPLATE_SHA256", "0" * 64)
    fb._template_followed.cache_clear()
    try:
        writer = fb.FeedbackWriter(report)
        assert not writer.fast
        assert writer.markdown(report.results[0]) == fb.template_markdown(report, report.results[0])
    finally:
        monkeypatch.undo()
        fb._template_followed.cache_clear()
