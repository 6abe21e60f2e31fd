"""Small builders shared by the tests."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from qkvquiz.families import get_family
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

BASIC_ITEMS = [
    {"family": "attention.scores", "params": {"form": "vector"}},
    {"family": "attention.weights", "params": {"mask": "causal"}, "ask": ["scores", "weights"]},
    {"family": "attention.output", "params": {"mask": "random"}, "points": 3},
]


def make_key_doc(items: list[dict] | None = None, students=("a", "b", "c"), seed: Any = 1) -> dict:
    spec = parse_spec({"title": "T", "items": items or BASIC_ITEMS})
    ws = build_worksheet(spec, list(students), seed)
    return json.loads(json.dumps(key_to_json(ws)))


def make_key(items=None, students=("a", "b", "c"), seed=1):
    doc = make_key_doc(items, students, seed)
    return key_from_json(doc), doc


def write_json(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def assert_every_mistake_told_apart(solved_cases, families, *, require_all: bool = True) -> set:
    """Every listed mistake of ``families`` is exercised by some case and never passes for the answer
    (``require_all=False``: every mistake the cases reach never passes); a mistake that does not
    screen variants (``Misconception.screens``) may pass for some, not all. Returns the mistakes checked.

    ``solved_cases`` yields ``(label, item, env)``: an item solved for a class (env's leading axis).
    """
    import numpy as np

    from qkvquiz.families import get_family

    checked: set[tuple[str, str, str]] = set()
    for label, item, env in solved_cases:
        n = next(iter(env.values())).shape[0]
        for part in item.parts:
            for mistake in item.family.mistakes_for(part.step, item.params):
                wrong = mistake.fn(env, item.params, np)
                if wrong.shape != env[part.step].shape:
                    continue
                same = item.tolerance.passes(wrong, env[part.step]).reshape(n, -1).all(axis=1)
                if mistake.screens:
                    assert not same.any(), f"{label}: {mistake.name} passes for the answer"
                else:  # added later: it screens no variant, and may land on the answer now and then
                    assert not same.all(), f"{label}: {mistake.name} is the answer in every variant"
                checked.add((item.family.name, mistake.step, mistake.name))
    every = {(f, m.step, m.name) for f in families for m in get_family(f).misconceptions}
    if require_all:
        assert checked == every, f"never exercised: {sorted(every - checked)}"
    return checked


FD_STEP = 1e-5


def fd_grad(loss, x):
    """Central differences of a per-variant loss (batch,) with respect to x (batch, ...)."""
    import numpy as np

    grad = np.zeros_like(x)
    for idx in np.ndindex(*x.shape[1:]):
        at = (slice(None), *idx)
        up, down = x.copy(), x.copy()
        up[at] += FD_STEP
        down[at] -= FD_STEP
        grad[at] = (loss(up) - loss(down)) / (2 * FD_STEP)
    return grad


def finite_difference(f, x, h=FD_STEP):
    """Central differences of a scalar function ``f()`` at every element of ``x`` (``x`` changed in
    place and restored): the oracle the engine's backward passes are checked against."""
    import numpy as np

    grad = np.zeros_like(x)
    for idx in np.ndindex(*x.shape):
        old = x[idx]
        x[idx] = old + h
        up = f()
        x[idx] = old - h
        down = f()
        x[idx] = old
        grad[idx] = (up - down) / (2 * h)
    return grad


def canary_worksheet(ws, seed=7):
    """The same worksheet with every step value replaced by a random number far from any real one:
    a student's file that changes with it shows an answer."""
    import dataclasses

    import numpy as np

    from qkvquiz.families import Env

    rng = np.random.default_rng(seed)
    envs = []
    for item, env in zip(ws.spec.items, ws.envs):
        fake = Env(env)
        for step in item.family.step_names:
            fake[step] = rng.normal(5000.0, 1000.0, size=env[step].shape)
        envs.append(fake)
    return dataclasses.replace(ws, envs=tuple(envs))


def total(a, b):
    """Σ a ⊙ b per variant: the scalar loss whose upstream gradient is a."""
    return (a * b).reshape(a.shape[0], -1).sum(axis=1)


# One item of a family solved for a small class: (worksheet, its env, the item spec).
ROSTER = [f"s{i:02d}" for i in range(12)]


def solved(name: str, params: dict, students=ROSTER, seed=5, ask=None):
    family = get_family(name)
    item = {"family": name, "params": params, "ask": list(ask or family.askable_steps)}
    spec = parse_spec({"title": "T", "items": [item]})
    ws = build_worksheet(spec, list(students), seed=seed)
    return ws, ws.envs[0], spec.items[0]


def loop_delta(q, k, v, beta, s):
    """The delta rule token by token with explicit loops over entries: S ← S − β(Sk − v)kᵀ, o = Sq.
    Returns the final state and every token's output."""
    import numpy as np

    s = [list(map(float, row)) for row in s]
    outs = []
    for t in range(len(k)):
        recall = [sum(s[i][j] * k[t][j] for j in range(len(k[t]))) for i in range(len(s))]
        for i in range(len(s)):
            for j in range(len(k[t])):
                s[i][j] -= beta[t] * (recall[i] - v[t][i]) * k[t][j]
        outs.append([sum(s[i][j] * q[t][j] for j in range(len(q[t]))) for i in range(len(s))])
    return np.array(s), np.array(outs)


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def stop_while_workers_run(proc: subprocess.Popen, sig: int, *, start_within: float, running: float,
                           exit_within: float, gone_within: float) -> None:
    """Wait until ``proc`` has two worker processes, let them work ``running`` seconds, send it
    ``sig``: every worker must be gone within ``gone_within`` seconds of its exit, and it must print
    no traceback."""
    deadline = time.monotonic() + start_within
    workers: list[int] = []
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:
        workers = children(proc.pid)
        time.sleep(0.01)
    assert len(workers) >= 2, proc.stderr.read() if proc.poll() is not None else "no workers"
    time.sleep(running)
    proc.send_signal(sig)
    proc.wait(timeout=exit_within)
    gone = time.monotonic() + gone_within
    while any(alive(w) for w in workers) and time.monotonic() < gone:
        time.sleep(0.02)
    assert not any(alive(w) for w in workers)
    assert "Traceback" not in proc.stderr.read()


class Killed(BaseException):
    """Stands for SIGKILL inside an output set's switch: nothing catches it, and the switch is left
    as it is (its journal stays)."""


def kill_at_rename(monkeypatch: Any, stop_at: int) -> None:
    """Make the ``stop_at``-th ``os.replace`` from now (counting from 0) raise :class:`Killed`,
    the ones before it go through: a run killed at that point of its switch."""
    real = os.replace
    count = [0]

    def replace(src: Any, dst: Any) -> None:
        if count[0] == stop_at:
            raise Killed
        count[0] += 1
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def wait_for(condition, timeout: float = 15.0):
    """``condition()``'s first true value, asked every 50 ms (a page in a browser getting there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("the page did not get there in time")
