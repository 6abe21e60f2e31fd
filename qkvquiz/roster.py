"""The roster: who is in the class, and how each LMS knows them.

A roster is one student id per line, or a CSV. The CSV needs a ``student`` (or ``id``) column,
the qkvquiz id; any of these columns may stand beside it (header case and spaces ignored), and
each is optional:

==================  =========================================================================
column              what, and where it is used
==================  =========================================================================
``name``            the student's full name ("Ada Lovelace"): worksheets, feedback, every export
``sortable_name``   "Lovelace, Ada" (Canvas' ``Student`` column); made from ``name`` when absent
``first_name``,     Moodle's and Blackboard's name columns; split from ``name`` when absent
``last_name``
``email``           Moodle's gradebook import and Gradescope's export match on it
``canvas_id``       Canvas' numeric user id (``lms_id`` and ``canvas_user_id`` are read as it):
                    the ``ID`` column of Canvas' gradebook and the number in its download's names
``moodle_id``       Moodle's participant identifier (``participant``, ``identifier`` too;
                    "Participant 123" is read as 123): the worksheet's ``Identifier`` and the
                    number in Moodle's download names
``sis_id``          the institution's student number (``SIS User ID``; Gradescope's ``sid``;
                    Moodle's ``ID number``; Blackboard's ``Student ID``)
``sis_login``       the login (``SIS Login ID``; Blackboard's ``Username``; ``username`` too)
``section``         Canvas' ``Section``
==================  =========================================================================

A plain list of ids (no CSV) gives entries with only the id, exactly as before.
"""

from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from .core.inputs import MAX_ROSTER_BYTES, MAX_STUDENTS, read_text, shown_path
from .core.untrusted import id_problem, invisible_characters

# Header (lower case, spaces and dashes as underscores) -> field. The first name is the documented one.
_ALIASES: dict[str, tuple[str, ...]] = {
    "name": ("name", "full_name", "student_name"),
    "sortable_name": ("sortable_name",),
    "first_name": ("first_name", "given_name"),
    "last_name": ("last_name", "surname", "family_name"),
    "email": ("email", "email_address", "e_mail"),
    "canvas_id": ("canvas_id", "lms_id", "canvas_user_id"),
    "moodle_id": ("moodle_id", "participant", "participant_id", "identifier"),
    "sis_id": ("sis_id", "sis_user_id", "student_number", "sid"),
    "sis_login": ("sis_login", "sis_login_id", "username", "login"),
    "section": ("section",),
}
MAX_FIELD = 500  # characters in one roster field
MAX_NAME_WORDS = 8  # a longer name from an LMS is matched in the order written only


@dataclass(frozen=True)
class RosterEntry:
    """One student of the roster; every field but ``student`` may be empty."""

    student: str
    name: str = ""
    sortable_name: str = ""
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    canvas_id: str = ""
    moodle_id: str = ""
    sis_id: str = ""
    sis_login: str = ""
    section: str = ""
    line: int = 0  # where it was read, for messages

    @property
    def display_name(self) -> str:
        """The name to show: the full name, else first and last, else the id."""
        return self.name or " ".join(p for p in (self.first_name, self.last_name) if p) or self.student

    @property
    def sortable(self) -> str:
        """"Last, First": given, or made from the name (the last word is taken as the family name)."""
        if self.sortable_name:
            return self.sortable_name
        first, last = self.split_name
        return f"{last}, {first}" if first and last else (last or first or self.student)

    @property
    def split_name(self) -> tuple[str, str]:
        """(first, last): given, or the name split before its last word."""
        if self.first_name or self.last_name:
            return self.first_name, self.last_name
        words = self.name.split()
        if len(words) < 2:
            return "", self.name
        return " ".join(words[:-1]), words[-1]


@dataclass
class Roster:
    """The roster's entries in order, with look-ups by each LMS identity."""

    entries: list[RosterEntry]
    source: str = "<roster>"
    columns: tuple[str, ...] = ()  # the optional fields the file has
    _by: dict[str, dict[str, RosterEntry]] = field(default_factory=dict, repr=False)
    _names: dict[str, list[int]] | None = field(default=None, repr=False)  # name key -> entries, when built

    def __post_init__(self) -> None:
        for name in ("student", "canvas_id", "moodle_id", "sis_id", "sis_login", "email"):
            table: dict[str, RosterEntry] = {}
            for e in self.entries:
                value = _folded(name, getattr(e, name))
                if value:
                    table.setdefault(value, e)
            self._by[name] = table

    @property
    def students(self) -> list[str]:
        return [e.student for e in self.entries]

    @property
    def names(self) -> dict[str, str]:
        """The name of each student that has one (printed on their worksheet's header)."""
        return {e.student: e.display_name for e in self.entries if e.name or e.first_name or e.last_name}

    def get(self, student: str) -> RosterEntry:
        """The entry of ``student``; an entry with only the id when the roster lacks them."""
        return self._by["student"].get(student) or RosterEntry(student)

    def by(self, name: str, value: str) -> RosterEntry | None:
        """The entry whose ``name`` field (canvas_id, moodle_id, sis_id, sis_login, email) is ``value``."""
        return self._by[name].get(_folded(name, value))

    def by_name(self, name: str) -> list[RosterEntry]:
        """Entries whose name matches ``name``, in roster order (see :func:`name_key`; family
        name first or last, with or without spaces)."""
        if self._names is None:  # built on first use: most rosters are never matched by name
            self._names = {}
            for i, e in enumerate(self.entries):
                for key in _name_keys(e):
                    self._names.setdefault(key, []).append(i)
        names = self._names
        found = sorted({i for key in _word_orders(name) for i in names.get(key, ())})
        return [self.entries[i] for i in found]


