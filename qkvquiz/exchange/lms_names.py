"""How each LMS names the files of a bulk download, and how a name is read back.

Read from each LMS's own code, not guessed:

Canvas, "Download Submissions" (``lib/content_zipper.rb``: ``get_filename``,
``sanitize_user_name``, ``sanitize_file_name``, ``add_upload_submission``), one flat zip::

    <name>_[LATE_]<user id>_<attachment id>_<original name>
    lovelaceada_LATE_340934_208490284_answers-1.json
    [LATE_]anon_<anonymous id>_<attachment id>_<original name>      (anonymous grading)

``<name>`` is the sortable name ("Lovelace, Ada"), lower case, with every character that is
not a letter, mark, digit or ``_`` removed: it keeps ``_`` (``ada_l``) and any script
(``李小龙``); only ``_<digits>_`` inside it loses its ``_`` (Canvas' own importer reads ids
from ``_\\d+_``). With anonymous grading there is no name and the id is ``anon_`` and five
base58 characters. The original name keeps everything but ``/\\:*?"<>|`` and NUL (each becomes
``_``). Only the latest submission's files are in the zip, and Canvas writes every entry
with the zip's own time: the attachment id (a database id, higher is newer) orders uploads.

Moodle, assignment "Download all submissions" (``mod/assign``: ``download_submissions``,
since 4.1 ``classes/downloader.php``): the prefix is ``clean_filename(<full name with '_'
replaced by ' '>_<participant id>)`` (``clean_filename`` drops control characters and
``&<>"`|':\\/``), the participant id being the number in the grading worksheet's
"Participant 1234567". Then either

- in folders (default since 3.1): ``<prefix>_assignsubmission_file/<original path>``
  (3.1 to 4.0 write one more ``_`` before the ``/``), or
- flat: ``<prefix>_assignsubmission_file_<original name>``.

With blind marking the full name is "Participant"; the prefix always starts the member's
path, so a folder or file a student names can only come after it.

A team assignment ("Students submit in groups") names each team's folder after its group, by
the same rule (``downloader.php``, ``get_student_prefix``): ``clean_filename(<group name with
'_' replaced by ' '>_<group id>)``, the group id being Moodle's id of the group, which may equal
some participant's id. Students in no group (or in several) share the "Default group"'s
submission, whose prefix has no id at all: ``Default group_assignsubmission_file/…`` (the name
is Moodle's string ``defaultteam``, in the site's language). So ``<name>_<number>`` alone cannot
tell a team from a student: the roster's groups decide (:mod:`.uploaders`).

Gradescope, "Export Submissions": one folder per submission, ``submission_<id>/<files>``, and
``submission_metadata.yml`` beside them mapping ``submission_<id>`` to its ``:submitters:``
(each with ``:name:``, ``:sid:``, ``:email:``; several for a group submission) and
``:created_at:``; the whole usually inside one ``assignment_<id>_export/`` folder. Gradescope's
exporter is not public: this layout is the one its exports show.

Which LMS made a download is read from what the LMS itself writes, never from a name a student
chooses: the first part of a Moodle path, the whole of a Canvas name (its name, ids and
marker come before the student's file name), and Gradescope's metadata only where no student
can put a file (see :func:`gradescope_roots`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

CANVAS = "canvas"
MOODLE = "moodle"
GRADESCOPE = "gradescope"
LMS_NAMES = (CANVAS, MOODLE, GRADESCOPE)
GRADESCOPE_METADATA = "submission_metadata.yml"

# What follows a Canvas name: the marker (Canvas writes "LATE"; "late" is read too), the user
# id, the attachment id, the original name. Tried at every '_', as the name may hold '_'.
_CANVAS_REST = re.compile(r"_(?:(?P<late>(?i:late))_)?(?P<user>\d+)_(?P<attachment>\d+)_(?P<original>.+)", re.DOTALL)
_CANVAS_ANONYMOUS = re.compile(
    r"(?:(?P<late>(?i:late))_)?anon_(?P<anonymous>[A-Za-z0-9]+)_(?P<attachment>\d+)_(?P<original>.+)", re.DOTALL)
# The name never holds '_' (Moodle replaces it by a space); the plugin is "file", "onlinetext" ...
_MOODLE = re.compile(r"^(?P<name>[^_/]*)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?:_(?P<rest>.*))?$",
                     re.DOTALL)
# A team assignment's "Default group": the group's name with no id after it.
_MOODLE_DEFAULT_TEAM = re.compile(r"^(?P<name>[^_/]+)_assignsubmission_(?P<plugin>[a-z]+)(?:_(?P<rest>.*))?$",
                                  re.DOTALL)
_GRADESCOPE = re.compile(r"^submission_(?P<submission>\d+)$")


@dataclass(frozen=True)
class LmsName:
    """What an LMS's file name says about its file."""

    lms: str
    lms_id: str  # Canvas user id (or "anon_<id>"), Moodle participant id, Gradescope submission id
    name: str = ""  # the name in the file name (Canvas' sortable name, Moodle's full name)
    late: bool = False
    original: str = ""  # the file's name as the student uploaded it
    attachment: str = ""  # Canvas' attachment id: orders one student's uploads
    anonymous: bool = False  # Canvas' anonymous grading: the LMS does not say who uploaded it
    team: bool = False  # a Moodle team's folder (lms_id: the group's id; name: the group's)
    default_team: bool = False  # Moodle's "Default group" of a team assignment (no id)

    def describe(self) -> str:
        """Who uploaded the file, as the LMS names them, in the current language."""
        from ..core.i18n import _

        values = {"id": self.lms_id, "name": repr(self.name)}
        if self.lms == CANVAS and self.anonymous:
            return (_("Canvas anonymous submission %(id)s, late") if self.late
                    else _("Canvas anonymous submission %(id)s")) % values
        if self.lms == CANVAS:
            return (_("Canvas user %(id)s (%(name)s, late)") if self.late else _("Canvas user %(id)s (%(name)s)")) % values
        if self.lms == MOODLE and self.default_team:
            return _("Moodle's default group %(name)s") % values
        if self.lms == MOODLE and self.team:
            return _("Moodle group %(id)s (%(name)s)") % values
        if self.lms == MOODLE:
            return _("Moodle participant %(id)s (%(name)s)") % values
        return _("Gradescope submission %(id)s") % values


