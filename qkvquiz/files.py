"""Writing outputs safely: atomic writes and file names made from student ids."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import tempfile
import unicodedata
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write to a temporary file beside ``path``, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def safe_name(student: str, taken: set[str]) -> str:
    """A file-system-safe folder name for a student id, unique among ``taken`` (case-insensitively).

    Path separators, dots at the start, control and other unusual characters are replaced;
    when that changes the id or collides, a short hash of the original id keeps it unique.
    """
    ascii_id = unicodedata.normalize("NFKD", student).encode("ascii", "ignore").decode()
    slug = _UNSAFE.sub("_", ascii_id).strip("._-")[:48] or "student"
    if slug != student or slug.lower() in taken:
        slug = f"{slug}-{hashlib.sha256(student.encode()).hexdigest()[:8]}"
    while slug.lower() in taken:  # a hash collision with an id shaped like a hash
        slug += "_"
    taken.add(slug.lower())
    return slug


def read_roster(path: str | Path) -> list[str]:
    """Student ids from a file: one per line, or a CSV with a 'student' or 'id' column.

    Blank lines and lines starting with '#' are skipped.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig")
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise ValueError(f"{path}: the roster has no student ids")
    if "," in lines[0]:
        rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
        header = {h.strip().lower(): h for h in (rows[0].keys() if rows else [])}
        column = header.get("student") or header.get("id")
        if column is None:
            raise ValueError(f"{path}: a CSV roster needs a 'student' or 'id' column")
        ids = [(row.get(column) or "").strip() for row in rows]
        missing = [n for n, i in enumerate(ids, start=2) if not i]
        if missing:
            raise ValueError(f"{path}: line {missing[0]}: the student id is empty")
        return ids
    return [ln.strip() for ln in lines]
