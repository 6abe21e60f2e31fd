"""Hand-written forms, second round: cross-attention backprop with any scale, worksheets that
show only the givens an asked part needs, and delta-rule chunks whose last chunk is shorter.

Each form is checked against independent oracles: per-entry loops, central finite
differences, and torch autograd (scaled_dot_product_attention with its ``scale``) where
installed; every known mistake that applies must be told apart from the right answer.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from qkvquiz.families import get_family
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import ROSTER, fd_grad, loop_delta, solved, total



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
    assert checks["dQ"].verdict == "wrong" and checks["dQ"].mistakes == []


# --------------------------------------------------------------------------- only the givens an asked part needs

from qkvquiz.families import REGISTRY  # noqa: E402
from qkvquiz.seeding import Draw  # noqa: E402

# Params with which every given is used by some step (a mask, a drawn state, several chunks).
RICH = {"attention.output": {"mask": "random"}, "attention.weights": {"mask": "random"},
        "backprop.attention": {"mask": "random"}, "delta.chunk_forward": {"chunks": 2},
        "delta.chunk_backward": {"chunks": 2}}


def _graph_cases():
    for name, family in sorted(REGISTRY.items()):
        for step in family.askable_steps:
            yield name, step


@pytest.mark.parametrize("name, step", list(_graph_cases()))
def test_a_step_depends_on_no_given_its_graph_leaves_out(name, step):
    """The oracle for what a worksheet may leave out: redraw every given the step graph says the
    step does not need, and the step's value must not change."""
    family = REGISTRY[name]
    params = family.resolve(RICH.get(name, {}))
    needed = family.givens_needed([step])
    first = family.sample(Draw(list(range(8))), params)
    other = family.sample(Draw(list(range(100, 108))), params)
    mixed = {g: (first[g] if g in needed else other[g]) for g in family.given_names}
    with np.errstate(all="ignore"):
        a = family.solve(first, params)[step]
        b = family.solve(mixed, params)[step]
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"{name}.{step} reads a given not in needs")


@pytest.mark.parametrize("name, params, ask, hidden, kept", [
    ("attention.output", {}, ["scores", "weights"], [r"V = \begin"], [r"Q = \begin", r"K = \begin"]),
    ("attention.output", {"queries": 1, "keys": 3}, ["scores"], [r"V = \begin", "d_v"], ["1 query and 3 keys"]),
    ("attention.masked", {}, ["scores"], [r"V = \begin"], [r"K = \begin", r"M = \begin"]),
    ("backprop.attention", {}, ["scores", "weights"], [r"V = \begin", r"\nabla Z = \begin"], [r"Q = \begin"]),
    ("backprop.attention", {}, ["dV"], [r"V = \begin"], [r"\nabla Z = \begin"]),
    ("backprop.softmax", {}, ["weights"], [r"\nabla A = \begin"], [r"S = \begin"]),
    ("backprop.projection", {}, ["output"], [r"\nabla Q = \begin"], [r"W = \begin"]),
    ("delta.chunk_backward", {}, ["A", "W"], [r"\bar O = \begin", r"\bar S^+ = \begin"], [r"K = \begin"]),
    ("attention.output", {}, ["output"], [], [r"V = \begin"]),
])
def test_a_generated_worksheet_shows_only_the_givens_its_parts_need(name, params, ask, hidden, kept):
    ws, env, _ = solved(name, params, ROSTER[:1], ask=ask)
    problem = worksheet_markdown(ws, 0).split("### Problem 1", 1)[1]
    for text in hidden:
        assert text not in problem, text
    for text in kept:
        assert text in problem, text
    # The key keeps every given, for the worked solution (and for a later part that needs it).
    assert set(env) >= set(get_family(name).given_names)


def test_the_generic_template_lists_only_the_needed_givens():
    # theory.softmax_jacobian or any family without a template of its own goes through _generic.
    from qkvquiz.render.markdown import item_context, render_template

    ws, env, item = solved("attention.output", {}, ROSTER[:1], ask=["scores"])
    variant = ws.variant(0)[0]
    ctx = item_context(item, 1, variant["givens"], variant["steps"])
    assert ctx["shown"] == ("Q", "K", "mask")
    text = render_template(["families/_generic.problem.md.j2"], ctx)
    assert "$Q = " in text and "$V = " not in text


# --------------------------------------------------------------------------- a ragged last chunk

