"""The GPU table: CuPy tests, the engine on the device, and whole commands with --backend numpy vs cupy.

    python benchmarks/gpu.py                 # every part (on a CUDA machine with CuPy)
    python benchmarks/gpu.py --quick         # tiny sizes: checks the script (seconds; runs without a GPU)
    python benchmarks/gpu.py --parts cli     # some parts of: tests, engine, cli, crossover

One short script for any CUDA machine, to be run after any change to the engine, the families or
how a command places its work, and recorded in docs/performance.md with the card's name. It prints:

1. **tests**: ``pytest -m gpu`` (every CuPy test; they skip where CuPy or a device is missing),
   with its pass/skip/fail counts;
2. **engine**: ``benchmarks/engine.py``'s instances-per-second tables on the device
   (``--backend cupy``), beside the NumPy rows;
3. **cli**: ``generate`` (Markdown) for 300 and 10,000 students of ``attention-basics`` and 300 of
   ``all-families``, and ``grade`` of 10,000 submissions, each with ``--backend numpy`` and
   ``--backend cupy`` on the same machine in the same run, best of ``--repeat``, wall seconds,
   and where ``--backend cupy`` placed the work (small work stays on the CPU: engine/backend.py);
4. **crossover**: where a GPU starts to pay. ``build_worksheet`` of all-families for growing
   classes, each in a fresh process (so CuPy's import, the CUDA context and kernel compilation
   count, as they do in a command), on NumPy and forced onto CuPy, beside the CPU seconds that
   ``screening_seconds`` estimates. The estimate at the first class where CuPy wins is what
   ``DEVICE_BREAK_EVEN_S`` should be.

Where CuPy or a device is missing the CuPy rows say so and the NumPy rows still run, so the script
can be checked anywhere. On a lent machine without a package registry, the package's dependencies
travel as wheels (``pip download --only-binary=:all: --python-version 3.12 … -d .whl``, installed
there with ``pip install --no-index --target``); the device tool's README gives the steps.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


def device_name() -> str | None:
    """The CUDA card CuPy sees, or None (with why, printed) where there is none."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device is visible")
        name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:  # noqa: BLE001 - any reason is reported, and the CPU rows still run
        print(f"no GPU rows: {type(exc).__name__}: {exc}")
        return None


