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
``group``           the student's group in a Moodle team assignment, as Moodle names it
                    (``group_name``, ``team`` too): the download names a team's folder after it
``group_id``        Moodle's id of that group (``team_id`` too): the number after the group's
                    name in the download (optional; the name alone is enough when unique)
==================  =========================================================================

A plain list of ids (no CSV) gives entries with only the id, exactly as before. Groups may also
come from Moodle's own list of group members (:func:`with_moodle_groups`).

Names are compared by :func:`name_key`: the same name written in another case, width, word
order or spacing fits, and so does one without the accents of Latin letters; a name in any
other script keeps every letter and vowel sign (सती is never सीता).
"""

from __future__ import annotations

import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from .core.inputs import MAX_ROSTER_BYTES, MAX_STUDENTS, csv_rows, read_text, shown_path
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
    "group": ("group", "group_name", "team"),
    "group_id": ("group_id", "team_id"),
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
    group: str = ""  # Moodle's group (team) name
    group_id: str = ""  # Moodle's id of that group
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
    # Group memberships beyond the roster's own group column (Moodle's list of group members):
    # (student, group name, group id) each.
    memberships: tuple[tuple[str, str, str], ...] = ()
    _names: dict[str, list[int]] | None = field(default=None, repr=False)  # name key -> entries, when built
    _loose: dict[str, list[int]] | None = field(default=None, repr=False)  # loose name key -> entries
    _groups: dict[str, set[tuple[str, str]]] | None = field(default=None, repr=False)  # student -> groups
    _teams: tuple[dict, dict] | None = field(default=None, repr=False)  # see team_members

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

    def by_loose_name(self, name: str) -> list[RosterEntry]:
        """Entries whose name fits ``name`` once every mark is dropped (see :func:`loose_name_key`):
        never a match by itself, only what to name when a name fits no one exactly."""
        if self._loose is None:
            self._loose = {}
            for i, e in enumerate(self.entries):
                for key in _name_keys(e, loose_name_key):
                    self._loose.setdefault(key, []).append(i)
        loose = self._loose
        found = sorted({i for key in _word_orders(name, loose_name_key) for i in loose.get(key, ())})
        return [self.entries[i] for i in found]

    # ---- Moodle's groups (team assignments)

    @property
    def has_groups(self) -> bool:
        """Whether the roster says who is in which group (a group column, or Moodle's list)."""
        return "group" in self.columns or "group_id" in self.columns or bool(self.memberships)

    def groups_of(self, student: str) -> set[tuple[str, str]]:
        """The groups (name, id) that ``student`` is in; an empty name or id is unknown."""
        if self._groups is None:  # built on first use
            table: dict[str, set[tuple[str, str]]] = {}
            for e in self.entries:
                if e.group or e.group_id:
                    table.setdefault(e.student, set()).add((e.group, e.group_id))
            for s, name, gid in self.memberships:
                table.setdefault(s, set()).add((name, gid))
            self._groups = {s: _merged_groups(groups) for s, groups in table.items()}
        return self._groups.get(student, set())

    def team_members(self, name: str, group_id: str) -> tuple[list[RosterEntry], list[str]]:
        """The members of the group that a Moodle team folder names (the group's name as the
        download writes it, and its id), and the names of every group that fits (several:
        ambiguous, no members). Moodle puts a student who is in several groups into its
        default group, so they are no member of any."""
        if self._teams is None:  # built on first use: (by id, by the name as Moodle writes it) -> memberships
            by_id: dict[str, list[tuple[str, tuple[str, str]]]] = {}
            by_name: dict[str, list[tuple[str, tuple[str, str]]]] = {}
            for e in self.entries:
                for g in self.groups_of(e.student):
                    if g[1]:
                        by_id.setdefault(g[1], []).append((e.student, g))
                    if g[0]:
                        by_name.setdefault(name_key(moodle_cleaned(g[0])), []).append((e.student, g))
            self._teams = (by_id, by_name)
        by_id, by_name = self._teams
        # The group's id, where the roster gives it, decides; else its name (Moodle keeps the
        # names of a course's groups unique).
        found = by_id.get(group_id) or by_name.get(name_key(name)) or []
        fits: dict[str, set[tuple[str, str]]] = {}
        for student, g in found:
            fits.setdefault(student, set()).add(g)
        groups = {g for gs in fits.values() for g in gs}
        if len({g[0] or g[1] for g in groups}) > 1:
            return [], sorted(g[0] or g[1] for g in groups)
        members = [self.get(s) for s in fits if len(self.groups_of(s)) == 1]
        return members, sorted({g[0] or g[1] for g in groups})

    def ungrouped(self) -> list[RosterEntry]:
        """The students of Moodle's default group: in no group, or in several."""
        return [e for e in self.entries if len(self.groups_of(e.student)) != 1]


def _folded(name: str, value: str) -> str:
    value = value.strip()
    return value.casefold() if name in ("email", "sis_login") else value


# Where the combining marks that are accents live: Combining Diacritical Marks and their
# Extended and Supplement blocks, and the half marks. Marks of other blocks are letters' parts
# (Devanagari vowel signs, Arabic harakat, the Thai and Hebrew marks): never dropped.
_ACCENT_BLOCKS = ((0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0xFE20, 0xFE2F))


def _accent(mark: str, base: str) -> bool:
    """Whether ``mark`` (a combining character) is an accent on ``base``: a diacritic of those
    blocks on a Latin letter ("é", "ñ", "ễ"). Elsewhere a mark is kept (Cyrillic "й" is its own
    letter, not "и" with an accent)."""
    code = ord(mark)
    return (any(lo <= code <= hi for lo, hi in _ACCENT_BLOCKS)
            and unicodedata.name(base, "").startswith("LATIN "))


def name_key(text: str) -> str:
    """A name reduced to what tells names apart, in any script: "Lovelace, Ada", "lovelaceada"
    and "ＬＯＶＥＬＡＣＥ　Ａｄａ" agree, as do "Zoë" and "zoe", and "李 小龙" and "李小龙"; "सती" and
    "सीता" do not.

    NFKC first (full-width letters and digits become plain ones), then case folding; then, in
    the decomposed form, the accents of Latin letters are dropped ("ë" is "e") and every other
    mark is kept (a Devanagari vowel sign, spacing or not, is part of its letter); then every
    character that is not a letter, mark or digit (spaces, punctuation, '_'); then NFC again. An
    LMS writes a name its own way (Canvas lower-cases the sortable name and drops spaces and
    commas, keeping letters and marks of any script; Moodle and Gradescope keep the full name):
    these are the differences this key forgets.
    """
    folded = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text).casefold())
    kept: list[str] = []
    base = ""
    for c in folded:
        kind = unicodedata.category(c)[0]
        if kind == "M":
            if base and _accent(c, base):
                continue
            if base:  # a mark on a letter kept: kept with it
                kept.append(c)
            continue
        base = c if kind in "LN" else ""
        if base:
            kept.append(c)
    return unicodedata.normalize("NFC", "".join(kept))


