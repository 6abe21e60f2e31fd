"""The key file: every student's givens, every step's exact value, the parts asked.

Grading needs only the key and the submissions. ``answers`` in each student's entry is in
exactly the submission format, so the key handed in as a submission scores full marks.
JSON has no infinities: ±∞ (masked scores) are written as the strings "inf" and "-inf",
which the grader reads like any student's "-inf".
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .core.i18n import DEFAULT_LANG, UnknownLanguage, check_lang
from .core.inputs import (
    MAX_KEY_BYTES,
    InputError,
    decode_text,
    json_nesting,
    read_bytes,
    shown_path,
)
from .core.outputs import settle
from .core.collector import collector_paused
from .core.tolerance import Tolerance
from .families import Env, Family, Params, get_family
from .json_rows import Dumped, dumps, row_texts, same_layout
from .key_cache import CACHE_FROM, Cached, read_cache, store_cache
from .spec_types import Credit, Part, graded_tolerance
from .worksheet import Worksheet

_log = logging.getLogger(__name__)

KEY_FORMAT = "qkvquiz-key"
KEY_VERSION = 1
MAX_KEY_NESTING = 64  # a key nests at most about 10 levels (students → steps → a stack of matrices)


def encode(value: Any) -> Any:
    """A NumPy value as JSON: nested lists of floats, ±∞ as "inf"/"-inf"; NaN is refused (no key holds one)."""
    arr = np.asarray(value, dtype=np.float64)
    if np.isnan(arr).any():
        raise ValueError("a value to store is NaN (not a number); no key or report may hold one")
    if arr.ndim == 0:
        x = float(arr)
        if np.isfinite(x):
            return int(x) if x.is_integer() and abs(x) < 2**53 else x
        return "inf" if x > 0 else "-inf"
    # Whole-array conversion (the same values as converting entry by entry, which keys and
    # grading reports do for every entry of every student): whole numbers as ints, ±∞ as text.
    out = arr.astype(object)
    finite = np.isfinite(arr)
    whole = finite & (arr == np.trunc(np.where(finite, arr, 0.0))) & (np.abs(arr) < 2**53)
    out[whole] = arr[whole].astype(np.int64).astype(object)
    out[~finite] = np.where(arr[~finite] > 0, "inf", "-inf").astype(object)
    return out.tolist()


def decode(value: Any) -> np.ndarray:
    """Inverse of :func:`encode`."""
    if isinstance(value, list):
        try:  # nested lists of numbers and the texts "inf"/"-inf": one NumPy call (float() of each text)
            return np.array(value, dtype=np.float64)
        except (ValueError, TypeError, OverflowError):
            pass
        return np.array([decode(v) for v in value], dtype=np.float64)
    if isinstance(value, str):
        return np.array(float(value), dtype=np.float64)  # "inf" / "-inf"
    return np.array(value, dtype=np.float64)


def key_to_json(ws: Worksheet) -> dict[str, Any]:
    """The key document for a solved worksheet."""
    return _key_doc(ws, as_text=False)


def key_text(ws: Worksheet) -> str:
    """``dumps(key_to_json(ws))``, the same text, made faster: each student's value is written
    by one call of the C encoder and laid out by replacing its row breaks, instead of one call
    per row and a Python check per entry."""
    # Millions of lists, dicts and texts and not one reference cycle: the collector, which would
    # walk every one of them again and again as they are made, is paused (a third of the time).
    with collector_paused():
        return dumps(_key_doc(ws, as_text=True))


def _key_doc(ws: Worksheet, *, as_text: bool) -> dict[str, Any]:
    items = []
    for item, env in zip(ws.spec.items, ws.envs):
        items.append({
            "id": item.id,
            "family": item.family.name,
            "title": item.title or item.family.title,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in item.params.items()},
            "points": item.points,
            "tolerance": item.tolerance.to_json(),
            "credit": item.credit.to_json(),
            "parts": [_part_json(p, env[p.step].shape[1:]) for p in item.parts],
        })
    # Each given and step encoded for the whole class at once (entry i is encode(value[i])).
    columns = [{name: encode(env[name]) for name in (*item.family.given_names, *item.family.step_names)}
               for item, env in zip(ws.spec.items, ws.envs)]
    answer_columns = columns  # an answer is its step's value
    if as_text:  # each value as dumps writes it where it goes: a step 5 levels down, an answer 4
        answer_columns = [{p.step: row_texts(column[p.step], env[p.step].shape[1:], 4) for p in item.parts}
                          for item, env, column in zip(ws.spec.items, ws.envs, columns)]
        columns = [{name: row_texts(values, env[name].shape[1:], 5) for name, values in column.items()}
                   for env, column in zip(ws.envs, columns)]
    students: list[dict[str, Any]] | Dumped = []
    for i, (sid, code) in enumerate(zip(ws.students, ws.codes)):
        givens, steps, answers = {}, {}, {}
        for item, column, answer_column in zip(ws.spec.items, columns, answer_columns):
            givens[item.id] = {g: column[g][i] for g in item.family.given_names}
            steps[item.id] = {s: column[s][i] for s in item.family.step_names}
            for p in item.parts:
                answers[p.id] = answer_column[p.step][i]
        students.append({"student": sid, "variant": code, "givens": givens, "steps": steps, "answers": answers})
    if as_text:
        students = same_layout(students, 1)
    return {
        "format": KEY_FORMAT,
        "version": KEY_VERSION,
        "title": ws.spec.title,
        "instructions": ws.spec.instructions,
        "spec": Path(ws.spec.source).name,
        "seed": ws.seed,
        "set": ws.set_id,
        "keyed": ws.keyed,
        "lang": ws.spec.lang,  # grading writes feedback in this language unless told otherwise
        "points": ws.spec.points,
        "items": items,
        "students": students,
    }


def _part_json(part: Part, shape: tuple[int, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"id": part.id, "step": part.step, "points": part.points, "shape": list(shape)}
    if part.tolerance is not None:  # only a part's own; the rest use the item's
        out["tolerance"] = part.tolerance.to_json()
    if part.entries is not None:  # only some entries asked (indices from 0); absent: every entry
        out["entries"] = [list(index) for index in part.entries]
    return out


class KeyFileError(ValueError):
    """A key file that cannot be used."""


@dataclass(frozen=True)
class KeyItem:
    id: str
    family: Family
    params: Params
    tolerance: Tolerance
    credit: Credit
    parts: tuple[Part, ...]
    shapes: Mapping[str, tuple[int, ...]]  # part id -> shape
    env: Env  # every student's givens and steps, leading axis = student (key order)
    title: str = ""

    def tolerance_for(self, step: str) -> Tolerance:
        """The tolerance that ``step`` is graded with: its part's own, else the item's."""
        return graded_tolerance(self, step)


@dataclass(frozen=True)
class Key:
    title: str
    points: float
    items: tuple[KeyItem, ...]
    students: tuple[str, ...]
    variants: tuple[str, ...]
    answers: tuple[Mapping[str, Any], ...]  # per student, the submission-format answers
    set_id: str = ""  # the set's identity ("" in keys written before sets were named)
    lang: str = DEFAULT_LANG  # the set's language: feedback's default ("en" in keys written before)

    def index(self, student: str) -> int | None:
        try:
            return self.students.index(student)
        except ValueError:
            return None

    @property
    def parts(self) -> list[tuple[KeyItem, Part]]:
        return [(item, part) for item in self.items for part in item.parts]


def load_key(path: str | Path) -> Key:
    """Read a key file written by ``qkvquiz generate``.

    A ``generate`` killed while switching its set into place is finished first
    (:func:`qkvquiz.core.outputs.settle`, one stat when there is nothing to do), so the key read is
    the one of a complete set, never missing midway. A large class's key is read once as JSON;
    later reads of the very same file (by its SHA-256) come from a cache beside it (see
    :mod:`qkvquiz.key_cache`), which holds the key's arrays as they were read.
    """
    source = shown_path(path)
    path = Path(path)
    settle(path.parent)
    try:
        raw = read_bytes(path, MAX_KEY_BYTES, "key")
    except InputError as exc:
        raise KeyFileError(str(exc)) from None
    digest = hashlib.sha256(raw).hexdigest()
    cached = read_cache(path, digest, source)
    if cached is not None:
        return _from_cache(cached, raw, source)
    try:
        text = decode_text(raw, source, "key")
    except InputError as exc:
        raise KeyFileError(str(exc)) from None
    if json_nesting(raw) > MAX_KEY_NESTING:  # json.loads would recurse once per level
        raise KeyFileError(f"{source}: lists and objects are nested more than {MAX_KEY_NESTING} deep; not a key file")
    with collector_paused():  # a class's key is millions of lists: no cycles to look for
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise KeyFileError(f"{source}: not a readable key file ({exc})") from None
        key = key_from_json(doc, source=source)
        if len(key.students) >= CACHE_FROM:
            store_cache(path, digest, doc, key.students, key.variants, [item.env for item in key.items])
        return key


def key_from_json(doc: Mapping[str, Any], source: str = "<key>") -> Key:
    if not isinstance(doc, Mapping) or doc.get("format") != KEY_FORMAT:
        raise KeyFileError(f"{source}: not a qkvquiz key (format must be {KEY_FORMAT!r})")
    if doc.get("version") != KEY_VERSION:
        raise KeyFileError(f"{source}: key version {doc.get('version')!r} is not supported (expected {KEY_VERSION})")
    where = "the key"  # what is being read, for the message should it not read
    try:
        students = doc["students"]
        where = "field 'students'"
        if not isinstance(students, list):
            raise TypeError(students)
        items = _items(doc, lambda item_id, name: _column(students, item_id, name), source)
        names, variants, answers = [], [], []
        for n, s in enumerate(students, start=1):
            where = f"student entry {n}"
            names.append(s["student"])
            variants.append(s.get("variant", ""))
            answers.append(s["answers"])
        where = "field 'points'"
        points = float(doc.get("points", sum(p.points for i in items for p in i.parts)))
    except KeyFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise KeyFileError(f"{source}: malformed key: {where}: {_why(exc)}") from None
    return Key(
        title=doc.get("title", ""),
        points=points,
        items=tuple(items),
        students=tuple(names),
        variants=tuple(variants),
        answers=tuple(answers),
        set_id=str(doc.get("set") or ""),
        lang=_key_lang(doc.get("lang"), source),
    )


def _why(exc: Exception) -> str:
    """What is wrong with a key's field, in words (not the exception's Python)."""
    if isinstance(exc, KeyError) and exc.args and isinstance(exc.args[0], str):
        # A lookup that found no field names it; our own lookups (get_family) say a sentence.
        return str(exc.args[0]) if " " in exc.args[0] else f"no {exc.args[0]!r} field"
    if type(exc) is ValueError and not re.match(r"could not convert|invalid literal", str(exc)):
        return str(exc)  # our own checks' sentences (a param, a tolerance)
    return "a field holds the wrong kind of value (text, a number or a list where another belongs)"


def _items(doc: Mapping[str, Any], column: Callable[[str, str], np.ndarray], source: str) -> list[KeyItem]:
    """The key's items; ``column(item id, name)`` is a given's or step's values of every student."""
    items = []
    for n, raw in enumerate(doc["items"], start=1):
        try:
            items.append(_item(raw, column))
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise KeyFileError(f"{source}: malformed key: item {n}: {_why(exc)}") from None
    return items