from qkvquiz.engine.delta import chunked_backward, chunked_forward  # noqa: E402
from qkvquiz.grade.audit import audit_spec  # noqa: E402
from qkvquiz.grade.grader import Submission, grade  # noqa: E402
from qkvquiz.key import key_from_json, key_to_json  # noqa: E402
from qkvquiz.render.form import form_problems  # noqa: E402
from qkvquiz.spec import SpecError  # noqa: E402

RAGGED = [
    {"chunk": 3, "chunks": 2, "last_chunk": 2},
    {"chunk": 3, "chunks": 3, "last_chunk": 1, "beta": "uniform"},
    {"chunk": 2, "chunks": 3, "last_chunk": 1, "d_k": 3, "d_v": 2},
    {"chunk": 4, "chunks": 2, "last_chunk": 3, "unit_keys": True, "beta": "uniform"},
]
FORWARD_ASK = ["G", "A", "W", "U", "X", "P", "O", "S_next"]
BACKWARD_ASK = ["dX", "dP", "dT", "dW", "dBK", "dBV", "dA", "dG", "dbeta", "dK", "dQ", "dV", "dS"]
ENGINE_NAMES = {"G": "g", "A": "a", "W": "w", "U": "u", "X": "x", "T": "t", "P": "p", "O": "o", "S_next": "s_next",
                "dX": "dx", "dP": "dp", "dT": "dt", "dW": "dw", "dBK": "dbk", "dBV": "dbv", "dA": "da", "dG": "dg",
                "dbeta": "dbeta", "dK": "dk", "dQ": "dq", "dV": "dv", "dS": "ds"}


def sequence_of(env, b, p):
    """Variant b's real tokens as one sequence (T = (chunks − 1)·C + last_chunk), padding dropped."""
    n = (p["chunks"] - 1) * p["chunk"] + p["last_chunk"]
    cut = lambda x: x[b].reshape(-1, *x.shape[3:])[:n]  # noqa: E731
    return {name: cut(env[name]) for name in ("Q", "K", "V", "beta", "dO") if name in env}


def real_part(value, p, name):
    """Chunk by chunk, each at its own length (what a student sees)."""
    from qkvquiz.render.markdown import trimmed

    from qkvquiz.families import Params
    from qkvquiz.families.delta import present

    return trimmed(value, present(Params(p), name, value.shape))


@pytest.mark.parametrize("params", RAGGED, ids=[str(p) for p in RAGGED])
def test_a_ragged_chunk_forward_is_the_recurrence_and_the_engines_ragged_path(params):
    _, env, item = solved("delta.chunk_forward", params, ask=FORWARD_ASK)
    p = dict(item.params)
    assert env["Q"].shape[1:3] == (p["chunks"], p["chunk"])  # stored rectangular
    for b in range(len(ROSTER)):
        seq = sequence_of(env, b, p)
        final, outs = loop_delta(seq["Q"], seq["K"], seq["V"], seq["beta"], env["S"][b])
        o = np.concatenate(real_part(env["O"][b], p, "O"))
        np.testing.assert_allclose(o, outs, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(env["S_next"][b][-1], final, rtol=1e-12, atol=1e-12)
        engine = chunked_forward(seq["Q"], seq["K"], seq["V"], seq["beta"], p["chunk"], env["S"][b])
        assert engine.chunks[-1].k.shape[0] == p["last_chunk"]
        for step in FORWARD_ASK:
            for c, value in enumerate(real_part(env[step][b], p, step)):
                np.testing.assert_allclose(value, getattr(engine.chunks[c], ENGINE_NAMES[step]), rtol=1e-12,
                                           atol=1e-12, err_msg=f"{step} chunk {c + 1}")


def torch_delta(torch, q, k, v, beta, s0, d_o, d_final):
    tq, tk, tv, tb, ts = (torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True)
                          for a in (q, k, v, beta, s0))
    s, outs = ts, []
    eye = torch.eye(k.shape[-1], dtype=torch.float64)
    for t in range(k.shape[0]):
        s = s @ (eye - tb[t] * torch.outer(tk[t], tk[t])) + tb[t] * torch.outer(tv[t], tk[t])
        outs.append(s @ tq[t])
    ((torch.stack(outs) * torch.tensor(d_o)).sum() + (s * torch.tensor(d_final)).sum()).backward()
    return {"dQ": tq.grad.numpy(), "dK": tk.grad.numpy(), "dV": tv.grad.numpy(), "dbeta": tb.grad.numpy(),
            "dS0": ts.grad.numpy()}


