"""Backprop forms a teacher writes: attention's backward pass and the scores' gradients with
queries and keys counted apart (cross-attention, one query and one key) and any scale.

Each form is checked against independent oracles: per-entry loops, central finite
differences, and torch autograd (scaled_dot_product_attention with its ``scale``) where
installed; every known mistake that applies must be told apart from the right answer.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkvquiz.families import get_family
from qkvquiz.render.markdown import key_markdown

from ..helpers import ROSTER, fd_grad, solved, total


def loop_softmax(s):
    out = np.zeros_like(s)
    for i, row in enumerate(s):
        keep = [j for j, x in enumerate(row) if math.isfinite(x)]
        top = max(row[j] for j in keep)
        total_ = sum(math.exp(row[j] - top) for j in keep)
        for j in keep:
            out[i, j] = math.exp(row[j] - top) / total_
    return out


# --------------------------------------------------------------------------- backprop.attention, cross shapes


ALL_STEPS = ["scores", "weights", "output", "dV", "dA", "dS", "dQ", "dK"]


# (params, the factor the raw dot products are multiplied by, given Q's width d)
CROSS_BACKPROP = [
    ({"queries": 1, "keys": 3}, lambda d: 1 / math.sqrt(d)),
    ({"queries": 3, "keys": 2}, lambda d: 1 / math.sqrt(d)),
    ({"queries": 2, "keys": 3, "scale": "none"}, lambda d: 1.0),
    ({"queries": 3, "keys": 3, "scale": 0.5, "mask": "causal"}, lambda d: 0.5),
    ({"queries": 2, "keys": 4, "d_k": 2, "stated_d_k": 16, "mask": "random"}, lambda d: 0.25),
    ({"queries": 2, "keys": 4, "mask": "padding", "padded": 1, "scale": 0.25}, lambda d: 0.25),
    ({"queries": 2, "keys": 2, "scale": "none"}, lambda d: 1.0),
]


CROSS_IDS = [str(p) for p, _ in CROSS_BACKPROP]


# One query against one key: ∇S = 0, so ∇Q = ∇K = 0; asking both would ask the same numbers.
ONE_EACH = ({"queries": 1, "keys": 1}, ["scores", "weights", "output", "dV", "dA", "dS", "dQ"])


def loop_layer(q, k, v, mask, dz, c):
    """Forward and backward of one attention layer with explicit loops over entries."""
    n, m, d_k, d_v = q.shape[0], k.shape[0], q.shape[1], v.shape[1]
    s = np.array([[c * sum(q[i, t] * k[j, t] for t in range(d_k)) if mask[i, j] > 0.5 else -math.inf
                   for j in range(m)] for i in range(n)])
    a = loop_softmax(s)
    z = np.array([[sum(a[i, j] * v[j, t] for j in range(m)) for t in range(d_v)] for i in range(n)])
    dv = np.array([[sum(a[i, j] * dz[i, t] for i in range(n)) for t in range(d_v)] for j in range(m)])
    da = np.array([[sum(dz[i, t] * v[j, t] for t in range(d_v)) for j in range(m)] for i in range(n)])
    ds = np.array([[a[i, j] * (da[i, j] - sum(da[i, l] * a[i, l] for l in range(m))) for j in range(m)]
                   for i in range(n)])
    dq = np.array([[c * sum(ds[i, j] * k[j, t] for j in range(m)) for t in range(d_k)] for i in range(n)])
    dk = np.array([[c * sum(ds[i, j] * q[i, t] for i in range(n)) for t in range(d_k)] for j in range(m)])
    return {"scores": s, "weights": a, "output": z, "dV": dv, "dA": da, "dS": ds, "dQ": dq, "dK": dk}


def _case(params, factor, ask=None):
    _, env, item = solved("backprop.attention", params, ask=ask or ALL_STEPS)
    return env, item, factor(env["Q"].shape[-1])


@pytest.mark.parametrize("params, factor", CROSS_BACKPROP, ids=CROSS_IDS)
def test_backprop_attention_cross_forms_match_loops(params, factor):
    env, item, c = _case(params, factor)
    n, m = env["Q"].shape[-2], env["K"].shape[-2]
    assert (n, m) == (params.get("queries"), params.get("keys"))
    assert env["dZ"].shape[-2] == n and env["V"].shape[-2] == m and env["mask"].shape[-2:] == (n, m)
    for b in range(len(ROSTER)):
        want = loop_layer(env["Q"][b], env["K"][b], env["V"][b], env["mask"][b], env["dZ"][b], c)
        for step, value in want.items():
            np.testing.assert_allclose(env[step][b], value, rtol=1e-12, atol=1e-13, err_msg=step)


def test_backprop_attention_one_query_one_key():
    env, _, c = _case(ONE_EACH[0], lambda d: 1 / math.sqrt(d), ONE_EACH[1])
    assert env["Q"].shape[-2:] == (1, env["Q"].shape[-1]) and (env["weights"] == 1).all()
    np.testing.assert_array_equal(env["dS"], 0)  # the softmax of one score is 1 whatever the score
    np.testing.assert_array_equal(env["dQ"], 0)
    np.testing.assert_allclose(env["dV"], env["dZ"], atol=0)  # A = 1: ∇V = ∇Z
    for b in range(len(ROSTER)):
        want = loop_layer(env["Q"][b], env["K"][b], env["V"][b], env["mask"][b], env["dZ"][b], c)
        for step in ONE_EACH[1]:
            np.testing.assert_allclose(env[step][b], want[step], rtol=1e-12, atol=1e-13, err_msg=step)


@pytest.mark.parametrize("params, factor", CROSS_BACKPROP, ids=CROSS_IDS)
def test_backprop_attention_cross_forms_match_finite_differences(params, factor):
    env, _, c = _case(params, factor)
    allowed = env["mask"] > 0.5

    def z_of(q, k, v):
        s = np.where(allowed, q @ np.swapaxes(k, -1, -2) * c, -np.inf)
        e = np.where(allowed, np.exp(s - np.max(np.where(allowed, s, -1e300), axis=-1, keepdims=True)), 0.0)
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    dz = env["dZ"]
    for step, x, f in (("dQ", env["Q"], lambda q: z_of(q, env["K"], env["V"])),
                       ("dK", env["K"], lambda k: z_of(env["Q"], k, env["V"])),
                       ("dV", env["V"], lambda v: z_of(env["Q"], env["K"], v))):
        np.testing.assert_allclose(env[step], fd_grad(lambda y: total(dz, f(y)), x), rtol=1e-7, atol=1e-8,
                                   err_msg=step)


@pytest.mark.parametrize("params, factor", CROSS_BACKPROP + [(ONE_EACH[0], lambda d: 1 / math.sqrt(d))],
                         ids=CROSS_IDS + ["one each"])
def test_backprop_attention_cross_forms_match_torch_autograd(params, factor):
    torch = pytest.importorskip("torch")
    env, _, c = _case(params, factor, ONE_EACH[1] if params == ONE_EACH[0] else None)
    q, k, v = (torch.tensor(env[x], requires_grad=True) for x in ("Q", "K", "V"))
    allowed = torch.tensor(env["mask"] > 0.5)
    z = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=c)
    z.backward(torch.tensor(env["dZ"]))
    np.testing.assert_allclose(env["output"], z.detach().numpy(), rtol=1e-10, atol=1e-12)
    for step, t in (("dQ", q), ("dK", k), ("dV", v)):
        np.testing.assert_allclose(env[step], t.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=step)
    # ∇A and ∇S from explicit ops, the scores and weights kept for their gradients.
    q2, k2, v2 = (torch.tensor(env[x]) for x in ("Q", "K", "V"))
    s = (q2 @ k2.transpose(-1, -2) * c).masked_fill(~allowed, -math.inf).requires_grad_()
    a = torch.softmax(s, dim=-1)
    a.retain_grad()
    (a @ v2).backward(torch.tensor(env["dZ"]))
    np.testing.assert_allclose(env["dA"], a.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(env["dS"], s.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_every_mistake_of_cross_attention_backprop_is_told_apart():
    cases = [(str(p), *_case(p, f)[:2]) for p, f in CROSS_BACKPROP]
    cases.append(("one each", *_case(ONE_EACH[0], lambda d: 1.0, ONE_EACH[1])[:2]))
    checked = set()
    for label, env, item in cases:
        n = env["Q"].shape[0]
        for part in item.parts:
            for mistake in item.family.mistakes_for(part.step, item.params):
                wrong = mistake.fn(env, item.params, np)
                assert wrong.shape == env[part.step].shape, f"{label}: {mistake.name} has another shape"
                same = item.tolerance.passes(wrong, env[part.step]).reshape(n, -1).all(axis=1)
                assert not same.any(), f"{label}: {mistake.step}.{mistake.name} passes for the answer"
                checked.add((mistake.step, mistake.name))
    every = {(m.step, m.name) for m in get_family("backprop.attention").misconceptions}
    assert checked == every, f"never exercised: {sorted(every - checked)}"


@pytest.mark.parametrize("params, says", [
    ({"queries": 1, "keys": 3}, ["1 query and 3 keys (with their values)", r"\frac{QK^\top}{\sqrt{d_k}}"]),
    ({"queries": 2, "keys": 3, "scale": "none"}, ["No scaling", r"\nabla Q = \nabla S K"]),
    ({"queries": 3, "keys": 2, "scale": 0.5}, ["multiplied by 0.5", r"\nabla K = 0.5\,\nabla S^\top Q"]),
    ({"queries": 2, "keys": 3, "d_k": 2, "stated_d_k": 16}, ["Take $d_k = 16$", r"\frac{1}{4}"]),
])
def test_backprop_attention_worksheet_states_counts_and_scale(params, says):
    ws, _, _ = solved("backprop.attention", params, ROSTER[:1], ask=ALL_STEPS)
    text = key_markdown(ws)
    for phrase in says:
        assert phrase in text, phrase
    if params.get("scale") is not None:
        assert r"\sqrt{d_k}" not in text


def test_backprop_attention_audits_a_hand_written_cross_problem():
    from qkvquiz.grade.audit import audit_spec

    q, k, v, dz = [[1, 0]], [[1, 1], [0, 2], [1, -1]], [[1, 0], [0, 1], [2, 2]], [[1, -1]]
    want = loop_layer(np.array(q, float), np.array(k, float), np.array(v, float), np.ones((1, 3)),
                      np.array(dz, float), 0.5)
    item = {"family": "backprop.attention", "params": {"queries": 1, "keys": 3, "d_k": 2, "d_v": 2, "scale": 0.5},
            "givens": {"Q": q, "K": k, "V": v, "dZ": dz},
            "claimed": {"dV": np.round(want["dV"], 3).tolist(), "dQ": (np.round(want["dQ"], 3) * 2).tolist()}}
    checks = {c.step: c for c in audit_spec({"title": "t", "items": [item]}).checks}
    assert checks["dV"].verdict == "right"
    assert checks["dQ"].verdict == "wrong" and checks["dQ"].mistakes == ["forgot_scale"]  # named, as √d_k is


# --------------------------------------------------------------------------- backprop.scores, cross shapes


@pytest.mark.parametrize("params, factor", [
    ({"queries": 1, "keys": 3}, lambda d: 1 / math.sqrt(d)),
    ({"queries": 3, "keys": 2, "scale": "none"}, lambda d: 1.0),
    ({"queries": 2, "keys": 2, "scale": 0.5}, lambda d: 0.5),
    ({"tokens": 1, "d_k": 2, "stated_d_k": 9}, lambda d: 1 / 3),
])
def test_backprop_scores_for_cross_shapes_and_scales_match_loops_and_torch(params, factor):
    _, env, item = solved("backprop.scores", params)
    for b in range(len(ROSTER)):
        q, k, ds = env["Q"][b], env["K"][b], env["dS"][b]
        c = factor(q.shape[1])
        dq = np.array([[c * sum(ds[i, j] * k[j, t] for j in range(k.shape[0])) for t in range(q.shape[1])]
                       for i in range(q.shape[0])])
        dk = np.array([[c * sum(ds[i, j] * q[i, t] for i in range(q.shape[0])) for t in range(q.shape[1])]
                       for j in range(k.shape[0])])
        np.testing.assert_allclose(env["dQ"][b], dq, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["dK"][b], dk, rtol=1e-12, atol=1e-14)
    torch = pytest.importorskip("torch")
    q = torch.tensor(env["Q"], requires_grad=True)
    k = torch.tensor(env["K"], requires_grad=True)
    s = q @ k.transpose(-1, -2) * factor(env["Q"].shape[-1])
    s.backward(torch.tensor(env["dS"]))
    np.testing.assert_allclose(env["dQ"], q.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(env["dK"], k.grad.numpy(), rtol=1e-10, atol=1e-12)
