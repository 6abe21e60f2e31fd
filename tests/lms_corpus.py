"""A small corpus of LMS bulk downloads, named the way each LMS's own code names them.

Canvas: ``lib/content_zipper.rb`` (``get_filename``, ``sanitize_user_name``,
``sanitize_file_name``, ``sanitize_attachment_filename``, ``add_upload_submission``); its zip
gives every entry one time. Moodle: ``mod/assign`` ``download_submissions`` (3.x,
``locallib.php``) and ``classes/downloader.php`` (4.1+), with ``clean_filename``
(``PARAM_FILE``). Gradescope: the export's layout (``submission_<id>/`` folders and
``submission_metadata.yml`` with Ruby-symbol keys, inside ``assignment_<id>_export/``).

The builders return ``{member path: bytes or text}``; :func:`write_zip` and
:func:`write_folder` lay them out.
"""

from __future__ import annotations

import json
import re
import unicodedata
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from qkvquiz.roster import Roster, read_roster_entries

Members = dict[str, bytes | str]
ZIP_TIME = (2026, 11, 3, 8, 30, 0)  # Canvas stamps every entry with the time it zips


def _off_by_one(value):
    if isinstance(value, list):
        return [_off_by_one(v) for v in value]
    return value + 1 if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def answers_of(doc: dict, student: str, *, wrong: bool = False, named: str | None = None) -> dict:
    """A hand-in of ``student`` (their variant; right answers, or every number off by one when
    ``wrong``: a filled hand-in that earns nothing), whose ``"student"`` is ``named`` when given."""
    entry = next(s for s in doc["students"] if s["student"] == student)
    answers = json.loads(json.dumps(entry["answers"]))
    if wrong:
        answers = {k: _off_by_one(v) for k, v in answers.items()}
    return {"student": named or student, "variant": entry["variant"], "set": doc["set"], "answers": answers}


# ----------------------------------------------------------------------------- Canvas


def _ruby_word_only(text: str) -> str:
    """Ruby's ``gsub(/[^[[:word:]]]/, "")``: keeps letters, marks, decimal digits and ``_``."""
    return "".join(c for c in text if unicodedata.category(c)[0] in "LM" or unicodedata.category(c) in ("Nd", "Pc"))


def canvas_user_name(sortable_name: str) -> str:
    """``sanitize_user_name``: ``_<digits>_`` loses its ``_`` (Canvas reads ids from it), then lower case."""
    return re.sub(r"_(\d+)_", r"\1", sortable_name).lower()


def canvas_name(sortable_name: str | None, user_id: int | str, attachment_id: int | str, display_name: str, *,
                late: bool = False, anonymous_id: str | None = None) -> str:
    """The member name Canvas writes for one uploaded file (``anonymous_id``: anonymous grading,
    where the name is left out and the id is ``anon_<id>``)."""
    users_name = None if anonymous_id is not None else canvas_user_name(sortable_name or "")
    ident = f"anon_{anonymous_id}" if anonymous_id is not None else str(user_id)
    filename = _ruby_word_only("_".join(p for p in (users_name, "LATE" if late else None, ident) if p is not None))
    original = re.sub(r'[\x00/\\:*?"<>|]+', "_", display_name)
    return f"{filename}_{attachment_id}_{original}"


def canvas_download(files: Sequence[tuple[str | None, int | str, int | str, str, bytes | str]], *,
                    late: Sequence[int] = (), anonymous: Mapping[int, str] | None = None) -> Members:
    """A Canvas zip's members: ``(sortable name, user id, attachment id, display name, data)`` per
    file; ``late``: indices of files handed in late; ``anonymous``: index -> anonymous id."""
    members: Members = {}
    for i, (sortable, user, attachment, display, data) in enumerate(files):
        name = canvas_name(sortable, user, attachment, display, late=i in late,
                           anonymous_id=(anonymous or {}).get(i))
        members[name] = data
    return members


# ----------------------------------------------------------------------------- Moodle


def moodle_clean_filename(text: str) -> str:
    """``clean_filename`` (``PARAM_FILE``): control characters and ``&<>"`|':\\/`` dropped."""
    cleaned = re.sub(r"[\x00-\x1f\x7f&<>\"`|':\\/]", "", text)
    return "" if cleaned in (".", "..") else cleaned


def moodle_prefix(full_name: str, participant: int | str) -> str:
    return moodle_clean_filename(f"{full_name.replace('_', ' ')}_{participant}")


