"""Backprop families: every gradient step is the true gradient, mistakes are told apart, and
problems and worked solutions render.

Oracles: central finite differences of a scalar loss written out here with plain NumPy (its
own softmax), and torch autograd where torch is installed.
"""

from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


from qkvquiz.families import get_family
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.core.seeding import Draw
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import assert_every_mistake_told_apart, fd_grad, total

TORCH_TOL = 1e-10
FD_RTOL = 1e-7
FD_ATOL = 1e-8
FAMILIES = ("backprop.scores", "backprop.softmax", "backprop.attention", "backprop.projection")

# Hand-computable defaults and larger numeric settings for every family.
SETTINGS = {
    "backprop.scores": [{}, {"tokens": 5, "d_k": 8, "entries": [-5, 5], "grad_entries": [-3, 3]},
                        {"tokens": 3, "scale": 0.5}],
    "backprop.softmax": [{}, {"tokens": 6, "entries": [-3, 3], "grad_entries": [-4, 4]}],
    "backprop.attention": [
        {}, {"mask": "causal", "tokens": 3}, {"mask": "padding", "tokens": 4, "padded": 1},
        {"mask": "random", "tokens": 6, "d_k": 8, "d_v": 3, "entries": [-2, 2]},
        {"queries": 2, "keys": 3, "scale": "none"}, {"queries": 3, "keys": 2, "scale": 0.5, "mask": "causal"},
        {"d_k": 2, "stated_d_k": 16},
    ],
    "backprop.projection": [
        {}, {"form": "vector"}, {"tokens": 4, "d_in": 5, "d_out": 3}, {"form": "vector", "d_in": 2, "d_out": 4},
    ],
}


def solved(name: str, params: dict, students: int = 6, seed: int = 0, ask=None):
    fam = get_family(name)
    item = {"family": name, "params": params, "ask": list(ask or fam.askable_steps)}
    ws = build_worksheet(parse_spec({"title": "t", "items": [item]}), [f"s{i}" for i in range(students)], seed)
    return ws, ws.spec.items[0], ws.envs[0]


def cases():
    return [(name, params) for name in FAMILIES for params in SETTINGS[name]]


# ----------------------------------------------------------------- independent oracles


def naive_softmax(s):
    """Row softmax written out; −∞ entries get weight 0."""
    m = np.max(np.where(np.isfinite(s), s, -1e300), axis=-1, keepdims=True)
    e = np.where(np.isfinite(s), np.exp(s - m), 0.0)
    return e / e.sum(axis=-1, keepdims=True)


def T(x):
    return np.swapaxes(x, -1, -2)


def divisor(p) -> float:
    """What the raw dot products are divided by: √d_k (as stated), 1, or 1/scale."""
    scale = p.get("scale", "sqrt_dk")
    if scale == "sqrt_dk":
        return float(np.sqrt(p.get("stated_d_k") or p.d_k))
    return 1.0 if scale == "none" else 1.0 / float(scale)


def fd_expectations(name: str, p, e) -> dict[str, np.ndarray]:
    """Every gradient step of a family, each from finite differences of Σ upstream ⊙ forward."""
    if name == "backprop.scores":
        c = np.sqrt(p.d_k)
        return {
            "dQ": fd_grad(lambda q: total(e.dS, q @ T(e.K) / c), e.Q),
            "dK": fd_grad(lambda k: total(e.dS, e.Q @ T(k) / c), e.K),
        }
    if name == "backprop.softmax":
        return {"dS": fd_grad(lambda s: total(e.dA, naive_softmax(s)), e.S)}
    if name == "backprop.attention":
        c = divisor(p)
        allowed = e.mask > 0.5

        def z_of(q, k, v):
            return naive_softmax(np.where(allowed, q @ T(k) / c, -np.inf)) @ v

        return {
            "dV": fd_grad(lambda v: total(e.dZ, z_of(e.Q, e.K, v)), e.V),
            "dA": fd_grad(lambda a: total(e.dZ, a @ e.V), e.weights),
            "dS": fd_grad(lambda s: total(e.dZ, naive_softmax(np.where(allowed, s, -np.inf)) @ e.V), e.Q @ T(e.K) / c),
            "dQ": fd_grad(lambda q: total(e.dZ, z_of(q, e.K, e.V)), e.Q),
            "dK": fd_grad(lambda k: total(e.dZ, z_of(e.Q, k, e.V)), e.K),
        }
    if p.form == "vector":
        return {
            "dW": fd_grad(lambda w: total(e.dQ, np.einsum("bij,bj->bi", w, e.X)), e.W),
            "dX": fd_grad(lambda x: total(e.dQ, np.einsum("bij,bj->bi", e.W, x)), e.X),
        }
    return {
        "dW": fd_grad(lambda w: total(e.dQ, e.X @ w), e.W),
        "dX": fd_grad(lambda x: total(e.dQ, x @ e.W), e.X),
    }


