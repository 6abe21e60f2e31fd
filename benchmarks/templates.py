"""Benchmark: rendering the bundled templates (Markdown), apart from solving and writing files.

    python benchmarks/templates.py                  # 300 students of all-families.yaml, best of 3
    python benchmarks/templates.py --students 50 --spec problem_bank/attention-basics.yaml

The worksheet (every variant solved) is built before timing; the timed part is what
``generate`` does per student in Markdown: each item's problem and solution
(``render_student``) and the worksheet page around the problems (``worksheet_markdown``).
Prints a Markdown table: spec, students, templates rendered, the best wall-clock and CPU
seconds (CPU time is what a shared machine does not disturb), CPU per student. The first, untimed pass compiles the templates (or loads them from the cache).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from qkvquiz.render.markdown import render_student, worksheet_markdown
from qkvquiz.spec import load_spec
from qkvquiz.worksheet import build_worksheet

ROOT = Path(__file__).resolve().parent.parent


def render_all(ws, students: int) -> int:
    rendered = 0
    for s in range(students):
        texts = render_student(ws, s)
        worksheet_markdown(ws, s, problems=texts["problem"])
        rendered += len(texts["problem"]) + len(texts["solution"]) + 1
    return rendered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--spec", default=str(ROOT / "problem_bank" / "all-families.yaml"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ws = build_worksheet(load_spec(args.spec), [f"s{i:04d}" for i in range(args.students)], seed=7)
    render_all(ws, min(2, args.students))  # compile (or load) every template once, untimed
    best_wall = best_cpu = float("inf")
    rendered = 0
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        rendered = render_all(ws, args.students)
        best_wall = min(best_wall, time.perf_counter() - wall)
        best_cpu = min(best_cpu, time.process_time() - cpu)
    print("| spec | students | templates rendered | best wall s | best CPU s | CPU ms per student |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| {Path(args.spec).name} | {args.students} | {rendered} | {best_wall:.2f} | {best_cpu:.2f} "
          f"| {1000 * best_cpu / args.students:.1f} |")


if __name__ == "__main__":
    main()
