"""The ``qkvquiz`` command line: a thin shell over the library (see ``qkvquiz/__init__.py``)."""

from __future__ import annotations

import gc
import json
import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape
from typer.core import TyperCommand

from ..core.resources import bank_dir, schemas_dir
from ._common import _fail, _shown, console, err, resolve_spec

if TYPE_CHECKING:
    from ..core.secret import Secret
    from ..spec import WorksheetSpec

# What a command needs is imported inside it: `qkvquiz --help` loads neither NumPy nor a family
# (the help text is built from the constants below, each checked against its source by a test).
# rich.console and rich.markup cost nothing extra: Typer's help is drawn with them.

#: The backends of qkvquiz.engine.backend.BACKENDS, named in the help of --backend.
BACKEND_NAMES = ("numpy", "cupy")
#: qkvquiz.core.secret.SECRET_ENV, named in the help of --secret-file.
SECRET_ENV = "QKVQUIZ_SECRET"

app = typer.Typer(
    help=(
        "Write, render and grade exercises on transformer attention math.\n\n"
        "Typical term: `qkvquiz generate SPEC --students 30 --out week3` writes one worksheet and a "
        "blank submission.json per student plus key.json/key.md for you; students fill in their "
        "submission.json; `qkvquiz grade week3/key.json week3/submissions --out week3/grades` scores the folder of their files."
    ),
    no_args_is_help=True,
    rich_markup_mode="markdown",
    pretty_exceptions_enable=False,
)

#: Largest class whose scores `grade` prints as a table; a larger one gets a one-line summary.
SUMMARY_TABLE_MAX = 200

def tolerance_help() -> str:
    """The epilog of `grade --help`: the default tolerance, in words (imports the grader's tolerance)."""
    from ..core.tolerance import TOLERANCE_DEFAULT

    return (
        f"Default tolerance (when a spec sets none): {TOLERANCE_DEFAULT.to_json()['value']} decimals, i.e. an entry "
        f"passes when it is {TOLERANCE_DEFAULT.describe()}. Masked entries (−∞, 0) must match exactly or "
        "within an absolute floor."
    )


class _TolerantHelpCommand(TyperCommand):
    """A command whose epilog is :func:`tolerance_help`, built when the help is shown (not at start-up)."""

    @property
    def epilog(self) -> str:
        return tolerance_help()

    @epilog.setter
    def epilog(self, value: object) -> None:  # Click's __init__ sets it; the property answers instead
        pass


def __getattr__(name: str):
    # Names that other modules and tests read from here, loaded on first use (PEP 562).
    if name == "TOLERANCE_HELP":
        return tolerance_help()
    if name == "REPORT_FROM_STUDENTS":
        from ..capacity import REPORT_FROM_STUDENTS

        return REPORT_FROM_STUDENTS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextmanager
def _exit_on_terminate() -> Iterator[None]:
    """SIGTERM and SIGHUP exit the way Ctrl-C does, through ``finally`` blocks.

    Python's default for SIGTERM ends the process on the spot; raising SystemExit instead lets
    :mod:`qkvquiz.core.outputs` remove its staging folder and the PDF pool kill its workers, so an
    interrupted run leaves the previous set as it was and nothing half-written beside it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not None:
            previous[sig] = signal.signal(sig, stop)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _NoBar:
    """The progress bar where stderr is not a terminal (a script, a log file, CI): Rich would
    draw nothing there, and importing its progress bars is 10 ms of a small class's run."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, total: float | None = None, **fields: object) -> int:
        return 0

    def update(self, task: int, **fields: object) -> None:
        return None

    def advance(self, task: int, advance: float = 1) -> None:
        return None

    def refresh(self) -> None:
        return None


def _progress(auto_refresh: bool = True):
    """A progress bar on stderr. Without ``auto_refresh`` it redraws only when told
    (``refresh()``) and runs no thread of its own, so a process pool may fork beside it."""
    if not err.is_terminal:
        return _NoBar()
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err, transient=True, auto_refresh=auto_refresh,
    )


def _xp(backend: str):
    from ..engine.backend import BackendUnavailable, get_xp

    try:
        return get_xp(backend)
    except BackendUnavailable as exc:
        _fail(str(exc))


