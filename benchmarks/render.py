"""Benchmark: one-page worksheets and their answer keys, one PDF per document.

    python benchmarks/render.py                      # 100 students, every core
    python benchmarks/render.py --students 20 --workers 2 --page-size Letter

The documents are synthetic but shaped like the real ones: a student header; scaled
dot-product attention with givens Q, K, V and a causal mask; a softmax-backward problem;
answer grids for every asked part. The key repeats the givens and prints every answer
as a matrix of decimals, with the formula that produced it. Values differ per student,
so only the formulas are shared between documents (the expression cache's case).

Prints a table: documents, pages, wall-clock and CPU seconds (this process and the pool's
workers), per page, for building the HTML and for writing the PDFs. CPU time divided by
the workers is what the wall time would be on that many idle cores; on a shared machine
the wall time is larger. POSIX only (``resource``).
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from qkvquiz.render.html import (
    answer_grid_html,
    header_html,
    markdown_to_html,
    math_cache_info,
)
from qkvquiz.render.pdf import render_pdfs

TITLE = "Attention, forward and backward"


def _number(x: float, decimals: int) -> str:
    if np.isneginf(x):
        return r"-\infty"
    text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def bmatrix(a: np.ndarray, decimals: int = 4) -> str:
    rows = (" & ".join(_number(float(x), decimals) for x in row) for row in a)
    return r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


def _softmax(s: np.ndarray) -> np.ndarray:
    z = np.exp(s - s.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _student(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.integers(-2, 3, (3, 2)).astype(float) for _ in range(3))
    mask = np.where(np.tril(np.ones((3, 3))) > 0, 0.0, -np.inf)
    s = q @ k.T / np.sqrt(2.0)
    a = _softmax(s + mask)
    z = a @ v
    dz = rng.integers(-2, 3, (3, 2)).astype(float)
    dv = a.T @ dz
    da = dz @ v.T
    ds = a * (da - (da * a).sum(axis=-1, keepdims=True))
    return {"q": q, "k": k, "v": v, "m": mask, "s": s, "a": a, "z": z, "dz": dz, "dv": dv, "ds": ds}


def _givens(g: dict[str, np.ndarray], mask: bool) -> str:
    qkv = f"$$Q = {bmatrix(g['q'])}, \\quad K = {bmatrix(g['k'])}, \\quad V = {bmatrix(g['v'])}$$\n"
    return qkv + (f"\n$$M = {bmatrix(g['m'])}$$\n" if mask else "")


def worksheet_markdown(seed: int) -> str:
    g = _student(seed)
    ds_grid = answer_grid_html("q2.ds", (3, 3), label=r"\nabla_S L =")
    return f"""
## 1. Causal attention (6 points)

With $d_k = 2$, the causal mask $M$ ($M_{{ij}} = -\\infty$ for $j > i$, else $0$) and

{_givens(g, mask=False)}
compute the scores $S = QK^\\top/\\sqrt{{d_k}} + M$, the weights
$A = \\operatorname{{softmax}}(S)$ (each row) and the output $Z = AV$. Give 2 decimals.

(a) The scores $S$.

{answer_grid_html("q1.scores", (3, 3), label="S =")}

(b) The weights $A$, where $A_{{ij}} = e^{{S_{{ij}}}} / \\sum_{{j'=1}}^{{n}} e^{{S_{{ij'}}}}$.

{answer_grid_html("q1.weights", (3, 3), label="A =")}

(c) The output $Z$.

{answer_grid_html("q1.output", (3, 2), label="Z =")}

## 2. Backward through the weights (4 points)

Given $\\nabla_Z L = {bmatrix(g["dz"])}$ and $A$ from problem 1, use
$$\\nabla_S L = A \\odot \\left(\\nabla_A L - \\operatorname{{rowsum}}(\\nabla_A L \\odot A)\\right), \\qquad \\nabla_A L = \\nabla_Z L\\, V^\\top$$

What is $\\nabla_S L$?

{ds_grid}
"""


def key_markdown(seed: int) -> str:
    g = _student(seed)
    return f"""
