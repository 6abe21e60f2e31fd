"""Fitting a scanned page to its printed page: QR code first, then the four corner marks.

The QR code's corners give a first, rough map from page points to scan pixels; it already holds
the page's turn (90°, 180°, 270°), since the decoder reports the symbol's own top-left corner.
Each registration mark (a filled disc) is then looked for near where that map puts it, and an
affine map (rotation, scale, shear, shift: what a copier does) is fitted to the four marks by
least squares. When one mark is smudged or cut off, the fit of the other three is kept if it
agrees with the QR code (as Auto Multiple Choice does); fewer than three marks is a refusal.
The page is then resampled into a fixed frame (``PX_PER_PT`` pixels per point, 200 dpi) in
which every cell of the cell map is a plain slice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..core.i18n import _
from .cellmap import Page
from .requirements import need

#: Pixels per point of the frame cells are cut from: 200 dpi, where a pen stroke is 3 to 5 pixels.
PX_PER_PT = 200 / 72
#: A mark fitted further than this from the fit of the others (in points, 0.7 mm) is out.
MAX_MARK_ERROR_PT = 2.0


class AlignError(ValueError):
    """The page cannot be fitted; the message says why."""


@dataclass(frozen=True)
class Fit:
    matrix: np.ndarray  # (2, 3): scan pixel = matrix @ [x_pt, y_pt, 1]
    marks_used: int
    error_pt: float  # the largest distance of a used mark from the fit, in points


def affine(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """The least-squares affine map taking points ``src`` (n, 2) to ``dst`` (n, 2), as a (2, 3) matrix."""
    a = np.hstack([src, np.ones((len(src), 1))])
    solution, *_rest = np.linalg.lstsq(a, dst, rcond=None)
    return solution.T


def apply(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    return points @ matrix[:, :2].T + matrix[:, 2]


def _box_sums(dark: np.ndarray, k: int) -> np.ndarray:
    """Sum of ``dark`` over every k×k square (integral image); index = the square's top-left."""
    s = np.zeros((dark.shape[0] + 1, dark.shape[1] + 1))
    s[1:, 1:] = dark.cumsum(0).cumsum(1)
    return s[k:, k:] - s[:-k, k:] - s[k:, :-k] + s[:-k, :-k]


def find_mark(image: np.ndarray, guess: np.ndarray, diameter_px: float, radius_px: float) -> np.ndarray | None:
    """The centre of the darkest disc-sized spot within ``radius_px`` of ``guess``, or None when
    nothing there is dark enough to be a printed mark."""
    h, w = image.shape
    x0, y0 = int(max(0, guess[0] - radius_px)), int(max(0, guess[1] - radius_px))
    x1, y1 = int(min(w, guess[0] + radius_px)), int(min(h, guess[1] + radius_px))
    k = max(3, int(diameter_px * 0.7))  # a square inside the disc
    if x1 - x0 <= k + 2 or y1 - y0 <= k + 2:
        return None
    window = 1.0 - image[y0:y1, x0:x1].astype(np.float64) / 255.0
    sums = _box_sums(window, k)
    r, c = np.unravel_index(int(np.argmax(sums)), sums.shape)
    if sums[r, c] / (k * k) < 0.55:  # a filled disc is black through and through
        return None
    # Refine: the centroid of the dark pixels around the best square.
    pad = int(diameter_px * 0.8)
    cy, cx = r + k / 2, c + k / 2
    ys, xs = slice(max(0, int(cy - pad)), int(cy + pad)), slice(max(0, int(cx - pad)), int(cx + pad))
    patch = window[ys, xs]
    weight = np.where(patch > 0.5, patch, 0.0)
    if weight.sum() <= 0:
        return None
    gy, gx = np.mgrid[ys.start:ys.start + patch.shape[0], xs.start:xs.start + patch.shape[1]]
    return np.array([x0 + (gx * weight).sum() / weight.sum() + 0.5, y0 + (gy * weight).sum() / weight.sum() + 0.5])


def fit_page(image: np.ndarray, page: Page, qr_corners: np.ndarray) -> Fit:
    """The affine map from page points to scan pixels, from the QR code's corners and the marks."""
    x, y, w, h = page.qr
    qr_pt = np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]])
    rough = affine(qr_pt, qr_corners)
    px_per_pt = float(np.sqrt(abs(np.linalg.det(rough[:, :2]))))
    if not 0.5 < px_per_pt < 30:  # 36 to 2,160 dpi
        raise AlignError(_("the QR code gives %(dpi)d dpi, which no scan has") % {"dpi": round(px_per_pt * 72)})
    marks_pt = np.array(page.marks)
    found: list[np.ndarray | None] = []
    for centre in marks_pt:
        guess = apply(rough, centre[None])[0]
        # How far off the rough map can be grows with the distance from the QR code.
        reach = 12 + 0.06 * float(np.hypot(*(centre - qr_pt.mean(0))))
        found.append(find_mark(image, guess, page.mark_diameter * px_per_pt, reach * px_per_pt))
    usable = [k for k, f in enumerate(found) if f is not None]
    best: Fit | None = None
    for size in (4, 3):
        for subset in itertools.combinations(usable, size):
            src, dst = marks_pt[list(subset)], np.array([found[k] for k in subset])
            matrix = affine(src, dst)
            scale = float(np.sqrt(abs(np.linalg.det(matrix[:, :2]))))
            error = float(np.max(np.hypot(*(apply(matrix, src) - dst).T))) / scale
            # Three marks always fit exactly: check them against the QR code instead.
            check = float(np.max(np.hypot(*(apply(matrix, qr_pt) - qr_corners).T))) / scale
            if error <= MAX_MARK_ERROR_PT and check <= 6.0 and (best is None or error < best.error_pt):
                best = Fit(matrix, size, error)
        if best is not None:
            return best
    raise AlignError(_("found %(found)d of the 4 registration marks where the QR code puts them; at least 3 "
                       "that agree are needed (is a corner cut off or covered?)") % {"found": len(usable)})


def page_frame(image: np.ndarray, page: Page, fit: Fit) -> np.ndarray:
    """The scan resampled into the page's own frame at ``PX_PER_PT``: grey levels (uint8), the
    page upright, one point = ``PX_PER_PT`` pixels from the page's top-left corner."""
    Image = need("PIL.Image")
    matrix = fit.matrix.copy()
    picture = Image.fromarray(image)
    # Shrink a fine scan first (by whole factors, averaging) so resampling does not alias.
    factor = int(np.sqrt(abs(np.linalg.det(matrix[:, :2]))) / PX_PER_PT)
    if factor >= 2:
        picture = picture.reduce(factor)
        matrix = matrix / factor
    size = (int(round(page.size[0] * PX_PER_PT)), int(round(page.size[1] * PX_PER_PT)))
    # Output pixel (u, v) is page point (u, v) / PX_PER_PT (pixel centres at +0.5).
    m = matrix[:, :2] / PX_PER_PT
    t = matrix[:, 2] + (matrix[:, :2] @ np.array([0.5, 0.5])) / PX_PER_PT - 0.5
    data = (m[0, 0], m[0, 1], t[0], m[1, 0], m[1, 1], t[1])
    warped = picture.transform(size, Image.Transform.AFFINE, data, resample=Image.Resampling.BILINEAR, fillcolor=255)
    return np.asarray(warped, dtype=np.uint8)
