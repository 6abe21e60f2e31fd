"""The delta rule: recurrent and chunked forms agree, and the chunk backward is the true gradient.

Oracles: per-element loops, numpy.linalg.solve, exact rational arithmetic, central finite
differences, and torch autograd (only where torch is installed).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkvquiz.engine.backend import swap
from qkvquiz.engine.delta import (
    ChunkForward,
    causal_mask,
    chunk_backward,
    chunk_forward,
    chunked_backward,
    chunked_forward,
    delta_recurrent,
    solve_unit_lower,
    solve_unit_lower_transposed,
    tril_strict_mask,
)

TORCH_TOL = 1e-10
FD_STEP = 1e-5
FD_RTOL = 1e-7


def draw(rng, batch=(3, 2), n=11, d_k=3, d_v=2, normalise=True):
    """q, k, v, β, S₀ as the delta rule expects: unit keys and β in (0, 2) keep it stable."""
    q = rng.normal(size=batch + (n, d_k))
    k = rng.normal(size=batch + (n, d_k))
    if normalise:
        k = k / np.linalg.norm(k, axis=-1, keepdims=True)
    v = rng.normal(size=batch + (n, d_v))
    beta = rng.uniform(0.1, 1.9, size=batch + (n,))
    s0 = rng.normal(size=batch + (d_v, d_k))
    return q, k, v, beta, s0


def unit_lower(rng, shape, c, spread=0.3):
    """A well-conditioned unit lower-triangular system stored with 7s on and above the diagonal.

    The solvers read only the strict lower triangle, so the 7s must not change the answer.
    """
    return np.tril(spread * rng.normal(size=shape + (c, c)), -1) + np.triu(np.full((c, c), 7.0))


# ------------------------------------------------------------------------ masks


def test_masks_are_strict_lower_and_causal_with_diagonal():
    np.testing.assert_array_equal(tril_strict_mask(3), [[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])


# ----------------------------------------------------------- triangular solvers


def test_forward_substitution_matches_numpy_solve_and_ignores_the_upper_triangle():
    rng = np.random.default_rng(1)
    a = unit_lower(rng, (4, 3), 6)
    b = rng.normal(size=(4, 3, 6, 2))
    true_a = np.tril(a, -1) + np.eye(6)  # what "unit lower-triangular" means
    np.testing.assert_allclose(solve_unit_lower(a, b), np.linalg.solve(true_a, b), rtol=1e-13)


def test_back_substitution_solves_the_transposed_system():
    rng = np.random.default_rng(2)
    a = unit_lower(rng, (4, 3), 6)
    b = rng.normal(size=(4, 3, 6, 2))
    true_a = np.tril(a, -1) + np.eye(6)
    expected = np.linalg.solve(swap(true_a), b)
    np.testing.assert_allclose(solve_unit_lower_transposed(a, b), expected, rtol=1e-13)


def test_solvers_broadcast_one_matrix_over_a_batch_of_right_hand_sides():
    rng = np.random.default_rng(3)
    a = unit_lower(rng, (), 5)
    b = rng.normal(size=(2, 5, 3))
    true_a = np.tril(a, -1) + np.eye(5)
    np.testing.assert_allclose(solve_unit_lower(a, b), np.linalg.solve(true_a, b), rtol=1e-13)
    np.testing.assert_allclose(
        solve_unit_lower_transposed(a, b), np.linalg.solve(true_a.T, b), rtol=1e-13
    )


def _exact_solve(a: np.ndarray, b: np.ndarray, transposed: bool) -> np.ndarray:
    """A Y = B (or Aᵀ Y = B) in exact rational arithmetic on the float values given."""
    m = a.T if transposed else a
    c, n = b.shape
    rows = range(c - 1, -1, -1) if transposed else range(c)
    y = [[Fraction(0)] * n for _ in range(c)]
    for i in rows:
        others = range(i + 1, c) if transposed else range(i)
        for j in range(n):
            acc = Fraction(float(b[i, j]))
            for l in others:
                acc -= Fraction(float(m[i, l])) * y[l][j]
            y[i][j] = acc
    return np.array([[float(x) for x in row] for row in y])


@pytest.mark.parametrize("seed", [3, 4])
def test_substitution_keeps_digits_an_explicit_inverse_loses_on_unnormalised_keys(seed):
    rng = np.random.default_rng(seed)
    c = 8
    k = 6.0 * rng.normal(size=(c, 4))  # un-normalised keys: A is badly conditioned
    beta = rng.uniform(0.5, 1.5, size=c)
    a = np.eye(c) + np.tril(beta[:, None] * (k @ k.T), -1)
    b = rng.normal(size=(c, 3))
    assert np.linalg.cond(a) > 1e12

    def rel(y, exact):
        return np.abs(y - exact).max() / np.abs(exact).max()

    exact = _exact_solve(a, b, transposed=False)
    assert rel(solve_unit_lower(a, b), exact) < 1e-13
    assert rel(np.linalg.inv(a) @ b, exact) > 1e-11
    exact_t = _exact_solve(a, b, transposed=True)
    assert rel(solve_unit_lower_transposed(a, b), exact_t) < 1e-13


# --------------------------------------------------------------------- forward


def test_recurrent_form_matches_the_product_form_token_by_token():
    rng = np.random.default_rng(5)
    q, k, v, beta, s0 = draw(rng, batch=(2,), n=5)
    fwd = delta_recurrent(q, k, v, beta, s0)
    for b in range(2):
        s = s0[b]
        for t in range(5):
            kt, vt = k[b, t], v[b, t]
            s = s @ (np.eye(3) - beta[b, t] * np.outer(kt, kt)) + beta[b, t] * np.outer(vt, kt)
            np.testing.assert_allclose(fwd.states[b, t], s, rtol=1e-13, atol=1e-14)
            np.testing.assert_allclose(fwd.outputs[b, t], s @ q[b, t], rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(fwd.final_state, fwd.states[..., -1, :, :])


def test_recurrent_form_starts_from_a_zero_state_by_default():
    rng = np.random.default_rng(6)
    q, k, v, beta, s0 = draw(rng, n=4)
    fwd = delta_recurrent(q, k, v, beta)
    assert fwd.s0.shape == s0.shape and not fwd.s0.any()
    np.testing.assert_allclose(
        fwd.states[..., 0, :, :], beta[..., 0, None, None] * v[..., 0, :, None] * k[..., 0, None, :]
    )


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 11, 16])
def test_chunked_form_equals_the_recurrence_including_a_ragged_last_chunk(chunk_size):
    rng = np.random.default_rng(7)
    q, k, v, beta, s0 = draw(rng)  # batch (3, 2), 11 tokens
    rec = delta_recurrent(q, k, v, beta, s0)
    chk = chunked_forward(q, k, v, beta, chunk_size, s0)
    assert [c.k.shape[-2] for c in chk.chunks][-1] == 11 - chunk_size * ((11 - 1) // chunk_size)
    np.testing.assert_allclose(chk.outputs, rec.outputs, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(chk.final_state, rec.final_state, rtol=1e-12, atol=1e-13)
    # Each chunk hands on exactly the state the recurrence reaches at the chunk boundary.
    ends = np.cumsum([c.k.shape[-2] for c in chk.chunks]) - 1
    for chunk, end in zip(chk.chunks, ends):
        np.testing.assert_allclose(chunk.s_next, rec.states[..., end, :, :], atol=1e-13)


def test_chunked_form_starts_from_a_zero_state_by_default():
    rng = np.random.default_rng(8)
    q, k, v, beta, _ = draw(rng, n=7)
    chunked = chunked_forward(q, k, v, beta, 3)
    np.testing.assert_allclose(chunked.outputs, delta_recurrent(q, k, v, beta).outputs, atol=1e-13)
    assert not chunked.s0.any()


def test_chunked_forward_rejects_a_nonpositive_chunk_size():
    q, k, v, beta, s0 = draw(np.random.default_rng(0), n=3)
    with pytest.raises(ValueError, match="chunk_size"):
        chunked_forward(q, k, v, beta, 0, s0)


def _naive_chunk(q, k, v, beta, s):
    """One unbatched chunk from its definitions, element by element, with numpy's solver."""
    c = k.shape[0]
    g = np.array([[k[r] @ k[j] for j in range(c)] for r in range(c)])
    a = np.array([[1.0 if r == j else (beta[r] * g[r, j] if r > j else 0.0) for j in range(c)]
                  for r in range(c)])
    bk = np.array([beta[r] * k[r] for r in range(c)])
    bv = np.array([beta[r] * v[r] for r in range(c)])
    w = np.linalg.solve(a, bk)
    u = np.linalg.solve(a, bv)
    x = u - w @ s.T
    t = np.array([[q[r] @ k[j] for j in range(c)] for r in range(c)])
    p = np.array([[t[r, j] if j <= r else 0.0 for j in range(c)] for r in range(c)])
    return dict(g=g, a=a, bk=bk, bv=bv, w=w, u=u, x=x, t=t, p=p, o=q @ s.T + p @ x,
                s_next=s + x.T @ k)