BackendOpt = Annotated[str, typer.Option(
    help=f"Array backend that computes: {' | '.join(BACKEND_NAMES)} (cupy needs a CUDA GPU and "
    "pip install 'qkvquiz[gpu]'). Results are identical on either.")]


LangOpt = Annotated[Optional[str], typer.Option(
    "--lang", help="Language of what students and instructors read: en or zh (default: the spec's "
    "`lang:`, else en; grade and audit: the key's or file's language).")]


def _lang(lang: str | None) -> str | None:
    """``--lang`` checked (None when not given), or exit 2 naming the choices."""
    from ..core.i18n import UnknownLanguage, check_lang

    if lang is None:
        return None
    try:
        return check_lang(lang)
    except UnknownLanguage as exc:
        _fail(f"--lang: {exc}")


@app.command()
def generate(
    spec: Annotated[str, typer.Argument(help="Worksheet spec (YAML file), or a bundled spec name such as attention-basics.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write into (created if needed).")],
    students: Annotated[Optional[int], typer.Option("--students", "-n", min=1, help="Number of students: ids s01, s02, … (at most 20,000 per set).")] = None,
    roster: Annotated[Optional[Path], typer.Option(help="Roster file: one student id per line, or a CSV with a 'student' or 'id' column (and an optional 'name' column, printed on each worksheet's header).")] = None,
    seed: Annotated[str, typer.Option(help="Seed: the same spec, student and seed always give the same variant.")] = "0",
    force: Annotated[bool, typer.Option(help="Overwrite an existing key.json in OUT.")] = False,
    backend: BackendOpt = "numpy",
    formats: Annotated[str, typer.Option(
        "--format", "-f",
        help="Students' files, comma-separated: md (worksheet.md), html (worksheet.html with answer "
             "boxes, and answer-form.html, a page that saves the submission file), pdf (worksheet.pdf "
             "per student and keys/STUDENT.pdf, each student's key; needs WeasyPrint's system libraries).",
    )] = "md",
    secret_file: Annotated[Optional[Path], typer.Option(
        "--secret-file", help=f"Instructor secret (made by `qkvquiz init`) that keys every variant, so that "
        f"nobody without it can rebuild the key. Default: ${SECRET_ENV} if set, else ~/.config/qkvquiz/secret "
        "(created on first use).")] = None,
    public: Annotated[bool, typer.Option(
        "--public", help="No secret: a practice set that anyone with qkvquiz, the spec, the ids and the seed "
        "can rebuild, answers included.")] = False,
    templates: Annotated[Optional[Path], typer.Option(
        help="Folder of templates that replace bundled ones of the same name (e.g. worksheet.md.j2, "
        "families/attention.output.problem.md.j2); rendered in Jinja's sandbox, in a process with a "
        "time, memory and output budget.")] = None,
    page_size: Annotated[str, typer.Option(
        "--page-size", help="Page size of the html and pdf files: a4 or letter.")] = "a4",
    class_pdf: Annotated[bool, typer.Option(
        "--class-pdf", help="With --format pdf, also write class.pdf (every worksheet in one file for "
        "printing, each student on a new page) and key.pdf (a cover, then every student's key).")] = False,
    workers: Annotated[Optional[int], typer.Option(
        min=1, help="Processes that render the students' files and PDFs (default: every core; "
        "a class under 64 students renders its files in this process).")] = None,
    work_space: Annotated[Optional[str], typer.Option(
        "--work-space", help="Room to work under each part on the html and pdf worksheets: a height "
        "(4cm, 30mm, 1.5in) or ruled lines (6 lines); an item's own work_space wins.")] = None,
    lang: LangOpt = None,
) -> None:
    """Generate a personalised worksheet set: per student a worksheet (`--format`) and a blank
    `submission.json`; for you `key.json` (what `grade` reads) and `key.md` (answers with worked steps).

    Each student's variant depends only on the spec, their id, the seed and the secret (if any),
    so adding or removing students never changes anyone else's problems.
    """
    import jinja2

    from ..capacity import class_size_problem
    from ..core.outputs import OutputError
    from ..core.secret import readable_by_others
    from ..generate import generate_set, parse_formats
    from ..render.sandbox import TemplateFailed
    from ..spec import SpecError, load_spec, parse_work_space
    from ..worksheet import GenerationError

    lang = _lang(lang)
    if (students is None) == (roster is None):
        _fail("give exactly one of --students N or --roster FILE")
    if public and secret_file is not None:
        _fail("--public makes a set without a secret; leave out --secret-file, or --public")
    if students is not None and class_size_problem(students):
        _fail(f"--students: {class_size_problem(students)}")
    try:
        chosen = parse_formats(formats)
    except ValueError as exc:
        _fail(f"--format: {exc}")
    if page_size.strip().lower() not in ("a4", "letter"):
        _fail(f"--page-size: unknown page size {page_size!r}; use a4 or letter")
    if class_pdf and "pdf" not in chosen:
        _fail("--class-pdf needs --format with pdf (for example --format md,pdf)")
    if "pdf" in chosen:
        from ..render.pdf import PdfUnavailable, weasyprint_module

        try:
            weasyprint_module()
        except PdfUnavailable as exc:
            _fail(f"--format pdf: {exc}")
    try:
        space = parse_work_space(work_space, "--work-space")
    except ValueError as exc:
        _fail(str(exc))
    names: dict[str, str] = {}
    if roster is not None:
        from ..roster import read_roster_entries

        try:
            entries = read_roster_entries(roster)
        except (OSError, ValueError) as exc:
            _fail(str(exc))
        ids, names = entries.students, entries.names
    else:
        width = max(2, len(str(students)))
        ids = [f"s{i:0{width}d}" for i in range(1, students + 1)]
    if templates is not None and not templates.is_dir():
        _fail(f"--templates {templates}: not a folder")
    try:
        parsed = load_spec(resolve_spec(spec))
    except SpecError as exc:
        _fail(str(exc))
    # The spec and roster are good: only now may a first run create the instructor's secret.
    secret, secret_file = _generate_secret(secret_file, public)
    if secret_file is not None and readable_by_others(secret_file):
        err.print(f"[yellow]warning:[/] {escape(str(secret_file))} is readable by other users; "
                  f"`chmod 600 {escape(str(secret_file))}` keeps it yours.", highlight=False)
    fonts_warned = False  # the CJK-font warning is said once, here or after rendering
    font_warning: type[Warning] | None = None  # the warning that PDFs lack a CJK font (with PDFs only)
    if "pdf" in chosen:
        from ..render.fonts import MissingCjkFont, cjk_warning

        font_warning = MissingCjkFont

        texts = [parsed.title, parsed.instructions, *(i.title for i in parsed.items),
                 *(i.intro for i in parsed.items), *names.values()]
        warning = cjk_warning(texts)
        if warning is not None:
            err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
            fonts_warned = True
    xp = _xp(backend)
    if len(ids) >= _report_from_students():
        _check_memory(parsed, len(ids), seed)
    try:
        # PDFs render in a forked process pool: the bar draws on each update, from this thread.
        with _progress(auto_refresh=False) as bar, _exit_on_terminate():
            task = bar.add_task("writing worksheets", total=len(ids))
            pdf_task = None

            def pdf_progress(done: int, total: int) -> None:
                # Students whose PDFs (worksheet, key, their pages of the class files) are done.
                nonlocal pdf_task
                if pdf_task is None:
                    pdf_task = bar.add_task("PDFs of students", total=total)
                bar.update(pdf_task, completed=done, total=total)
                bar.refresh()

            with warnings.catch_warnings(record=True) as font_warnings:
                if font_warning is not None:
                    warnings.simplefilter("always", font_warning)
                result = generate_set(parsed, ids, out, seed=seed, force=force, xp=xp,
                                      secret=None if secret is None else secret.value, templates=templates,
                                      progress=_ticker(bar, task), formats=chosen,
                                      page_size=page_size, class_pdf=class_pdf, workers=workers,
                                      pdf_progress=pdf_progress, names=names, work_space=space, lang=lang)
    except (SpecError, GenerationError, FileExistsError, ValueError, OutputError) as exc:
        _fail(str(exc))  # OutputError: names the path (full disk, read-only folder, another run)
    except TemplateFailed as exc:  # a user's template, refused or stopped: the message names it
        _fail(f"template {exc}")
    except (jinja2.TemplateError, OverflowError) as exc:  # OverflowError: the sandbox's cap on range()
        where = f" ({exc.filename}, line {exc.lineno})" if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        _fail(f"a template could not be rendered{where}: {type(exc).__name__}: {exc}")
    except Exception as exc:
        if "pdf" in chosen:
            from ..render.pdf import PdfRenderError

            if isinstance(exc, PdfRenderError):  # names the PDF it was writing (a full disk, say)
                _fail(f"a PDF could not be written: {exc}")
        if templates is None:
            raise  # a bug in qkvquiz itself: keep the traceback
        _fail(f"a template from {templates} failed: {type(exc).__name__}: {exc}")
    for warned in font_warnings:
        if font_warning is not None and issubclass(warned.category, font_warning):
            if not fonts_warned:
                err.print(f"[yellow]warning:[/] {escape(str(warned.message))}", highlight=False)
                fonts_warned = True
        else:
            warnings.showwarning(warned.message, warned.category, warned.filename, warned.lineno)
    console.print(
        f"Wrote {len(ids)} worksheet{'s' if len(ids) != 1 else ''} of [bold]{escape(parsed.title)}[/] ({len(parsed.items)} problem{'s' if len(parsed.items) != 1 else ''}, "
        f"{parsed.points:g} point{'s' if parsed.points != 1 else ''}; {', '.join(chosen)}) to {escape(str(out))}/students/, and the key to {escape(str(result.key_path))}.",
        highlight=False,
    )
    console.print(escape(secrecy_note(seed, None if secret is None else secret.source)), highlight=False)
    # No stale student folders to report: the new set replaced students/ wholly.


