"""The cache of a large key file: its arrays kept beside it, read instead of the JSON.

Reading a class's ``key.json`` (millions of numbers) takes seconds; ``grade`` reads it again and
again while a term goes on. So the first read of a key of :data:`CACHE_FROM` students or more
leaves a hidden file beside it (``.key.json.cache.npz``) holding what reading the JSON gave: the
arrays of every given and step, the ids, the rest of the file but the students, and the SHA-256
of the key file it was read from. It is used only for a key file with that very hash, and
written (private, like the key, and renamed into place whole). NumPy's format without pickles:
loading it runs no code. A folder that cannot be written just has no cache.

The cache decides grades (it holds the expected values and the tolerances), and a course folder
may be shared: it is sealed (:mod:`qkvquiz.core.seals`) over everything it holds, so a cache that
this user's qkvquiz did not write is not read (the JSON is, and a new cache is written).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .core.outputs import write_file
from .core.seals import is_sealed, seal

_log = logging.getLogger(__name__)

CACHE_FROM = 1_000  # students: a smaller key is read from its JSON in well under a second
CACHE_VERSION = 1
_CACHE_SEAL = "key cache"


@dataclass(frozen=True)
class Cached:
    """What a cache holds: the key file's document without its students, the students' ids and
    variant codes, and every item's arrays by (item id, name), leading axis = student."""

    doc: Mapping[str, Any]
    students: tuple[str, ...]
    variants: tuple[str, ...]
    arrays: Mapping[tuple[str, str], np.ndarray]


def cache_path(path: Path) -> Path:
    """Where the cache of the key file ``path`` lies: a hidden file beside it."""
    return path.with_name(f".{path.name}.cache.npz")


def _cache_parts(meta: bytes, arrays: Mapping[str, np.ndarray]) -> tuple[bytes, ...]:
    """What a cache's seal covers: its metadata (with the key file's hash) and every array, by name."""
    parts = [meta]
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        parts += [name.encode("ascii"), f"{array.dtype.str}{array.shape}".encode("ascii"), array.tobytes()]
    return tuple(parts)


def read_cache(path: Path, digest: str, source: str) -> Cached | None:
    """The cache of exactly this key file (SHA-256 ``digest``), sealed by this user; else None."""
    cache = cache_path(path)
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
            if not is_sealed(mark, _CACHE_SEAL, *_cache_parts(meta_bytes, stored_arrays)):
                _log.warning("%s: ignored (not written by this user's qkvquiz); %s is read instead", cache, source)
                return None
            arrays = {}
            for k, item_names in enumerate(names):
                for j, name in enumerate(item_names):
                    array = stored_arrays[f"env_{k}_{j}"]
                    if array.dtype != np.float64 or array.shape[:1] != (len(students),):
                        return None
                    arrays[(doc["items"][k]["id"], name)] = array
        return Cached(doc, tuple(students), tuple(meta["variants"]), arrays)
    except Exception:  # noqa: BLE001 - an unreadable or foreign cache is no cache: the JSON is read instead
        return None


def store_cache(path: Path, digest: str, doc: Mapping[str, Any], students: Sequence[str], variants: Sequence[str],
                envs: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Write the cache of a key just read from ``path`` (best effort: a failure leaves none);
    ``envs`` are the items' arrays, in the order of ``doc["items"]``."""
    cache = cache_path(path)
    names = [list(env) for env in envs]
    meta = {"cache": CACHE_VERSION, "sha256": digest, "doc": {k: v for k, v in doc.items() if k != "students"},
            "students": list(students), "variants": list(variants), "env": names}
    arrays = {f"env_{k}_{j}": np.ascontiguousarray(env[name])
              for k, env in enumerate(envs) for j, name in enumerate(names[k])}
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
