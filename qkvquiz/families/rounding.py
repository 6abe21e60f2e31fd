"""What follows from what: the one rule for rounding and carried credit, for a step graph.

A student who rounds every value to the tolerance's decimals does right work, yet a later step
computed from rounded values can land further from the exact value than one tolerance band
(A = 1/3 written 0.33 moves c = Σ ∇A ⊙ A by up to 0.005 for every entry, and the rounded c moves
∇S again). Carried credit asks the same question of a student's own earlier answers. The policy,
one for the grader, the audit and the practice pages alike:

    An answer follows from its inputs when it is within its tolerance of the value its step
    gives on some intermediate values that could come from those inputs, computed right and
    rounded as a person rounds.

How far each input may be off (its width, per entry) is based on what the student wrote:

- a value the student wrote carries the rounding of its last written place (:func:`written_width`:
  half a unit there, never more than half its tolerance band; nothing where it is the exact value);
- a step not asked, and an entry a partly asked step does not ask, carries the rounding its
  tolerance asks (``ROUNDING``: half its band), where rounding changes its value or an input
  moves it; a step worked row by row from its own rounded rows (a substitution) carries what
  that compounds to (``Step.rounded_as_worked``).

The set of reachable values is enclosed by a band around the step's value (:func:`allowance`):
each entry of each input, and of each step in between, is moved to either end of its width alone
and every later step is re-run from it; the largest change in each entry of the answer is added
up over the entries moved. Where the chain is linear in each entry (products with the givens,
sums, transposes) that is exactly the largest change over the whole box; a step reached along
two paths (the weights reach ∇S directly and through the row sum) counts once, the paths netted;
for exp, the softmax and divisions it is the first-order change over the width, whose terms of
second order (products of two half units, about 10⁻⁵ at 2 decimals) the answer's own tolerance
covers, since rounding the answer itself uses only half of it. The band is capped (``CAP``).

The band only ever widens what passes against the right value or against the student's own
earlier answers; known mistakes are still judged with the plain tolerance
(:func:`explained_by_mistake`), and the worksheet rejects variants where a known mistake would
pass (see the tests of every family's mistakes). :func:`entry_band` is the band of an entry of
a student's own value for the invariant checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..core.tolerance import SLACK
from .base import Env, Family, Params

Array = Any
# The tolerance band of a step around a value: (step name, value) -> allowed |error| per entry.
BandOf = Callable[[str, Array], Array]
# Whether rounding to the step's tolerance leaves a value unchanged, per entry.
RoundsTo = Callable[[str, Array], Array]


def upstream(family: Family, step: str) -> list[str]:
    """Every step ``step`` is computed from, directly or not, in the family's order (givens left out)."""
    seen: set[str] = set()
    stack = list(family.step(step).needs)
    while stack:
        name = stack.pop()
        if name in family.step_names and name not in seen:
            seen.add(name)
            stack.extend(family.step(name).needs)
    return [s for s in family.step_names if s in seen]


def allowance(family: Family, step: str, env: Env, params: Params, inputs: Mapping[str, Array],
              between: Sequence[str], band_of: BandOf, unchanged: RoundsTo, xp=np) -> Array | None:
    """The extra |answer − env[step]| an answer to ``step`` may have (the one rule; see the module).

    ``env`` holds the centre: ``inputs`` (asked steps, at the values the student is held to) and
    every step of ``between`` (unasked steps from them to ``step``, in the family's order) and
    ``step`` computed from them. ``inputs`` maps each asked input to its width per entry (what the
    student wrote there may be off by: :func:`input_width`). Each step of ``between`` may be off
    by its rounding (``ROUNDING`` of its band, or what ``Step.rounded_as_worked`` gives) where
    anything feeds it a width or rounding changes its value. Every entry of an input or of a step in between is moved to either
    end of its width alone and *every later step re-run from it* to ``step``; the largest change
    in each entry of ``step`` is added up over the entries moved. Exact for a chain linear in
    each entry; a step reached along two paths (the weights reach ∇S directly and through the
    row sum) counts once, with the paths' changes netted. The sum is capped at
    ``CAP`` times the band of ``step`` itself. None when nothing moves.
    """
    widths: dict[str, Array] = {name: xp.asarray(w, dtype=xp.float64) for name, w in inputs.items()}
    for name in between:
        if family.step(name).kind != "number":
            continue
        value = xp.asarray(env[name])
        batch = value.shape[0]
        fed = xp.zeros(batch, dtype=bool)
        for need in family.step(name).needs:
            w = widths.get(need)
            if w is not None:
                fed = fed | (w.reshape(batch, -1) > 0).any(axis=1)
        fed = fed.reshape((batch,) + (1,) * (value.ndim - 1))
        own = xp.where(fed | ~unchanged(name, value), ROUNDING * band_of(name, value), 0.0)
        worked = family.step(name).rounded_as_worked
        if worked is not None:
            with np.errstate(all="ignore"):
                own = xp.asarray(worked(env, params, xp, own), dtype=xp.float64)
        widths[name] = xp.where(xp.isfinite(value), own, 0.0)
    if not any(bool((w > 0).any()) for w in widths.values()):
        return None
    centre = xp.asarray(env[step])
    total = xp.zeros(centre.shape, dtype=xp.float64)
    for name, w in widths.items():
        chain = _downstream(family, name, between, step)
        if chain is not None and bool((w > 0).any()):
            total = total + _moved_through(family, name, w, chain, step, env, params, xp)
    cap = CAP * band_of(step, centre)
    return xp.where(xp.isfinite(centre), xp.minimum(total, cap), 0.0)


