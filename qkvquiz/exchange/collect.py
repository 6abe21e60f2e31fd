"""Reading an LMS's bulk download as it comes, and grading it.

``collect(paths, roster)`` takes zips, unpacked folders or single files and returns every
hand-in with the student the LMS says uploaded it (through the roster's LMS ids, else its
names), plus every file that could not be matched or read, by name. ``grade_collected`` then
grades them exactly as ``qkvquiz grade`` grades a folder: one file per student chosen by
:mod:`qkvquiz.grade.choose` (the zip member's time stands in for the file time, so of two
files the later upload wins), with the LMS's "late" mark as a flag.

Who a file belongs to: with a roster, the LMS's identity decides (the LMS authenticated the
upload); a file whose own ``"student"`` differs is graded as the uploader's, with a note.
Without a roster, the file's ``"student"`` decides, as for any folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..i18n import N_, _, using
from ..grade.grader import FileProblem, GradeReport, grade, submission_from_bytes
from ..inputs import (
    InputError,
    decode_text,
    load_yaml,
    read_bytes,
    read_zip,
    shown_path,
    walk_json_files,
)
from ..key import Key
from ..roster import Roster, RosterEntry
from .lms_names import (
    CANVAS,
    GRADESCOPE,
    GRADESCOPE_METADATA,
    LMS_NAMES,
    MOODLE,
    PARSERS,
    LmsName,
    detect,
)

MAX_METADATA_BYTES = 20_000_000  # Gradescope's submission_metadata.yml: about 300 bytes per submission
MAX_SUBMISSION_BYTES = 1_000_000  # as grade.grader's limit
LMS_CHOICES = ("auto", *LMS_NAMES, "none")
LATE_FLAG = "late"
MISMATCH_FLAG = "id-differs-from-lms"


@dataclass
class Handin:
    """One file handed in: where it came from, its bytes, and whom the LMS says it is from."""

    source: str  # a file path, or "<archive>/<member>"
    data: bytes
    mtime: float | None
    student: str | None = None  # the roster's id of the uploader; None: the file's own "student" decides
    via: str = ""  # how the uploader was identified ("Canvas user 340934 ('lovelaceada')")
    late: bool = False


@dataclass
class Collected:
    handins: list[Handin] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)  # not matched or not readable, by file
    skipped: list[FileProblem] = field(default_factory=list)  # left out on purpose (not JSON, links)
    lms: dict[str, str | None] = field(default_factory=dict)  # each path given -> the LMS it came from


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
    be used at all (no such file, not a zip, a zip over its bounds); a bad member or an
    unmatched file is listed in ``problems`` and the others are still collected. ``lang``:
    the language of the problems' sentences (default: the current one; grade in the key's).
    """
    if lms not in LMS_CHOICES:
        raise ValueError(f"unknown LMS {lms!r}; choose from {', '.join(LMS_CHOICES)}")
    with using(lang):
        return _collect(paths, roster, lms)


def _collect(paths: Sequence[str | Path], roster: Roster | None, lms: str) -> Collected:
    out = Collected()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            entries, metadata = _folder_entries(path, out)
        elif path.is_file() and is_zip(path):
            entries, metadata = _zip_entries(path, out)
        else:
            try:
                data = read_bytes(path, MAX_SUBMISSION_BYTES, "submission")
            except InputError as exc:
                out.problems.append(FileProblem(shown_path(path), exc.message))
                continue
            out.handins.append(Handin(shown_path(path), data, _mtime(path)))
            continue
        kind = detect([entry[0] for entry in entries], metadata is not None) if lms == "auto" else \
            (None if lms == "none" else lms)
        out.lms[shown_path(path)] = kind
        submitters = _gradescope_submitters(metadata, path, out) if kind == GRADESCOPE else {}
        for rel, data, mtime in entries:
            source = f"{shown_path(path)}/{rel}"
            handin = Handin(source, data, mtime)
            if kind is not None:
                named = PARSERS[kind](rel)
                if named is None:
                    out.problems.append(FileProblem(source, _(
                        "the name does not follow %(lms)s's naming of a bulk download, so its student is not known")
                        % {"lms": kind.title()}))
                    continue
                handin.late = named.late
                handin.via = named.describe()
                if roster is not None:
                    entry, why = match(named, roster, submitters.get(named.lms_id))
                    if entry is None:
                        out.problems.append(FileProblem(source, why))
                        continue
                    handin.student = entry.student
                    if why:
                        # Translators: who uploaded a file, then how the roster matched them.
                        handin.via = _("%(uploader)s, %(how)s") % {"uploader": handin.via, "how": why}
            out.handins.append(handin)
    return out