@pytest.mark.parametrize("params", RAGGED, ids=[str(p) for p in RAGGED])
def test_a_ragged_chunk_backward_is_the_engines_ragged_path_and_torch_autograd(params):
    params = {**params, "chunk": max(params["chunk"], 2)}
    _, env, item = solved("delta.chunk_backward", params, ask=BACKWARD_ASK)
    p = dict(item.params)
    torch = None
    try:
        import torch  # noqa: F811
    except ImportError:
        pass
    for b in range(len(ROSTER)):
        seq = sequence_of(env, b, p)
        fwd = chunked_forward(seq["Q"], seq["K"], seq["V"], seq["beta"], p["chunk"], env["S"][b])
        grads = chunked_backward(fwd, seq["dO"], env["dS_next"][b])
        for step in BACKWARD_ASK:
            for c, value in enumerate(real_part(env[step][b], p, step)):
                np.testing.assert_allclose(value, getattr(grads.chunks[c], ENGINE_NAMES[step]), rtol=1e-11,
                                           atol=1e-11, err_msg=f"{step} chunk {c + 1}")
        ours = {name: np.concatenate(real_part(env[name][b], p, name)) for name in ("dQ", "dK", "dV", "dbeta")}
        ours["dS0"] = env["dS"][b][0]  # the S̄ the first chunk hands back is ∂L/∂S₀
        if torch is not None:
            want = torch_delta(torch, seq["Q"], seq["K"], seq["V"], seq["beta"], env["S"][b], seq["dO"],
                               env["dS_next"][b])
            for name, value in want.items():
                np.testing.assert_allclose(ours[name], value, rtol=1e-10, atol=1e-10, err_msg=name)
        # Padding is exactly 0: a padded token receives no gradient at all.
        r = p["last_chunk"]
        for name in ("dQ", "dK", "dV", "dX", "dW"):
            assert (env[name][b][-1][r:] == 0).all(), name
        assert (env["dbeta"][b][-1][r:] == 0).all()


def test_every_mistake_is_told_apart_on_the_real_entries_of_a_ragged_sequence():
    cases = []
    for params in RAGGED:
        cases.append(solved("delta.chunk_forward", params, ask=FORWARD_ASK))
        cases.append(solved("delta.chunk_backward", {**params, "chunk": max(params["chunk"], 2)}, ask=BACKWARD_ASK))
    checked = set()
    for _, env, item in cases:
        n = env["Q"].shape[0]
        for part in item.parts:
            asked = part.asked(env[part.step].shape[1:])
            for mistake in item.family.mistakes_for(part.step, item.params):
                with np.errstate(all="ignore"):
                    wrong = mistake.fn(env, item.params, np)
                ok = item.tolerance.passes(wrong, env[part.step])
                if asked is not None:
                    ok = ok | ~asked  # only the real entries are graded
                assert not ok.reshape(n, -1).all(axis=1).any(), f"{item.params}: {mistake.step}.{mistake.name}"
                checked.add((item.family.name, mistake.step, mistake.name))
    assert len(checked) > 40


def ragged_key(students=("a", "b")):
    spec = parse_spec({"title": "T", "items": [{"family": "delta.chunk_forward",
                                                 "params": {"chunk": 3, "chunks": 2, "last_chunk": 2},
                                                 "ask": ["A", "O", "S_next"]}]})
    ws = build_worksheet(spec, list(students), seed=3)
    return ws, key_from_json(key_to_json(ws))


def test_a_ragged_answer_is_graded_on_its_real_entries_and_the_padding_is_never_asked():
    ws, key = ragged_key()
    env = ws.envs[0]
    p = dict(ws.spec.items[0].params)
    a, o = (real_part(env[s][0], p, s) for s in ("A", "O"))
    answers = {"q1.A": [x.tolist() for x in a], "q1.O": [x.tolist() for x in o], "q1.S_next": env["S_next"][0].tolist()}
    parts = {r.part: r for r in grade(key, [Submission("a.json", "a", answers)]).results[0].parts}
    assert all(r.verdict == "correct" for r in parts.values()), parts
    assert parts["q1.A"].entries == 9 + 4 and parts["q1.O"].entries == 6 + 4
    # The form's full grid (padding saved as null) reads the same.
    padded = {**answers, "q1.O": [o[0].tolist(), o[1].tolist() + [[None, None]]]}
    assert grade(key, [Submission("a.json", "a", padded)]).results[0].parts[1].verdict == "correct"
    # One wrong entry in the short chunk: 9 of 10.
    wrong = {**answers, "q1.O": [o[0].tolist(), (o[1] + np.array([[0, 0], [0, 5]])).tolist()]}
    part = grade(key, [Submission("a.json", "a", wrong)]).results[0].parts[1]
    assert part.verdict == "partial" and part.correct_entries == 9
    # A last chunk longer than the sequence has is a format error, not silently cut.
    long = {**answers, "q1.O": [o[0].tolist(), o[0].tolist() + [[1, 1]]]}
    assert grade(key, [Submission("a.json", "a", long)]).results[0].parts[1].verdict == "format"


