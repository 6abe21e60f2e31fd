"""Practice mode: how fast the server answers a check, and how large and quick the static site is.

    python benchmarks/practice.py                    # 200 checks; a site of 50 variants per item of all-families
    python benchmarks/practice.py --quick            # 20 checks, 3 variants per item: checks the script
    python benchmarks/practice.py --variants 50 --checks 500

Rows:

- ``check``: ``POST /api/check`` to a running ``qkvquiz practice`` server on 127.0.0.1 (one
  thread of this process sends; the server answers in its own), answers of the
  ``attention-basics`` items and of ``all-families``: right, a known mistake, a carried slip and
  an unreadable box in turn. Median and 95th percentile of the round trip, including JSON,
  HTTP and the grader. Target: well under 100 ms.
- ``problem``: ``POST /api/problem`` (draw, solve, render the problem with its boxes).
- ``static``: ``build_static`` of ``all-families`` with ``--variants`` per item: build time,
  the size of ``index.html``, and how long the browser's share of opening it takes in Python
  terms (reading the page's JSON block); a browser run is in tests/practice.

Speed is measured, never asserted: the exit status is 0 whatever the times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, as the other scripts

from qkvquiz import practice  # noqa: E402
from qkvquiz.practice.progress import Progress  # noqa: E402
from qkvquiz.practice.server import PracticeApp, PracticeServer  # noqa: E402


def _post(conn, path: str, body: dict) -> tuple[float, dict]:
    data = json.dumps(body).encode()
    start = time.perf_counter()
    conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read()
    elapsed = time.perf_counter() - start
    if response.status != 200:
        raise RuntimeError(f"{path}: HTTP {response.status}: {payload[:200]!r}")
    return elapsed, json.loads(payload)


def answer_sets(problem: practice.Problem) -> list[dict]:
    """Right; the first known mistake of the first part that has one; a slip; an unreadable box."""
    right = {pid: json.loads(json.dumps(v)) for pid, v in problem.key.answers[0].items()}
    out = [right]
    (item,) = problem.key.items
    for m in item.family.misconceptions:
        if m.applies_to(item.params) and any(p.step == m.step for p in item.parts):
            import numpy as np

            from qkvquiz.key import encode

            value = np.asarray(m.fn(item.env, item.params, np))
            if value.shape == item.env[m.step].shape:
                part = next(p.id for p in item.parts if p.step == m.step)
                out.append({**right, part: encode(value[0])})
                break

    def slip(v):
        return [slip(x) for x in v] if isinstance(v, list) else (v + 1 if isinstance(v, (int, float)) else v)

    first = next(iter(right))
    out.append({**right, first: slip(right[first])})
    out.append({**right, first: "abc" if not isinstance(right[first], list) else slip_text(right[first])})
    return out


def slip_text(v):
    return [slip_text(x) for x in v] if isinstance(v, list) and isinstance(v[0], list) else ["1/0", *v[1:]]


def bench_server(checks: int) -> list[tuple[str, str]]:
    topics = practice.topics_for(["attention-basics", "all-families"])
    with tempfile.TemporaryDirectory() as tmp:
        app = PracticeApp(topics, lang="en", progress=Progress(Path(tmp) / "p.json"))
        server = PracticeServer(app, 0)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        try:
            problem_times, check_times = [], []
            jobs = []
            for k, topic in enumerate(topics):
                elapsed, doc = _post(conn, "/api/problem", {"topic": topic.id, "seed": f"bench-{k}"})
                problem_times.append(elapsed)
                problem = practice.new_problem(app.topics[topic.id], doc["seed"])
                jobs += [(topic.id, doc["seed"], answers) for answers in answer_sets(problem)]
            for n in range(checks):
                topic, seed, answers = jobs[n % len(jobs)]
                elapsed, _doc = _post(conn, "/api/check", {"topic": topic, "seed": seed, "answers": answers})
                check_times.append(elapsed)
        finally:
            conn.close()
            server.shutdown()
            server.server_close()
    return [
        ("check (POST /api/check)", f"median {ms(statistics.median(check_times))}, p95 {ms(p95(check_times))}, "
                                    f"max {ms(max(check_times))} over {len(check_times)} checks of {len(topics)} topics"),
        ("problem (POST /api/problem)", f"median {ms(statistics.median(problem_times))}, "
                                        f"max {ms(max(problem_times))} over {len(problem_times)} topics"),
    ]


def bench_static(variants: int) -> list[tuple[str, str]]:
    topics = practice.topics_for(["all-families"])
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        page = practice.build_static(topics, variants, Path(tmp) / "site", lang="en", seed="bench")
        built = time.perf_counter() - start
        size = page.stat().st_size
        text = page.read_text(encoding="utf-8")
        start = time.perf_counter()
        block = text.split('<script type="application/json" id="practice-data">', 1)[1].split("</script>", 1)[0]
        json.loads(block)
        opened = time.perf_counter() - start
    return [
        (f"static site, {variants} variants × {len(topics)} items", f"{size / 1e6:.2f} MB, built in {built:.1f} s "
         f"({built / (variants * len(topics)) * 1000:.0f} ms per variant); page data read in {ms(opened)}"),
    ]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--checks", type=int, default=200)
    parser.add_argument("--variants", type=int, default=50)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.checks, args.variants = 20, 3
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {cores} cores, {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"load {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "")
    rows = bench_server(args.checks) + bench_static(args.variants)
    print("\n| what | measured |\n|---|---|")
    for what, measured in rows:
        print(f"| {what} | {measured} |")


if __name__ == "__main__":
    main()