def match(named: LmsName, roster: Roster, submitters: list[dict[str, str]] | None = None
          ) -> tuple[RosterEntry | None, str]:
    """The roster entry an LMS name points to, and a note on how (or why none does).

    Canvas: the user id in the ``canvas_id`` column, else a unique name match. Moodle: the
    participant id in ``moodle_id``, else a unique full-name match (never "Participant", the
    blind-marking name). Gradescope: a submitter's ``sid`` (``sis_id``), email, then name.
    """
    if named.lms == CANVAS:
        entry = roster.by("canvas_id", named.lms_id)
        if entry is not None:
            return entry, ""
        return _by_name(roster, named.name, _("no roster row has canvas_id %(id)s") % {"id": named.lms_id}, _SORTABLE)
    if named.lms == MOODLE:
        entry = roster.by("moodle_id", named.lms_id)
        if entry is not None:
            return entry, ""
        if named.name.strip().lower() == "participant":  # blind marking hides the name
            return None, _("no roster row has moodle_id %(id)s (blind marking hides the name: add the participant "
                           "ids to the roster)") % {"id": named.lms_id}
        return _by_name(roster, named.name, _("no roster row has moodle_id %(id)s") % {"id": named.lms_id}, _FULL)
    # Gradescope
    if not submitters:
        return None, _("submission %(id)s is not in %(file)s, so its student is not known") % {
            "id": named.lms_id, "file": GRADESCOPE_METADATA}
    for person in submitters:
        for column, value in (("sis_id", person.get("sid", "")), ("email", person.get("email", ""))):
            if value:
                entry = roster.by(column, value)
                if entry is not None:
                    return entry, _("matched by %(column)s") % {"column": column}
        if person.get("name"):
            found = roster.by_name(person["name"])
            if len(found) == 1:
                return found[0], _("matched by name")
    who = "; ".join(f"{p.get('name', '')} <{p.get('email', '')}> sid {p.get('sid', '')}" for p in submitters)
    return None, _("no roster row matches the submitter(s) %(who)s by sis_id, email or name") % {"who": who}


# How a name from an LMS was matched to the roster, or why it was not: Canvas's sortable name
# ("lovelaceada"), Moodle's full name; a whole message for each.
_SORTABLE = (
    N_("matched by the sortable name %(name)s"),
    N_("%(why)s, and the sortable name %(name)s fits several students (%(ids)s); add the LMS ids to the roster"),
)
_FULL = (
    N_("matched by the full name %(name)s"),
    N_("%(why)s, and the full name %(name)s fits several students (%(ids)s); add the LMS ids to the roster"),
)


def _by_name(roster: Roster, name: str, why: str, what: tuple[str, str]) -> tuple[RosterEntry | None, str]:
    matched, several = what
    found = roster.by_name(name)
    if len(found) == 1:
        return found[0], _(matched) % {"name": repr(name)}
    if len(found) > 1:
        ids = ", ".join(e.student for e in found[:5])
        return None, _(several) % {"why": why, "name": repr(name), "ids": ids}
    return None, _("%(why)s, nor a name that fits %(name)s; add the LMS ids (or names) to the roster") % {
        "why": why, "name": repr(name)}


def _mtime(path: Path) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _wanted(name: str) -> bool:
    return name.lower().endswith(".json") or name.rsplit("/", 1)[-1] == GRADESCOPE_METADATA


def _zip_entries(path: Path, out: Collected) -> tuple[list[tuple[str, bytes, float | None]], bytes | None]:
    left_out: list[str] = []

    def want(name: str) -> bool:
        ok = _wanted(name)
        if not ok:
            left_out.append(name)
        return ok

    members, skipped = read_zip(path, want)
    shown = shown_path(path)
    for s in skipped:
        out.problems.append(FileProblem(str(s.path), s.reason))
    for name in left_out:
        out.skipped.append(FileProblem(f"{shown}/{name}", _("not a .json file; only JSON hand-ins are graded")))
    metadata = None
    entries = []
    for m in members:
        if m.name.rsplit("/", 1)[-1] == GRADESCOPE_METADATA:
            metadata = m.data
        else:
            entries.append((m.name, m.data, m.mtime))
    return entries, metadata


