"""The key file: every student's givens, every step's exact value, the parts asked.

Grading needs only the key and the submissions. ``answers`` in each student's entry is in
exactly the submission format, so the key handed in as a submission scores full marks.
JSON has no infinities: ±∞ (masked scores) are written as the strings "inf" and "-inf",
which the grader reads like any student's "-inf".
"""

from __future__ import annotations

import gc
import hashlib
import io
import json
import logging
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
from .core.outputs import settle, write_file
from .core.pause import collector_paused
from .core.seals import is_sealed, seal
from .core.tolerance import Tolerance
from .families import Env, Family, Params, get_family
from .spec import Credit, Part, graded_tolerance
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
    paused = gc.isenabled()
    gc.disable()
    try:
        return dumps(_key_doc(ws, as_text=True))
    finally:
        if paused:
            gc.enable()


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
        answer_columns = [{p.step: _texts(column[p.step], env[p.step].shape[1:], 4) for p in item.parts}
                          for item, env, column in zip(ws.spec.items, ws.envs, columns)]
        columns = [{name: _texts(values, env[name].shape[1:], 5) for name, values in column.items()}
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
        students = _same_layout(students, 1)
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


def dumps(doc: Any) -> str:
    """JSON text for people and diffs: a row of numbers stays on one line; same input, same bytes."""
    return _dump(doc, 0) + "\n"


class Dumped(str):
    """A value already written as :func:`dumps` writes it at some depth (:func:`dumped`): a part
    that many documents share (every student's blank answers) is written once."""


def dumped(value: Any, depth: int) -> Dumped:
    """``value`` as :func:`dumps` writes it ``depth`` levels down in a document."""
    return Dumped(_dump(value, depth))


# One encoder for every leaf: json.dumps with options builds a new encoder per call, and a
# class's results hold about a hundred leaves per student.
_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
_LEAVES = (int, float, str, bool, type(None))


def _leaf_encoder() -> Any:
    """``_ENCODE`` for anything but a text, without building an encoder per call: the C
    encoder ``JSONEncoder.encode`` makes each time, made once (same options, same output)."""
    c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
    if c_make_encoder is None:  # pragma: no cover - CPython always has it
        return _ENCODE
    encode = c_make_encoder(None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ": ", ", ",
                            False, False, False)

    def leaf(value: Any) -> str:
        return "".join(encode(value, 0))

    return leaf


_LEAF = _leaf_encoder()
_TEXT = json.encoder.encode_basestring  # what _ENCODE does with a str
_PADS = ["  " * depth for depth in range(64)]


def _texts(values: list[Any], shape: tuple[int, ...], depth: int) -> list[Dumped]:
    """Each of ``values`` (encoded arrays of ``shape``: numbers and "inf"/"-inf", no other text)
    as :func:`_dump` writes it ``depth`` levels down.

    The whole column is written by one call of the C encoder and cut between students, where
    ``k`` lists end at once ("]" * k + ", " + "[" * k, deeper than any break inside a value)."""
    k = len(shape)
    if not values or 0 in shape:
        return [Dumped(_dump(v, depth)) for v in values]
    whole = _LEAF(values)
    pieces = whole[k + 1:-(k + 1)].split("]" * k + ", " + "[" * k)
    if len(pieces) != len(values):  # pragma: no cover - not arrays of this shape after all
        return [Dumped(_dump(v, depth)) for v in values]
    if k == 0:
        return [Dumped(piece) for piece in pieces]
    if k == 1:  # a row stays on one line
        return [Dumped("[" + piece + "]") for piece in pieces]
    pads = [_PADS[depth + j] if depth + j < len(_PADS) else "  " * (depth + j) for j in range(k)]
    # Laid out, every list of lists is one entry per line: a break where m axes end at once
    # closes m - 1 lists on lines of their own and opens as many; the largest breaks first.
    breaks = [("]" * m + ", " + "[" * m,
               "]" + "".join("\n" + pads[j] + "]" for j in range(k - 2, k - m - 1, -1)) + ",\n" + pads[k - m] + "["
               + "".join("\n" + pads[j] + "[" for j in range(k - m + 1, k)))
              for m in range(k - 1, 0, -1)]
    head = "[" + "".join("\n" + pads[j] + "[" for j in range(1, k))
    tail = "]" + "".join("\n" + pads[j] + "]" for j in range(k - 2, 0, -1)) + "\n" + pads[0] + "]"
    out = []
    for text in pieces:
        for compact, laid_out in breaks:
            text = text.replace(compact, laid_out)
        out.append(Dumped(head + text + tail))
    return out


_SLOT = Dumped("\x00")  # where a value goes in a layout (a key's text is encoded, so it never holds \x00)


def _same_layout(docs: list[dict[str, Any]], depth: int) -> list[dict[str, Any]] | Dumped:
    """``_dump(docs, depth)`` for documents that differ only in their texts (every student's entry
    of a key: the same items, names and shapes), written faster: the layout of the first, with a
    slot for each text, is written once and each document's texts are put in its slots (a
    student's entry was a hundred calls of _dump). Anything else is left to _dump (``docs``)."""
    if not docs:
        return docs
    slotted = _slots(docs[0])
    pieces = _dump(slotted, depth + 1).split(_SLOT)
    out = []
    for doc in docs:
        texts: list[str] = []
        if not _fill(doc, texts) or len(texts) != len(pieces) - 1:
            return docs
        joined = [pieces[0]]
        for text, piece in zip(texts, pieces[1:]):
            joined += (text, piece)
        out.append("".join(joined))
    pad, below = ("  " * k for k in (depth, depth + 1))  # as _lines lays out a list of entries
    return Dumped("[\n" + below + (",\n" + below).join(out) + "\n" + pad + "]")


def _slots(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with a slot in place of each text (non-empty mappings kept, walked in order)."""
    return {k: (_slots(v) if isinstance(v, Mapping) and v else _SLOT if isinstance(v, str) else v)
            for k, v in doc.items()}


def _fill(doc: Mapping[str, Any], texts: list[str]) -> bool:
    """Append ``doc``'s texts as _dump writes them, in the order of :func:`_slots`; False where a
    value is neither a text nor a mapping (its layout could differ from one document to the next)."""
    for v in doc.values():
        kind = type(v)
        if kind is Dumped:
            if _SLOT in v:
                return False
            texts.append(v)
        elif kind is dict or isinstance(v, Mapping):
            if v and not _fill(v, texts):
                return False
        elif kind is str:
            texts.append(_TEXT(v))
        else:
            return False
    return True


def _nested(value: Any) -> bool:
    return type(value) not in _LEAVES and isinstance(value, (list, Mapping))


_LEAF_TYPES = frozenset(_LEAVES)


def _dump(obj: Any, depth: int) -> str:
    kind = type(obj)
    if kind is Dumped:
        return obj
    if kind is str:
        return _TEXT(obj)
    if kind is list:
        # A list of plain values (a row of numbers) stays on one line.
        if _LEAF_TYPES.issuperset(map(type, obj)) or not any(map(_nested, obj)):
            return _LEAF(obj)
        return _lines(obj, depth)
    if kind in _LEAF_TYPES:
        return _LEAF(obj)
    if isinstance(obj, Mapping) and obj:
        below = depth + 1
        inner = _PADS[below] if below < len(_PADS) else "  " * below
        body = ",\n".join([f"{inner}{_TEXT(str(k))}: {_dump(v, below)}" for k, v in obj.items()])
        return "{\n" + body + "\n" + (_PADS[depth] if depth < len(_PADS) else "  " * depth) + "}"
    if isinstance(obj, list) and any(map(_nested, obj)):
        return _lines(obj, depth)
    return _ENCODE(obj)


def _lines(obj: list, depth: int) -> str:
    """A list with a list or mapping in it: one entry per line (rows of plain values on one line each)."""
    below = depth + 1
    inner = _PADS[below] if below < len(_PADS) else "  " * below
    leaves = _LEAF_TYPES.issuperset
    entries = [_LEAF(v) if type(v) is list and leaves(map(type, v)) else _dump(v, below) for v in obj]
    return "[\n" + inner + (",\n" + inner).join(entries) + "\n" + (_PADS[depth] if depth < len(_PADS) else "  " * depth) + "]"


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
    :func:`_cache_path`), which holds the key's arrays as they were read.
    """
    source = shown_path(path)
    path = Path(path)
    settle(path.parent)
    try:
        raw = read_bytes(path, MAX_KEY_BYTES, "key")
    except InputError as exc:
        raise KeyFileError(str(exc)) from None
    digest = hashlib.sha256(raw).hexdigest()
    cached = _from_cache(path, digest, raw, source)
    if cached is not None:
        return cached
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
            _store_cache(path, digest, doc, key)
        return key


def key_from_json(doc: Mapping[str, Any], source: str = "<key>") -> Key:
    if not isinstance(doc, Mapping) or doc.get("format") != KEY_FORMAT:
        raise KeyFileError(f"{source}: not a qkvquiz key (format must be {KEY_FORMAT!r})")
    if doc.get("version") != KEY_VERSION:
        raise KeyFileError(f"{source}: key version {doc.get('version')!r} is not supported (expected {KEY_VERSION})")
    try:
        students = doc["students"]
        items = _items(doc, lambda item_id, name: _column(students, item_id, name))
    except (KeyError, TypeError, ValueError) as exc:
        raise KeyFileError(f"{source}: malformed key ({exc!r})") from exc
    return Key(
        title=doc.get("title", ""),
        points=float(doc.get("points", sum(p.points for i in items for p in i.parts))),
        items=tuple(items),
        students=tuple(s["student"] for s in students),
        variants=tuple(s.get("variant", "") for s in students),
        answers=tuple(s["answers"] for s in students),
        set_id=str(doc.get("set") or ""),
        lang=_key_lang(doc.get("lang"), source),
    )


def _items(doc: Mapping[str, Any], column: Callable[[str, str], np.ndarray]) -> list[KeyItem]:
    """The key's items; ``column(item id, name)`` is a given's or step's values of every student."""
    items = []
    for raw in doc["items"]:
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
        items.append(KeyItem(
            raw["id"], family, params, Tolerance.from_spec(raw["tolerance"]),
            Credit.from_json(raw.get("credit", {})), parts, shapes, env, str(raw.get("title", "")),
        ))
    return items


# ----------------------------------------------------------------------------- the cache of a key

CACHE_FROM = 1_000  # students: a smaller key is read from its JSON in well under a second
CACHE_VERSION = 1


def _cache_path(path: Path) -> Path:
    """Where the cache of the key file ``path`` lies: a hidden file beside it (``.key.json.cache.npz``).

    It holds what reading the JSON gave (the arrays of every given and step, the ids, the rest
    of the file but the students) and the SHA-256 of the key file it was read from; it is used
    only for a key file with that very hash, and written (private, like the key, and renamed
    into place whole) when a large key is read from its JSON. NumPy's format without pickles:
    loading it runs no code. A folder that cannot be written just has no cache.

    The cache decides grades (it holds the expected values and the tolerances), and a course
    folder may be shared: it is sealed (:mod:`qkvquiz.core.seals`) over everything it holds, so a
    cache that this user's qkvquiz did not write is not read (the JSON is, and a new cache is
    written).
    """
    return path.with_name(f".{path.name}.cache.npz")


_CACHE_SEAL = "key cache"


def _cache_parts(meta: bytes, arrays: Mapping[str, np.ndarray]) -> tuple[bytes, ...]:
    """What a cache's seal covers: its metadata (with the key file's hash) and every array, by name."""
    parts = [meta]
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        parts += [name.encode("ascii"), f"{array.dtype.str}{array.shape}".encode("ascii"), array.tobytes()]
    return tuple(parts)


def _from_cache(path: Path, digest: str, raw: bytes, source: str) -> Key | None:
    """The key from its cache, when there is one for exactly this key file; else None."""
    cache = _cache_path(path)
    if not cache.is_file():
        return None
    try:
        with np.load(cache, allow_pickle=False) as stored:
            meta_bytes = stored["meta"].tobytes()
            meta = json.loads(meta_bytes.decode("utf-8"))
            if meta.get("cache") != CACHE_VERSION or meta.get("sha256") != digest:
                return None
            doc, students, names = meta["doc"], meta["students"], meta["env"]
            stored_arrays = {f"env_{k}_{j}": stored[f"env_{k}_{j}"]
                             for k, item_names in enumerate(names) for j in range(len(item_names))}
            mark = stored["seal"].tobytes().decode("ascii") if "seal" in stored.files else None
            if not is_sealed(mark, _CACHE_SEAL,
                             *_cache_parts(meta_bytes, stored_arrays)):
                _log.warning("%s: ignored (not written by this user's qkvquiz); %s is read instead", cache, source)
                return None
            arrays = {}
            for k, item_names in enumerate(names):
                for j, name in enumerate(item_names):
                    array = stored_arrays[f"env_{k}_{j}"]
                    if array.dtype != np.float64 or array.shape[:1] != (len(students),):
                        return None
                    arrays[(doc["items"][k]["id"], name)] = array
        items = _items(doc, lambda item_id, name: arrays[(item_id, name)])
        return Key(
            title=doc.get("title", ""),
            points=float(doc.get("points", sum(p.points for i in items for p in i.parts))),
            items=tuple(items),
            students=tuple(students),
            variants=tuple(meta["variants"]),
            answers=_Answers(raw),
            set_id=str(doc.get("set") or ""),
            lang=_key_lang(doc.get("lang"), source),
        )
    except Exception:  # noqa: BLE001 - an unreadable or foreign cache is no cache: the JSON is read instead
        return None


def _store_cache(path: Path, digest: str, doc: Mapping[str, Any], key: Key) -> None:
    """Write the cache of a key just read from ``path`` (best effort: a failure leaves none)."""
    cache = _cache_path(path)
    names = [list(item.env) for item in key.items]
    meta = {"cache": CACHE_VERSION, "sha256": digest, "doc": {k: v for k, v in doc.items() if k != "students"},
            "students": list(key.students), "variants": list(key.variants), "env": names}
    arrays = {f"env_{k}_{j}": np.ascontiguousarray(item.env[name])
              for k, item in enumerate(key.items) for j, name in enumerate(names[k])}
    meta_bytes = json.dumps(meta).encode("utf-8")
    mark = seal(_CACHE_SEAL, *_cache_parts(meta_bytes, arrays))
    if mark is None:  # no state key for this user: an unsealed cache would never be read
        return
    buf = io.BytesIO()
    np.savez(buf, meta=np.frombuffer(meta_bytes, dtype=np.uint8),
             seal=np.frombuffer(mark.encode("ascii"), dtype=np.uint8), **arrays)
    try:  # one file written whole and renamed, as private as the key
        write_file(cache, buf.getvalue(), private=True)
    except Exception:  # noqa: BLE001 - a cache that cannot be written is no cache
        pass


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
