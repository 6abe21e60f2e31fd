"""``qkvquiz practice``: a student's own practice page, served on this computer or written as a site."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ._common import (
    LangOpt,
    chosen_lang,
    console,
    err,
    exit_on_terminate,
    fail,
    progress_bar,
    safe_text,
)


def practice(
    choices: Annotated[Optional[list[str]], typer.Argument(
        metavar="[SPEC | FAMILY]...",
        help="What to practise: families (attention.output), bundled specs (attention-basics) or spec files; "
             "each item of a spec is a topic. Default: every family and every bundled spec.")] = None,
    lang: LangOpt = None,
    seed: Annotated[Optional[str], typer.Option(
        help="Public seed of the first problem of each topic (default: a fresh one each time), to draw "
             "the same problems again. Practice never uses the instructor's secret.")] = None,
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port on 127.0.0.1 (default: any free one).")] = 0,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Print the page's address; do not open a browser.")] = False,
    static: Annotated[Optional[int], typer.Option(
        "--static", min=1, max=500, metavar="N",
        help="Write a self-contained site (no server; opens from file://) with N solved variants per item "
             "into --out, instead of serving.")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Folder for --static (created if needed).")] = None,
    force: Annotated[bool, typer.Option(help="With --static: replace an index.html already in OUT.")] = False,
    progress_file: Annotated[Optional[Path], typer.Option(
        "--progress-file", help="Where your progress is kept (default: practice.json in your data folder, "
        "$XDG_DATA_HOME/qkvquiz).")] = None,
) -> None:
    """Practise alone: a fresh problem each time, checked by the grader, with diagnosis and worked steps.

    `qkvquiz practice attention.output` serves the page on 127.0.0.1 and opens it; `qkvquiz practice
    attention-basics --static 20 --out site` writes a site that checks answers in the browser. Practice
    problems are public (drawn from shown seeds): progress stays on the student's computer.
    """
    from ..core.i18n import using
    from ..core.outputs import OutputError
    from ..practice.problem import check_seed
    from ..practice.topics import TopicError, topics_for
    from ..spec import SpecError

    lang = chosen_lang(lang)
    if seed is not None:
        try:
            check_seed(seed)
        except ValueError as exc:
            fail(f"--seed: {exc}")
    if static is None and (out is not None or force):
        fail("--out and --force go with --static N (a site written to a folder)")
    if static is not None and out is None:
        fail("--static N needs --out FOLDER")
    with using(lang):  # entered once: the topics, the page, the site and the server follow it
        try:
            topics = topics_for(choices or [])
        except (TopicError, SpecError) as exc:
            fail(str(exc))
        if static is None:
            _serve(topics, port, seed, no_browser, progress_file)
            return

        from ..practice.pages import ANSWERS_NOTICE
        from ..practice.static import build_static

        assert out is not None
        with exit_on_terminate(), progress_bar() as bar:
            task = bar.add_task("solving and rendering", total=static * len(topics))
            try:
                page = build_static(topics, static, out, seed=seed, force=force, progress=lambda: bar.advance(task))
            except (FileExistsError, ValueError, OutputError) as exc:
                fail(str(exc))
    console.print(f"wrote {page} ({page.stat().st_size / 1e6:.1f} MB): {static} variant(s) of each of "
                  f"{len(topics)} topic(s); open it in a browser. The problems are public.", highlight=False)
    # Whoever publishes the site must know what its source holds (the page says it too).
    console.print(ANSWERS_NOTICE, highlight=False)


def _serve(topics, port: int, seed: str | None, no_browser: bool, progress_file: Path | None) -> None:
    import webbrowser

    from ..core.inputs import shown_path
    from ..practice.progress import Progress
    from ..practice.server import serve

    def ready(server) -> None:
        console.print(f"practice page: {server.url}  (this computer only; Ctrl-C stops it)", highlight=False)
        progress = server.app.progress
        if progress.set_aside is not None:
            console.print(f"{safe_text(shown_path(progress.path))} could not be read as a progress file; it is kept "
                          f"as {safe_text(shown_path(progress.set_aside))}, and a new record starts", highlight=False)
        console.print(f"progress is kept in {progress.path}", highlight=False)
        if not no_browser:
            webbrowser.open(server.url)

    try:
        with exit_on_terminate():
            serve(topics, port=port, seed=seed, progress=Progress(progress_file), ready=ready)
    except OSError as exc:
        fail(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        err.print("stopped")