def _item(raw: Mapping[str, Any], column: Callable[[str, str], np.ndarray]) -> KeyItem:
    family = get_family(raw["family"])
    params = family.resolve(raw["params"])
    parts = tuple(
        Part(p["id"], p["step"], float(p["points"]),
             Tolerance.from_spec(p["tolerance"]) if "tolerance" in p else None,
             tuple(tuple(int(i) for i in index) for index in p["entries"]) if "entries" in p else None)
        for p in raw["parts"]
    )
    shapes = {p["id"]: tuple(p["shape"]) for p in raw["parts"]}
    names = (*family.given_names, *family.step_names)
    env = Env({name: column(raw["id"], name) for name in names})
    return KeyItem(
        raw["id"], family, params, Tolerance.from_spec(raw["tolerance"]),
        Credit.from_json(raw.get("credit", {})), parts, shapes, env, str(raw.get("title", "")),
    )


def _from_cache(cached: Cached, raw: bytes, source: str) -> Key:
    doc = cached.doc
    items = _items(doc, lambda item_id, name: cached.arrays[(item_id, name)], source)
    return Key(
        title=doc.get("title", ""),
        points=float(doc.get("points", sum(p.points for i in items for p in i.parts))),
        items=tuple(items),
        students=cached.students,
        variants=cached.variants,
        answers=_Answers(raw),
        set_id=str(doc.get("set") or ""),
        lang=_key_lang(doc.get("lang"), source),
    )


