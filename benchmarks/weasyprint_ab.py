"""CPU per PDF document with whatever ``weasyprint`` is first on ``sys.path`` (for A/B runs of a
patched WeasyPrint against the original; see docs/weasyprint-proposals.md).

    PYTHONPATH=/tmp/wp-orig-parent:. python benchmarks/weasyprint_ab.py --out /tmp/a
    PYTHONPATH=/tmp/wp-patched-parent:. python benchmarks/weasyprint_ab.py --out /tmp/b

The documents: the worksheets and keys of the bundled ``attention-basics`` and ``all-families``
specs for ``--students`` students (built by ``generate_set``, untimed), rendered in this process
as a pool worker renders them (``pdf_split.render_one``), after one more student's documents
(untimed: the worker warmed up). A round renders each document once, as a worker does; a second
round renders them again (the same glyphs, texts and fonts: not a class's first rendering).
Prints one JSON line: WeasyPrint's file, CPU ms of ``import weasyprint``, and CPU ms per document
(``time.process_time``) for each round (the best is the one to compare: other work on a shared
machine inflates CPU time too; run the two versions side by side, started together, so that both
meet the same load); writes each document's PDF of the last round to ``--out``.

``--component NAME`` also times the WeasyPrint functions that proposal NAME of
docs/weasyprint-proposals.md changes (a timing wrapper around them, the garbage collector paused
while each document renders): ``setup`` (``Layout.setup``), ``breaks`` (``can_break_text``),
``pseudo`` (``StyleFor`` and its calls), ``subsets`` and ``arrays`` (``Font.clean``), ``flow``
(``Box.is_in_normal_flow``). A measuring aid for the proposals only: qkvquiz itself calls
WeasyPrint's public API alone.
"""

from __future__ import annotations

import argparse
import gc
import json
import pickle
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

started = time.process_time()
import weasyprint  # timed: the library lookups happen at import

IMPORT_MS = (time.process_time() - started) * 1000


def documents(students: int, specs: list[str]) -> list[tuple[str, str]]:
    """Each PDF's HTML and a name (spec, folder, file) for the bundled ``specs``."""
    from pdf_split import captured_jobs

    from qkvquiz.spec import load_spec

    loaded = [load_spec(HERE.parent / "problem_bank" / f"{name}.yaml") for name in specs]
    return [(html, f"{specs[k]}-{Path(target).parent.name}-{Path(target).name}")
            for k, html, target in captured_jobs(loaded, students)]


COMPONENTS = ("setup", "breaks", "pseudo", "subsets", "arrays", "flow")


def time_component(name: str) -> list[float]:
    """Wrap the functions proposal ``name`` changes in a CPU timer; the list's one entry sums them."""
    from weasyprint import css
    from weasyprint.formatting_structure import boxes
    from weasyprint.layout import inline, preferred
    from weasyprint.pdf import fonts
    from weasyprint.text import line_break

    spent = [0.0]
    depth = [0]

    def timed(function):
        def wrapper(*args, **kwargs):
            if depth[0]:  # called from a timed function: counted there
                return function(*args, **kwargs)
            depth[0] += 1
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[0] += time.process_time() - start
                depth[0] -= 1
        return wrapper

    if name in ("subsets", "arrays"):
        fonts.Font.clean = timed(fonts.Font.clean)
    elif name == "breaks":
        line_break.can_break_text = inline.can_break_text = preferred.can_break_text = timed(line_break.can_break_text)
    elif name == "setup":
        line_break.Layout.setup = timed(line_break.Layout.setup)
    elif name == "pseudo":
        css.StyleFor.__init__ = timed(css.StyleFor.__init__)
        css.StyleFor.__call__ = timed(css.StyleFor.__call__)
    elif name == "flow":
        boxes.Box.is_in_normal_flow = timed(boxes.Box.is_in_normal_flow)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--specs", default="attention-basics,all-families")
    parser.add_argument("--each", action="store_true", help="and each document's CPU ms")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--component", choices=COMPONENTS, help="and the CPU ms of the functions it names")
    parser.add_argument("--cache", type=Path, help="keep the built documents in this file (pickle) for later runs")
    args = parser.parse_args()
    from pdf_split import render_one

    from qkvquiz.render import pdf_batch

    if args.cache and args.cache.exists():
        docs = pickle.loads(args.cache.read_bytes())
    else:
        docs = documents(args.students + 1, args.specs.split(","))
        if args.cache:
            args.cache.write_bytes(pickle.dumps(docs))
    # The last student's documents warm the worker up (stylesheets, fonts, pictures) and are not
    # timed; each other document is rendered once a round, as a worker renders it once.
    spare = f"S{20250000 + args.students}"
    warm = [html for html, name in docs if spare in name]
    docs = [(html, name) for html, name in docs if spare not in name]
    spent_in = time_component(args.component) if args.component else [0.0]
    pdf_batch._init_worker("A4")
    args.out.mkdir(parents=True, exist_ok=True)
    spent: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as tmp:
        for i, html in enumerate(warm):
            render_one(html, Path(tmp) / f"warm-{i}.pdf", spent)
    rounds = []
    per_doc: dict[str, list[int]] = {}
    spent_in[0] = 0.0
    for _ in range(args.rounds):
        total = 0.0
        for i, (html, name) in enumerate(docs):
            if args.component:
                gc.collect()
                gc.disable()
            cpu = render_one(html, args.out / f"{i:03d}-{name}", spent)
            gc.enable()
            per_doc.setdefault(name, []).append(round(cpu * 1000))
            total += cpu
        rounds.append(round(total / len(docs) * 1000, 1))
    print(json.dumps({"weasyprint": weasyprint.__file__, "import_ms": round(IMPORT_MS, 1),
                      "documents": len(docs), "ms_per_doc": rounds,
                      "each": per_doc if args.each else None,
                      "component_ms_per_doc": round(spent_in[0] / len(docs) / args.rounds * 1000, 2)
                      if args.component else None}))


if __name__ == "__main__":
    main()
