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
                  band_of: BandOf, unchanged: RoundsTo, xp=np) -> Array:
    """The extra |answer − env[step]| a part of ``step`` may have, when each step in ``free``
    (steps ``step`` is computed from, in the family's order) may be rounded.

    ``env`` holds the centre: every step of ``free`` and ``step`` itself computed from the values
    the student is held to (the exact ones, or their own accepted answers). Returns an array of
    ``env[step]``'s shape (leading axis: the variants); 0 where nothing in ``free`` reaches.
    """
    width: dict[str, Array] = {}
    for name in free:
        if family.step(name).kind != "number":
            continue
        moved = _moved_by(family, name, env, params, width, xp)
        value = xp.asarray(env[name])
        own = xp.where((moved > 0) | ~unchanged(name, value), band_of(name, value), 0.0)
        width[name] = xp.where(xp.isfinite(value), own + moved, 0.0)
    return _moved_by(family, step, env, params, width, xp)


def _moved_by(family: Family, step: str, env: Env, params: Params, width: dict[str, Array], xp) -> Array:
    """How far ``step`` moves when each of its inputs in ``width`` is off by up to its width.

    Each input entry is moved to either end of its width alone; the largest change in every
    entry of ``step`` is added up over the input entries (the box's corners, first order).
    """
    centre = xp.asarray(env[step])
    total = xp.zeros(centre.shape, dtype=xp.float64)
    for name in family.step(step).needs:
        w = width.get(name)
        if w is None or not bool((w > 0).any()):
            continue
        base = xp.asarray(env[name], dtype=xp.float64)
        batch = base.shape[0]
        for index in np.ndindex(*base.shape[1:]):
            at = (slice(None), *index)
            if not bool((w[at] > 0).any()):
                continue
            worst = xp.zeros(centre.shape, dtype=xp.float64)
            for sign in (1.0, -1.0):
                moved = base.copy()
                moved[at] = base[at] + sign * w[at]
                with np.errstate(all="ignore"):
                    out = xp.asarray(family.rerun(step, Env({**env, name: moved}), params, xp))
                    change = xp.abs(out - centre)
                # −∞ stays −∞ (a masked score): no change there, not ∞ − ∞.
                change = xp.where(xp.isfinite(change), change, 0.0)
                worst = xp.maximum(worst, change.reshape(batch, *centre.shape[1:]))
            total = total + worst
    return total


def item_rounding_band(item: Any, step: str, env: Env, free: Sequence[str], xp=np) -> Array | None:
    """:func:`rounding_band` for a worksheet item (a spec's or a key's: ``family``, ``params`` and
    ``tolerance_for``), each step with the tolerance it is graded with; None when ``free`` is empty."""
    if not free:
        return None
    return rounding_band(item.family, step, env, item.params, free,
                         lambda name, value: item.tolerance_for(name).band(value, xp=xp),
                         lambda name, value: item.tolerance_for(name).unchanged_by_rounding(value, xp=xp), xp)


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