# What rounding to its tolerance moves a value by: half a unit in the tolerance's last place
# (0.005 at 2 decimals), half its band. A step nobody asks is held to this, as a written value
# is held to half a unit in its own last written place.
ROUNDING = 0.5

# The allowance never exceeds this many times the band of the step itself: a guard against a
# first-order bound that runs away where a step is far from linear (a nearly singular solve).
# It must stay above what honest rounding reaches: 5 bands on the bundled specs (delta-rule's
# dK), and 13 bands for a by-hand student on a 4-token chunk of the delta rule (ten steps in
# between, whose first-order bound there is 50 bands).
CAP = 64.0


def _downstream(family: Family, source: str, between: Sequence[str], step: str) -> list[str] | None:
    """The steps of ``between`` after ``source`` that it feeds (in order), or None when it does not reach ``step``."""
    reached = {source}
    chain = []
    for name in between:
        if name != source and set(family.step(name).needs) & reached:
            reached.add(name)
            chain.append(name)
    return chain if set(family.step(step).needs) & reached else None


def written_width(tol: Any, values: Array, asked: Array | None = None, xp=np) -> Array:
    """What a value a student wrote may be off by: half a unit in its last written place.

    The place is the finest any asked entry of the answer uses (a person writes a matrix to one
    number of decimals: 0.5 in a matrix written to 2 decimals is 0.50), read from the values
    (up to 12 decimals); never more than the rounding of the tolerance (``ROUNDING`` of its
    band), 0 where the value is not finite.
    ``values``: (students, ...); ``asked``: bool of an answer's shape, or None (every entry).
    """
    v = xp.asarray(values, dtype=xp.float64)
    n = v.shape[0]
    finite = xp.isfinite(v)
    flat = xp.where(finite, v, 0.0).reshape(n, -1)
    if asked is not None:
        flat = flat[:, xp.asarray(asked).reshape(-1)]
    places = xp.zeros(n, dtype=xp.int64)
    # A value near the float range (a hostile answer) overflows when scaled: it then reads as
    # whole (inf − inf is NaN, never "off"), which is what a number that large is.
    with np.errstate(over="ignore", invalid="ignore"):
        for p in range(12, -1, -1):
            scaled = flat * 10.0 ** p
            off = xp.abs(scaled - xp.round(scaled)) > 1e-6 * xp.maximum(1.0, xp.abs(scaled))
            places = xp.where(off.any(axis=1) & (places == 0), p + 1, places)
    half = (0.5 * 10.0 ** (-places.astype(xp.float64))).reshape((n,) + (1,) * (v.ndim - 1))
    return xp.where(finite, xp.minimum(half, ROUNDING * tol.band(v, xp=xp)), 0.0)


def input_width(tol: Any, values: Array, asked: Array | None, exact: Array | None = None, xp=np) -> Array:
    """The width of an asked step used as an input: where asked, the :func:`written_width` of
    the student's own ``values`` (0 where a value is the ``exact`` one: nothing was rounded there;
    ``exact`` None: ``values`` are the key's, 0 everywhere asked); where a partial ask leaves an
    entry unasked, the rounding of its tolerance, as for a step not asked at all."""
    v = xp.asarray(values, dtype=xp.float64)
    if exact is None:
        w = xp.zeros(v.shape, dtype=xp.float64)
    else:
        w = xp.where(v == xp.asarray(exact, dtype=xp.float64), 0.0, written_width(tol, v, asked, xp))
    if asked is None:
        return w
    band = xp.where(xp.isfinite(v), ROUNDING * tol.band(v, xp=xp), 0.0)
    return xp.where(xp.asarray(asked)[None], w, band)


# Moves of input entries evaluated in one call, as extra variants: at most this many rows at once.
_ROWS_PER_CALL = 16384