def _report_from_students() -> int:
    """capacity.REPORT_FROM_STUDENTS, unless this module's name was set (a test sets it lower)."""
    mine = globals()
    return mine["REPORT_FROM_STUDENTS"] if "REPORT_FROM_STUDENTS" in mine else __getattr__("REPORT_FROM_STUDENTS")


def _generate_secret(secret_file: Path | None, public: bool) -> tuple[Secret | None, Path | None]:
    """The secret `generate` keys the set with, and the file it came from (None from the environment).

    ``--secret-file`` first, then ``$QKVQUIZ_SECRET``; ``--public`` means none. Otherwise the
    secret at the default path, created there (as `qkvquiz init` does) on the first run, so
    that a set is never rebuildable by students unless asked for.
    """
    from ..core.secret import (
        SecretError,
        create_secret,
        default_secret_path,
        load_secret,
    )

    try:
        if secret_file is not None:
            return load_secret(secret_file), secret_file
        if public:
            if os.environ.get(SECRET_ENV, "").strip():
                err.print(f"[yellow]note:[/] --public: ${SECRET_ENV} is set but not used.", highlight=False)
            return None, None
        from_env = load_secret(None)
        if from_env is not None:
            return from_env, None
        path = default_secret_path()
        if not path.exists() and not path.is_symlink():
            create_secret(path)
            err.print(f"Created the instructor secret {_shown(str(path))} (readable by you only); every set "
                      "made without --public is keyed by it. Back it up somewhere private: keys made with "
                      "it cannot be rebuilt without it.", highlight=False)
        return load_secret(path), path
    except (SecretError, OSError) as exc:
        _fail(f"{exc}\n(--secret-file PATH names another secret; --public makes a set without one)")
    raise AssertionError  # unreachable


