"""Scaled dot-product attention (qkvquiz.engine.attention) against independent oracles.

Oracles: a per-element Python loop (math.exp, math.sqrt), central finite differences, and
torch autograd (skipped when torch is not installed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from qkvquiz.engine.attention import (
    apply_mask,
    attention,
    attention_backward,
    scaled_scores,
    softmax,
)

from ..helpers import finite_difference

TOL = 1e-10  # rtol = atol against torch autograd
FD_TOL = 1e-8

BATCH = (2, 3)
N, M, D_K, D_V = 4, 5, 3, 2


# ---------------------------------------------------------------- naive oracle


def naive_attention(q, k, v, allowed=None, scale=True):
    """Scores, weights and output by explicit loops over every element."""
    batch, (n, d) = q.shape[:-2], q.shape[-2:]
    m, dv = k.shape[-2], v.shape[-1]
    shape = batch + (n, m)
    ok = np.ones(shape, bool) if allowed is None else np.broadcast_to(allowed, shape)
    s = np.empty(batch + (n, m))
    a = np.zeros(batch + (n, m))
    z = np.zeros(batch + (n, dv))
    for b in np.ndindex(*batch):
        for i in range(n):
            for j in range(m):
                dot = sum(float(q[b + (i, t)]) * float(k[b + (j, t)]) for t in range(d))
                dot = dot / math.sqrt(d) if scale else dot
                s[b + (i, j)] = dot if ok[b + (i, j)] else -math.inf
            kept = [j for j in range(m) if ok[b + (i, j)]]
            if kept:
                top = max(s[b + (i, j)] for j in kept)
                e = {j: math.exp(s[b + (i, j)] - top) for j in kept}
                total = sum(e.values())
                for j in kept:
                    a[b + (i, j)] = e[j] / total
            for c in range(dv):
                z[b + (i, c)] = sum(a[b + (i, j)] * float(v[b + (j, c)]) for j in range(m))
    return s, a, z


def qkv(seed=0, batch=BATCH, n=N, m=M, d_k=D_K, d_v=D_V):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=batch + (n, d_k)),
        rng.normal(size=batch + (m, d_k)),
        rng.normal(size=batch + (m, d_v)),
    )


def causal(n):
    return np.tril(np.ones((n, n), bool))


def padding(lengths, m):
    """Keys at or past each element's length are padding: (..., 1, m), shared by the queries."""
    lengths = np.asarray(lengths)
    return (np.arange(m) < lengths[..., None])[..., None, :]


def explicit(seed, batch=BATCH, n=N, m=M):
    """Random allowed pairs with query row 1 of the first batch element fully masked."""
    rng = np.random.default_rng(seed)
    allowed = rng.random(batch + (n, m)) < 0.6
    allowed[(0,) * len(batch) + (1,)] = False
    return allowed


def masks():
    lengths = np.array([[5, 3, 1], [2, 4, 5]])  # 5 > N: no padding
    return {
        "none": None,
        "causal": causal(N),
        "padding": padding(lengths, N),
        "explicit": explicit(7, n=N, m=N),
    }


MASK_NAMES = ["none", "causal", "padding", "explicit"]


# ---------------------------------------------------------------- forward


@pytest.mark.parametrize("scale", [True, False])
def test_scaled_scores_match_loop_and_divide_by_sqrt_dk(scale):
    q, k, v = qkv(1)
    s_naive, _, _ = naive_attention(q, k, v, scale=scale)
    got = scaled_scores(q, k, scale=scale, xp=np)
    np.testing.assert_allclose(got, s_naive, rtol=1e-13, atol=1e-13)


def test_apply_mask_sets_disallowed_to_minus_inf_and_keeps_the_rest():
    s = np.random.default_rng(2).normal(size=BATCH + (N, N))
    allowed = explicit(3, n=N, m=N)
    out = apply_mask(s, allowed, xp=np)
    assert np.all(out[~allowed] == -np.inf)
    np.testing.assert_array_equal(out[allowed], s[allowed])
    assert apply_mask(s, None, xp=np) is s


def test_apply_mask_broadcasts_a_single_mask_over_the_batch():
    s = np.random.default_rng(4).normal(size=BATCH + (N, N))
    out = apply_mask(s, causal(N), xp=np)
    assert out.shape == s.shape
    assert np.all(np.isneginf(out[..., 0, 1:]))
    np.testing.assert_array_equal(out[..., -1, :], s[..., -1, :])