def canvas_readings(path: str) -> list[LmsName]:
    """Every way a Canvas name (a member path's last part) can be read, the likeliest first.

    A name may hold ``_`` and end in digits, so ``x_5_101_9_a.json`` reads as user 5 (name
    ``x``) or as user 101 (name ``x_5``); the roster tells them apart (see
    :mod:`.collect`). An anonymous name comes first when it is one.
    """
    base = path.rsplit("/", 1)[-1]
    readings: list[LmsName] = []
    m = _CANVAS_ANONYMOUS.fullmatch(base)
    if m is not None:
        readings.append(LmsName(CANVAS, f"anon_{m['anonymous']}", "", bool(m["late"]), m["original"],
                                m["attachment"], anonymous=True))
    seen: set[tuple[str, str]] = set()
    at = base.find("_")
    while at >= 0:
        m = _CANVAS_REST.fullmatch(base, at)
        # One user and attachment read twice (with and without "late" in the name): the marker wins.
        if m is not None and (m["user"], m["attachment"]) not in seen:
            seen.add((m["user"], m["attachment"]))
            readings.append(LmsName(CANVAS, m["user"], base[:at], bool(m["late"]), m["original"], m["attachment"]))
        at = base.find("_", at + 1)
    return readings


def parse_canvas(path: str) -> LmsName | None:
    """The likeliest Canvas reading of a member path (its last part), or None."""
    readings = canvas_readings(path)
    return readings[0] if readings else None


