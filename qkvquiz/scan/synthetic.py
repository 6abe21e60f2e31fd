"""Handwriting put into cells: how the digit model is taught and how test pages are filled.

A handwritten digit (a 28×28 MNIST picture, values 0…1) is drawn at the size a student writes
in a cell, slanted, thinned or thickened, its ink a little grey; :func:`training_cell` wraps that
in the noise a scan adds and :func:`blank_cell` makes the empty cells the model must call blank
(specks, a smudge, a sliver of the printed box). ``tools/train_digits.py`` and the tests use them.
"""

from __future__ import annotations

import numpy as np

from .requirements import need


def handwritten(digit: np.ndarray, height_px: int, rng: np.random.Generator) -> np.ndarray:
    """A digit picture as ink (darkness 0…1) about ``height_px`` tall, slanted, rotated and with a
    pen a little thinner or thicker than MNIST's."""
    Image = need("PIL.Image")
    ImageFilter = need("PIL.ImageFilter")
    picture = Image.fromarray((np.clip(digit, 0, 1) * 255).astype(np.uint8))
    up = 4
    picture = picture.resize((28 * up, 28 * up), Image.Resampling.BILINEAR)
    shear = rng.uniform(-0.25, 0.25)
    picture = picture.transform(picture.size, Image.Transform.AFFINE, (1, shear, -shear * 14 * up, 0, 1, 0),
                                resample=Image.Resampling.BILINEAR)
    picture = picture.rotate(rng.uniform(-10, 10), resample=Image.Resampling.BILINEAR)
    pen = rng.random()
    if pen < 0.15:
        picture = picture.filter(ImageFilter.MinFilter(3))
    elif pen > 0.75:
        picture = picture.filter(ImageFilter.MaxFilter(3))
    ink = np.asarray(picture, dtype=np.float64) / 255.0
    rows, cols = np.nonzero(ink > 0.2)
    if rows.size == 0:
        return np.zeros((1, 1))
    ink = ink[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
    scale = height_px / ink.shape[0] * rng.uniform(0.9, 1.1)
    size = (max(1, int(ink.shape[1] * scale)), max(1, int(height_px)))
    small = Image.fromarray((ink * 255).astype(np.uint8)).resize(size, Image.Resampling.LANCZOS)
    return np.clip(np.asarray(small, dtype=np.float64) / 255.0, 0, 1) * rng.uniform(0.85, 1.0)


def paste(canvas: np.ndarray, ink: np.ndarray, top: int, left: int) -> None:
    """Lay ink on a darkness canvas (darker wins), clipped at its edges."""
    h, w = ink.shape
    t0, l0 = max(top, 0), max(left, 0)
    t1, l1 = min(top + h, canvas.shape[0]), min(left + w, canvas.shape[1])
    if t1 > t0 and l1 > l0:
        region = canvas[t0:t1, l0:l1]
        np.maximum(region, ink[t0 - top:t1 - top, l0 - left:l1 - left], out=region)


def scan_noise(dark: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """What a copier adds to a cell: blur, grain, a few specks."""
    Image = need("PIL.Image")
    ImageFilter = need("PIL.ImageFilter")
    picture = Image.fromarray((np.clip(dark, 0, 1) * 255).astype(np.uint8))
    picture = picture.filter(ImageFilter.GaussianBlur(rng.uniform(0.0, 0.8)))
    out = np.asarray(picture, dtype=np.float64) / 255.0
    out = out + rng.normal(0, rng.uniform(0.0, 0.06), out.shape)
    specks = rng.random(out.shape) < rng.uniform(0, 0.004)
    out[specks] = rng.uniform(0.5, 1.0, int(specks.sum()))
    return np.clip(out, 0, 1)


def training_cell(digit: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The inside of one cell at the reading frame's resolution, with a digit written in it."""
    h, w = int(rng.integers(34, 48)), int(rng.integers(30, 46))
    canvas = np.zeros((h, w))
    ink = handwritten(digit, int(h * rng.uniform(0.55, 0.95)), rng)
    top = int(rng.integers(-2, max(-1, h - ink.shape[0] + 2)))
    left = int((w - ink.shape[1]) / 2 + rng.normal(0, w * 0.08))
    paste(canvas, ink, top, left)
    return scan_noise(canvas, rng)


def blank_cell(rng: np.random.Generator) -> np.ndarray:
    """The inside of an empty cell: specks, a faint smudge, sometimes a sliver of the printed box."""
    h, w = int(rng.integers(34, 48)), int(rng.integers(30, 46))
    canvas = np.zeros((h, w))
    kind = rng.integers(0, 4)
    if kind == 1:  # a sliver of the printed border along one edge
        thick = int(rng.integers(2, 4))
        level = rng.uniform(0.4, 0.9)
        side = rng.integers(0, 4)
        if side == 0:
            canvas[:thick, :] = level
        elif side == 1:
            canvas[-thick:, :] = level
        elif side == 2:
            canvas[:, :thick] = level
        else:
            canvas[:, -thick:] = level
    elif kind == 2:  # a dot or a short stray mark
        y, x = int(rng.integers(0, h - 4)), int(rng.integers(0, w - 4))
        canvas[y:y + int(rng.integers(2, 5)), x:x + int(rng.integers(2, 6))] = rng.uniform(0.5, 1.0)
    elif kind == 3:  # a faint smudge
        y, x = int(rng.integers(0, h - 10)), int(rng.integers(0, w - 10))
        canvas[y:y + 10, x:x + 10] = rng.uniform(0.1, 0.35)
    return scan_noise(canvas, rng)
