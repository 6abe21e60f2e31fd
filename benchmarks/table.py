"""The class-scale table: start-up, generate, grade and PDFs, each beside its target and the peers.

    python benchmarks/table.py                       # every row, best of 3
    python benchmarks/table.py --quick               # tiny sizes: checks the script (seconds)
    python benchmarks/table.py --rows startup,grade10k --repeat 5
    python benchmarks/table.py --profile gen10k      # one row under cProfile, top 25 cumulative

Every row runs as a user would: a subprocess of the real CLI (``python -m qkvquiz``), with the
instructor secret in a temporary ``XDG_CONFIG_HOME`` (made by ``qkvquiz init`` before timing).
Rows (ids for ``--rows`` / ``--profile``):

- ``startup``    ``qkvquiz --help``
- ``gen300one``  ``generate`` 300 students × one ``attention.output`` problem, md + keys
- ``gen300all``  ``generate`` 300 students × ``all-families.yaml``, md + keys
- ``gen10k``     ``generate`` 10,000 students × ``attention-basics``
- ``grade10k``   ``grade KEY FOLDER --out OUT``: 10,000 submissions of attention-basics (from the
  key's exact answers, some perturbed so that text parsing, diagnosis, carried credit and
  malformed parts run; see ``grading.py``), results, item analysis and feedback files; then the
  same phases through the library (read + grade, reports, feedback), untimed setup excluded
- ``pdf100``     ``generate --format pdf`` for 100 students of ``render.py``'s one-page spec:
  100 ``worksheet.pdf`` + 100 ``keys/<id>.pdf``

Every run's output stays in the temporary folder until the table is printed (about 2 GB at full
size): deleting thousands of files just before a timed run would slow its own file creation on
file systems that scan recently freed inodes (ext4 without a journal).
Times are the best of ``--repeat`` runs: wall clock and CPU (this process and its children,
``RUSAGE_CHILDREN``, so the PDF pool's workers count). Setup (keys and submission files for
``grade``) is not timed. The table is Markdown: job | today | target | measured | CPU | of which
kernel | ÷ target | peer | ÷ peer; the kernel's share is mostly file creation, the part of a row
that moves with what the file system freed just before. ``÷ target`` at or under 1 meets the
target, ``÷ peer`` at or under 0.2 is "5×
faster than the peer". The machine (cores, CPU, Python) and the load average before and after
are printed so that a noisy run is visible. Speed is measured, never asserted: the exit status
is 0 whatever the times (a CLI run that fails is reported in the table's notes).
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import json
import os
import platform
import pstats
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from grading import submissions as perturbed_submissions  # noqa: E402  (benchmarks/grading.py)
from render import ONE_PAGE_SPEC  # noqa: E402  (benchmarks/render.py)

ONE_OUTPUT_SPEC = {
    "title": "A whole attention layer",
    "instructions": "Give every number to 2 decimal places.",
    "items": [{"family": "attention.output", "title": "A whole attention layer"}],
}


@dataclass
class Row:
    id: str
    job: str
    today: float | None  # seconds, from the issue
    target: float | None
    full: int  # students / submissions at full size
    quick: int
    peer: tuple[str, float] | None = None
    today_cpu: float | None = None


ROWS = [
    Row("startup", "`qkvquiz --help` (start-up)", 0.50, 0.15, 0, 0),
    Row("gen300one", "`generate` {n} students × one `attention.output` problem, md + keys", 2.4, 0.4, 300, 5,
        ("QuizGenerator, 300 variants of its one attention question", 2.55)),
    Row("gen300all", "`generate` {n} students × `all-families.yaml`, md + keys", 14.5, 2.0, 300, 5,
        ("R/exams, 300 HTML exams", 17.8)),
    Row("gen10k", "`generate` {n} students × `attention-basics`", 90.0, 15.0, 10_000, 20),
    Row("grade10k", "`grade` {n} submissions of attention-basics, from files, with reports and feedback",
        18.7, 4.0, 10_000, 20),
    Row("pdf100", "{n} worksheet PDFs + {n} key PDFs (`generate --format pdf`)", 32.6, 12.0, 100, 2,
        ("R/exams, 100 PDFs", 43.0), today_cpu=62.0),
]
PHASE_TODAY = {"read + grade (library)": 8.5, "reports: results, item analysis": 1.8, "feedback files": 8.4}


@dataclass(frozen=True)
class Spent:
    """Seconds of one run: wall clock, CPU (user and kernel) and, of that CPU, the kernel's (file
    creation, mostly: the part of a row that moves with the file system's state)."""

    wall: float
    cpu: float
    kernel: float

    def __sub__(self, other: Spent) -> Spent:
        return Spent(max(self.wall - other.wall, 0.0), max(self.cpu - other.cpu, 0.0),
                     max(self.kernel - other.kernel, 0.0))


