"""How each LMS names the files of a bulk download, and how a name is read back.

Canvas, "Download Submissions" (one zip, flat)::

    <sortable name>_[late_]<user id>_<attachment id>_<original name>
    lovelaceada_late_340934_208490284_answers-1.json

The sortable name is lower case with spaces and punctuation removed; ``late`` (any case)
marks a hand-in after the due date; a second upload of a file with the same name gets
``-1``, ``-2`` before its extension. Only the latest submission's files are in the zip.

Moodle, assignment "Download all submissions" (``mod/assign``, ``download_submissions``): the
prefix is ``clean_filename(<full name, '_' replaced by ' '>_<participant id>)``, where the
participant id is the number in the grading worksheet's "Participant 1234567". Then either

- in folders (default since Moodle 3.1): ``<prefix>_assignsubmission_file/<original path>``
  (before 4.1 the folder ends with one more ``_``), or
- flat: ``<prefix>_assignsubmission_file_<original name>``.

With blind marking the full name is "Participant"; with groups it is "<group>-<full name>".
Moodle's feedback-zip importer reads the participant id the same way: the second of the
``_``-separated fields of a path part (``importziplib.php``, ``is_valid_filename_for_import``).

Gradescope, "Export Submissions": one folder per submission, ``submission_<id>/<files>``, and
``submission_metadata.yml`` beside them mapping ``submission_<id>`` to its ``:submitters:``
(each with ``:name:``, ``:sid:``, ``:email:``) and ``:created_at:``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CANVAS = "canvas"
MOODLE = "moodle"
GRADESCOPE = "gradescope"
LMS_NAMES = (CANVAS, MOODLE, GRADESCOPE)
GRADESCOPE_METADATA = "submission_metadata.yml"

_CANVAS = re.compile(r"^(?P<name>[^_/]*)_(?:(?P<late>late)_)?(?P<user>\d+)_(?P<attachment>\d+)_(?P<original>.+)$",
                     re.IGNORECASE)
# The name never holds '_' (Moodle replaces it by a space); the plugin is "file", "onlinetext" ...
_MOODLE = re.compile(r"^(?P<name>[^_/]*)_(?P<participant>\d+)_assignsubmission_(?P<plugin>[a-z]+)(?:_(?P<rest>.*))?$")
_GRADESCOPE = re.compile(r"^submission_(?P<submission>\d+)$")


@dataclass(frozen=True)
class LmsName:
    """What an LMS's file name says about its file."""

    lms: str
    lms_id: str  # Canvas user id, Moodle participant id, Gradescope submission id
    name: str = ""  # the name in the file name (Canvas' sortable name, Moodle's full name)
    late: bool = False
    original: str = ""  # the file's name as the student uploaded it

    def describe(self) -> str:
        """Who uploaded the file, as the LMS names them, in the current language."""
        from ..i18n import _

        values = {"id": self.lms_id, "name": repr(self.name)}
        if self.lms == CANVAS:
            return (_("Canvas user %(id)s (%(name)s, late)") if self.late else _("Canvas user %(id)s (%(name)s)")) % values
        if self.lms == MOODLE:
            return _("Moodle participant %(id)s (%(name)s)") % values
        return _("Gradescope submission %(id)s") % values


def parse_canvas(path: str) -> LmsName | None:
    """The Canvas reading of a member path (its last part), or None."""
    m = _CANVAS.match(path.rsplit("/", 1)[-1])
    if m is None:
        return None
    return LmsName(CANVAS, m["user"], m["name"], bool(m["late"]), m["original"])


def parse_moodle(path: str) -> LmsName | None:
    """The Moodle reading of a member path: the first part that is a Moodle prefix (folder layout),
    else the file name (flat layout); None when neither is."""
    parts = path.split("/")
    for i, part in enumerate(parts):
        m = _MOODLE.match(part)
        if m is None:
            continue
        if i == len(parts) - 1:  # flat: the rest of the name is the original file name
            original = m["rest"] or ""
        else:
            original = "/".join(parts[i + 1:])
        name = m["name"]
        return LmsName(MOODLE, m["participant"], name, False, original)
    return None


def parse_gradescope(path: str) -> LmsName | None:
    """The Gradescope reading of a member path: a part ``submission_<id>`` followed by the file."""
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        m = _GRADESCOPE.match(part)
        if m is not None:
            return LmsName(GRADESCOPE, m["submission"], "", False, "/".join(parts[i + 1:]))
    return None


PARSERS = {CANVAS: parse_canvas, MOODLE: parse_moodle, GRADESCOPE: parse_gradescope}


def detect(paths: list[str], has_gradescope_metadata: bool = False) -> str | None:
    """Which LMS named these paths: the one whose reading fits the most of them (None: none fits).

    Gradescope is recognised by its metadata file; Moodle's names are checked before Canvas'
    (a Moodle name never fits Canvas' pattern, whose second field is a number).
    """
    if has_gradescope_metadata:
        return GRADESCOPE
    counts = {lms: sum(PARSERS[lms](p) is not None for p in paths) for lms in (MOODLE, CANVAS)}
    best = max(counts, key=lambda k: counts[k])
    return best if counts[best] else None


def moodle_prefix(full_name: str, participant: str) -> str:
    """The path part Moodle writes for a participant, before ``_<plugin type>_<plugin>``.

    Moodle replaces '_' in the name by a space (so that the participant id stays the second
    ``_``-field) and then cleans the name for a file name; we drop the characters that Moodle's
    ``clean_filename`` drops or that no file name may hold.
    """
    name = re.sub(r'[\x00-\x1f\x7f/\\:*?"<>|]', "", full_name.replace("_", " ")).strip() or "Participant"
    return f"{name}_{participant}"
