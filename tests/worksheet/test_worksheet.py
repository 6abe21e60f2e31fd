"""Variants: reproducible, roster-independent, hand-computable, solved correctly."""

import math

import numpy as np
import pytest

from qkvquiz.families import REGISTRY
from qkvquiz.core.tolerance import Tolerance
from qkvquiz.core.seeding import Draw
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import acceptable, build_worksheet

from ..helpers import BASIC_ITEMS, make_key_doc

ROSTER = [f"student{i:02d}" for i in range(30)]


def test_same_seed_gives_the_same_key_twice():
    assert make_key_doc(seed=5) == make_key_doc(seed=5)


def test_another_seed_gives_other_variants():
    a, b = make_key_doc(seed=5), make_key_doc(seed=6)
    assert a["students"][0]["givens"] != b["students"][0]["givens"]


def test_a_students_variant_is_the_same_with_a_roster_of_one_or_thirty():
    spec = parse_spec({"title": "T", "items": BASIC_ITEMS})
    alone = build_worksheet(spec, ["student17"], seed=2)
    crowd = build_worksheet(spec, ROSTER, seed=2)
    reordered = build_worksheet(spec, ROSTER[::-1], seed=2)
    i, j = ROSTER.index("student17"), ROSTER[::-1].index("student17")
    for e1, e30, erev in zip(alone.envs, crowd.envs, reordered.envs):
        for name in e1:
            np.testing.assert_array_equal(e1[name][0], e30[name][i])
            np.testing.assert_array_equal(e1[name][0], erev[name][j])
    assert alone.codes[0] == crowd.codes[i]


def test_students_get_different_variants():
    ws = build_worksheet(parse_spec({"title": "T", "items": BASIC_ITEMS}), ROSTER, seed=0)
    q = ws.envs[2]["Q"].reshape(len(ROSTER), -1)
    assert len({tuple(row) for row in q}) > 20


def test_draws_stay_in_range_and_are_integers():
    d = Draw(np.arange(50, dtype=np.uint64))
    x = d.integers(-2, 3, (4, 4))
    assert x.shape == (50, 4, 4) and x.min() >= -2 and x.max() <= 3
    assert set(np.unique(x)) == {-2, -1, 0, 1, 2, 3}
    u = d.uniform(0, 1, (1000,))
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.05


def naive_attention(q, k, v, mask):
    n, m = q.shape[0], k.shape[0]
    z = np.zeros((n, v.shape[1]))
    weights = np.zeros((n, m))
    for i in range(n):
        s = [sum(q[i, t] * k[j, t] for t in range(q.shape[1])) / math.sqrt(q.shape[1]) for j in range(m)]
        allowed = [j for j in range(m) if mask[i, j] > 0.5]
        if not allowed:
            continue
        top = max(s[j] for j in allowed)
        total = sum(math.exp(s[j] - top) for j in allowed)
        for j in allowed:
            weights[i, j] = math.exp(s[j] - top) / total
            for c in range(v.shape[1]):
                z[i, c] += weights[i, j] * v[j, c]
    return weights, z


@pytest.mark.parametrize("mask", ["none", "causal", "padding", "random"])
def test_attention_output_family_agrees_with_a_naive_loop(mask):
    spec = parse_spec({"title": "T", "items": [{"family": "attention.output", "params": {"mask": mask, "tokens": 4}}]})
    ws = build_worksheet(spec, ROSTER[:10], seed=1)
    env = ws.envs[0]
    for b in range(10):
        weights, z = naive_attention(env["Q"][b], env["K"][b], env["V"][b], env["mask"][b])
        np.testing.assert_allclose(env["weights"][b], weights, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["output"][b], z, rtol=1e-12, atol=1e-14)


def test_accepted_variants_are_hand_computable_and_mistakes_distinguishable():
    tol = Tolerance("decimals", 2)
    for name in ("attention.scores", "attention.weights", "attention.output"):
        family = REGISTRY[name]
        for mask in (("none", "causal", "random") if "mask" in family.params else (None,)):
            params = {"mask": mask} if mask else {}
            spec = parse_spec({"title": "T", "items": [{"family": name, "params": params,
                                                         "ask": list(family.askable_steps)}]})
            ws = build_worksheet(spec, ROSTER, seed=4)
            env, item = ws.envs[0], spec.items[0]
            assert acceptable(item, env).all()
            for part in item.parts:
                for mistake in family.mistakes_for(part.step, item.params):
                    wrong = mistake.fn(env, item.params, np)
                    same = tol.passes(wrong, env[part.step]).reshape(len(ROSTER), -1).all(axis=1)
                    assert not same.any(), (name, mask, mistake.name)
            if "weights" in env:
                multi = (env["mask"] > 0.5).sum(-1) >= 2
                assert not ((env["weights"].max(-1) > 0.95) & multi).any()


def test_fixed_givens_that_make_a_step_nan_are_an_error_not_a_key_with_nan():
    from qkvquiz.worksheet import GenerationError

    spec = parse_spec({"title": "T", "items": [{
        "family": "attention.layernorm", "params": {"eps": 0},
        "givens": {"X": [[1, 2, 3, 4], [1, 1, 1, 1]], "Z": [[0, 0, 0, 1], [0, 0, 0, 0]],
                   "gamma": [1, 1, 1, 1], "beta": [0, 0, 0, 0]},
    }]})
    with pytest.raises(GenerationError, match="not a number"):
        build_worksheet(spec, ["a"], seed=0)


def test_the_key_refuses_to_store_nan():
    from qkvquiz.key import encode

    with pytest.raises(ValueError, match="NaN"):
        encode(np.array([1.0, np.nan]))


def test_an_impossible_item_fails_fast_and_names_the_rule_that_rejects_it():
    from qkvquiz.worksheet import GenerationError

    # With every β = 1, V̄ = B̄_V always: asking both can never be graded apart.
    spec = parse_spec({"title": "T", "items": [{
        "family": "delta.chunk_backward", "params": {"beta": "one"}, "ask": ["dV", "dBV"],
    }]})
    with pytest.raises(GenerationError, match=r"'dV' and 'dBV' are equal"):
        build_worksheet(spec, ["a", "b"], seed=0)


def test_a_new_title_changes_no_problem():
    items = [{"family": "attention.output"}]
    a = build_worksheet(parse_spec({"title": "Week 3", "items": items}), ["ada"], seed=1)
    b = build_worksheet(parse_spec({"title": "Week 3 (fixed typo)", "items": items}), ["ada"], seed=1)
    for name in a.envs[0]:
        np.testing.assert_array_equal(a.envs[0][name], b.envs[0][name])
