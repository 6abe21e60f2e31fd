"""An HTML document → a PDF file with WeasyPrint (many at once: :mod:`qkvquiz.render.pdf_batch`).

WeasyPrint needs system libraries (Pango, HarfBuzz). Where they are missing,
:class:`PdfUnavailable` names the packages to install; WeasyPrint is imported only when a
PDF is asked for, and the Markdown and HTML renderers never import it, so they keep
working.

Every PDF is written by the package's file writer (:func:`qkvquiz.core.outputs.write_file`):
a temporary file beside its target, moved into place, so a target is either the old file or
the complete new one, never half a PDF.
"""

from __future__ import annotations

import ctypes.util
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from qkvquiz.core.outputs import write_file
from qkvquiz.render.page import BASE_STYLE_MARKER, base_stylesheet_text, page_size_css
from qkvquiz.render.givens_in_view import laid_out_with_givens_in_view
from qkvquiz.render.printed import ANCHOR, PageAnchors, laid_out_with_page_codes, page_anchors

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
    """One written PDF: where, how many pages, and what WeasyPrint warned about; for a printed
    worksheet, where its marks, QR code and cells lie on each page (:mod:`qkvquiz.render.printed`)."""

    path: Path
    pages: int
    warnings: tuple[str, ...] = ()
    anchors: tuple[PageAnchors, ...] = ()


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


#: WeasyPrint's note for each character no font it was given has a glyph for: one per
#: occurrence, thousands for a Chinese class on a machine without a CJK font.
_NOTDEF = re.compile(r'^\.notdef glyph rendered for Unicode string unsupported by fonts: "(.+)" \(U\+[0-9A-Fa-f]+\)$',
                     re.DOTALL)


def missing_glyph(message: str) -> str | None:
    """The character a WeasyPrint warning says no font could draw (printed as an empty box),
    or None for any other warning."""
    found = _NOTDEF.match(message)
    return found.group(1) if found else None


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
def page_size_stylesheet(page_size: str) -> Any:
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
def fonts_stylesheet() -> Any:
    from qkvquiz.render.fonts import font_face_css

    # The @font-face rules register the shipped faces in font_config() as this parses.
    return weasyprint_module().CSS(
        string=font_face_css(), url_fetcher=url_fetcher(), font_config=font_config()
    )


@lru_cache(maxsize=1)
def base_stylesheet() -> Any:
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

    A document made by :func:`qkvquiz.render.html_page.markdown_to_html` embeds the base
    stylesheet in a marked ``<style>``; that copy is swapped for one parsed once per
    process (parsing it cost about 5% of each page). It becomes a *user* stylesheet,
    which still beats WeasyPrint's defaults and still loses to the document's other
    styles, as it did before (they come after it).
    """
    # The shipped fonts come first, for every document.
    sheets = [fonts_stylesheet(), page_size_stylesheet(page_size)]
    embedded = f"<style {BASE_STYLE_MARKER}>\n{base_stylesheet_text()}\n</style>"
    if embedded in html:
        html = html.replace(embedded, "", 1)
        sheets.insert(1, base_stylesheet())
    return _short_picture_urls(html), sheets


def layout(html: str, *, page_size: str = "A4", **options: Any) -> Any:
    """One HTML document laid out by WeasyPrint (a ``Document``), in the shipped fonts."""
    source, sheets = _stylesheets(html, page_size)
    options.setdefault("font_config", font_config())
    return weasyprint_module().HTML(string=source, url_fetcher=url_fetcher()).render(stylesheets=sheets, **options)


#: What one PDF is made of: an HTML document, or several laid out one by one and joined.
Html = str | Sequence[str]




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
        # A worksheet whose problem breaks between parts is laid out again with the givens
        # repeated over the part that opens a page away from them.
        # A printed worksheet longer than the QR codes it was given is laid out again with one for
        # every page (qkvquiz/render/printed.py).
        rendered = [laid_out_with_page_codes(one, lambda o: laid_out_with_givens_in_view(
                        o, lambda h: layout(h, page_size=page_size, **options)))
                    for one in documents]
        document = (
            rendered[0]
            if len(rendered) == 1
            else rendered[0].copy([page for part in rendered for page in part.pages])
        )
        pages = len(document.pages)
        # Where the printed sheet's marks and cells lie, for the cell map beside the key.
        anchors = tuple(page_anchors(p) for p in document.pages) if any(ANCHOR in one for one in documents) else ()
        # One writer for every file the package makes: a temporary file beside it, renamed.
        write_file(target, document.write_pdf())
        # A finished Document is a large object graph; keeping it alive made every later
        # render slower (the garbage collector kept walking it), so drop it now.
        del document, rendered
    return PdfResult(target, pages, tuple(warnings), anchors)