class _Repeated(Env):
    """``env`` with every array repeated ``k`` times along the variants (block by block), made on
    first use, and some names replaced: the moves of several input entries run as one batch."""

    def __init__(self, env: Env, k: int, replaced: dict[str, Array], xp) -> None:
        super().__init__(env)
        self._k, self._replaced, self._xp, self._made = k, replaced, xp, {}

    def __getitem__(self, name: str) -> Array:
        if name in self._replaced:
            return self._replaced[name]
        if name not in self._made:
            value = self._xp.asarray(dict.__getitem__(self, name))
            self._made[name] = self._xp.broadcast_to(value[None], (self._k, *value.shape)).reshape(
                self._k * value.shape[0], *value.shape[1:])
        return self._made[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default


def _moved_through(family: Family, source: str, width: Array, chain: Sequence[str], step: str, env: Env,
                   params: Params, xp) -> Array:
    """How far ``step`` moves when each entry of ``source`` is off by up to ``width``, every step of
    ``chain`` (between them) re-run: per entry of ``step``, the largest change each entry's two
    moves make, added up over the entries. The moves run as extra variants of one batched call
    per step (in blocks of rows)."""
    centre = xp.asarray(env[step])
    batch = centre.shape[0]
    total = xp.zeros(centre.shape, dtype=xp.float64)
    base = xp.asarray(env[source], dtype=xp.float64)
    flat_w = width.reshape(batch, -1)
    entries = [int(i) for i in np.flatnonzero(np.asarray(_host((flat_w > 0).any(axis=0))))]
    per_call = max(1, _ROWS_PER_CALL // (2 * batch))
    for lo in range(0, len(entries), per_call):
        group = entries[lo:lo + per_call]
        k = 2 * len(group)
        # Block b of the k·batch rows moves entry group[b // 2] up (b even) or down (b odd).
        moved = xp.broadcast_to(base.reshape(batch, -1)[None], (k, batch, flat_w.shape[1])).copy()
        for b, entry in enumerate(group):
            moved[2 * b, :, entry] += flat_w[:, entry]
            moved[2 * b + 1, :, entry] -= flat_w[:, entry]
        replaced = {source: moved.reshape(k * batch, *base.shape[1:])}
        with np.errstate(all="ignore"):
            repeated = _Repeated(env, k, replaced, xp)
            for name in chain:
                replaced[name] = xp.asarray(family.step(name).fn(repeated, params, xp))
            out = xp.asarray(family.step(step).fn(repeated, params, xp))
            change = xp.abs(out.reshape(k, *centre.shape) - centre[None])
        # −∞ stays −∞ (a masked score): no change there, not ∞ − ∞.
        change = xp.where(xp.isfinite(change), change, 0.0)
        total = total + change.reshape(len(group), 2, *centre.shape).max(axis=1).sum(axis=0)
    return total


def _host(value: Array) -> Any:
    """A small array on the host (CuPy's ``.get()``), for picking the entries to move."""
    return value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) else value


def item_allowance(item: Any, step: str, env: Env, inputs: Mapping[str, Array], between: Sequence[str],
                   xp=np) -> Array | None:
    """:func:`allowance` for a worksheet item (a spec's or a key's: ``family``, ``params`` and
    ``tolerance_for``), each step with the tolerance it is graded with."""
    return allowance(item.family, step, env, item.params, inputs, between,
                     lambda name, value: item.tolerance_for(name).band(value, xp=xp),
                     lambda name, value: item.tolerance_for(name).unchanged_by_rounding(value, xp=xp), xp)


def entry_band(tol: Any, values: np.ndarray) -> np.ndarray:
    """The error each entry of a student's ``values`` may carry, for invariant checks.

    The tolerance's band around the student's own value, at least its band around 0 (so an
    entry that should be 0 is judged like an exact 0), plus the float slack.
    """
    finite = np.where(np.isfinite(values), np.abs(values), 0.0)
    band = np.maximum(tol.band(values), tol.band(np.zeros_like(values)))
    return band + SLACK * np.maximum(finite, band)


def explained_by_mistake(item: Any, step: str, env: Env, values: Array, asked: Array | None = None,
                         xp=np) -> Array:
    """Per variant: ``values`` (the answers to ``step``, leading axis the variants) are what a known
    mistake of ``step`` gives, within the plain tolerance, on every asked entry.

    Such an answer keeps the plain tolerance: the rounding band is for work nothing else explains,
    and an answer that a known mistake explains is that mistake, however close it lands.
    """
    tol = item.tolerance_for(step)
    n = values.shape[0]
    hit = xp.zeros(n, dtype=bool)
    for mistake in item.family.mistakes_for(step, item.params):
        with np.errstate(all="ignore"):
            wrong = mistake.fn(env, item.params, xp)
            if wrong.shape != values.shape:
                continue
            same = tol.passes(values, wrong, xp=xp).reshape(n, -1)
        if asked is not None:
            same = same | ~xp.asarray(asked).reshape(-1)
        hit = hit | same.all(axis=1)
    return hit
