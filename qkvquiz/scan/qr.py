"""The QR code on every printed page: which set, which variant, which page; nothing more.

The payload is ``QKVQ1/<SET>/<VARIANT>/<PAGE>``, e.g. ``QKVQ1/3F9C0A12BE47/K7QF-2M3X/2``: the
set code (upper case), the variant code printed on the sheet and the page number. Nothing in it
helps a student: the set code and the variant code are one-way digests already printed on the
sheet, and neither names a seed, an answer or another student. Every character is in QR's
alphanumeric alphabet, so the symbol is small (version 2, 25×25 modules, at level M).

Writing uses ``segno`` (a dependency of qkvquiz: every printed page carries a code); reading uses
``zxing-cpp`` (a self-contained wheel, no system library), restricted to QR codes so that no other
barcode format is misread, which comes with the ``scan`` extra: ``pip install 'qkvquiz[scan]'``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .requirements import need

PREFIX = "QKVQ1"
_PAYLOAD = re.compile(r"QKVQ1/([0-9A-F]{12})/([0-9A-Z]{4}-[0-9A-Z]{4})/([1-9][0-9]{0,2})")


@dataclass(frozen=True)
class PageCode:
    set_id: str  # lower case, as the key writes it
    variant: str
    page: int


@dataclass(frozen=True)
class FoundCode:
    """A decoded page code and where its symbol lies in the image (pixel corners, the symbol's
    own top-left, top-right, bottom-right and bottom-left, whatever way the page is turned)."""

    code: PageCode
    corners: np.ndarray  # (4, 2) x, y


def payload(code: PageCode) -> str:
    if not re.fullmatch(r"[0-9a-f]{12}", code.set_id) or not re.fullmatch(r"[0-9A-Z]{4}-[0-9A-Z]{4}", code.variant) \
            or not 1 <= code.page <= 999:
        raise ValueError(f"cannot encode {code}: a set code, a variant code and a page from 1 to 999")
    return f"{PREFIX}/{code.set_id.upper()}/{code.variant}/{code.page}"


def parse_payload(text: str) -> PageCode | None:
    """The page code a QR text holds, or None for any other text (another QR code on the sheet)."""
    match = _PAYLOAD.fullmatch(text.strip())
    if match is None:
        return None
    return PageCode(match.group(1).lower(), match.group(2), int(match.group(3)))


def qr_modules(code: PageCode) -> np.ndarray:
    """The symbol's dark modules as a boolean array (no quiet zone): draw it, or hand it to a renderer."""
    segno = need("segno")
    symbol = segno.make_qr(payload(code), error="m", mode="alphanumeric", boost_error=False)
    return np.array([list(row) for row in symbol.matrix], dtype=bool)


def qr_svg_path(code: PageCode, size: float) -> str:
    """An SVG path (``d``) of the symbol's dark modules drawn in a square of ``size`` units."""
    modules = qr_modules(code)
    unit = size / modules.shape[0]
    return " ".join(f"M{c * unit:.3f} {r * unit:.3f}h{unit:.3f}v{unit:.3f}h{-unit:.3f}z"
                    for r, c in zip(*np.nonzero(modules)))


def find_codes(image: np.ndarray) -> list[FoundCode]:
    """Every qkvquiz page code in a grey image (uint8, 2-d), with its corners; other QR codes are left out."""
    zxingcpp = need("zxingcpp")
    found = []
    for barcode in zxingcpp.read_barcodes(np.ascontiguousarray(image), formats=zxingcpp.BarcodeFormat.QRCode):
        code = parse_payload(barcode.text)
        if code is None:
            continue
        p = barcode.position
        corners = np.array([[q.x, q.y] for q in (p.top_left, p.top_right, p.bottom_right, p.bottom_left)], float)
        found.append(FoundCode(code, corners))
    return found