def parse_moodle(path: str) -> LmsName | None:
    """The Moodle reading of a member path: the first part that is a Moodle prefix (folder layout),
    else the file name (flat layout); None when neither is. A prefix without an id is a team
    assignment's default group (``default_team``)."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        m = _MOODLE.match(part)
        default = m is None
        if default:
            m = _MOODLE_DEFAULT_TEAM.match(part)
            if m is None:
                continue
        if i == len(parts) - 1:  # flat: the rest of the name is the original file name
            original = m["rest"] or ""
        else:
            original = "/".join(parts[i + 1:])
        if default:
            return LmsName(MOODLE, "", m["name"], False, original, default_team=True)
        return LmsName(MOODLE, m["participant"], m["name"], False, original)
    return None


def parse_gradescope(path: str) -> LmsName | None:
    """The Gradescope reading of a path below the export's root: ``submission_<id>/`` first,
    then the file (a ``submission_<id>`` folder deeper down is the student's own)."""
    first, _sep, rest = path.partition("/")
    m = _GRADESCOPE.match(first)
    if m is None or not rest:
        return None
    return LmsName(GRADESCOPE, m["submission"], "", False, rest)


PARSERS = {CANVAS: parse_canvas, MOODLE: parse_moodle, GRADESCOPE: parse_gradescope}


def student_folder(part: str) -> bool:
    """A path part that an LMS names after one student or submission (a Moodle prefix, Gradescope's
    ``submission_<id>``): everything below it is that student's upload, named as they chose."""
    return (_MOODLE.match(part) is not None or _MOODLE_DEFAULT_TEAM.match(part) is not None
            or _GRADESCOPE.match(part) is not None)


def gradescope_roots(paths: Iterable[str], top: str = "") -> list[str]:
    """The folders (``""`` or ``"a/b/"``) that hold a Gradescope export's own metadata.

    A ``submission_metadata.yml`` counts only beside ``submission_<id>/`` folders and never
    below a folder an LMS names after a student: there it is a file a student uploaded, and
    would say whose file is whose. ``top``: the name of the folder the paths are in (a
    student's folder given by itself is one student's upload).
    """
    if student_folder(top):
        return []
    paths = list(paths)
    beside: set[str] = set()  # folders that hold submission_<id>/ folders
    for p in paths:
        parts = p.split("/")
        for i, part in enumerate(parts[:-1]):
            if _GRADESCOPE.match(part):
                beside.add("".join(q + "/" for q in parts[:i]))
    roots = []
    for p in paths:
        parts = p.split("/")
        if parts[-1] != GRADESCOPE_METADATA or any(student_folder(q) for q in parts[:-1]):
            continue
        folder = p[: len(p) - len(GRADESCOPE_METADATA)]
        if folder in beside:
            roots.append(folder)
    return roots


def detect(paths: list[str], top: str = "") -> str | None:
    """Which LMS named these paths (every member of a download, relative to it), or None.

    Gradescope: its metadata at a root (:func:`gradescope_roots`). Else Moodle or Canvas, by
    how many paths each names; a path that starts with a Moodle prefix counts for Moodle only
    (a student's file name comes after the prefix, and no Canvas name starts like one).
    """
    if gradescope_roots(paths, top):
        return GRADESCOPE
    moodle = sum(parse_moodle(p) is not None for p in paths)
    canvas = sum(parse_moodle(p) is None and parse_canvas(p) is not None for p in paths)
    if not moodle and not canvas:
        return None
    return MOODLE if moodle >= canvas else CANVAS


def moodle_prefix(full_name: str, participant: str) -> str:
    """The path part Moodle writes for a participant, before ``_<plugin type>_<plugin>``.

    Moodle replaces '_' in the name by a space (so that the participant id stays the second
    ``_``-field) and then cleans the name for a file name; we drop the characters that Moodle's
    ``clean_filename`` drops or that no file name may hold.
    """
    name = re.sub(r'[\x00-\x1f\x7f/\\:*?"<>|]', "", full_name.replace("_", " ")).strip() or "Participant"
    return f"{name}_{participant}"
