"""How fast the engine solves many tiny problems, side by side with torch autograd.

Prints instances per second for

  (a) causal attention forward + backward, n = 4 tokens, d = 4;
  (b) one delta-rule chunk forward + backward, C = 4, d_k = d_v = 4;

for a per-instance Python loop, the batched NumPy engine, the fused NumPy pass, torch
autograd on the CPU (where torch is installed), and on a GPU torch CUDA autograd, the CuPy
engine and the fused CuPy kernel (where they are present). Every implementation is first
checked against the NumPy engine on the same inputs. Then it times a full ``generate`` of
300 students and grading 10,000 submissions.

    python benchmarks/engine.py                       # N = 1e4, 1e5, 1e6 (and 1e7 on a GPU)
    python benchmarks/engine.py --sizes 1e4,4e6 --repeat 5 --threads 2
    python benchmarks/engine.py --backend numpy       # CPU rows only, even on a GPU machine
    python benchmarks/engine.py --tables b --students 0 --submissions 0   # the delta rule alone

Timings are the best of ``--repeat`` runs (the machine may be shared). GPU timings keep the
data on the device and synchronise before stopping the clock; the transfer to and from the
host is timed on its own row.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qkvquiz.engine import delta  # noqa: E402
from qkvquiz.engine.attention import attention, attention_backward  # noqa: E402
from qkvquiz.engine.backend import BackendUnavailable, get_xp, to_numpy  # noqa: E402
from benchmarks.kernels.batching import DEFAULT_CHUNK, batched  # noqa: E402
from benchmarks.kernels.fused import causal_attention_fwd_bwd, default_workers  # noqa: E402
from benchmarks.kernels.fused_delta import delta_chunk_fwd_bwd  # noqa: E402
from qkvquiz.engine.masks import causal_allowed  # noqa: E402

N_TOK, D = 4, 4
LOOP_INSTANCES = 2000  # the per-instance loop is timed on this many and reported as a rate
CHECK_INSTANCES = 257


# --------------------------------------------------------------------------- timing


def best_of(fn: Callable[[], object], repeat: int, sync: Callable[[], None] = lambda: None) -> float:
    """The fastest of ``repeat`` runs, in seconds (after one warm-up run)."""
    fn()
    sync()
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - start)
    return best


def rate(n: int, seconds: float) -> str:
    per_s = n / seconds
    return f"{per_s / 1e6:.2f} M/s" if per_s >= 1e5 else f"{per_s / 1e3:.1f} k/s"


# ------------------------------------------------------------------------ workloads


def attention_inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, N_TOK, D)) for _ in range(4)]  # q, k, v, ∇Z


def delta_inputs(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((n, N_TOK, D)) for _ in range(3))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)  # normalised keys, as DeltaNet uses
    beta = rng.uniform(0.1, 0.9, (n, N_TOK))
    s, d_o, d_s = (rng.standard_normal((n, D, D)) for _ in range(3))
    return [q, k, v, beta, s, d_o, d_s]


def engine_attention(xp):
    allowed = causal_allowed(N_TOK, xp=xp)

    def run(q, k, v, dz):
        fwd = attention(q, k, v, allowed, xp=xp)
        g = attention_backward(fwd, dz, xp=xp)
        return fwd.output, g.dq, g.dk, g.dv

    return run


def fused_attention(xp, workers: int = 1):
    def run(q, k, v, dz):
        r = causal_attention_fwd_bwd(q, k, v, dz, xp=xp, workers=workers)
        return r.output, r.dq, r.dk, r.dv

    return run


def engine_delta(xp):
    def run(q, k, v, beta, s, d_o, d_s):
        fwd = delta.chunk_forward(q, k, v, beta, s, xp=xp)
        g = delta.chunk_backward(fwd, d_o, d_s, xp=xp)
        return fwd.o, fwd.s_next, g.dq, g.dk, g.dv, g.dbeta, g.ds

    return run


def fused_delta(xp, workers: int = 1):
    def run(q, k, v, beta, s, d_o, d_s):
        r = delta_chunk_fwd_bwd(q, k, v, beta, s, d_o, d_s, xp=xp, workers=workers)
        return r.o, r.s_next, r.dq, r.dk, r.dv, r.dbeta, r.ds

    return run


def loop_of(fn: Callable) -> Callable:
    """The same computation, one instance at a time (arrays without a batch axis)."""

    def run(*inputs):
        outs = [fn(*(x[i] for x in inputs)) for i in range(inputs[0].shape[0])]
        return tuple(np.stack(col) for col in zip(*outs))

    return run


def torch_attention(torch, threads: int = 1):
    def run(q, k, v, dz):
        torch.set_num_threads(threads)
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        mask = torch.ones(N_TOK, N_TOK, dtype=torch.bool, device=q.device).tril()
        s = (q @ k.transpose(-1, -2) / math.sqrt(D)).masked_fill(~mask, float("-inf"))
        z = torch.softmax(s, dim=-1) @ v
        z.backward(dz)
        return z.detach(), q.grad, k.grad, v.grad

    return run


def torch_delta(torch, threads: int = 1):
    def run(q, k, v, beta, s, d_o, d_s):
        torch.set_num_threads(threads)
        q, k, v, beta, s = (x.detach().requires_grad_() for x in (q, k, v, beta, s))
        c = k.shape[-2]
        strict = torch.ones(c, c, dtype=torch.bool, device=q.device).tril(-1)
        eye = torch.eye(c, dtype=q.dtype, device=q.device)
        a = eye + (beta[..., :, None] * (k @ k.transpose(-1, -2))).masked_fill(~strict, 0.0)
        bk, bv = beta[..., :, None] * k, beta[..., :, None] * v
        w = torch.linalg.solve_triangular(a, bk, upper=False, unitriangular=True)
        u = torch.linalg.solve_triangular(a, bv, upper=False, unitriangular=True)
        x = u - w @ s.transpose(-1, -2)
        p = (q @ k.transpose(-1, -2)).masked_fill(~(strict | eye.bool()), 0.0)
        o = q @ s.transpose(-1, -2) + p @ x
        s_next = s + x.transpose(-1, -2) @ k
        torch.autograd.backward([o, s_next], [d_o, d_s])
        return o.detach(), s_next.detach(), q.grad, k.grad, v.grad, beta.grad, s.grad

    return run


def check(name: str, got, want, tol: float = 1e-10) -> None:
    for i, (a, b) in enumerate(zip(got, want)):
        a = a.detach().cpu().numpy() if hasattr(a, "detach") else to_numpy(a)
        if not np.allclose(a, b, rtol=tol, atol=tol):
            raise SystemExit(f"{name}: output {i} differs from the NumPy engine by {np.abs(a - b).max():.3g}")


# ----------------------------------------------------------------------- the tables


def engine_table(title: str, make_inputs, reference, methods, sizes, repeat, torch, gpu) -> None:
    """Check every method, then time them round-robin (each round runs every method once),
    so that a shared machine's changing load falls on all of them alike."""
    small = make_inputs(CHECK_INSTANCES, seed=1)
    want = reference(*small)
    on_gpu = any(kind in ("cupy", "torch-cuda") for _, kind, _ in methods)
    gpu_sync = gpu.cuda.Device().synchronize if gpu is not None else None
    for name, kind, fn in methods:
        check(name, fn(*_place(kind, small, torch, gpu)), want)
    rows: dict[str, dict[int, str]] = {name: {} for name, _, _ in methods}
    loop_inputs = make_inputs(LOOP_INSTANCES)
    for n in sizes:
        host = make_inputs(n)
        runners: list[tuple[str, int, Callable[[], object], Callable[[], None]]] = []
        for name, kind, fn in methods:
            if kind == "loop":
                if n == sizes[0]:  # a rate per instance: timed once, on LOOP_INSTANCES
                    runners.append((name, LOOP_INSTANCES, lambda fn=fn: fn(*loop_inputs), lambda: None))
                continue
            if kind in ("numpy", "numpy-chunked", "torch-cpu") and n > 2 * 10**6 and on_gpu:
                rows[name][n] = "—"  # host rows stop at 2·10⁶ on a GPU machine: the point is the device
                continue
            data = _place(kind, host, torch, gpu)
            if kind == "numpy-chunked":
                call = lambda fn=fn, data=data: batched(fn, data, chunk=DEFAULT_CHUNK)  # noqa: E731
            else:
                call = lambda fn=fn, data=data: fn(*data)  # noqa: E731
            sync = {"cupy": gpu_sync, "torch-cuda": torch.cuda.synchronize if on_gpu and torch else None}.get(kind)
            runners.append((name, n, call, sync or (lambda: None)))
        if gpu is not None:
            def round_trip(host=host):
                return [to_numpy(gpu.asarray(x)) for x in host]

            runners.append(("transfer to + from the device", n, round_trip, gpu_sync))
        best: dict[str, float] = {}
        for _ in range(repeat + 1):  # the first round warms up
            for name, count, call, sync in runners:
                start = time.perf_counter()
                call()
                sync()
                best[name] = min(best.get(name, math.inf), time.perf_counter() - start)
        for name, count, _, _ in runners:
            rows.setdefault(name, {})[n] = rate(count, best[name])
        del host, runners
        if gpu is not None:
            gpu.get_default_memory_pool().free_all_blocks()
        if on_gpu and torch is not None:
            torch.cuda.empty_cache()
    for name, _, _ in methods:  # the loop's rate stands for every N
        if sizes[0] in rows[name] and len(rows[name]) == 1:
            rows[name] = {n: rows[name][sizes[0]] for n in sizes}
    print_table(title, rows, sizes)