def test_chunk_forward_intermediates_match_their_definitions():
    rng = np.random.default_rng(9)
    q, k, v, beta, s = draw(rng, batch=(2,), n=5)
    fwd = chunk_forward(q, k, v, beta, s)
    for b in range(2):
        naive = _naive_chunk(q[b], k[b], v[b], beta[b], s[b])
        for name, value in naive.items():
            np.testing.assert_allclose(
                getattr(fwd, name)[b], value, rtol=1e-12, atol=1e-13, err_msg=name
            )


def test_w_with_a_transposed_in_place_of_a_inverse_is_a_different_answer():
    """The known mistake Aᵀ B_K for A⁻¹ B_K gives a value the grader can tell apart."""
    rng = np.random.default_rng(10)
    q, k, v, beta, s = draw(rng, batch=(4,), n=4)
    fwd = chunk_forward(q, k, v, beta, s)
    mistaken = swap(fwd.a) @ fwd.bk
    np.testing.assert_allclose(fwd.a @ fwd.w, fwd.bk, atol=1e-13)  # W really is A⁻¹B_K
    assert np.all(np.abs(mistaken - fwd.w).max(axis=(-2, -1)) > 1e-2)
    assert np.abs(fwd.a @ mistaken - fwd.bk).max() > 1e-2


