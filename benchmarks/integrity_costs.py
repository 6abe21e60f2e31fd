"""What the integrity measures cost: fsync'd atomic writes, the template sandbox, submission checks.

Run from the repository root: ``python benchmarks/integrity_costs.py [students]``. Prints a
table of best-of-3 wall times; each row compares the shipped behaviour with another: fsync off,
the bundled templates rendered in the sandbox (which only a user's templates use), submissions
read with plain ``json.loads``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import qkvquiz.core.submissions as submissions
import qkvquiz.grade.grader as grader
import qkvquiz.render.environment as environment
import qkvquiz.render.markdown as markdown
from qkvquiz import build_worksheet, generate_set, load_spec
from qkvquiz.core.resources import bank_dir
from qkvquiz.key import key_from_json, key_to_json


def best(fn: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main(students: int) -> None:
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    ids = [f"s{i:03d}" for i in range(students)]
    ws = build_worksheet(spec, ids, 1)
    rows = []

    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))
        run = lambda: generate_set(spec, ids, Path(tmp) / str(next(counter)), seed=1)  # noqa: E731
        with_fsync = best(run)
        real_fsync, os.fsync = os.fsync, lambda fd: None
        try:
            without_fsync = best(run)
        finally:
            os.fsync = real_fsync
        rows.append((f"generate {students} students (2 files each + key)", with_fsync, without_fsync, "fsync off"))

    def render() -> None:
        markdown.key_markdown(ws)
        for i in range(students):
            markdown.worksheet_markdown(ws, i)

    # The bundled templates render without the sandbox (a user's keep it): what it would cost them.
    plain = best(render)
    real_env, environment.trusted_environment = environment.trusted_environment, environment.TemplateSandbox
    environment.environment.cache_clear()
    try:
        sandboxed = best(render)
    finally:
        environment.trusted_environment = real_env
        environment.environment.cache_clear()
    rows.append((f"render key.md + {students} worksheets (bundled)", plain, sandboxed, "sandboxed"))

    key_doc = json.loads(json.dumps(key_to_json(ws)))
    key = key_from_json(key_doc)
    raws = [json.dumps({"student": s["student"], "answers": s["answers"]}).encode() for s in key_doc["students"]]
    checked = best(lambda: grader.grade(key, [submissions.submission_from_bytes(r, "x") for r in raws]))
    unchecked = best(lambda: grader.grade(key, [submissions.Submission("x", d["student"], d["answers"])
                                                for d in map(json.loads, raws)]))
    rows.append((f"read + grade {students} submissions", checked, unchecked, "plain json.loads"))

    print(f"{'task':48} {'shipped':>9} {'without':>9}  {'(without =)':<18} overhead")
    for task, shipped, without, what in rows:
        print(f"{task:48} {shipped:8.3f}s {without:8.3f}s  {what:<18} {100 * (shipped / without - 1):+.0f}%")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
