"""``qkvquiz generate`` and ``qkvquiz init``: a worksheet set, and the instructor secret it is keyed by."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional

import typer
from rich.markup import escape

from ._common import (
    SECRET_ENV,
    BackendOpt,
    LangOpt,
    console,
    err,
    exit_on_terminate,
    fail,
    option_flag,
    progress_bar,
    resolve_spec,
    safe_text,
    ticker,
)

if TYPE_CHECKING:
    from ..core.secret import Secret
    from ..generate import GeneratedSet



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
             "per student, made to be scanned and read back, with cellmap.json beside the key, and "
             "keys/STUDENT.pdf, each student's key; needs WeasyPrint's system libraries).",
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
    allow_missing_fonts: Annotated[bool, typer.Option(
        "--allow-missing-fonts", help="Write PDFs even where they hold Chinese, Japanese or Korean text "
        "and no installed font has its glyphs (they print as empty boxes); without it generate stops "
        "and names the font package to install.")] = False,
) -> None:
    """Generate a personalised worksheet set: per student a worksheet (`--format`) and a blank
    `submission.json`; for you `key.json` (what `grade` reads) and `key.md` (answers with worked steps).

    Each student's variant depends only on the spec, their id, the seed and the secret (if any),
    so adding or removing students never changes anyone else's problems.
    """
    from ..generate import generate_set
    from ..render.fonts import MissingCjkFont
    from ..spec import SpecError, load_spec

    if (students is None) == (roster is None):
        fail("give exactly one of --students N or --roster FILE")
    if public and secret_file is not None:
        fail("--public makes a set without a secret; leave out --secret-file, or --public")
    ids, names = _class(students, roster)
    try:
        parsed = load_spec(resolve_spec(spec))
    except SpecError as exc:
        fail(str(exc))
    said: list[str] = []  # the notes of the library, said here as they come
    keyed: list[Secret | None] = []

    def note(text: str) -> None:
        said.append(text)
        err.print(f"[yellow]note:[/] {escape(text)}", highlight=False)

    def secret() -> bytes | None:  # asked for once every option is good: a first run creates it only then
        keyed.append(_generate_secret(secret_file, public))
        return None if keyed[0] is None else keyed[0].value

    try:
        # PDFs render in a forked process pool: the bar draws on each update, from this thread.
        with progress_bar(auto_refresh=False) as bar, exit_on_terminate(), \
                warnings.catch_warnings(record=True) as font_warnings:
            warnings.simplefilter("always", MissingCjkFont)
            result = generate_set(parsed, ids, out, seed=seed, force=force, xp=backend, secret=secret,
                                  templates=templates, progress=ticker(bar, bar.add_task("writing worksheets",
                                                                                         total=len(ids))),
                                  formats=formats, page_size=page_size, class_pdf=class_pdf, workers=workers,
                                  pdf_progress=_pdf_progress(bar), names=names, work_space=work_space, lang=lang,
                                  notes=note, allow_missing_fonts=allow_missing_fonts)
    except Exception as exc:
        _fail_for(exc, templates)
    _say_font_warnings(font_warnings, said, allow_missing_fonts)
    formats_written, items = ", ".join(result.formats), len(result.worksheet.spec.items)
    title, points = result.worksheet.spec.title, result.worksheet.spec.points
    console.print(
        f"Wrote {len(ids)} worksheet{'s' if len(ids) != 1 else ''} of [bold]{escape(title)}[/] "
        f"({items} problem{'s' if items != 1 else ''}, {points:g} point{'s' if points != 1 else ''}; "
        f"{formats_written}) to {escape(str(out))}/students/, and the key to {escape(str(result.key_path))}.",
        highlight=False,
    )
    _say_how_paper_comes_back(result, out)
    source = keyed[0].source if keyed and keyed[0] is not None else None
    console.print(escape(secrecy_note(seed, source)), highlight=False)


def _say_how_paper_comes_back(result: GeneratedSet, out: Path) -> None:
    """With PDFs: how the printed sheets are read back, and the file beside the key that it needs."""
    if "pdf" in result.formats:
        console.print(f"The printed worksheets are read back by `qkvquiz scan {escape(str(result.key_path))} SCANS… "
                      f"--out DIR`, from {escape(str(out / 'cellmap.json'))} (where every answer cell lies; keep it "
                      "with the key).", highlight=False)


def _fail_for(exc: Exception, templates: Path | None) -> NoReturn:
    """Exit 2 with the message of what stopped ``generate``; a bug of qkvquiz's own keeps its traceback."""
    import jinja2

    from ..core.options import OptionError, SetExists
    from ..core.outputs import OutputError
    from ..render.pdf import PdfRenderError
    from ..render.sandbox import TemplateFailed
    from ..spec import SpecError
    from ..worksheet import GenerationError

    if isinstance(exc, (OptionError, SetExists)):
        fail(exc.spelled(option_flag))
    if isinstance(exc, TemplateFailed):  # a user's template, refused or stopped: the message names it
        fail(f"template {exc}")
    if isinstance(exc, PdfRenderError):  # names the PDF it was writing (a full disk, say)
        fail(f"a PDF could not be written: {exc}")
    if isinstance(exc, (SpecError, GenerationError, ValueError, OutputError)):
        fail(str(exc))  # OutputError: names the path (full disk, read-only folder, another run)
    if isinstance(exc, (jinja2.TemplateError, OverflowError)):  # OverflowError: the sandbox's cap on range()
        where = f" ({exc.filename}, line {exc.lineno})" if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        fail(f"a template could not be rendered{where}: {type(exc).__name__}: {exc}")
    if templates is None:
        raise exc  # a bug in qkvquiz itself: keep the traceback
    fail(f"a template from {templates} failed: {type(exc).__name__}: {exc}")


