"""Reading an LMS's bulk download as it comes, and grading it.

``collect(paths, roster)`` takes zips, unpacked folders or single files and returns every
hand-in with the student the LMS says uploaded it (through the roster's LMS ids, else its
names), plus every file that could not be matched or read, by name. ``grade_collected`` then
grades them exactly as ``qkvquiz grade`` grades a folder: one file per student chosen by
:mod:`qkvquiz.grade.choose` (the zip member's time stands in for the file time, so of two
files the later upload wins; in a Canvas zip, whose entries all carry the zip's time, the
attachment id orders them), with the LMS's "late" mark as a flag; whom each file is graded as,
and what a group's members get, are grading rules (:mod:`qkvquiz.grade.attribution`).

Who a file belongs to: with a roster, the LMS's identity decides (the LMS authenticated the
upload); a file whose own ``"student"`` differs is graded as the uploader's, with a note.
Without a roster, or where the LMS hides the uploader (Canvas' anonymous grading), the file's
own ``"student"`` decides, as for any folder.

What one student's upload may cost is bounded (:data:`MAX_FILES_PER_STUDENT`,
:data:`MAX_BYTES_PER_STUDENT`), chosen from the names before any file is read.

Nothing a student uploads steers the run: which LMS made a download is read from the names
the LMS writes (:func:`.lms_names.detect`), and Gradescope's metadata only from the export's
root (:func:`.lms_names.gradescope_roots`); a file named like it anywhere else is refused and
listed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..core.bounded_yaml import load_yaml
from ..core.collector import collector_paused
from ..core.folders import walk_json_files
from ..core.i18n import _, entered
from ..core.inputs import InputError, decode_text, read_bytes, shown_path
from ..core.submissions import submission_from_bytes
from ..core.zips import ZipListing, read_zip
from ..engine.backend import placed
from ..grade.attribution import Attributed, grade_attributed
from ..grade.results import FileProblem, GradeReport
from ..grade.workload import grading_seconds
from ..key import Key
from ..roster import Roster
from .lms_names import (
    CANVAS,
    GRADESCOPE,
    GRADESCOPE_METADATA,
    LMS_NAMES,
    MOODLE,
    LmsName,
    canvas_readings,
    detect,
    gradescope_roots,
    parse_gradescope,
    parse_moodle,
)
from .uploaders import Who, match_canvas, match_moodle, match_submitters

MAX_METADATA_BYTES = 20_000_000  # Gradescope's submission_metadata.yml: about 300 bytes per submission
MAX_SUBMISSION_BYTES = 1_000_000  # as grade.grader's limit
# What is read of one student's (or team's) upload in a download: a hand-in is one JSON file of a
# few kilobytes, resubmitted a few times; Moodle's own default is at most 20 files a submission.
# A student over either limit has only their latest files read, up to the limits, and the rest
# listed: one student's flood never costs the class its grading, nor the run its memory.
MAX_FILES_PER_STUDENT = 50
MAX_BYTES_PER_STUDENT = 20_000_000
LMS_CHOICES = ("auto", *LMS_NAMES, "none")
CANVAS_ORDER_STEP = 0.001  # seconds between Canvas uploads in attachment order (see _order_canvas_uploads)

Submitters = dict[str, list[dict[str, str]]]  # Gradescope submission id -> its submitters (name, sid, email)


@dataclass
class Handin:
    """One file handed in: where it came from, its bytes, and whom the LMS says it is from."""

    source: str  # a file path, or "<archive>/<member>"
    data: bytes
    mtime: float | None
    student: str | None = None  # the roster's id of the uploader; None: the file's own "student" decides
    via: str = ""  # how the uploader was identified ("Canvas user 340934 ('lovelaceada')")
    late: bool = False
    named: LmsName | None = None  # what the LMS's name for the file says
    notes: list[str] = field(default_factory=list)  # said on the student's result when this file is graded
    anonymous: str = ""  # Canvas' anonymous id ("anon_Xy7Qz"): the LMS hides who uploaded it
    group: tuple[str, ...] = ()  # a Gradescope group submission: every submitter's roster id


@dataclass
class Collected:
    handins: list[Handin] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)  # not matched or not readable, by file
    skipped: list[FileProblem] = field(default_factory=list)  # left out on purpose (not JSON, links)
    lms: dict[str, str | None] = field(default_factory=dict)  # each path given -> the LMS it came from


@dataclass
class _Download:
    """One zip or folder as read: what tells its LMS, and the files to grade."""

    shown: str  # the path given, printable
    top: str  # a folder's own name ("" for a zip): a student's folder given by itself is one upload
    names: list[str] = field(default_factory=list)  # every member path read or left out, "/"-separated
    entries: list[tuple[str, bytes, float | None]] = field(default_factory=list)  # the JSON files
    metadata: dict[str, bytes] = field(default_factory=dict)  # every file named submission_metadata.yml


def is_zip(path: Path) -> bool:
    """A regular file named ``*.zip`` or starting with a zip signature."""
    if path.suffix.lower() == ".zip":
        return True
    try:
        with open(path, "rb") as fh:  # only regular files get here (checked by the caller)
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def collect(paths: Sequence[str | Path], roster: Roster | None = None, lms: str = "auto",
            lang: str | None = None) -> Collected:
    """Every hand-in in ``paths`` (zips, folders, files), matched to the roster where an LMS named it.

    ``lms`` is ``auto`` (read the names), ``canvas``, ``moodle``, ``gradescope``, or ``none``
    (names mean nothing; each file's ``"student"`` decides). InputError for a path that cannot
    be used at all (no such file, not a zip, a zip over its bounds); a bad member, an
    unmatched file or a refused metadata file is listed in ``problems`` and the others are
    still collected. ``lang``: the language of the problems' sentences (default: the one chosen
    around the call: grade enters the key's).
    """
    if lms not in LMS_CHOICES:
        raise ValueError(f"unknown LMS {lms!r}; choose from {', '.join(LMS_CHOICES)}")
    with entered(lang):
        return _collect(paths, roster, lms)


def _collect(paths: Sequence[str | Path], roster: Roster | None, lms: str) -> Collected:
    out = Collected()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            download = _folder_download(path, out, lms)
        elif path.is_file() and is_zip(path):
            download = _zip_download(path, out, lms)
        else:
            try:
                data = read_bytes(path, MAX_SUBMISSION_BYTES, "submission")
            except InputError as exc:
                out.problems.append(FileProblem(shown_path(path), exc.message))
                continue
            out.handins.append(Handin(shown_path(path), data, _mtime(path)))
            continue
        _collect_download(download, roster, lms, out)
    return out


def _kind(download: _Download, lms: str) -> str | None:
    """The LMS that named the download's paths (``lms`` unless it is ``auto``), or None."""
    return detect(download.names, download.top) if lms == "auto" else (None if lms == "none" else lms)


def _uploader(kind: str | None, rel: str) -> tuple[str, ...] | None:
    """Whose upload the member ``rel`` is by its name alone, before it is read: the LMS's id of
    the uploader (a Moodle folder's id and name, a Gradescope ``submission_<id>`` folder); a name
    that does not follow the LMS's naming is one more such upload. None where no LMS named the
    download: each file's own ``"student"`` decides, known only once it is read."""
    if kind is None:
        return None
    if kind == CANVAS:
        readings = canvas_readings(rel)
        return (CANVAS, readings[0].lms_id) if readings else ("",)
    if kind == MOODLE:
        named = parse_moodle(rel)
        return (MOODLE, named.lms_id, named.name) if named is not None else ("",)
    parts = rel.split("/")
    at = next((i for i, p in enumerate(parts[:-1]) if p.startswith("submission_")), None)
    return (GRADESCOPE, *parts[:at + 1]) if at is not None else ("",)


def _within_limits(download: _Download, lms: str, listed: Sequence[tuple[str, int, float | None]],
                   out: Collected) -> set[str]:
    """The members of ``listed`` (path, size, time) to read: of each uploader, the latest files
    up to :data:`MAX_FILES_PER_STUDENT` and :data:`MAX_BYTES_PER_STUDENT` (Canvas: the highest
    attachment ids); the rest are listed in ``out.problems``, one sentence per uploader."""
    kind = _kind(download, lms)
    by_uploader: dict[tuple[str, ...] | None, list[tuple[str, int, float | None]]] = {}
    for entry in listed:
        if _is_metadata(entry[0]):
            by_uploader.setdefault(None, []).append(entry)
        else:
            by_uploader.setdefault(_uploader(kind, entry[0]), []).append(entry)
    keep: set[str] = set()
    for uploader, entries in by_uploader.items():
        total = sum(size for _rel, size, _t in entries)
        if uploader is None or (len(entries) <= MAX_FILES_PER_STUDENT and total <= MAX_BYTES_PER_STUDENT):
            keep.update(rel for rel, _size, _t in entries)
            continue
        latest = sorted(entries, key=lambda e: (_upload_order(kind, e), e[0]), reverse=True)
        kept, size = [], 0
        for rel, bytes_, _t in latest:
            if len(kept) < MAX_FILES_PER_STUDENT and size + bytes_ <= MAX_BYTES_PER_STUDENT:
                kept.append(rel)
                size += bytes_
        keep.update(kept)
        first = min(rel for rel, _s, _t in entries)
        out.problems.append(FileProblem(f"{download.shown}/{first}", _(
            "this upload and %(others)s more of the same student hold %(files)s files (%(bytes)s bytes); at most "
            "%(max_files)s files and %(max_bytes)s bytes of one student are read: their %(kept)s latest files were "
            "read, the other %(left)s are not graded") % {
                "others": f"{len(entries) - 1:,}", "files": f"{len(entries):,}", "bytes": f"{total:,}",
                "max_files": MAX_FILES_PER_STUDENT, "max_bytes": f"{MAX_BYTES_PER_STUDENT:,}",
                "kept": len(kept), "left": f"{len(entries) - len(kept):,}"}))
    return keep


def _upload_order(kind: str | None, entry: tuple[str, int, float | None]) -> tuple:
    """Later uploads sort higher: Canvas by attachment id (its zip gives every entry one time),
    else by the file's time."""
    if kind == CANVAS:
        readings = canvas_readings(entry[0])
        if readings:
            return _as_number(readings[0].attachment), 0.0
    return (0, ""), entry[2] if entry[2] is not None else float("-inf")


def _collect_download(download: _Download, roster: Roster | None, lms: str, out: Collected) -> None:
    kind = _kind(download, lms)
    out.lms[download.shown] = kind
    roots = gradescope_roots(download.names, download.top) if kind == GRADESCOPE else []
    submitters = _gradescope_metadata(download, roots, out)
    handins = []
    for rel, data, mtime in download.entries:
        handin = Handin(f"{download.shown}/{rel}", data, mtime)
        if _identify(handin, kind, rel, roster, submitters, out):
            handins.append(handin)
    if kind == CANVAS:
        _order_canvas_uploads(handins)
    out.handins += handins


def _identify(handin: Handin, kind: str | None, rel: str, roster: Roster | None,
              submitters: dict[str, Submitters], out: Collected) -> bool:
    """Fill in who uploaded ``handin`` (the member ``rel`` of a download by ``kind``); False when
    it is not to be graded (each reason is added to ``out.problems``)."""
    if kind is None:
        if roster is not None:
            handin.notes.append(_("no Canvas, Moodle or Gradescope naming in this download, so the roster cannot "
                                  "say who uploaded the file: graded as the student it names"))
        return True
    # Gradescope: below the export root that holds the member; with no metadata at all (--from
    # gradescope on a folder without it), below the download, and every submission is unknown.
    root = (_root_of(rel, submitters) if submitters else "") if kind == GRADESCOPE else ""
    readings = _readings(kind, rel, root)
    if not readings:
        out.problems.append(FileProblem(handin.source, _(
            "the name does not follow %(lms)s's naming of a bulk download, so its student is not known")
            % {"lms": kind.title()}))
        return False
    if roster is None:
        who = Who(readings[0])
    elif kind == CANVAS:
        who = match_canvas(readings, roster)
    elif kind == MOODLE:
        who = match_moodle(readings[0], roster)
    else:
        who = match_submitters(readings[0], submitters.get(root or "", {}).get(readings[0].lms_id), roster)
    out.problems += [FileProblem(handin.source, why) for why in who.problems]
    named = who.named
    handin.named, handin.late, handin.via = named, named.late, named.describe()
    if named.anonymous:
        handin.anonymous = named.lms_id
        if roster is not None:
            handin.notes.append(_("Canvas' anonymous grading hides who uploaded this file: graded as the student "
                                  "it names"))
        return True
    if roster is None:
        return True
    if not who.entries:
        if named.default_team and not who.problems:
            handin.notes.append(_("Moodle's default group does not say who uploaded this file, and the roster names "
                                  "no groups: graded as the student it names"))
            return True
        return False
    entry, how = who.entries[0]
    handin.student = entry.student
    if how:
        # Translators: who uploaded a file, then how the roster matched them.
        handin.via = _("%(uploader)s, %(how)s") % {"uploader": handin.via, "how": how}
    if len(who.entries) > 1:
        handin.group = tuple(e.student for e, _how in who.entries)
    return True


def _readings(kind: str, rel: str, root: str | None) -> list[LmsName]:
    """How the LMS's name for the member ``rel`` reads (Canvas: every way, likeliest first)."""
    if kind == CANVAS:
        return canvas_readings(rel)
    if kind == MOODLE:
        named = parse_moodle(rel)
    else:  # Gradescope: only below a root that holds the export's own metadata
        named = None if root is None else parse_gradescope(rel[len(root):])
    return [] if named is None else [named]


def _root_of(rel: str, submitters: dict[str, Submitters]) -> str | None:
    """The deepest export root that holds ``rel``; None when none does."""
    roots = [r for r in submitters if rel.startswith(r)]
    return max(roots, key=len) if roots else None


def _order_canvas_uploads(handins: list[Handin]) -> None:
    """Give Canvas hand-ins times in the order of their attachment ids.

    Canvas writes every entry of its zip with the zip's own time, so the file time cannot tell
    a resubmission from the first upload, and the tie would fall to path order. The attachment
    id can: it is Canvas' database id, higher for a later upload. Each hand-in gets the
    download's latest time plus ``CANVAS_ORDER_STEP`` per place in that order; an uploader's
    files also get a note saying so.
    """
    canvas = [(h, h.named) for h in handins if h.named is not None and h.named.attachment]
    if not canvas:
        return
    base = max((h.mtime for h, _named in canvas if h.mtime is not None), default=0.0)
    for rank, (h, _named) in enumerate(sorted(canvas, key=lambda pair: _as_number(pair[1].attachment))):
        h.mtime = base + rank * CANVAS_ORDER_STEP
    by_uploader: dict[str, list[tuple[Handin, LmsName]]] = {}
    for h, named in canvas:
        by_uploader.setdefault(named.lms_id, []).append((h, named))
    for files in by_uploader.values():
        if len(files) > 1:
            for h, named in files:
                h.notes.append(_("Canvas gives every file of its zip the same time, so uploads are ordered by "
                                 "attachment id (a higher one is newer): this file is attachment %(id)s")
                               % {"id": named.attachment})


def _as_number(digits: str) -> tuple[int, str]:
    """A digit string's order as a number, without ``int`` (a name may hold thousands of digits)."""
    digits = digits.lstrip("0")
    return len(digits), digits


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=False)
    except OSError:
        return None


