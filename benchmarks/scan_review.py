"""What `qkvquiz scan` sends to review, and what it grades wrong without a look, on a real set.

    python benchmarks/scan_review.py [--students 10] [--dpi 300] [--slips 0.2] [--seed 1]

A set of the bundled spec attention-basics (75 entries per student) is generated, its cell map
laid out for the key's own parts (tests/scan/corpus.py), and each student's pages written with
the student's exact answers rounded to the cells' two decimals, a share ``--slips`` of entries
replaced by a wrong value, in held-out handwriting; the pages are scanned as a copier would
(turned ±3°, scaled ±3 %, blurred, speckled, JPEG-coded) and shuffled. Then `scan_and_grade`
reads and grades them. Prints, per entry: read right, sent to review (by the reader's own doubt,
by another likely reading that changes the score), read wrong without review, and of those the
ones whose right reading would have changed the score (a grade wrong without a look), cells
likewise, and pages per second of the whole command (reading, grading, the doubts' grading,
writing).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from qkvquiz.core.submissions import Submission  # noqa: E402
from qkvquiz.generate import generate_set  # noqa: E402
from qkvquiz.grade.scanned import CHANGES_SCORE, scan_and_grade, score_changes  # noqa: E402
from qkvquiz.key import load_key  # noqa: E402
from qkvquiz.scan.cellmap import write_cellmap  # noqa: E402
from qkvquiz.spec import load_spec  # noqa: E402
from qkvquiz.core.resources import bank_dir  # noqa: E402
from tests.scan.corpus import Truth, draw_page, held_out_digits, layout, scan  # noqa: E402
from tests.scan.scanned_set import exact_answers  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--dpi", type=int, default=300)
    parser.add_argument("--slips", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        students = [f"s{k:03d}" for k in range(args.students)]
        generate_set(load_spec(bank_dir() / "attention-basics.yaml"), students, root / "set", seed="bench", formats="md")
        key = load_key(root / "set" / "key.json")
        parts = {part.id: item.shapes[part.id] for item, part in key.parts}
        cellmap = layout(key.set_id, list(zip(key.students, key.variants)), parts, pages=3)
        write_cellmap(cellmap, root / "set" / "cellmap.json")
        digits, labels = held_out_digits()
        truth = Truth()
        paths = []
        for page in cellmap.pages:
            student = key.students[key.variants.index(page.variant)]
            answers = exact_answers(key, student)
            for place in answers:
                if rng.random() < args.slips and answers[place] not in (None, "-inf"):
                    answers[place] = f"{rng.uniform(-9.99, 9.99):.2f}"
            drawn = draw_page(page, key.set_id, args.dpi, rng, digits, labels, truth, answers=answers)
            shot = scan(drawn, rng, degrees=rng.uniform(-3, 3), scale=rng.uniform(0.97, 1.03),
                        blur=rng.uniform(0.3, 1.0), speckle=rng.uniform(0, 0.001), jpeg=int(rng.integers(60, 90)))
            path = root / f"page-{len(paths):03d}.jpg"
            shot.save(path, quality=95)
            paths.append(path)
        order = rng.permutation(len(paths))
        started = time.perf_counter()
        grading = scan_and_grade(root / "set" / "key.json", [paths[k] for k in order], root / "out")
        seconds = time.perf_counter() - started

        # What the reading would score with the written value in place of each wrong reading.
        in_review = {item.entry: item for item in grading.review}
        wrong, wrong_cells = [], 0
        for reading in grading.readings:
            for entry in reading["entries"]:
                eid = (reading["student"], entry["part"], tuple(entry["index"]))
                written = truth.values[(reading["variant"], entry["part"], tuple(entry["index"]))]
                cells = truth.cells[(reading["variant"], entry["part"], tuple(entry["index"]))]
                if eid not in in_review:
                    wrong_cells += sum(c["reading"] != w for c, w in zip(entry["cells"], cells)
                                       if c["kind"] in ("sign", "digit"))
                    if entry["value"] != written:
                        wrong.append((reading, entry, written))
        harmful = 0
        for reading, entry, written in wrong:
            sub = next(s for s in grading.submissions if s["student"] == reading["student"])
            probe = {**reading, "entries": [{**entry, "doubts": [], "alternatives": [{"value": written, "cell": 1}]}]}
            if score_changes(key, [probe], [Submission("b", sub["student"], sub["answers"])]):
                harmful += 1
        s = grading.summary()
        by_reader = sum(1 for i in grading.review if set(i.reasons) - {CHANGES_SCORE})
        rows = [
            ("entries", s["entries"], ""),
            ("sent to review", s["review entries"], f"{s['review entries'] / s['entries']:.1%}"),
            ("  by the reader's own doubt", by_reader, f"{by_reader / s['entries']:.1%}"),
            ("  only because another reading changes the score", s["review entries"] - by_reader,
             f"{(s['review entries'] - by_reader) / s['entries']:.1%}"),
            ("read wrong, not sent to review", len(wrong), f"{len(wrong) / s['entries']:.1%}"),
            ("  of which the right reading changes the score", harmful, f"{harmful / s['entries']:.1%}"),
            ("sign and digit cells", sum(1 for r in grading.readings for e in r["entries"] for c in e["cells"]
                                         if c["kind"] in ("sign", "digit")), ""),
            ("cells sent to review (in doubt in a reviewed entry)", s["review cells"], ""),
            ("cells read wrong, not sent to review", wrong_cells, ""),
        ]
        print(f"{args.students} students, {len(paths)} pages at {args.dpi} dpi, slips {args.slips:.0%}: "
              f"scan took {seconds:.1f} s ({len(paths) / seconds:.2f} pages/s)")
        width = max(len(r[0]) for r in rows)
        for name, count, share in rows:
            print(f"{name:<{width}}  {count:>6}  {share:>6}")
        print("\nwith another threshold for a likely reading (chance ≥ LIKELY):")
        print("LIKELY   sent to review   wrong, unreviewed, score-changing")
        as_read = [Submission("b", r["student"], next(x for x in grading.submissions if x["student"] == r["student"])["answers"])
                   for r in grading.readings]
        for likely in (0.001, 0.005, 0.01, 0.02, 0.05, 1.0):
            changes = score_changes(key, grading.readings, as_read, likely=likely)
            reviewed = {i.entry for i in grading.review if set(i.reasons) - {CHANGES_SCORE}} | set(changes)
            missed = 0
            for reading, entry, written in wrong + [(r, e, truth.values[(r["variant"], e["part"], tuple(e["index"]))])
                                                     for r in grading.readings for e in r["entries"]
                                                     if (r["student"], e["part"], tuple(e["index"])) in in_review]:
                eid = (reading["student"], entry["part"], tuple(entry["index"]))
                if eid in reviewed or entry["value"] == written:
                    continue
                sub = next(s for s in grading.submissions if s["student"] == reading["student"])
                probe = {**reading, "entries": [{**entry, "doubts": [], "alternatives": [{"value": written, "cell": 1}]}]}
                missed += bool(score_changes(key, [probe], [Submission("b", sub["student"], sub["answers"])]))
            print(f"{likely:<8g} {len(reviewed):>6} {len(reviewed) / s['entries']:>7.1%}   {missed:>6}")


if __name__ == "__main__":
    main()
