"""Reading what ``qkvquiz grade`` wrote (``results.json``), for the exports.

The exports read results, never the grader's objects: a grade run and its export may be days
apart, and what was handed back is exactly what the results file says. The file is read like
any outside file (bounded, UTF-8, nesting checked).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.i18n import DEFAULT_LANG, LANGUAGES
from ..core.inputs import MAX_KEY_BYTES, InputError, json_nesting, read_text, shown_path
from ..core.outputs import settle

RESULTS_NAME = "results.json"
MAX_RESULTS_NESTING = 64


@dataclass(frozen=True)
class PartScore:
    part: str
    points: float
    score: float
    verdict: str
    message: str = ""


@dataclass(frozen=True)
class StudentScore:
    student: str
    score: float | None  # None: no submission was graded
    total: float
    parts: tuple[PartScore, ...] = ()
    flags: tuple[str, ...] = ()
    source: str = ""


@dataclass
class Results:
    title: str
    points: float
    students: dict[str, StudentScore] = field(default_factory=dict)  # in the order to write: graded, then absent
    folder: Path = Path(".")
    source: str = RESULTS_NAME
    lang: str = "en"  # the language the grading wrote its feedback in


def results_path(path: str | Path) -> Path:
    """``results.json`` itself, or the one in the grade output folder ``path``."""
    path = Path(path)
    return path / RESULTS_NAME if path.is_dir() else path


def load_results(path: str | Path) -> Results:
    """Read ``results.json`` (or a folder holding it); InputError names the file and the field."""
    file = results_path(path)
    source = shown_path(file)
    # A grade run killed inside the switch of its output set left a journal: finish that switch
    # first (as `grade` would), so that what is read is one whole set, never "no such file".
    settle(file.parent)
    text = read_text(file, MAX_KEY_BYTES, "results")
    if json_nesting(text) > MAX_RESULTS_NESTING:
        raise InputError(source, f"lists and objects are nested more than {MAX_RESULTS_NESTING} deep; not a results file")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise InputError(source, f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("students"), list):
        raise InputError(source, "not the results.json that `qkvquiz grade` writes (no \"students\" list)")
    where = "the total (points)"  # what is being read, for the message should it not read
    try:
        points = float(doc.get("points", 0))
        lang = doc.get("lang") if doc.get("lang") in LANGUAGES else DEFAULT_LANG
        out = Results(str(doc.get("title", "")), points, folder=file.parent, source=source, lang=lang)
        for i, s in enumerate(doc["students"], start=1):
            where = f"student entry {i}"
            parts = []
            for k, p in enumerate(s.get("parts", []), start=1):
                where = f"student entry {i}, part {k}"
                parts.append(_part(p))
            where = f"student entry {i}"
            out.students[str(s["student"])] = StudentScore(
                str(s["student"]), float(s["score"]), float(s.get("total", points)),
                tuple(parts), tuple(str(f) for f in s.get("flags", [])), str(s.get("source", "")))
        where = "the absent students"
        for student in doc.get("absent", []):
            out.students.setdefault(str(student), StudentScore(str(student), None, points))
    except KeyError as exc:
        raise InputError(source, f"{where} has no {exc.args[0]!r} field; was it written by `qkvquiz grade`?") from None
    except (AttributeError, TypeError, ValueError):
        raise InputError(source, f"{where} cannot be read: a field holds the wrong kind of value (text where a "
                                 "number belongs, or a list where an entry does); was it written by `qkvquiz grade`?") from None
    return out


def _part(p: dict[str, Any]) -> PartScore:
    return PartScore(str(p["part"]), float(p["points"]), float(p["score"]), str(p.get("verdict", "")),
                     str(p.get("message", "")))
