"""From a spec and a roster to solved, personalised worksheets.

Each item is solved for the whole class in one batched pass per sampling round: candidates
are drawn for every student still waiting, solved, and filtered by the accept rules. A
student's variant is their first accepted candidate, drawn from a stream keyed by
(spec item, student id, seed), so it never depends on the rest of the roster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import numpy as np

from .core.seeding import Draw, set_code, variant_code, variant_key
from .engine.backend import to_numpy
from .families import Env
from .spec import ItemSpec, SpecError, WorksheetSpec

MAX_CANDIDATES = 4096  # per student and item before giving up
HOPELESS = 256  # candidates per student after which, with none accepted for anyone, generation stops
# Candidates per student in the first round; doubles each round. Most students' first candidate
# is accepted, so a round of one solves each student about once (8 solved eight times over:
# 0.97 s of a 10,000-student class's 13 s); which candidate is chosen does not depend on it.
FIRST_ROUND = 1
MAX_BATCH = 1 << 16  # candidates per engine call: bounds memory for a large class
MAX_ELEMENTS = 1 << 24  # float64 values of all steps per engine call (128 MiB): bounds memory for large sizes


class GenerationError(RuntimeError):
    """No acceptable variant could be drawn for an item."""


@dataclass(frozen=True)
class Worksheet:
    """Solved variants of every item for every student (leading axis of each array = student)."""

    spec: WorksheetSpec
    students: tuple[str, ...]
    codes: tuple[str, ...]
    seed: str
    keyed: bool  # variants derived from an instructor secret
    envs: tuple[Env, ...]  # one per item, NumPy arrays
    set_id: str = ""  # names the set (items, asked parts, seed, secret); the same for any roster

    def variant(self, student: int) -> list[dict[str, Any]]:
        """One student's items: givens and every step's value."""
        out = []
        for item, env in zip(self.spec.items, self.envs):
            values = {name: env[name][student] for name in env}
            out.append({
                "item": item,
                "givens": {g: values[g] for g in item.family.given_names},
                "steps": {s: values[s] for s in item.family.step_names},
            })
        return out


def build_worksheet(
    spec: WorksheetSpec,
    students: Sequence[str],
    seed: str | int = 0,
    *,
    secret: bytes | None = None,
    xp=np,
) -> Worksheet:
    """Draw and solve every student's variant of every item (batched per item)."""
    students = tuple(str(s) for s in students)
    if not students:
        raise ValueError("the roster is empty")
    if len(set(students)) != len(students):
        dup = next(s for s in students if students.count(s) > 1)
        raise ValueError(f"student id {dup!r} appears twice in the roster")
    seed = str(seed)
    envs = []
    for item in spec.items:
        # The item's id and content, not the spec's wording: a fixed typo in a title changes no problem.
        fingerprint = item.fingerprint()
        keys = [variant_key(item.id, fingerprint, s, seed, secret=secret) for s in students]
        envs.append(solve_item(item, keys, xp=xp, source=spec.source))
    # The title the set is known by (English where the spec has several): a translation changes no code.
    codes = tuple(variant_code(variant_key(spec.named, s, seed, secret=secret)) for s in students)
    return Worksheet(spec, students, codes, seed, secret is not None, tuple(envs), worksheet_set_id(spec, seed, secret))


def worksheet_set_id(spec: WorksheetSpec, seed: str, secret: bytes | None = None) -> str:
    """The set's identity: its items' content and asked parts, the seed and the secret.

    Wording (titles, instructions) and the roster are left out: fixing a typo or adding a
    student keeps the set, so submissions already handed in still belong to it.
    """
    items = [f"{item.id}:{item.fingerprint()}:{','.join(p.id + _entries_tag(p) for p in item.parts)}"
             for item in spec.items]
    return set_code([str(seed), *items], secret=secret)


def _entries_tag(part: Any) -> str:
    # Asking other entries of a step is another set; a part asked whole adds nothing (sets kept).
    return "" if part.entries is None else "@" + ";".join(",".join(map(str, e)) for e in part.entries)