def _place(kind: str, arrays: list[np.ndarray], torch, gpu) -> list:
    """The inputs where ``kind`` computes: NumPy arrays, torch tensors (CPU or CUDA) or CuPy arrays."""
    if kind == "torch-cpu":
        return [torch.from_numpy(x) for x in arrays]
    if kind == "torch-cuda":
        return [torch.from_numpy(x).cuda() for x in arrays]
    if kind == "cupy":
        return [gpu.asarray(x) for x in arrays]
    return arrays


def print_table(title: str, rows: dict[str, dict[int, str]], sizes: list[int]) -> None:
    heads = [f"N = {n:.0e}".replace("e+0", "e") for n in sizes]
    width = max(len(r) for r in rows) + 2
    print(f"\n{title}  (instances per second, best of the runs)")
    print("method".ljust(width) + "".join(h.rjust(14) for h in heads))
    print("-" * (width + 14 * len(sizes)))
    for name, cells in rows.items():
        print(name.ljust(width) + "".join(cells.get(n, "—").rjust(14) for n in sizes))
    sys.stdout.flush()


# ------------------------------------------------------------- generate and grade


def spec_path() -> Path:
    for name in ("all-families.yaml", "attention-basics.yaml"):
        if (ROOT / "problem_bank" / name).exists():
            return ROOT / "problem_bank" / name
    raise SystemExit("no spec in problem_bank/")


