"""Reading files that come from outside: the one door every untrusted path goes through.

Specs, audit files, rosters, the secret, key files and submissions are read here, and
folders of submissions are walked here. Whatever the file holds, reading it ends quickly, in
bounded memory, with either the data or an :class:`InputError` whose message names the file
(and the line, where there is one):

- only regular files are read: a folder, a FIFO (which would block), a device (``/dev/zero``
  never ends) or a socket is refused after ``open`` with ``O_NONBLOCK``, by ``fstat`` of the
  open descriptor, so what is checked is what is read;
- at most ``limit + 1`` bytes are read, whatever the file claims its size is;
- text must be UTF-8; a bad byte is reported with its line and column;
- YAML goes through :func:`load_yaml`: a safe loader that refuses duplicate keys (with both
  lines), nesting deeper than ``MAX_YAML_DEPTH`` and documents whose aliases would expand
  to more than ``MAX_YAML_NODES`` values (the "billion laughs" bomb), before anything is built;
- folders are walked by :func:`walk_json_files` without following a link out of the folder,
  into a folder, or from the command line into a folder, and with a bound on entries visited.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Hashable
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

# Limits, each far above what an honest file needs (the largest bundled spec is about 3 KB).
MAX_SPEC_BYTES = 1_000_000  # a spec or an audit file
MAX_ROSTER_BYTES = 5_000_000  # about 20,000 ids of up to 200 characters, with room for CSV columns
MAX_SECRET_BYTES = 4_096  # `qkvquiz init` writes 65 bytes
MAX_KEY_BYTES = 1_000_000_000  # key.json of MAX_STUDENTS students of a long spec (16 KB each for delta-rule)
MAX_YAML_DEPTH = 32  # mappings and lists inside each other (a spec needs 6)
# Values in a YAML document, counted as written and again once its aliases are expanded. The
# pure-Python parser takes about 2 s for this many; a spec holds hundreds, an audit file with
# every given written out a few thousand.
MAX_YAML_NODES = 50_000
MAX_WALK_ENTRIES = 200_000  # files and folders looked at below one folder of submissions
MAX_WALK_DEPTH = 32  # folders inside each other below one folder of submissions

# Students in one generated set. Each student costs roughly the key's share (tens of KB for
# a long spec) plus their worksheet files; generate prints an estimate before solving.
MAX_STUDENTS = 20_000


class InputError(ValueError):
    """A file that cannot be used; ``str()`` is one sentence that starts with the file's name."""

    def __init__(self, source: str, message: str, line: int | None = None) -> None:
        self.source, self.message, self.line = source, message, line
        where = f"{source}: line {line}" if line is not None else source
        super().__init__(f"{where}: {message}")


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


