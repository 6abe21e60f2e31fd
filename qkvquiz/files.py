"""Writing outputs safely: atomic writes and file names made from student ids."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import signal
import tempfile
import threading
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .inputs import MAX_ROSTER_BYTES, MAX_STUDENTS, read_text, shown_path
from .untrusted import id_problem, invisible_characters

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_NAME = 48  # characters of the readable part of a folder name; a hash follows when cut
# Names Windows gives to devices, with or without an extension ("con", "NUL.txt", "com1").
_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"{p}{i}" for p in ("COM", "LPT") for i in range(1, 10))})


def _file_mode(private: bool) -> int:
    """0600 for what only the instructor may read; otherwise what a plain open() would give (0666 less the umask)."""
    if private:
        return 0o600
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def _write_temp(path: Path, data: str | bytes, private: bool = False) -> str:
    """``data`` in a new temporary file beside ``path``, flushed to disk; returns its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        # mkstemp makes 0600 files; worksheets and reports get ordinary permissions.
        if hasattr(os, "fchmod"):
            os.fchmod(fd, _file_mode(private))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            # Without fsync a crash soon after the rename can leave an empty file under the new name.
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: str | Path, data: str | bytes, *, private: bool = False) -> None:
    """Write to a temporary file beside ``path``, then rename: readers never see half a file.

    If anything interrupts the write (an error, Ctrl-C, a SIGTERM that the CLI turns into an
    exit), the temporary file is removed and ``path`` keeps its previous content. ``private``
    files (keys) are readable by their owner only.
    """
    path = Path(path)
    tmp = _write_temp(path, data, private)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_atomic_all(files: Mapping[str | Path, str | bytes]) -> None:
    """Write several files that belong together (a report's CSV and JSON): all new or all old.

    Every file is first written in full to a temporary file; only then are they renamed, one
    after another, with Ctrl-C and SIGTERM held back until the last rename is done. An
    interruption before that point leaves every target as it was and no temporary file.
    """
    temps: list[tuple[str, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            temps.append((_write_temp(path, data), path))
        with _signals_held():
            for tmp, path in temps:
                os.replace(tmp, path)
    except BaseException:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold back SIGINT, SIGTERM and SIGHUP for the duration; deliver the first one afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be changed from the main thread
        return
    caught: list[int] = []
    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None or signal.getsignal(sig) is None:  # absent, or installed outside Python
            continue
        previous[sig] = signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if caught:
            signal.raise_signal(caught[0])


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
    return read_roster_names(path).ids


#: Longest name printed on a worksheet's header.
MAX_NAME_LENGTH = 120


@dataclass(frozen=True)
class Roster:
    """A roster's student ids, in order, and the names of those that have one (a CSV's
    optional ``name`` column, printed on each worksheet's header)."""

    ids: list[str]
    names: dict[str, str] = field(default_factory=dict)


def read_roster_names(path: str | Path) -> Roster:
    """Like :func:`read_roster`, with the ``name`` column of a CSV roster where it has one."""
    path = Path(path)
    source = shown_path(path)
    # Bounded and regular files only (a FIFO or /dev/zero is refused); InputError names the file.
    text = read_text(path, MAX_ROSTER_BYTES, "roster")
    # Only real line breaks split lines (str.splitlines would also split at U+2028 and friends,
    # silently turning one odd id into two).
    kept = [(n, ln) for n, ln in enumerate(re.split(r"\r\n|\r|\n", text), start=1)
            if ln.strip() and not ln.lstrip().startswith("#")]
    lines = [ln for _, ln in kept]
    names: list[str] = []
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
        name_column = header.get("name")
        if name_column is not None:
            names = [(row.get(name_column) or "").strip() for row in rows]
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
    by_id: dict[str, str] = {}
    for (n, student), name in zip(numbered, names):
        if not name:
            continue
        bad = invisible_characters(name)
        if bad or len(name) > MAX_NAME_LENGTH:
            why = "invisible or control characters" if bad else f"more than {MAX_NAME_LENGTH} characters"
            raise ValueError(f"{source}: line {n}: the name of {student!r} has {why}")
        by_id[student] = name
    return Roster([student for _, student in numbered], by_id)