def time_generate(students: int, xp, repeat: int) -> None:
    from qkvquiz.generate import generate_set
    from qkvquiz.spec import load_spec

    spec = load_spec(spec_path())
    ids = [f"s{i:04d}" for i in range(students)]
    with tempfile.TemporaryDirectory() as tmp:
        seconds = best_of(lambda: generate_set(spec, ids, Path(tmp) / "set", force=True, xp=xp), repeat)
    print(f"\ngenerate: {students} students of {spec_path().name} ({len(spec.items)} problems), "
          f"worksheets, submissions and keys written: {seconds:.2f} s")


def time_grading(submissions: int, xp, repeat: int) -> None:
    from qkvquiz.core.submissions import read_submission
    from qkvquiz.grade.grader import grade, grade_files
    from qkvquiz.key import encode, key_from_json, key_to_json
    from qkvquiz.spec import load_spec
    from qkvquiz.worksheet import build_worksheet

    spec = load_spec(spec_path())
    ids = [f"s{i:05d}" for i in range(submissions)]
    doc = json.loads(json.dumps(key_to_json(build_worksheet(spec, ids, "bench"))))
    key = key_from_json(doc)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, student in enumerate(doc["students"]):
            answers = student["answers"]
            if i % 3 == 1:  # a third of the class slips in one part: diagnosis and carried credit run
                part = list(answers)[rng.integers(len(answers))]
                values = np.asarray(answers[part], dtype=float)  # "-inf" texts read as -inf
                answers[part] = encode(np.where(np.isfinite(values), values + 0.5, -np.inf))
            elif i % 3 == 2:  # and a third leave a part blank
                answers[next(iter(answers))] = None
            path = Path(tmp) / f"{student['student']}.json"
            path.write_text(json.dumps({"student": student["student"], "answers": answers}))
            paths.append(path)
        read = [read_submission(p) for p in paths]
        in_memory = best_of(lambda: grade(key, read, xp=xp), repeat)
        from_files = best_of(lambda: grade_files(key, paths, xp=xp), max(1, repeat // 2))
    print(f"grade: {submissions} submissions of {spec_path().name}: {from_files:.2f} s from files "
          f"(reading and parsing included), {in_memory:.2f} s for the comparisons alone "
          f"({submissions / in_memory:,.0f} submissions/s)")


# ----------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=None, help="comma-separated N, e.g. 1e4,1e5,1e6 (default; 1e7 added on a GPU)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is reported")
    ap.add_argument("--threads", type=int, default=default_workers(), help="CPU threads for torch and the fused NumPy pass")
    ap.add_argument("--backend", choices=("numpy", "cupy", "all"), default="all",
                    help="numpy: CPU rows only; cupy: require the GPU rows; all: every row that can run here")
    ap.add_argument("--tables", default="a,b", help="which engine tables to time: a (attention), b (delta rule), or both")
    ap.add_argument("--students", type=int, default=300, help="students in the generate timing (0 skips it)")
    ap.add_argument("--submissions", type=int, default=10_000, help="submissions in the grading timing (0 skips it)")
    args = ap.parse_args()

    gpu = None
    if args.backend != "numpy":
        try:
            gpu = get_xp("cupy")
        except BackendUnavailable as exc:
            if args.backend == "cupy":
                raise SystemExit(str(exc)) from None
    try:
        import torch
    except ImportError:
        torch = None
    torch_cuda = torch is not None and args.backend != "numpy" and torch.cuda.is_available()

    default = "1e4,1e5,1e6" + (",1e7" if gpu is not None or torch_cuda else "")
    sizes = [int(float(s)) for s in (args.sizes or default).split(",")]

    import platform

    print(f"machine: {platform.processor() or platform.machine()}, {default_workers()} CPU cores usable; "
          f"numpy {np.__version__}; torch {torch.__version__ if torch else 'not installed'}"
          f"{' (CUDA)' if torch_cuda else ''}; cupy {gpu.__version__ if gpu is not None else 'not used'}")
    print(f"threads: up to {args.threads} for torch and the fused NumPy pass; float64 throughout; "
          f"the batched engine runs {DEFAULT_CHUNK} instances per call (bounded memory)")

    t = args.threads
    att_methods = [
        ("per-instance loop (NumPy engine)", "loop", loop_of(engine_attention(np))),
        ("NumPy engine, batched", "numpy-chunked", engine_attention(np)),
        ("NumPy fused, 1 thread", "numpy", fused_attention(np, 1)),
    ]
    if t > 1:
        att_methods.append((f"NumPy fused, {t} threads", "numpy", fused_attention(np, t)))
    dl_methods = [
        ("per-instance loop (NumPy engine)", "loop", loop_of(engine_delta(np))),
        ("NumPy engine, batched", "numpy-chunked", engine_delta(np)),
        ("NumPy fused, 1 thread", "numpy", fused_delta(np, 1)),
    ]
    if t > 1:
        dl_methods.append((f"NumPy fused, {t} threads", "numpy", fused_delta(np, t)))
    if torch is not None:
        # Both thread counts: on a loaded machine one thread can beat two (OpenMP barriers).
        for threads in sorted({1, t}):
            label = f"torch CPU autograd, {threads} thread{'s' if threads > 1 else ''}"
            att_methods.append((label, "torch-cpu", torch_attention(torch, threads)))
            dl_methods.append((label, "torch-cpu", torch_delta(torch, threads)))
    if torch_cuda:
        att_methods.append(("torch CUDA autograd", "torch-cuda", torch_attention(torch, t)))
        dl_methods.append(("torch CUDA autograd", "torch-cuda", torch_delta(torch, t)))
    if gpu is not None:
        att_methods += [("CuPy engine", "cupy", engine_attention(gpu)), ("CuPy fused kernel", "cupy", fused_attention(gpu))]
        dl_methods += [("CuPy engine", "cupy", engine_delta(gpu)), ("CuPy fused kernel", "cupy", fused_delta(gpu))]

    tables = set(args.tables.split(","))
    if "a" in tables:
        engine_table("(a) causal attention forward + backward, n = 4, d = 4", attention_inputs,
                     engine_attention(np), att_methods, sizes, args.repeat, torch, gpu)
    if "b" in tables:
        engine_table("(b) one delta-rule chunk forward + backward, C = 4, d = 4", delta_inputs,
                     engine_delta(np), dl_methods, sizes, args.repeat, torch, gpu)

    xp = gpu if (gpu is not None and args.backend == "cupy") else np
    if args.students:
        time_generate(args.students, xp, max(1, args.repeat // 2))
    if args.submissions:
        time_grading(args.submissions, xp, max(1, args.repeat // 2))


if __name__ == "__main__":
    main()
