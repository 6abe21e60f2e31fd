"""Which file is graded when several claim one student.

Files are ranked, best first, by:

1. identity: the file names the student's variant (and the key's set, or none) > names no
   variant > names another variant or another set. A file planted to claim a classmate
   cannot know their variant code, so it loses to the real hand-in;
2. filled: a file with any answer beats a blank one (every part empty);
3. the blank submission that ``generate`` wrote (``students/<id>/submission.json``, every part
   empty, never saved by the answer form) is never graded, even alone;
4. ``duplicates="latest"`` (default): the latest saved (the answer form's ``saved_at``, else
   the file's modification time); ``"first"``: the first path in sort order;
   ``"error"``: a student with several files that are not blank templates is not graded,
   and each of the files is reported.

Remaining ties go to the first path in sort order, so the choice never depends on the order
in which files were listed.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cached_property
from pathlib import PurePath

from ..core.i18n import N_, Np_, _, ngettext
from ..core.submissions import Submission, blank_answer
from ..core.untrusted import char_name, invisible_characters, lookalike_key
from ..key import Key
from .results import Candidate, FileProblem

DUPLICATES = ("latest", "first", "error")
DUPLICATES_DEFAULT = "latest"
TEMPLATE_NAME = "submission.json"  # what generate writes under students/<id>/
TEMPLATE_MESSAGE = N_("the blank submission that generate wrote (every part empty): not a hand-in, so not graded")


MAX_SUGGESTED_ID = 64  # characters of an unknown id for which a near id is looked for
CLOSE_RATIO = 0.75  # how alike (difflib's ratio) a suggested id must be


class KnownStudents:
    """The key's ids, indexed once, so that an unknown id finds its likely meaning in constant
    time (a class of 10,000 and thousands of files naming strangers: no scan per file).

    Two indexes, each built on first use: ids by :func:`lookalike_key` (case, width, invisible
    characters), and ids by every way of deleting one of their characters (a typo, a missing or
    extra letter or two swapped letters share such a deletion with the id meant).
    """

    def __init__(self, students: list[str]) -> None:
        self._students = students
        self._lookalike: dict[str, list[str]] | None = None
        self._deletions: dict[str, list[str]] | None = None

    def lookalikes(self, student: str) -> list[str]:
        if self._lookalike is None:
            self._lookalike = {}
            for s in self._students:
                self._lookalike.setdefault(lookalike_key(s), []).append(s)
        return self._lookalike.get(lookalike_key(student), [])

    def close(self, student: str) -> str | None:
        """The known id most like ``student`` within one edit (as difflib rates them), or None."""
        if len(student) > MAX_SUGGESTED_ID:
            return None
        if self._deletions is None:
            self._deletions = {}
            for s in self._students:
                if len(s) <= MAX_SUGGESTED_ID + 1:
                    for variant in _deletions(s):
                        self._deletions.setdefault(variant, []).append(s)
        found = {s for variant in _deletions(student) for s in self._deletions.get(variant, ())}
        rated = [(difflib.SequenceMatcher(None, student, s).ratio(), s) for s in sorted(found)]
        best = max(rated, key=lambda pair: pair[0], default=(0.0, None))
        return best[1] if best[0] >= CLOSE_RATIO else None


def _deletions(text: str) -> set[str]:
    """``text`` and every string made by deleting one of its characters."""
    return {text, *(text[:i] + text[i + 1:] for i in range(len(text)))}


def unknown_student_message(key: Key, student: str, known: KnownStudents | None = None) -> str:
    """Why ``student`` is not graded, with the id that was probably meant when there is one.

    Ids that differ only by invisible characters (zero-width space, right-to-left override),
    fullwidth or other compatibility forms, case or surrounding space are reported as such.
    ``known``: the key's ids indexed (pass one for many messages; made here otherwise).
    """
    known = known or KnownStudents(key.students)
    notes = []
    bad = invisible_characters(student)
    if bad:
        notes.append(_("the id contains invisible or control characters (%(chars)s)")
                     % {"chars": ", ".join(char_name(c) for c in bad[:3])})
    meant = known.lookalikes(student)
    if len(meant) == 1:
        notes.append(_("did you mean %(id)s? Write the id exactly as on the worksheet") % {"id": repr(meant[0])})
    elif student != unicodedata.normalize("NFKC", student):
        notes.append(_("it holds fullwidth or other compatibility characters: write the id exactly as on the worksheet"))
    else:
        close = known.close(student)
        if close:
            notes.append(_("did you mean %(id)s? Write the id exactly as on the worksheet") % {"id": repr(close)})
    message = _("student %(student)s is not in the key") % {"student": repr(student)}
    for note in notes:
        message = _("%(message)s; %(note)s") % {"message": message, "note": note}
    return message


@dataclass
class Selection:
    """The submissions to grade, with every candidate file per student and why it was (not) chosen."""

    accepted: list[tuple[int, Submission]]
    problems: list[FileProblem]
    candidates: dict[str, list[Candidate]] = field(default_factory=dict)
    skipped: list[FileProblem] = field(default_factory=list)


@dataclass(frozen=True)
class _Ranked:
    sub: Submission
    identity: int  # 2 the student's variant, 1 none named, 0 another variant or set
    filled: bool
    template: bool

    # When the file was saved is read only where several files claim a student (most claims are one
    # file, and reading it is a datetime parse and format per file).
    @cached_property
    def _saved(self) -> tuple[float, str]:
        return _when(self.sub)

    @property
    def when(self) -> float:
        """saved_at, else the file's modification time (seconds since the epoch); -inf unknown."""
        return self._saved[0]

    @property
    def when_text(self) -> str:
        """The same, in words."""
        return self._saved[1]


