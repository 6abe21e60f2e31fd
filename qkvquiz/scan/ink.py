"""Ink in a cell: darkness, small specks removed, and the digit drawn the way MNIST draws digits.

Used alike when the digit model is trained (``tools/train_digits.py``) and when a scan is read,
so that the model sees exactly what it was taught on.
"""

from __future__ import annotations

import numpy as np

from .requirements import need

#: A pixel is ink when its darkness (0 paper … 1 the page's black) is above this.
INK = 0.45
#: The model's input: a 28×28 picture, the ink's longer side 20 pixels, centred by its mass (as MNIST).
SIDE, BOX = 28, 20


def darkness(grey: np.ndarray, white: float, black: float) -> np.ndarray:
    """Grey levels as darkness from 0 (paper) to 1 (the page's own black)."""
    span = max(white - black, 1.0)
    return np.clip((white - grey.astype(np.float64)) / span, 0.0, 1.0)


def _erode(mask: np.ndarray) -> np.ndarray:
    """Erosion by a 2×2 square: a pixel stays when it and its right, lower and lower-right
    neighbours are ink (a pen stroke at 200 dpi is 3 or more pixels wide; a speck is 1). Done a
    row and a column at a time (the square is the product of two pairs), nothing ink outside."""
    across = mask.copy()
    across[:, :-1] &= mask[:, 1:]
    across[:, -1:] = False
    out = across.copy()
    out[:-1] &= across[1:]
    out[-1:] = False
    return out


def _dilate(mask: np.ndarray) -> np.ndarray:
    """Dilation by the same square, the other way round (so that erosion then dilation is an opening)."""
    across = mask.copy()
    across[:, 1:] |= mask[:, :-1]
    out = across.copy()
    out[1:] |= across[:-1]
    return out


def _grow(mask: np.ndarray) -> np.ndarray:
    """Dilation by a 3×3 square: a stroke and its grey rim."""
    across = mask.copy()
    across[:, 1:] |= mask[:, :-1]
    across[:, :-1] |= mask[:, 1:]
    out = across.copy()
    out[1:] |= across[:-1]
    out[:-1] |= across[1:]
    return out


#: Rows and columns at each edge of a cell where a sliver of the printed border may lie.
EDGE = 3


def clean(dark: np.ndarray) -> np.ndarray:
    """Darkness with specks smaller than a pen stroke removed (a morphological opening of the ink)
    and with any sliver of the printed border along the cell's edges (a row or column near the
    edge that is mostly ink: no digit fills an edge that way)."""
    mask = dark > INK
    if mask.shape[0] > 4 * EDGE and mask.shape[1] > 4 * EDGE:
        dark = dark.copy()
        for k in (*range(EDGE), *range(-EDGE, 0)):
            if mask[k, :].mean() > 0.6:
                dark[k, :] = 0.0
            if mask[:, k].mean() > 0.6:
                dark[:, k] = 0.0
        mask = dark > INK
    kept = _dilate(_erode(mask))
    # Keep the grey edge of every stroke that survived (anti-aliasing), drop everything else.
    return np.where(_grow(kept), dark, 0.0)


#: Ink in the middle of a digit cell (this share of its width and height in from each side) is
#: surely the cell's own; strokes that touch it are followed out to REACH beyond the printed
#: border (a digit written taller or wider than its cell), ink that does not is left out (a
#: neighbour's tail, a speck, the border).
CORE = 0.18
REACH_X, REACH_Y = 0.2, 0.3
#: Pixels each side of a printed border line that may be the line itself.
BAND = 2
#: A digit written faintly (a hard pencil, a thin pen) is ink at half its own darkness, but never
#: below this (paper grain and JPEG noise stay paper).
FAINT = 0.2