def solve_item(item: ItemSpec, keys: Sequence[int], *, xp=np, source: str = "<spec>") -> Env:
    """Each key's first acceptable candidate, solved; arrays on the host, leading axis = key.

    Candidates are screened on ``xp`` (the heavy part: strict accept rules reject many),
    at most :data:`MAX_BATCH` per engine call so that memory stays bounded however large
    the class. Only the chosen givens come back, and the key is solved from them once on
    the host in NumPy: givens are drawn on the host, so the stored values are the same
    whichever backend screened the candidates.
    """
    family, params = item.family, item.params
    keys = np.asarray(keys, dtype=np.uint64)
    all_fixed = set(family.given_names) <= set(item.fixed)
    chosen: dict[str, np.ndarray] = {}
    pending = np.arange(len(keys))
    first, count = 0, FIRST_ROUND
    batch = _batch_size(item, keys[:1], xp, source)
    while pending.size:
        hopeless = first >= HOPELESS and len(pending) == len(keys)
        if first >= MAX_CANDIDATES or hopeless:
            tried = f"{first} draws for {'every student' if hopeless else 'some students'}"
            raise GenerationError(
                f"{source}: item {item.id} ({family.name}): no acceptable variant in {tried}. "
                + _why_rejected(item, keys[pending[:16]], first - count, count, xp, source)
            )
        if all_fixed:
            count = 1
        found = np.zeros(len(pending), dtype=bool)
        group = max(1, batch // count)  # students per engine call
        for lo in range(0, len(pending), group):
            part = slice(lo, lo + group)
            hit, givens = _screen(item, keys[pending[part]], first, count, all_fixed, xp, source)
            found[part] = hit
            for name, value in givens.items():
                if name not in chosen:
                    chosen[name] = np.empty((len(keys), *value.shape[1:]), dtype=value.dtype)
                chosen[name][pending[part][hit]] = value
        pending = pending[~found]
        first, count = first + count, min(count * 2, 512)
    with np.errstate(all="ignore"):
        env = family.solve(chosen, params, np)
    bad = [name for name in family.step_names if np.isnan(env[name]).any()]
    if bad:  # only fixed givens get here: drawn candidates with a NaN step are rejected
        raise GenerationError(
            f"{source}: item {item.id} ({family.name}): the fixed givens make step {bad[0]!r} not a number "
            "(NaN), e.g. 0/0; change the givens or params"
        )
    return Env({name: np.asarray(value, dtype=np.float64) for name, value in env.items()})


#: Candidates per item that :func:`screening_seconds` times.
PROBE = 512


def screening_seconds(spec: WorksheetSpec, students: int) -> float:
    """About how many CPU seconds (NumPy) screening every item's candidates for ``students`` takes.

    That is the work ``xp`` does in :func:`build_worksheet` (the key's final solve is on the host
    either way). Each item is timed on a probe of :data:`PROBE` candidates drawn for keys no
    student has, scaled to the class and to the candidates an accepted one costs on average.
    """
    total = 0.0
    probe = min(PROBE, max(1, students))
    keys = np.arange(1, probe + 1, dtype=np.uint64)
    for item in spec.items:
        all_fixed = set(item.family.given_names) <= set(item.fixed)
        start = perf_counter()
        found, _givens = _screen(item, keys, 0, 1, all_fixed, np, spec.source)
        elapsed = perf_counter() - start
        accepted = max(float(found.mean()), 1 / 64)  # a strict item tries more candidates per student
        total += elapsed / probe * students / accepted
    return total


def _batch_size(item: ItemSpec, key: np.ndarray, xp, source: str) -> int:
    """Candidates per engine call: at most MAX_BATCH, and few enough that all steps fit MAX_ELEMENTS."""
    draw = Draw.candidates(key, 0, 1, xp=xp)
    givens = item.family.sample(draw, item.params)
    _apply_fixed(item, givens, 1, xp, source)
    with np.errstate(all="ignore"):
        env = item.family.solve(givens, item.params, xp)
    per_candidate = sum(int(np.prod(v.shape[1:], dtype=np.int64)) for v in env.values())
    return int(max(1, min(MAX_BATCH, MAX_ELEMENTS // max(1, per_candidate))))


def _why_rejected(item: ItemSpec, keys: np.ndarray, first: int, count: int, xp, source: str) -> str:
    """A sentence naming the accept rules that reject most candidates of ``keys``."""
    draw = Draw.candidates(keys, max(first, 0), max(count, 1), xp=xp)
    givens = item.family.sample(draw, item.params)
    _apply_fixed(item, givens, draw.size, xp, source)
    with np.errstate(all="ignore"):
        shares = sorted(((float(to_numpy(r).mean()), why) for why, r in
                         rejections(item, item.family.solve(givens, item.params, xp), xp)), reverse=True)
    top = [f"{why} ({share:.0%} of draws)" for share, why in shares[:3] if share > 0]
    return ("Most draws were rejected because " + "; ".join(top) + ". Change the params, the fixed givens, "
            "the tolerance, or ask fewer steps.") if top else "Change the params or the fixed givens."


def _screen(
    item: ItemSpec, keys: np.ndarray, first: int, count: int, all_fixed: bool, xp, source: str
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Candidates ``first … first+count−1`` of each key: which keys found one, and its givens."""
    family, params = item.family, item.params
    draw = Draw.candidates(keys, first, count, xp=xp)
    givens = family.sample(draw, params)
    _apply_fixed(item, givens, draw.size, xp, source)
    if all_fixed:
        ok = np.ones((len(keys), count), dtype=bool)
    else:
        with np.errstate(all="ignore"):  # a 0/0 in a candidate makes NaN, which the accept rules reject
            ok = to_numpy(acceptable(item, family.solve(givens, params, xp), xp)).reshape(len(keys), count)
    found = ok.any(axis=1)
    pick = np.flatnonzero(found) * count + ok.argmax(axis=1)[found]  # first accepted candidate
    index = xp.asarray(pick)
    # Only the chosen candidates' givens travel back to the host.
    return found, {name: to_numpy(value[index]) for name, value in givens.items()}


def _apply_fixed(item: ItemSpec, givens: dict, size: int, xp, source: str) -> None:
    for name, value in item.fixed.items():
        drawn_shape = tuple(givens[name].shape[1:])
        if value.shape != drawn_shape and _squeezed(value.shape) == _squeezed(drawn_shape):
            # One token written as a vector (q: [1, 0, 2] for a 1×3 Q), as hand-written problems do.
            value = value.reshape(drawn_shape)
        if value.shape != drawn_shape:
            raise SpecError(
                source, f"item {item.id} ({item.family.name}) field 'givens.{name}'",
                f"has shape {_shape_text(value.shape)}, but these params need {_shape_text(drawn_shape)}",
            )
        givens[name] = xp.broadcast_to(xp.asarray(value), (size, *drawn_shape))


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(n for n in shape if n != 1)


def _shape_text(shape: tuple[int, ...]) -> str:
    return "a single number" if not shape else "×".join(map(str, shape))


def acceptable(item: ItemSpec, env: Env, xp=np) -> Any:
    """True per candidate: hand-computable, and every asked answer can be told from its mistakes."""
    batch = next(iter(env.values())).shape[0]
    ok = xp.ones(batch, dtype=bool)
    for _, rejected in rejections(item, env, xp):
        ok = ok & ~rejected
    return ok


def rejections(item: ItemSpec, env: Env, xp=np) -> list[tuple[str, Any]]:
    """Each accept rule, named, with True per candidate that it rejects.

    A candidate is rejected when the family's rule finds it not hand-computable, when a step
    is not a number, when a known mistake lands within tolerance of the right answer, or when
    two asked parts would pass for each other: such a variant could not be graded.
    """
    family, params = item.family, item.params
    batch = next(iter(env.values())).shape[0]
    out = []
    if family.accept is not None:
        out.append(("the family's rule for hand-computable values (e.g. no saturated softmax, no huge "
                    "entries) fails", ~family.accept(env, params, xp)))
    nan = xp.zeros(batch, dtype=bool)
    for name in family.step_names:
        nan = nan | xp.isnan(env[name]).reshape(batch, -1).any(axis=1)
    out.append(("a step is not a number (NaN)", nan))

    masks = {p.step: p.asked(tuple(env[p.step].shape[1:])) for p in item.parts}

    def same(a, b, step):
        # Each part is told apart with the tolerance it is graded with, on the entries it asks.
        hit = item.tolerance_for(step).passes(a, b, xp=xp)
        if masks.get(step) is not None:
            hit = hit | ~xp.asarray(masks[step])
        return hit.reshape(batch, -1).all(axis=1)

    asked = [p.step for p in item.parts]
    for step in asked:
        exact = env[step]
        for mistake in family.mistakes_for(step, params):
            if not mistake.screens:  # added after variants were drawn with it: they stay as they were
                continue
            wrong = mistake.fn(env, params, xp)
            if wrong.shape == exact.shape:
                out.append((f"the known mistake {mistake.name!r} gives the same {step!r} within tolerance",
                            same(wrong, exact, step)))
    for i, a in enumerate(asked):
        for b in asked[i + 1:]:
            if env[a].shape == env[b].shape:
                out.append((f"the asked steps {a!r} and {b!r} are equal within tolerance", same(env[a], env[b], b)))
    return out
