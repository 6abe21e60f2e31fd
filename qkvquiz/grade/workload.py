"""How much array work grading a class is: what ``grade --backend cupy`` weighs against a GPU's fixed costs."""

from __future__ import annotations

from time import perf_counter

import numpy as np

from ..families import Env
from ..key import Key
from .checks import carried_inputs, rerun_on_own

#: Submissions that :func:`grading_seconds` times on the CPU.
PROBE = 256


def grading_seconds(key: Key, submissions: int) -> float:
    """About how many CPU seconds (NumPy) grading's array work on ``submissions`` answers takes.

    That is what ``xp`` computes in :func:`~qkvquiz.grade.checks.grade_item`: every part's
    tolerance check, each known mistake's value and each carried-forward re-run, done here on a
    probe of up to :data:`PROBE` of the key's rows and scaled to the class. Reading the files and
    writing the results are the host's work on either backend, so they are left out.
    """
    if submissions <= 0 or not key.students:
        return 0.0
    probe = min(PROBE, submissions)
    rows = np.arange(probe) % len(key.students)
    start = perf_counter()
    with np.errstate(all="ignore"):
        for item in key.items:
            env = Env({name: value[rows] for name, value in item.env.items()})
            asked = {part.step for part in item.parts}
            for part in item.parts:
                tol = item.tolerance_for(part.step)
                tol.passes(env[part.step], env[part.step])
                for mistake in item.family.mistakes_for(part.step, item.params):
                    tol.passes(env[part.step], mistake.fn(env, item.params, np))
                steps, between = carried_inputs(item.family, part.step, asked - {part.step})
                if steps:
                    own = {step: env[step] for step in steps}
                    tol.passes(env[part.step], rerun_on_own(item.family, part.step, env, own, between, item.params))
    return (perf_counter() - start) / probe * submissions