def _reconstruct(seed: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Every pixel of ``mask`` connected (8-neighbourhood) to ``seed``: grow and cut back until
    nothing changes (morphological reconstruction)."""
    kept = seed & mask
    for _ in range(4 * max(mask.shape)):
        grown = _grow(kept) & mask
        if np.array_equal(grown, kept):
            break
        kept = grown
    return kept


def _erase_border(mask: np.ndarray, at: int, start: int, stop: int, horizontal: bool) -> tuple[np.ndarray, np.ndarray]:
    """Remove a printed border line lying near row (or column) ``at`` between ``start`` and
    ``stop``, where it is a line (most of that run is ink). Works on ``mask`` in place; returns
    where a stroke crosses the band (ink beside it on both sides): the bridges that keep the
    stroke in one piece (wide enough for a slanted stroke) and the crossings, the stroke's own
    columns, which stay ink."""
    view = mask if horizontal else mask.T
    bridges, crossings = np.zeros_like(view), np.zeros_like(view)
    lo, hi = max(at - BAND, 0), min(at + BAND + 1, view.shape[0])
    if hi > lo and stop > start and view[lo:hi, start:stop].mean(axis=1).max() >= 0.6:
        # A printed line (a stroke along the border is never that long).
        before = view[max(lo - 2, 0):lo].any(axis=0)
        after = view[hi:hi + 2].any(axis=0)
        reach = np.ones(2 * BAND + 3)
        both = (np.convolve(before, reach, "same") > 0) & (np.convolve(after, reach, "same") > 0)
        bridges[lo:hi] = both & view[lo:hi].any(axis=0)
        crossings[lo:hi] = both & (before | after) & view[lo:hi].any(axis=0)
        view[lo:hi, start:stop] = False
    if horizontal:
        return bridges, crossings
    return bridges.T, crossings.T


def digit_ink(dark: np.ndarray, left: int, top: int, right: int, bottom: int) -> np.ndarray:
    """The ink written in the digit cell whose printed border runs along pixel rows ``top``,
    ``bottom`` and columns ``left``, ``right`` of ``dark``: strokes touching the cell's middle,
    followed past the border; the border line, specks and other cells' ink left out. Returned
    as darkness in a frame of the cell plus REACH on each side (zero where no ink was kept)."""
    h, w = bottom - top, right - left
    rx, ry = int(round(w * REACH_X)), int(round(h * REACH_Y))
    region = np.zeros((h + 2 * ry, w + 2 * rx))
    y0, x0 = top - ry, left - rx
    sy0, sx0 = max(y0, 0), max(x0, 0)
    sy1, sx1 = min(bottom + ry, dark.shape[0]), min(right + rx, dark.shape[1])
    if sy1 > sy0 and sx1 > sx0:
        region[sy0 - y0:sy1 - y0, sx0 - x0:sx1 - x0] = dark[sy0:sy1, sx0:sx1]
    # Faint writing is strengthened so that its strokes are ink like a pen's: half the darkness of
    # the cell's darkest ink becomes INK.
    level = min(max(0.5 * float(np.percentile(region[ry:ry + h, rx:rx + w], 99)), FAINT), INK)
    region = np.minimum(region * (INK / level), 1.0)
    mask = region > INK
    bridges, crossings = np.zeros_like(mask), np.zeros_like(mask)
    for at, horizontal in ((ry, True), (ry + h, True), (rx, False), (rx + w, False)):
        bridge, crossing = _erase_border(mask, at, *((rx, rx + w) if horizontal else (ry, ry + h)), horizontal)
        bridges |= bridge
        crossings |= crossing
    core = np.zeros_like(mask)
    cy, cx = int(round(h * CORE)), int(round(w * CORE))
    core[ry + cy:ry + h - cy, rx + cx:rx + w - cx] = True
    # Strokes start where a pen-wide stroke lies in the middle (a speck is too small to be one);
    # thin stretches connected to them come along.
    kept = _reconstruct(core & _dilate(_erode(mask)), mask | bridges)
    # The grey edge of every kept stroke (anti-aliasing) comes along; the border's own rows do not.
    return np.where(_grow(kept) & (mask | crossings | ~(region > INK)), region, 0.0)


def ink_share(dark: np.ndarray) -> float:
    """The share of the cell's area that is ink after cleaning."""
    return float((dark > INK).mean()) if dark.size else 0.0


def ink_box(dark: np.ndarray) -> tuple[int, int, int, int] | None:
    """Rows and columns (top, bottom, left, right; end exclusive) that hold ink, or None."""
    rows, cols = np.nonzero(dark > INK)
    if rows.size == 0:
        return None
    return int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1


def _framed(dark: np.ndarray, box: tuple[int, int, int, int], longest: int):
    """The ink inside ``box`` scaled so its longer side is ``longest`` pixels, and its centre of
    mass; None when nothing is left."""
    Image = need("PIL.Image")
    top, bottom, left, right = box
    ink = dark[top:bottom, left:right]
    h, w = ink.shape
    scale = longest / max(h, w)
    nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    small = np.asarray(Image.fromarray((ink * 255).astype(np.uint8)).resize((nw, nh), Image.Resampling.BOX),
                       dtype=np.float64) / 255.0
    total = small.sum()
    if total <= 0:
        return None
    cy = (small.sum(axis=1) @ np.arange(nh)) / total
    cx = (small.sum(axis=0) @ np.arange(nw)) / total
    return small, cy, cx


def _placed(framed, nudge: tuple[int, int]) -> np.ndarray:
    out = np.zeros((SIDE, SIDE))
    if framed is None:
        return out
    small, cy, cx = framed
    nh, nw = small.shape
    oy, ox = int(round(SIDE / 2 - cy - 0.5)) + nudge[0], int(round(SIDE / 2 - cx - 0.5)) + nudge[1]
    oy, ox = min(max(oy, 0), SIDE - nh), min(max(ox, 0), SIDE - nw)
    out[oy:oy + nh, ox:ox + nw] = small
    return out


def feature_views(dark: np.ndarray, cell: tuple[int, int] | None = None,
                  views: tuple[tuple[int, tuple[int, int]], ...] = ((BOX, (0, 0)),)) -> np.ndarray:
    """The model's input for one cell's ink, one row per view: the 28×28 picture (values 0…1) of
    the ink, its longer side scaled to ``longest`` pixels (20 is how the MNIST digits were made)
    and its centre of mass put at the centre, moved by ``nudge``; then how much of the cell is ink
    and how tall and how wide the ink is (a speck and a digit can look alike once scaled up), as
    shares of the cell's own height and width ``cell`` (the array's shape when not given)."""
    box = ink_box(dark)
    h, w = cell or dark.shape
    extent = (0.0, 0.0) if box is None else ((box[1] - box[0]) / h, (box[3] - box[2]) / w)
    extras = [float((dark > INK).sum()) / (h * w) * 10, extent[0], extent[1]]
    framed: dict[int, object] = {}
    rows = []
    for longest, nudge in views:
        if longest not in framed:
            framed[longest] = None if box is None else _framed(dark, box, longest)
        rows.append(np.concatenate([_placed(framed[longest], nudge).ravel(), extras]))
    return np.stack(rows)


def features(dark: np.ndarray, cell: tuple[int, int] | None = None) -> np.ndarray:
    """The model's input for one cell's ink in the first view (how MNIST frames a digit)."""
    return feature_views(dark, cell)[0]
