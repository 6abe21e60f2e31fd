"""File names made from student ids, and the roster.

Outputs are written by :mod:`qkvquiz.outputs` (a set staged and switched into place as one unit);
``write_atomic`` is kept here as a name for its one-file case.
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from pathlib import Path

from .inputs import MAX_ROSTER_BYTES, MAX_STUDENTS, read_text, shown_path
from .outputs import write_file as write_atomic  # noqa: F401  (one file, written atomically)
from .untrusted import id_problem

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

    Blank lines and lines starting with '#' are skipped. An id with control or invisible
    characters (a zero-width space, a right-to-left override) is refused with its line number:
    it would print like another id while being a different one.
    """
    path = Path(path)
    source = shown_path(path)
    # Bounded and regular files only (a FIFO or /dev/zero is refused); InputError names the file.
    text = read_text(path, MAX_ROSTER_BYTES, "roster")
    # Only real line breaks split lines (str.splitlines would also split at U+2028 and friends,
    # silently turning one odd id into two).
    kept = [(n, ln) for n, ln in enumerate(re.split(r"\r\n|\r|\n", text), start=1)
            if ln.strip() and not ln.lstrip().startswith("#")]
    lines = [ln for _, ln in kept]
    if not lines:
        raise ValueError(f"{source}: the roster has no student ids")
    if "," in lines[0] or lines[0].strip().lower() in ("student", "id"):  # a CSV, maybe of one column
        rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
        header = {h.strip().lower(): h for h in (rows[0].keys() if rows else [])}
        column = header.get("student") or header.get("id")
        if column is None:
            found = ", ".join(repr(h) for h in header.values()) or "none"
            raise ValueError(f"{source}: a CSV roster needs a 'student' or 'id' column (found: {found})")
        ids = [(row.get(column) or "").strip() for row in rows]
        # Row i comes from kept line i + 1, unless a quoted field spans lines.
        numbers = [n for n, _ in kept[1:]] if len(kept) == len(ids) + 1 else range(2, len(ids) + 2)
        numbered = list(zip(numbers, ids))
    else:
        numbered = [(n, ln.strip()) for n, ln in kept]
    if len(numbered) > MAX_STUDENTS:
        raise ValueError(f"{source}: the roster has {len(numbered):,} ids; a set has at most {MAX_STUDENTS:,} students")
    for n, student in numbered:
        problem = id_problem(student)
        if problem is not None:
            raise ValueError(f"{source}: line {n}: {problem}")
    return [student for _, student in numbered]
