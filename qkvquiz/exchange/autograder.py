"""Grading inside Gradescope: what the bundle's ``run_autograder`` runs for every submission
(:mod:`qkvquiz.exchange.gradescope` builds the bundle).

Gradescope's autograder contract: the uploaded zip is unpacked into ``/autograder/source``,
``setup.sh`` runs once when the image is built, and ``/autograder/run_autograder`` (copied from
the zip) runs for every submission with the student's files in ``/autograder/submission/`` and
``/autograder/submission_metadata.json`` beside them; it must write
``/autograder/results/results.json``::

    {"score": 7.5, "output": "...", "visibility": "visible", "stdout_visibility": "hidden",
     "tests": [{"name": "1a scores", "score": 1, "max_score": 1, "output": "...",
                "visibility": "after_due_date"}]}

``visibility`` is one of ``hidden``, ``after_due_date``, ``after_published``, ``visible``.
Here each asked part is one test whose output holds the part's feedback, expected values
included, and is shown ``after_due_date`` by default; one visible test, "Summary", never shows an
expected value and tells what ``show`` allows before then: ``after-due`` (the default) no score,
only whether the upload was read and which parts are missing or unreadable, with a "Score by
part" test and the top level shown when the parts are; ``total`` that and the total;
``per-part`` each part's score and verdict. A part's score is its share of entries within
tolerance, so where resubmissions are unlimited a visible part score lets a student search entry
by entry, and a visible total one entry per upload; ``after-due`` tells nothing that depends on
an answer's value. (Gradescope shows no total of its own while a scored test is held back.)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.i18n import N_, _, entered
from ..core.ragged import real_box
from .gradescope import MAX_METADATA_BYTES, ROOT_ENV

def _expected_text(expected: Any, item: Any, part: Any) -> str:
    """The right answer of a part as JSON, of its asked entries only: every entry of a whole
    part; each chunk at its own length where a delta sequence's last chunk is shorter; each
    asked entry by its place where the part asks some entries only (``row 1, column 2: 0.5``)."""
    import numpy as np

    from ..grade.feedback import entry_name

    if not isinstance(expected, list):
        return json.dumps(expected, ensure_ascii=False)
    values = np.array(expected, dtype=object)  # the entries as written ("inf" stays a text)
    shape = values.shape
    asked = part.asked(shape)
    present = item.family.extra.get("present")
    real = None if present is None else present(item.params, part.step, shape)
    if asked is None and real is None:
        return json.dumps(expected, ensure_ascii=False)
    if real is not None and (asked is None or bool((asked == real).all())):
        chunks = [values[c][real_box(real[c])].tolist() for c in range(shape[0])]
        return json.dumps(chunks, ensure_ascii=False)
    keep = asked if real is None else real if asked is None else asked & real
    # Translators: between the asked entries of a part ("row 1, column 2: 0.5; row 2, column 1: 1").
    return _("; ").join(_("%(where)s: %(value)s") % {"where": entry_name(tuple(int(i) for i in index)),
                                                      "value": json.dumps(values[tuple(index)], ensure_ascii=False)}
                        for index in np.argwhere(keep))


def _part_output(part: Any, item_title: str, item: Any = None, spec_part: Any = None) -> str:
    """One part's feedback as text: verdict, what was wrong, and the expected value (of the
    entries asked, where ``item`` and ``spec_part`` say which)."""
    from ..grade.feedback import VERDICTS

    lines = [_("%(verdict)s: %(score)s of %(points)s point(s).") % {
        "verdict": _(VERDICTS[part.verdict]) if part.verdict in VERDICTS else part.verdict,
        "score": f"{part.score:g}", "points": f"{part.points:g}"}]
    if part.entries and part.verdict not in ("correct", "missing", "format"):
        lines.append(_("%(correct)s of %(entries)s entries within tolerance.") % {
            "correct": part.correct_entries, "entries": part.entries})
    for text in (part.message, *part.diagnosis, *part.invariants, part.carry):
        if text:
            lines.append(text)
    if part.verdict != "correct" and part.expected is not None:
        shown = (json.dumps(part.expected, ensure_ascii=False) if item is None or spec_part is None
                 else _expected_text(part.expected, item, spec_part))
        lines.append(_("Expected: %(value)s") % {"value": shown})
    return "\n".join(lines)


# A part's verdict in the summary's list (the words of the verdicts in results.json).
SUMMARY_VERDICTS = {
    "correct": N_("correct"), "partial": N_("partial"), "wrong": N_("wrong"), "carried": N_("carried"),
    "format": N_("format"), "missing": N_("missing"),
}


@dataclass(frozen=True)
class Member:
    """A student this submission's score is booked to: as Gradescope (or the file) names them, and
    their qkvquiz id, None where the roster cannot say which student they are."""

    shown: str
    student: str | None


def results_document(report: Any, student: str | None, cfg: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """Gradescope's results.json for the graded ``student`` (the report's first where None), or a
    zero score and why nothing was graded, in the language the report was graded in."""
    if student is None and report.results:
        student = report.results[0].student
    return submission_document(report, [] if student is None else [Member(student, student)], cfg, problems)


def submission_document(report: Any, members: Sequence[Member], cfg: dict[str, Any],
                        problems: list[str]) -> dict[str, Any]:
    """Gradescope's results.json for a submission booked to ``members`` (several in a group
    submission; each member's result as :mod:`qkvquiz.grade.attribution`'s group rule gives it):
    per-part tests per member, and the lowest of their scores as the submission's (see
    :func:`booked_score`)."""
    with entered(None, report.lang):
        return _submission_document(report, members, cfg, problems)


def booked_score(scores: Sequence[float]) -> float:
    """The one score Gradescope holds for a submission, which it gives every member of a group:
    the lowest member's (a member the roster does not know, or whom no file names in a group that
    uploaded several, counts 0). With one file for the group every member has its result."""
    return round(min(scores), 6) if scores else 0


def _submission_document(report: Any, members: Sequence[Member], cfg: dict[str, Any],
                         problems: list[str]) -> dict[str, Any]:
    key = report.key
    show = cfg.get("show", "per-part")  # what a config from before --show meant
    parts_visibility = cfg["visibility"]
    by_student = {r.student: r for r in report.results}
    graded = [(m, by_student.get(m.student) if m.student is not None else None) for m in members]
    group = len(members) > 1
    tests: list[dict[str, Any]] = []
    for member, result in graded:
        if member.student is not None:  # else no variant to grade against; the problems say why
            tests += _part_tests(key, result, parts_visibility, member.student if group else None)
    score = booked_score([r.score if r is not None else 0.0 for _m, r in graded])
    head, details = _summary(key, graded, score, problems, show, parts_visibility)
    front = [{"name": _("Summary"), "output": "\n".join(head + details), "visibility": cfg["summary_visibility"]}]
    if show == "after-due":  # the scores the Summary holds back, shown when the parts' tests are
        full_head, full_details = _summary(key, graded, score, problems, "per-part", parts_visibility)
        front.append({"name": _("Score by part"), "output": "\n".join(full_head + full_details),
                          "visibility": parts_visibility})
    # Gradescope's own total stays hidden while any scored test is (its rule); the top level
    # follows after-due too, so that nothing about the score shows before the parts' tests do.
    top = parts_visibility if show == "after-due" else "visible"
    return {"score": score, "output": "\n".join(head), "visibility": top, "stdout_visibility": "hidden",
            "tests": front + tests}


# What an after-due Summary says about when the scores show, by the per-part tests' visibility.
SHOWN_WHEN = {
    "after_due_date": N_("Scores and each part's feedback show after the due date."),
    "after_published": N_("Scores and each part's feedback show once the grades are published."),
    "hidden": N_("Scores are not shown here."),
}


def _summary(key: Any, graded: Sequence[tuple[Member, Any]], score: float, problems: list[str], show: str,
             parts_visibility: str) -> tuple[list[str], list[str]]:
    """The Summary's lines: a head (also the top-level output) and the details, with what ``show``
    allows: every part's score (per-part), only the total (total), or no score (after-due); the
    last two list what the upload holds instead (:func:`_check_lines`)."""
    group = len(graded) > 1
    scored = show != "after-due"
    if scored:
        head = [_("%(title)s: %(score)s of %(points)s points.") % {
            "title": key.title, "score": f"{score:g}", "points": f"{key.points:g}"}]
    else:
        head = [key.title] + ([_(SHOWN_WHEN[parts_visibility])] if parts_visibility in SHOWN_WHEN else [])
    if group:
        head += _group_lines(key, graded, scored)
    if not any(r is not None for _m, r in graded):
        head.append(_("No submission could be graded."))
    head += problems
    details = []
    for member, result in graded:
        if member.student is None:
            continue
        mark = member.student if group else None
        if result is not None:
            head += _mark(_notes(result, scored), mark)
        details += _mark(_part_lines(key, result) if show == "per-part" else _check_lines(result), mark)
    return head, details


def _notes(result: Any, scored: bool) -> list[str]:
    """A result's notes on the file; without scores, not the one that compares its answers with
    the classmates' right ones (it would say whether answers are right for some variant)."""
    if scored:
        return list(result.notes)
    from ..grade.copies import COPY_NOTE

    return [note for note in result.notes if note != _(COPY_NOTE)]


