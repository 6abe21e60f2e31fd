"""Forms of hand-written attention problems: queries and keys counted apart, one token, scale choices.

Every form is checked against an independent oracle (per-entry loops with math.exp, torch's
scaled_dot_product_attention where installed), every known mistake that applies must be told
apart from the right answer on every accepted variant, and every form prints a problem and a
worked solution that say what is asked.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkvquiz.families import get_family
from qkvquiz.render.markdown import key_markdown
from qkvquiz.spec import SpecError, parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import ROSTER, assert_every_mistake_told_apart, solved


def loop_scores(q, k, factor):
    return np.array([[factor * sum(q[i, t] * k[j, t] for t in range(q.shape[1])) for j in range(k.shape[0])]
                     for i in range(q.shape[0])])


def loop_softmax(s):
    out = np.zeros_like(s)
    for i, row in enumerate(s):
        keep = [j for j, x in enumerate(row) if math.isfinite(x)]
        if not keep:
            continue  # the convention for a fully masked query: weights 0
        top = max(row[j] for j in keep)
        total = sum(math.exp(row[j] - top) for j in keep)
        for j in keep:
            out[i, j] = math.exp(row[j] - top) / total
    return out


def loop_matmul(a, b):
    return np.array([[sum(a[i, t] * b[t, j] for t in range(a.shape[1])) for j in range(b.shape[1])]
                     for i in range(a.shape[0])])


# (params, factor the raw dot products are multiplied by, given d_k = Q's width)
CROSS = [
    ({"queries": 1, "keys": 3}, lambda d: 1 / math.sqrt(d)),
    ({"queries": 2, "keys": 1}, lambda d: 1 / math.sqrt(d)),
    ({"tokens": 1}, lambda d: 1 / math.sqrt(d)),
    ({"queries": 2, "keys": 4, "scale": "none"}, lambda d: 1.0),
    ({"queries": 3, "keys": 2, "scale": 0.25}, lambda d: 0.25),
    ({"queries": 2, "keys": 3, "d_k": 2, "stated_d_k": 16}, lambda d: 0.25),
    ({"queries": 2, "keys": 3, "mask": "random"}, lambda d: 1 / math.sqrt(d)),
]


@pytest.mark.parametrize("params, factor", CROSS, ids=[str(p) for p, _ in CROSS])
def test_output_family_matches_loops_for_cross_attention_and_scales(params, factor):
    _, env, item = solved("attention.output", params)
    n = params.get("queries", params.get("tokens", 3))
    m = params.get("keys", params.get("tokens", 3))
    for b in range(len(ROSTER)):
        q, k, v, mask = env["Q"][b], env["K"][b], env["V"][b], env["mask"][b]
        assert q.shape == (n, item.params.d_k) and k.shape == (m, item.params.d_k) and v.shape[0] == m
        s = loop_scores(q, k, factor(q.shape[1]))
        s = np.where(mask > 0.5, s, -np.inf)
        a = loop_softmax(s)
        np.testing.assert_allclose(env["scores"][b], s, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["weights"][b], a, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["output"][b], loop_matmul(a, v), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("params", [{"queries": 1, "keys": 3}, {"queries": 3, "keys": 2, "scale": 0.5},
                                    {"queries": 2, "keys": 4, "mask": "random"}])
def test_cross_attention_agrees_with_torch_sdpa(params):
    torch = pytest.importorskip("torch")
    _, env, item = solved("attention.output", params)
    q, k, v = (torch.tensor(env[x], dtype=torch.float64) for x in ("Q", "K", "V"))
    scale = params.get("scale")
    z = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.tensor(env["mask"] > 0.5), scale=scale)
    np.testing.assert_allclose(env["output"], z.numpy(), rtol=1e-10, atol=1e-10)


def test_one_query_one_key_scores_weights_and_output():
    # One query, one key: s = q·k/√d_k, softmax of one element is 1, z = v.
    fam = get_family("attention.output")
    p = fam.resolve({"tokens": 1, "d_k": 2, "d_v": 3})
    env = fam.solve({"Q": np.array([[[1.0, 2.0]]]), "K": np.array([[[3.0, -1.0]]]),
                     "V": np.array([[[4.0, 5.0, 6.0]]]), "mask": np.ones((1, 1, 1))}, p)
    assert env["scores"][0, 0, 0] == pytest.approx(1 / math.sqrt(2))
    assert env["weights"][0, 0, 0] == 1.0
    np.testing.assert_array_equal(env["output"][0], [[4, 5, 6]])


@pytest.mark.parametrize("name, params", [
    ("attention.scores", {"queries": 1, "keys": 3}),
    ("attention.scores", {"tokens": 1, "scale": "none", "d_k": 3}),
    ("attention.scores", {"queries": 2, "keys": 3, "scale": 0.5}),
    ("attention.scores", {"form": "vector", "d_k": 2, "stated_d_k": 9}),
])
def test_scores_family_matches_loops(name, params):
    _, env, item = solved(name, params)
    factor = {"none": 1.0}.get(params.get("scale"), params.get("scale"))
    if factor is None or factor == "sqrt_dk":
        factor = 1 / math.sqrt(params.get("stated_d_k") or item.params.d_k)
    for b in range(len(ROSTER)):
        q, k = env["Q"][b], env["K"][b]
        if q.ndim == 1:
            expect = factor * sum(x * y for x, y in zip(q, k))
        else:
            expect = loop_scores(q, k, factor)
        np.testing.assert_allclose(env["scores"][b], expect, rtol=1e-12, atol=1e-14)


def test_weights_family_with_one_key_and_cross_shapes():
    _, env, _ = solved("attention.weights", {"queries": 2, "keys": 3, "mask": "random"})
    for b in range(len(ROSTER)):
        s = np.where(env["mask"][b] > 0.5, env["S"][b], -np.inf)
        np.testing.assert_allclose(env["weights"][b], loop_softmax(s), rtol=1e-12, atol=1e-14)
    _, env, _ = solved("attention.weights", {"tokens": 1})
    assert (env["weights"] == 1).all()


FORMS = [
    ("attention.output", {"queries": 1, "keys": 3}),
    ("attention.output", {"queries": 3, "keys": 2}),
    ("attention.output", {"queries": 2, "keys": 3, "scale": "none"}),
    ("attention.output", {"queries": 2, "keys": 2, "scale": "none"}),
    ("attention.output", {"queries": 3, "keys": 3, "mask": "causal"}),
    ("attention.output", {"tokens": 1}),
    ("attention.scores", {"queries": 1, "keys": 3}),
    ("attention.scores", {"tokens": 1, "d_k": 2}),
    ("attention.scores", {"queries": 2, "keys": 2, "scale": "none"}),
    ("attention.masked", {"queries": 2, "keys": 4}),
    ("attention.masked", {"queries": 4, "keys": 4, "mask": "padding", "padded": 2}),
    ("attention.weights", {"queries": 1, "keys": 4}),
    ("attention.weights", {"queries": 3, "keys": 2, "mask": "random"}),
]


def test_every_mistake_of_the_new_forms_is_told_apart():
    cases = []
    for name, params in FORMS:
        _, env, item = solved(name, params)
        cases.append((f"{name} {params}", item, env))
    # Only the mistakes these forms reach: the rest are covered by the families' own tests.
    checked = assert_every_mistake_told_apart(cases, {item.family.name for _, item, _ in cases}, require_all=False)
    assert checked


@pytest.mark.parametrize("name, params, says", [
    ("attention.output", {"queries": 1, "keys": 3, "scale": "none"}, ["1 query and 3 keys", "S = QK^\\top"]),
    ("attention.output", {"queries": 2, "keys": 3, "d_k": 2, "stated_d_k": 16}, ["Take $d_k = 16$"]),
    ("attention.scores", {"queries": 2, "keys": 3, "scale": 0.5}, ["multiplied by 0.5"]),
    ("attention.scores", {"tokens": 1}, ["1 query and 1 key"]),
])
def test_worksheets_state_the_counts_and_the_scale(name, params, says):
    ws, _, _ = solved(name, params, ROSTER[:1])
    text = key_markdown(ws)
    for phrase in says:
        assert phrase in text, phrase
    assert "sqrt{d_k}}" not in text or params.get("scale") is None


def test_scale_is_checked_and_a_fully_masked_row_needs_the_flag():
    with pytest.raises(SpecError, match="sqrt_dk"):
        parse_spec({"title": "T", "items": [{"family": "attention.output", "params": {"scale": "half"}}]})
    with pytest.raises(SpecError, match="sqrt_dk"):
        parse_spec({"title": "T", "items": [{"family": "attention.output", "params": {"scale": -1}}]})
    empty = [[1, 1, 0], [0, 0, 0]]
    item = {"family": "attention.weights", "params": {"queries": 2, "keys": 3},
            "givens": {"S": [[1, 2, 0], [0, 1, 2]], "mask": empty}}
    with pytest.raises(SpecError, match="empty_rows"):
        parse_spec({"title": "T", "items": [item]})
    item["params"]["empty_rows"] = True
    spec = parse_spec({"title": "T", "items": [item]})
    ws = build_worksheet(spec, ["a"], seed=0)
    np.testing.assert_array_equal(ws.envs[0]["weights"][0, 1], [0, 0, 0])
    assert "by convention its weights are all 0" in key_markdown(ws)