# -------------------------------------------------------------------- backward


CHUNK_INPUTS = ("q", "k", "v", "beta", "s")


def _chunk_case(seed, batch=(2,), c=4, d_k=3, d_v=2):
    rng = np.random.default_rng(seed)
    q, k, v, beta, s = draw(rng, batch=batch, n=c, d_k=d_k, d_v=d_v)
    d_o = rng.normal(size=batch + (c, d_v))
    d_s_next = rng.normal(size=batch + (d_v, d_k))
    return dict(q=q, k=k, v=v, beta=beta, s=s), d_o, d_s_next


def _chunk_loss(inputs, d_o, d_s_next):
    """L = ⟨Ō, O⟩ + ⟨S̄⁺, S⁺⟩ per batch element, so that ∂L/∂O = Ō and ∂L/∂S⁺ = S̄⁺."""
    fwd = chunk_forward(**inputs)
    return (fwd.o * d_o).sum(axis=(-2, -1)) + (fwd.s_next * d_s_next).sum(axis=(-2, -1))


@pytest.mark.parametrize("name", CHUNK_INPUTS)
def test_chunk_backward_matches_central_finite_differences(name):
    inputs, d_o, d_s_next = _chunk_case(11)
    grads = chunk_backward(chunk_forward(**inputs), d_o, d_s_next)
    analytic = getattr(grads, "d" + name)
    x = inputs[name]
    numeric = np.empty_like(x)
    batch_ndim = 1
    # Batch elements are independent, so one perturbation probes the same entry in all of them.
    for idx in np.ndindex(x.shape[batch_ndim:]):
        at = (slice(None),) + idx
        plus, minus = x.copy(), x.copy()
        plus[at] += FD_STEP
        minus[at] -= FD_STEP
        up = _chunk_loss({**inputs, name: plus}, d_o, d_s_next)
        down = _chunk_loss({**inputs, name: minus}, d_o, d_s_next)
        numeric[at] = (up - down) / (2 * FD_STEP)
    scale = np.abs(analytic).max()
    np.testing.assert_allclose(analytic, numeric, rtol=FD_RTOL, atol=FD_RTOL * scale)


