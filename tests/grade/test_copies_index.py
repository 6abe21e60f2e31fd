"""Copy detection through its index flags exactly what the count over every pair of submission
and variant flags (the rule in qkvquiz/grade/copies.py), whatever the tolerance and the values."""

from __future__ import annotations

import zlib
from types import SimpleNamespace

import numpy as np
import pytest

from qkvquiz.grade.copies import COPY_MIN_ENTRIES, COPY_SHARE, detect_copies
from qkvquiz.grade.columns import Column
from qkvquiz.core.tolerance import Tolerance

from ..helpers import make_key


def every_pair(key, rows: np.ndarray, columns) -> dict:
    """The documented rule, counted for every submission against every variant (students² × entries)."""
    n, variants = len(rows), len(key.students)
    own = np.zeros(n, dtype=np.int64)
    answered = np.zeros(n, dtype=np.int64)
    other = np.zeros((n, variants), dtype=np.int64)
    for item, part in key.parts:
        column = columns[part.id]
        exact = item.env[part.step].reshape(variants, -1)
        telling = ~(exact == exact[:1]).all(axis=0)
        exact = exact[:, telling]
        values = column.values.reshape(n, -1)[:, telling]
        given = column.readable[:, None] & ~np.isnan(values)
        tol = item.tolerance_for(part.step)
        answered += given.sum(axis=1)
        with np.errstate(all="ignore"):
            own += (tol.passes(values, exact[rows]) & given).sum(axis=1)
            other += (tol.passes(values[:, None, :], exact[None, :, :]) & given[:, None, :]).sum(axis=2)
    other[np.arange(n), rows] = -1
    best = other.argmax(axis=1)
    matched = other[np.arange(n), best]
    flagged = (answered >= COPY_MIN_ENTRIES) & (matched >= COPY_SHARE * answered) & (matched > own)
    return {int(j): (key.students[int(best[j])], int(matched[j]), int(own[j]), int(answered[j]))
            for j in np.flatnonzero(flagged)}


def found(key, rows, columns) -> dict:
    return {j: (m.other, m.matched, m.own, m.answered) for j, m in detect_copies(key, rows, columns).items()}


TOLERANCES = [Tolerance("decimals", 2), Tolerance("decimals", 0), Tolerance("sigfigs", 2), Tolerance("sigfigs", 1),
              Tolerance("rel", 0.05), Tolerance("rel", 0.0, floor=0.0), Tolerance("abs", 0.0), Tolerance("abs", 0.5)]


def synthetic(rng: np.random.Generator, variants: int, n: int, tol: Tolerance, pool: np.ndarray):
    """A key of two parts whose exact values come from ``pool`` (few values: many ties between
    variants), and ``n`` submissions: some right, some copied, some slipped, some blank or unreadable."""
    parts, env, columns = [], {}, {}
    rows = rng.integers(0, variants, n)
    for k, shape in enumerate([(3,), (2, 3)]):
        step = f"step{k}"
        exact = rng.choice(pool, (variants, *shape))
        exact[:, 0] = pool[0]  # an entry the same in every variant: never telling
        env[step] = exact
        source = np.where(rng.random(n) < 0.3, rng.integers(0, variants, n), rows)  # copied from someone
        values = exact[source].copy()
        slip = rng.random(values.shape) < 0.3
        values[slip] = rng.choice(pool, int(slip.sum())) + rng.choice([0.0, 0.004, -0.3, 1e-13], int(slip.sum()))
        values[rng.random(values.shape) < 0.05] = np.nan  # empty boxes
        readable = rng.random(n) < 0.95
        values[~readable] = 0.0
        columns[f"p{k}"] = Column(values, readable, {})
        parts.append((SimpleNamespace(env=env, tolerance_for=lambda step, tol=tol: tol),
                      SimpleNamespace(id=f"p{k}", step=step)))
    key = SimpleNamespace(students=tuple(f"v{i}" for i in range(variants)), parts=parts)
    return key, rows, columns


POOLS = {
    "small whole numbers": np.array([0.0, 1, -1, 2, 0.5, -0.5]),
    "with infinities": np.array([-np.inf, 0.0, 1.0, np.inf, -2.0]),
    "spread": np.array([1e-300, 3e-7, 0.012, 0.0149, 0.5, 7.25, 123.456, 9.99e5, -42.0, 0.0]),
    "tiny": np.array([5e-324, 1e-310, 0.0, -1e-320, 2.5e-308]),
}


@pytest.mark.parametrize("tol", TOLERANCES, ids=lambda t: f"{t.mode}-{t.value}-{t.floor}")
@pytest.mark.parametrize("pool", list(POOLS), ids=list(POOLS))
def test_the_index_flags_exactly_what_every_pair_flags(tol, pool):
    rng = np.random.default_rng(zlib.crc32(repr((tol, pool)).encode()))
    for variants, n in ((2, 5), (7, 30), (40, 120)):
        key, rows, columns = synthetic(rng, variants, n, tol, POOLS[pool])
        assert found(key, rows, columns) == every_pair(key, rows, columns)


def test_the_index_agrees_on_a_real_key_with_copies_slips_and_malformed_parts():
    ids = [f"s{i:03d}" for i in range(60)]
    key, doc = make_key(students=ids, seed=3)
    rng = np.random.default_rng(11)
    from qkvquiz.grade.grader import read_columns

    answers = []
    for i in range(len(ids)):
        src = doc["students"][int(rng.integers(len(ids))) if i % 3 == 0 else i]["answers"]
        mine = {k: np.array(v, dtype=object).tolist() for k, v in src.items()}
        for part in list(mine)[: i % 4]:
            if i % 7 == 0:
                mine[part] = "banana"
            else:
                mine[part] = (np.array([float(x) for x in np.ravel(mine[part])]).reshape(np.shape(mine[part]))
                              + rng.choice([0.0, 0.001, 0.5])).tolist()
        answers.append(mine)
    rows = np.arange(len(ids))
    columns = read_columns(key, answers)
    expected = every_pair(key, rows, columns)
    assert expected  # the case exercises flags
    assert found(key, rows, columns) == expected