def _class(students: int | None, roster: Path | None) -> tuple[list[str], dict[str, str]]:
    """The students' ids (s01, s02 … or the roster's) and the names a roster gives them."""
    if roster is None:
        width = max(2, len(str(students)))
        return [f"s{i:0{width}d}" for i in range(1, (students or 0) + 1)], {}
    from ..roster import read_roster_entries

    try:
        entries = read_roster_entries(roster)
    except (OSError, ValueError) as exc:
        fail(str(exc))
    return entries.students, entries.names


def _pdf_progress(bar):
    """The bar's line for students whose PDFs (worksheet, key, their pages of the class files) are done."""
    task = None

    def update(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            task = bar.add_task("PDFs of students", total=total)
        bar.update(task, completed=done, total=total)
        bar.refresh()

    return update


def _say_font_warnings(caught, said: list[str], allowed: bool) -> None:
    """The warnings rendering raised, said once each; CJK text found only while rendering (a
    template's own words) printed as empty boxes: exit 1 unless --allow-missing-fonts."""
    from ..render.fonts import MissingCjkFont

    boxes_printed = False
    for warned in caught:
        if issubclass(warned.category, MissingCjkFont):
            if str(warned.message) not in said:
                err.print(f"[yellow]warning:[/] {escape(str(warned.message))}", highlight=False)
                said.append(str(warned.message))
                boxes_printed = True
        else:
            warnings.showwarning(warned.message, warned.category, warned.filename, warned.lineno)
    if boxes_printed and not allowed:
        fail("the PDFs were written with empty boxes for their CJK text (see the warning above); "
             "install a CJK font and generate again, or pass --allow-missing-fonts", code=1)


def _generate_secret(secret_file: Path | None, public: bool) -> Secret | None:
    """The secret `generate` keys the set with (None with --public); a file readable by others is said.

    ``--secret-file`` first, then ``$QKVQUIZ_SECRET``; ``--public`` means none. Otherwise the
    secret at the default path, created there (as `qkvquiz init` does) on the first run, so
    that a set is never rebuildable by students unless asked for.
    """
    from ..core.secret import (
        SecretError,
        create_secret,
        default_secret_path,
        load_secret,
        readable_by_others,
    )

    try:
        if public:
            if os.environ.get(SECRET_ENV, "").strip():
                err.print(f"[yellow]note:[/] --public: ${SECRET_ENV} is set but not used.", highlight=False)
            return None
        from_env = load_secret(None) if secret_file is None else None
        if from_env is not None:
            return from_env
        path = secret_file if secret_file is not None else default_secret_path()
        if secret_file is None and not path.exists() and not path.is_symlink():
            create_secret(path)
            err.print(f"Created the instructor secret {safe_text(str(path))} (readable by you only); every set "
                      "made without --public is keyed by it. Back it up somewhere private: keys made with "
                      "it cannot be rebuilt without it.", highlight=False)
        secret = load_secret(path)
        if readable_by_others(path):
            err.print(f"[yellow]warning:[/] {escape(str(path))} is readable by other users; "
                      f"`chmod 600 {escape(str(path))}` keeps it yours.", highlight=False)
        return secret
    except (SecretError, OSError) as exc:
        fail(f"{exc}\n(--secret-file PATH names another secret; --public makes a set without one)")
    raise AssertionError  # unreachable


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
    except SecretError as exc:
        fail(str(exc))
    except OSError as exc:  # a read-only or missing folder, a full disk: said in words, not as [Errno n]
        fail(f"cannot write the secret to {target}: {exc.strerror or exc}; choose a folder you can write, "
              "e.g. `qkvquiz init ~/qkvquiz-secret`")
    use = ("`qkvquiz generate` uses it by default." if path is None else
           f"Use it with\n  qkvquiz generate SPEC --secret-file {escape(str(written))} …")
    console.print(
        f"Wrote a new secret to {escape(str(written))} (readable by you only). {use}\n"
        "Back it up somewhere private: without it, lost keys cannot be rebuilt.",
        highlight=False,
    )
