"""How long grading a large class takes: 10,000 submissions of the 5-item attention-basics worksheet.

    python benchmarks/grading.py [--students 10000] [--repeat 3] [--no-feedback]

Builds a key, writes one submission file per student (most right in plain numbers, some with
exact forms as text, a slip, a known mistake, an error carried forward, or a malformed part),
then times each phase of ``qkvquiz grade`` and prints a table (best of ``--repeat`` runs).
Setup (solving the key, writing the files) is not timed.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from qkvquiz.core.resources import bank_dir
from qkvquiz.grade.grader import grade_columns, match_students, read_columns, read_submissions
from qkvquiz.grade.report import write_reports
from qkvquiz.json_rows import dumps
from qkvquiz.key import key_to_json, load_key
from qkvquiz.spec import load_spec
from qkvquiz.worksheet import build_worksheet


def submissions(doc: dict, rng: np.random.Generator) -> list[dict]:
    """One submission per student: a realistic mix of right, text, slipped and malformed answers."""
    out = []
    for s in doc["students"]:
        answers = copy.deepcopy(s["answers"])
        kind = rng.random()
        if kind < 0.15:  # exact forms and a decimal comma as text
            answers["q1.scores"] = f"{answers['q1.scores']}".replace(".", ",")
            answers["q2.scores"] = [[str(x) for x in row] for row in answers["q2.scores"]]
        elif kind < 0.35:  # a slip in one weight
            answers["q3.weights"][0][0] = round(float(answers["q3.weights"][0][0]) + 0.2, 3)
        elif kind < 0.45:  # the weights slip, and the output computed from them (carried forward)
            w = np.array(answers["q5.weights"], dtype=float)
            w[0] = w[0][::-1]
            answers["q5.weights"] = w.round(3).tolist()
            v = np.array(s["givens"]["q5"]["V"], dtype=float)
            answers["q5.output"] = (w @ v).round(3).tolist()
        elif kind < 0.5:  # malformed parts
            answers["q3.weights"] = [[0.5, 0.5]]
            answers["q4.scores"][1][1] = "banana"
            answers["q5.output"] = None
        out.append({"student": s["student"], "answers": answers})
    return out


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-feedback", action="store_true", help="skip timing the per-student feedback files")
    args = ap.parse_args()

    spec = load_spec(bank_dir() / "attention-basics.yaml")
    ids = [f"s{i:05d}" for i in range(args.students)]
    start = time.perf_counter()
    doc = json.loads(json.dumps(key_to_json(build_worksheet(spec, ids, seed="bench"))))
    setup = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as tmp:
        key_path = Path(tmp) / "key.json"
        key_path.write_text(dumps(doc), encoding="utf-8")
        t_key, key = timed(lambda: load_key(key_path), args.repeat)
        parts = len(key.parts)
        folder = Path(tmp) / "subs"
        folder.mkdir()
        paths = []
        for sub in submissions(doc, np.random.default_rng(0)):
            path = folder / f"{sub['student']}.json"
            path.write_text(json.dumps(sub), encoding="utf-8")
            paths.append(path)

        t_read, (subs, problems) = timed(lambda: read_submissions(paths), args.repeat)
        t_match, (accepted, _) = timed(lambda: match_students(key, subs), args.repeat)
        answers = [s.answers for _, s in accepted]
        t_parse, columns = timed(lambda: read_columns(key, answers), args.repeat)
        t_grade, report = timed(lambda: grade_columns(key, accepted, columns, list(problems)), args.repeat)
        out = Path(tmp) / "grades"
        t_summary, _ = timed(lambda: write_reports(report, out, feedback=False), args.repeat)
        t_feedback = None
        if not args.no_feedback:
            t_all, _ = timed(lambda: write_reports(report, out, feedback=True), 1)
            t_feedback = t_all - t_summary

    verdicts: dict[str, int] = {}
    for r in report.results:
        for p in r.parts:
            verdicts[p.verdict] = verdicts.get(p.verdict, 0) + 1
    n = len(report.results)
    total = t_key + t_read + t_match + t_parse + t_grade
    rows = [
        ("load key.json", t_key),
        ("read submission files (JSON)", t_read),
        ("match students to the key", t_match),
        ("parse answers", t_parse),
        ("grade (tolerance, diagnosis, carried forward)", t_grade),
        ("total: load, read, parse, grade", total),
        ("write results.csv/json + item analysis", t_summary),
    ]
    if t_feedback is not None:
        rows.append((f"write {n} feedback files", t_feedback))
    print(f"{n} submissions × {parts} parts of {spec.title!r} (key built in {setup:.1f} s, untimed)")
    print(f"verdicts: {', '.join(f'{k} {v}' for k, v in sorted(verdicts.items()))}")
    print()
    width = max(len(r[0]) for r in rows)
    print(f"| {'phase':<{width}} | seconds | µs per submission |")
    print(f"|{'-' * (width + 2)}|---------|-------------------|")
    for name, seconds in rows:
        print(f"| {name:<{width}} | {seconds:7.2f} | {1e6 * seconds / n:17.0f} |")


if __name__ == "__main__":
    main()
