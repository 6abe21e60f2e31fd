"""``qkvquiz export …``: grades, feedback, a Gradescope autograder and question banks for an LMS.

Thin commands over :mod:`qkvquiz.exchange`; every write is in one small function per command
(``_write_*``), so that the output-set module can take them over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ._common import (
    HELP_MARKUP,
    LangOpt,
    chosen_lang,
    console,
    err,
    fail,
    missing_font,
    renamed,
    resolve_spec,
    safe_text,
)

# What a command needs is imported inside it, so that `qkvquiz --help` stays quick.

export_app = typer.Typer(
    help=(
        "Hand work to an LMS: grades in its import format, feedback files, a Gradescope autograder, "
        "or the problems as a question bank. `--to` names the target wherever there is a choice.\n\n"
        "Typical loop: `qkvquiz grade week3/key.json submissions.zip --roster roster.csv --out week3/grades`, "
        "then `qkvquiz export grades week3/grades --to canvas --roster roster.csv --out canvas-grades.csv` "
        "and Grades → Import in Canvas."
    ),
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)

RosterOpt = Annotated[Path | None, typer.Option(
    help="Roster CSV: `student` (the qkvquiz id) and any of `name`, `email`, `canvas_id`, `moodle_id`, "
         "`sis_id`, `sis_login`, `section`. Names and LMS ids in the export come from here.")]


def _roster(path: Path | None):
    if path is None:
        return None
    from ..roster import read_roster_entries

    try:
        return read_roster_entries(path)
    except ValueError as exc:  # InputError is a ValueError
        fail(str(exc))


def _results(path: Path):
    from ..core.inputs import InputError
    from ..exchange.results import load_results

    try:
        return load_results(path)
    except InputError as exc:
        fail(str(exc))


def _write_grades(out: Path, text: str) -> None:
    # Grades and comments of named students: readable by the instructor only.
    from ..files import write_atomic

    write_atomic(out, text, private=True)


@export_app.command("grades")
def grades(
    results: Annotated[Path, typer.Argument(help="The folder `qkvquiz grade --out` wrote (or its results.json).")],
    to: Annotated[str, typer.Option(
        "--to", help="canvas | moodle-worksheet | moodle-gradebook | blackboard | plain")] = "plain",
    out: Annotated[Path, typer.Option("--out", "-o", help="The CSV file to write.")] = Path("grades.csv"),
    roster: RosterOpt = None,
    scale: Annotated[str, typer.Option(help="points (out of the key's total, or --out-of) | percent")] = "points",
    out_of: Annotated[float | None, typer.Option(
        help="Rescale points to the LMS assignment's points (e.g. 100).")] = None,
    decimals: Annotated[int, typer.Option(help="Decimal places of each grade (0 to 6).")] = 2,
    rounding: Annotated[str, typer.Option(help="half-up | half-even | up | down")] = "half-up",
    missing: Annotated[str, typer.Option(
        help="A student of the key without a graded submission: zero (as results.csv) or blank "
             "(importers then leave the LMS's grade alone).")] = "zero",
    title: Annotated[str, typer.Option(help="The assignment's name in the LMS (default: the key's title).")] = "",
    assignment_id: Annotated[str, typer.Option(
        help="Canvas assignment id or Blackboard column id: the column then updates that assignment "
             "(`Title (id)`, `Title [Total Pts: N Score] |id`). Without it, Canvas updates the assignment whose "
             "title is exactly the column's (else makes a new one) and Blackboard makes a new column.")] = "",
    points_possible: Annotated[bool, typer.Option(
        help="Canvas: add the `Points Possible` row.")] = False,
    worksheet: Annotated[Path | None, typer.Option(
        help="moodle-worksheet: the grading worksheet Moodle gave you (Download grading worksheet); its "
             "Grade and Feedback comments are filled in for the students graded; every other line is kept byte "
             "for byte.")] = None,
) -> None:
    """Write grades in the import format of an LMS.

    Examples:

    `qkvquiz export grades week3/grades --to canvas --roster roster.csv --assignment-id 4411 --points-possible`

    `qkvquiz export grades week3/grades --to moodle-worksheet --roster roster.csv --worksheet Grades-week3.csv --out upload.csv`

    `qkvquiz export grades week3/grades --to blackboard --roster roster.csv --scale percent --decimals 1`

    Students left out are listed with why (no LMS id of the kind the importer reads in the roster, or no row
    in the worksheet).
    """
    from ..core.inputs import InputError
    from ..exchange.gradebook import GradeOptions, export_grades

    opts = GradeOptions(to, scale, decimals, rounding, out_of, missing, title, assignment_id, points_possible)
    try:
        opts.check()
    except ValueError as exc:
        fail(str(exc))
    loaded = _results(results)
    try:
        text, unmatched = export_grades(loaded, _roster(roster), opts, worksheet=None if worksheet is None else str(worksheet))
    except (InputError, ValueError) as exc:
        fail(str(exc))
    try:
        _write_grades(out, text)
    except OSError as exc:
        fail(str(exc))  # OutputError: names the path
    reasons: dict[str, list[str]] = {}
    for left in unmatched:
        reasons.setdefault(left.reason, []).append(left.student)
    for reason, students in reasons.items():
        shown = ", ".join(safe_text(s) for s in students[:10]) + (" …" if len(students) > 10 else "")
        err.print(f"[yellow]not matched by the {to} importer[/] ({len(students)}: {reason}): {shown}", highlight=False)
    console.print(f"Wrote {safe_text(str(out))} ({len(loaded.students)} students, {to})", highlight=False)


QUESTION_TARGETS = "moodle,qti,canvas"  # what `export questions` writes unless --to says


def _write_bank(out: Path, files: dict[str, bytes | str]) -> list[Path]:
    # A bank holds every answer: readable by the instructor only, like key.json. Its files are
    # one output set (all new or all old, see qkvquiz.core.outputs).
    from ..core.outputs import write_set

    with write_set(out, dict.fromkeys(files, True), anchor=next(iter(files))) as staged:
        return [staged.write(name, data) for name, data in files.items()]


@export_app.command("questions")
def questions(
    spec: Annotated[str, typer.Argument(help="Worksheet spec (YAML file), or a bundled spec name such as masking.")],
    variants: Annotated[int, typer.Option("--variants", "-n", help="Pre-solved variants per item (1 to 1000).")] = 20,
    seed: Annotated[str, typer.Option(help="Seed of the variants: the same seed gives the same bank.")] = "bank",
    to: Annotated[str, typer.Option(
        "--to", help="moodle (Moodle XML, cloze), qti (QTI 2.1 package) and/or canvas (Canvas' QTI .zip), "
                     "comma-separated.")] = QUESTION_TARGETS,
    out: Annotated[Path, typer.Option(
        "--out", "-o", help="Folder for questions-moodle.xml, questions-qti21.zip, questions-canvas-qti.zip.")] = Path("bank"),
    lang: LangOpt = None,
    formats: Annotated[str | None, typer.Option("--format", hidden=True, help="The old name of --to.")] = None,
) -> None:
    """Write the spec's problems as a question bank that an LMS grades on its own.

    Each variant of an item is one question with every asked part, one box per entry; the right
    value is the key's and the tolerance the spec's (as an absolute band per entry). −∞ entries
    accept `-inf`, `−∞` or `-∞`. Import `questions-moodle.xml` under Question bank → Import →
    Moodle XML (one category per item: draw a random question from it in a quiz), the Canvas
    zip under Import Course Content → QTI .zip file (a quiz with one question group per item,
    each drawing 1 variant), or the QTI 2.1 zip in any QTI 2.1 player. The LMS then grades each box right or wrong: no carried
    credit, no diagnosis of mistakes (see the comparison in docs/lms.md).

    Example: `qkvquiz export questions masking --to moodle,canvas --variants 30 --seed fall26 --out bank`
    """
    from ..core.inputs import InputError
    from ..exchange.questions import export_questions
    from ..spec import SpecError, load_spec
    from ..worksheet import GenerationError

    to = renamed("--to", to, QUESTION_TARGETS, "--format", formats)
    lang = chosen_lang(lang)
    try:
        parsed = load_spec(resolve_spec(spec))
        _ws, files = export_questions(parsed, variants, seed, [f.strip() for f in to.split(",") if f.strip()],
                                      lang=lang)
    except (SpecError, InputError, GenerationError, ValueError) as exc:
        fail(str(exc))
    try:
        written = _write_bank(out, files)
    except OSError as exc:
        fail(str(exc))  # OutputError: names the path
    console.print(f"Wrote {', '.join(safe_text(str(p)) for p in written)} ({variants} variants of "
                  f"{len(parsed.items)} items)", highlight=False)


# What `export feedback` owns in its folder; each page holds a student's expected values, so all
# of it is readable by the instructor only.
FEEDBACK_OWNED = {"html": True, "pdf": True, "moodle-feedback.zip": True}
FEEDBACK_TARGETS = ("html", "moodle")  # `export feedback --to`: the pages, or the pages and Moodle's zip


def _write_feedback(out: Path, files: dict[str, bytes | str], pdf_pages: list | None) -> list[Path]:
    """The pages (and the zip, and with ``pdf_pages`` their PDFs) as one output set: an error or
    an interruption midway leaves the previous export as it was (see qkvquiz.core.outputs)."""
    from ..core.outputs import write_set
    from ..exchange.feedback_export import render_pdfs

    with write_set(out, FEEDBACK_OWNED, anchor="html") as staged:
        written = [staged.write(name, data) for name, data in files.items()]
        if pdf_pages is not None:
            render_pdfs(pdf_pages, staged.path("pdf"))
    return written


@export_app.command("feedback")
def feedback(
    results: Annotated[Path, typer.Argument(help="The folder `qkvquiz grade --out` wrote (with feedback/).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for html/STUDENT.html and the zip.")] = Path("feedback-export"),
    roster: RosterOpt = None,
    to: Annotated[str, typer.Option(
        "--to", help="html (a page per student) or moodle (the pages and moodle-feedback.zip for Moodle's "
                     "\"Upload multiple feedback files in a zip\"; needs `moodle_id` in the roster).")] = "html",
    pdf: Annotated[bool, typer.Option(help="Also print pdf/STUDENT.pdf (needs WeasyPrint's libraries).")] = False,
    moodle_zip: Annotated[bool | None, typer.Option(
        "--moodle-zip/--no-moodle-zip", hidden=True, help="The old spelling of --to moodle.")] = None,
    allow_missing_fonts: Annotated[bool, typer.Option(
        "--allow-missing-fonts", help="With --pdf, write PDFs even where the pages hold Chinese, Japanese or "
        "Korean text and no installed font has its glyphs (they print as empty boxes); without it the "
        "export stops before writing anything and names the font package to install.")] = False,
) -> None:
    """Write each student's feedback as an HTML page (and PDF), and Moodle's feedback zip.

    Example: `qkvquiz export feedback week3/grades --roster roster.csv --to moodle --out week3/return`

    In Moodle: the assignment's "View all submissions" → "Grading action" → "Upload multiple
    feedback files in a zip" (the feedback-files plugin must be on). Each student's page lands
    as their feedback file.
    """
    from ..core.outputs import OutputError, claim

    to = renamed("--to", to, "html", "--moodle-zip", "moodle" if moodle_zip else None)
    if to not in FEEDBACK_TARGETS:
        fail(f"--to must be one of {', '.join(FEEDBACK_TARGETS)}, not {safe_text(to)}")
    # The output folder is this run's before the pages are made: a second export into it is
    # refused at once, not this one after rendering a class's pages.
    try:
        with claim(out):
            _export_feedback(results, out, roster, to == "moodle", pdf, allow_missing_fonts)
    except OutputError as exc:  # SetBusy too: names the folder
        fail(str(exc))


def _export_feedback(results: Path, out: Path, roster: Path | None, moodle_zip: bool, pdf: bool,
                     allow_missing_fonts: bool) -> None:
    from ..core.inputs import InputError
    from ..exchange.feedback_export import (
        check_results_folder,
        feedback_pages,
        moodle_feedback_zip,
    )

    loaded = _results(results)
    entries = _roster(roster)
    if moodle_zip and entries is None:
        fail("--to moodle needs --roster with a moodle_id column (Moodle's participant ids)")
    try:
        check_results_folder(loaded)
        pages, missing = feedback_pages(loaded, entries)  # in the language the grading wrote
    except InputError as exc:
        fail(str(exc))
    if pdf:  # as generate does: said (or stopped at) before anything is written
        from ..render.fonts import cjk_font_problem

        problem = cjk_font_problem([p.html for p in pages], lang=loaded.lang,
                                   instead="export again, or leave out --pdf")
        if problem is not None:
            missing_font(problem, allow_missing_fonts)
    files: dict[str, bytes | str] = {f"html/{p.name}.html": p.html for p in pages}
    left_out: list[str] = []
    if moodle_zip:
        try:
            data, left_out = moodle_feedback_zip(pages, entries)
        except ValueError as exc:
            fail(f"--to moodle: {exc}")
        files["moodle-feedback.zip"] = data
    from ..render.pdf import PdfUnavailable

    try:
        _write_feedback(out, files, pages if pdf else None)
    except PdfUnavailable as exc:
        fail(str(exc))
    except OSError as exc:
        fail(str(exc))
    for what, students in (("no feedback file", missing), ("no moodle_id in the roster, not in the zip", left_out)):
        if students:
            err.print(f"[yellow]{what}:[/] {', '.join(safe_text(s) for s in students[:10])}"
                      f"{' …' if len(students) > 10 else ''}", highlight=False)
    console.print(f"Wrote {len(pages)} feedback page(s) to {safe_text(str(out / 'html'))}"
                  + (f" and {safe_text(str(out / 'moodle-feedback.zip'))}" if moodle_zip else "")
                  + (f" and PDFs in {safe_text(str(out / 'pdf'))}" if pdf else ""), highlight=False)


def _write_bundle(out: Path, data: bytes) -> None:
    # The bundle holds the key: readable by the instructor only.
    from ..files import write_atomic

    write_atomic(out, data, private=True)


@export_app.command("gradescope")
def gradescope(
    key: Annotated[Path, typer.Argument(help="The key.json written by `generate`.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The autograder zip to upload to Gradescope.")] = Path("autograder.zip"),
    roster: Annotated[Path | None, typer.Option(
        help="Roster CSV with `email` (or `sis_id`, `name`): each upload is graded as whoever Gradescope says "
             "submitted it, on that student's own variant; a file that names another student is flagged. "
             "Required unless --trust-file-ids.")] = None,
    trust_file_ids: Annotated[bool, typer.Option(
        "--trust-file-ids",
        help="Grade without a roster: the student id written in the uploaded file decides whose variant is "
             "graded, so a classmate's file uploaded unchanged scores as its owner. Fine for practice, "
             "not for marks.")] = False,
    show: Annotated[str | None, typer.Option(
        "--show",
        help="What the always-visible Summary tells a student before the per-part tests show (see "
             "--visibility): after-due (the default) says whether the upload was read and which parts are "
             "missing or unreadable, with no score; total adds the total; per-part gives each part's score and "
             "verdict. Per-part feedback teaches, but a part's score moves with each entry within tolerance, so "
             "with unlimited resubmissions a student can search entry by entry; the total moves too, one entry "
             "per upload; after-due shows everything once the due date passes.")] = None,
    visibility: Annotated[str, typer.Option(
        help="When students see each part's test (its score and feedback with the expected values), and "
             "with --show after-due the scores: after_due_date | after_published | hidden | visible "
             "(visible shows them at once, so it goes with --show per-part, which it implies).")] = "after_due_date",
) -> None:
    """Write a Gradescope autograder bundle that grades each upload with this key.

    Upload the zip as a Programming Assignment's autograder ("Zip file upload"); students
    upload their submission.json. With --roster, each upload is graded as the student
    Gradescope says submitted it; without one the export is refused unless --trust-file-ids
    (practice only: a copied file would score as its owner). Each asked part is one test
    (score, max score, feedback with the expected values), shown after the due date by default; a
    visible "Summary" test says what --show allows before then. The bundle
    carries this exact qkvquiz (vendored source) and the ranges of its few dependencies
    (requirements.txt), which Gradescope installs while building the image: choose the
    Ubuntu 22.04 base image or a newer one (Python 3.10+; setup.sh stops on an older one).

    Test it locally: unzip into `ag/source`, put the hand-in in `ag/submission/`, run
    `QKVQUIZ_AUTOGRADER_ROOT=ag bash ag/source/run_autograder`, read `ag/results/results.json`.
    """
    from ..core.inputs import MAX_KEY_BYTES, MAX_ROSTER_BYTES, InputError, read_text
    from ..exchange.gradescope import BundleOptions, build_bundle, resolve_show
    from ..key import KeyFileError, load_key

    if roster is None and not trust_file_ids:
        fail("no --roster: the autograder could only grade each upload as the student id written in its file, "
              "so a classmate's file uploaded unchanged would score as its owner, with nothing flagged.\n"
              "Give --roster roster.csv (a `student` column and the `email` Gradescope knows each student by) "
              "to grade each upload as the student Gradescope says submitted it, on their own variant; "
              "or --trust-file-ids for practice that does not count toward marks.")
    try:
        load_key(key)  # refuse a file that is no key before bundling it
        key_text = read_text(key, MAX_KEY_BYTES, "key")
        roster_text = None
        if roster is not None:
            _roster(roster)  # checked here, read again inside Gradescope
            roster_text = read_text(roster, MAX_ROSTER_BYTES, "roster")
        data = build_bundle(key_text, roster_csv=roster_text,
                            opts=BundleOptions(visibility=visibility, show=resolve_show(show, visibility),
                                               trust_file_ids=trust_file_ids))
    except (KeyFileError, InputError, ValueError) as exc:
        fail(str(exc))
    try:
        _write_bundle(out, data)
    except OSError as exc:
        fail(str(exc))  # OutputError: names the path
    console.print(f"Wrote {safe_text(str(out))} ({len(data):,} bytes)", highlight=False)
    if roster is None:
        err.print("[yellow]note:[/] no roster: each upload is graded as the student id its file names; "
                  "a copied file scores as its owner (practice only).", highlight=False)
