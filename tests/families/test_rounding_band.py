"""The rounding band of a step graph: exact for linear steps, nothing where nobody rounds."""

import numpy as np

from qkvquiz.core.tolerance import Tolerance
from qkvquiz.families.rounding import item_allowance, upstream
from qkvquiz.grade.checks import key_allowance

from ..helpers import ROSTER, solved


def test_a_linear_step_gets_exactly_the_largest_change_over_the_box():
    # Z = AV with V whole: rounding each weight (by up to 0.005, half a unit at 2 decimals) moves
    # Z_id by at most Σ_j |V_jd|·0.005.
    _, env, item = solved("attention.output", {"tokens": 3, "d_k": 3}, ROSTER[:10], ask=["scores", "output"])
    band, free = key_allowance(item, "output", env)
    assert free == ["weights"]
    weights_band = np.where(Tolerance("decimals", 2).unchanged_by_rounding(env["weights"]), 0.0, 0.005)
    expected = np.einsum("bij,bjd->bid", weights_band, np.abs(env["V"]))
    np.testing.assert_allclose(band, expected, rtol=1e-9, atol=1e-12)


def test_steps_nobody_rounds_add_nothing():
    # Splitting whole-number Q, K, V into heads needs no rounding: the scores get no band from it.
    _, env, item = solved("attention.multihead", {}, ROSTER[:6], ask=["scores"])
    assert {"Qh", "Kh"} <= set(upstream(item.family, "scores"))
    band, free = key_allowance(item, "scores", env)
    assert set(free) == set(upstream(item.family, "scores"))
    assert band is None or not band.any()


def test_the_band_follows_the_graph_through_several_steps():
    # ∇S from rounded A and a rounded c: the band counts both, and c's own band carries A's.
    _, env, item = solved("backprop.softmax", {"tokens": 3}, ROSTER[:10], ask=["dS"])
    both, free = key_allowance(item, "dS", env)
    only_a = item_allowance(item, "dS", env, {}, ["weights"])
    assert free == ["weights", "rowdot"]
    assert (both >= only_a - 1e-15).all() and (both > only_a).any()
    # A row of ∇S moves by at most Σ (bands of A, c) times the largest factor in front of them.
    assert both.max() < 0.2


def test_a_step_reached_along_two_paths_counts_once_with_the_paths_netted():
    # ∇S = A ⊙ (∇A − c), c = Σ_j ∇A_j A_j: a weight reaches ∇S directly and through c. Moving one
    # weight and recomputing c and ∇S by hand (loops, not the family) gives the change; the
    # allowance is the sum over weights of the larger of the two moves' changes, plus c's own
    # rounding (0.005, moving ∇S_ik by A_ik·0.005).
    _, env, item = solved("backprop.softmax", {"tokens": 3}, ROSTER[:6], ask=["dS"])
    A, dA = np.asarray(env["weights"]), np.asarray(env["dA"])
    width = np.where(Tolerance("decimals", 2).unchanged_by_rounding(A), 0.0, 0.005)
    band = item_allowance(item, "dS", env, {"weights": width}, ["rowdot"])

    def ds(a):
        out = np.zeros_like(a)
        for b in range(a.shape[0]):
            for i in range(a.shape[1]):
                c = sum(dA[b, i, j] * a[b, i, j] for j in range(a.shape[2]))
                for k in range(a.shape[2]):
                    out[b, i, k] = a[b, i, k] * (dA[b, i, k] - c)
        return out

    centre = ds(A)
    expected = np.zeros_like(A)
    for idx in np.ndindex(*A.shape[1:]):
        up, down = A.copy(), A.copy()
        up[(slice(None), *idx)] += width[(slice(None), *idx)]
        down[(slice(None), *idx)] -= width[(slice(None), *idx)]
        expected += np.maximum(np.abs(ds(up) - centre), np.abs(ds(down) - centre))
    expected += np.abs(A) * 0.005
    np.testing.assert_allclose(band, np.minimum(expected, 64 * 0.01), rtol=1e-9, atol=1e-12)


def test_tolerance_band_widens_by_extra_and_rounding_leaves_grid_values_alone():
    tol = Tolerance("decimals", 2)
    assert not tol.passes(1.025, 1.0) and tol.passes(1.025, 1.0, extra=0.02)
    assert not tol.passes(5.0, -np.inf, extra=1.0)  # −∞ still needs −∞
    assert tol.unchanged_by_rounding(np.array([0.25, 3.0, -np.inf, 1.0 / 3.0])).tolist() == [True, True, True, False]
    assert Tolerance("sigfigs", 3).unchanged_by_rounding(np.array([2.0, 2.5])).tolist() == [True, False]


def test_every_family_gets_a_finite_band_for_every_step():
    # The moves run as extra variants of one call: every step function must take them.
    from qkvquiz.families import REGISTRY

    for name, family in REGISTRY.items():
        _, env, item = solved(name, {}, ROSTER[:5], ask=list(family.default_ask))
        for step in family.askable_steps:
            band, _free = key_allowance(item, step, env)
            if band is not None:
                assert band.shape == np.shape(env[step]), (name, step)
                assert np.isfinite(band).all() and (band >= 0).all(), (name, step)