def torch_expectations(torch, name: str, p, e) -> dict[str, np.ndarray]:
    """The same gradients from torch autograd on the same givens."""
    t = {k: torch.tensor(np.asarray(v), dtype=torch.float64, requires_grad=True) for k, v in e.items()}
    if name == "backprop.scores":
        (t["dS"] * (t["Q"] @ t["K"].transpose(-1, -2)) / np.sqrt(p.d_k)).sum().backward()
        return {"dQ": t["Q"].grad, "dK": t["K"].grad}
    if name == "backprop.softmax":
        (t["dA"] * torch.softmax(t["S"], dim=-1)).sum().backward()
        return {"dS": t["S"].grad}
    if name == "backprop.attention":
        s = t["Q"] @ t["K"].transpose(-1, -2) / divisor(p)
        s.retain_grad()
        a = torch.softmax(s.masked_fill(t["mask"] < 0.5, -float("inf")), dim=-1)
        a.retain_grad()
        (t["dZ"] * (a @ t["V"])).sum().backward()
        return {"dV": t["V"].grad, "dA": a.grad, "dS": s.grad, "dQ": t["Q"].grad, "dK": t["K"].grad}
    if p.form == "vector":
        (t["dQ"] * (t["W"] @ t["X"][..., None])[..., 0]).sum().backward()
    else:
        (t["dQ"] * (t["X"] @ t["W"])).sum().backward()
    return {"dW": t["W"].grad, "dX": t["X"].grad}


# ------------------------------------------------------------- gradients are right


@pytest.mark.parametrize("name, params", cases())
def test_gradient_steps_match_central_finite_differences(name, params):
    _, item, e = solved(name, params)
    for step, expected in fd_expectations(name, item.params, e).items():
        np.testing.assert_allclose(e[step], expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=f"{name} {step}")


@pytest.mark.parametrize("name, params", cases())
def test_gradient_steps_match_torch_autograd(name, params):
    torch = pytest.importorskip("torch")
    _, item, e = solved(name, params)
    for step, expected in torch_expectations(torch, name, item.params, e).items():
        np.testing.assert_allclose(e[step], expected.detach().numpy(), rtol=TORCH_TOL, atol=TORCH_TOL,
                                   err_msg=f"{name} {step}")


def test_forward_steps_of_the_attention_family_match_a_naive_layer():
    _, item, e = solved("backprop.attention", {"mask": "causal", "tokens": 4})
    s = np.where(e.mask > 0.5, e.Q @ T(e.K) / np.sqrt(item.params.d_k), -np.inf)
    np.testing.assert_array_equal(e.scores, s)
    np.testing.assert_allclose(e.weights, naive_softmax(s), rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(e.output, naive_softmax(s) @ e.V, rtol=1e-14, atol=1e-15)


def test_softmax_row_sums_are_the_weighted_upstream_per_row():
    _, _, e = solved("backprop.softmax", {"tokens": 4})
    for b in range(e.S.shape[0]):
        for i in range(4):
            expected = sum(e.dA[b, i, j] * e.weights[b, i, j] for j in range(4))
            assert e.rowdot[b, i] == pytest.approx(expected, rel=1e-14, abs=1e-15)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**63 - 1),
    tokens=st.integers(2, 5),
    d_k=st.sampled_from([1, 2, 4, 9]),
    d_v=st.integers(1, 3),
    mask=st.sampled_from(["none", "causal", "padding", "random"]),
)
def test_attention_backward_on_random_draws(seed, tokens, d_k, d_v, mask):
    """Unfiltered draws (no accept rule): gradients agree with finite differences; each row of ∇S sums to 0."""
    if mask == "padding" and tokens < 3:
        mask = "causal"  # padding must leave two keys visible (a spec refuses fewer)
    fam = get_family("backprop.attention")
    p = fam.resolve({"tokens": tokens, "d_k": d_k, "d_v": d_v, "mask": mask, "entries": [-3, 3]})
    e = fam.solve(fam.sample(Draw([seed, seed ^ 0x5DEECE66D]), p), p)
    np.testing.assert_allclose(e.dS.sum(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.where(e.mask > 0.5, 0.0, e.dS), 0.0, atol=0)  # masked scores get nothing
    for step, expected in fd_expectations("backprop.attention", p, e).items():
        np.testing.assert_allclose(e[step], expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=step)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**63 - 1),
    form=st.sampled_from(["matrix", "vector"]),
    tokens=st.integers(1, 4),
    d_in=st.integers(1, 4),
    d_out=st.integers(1, 4),
)
def test_projection_and_score_gradients_on_random_draws(seed, form, tokens, d_in, d_out):
    proj = get_family("backprop.projection")
    p = proj.resolve({"form": form, "tokens": tokens, "d_in": d_in, "d_out": d_out})
    e = proj.solve(proj.sample(Draw([seed]), p), p)
    for step, expected in fd_expectations("backprop.projection", p, e).items():
        np.testing.assert_allclose(e[step], expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=step)
    scores = get_family("backprop.scores")
    p = scores.resolve({"tokens": tokens, "d_k": d_in})
    e = scores.solve(scores.sample(Draw([seed]), p), p)
    for step, expected in fd_expectations("backprop.scores", p, e).items():
        np.testing.assert_allclose(e[step], expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=step)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**63 - 1), tokens=st.integers(2, 6))
