"""Benchmark: `qkvquiz generate --format pdf` for a class, through the real code path.

    python benchmarks/render.py                       # 100 students, every core
    python benchmarks/render.py --students 20 --workers 2 --page-size letter --class-pdf

The spec is one page per student: a dot product of one query and one key, and a causal
attention layer of 3 tokens (scores, weights, output). ``generate_set`` solves every
variant, writes the Markdown files and blank submissions, and renders each student's
``worksheet.pdf`` (header, givens, answer boxes) and key (``keys/<id>.pdf``: answers with
worked steps), as separate PDFs; with ``--class-pdf`` also the combined ``key.pdf`` and
``class.pdf``.

Prints a table: students, PDFs, pages, wall-clock and CPU seconds (this process and the
pool's workers), per student; then the load average before and after. CPU time divided by
the workers is what the wall time would be on that many idle cores, were the work evenly
spread; on a shared machine the wall time is larger. POSIX only (``resource``).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from qkvquiz.generate import generate_set
from qkvquiz.render.math_html import math_cache_info
from qkvquiz.spec import parse_spec

ONE_PAGE_SPEC = {
    "title": "Causal attention",
    "instructions": "Give every number to 2 decimal places.",
    "items": [
        {"family": "attention.scores", "title": "One query, one key", "params": {"form": "vector", "d_k": 4}},
        {
            "family": "attention.masked",
            "title": "Causal attention",
            "params": {"tokens": 3, "d_k": 2, "d_v": 2, "mask": "causal"},
            "ask": {"scores": 1, "weights": 2, "output": 2},
        },
    ],
}


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the pool's workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _pages(pdf: Path) -> int:
    """Pages of a PDF (pdfinfo where installed, else a count of page objects)."""
    try:
        out = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
        return int(re.search(r"Pages:\s+(\d+)", out).group(1))  # type: ignore[union-attr]
    except (OSError, subprocess.CalledProcessError, AttributeError):
        return len(re.findall(rb"/Type\s*/Page\b", pdf.read_bytes()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None, help="default: every core")
    parser.add_argument("--page-size", default="a4")
    parser.add_argument("--class-pdf", action="store_true", help="also write class.pdf")
    parser.add_argument("--out", type=Path, default=None, help="keep the output here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = args.workers or cores
    spec = parse_spec(ONE_PAGE_SPEC)
    ids = [f"S{20250000 + i}" for i in range(args.students)]
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "set"
        bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            transient=True, auto_refresh=False, disable=args.no_progress,
        )
        with bar:
            task = bar.add_task("PDF documents", total=None)

            def report(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)
                bar.refresh()

            wall0, cpu0 = time.perf_counter(), _cpu_seconds()
            result = generate_set(
                spec, ids, out, seed="bench", formats="md,pdf", page_size=args.page_size,
                class_pdf=args.class_pdf, workers=args.workers, pdf_progress=report, force=True,
            )
            wall, cpu = time.perf_counter() - wall0, _cpu_seconds() - cpu0
        sheets = [result.folders[s] / "worksheet.pdf" for s in result.worksheet.students]
        keys = [out / "keys" / f"{result.folders[s].name}.pdf" for s in result.worksheet.students]
        files = {"worksheets": sheets, "keys": keys}
        if args.class_pdf:
            files["key.pdf"] = [out / "key.pdf"]
            files["class.pdf"] = [out / "class.pdf"]
        pages = {name: sum(_pages(p) for p in paths) for name, paths in files.items()}
    load_after = os.getloadavg()

    table = Table(
        title=f"generate --format md,pdf: {args.students} students, {args.page_size}, "
        f"{workers} worker(s) on {cores} core(s)"
    )
    for name in ("output", "PDFs", "pages"):
        table.add_column(name, justify="left" if name == "output" else "right")
    for name, paths in files.items():
        table.add_row(name, str(len(paths)), str(pages[name]))
    console = Console()
    console.print(table)
    n = args.students
    info = math_cache_info()
    console.print(
        f"wall {wall:.1f} s ({wall / n * 1000:.0f} ms per student), CPU {cpu:.1f} s "
        f"({cpu / n * 1000:.0f} ms per student); CPU / {workers} workers = {cpu / workers:.1f} s, "
        f"the wall time on {workers} idle cores.\n"
        f"load average (1, 5, 15 min) before {', '.join(f'{x:.1f}' for x in load_before)}; "
        f"after {', '.join(f'{x:.1f}' for x in load_after)} (other work on the machine inflates "
        f"wall time only).\nexpression cache of this process: {info.hits} hits, {info.misses} misses."
    )


if __name__ == "__main__":
    main()