def _check_lines(result: Any) -> list[str]:
    """What the upload holds, told without anything that depends on an answer being right: which
    parts have no answer and which could not be read (and why), so a student can fix the file."""
    if result is None:
        return [_("Not graded.")]
    lines = []
    missing = [p.part for p in result.parts if p.verdict == "missing"]
    if missing:
        lines.append(_("No answer: %(parts)s.") % {"parts": ", ".join(missing)})
    lines += [_("%(part)s could not be read: %(message)s") % {"part": p.part, "message": p.message}
              for p in result.parts if p.verdict == "format"]
    return lines or [_("Every part has a readable answer.")]


def _mark(lines: list[str], student: str | None) -> list[str]:
    """``lines`` as they are, or each led by ``student`` (in a group submission, whose they are)."""
    if student is None:
        return list(lines)
    return [_("%(student)s — %(what)s") % {"student": student, "what": line} for line in lines]


def _group_lines(key: Any, graded: Sequence[tuple[Member, Any]], scored: bool) -> list[str]:
    """Why a group submission's score is what it is: the rule, then (where scores show) each
    member's own score."""
    lines = [_("Group submission: each file is graded against the variant of the member it names; a member no "
               "file names gets the result of the group's file where the group uploaded one file (none where it "
               "uploaded several). The submission's score is the lowest of the members' scores, since Gradescope "
               "gives every member the same score.")]
    if not scored:
        return lines
    for member, result in graded:
        if result is None:
            lines.append(_("%(student)s: not graded.") % {"student": member.student or member.shown})
        else:
            lines.append(_("%(student)s: %(score)s of %(points)s points.") % {
                "student": member.student, "score": f"{result.score:g}", "points": f"{key.points:g}"})
    return lines