@dataclass
class Timing:
    wall: float = float("inf")
    cpu: float = float("inf")
    kernel: float = float("inf")
    notes: list[str] = field(default_factory=list)

    def add(self, spent: Spent) -> None:
        if spent.wall < self.wall:
            self.wall, self.cpu, self.kernel = spent.wall, spent.cpu, spent.kernel


# ------------------------------------------------------------------ measuring


def spent_so_far() -> Spent:
    """Wall clock, and CPU time of this process and its finished, waited-for children."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    kernel = me.ru_stime + kids.ru_stime
    return Spent(time.perf_counter(), me.ru_utime + kids.ru_utime + kernel, kernel)


def measure(fn: Callable[[], object]) -> tuple[Spent, object]:
    start = spent_so_far()
    result = fn()
    return spent_so_far() - start, result


class Cli:
    """The real CLI in a subprocess, with its own config folder (the secret) and no $QKVQUIZ_SECRET."""

    def __init__(self, tmp: Path, profile_to: Path | None = None) -> None:
        self.env = {k: v for k, v in os.environ.items() if k != "QKVQUIZ_SECRET"}
        self.env["XDG_CONFIG_HOME"] = str(tmp / "config")
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.env["COLUMNS"] = "100"
        self.profile_to = profile_to

    def argv(self, args: list[str]) -> list[str]:
        if self.profile_to is not None:
            return [sys.executable, "-m", "cProfile", "-o", str(self.profile_to), "-m", "qkvquiz", *args]
        return [sys.executable, "-m", "qkvquiz", *args]

    def run(self, args: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(args), env=self.env, capture_output=True, text=True, check=False)

    def timed(self, args: list[str], timing: Timing) -> subprocess.CompletedProcess:
        spent, proc = measure(lambda: self.run(args))
        timing.add(spent)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
            timing.notes.append(f"exit {proc.returncode}: {tail[0][:160]}")
        return proc


def write_spec(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


# ------------------------------------------------------------------ the rows


_RUNS = itertools.count()


def run_generate(cli: Cli, tmp: Path, spec: str, n: int, repeat: int, extra: list[str] = (),
                 check: Callable[[Path], str | None] | None = None) -> Timing:
    timing = Timing()
    for i in range(repeat):
        out = tmp / f"gen-{next(_RUNS)}"  # a folder of its own: outputs stay until the table is printed
        cli.timed(["generate", spec, "-n", str(n), "-o", str(out), "--seed", "bench", *extra], timing)
        if check is not None and (problem := check(out)):
            timing.notes.append(problem)
        # Kept until the run ends: files deleted just before a timed run make creating files slower
        # on some file systems (ext4 without a journal scans the inodes freed in the last ~30 s).
    return timing


def check_pdfs(n: int) -> Callable[[Path], str | None]:
    def check(out: Path) -> str | None:
        sheets = list((out / "students").glob("*/worksheet.pdf"))
        keys = list((out / "keys").glob("*.pdf"))
        if len(sheets) != n or len(keys) != n:
            return f"expected {n} + {n} PDFs, found {len(sheets)} worksheets + {len(keys)} keys"
        return None
    return check


def grade_setup(cli: Cli, tmp: Path, n: int) -> tuple[Path, Path, int]:
    """A key of ``n`` students of attention-basics and one submission file each (untimed)."""
    key_set = tmp / "grade-set"
    proc = cli.run(["generate", "attention-basics", "-n", str(n), "-o", str(key_set), "--seed", "bench"])
    if proc.returncode != 0:
        raise SystemExit(f"setup: generate failed: {proc.stderr.strip()[-400:]}")
    key_path = key_set / "key.json"
    doc = json.loads(key_path.read_text(encoding="utf-8"))
    folder = tmp / "submissions"
    folder.mkdir()
    variants = {s["student"]: s.get("variant") for s in doc["students"]}
    for sub in perturbed_submissions(doc, np.random.default_rng(0)):
        body = {"student": sub["student"], "variant": variants[sub["student"]], "set": doc.get("set"),
                "answers": sub["answers"]}
        (folder / f"{sub['student']}.json").write_text(json.dumps(body), encoding="utf-8")
    return key_path, folder, len(doc["students"])


def run_grade(cli: Cli, tmp: Path, n: int, repeat: int, phases: bool) -> tuple[Timing, dict[str, Timing]]:
    key_path, folder, _ = grade_setup(cli, tmp, n)
    timing = Timing()
    for i in range(repeat):
        out = tmp / f"grades-{i}"
        cli.timed(["grade", str(key_path), str(folder), "--out", str(out)], timing)
        if not (out / "results.csv").exists():
            timing.notes.append("no results.csv written")
    return timing, (grade_phases(key_path, folder, tmp, repeat) if phases else {})


def grade_phases(key_path: Path, folder: Path, tmp: Path, repeat: int) -> dict[str, Timing]:
    """The same work through the library, phase by phase, as ``grading.py`` does (in this process)."""
    from qkvquiz.grade.grader import grade_columns, match_students, read_columns, read_submissions
    from qkvquiz.grade.report import write_reports
    from qkvquiz.key import load_key

    paths = sorted(folder.glob("*.json"))
    out: dict[str, Timing] = {name: Timing() for name in PHASE_TODAY}

    def read_and_grade():
        key = load_key(key_path)
        subs, problems = read_submissions(paths)
        accepted, _ = match_students(key, subs)
        columns = read_columns(key, [s.answers for _, s in accepted])
        return grade_columns(key, accepted, columns, list(problems))

    for i in range(repeat):
        spent, report = measure(read_and_grade)
        out["read + grade (library)"].add(spent)
        reports, _ = measure(lambda: write_reports(report, tmp / f"lib-a{i}", feedback=False))
        out["reports: results, item analysis"].add(reports)
        with_feedback, _ = measure(lambda: write_reports(report, tmp / f"lib-b{i}", feedback=True))
        out["feedback files"].add(with_feedback - reports)
    verdicts: dict[str, int] = {}
    for result in report.results:
        for part in result.parts:
            verdicts[part.verdict] = verdicts.get(part.verdict, 0) + 1
    out["read + grade (library)"].notes.append(
        "verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())))
    return out


def run_row(row: Row, cli: Cli, tmp: Path, n: int, repeat: int, phases: bool = True
            ) -> tuple[Timing, dict[str, Timing]]:
    if row.id == "startup":
        timing = Timing()
        for _ in range(repeat):
            cli.timed(["--help"], timing)
        return timing, {}
    if row.id == "gen300one":
        return run_generate(cli, tmp, str(write_spec(tmp / "one-output.yaml", ONE_OUTPUT_SPEC)), n, repeat), {}
    if row.id == "gen300all":
        return run_generate(cli, tmp, str(ROOT / "problem_bank" / "all-families.yaml"), n, repeat), {}
    if row.id == "gen10k":
        return run_generate(cli, tmp, "attention-basics", n, repeat), {}
    if row.id == "grade10k":
        return run_grade(cli, tmp, n, repeat, phases)
    if row.id == "pdf100":
        spec = str(write_spec(tmp / "one-page.yaml", ONE_PAGE_SPEC))
        return run_generate(cli, tmp, spec, n, repeat, ["--format", "pdf"], check_pdfs(n)), {}
    raise ValueError(row.id)


# ------------------------------------------------------------------ printing


def machine_line() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{cores} core(s) usable ({os.cpu_count()} online), {model}; Python {platform.python_version()} "
            f"({platform.python_implementation()}), {platform.system()} {platform.release()}")


def load_line() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None or x == float("inf") else f"{x:.{digits}f}"


def print_table(results: list[tuple[Row, int, Timing, dict[str, Timing]]], quick: bool) -> None:
    print("| job | today (s) | target (s) | measured wall (s) | CPU (s) | of which kernel (s) | ÷ target | peer (s) "
          "| ÷ peer |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for row, n, t, phases in results:
        ok = t.wall != float("inf")
        ratio = "—" if quick or not ok or row.target is None else f"{t.wall / row.target:.2f}"
        if row.peer:
            peer = f"{row.peer[1]:.2f} ({row.peer[0]})"
            vs_peer = "—" if quick or not ok else f"{t.wall / row.peer[1]:.2f}"
        else:
            peer, vs_peer = "—", "—"
        today = fmt(row.today) + (f" ({fmt(row.today_cpu, 0)} CPU)" if row.today_cpu else "")
        print(f"| {row.job.format(n=f'{n:,}')} | {today} | {fmt(row.target)} | {fmt(t.wall)} | {fmt(t.cpu)} "
              f"| {fmt(t.kernel)} | {ratio} | {peer} | {vs_peer} |")
        for name, pt in phases.items():
            print(f"| ↳ {name} | {fmt(PHASE_TODAY[name])} | — | {fmt(pt.wall)} | {fmt(pt.cpu)} | {fmt(pt.kernel)} "
                  "| — | — | — |")
    notes = [(row.id, note) for row, _, t, ph in results
             for note in dict.fromkeys(t.notes + [n for pt in ph.values() for n in pt.notes])]
    if notes:
        print("\nnotes:")
        for rid, note in notes:
            print(f"- {rid}: {note}")


def print_profile(path: Path, top: int = 25) -> None:
    """The top ``top`` entries by cumulative time, then the top 15 by own time (where it is spent)."""
    stats = pstats.Stats(str(path))
    stats.strip_dirs().sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(15)


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ids = [r.id for r in ROWS]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per row (default 3)")
    ap.add_argument("--quick", action="store_true", help="tiny sizes, to check that the script works")
    ap.add_argument("--rows", default=",".join(ids), help=f"comma-separated, of: {', '.join(ids)}")
    ap.add_argument("--profile", metavar="ROW", choices=ids,
                    help="run ROW once under cProfile (the CLI process) and print the top 25 cumulative "
                    "(and the top 15 by own time)")
    ap.add_argument("--no-phases", action="store_true", help="skip the library phases of grade10k")
    args = ap.parse_args(argv)
    wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(wanted) - set(ids))
    if unknown:
        ap.error(f"unknown rows {unknown}; choose from {ids}")

    print(f"machine: {machine_line()}")
    # Installing a package compiles its modules to bytecode; a checkout (or an editable install on a
    # machine with PYTHONDONTWRITEBYTECODE) would compile qkvquiz's modules on every CLI run instead,
    # about 0.2 s of start-up a user does not pay. Compiled here once, untimed.
    compileall.compile_dir(str(ROOT / "qkvquiz"), quiet=1)
    print("qkvquiz's modules compiled to bytecode before timing (as installing the package does)")
    print(f"output folders under {tempfile.gettempdir()} (TMPDIR): creating files there is part of every generate row")
    print(f"load average (1, 5, 15 min) before: {load_line()}")
    mode = "QUICK (tiny sizes; times are not comparable with targets)" if args.quick else "full sizes"
    with tempfile.TemporaryDirectory(prefix="qkvquiz-bench-") as name:
        tmp = Path(name)
        if args.profile:
            row = next(r for r in ROWS if r.id == args.profile)
            n = row.quick if args.quick else row.full
            prof = tmp / "cli.prof"
            Cli(tmp).run(["init"])
            if row.id == "grade10k":  # profile only the timed command, not the setup
                key_path, folder, _ = grade_setup(Cli(tmp), tmp, n)
                t = Timing()
                Cli(tmp, prof).timed(["grade", str(key_path), str(folder), "--out", str(tmp / "g")], t)
            else:
                t, _ = run_row(row, Cli(tmp, prof), tmp, n, 1)
            print(f"profile of {row.id} ({mode}, n = {n}): wall {fmt(t.wall)} s under cProfile, "
                  f"CPU {fmt(t.cpu)} s; PDF pool workers are not profiled")
            for note in t.notes:
                print(f"note: {note}")
            if prof.exists():
                print_profile(prof)
        else:
            cli = Cli(tmp)
            init = cli.run(["init"])  # the secret exists before anything is timed
            if init.returncode != 0:
                print(f"note: qkvquiz init exited {init.returncode}: {init.stderr.strip()[-200:]}")
            print(f"{mode}, best of {args.repeat}; wall and CPU (children included) seconds\n")
            results = []
            for row in ROWS:
                if row.id not in wanted:
                    continue
                n = row.quick if args.quick else row.full
                timing, phases = run_row(row, cli, tmp, n, max(1, args.repeat), phases=not args.no_phases)
                results.append((row, n, timing, phases))
                print(f"  {row.id}: {fmt(timing.wall)} s wall, {fmt(timing.cpu)} s CPU ({fmt(timing.kernel)} kernel)",
                      file=sys.stderr, flush=True)
            print_table(results, args.quick)
    print(f"\nload average (1, 5, 15 min) after: {load_line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
