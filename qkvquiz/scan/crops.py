"""Pictures for the person who reviews a reading: an entry's cells as scanned, and its whole page.

Both are cut from the page frame (:func:`qkvquiz.scan.align.page_frame`: the scan fitted to its
printed page, upright), so a picture shows what the reader read, the right way up, whatever way
the page went through the scanner. Grey levels: an entry as PNG (sharp edges, a few kilobytes),
the page as JPEG at half the frame's resolution (100 dpi), enough to read a student's working
beside the answer (a noisy scan's page as PNG took ten times as long to encode).
"""

from __future__ import annotations

import io

import numpy as np

from .align import PX_PER_PT
from .cellmap import Entry
from .requirements import need

#: Points of page shown around an entry's cells, so that a digit written over its border shows whole.
ENTRY_MARGIN_PT = 6.0
#: The whole page is shown at 1/PAGE_REDUCTION of the frame's 200 dpi, JPEG of this quality.
PAGE_REDUCTION = 2
PAGE_QUALITY = 85


def _png(pixels: np.ndarray) -> bytes:
    Image = need("PIL.Image")
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "PNG", optimize=False, compress_level=1)
    return buffer.getvalue()


def entry_box(entry: Entry) -> tuple[float, float, float, float]:
    """The box (x, y, width, height, in points) around all of an entry's cells."""
    boxes = [entry.sign, *entry.digits, entry.left_blank, *([entry.minus_infinity] if entry.minus_infinity else [])]
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[0] + b[2] for b in boxes), max(b[1] + b[3] for b in boxes)
    return x0, y0, x1 - x0, y1 - y0


def entry_png(frame: np.ndarray, entry: Entry) -> bytes:
    """The entry's cells (sign, digits, tick boxes) with a margin, as a PNG."""
    x, y, w, h = entry_box(entry)
    m = ENTRY_MARGIN_PT
    top, left = max(int((y - m) * PX_PER_PT), 0), max(int((x - m) * PX_PER_PT), 0)
    bottom = min(int((y + h + m) * PX_PER_PT) + 1, frame.shape[0])
    right = min(int((x + w + m) * PX_PER_PT) + 1, frame.shape[1])
    return _png(np.ascontiguousarray(frame[top:bottom, left:right]))


def page_jpeg(frame: np.ndarray) -> bytes:
    """The whole page, upright, at 100 dpi, as a JPEG."""
    Image = need("PIL.Image")
    buffer = io.BytesIO()
    Image.fromarray(frame).reduce(PAGE_REDUCTION).save(buffer, "JPEG", quality=PAGE_QUALITY)
    return buffer.getvalue()
