"""Whether grades hold at the margins: honest, slightly wrong and degenerate students on every bundled spec.

    python benchmarks/fairness.py [--students 10] [--spec all-families.yaml ...]

For every bundled spec (``problem_bank/*.yaml``) a class of synthetic students is graded, each
kind with ``--students`` students (each their own variant):

- ``exact``: the key's answers;
- ``honest 2/3/4 dp``: every step (asked or not) computed from the student's own values of the
  steps before it, rounded to 2, 3 or 4 decimals (never coarser than the step's tolerance), and
  the asked ones written down as rounded — right work, which should lose nothing;
- ``unasked ×f``: exact work, except that in every item one step that is *not* asked but feeds
  an asked one is off by f times its tolerance in every entry (random signs), and every later
  step is computed from it. Beyond the rounding envelope from f = 2 on: should keep no full marks;
- ``sign slip``: one entry of one asked part with its sign flipped (only that item counts);
- ``zeros``: 0 in every box (−∞ where the key has −∞: a masked score);
- ``constant``: one number (0.5) in every box (−∞ kept where masked);
- ``givens``: each part answered with a given of the same shape copied through (else zeros);
- ``classmate``: the exact answers of the next student's variant.

An item counts as kept when the student earns its full points, as lost otherwise; ``share`` is
the share of all marks the kind earned. For ``unasked ×f`` the table also counts the kept items
whose answers are all within the plain tolerance anyway (the slip did not show); the others
kept are right for the student's own accepted answers, or within the rounding envelope. The unit is one student's item (for ``unasked ×f``, only
items with an unasked step feeding an asked one).
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from qkvquiz.core.resources import bank_dir
from qkvquiz.core.submissions import Submission
from qkvquiz.families import Env
from qkvquiz.families.rounding import upstream
from qkvquiz.grade.grader import grade
from qkvquiz.key import Key, encode, key_from_json, key_to_json
from qkvquiz.spec import load_spec
from qkvquiz.worksheet import build_worksheet

FACTORS = (1.5, 2.0, 3.0, 5.0)
KINDS = ("exact", "honest 2 dp", "honest 3 dp", "honest 4 dp", *(f"unasked ×{f:g}" for f in FACTORS),
         "sign slip", "zeros", "constant", "givens", "classmate")
DEGENERATE = ("zeros", "constant", "givens")


def _row(env: Env, names, j: int) -> Env:
    return Env({name: np.asarray(env[name])[j:j + 1] for name in names})


def _decimals(item, step: str, places: int) -> int:
    tol = item.tolerance_for(step)
    return max(places, int(tol.value)) if tol.mode == "decimals" else places


def honest(item, j: int, places: int) -> Env:
    """Student ``j``'s steps, each computed from their own rounded earlier values and rounded."""
    fam = item.family
    env = _row(item.env, fam.given_names, j)
    for name in fam.step_names:
        with np.errstate(all="ignore"):
            value = np.asarray(fam.rerun(name, env, item.params), dtype=float)
        if fam.step(name).kind == "number":
            value = np.where(np.isfinite(value), np.round(value, _decimals(item, name, places)), value)
        env[name] = value
    return env


def unasked_candidates(item) -> list[str]:
    """Number steps no part asks that feed an asked step."""
    asked = {p.step for p in item.parts}
    feeding = {s for p in item.parts for s in upstream(item.family, p.step)}
    return [s for s in item.family.step_names
            if s not in asked and s in feeding and item.family.step(s).kind == "number"]


def wrong_unasked(item, j: int, step: str, factor: float, rng: np.random.Generator) -> Env:
    """Exact work for student ``j`` except ``step``, off by ``factor`` tolerances in every entry."""
    fam = item.family
    env = _row(item.env, fam.given_names, j)
    for name in fam.step_names:
        with np.errstate(all="ignore"):
            value = np.asarray(fam.rerun(name, env, item.params), dtype=float)
        if name == step:
            band = item.tolerance_for(name).band(value)
            signs = rng.choice([-1.0, 1.0], size=value.shape)
            value = np.where(np.isfinite(value), value + factor * signs * band, value)
        env[name] = value
    return env


def answers_from(item, env: Env) -> dict[str, Any]:
    return {p.id: encode(np.asarray(env[p.step])[0]) for p in item.parts}


def filled(item, j: int, fill) -> dict[str, Any]:
    """Every part of ``item`` answered by ``fill(exact value, part)``, −∞ kept where the key has it."""
    out = {}
    for p in item.parts:
        exact = np.asarray(item.env[p.step][j], dtype=float)
        value = np.where(np.isneginf(exact), -np.inf, fill(exact, p))
        out[p.id] = encode(np.asarray(value, dtype=float))
    return out


def copied_given(item, j: int):
    def fill(exact: np.ndarray, part) -> np.ndarray:
        for g in item.family.given_names:
            given = np.asarray(item.env[g][j], dtype=float)
            if given.shape == exact.shape:
                return given
        return np.zeros_like(exact)
    return fill


def within_tolerance(item, env: Env, j: int) -> bool:
    """Every asked answer in ``env`` is within its plain tolerance of the key: right as it stands."""
    return all(bool(item.tolerance_for(p.step).passes(np.asarray(env[p.step])[0], item.env[p.step][j]).all())
               for p in item.parts)


