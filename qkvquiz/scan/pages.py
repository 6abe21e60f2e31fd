"""Page images out of what a copier writes: PDFs of scanned pages, PNG, JPEG and TIFF files.

A scanned PDF is a container of one bitmap per page: that bitmap is taken as it is (pypdf's
``page.images``), never re-rendered, so the scan keeps its own resolution. A PDF page that holds
no image, or several images none of which is the page, is listed as a problem, as is any file or
page that cannot be decoded: one bad page never stops the others. Files are only read.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.i18n import _
from ..core.inputs import InputError, read_bytes, shown_path
from .requirements import need

MAX_SCAN_BYTES = 2_000_000_000  # one scan file: a few hundred pages at 600 dpi
MAX_PAGE_PIXELS = 150_000_000  # an A3 page at 800 dpi; more is no scanner's page


@dataclass(frozen=True)
class PageImage:
    source: str  # "scans/a.pdf, page 3"
    image: np.ndarray  # grey levels, uint8, 2-d


@dataclass(frozen=True)
class PageProblem:
    source: str
    reason: str


def grey(image) -> np.ndarray:
    """A Pillow image as grey levels (uint8): colour, black-and-white, 16-bit and palette scans alike."""
    Image = need("PIL.Image")
    if image.width * image.height > MAX_PAGE_PIXELS:
        raise ValueError(_("the image is %(width)d×%(height)d pixels; a page has at most %(most)s")
                         % {"width": image.width, "height": image.height, "most": f"{MAX_PAGE_PIXELS:,}"})
    if image.mode in ("I;16", "I;16B", "I;16L", "I", "F"):
        values = np.asarray(image, dtype=np.float64)
        top = values.max() if values.size and values.max() > 0 else 1.0
        return np.clip(values / top * 255.0, 0, 255).astype(np.uint8)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        # Transparent parts of a page are paper: lay the image on white.
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    return np.asarray(image.convert("L"), dtype=np.uint8)


def page_of(source: str, number: int) -> str:
    """Where a page lies: page ``number`` of the file ``source``, in the scan's language."""
    return _("%(file)s, page %(number)d") % {"file": source, "number": number}


def _error(exc: Exception) -> str:
    """What a reading library said of a broken file, in its words but without Python's: no class
    name, no object's address ("<_io.BytesIO object at 0x7f…>")."""
    said = re.sub(r"\s*<[^<>]*\bat 0x[0-9a-fA-F]+>", "", str(exc)).strip()
    return said or _("no reason given")


def _image_pages(raw: bytes, source: str) -> Iterator[PageImage | PageProblem]:
    Image = need("PIL.Image")
    ImageSequence = need("PIL.ImageSequence")
    try:
        with warnings.catch_warnings():
            # A picture that claims more pixels than any page has is refused, not decoded.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(raw))
    except Exception as exc:  # noqa: BLE001 - a file Pillow cannot read is a problem to list, whatever it is
        yield PageProblem(source, _("not an image Pillow can read (%(error)s)") % {"error": _error(exc)})
        return
    frames = getattr(opened, "n_frames", 1)
    for number, frame in enumerate(ImageSequence.Iterator(opened), start=1):
        where = page_of(source, number) if frames > 1 else source
        try:
            yield PageImage(where, grey(frame))
        except Exception as exc:  # noqa: BLE001
            yield PageProblem(where, _("cannot decode the image (%(error)s)") % {"error": _error(exc)})


def _pdf_pages(raw: bytes, source: str) -> Iterator[PageImage | PageProblem]:
    pypdf = need("pypdf")
    try:
        reader = pypdf.PdfReader(io.BytesIO(raw))
        count = len(reader.pages)
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds on broken files
        yield PageProblem(source, _("not a PDF pypdf can read (%(error)s)") % {"error": _error(exc)})
        return
    for number in range(count):
        where = page_of(source, number + 1)
        try:
            images = [found.image for found in reader.pages[number].images]
        except Exception as exc:  # noqa: BLE001
            yield PageProblem(where, _("cannot read the page's images (%(error)s)") % {"error": _error(exc)})
            continue
        if not images:
            yield PageProblem(where, _("holds no scanned image (is it the printed PDF rather than a scan?)"))
            continue
        sizes = [im.width * im.height for im in images]
        largest = int(np.argmax(sizes))
        if sizes[largest] < 0.9 * sum(sizes):
            yield PageProblem(where, _("holds %(count)d images, none of them the whole page") % {"count": len(images)})
            continue
        try:
            yield PageImage(where, grey(images[largest]))
        except Exception as exc:  # noqa: BLE001
            yield PageProblem(where, _("cannot decode the page's image (%(error)s)") % {"error": _error(exc)})


#: The files a folder of scans is read for (a copier's output folder holds little else).
SCAN_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff")


def scan_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, bool]]:
    """Each file as given, and for a folder its PDF and image files (sorted by name; not hidden
    ones, not below it): ``(path, named)``, ``named`` False for a file found in a folder, which is
    then never read through a link (it could lead out of the folder)."""
    for path in map(Path, paths):
        if path.is_dir() and not path.is_symlink():
            found = sorted(p for p in path.iterdir() if p.suffix.lower() in SCAN_SUFFIXES and not p.name.startswith("."))
            if not found:
                yield path, True  # listed as a problem: a folder is no scan
            yield from ((p, False) for p in found)
        else:
            yield path, True


def load_pages(paths: Iterable[str | Path]) -> Iterator[PageImage | PageProblem]:
    """Every page of every file, in order, each as an image or as a problem with its reason; a
    folder stands for its scan files (:func:`scan_files`)."""
    for path, named in scan_files(paths):
        source = shown_path(path)
        try:
            raw = read_bytes(path, MAX_SCAN_BYTES, "scan", follow=named)
        except InputError as exc:
            yield PageProblem(source, exc.message)
            continue
        if raw.startswith(b"%PDF-") or Path(path).suffix.lower() == ".pdf":
            yield from _pdf_pages(raw, source)
        else:
            yield from _image_pages(raw, source)