class _Answers(Sequence[Mapping[str, Any]]):
    """``Key.answers`` of a key read from its cache: read from the key file's JSON when first asked
    (grading never asks; the answers are the steps' values, which the arrays hold)."""

    def __init__(self, raw: bytes) -> None:
        self._raw: bytes | None = raw
        self._answers: tuple[Mapping[str, Any], ...] = ()

    def _read(self) -> tuple[Mapping[str, Any], ...]:
        if self._raw is not None:
            self._answers = tuple(s["answers"] for s in json.loads(self._raw.decode("utf-8-sig"))["students"])
            self._raw = None
        return self._answers

    def __getitem__(self, index):  # type: ignore[override]
        return self._read()[index]

    def __len__(self) -> int:
        return len(self._read())

    def __eq__(self, other: object) -> bool:
        return tuple(self._read()) == (tuple(other) if isinstance(other, Sequence) else other)

    __hash__ = None  # type: ignore[assignment]


def _key_lang(raw: Any, source: str) -> str:
    if raw is None:
        return DEFAULT_LANG
    try:
        return check_lang(raw)
    except UnknownLanguage as exc:
        raise KeyFileError(f"{source}: field 'lang': {exc}") from None


def _raw(student: Mapping[str, Any], item_id: str, name: str) -> Any:
    givens = student["givens"][item_id]
    return givens[name] if name in givens else student["steps"][item_id][name]


def _column(students: list[Mapping[str, Any]], item_id: str, name: str) -> np.ndarray:
    """One given or step of every student, leading axis = student."""
    values = [_raw(s, item_id, name) for s in students]
    try:
        # One NumPy call for the class; it reads the texts "inf" and "-inf" as decode() does.
        return np.array(values, dtype=np.float64)
    except (ValueError, TypeError):
        return np.stack([decode(v) for v in values])