def test_a_ragged_worksheet_shows_each_chunk_at_its_length():
    ws, _ = ragged_key(("a",))
    text = worksheet_markdown(ws, 0)
    assert "the last one shorter: it has 2 tokens" in text
    assert "a list of 2 matrices (3×3 and 2×2)" in text and "a list of 2 matrices (3×2 and 2×2)" in text
    assert "Only entr" not in text  # padding is not an ask the student reads about
    beta = ws.envs[0]["beta"][0]
    chunk2 = text.split("Chunk 2:", 1)[1].split("Each asked value", 1)[0]
    assert r"\beta = \begin{bmatrix} " in chunk2 and chunk2.split(r"\beta = \begin{bmatrix}", 1)[1].split(
        r"\end{bmatrix}", 1)[0].count("&") == 1  # two β in the last chunk, not three
    assert beta.shape == (2, 3)
    key_text = key_markdown(ws)
    assert "chunk 2: $A = " in key_text
    form = form_problems(ws, 0)[0].parts
    boxes = [box for block in form[0].blocks for row in block.rows for box in row]
    assert sum(box.asked for box in boxes) == 13 and len(boxes) == 18  # padded boxes disabled, saved null
    # The padding is hidden, not shown greyed out: the student sees the last chunk at its length.
    assert [box.index for box in boxes if box.absent] == [box.index for box in boxes if not box.asked]
    from qkvquiz.render.form import answer_form_html

    page = answer_form_html(ws, 0)
    assert page.count('<td hidden><input type="text" class="entry"') >= 5 and "<tr hidden>" in page
    assert form[0].shape_text == "a list of 2 matrices (3×3 and 2×2)"


def test_ragged_givens_are_written_at_each_chunks_length():
    q = [[[1, 0], [0, 1], [1, 1]], [[1, -1], [0, 2]]]
    k = [[[1, 0], [0, 1], [1, 1]], [[0, 1], [1, 0]]]
    v = [[[1, 2], [0, 1], [2, 0]], [[1, 1], [-1, 0]]]
    beta = [[1, 0.5, 0], [2, 1]]
    s0 = [[1, 0], [0, -1]]
    item = {"family": "delta.chunk_forward", "params": {"chunk": 3, "chunks": 2, "last_chunk": 2},
            "ask": ["O", "S_next"], "givens": {"Q": q, "K": k, "V": v, "beta": beta, "S": s0}}
    ws = build_worksheet(parse_spec({"title": "T", "items": [item]}), ["a"], seed=0)
    env = ws.envs[0]
    flat = lambda x: [row for chunk in x for row in chunk]  # noqa: E731
    final, outs = loop_delta(flat(q), flat(k), flat(v), [b for c in beta for b in c], s0)
    np.testing.assert_allclose(np.concatenate(real_part(env["O"][0], dict(item["params"], chunk=3), "O")), outs,
                               atol=1e-12)
    np.testing.assert_allclose(env["S_next"][0][-1], final, atol=1e-12)
    # The last chunk written at full length, or a middle chunk short: refused, saying why.
    for bad in ({"Q": [q[0], q[0]]}, {"K": [k[1], k[1]]}):
        with pytest.raises(SpecError, match="last_chunk: 2"):
            parse_spec({"title": "T", "items": [{**item, "givens": {**item["givens"], **bad}}]})
    with pytest.raises(SpecError, match="last_chunk"):
        parse_spec({"title": "T", "items": [{**item, "params": {"chunk": 3, "chunks": 1, "last_chunk": 2}}]})
    with pytest.raises(SpecError, match="last_chunk"):
        parse_spec({"title": "T", "items": [{**item, "params": {"chunk": 3, "chunks": 2, "last_chunk": 3}}]})


