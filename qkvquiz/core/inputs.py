"""Reading files that come from outside: the one door every untrusted path goes through.

Specs, audit files, rosters, the secret, key files and submissions are read here. Whatever the file holds, reading it ends quickly, in
bounded memory, with either the data or an :class:`InputError` whose message names the file
(and the line, where there is one):

- only regular files are read: a folder, a FIFO (which would block), a device (``/dev/zero``
  never ends) or a socket is refused after ``open`` with ``O_NONBLOCK``, by ``fstat`` of the
  open descriptor, so what is checked is what is read;
- at most ``limit + 1`` bytes are read, whatever the file claims its size is;
- text must be UTF-8; a bad byte is reported with its line and column;
- JSON's nesting is measured before it is parsed (:func:`json_nesting`).

The rest of the door, each on top of this module: YAML (:mod:`qkvquiz.core.bounded_yaml`),
folders of submissions (:mod:`qkvquiz.core.folders`) and zip archives (:mod:`qkvquiz.core.zips`).
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
from collections.abc import Iterable
from itertools import accumulate
from typing import Any, BinaryIO


# Limits, each far above what an honest file needs (the largest bundled spec is about 3 KB).
MAX_SPEC_BYTES = 1_000_000  # a spec or an audit file
MAX_ROSTER_BYTES = 5_000_000  # about 20,000 ids of up to 200 characters, with room for CSV columns
MAX_SECRET_BYTES = 4_096  # `qkvquiz init` writes 65 bytes
MAX_KEY_BYTES = 1_000_000_000  # key.json of MAX_STUDENTS students of a long spec (16 KB each for delta-rule)

# Students in one generated set. Each student costs roughly the key's share (tens of KB for
# a long spec) plus their worksheet files; generate prints an estimate before solving.
MAX_STUDENTS = 20_000


class InputError(ValueError):
    """A file that cannot be used; ``str()`` is one sentence that starts with the file's name."""

    def __init__(self, source: str, message: str, line: int | None = None) -> None:
        self.source, self.message, self.line = source, message, line
        where = f"{source}: line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")


def csv_rows(lines: Iterable[str], source: str, first_line: int = 1) -> list[list[str]]:
    """Every row of CSV text. A row the csv module cannot read (a field past its size limit, a
    NUL) is an :class:`InputError` naming the file and the line, not a ``csv.Error`` (which is no
    ValueError, so no command would catch it). ``first_line``: the line of the file ``lines`` start at."""
    reader = csv.reader(lines)
    try:
        return list(reader)
    except csv.Error as exc:
        raise InputError(source, str(exc), first_line + reader.line_num - 1) from None


def shown_path(path: str | os.PathLike[str]) -> str:
    """A path as text that can always be printed or written as UTF-8 (odd bytes become ``\\udcff`` escapes)."""
    return os.fspath(path).encode("utf-8", "backslashreplace").decode("utf-8")


def _a(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], limit: int, what: str, *, follow: bool = True) -> BinaryIO:
    """A binary file object of the regular file ``path`` of at most ``limit`` bytes (by its
    ``fstat``); InputError otherwise.

    ``what`` names the file's role in messages ("spec", "roster"). Opened non-blocking, so a
    FIFO with no writer cannot hang the open; the kind is checked on the open descriptor
    (``fstat``), never on the name. ``follow=False`` refuses a symbolic link as the last part
    of the path (``O_NOFOLLOW``), for files found by walking a folder.
    """
    fd, _info = _open_regular(path, limit, what, follow)
    try:
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_regular(path: str | os.PathLike[str], limit: int, what: str, follow: bool) -> tuple[int, os.stat_result]:
    """:func:`open_regular`'s checks: the open descriptor and its ``fstat``."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(shown_path(path), f"cannot read the {what} file: there is no such file") from None
    except IsADirectoryError:
        raise InputError(shown_path(path), f"is a folder, not {_a(what)} file") from None
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise InputError(shown_path(path), "is a link; links are not followed here") from None
        raise InputError(shown_path(path), f"cannot read the {what} file ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(shown_path(path), f"is {_kind(info.st_mode)}, not a regular file; nothing was read from it")
        if info.st_size > limit:
            raise InputError(shown_path(path),
                             f"the file is {info.st_size:,} bytes; {_a(what)} file may be at most {limit:,}")
        return fd, info
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike[str], limit: int, what: str, *, follow: bool = True) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; InputError otherwise
    (see :func:`open_regular` for the checks)."""
    return read_bytes_and_stat(path, limit, what, follow=follow)[0]


