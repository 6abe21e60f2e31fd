"""An LMS's bulk download, a zip archive: its JSON members read into memory within bounds."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from .folders import Skipped
from .inputs import InputError, open_regular, shown_path

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


@dataclass(frozen=True)
class ZipListing:
    """A member as the archive's directory lists it, before it is read."""

    name: str  # its path inside the archive, "/"-separated
    size: int  # uncompressed, as declared (a member is never read past MAX_ZIP_MEMBER_BYTES)
    mtime: float | None


def read_zip(path: str | os.PathLike[str], want: Any = None, choose: Any = None
             ) -> tuple[list[ZipMember], list[Skipped]]:
    """The members of the zip archive ``path`` that ``want(name)`` accepts (default: every file), read
    into memory within the bounds above; and every member left out, with why.

    ``choose(listings)``, when given, sees every member that would be read (a :class:`ZipListing`
    each, from the directory alone) and returns the names of those to read: the caller's own
    bounds (a limit per student) cost nothing for the members it leaves out, which are not read
    and not listed here.

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
            readable = []
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
                readable.append((info, member_path, "/".join(parts)))
            if choose is not None:
                chosen = set(choose([ZipListing(joined, info.file_size, _zip_time(info))
                                     for info, _path, joined in readable]))
                readable = [r for r in readable if r[2] in chosen]
            for info, member_path, joined in readable:
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
                members.append(ZipMember(joined, data, _zip_time(info)))
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