def test_softmax_backward_on_random_draws(seed, tokens):
    fam = get_family("backprop.softmax")
    p = fam.resolve({"tokens": tokens, "entries": [-4, 4]})
    e = fam.solve(fam.sample(Draw([seed]), p), p)
    np.testing.assert_allclose(e.dS.sum(axis=-1), 0.0, atol=1e-12)  # shifting a row of S changes nothing
    np.testing.assert_allclose(e.dS, fd_expectations("backprop.softmax", p, e)["dS"], rtol=FD_RTOL, atol=FD_ATOL)


# ------------------------------------------------------------ mistakes are told apart


def test_every_misconception_differs_from_the_answer_on_accepted_variants():
    assert_every_mistake_told_apart(
        ((f"{name} {params}", *solved(name, params, students=30)[1:]) for name, params in cases()), FAMILIES
    )


def test_each_family_lists_the_mistakes_it_was_asked_for():
    names = {n: {(m.step, m.name) for m in get_family(n).misconceptions} for n in FAMILIES}
    assert {("dQ", "transposed_dS"), ("dQ", "unscaled"), ("dK", "untransposed_dS"), ("dK", "used_K")} <= names["backprop.scores"]
    assert ("dS", "diagonal_only") in names["backprop.softmax"]
    assert ("dW", "reversed_outer") in names["backprop.projection"]


def test_grading_names_the_diagonal_only_softmax_mistake():
    ws, _, e = solved("backprop.softmax", {}, students=3, ask=["dS"])
    doc = json.loads(json.dumps(key_to_json(ws)))
    key = key_from_json(doc)
    subs = [Submission(f"{s['student']}.json", s["student"], copy.deepcopy(s["answers"])) for s in doc["students"]]
    subs[0].answers["q1.dS"] = (e.weights[0] * e.dA[0]).tolist()
    result = {p.part: p for p in grade(key, subs).results[0].parts}["q1.dS"]
    assert result.verdict in ("wrong", "partial")
    assert any("diagonal" in d for d in result.diagnosis)


def test_a_student_slip_in_dS_carries_forward_to_dQ():
    ws, _, e = solved("backprop.attention", {}, students=2, ask=["dS", "dQ"])
    doc = json.loads(json.dumps(key_to_json(ws)))
    key = key_from_json(doc)
    subs = [Submission(f"{s['student']}.json", s["student"], copy.deepcopy(s["answers"])) for s in doc["students"]]
    # A slip that keeps each row summing to 0 (the ∇S invariant), so credit may carry forward.
    slip = np.array(e.dS[0]) + np.array([[1.0, -1.0], [0.0, 0.0]])
    subs[0].answers["q1.dS"] = slip.tolist()
    subs[0].answers["q1.dQ"] = (slip @ e.K[0] / 2).tolist()  # d_k = 4
    result = {p.part: p for p in grade(key, subs).results[0].parts}
    assert result["q1.dQ"].verdict == "carried"

    # A slip that breaks the invariant earns no carried credit.
    broken = np.array(e.dS[0]) + np.array([[1.0, 0.0], [0.0, 0.0]])
    subs[0].answers["q1.dS"] = broken.tolist()
    subs[0].answers["q1.dQ"] = (broken @ e.K[0] / 2).tolist()
    result = {p.part: p for p in grade(key, subs).results[0].parts}
    assert result["q1.dQ"].verdict != "carried"


# ------------------------------------------------------------------ readable output


def test_key_and_worksheet_markdown_render_every_family_and_setting():
    items = [{"family": n, "params": p, "ask": list(get_family(n).askable_steps)} for n, p in cases()]
    ws = build_worksheet(parse_spec({"title": "Backprop", "items": items}), ["ada", "alan"], seed=4)
    key_md = key_markdown(ws)
    sheet = worksheet_markdown(ws, 0)
    for number, item in enumerate(ws.spec.items, start=1):
        assert f"Problem {number}:" in sheet
        for part in item.parts:
            assert f"`{part.id}`" in key_md and f"`{part.id}`" in sheet
    assert "{{" not in key_md and not re.search(r"\bnan\b", key_md)
    # The worked solution writes the products out row by row for the small settings.
    assert r"\nabla q_{1}" in key_md and r"\nabla W_{1}" in key_md and "c_{1}" in key_md