def _check_memory(parsed: WorksheetSpec, students: int, seed: str) -> None:
    """Print what a large class will cost before solving it; refuse one this machine cannot hold."""
    from ..capacity import estimate, physical_memory
    from ..worksheet import GenerationError

    try:
        guess = estimate(parsed, students, seed)
    except (GenerationError, ValueError) as exc:
        _fail(str(exc))
    err.print(f"[yellow]note:[/] {escape(guess.describe())}", highlight=False)
    memory = physical_memory()
    if memory is not None and guess.memory > memory:
        _fail(f"this machine has {memory / 1e9:.1f} GB of memory; split the class into several sets")


def secrecy_note(seed: str, secret_source: str | None) -> str:
    """The sentence `generate` prints about who can rebuild the key."""
    if secret_source is None:
        return (
            f"No secret (--public): every variant follows from the spec, the student ids and the seed {seed!r}, so "
            "anyone with qkvquiz (students have it), the spec and this seed can rebuild this key. Leave out "
            "--public to key the set with your secret (`qkvquiz init` makes one; so does the first generate)."
        )
    return (
        f"Variants are keyed by the secret from {secret_source}: without it, the spec and the seed {seed!r} do not "
        "rebuild this key. Keep the secret and key.json private; the same secret, spec and seed rebuild the same key."
    )