@pytest.mark.parametrize("name", MASK_NAMES)
def test_softmax_of_masked_scores_matches_loop(name):
    q, k, v = qkv(5, m=N)
    allowed = masks()[name]
    s_naive, a_naive, _ = naive_attention(q, k, v, allowed)
    s = apply_mask(scaled_scores(q, k, xp=np), allowed, xp=np)
    np.testing.assert_allclose(softmax(s, xp=np), a_naive, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", MASK_NAMES)
def test_attention_forward_matches_loop(name):
    q, k, v = qkv(6, m=N)
    allowed = masks()[name]
    s_naive, a_naive, z_naive = naive_attention(q, k, v, allowed)
    fwd = attention(q, k, v, allowed, xp=np)
    np.testing.assert_allclose(fwd.scores, s_naive, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(fwd.weights, a_naive, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fwd.output, z_naive, rtol=1e-13, atol=1e-14)
    assert fwd.output.shape == BATCH + (N, D_V)


def test_attention_with_more_keys_than_queries_and_dv_unequal_dk():
    q, k, v = qkv(8, n=2, m=6, d_k=4, d_v=3)
    _, a_naive, z_naive = naive_attention(q, k, v)
    fwd = attention(q, k, v, xp=np)
    assert fwd.weights.shape == BATCH + (2, 6)
    np.testing.assert_allclose(fwd.weights, a_naive, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fwd.output, z_naive, rtol=1e-13, atol=1e-14)


def test_unscaled_attention_skips_the_sqrt_dk():
    q, k, v = qkv(9)
    _, a_naive, z_naive = naive_attention(q, k, v, scale=False)
    fwd = attention(q, k, v, scale=False, xp=np)
    np.testing.assert_allclose(fwd.weights, a_naive, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fwd.output, z_naive, rtol=1e-13, atol=1e-14)


def test_fully_masked_row_gives_zero_weights_zero_output_and_zero_dq():
    q, k, v = qkv(10, m=N)
    allowed = explicit(11, n=N, m=N)
    row = (0,) * len(BATCH) + (1,)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # no NaN on the way
        fwd = attention(q, k, v, allowed, xp=np)
        grads = attention_backward(fwd, np.ones_like(fwd.output), xp=np)
    for arr in (fwd.weights, fwd.output, grads.dq, grads.dk, grads.dv, grads.dscores):
        assert np.all(np.isfinite(arr))
    np.testing.assert_array_equal(fwd.weights[row], 0.0)
    np.testing.assert_array_equal(fwd.output[row], 0.0)
    np.testing.assert_array_equal(grads.dscores[row], 0.0)
    np.testing.assert_array_equal(grads.dq[row], 0.0)


def test_softmax_is_stable_for_huge_scores():
    s = np.array(
        [
            [1000.0, 999.0, 998.0],
            [-1000.0, -1001.0, -1002.0],
            [1000.0, -1000.0, 0.0],
            [1e300, 1e300, -1e300],
        ]
    )
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        a = softmax(s, xp=np)
    e = [math.exp(0.0), math.exp(-1.0), math.exp(-2.0)]
    expected_shifted = [x / sum(e) for x in e]
    np.testing.assert_allclose(a[0], expected_shifted, rtol=1e-15)
    np.testing.assert_allclose(a[1], expected_shifted, rtol=1e-15)
    np.testing.assert_allclose(a[2], [1.0, 0.0, 0.0], atol=1e-300)
    np.testing.assert_allclose(a[3], [0.5, 0.5, 0.0])


def test_softmax_along_another_axis_normalises_columns():
    s = np.random.default_rng(12).normal(size=BATCH + (N, M))
    a = softmax(s, axis=-2, xp=np)
    np.testing.assert_allclose(a.sum(axis=-2), 1.0, rtol=1e-14)
    by_rows = np.swapaxes(softmax(np.swapaxes(s, -1, -2), xp=np), -1, -2)
    np.testing.assert_allclose(a, by_rows, rtol=1e-15)


# ---------------------------------------------------------------- backward vs finite differences


@pytest.mark.parametrize("name", MASK_NAMES)
def test_attention_backward_matches_finite_differences(name):
    q, k, v = qkv(13, m=N)
    allowed = masks()[name]
    dz = np.random.default_rng(14).normal(size=BATCH + (N, D_V))

    def loss():
        return float(np.sum(dz * attention(q, k, v, allowed, xp=np).output))

    grads = attention_backward(attention(q, k, v, allowed, xp=np), dz, xp=np)
    for got, x in ((grads.dq, q), (grads.dk, k), (grads.dv, v)):
        np.testing.assert_allclose(got, finite_difference(loss, x), rtol=FD_TOL, atol=FD_TOL)


def test_dscores_and_dweights_match_finite_differences():
    q, k, v = qkv(15, m=N)
    allowed = causal(N)
    dz = np.random.default_rng(16).normal(size=BATCH + (N, D_V))
    fwd = attention(q, k, v, allowed, xp=np)
    grads = attention_backward(fwd, dz, xp=np)
    s = fwd.scores.copy()
    a = fwd.weights.copy()
    fd_s = finite_difference(lambda: float(np.sum(dz * (softmax(s, xp=np) @ v))), s)
    fd_a = finite_difference(lambda: float(np.sum(dz * (a @ v))), a)
    # FD in s at a masked entry perturbs −∞ and changes nothing: its gradient is 0.
    np.testing.assert_allclose(grads.dscores, fd_s, rtol=FD_TOL, atol=FD_TOL)
    np.testing.assert_allclose(grads.dweights, fd_a, rtol=FD_TOL, atol=FD_TOL)


# ---------------------------------------------------------------- backward vs torch autograd


def torch_manual(torch, q, k, v, allowed, dz, scale=True):
    """Softmax attention written out in torch; masked entries filled with −∞ before softmax."""
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    s = tq @ tk.transpose(-1, -2)
    if scale:
        s = s / math.sqrt(q.shape[-1])
    s.retain_grad()
    masked = s
    if allowed is not None:
        masked = s.masked_fill(~torch.tensor(np.broadcast_to(allowed, s.shape)), -math.inf)
    a = torch.softmax(masked, dim=-1)
    a.retain_grad()
    z = a @ tv
    z.backward(torch.tensor(dz))
    return {"a": a, "z": z, "s": s, "q": tq, "k": tk, "v": tv}


@pytest.mark.parametrize("name", ["none", "causal", "padding"])
@pytest.mark.parametrize("scale", [True, False])
def test_attention_backward_matches_torch_autograd(name, scale):
    torch = pytest.importorskip("torch")
    q, k, v = qkv(19, m=N)
    allowed = masks()[name]
    dz = np.random.default_rng(20).normal(size=BATCH + (N, D_V))
    fwd = attention(q, k, v, allowed, scale=scale, xp=np)
    grads = attention_backward(fwd, dz, xp=np)
    t = torch_manual(torch, q, k, v, allowed, dz, scale=scale)
    np.testing.assert_allclose(fwd.weights, t["a"].detach().numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(fwd.output, t["z"].detach().numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dweights, t["a"].grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dscores, t["s"].grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dq, t["q"].grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dk, t["k"].grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dv, t["v"].grad.numpy(), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("name", ["causal", "padding", "explicit"])
def test_masked_attention_matches_torch_sdpa_with_boolean_mask(name):
    """sdpa with a boolean mask gives a fully masked row zero output and zero ∇Q, as here."""
    torch = pytest.importorskip("torch")
    F = pytest.importorskip("torch.nn.functional")
    q, k, v = qkv(21, m=N)
    allowed = masks()[name]
    dz = np.random.default_rng(22).normal(size=BATCH + (N, D_V))
    fwd = attention(q, k, v, allowed, xp=np)
    grads = attention_backward(fwd, dz, xp=np)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    mask = torch.tensor(np.broadcast_to(allowed, BATCH + (N, N)))
    tz = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask)
    tz.backward(torch.tensor(dz))
    np.testing.assert_allclose(fwd.output, tz.detach().numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dq, tq.grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dk, tk.grad.numpy(), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(grads.dv, tv.grad.numpy(), rtol=TOL, atol=TOL)


# ---------------------------------------------------------------- properties

SCORES = hnp.arrays(
    np.float64,
    st.tuples(st.integers(1, 3), st.integers(1, 5), st.integers(1, 6)),
    elements=st.floats(-50.0, 50.0, allow_nan=False),
)


@settings(max_examples=60, deadline=None)
@given(s=SCORES, data=st.data())
def test_weights_rows_sum_to_one_where_any_key_is_allowed(s, data):
    allowed = data.draw(hnp.arrays(np.bool_, s.shape))
    a = softmax(apply_mask(s, allowed, xp=np), xp=np)
    assert np.all(np.isfinite(a))
    assert np.all((a >= 0.0) & (a <= 1.0))
    np.testing.assert_array_equal(a[~allowed], 0.0)
    any_allowed = allowed.any(axis=-1)
    np.testing.assert_allclose(a.sum(axis=-1)[any_allowed], 1.0, rtol=1e-13)
    np.testing.assert_array_equal(a.sum(axis=-1)[~any_allowed], 0.0)


@settings(max_examples=60, deadline=None)
@given(s=SCORES, data=st.data())
def test_weights_are_invariant_to_adding_a_constant_to_a_score_row(s, data):
    allowed = data.draw(hnp.arrays(np.bool_, s.shape))
    shift = data.draw(
        hnp.arrays(np.float64, s.shape[:-1] + (1,), elements=st.floats(-1e3, 1e3, allow_nan=False))
    )
    a = softmax(apply_mask(s, allowed, xp=np), xp=np)
    shifted = softmax(apply_mask(s + shift, allowed, xp=np), xp=np)
    np.testing.assert_allclose(shifted, a, rtol=1e-10, atol=1e-10)
