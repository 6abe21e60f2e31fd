"""Multi-head attention and the Q/K swap as a teacher writes them: queries and keys counted apart
(cross-attention, one query) and any scale.

Each form is checked against independent oracles: per-entry loops over every head, and torch
(scaled_dot_product_attention with its ``scale``, one head at a time, concatenated by hand;
autograd-free) where installed. Every known mistake that applies is told apart from the right
answer, and those turned off are shown to be the right answer itself where they cannot differ.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from qkvquiz.families import get_family
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.spec import SpecError, parse_spec
from qkvquiz.worksheet import build_worksheet

from .. import helpers
from ..helpers import assert_every_mistake_told_apart

ROSTER = [f"s{i:02d}" for i in range(16)]


def solved(name: str, params: dict, students=ROSTER, seed=7, ask=None):
    return helpers.solved(name, params, students, seed, ask)


def loop_scores(q, k, c):
    return np.array([[c * sum(q[i, t] * k[j, t] for t in range(q.shape[1])) for j in range(k.shape[0])]
                     for i in range(q.shape[0])])


def loop_softmax_rows(s):
    out = np.zeros_like(s)
    for i, row in enumerate(s):
        top = max(row)
        total = sum(math.exp(x - top) for x in row)
        for j, x in enumerate(row):
            out[i, j] = math.exp(x - top) / total
    return out


def loop_matmul(a, b):
    return np.array([[sum(a[i, t] * b[t, j] for t in range(a.shape[1])) for j in range(b.shape[1])]
                     for i in range(a.shape[0])])


def factor_of(params: dict, width: int) -> float:
    """What the raw dot products are multiplied by, per head of ``width`` columns."""
    scale = params.get("scale", "sqrt_dk")
    if scale == "sqrt_dk":
        return 1 / math.sqrt(params.get("stated_d_k") or width)
    return 1.0 if scale == "none" else float(scale)


# --------------------------------------------------------------------------- attention.multihead

MULTIHEAD = [
    {"queries": 1, "keys": 3},
    {"queries": 3, "keys": 2, "scale": 0.5},
    {"queries": 2, "keys": 4, "d_model": 6, "heads": 3, "scale": "none"},
    {"queries": 2, "keys": 1, "d_model": 4, "heads": 2},
    {"queries": 1, "keys": 1, "d_model": 4, "heads": 2, "scale": 0.25},
    {"queries": 3, "keys": 2, "d_model": 4, "heads": 2, "stated_d_k": 16},
    {"queries": 2, "keys": 3, "d_model": 6, "heads": 1, "scale": "none"},
    {"tokens": 3, "d_model": 6, "heads": 2, "scale": 2},
]
MH_IDS = [str(p) for p in MULTIHEAD]


def loop_multihead(q, k, v, w_o, h, c):
    """Every head by explicit loops: its columns, scores, weights, output; then concat and Wᴼ."""
    n, dm = q.shape
    dk = dm // h
    scores, weights, heads = [], [], []
    for head in range(h):
        cols = list(range(head * dk, (head + 1) * dk))
        qh, kh, vh = q[:, cols], k[:, cols], v[:, cols]
        s = loop_scores(qh, kh, c)
        a = loop_softmax_rows(s)
        scores.append(s)
        weights.append(a)
        heads.append(loop_matmul(a, vh))
    concat = np.array([[heads[col // dk][i, col % dk] for col in range(dm)] for i in range(n)])
    return {"scores": np.array(scores), "weights": np.array(weights), "heads": np.array(heads),
            "concat": concat, "output": loop_matmul(concat, w_o)}


@pytest.mark.parametrize("params", MULTIHEAD, ids=MH_IDS)
def test_multihead_cross_forms_match_per_head_loops(params):
    _, env, item = solved("attention.multihead", params)
    p = item.params
    n = params.get("queries") or params.get("tokens", 2)
    m = params.get("keys") or params.get("tokens", 2)
    assert env["Q"].shape[1:] == (n, p.d_model) and env["K"].shape[1:] == env["V"].shape[1:] == (m, p.d_model)
    c = factor_of(params, p.d_model // p.heads)
    for b in range(len(ROSTER)):
        want = loop_multihead(env["Q"][b], env["K"][b], env["V"][b], env["W_O"][b], p.heads, c)
        for step, value in want.items():
            np.testing.assert_allclose(env[step][b], value, rtol=1e-12, atol=1e-13, err_msg=step)


@pytest.mark.parametrize("params", MULTIHEAD, ids=MH_IDS)
def test_multihead_cross_forms_match_torch_per_head(params):
    torch = pytest.importorskip("torch")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    _, env, item = solved("attention.multihead", params)
    p = item.params
    dk = p.d_model // p.heads
    c = factor_of(params, dk)
    q, k, v, w_o = (torch.tensor(env[x], dtype=torch.float64) for x in ("Q", "K", "V", "W_O"))
    heads = [sdpa(q[..., h * dk:(h + 1) * dk], k[..., h * dk:(h + 1) * dk], v[..., h * dk:(h + 1) * dk], scale=c)
             for h in range(p.heads)]
    concat = torch.cat(heads, dim=-1)
    np.testing.assert_allclose(env["heads"], torch.stack(heads, dim=1).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(env["concat"], concat.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(env["output"], (concat @ w_o).numpy(), rtol=1e-10, atol=1e-12)


def test_multihead_cross_attention_agrees_with_torch_multihead_attention():
    # The default scale, no mask: torch's module with identity in-projections takes n queries and m keys.
    torch = pytest.importorskip("torch")
    _, env, _ = solved("attention.multihead", {"queries": 2, "keys": 3, "d_model": 4, "heads": 2}, ROSTER[:5])
    mha = torch.nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(4, dtype=torch.float64)] * 3))
    for b in range(5):
        with torch.no_grad():
            mha.out_proj.weight.copy_(torch.tensor(env["W_O"][b]).T)
            y, w = mha(*(torch.tensor(env[x][b])[None] for x in ("Q", "K", "V")), average_attn_weights=False)
        np.testing.assert_allclose(env["output"][b], y[0].numpy(), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(env["weights"][b], w[0].numpy(), rtol=1e-10, atol=1e-10)


def test_multihead_with_one_key_gives_every_query_that_keys_value():
    _, env, _ = solved("attention.multihead", {"queries": 2, "keys": 1, "d_model": 4, "heads": 2})
    assert (env["weights"] == 1).all()
    np.testing.assert_array_equal(env["concat"], np.repeat(env["V"], 2, axis=1))


# --------------------------------------------------------------------------- attention.qk_swap

QK_SWAP = [
    {"queries": 1, "keys": 3},
    {"queries": 3, "keys": 1, "scale": 0.5},
    {"queries": 2, "keys": 4, "scale": "none"},
    {"queries": 4, "keys": 2, "d_k": 2, "stated_d_k": 9},
    {"queries": 3, "keys": 3, "scale": 0.25},
    {"tokens": 3, "scale": "none", "d_k": 3},
]
QK_IDS = [str(p) for p in QK_SWAP]


@pytest.mark.parametrize("params", QK_SWAP, ids=QK_IDS)
def test_qk_swap_cross_forms_match_loops(params):
    _, env, item = solved("attention.qk_swap", params)
    n = params.get("queries") or params.get("tokens", 3)
    m = params.get("keys") or params.get("tokens", 3)
    c = factor_of(params, item.params.d_k)
    assert env["swapped"].shape[1:] == (m, n) and env["received"].shape[1:] == (m,)
    for b in range(len(ROSTER)):
        q, k = env["Q"][b], env["K"][b]
        s = loop_scores(q, k, c)
        a = loop_softmax_rows(s)
        swapped = np.array([[math.exp(s[i, j]) / sum(math.exp(s[l, j]) for l in range(n)) for i in range(n)]
                            for j in range(m)])
        np.testing.assert_allclose(env["scores"][b], s, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["weights"][b], a, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["swapped"][b], swapped, rtol=1e-12, atol=1e-14)
        # Swapping Q and K really is the softmax of K Qᵀ with the same scale.
        np.testing.assert_allclose(env["swapped"][b], loop_softmax_rows(loop_scores(k, q, c)), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["received"][b], [sum(a[i, j] for i in range(n)) for j in range(m)], rtol=1e-12)


@pytest.mark.parametrize("params", QK_SWAP, ids=QK_IDS)
def test_qk_swap_cross_forms_match_torch(params):
    torch = pytest.importorskip("torch")
    _, env, item = solved("attention.qk_swap", params)
    c = factor_of(params, item.params.d_k)
    q, k = (torch.tensor(env[x], dtype=torch.float64) for x in ("Q", "K"))
    m = k.shape[-2]
    # sdpa with V = I returns the weights themselves; swapping the roles passes K as the queries.
    a = torch.nn.functional.scaled_dot_product_attention(q, k, torch.eye(m, dtype=torch.float64).expand(len(ROSTER), m, m),
                                                         scale=c)
    swapped = torch.softmax(k @ q.transpose(-1, -2) * c, dim=-1)
    np.testing.assert_allclose(env["weights"], a.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(env["swapped"], swapped.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(env["received"], a.sum(dim=-2).numpy(), rtol=1e-10, atol=1e-12)


def test_qk_swap_with_one_query_and_one_key_is_refused():
    with pytest.raises(SpecError, match="two queries or two keys"):
        parse_spec({"title": "T", "items": [{"family": "attention.qk_swap", "params": {"queries": 1, "keys": 1}}]})


# --------------------------------------------------------------------------- mistakes


def test_every_mistake_of_both_families_is_told_apart():
    cases = []
    for name, forms in (("attention.multihead", MULTIHEAD), ("attention.qk_swap", QK_SWAP)):
        for params in [{}, *forms]:
            _, env, item = solved(name, params)
            cases.append((f"{name} {params}", item, env))
    assert_every_mistake_told_apart(cases, ["attention.multihead", "attention.qk_swap"])


@pytest.mark.parametrize("name, params, step, mistake", [
    # One query: the h rows of the stack read into one row are [Z₁ | Z₂] itself.
    ("attention.multihead", {"queries": 1, "keys": 3}, "concat", "stacked_tokens"),
    # One key: every weight is 1, whatever the scores were divided by.
    ("attention.multihead", {"queries": 2, "keys": 1}, "weights", "scaled_by_d_model"),
    ("attention.multihead", {"queries": 2, "keys": 1}, "output", "scaled_by_d_model"),
    # The stated d_k is d_model: dividing by √d_model is right.
    ("attention.multihead", {"queries": 2, "keys": 3, "stated_d_k": 4}, "scores", "scaled_by_d_model"),
])
def test_mistakes_that_cannot_differ_are_turned_off(name, params, step, mistake):
    _, env, item = solved(name, params)
    family = item.family
    assert mistake not in [m.name for m in family.mistakes_for(step, item.params)]
    (m,) = [x for x in family.misconceptions if x.step == step and x.name == mistake]
    np.testing.assert_allclose(m.fn(env, item.params, np), env[step], rtol=1e-12, atol=1e-12)


def test_scale_mistakes_apply_only_where_the_scale_says():
    mh, qk = get_family("attention.multihead"), get_family("attention.qk_swap")
    names = lambda fam, params: {m.name for m in fam.mistakes_for("scores", fam.resolve(params))}  # noqa: E731
    assert names(mh, {}) == {"scaled_by_d_model", "unscaled"}
    assert names(mh, {"scale": "none"}) == {"scaled_anyway"}
    assert names(mh, {"scale": 0.5}) == {"forgot_scale"}  # a number is named too
    assert names(qk, {}) == {"unscaled"} and names(qk, {"scale": "none"}) == {"scaled_anyway"}
    assert names(qk, {"d_k": 1}) == set()  # √1 = 1: nothing to forget


# --------------------------------------------------------------------------- worksheets, defaults, audit


@pytest.mark.parametrize("name, params, says, never", [
    ("attention.multihead", {"queries": 1, "keys": 3, "scale": 0.5},
     ["1 query and 3 keys (with their values)", "one row per key", r"0.5\,Q^{(h)} K^{(h)\top}",
      "multiplied by 0.5", "a list of 2 matrices of 1×3"], [r"\sqrt{d_k}"]),
    ("attention.multihead", {"queries": 3, "keys": 2, "scale": "none"},
     ["3 queries and 2 keys", "No scaling", "raw dot products", r"S_{11}^{(1)} = (", "a 3×4 matrix"],
     [r"\sqrt{d_k}"]),
    ("attention.multihead", {"queries": 2, "keys": 3, "stated_d_k": 16}, ["Each head takes $d_k = 16$", r"\sqrt{16}"],
     []),
    ("attention.qk_swap", {"queries": 1, "keys": 3, "scale": "none"},
     ["1 query and 3 keys", "No scaling", r"\operatorname{softmax}(KQ^\top)", "a 3×1 matrix", "a vector of 3",
      "(3×1, one row per key)"], [r"\sqrt{d_k}"]),
    ("attention.qk_swap", {"queries": 3, "keys": 2, "scale": 0.5}, [r"0.5\,KQ^\top", "multiplied by 0.5"],
     [r"\sqrt{d_k}"]),
])
def test_worksheets_state_the_counts_and_the_scale(name, params, says, never):
    ws, _, _ = solved(name, params, ROSTER[:1])
    text = key_markdown(ws)
    for phrase in says:
        assert phrase in text, phrase
    for phrase in never:
        assert phrase not in text, phrase


def _old_fingerprint(item) -> str:
    # The fingerprint before queries, keys, scale and stated_d_k existed.
    new = {"queries", "keys", "scale", "stated_d_k"}
    payload = {"family": item.family.name,
               "params": {k: list(v) if isinstance(v, tuple) else v for k, v in item.params.items() if k not in new},
               "fixed": {}}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@pytest.mark.parametrize("name, params", [
    ("attention.multihead", {}), ("attention.multihead", {"tokens": 3, "d_model": 6, "heads": 3}),
    ("attention.qk_swap", {}), ("attention.qk_swap", {"tokens": 4, "d_k": 2}),
])
def test_specs_written_before_the_new_params_keep_their_variants(name, params):
    spec = parse_spec({"title": "T", "items": [{"family": name, "params": params}]})
    assert spec.items[0].fingerprint() == _old_fingerprint(spec.items[0])
    # Writing a new param at its default changes nothing; another value gives other variants.
    same = parse_spec({"title": "T", "items": [{"family": name, "params": {**params, "scale": "sqrt_dk", "keys": 0}}]})
    assert same.items[0].fingerprint() == spec.items[0].fingerprint()
    other = parse_spec({"title": "T", "items": [{"family": name, "params": {**params, "scale": 0.5}}]})
    assert other.items[0].fingerprint() != spec.items[0].fingerprint()


def test_the_multihead_and_swap_worksheet_generates_as_written():
    """Worksheet 07 is also a spec: its items generate with their fixed givens."""
    from pathlib import Path

    from qkvquiz.spec import read_spec_data

    path = Path(__file__).resolve().parents[2] / "examples" / "handwritten" / "07-multihead-swap.yaml"
    data = read_spec_data(path)
    for item in data["items"]:
        item.pop("claimed")
    ws = build_worksheet(parse_spec(data), ["a"], seed=0)
    text = worksheet_markdown(ws, 0)
    assert "2 queries and 3 keys (with their values)" in text and "multiplied by 0.5" in text
    assert "1 query and 3 keys" in text and "a 3×1 matrix" in text
    np.testing.assert_array_equal(ws.envs[1]["swapped"][0], np.ones((3, 1)))