@app.command()
def init(
    path: Annotated[Optional[Path], typer.Argument(help="Where to write the secret (default: ~/.config/qkvquiz/secret).")] = None,
) -> None:
    """Create an instructor secret: 256 random bits in a file only you can read (mode 0600).

    `generate` uses the default one without being told (and creates it on its first run if
    `init` never did); pass another with `generate --secret-file PATH` (or put its content in
    $QKVQUIZ_SECRET). No one without it can rebuild your keys, not even with qkvquiz, the spec
    and the seed. An existing file is never replaced: keys made with it could not be rebuilt.
    """
    from ..core.secret import SecretError, create_secret, default_secret_path

    target = path if path is not None else default_secret_path()
    try:
        written = create_secret(target)
    except (SecretError, OSError) as exc:
        _fail(str(exc))
    use = ("`qkvquiz generate` uses it by default." if path is None else
           f"Use it with\n  qkvquiz generate SPEC --secret-file {escape(str(written))} …")
    console.print(
        f"Wrote a new secret to {escape(str(written))} (readable by you only). {use}\n"
        "Back it up somewhere private: without it, lost keys cannot be rebuilt.",
        highlight=False,
    )


def _submission_files(paths: list[Path]) -> list[Path]:
    """The files to grade: files as given, and every ``*.json`` below a folder.

    Skipped in folders: the key and reports, hidden files and folders (``.DS_Store``,
    ``__MACOSX/._x.json`` from unpacked archives); a file named twice is graded once. Folders
    are walked by :func:`qkvquiz.core.inputs.walk_json_files`: links to folders and links out of
    the folder are not followed (each is noted), and a folder named on the command line must
    not itself be a link (it could lead anywhere, ``/`` included).
    """
    from ..core.inputs import InputError, walk_json_files

    files: list[Path] = []
    for p in paths:
        if not p.exists() and not p.is_symlink():
            _fail(f"{p} does not exist (nothing was graded and no report was written)")
        if p.is_symlink() and p.is_dir():
            _fail(f"{p} is a link to the folder {os.path.realpath(p)}; links to folders are not followed: "
                  "name the folder itself (nothing was graded)")
        if p.is_dir():
            try:
                found, skipped = walk_json_files(p, frozenset({"key.json", "results.json"}))
            except InputError as exc:
                _fail(f"{exc} (nothing was graded)")
            files.extend(found)
            for s in skipped:
                err.print(f"[yellow]skipped:[/] {_shown(str(s.path))}: {_shown(s.reason)}", highlight=False)
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


@app.command(cls=_TolerantHelpCommand)
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
    lms: Annotated[str, typer.Option(
        help="Whose bulk download SUBMISSIONS is: auto (read the file names), canvas, moodle, gradescope, "
             "or none (each file's own \"student\" decides).",
    )] = "auto",
    lang: LangOpt = None,
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
    from ..core.pause import collector_paused

    with collector_paused():  # no cycles among a class's answers and results: nothing to collect
        _grade_command(key, submissions, out, feedback, backend, duplicates, roster, lms, lang)