def select_submissions(key: Key, submissions: Iterable[Submission], duplicates: str = DUPLICATES_DEFAULT) -> Selection:
    """Each student's graded submission, chosen among the files that claim them (see the module)."""
    if duplicates not in DUPLICATES:
        raise ValueError(f"unknown duplicates rule {duplicates!r}; choose from {', '.join(DUPLICATES)}")
    position = {student: i for i, student in enumerate(key.students)}  # Key.index is a linear search
    claims: dict[str, list[Submission]] = {}
    selection = Selection([], [])
    known = KnownStudents(key.students)
    for sub in submissions:
        if sub.student not in position:
            selection.problems.append(FileProblem(sub.source, unknown_student_message(key, sub.student, known)))
        else:
            claims.setdefault(sub.student, []).append(sub)
    part_ids = [part.id for _problem, part in key.parts]
    for student, subs in claims.items():
        index = position[student]
        ranked = [_rank(sub, key.variants[index], key.set_id, part_ids) for sub in subs]
        chosen, candidates = _choose(ranked, duplicates)
        if chosen is not None:
            selection.accepted.append((index, chosen))
        elif duplicates == "error" and sum(not r.template for r in ranked) > 1:
            selection.problems += [FileProblem(c.source, c.why) for c in candidates if c.why != _(TEMPLATE_MESSAGE)]
        else:  # only blank templates claim this student
            selection.skipped += [FileProblem(r.sub.source, _(TEMPLATE_MESSAGE)) for r in ranked]
        selection.candidates[student] = candidates
    selection.accepted.sort(key=lambda pair: pair[0])
    return selection


def _rank(sub: Submission, variant: str, set_id: str, part_ids: list[str]) -> _Ranked:
    other = (bool(sub.variant and variant and sub.variant != variant)
             or bool(sub.set_id and set_id and sub.set_id != set_id))
    identity = 0 if other else 2 if sub.variant and sub.variant == variant else 1
    filled = any(not blank_answer(sub.answers.get(part)) for part in part_ids)
    return _Ranked(sub, identity, filled, is_template(sub, filled))


def is_template(sub: Submission, filled: bool) -> bool:
    """The blank submission ``generate`` writes: every part empty, never saved by the form, at its path."""
    if filled or sub.saved_at is not None:
        return False
    path = PurePath(sub.source)
    return path.name == TEMPLATE_NAME and len(path.parts) >= 3 and path.parts[-3] == "students"


def _when(sub: Submission) -> tuple[float, str]:
    """When the file was saved: the form's ``saved_at`` when readable, else the file's time."""
    if sub.saved_at:
        try:
            stamp = datetime.fromisoformat(sub.saved_at.strip())
        except ValueError:
            stamp = None
        if stamp is not None:
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=timezone.utc)
            return stamp.timestamp(), _("saved_at %(time)s") % {"time": sub.saved_at.strip()}
    if sub.mtime is None:
        return float("-inf"), _("no time known")
    return sub.mtime, _("file time %(time)s") % {
        "time": datetime.fromtimestamp(sub.mtime, timezone.utc).isoformat(timespec="seconds")}