def _torch_chunk(torch, inputs):
    """The chunk in torch with a general solver (so ∂L/∂A is the full matrix, as in the engine)."""
    q, k, v, beta, s = (inputs[n] for n in CHUNK_INPUTS)
    c = k.shape[-2]
    eye = torch.eye(c, dtype=torch.float64)
    m = torch.tril(torch.ones(c, c, dtype=torch.float64))
    named = {}
    named["g"] = k @ k.mT
    named["a"] = eye + torch.tril(beta[..., :, None] * named["g"], -1)
    named["bk"] = beta[..., :, None] * k
    named["bv"] = beta[..., :, None] * v
    named["w"] = torch.linalg.solve(named["a"], named["bk"])
    named["u"] = torch.linalg.solve(named["a"], named["bv"])
    named["x"] = named["u"] - named["w"] @ s.mT
    named["t"] = q @ k.mT
    named["p"] = named["t"] * m
    o = q @ s.mT + named["p"] @ named["x"]
    s_next = s + named["x"].mT @ k
    for value in named.values():
        value.retain_grad()
    return named, o, s_next


def test_chunk_backward_matches_torch_autograd_for_every_named_gradient():
    torch = pytest.importorskip("torch")
    inputs, d_o, d_s_next = _chunk_case(12, batch=(3, 2), c=5, d_k=4, d_v=3)
    grads = chunk_backward(chunk_forward(**inputs), d_o, d_s_next)
    leaves = {n: torch.tensor(x, requires_grad=True) for n, x in inputs.items()}
    named, o, s_next = _torch_chunk(torch, leaves)
    loss = (o * torch.tensor(d_o)).sum() + (s_next * torch.tensor(d_s_next)).sum()
    loss.backward()
    for name, leaf in {**leaves, **named}.items():
        np.testing.assert_allclose(
            getattr(grads, "d" + name), leaf.grad.numpy(), rtol=TORCH_TOL, atol=TORCH_TOL,
            err_msg=name,
        )


def _torch_recurrent(torch, q, k, v, beta, s0):
    s = s0
    outputs = []
    for t in range(k.shape[-2]):
        kt, vt, qt, bt = k[..., t, :], v[..., t, :], q[..., t, :], beta[..., t]
        s = s - bt[..., None, None] * (s @ kt[..., :, None]) @ kt[..., None, :]
        s = s + bt[..., None, None] * vt[..., :, None] * kt[..., None, :]
        outputs.append(s @ qt[..., :, None])
    return torch.cat(outputs, dim=-1).mT, s


@pytest.mark.parametrize("chunk_size", [3, 4])
def test_chunked_backward_matches_torch_autograd_of_the_recurrence(chunk_size):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(13)
    q, k, v, beta, s0 = draw(rng)  # batch (3, 2), 11 tokens: ragged last chunk
    d_out = rng.normal(size=q.shape[:-1] + (v.shape[-1],))
    d_final = rng.normal(size=s0.shape)
    fwd = chunked_forward(q, k, v, beta, chunk_size, s0)
    grads = chunked_backward(fwd, d_out, d_final)

    leaves = [torch.tensor(x, requires_grad=True) for x in (q, k, v, beta, s0)]
    out, final = _torch_recurrent(torch, *leaves)
    ((out * torch.tensor(d_out)).sum() + (final * torch.tensor(d_final)).sum()).backward()
    for mine, leaf in zip((grads.dq, grads.dk, grads.dv, grads.dbeta, grads.ds0), leaves):
        np.testing.assert_allclose(mine, leaf.grad.numpy(), rtol=TORCH_TOL, atol=TORCH_TOL)


def test_chunked_backward_without_a_final_state_gradient_treats_it_as_zero():
    rng = np.random.default_rng(14)
    q, k, v, beta, s0 = draw(rng, n=7)
    d_out = rng.normal(size=q.shape[:-1] + (v.shape[-1],))
    fwd = chunked_forward(q, k, v, beta, 3, s0)
    implicit = chunked_backward(fwd, d_out)
    explicit = chunked_backward(fwd, d_out, np.zeros_like(s0))
    for name in ("dq", "dk", "dv", "dbeta", "ds0"):
        np.testing.assert_array_equal(getattr(implicit, name), getattr(explicit, name))
    assert len(implicit.chunks) == 3


