"""The digit model's training script (tools/train_digits.py): its hand-written backpropagation
against finite differences, for the shipped widths and others, and the choice of the reader's rule."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.scan.digits import BLANK, CANDIDATE_VIEWS, CLASSES, model_from_arrays

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "train_digits.py"


@pytest.fixture(scope="module")
def training():
    spec = importlib.util.spec_from_file_location("train_digits", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _loss(params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, decay: float) -> float:
    """Mean cross-entropy of the network on rows x, plus the weight decay the script adds."""
    p = model_from_arrays(params, np.float64).forward(x[:, :784].reshape(-1, 28, 28), x[:, 784:])["p"]
    penalty = decay / 2 * sum(float((params[k] ** 2).sum()) for k in ("w1", "w2", "w3", "w4"))
    return float(-np.log(p[np.arange(len(y)), y]).mean()) + penalty


@pytest.mark.parametrize("channels, hidden", [((16, 32), 128), ((8, 12), 20), ((32, 64), 24)])
def test_gradients_agree_with_finite_differences(training, channels, hidden):
    rng = np.random.default_rng(3)
    x, y = rng.random((5, 787)), rng.integers(0, len(CLASSES), 5)
    params = training.init(rng, hidden, channels)
    assert params["w1"].shape == (25, channels[0]) and params["w2"].shape == (25 * channels[0], channels[1])
    decay = 1e-3
    grads = training.gradients(params, x[:, :784].reshape(-1, 28, 28), x[:, 784:], y, decay)
    step = 1e-5
    for name, value in params.items():
        for _ in range(3):
            at = tuple(int(rng.integers(0, size)) for size in value.shape)
            moved = {k: v.copy() for k, v in params.items()}
            moved[name][at] += step
            up = _loss(moved, x, y, decay)
            moved[name][at] -= 2 * step
            down = _loss(moved, x, y, decay)
            numeric = (up - down) / (2 * step)
            # the script sums a step in single precision: agreement to about 1e-5 of the slope
            assert abs(grads[name][at] - numeric) <= 1e-4 * max(abs(numeric), 1e-2), (name, at)


def _naive_counts(p: np.ndarray, y: np.ndarray, sure: float, second: float) -> tuple[int, int]:
    """(wrong and not sent, sent) under a rule, cell by cell: the reading is the likeliest class on
    average over the rows; it is in doubt when any row gives it less than ``sure`` or another
    class more than ``second``."""
    wrong = sent = 0
    for k in range(p.shape[1]):
        reading = int(np.argmax(p[:, k].mean(axis=0)))
        doubt = any(row[k, reading] < sure or np.delete(row[k], reading).max() > second for row in p)
        sent += doubt
        wrong += (not doubt) and reading != y[k]
    return wrong, sent


def test_the_rule_leaves_nothing_wrong_unreviewed_and_sends_the_fewest(training):
    """Made-up probabilities of two networks in every candidate view, two readings wrong with
    some confidence: the chosen rule lets no wrong reading through and, of all such rules on the
    grid, sends the fewest cells to review."""
    rng = np.random.default_rng(5)
    n, per = 300, len(CANDIDATE_VIEWS)
    y = rng.integers(0, BLANK + 1, n)
    p = np.zeros((2 * per, n, len(CLASSES)))
    for row in range(p.shape[0]):  # each network and view a little surer or less sure
        sure = np.clip(1 - rng.exponential(0.006, n), 0.5, 1)
        p[row, np.arange(n), y] = sure
        p[row, np.arange(n), (y + 1) % len(CLASSES)] = 1 - sure
    for k, confidence in ((7, 0.96), (11, 0.985)):
        p[:, k] = 0.0
        p[:, k, (y[k] + 2) % len(CLASSES)] = confidence
        p[:, k, y[k]] = 1 - confidence
    rule = training.choose_rule(p, y, members=2)
    rows = [m * per + CANDIDATE_VIEWS.index(view) for m in range(2) for view in rule.views]
    wrong, sent = _naive_counts(p[rows], y, rule.sure, rule.second)
    assert wrong == 0
    fewest = min(count for sure in training.SURE_GRID for second in training.SECOND_GRID
                 for bad, count in [_naive_counts(p[[0, per]], y, sure, second)] if bad == 0)
    assert sent <= fewest  # no rule of MNIST's view alone does better
    assert sent < n // 2  # and it is not the rule that sends everything
