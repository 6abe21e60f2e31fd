"""How well and how fast scanned worksheets are read: a synthetic class, filled with handwriting
the digit model never learnt from, scanned as a copier would.

    python benchmarks/scan.py [--students 30] [--pages 3] [--dpi 300] [--seed 1] [--printed SPEC] [--frontier]

Each student's pages are drawn from a cell map (corner discs, QR code, cells in grey), or with
``--printed SPEC`` are the worksheets ``generate`` prints for a bundled spec (PDFs rendered with
pypdfium2, the set's own cellmap.json; attention-basics is three to four pages), filled
with MNIST test digits (writers never taught; never used to choose anything), minus strokes and
ticks, then scanned: turned ±3°, scaled ±3 %, blurred, speckled, JPEG-coded; the stack is
shuffled, one page is upside down and one sideways, one page of another set is slipped in and
one page is left out. Drawing is not timed; reading is. Prints: cells read right, cells sent to
review, cells read wrong and not sent to review (the number that must be 0), entries likewise,
and pages per second (and the processor time).

``--frontier`` also prints the price of letting readings through: under every rule of the
shipped kind (a digit is trusted when its confidence is at least SURE and its second reading's at
most SECOND) on a grid wider than the one the model's rule is chosen from, the fewest cells sent
to review for each count of cells read wrong and not sent, from each digit cell's ``confidence``
and ``second_confidence`` in the side file (rounded there to 4 decimals).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qkvquiz.core.resources import bank_dir  # noqa: E402
from qkvquiz.scan.cells import in_doubt  # noqa: E402
from qkvquiz.scan.pages import PageImage  # noqa: E402
from qkvquiz.scan.reader import read_pages  # noqa: E402
from tests.scan.corpus import Truth, draw_page, fill_printed, held_out_digits, layout, scan  # noqa: E402
from tests.scan.printed import PrintedSet, printed_set  # noqa: E402

SET, OTHER_SET = "3f9c0a12be47", "0123456789ab"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--dpi", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--printed", metavar="SPEC", help="real printed worksheets of this bundled spec")
    parser.add_argument("--frontier", action="store_true",
                        help="also the fewest cells to review for each count read wrong, over a grid of rules")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    people = [(f"s{k:03d}", f"{k:04d}-{k * 7 % 10000:04d}") for k in range(args.students)]
    parts = {"q1.scores": (3, 3), "q2.weights": (3, 3), "q3.output": (2, 4), "q4.norm": ()}
    digits, labels = held_out_digits()
    truth = Truth()
    started = time.perf_counter()
    if args.printed:
        with tempfile.TemporaryDirectory() as scratch:
            printed = _printed(args.printed, args.students, args.dpi, Path(scratch))
        cellmap = printed.cellmap
    else:
        cellmap = layout(SET, people, parts, pages=args.pages)
    images = []
    for page in cellmap.pages:
        if args.printed:
            drawn = fill_printed(printed.pages[(page.variant, page.page)], page, args.dpi, rng, digits, labels, truth)
        else:
            drawn = draw_page(page, SET, args.dpi, rng, digits, labels, truth)
        shot = scan(drawn, rng, degrees=rng.uniform(-3, 3), scale=rng.uniform(0.97, 1.03),
                    blur=rng.uniform(0.3, 1.0), speckle=rng.uniform(0, 0.001), jpeg=int(rng.integers(60, 90)))
        images.append(PageImage(f"{page.variant} p{page.page}", np.asarray(shot)))
    order = rng.permutation(len(images))
    images = [images[k] for k in order]
    images.pop()  # one page left out
    images[0] = PageImage(images[0].source + " (upside down)", np.rot90(images[0].image, 2).copy())
    images[1] = PageImage(images[1].source + " (sideways)", np.rot90(images[1].image, 1).copy())
    other = layout(OTHER_SET, people[:1], parts, pages=args.pages).pages[0]
    stranger = scan(draw_page(other, OTHER_SET, args.dpi, rng, digits, labels, Truth()), rng, degrees=1.0)
    images.insert(len(images) // 2, PageImage("another set's page", np.asarray(stranger)))
    print(f"drew {len(images)} pages at {args.dpi} dpi in {time.perf_counter() - started:.1f} s")

    started, cpu = time.perf_counter(), time.process_time()
    result = read_pages(cellmap, images)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu

    cells = right = review = wrong = 0
    reasons: dict[str, int] = {}  # why cells went to review: "digit: low confidence", …
    e_total = e_right = e_review = e_wrong = 0
    digit_cells: list[tuple[float, float, bool]] = []  # (confidence, second's, read right) of every digit cell
    fixed_review = fixed_wrong = 0  # sign cells: no digit rule changes them
    for confidence in result.confidences:
        for entry in confidence["entries"]:
            key = (confidence["variant"], entry["part"], tuple(entry["index"]))
            e_total += 1
            if entry["doubts"]:
                e_review += 1
            elif entry["value"] == truth.values[key]:
                e_right += 1
            else:
                e_wrong += 1
                print(f"  read wrong, not sent to review: {confidence['student']} {entry['part']}{entry['index']}: "
                      f"{entry['value']!r}, written {truth.values[key]!r}")
            readable = [c for c in entry["cells"] if c["kind"] in ("sign", "digit")]
            for cell, written in zip(readable, truth.cells[key]):
                cells += 1
                if cell.get("doubt"):
                    review += 1
                    reason = f"{cell['kind']}: {cell['doubt']}"
                    reasons[reason] = reasons.get(reason, 0) + 1
                elif cell["reading"] == written:
                    right += 1
                else:
                    wrong += 1
                if cell["kind"] == "digit" and "second_confidence" in cell:
                    digit_cells.append((cell["confidence"], cell["second_confidence"], cell["reading"] == written))
                else:
                    fixed_review += bool(cell.get("doubt"))
                    fixed_wrong += not cell.get("doubt") and cell["reading"] != written
    statuses: dict[str, int] = {}
    for page in result.pages:
        statuses[page.status] = statuses.get(page.status, 0) + 1
    for page in result.pages:
        if page.status not in ("read", "other set"):
            print(f"  page {page.source}: {page.status}: {page.reason}")
    print(f"pages: {statuses}; missing: {sum(len(v) for v in result.missing_pages.values())}; "
          f"absent students: {len(result.absent)}")
    print(f"{'':28}{'count':>8}{'share':>9}")
    for name, n, total in (("sign and digit cells", cells, cells), ("  read right", right, cells),
                           ("  sent to review", review, cells), ("  read wrong, not reviewed", wrong, cells),
                           ("entries", e_total, e_total), ("  read right", e_right, e_total),
                           ("  sent to review", e_review, e_total), ("  read wrong, not reviewed", e_wrong, e_total)):
        print(f"{name:28}{n:8d}{n / max(total, 1):9.2%}")
    for reason, n in sorted(reasons.items(), key=lambda item: -item[1]):
        print(f"    {reason:40}{n:8d}{n / max(cells, 1):9.2%}")
    if args.frontier:
        _frontier(digit_cells, fixed_review, fixed_wrong, cells)
    # One process reads: on a machine others share, the processor time says what the reading costs.
    print(f"read {len(images)} pages in {seconds:.1f} s ({cpu:.1f} s of processor time): "
          f"{len(images) / seconds:.2f} pages per second")


SURE_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 0.93, 0.95, 0.96, 0.97, 0.975, 0.98, 0.985, 0.99, 0.993, 0.995, 0.997,
             0.998, 0.999)
SECOND_GRID = (0.001, 0.002, 0.003, 0.005, 0.007, 0.01, 0.015, 0.02, 0.03, 0.05, 0.07, 0.1, 0.2, 0.3, 0.5)


def _frontier(digit_cells: list[tuple[float, float, bool]], fixed_review: int, fixed_wrong: int, cells: int) -> None:
    """For each count of cells read wrong and let through, the fewest sent to review by any
    (SURE, SECOND) of the grid, and that rule; counts that no rule makes better are left out."""
    confidence, second, right = (np.array(column) for column in zip(*digit_cells))
    fewest: dict[int, tuple[int, float, float]] = {}
    for sure in SURE_GRID:
        for most in SECOND_GRID:
            doubt = in_doubt(confidence, second, (sure, most))
            wrong = fixed_wrong + int((~doubt & ~right).sum())
            sent = fixed_review + int(doubt.sum())
            if wrong not in fewest or sent < fewest[wrong][0]:
                fewest[wrong] = (sent, sure, most)
    print(f"{'read wrong, not reviewed':>26}{'fewest to review':>18}{'share':>9}   rule (SURE, SECOND)")
    best = None
    for wrong in sorted(fewest):
        sent, sure, most = fewest[wrong]
        if best is None or sent < best:
            best = sent
            print(f"{wrong:26d}{sent:18d}{sent / max(cells, 1):9.2%}   {sure}, {most}")


def _printed(spec_name: str, students: int, dpi: int, scratch: Path) -> PrintedSet:
    """A bundled spec generated as printed PDFs for ``students``, each page rendered (unwritten)."""
    spec = yaml.safe_load((bank_dir() / f"{spec_name}.yaml").read_text(encoding="utf-8"))
    return printed_set(scratch / "set", [f"s{k:03d}" for k in range(students)], spec=spec, dpi=dpi)


if __name__ == "__main__":
    main()