def _part_tests(key: Any, result: Any, visibility: str, student: str | None) -> list[dict[str, Any]]:
    """One Gradescope test per asked part of ``result`` (a member's, named in a group submission)."""
    from ..grade.feedback import item_title

    by_part = {p.part: p for p in result.parts} if result is not None else {}
    tests = []
    for item in key.items:
        title = item_title(item)
        for part in item.parts:
            pr = by_part.get(part.id)
            name = _mark([_("%(part)s (%(title)s)") % {"part": part.id, "title": title}], student)[0]
            if pr is None:
                tests.append({"name": name, "score": 0, "max_score": part.points, "output": _("Not graded."),
                              "visibility": visibility})
            else:
                tests.append({"name": name, "score": round(pr.score, 6), "max_score": pr.points,
                              "output": _part_output(pr, title, item, part), "visibility": visibility})
    return tests


def _part_lines(key: Any, result: Any) -> list[str]:
    """Each graded part's score and verdict, one line each, with no expected value."""
    if result is None:
        return []
    lines = []
    for pr in result.parts:
        verdict = _(SUMMARY_VERDICTS[pr.verdict]) if pr.verdict in SUMMARY_VERDICTS else pr.verdict
        lines.append(_("%(part)s: %(score)s/%(points)s (%(verdict)s)") % {
            "part": pr.part, "score": f"{pr.score:g}", "points": f"{pr.points:g}", "verdict": verdict})
    return lines


def _gradescope_users(root: Path) -> list[dict[str, Any]] | None:
    """The users Gradescope says submitted (several in a group submission), from
    ``submission_metadata.json``; None without that file (a local run)."""
    from ..core.inputs import read_text

    path = root / "submission_metadata.json"
    if not path.is_file():
        return None
    doc = json.loads(read_text(path, MAX_METADATA_BYTES, "submission metadata"))
    users = doc.get("users") if isinstance(doc, dict) else None
    return [u for u in users if isinstance(u, dict)] if isinstance(users, list) else []


def _roster_student(user: dict[str, Any], roster: Any) -> str | None:
    """The roster's student for one Gradescope user: by email, then sid, then a name only one entry has."""
    given = {"email": user.get("email"), "sis_id": user.get("sid")}
    for column, value in given.items():
        if value:
            entry = roster.by(column, str(value))
            if entry is not None:
                return entry.student
    # A name is typed by a person and two people may share one: it places a user only on an entry
    # whose own email and sis_id (where both sides have one) did not already say it is someone else.
    found = [e for e in roster.by_name(str(user.get("name") or ""))
             if not any(value and getattr(e, column) for column, value in given.items())]
    return found[0].student if len(found) == 1 else None


def _members(users: list[dict[str, Any]], roster: Any) -> tuple[list[Member], list[str]]:
    """Every user of the submission as a roster student; one the roster does not know, or two users
    that match the same student, are left ungraded (so the submission scores 0), with why."""
    members = [Member(_("Gradescope user %(user)s") % {"user": u.get("email") or u.get("name") or u.get("id")},
                      _roster_student(u, roster)) for u in users]
    problems = [] if users else [_("Not graded: %(via)s; ask your instructor.") % {
        "via": _("the submitter is not in the roster")}]
    kept = []
    for member in members:
        twins = [m.shown for m in members if member.student is not None and m.student == member.student]
        if member.student is None:
            problems.append(_("Not graded: %(via)s; ask your instructor.") % {
                "via": _("%(user)s is not in the roster") % {"user": member.shown}})
        elif len(twins) > 1:
            problems.append(_("Not graded: %(via)s; ask your instructor.") % {
                "via": _("%(users)s all match %(student)s in the roster") % {
                    "users": ", ".join(twins), "student": repr(member.student)}})
            member = Member(member.shown, None)
        kept.append(member)
    return kept, problems


