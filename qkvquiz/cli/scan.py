"""``qkvquiz scan``: scanned worksheets read and graded (``scan KEY SCANS… --out DIR``, the same as
``scan read …``), and their doubts settled by a person (``scan review DIR``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.markup import escape
from typer.core import TyperGroup

from ._common import (
    HELP_MARKUP,
    BackendOpt,
    LangOpt,
    chosen_lang,
    console,
    err,
    exit_on_terminate,
    fail,
    progress_bar,
    safe_text,
)

#: Lines of a list (pages not placed, students without pages) printed before "… and N more".
SHOWN = 20


class ScanGroup(TyperGroup):
    """`scan` with a subcommand's name (`read`, `review`) runs it; with anything else (a KEY, an
    option) it runs `read`: `qkvquiz scan KEY SCANS…` is `qkvquiz scan read KEY SCANS…`. A key
    file named like a subcommand is written with its folder (`./review`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["read", *args]
        return super().parse_args(ctx, args)


scan_app = typer.Typer(
    cls=ScanGroup,
    help=(
        "Read scanned worksheets back into submissions, grade them, and review what the reader doubts.\n\n"
        "`qkvquiz scan KEY SCANS… --out DIR` (short for `qkvquiz scan read …`) reads the scans and grades "
        "them; `qkvquiz scan review DIR` opens a local page where you settle each doubtful reading with the "
        "keyboard, and grades again on what you confirmed. The loop: `generate` prints the worksheets with "
        "answer cells, students write, a copier scans, `scan` reads and grades, `scan review` settles the doubts."
    ),
    no_args_is_help=True,
    rich_markup_mode=HELP_MARKUP,
)


@scan_app.command("read")
def read(
    key: Annotated[Path, typer.Argument(help="The key.json of the set; its cellmap.json (written by `generate`) "
                                             "lies beside it.")],
    scans: Annotated[list[Path], typer.Argument(
        help="Scans: PDFs of scanned pages and images (PNG, JPEG, TIFF), or folders of them; pages in any "
             "order and any way up.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for the submissions, readings, pictures for "
                                                          "review and grades.")],
    cellmap: Annotated[Optional[Path], typer.Option(
        help="The cell map, when it is not cellmap.json beside the key.")] = None,
    feedback: Annotated[bool, typer.Option(help="Write grades/feedback/STUDENT.md, as `grade` does.")] = True,
    backend: BackendOpt = "numpy",
    lang: LangOpt = None,
) -> None:
    """Read scanned worksheets, write each student's submission, and grade them as `grade` does.

    Each page is placed by its QR code (set, variant, page) and fitted by its corner marks; every
    answer cell is read (a digit, a minus, a tick, blank) with how sure the reader is. A page of
    another set is refused by name, a page that cannot be placed is listed with its reason, and
    neither stops the others. Writes into OUT, as one set: `submissions/STUDENT.json` (the answer
    form's JSON), `readings/STUDENT.json` (each entry's confidence, doubts and cells),
    `review/` (pictures of the doubtful entries and their pages), `grades/` (exactly what `qkvquiz
    grade KEY OUT/submissions --out OUT/grades` writes), `scan.json` and `summary.md`. An entry goes to
    review when the reader doubts it, or when another likely reading of it would change the
    student's score; the key never changes a reading. Scans are only read. Decisions made in
    `scan review` (OUT/decisions.jsonl) are kept when the pages are scanned again.

    Exit status: 0 when every page was placed; 1 when some page was not (listed); 2 when the key,
    the cell map or OUT cannot be used.
    """
    from ..core.collector import collector_paused

    with collector_paused():
        _read(key, scans, out, cellmap, feedback, backend, chosen_lang(lang))


def _read(key: Path, scans: list[Path], out: Path, cellmap: Path | None, feedback: bool, backend: str,
          lang: str | None) -> None:
    from ..core.outputs import OutputError
    from ..engine.backend import BackendUnavailable
    from ..grade.scanned import ScanInputError, scan_and_grade
    from ..scan.requirements import ScanDependencyMissing

    # pypdf logs what it finds wrong in a broken file to the bare terminal; the summary lists each
    # such file with its reason instead.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    for path in scans:
        if not path.exists() and not path.is_symlink():
            fail(f"{path} does not exist (nothing was read and nothing written)")
    def note(text: str) -> None:  # where the array work ran, when a GPU was asked for and the CPU kept it
        err.print(f"[yellow]note:[/] {escape(text)}", highlight=False)

    try:
        with exit_on_terminate(), progress_bar() as bar:
            task = bar.add_task("reading pages", total=None)
            grading = scan_and_grade(key, scans, out, cellmap=cellmap, feedback=feedback, lang=lang, xp=backend,
                                     progress=lambda _page: bar.advance(task), notes=note)
    except BackendUnavailable as exc:
        fail(str(exc))
    except ScanInputError as exc:
        fail(str(exc))
    except ScanDependencyMissing as exc:
        fail(str(exc))
    except OutputError as exc:
        fail(str(exc))
    print_summary(grading)
    console.print(f"Wrote {safe_text(str(out))}: submissions/, readings/, review/, grades/, scan.json, summary.md",
                  highlight=False)
    if grading.summary()["open"]:
        console.print(f"Next: qkvquiz scan review {safe_text(str(out))}", highlight=False)
    if grading.summary()["not placed"]:
        raise typer.Exit(1)


def print_summary(grading: Any) -> None:
    """Pages scanned twice, not placed, missing; students with no pages; what went to review; grades."""
    s = grading.summary()
    console.print(f"{escape(grading.state['title'])}: {s['pages']} page(s) found, {s['read']} read; "
                  f"{len(grading.report.results)} student(s) graded", highlight=False)
    for page in s["twice"][:SHOWN]:
        err.print(f"[yellow]scanned twice:[/] {safe_text(page['source'])}: {safe_text(page['reason'])}", highlight=False)
    for page in s["not placed"][:SHOWN]:
        err.print(f"[red]not placed:[/] {safe_text(page['source'])}: {page['status']}: {safe_text(page['reason'])}",
                  highlight=False)
    hidden = max(len(s["twice"]) - SHOWN, 0) + max(len(s["not placed"]) - SHOWN, 0)
    if hidden:
        err.print(f"… and {hidden} more page(s): see summary.md", highlight=False)
    for student, pages in list(s["missing pages"].items())[:SHOWN]:
        err.print(f"[yellow]missing:[/] {safe_text(student)}: page {', '.join(map(str, pages))}", highlight=False)
    if s["no pages"]:
        shown = ", ".join(safe_text(x) for x in s["no pages"][:SHOWN]) + (" …" if len(s["no pages"]) > SHOWN else "")
        err.print(f"[yellow]no pages[/] from {len(s['no pages'])} student(s): {shown}", highlight=False)
    for note in grading.notes:
        err.print(f"[yellow]note:[/] {safe_text(note)}", highlight=False)
    console.print(f"review: {s['review entries']} of {s['entries']} entries ({s['review cells']} of {s['cells']} cells); "
                  f"{s['changes score']} because another likely reading changes the score; "
                  f"decided {s['decided']}, open {s['open']}", highlight=False)


@scan_app.command("review")
def review(
    folder: Annotated[Path, typer.Argument(help="The folder `qkvquiz scan --out` wrote.")],
    key: Annotated[Optional[Path], typer.Option(
        help="The key, when it is no longer where the scan found it (it must be the same key).")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (default: any free one).")] = 0,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the page's address; do not open a browser.")] = False,
    lang: LangOpt = None,
    feedback: Annotated[bool, typer.Option(help="Write grades/feedback/STUDENT.md when grading again.")] = True,
) -> None:
    """Settle the doubtful readings of a scan on a local page, then grade again.

    The page (on 127.0.0.1 only) shows each doubtful entry's cells as scanned beside what was read
    and why it is in doubt. Type what the cells say, or press Enter to confirm the reading; Tab
    then Enter shows the whole page, Escape closes it. Each decision is kept at once in FOLDER/decisions.jsonl (an interrupted
    review loses nothing decided; run it again to go on). Done grades the folder again on the
    confirmed readings: `submissions/`, `grades/` and `summary.md` are replaced as one set.
    """
    import webbrowser

    from ..core.outputs import OutputError
    from ..grade.scanned import ScanInputError
    from ..review.server import ReviewApp, serve

    lang = chosen_lang(lang)
    try:
        app = ReviewApp(folder, key=key, lang=lang, feedback=feedback)
    except ScanInputError as exc:
        fail(str(exc))

    def ready(server) -> None:
        console.print(f"review page: {server.url}  ({len(app.items)} entries; this computer only; Ctrl-C stops it)",
                      highlight=False)
        if not no_browser:
            webbrowser.open(server.url)

    try:
        with exit_on_terminate():
            serve(app, port=port, ready=ready)
    except OSError as exc:
        if isinstance(exc, OutputError):
            fail(str(exc))
        fail(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        err.print(f"stopped; every decision so far is kept in {safe_text(str(folder / 'decisions.jsonl'))}: "
                  "run the review again to go on", highlight=False)
        return
    if app.graded is None:
        return
    print_summary(app.graded)
    console.print(f"Graded again on the confirmed readings: {safe_text(str(folder / 'grades'))}", highlight=False)
