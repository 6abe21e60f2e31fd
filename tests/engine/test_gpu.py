"""CuPy on a GPU gives the NumPy results, to 1e-12, for every engine function and the fused kernel.

Skipped cleanly where CuPy is not installed or no CUDA device is visible. The NumPy results
are the oracle here: they are checked against loops, finite differences and torch elsewhere.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from qkvquiz.engine import attention as att
from qkvquiz.engine import delta, layernorm, multihead, projection
from qkvquiz.engine.backend import BackendUnavailable, get_xp, to_numpy
from benchmarks.kernels.batching import batched
from benchmarks.kernels.fused import causal_attention_fwd_bwd
from benchmarks.kernels.fused_delta import delta_chunk_fwd_bwd
from qkvquiz.engine.masks import causal_allowed, padding_allowed
from qkvquiz.families import REGISTRY
from qkvquiz.core.seeding import Draw

pytestmark = pytest.mark.gpu

TOL = 1e-12


@pytest.fixture(scope="module")
def cp():
    pytest.importorskip("cupy")
    try:
        return get_xp("cupy")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


def rand(*shape, seed=0):
    return np.random.default_rng(seed + 97 * len(shape)).standard_normal(shape)


def dev(cp, *arrays):
    return tuple(cp.asarray(a) for a in arrays)


def assert_same(on_device, on_host, where="result"):
    """Every array inside (dataclasses and tuples included) equal to 1e-12; other fields equal."""
    if dataclasses.is_dataclass(on_host):
        for f in dataclasses.fields(on_host):
            assert_same(getattr(on_device, f.name), getattr(on_host, f.name), f"{where}.{f.name}")
    elif isinstance(on_host, (tuple, list)):
        assert len(on_device) == len(on_host), where
        for i, (a, b) in enumerate(zip(on_device, on_host)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(on_host, np.ndarray):
        got = to_numpy(on_device)
        assert type(on_device) is not np.ndarray, f"{where} came back as NumPy, not computed on the device"
        assert got.shape == on_host.shape and got.dtype == on_host.dtype, where
        np.testing.assert_allclose(got, on_host, rtol=TOL, atol=TOL, err_msg=where)  # ±∞ must match too
    else:
        assert on_device == on_host, where


# ------------------------------------------------------------------------ attention


@pytest.mark.parametrize("mask", ["none", "causal", "padding", "random"])
def test_attention_forward_and_backward(cp, mask):
    batch, n = (5, 3), 4
    q, k, v, dz = rand(*batch, n, 3), rand(*batch, n, 3, seed=1), rand(*batch, n, 2), rand(*batch, n, 2, seed=2)
    allowed = {
        "none": None,
        "causal": causal_allowed(n),
        "padding": padding_allowed(n, n, 1),
        "random": rand(*batch, n, n, seed=3) > 0.3,
    }[mask]
    host = att.attention(q, k, v, allowed)
    device = att.attention(*dev(cp, q, k, v), None if allowed is None else cp.asarray(allowed), xp=cp)
    assert_same(device.output, host.output)
    assert_same(device.scores, host.scores)
    assert_same(device.weights, host.weights)
    assert_same(att.attention_backward(device, cp.asarray(dz), xp=cp), att.attention_backward(host, dz))


def test_softmax_of_a_fully_masked_row_is_zero(cp):
    s = np.array([[-np.inf, -np.inf], [1.0, 2.0]])
    assert_same(att.softmax(cp.asarray(s), xp=cp), att.softmax(s))
    assert_same(att.softmax(cp.asarray(s), axis=-2, xp=cp), att.softmax(s, axis=-2))


# ------------------------------------------------------------------------ delta rule


def delta_inputs(batch=(4,), t=6, d_k=3, d_v=2):
    q, k, v = rand(*batch, t, d_k), rand(*batch, t, d_k, seed=1), rand(*batch, t, d_v, seed=2)
    beta = np.random.default_rng(3).uniform(0.1, 0.9, (*batch, t))
    return q, k, v, beta


def test_triangular_solves(cp):
    a = np.tril(rand(3, 4, 4), -1) + np.eye(4)
    b = rand(3, 4, 2, seed=5)
    assert_same(delta.solve_unit_lower(*dev(cp, a, b), xp=cp), delta.solve_unit_lower(a, b))
    assert_same(delta.solve_unit_lower_transposed(*dev(cp, a, b), xp=cp), delta.solve_unit_lower_transposed(a, b))


def test_delta_recurrent(cp):
    q, k, v, beta = delta_inputs()
    assert_same(delta.delta_recurrent(*dev(cp, q, k, v, beta), xp=cp), delta.delta_recurrent(q, k, v, beta))


def test_delta_chunk_forward_and_backward(cp):
    q, k, v, beta = delta_inputs(t=4)
    s = rand(4, 2, 3, seed=6)
    d_o, d_s = rand(4, 4, 2, seed=7), rand(4, 2, 3, seed=8)
    host = delta.chunk_forward(q, k, v, beta, s)
    device = delta.chunk_forward(*dev(cp, q, k, v, beta, s), xp=cp)
    assert_same(device, host)
    assert_same(delta.chunk_backward(device, *dev(cp, d_o, d_s), xp=cp), delta.chunk_backward(host, d_o, d_s))


def test_delta_chunked_sequence(cp):
    q, k, v, beta = delta_inputs(t=7)
    d_out = rand(4, 7, 2, seed=9)
    host = delta.chunked_forward(q, k, v, beta, 3)
    device = delta.chunked_forward(*dev(cp, q, k, v, beta), 3, xp=cp)
    assert_same(device, host)
    assert_same(delta.chunked_backward(device, cp.asarray(d_out), xp=cp), delta.chunked_backward(host, d_out))


# ------------------------------------------------------- layer norm, projections, heads


def test_layer_norm_and_residual(cp):
    x, z, dy = rand(3, 4, 5), rand(3, 4, 5, seed=1), rand(3, 4, 5, seed=2)
    gamma, beta = rand(5, seed=3), rand(5, seed=4)
    host = layernorm.layer_norm(x, gamma, beta)
    device = layernorm.layer_norm(*dev(cp, x, gamma, beta), xp=cp)
    assert_same(device, host)
    assert_same(layernorm.layer_norm_backward(device, cp.asarray(dy), xp=cp), layernorm.layer_norm_backward(host, dy))
    host_r = layernorm.residual_layer_norm(x, z, gamma, beta)
    device_r = layernorm.residual_layer_norm(*dev(cp, x, z, gamma, beta), xp=cp)
    assert_same(device_r, host_r)
    assert_same(layernorm.residual_layer_norm_backward(device_r, cp.asarray(dy), xp=cp),
                layernorm.residual_layer_norm_backward(host_r, dy))


def test_projections(cp):
    x, w, dy = rand(3, 4, 5), rand(3, 5, 2, seed=1), rand(3, 4, 2, seed=2)
    assert_same(projection.linear(*dev(cp, x, w), xp=cp), projection.linear(x, w))
    assert_same(projection.linear_backward(*dev(cp, x, w, dy), xp=cp), projection.linear_backward(x, w, dy))
    m, vec, dq = rand(3, 2, 5, seed=3), rand(3, 5, seed=4), rand(3, 2, seed=5)
    assert_same(projection.matvec(*dev(cp, m, vec), xp=cp), projection.matvec(m, vec))
    assert_same(projection.matvec_backward(*dev(cp, m, vec, dq), xp=cp), projection.matvec_backward(m, vec, dq))


def test_multihead_attention(cp):
    x = rand(2, 4, 6)
    wq, wk, wv, wo = (rand(6, 6, seed=s) for s in (1, 2, 3, 4))
    dy = rand(2, 4, 6, seed=5)
    allowed = causal_allowed(4)
    host = multihead.multihead_attention(x, wq, wk, wv, wo, 2, allowed)
    device = multihead.multihead_attention(*dev(cp, x, wq, wk, wv, wo), 2, cp.asarray(allowed), xp=cp)
    assert_same(device, host)
    assert_same(multihead.multihead_attention_backward(device, cp.asarray(dy), xp=cp),
                multihead.multihead_attention_backward(host, dy))


# --------------------------------------------------------------------- fused kernel


@pytest.mark.parametrize("batch, n, d_k, d_v", [((10_001,), 4, 4, 4), ((3, 5), 3, 2, 5), ((7,), 1, 3, 2)])
def test_fused_kernel_equals_the_numpy_engine(cp, batch, n, d_k, d_v):
    q, k, v, dz = rand(*batch, n, d_k), rand(*batch, n, d_k, seed=1), rand(*batch, n, d_v), rand(*batch, n, d_v, seed=2)
    fwd = att.attention(q, k, v, causal_allowed(n))
    grads = att.attention_backward(fwd, dz)
    got = causal_attention_fwd_bwd(*dev(cp, q, k, v, dz), xp=cp)
    assert_same((got.output, got.dq, got.dk, got.dv), (fwd.output, grads.dq, grads.dk, grads.dv))
    # The NumPy fused path agrees as well: both are the same function.
    host = causal_attention_fwd_bwd(q, k, v, dz)
    assert_same((got.output, got.dq, got.dk, got.dv), (host.output, host.dq, host.dk, host.dv))


def test_fused_kernel_on_large_scores_stays_finite(cp):
    q, k = rand(64, 4, 4) * 40, rand(64, 4, 4, seed=1) * 40
    v, dz = rand(64, 4, 4, seed=2), rand(64, 4, 4, seed=3)
    got = causal_attention_fwd_bwd(*dev(cp, q, k, v, dz), xp=cp)
    host = causal_attention_fwd_bwd(q, k, v, dz)
    for a, b in zip((got.output, got.dq, got.dk, got.dv), (host.output, host.dq, host.dk, host.dv)):
        assert np.isfinite(to_numpy(a)).all()
        np.testing.assert_allclose(to_numpy(a), b, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("batch, c, d_k, d_v", [((10_001,), 4, 4, 4), ((3, 5), 3, 2, 5), ((7,), 1, 3, 2)])
def test_fused_delta_kernel_equals_the_numpy_engine(cp, batch, c, d_k, d_v):
    q, k, v = rand(*batch, c, d_k), rand(*batch, c, d_k, seed=1), rand(*batch, c, d_v, seed=2)
    beta = np.random.default_rng(3).uniform(0.1, 0.9, (*batch, c))
    s, d_o, d_s = rand(*batch, d_v, d_k, seed=4), rand(*batch, c, d_v, seed=5), rand(*batch, d_v, d_k, seed=6)
    fwd = delta.chunk_forward(q, k, v, beta, s)
    g = delta.chunk_backward(fwd, d_o, d_s)
    got = delta_chunk_fwd_bwd(*dev(cp, q, k, v, beta, s, d_o, d_s), xp=cp)
    names = ("o", "s_next", "dq", "dk", "dv", "dbeta", "ds")
    assert_same(tuple(getattr(got, n) for n in names), (fwd.o, fwd.s_next, g.dq, g.dk, g.dv, g.dbeta, g.ds))


def test_batched_on_the_device_returns_host_arrays(cp):
    q, k, v, dz = (rand(1000, 4, 4, seed=s) for s in range(4))

    def fused(*xs):
        r = causal_attention_fwd_bwd(*xs, xp=cp)
        return r.output, r.dq

    z, dq = batched(fused, [q, k, v, dz], chunk=300, xp=cp)
    host = causal_attention_fwd_bwd(q, k, v, dz)
    assert type(z) is np.ndarray
    np.testing.assert_allclose(z, host.output, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(dq, host.dq, rtol=TOL, atol=TOL)


# ------------------------------------------------------------------------ families


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_family_solves_the_same_on_the_device(cp, name):
    family = REGISTRY[name]
    params = family.resolve()
    keys = np.arange(1, 65, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    host_givens = family.sample(Draw(keys), params)
    device_givens = family.sample(Draw(keys, cp), params)
    host = family.solve(host_givens, params)
    device = family.solve(device_givens, params, cp)
    for step in host:
        assert_same(device[step], np.asarray(host[step]), f"{name}.{step}")
    for m in family.misconceptions:
        if m.applies_to(params):
            assert_same(m.fn(device, params, cp), np.asarray(m.fn(host, params, np)), f"{name}:{m.name}")
    if family.accept is not None:
        np.testing.assert_array_equal(to_numpy(family.accept(device, params, cp)), family.accept(host, params, np))