def _folded(name: str, value: str) -> str:
    value = value.strip()
    return value.casefold() if name in ("email", "sis_login") else value


def name_key(text: str) -> str:
    """A name reduced to what tells names apart, in any script: "Lovelace, Ada", "lovelaceada"
    and "ＬＯＶＥＬＡＣＥ　Ａｄａ" agree, as do "Zoë" and "zoe", and "李 小龙" and "李小龙".

    NFKC first (full-width letters and digits become plain ones), then case folding; then the
    combining marks are dropped (from the decomposed form, so "ë" is "e"), and every character
    that is not a letter or a digit (spaces, punctuation, '_'). An LMS writes a name its own
    way (Canvas lower-cases the sortable name and drops spaces and commas; Moodle and
    Gradescope keep the full name): these are the differences this key forgets.
    """
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in folded if unicodedata.category(c)[0] in "LN")


def _word_orders(name: str) -> set[str]:
    """The keys of ``name`` read with its words in each turn: "小龙 李" also as "李小龙", "Ada
    Lovelace" also as "Lovelace Ada" (a family name written last or first)."""
    words = unicodedata.normalize("NFKC", name).split()
    turns = range(len(words)) if len(words) <= MAX_NAME_WORDS else range(1)
    keys = {name_key("".join(words[i:] + words[:i])) for i in turns}
    keys.discard("")
    return keys


def _name_keys(e: RosterEntry) -> set[str]:
    first, last = e.split_name
    keys = {name_key(e.display_name), name_key(e.sortable), name_key(last + first), name_key(first + last)}
    keys.discard("")
    return keys


def _header_key(text: str) -> str:
    return re.sub(r"[\s\-]+", "_", text.strip().lower())


def read_roster_entries(path: str | Path) -> Roster:
    """Read a roster (see the module docstring); ValueError names the file and the line.

    Blank lines and lines starting with '#' are skipped. An id with control or invisible
    characters (a zero-width space, a right-to-left override) is refused with its line number:
    it would print like another id while being a different one. Two rows with one id, or one
    LMS id given to two students, are refused too: a hand-in would go to a guess.
    """
    path = Path(path)
    source = shown_path(path)
    # Bounded and regular files only (a FIFO or /dev/zero is refused); InputError names the file.
    text = read_text(path, MAX_ROSTER_BYTES, "roster")
    # Only real line breaks split lines (str.splitlines would also split at U+2028 and friends,
    # silently turning one odd id into two).
    kept = [(n, ln) for n, ln in enumerate(re.split(r"\r\n|\r|\n", text), start=1)
            if ln.strip() and not ln.lstrip().startswith("#")]
    lines = [ln for _, ln in kept]
    if not lines:
        raise ValueError(f"{source}: the roster has no student ids")
    columns: tuple[str, ...] = ()
    if "," in lines[0] or lines[0].strip().lower() in ("student", "id"):  # a CSV, maybe of one column
        rows = list(csv.reader(io.StringIO("\n".join(lines))))
        header = {_header_key(h): i for i, h in reversed(list(enumerate(rows[0])))}
        column = header.get("student", header.get("id"))
        if column is None:
            found = ", ".join(repr(h) for h in rows[0]) or "none"
            raise ValueError(f"{source}: a CSV roster needs a 'student' or 'id' column (found: {found})")
        where: dict[str, int] = {}
        for name, aliases in _ALIASES.items():
            for alias in aliases:
                if alias in header and header[alias] != column:
                    where[name] = header[alias]
                    break
        columns = tuple(where)
        body = rows[1:]
        # Row i comes from kept line i + 1, unless a quoted field spans lines.
        numbers = [n for n, _ in kept[1:]] if len(kept) == len(body) + 1 else list(range(2, len(body) + 2))
        raw = []
        for n, row in zip(numbers, body):
            values = {name: (row[i] if i < len(row) else "").strip() for name, i in where.items()}
            raw.append((n, (row[column] if column < len(row) else "").strip(), values))
    else:
        raw = [(n, ln.strip(), {}) for n, ln in kept]
    if len(raw) > MAX_STUDENTS:
        raise ValueError(f"{source}: the roster has {len(raw):,} ids; a set has at most {MAX_STUDENTS:,} students")
    entries = []
    for n, student, values in raw:
        problem = id_problem(student)
        if problem is not None:
            raise ValueError(f"{source}: line {n}: {problem}")
        for name, value in values.items():
            if len(value) > MAX_FIELD:
                raise ValueError(f"{source}: line {n}: column {name!r} is {len(value)} characters; at most {MAX_FIELD}")
            bad = invisible_characters(value)
            if bad:
                raise ValueError(f"{source}: line {n}: column {name!r} holds invisible or control characters")
        if values.get("moodle_id"):
            # Moodle's worksheet writes "Participant 1234567"; the download's names carry only the number.
            values["moodle_id"] = re.sub(r"^\D+", "", values["moodle_id"])
        entries.append(RosterEntry(student, **values, line=n))
    _check_unique(entries, source, columns)
    return Roster(entries, source, columns)


def _check_unique(entries: list[RosterEntry], source: str, columns: tuple[str, ...]) -> None:
    for name in ("student", *(c for c in ("canvas_id", "moodle_id", "sis_id", "sis_login", "email") if c in columns)):
        seen: dict[str, int] = {}
        for e in entries:
            value = _folded(name, getattr(e, name))
            if not value:
                continue
            if value in seen and name != "student":
                raise ValueError(f"{source}: line {e.line}: {name} {getattr(e, name)!r} is also on line "
                                 f"{seen[value]}; each student needs their own")
            seen.setdefault(value, e.line)


def read_roster(path: str | Path) -> list[str]:
    """Student ids of a roster, in order (see :func:`read_roster_entries`)."""
    return read_roster_entries(path).students
