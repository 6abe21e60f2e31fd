"""The shipped digit model: its NumPy inference against plain loops, and what it reads on
handwriting it never learnt from."""

from __future__ import annotations

import numpy as np

from qkvquiz.scan.cells import judge
from qkvquiz.scan.digits import (BLANK, CANDIDATE_VIEWS, CLASSES, MNIST_VIEW, classify, classify_views, shipped_model,
                                 shipped_models, shipped_rule)
from qkvquiz.scan.ink import features
from qkvquiz.scan.synthetic import blank_cell, training_cell

from .corpus import held_out_digits


#: What the shipped networks achieve on the test digits (docs/scanning.md): one network in one
#: view reads about 98 % right; with both networks and the shipped rule about 9 % of the cells go
#: to review.
ACCURACY, REVIEW = 0.97, 0.12


def naive_probabilities(x: np.ndarray) -> np.ndarray:
    """The same network written as loops over pixels and channels (slow, obvious)."""
    m = shipped_model()
    picture, extras = x[:784].reshape(28, 28), x[784:]

    def conv(a, w, b, k_in, k_out):
        h, wd = a.shape[0] - 4, a.shape[1] - 4
        out = np.zeros((h, wd, k_out))
        for i in range(h):
            for j in range(wd):
                for c in range(k_out):
                    total = b[c]
                    for ci in range(k_in):
                        for di in range(5):
                            for dj in range(5):
                                total += a[i + di, j + dj, ci] * w[ci * 25 + di * 5 + dj, c]
                    out[i, j, c] = max(total, 0.0)
        return out

    def pool(a):
        return np.array([[[max(a[2 * i, 2 * j, c], a[2 * i + 1, 2 * j, c], a[2 * i, 2 * j + 1, c], a[2 * i + 1, 2 * j + 1, c])
                           for c in range(a.shape[2])] for j in range(a.shape[1] // 2)] for i in range(a.shape[0] // 2)])

    p1 = pool(conv(picture[:, :, None], m.w1, m.b1, 1, 16))
    p2 = pool(conv(p1, m.w2, m.b2, 16, 32))
    flat = np.concatenate([p2.ravel(), extras])
    h = np.maximum(flat @ m.w3 + m.b3, 0)
    z = h @ m.w4 + m.b4
    e = np.exp(z - z.max())
    return e / e.sum()


def test_inference_matches_the_network_written_as_loops():
    digits, _labels = held_out_digits()
    x = features(*training_cell(digits[17], np.random.default_rng(0)))
    # The shipped model computes in single precision: agreement to a millionth or so.
    assert np.allclose(shipped_model().probabilities(x[None])[0], naive_probabilities(x), atol=1e-5)


def test_a_cell_without_ink_is_blank_for_sure():
    p = classify([(np.zeros((40, 36)), (40, 36))])
    assert p[0, BLANK] == 1.0 and p[0].sum() == 1.0


def test_held_out_handwriting_reads_right_or_is_sent_to_review():
    digits, labels = held_out_digits()
    rng = np.random.default_rng(11)
    cells = [training_cell(d, rng, digits[(k * 7) % len(digits)] if k % 2 else None) for k, d in enumerate(digits)]
    cells += [blank_cell(rng) for _ in range(60)]
    truth = np.concatenate([labels, np.full(60, BLANK)])
    single = classify(cells).argmax(1)
    assert (single == truth).mean() >= ACCURACY, (single == truth).mean()
    judged = judge(classify_views(cells))
    wrong = ~judged.doubtful & (judged.classes != truth)
    # Wrong and not doubted is what would be graded without review: on these 1,060 cells by
    # writers the model never saw, one (a 7 written with its bar on the cell's top border, taken
    # out with the border and read as a 1; docs/scanning.md), as on the test digits (2 of 5,400).
    assert wrong.sum() <= 1, [(CLASSES[t], CLASSES[r]) for t, r in zip(truth[wrong], judged.classes[wrong])]
    assert judged.doubtful.mean() <= REVIEW, judged.doubtful.mean()


def test_every_network_sees_every_view_of_a_cell():
    digits, _labels = held_out_digits()
    cell = training_cell(digits[5], np.random.default_rng(3))
    views = ((20, (0, 0)), (17, (0, 0)))
    p = classify_views([cell], views=views)
    assert len(shipped_models()) >= 2 and p.shape == (len(shipped_models()) * len(views), 1, len(CLASSES))
    assert np.allclose(p[0], classify([cell]))
    assert np.allclose(p[len(views)], classify([cell], shipped_models()[1]))
    assert not np.allclose(p[0], p[1])  # another framing really is another input
    assert not np.allclose(p[0], p[len(views)])  # and another network another reader


def test_the_reader_uses_the_rule_chosen_with_the_networks():
    rule = shipped_rule()
    # Chosen among the candidates, MNIST's own framing always among them, thresholds a probability
    # near certainty and a small one.
    assert rule.views[0] == MNIST_VIEW and set(rule.views) <= set(CANDIDATE_VIEWS)
    assert 0.5 < rule.sure < 1 and 0 < rule.second < 0.5
    cell = training_cell(held_out_digits()[0][9], np.random.default_rng(4))
    assert classify_views([cell]).shape == (len(shipped_models()) * len(rule.views), 1, len(CLASSES))
    # A reading every view gives exactly SURE is trusted; a hair less is a doubt.
    p = np.zeros((1, 2, len(CLASSES)))
    p[0, 0, 3], p[0, 0, 5] = rule.sure, 1 - rule.sure
    p[0, 1, 3], p[0, 1, 5] = rule.sure - 1e-6, 1 - rule.sure + 1e-6
    judged = judge(p, (rule.sure, 1.0))
    assert judged.doubts == [None, "low confidence"]
    assert judge(p[:, :1]).doubtful[0] == (1 - rule.sure > rule.second)


def test_a_cells_two_numbers_say_how_it_fares_under_any_rule():
    """``confidence`` is the least any network in any view gives the reading, ``second_confidence``
    the most any gives another class; a cell is in doubt under (SURE, SECOND) exactly when the one
    is below SURE or the other above SECOND (what the side file lets a benchmark recount)."""
    rng = np.random.default_rng(12)
    base = rng.dirichlet(np.full(len(CLASSES), 0.05), size=300)  # 300 cells, mostly sure
    p = base * rng.uniform(0.9, 1.1, size=(4, *base.shape))  # as 4 views see them, a little apart
    p /= p.sum(axis=2, keepdims=True)
    judged = judge(p, (0.5, 1.0))
    mean = p.mean(axis=0)
    for k in range(p.shape[1]):
        reading = int(mean[k].argmax())
        assert judged.classes[k] == reading
        assert judged.confidence[k] == min(view[k, reading] for view in p)
        assert judged.second_confidence[k] == max(view[k, c] for view in p for c in range(len(CLASSES)) if c != reading)
        assert judged.second_confidence[k] == max(view[k, judged.second[k]] for view in p)
    for sure, most in ((0.9, 0.05), (0.99, 0.01), (0.6, 0.3)):
        doubtful = judge(p, (sure, most)).doubtful
        assert (doubtful == ((judged.confidence < sure) | (judged.second_confidence > most))).all()
        assert 0 < doubtful.sum() < p.shape[1]  # the rule splits these cells
