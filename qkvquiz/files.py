"""File names made from student ids, and the roster.

Outputs are written by :mod:`qkvquiz.core.outputs` (a set staged and switched into place as one unit);
``write_atomic`` is kept here as a name for its one-file case.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

from .core.outputs import write_file as write_atomic  # noqa: F401  (one file, written atomically)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 48  # characters of the readable part of a folder name; a hash follows when cut
# Names Windows gives to devices, with or without an extension ("con", "NUL.txt", "com1").
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{p}{i}" for p in ("COM", "LPT") for i in range(1, 10))})


def safe_name(student: str, taken: set[str]) -> str:
    """A file-system-safe folder name for a student id, unique among ``taken`` (case-insensitively).

    The name keeps only ASCII letters, digits, ``.``, ``_`` and ``-`` (accents dropped, every
    other run of characters, path separators and controls included, becomes ``_``), never
    starts or ends with a dot or dash, and is never empty or a name Windows reserves for a
    device (``CON``, ``nul.txt``, ``COM1``). When that changes the id, cuts it to ``MAX_NAME``
    characters, or collides with a name in ``taken`` (compared case-insensitively, as macOS and
    Windows do), ``-`` and 8 hex digits of the id's SHA-256 follow, so ``Ada`` and ``ada``,
    or ``a/b`` and ``a_b``, never share a folder. ``taken`` is updated.
    """
    ascii_id = unicodedata.normalize("NFKD", student).encode("ascii", "ignore").decode()
    slug = _UNSAFE.sub("_", ascii_id).strip("._-")[:MAX_NAME].rstrip("._-") or "student"
    reserved = slug.split(".")[0].upper() in _RESERVED
    if reserved:
        slug = slug.replace(".", "_")  # "nul.txt-1a2b3c4d" would still be the device NUL
    if slug != student or reserved or slug.lower() in taken:
        digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        slug = f"{slug}-{digest}"
    while slug.lower() in taken:  # a hash collision with an id shaped like a hash
        slug += "_"
    taken.add(slug.lower())
    return slug


def read_roster(path: str | Path) -> list[str]:
    """Student ids from a file: one per line, or a CSV with a 'student' or 'id' column (maybe the only one).

    The CSV may carry names, emails and LMS ids beside the id (:mod:`qkvquiz.roster`, which
    reads it); here only the ids are returned, in order. Blank lines and lines starting with
    '#' are skipped; an id with control or invisible characters is refused with its line.
    """
    from .roster import read_roster_entries

    return read_roster_entries(path).students