def read_bytes_and_stat(path: str | os.PathLike[str], limit: int, what: str, *, follow: bool = True
                        ) -> tuple[bytes, os.stat_result]:
    """:func:`read_bytes`, with the ``fstat`` of the file read (its size and time as read).

    Read by ``os.read`` on the descriptor (no file object: a class's thousands of files each
    cost a few system calls and no more)."""
    fd, info = _open_regular(path, limit, what, follow)
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= limit:  # the size in fstat may be stale: stop at limit + 1 bytes regardless
            chunk = os.read(fd, limit + 1 - size if size else max(info.st_size + 1, 1))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise InputError(shown_path(path), f"cannot read the {what} file ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if size > limit:
        raise InputError(shown_path(path), f"the file is more than {limit:,} bytes; {_a(what)} file may be at most {limit:,}")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks), info


def decode_text(raw: bytes, source: str, what: str) -> str:
    """``raw`` as UTF-8 text (a leading byte-order mark dropped); InputError names the line and column of a bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        start = exc.start
        line = raw.count(b"\n", 0, start) + 1
        column = start - (raw.rfind(b"\n", 0, start) + 1) + 1
        raise InputError(source, f"column {column}: byte 0x{raw[start]:02x} is not UTF-8; "
                                 f"save the {what} as UTF-8 text", line) from None


def read_text(path: str | os.PathLike[str], limit: int, what: str) -> str:
    """A regular file of at most ``limit`` bytes, as UTF-8 text; InputError otherwise."""
    return decode_text(read_bytes(path, limit, what), shown_path(path), what)


# --------------------------------------------------------------------------- JSON


# A JSON string from its opening quote: escaped characters skipped, to its closing quote or, when
# there is none, to the end of the text. The match from a quote always succeeds, so the search
# never restarts inside a string: one linear pass in C whatever the text.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"\\[]{}')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # an object nests like an array
_STEP = [0] * 256
_STEP[ord("[")], _STEP[ord("]")] = 1, -1
_PEEL_PASSES = 64  # deeper than every limit on nesting, so a refused file is counted exactly


def outside_json_strings(raw: bytes, drop: bytes | None = None) -> bytes:
    """What of the JSON text ``raw`` lies outside its strings (each string becomes one space);
    ``drop``: bytes deleted first (quotes and backslashes must stay), for speed.

    Escapes first: a run of backslashes pairs up from its start (``\\\\`` is one backslash,
    and goes) and the quote after a backslash left over is escaped (it goes, the backslash
    stays); then every string lies between two remaining quotes. That reading of a backslash
    holds inside strings only, so a backslash left outside every string (never valid JSON) sends
    the text to the regex, which reads it as the character loop of a JSON reader does.
    """
    text = raw.replace(b"\\\\", b"").replace(b'\\"', b"\\") if b"\\" in raw else raw
    if drop is not None:
        text = text.translate(None, drop)
    outside = b" ".join(text.split(b'"')[::2])
    if b"\\" in outside:
        outside = _JSON_STRING.sub(b" ", raw)
        outside = outside if drop is None else outside.translate(None, drop)
    return outside


def json_nesting(text: str | bytes) -> int:
    """How deeply arrays and objects nest in JSON text, brackets inside strings ignored.

    Linear time in C on any input (no Python loop per character, and no regex that rescans
    from every quote): strings are cut out, every other character but brackets is dropped,
    and innermost pairs ``[]`` are peeled off the rest, one level per pass (a few passes for
    any honest file). Brackets that do not pair up, or nest deeper than ``_PEEL_PASSES``,
    are counted one by one as a running depth. Either way the answer is the deepest running
    depth of the brackets outside strings, from 0 at the start.
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    brackets = outside_json_strings(raw, drop=_NOT_STRUCTURE).translate(_ONE_KIND, _NOT_BRACKETS)
    rest, depth = brackets, 0
    while rest and depth <= _PEEL_PASSES:
        peeled = rest.replace(b"[]", b"")
        if len(peeled) == len(rest):
            break  # brackets that do not pair up: count below
        rest, depth = peeled, depth + 1
    if not rest:
        return depth
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets))))


class JsonRefused(ValueError):
    """JSON text that parses but is not accepted (:func:`strict_json`): a ``key`` twice in one
    object, or a ``constant`` (``NaN``, ``Infinity``, ``-Infinity``), which JSON does not have."""

    def __init__(self, message: str, *, key: str | None = None, constant: str | None = None) -> None:
        super().__init__(message)
        self.key, self.constant = key, constant


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):  # with a key twice, which value counts would be a guess
        seen: set[str] = set()
        twice = next(k for k, _v in pairs if k in seen or seen.add(k))
        raise JsonRefused(f"the key {json.dumps(twice[:40])} appears twice in one object", key=twice)
    return doc


def _no_constant(token: str) -> Any:
    raise JsonRefused(f"{token} is not a JSON number", constant=token)


def strict_json(text: str | bytes, **numbers: Any) -> Any:
    """``json.loads(text)`` of a file or request from outside, refusing what JSON's grammar allows
    but a reader cannot trust: a key twice in one object and ``NaN``/``Infinity``
    (:class:`JsonRefused`, a ValueError, says which). ``numbers``: ``parse_float``/``parse_int``.
    Measure the nesting first (:func:`json_nesting`): the parser recurses."""
    return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, **numbers)