# --------------------------------------------------------------------------- YAML


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with depth, alias expansion and duplicate keys checked.

    Depth is counted while composing (the composer recurses once per level, so a deep
    document would otherwise end in RecursionError). Alias expansion is measured on the
    composed node graph before any Python object is built: an alias costs what its anchor
    expands to, so a 700-byte bomb is refused without allocating its expansion.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # type: ignore[override]
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise _YamlRefused(f"mappings and lists are nested more than {MAX_YAML_DEPTH} deep", mark.line + 1)
            if self._nodes > MAX_YAML_NODES:  # stop parsing here: the rest is never scanned
                mark = self.peek_event().start_mark
                raise _YamlRefused(f"the document holds more than {MAX_YAML_NODES:,} values", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:  # type: ignore[override]
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:  # int("9" * 5000), a date out of range
            reason = str(exc).split(";")[0].split(": value has")[0][:120]  # Python's own advice is not for users
            raise _YamlRefused(f"the value cannot be read ({reason})", node.start_mark.line + 1) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:  # type: ignore[override]
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base` keys are meant to be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base constructor reports it
                if first is not None:
                    lines = f"on line {line}" if first == line else f"(lines {first} and {line})"
                    raise _YamlRefused(f"the key {key!r} appears twice in one mapping {lines}; "
                                       "which one counts would be a guess", line)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _YamlRefused(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


def _expansion(root: Node) -> tuple[int, int]:
    """(values, depth) of the document ``root`` once every alias is expanded; _YamlRefused past the bounds.

    Shared nodes (aliases) are measured once and counted at every use; the walk keeps its
    own stack, and a node met again while still being measured is a recursive alias.
    """
    size: dict[int, tuple[int, int]] = {}
    on_stack: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        ident = id(node)
        children: list[Node]
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        if done:
            values = 1 + sum(size[id(c)][0] for c in children)
            depth = 1 + max((size[id(c)][1] for c in children), default=0)
            on_stack.discard(ident)
            size[ident] = (values, depth)
            if values > MAX_YAML_NODES:
                raise _YamlRefused(f"its aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)",
                                   node.start_mark.line + 1)
            if depth > MAX_YAML_DEPTH:
                raise _YamlRefused(f"its aliases nest mappings and lists more than {MAX_YAML_DEPTH} deep",
                                   node.start_mark.line + 1)
            continue
        if ident in size:
            continue
        if ident in on_stack:
            raise _YamlRefused("an alias refers to the mapping or list that contains it", node.start_mark.line + 1)
        on_stack.add(ident)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    return size[id(root)]


def _compose_checked(text: str) -> tuple[_BoundedLoader, Node | None]:
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _expansion(node)
        return loader, node
    except BaseException:
        loader.dispose()
        raise


def load_yaml(text: str, source: str) -> Any:
    """One YAML document from ``text`` with the safe loader and the bounds above; InputError names ``source`` and the line.

    Also turned into InputError: YAML syntax errors (with their line), and values the
    constructor cannot build (an integer of more than 4,300 digits, a bad date).
    """
    try:
        loader, node = _compose_checked(text)
        try:
            return None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except _YamlRefused as exc:
        raise InputError(source, exc.message, exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "not valid YAML"
        raise InputError(source, f"not valid YAML: {what}", None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:
        raise InputError(source, f"not valid YAML: {exc}") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        # Raised by constructors (int("9" * 5000), a date out of range); the line is not known here.
        raise InputError(source, f"a value cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from None


def read_yaml(path: str | os.PathLike[str], limit: int, what: str) -> Any:
    """A YAML file through every check above (size, kind, UTF-8, depth, aliases, duplicate keys)."""
    source = shown_path(path)
    return load_yaml(decode_text(read_bytes(path, limit, what), source, what), source)


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


# --------------------------------------------------------------------------- folders


@dataclass(frozen=True)
class Skipped:
    """A path met while walking a folder and left out, and why (for a note to the user)."""

    path: Path
    reason: str


def walk_json_files(top: Path, skip_names: frozenset[str] = frozenset()) -> tuple[list[Path], list[Skipped]]:
    """``*.json`` regular files below the folder ``top``, sorted, and what was left out.

    Never followed: a link to a folder (it may lead out of ``top``, or in a circle); a link
    to a file outside ``top``. A link to a file inside ``top`` is kept (the grader dedupes by
    the resolved path). Hidden files and folders and ``__MACOSX`` (unpacked archives) are
    left out silently, as are names in ``skip_names``. More than ``MAX_WALK_ENTRIES`` entries
    or folders ``MAX_WALK_DEPTH`` deep: InputError, so ``/`` named by mistake ends quickly.
    """
    root = Path(os.path.realpath(top))
    found: list[Path] = []
    skipped: list[Skipped] = []
    seen = 0
    stack: list[tuple[Path, int]] = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skipped.append(Skipped(folder, f"cannot list the folder ({exc.strerror or exc})"))
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_WALK_ENTRIES:
                raise InputError(shown_path(top), f"holds more than {MAX_WALK_ENTRIES:,} files and folders; "
                                                  "name the folder of submissions itself")
            name = entry.name
            if name.startswith(".") or name == "__MACOSX":
                continue
            path = Path(entry.path)
            try:
                if entry.is_symlink():
                    if _is_dir_link(path):
                        skipped.append(Skipped(path, "a link to a folder; links to folders are not followed"))
                        continue
                    if not name.lower().endswith(".json") or name in skip_names:
                        continue
                    # realpath, not Path.resolve: a link loop must not raise (it fails when read).
                    target = Path(os.path.realpath(path))
                    if not target.is_relative_to(root):
                        skipped.append(Skipped(path, "a link to a file outside the folder; not followed"))
                        continue
                    found.append(path)
                elif entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_WALK_DEPTH:
                        raise InputError(shown_path(top), f"folders are nested more than {MAX_WALK_DEPTH} deep")
                    stack.append((path, depth + 1))
                elif name.lower().endswith(".json") and name not in skip_names:
                    found.append(path)  # a FIFO or device named *.json is refused when read
            except OSError as exc:
                skipped.append(Skipped(path, f"cannot be looked at ({exc.strerror or exc})"))
    return sorted(found), skipped


def _is_dir_link(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False


# --------------------------------------------------------------------------- zip archives

# An LMS's bulk download is a zip. Only its .json members are ever read, each into memory
# (never extracted to disk); every bound below is checked before or while a member is read,
# so a crafted archive costs at most these many bytes and entries.
MAX_ZIP_BYTES = 8_000_000_000  # the archive itself (PDFs beside the hand-ins make it large; it is never read whole)
MAX_ZIP_MEMBERS = 100_000  # entries listed in the archive's directory
MAX_ZIP_DIRECTORY_BYTES = 64_000_000  # the central directory (about 100 bytes per entry)
MAX_ZIP_MEMBER_BYTES = 1_000_000  # one member that is read (a submission's own limit)
MAX_ZIP_TOTAL_BYTES = 2_000_000_000  # everything decompressed from one archive
MAX_ZIP_RATIO = 200  # uncompressed / compressed size of a member larger than ZIP_RATIO_FROM
ZIP_RATIO_FROM = 65_536  # below this, even a file of one repeated byte is harmless


@dataclass(frozen=True)
class ZipMember:
    """One member read from an archive: its path inside it (``/``-separated), bytes and time."""

    name: str
    data: bytes
    mtime: float | None  # the member's time (zip stores local time without a zone; read as UTC)


def zip_member_problem(info: Any) -> str | None:
    """Why the member ``info`` (a ``zipfile.ZipInfo``) is never read, or None when it may be."""
    name = info.filename
    if "\x00" in name:
        return "its name holds a NUL character"
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[0].isalpha() and name[1] == ":"):
        return "an absolute path inside the archive; never read"
    if ".." in parts:
        return "a path with '..' inside the archive; never read"
    mode = (info.external_attr >> 16) & 0xFFFF
    if stat.S_ISLNK(mode):
        return "a symbolic link inside the archive; links are never followed"
    if info.flag_bits & 0x1:
        return "encrypted; download the archive again without a password"
    if info.file_size > MAX_ZIP_MEMBER_BYTES:
        return f"{info.file_size:,} bytes uncompressed; a member may be at most {MAX_ZIP_MEMBER_BYTES:,}"
    if info.file_size > ZIP_RATIO_FROM and info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1):
        return (f"compressed more than {MAX_ZIP_RATIO} to 1 ({info.compress_size:,} → {info.file_size:,} bytes); "
                "a zip bomb? not read")
    return None


def _zip_time(info: Any) -> float | None:
    import calendar

    try:
        return float(calendar.timegm((*info.date_time, 0, 0, 0)))
    except (ValueError, OverflowError, TypeError):
        return None


def read_zip(path: str | os.PathLike[str], want: Any = None) -> tuple[list[ZipMember], list[Skipped]]:
    """The members of the zip archive ``path`` that ``want(name)`` accepts (default: every file), read
    into memory within the bounds above; and every member left out, with why.

    The archive's directory is checked first (entry count and size, from the end record, before
    it is parsed). A member is refused, and listed, when its path is absolute or climbs out with
    ``..``, when it is a link, encrypted, larger than ``MAX_ZIP_MEMBER_BYTES`` or compressed more
    than ``MAX_ZIP_RATIO`` to 1; a member whose data turns out larger than it declared is cut at
    the limit and refused. A member whose name is marked UTF-8 but is not is refused by itself
    (its name shown with ``\\xff`` escapes). Folders, hidden files and ``__MACOSX`` are left out
    silently. An archive that cannot be used at all raises InputError naming it.
    """
    import zipfile

    source = shown_path(path)
    members: list[ZipMember] = []
    skipped: list[Skipped] = []
    with open_regular(path, MAX_ZIP_BYTES, "zip") as fh:
        _check_zip_directory(fh, source)
        archive, bad_names = _open_zip(fh, source)
        with archive:
            infos = archive.infolist()
            if len(infos) > MAX_ZIP_MEMBERS:
                raise InputError(source, f"the archive lists {len(infos):,} members; at most {MAX_ZIP_MEMBERS:,} are read")
            total = 0
            for index, info in enumerate(infos):
                name = info.filename
                parts = [p for p in name.replace("\\", "/").split("/") if p]
                if info.is_dir() or not parts:
                    continue
                if any((p.startswith(".") and p != "..") or p == "__MACOSX" for p in parts):
                    continue
                if index in bad_names:
                    shown = bad_names[index].decode("utf-8", "backslashreplace")
                    skipped.append(Skipped(Path(f"{source}/{shown}"), "its name is not valid UTF-8, though the "
                                                                      "archive marks it as UTF-8; never read"))
                    continue
                member_path = Path(f"{source}/{name}")  # never joined as a path: "/abs" must not replace it
                problem = zip_member_problem(info)
                if problem is None and want is not None and not want(name):
                    continue
                if problem is not None:
                    skipped.append(Skipped(member_path, problem))
                    continue
                try:
                    with archive.open(info) as stream:
                        data = stream.read(MAX_ZIP_MEMBER_BYTES + 1)
                except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
                    skipped.append(Skipped(member_path, f"cannot be read from the archive ({exc})"))
                    continue
                total += len(data)
                if len(data) > MAX_ZIP_MEMBER_BYTES:
                    skipped.append(Skipped(member_path, f"holds more than {MAX_ZIP_MEMBER_BYTES:,} bytes "
                                                        "(more than its entry declares); not read"))
                    continue
                if total > MAX_ZIP_TOTAL_BYTES:
                    raise InputError(source, f"more than {MAX_ZIP_TOTAL_BYTES:,} bytes would be decompressed")
                members.append(ZipMember("/".join(parts), data, _zip_time(info)))
    return members, skipped


def _open_zip(fh: BinaryIO, source: str) -> tuple[Any, dict[int, bytes]]:
    """``zipfile.ZipFile`` over ``fh``, and the raw names of the entries (by position) whose names
    are marked UTF-8 but are not.

    ``zipfile`` refuses the whole archive for one such name (it decodes every name while reading
    the directory). Then the directory is read here, those entries are unmarked in a copy (so
    ``zipfile`` reads their names as code page 437 and never fails) and ``zipfile`` reads the
    file through that copy; the caller refuses those entries one by one, as any bad member.
    """
    import zipfile

    errors = (zipfile.BadZipFile, OSError, ValueError, EOFError)
    try:
        return zipfile.ZipFile(fh), {}
    except UnicodeDecodeError:
        pass  # a member's name: refused by itself below
    except errors as exc:
        raise InputError(source, f"not a readable zip archive ({exc})") from None
    start, directory = _zip_directory(fh, source)
    patched, bad = _unmark_bad_utf8_names(directory)
    try:
        return zipfile.ZipFile(_Patched(fh, start, patched)), bad  # type: ignore[arg-type]
    except errors as exc:
        raise InputError(source, f"not a readable zip archive ({exc})") from None


def _zip_directory(fh: BinaryIO, source: str) -> tuple[int, bytes]:
    """Where the central directory starts and its bytes, found as ``zipfile`` finds them (the last
    end record; the ZIP64 records just before it, when there)."""
    import struct

    fh.seek(0, os.SEEK_END)
    size = fh.tell()
    tail_len = min(size, 65_557)
    fh.seek(size - tail_len)
    tail = fh.read(tail_len)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        raise InputError(source, "not a zip archive (no end-of-archive record); give the .zip the LMS made")
    end = size - tail_len + at
    (length,) = struct.unpack("<I", tail[at + 12:at + 16])
    start = end - length
    if end >= 76:
        fh.seek(end - 76)
        zip64 = fh.read(76)
        if zip64[56:60] == b"PK\x06\x07" and zip64[:4] == b"PK\x06\x06":
            (length,) = struct.unpack("<Q", zip64[40:48])
            start = end - 76 - length
    if length > MAX_ZIP_DIRECTORY_BYTES:
        raise InputError(source, f"the archive's directory is {length:,} bytes; at most {MAX_ZIP_DIRECTORY_BYTES:,}")
    if start < 0:
        raise InputError(source, "not a readable zip archive (bad offset for its directory)")
    fh.seek(start)
    return start, fh.read(length)


def _unmark_bad_utf8_names(directory: bytes) -> tuple[bytes, dict[int, bytes]]:
    """The directory with the UTF-8 mark (flag bit 11) taken off every entry whose name is not
    UTF-8, and those names by the entry's position."""
    import struct

    data = bytearray(directory)
    bad: dict[int, bytes] = {}
    pos = index = 0
    while pos + 46 <= len(data) and data[pos:pos + 4] == b"PK\x01\x02":
        (flags,) = struct.unpack_from("<H", data, pos + 8)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", data, pos + 28)
        name = bytes(data[pos + 46:pos + 46 + name_len])
        if flags & 0x800:
            try:
                name.decode("utf-8")
            except UnicodeDecodeError:
                bad[index] = name
                struct.pack_into("<H", data, pos + 8, flags & ~0x800)
        pos += 46 + name_len + extra_len + comment_len
        index += 1
    return bytes(data), bad


class _Patched:
    """A read-only file that reads as ``fh`` but with ``patch`` in place of the bytes at ``start``."""

    def __init__(self, fh: BinaryIO, start: int, patch: bytes) -> None:
        self._fh, self._start, self._patch = fh, start, patch

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def read(self, n: int = -1) -> bytes:
        pos = self._fh.tell()
        data = self._fh.read(n)
        lo, hi = max(pos, self._start), min(pos + len(data), self._start + len(self._patch))
        if lo < hi:
            data = data[:lo - pos] + self._patch[lo - self._start:hi - self._start] + data[hi - pos:]
        return data


def _check_zip_directory(fh: Any, source: str) -> None:
    """Refuse an archive whose end record announces too many entries or too large a directory,
    before ``zipfile`` reads the directory into memory (ZIP64 archives are counted after)."""
    import struct

    try:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        tail_len = min(size, 65_557)  # the end record (22 bytes) and a comment of at most 65,535
        fh.seek(size - tail_len)
        tail = fh.read(tail_len)
        fh.seek(0)
    except OSError as exc:
        raise InputError(source, f"cannot read the zip archive ({exc.strerror or exc})") from None
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        raise InputError(source, "not a zip archive (no end-of-archive record); give the .zip the LMS made")
    entries, directory = struct.unpack("<HI", tail[at + 10:at + 16])
    if entries != 0xFFFF and entries > MAX_ZIP_MEMBERS:
        raise InputError(source, f"the archive lists {entries:,} members; at most {MAX_ZIP_MEMBERS:,} are read")
    if directory != 0xFFFFFFFF and directory > MAX_ZIP_DIRECTORY_BYTES:
        raise InputError(source, f"the archive's directory is {directory:,} bytes; at most {MAX_ZIP_DIRECTORY_BYTES:,}")
