"""``qkvquiz generate`` and ``qkvquiz init``: a worksheet set, and the instructor secret it is keyed by."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from ._common import (
    SECRET_ENV,
    BackendOpt,
    LangOpt,
    array_backend,
    chosen_lang,
    console,
    err,
    exit_on_terminate,
    fail,
    missing_font,
    progress_bar,
    resolve_spec,
    safe_text,
    ticker,
)

if TYPE_CHECKING:
    from ..core.secret import Secret
    from ..spec import WorksheetSpec



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
    import jinja2

    from ..capacity import class_size_problem
    from ..core.outputs import OutputError
    from ..core.secret import readable_by_others
    from ..generate import generate_set, parse_formats
    from ..render.sandbox import TemplateFailed
    from ..spec import SpecError, load_spec, parse_work_space
    from ..worksheet import GenerationError

    lang = chosen_lang(lang)
    if (students is None) == (roster is None):
        fail("give exactly one of --students N or --roster FILE")
    if public and secret_file is not None:
        fail("--public makes a set without a secret; leave out --secret-file, or --public")
    if students is not None and class_size_problem(students):
        fail(f"--students: {class_size_problem(students)}")
    try:
        chosen = parse_formats(formats)
    except ValueError as exc:
        fail(f"--format: {exc}")
    if page_size.strip().lower() not in ("a4", "letter"):
        fail(f"--page-size: unknown page size {page_size!r}; use a4 or letter")
    if class_pdf and "pdf" not in chosen:
        fail("--class-pdf needs --format with pdf (for example --format md,pdf)")
    if "pdf" in chosen:
        from ..render.pdf import PdfUnavailable, weasyprint_module

        try:
            weasyprint_module()
        except PdfUnavailable as exc:
            fail(f"--format pdf: {exc}")
    try:
        space = parse_work_space(work_space, "--work-space")
    except ValueError as exc:
        fail(str(exc))
    names: dict[str, str] = {}
    if roster is not None:
        from ..roster import read_roster_entries

        try:
            entries = read_roster_entries(roster)
        except (OSError, ValueError) as exc:
            fail(str(exc))
        ids, names = entries.students, entries.names
    else:
        width = max(2, len(str(students)))
        ids = [f"s{i:0{width}d}" for i in range(1, students + 1)]
    if templates is not None and not templates.is_dir():
        fail(f"--templates {templates}: not a folder")
    try:
        parsed = load_spec(resolve_spec(spec))
    except SpecError as exc:
        fail(str(exc))
    parsed = parsed.in_language(lang or parsed.lang)  # its own text too, where written in that language
    _say_untranslated(parsed)
    fonts_warned = False  # the CJK-font warning is said once, here or after rendering
    font_warning: type[Warning] | None = None  # the warning that PDFs lack a CJK font (with PDFs only)
    if "pdf" in chosen:
        from ..render.fonts import MissingCjkFont, cjk_warning

        font_warning = MissingCjkFont
        # Said (or stopped at) before any work, and before a first run creates the secret.
        texts = [parsed.title, parsed.instructions, *(i.title for i in parsed.items),
                 *(i.intro for i in parsed.items), *names.values()]
        warning = cjk_warning(texts, lang=parsed.lang)
        if warning is not None:
            missing_font(warning, allow_missing_fonts)
            fonts_warned = True
    # The spec, roster and fonts are good: only now may a first run create the instructor's secret.
    secret, secret_file = _generate_secret(secret_file, public)
    if secret_file is not None and readable_by_others(secret_file):
        err.print(f"[yellow]warning:[/] {escape(str(secret_file))} is readable by other users; "
                  f"`chmod 600 {escape(str(secret_file))}` keeps it yours.", highlight=False)
    from ..worksheet import screening_seconds

    xp = array_backend(backend, lambda: screening_seconds(parsed, len(ids)))
    if len(ids) >= _report_from_students():
        _check_memory(parsed, len(ids), seed)
    try:
        # PDFs render in a forked process pool: the bar draws on each update, from this thread.
        with progress_bar(auto_refresh=False) as bar, exit_on_terminate():
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
                                      progress=ticker(bar, task), formats=chosen,
                                      page_size=page_size, class_pdf=class_pdf, workers=workers,
                                      pdf_progress=pdf_progress, names=names, work_space=space, lang=lang)
    except (SpecError, GenerationError, FileExistsError, ValueError, OutputError) as exc:
        fail(str(exc))  # OutputError: names the path (full disk, read-only folder, another run)
    except TemplateFailed as exc:  # a user's template, refused or stopped: the message names it
        fail(f"template {exc}")
    except (jinja2.TemplateError, OverflowError) as exc:  # OverflowError: the sandbox's cap on range()
        where = f" ({exc.filename}, line {exc.lineno})" if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        fail(f"a template could not be rendered{where}: {type(exc).__name__}: {exc}")
    except Exception as exc:
        if "pdf" in chosen:
            from ..render.pdf import PdfRenderError

            if isinstance(exc, PdfRenderError):  # names the PDF it was writing (a full disk, say)
                fail(f"a PDF could not be written: {exc}")
        if templates is None:
            raise  # a bug in qkvquiz itself: keep the traceback
        fail(f"a template from {templates} failed: {type(exc).__name__}: {exc}")
    boxes_printed = False  # CJK text found only while rendering (a template's own words)
    for warned in font_warnings:
        if font_warning is not None and issubclass(warned.category, font_warning):
            if not fonts_warned:
                err.print(f"[yellow]warning:[/] {escape(str(warned.message))}", highlight=False)
                fonts_warned = boxes_printed = True
        else:
            warnings.showwarning(warned.message, warned.category, warned.filename, warned.lineno)
    if boxes_printed and not allow_missing_fonts:
        fail("the PDFs were written with empty boxes for their CJK text (see the warning above); "
             "install a CJK font and generate again, or pass --allow-missing-fonts", code=1)
    console.print(
        f"Wrote {len(ids)} worksheet{'s' if len(ids) != 1 else ''} of [bold]{escape(parsed.title)}[/] ({len(parsed.items)} problem{'s' if len(parsed.items) != 1 else ''}, "
        f"{parsed.points:g} point{'s' if parsed.points != 1 else ''}; {', '.join(chosen)}) to {escape(str(out))}/students/, and the key to {escape(str(result.key_path))}.",
        highlight=False,
    )
    console.print(escape(secrecy_note(seed, None if secret is None else secret.source)), highlight=False)
    # No stale student folders to report: the new set replaced students/ wholly.


def _say_untranslated(spec) -> None:
    """A note naming the spec's fields written in other languages but not the set's, shown in English."""
    from ..core.i18n import LANGUAGES, _, using

    missing = spec.untranslated()
    if missing:
        with using(spec.lang):
            note = _("%(spec)s: no %(language)s text for %(fields)s; shown in English") % {
                "spec": spec.source, "language": LANGUAGES[spec.lang], "fields": ", ".join(missing)}
        err.print(f"[yellow]note:[/] {escape(note)}", highlight=False)


def _report_from_students() -> int:
    """From how many students a class gets a memory estimate (read when asked: a test lowers it)."""
    from .. import capacity

    return capacity.REPORT_FROM_STUDENTS


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
            err.print(f"Created the instructor secret {safe_text(str(path))} (readable by you only); every set "
                      "made without --public is keyed by it. Back it up somewhere private: keys made with "
                      "it cannot be rebuilt without it.", highlight=False)
        return load_secret(path), path
    except (SecretError, OSError) as exc:
        fail(f"{exc}\n(--secret-file PATH names another secret; --public makes a set without one)")
    raise AssertionError  # unreachable


def _check_memory(parsed: WorksheetSpec, students: int, seed: str) -> None:
    """Print what a large class will cost before solving it; refuse one this machine cannot hold."""
    from ..capacity import estimate, physical_memory
    from ..worksheet import GenerationError

    try:
        guess = estimate(parsed, students, seed)
    except (GenerationError, ValueError) as exc:
        fail(str(exc))
    err.print(f"[yellow]note:[/] {escape(guess.describe())}", highlight=False)
    memory = physical_memory()
    if memory is not None and guess.memory > memory:
        fail(f"this machine has {memory / 1e9:.1f} GB of memory; split the class into several sets")


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