def _is_metadata(name: str) -> bool:
    return name.rsplit("/", 1)[-1] == GRADESCOPE_METADATA


def _zip_download(path: Path, out: Collected, lms: str) -> _Download:
    download = _Download(shown_path(path), "")
    left_out: list[str] = []

    def want(name: str) -> bool:
        download.names.append("/".join(p for p in name.replace("\\", "/").split("/") if p))
        ok = name.lower().endswith(".json") or _is_metadata(name)
        if not ok:
            left_out.append(name)
        return ok

    def choose(listed: list[ZipListing]) -> set[str]:
        return _within_limits(download, lms, [(m.name, m.size, m.mtime) for m in listed], out)

    members, skipped = read_zip(path, want, choose)
    for s in skipped:
        out.problems.append(FileProblem(str(s.path), s.reason))
    for name in left_out:
        out.skipped.append(FileProblem(f"{download.shown}/{name}", _("not a .json file; only JSON hand-ins are graded")))
    for m in members:
        if _is_metadata(m.name):
            download.metadata[m.name] = m.data
        else:
            download.entries.append((m.name, m.data, m.mtime))
    return download


def _folder_download(path: Path, out: Collected, lms: str) -> _Download:
    if path.is_symlink():
        raise InputError(shown_path(path), "is a link to a folder; links to folders are not followed: name the folder itself")
    download = _Download(shown_path(path), path.name)
    found, skipped = walk_json_files(path, frozenset({"key.json", "results.json"}))
    for s in skipped:
        out.skipped.append(FileProblem(shown_path(s.path), s.reason))
    folders = {""}  # every folder that holds a hand-in, and those above it, as "" or "a/b/"
    listed = []
    for file in found:
        rel = file.relative_to(path).as_posix()
        download.names.append(rel)
        parts = rel.split("/")[:-1]
        folders.update("".join(q + "/" for q in parts[:i]) for i in range(1, len(parts) + 1))
        stat = _stat(file)
        listed.append((rel, stat.st_size if stat else 0, stat.st_mtime if stat else None))
    keep = _within_limits(download, lms, listed, out)
    for file in found:
        rel = file.relative_to(path).as_posix()
        if rel not in keep:
            continue
        try:
            data = read_bytes(file, MAX_SUBMISSION_BYTES, "submission", follow=False)
        except InputError as exc:
            out.problems.append(FileProblem(shown_path(file), exc.message))
            continue
        download.entries.append((rel, data, _mtime(file)))
    # Gradescope's metadata lies beside the submission folders, so in a folder that holds hand-ins
    # or above one; wherever it is, it is read here and then used only at an export's root.
    for folder in sorted(folders):
        rel = folder + GRADESCOPE_METADATA
        candidate = path / rel
        if not candidate.is_file() or candidate.is_symlink():
            continue
        download.names.append(rel)
        try:
            download.metadata[rel] = read_bytes(candidate, MAX_METADATA_BYTES, "Gradescope metadata", follow=False)
        except InputError as exc:
            out.problems.append(FileProblem(shown_path(candidate), exc.message))
    return download