def _folder_entries(path: Path, out: Collected) -> tuple[list[tuple[str, bytes, float | None]], bytes | None]:
    if path.is_symlink():
        raise InputError(shown_path(path), "is a link to a folder; links to folders are not followed: name the folder itself")
    found, skipped = walk_json_files(path, frozenset({"key.json", "results.json"}))
    for s in skipped:
        out.skipped.append(FileProblem(shown_path(s.path), s.reason))
    entries = []
    for file in found:
        rel = file.relative_to(path).as_posix()
        try:
            data = read_bytes(file, MAX_SUBMISSION_BYTES, "submission", follow=False)
        except InputError as exc:
            out.problems.append(FileProblem(shown_path(file), exc.message))
            continue
        entries.append((rel, data, _mtime(file)))
    metadata = None
    for candidate in [path / GRADESCOPE_METADATA, *sorted(path.glob(f"*/{GRADESCOPE_METADATA}"))]:
        if candidate.is_file() and not candidate.is_symlink():
            metadata = read_bytes(candidate, MAX_METADATA_BYTES, "Gradescope metadata", follow=False)
            break
    return entries, metadata


def _gradescope_submitters(metadata: bytes | None, path: Path, out: Collected) -> dict[str, list[dict[str, str]]]:
    """Submission id -> its submitters (name, sid, email as text) from ``submission_metadata.yml``.

    Gradescope writes it from Ruby: keys are symbols (``:submitters:``), read here with or
    without the colon. It is read like any untrusted YAML (bounded, safe loader).
    """
    if metadata is None:
        return {}
    source = f"{shown_path(path)}/{GRADESCOPE_METADATA}"
    doc = load_yaml(decode_text(metadata, source, "Gradescope metadata"), source)
    if not isinstance(doc, dict):
        raise InputError(source, "not a mapping of submission_<id> to its submitters")
    result: dict[str, list[dict[str, str]]] = {}
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


def grade_collected(key: Key, collected: Collected, *, xp=np, duplicates: str = "latest",
                    lang: str | None = None) -> GradeReport:
    """Grade collected hand-ins: read each (a bad one becomes a problem), re-attribute by the LMS, grade.

    ``lang``: the language of every sentence (default: the key's), as in :func:`grade`."""
    with using(lang or key.lang):
        return _grade_collected(key, collected, xp=xp, duplicates=duplicates, lang=lang)


def _grade_collected(key: Key, collected: Collected, *, xp, duplicates: str, lang: str | None) -> GradeReport:
    submissions = []
    problems = list(collected.problems)
    notes: dict[str, list[str]] = {}
    flags: dict[str, list[str]] = {}
    for h in collected.handins:
        try:
            sub = submission_from_bytes(h.data, h.source)
        except ValueError as exc:
            problems.append(FileProblem(h.source, str(exc)))
            continue
        sub.mtime = h.mtime
        if h.student is not None and sub.student != h.student:
            notes.setdefault(h.source, []).append(
                _("the file says student %(named)s, but it was uploaded by %(via)s, who is %(student)s "
                  "in the roster: graded as %(student)s")
                % {"named": repr(sub.student), "via": h.via, "student": repr(h.student)})
            flags.setdefault(h.source, []).append(MISMATCH_FLAG)
            sub.student = h.student
        if h.late:
            flags.setdefault(h.source, []).append(LATE_FLAG)
        submissions.append(sub)
    report = grade(key, submissions, xp=xp, duplicates=duplicates, lang=lang)
    report.problems[:0] = problems
    report.skipped[:0] = collected.skipped
    for r in report.results:
        r.notes[:0] = notes.get(r.source, [])
        r.flags += [f for f in flags.get(r.source, []) if f not in r.flags]
    return report


def grade_download(key: Key, paths: Iterable[str | Path], roster: Roster | None = None, *, lms: str = "auto",
                   xp=np, duplicates: str = "latest") -> GradeReport:
    """Grade an LMS's bulk download (zips, unpacked folders, files): :func:`collect`, then :func:`grade_collected`."""
    return grade_collected(key, collect(list(paths), roster, lms, key.lang), xp=xp, duplicates=duplicates)