def sheet(key: Key, kind: str, j: int, rng: np.random.Generator) -> tuple[dict[str, Any], set[str], set[str]]:
    """Student ``j``'s answers of ``kind``, the items that count for it, and those of them
    whose answers are all within the plain tolerance anyway (an unasked step off, unseen)."""
    answers: dict[str, Any] = {}
    counted = set()
    unseen = set()
    for item in key.items:
        counted.add(item.id)
        if kind == "exact":
            answers.update({p.id: key.answers[j][p.id] for p in item.parts})
        elif kind.startswith("honest"):
            answers.update(answers_from(item, honest(item, j, int(kind.split()[1]))))
        elif kind.startswith("unasked"):
            candidates = unasked_candidates(item)
            if not candidates:
                counted.discard(item.id)
                answers.update({p.id: key.answers[j][p.id] for p in item.parts})
                continue
            step = candidates[rng.integers(len(candidates))]
            env = wrong_unasked(item, j, step, float(kind.split("×")[1]), rng)
            answers.update(answers_from(item, env))
            if within_tolerance(item, env, j):
                unseen.add(item.id)
        elif kind == "sign slip":
            answers.update({p.id: key.answers[j][p.id] for p in item.parts})
        elif kind == "zeros":
            answers.update(filled(item, j, lambda exact, p: np.zeros_like(exact)))
        elif kind == "constant":
            answers.update(filled(item, j, lambda exact, p: np.full_like(exact, 0.5)))
        elif kind == "givens":
            answers.update(filled(item, j, copied_given(item, j)))
        elif kind == "classmate":
            other = (j + 1) % len(key.students)
            answers.update({p.id: key.answers[other][p.id] for p in item.parts})
    if kind == "sign slip":
        slipped = _slip_one_sign(key, answers, j, rng)
        counted = {slipped} if slipped else set()
    return answers, counted, unseen


def _slip_one_sign(key: Key, answers: dict[str, Any], j: int, rng: np.random.Generator) -> str | None:
    """Flip the sign of one clearly nonzero entry of one asked number part; the item's id."""
    choices = []
    for item in key.items:
        for p in item.parts:
            if item.family.step(p.step).kind != "number":
                continue
            exact = np.asarray(item.env[p.step][j], dtype=float)
            asked = p.asked(exact.shape)
            big = np.isfinite(exact) & (np.abs(exact) > 0.05) & (True if asked is None else asked)
            for index in zip(*np.nonzero(np.atleast_1d(big))):
                choices.append((item.id, p.id, exact.ndim, index))
    if not choices:
        return None
    item_id, pid, ndim, index = choices[rng.integers(len(choices))]
    if ndim == 0:
        answers[pid] = -float(answers[pid])
        return item_id
    value = np.asarray(json.loads(json.dumps(answers[pid])), dtype=object)
    value[index] = -float(value[index])
    answers[pid] = value.tolist()
    return item_id


def run_spec(path: Path, per_kind: int, seed: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Per kind: [items kept, items lost, points earned, points possible, kept though within the
    plain tolerance]; and the seconds taken."""
    spec = load_spec(path)
    ids = [f"{kind.split()[0][:3]}{k}-{i}" for k, kind in enumerate(KINDS) for i in range(per_kind)]
    key = key_from_json(json.loads(json.dumps(key_to_json(build_worksheet(spec, ids, seed=seed)))))
    rng = np.random.default_rng(seed)
    subs, counted, unseen, kinds = [], {}, {}, {}
    for j, sid in enumerate(key.students):
        kind = KINDS[j // per_kind]
        answers, items, plain = sheet(key, kind, j, rng)
        subs.append(Submission(f"{sid}.json", sid, answers))
        counted[sid], unseen[sid], kinds[sid] = items, plain, kind
    start = time.perf_counter()
    report = grade(key, subs)
    seconds = time.perf_counter() - start
    tally: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0])
    item_of = {p.id: item.id for item, p in key.parts}
    for result in report.results:
        row = tally[kinds[result.student]]
        per_item: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for part in result.parts:
            per_item[item_of[part.part]][0] += part.score
            per_item[item_of[part.part]][1] += part.points
        for item_id, (score, points) in per_item.items():
            if item_id not in counted[result.student]:
                continue
            row[0 if score >= points - 1e-9 else 1] += 1
            row[4] += score >= points - 1e-9 and item_id in unseen[result.student]
            row[2] += score
            row[3] += points
    return dict(tally), {"grade": seconds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=10, help="students of each kind per spec (default 10)")
    ap.add_argument("--spec", action="append", help="a bundled spec's file name (default: every one)")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    paths = sorted(bank_dir().glob("*.yaml"))
    if args.spec:
        paths = [p for p in paths if p.name in args.spec]
    total: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0])
    shares: dict[str, dict[str, float]] = {}
    start = time.perf_counter()
    for path in paths:
        tally, _times = run_spec(path, args.students, args.seed)
        for kind, row in tally.items():
            for i, v in enumerate(row):
                total[kind][i] += v
        shares[path.stem] = {k: tally[k][2] / tally[k][3] for k in DEGENERATE if tally.get(k) and tally[k][3]}
    elapsed = time.perf_counter() - start
    print(f"{len(paths)} specs, {args.students} students of each kind per spec, seed {args.seed} "
          f"({elapsed:.0f} s)\n")
    print("| student | items | keep full marks | of them within the plain tolerance | lose marks | share of marks |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in KINDS:
        kept, lost, score, points, plain = total.get(kind, [0, 0, 0.0, 0.0, 0])
        share = f"{100 * score / points:.1f} %" if points else "–"
        within = f"{plain:.0f}" if kind.startswith("unasked") else ""
        print(f"| {kind} | {kept + lost:.0f} | {kept:.0f} | {within} | {lost:.0f} | {share} |")
    print("\nshare of the marks earned by degenerate sheets, per spec:\n")
    print("| spec | " + " | ".join(DEGENERATE) + " |")
    print("|---|" + "---:|" * len(DEGENERATE))
    for name, row in shares.items():
        print(f"| {name} | " + " | ".join(f"{100 * row.get(k, 0):.1f} %" for k in DEGENERATE) + " |")


if __name__ == "__main__":
    main()
