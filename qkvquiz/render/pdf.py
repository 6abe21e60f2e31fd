"""HTML documents → PDF files with WeasyPrint: one at a time, or many in a process pool.

WeasyPrint needs system libraries (Pango, HarfBuzz). Where they are missing,
:class:`PdfUnavailable` names the packages to install; WeasyPrint is imported only when a
PDF is asked for, and the Markdown and HTML renderers never import it, so they keep
working.

Every PDF is written to a temporary file beside its target and moved into place, so a
target is either the old file or the complete new one, never half a PDF. ``generate`` gives
targets inside its staging folder (:mod:`qkvquiz.core.outputs`), so the pool never writes into
the user's folder itself. Pool workers end with the run: on an error, Ctrl-C or SIGTERM the
pool is killed and joined before :func:`render_pdfs` returns, and on Linux a worker also
dies when its parent is killed outright (SIGKILL).
"""

from __future__ import annotations

import ctypes.util
import gc
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from qkvquiz.core.outputs import write_file
from qkvquiz.core.pool import Pool, cores
from qkvquiz.render.fonts import warn_if_no_cjk_font
from qkvquiz.render.page import BASE_STYLE_MARKER, base_stylesheet_text, page_size_css

#: Debian/Ubuntu packages WeasyPrint loads at run time.
DEBIAN_PACKAGES: tuple[str, ...] = ("libpango-1.0-0", "libpangoft2-1.0-0", "libharfbuzz-subset0")
#: Below this many documents a pool costs more (worker start-up) than it saves.
POOL_MIN_JOBS = 3

_log = logging.getLogger(__name__)


class PdfUnavailable(RuntimeError):
    """PDF output cannot run here: WeasyPrint or the system libraries it loads are missing."""


class PdfRenderError(RuntimeError):
    """One document failed to render; the message names its target file."""


@dataclass(frozen=True)
class PdfResult:
    """One written PDF: where, how many pages, and what WeasyPrint warned about."""

    path: Path
    pages: int
    warnings: tuple[str, ...] = ()


def _install_hint(detail: str) -> str:
    return (
        "PDF output needs WeasyPrint and the system libraries it loads "
        f"({detail}). On Debian or Ubuntu install them with:\n"
        f"    sudo apt-get install {' '.join(DEBIAN_PACKAGES)}\n"
        "(elsewhere: Pango ≥ 1.44 and HarfBuzz with its subset library; see "
        "https://doc.courtbouillon.org/weasyprint/stable/first_steps.html). "
        "Markdown and HTML output work without them."
    )


@lru_cache(maxsize=1)
def weasyprint_module() -> ModuleType:
    """Import WeasyPrint, or raise :class:`PdfUnavailable` saying what to install."""
    try:
        import weasyprint

        subset_found = ctypes.util.find_library("harfbuzz-subset") is not None
    except ImportError as exc:  # the Python package itself
        raise PdfUnavailable(_install_hint(f"cannot import weasyprint: {exc}")) from exc
    except OSError as exc:  # cffi could not dlopen Pango / GObject / HarfBuzz
        raise PdfUnavailable(_install_hint(f"missing system library: {exc}")) from exc
    if not subset_found:
        # WeasyPrint still works, but warns on every document and embeds fonts slowly.
        _log.warning(
            "libharfbuzz-subset was not found: PDFs render more slowly and WeasyPrint "
            "warns about font subsetting; install libharfbuzz-subset0"
        )
    return weasyprint


def pdf_available() -> bool:
    """Whether PDF output can run here (see :func:`weasyprint_module` for the reason)."""
    try:
        weasyprint_module()
    except PdfUnavailable:
        return False
    return True


# --------------------------------------------------------------------------- one document


# WeasyPrint's fallback note where libharfbuzz-subset is missing: a fact about the machine,
# said once by weasyprint_module(), not a problem of the document being rendered.
_MACHINE_NOTE = "Using fontTools instead of HarfBuzz-Subset"


