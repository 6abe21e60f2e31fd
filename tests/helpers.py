"""Small builders shared by the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

BASIC_ITEMS = [
    {"family": "attention.scores", "params": {"form": "vector"}},
    {"family": "attention.weights", "params": {"mask": "causal"}, "ask": ["scores", "weights"]},
    {"family": "attention.output", "params": {"mask": "random"}, "points": 3},
]


def make_key_doc(items: list[dict] | None = None, students=("a", "b", "c"), seed: Any = 1) -> dict:
    spec = parse_spec({"title": "T", "items": items or BASIC_ITEMS})
    ws = build_worksheet(spec, list(students), seed)
    return json.loads(json.dumps(key_to_json(ws)))


def make_key(items=None, students=("a", "b", "c"), seed=1):
    doc = make_key_doc(items, students, seed)
    return key_from_json(doc), doc


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path