def _gradescope_metadata(download: _Download, roots: list[str], out: Collected) -> dict[str, Submitters]:
    """Each export root's submitters; every other file named like the metadata is refused and listed
    (a student's upload may hold one, saying whose file is whose)."""
    result: dict[str, Submitters] = {}
    for rel, data in download.metadata.items():
        folder = rel[: len(rel) - len(GRADESCOPE_METADATA)]
        source = f"{download.shown}/{rel}"
        if folder in roots:
            result[folder] = _gradescope_submitters(data, source)
        else:
            out.problems.append(FileProblem(source, _(
                "not read: Gradescope's %(file)s counts only at the root of its export, beside the submission "
                "folders, where no student can put a file") % {"file": GRADESCOPE_METADATA}))
    return result


def _gradescope_submitters(metadata: bytes, source: str) -> Submitters:
    """Submission id -> its submitters (name, sid, email as text) from ``submission_metadata.yml``.

    Gradescope writes it from Ruby: keys are symbols (``:submitters:``), read here with or
    without the colon. It is read like any untrusted YAML (bounded, safe loader).
    """
    doc = load_yaml(decode_text(metadata, source, "Gradescope metadata"), source)
    if not isinstance(doc, dict):
        raise InputError(source, "not a mapping of submission_<id> to its submitters")
    result: Submitters = {}
    for key, value in doc.items():
        m = str(key).removeprefix(":")
        if not m.startswith("submission_") or not isinstance(value, dict):
            continue
        fields = {str(k).lstrip(":"): v for k, v in value.items()}
        people = []
        for person in fields.get("submitters") or []:
            if isinstance(person, dict):
                people.append({str(k).lstrip(":"): _text(v) for k, v in person.items()})
        result[m.removeprefix("submission_")] = people
    return result


