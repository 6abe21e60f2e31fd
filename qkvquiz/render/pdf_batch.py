"""Many PDFs at once: a class's worksheets and keys laid out in the package's worker pool.

``generate`` gives targets inside its staging folder (:mod:`qkvquiz.core.outputs`), so the
pool never writes into the user's folder itself. Workers end with the run: on an error,
Ctrl-C or SIGTERM the pool is killed and reaped before :func:`render_pdfs` returns, and on
Linux a worker also dies when its parent is killed outright (:mod:`qkvquiz.core.pool`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qkvquiz.core.collector import rendering_collector, settle_worker
from qkvquiz.core.pool import Pool, cores
from qkvquiz.render.fonts import warn_if_no_cjk_font
from qkvquiz.render.page import page_size_css
from qkvquiz.render.pdf import (
    Html,
    PdfRenderError,
    PdfResult,
    PdfUnavailable,
    base_stylesheet,
    fonts_stylesheet,
    missing_glyph,
    page_size_stylesheet,
    render_pdf,
    weasyprint_module,
)

#: Below this many documents a pool costs more (worker start-up) than it saves.
POOL_MIN_JOBS = 3

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deferred:
    """A job's HTML, built only when :func:`render_pdfs` hands the job to its pool.

    The documents of a class take seconds to build; built one by one as the pool takes them,
    they are built here while the workers already render the first ones, instead of all
    before any worker starts. ``documents`` is how many documents ``build`` returns (1 for
    a string), for the progress count before they exist.
    """

    build: Callable[[], Html]
    documents: int = 1


#: A job's HTML as :func:`render_pdfs` takes it: ready, or built when its turn comes.
JobHtml = Html | Deferred


#: A pool worker's image cache: one per worker, for the worker's one batch.
_worker_image_cache: dict[str, Any] = {}


def _init_worker(page_size: str) -> None:
    _worker_image_cache.clear()
    weasyprint_module()
    page_size_stylesheet(page_size)
    fonts_stylesheet()
    base_stylesheet()
    settle_worker()  # WeasyPrint and the stylesheets, imported and read, live as long as the worker


def _render_job(html: Html, target: str, page_size: str) -> PdfResult:
    try:
        return render_pdf(html, Path(target), page_size=page_size, image_cache=_worker_image_cache)
    except Exception as exc:
        # Exceptions from WeasyPrint may not pickle; send a plain message home.
        raise PdfRenderError(f"{target}: {type(exc).__name__}: {exc}") from None


def _size(html: JobHtml) -> int:
    """How many documents a job lays out."""
    if isinstance(html, Deferred):
        return html.documents
    return 1 if isinstance(html, str) else len(html)


def _weight(html: JobHtml) -> tuple[int, int]:
    """How long a job takes, roughly: its documents, then its characters. The longest jobs
    go first, so that the last ones to finish are short and no worker waits long for the
    others at the end (the keys, a third longer than the worksheets, go before them). A
    deferred job, not built yet, weighs its documents only: it keeps its place among the
    jobs of as many documents as it (the caller's order)."""
    if isinstance(html, Deferred):
        return html.documents, 0
    return _size(html), len(html) if isinstance(html, str) else sum(map(len, html))


class _CjkWatch:
    """Warns once, on the first document with CJK text, where no installed font can print it
    (:func:`~qkvquiz.render.fonts.warn_if_no_cjk_font`): the documents built as the pool
    runs are checked as they come."""

    def __init__(self) -> None:
        self.warned = False

    def check(self, html: Html) -> None:
        if self.warned:
            return
        from qkvquiz.render.fonts import has_cjk

        found = [doc for doc in ([html] if isinstance(html, str) else html) if has_cjk(doc)]
        if found:
            self.warned = True
            warn_if_no_cjk_font(found[:1])


def _built(html: JobHtml, watch: _CjkWatch) -> Html:
    """A job's HTML, built now if it was deferred (and checked for CJK text then)."""
    if not isinstance(html, Deferred):
        return html
    built = html.build()
    watch.check(built)
    return built


#: ``progress`` of :func:`render_pdfs`: a rich bar (True), none (False), or a function
#: called with (documents laid out so far, documents in all) as the work goes on.
Progress = bool | Callable[[int, int], None]


@contextmanager
def _progress_bar(enabled: Progress, total: int) -> Iterator[Callable[[int], None]]:
    """A function to call with the number of documents just finished."""
    done = 0
    if callable(enabled):
        report = enabled

        def advance(n: int) -> None:
            nonlocal done
            done += n
            report(done, total)

        yield advance
        return
    if not enabled:
        yield lambda n: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("PDF", total=total)
        yield lambda n: progress.advance(task, n)


def render_pdfs(
    jobs: Sequence[tuple[JobHtml, Path | str]],
    *,
    page_size: str = "A4",
    workers: int | None = None,
    progress: Progress = True,
) -> list[PdfResult]:
    """Write each ``(html, target)`` job as a PDF; results come back in job order.

    A job's ``html`` is one document or a sequence of documents joined into one PDF (see
    :func:`render_pdf`), or a :class:`Deferred` that builds them when the job's turn comes.
    Documents render in a pool of ``workers`` processes (default: every core this process
    may use); a few documents, or ``workers=1``, render in this process. A joined job is laid
    out by one worker (its pages must be joined in one process), so the jobs with the most
    documents start first: the key of a class runs beside the worksheets instead of after
    them; then the longest documents. Deferred jobs are built here one by one, each just
    before it is handed to the pool, while the workers render the jobs handed before it.

    ``progress`` shows a rich progress bar of documents laid out, or is a function called
    with ``(done, total)`` documents as they finish. WeasyPrint's warnings are collected
    per document (:attr:`PdfResult.warnings`) and logged here once each. The first failure
    cancels the documents not yet started and raises :class:`PdfRenderError`; an error in
    building a deferred job is raised as it is. On any way out but success (a failure,
    Ctrl-C, a SIGTERM turned into SystemExit) the workers are killed and reaped before this
    returns, so none writes after the run; on Linux they also die with this process if it
    is killed outright.
    """
    weasyprint_module()  # fail with the install hint before starting any process
    page_size_css(page_size)
    # Parsed here, so that forked workers start with them.
    fonts_stylesheet()
    base_stylesheet()
    page_size_stylesheet(page_size)
    jobs_ = [(html, Path(target)) for html, target in jobs]
    targets = [t.resolve() for _, t in jobs_]
    if len(set(targets)) != len(targets):
        raise ValueError("two jobs write the same PDF file")
    total = sum(_size(html) for html, _ in jobs_)
    # Chinese text without a CJK font prints as empty boxes: say so (and which package) first;
    # a deferred job's documents are checked as they are built.
    watch = _CjkWatch()
    for html, _ in jobs_:
        if not isinstance(html, Deferred):
            watch.check(html)
    n_workers = min(workers or cores(), total)
    results: list[PdfResult | None] = [None] * len(jobs_)

    if n_workers <= 1 or total < POOL_MIN_JOBS:
        image_cache: dict[str, Any] = {}
        with rendering_collector(), _progress_bar(progress, total) as advance:
            for i, (job, target) in enumerate(jobs_):
                html = _built(job, watch)
                try:
                    results[i] = render_pdf(
                        html, target, page_size=page_size, image_cache=image_cache
                    )
                except PdfUnavailable:
                    raise
                except Exception as exc:
                    raise PdfRenderError(f"{target}: {type(exc).__name__}: {exc}") from exc
                advance(_size(html))
    else:
        order = sorted(range(len(jobs_)), key=lambda i: _weight(jobs_[i][0]), reverse=True)
        # Forked on Linux: a worker starts in milliseconds with WeasyPrint imported and the
        # stylesheets parsed; elsewhere (macOS, Windows) the platform's default start method.
        with Pool(n_workers, initializer=_init_worker, initargs=(page_size,)) as pool, ExitStack() as stack:
            # The workers are forked now: only from here may the progress bar start its
            # refresh thread, as a fork should not copy a live thread.
            advance = stack.enter_context(_progress_bar(progress, total))
            handed: dict[int, tuple[int, int]] = {}  # task -> (job index, documents)

            def collect(block: bool) -> None:
                for task, result in pool.completed(block=block):
                    index, documents = handed.pop(task)
                    results[index] = result
                    advance(documents)

            for i in order:
                html = _built(jobs_[i][0], watch)
                handed[pool.submit(_render_job, html, str(jobs_[i][1]), page_size)] = (i, _size(html))
                collect(block=False)
            collect(block=True)

    final = [r for r in results if r is not None]
    _log_warnings(final)
    return final


#: How many of the characters without a glyph the one line about them names.
_MISSING_SHOWN = 40


def _log_warnings(results: Sequence[PdfResult]) -> None:
    """WeasyPrint's warnings, each once; its notes of characters no font could draw (one per
    occurrence: thousands for a Chinese class without a CJK font, which drowned the one
    warning that says what to install) become one line that names them. CJK characters are
    left out of it where no CJK font is installed: that warning, with the package, was said
    before rendering (:class:`_CjkWatch`)."""
    from qkvquiz.render.fonts import cjk_font_available, has_cjk

    missing: dict[str, None] = {}  # in order of appearance
    files = 0
    cjk_said = None  # asked at most once, and only if a CJK character is missing
    for result in results:
        found = False
        for message in result.warnings:
            char = missing_glyph(message)
            if char is None:
                _log.warning("%s: %s", result.path, message)
                continue
            if has_cjk(char):
                if cjk_said is None:
                    cjk_said = not cjk_font_available()
                if cjk_said:
                    continue
            missing.setdefault(char)
            found = True
        files += found
    if missing:
        shown = "".join(list(missing)[:_MISSING_SHOWN]) + ("…" if len(missing) > _MISSING_SHOWN else "")
        _log.warning("%d PDF%s print empty boxes for %d character%s that no installed font has: %s",
                     files, "s" if files != 1 else "", len(missing), "s" if len(missing) != 1 else "", shown)