# ------------------------------------------------------------------ properties


shapes = st.fixed_dictionaries(
    dict(
        batch=st.lists(st.integers(1, 3), max_size=2).map(tuple),
        n=st.integers(1, 9),
        d_k=st.integers(1, 4),
        d_v=st.integers(1, 3),
        chunk_size=st.integers(1, 5),
        seed=st.integers(0, 2**32 - 1),
    )
)


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_property_chunked_equals_recurrent_for_any_shape_and_chunk_size(case):
    rng = np.random.default_rng(case["seed"])
    q, k, v, beta, s0 = draw(rng, case["batch"], case["n"], case["d_k"], case["d_v"])
    rec = delta_recurrent(q, k, v, beta, s0)
    chk = chunked_forward(q, k, v, beta, case["chunk_size"], s0)
    assert chk.outputs.shape == rec.outputs.shape == case["batch"] + (case["n"], case["d_v"])
    np.testing.assert_allclose(chk.outputs, rec.outputs, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(chk.final_state, rec.final_state, rtol=1e-11, atol=1e-11)


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_property_whole_sequence_gradient_predicts_a_directional_finite_difference(case):
    rng = np.random.default_rng(case["seed"])
    inputs = draw(rng, case["batch"], case["n"], case["d_k"], case["d_v"])
    direction = [rng.normal(size=x.shape) for x in inputs]
    d_out = rng.normal(size=inputs[0].shape[:-1] + (case["d_v"],))
    d_final = rng.normal(size=inputs[4].shape)
    size = case["chunk_size"]

    def loss(xs):
        fwd = chunked_forward(*xs[:4], size, xs[4])
        return (fwd.outputs * d_out).sum() + (fwd.final_state * d_final).sum()

    grads = chunked_backward(chunked_forward(*inputs[:4], size, inputs[4]), d_out, d_final)
    predicted = sum(
        (g * d).sum()
        for g, d in zip((grads.dq, grads.dk, grads.dv, grads.dbeta, grads.ds0), direction)
    )
    up = loss([x + FD_STEP * d for x, d in zip(inputs, direction)])
    down = loss([x - FD_STEP * d for x, d in zip(inputs, direction)])
    numeric = (up - down) / (2 * FD_STEP)
    assert abs(predicted - numeric) <= 1e-6 * max(1.0, abs(numeric))


@settings(max_examples=30, deadline=None)
@given(shapes)
def test_property_gradients_do_not_depend_on_the_chunk_size(case):
    rng = np.random.default_rng(case["seed"])
    q, k, v, beta, s0 = draw(rng, case["batch"], case["n"], case["d_k"], case["d_v"])
    d_out = rng.normal(size=q.shape[:-1] + (case["d_v"],))
    d_final = rng.normal(size=s0.shape)
    one = chunked_backward(chunked_forward(q, k, v, beta, case["n"], s0), d_out, d_final)
    many = chunked_backward(chunked_forward(q, k, v, beta, case["chunk_size"], s0), d_out, d_final)
    for name in ("dq", "dk", "dv", "dbeta", "ds0"):
        np.testing.assert_allclose(
            getattr(many, name), getattr(one, name), rtol=1e-10, atol=1e-10, err_msg=name
        )


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 3), max_size=2).map(tuple),
    st.integers(1, 8),
    st.integers(1, 3),
    st.integers(0, 2**32 - 1),
)
def test_property_substitution_solves_both_triangular_systems(batch, c, n, seed):
    rng = np.random.default_rng(seed)
    a = np.tril(0.5 * rng.normal(size=batch + (c, c)), -1) + np.eye(c)
    b = rng.normal(size=batch + (c, n))
    y = solve_unit_lower(a, b)
    y_t = solve_unit_lower_transposed(a, b)
    assert y.shape == y_t.shape == b.shape
    np.testing.assert_allclose(a @ y, b, atol=1e-11)
    np.testing.assert_allclose(swap(a) @ y_t, b, atol=1e-11)


def test_chunk_forward_is_a_frozen_record():
    inputs, _, _ = _chunk_case(15)
    fwd = chunk_forward(**inputs)
    assert isinstance(fwd, ChunkForward)
    with pytest.raises(AttributeError):
        fwd.w = None  # type: ignore[misc]