def loose_name_key(text: str) -> str:
    """:func:`name_key` with every mark dropped ("सती" and "सीता" agree): never used to match a
    name, only to say which roster name a name that fits no one comes close to."""
    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    return "".join(c for c in folded if unicodedata.category(c)[0] in "LN")


def _word_orders(name: str, key=name_key) -> set[str]:
    """The keys of ``name`` read with its words in each turn: "小龙 李" also as "李小龙", "Ada
    Lovelace" also as "Lovelace Ada" (a family name written last or first)."""
    words = unicodedata.normalize("NFKC", name).split()
    turns = range(len(words)) if len(words) <= MAX_NAME_WORDS else range(1)
    keys = {key("".join(words[i:] + words[:i])) for i in turns}
    keys.discard("")
    return keys


def _name_keys(e: RosterEntry, key=name_key) -> set[str]:
    first, last = e.split_name
    keys = {key(e.display_name), key(e.sortable), key(last + first), key(first + last)}
    keys.discard("")
    return keys


def moodle_cleaned(name: str) -> str:
    """A group's name as Moodle writes it into a download's prefix: ``format_string`` writes a
    bare ``&`` as ``&amp;``, '_' becomes a space, and ``clean_filename`` drops control characters
    and ``&<>"`|':\\/`` (so "R&D" becomes "Ramp;D")."""
    escaped = re.sub(r"&(?![A-Za-z][A-Za-z0-9]*;|#[0-9]+;|#x[0-9A-Fa-f]+;)", "&amp;", name)
    return re.sub(r"[\x00-\x1f\x7f&<>\"`|':\\/]", "", escaped.replace("_", " "))


