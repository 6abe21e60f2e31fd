"""Who uploaded a file, by the roster: an LMS's name for an upload matched to a roster row.

Canvas and Moodle name each upload with the LMS's own id of the uploader (and their name);
Gradescope lists the submitters of each submission in its metadata. A roster that holds the
LMS ids matches by id; one without them matches by a name that fits exactly one student, and
says when a name fits several. Every reason someone is not matched is a sentence for the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..core.i18n import N_, _
from ..roster import Roster, RosterEntry
from .lms_names import GRADESCOPE_METADATA, LmsName


@dataclass
class Who:
    """Whom an LMS name points to in the roster."""

    named: LmsName  # the reading of the name that was used
    entries: list[tuple[RosterEntry, str]] = field(default_factory=list)  # uploader(s), how matched ("": LMS id)
    problems: list[str] = field(default_factory=list)  # why someone, or no one, was not matched


def match_canvas(readings: list[LmsName], roster: Roster) -> Who:
    """The user id in the ``canvas_id`` column, else an anonymous submission, else a unique name.

    A name that reads as two users both in the roster (``x_102_101_…``: user 102 named "x", or
    user 101 named "x_102") is decided by which reading's name fits its row; when neither or
    both do, by no one: a student who named themself after a classmate's id gets nothing.
    """
    by_id = [(r, e) for r in readings if not r.anonymous
             for e in [roster.by("canvas_id", r.lms_id)] if e is not None]
    if len(by_id) > 1:
        fits = [(r, e) for r, e in by_id if e in roster.by_name(r.name)]
        if len(fits) != 1:
            users = ", ".join(r.lms_id for r, _e in by_id)
            return Who(by_id[0][0], problems=[_(
                "the name reads as several Canvas users in the roster (%(ids)s), and its name part fits none of "
                "them alone: not graded, so that no one is credited with a classmate's file") % {"ids": users}])
        by_id = fits
    if by_id:
        return Who(by_id[0][0], [(by_id[0][1], "")])
    anonymous = [r for r in readings if r.anonymous]
    if anonymous:
        return Who(anonymous[0])
    why = _("no roster row has canvas_id %(id)s") % {"id": readings[0].lms_id}
    return _by_name(readings, roster, why, _SORTABLE)


def match_moodle(named: LmsName, roster: Roster) -> Who:
    """A team's folder: every member of its group (see :func:`match_moodle_team`). Else the
    participant id in ``moodle_id``, when the folder's name fits that student; else a unique
    full-name match (never "Participant", the blind-marking name)."""
    if named.default_team or roster.has_groups:
        team = match_moodle_team(named, roster)
        if team is not None:
            return team
    entry = roster.by("moodle_id", named.lms_id)
    if entry is not None:
        if _named_otherwise(named, entry, roster):
            # Moodle writes each participant's own name before their id; a folder that names
            # someone else is a team's (<group name>_<group id>), whose id is no participant's.
            return Who(named, problems=[_(
                "the folder names %(name)s, but moodle_id %(id)s is %(student)s (%(roster_name)s) in the roster: "
                "not graded. A team assignment's folder is named after its group and the group's id; give the "
                "groups in a group column of the roster, or Moodle's list of group members with --groups")
                % {"name": repr(named.name), "id": named.lms_id, "student": repr(entry.student),
                   "roster_name": repr(entry.display_name)}])
        return Who(named, [(entry, "")])
    if named.name.strip().lower() == "participant":  # blind marking hides the name
        return Who(named, problems=[_(
            "no roster row has moodle_id %(id)s (blind marking hides the name: add the participant ids to the "
            "roster)") % {"id": named.lms_id}])
    return _by_name([named], roster, _("no roster row has moodle_id %(id)s") % {"id": named.lms_id}, _FULL)


def match_moodle_team(named: LmsName, roster: Roster) -> Who | None:
    """The members of the team a Moodle folder names, None when it names no group of the roster.

    A group's folder is ``<group name>_<group id>``: its members are the roster's students in
    that group (by the group's id where the roster gives one, else by its name). The "Default
    group" (no id) holds the students in no group or in several; where the roster says nothing
    of groups, its members are unknown and the file's own ``"student"`` decides (no entries,
    no problems).
    """
    if named.default_team:
        team = replace(named, team=True)
        if not roster.has_groups:
            return Who(team)
        members = roster.ungrouped()
        if not members:
            return Who(team, problems=[_("Moodle's default group holds the students in no group, and every roster "
                                         "student is in one: not graded")])
        return Who(team, [(e, _("a member of Moodle's default group")) for e in members])
    members, groups = roster.team_members(named.name, named.lms_id)
    if not groups:
        return None
    team = replace(named, team=True)
    if len(groups) > 1:
        return Who(team, problems=[_("the folder's group %(name)s fits several groups of the roster (%(groups)s): "
                                     "not graded") % {"name": repr(named.name), "groups": ", ".join(groups)}])
    if not members:
        return Who(team, problems=[_("no roster student is in group %(name)s alone (a student in several groups is "
                                     "in Moodle's default group): not graded") % {"name": repr(groups[0])}])
    return Who(team, [(e, _("a member of group %(group)s") % {"group": repr(groups[0])}) for e in members])


def _named_otherwise(named: LmsName, entry: RosterEntry, roster: Roster) -> bool:
    """Whether a Moodle folder's name is not the name the roster gives the student with its id
    (blind marking's "Participant" and a roster without the name say nothing)."""
    if named.name.strip().lower() == "participant" or not (entry.name or entry.first_name or entry.last_name):
        return False
    return all(e is not entry for e in roster.by_name(named.name))


def match_submitters(named: LmsName, submitters: list[dict[str, str]] | None, roster: Roster) -> Who:
    """Every submitter of a Gradescope submission (several for a group), each by ``sid``
    (``sis_id``), email, then name; those that match no one are one problem."""
    if not submitters:
        return Who(named, problems=[_("submission %(id)s is not in %(file)s, so its student is not known") % {
            "id": named.lms_id, "file": GRADESCOPE_METADATA}])
    who = Who(named)
    unmatched = []
    for person in submitters:
        found = _submitter(person, roster)
        if found is None:
            unmatched.append(person)
        elif all(found[0] is not e for e, _how in who.entries):
            who.entries.append(found)
    if unmatched:
        people = "; ".join(f"{p.get('name', '')} <{p.get('email', '')}> sid {p.get('sid', '')}" for p in unmatched)
        who.problems.append(_("no roster row matches the submitter(s) %(who)s by sis_id, email or name")
                            % {"who": people})
    return who


def _submitter(person: dict[str, str], roster: Roster) -> tuple[RosterEntry, str] | None:
    for column, value in (("sis_id", person.get("sid", "")), ("email", person.get("email", ""))):
        if value:
            entry = roster.by(column, value)
            if entry is not None:
                return entry, _("matched by %(column)s") % {"column": column}
    if person.get("name"):
        found = roster.by_name(person["name"])
        if len(found) == 1:
            return found[0], _("matched by name")
    return None


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


def _by_name(readings: list[LmsName], roster: Roster, why: str, what: tuple[str, str]) -> Who:
    """The one roster row whose name fits the name in any reading of the file's name."""
    matched, several = what
    found: dict[str, tuple[LmsName, RosterEntry]] = {}
    for r in readings:
        for e in roster.by_name(r.name):
            found.setdefault(e.student, (r, e))
    first = readings[0]
    if len(found) == 1:
        r, e = next(iter(found.values()))
        return Who(r, [(e, _(matched) % {"name": repr(r.name)})])
    if found:
        ids = ", ".join(list(found)[:5])
        return Who(first, problems=[_(several) % {"why": why, "name": repr(first.name), "ids": ids}])
    close = {e.student: e for r in readings for e in roster.by_loose_name(r.name)}
    if close:
        # Names that differ only in marks: in many scripts a mark is a vowel (सती, सीता), so
        # they are different names, and neither is taken for the other.
        shown = ", ".join(f"{e.student} ({e.display_name!r})" for e in list(close.values())[:5])
        return Who(first, problems=[_(
            "%(why)s, and the name %(name)s fits no one exactly: it differs from %(close)s only in vowel signs or "
            "other marks, which make another name; not graded. Add the LMS ids to the roster")
            % {"why": why, "name": repr(first.name), "close": shown}])
    return Who(first, problems=[_("%(why)s, nor a name that fits %(name)s; add the LMS ids (or names) to the "
                                   "roster") % {"why": why, "name": repr(first.name)}])