def run_tests() -> None:
    print("## CuPy tests (pytest -m gpu)\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    print(lines[-1] if lines else done.stderr.strip()[-500:])
    print(f"(exit {done.returncode})\n")


def run_engine(quick: bool, gpu: bool) -> None:
    print("## Engine: instances per second\n")
    args = [sys.executable, str(HERE / "engine.py"), "--students", "0", "--submissions", "0",
            "--backend", "all" if gpu else "numpy"]
    args += ["--sizes", "1e3", "--repeat", "1"] if quick else ["--sizes", "1e4,1e6,1e7", "--repeat", "3"]
    subprocess.run(args, cwd=ROOT, check=False)
    print()


def _env(config_home: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CONFIG_HOME": str(config_home), "PYTHONPATH": str(ROOT)}


def _best(command: list[str], env: dict[str, str], repeat: int) -> tuple[float | None, str]:
    """The best wall time of ``command`` over ``repeat`` runs, or None and why it failed.

    For a run that kept ``--backend cupy``'s work on the CPU, the second value says so."""
    best, note = None, ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            return None, (done.stderr or done.stdout).strip().splitlines()[-1][:120]
        best = seconds if best is None else min(best, seconds)
        note = "on the CPU" if "computed on the CPU" in done.stderr else ""
    return best, note


def run_cli(quick: bool, gpu: bool, repeat: int) -> None:
    print("## Whole commands: wall seconds, --backend numpy vs cupy\n")
    small, large = (20, 200) if quick else (300, 10_000)
    backends = ["numpy", "cupy"] if gpu else ["numpy"]
    cli = [sys.executable, "-m", "qkvquiz"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        env = _env(tmp_path / "config")
        subprocess.run([*cli, "init"], cwd=ROOT, env=env, capture_output=True, check=True)
        jobs = [(f"generate attention-basics, {n} students", ["attention-basics", n]) for n in (small, large)]
        jobs.append((f"generate all-families, {small} students", ["all-families", small]))
        for label, (spec, n) in jobs:
            times = {}
            for backend in backends:
                out = tmp_path / f"{spec}-{n}-{backend}"
                times[backend] = _best([*cli, "generate", spec, "--students", str(n), "--format", "md", "--force",
                                        "--backend", backend, "--out", str(out)], env, repeat)
            rows.append((label, times))
        # grade: the key's own answers for every student of the large class
        key_dir = tmp_path / f"attention-basics-{large}-numpy"
        submissions = tmp_path / "submissions"
        submissions.mkdir()
        doc = json.loads((key_dir / "key.json").read_text(encoding="utf-8"))
        for student in doc["students"]:
            answer = {"student": student["student"], "variant": student["variant"], "set": doc["set"],
                      "answers": student["answers"]}
            (submissions / f"{student['student']}.json").write_text(json.dumps(answer), encoding="utf-8")
        times = {backend: _best([*cli, "grade", str(key_dir / "key.json"), str(submissions), "--backend", backend,
                                 "--out", str(tmp_path / f"grades-{backend}")], env, repeat) for backend in backends}
        rows.append((f"grade {large} submissions", times))
    print("| command | numpy | cupy | cupy ÷ numpy |")
    print("|---|---:|---:|---:|")
    for label, times in rows:
        cells = []
        for backend in ("numpy", "cupy"):
            seconds, why = times.get(backend, (None, "no GPU"))
            cells.append(f"{seconds:.2f}" + (f" ({why})" if why else "") if seconds is not None else f"— ({why})")
        ratio = (f"{times['cupy'][0] / times['numpy'][0]:.2f}"
                 if "cupy" in times and times["cupy"][0] and times["numpy"][0] else "—")
        print(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    print()


CROSSOVER = """
import sys, time
import numpy as np
from qkvquiz.core.resources import bank_dir
from qkvquiz.spec import load_spec
from qkvquiz.worksheet import build_worksheet, screening_seconds
backend, n = sys.argv[1], int(sys.argv[2])
spec = load_spec(bank_dir() / "all-families.yaml")
ids = [f"s{i}" for i in range(n)]
start = time.perf_counter()
if backend == "cupy":
    import cupy as xp
else:
    xp = np
build_worksheet(spec, ids, seed=1, xp=xp)
built = time.perf_counter() - start
print(f"{built:.3f} {screening_seconds(spec, n) if backend == 'numpy' else 0:.3f}")
"""


def run_crossover(quick: bool, gpu: bool) -> None:
    print("## Crossover: build_worksheet of all-families, fresh process each, wall seconds\n")
    sizes = (100, 1000) if quick else (1_000, 10_000, 100_000, 300_000)
    backends = ["numpy", "cupy"] if gpu else ["numpy"]
    print("| students | CPU estimate | numpy | cupy (forced) |")
    print("|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        env = _env(Path(tmp) / "config")
        for n in sizes:
            cells, estimate = {}, "—"
            for backend in backends:
                done = subprocess.run([sys.executable, "-c", CROSSOVER, backend, str(n)], cwd=ROOT, env=env,
                                      capture_output=True, text=True)
                if done.returncode:
                    cells[backend] = "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:80]
                    continue
                built, guessed = done.stdout.split()[-2:]
                cells[backend] = built
                if backend == "numpy":
                    estimate = guessed
            print(f"| {n} | {estimate} | {cells.get('numpy', '—')} | {cells.get('cupy', '— (no GPU)')} |")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, to check that the script works")
    ap.add_argument("--parts", default="tests,engine,cli,crossover",
                    help="comma-separated, of: tests, engine, cli, crossover")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per command (default 3)")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    name = device_name()
    print(f"# GPU table: {name or 'no CUDA device'}; Python {sys.version.split()[0]}\n")
    if "tests" in parts:
        run_tests()
    if "engine" in parts:
        run_engine(args.quick, name is not None)
    if "cli" in parts:
        run_cli(args.quick, name is not None, 1 if args.quick else args.repeat)
    if "crossover" in parts:
        run_crossover(args.quick, name is not None)


if __name__ == "__main__":
    main()
