"""Handwriting put into cells: how the digit model is taught and how test pages are filled.

A handwritten digit (a 28×28 MNIST picture, values 0…1) is drawn at the size a student writes
in a cell, slanted, thinned or thickened, perhaps bent (:func:`warped`), its ink a little grey.
:func:`training_cell` writes one into a cell of a comb, printed borders and perhaps a digit in the
next cell around it, adds the noise a scan adds and takes it out as the reader does;
:func:`blank_cell` makes the empty cells the model must call blank (specks, a dot, a smudge, a
neighbour's digit over the border). ``tools/train_digits.py`` and the tests use them."""

from __future__ import annotations

import numpy as np

from .ink import digit_ink
from .requirements import need


def warped(picture: np.ndarray, strength: float, rng: np.random.Generator) -> np.ndarray:
    """An elastic distortion (Simard et al. 2003): every pixel moved by a smooth random field of
    about ``strength`` pixels, so that one writer's digit teaches the shapes of many."""
    Image = need("PIL.Image")
    h, w = picture.shape
    field = []
    for _ in range(2):
        coarse = rng.normal(0, strength, (4, 4)).astype(np.float32)
        field.append(np.asarray(Image.fromarray(coarse, "F").resize((w, h), Image.Resampling.BICUBIC)))
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    sy, sx = np.clip(yy + field[0], 0, h - 1.001), np.clip(xx + field[1], 0, w - 1.001)
    y0, x0 = sy.astype(int), sx.astype(int)
    fy, fx = sy - y0, sx - x0
    return ((1 - fy) * (1 - fx) * picture[y0, x0] + (1 - fy) * fx * picture[y0, x0 + 1]
            + fy * (1 - fx) * picture[y0 + 1, x0] + fy * fx * picture[y0 + 1, x0 + 1])


def handwritten(digit: np.ndarray, height_px: int, rng: np.random.Generator, elastic: float = 0.0) -> np.ndarray:
    """A digit picture as ink (darkness 0…1) about ``height_px`` tall, slanted, rotated and with a
    pen a little thinner or thicker than MNIST's; ``elastic`` (in MNIST pixels) also bends its
    strokes (:func:`warped`)."""
    Image = need("PIL.Image")
    ImageFilter = need("PIL.ImageFilter")
    up = 4
    if elastic > 0:
        big = np.asarray(Image.fromarray((np.clip(digit, 0, 1) * 255).astype(np.uint8)).resize(
            (28 * up, 28 * up), Image.Resampling.BILINEAR), dtype=np.float64)
        picture = Image.fromarray(np.clip(warped(big, elastic * up, rng), 0, 255).astype(np.uint8))
    else:
        picture = Image.fromarray((np.clip(digit, 0, 1) * 255).astype(np.uint8))
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


def _cell_patch(rng: np.random.Generator) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """An empty stretch of page at the reading frame's resolution (200 dpi) around one digit
    cell of a comb: its printed border (grey or dark, a pixel or two off where alignment left
    it) and its neighbours' borders; as narrow as a printed sheet's cells (5.1 mm: 40 pixels) and
    wider, for hand-drawn or enlarged sheets. Returns the darkness canvas and the cell's (left, top,
    right, bottom) border in it."""
    w, h = int(rng.integers(36, 60)), int(rng.integers(50, 70))
    mx, my = int(w * 0.45), int(h * 0.45)
    canvas = np.zeros((h + 2 * my, w + 2 * mx))
    box = (mx, my, mx + w, my + h)
    if rng.random() < 0.85:
        level, thick = rng.uniform(0.15, 0.95), int(rng.integers(1, 4))
        jitter = lambda: int(rng.integers(-1, 2))  # noqa: E731
        for y in (my + jitter(), my + h + jitter()):
            canvas[y - thick // 2:y - thick // 2 + thick, :] = level
        for x in (mx - w + jitter(), mx + jitter(), mx + w + jitter(), mx + 2 * w + jitter()):
            if 0 <= x < canvas.shape[1]:
                canvas[my:my + h, max(x - thick // 2, 0):x - thick // 2 + thick] = level
    return canvas, box


def _write(canvas: np.ndarray, digit: np.ndarray, box: tuple[int, int, int, int], rng: np.random.Generator,
           elastic: float) -> None:
    """Write a digit in a cell of the canvas the way students do: mostly inside, any size from
    half the cell's height to its full height, a little off centre."""
    left, top, right, bottom = box
    h, w = bottom - top, right - left
    ink = handwritten(digit, int(h * rng.uniform(0.45, 0.97)), rng, elastic)
    y = int(top + h / 2 - ink.shape[0] / 2 + rng.normal(0, 0.06) * h)
    x = int(left + w / 2 - ink.shape[1] / 2 + rng.normal(0, 0.07) * w)
    paste(canvas, ink, y, x)


def training_cell(digit: np.ndarray, rng: np.random.Generator, neighbour: np.ndarray | None = None,
                  elastic: float = 0.0) -> tuple[np.ndarray, tuple[int, int]]:
    """A digit written in a cell of a comb (and perhaps one in the cell beside it), scanned, and
    taken out the way the reader does (:func:`qkvquiz.scan.ink.digit_ink`): the ink and the
    cell's height and width."""
    canvas, box = _cell_patch(rng)
    _write(canvas, digit, box, rng, elastic)
    return _taken_out(canvas, box, rng, neighbour, elastic)


def blank_cell(rng: np.random.Generator, neighbour: np.ndarray | None = None) -> tuple[np.ndarray, tuple[int, int]]:
    """An empty cell of a comb as the reader takes it out: specks, a faint smudge, a stray dot,
    perhaps a neighbour's digit running over the border."""
    canvas, box = _cell_patch(rng)
    left, top, right, bottom = box
    kind = rng.integers(0, 4)
    if kind == 2:  # a dot or a short stray mark
        y, x = int(rng.integers(top, bottom - 4)), int(rng.integers(left, right - 4))
        canvas[y:y + int(rng.integers(2, 5)), x:x + int(rng.integers(2, 6))] = rng.uniform(0.5, 1.0)
    elif kind == 3:  # a faint smudge
        y, x = int(rng.integers(top, bottom - 12)), int(rng.integers(left, right - 12))
        canvas[y:y + 12, x:x + 12] = np.maximum(canvas[y:y + 12, x:x + 12], rng.uniform(0.1, 0.4))
    return _taken_out(canvas, box, rng, neighbour, 0.0)


def _taken_out(canvas: np.ndarray, box: tuple[int, int, int, int], rng: np.random.Generator,
               neighbour: np.ndarray | None, elastic: float) -> tuple[np.ndarray, tuple[int, int]]:
    left, top, right, bottom = box
    w = right - left
    if neighbour is not None:  # the cell to the left or right holds a digit too
        side = w if rng.random() < 0.5 else -w
        _write(canvas, neighbour, (left + side, top, right + side, bottom), rng, elastic)
    dark = scan_noise(canvas, rng)
    return digit_ink(dark, left, top, right, bottom), (bottom - top, w)