## 1. Causal attention

{_givens(g, mask=True)}
(a) $$S = \\frac{{QK^\\top}}{{\\sqrt{{d_k}}}} + M = {bmatrix(g["s"] + g["m"])}$$

(b) $$A = \\operatorname{{softmax}}(S) = {bmatrix(g["a"])}$$

(c) $$Z = AV = {bmatrix(g["z"])}$$

## 2. Backward through the weights

$$\\nabla_Z L = {bmatrix(g["dz"])}, \\qquad \\nabla_A L = \\nabla_Z L\\, V^\\top$$

(a) $$\\nabla_V L = A^\\top \\nabla_Z L = {bmatrix(g["dv"])}$$

(b) $$\\nabla_S L = A \\odot \\left(\\nabla_A L - \\operatorname{{rowsum}}(\\nabla_A L \\odot A)\\right) = {bmatrix(g["ds"])}$$

A masked score ($-\\infty$) gets weight $0$ and so gradient $0$: $\\sum_{{j=1}}^{{n}} A_{{ij}} = 1$ holds in every row.
"""


def build_jobs(students: int, out: Path, page_size: str) -> list[tuple[str, Path]]:
    jobs = []
    for i in range(students):
        sid, variant = f"S{20250000 + i}", f"V{i % 7:02d}-{(i * 7919) % 1000:03d}"
        sheet = markdown_to_html(
            worksheet_markdown(i),
            title=TITLE,
            header=header_html(TITLE, sid, variant),
            page_size=page_size,
        )
        key = markdown_to_html(
            key_markdown(i),
            title=f"{TITLE}: answer key",
            header=header_html(f"{TITLE}: answer key", sid, variant, name_line=False),
            page_size=page_size,
        )
        jobs.append((sheet, out / f"{sid}.pdf"))
        jobs.append((key, out / f"{sid}.key.pdf"))
    return jobs


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the pool's workers)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None, help="default: every core")
    parser.add_argument("--page-size", default="A4")
    parser.add_argument("--out", type=Path, default=None, help="keep the PDFs here")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args()
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    )
    workers = args.workers or cores

    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        wall0, cpu0 = time.perf_counter(), _cpu_seconds()
        jobs = build_jobs(args.students, out, args.page_size)
        wall1, cpu1 = time.perf_counter(), _cpu_seconds()
        results = render_pdfs(
            jobs, page_size=args.page_size, workers=args.workers, progress=not args.no_progress
        )
        wall2, cpu2 = time.perf_counter(), _cpu_seconds()

    pages = sum(r.pages for r in results)
    docs = len(jobs)
    table = Table(
        title=f"{args.students} worksheets + {args.students} keys, one PDF each, {args.page_size}, "
        f"{workers} worker(s) on {cores} core(s)"
    )
    for name in ("step", "docs", "pages", "wall s", "CPU s", "wall/page", "CPU/page"):
        table.add_column(name, justify="left" if name == "step" else "right")
    steps = [
        ("HTML", wall1 - wall0, cpu1 - cpu0),
        ("PDF", wall2 - wall1, cpu2 - cpu1),
        ("total", wall2 - wall0, cpu2 - cpu0),
    ]
    for name, wall, cpu in steps:
        table.add_row(
            name,
            str(docs),
            str(pages),
            f"{wall:.2f}",
            f"{cpu:.2f}",
            f"{wall / pages * 1000:.0f} ms",
            f"{cpu / pages * 1000:.0f} ms",
        )
    console = Console()
    console.print(table)
    info = math_cache_info()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    console.print(
        f"CPU / {workers} workers = {(cpu2 - cpu0) / workers:.1f} s: the wall time on {workers} idle "
        f"cores (load average now {load:.1f}; other work on the machine inflates wall time only).\n"
        f"expression cache: {info.hits} hits, {info.misses} misses; "
        f"WeasyPrint warnings: {sum(len(r.warnings) for r in results)}; "
        f"one-page documents: {sum(r.pages == 1 for r in results)}/{docs}"
    )


if __name__ == "__main__":
    main()