def _grade_command(key: Path, submissions: list[Path], out: Path, feedback: bool, backend: str, duplicates: str,
                   roster: Path | None, lms: str, lang: str | None) -> None:
    from ..core.outputs import OutputError
    from ..grade.choose import DUPLICATES
    from ..grade.grader import grade_files
    from ..grade.report import write_reports
    from ..key import KeyFileError, load_key

    lang = _lang(lang)
    if duplicates not in DUPLICATES:
        _fail(f"--duplicates must be one of {', '.join(DUPLICATES)}, not {_shown(duplicates)}")
    xp = _xp(backend)
    try:
        loaded = load_key(key)  # finishes the switch of a `generate` killed midway (outputs.settle)
    except KeyFileError as exc:
        _fail(str(exc))
    collected = _collect_download(submissions, roster, lms, lang or loaded.lang)
    files = [] if collected is not None else _submission_files(submissions)
    if collected is None and not files:
        _fail("no submission files found")
    with _exit_on_terminate():
        # No refresh thread: the feedback files of a large class are written by a forked worker.
        with _progress(auto_refresh=False) as bar:
            if collected is not None:
                from ..exchange.collect import grade_collected

                report = grade_collected(loaded, collected, xp=xp, duplicates=duplicates, lang=lang)
            else:
                task = bar.add_task("grading", total=len(files))
                report = grade_files(loaded, files, progress=_ticker(bar, task), xp=xp, duplicates=duplicates,
                                     lang=lang)
            writing = bar.add_task("writing feedback", total=len(report.results) if feedback else 0)
            try:
                paths = write_reports(report, out, feedback=feedback, progress=_ticker(bar, writing))
            except OutputError as exc:  # names the path; another run into `out` is refused here
                _fail(str(exc))
            except OSError as exc:
                _fail(f"cannot write the reports to {out}: {exc.strerror or exc}")
    if feedback:
        paths.append(out / "feedback")

    if len(report.results) <= SUMMARY_TABLE_MAX:
        from rich.table import Table

        table = Table(title=escape(f"{loaded.title}: {len(report.results)} graded"))
        for col in ("student", "score", "of", "unreadable", "not answered"):
            table.add_column(col)
        for r in sorted(report.results, key=lambda r: r.student):
            unreadable = sum(p.verdict == "format" for p in r.parts)
            missing = sum(p.verdict == "missing" for p in r.parts)
            table.add_row(_shown(r.student), f"{r.score:.2f}", f"{r.total:g}", str(unreadable or ""), str(missing or ""))
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
        shown = ", ".join(_shown(s) for s in report.absent[:10]) + (" …" if len(report.absent) > 10 else "")
        err.print(f"[yellow]no submission[/] from {len(report.absent)} student(s) of the key (0 points in "
                  f"results.csv): {shown}", highlight=False)
    console.print(f"Wrote {', '.join(_shown(str(p)) for p in paths)}", highlight=False)
    if report.problems:
        raise typer.Exit(1)


def _ticker(bar, task):
    """A progress callback that advances ``task`` by one and redraws the bar at most ten times a second."""
    last = 0.0

    def tick() -> None:
        nonlocal last
        bar.advance(task)
        now = time.monotonic()
        if now - last >= 0.1:
            bar.refresh()
            last = now

    return tick


def _collect_download(submissions: list[Path], roster: Path | None, lms: str, lang: str | None = None):
    """An LMS download's hand-ins (``exchange.collect``) when a zip, ``--roster`` or ``--lms`` asks for
    it; None for plain files and folders, which are graded as before. ``lang``: the language of
    the problems it finds (the grading's)."""
    from ..core.inputs import InputError
    from ..exchange.collect import LMS_CHOICES, collect, is_zip

    if lms not in LMS_CHOICES:
        _fail(f"--lms must be one of {', '.join(LMS_CHOICES)}, not {_shown(lms)}")
    zipped = [p for p in submissions if p.is_file() and is_zip(p)]
    if roster is None and not zipped and lms in ("auto", "none"):
        return None
    for p in submissions:
        if not p.exists() and not p.is_symlink():
            _fail(f"{p} does not exist (nothing was graded and no report was written)")
    entries = None
    if roster is not None:
        from ..roster import read_roster_entries

        try:
            entries = read_roster_entries(roster)
        except ValueError as exc:  # InputError is a ValueError
            _fail(str(exc))
    try:
        collected = collect(submissions, entries, lms, lang)
    except InputError as exc:
        _fail(f"{exc} (nothing was graded)")
    for source, kind in collected.lms.items():
        err.print(f"[dim]{_shown(source)}: {kind.title() + ' download' if kind else 'no LMS naming found'}[/]",
                  highlight=False)
    if not collected.handins and not collected.problems:
        _fail("no submission files found")
    return collected


def _print_grade_notes(report) -> None:
    """Per student: flags, notes, and every file that claimed them when there were several; then
    the files not graded. Every name is shown with control characters escaped."""
    for r in sorted(report.results, key=lambda r: r.student):
        for flag in r.flags:
            err.print(f"[red]flag:[/] {_shown(r.student)}: {_shown(flag)}", highlight=False)
        for note in r.notes:
            err.print(f"[yellow]note:[/] {_shown(r.source)}: {_shown(note)}", highlight=False)
        if len(r.candidates) > 1:
            err.print(f"[yellow]{len(r.candidates)} files[/] claim {_shown(r.student)}:", highlight=False)
            for c in r.candidates:
                err.print(f"  {'→' if c.graded else ' '} {_shown(c.source)}: {_shown(c.why)}", highlight=False)
    for problem in report.problems:
        err.print(f"[yellow]not graded:[/] {_shown(problem.source)}: {_shown(problem.message)}", highlight=False)
    for skipped in report.skipped:
        err.print(f"[dim]skipped:[/] {_shown(skipped.source)}: {_shown(skipped.message)}", highlight=False)