def moodle_path(full_name: str, participant: int | str, original: str, *, layout: str = "folders",
                plugin: str = "file") -> str:
    """Where Moodle puts one file: ``folders`` (4.1+), ``folders-old`` (3.1 to 4.0, one more
    ``_``) or ``flat`` (before 3.1, or "download as folders" off). ``original`` may hold
    folders the student made (``sub/answers.json``)."""
    prefix = moodle_prefix(full_name, participant)
    if layout == "flat":
        return moodle_clean_filename(f"{prefix}_assignsubmission_{plugin}_{original.rsplit('/', 1)[-1]}")
    tail = "_" if layout == "folders-old" else ""
    return f"{prefix}_assignsubmission_{plugin}{tail}/{original}"


def moodle_team_prefix(group_name: str | None, group_id: int | str | None = None) -> str:
    """``get_student_prefix`` of a team assignment (``downloader.php``): the group's name
    (``format_string``: a bare ``&`` as ``&amp;``) with '_' as spaces, then ``_<group id>``, cleaned;
    ``None``: the "Default group" (``get_string('defaultteam')``), with no id."""
    if group_name is None:
        return moodle_clean_filename("Default group")
    name = re.sub(r"&(?![A-Za-z][A-Za-z0-9]*;|#[0-9]+;)", "&amp;", group_name)
    return moodle_clean_filename(name.replace("_", " ") + f"_{group_id}")


def moodle_team_path(group_name: str | None, group_id: int | str | None, original: str, *,
                     layout: str = "folders", plugin: str = "file") -> str:
    """Where Moodle puts one file of a team's submission (layouts as :func:`moodle_path`)."""
    prefix = moodle_team_prefix(group_name, group_id)
    if layout == "flat":
        return moodle_clean_filename(f"{prefix}_assignsubmission_{plugin}_{original.rsplit('/', 1)[-1]}")
    tail = "_" if layout == "folders-old" else ""
    return f"{prefix}_assignsubmission_{plugin}{tail}/{original}"


def moodle_download(files: Sequence[tuple[str, int | str, str, bytes | str]], *, layout: str = "folders") -> Members:
    """A Moodle zip's members: ``(full name, participant id, original path, data)`` per file."""
    return {moodle_path(name, participant, original, layout=layout): data
            for name, participant, original, data in files}


# ----------------------------------------------------------------------------- Gradescope


def _yaml_scalar(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a YAML double-quoted scalar


def gradescope_metadata(submissions: Mapping[str, Sequence[Mapping[str, str]]]) -> str:
    """``submission_metadata.yml`` as Gradescope's Ruby writes it: submission -> ``:submitters:``."""
    lines = []
    for submission, submitters in submissions.items():
        lines += [f"submission_{submission}:", "  :submitters:"]
        for person in submitters:
            first = True
            for field in ("name", "sid", "email"):
                if field in person:
                    lines.append(f"  {'- ' if first else '  '}:{field}: {_yaml_scalar(person[field])}")
                    first = False
        lines += ["  :created_at: 2026-11-01 10:00:00.000000000 -08:00", "  :score: 0.0"]
    return "\n".join(lines) + "\n"


def gradescope_export(submissions: Mapping[str, tuple[Sequence[Mapping[str, str]], Mapping[str, bytes | str]]], *,
                      wrapper: str | None = "assignment_4411_export") -> Members:
    """A Gradescope export's members: submission id -> (submitters, {file path: data})."""
    root = f"{wrapper}/" if wrapper else ""
    members: Members = {f"{root}submission_metadata.yml": gradescope_metadata(
        {sid: people for sid, (people, _files) in submissions.items()})}
    for sid, (_people, files) in submissions.items():
        for name, data in files.items():
            members[f"{root}submission_{sid}/{name}"] = data
    return members


# ----------------------------------------------------------------------------- writing


def write_zip(path: Path, members: Mapping[str, bytes | str], times: Mapping[str, tuple] | None = None) -> Path:
    """A zip of ``members`` in the given order, each at ``ZIP_TIME`` unless ``times`` says otherwise."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(times or {}).get(name, ZIP_TIME))
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return path


def write_folder(top: Path, members: Mapping[str, bytes | str]) -> Path:
    """The folder a zip of ``members`` unpacks to."""
    for name, data in members.items():
        path = top / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    return top


# ----------------------------------------------------------------------------- a class to hand in

#: The class of the intake tests: its key by the ``class_key`` fixture (tests/exchange/conftest.py).
STUDENTS = ("ada", "alan", "grace", "li")


def hand_in(doc: dict, student: str, **kw) -> str:
    """:func:`answers_of` as the JSON text of an uploaded file."""
    return json.dumps(answers_of(doc, student, **kw))


def roster_file(folder: Path, text: str) -> Roster:
    """``text`` saved as ``folder/roster.csv`` and read as ``grade --roster`` reads it."""
    path = folder / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return read_roster_entries(path)


def by_student(report) -> dict:
    """A grade report's results by student id."""
    return {r.student: r for r in report.results}


def full(result) -> bool:
    """The result earned every point."""
    return result.score == result.total