class _WarningCollector(logging.Handler):
    """Keeps WeasyPrint's warnings about the document being rendered."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not str(record.msg).startswith(_MACHINE_NOTE):
            self.messages.append(record.getMessage())


@contextmanager
def _collect_warnings() -> Iterator[list[str]]:
    logger = logging.getLogger("weasyprint")
    handler = _WarningCollector()
    logger.addHandler(handler)
    propagate = logger.propagate
    logger.propagate = False  # reported through PdfResult, not printed a second time
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


class FetchRefused(ValueError):
    """A URL the PDF renderer will not fetch."""


def _own_resource(url: str) -> bytes | None:
    """The bytes of a ``data:`` URL, of a picture of the document, or of a bundled template
    file; None for anything else."""
    if url.startswith("data:"):
        return None  # decoded by WeasyPrint's own handler below
    if url.startswith(_PICTURE_SCHEME):
        picture = _PICTURES.get(url)
        if picture is None:
            raise FetchRefused(f"not fetched: {url[:80]} (no such picture in this document)")
        return picture[0]
    if not url.startswith("file:"):
        raise FetchRefused(f"not fetched: {url[:80]} (a PDF loads only its own pictures and styles)")
    from urllib.parse import unquote, urlsplit

    from qkvquiz.core.resources import templates_dir

    folder = templates_dir().resolve()
    path = Path(unquote(urlsplit(url).path)).resolve()
    if not (path.is_relative_to(folder) and path.is_file()):
        raise FetchRefused(f"not fetched: {url[:80]} (outside qkvquiz's own templates)")
    return path.read_bytes()


@lru_cache(maxsize=1)
def url_fetcher() -> Any:
    """What WeasyPrint fetches with: ``data:`` URLs and the bundled templates' files, nothing else.

    A document is self-contained (pictures are ``data:`` URLs, the style is inline), so every
    other URL is refused with a warning: ``<img src="http://…">`` is not fetched while a PDF
    renders, and ``<a rel="attachment" href="file:///…">`` attaches nothing.
    """
    urls = weasyprint_module().urls
    if hasattr(urls, "URLFetcher"):  # WeasyPrint 66 and later: a class with fetch()

        class OwnResources(urls.URLFetcher):  # type: ignore[misc, name-defined]
            def fetch(self, url: str, headers: Any = None) -> Any:
                body = _own_resource(url)
                if body is None:
                    return super().fetch(url, headers)
                return urls.URLFetcherResponse(url, body, {"Content-Type": _mime(url)})

        return OwnResources(allowed_protocols=("data", "file"), allow_redirects=False)

    def fetch(url: str) -> dict[str, Any]:  # earlier WeasyPrint: a function returning a dict
        body = _own_resource(url)
        if body is None:
            return urls.default_url_fetcher(url)
        return {"string": body, "mime_type": _mime(url), "redirected_url": url}

    return fetch


def _mime(url: str) -> str:
    import mimetypes

    if url in _PICTURES:
        return _PICTURES[url][1]

    return mimetypes.guess_type(url)[0] or "application/octet-stream"


@lru_cache(maxsize=4)
def _page_size_css(page_size: str) -> Any:
    # `!important` in a user stylesheet beats the document's own @page size.
    return weasyprint_module().CSS(
        string=f"@page {{ size: {page_size_css(page_size)} !important; }}", url_fetcher=url_fetcher()
    )


@lru_cache(maxsize=1)
def font_config() -> Any:
    """One font configuration per process, holding the faces shipped in
    ``templates/fonts/`` (see :mod:`qkvquiz.render.fonts`): every document is set in them,
    whatever fonts this machine has, and a face is loaded once, not once per document."""
    return weasyprint_module().text.fonts.FontConfiguration()


@lru_cache(maxsize=1)
def _fonts_css() -> Any:
    from qkvquiz.render.fonts import font_face_css

    # The @font-face rules register the shipped faces in font_config() as this parses.
    return weasyprint_module().CSS(
        string=font_face_css(), url_fetcher=url_fetcher(), font_config=font_config()
    )


@lru_cache(maxsize=1)
def _base_css() -> Any:
    return weasyprint_module().CSS(string=base_stylesheet_text(), url_fetcher=url_fetcher())


#: Pictures of this process's documents by the short URL that stands for their ``data:`` URL
#: (see :func:`_short_picture_urls`): URL -> (bytes, MIME type).
_PICTURES: dict[str, tuple[bytes, str]] = {}
_PICTURE_SCHEME = "qkvquiz-picture:"
#: Forgotten past this many (each is named by its content, so it comes back the same).
_PICTURES_KEPT = 4096
#: A ``data:`` URL long enough to be worth naming (a formula is 5–40 kB).
_BIG_DATA_URL = re.compile(r"""url\((['"]?)(data:(image/svg\+xml);base64,([A-Za-z0-9+/=]{1024,}))\1\)""")


def _short_picture_urls(html: str) -> str:
    """``html`` with each long ``data:`` URL of a picture in a style swapped for a short
    name that :func:`url_fetcher` serves, the same picture.

    WeasyPrint's HTML and CSS tokenizers read a formula's ``data:`` URL (tens of kilobytes
    of base64) for every document: 4% of a page with one formula. The name is a digest of
    the URL, so the documents of a batch name a picture alike, and WeasyPrint's image cache,
    keyed by URL, loads it once.
    """
    if "data:image/svg+xml;base64," not in html:
        return html

    def swap(match: re.Match[str]) -> str:
        quote, url, mime, data = match.groups()
        import hashlib

        name = _PICTURE_SCHEME + hashlib.blake2b(url.encode("ascii"), digest_size=12).hexdigest()
        if name not in _PICTURES:
            import base64
            import binascii

            try:
                body = base64.b64decode(data, validate=True)
            except binascii.Error:
                return match.group(0)
            if len(_PICTURES) >= _PICTURES_KEPT:
                _PICTURES.clear()
            _PICTURES[name] = (body, mime)
        return f"url({quote}{name}{quote})"

    return _BIG_DATA_URL.sub(swap, html)


def _stylesheets(html: str, page_size: str) -> tuple[str, list[Any]]:
    """The document, and the stylesheets to hand WeasyPrint beside it.

    A document made by :func:`qkvquiz.render.html.markdown_to_html` embeds the base
    stylesheet in a marked ``<style>``; that copy is swapped for one parsed once per
    process (parsing it cost about 5% of each page). It becomes a *user* stylesheet,
    which still beats WeasyPrint's defaults and still loses to the document's other
    styles, as it did before (they come after it).
    """
    # The shipped fonts come first, for every document.
    sheets = [_fonts_css(), _page_size_css(page_size)]
    embedded = f"<style {BASE_STYLE_MARKER}>\n{base_stylesheet_text()}\n</style>"
    if embedded in html:
        html = html.replace(embedded, "", 1)
        sheets.insert(1, _base_css())
    return _short_picture_urls(html), sheets


def layout(html: str, *, page_size: str = "A4", **options: Any) -> Any:
    """One HTML document laid out by WeasyPrint (a ``Document``), in the shipped fonts."""
    source, sheets = _stylesheets(html, page_size)
    options.setdefault("font_config", font_config())
    return weasyprint_module().HTML(string=source, url_fetcher=url_fetcher()).render(stylesheets=sheets, **options)


#: What one PDF is made of: an HTML document, or several laid out one by one and joined.
Html = str | Sequence[str]


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


def render_pdf(
    html: Html,
    target: Path | str,
    *,
    page_size: str = "A4",
    image_cache: dict[str, Any] | None = None,
) -> PdfResult:
    """Write one HTML document to ``target`` as PDF (atomically); return what was written.

    ``html`` may also be a sequence of documents (one per student): each is laid out on
    its own, so it starts on a new page and counts its own pages ("Page 1 of 2") and
    running strings, and their pages are joined into one PDF, fonts embedded once.

    ``image_cache`` is WeasyPrint's ``cache`` option: a dict shared by the documents of one
    batch, so that a formula every document shows is parsed as SVG once (about 5% of a
    page). Keep it for a batch, not for ever: each entry holds on to the document that
    first loaded it.
    """
    target = Path(target)
    page_size_css(page_size)  # reject an unknown size before any work
    documents = [html] if isinstance(html, str) else list(html)
    if not documents:
        raise ValueError(f"{target}: no document to render")
    options: dict[str, Any] = {} if image_cache is None else {"cache": image_cache}
    # The process's font configuration: it holds the shipped faces, and the parts of a
    # joined PDF share it, so a face they share is embedded once.
    options["font_config"] = font_config()
    with _collect_warnings() as warnings:
        rendered = [layout(one, page_size=page_size, **options) for one in documents]
        document = (
            rendered[0]
            if len(rendered) == 1
            else rendered[0].copy([page for part in rendered for page in part.pages])
        )
        pages = len(document.pages)
        # One writer for every file the package makes: a temporary file beside it, renamed.
        write_file(target, document.write_pdf())
        # A finished Document is a large object graph; keeping it alive made every later
        # render slower (the garbage collector kept walking it), so drop it now.
        del document, rendered
    return PdfResult(target, pages, tuple(warnings))


# --------------------------------------------------------------------------- many documents


#: A pool worker's image cache: one per worker, for the worker's one batch.
_worker_image_cache: dict[str, Any] = {}


#: Young-generation threshold while rendering: a page allocates hundreds of thousands of
#: objects, and the default (700) runs the collector thousands of times per page.
_GC_THRESHOLD = (50_000, 20, 100)


def _init_worker(page_size: str) -> None:
    _worker_image_cache.clear()
    weasyprint_module()
    _page_size_css(page_size)
    _fonts_css()
    _base_css()
    # Everything imported so far lives as long as the worker: move it out of the garbage
    # collector's sight (no collection first: a full pass over the inherited heap and WeasyPrint
    # cost each worker more than it would ever free), and collect young objects less often.
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLD)


@contextmanager
def _batch_gc() -> Iterator[None]:
    """The workers' garbage-collector settings, for a batch rendered in this process."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


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
    _fonts_css()
    _base_css()
    _page_size_css(page_size)
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
        with _batch_gc(), _progress_bar(progress, total) as advance:
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
    for result in final:
        for message in result.warnings:
            _log.warning("%s: %s", result.path, message)
    return final
