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
    neighbours are ink (a pen stroke at 200 dpi is 3 or more pixels wide; a speck is 1)."""
    p = np.pad(mask, ((0, 1), (0, 1)), constant_values=False)
    return p[:-1, :-1] & p[1:, :-1] & p[:-1, 1:] & p[1:, 1:]


def _dilate(mask: np.ndarray) -> np.ndarray:
    """Dilation by the same square, the other way round (so that erosion then dilation is an opening)."""
    p = np.pad(mask, ((1, 0), (1, 0)), constant_values=False)
    return p[1:, 1:] | p[:-1, 1:] | p[1:, :-1] | p[:-1, :-1]


def _grow(mask: np.ndarray) -> np.ndarray:
    """Dilation by a 3×3 square: a stroke and its grey rim."""
    p = np.pad(mask, 1, constant_values=False)
    out = np.zeros_like(mask)
    for dy in range(3):
        for dx in range(3):
            out |= p[dy:dy + mask.shape[0], dx:dx + mask.shape[1]]
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


def ink_share(dark: np.ndarray) -> float:
    """The share of the cell's area that is ink after cleaning."""
    return float((dark > INK).mean()) if dark.size else 0.0


def ink_box(dark: np.ndarray) -> tuple[int, int, int, int] | None:
    """Rows and columns (top, bottom, left, right; end exclusive) that hold ink, or None."""
    rows, cols = np.nonzero(dark > INK)
    if rows.size == 0:
        return None
    return int(rows.min()), int(rows.max()) + 1, int(cols.min()), int(cols.max()) + 1


def mnist_picture(dark: np.ndarray) -> np.ndarray:
    """The ink of a cleaned cell as a 28×28 picture (values 0…1): its longer side scaled to 20
    pixels and its centre of mass put at the centre, as the MNIST digits were made. A cell
    without ink gives zeros."""
    Image = need("PIL.Image")
    out = np.zeros((SIDE, SIDE))
    box = ink_box(dark)
    if box is None:
        return out
    top, bottom, left, right = box
    ink = dark[top:bottom, left:right]
    h, w = ink.shape
    scale = BOX / max(h, w)
    nh, nw = max(1, int(round(h * scale))), max(1, int(round(w * scale)))
    small = np.asarray(Image.fromarray((ink * 255).astype(np.uint8)).resize((nw, nh), Image.Resampling.BOX),
                       dtype=np.float64) / 255.0
    total = small.sum()
    if total <= 0:
        return out
    gy, gx = np.mgrid[0:nh, 0:nw]
    cy, cx = (gy * small).sum() / total, (gx * small).sum() / total
    oy, ox = int(round(SIDE / 2 - cy - 0.5)), int(round(SIDE / 2 - cx - 0.5))
    oy, ox = min(max(oy, 0), SIDE - nh), min(max(ox, 0), SIDE - nw)
    out[oy:oy + nh, ox:ox + nw] = small
    return out


def features(dark: np.ndarray) -> np.ndarray:
    """The model's input for one cleaned cell: the 28×28 picture and how much of the cell is ink,
    how tall and how wide the ink is (a speck and a digit can look alike once scaled up)."""
    box = ink_box(dark)
    h, w = dark.shape
    extent = (0.0, 0.0) if box is None else ((box[1] - box[0]) / h, (box[3] - box[2]) / w)
    return np.concatenate([mnist_picture(dark).ravel(), [ink_share(dark) * 10, extent[0], extent[1]]])