def _text(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    return "" if value is None else str(value)


def grade_collected(key: Key, collected: Collected, *, xp: Any = np, duplicates: str = "latest",
                    lang: str | None = None, notes: Callable[[str], None] | None = None) -> GradeReport:
    """Grade collected hand-ins: read each (a bad one becomes a problem), re-attribute by the LMS, grade.

    ``lang``: the language of every sentence (default: the one chosen around the call, else the
    key's); ``xp`` and ``notes``: the array backend, placed as :func:`qkvquiz.grade.grader.grade` places it."""
    with entered(lang, key.lang), collector_paused():
        xp = placed(xp, lambda: grading_seconds(key, len(collected.handins)), notes)
        return _grade_collected(key, collected, xp=xp, duplicates=duplicates)


def _grade_collected(key: Key, collected: Collected, *, xp, duplicates: str) -> GradeReport:
    problems = list(collected.problems)
    handed = []
    for h in collected.handins:
        try:
            sub = submission_from_bytes(h.data, h.source)
        except ValueError as exc:
            problems.append(FileProblem(h.source, str(exc)))
            continue
        sub.mtime = h.mtime
        submission = h.named.describe() if h.named is not None and h.group else ""
        handed.append(Attributed(sub, h.student, h.via, h.late, list(h.notes), h.anonymous, h.group, submission))
    # Who each file is graded as, and what a group's members get: rules of grading (grade/).
    return grade_attributed(key, handed, problems, list(collected.skipped), xp=xp, duplicates=duplicates)


def grade_download(key: Key, paths: Iterable[str | Path], roster: Roster | None = None, *, lms: str = "auto",
                   xp=np, duplicates: str = "latest") -> GradeReport:
    """Grade an LMS's bulk download (zips, unpacked folders, files): :func:`collect`, then :func:`grade_collected`."""
    with entered(None, key.lang):
        return grade_collected(key, collect(list(paths), roster, lms), xp=xp, duplicates=duplicates)
