"""Layer norm, projections and multi-head attention against independent oracles.

Oracles: per-element Python loops, central finite differences, and torch autograd
(skipped when torch is not installed).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkvquiz.engine.layernorm import (
    EPS_DEFAULT,
    layer_norm,
    layer_norm_backward,
    residual_layer_norm,
    residual_layer_norm_backward,
)
from qkvquiz.engine.multihead import (
    merge_heads,
    multihead_attention,
    multihead_attention_backward,
    split_heads,
)
from qkvquiz.engine.projection import linear, linear_backward, matvec, matvec_backward

from ..helpers import finite_difference

TOL = 1e-10  # rtol = atol against torch autograd
FD_TOL = 1e-8

BATCH = (2, 3)


def rng(seed):
    return np.random.default_rng(seed)


def close(a, b, tol=TOL):
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


# ================================================================ layer norm


def naive_layer_norm(x, gamma, beta, eps):
    """Row by row with math.fsum / math.sqrt; gamma, beta are (..., d) per batch element."""
    batch, (n, d) = x.shape[:-2], x.shape[-2:]
    gamma = np.broadcast_to(gamma, batch + (d,))
    beta = np.broadcast_to(beta, batch + (d,))
    y = np.empty_like(x)
    for b in np.ndindex(*batch):
        for i in range(n):
            row = [float(x[b + (i, c)]) for c in range(d)]
            mu = math.fsum(row) / d
            var = math.fsum((r - mu) ** 2 for r in row) / d
            for c in range(d):
                xhat = (row[c] - mu) / math.sqrt(var + eps)
                y[b + (i, c)] = gamma[b + (c,)] * xhat + beta[b + (c,)]
    return y


def ln_inputs(seed, batch=BATCH, n=4, d=5):
    r = rng(seed)
    x = r.normal(size=batch + (n, d)) * 2.0 + 0.5
    gamma, beta = r.normal(size=batch + (d,)), r.normal(size=batch + (d,))
    return x, gamma, beta, r.normal(size=batch + (n, d))


@pytest.mark.parametrize("eps", [EPS_DEFAULT, 0.5])
def test_layer_norm_forward_matches_loop(eps):
    x, gamma, beta, _ = ln_inputs(1)
    fwd = layer_norm(x, gamma, beta, eps, xp=np)
    close(fwd.y, naive_layer_norm(x, gamma, beta, eps), 1e-13)
    # Named intermediates: biased variance and ε inside the root.
    close(fwd.mean[..., 0], x.mean(axis=-1), 1e-14)
    close(fwd.var[..., 0], x.var(axis=-1, ddof=0), 1e-13)
    close(fwd.rstd, 1.0 / np.sqrt(fwd.var + eps), 1e-14)
    close(fwd.xhat, (x - fwd.mean) * fwd.rstd, 1e-14)


def test_layer_norm_shares_one_gamma_across_the_batch():
    x, _, _, _ = ln_inputs(2)
    gamma, beta = rng(3).normal(size=5), rng(4).normal(size=5)
    close(layer_norm(x, gamma, beta, xp=np).y, naive_layer_norm(x, gamma, beta, EPS_DEFAULT), 1e-13)


def test_layer_norm_rejects_a_bare_vector():
    with pytest.raises(ValueError, match=r"\(1, d\)"):
        layer_norm(np.ones(3), np.ones(3), np.zeros(3), xp=np)


def test_layer_norm_backward_matches_finite_differences():
    x, gamma, beta, dy = ln_inputs(5)
    grads = layer_norm_backward(layer_norm(x, gamma, beta, xp=np), dy, xp=np)

    def loss():
        return float(np.sum(dy * layer_norm(x, gamma, beta, xp=np).y))

    close(grads.dx, finite_difference(loss, x), FD_TOL)
    close(grads.dgamma, finite_difference(loss, gamma), FD_TOL)
    close(grads.dbeta, finite_difference(loss, beta), FD_TOL)
    assert grads.dgamma.shape == BATCH + (5,)


def test_layer_norm_backward_matches_torch_for_one_worksheet_variant():
    torch = pytest.importorskip("torch")
    x, gamma, beta, dy = (a[0, 0] for a in ln_inputs(6))  # (n, d) and (d,)
    grads = layer_norm_backward(layer_norm(x, gamma, beta, xp=np), dy, xp=np)
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    ty = torch.nn.functional.layer_norm(tx, (x.shape[-1],), weight=tg, bias=tb, eps=EPS_DEFAULT)
    ty.backward(torch.tensor(dy))
    close(layer_norm(x, gamma, beta, xp=np).y, ty.detach().numpy())
    close(grads.dx, tx.grad.numpy())
    close(grads.dgamma, tg.grad.numpy())
    close(grads.dbeta, tb.grad.numpy())


def test_layer_norm_backward_matches_torch_batched_per_variant_gamma():
    torch = pytest.importorskip("torch")
    x, gamma, beta, dy = ln_inputs(7)
    grads = layer_norm_backward(layer_norm(x, gamma, beta, 0.01, xp=np), dy, xp=np)
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    normed = torch.nn.functional.layer_norm(tx, (x.shape[-1],), eps=0.01)
    ty = normed * tg[..., None, :] + tb[..., None, :]
    ty.backward(torch.tensor(dy))
    close(grads.dx, tx.grad.numpy())
    close(grads.dgamma, tg.grad.numpy())
    close(grads.dbeta, tb.grad.numpy())


def test_shared_gamma_gradient_is_the_sum_of_per_variant_gradients():
    torch = pytest.importorskip("torch")
    x, _, _, dy = ln_inputs(8)
    gamma, beta = rng(9).normal(size=5), rng(10).normal(size=5)
    grads = layer_norm_backward(layer_norm(x, gamma, beta, xp=np), dy, xp=np)
    assert grads.dgamma.shape == BATCH + (5,)
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, gamma, beta))
    ty = torch.nn.functional.layer_norm(tx, (5,), weight=tg, bias=tb, eps=EPS_DEFAULT)
    ty.backward(torch.tensor(dy))
    close(grads.dx, tx.grad.numpy())
    close(grads.dgamma.sum(axis=(0, 1)), tg.grad.numpy())
    close(grads.dbeta.sum(axis=(0, 1)), tb.grad.numpy())


def test_zero_variance_row_gives_beta_and_rstd_one_over_sqrt_eps():
    x, gamma, beta, dy = ln_inputs(11)
    x[0, 1, 2, :] = 3.25  # a constant row
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        fwd = layer_norm(x, gamma, beta, xp=np)
        grads = layer_norm_backward(fwd, dy, xp=np)
    assert fwd.var[0, 1, 2, 0] == 0.0
    assert fwd.rstd[0, 1, 2, 0] == pytest.approx(1.0 / math.sqrt(EPS_DEFAULT), rel=1e-15)
    np.testing.assert_array_equal(fwd.xhat[0, 1, 2], 0.0)
    np.testing.assert_array_equal(fwd.y[0, 1, 2], beta[0, 1])
    # With x̂ = 0 the row's gradient reduces to rstd·(∇x̂ − mean(∇x̂)).
    dxhat = dy[0, 1, 2] * gamma[0, 1]
    close(grads.dx[0, 1, 2], (dxhat - dxhat.mean()) / math.sqrt(EPS_DEFAULT), 1e-12)


def test_zero_variance_row_backward_matches_torch_and_finite_differences():
    torch = pytest.importorskip("torch")
    x = np.array([[1.0, 1.0, 1.0, 1.0], [0.5, -1.0, 2.0, 0.0]])
    gamma, beta = np.array([1.5, -0.5, 2.0, 1.0]), np.array([0.1, 0.2, 0.3, 0.4])
    dy = np.array([[0.3, -1.2, 0.7, 2.0], [1.0, 0.5, -0.5, 0.25]])
    grads = layer_norm_backward(layer_norm(x, gamma, beta, xp=np), dy, xp=np)
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.layer_norm(
        tx, (4,), weight=torch.tensor(gamma), bias=torch.tensor(beta), eps=EPS_DEFAULT
    ).backward(torch.tensor(dy))
    close(grads.dx, tx.grad.numpy())
    # Near σ² = 0 the curvature scales with 1/√ε: difference with a larger ε and a small step.
    eps = 1e-2
    g = layer_norm_backward(layer_norm(x, gamma, beta, eps, xp=np), dy, xp=np)
    fd = finite_difference(
        lambda: float(np.sum(dy * layer_norm(x, gamma, beta, eps, xp=np).y)), x, h=1e-6
    )
    close(g.dx, fd, 1e-7)


def test_residual_layer_norm_is_layer_norm_of_the_sum():
    x, gamma, beta, _ = ln_inputs(12)
    z = rng(13).normal(size=x.shape)
    fwd = residual_layer_norm(x, z, gamma, beta, EPS_DEFAULT, xp=np)
    close(fwd.residual, x + z, 0.0)
    close(fwd.y, naive_layer_norm(x + z, gamma, beta, EPS_DEFAULT), 1e-13)


def test_residual_layer_norm_backward_matches_torch():
    torch = pytest.importorskip("torch")
    x, gamma, beta, dy = (a[0] for a in ln_inputs(14))  # batch (3,)
    z = rng(15).normal(size=x.shape)
    grads = residual_layer_norm_backward(residual_layer_norm(x, z, gamma, beta, xp=np), dy, xp=np)
    tx, tz, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x, z, gamma, beta))
    normed = torch.nn.functional.layer_norm(tx + tz, (5,), eps=EPS_DEFAULT)
    ty = normed * tg[..., None, :] + tb[..., None, :]
    ty.backward(torch.tensor(dy))
    close(grads.dx, tx.grad.numpy())
    close(grads.dz, tz.grad.numpy())
    close(grads.dresidual, tx.grad.numpy())
    close(grads.dgamma, tg.grad.numpy())
    close(grads.dbeta, tb.grad.numpy())


# ================================================================ projections


def naive_matmul(a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])
    out = np.zeros(batch + (a.shape[-2], b.shape[-1]))
    for idx in np.ndindex(*out.shape):
        *lead, i, j = idx
        out[idx] = math.fsum(a[(*lead, i, t)] * b[(*lead, t, j)] for t in range(a.shape[-1]))
    return out


def test_linear_forward_matches_loop_for_batched_and_shared_weights():
    x = rng(20).normal(size=BATCH + (4, 3))
    w = rng(21).normal(size=BATCH + (3, 2))
    close(linear(x, w, xp=np), naive_matmul(x, w), 1e-14)
    close(linear(x, w[0, 0], xp=np), naive_matmul(x, w[0, 0]), 1e-14)


def test_linear_backward_matches_finite_differences():
    x = rng(22).normal(size=BATCH + (4, 3))
    w = rng(23).normal(size=BATCH + (3, 2))
    dy = rng(24).normal(size=BATCH + (4, 2))
    g = linear_backward(x, w, dy, xp=np)

    def loss():
        return float(np.sum(dy * linear(x, w, xp=np)))

    close(g.dx, finite_difference(loss, x), FD_TOL)
    close(g.dw, finite_difference(loss, w), FD_TOL)


def test_linear_backward_matches_torch():
    torch = pytest.importorskip("torch")
    x = rng(25).normal(size=BATCH + (4, 3))
    w = rng(26).normal(size=(3, 2))  # shared: per-variant gradients sum to torch's
    dy = rng(27).normal(size=BATCH + (4, 2))
    g = linear_backward(x, w, dy, xp=np)
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (tx @ tw).backward(torch.tensor(dy))
    close(g.dx, tx.grad.numpy())
    assert g.dw.shape == BATCH + (3, 2)
    close(g.dw.sum(axis=(0, 1)), tw.grad.numpy())


def test_matvec_is_w_times_a_column_vector():
    w = rng(28).normal(size=BATCH + (2, 3))
    x = rng(29).normal(size=BATCH + (3,))
    close(matvec(w, x, xp=np), naive_matmul(w, x[..., None])[..., 0], 1e-14)


def matvec_inputs():
    return (
        rng(30).normal(size=BATCH + (2, 3)),
        rng(31).normal(size=BATCH + (3,)),
        rng(32).normal(size=BATCH + (2,)),
    )


def test_matvec_backward_matches_finite_differences():
    w, x, dq = matvec_inputs()
    g = matvec_backward(w, x, dq, xp=np)

    def loss():
        return float(np.sum(dq * matvec(w, x, xp=np)))

    close(g.dw, finite_difference(loss, w), FD_TOL)
    close(g.dx, finite_difference(loss, x), FD_TOL)


def test_matvec_backward_matches_torch():
    torch = pytest.importorskip("torch")
    w, x, dq = matvec_inputs()
    g = matvec_backward(w, x, dq, xp=np)
    tw, tx = torch.tensor(w, requires_grad=True), torch.tensor(x, requires_grad=True)
    (tw @ tx[..., None])[..., 0].backward(torch.tensor(dq))
    close(g.dw, tw.grad.numpy())
    close(g.dx, tx.grad.numpy())


# ================================================================ multi-head attention

N, D_MODEL, H = 4, 6, 2
D_K = D_MODEL // H


def naive_multihead(x, w_q, w_k, w_v, w_o, h, allowed=None):
    """One batch element and one head at a time, columns sliced by hand, softmax written out."""
    batch, n = x.shape[:-2], x.shape[-2]
    shape = batch + (n, n)
    ok = np.ones(shape, bool) if allowed is None else np.broadcast_to(allowed, shape)
    ws = [np.broadcast_to(w, batch + w.shape[-2:]) for w in (w_q, w_k, w_v, w_o)]
    d_k, d_v = w_q.shape[-1] // h, w_v.shape[-1] // h
    y = np.zeros(batch + (n, w_o.shape[-1]))
    weights = np.zeros(batch + (h, n, n))
    for b in np.ndindex(*batch):
        q, k, v = (x[b] @ w[b] for w in ws[:3])
        heads = []
        for i in range(h):
            qi, ki = q[:, i * d_k : (i + 1) * d_k], k[:, i * d_k : (i + 1) * d_k]
            vi = v[:, i * d_v : (i + 1) * d_v]
            s = qi @ ki.T / math.sqrt(d_k)
            a = np.zeros((n, n))
            for r in range(n):
                kept = ok[b][r]
                if kept.any():
                    e = np.exp(s[r, kept] - s[r, kept].max())
                    a[r, kept] = e / e.sum()
            weights[b + (i,)] = a
            heads.append(a @ vi)
        y[b] = np.concatenate(heads, axis=1) @ ws[3][b]
    return y, weights


def mh_inputs(seed, batch=BATCH, shared=False):
    r = rng(seed)
    wb = () if shared else batch
    x = r.normal(size=batch + (N, D_MODEL))
    ws = [r.normal(size=wb + (D_MODEL, D_MODEL)) / math.sqrt(D_MODEL) for _ in range(4)]
    return x, ws, r.normal(size=batch + (N, D_MODEL))


def test_split_heads_takes_contiguous_column_blocks_and_merge_inverts_it():
    x = rng(40).normal(size=BATCH + (N, D_MODEL))
    parts = split_heads(x, H, xp=np)
    assert parts.shape == BATCH + (H, N, D_K)
    for i in range(H):
        np.testing.assert_array_equal(parts[..., i, :, :], x[..., i * D_K : (i + 1) * D_K])
    np.testing.assert_array_equal(merge_heads(parts, xp=np), x)


def test_split_heads_rejects_uneven_heads():
    with pytest.raises(ValueError, match="4 equal heads"):
        split_heads(np.zeros((3, 6)), 4, xp=np)


@pytest.mark.parametrize("mask", ["none", "causal", "per-variant"])
def test_multihead_forward_matches_per_head_loop(mask):
    x, ws, _ = mh_inputs(41)
    allowed = {
        "none": None,
        "causal": np.tril(np.ones((N, N), bool)),
        "per-variant": rng(42).random(BATCH + (N, N)) < 0.6,
    }[mask]
    fwd = multihead_attention(x, *ws, H, allowed, xp=np)
    y, weights = naive_multihead(x, *ws, H, allowed)
    close(fwd.y, y, 1e-13)
    close(fwd.attention.weights, weights, 1e-13)
    assert fwd.qh.shape == BATCH + (H, N, D_K)
    close(fwd.q, x @ ws[0], 1e-14)
    close(fwd.z_cat @ ws[3], fwd.y, 1e-14)


def test_multihead_backward_matches_finite_differences():
    x, ws, dy = mh_inputs(43, batch=(2,))
    allowed = np.tril(np.ones((N, N), bool))
    g = multihead_attention_backward(multihead_attention(x, *ws, H, allowed, xp=np), dy, xp=np)

    def loss():
        return float(np.sum(dy * multihead_attention(x, *ws, H, allowed, xp=np).y))

    close(g.dx, finite_difference(loss, x), FD_TOL)
    for got, w in zip((g.dw_q, g.dw_k, g.dw_v, g.dw_o), ws):
        close(got, finite_difference(loss, w), FD_TOL)


def torch_multihead(torch, x, ws, h, allowed, dy):
    """The block in torch: heads by view/transpose, attention by sdpa with a boolean mask."""
    F = torch.nn.functional
    tx = torch.tensor(x, requires_grad=True)
    tws = [torch.tensor(w, requires_grad=True) for w in ws]

    def heads(t):
        return t.unflatten(-1, (h, t.shape[-1] // h)).transpose(-2, -3)

    q, k, v = (heads(tx @ w) for w in tws[:3])
    mask = None if allowed is None else torch.tensor(allowed)[..., None, :, :]
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    y = z.transpose(-2, -3).flatten(-2) @ tws[3]
    y.backward(torch.tensor(dy))
    return y, tx, tws


@pytest.mark.parametrize("mask", ["none", "causal", "per-variant"])
@pytest.mark.parametrize("shared", [False, True])
def test_multihead_backward_matches_torch_autograd(mask, shared):
    torch = pytest.importorskip("torch")
    x, ws, dy = mh_inputs(44, shared=shared)
    allowed = {
        "none": None,
        "causal": np.tril(np.ones((N, N), bool)),
        # includes a fully masked query row, which must give zeros, not NaN
        "per-variant": (rng(45).random(BATCH + (N, N)) < 0.6) & (np.arange(N)[:, None] != 1),
    }[mask]
    fwd = multihead_attention(x, *ws, H, allowed, xp=np)
    g = multihead_attention_backward(fwd, dy, xp=np)
    ty, tx, tws = torch_multihead(torch, x, ws, H, allowed, dy)
    close(fwd.y, ty.detach().numpy())
    close(g.dx, tx.grad.numpy())
    for got, tw in zip((g.dw_q, g.dw_k, g.dw_v, g.dw_o), tws):
        close(got.sum(axis=(0, 1)) if shared else got, tw.grad.numpy())