def _assign(subs: list[Any], members: Sequence[Member]) -> tuple[list[Any], list[str]]:
    """Each file to the member it names. The files that name no member go to the one member no
    file names (a typo, or a classmate's file uploaded as one's own: graded on the uploader's own
    variant, flagged); where several members lack a file nothing says whose they are, so they are
    not graded."""
    students = [m.student for m in members if m.student is not None]
    lacking = [m for m in members if m.student is not None and m.student not in {s.student for s in subs}]
    kept, problems = [], []
    for sub in subs:
        if sub.student in students:
            kept.append(sub)
        elif len(lacking) == 1:
            problems.append(_("%(file)s names student %(named)s, but %(via)s submitted it: it is graded against "
                              "the variant of %(student)s.") % {"file": Path(sub.source).name, "named": repr(sub.student),
                                                              "via": lacking[0].shown, "student": repr(lacking[0].student)})
            sub.student = lacking[0].student
            kept.append(sub)
        else:
            problems.append(_("%(file)s names student %(named)s, who is not one of this submission's students; "
                              "it was not graded.") % {"file": Path(sub.source).name, "named": repr(sub.student)})
    return kept, problems


def run(source: Path, root: Path) -> dict[str, Any]:
    """Grade ``root/submission`` with the bundle in ``source``; write and return results.json."""
    from ..key import load_key

    cfg = json.loads((source / "qkvquiz-autograder.json").read_text(encoding="utf-8"))
    key = load_key(source / "key.json")
    with entered(None, key.lang):  # what the student reads, in the worksheet's language
        return _run(source, root, cfg, key)


def _run(source: Path, root: Path, cfg: dict[str, Any], key: Any) -> dict[str, Any]:
    from ..core.folders import walk_json_files
    from ..core.inputs import InputError
    from ..grade.grader import grade, read_submissions
    from ..roster import read_roster_entries

    roster = read_roster_entries(source / "roster.csv") if cfg.get("roster") else None
    problems: list[str] = []
    try:
        files, _skipped = walk_json_files(root / "submission")
    except InputError as exc:
        files, problems = [], [str(exc)]
    subs, unreadable = read_submissions(files)
    problems += [_("%(file)s: %(message)s") % {"file": Path(p.source).name, "message": p.message} for p in unreadable]
    users = _gradescope_users(root) if roster is not None else None
    members: list[Member] | None = None  # None: the files' own ids decide
    if users is not None:  # the students are whom Gradescope names, whatever the files claim
        members, found = _members(users, roster)
        subs, more = _assign(subs, members)
        problems += found + more
    elif roster is not None:  # no submission_metadata.json: a local run
        problems.append(_("No submission_metadata.json: graded as the student the file names."))
    if not files:
        problems.append(_("No .json file was found in the submission: upload your filled-in submission.json."))
    report = grade(key, subs)
    if members is not None and len(members) > 1:  # the group rule of `qkvquiz grade` (grade.attribution)
        from ..grade.attribution import group_credit

        group_credit(key, report, _("Gradescope group submission"),
                     [m.student for m in members if m.student is not None], [(s.source, s.student) for s in subs])
    problems += [_("%(file)s: %(message)s") % {"file": Path(p.source).name, "message": p.message} for p in report.problems]
    if members is None:
        members = [Member(r.student, r.student) for r in report.results]
        if roster is None:  # the bundle trusts file ids: say whose variant that made it
            problems += [_("Graded as student %(student)s, the id written in the file.") % {"student": repr(m.student)}
                         for m in members]
    doc = submission_document(report, members, cfg, problems)
    _write_results(root, doc)
    return doc


def _write_results(root: Path, doc: dict[str, Any]) -> None:
    # Gradescope reads the file once the script ends; written whole or not at all.
    from ..files import write_atomic

    write_atomic(root / "results" / "results.json", json.dumps(doc, ensure_ascii=False, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(os.environ.get(ROOT_ENV) or "/autograder")
    source = Path(args[0]) if args else root / "source"
    try:
        run(source, root)
    except Exception as exc:  # noqa: BLE001 - the student must get a results.json whatever happened
        _write_results(root, {"score": 0, "output": f"The autograder failed: {type(exc).__name__}: {exc}",
                              "tests": []})
        print(f"qkvquiz autograder: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover - the bundle's entry point
    raise SystemExit(main())