def _choose(ranked: list[_Ranked], duplicates: str) -> tuple[Submission | None, list[Candidate]]:
    """The graded file (None when none may be) and every candidate with why it was or was not chosen."""
    ranked = sorted(ranked, key=lambda r: r.sub.source)  # ties: the first path in sort order
    usable = [r for r in ranked if not r.template]
    if not usable:
        return None, [Candidate(r.sub.source, False, _(TEMPLATE_MESSAGE)) for r in ranked]
    if duplicates == "error" and len(usable) > 1:
        why = _("one of %(n)s files for this student; with --duplicates error none of them is graded: "
                "keep one, or choose another rule") % {"n": len(usable)}
        return None, [Candidate(r.sub.source, False, _(TEMPLATE_MESSAGE) if r.template else why) for r in ranked]

    def order(r: _Ranked) -> tuple:
        return (r.identity, r.filled, r.when if duplicates == "latest" else 0.0)

    # max keeps the first of equals: the first path in sort order. A lone file is not ranked (its
    # time is read only where it is compared).
    best = usable[0] if len(usable) == 1 else max(usable, key=order)
    candidates = []
    for r in ranked:
        if r is best:
            candidates.append(Candidate(r.sub.source, True, _why_chosen(best, usable, duplicates)))
        else:
            candidates.append(Candidate(r.sub.source, False, _why_not(r, best, duplicates)))
    return best.sub, candidates


# Why the graded file ranked above files that name no variant, or another variant or set: by
# what it names (2: this student's variant, 1: no variant), a whole message for each count.
_OUTRANKS = {
    2: Np_("it names this student's variant, %(n)s other file does not",
           "it names this student's variant, %(n)s other files do not"),
    1: Np_("it names no variant, %(n)s other file does not", "it names no variant, %(n)s other files do not"),
}
# Why a file ranked below the graded one by what it names (1: no variant, 0: another variant
# or set), with the variant it names and without one.
_OUTRANKED = {
    1: (N_("not graded: it names no variant (%(variant)s)"), N_("not graded: it names no variant")),
    0: (N_("not graded: it names another variant or set (%(variant)s)"), N_("not graded: it names another variant or set")),
}


def _why_chosen(best: _Ranked, usable: list[_Ranked], duplicates: str) -> str:
    """Every rule that set the graded file above the others, in the order the rules apply."""
    others = [r for r in usable if r is not best]
    if not others:
        return _("graded: the only hand-in for this student")
    reasons = []
    lower = [r for r in others if r.identity < best.identity]
    if lower:
        reasons.append(ngettext(*_OUTRANKS[best.identity], len(lower)) % {"n": len(lower)})
    rivals = [r for r in others if r.identity == best.identity]
    blank = [r for r in rivals if r.filled < best.filled]
    if blank:
        reasons.append(ngettext("%(n)s other file like it is blank", "%(n)s other files like it are blank",
                                len(blank)) % {"n": len(blank)})
    rivals = [r for r in rivals if r.filled == best.filled]
    if rivals:
        if duplicates == "latest" and all(r.when < best.when for r in rivals):
            reasons.append(_("the latest saved (%(when)s)") % {"when": best.when_text})
        else:
            reasons.append(_("the first in path order among equal files"))
    # Translators: between the reasons a file was graded ("it names …; the latest saved (…)").
    return _("graded: %(reasons)s") % {"reasons": _("; ").join(reasons)}


def _why_not(r: _Ranked, best: _Ranked, duplicates: str) -> str:
    if r.template:
        return _(TEMPLATE_MESSAGE)
    if r.identity < best.identity:
        named, unnamed = _OUTRANKED[r.identity]
        return _(named) % {"variant": repr(r.sub.variant)} if r.sub.variant else _(unnamed)
    if r.filled < best.filled:
        return _("not graded: blank (every part empty)")
    if duplicates == "latest" and r.when < best.when:
        return _("not graded: saved earlier (%(when)s)") % {"when": r.when_text}
    return _("not graded: a file earlier in path order was graded")
