"""How far rounding the steps in between may move a part: the rounding band of a step graph.

A student who rounds every intermediate value to the tolerance's decimals does right work, yet
a later step computed from rounded values can land further from the exact value than one
tolerance band (A = 1/3 written 0.33 moves c = Σ ∇A ⊙ A by up to 0.01 for every entry, and the
rounded c moves ∇S again). The policy, one for the grader and the audit alike:

    A part is right when it is within its tolerance of the value its step gives on *some*
    intermediate values, each within its own step's tolerance of the value it should have
    (the exact value, or the one computed from the student's own accepted answers).

The set of such values is enclosed by a band around the step's value, propagated through the
step graph one step at a time, the way interval arithmetic propagates widths:

- a step in between may be off by its tolerance band (its own rounding) plus what its inputs'
  bands move it by. A step whose inputs are exact and whose value rounding leaves unchanged
  (whole numbers, a split of the given Q) is not rounded by anyone: its own band is 0;
- how far an input's band moves a step: each entry of the input is moved to either end of its
  band, one entry at a time, and the largest change each makes is added up. For a step that is
  linear in each input entry (products with the givens, sums, transposes) that sum is exactly
  the largest change over the whole box of inputs. For exp, the softmax and divisions it is the
  first-order bound measured over the band itself; the terms it leaves out are products of two
  bands (about 10⁻⁴ at 2 decimals), and each step in between is given a whole band where
  rounding moves it by half of one, which covers them.

The band only ever widens what passes against the right value or against the student's own
earlier answers; known mistakes are still judged with the plain tolerance, and the worksheet
rejects variants where a known mistake would pass (see the tests of every family's mistakes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

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


def rounding_band(family: Family, step: str, env: Env, params: Params, free: Sequence[str],
                  band_of: BandOf, unchanged: RoundsTo, xp=np, widths: dict[str, Array] | None = None) -> Array:
    """The extra |answer − env[step]| a part of ``step`` may have, when each step in ``free``
    (steps ``step`` is computed from, in the family's order) may be rounded.

    ``env`` holds the centre: every step of ``free`` and ``step`` itself computed from the values
    the student is held to (the exact ones, or their own accepted answers). Returns an array of
    ``env[step]``'s shape (leading axis: the variants); 0 where nothing in ``free`` reaches.

    ``widths`` keeps each free step's band for the next call on the same ``env`` with the same
    free steps (the parts of one item share their unasked steps).
    """
    width: dict[str, Array] = {} if widths is None else widths
    for name in free:
        if family.step(name).kind != "number" or name in width:
            continue
        moved = _moved_by(family, name, env, params, width, xp)
        value = xp.asarray(env[name])
        own = xp.where((moved > 0) | ~unchanged(name, value), band_of(name, value), 0.0)
        width[name] = xp.where(xp.isfinite(value), own + moved, 0.0)
    return _moved_by(family, step, env, params, width, xp)


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


def _moved_by(family: Family, step: str, env: Env, params: Params, width: dict[str, Array], xp) -> Array:
    """How far ``step`` moves when each of its inputs in ``width`` is off by up to its width.

    Each input entry is moved to either end of its width alone; the largest change in every
    entry of ``step`` is added up over the input entries (the box's corners, first order). The
    moves run as extra variants of one batched call per input (in blocks of rows).
    """
    centre = xp.asarray(env[step])
    batch = centre.shape[0]
    total = xp.zeros(centre.shape, dtype=xp.float64)
    fn = family.step(step).fn
    for name in family.step(step).needs:
        w = width.get(name)
        if w is None or not bool((w > 0).any()):
            continue
        base = xp.asarray(env[name], dtype=xp.float64)
        flat_w = w.reshape(batch, -1)
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
            moved = moved.reshape(k * batch, *base.shape[1:])
            with np.errstate(all="ignore"):
                out = xp.asarray(fn(_Repeated(env, k, {name: moved}, xp), params, xp))
                change = xp.abs(out.reshape(k, *centre.shape) - centre[None])
            # −∞ stays −∞ (a masked score): no change there, not ∞ − ∞.
            change = xp.where(xp.isfinite(change), change, 0.0)
            total = total + change.reshape(len(group), 2, *centre.shape).max(axis=1).sum(axis=0)
    return total


def _host(value: Array) -> Any:
    """A small array on the host (CuPy's ``.get()``), for picking the entries to move."""
    return value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) else value


def item_rounding_band(item: Any, step: str, env: Env, free: Sequence[str], xp=np,
                       widths: dict[str, Array] | None = None) -> Array | None:
    """:func:`rounding_band` for a worksheet item (a spec's or a key's: ``family``, ``params`` and
    ``tolerance_for``), each step with the tolerance it is graded with; None when ``free`` is empty."""
    if not free:
        return None
    return rounding_band(item.family, step, env, item.params, free,
                         lambda name, value: item.tolerance_for(name).band(value, xp=xp),
                         lambda name, value: item.tolerance_for(name).unchanged_by_rounding(value, xp=xp), xp,
                         widths)


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