def test_an_audit_reads_ragged_claims():
    q = [[[1, 0], [0, 1]], [[1, 1]]]
    k = [[[1, 0], [0, 1]], [[1, 1]]]
    v = [[[1, 2], [0, 1]], [[2, 0]]]
    beta = [[1, 1], [0.5]]
    s0 = [[0, 0], [0, 0]]
    flat = lambda x: [row for chunk in x for row in chunk]  # noqa: E731
    final, outs = loop_delta(flat(q), flat(k), flat(v), [1, 1, 0.5], s0)
    claimed_o = [outs[:2].tolist(), [(outs[2] + [0, 1]).tolist()]]  # the last token's output is off by one
    item = {"family": "delta.chunk_forward", "params": {"chunk": 2, "chunks": 2, "last_chunk": 1},
            "givens": {"Q": q, "K": k, "V": v, "beta": beta, "S": s0},
            "claimed": {"O": claimed_o, "S_next": [loop_delta(q[0], k[0], v[0], [1, 1], s0)[0].tolist(),
                                                   final.tolist()]}}
    checks = {c.step: c for c in audit_spec({"title": "t", "items": [item]}).checks}
    assert checks["O"].verdict == "wrong" and [w for w, _, _ in checks["O"].wrong_entries] == ["matrix 2, row 1, column 2"]
    assert checks["S_next"].verdict == "right"


def test_the_ragged_and_cross_attention_worksheet_generates_as_written():
    """Worksheet 06 is also a spec: its items generate (fixed givens, ragged chunks written at length)."""
    from pathlib import Path

    from qkvquiz.spec import read_spec_data

    path = Path(__file__).resolve().parents[2] / "examples" / "handwritten" / "06-ragged-chunks-cross-backprop.yaml"
    data = read_spec_data(path)
    for item in data["items"]:
        item.pop("claimed")  # the claims are the audit's; the problem itself is a spec
    spec = parse_spec(data)
    ws = build_worksheet(spec, ["a"], seed=0)
    text = worksheet_markdown(ws, 0)
    assert "a list of 2 matrices (2×2 and 1×1)" in text and "1 query and 3 keys" in text
    assert "multiplied by 0.5" in text


def test_printed_worksheet_draws_each_chunk_of_a_ragged_sequence_at_its_own_length():
    from qkvquiz.render.documents import problem_areas

    spec = parse_spec({"title": "T", "items": [{"family": "delta.chunk_forward",
                                                "params": {"chunks": 2, "chunk": 3, "last_chunk": 2},
                                                "ask": ["X"]}]})
    (_, area), = problem_areas(build_worksheet(spec, ["a"], seed=0), 0)[0]
    # Chunk 1 is C = 3 tokens, chunk 2 its 2 real tokens: no boxes for padding.
    assert re.findall(r"boxes r(\d) c\d", area) == ["3", "2"]
    assert "q1.X, matrix 2" in area


def test_feedback_shows_only_the_asked_entries_of_the_right_value():
    from qkvquiz.grade.feedback import feedback_markdown
    from qkvquiz.grade.grader import Submission, grade
    from qkvquiz.key import key_from_json, key_to_json

    spec = parse_spec({"title": "T", "items": [
        {"family": "attention.output", "params": {"queries": 2, "keys": 3, "d_k": 4},
         "ask": {"scores": {"entries": [[1, 2], [1, 3]]}}},
        {"family": "delta.chunk_forward", "params": {"chunks": 2, "chunk": 3, "last_chunk": 2}, "ask": ["X"]}]})
    ws = build_worksheet(spec, ["a"], seed=0)
    key = key_from_json(key_to_json(ws))
    scores, x = ws.envs[0]["scores"][0], ws.envs[1]["X"][0]
    answers = {"q1.scores": [[None, float(scores[0, 1]) + 3, float(scores[0, 2])], [None] * 3],
               "q2.X": [(x[0] + 5).tolist(), (x[1][:2] + 5).tolist()]}  # chunk 2 written at its 2 tokens
    report = grade(key, [Submission("a.json", "a", answers)])
    text = feedback_markdown(report, report.results[0])
    scores_table = text.split("q1.scores", 1)[1].split("q2.X", 1)[0]
    # Four entries of the 2×3 scores are not asked: "—", never their values; one wrong entry is listed.
    assert "| row 2 | — | — | — |" in scores_table and scores_table.count("| row 1 | — | ") == 1
    assert "row 1, column 2" in scores_table and "row 1, column 3" not in scores_table
    # The padding token of chunk 2 (its third row) is "—" in each column, not a 0 to copy.
    matrix2 = text.split("q2.X", 1)[1].split("Matrix 2:", 1)[1]
    assert "| row 3 | — | — |" in matrix2 and "matrix 2, row 3" not in text
