"""Where a PDF worker's time goes, phase by phase, for ``render.py``'s one-page spec.

    python benchmarks/pdf_split.py                     # 10 worksheets + 10 keys, best of 3
    python benchmarks/pdf_split.py --students 20 --rounds 5
    python benchmarks/pdf_split.py --profile           # and cProfile's top 30 of one round

The documents are those ``generate --format pdf`` hands its pool (built by ``generate_set``,
untimed); they are rendered here, in this process, as a pool worker renders them (its
stylesheets, fonts and picture cache, warmed up by one worksheet and one key first). Each
phase is one call of WeasyPrint's public API, timed in CPU seconds (``time.process_time``), per
document, the best round of ``--rounds`` (other work on the machine inflates CPU time too):

- parse: WeasyPrint's HTML parser (``HTML(string=…)``, with our own changes to the source);
- layout: ``render()``: the cascade, the box tree, line breaking, pages;
- pdf write: ``write_pdf()``: drawing the pages, subsetting and embedding fonts, the file.

``--profile`` splits them further (cProfile, which changes nothing in WeasyPrint).

Prints one line per kind of document, then the load average (a busy machine: compare shares,
or count instructions with ``valgrind --tool=callgrind``, which load does not change).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from render import ONE_PAGE_SPEC

PHASES = ("parse", "layout", "pdf write")


def captured_jobs(specs: list, students: int) -> list[tuple[int, str, str]]:
    """``(spec index, html, target)`` of every PDF ``generate`` would render for each of ``specs``
    (parsed specs) and ``students`` students: built, not rendered."""
    from qkvquiz import generate
    from qkvquiz.render import pdf_batch

    captured: list[tuple[int, str, str]] = []
    spec_index = 0

    def capture(jobs, **_options):  # the pool's jobs, not rendered
        captured.extend((spec_index, html.build() if isinstance(html, pdf_batch.Deferred) else html, str(target))
                        for html, target in jobs)
        return []

    real = pdf_batch.render_pdfs
    pdf_batch.render_pdfs = capture
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ids = [f"S{20250000 + i}" for i in range(students)]
            for spec_index, spec in enumerate(specs):
                generate.generate_set(spec, ids, Path(tmp) / f"set{spec_index}", seed="bench", formats="md,pdf",
                                      force=True)
    finally:
        pdf_batch.render_pdfs = real
    return captured


def class_documents(students: int) -> tuple[list[str], list[str]]:
    """The worksheets and keys ``generate`` would render for ``students`` students."""
    from qkvquiz.spec import parse_spec

    captured = captured_jobs([parse_spec(ONE_PAGE_SPEC)], students)
    sheets = [html for _k, html, target in captured if target.endswith("worksheet.pdf")]
    keys = [html for _k, html, target in captured if not target.endswith("worksheet.pdf")]
    return sheets, keys


def render_one(html: str, target: Path, spent: dict[str, float]) -> float:
    """Render one document as a worker does; return its CPU seconds (phases into ``spent``)."""
    from qkvquiz.render import pdf, pdf_batch

    weasyprint = pdf.weasyprint_module()
    start = time.process_time()
    source, sheets = pdf._stylesheets(html, "A4")
    parsed = weasyprint.HTML(string=source, url_fetcher=pdf.url_fetcher())
    parsing = time.process_time()
    document = parsed.render(stylesheets=sheets, font_config=pdf.font_config(), cache=pdf_batch._worker_image_cache)
    writing = time.process_time()
    document.write_pdf(target)
    done = time.process_time()
    spent["parse"] += parsing - start
    spent["layout"] += writing - parsing
    spent["pdf write"] += done - writing
    return done - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one round; print the top 30 cumulative")
    args = parser.parse_args()

    from qkvquiz.render import pdf_batch

    sheets, keys = class_documents(args.students + 1)
    pdf_batch._init_worker("A4")
    spent: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        render_one(sheets.pop(0), out / "warm-sheet.pdf", spent)  # pictures and fonts loaded
        render_one(keys.pop(0), out / "warm-key.pdf", spent)
        for kind, documents in (("worksheet", sheets), ("key", keys)):
            best: tuple[float, dict[str, float]] | None = None
            for _ in range(args.rounds):
                spent.clear()
                total = sum(render_one(html, out / f"{kind}-{i}.pdf", spent) for i, html in enumerate(documents))
                if best is None or total < best[0]:
                    best = (total, dict(spent))
            total, phases = best
            n = len(documents)
            split = ", ".join(f"{p} {phases.get(p, 0.0) / n * 1000:.0f}" for p in PHASES)
            print(f"{kind}: {total / n * 1000:.0f} ms CPU per document ({split} ms)")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for i, html in enumerate(sheets + keys):
                render_one(html, out / f"profiled-{i}.pdf", spent)
            profile.disable()
            stats = pstats.Stats(profile)
            stats.strip_dirs().sort_stats("cumulative").print_stats(30)
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