def _merged_groups(groups: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """One entry per group: a group given by name alone and by name and id is one group."""
    named = {name for name, gid in groups if gid and name}
    return {(name, gid) for name, gid in groups if gid or name not in named}


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
        rows = csv_rows(io.StringIO("\n".join(lines)), source)
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


# Moodle's list of group members, as its "Groups" report (Report builder → custom report from
# the "Groups" source) or a participants table downloads it: one row per member and group.
# Headers are compared by their letters and digits only ("Group: Name", "Group name" agree).
_GROUP_HEADERS = ("groupname", "group", "groups", "team")
_GROUP_ID_HEADERS = ("groupid", "teamid")
_MEMBER_HEADERS = (("email", ("emailaddress", "email", "useremailaddress")),
                   ("sis_login", ("username", "userusername")),
                   ("sis_id", ("idnumber", "useridnumber")),
                   ("name", ("fullname", "userfullname", "name")))


def _letters(header: str) -> str:
    return re.sub(r"[\W_]+", "", header.strip().casefold())


def with_moodle_groups(roster: Roster, path: str | Path) -> tuple[Roster, list[str]]:
    """``roster`` with the group memberships of Moodle's list of group members at ``path`` (a CSV
    with a group-name column and a column naming the member: email address, username, ID number
    or full name), and a sentence per row that matches no roster student (or several).

    ValueError names the file when it has no such columns.
    """
    path = Path(path)
    source = shown_path(path)
    text = read_text(path, MAX_ROSTER_BYTES, "group list")
    rows = [r for r in csv_rows(io.StringIO(text.lstrip("\ufeff")), source) if any(c.strip() for c in r)]
    if not rows:
        raise ValueError(f"{source}: the group list is empty")
    header = {_letters(h): i for i, h in reversed(list(enumerate(rows[0])))}
    group_col = next((header[h] for h in _GROUP_HEADERS if h in header), None)
    id_col = next((header[h] for h in _GROUP_ID_HEADERS if h in header), None)
    members = [(field_name, header[h]) for field_name, aliases in _MEMBER_HEADERS for h in aliases
               if h in header and header[h] != group_col]
    if group_col is None and id_col is None or not members:
        found = ", ".join(repr(h) for h in rows[0]) or "none"
        raise ValueError(f"{source}: a list of group members needs a group column ('Group name' or 'Group') and "
                         f"one naming the member ('Email address', 'Username', 'ID number' or 'Full name'); found: {found}")
    memberships: list[tuple[str, str, str]] = list(roster.memberships)
    problems = []
    for n, row in enumerate(rows[1:], start=2):
        def cell(i: int | None) -> str:
            return row[i].strip() if i is not None and i < len(row) else ""

        group, gid = cell(group_col), cell(id_col)
        if not group and not gid:
            continue  # a member of no group (the report lists them too)
        entry = None
        for field_name, i in members:
            value = cell(i)
            if not value:
                continue
            if field_name == "name":
                found_entries = roster.by_name(value)
                entry = found_entries[0] if len(found_entries) == 1 else None
            else:
                entry = roster.by(field_name, value)
            if entry is not None:
                break
        if entry is None:
            who = "; ".join(cell(i) for _f, i in members if cell(i))
            problems.append(f"{source}: line {n}: no roster student (or several) fits {who!r}; "
                            f"their membership of {group or gid!r} is not used")
            continue
        memberships.append((entry.student, group, gid))
    return Roster(roster.entries, roster.source, roster.columns, memberships=tuple(memberships)), problems
