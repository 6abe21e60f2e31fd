"""``qkvquiz grade`` and ``qkvquiz audit``: a class's submissions scored, a hand-written key checked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from ._common import (
    SUMMARY_TABLE_MAX,
    BackendOpt,
    LangOpt,
    chosen_lang,
    console,
    err,
    exit_on_terminate,
    fail,
    progress_bar,
    renamed,
    safe_text,
    ticker,
)

if TYPE_CHECKING:
    pass



def _submission_files(paths: list[Path]) -> list[Path]:
    """The files to grade: files as given, and every ``*.json`` below a folder.

    Skipped in folders: the key and reports, hidden files and folders (``.DS_Store``,
    ``__MACOSX/._x.json`` from unpacked archives); a file named twice is graded once. Folders
    are walked by :func:`qkvquiz.core.folders.walk_json_files`: links to folders and links out of
    the folder are not followed (each is noted), and a folder named on the command line must
    not itself be a link (it could lead anywhere, ``/`` included).
    """
    from ..core.folders import walk_json_files
    from ..core.inputs import InputError

    files: list[Path] = []
    for p in paths:
        if not p.exists() and not p.is_symlink():
            fail(f"{p} does not exist (nothing was graded and no report was written)")
        if p.is_symlink() and p.is_dir():
            fail(f"{p} is a link to the folder {os.path.realpath(p)}; links to folders are not followed: "
                  "name the folder itself (nothing was graded)")
        if p.is_dir():
            try:
                found, skipped = walk_json_files(p, frozenset({"key.json", "results.json"}))
            except InputError as exc:
                fail(f"{exc} (nothing was graded)")
            files.extend(found)
            for s in skipped:
                err.print(f"[yellow]skipped:[/] {safe_text(str(s.path))}: {safe_text(s.reason)}", highlight=False)
        else:
            files.append(p)
    unique: dict[str, Path] = {}
    folders: dict[str, str] = {}  # a folder's real path, found once for all its files
    for f in files:
        if os.path.islink(f):
            real = os.path.realpath(f)  # never raises on a link loop, unlike Path.resolve
        else:  # a file that is not a link is where its folder really is
            parent, name = os.path.split(os.fspath(f))
            if parent not in folders:
                folders[parent] = os.path.realpath(parent or ".")
            real = os.path.join(folders[parent], name)
        unique.setdefault(real, f)
    return list(unique.values())


def grade(
    key: Annotated[Path, typer.Argument(help="The key.json written by `generate`.")],
    submissions: Annotated[list[Path], typer.Argument(help="Submission files, or folders searched for *.json.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the results, item analysis and feedback.")],
    feedback: Annotated[bool, typer.Option(help="Write feedback/STUDENT.md, one Markdown file per student.")] = True,
    backend: BackendOpt = "numpy",
    duplicates: Annotated[str, typer.Option(
        help="Among several files for one student, after the variant matching the key and filled before blank: "
             "grade the latest saved (latest), the first path (first), or none and report them (error).",
    )] = "latest",
    roster: Annotated[Optional[Path], typer.Option(
        help="Roster CSV with the qkvquiz `student` id and the LMS's ids (`canvas_id`, `moodle_id`, `sis_id`, "
             "`email`, `name`): files of an LMS download are then matched to students by who uploaded them.",
    )] = None,
    source: Annotated[str, typer.Option(
        "--from",
        help="Whose bulk download SUBMISSIONS is: auto (read the file names), canvas, moodle, gradescope, "
             "or none (each file's own \"student\" decides).",
    )] = "auto",
    groups: Annotated[Optional[Path], typer.Option(
        help="Moodle team assignments: Moodle's list of group members (a CSV with the group's name and the "
             "member's email, username, ID number or full name), when the roster has no `group` column. Each "
             "team's folder then counts for every member of its group.",
    )] = None,
    lang: LangOpt = None,
    lms: Annotated[Optional[str], typer.Option("--lms", hidden=True, help="The old name of --from.")] = None,
) -> None:
    """Grade students' submission files against a key.

    SUBMISSIONS may also be an LMS's bulk download as it comes, a `.zip` or its unpacked folder:
    Canvas "Download Submissions", Moodle "Download all submissions" (flat or in folders), or
    Gradescope's "Export Submissions". With `--roster`, each file goes to the student who
    uploaded it (by LMS id, else by name); files that match no one are listed by name. The
    LMS's "late" mark becomes the flag `late`.

    Folders are searched (recursively) for `*.json` files. Writes `results.csv` (one row per
    student of the key: each part's score and the total; students without a submission score
    0), `results.json` (every entry: expected, given, verdict, diagnosis), `item-analysis.md`/`.csv`
    (per part: mean score, share correct, the most common mistakes) and `feedback/<student>.md`
    (one Markdown file per student, readable on its own). A file that cannot be read is reported
    by name and the rest are still graded; the exit status is then 1. Tolerance and credit come
    from the spec (stored in the key).
    """
    from ..core.collector import collector_paused

    # `--from canvas` as `export … --to canvas`: which LMS, named by the direction the work goes.
    source = renamed("--from", source, "auto", "--lms", lms)
    with collector_paused():  # no cycles among a class's answers and results: nothing to collect
        _grade_command(key, submissions, out, feedback, backend, duplicates, roster, source, lang, groups)


def _grade_command(key: Path, submissions: list[Path], out: Path, feedback: bool, backend: str, duplicates: str,
                   roster: Path | None, lms: str, lang: str | None, groups: Path | None = None) -> None:
    from ..core.i18n import entered
    from ..core.outputs import OutputError, claim
    from ..grade.choose import DUPLICATES
    from ..key import KeyFileError, load_key

    lang = chosen_lang(lang)
    if duplicates not in DUPLICATES:
        fail(f"--duplicates must be one of {', '.join(DUPLICATES)}, not {safe_text(duplicates)}")
    try:
        loaded = load_key(key)  # finishes the switch of a `generate` killed midway (outputs.settle)
    except KeyFileError as exc:
        fail(str(exc))
    # The output folder is this run's from before the grading starts: a second run into it is
    # refused at once, never this one after all its work.
    try:  # the command's language entered once (--lang, else the key's): every step below follows it
        with claim(out), entered(lang, loaded.lang):
            _grade_claimed(loaded, submissions, out, feedback, backend, duplicates, roster, lms, groups)
    except OutputError as exc:  # SetBusy too: names the folder
        fail(str(exc))


def _grade_claimed(loaded, submissions: list[Path], out: Path, feedback: bool, backend: str, duplicates: str,
                   roster: Path | None, lms: str, groups: Path | None) -> None:
    from ..core.outputs import OutputError
    from ..engine.backend import BackendUnavailable
    from ..grade.grader import grade_files
    from ..grade.report import write_reports

    collected = _collect_download(submissions, roster, lms, groups)
    files = [] if collected is not None else _submission_files(submissions)
    if collected is None and not files:
        fail("no submission files found")

    def note(text: str) -> None:  # where the array work ran, when a GPU was asked for and the CPU kept it
        err.print(f"[yellow]note:[/] {escape(text)}", highlight=False)

    with exit_on_terminate():
        # No refresh thread: the feedback files of a large class are written by a forked worker.
        with progress_bar(auto_refresh=False) as bar:
            try:
                if collected is not None:
                    from ..exchange.collect import grade_collected

                    report = grade_collected(loaded, collected, xp=backend, duplicates=duplicates, notes=note)
                else:
                    task = bar.add_task("grading", total=len(files))
                    report = grade_files(loaded, files, progress=ticker(bar, task), xp=backend, duplicates=duplicates,
                                         notes=note)
            except BackendUnavailable as exc:
                fail(str(exc))
            writing = bar.add_task("writing feedback", total=len(report.results) if feedback else 0)
            try:
                paths = write_reports(report, out, feedback=feedback, progress=ticker(bar, writing))
            except OutputError as exc:  # names the path; another run into `out` is refused here
                fail(str(exc))
            except OSError as exc:
                fail(f"cannot write the reports to {out}: {exc.strerror or exc}")
    if feedback:
        paths.append(out / "feedback")

    if len(report.results) <= SUMMARY_TABLE_MAX:
        from rich.table import Table

        table = Table(title=escape(f"{loaded.title}: {len(report.results)} graded"))
        for col in ("student", "score", "of", "unreadable", "not answered"):
            table.add_column(col)
        for r in sorted(report.results, key=lambda r: r.student):
            # Parts that could not be read, and parts graded with some boxes that could not be.
            unreadable = sum(p.verdict == "format" or p.unread_boxes > 0 for p in r.parts)
            missing = sum(p.verdict == "missing" for p in r.parts)
            table.add_row(safe_text(r.student), f"{r.score:.2f}", f"{r.total:g}", str(unreadable or ""), str(missing or ""))
        console.print(table)
    else:  # a row per student would scroll past for minutes: the scores are in results.csv
        import numpy as np

        scores = np.array([r.score for r in report.results])
        console.print(
            f"{escape(loaded.title)}: {len(scores)} graded; score of {loaded.points:g}: mean {scores.mean():.2f}, "
            f"median {np.median(scores):.2f}, lowest {scores.min():.2f}, highest {scores.max():.2f} "
            f"(one row per student in results.csv)", highlight=False)
    _print_grade_notes(report)
    if report.absent:
        shown = ", ".join(safe_text(s) for s in report.absent[:10]) + (" …" if len(report.absent) > 10 else "")
        err.print(f"[yellow]no submission[/] from {len(report.absent)} student(s) of the key (0 points in "
                  f"results.csv): {shown}", highlight=False)
    console.print(f"Wrote {', '.join(safe_text(str(p)) for p in paths)}", highlight=False)
    if report.problems:
        raise typer.Exit(1)


def _collect_download(submissions: list[Path], roster: Path | None, lms: str, groups: Path | None = None):
    """An LMS download's hand-ins (``exchange.collect``) when a zip, ``--roster`` or ``--from`` asks for
    it; None for plain files and folders, which are graded as before."""
    from ..core.inputs import InputError
    from ..exchange.collect import LMS_CHOICES, collect, is_zip

    if lms not in LMS_CHOICES:
        fail(f"--from must be one of {', '.join(LMS_CHOICES)}, not {safe_text(lms)}")
    if groups is not None and roster is None:
        fail("--groups needs --roster: the group list names students by their LMS details, which the roster "
             "ties to qkvquiz ids")
    zipped = [p for p in submissions if p.is_file() and is_zip(p)]
    if roster is None and not zipped and lms in ("auto", "none"):
        return None
    for p in submissions:
        if not p.exists() and not p.is_symlink():
            fail(f"{p} does not exist (nothing was graded and no report was written)")
    entries = None
    if roster is not None:
        from ..roster import read_roster_entries

        try:
            entries = read_roster_entries(roster)
        except ValueError as exc:  # InputError is a ValueError
            fail(str(exc))
        if groups is not None:
            from ..roster import with_moodle_groups

            try:
                entries, unmatched = with_moodle_groups(entries, groups)
            except ValueError as exc:
                fail(str(exc))
            for line in unmatched:
                err.print(f"[yellow]note:[/] {safe_text(line)}", highlight=False)

    try:
        collected = collect(submissions, entries, lms)
    except InputError as exc:
        fail(f"{exc} (nothing was graded)")
    for source, kind in collected.lms.items():
        err.print(f"[dim]{safe_text(source)}: {kind.title() + ' download' if kind else 'no LMS naming found'}[/]",
                  highlight=False)
    if not collected.handins and not collected.problems:
        fail("no submission files found")
    return collected


def _print_grade_notes(report) -> None:
    """Per student: flags, notes, and every file that claimed them when there were several; then
    the files not graded. Every name is shown with control characters escaped."""
    for r in sorted(report.results, key=lambda r: r.student):
        for flag in r.flags:
            err.print(f"[red]flag:[/] {safe_text(r.student)}: {safe_text(flag)}", highlight=False)
        for note in r.notes:
            err.print(f"[yellow]note:[/] {safe_text(r.source)}: {safe_text(note)}", highlight=False)
        if len(r.candidates) > 1:
            err.print(f"[yellow]{len(r.candidates)} files[/] claim {safe_text(r.student)}:", highlight=False)
            for c in r.candidates:
                err.print(f"  {'→' if c.graded else ' '} {safe_text(c.source)}: {safe_text(c.why)}", highlight=False)
    for problem in report.problems:
        err.print(f"[yellow]not graded:[/] {safe_text(problem.source)}: {safe_text(problem.message)}", highlight=False)
    for skipped in report.skipped:
        err.print(f"[dim]skipped:[/] {safe_text(skipped.source)}: {safe_text(skipped.message)}", highlight=False)


def audit(
    file: Annotated[Path, typer.Argument(help="A spec whose items fix every given and add `claimed: {step: answer}`.")],
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Also write the audit as Markdown to this file.")] = None,
    lang: LangOpt = None,
) -> None:
    """Check a hand-written key: say which claimed answers are wrong, with the right values and,
    where a known mistake or a wrong earlier claim explains one, which.

    Exits with status 1 when a claimed answer is wrong or cannot be read, 2 when the file cannot be used.
    """
    from rich.markdown import Markdown

    from ..core.outputs import OutputError, write_file
    from ..grade.audit import audit_file, audit_markdown
    from ..spec import SpecError
    from ..worksheet import GenerationError

    lang = chosen_lang(lang)
    try:
        report = audit_file(file, lang=lang)
    except (SpecError, GenerationError) as exc:
        fail(str(exc))
    text = audit_markdown(report)
    if out is not None:
        try:
            with exit_on_terminate():  # SIGTERM removes the temporary file too
                write_file(out, text)  # a set of one file: the old one or the new one, nothing between
        except OutputError as exc:
            fail(str(exc))
    # Wrapped at the width, between words (the console's soft wrap otherwise leaves long lines to
    # the terminal, and Markdown's list items are cut at its edge).
    console.print(Markdown(text), soft_wrap=False)
    if report.wrong:
        raise typer.Exit(1)