@app.command()
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

    lang = _lang(lang)
    try:
        report = audit_file(file, lang=lang)
    except (SpecError, GenerationError) as exc:
        _fail(str(exc))
    text = audit_markdown(report)
    if out is not None:
        try:
            with _exit_on_terminate():  # SIGTERM removes the temporary file too
                write_file(out, text)  # a set of one file: the old one or the new one, nothing between
        except OutputError as exc:
            _fail(str(exc))
    console.print(Markdown(text))
    if report.wrong:
        raise typer.Exit(1)


@app.command()
def families() -> None:
    """List every family (topic) with one line each; `qkvquiz show FAMILY` shows a sample."""
    from rich.table import Table

    from ..families import REGISTRY

    table = Table(show_header=True)
    table.add_column("family")
    table.add_column("what the student computes")
    for name in sorted(REGISTRY):
        table.add_row(name, REGISTRY[name].summary)
    console.print(table)


@app.command()
def specs() -> None:
    """List the bundled worksheet specs (usable by name in `generate`)."""
    from ..spec import load_spec

    for path in sorted(bank_dir().glob("*.yaml")):
        console.print(f"{path.stem:24} {load_spec(path).title}", highlight=False)


@app.command()
def show(
    family: Annotated[str, typer.Argument(help="Family name, e.g. attention.output (see `qkvquiz families`).")],
    seed: Annotated[str, typer.Option(help="Seed of the sample.")] = "0",
    param: Annotated[Optional[list[str]], typer.Option("--param", "-p", help="Override a param: NAME=VALUE (YAML value), repeatable.")] = None,
    lang: LangOpt = None,
) -> None:
    """Print one sample problem of a family with its worked solution."""
    from ..core.i18n import using
    from ..core.inputs import InputError, load_yaml
    from ..families import get_family
    from ..render.markdown import render_items
    from ..spec import SpecError, parse_spec
    from ..worksheet import GenerationError, build_worksheet

    lang = _lang(lang)
    try:
        fam = get_family(family)
    except KeyError as exc:
        _fail(exc.args[0])
    params = {}
    for text in param or []:
        name, sep, value = text.partition("=")
        if not sep:
            _fail(f"--param {text!r}: write NAME=VALUE")
        try:
            params[name.strip()] = load_yaml(value, f"--param {name.strip()}")
        except InputError as exc:
            _fail(str(exc))
    try:
        ws = build_worksheet(parse_spec({"title": fam.title, "items": [{"family": fam.name, "params": params}]},
                                        source="--param"), ["sample"], seed)
    except (SpecError, GenerationError) as exc:
        _fail(str(exc))
    # Raw Markdown: a terminal Markdown renderer would eat the LaTeX's backslashes.
    with using(lang):
        for kind in ("problem", "solution"):
            console.print(render_items(ws, 0, kind)[0], markup=False, highlight=False, soft_wrap=True)
    console.print("Params: " + ", ".join(f"{k}={v!r}" for k, v in ws.spec.items[0].params.items()), highlight=False)


@app.command()
def schema(which: Annotated[str, typer.Argument(help="key | submission")]) -> None:
    """Print the JSON Schema of the key file or of a submission file."""
    if which not in ("key", "submission"):
        _fail("choose key or submission")
    print(json.dumps(json.loads((schemas_dir() / f"{which}.schema.json").read_text(encoding="utf-8")), indent=2))


def main() -> None:
    """The ``qkvquiz`` command: the console script and ``python -m qkvquiz``."""
    try:
        app(prog_name="qkvquiz")
    finally:
        # The process ends here. What the run made (a class's worksheets, results) is freed as the
        # interpreter shuts down, without the collector's last pass over every object first (50 to
        # 90 ms after a class of 300); a reference cycle left over goes back with the process.
        gc.freeze()


# `qkvquiz export …` lives in its own module; it is imported last because it uses the helpers above.
from .export import export_app  # noqa: E402

app.add_typer(export_app, name="export")
