"""Where a PDF worker's time goes, phase by phase, for ``render.py``'s one-page spec.

    python benchmarks/pdf_split.py                     # 10 worksheets + 10 keys, best of 3
    python benchmarks/pdf_split.py --students 20 --rounds 5
    python benchmarks/pdf_split.py --profile           # and cProfile's top 30 of one round

The documents are those ``generate --format pdf`` hands its pool (built by ``generate_set``,
untimed); they are rendered here, in this process, as a pool worker renders them (its
stylesheets, fonts and picture cache, warmed up by one worksheet and one key first). Each
phase is timed in CPU seconds (``time.process_time``), per document, the best round of
``--rounds`` (other work on the machine inflates CPU time too):

- parse: WeasyPrint's HTML parser (``HTML(string=…)``, with our own changes to the source);
- style: the cascade, every element's computed style;
- boxes: the box tree;
- layout: line breaking, pages;
- draw: painting the pages into PDF streams;
- fonts: subsetting and embedding the fonts;
- pdf write: the rest of ``write_pdf`` (objects, compression, the file).

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

PHASES = ("parse", "style", "boxes", "layout", "draw", "fonts", "pdf write")


def class_documents(students: int) -> tuple[list[str], list[str]]:
    """The worksheets and keys ``generate`` would render for ``students`` students."""
    from qkvquiz import generate
    from qkvquiz.render import pdf
    from qkvquiz.spec import parse_spec

    captured: list[tuple[str, str]] = []

    def capture(jobs, **_options):  # the pool's jobs, not rendered
        captured.extend((html.build() if isinstance(html, pdf.Deferred) else html, str(target)) for html, target in jobs)
        return []

    real = pdf.render_pdfs
    pdf.render_pdfs = capture
    try:
        with tempfile.TemporaryDirectory() as tmp:
            ids = [f"S{20250000 + i}" for i in range(students)]
            generate.generate_set(parse_spec(ONE_PAGE_SPEC), ids, Path(tmp) / "set", seed="bench",
                                  formats="md,pdf", force=True)
    finally:
        pdf.render_pdfs = real
    sheets = [html for html, target in captured if target.endswith("worksheet.pdf")]
    keys = [html for html, target in captured if not target.endswith("worksheet.pdf")]
    return sheets, keys


class Clock:
    """CPU seconds per phase, from wrappers around WeasyPrint's steps."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)

    def wrap(self, owner: object, name: str, phase: str, *, generator: bool = False) -> None:
        inner = getattr(owner, name)
        spent = self.spent

        def timed(*args, **kwargs):
            start = time.process_time()
            try:
                result = inner(*args, **kwargs)
                return list(result) if generator else result
            finally:
                spent[phase] += time.process_time() - start

        setattr(owner, name, timed)


def instrument() -> Clock:
    import weasyprint.pdf as pdf_module
    from weasyprint import document

    clock = Clock()
    clock.wrap(document, "get_all_computed_styles", "style")
    clock.wrap(document, "build_formatting_structure", "boxes")
    clock.wrap(document, "layout_document", "layout", generator=True)
    clock.wrap(document.Page, "paint", "draw")
    clock.wrap(pdf_module, "build_fonts_dictionary", "fonts")
    return clock


def render_one(html: str, target: Path, clock: Clock) -> float:
    """Render one document as a worker does; return its CPU seconds (phases into ``clock``)."""
    from qkvquiz.render import pdf

    start = time.process_time()
    source, sheets = pdf._stylesheets(html, "A4")
    parsed = pdf._html(source)
    clock.spent["parse"] += time.process_time() - start
    before = dict(clock.spent)
    document = parsed.render(stylesheets=sheets, font_config=pdf.font_config(), cache=pdf._worker_image_cache)
    writing = time.process_time()
    document.write_pdf(target)
    done = time.process_time()
    inside_write = sum(clock.spent[p] - before.get(p, 0.0) for p in ("draw", "fonts"))
    clock.spent["pdf write"] += (done - writing) - inside_write
    return done - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one round; print the top 30 cumulative")
    args = parser.parse_args()

    from qkvquiz.render import pdf

    sheets, keys = class_documents(args.students + 1)
    pdf._init_worker("A4")
    clock = instrument()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        render_one(sheets.pop(0), out / "warm-sheet.pdf", clock)  # pictures and fonts loaded
        render_one(keys.pop(0), out / "warm-key.pdf", clock)
        for kind, documents in (("worksheet", sheets), ("key", keys)):
            best: tuple[float, dict[str, float]] | None = None
            for _ in range(args.rounds):
                clock.spent.clear()
                total = sum(render_one(html, out / f"{kind}-{i}.pdf", clock) for i, html in enumerate(documents))
                if best is None or total < best[0]:
                    best = (total, dict(clock.spent))
            total, spent = best
            n = len(documents)
            split = ", ".join(f"{p} {spent.get(p, 0.0) / n * 1000:.0f}" for p in PHASES)
            print(f"{kind}: {total / n * 1000:.0f} ms CPU per document ({split} ms)")
        if args.profile:
            profile = cProfile.Profile()
            profile.enable()
            for i, html in enumerate(sheets + keys):
                render_one(html, out / f"profiled-{i}.pdf", clock)
            profile.disable()
            stats = pstats.Stats(profile)
            stats.strip_dirs().sort_stats("cumulative").print_stats(30)
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
