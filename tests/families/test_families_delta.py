"""Delta-rule families: the recurrence, the chunk forward against the recurrence (several chunks,
a ragged last one), every chunk backward step as a true gradient, mistakes told apart, output.

Oracles: the recurrence Sₜ = Sₜ₋₁(I − βₜkₜkₜᵀ) + βₜvₜkₜᵀ written out token by token here,
a chunk written with numpy.linalg.solve, central finite differences, torch autograd.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


from qkvquiz.families import Env, get_family
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.core.seeding import Draw
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import assert_every_mistake_told_apart, fd_grad, total

TORCH_TOL = 1e-10
FD_RTOL = 1e-7
FD_ATOL = 1e-8
FAMILIES = ("delta.recurrent", "delta.chunk_forward", "delta.chunk_backward")
NUMERIC = {"unit_keys": True, "beta": "uniform", "d_k": 4, "d_v": 3}

SETTINGS = {
    "delta.recurrent": [{}, {"tokens": 3, "d_k": 3}, {"state": "zero", "tokens": 3}, {"tokens": 6, **NUMERIC}],
    "delta.chunk_forward": [{}, {"chunk": 2, "chunks": 2}, {"chunk": 4, "chunks": 3, **NUMERIC}, {"d_k": 3, "beta": "half"}],
    "delta.chunk_backward": [
        {}, {"chunks": 2}, {"chunk": 3, "d_k": 3, "beta": "half"}, {"final_grad": "zero"},
        {"chunk": 4, "chunks": 3, **NUMERIC},
        # C = 1: A = I, and each chunk is one step of the recurrence.
        {"chunk": 1}, {"chunk": 1, "chunks": 3, **NUMERIC}, {"chunk": 1, "chunks": 2, "final_grad": "zero"},
    ],
}


def cases():
    return [(name, params) for name in FAMILIES for params in SETTINGS[name]]


def solved(name: str, params: dict, students: int = 5, seed: int = 0, ask=None):
    fam = get_family(name)
    if ask is None and params.get("chunk") == 1:
        ask = fam.asked_by_default(fam.resolve(params))  # with C = 1 some steps equal others
    item = {"family": name, "params": params, "ask": list(ask or fam.askable_steps)}
    ws = build_worksheet(parse_spec({"title": "t", "items": [item]}), [f"s{i}" for i in range(students)], seed)
    return ws, ws.spec.items[0], ws.envs[0]


def T(x):
    return np.swapaxes(x, -1, -2)


# ----------------------------------------------------------------- independent oracles


def recurrence(q, k, v, beta, s0):
    """States and outputs token by token, with the transition matrix I − βkkᵀ written out."""
    s, states, outputs = s0, [], []
    eye = np.eye(k.shape[-1])
    for t in range(k.shape[-2]):
        kt, vt, bt = k[:, t], v[:, t], beta[:, t, None, None]
        s = s @ (eye - bt * np.einsum("bi,bj->bij", kt, kt)) + bt * np.einsum("bi,bj->bij", vt, kt)
        states.append(s)
        outputs.append(np.einsum("bij,bj->bi", s, q[:, t]))
    return np.stack(states, axis=1), np.stack(outputs, axis=1)


def naive_chunk(q, k, v, beta, s, **given):
    """One chunk from any intermediate on: pass e.g. X=… to treat X as a free input."""
    c = k.shape[-2]
    g = given.get("G", k @ T(k))
    a = given.get("A", np.eye(c) + np.tril(beta[..., :, None] * g, -1))
    bk = given.get("BK", beta[..., :, None] * k)
    bv = given.get("BV", beta[..., :, None] * v)
    w = given.get("W", np.linalg.solve(a, bk))
    u = given.get("U", np.linalg.solve(a, bv))
    x = given.get("X", u - w @ T(s))
    t = given.get("T", q @ T(k))
    p = given.get("P", t * np.tril(np.ones((c, c))))
    return q @ T(s) + p @ x, s + T(x) @ k


def per_chunk(e: Env, chunks: int):
    """Each chunk's own values (every given and step), as a list of Envs."""
    if chunks == 1:
        return [e]
    shared = {"S", "dS_next"}
    return [Env({n: (v if n in shared else v[:, c]) for n, v in e.items()}) for c in range(chunks)]


def flat(x, chunks: int, vector: bool = False):
    """Per-chunk arrays (batch, chunks, C, …) as one sequence (batch, chunks·C, …)."""
    if chunks == 1:
        return x
    return x.reshape(x.shape[0], -1) if vector else x.reshape(x.shape[0], -1, x.shape[-1])


# --------------------------------------------------------------------- delta.recurrent


@pytest.mark.parametrize("params", SETTINGS["delta.recurrent"])
def test_recurrent_family_matches_the_written_out_recurrence(params):
    _, _, e = solved("delta.recurrent", params)
    states, outputs = recurrence(e.Q, e.K, e.V, e.beta, e.S0)
    np.testing.assert_allclose(e.states, states, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(e.outputs, outputs, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(e.final_state, states[:, -1], rtol=1e-13, atol=1e-13)
    previous = np.concatenate([e.S0[:, None], states[:, :-1]], axis=1)
    np.testing.assert_allclose(e.recalled, np.einsum("btij,btj->bti", previous, e.K), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["delta.recurrent", "delta.chunk_forward", "delta.chunk_backward"])
def test_unit_keys_and_uniform_betas_are_drawn_to_the_two_decimals_shown(name):
    _, _, e = solved(name, NUMERIC, ask=get_family(name).default_ask)
    # Unit length up to the two decimals they are printed with.
    np.testing.assert_allclose(np.linalg.norm(e.K, axis=-1), 1.0, atol=0.01)
    np.testing.assert_allclose(e.K * 100, np.round(e.K * 100), atol=1e-9)
    assert not np.all(e.K == np.round(e.K))
    np.testing.assert_allclose(e.beta * 100, np.round(e.beta * 100), atol=1e-9)
    assert np.all((e.beta >= 0.1) & (e.beta <= 1.9))


def test_hand_settings_give_exact_short_decimals():
    """Integer keys with β ∈ {½, 1}: every state and output is a multiple of 1/2^k (exact in binary)."""
    _, _, e = solved("delta.recurrent", {"tokens": 3}, students=20)
    for name in ("states", "outputs"):
        scaled = e[name] * 2**6
        np.testing.assert_array_equal(scaled, np.round(scaled))
    assert np.abs(e.states).max() <= 100


# ------------------------------------------------------------ chunk forward vs recurrence


@pytest.mark.parametrize("params", SETTINGS["delta.chunk_forward"])
def test_chunk_forward_family_matches_the_recurrence(params):
    _, item, e = solved("delta.chunk_forward", params)
    n = item.params.chunks
    states, outputs = recurrence(flat(e.Q, n), flat(e.K, n), flat(e.V, n), flat(e.beta, n, vector=True), e.S)
    np.testing.assert_allclose(flat(e.O, n), outputs, rtol=1e-12, atol=1e-12)
    c = item.params.chunk
    ends = states[:, c - 1 :: c]  # the state after each chunk
    np.testing.assert_allclose(e.S_next if n > 1 else e.S_next[:, None], ends, rtol=1e-12, atol=1e-12)
    if n > 1:  # each chunk enters with the state the one before ends with
        np.testing.assert_array_equal(e.S_in[:, 1:], e.S_next[:, :-1])


def test_chunk_forward_steps_are_the_matrix_formulas():
    _, _, e = solved("delta.chunk_forward", {"chunk": 4, **NUMERIC})
    np.testing.assert_allclose(e.A @ e.W, e.BK, atol=1e-13)  # W solves A W = B_K
    np.testing.assert_allclose(e.A @ e.U, e.BV, atol=1e-13)
    assert np.all(np.triu(e.A, 1) == 0) and np.all(np.diagonal(e.A, axis1=-2, axis2=-1) == 1)
    o, s_next = naive_chunk(e.Q, e.K, e.V, e.beta, e.S)
    np.testing.assert_allclose(e.O, o, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(e.S_next, s_next, rtol=1e-12, atol=1e-12)


def chain_forward(fam, params, q, k, v, beta, s, c):
    """The one-chunk family run over consecutive chunks of length c (the last may be shorter)."""
    outs, envs = [], []
    for lo in range(0, k.shape[1], c):
        hi = min(lo + c, k.shape[1])
        e = fam.solve({"Q": q[:, lo:hi], "K": k[:, lo:hi], "V": v[:, lo:hi], "beta": beta[:, lo:hi], "S": s}, params)
        outs.append(e.O)
        envs.append(e)
        s = e.S_next
    return np.concatenate(outs, axis=1), s, envs


def random_sequence(rng, batch, n, d_k, d_v, unit=True):
    q = rng.normal(size=(batch, n, d_k))
    k = rng.normal(size=(batch, n, d_k))
    if unit:
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    return q, k, rng.normal(size=(batch, n, d_v)), rng.uniform(0.1, 1.9, size=(batch, n)), rng.normal(size=(batch, d_v, d_k))


@pytest.mark.parametrize("n, c", [(7, 3), (10, 4), (5, 5), (9, 2)])
def test_chunk_forward_over_several_chunks_with_a_ragged_last_one(n, c):
    fam = get_family("delta.chunk_forward")
    params = fam.resolve({"chunk": c, "d_k": 3, "d_v": 2})
    q, k, v, beta, s0 = random_sequence(np.random.default_rng(n * 10 + c), 4, n, 3, 2)
    outputs, final, _ = chain_forward(fam, params, q, k, v, beta, s0, c)
    states, expected = recurrence(q, k, v, beta, s0)
    np.testing.assert_allclose(outputs, expected, rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(final, states[:, -1], rtol=1e-11, atol=1e-11)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 9),
    c=st.integers(1, 4),
    d_k=st.integers(1, 4),
    d_v=st.integers(1, 3),
    unit=st.booleans(),
)
def test_chunked_family_equals_the_recurrence_on_random_sequences(seed, n, c, d_k, d_v, unit):
    fam = get_family("delta.chunk_forward")
    params = fam.resolve({"d_k": d_k, "d_v": d_v})
    q, k, v, beta, s0 = random_sequence(np.random.default_rng(seed), 3, n, d_k, d_v, unit)
    outputs, final, _ = chain_forward(fam, params, q, k, v, beta, s0, c)
    states, expected = recurrence(q, k, v, beta, s0)
    scale = 1 + np.abs(expected).max()
    np.testing.assert_allclose(outputs, expected, rtol=1e-9, atol=1e-9 * scale)
    np.testing.assert_allclose(final, states[:, -1], rtol=1e-9, atol=1e-9 * (1 + np.abs(final).max()))


# ------------------------------------------------------------------- chunk backward


LOCAL = ("G", "A", "BK", "BV", "W", "U", "X", "T", "P")
STEP_OF = {"G": "dG", "A": "dA", "BK": "dBK", "BV": "dBV", "W": "dW", "U": "dU", "X": "dX", "T": "dT", "P": "dP"}


def chunk_loss(e: Env, **given):
    def loss(**free):
        o, s_next = naive_chunk(free.get("Q", e.Q), free.get("K", e.K), free.get("V", e.V), free.get("beta", e.beta),
                                free.get("S", e.S_in), **{**given, **{k: v for k, v in free.items() if k in LOCAL}})
        return total(e.dO, o) + total(e.dS_in, s_next)
    return loss


def check_chunk_by_finite_differences(e: Env):
    """Every backward step of one chunk: ∂L/∂(that quantity) with L = Σ Ō⊙O + Σ S̄⁺⊙S⁺."""
    loss = chunk_loss(e)
    for name in LOCAL:
        # Everything before `name` stays as computed; `name` is the free input.
        expected = fd_grad(lambda x: loss(**{name: x}), e[name])
        np.testing.assert_allclose(e[STEP_OF[name]], expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=STEP_OF[name])
    for given_name, step in (("Q", "dQ"), ("K", "dK"), ("V", "dV"), ("beta", "dbeta"), ("S", "dS")):
        source = e.S_in if given_name == "S" else e[given_name]
        expected = fd_grad(lambda x: loss(**{given_name: x}), source)
        np.testing.assert_allclose(e[step], expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=step)


@pytest.mark.parametrize("params", SETTINGS["delta.chunk_backward"])
def test_every_chunk_backward_step_matches_finite_differences(params):
    _, item, e = solved("delta.chunk_backward", params, students=3)
    chunks = per_chunk(e, item.params.chunks)
    for c, env in enumerate(chunks):
        check_chunk_by_finite_differences(env)
        # What chunk c receives is what chunk c + 1 hands back; the last receives the given S̄⁺.
        handed = chunks[c + 1].dS if c + 1 < len(chunks) else e.dS_next
        np.testing.assert_array_equal(env.dS_in, handed)


def sequence_loss(e: Env, chunks: int):
    """L = Σ Ō⊙o + Σ S̄⁺⊙S_final through the whole recurrence, as a function of one input."""
    def loss(**free):
        q, k, v = (free.get(n, flat(e[n], chunks)) for n in ("Q", "K", "V"))
        beta = free.get("beta", flat(e.beta, chunks, vector=True))
        states, outputs = recurrence(q, k, v, beta, free.get("S", e.S))
        return total(flat(e.dO, chunks), outputs) + total(e.dS_next, states[:, -1])
    return loss


@pytest.mark.parametrize("params", [{"chunks": 2}, {"chunks": 3, "chunk": 3, **NUMERIC}, {"chunks": 4, "chunk": 1},
                                    {"chunks": 3, "chunk": 1, **NUMERIC}])
def test_several_chunks_give_the_gradient_of_the_whole_sequence(params):
    _, item, e = solved("delta.chunk_backward", params, students=3)
    n = item.params.chunks
    loss = sequence_loss(e, n)
    for name, step in (("Q", "dQ"), ("K", "dK"), ("V", "dV"), ("beta", "dbeta")):
        vector = name == "beta"
        expected = fd_grad(lambda x: loss(**{name: x}), flat(e[name], n, vector))
        np.testing.assert_allclose(flat(e[step], n, vector), expected, rtol=FD_RTOL, atol=FD_ATOL, err_msg=step)
    expected = fd_grad(lambda x: loss(S=x), e.S)
    np.testing.assert_allclose(e.dS[:, 0], expected, rtol=FD_RTOL, atol=FD_ATOL)  # S̄ of the first chunk is ∂L/∂S₀


def chain_backward(fam, params, q, k, v, beta, s0, d_o, d_final, c):
    """The one-chunk backward family over consecutive chunks, last first, handing S̄ back."""
    _, _, forward = chain_forward(get_family("delta.chunk_forward"), params, q, k, v, beta, s0, c)
    grads, ds = [], d_final
    starts = np.cumsum([0] + [f.K.shape[1] for f in forward])
    for i in reversed(range(len(forward))):
        f, lo, hi = forward[i], starts[i], starts[i + 1]
        e = fam.solve({"Q": f.Q, "K": f.K, "V": f.V, "beta": f.beta, "S": f.S, "dO": d_o[:, lo:hi], "dS_next": ds},
                      params)
        grads.insert(0, e)
        ds = e.dS
    return {
        "dQ": np.concatenate([g.dQ for g in grads], axis=1),
        "dK": np.concatenate([g.dK for g in grads], axis=1),
        "dV": np.concatenate([g.dV for g in grads], axis=1),
        "dbeta": np.concatenate([g.dbeta for g in grads], axis=1),
        "dS0": ds,
    }


def torch_sequence(torch, q, k, v, beta, s0, d_o, d_final):
    """Gradients of Σ Ō⊙o + Σ S̄⁺⊙S_T through the token recurrence, by torch autograd."""
    tq, tk, tv, tb, ts = (torch.tensor(a, requires_grad=True) for a in (q, k, v, beta, s0))
    s, outs = ts, []
    eye = torch.eye(k.shape[-1], dtype=torch.float64)
    for t in range(k.shape[1]):
        kt, vt, bt = tk[:, t], tv[:, t], tb[:, t, None, None]
        s = s @ (eye - bt * kt[:, :, None] * kt[:, None, :]) + bt * vt[:, :, None] * kt[:, None, :]
        outs.append((s @ tq[:, t, :, None])[..., 0])
    loss = (torch.stack(outs, 1) * torch.tensor(d_o)).sum() + (s * torch.tensor(d_final)).sum()
    loss.backward()
    return {"dQ": tq.grad, "dK": tk.grad, "dV": tv.grad, "dbeta": tb.grad, "dS0": ts.grad}


@pytest.mark.parametrize("n, c", [(7, 3), (5, 2), (4, 4)])
def test_chunk_backward_over_a_ragged_sequence_matches_finite_differences(n, c):
    fam = get_family("delta.chunk_backward")
    params = fam.resolve({"chunk": max(c, 2), "d_k": 3, "d_v": 2})
    rng = np.random.default_rng(n + 100 * c)
    q, k, v, beta, s0 = random_sequence(rng, 2, n, 3, 2)
    d_o, d_final = rng.normal(size=(2, n, 2)), rng.normal(size=(2, 2, 3))
    got = chain_backward(fam, params, q, k, v, beta, s0, d_o, d_final, c)

    def loss(q=q, k=k, v=v, beta=beta, s0=s0):
        states, outputs = recurrence(q, k, v, beta, s0)
        return total(d_o, outputs) + total(d_final, states[:, -1])

    for name, x, step in (("q", q, "dQ"), ("k", k, "dK"), ("v", v, "dV"), ("beta", beta, "dbeta"), ("s0", s0, "dS0")):
        np.testing.assert_allclose(got[step], fd_grad(lambda y: loss(**{name: y}), x), rtol=FD_RTOL, atol=FD_ATOL,
                                   err_msg=step)


@pytest.mark.parametrize("n, c", [(7, 3), (9, 4)])
def test_chunk_backward_over_a_ragged_sequence_matches_torch(n, c):
    torch = pytest.importorskip("torch")
    fam = get_family("delta.chunk_backward")
    params = fam.resolve({"chunk": c, "d_k": 4, "d_v": 3})
    rng = np.random.default_rng(7 * n + c)
    q, k, v, beta, s0 = random_sequence(rng, 3, n, 4, 3)
    d_o, d_final = rng.normal(size=(3, n, 3)), rng.normal(size=(3, 3, 4))
    got = chain_backward(fam, params, q, k, v, beta, s0, d_o, d_final, c)
    expected = torch_sequence(torch, q, k, v, beta, s0, d_o, d_final)
    for step in got:
        np.testing.assert_allclose(got[step], expected[step].numpy(), rtol=TORCH_TOL, atol=TORCH_TOL, err_msg=step)


@pytest.mark.parametrize("params", [{}, {"chunks": 2, "chunk": 3, **NUMERIC}, {"chunk": 1, "chunks": 3, **NUMERIC}])
def test_every_chunk_backward_step_matches_torch_autograd(params):
    torch = pytest.importorskip("torch")
    _, item, e = solved("delta.chunk_backward", params, students=3)
    for env in per_chunk(e, item.params.chunks):
        t = {n: torch.tensor(np.asarray(env[n]), requires_grad=True) for n in ("Q", "K", "V", "beta", "S_in")}
        c = env.K.shape[-1 - 1]
        mids = {}
        mids["G"] = t["K"] @ t["K"].transpose(-1, -2)
        mids["A"] = torch.eye(c, dtype=torch.float64) + torch.tril(t["beta"][..., :, None] * mids["G"], -1)
        mids["BK"] = t["beta"][..., :, None] * t["K"]
        mids["BV"] = t["beta"][..., :, None] * t["V"]
        mids["W"] = torch.linalg.solve(mids["A"], mids["BK"])
        mids["U"] = torch.linalg.solve(mids["A"], mids["BV"])
        mids["X"] = mids["U"] - mids["W"] @ t["S_in"].transpose(-1, -2)
        mids["T"] = t["Q"] @ t["K"].transpose(-1, -2)
        mids["P"] = mids["T"] * torch.tril(torch.ones(c, c, dtype=torch.float64))
        for m in mids.values():
            m.retain_grad()
        o = t["Q"] @ t["S_in"].transpose(-1, -2) + mids["P"] @ mids["X"]
        s_next = t["S_in"] + mids["X"].transpose(-1, -2) @ t["K"]
        ((o * torch.tensor(env.dO)).sum() + (s_next * torch.tensor(env.dS_in)).sum()).backward()
        expected = {STEP_OF[n]: m.grad for n, m in mids.items()}
        expected.update(dQ=t["Q"].grad, dK=t["K"].grad, dV=t["V"].grad, dbeta=t["beta"].grad, dS=t["S_in"].grad)
        for step, value in expected.items():
            np.testing.assert_allclose(env[step], value.numpy(), rtol=TORCH_TOL, atol=TORCH_TOL, err_msg=step)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**63 - 1),
    chunk=st.integers(2, 4),
    chunks=st.integers(1, 3),
    d_k=st.integers(1, 3),
    d_v=st.integers(1, 3),
    unit_keys=st.booleans(),
    beta=st.sampled_from(["half", "one", "half_or_one", "uniform"]),
)
def test_chunk_backward_on_random_draws(seed, chunk, chunks, d_k, d_v, unit_keys, beta):
    """Unfiltered draws of the family itself: each chunk's steps agree with finite differences."""
    fam = get_family("delta.chunk_backward")
    p = fam.resolve({"chunk": chunk, "chunks": chunks, "d_k": d_k, "d_v": d_v, "unit_keys": unit_keys, "beta": beta})
    e = fam.solve(fam.sample(Draw([seed]), p), p)
    for env in per_chunk(e, chunks):
        scale = 1 + max(np.abs(env[n]).max() for n in ("dK", "dS", "dA"))
        loss = chunk_loss(env)
        for given_name, step in (("K", "dK"), ("beta", "dbeta"), ("S", "dS")):
            source = env.S_in if given_name == "S" else env[given_name]
            expected = fd_grad(lambda x: loss(**{given_name: x}), source)
            np.testing.assert_allclose(env[step], expected, rtol=1e-6, atol=1e-7 * scale, err_msg=step)


# ------------------------------------------------------------ mistakes are told apart


def test_every_misconception_differs_from_the_answer_on_accepted_variants():
    assert_every_mistake_told_apart(
        ((f"{name} {params}", *solved(name, params, students=30)[1:]) for name, params in cases()), FAMILIES
    )


def test_the_listed_chunk_mistakes_are_there():
    forward = {(m.step, m.name) for m in get_family("delta.chunk_forward").misconceptions}
    assert {("W", "A_transposed"), ("P", "strict_mask"), ("A", "inclusive_triangle")} <= forward
    aT = next(m for m in get_family("delta.chunk_forward").misconceptions if m.name == "A_transposed" and m.step == "W")
    _, item, e = solved("delta.chunk_forward", {})
    np.testing.assert_allclose(aT.fn(e, item.params, np), T(e.A) @ e.BK)


# ------------------------------------------------------------------ readable output


def test_key_and_worksheet_markdown_render_every_family_and_setting():
    items = [{"family": n, "params": p, "ask": list(get_family(n).asked_by_default(get_family(n).resolve(p)))}
             for n, p in cases()]
    ws = build_worksheet(parse_spec({"title": "Delta", "items": items}), ["ada", "alan"], seed=4)
    key_md = key_markdown(ws)
    sheet = worksheet_markdown(ws, 1)
    for number, item in enumerate(ws.spec.items, start=1):
        assert f"Problem {number}:" in sheet
        for part in item.parts:
            assert f"`{part.id}`" in key_md and f"`{part.id}`" in sheet
    assert "{{" not in key_md and not re.search(r"\bnan\b", key_md)
    # Substitutions are written out for the small settings.
    assert r"w_{2} = \beta_{2} k_{2}" in key_md and r"\bar b^K_{1}" in key_md and "Token 2" in key_md


def test_chunk_backward_takes_chunk_1_as_chunk_forward_does():
    # C = 1 is the recurrence itself: both families accept it, and the backward's chunks of one
    # token hand back the gradients of the token-by-token rule (checked above by finite differences).
    for name in ("delta.chunk_forward", "delta.chunk_backward"):
        spec = parse_spec({"title": "t", "items": [{"family": name, "params": {"chunk": 1, "chunks": 2}}]})
        assert spec.items[0].params.chunk == 1


def test_chunk_1_lists_no_mistake_that_gives_the_right_answer():
    # A = I, P is one entry and G has no strict lower triangle: those slips change nothing.
    fam = get_family("delta.chunk_backward")
    one, two = fam.resolve({"chunk": 1, "beta": "uniform"}), fam.resolve({"chunk": 2, "beta": "uniform"})
    gone = {("dX", "untransposed_P"), ("dK", "one_sided_G"), ("dBK", "no_solve"), ("dBV", "no_solve"),
            ("dG", "no_beta"), ("dT", "unmasked"), ("dbeta", "missing_A_path")}
    listed = lambda p: {(m.step, m.name) for s in fam.step_names for m in fam.mistakes_for(s, p)}
    assert gone <= listed(two) and not gone & listed(one)


@pytest.mark.parametrize("chunks", [1, 3])
def test_chunk_1_backward_is_the_recurrent_delta_rule_backward(chunks):
    # Against the recurrence written out token by token (tests.helpers.loop_delta), by finite differences.
    from ..helpers import loop_delta

    _, _, e = solved("delta.chunk_backward", {"chunk": 1, "chunks": chunks, **NUMERIC}, students=3)
    q, k, v = (flat(e[n], chunks) for n in ("Q", "K", "V"))
    beta = flat(e.beta, chunks, vector=True)
    d_o = flat(e.dO, chunks)

    def loss_of(q_, k_, v_, beta_, s0_):
        out = []
        for row in range(q_.shape[0]):
            s_t, o = loop_delta(q_[row], k_[row], v_[row], beta_[row], s0_[row])
            out.append((o * d_o[row]).sum() + (s_t * e.dS_next[row]).sum())
        return np.array(out)

    args = {"Q": q, "K": k, "V": v, "beta": beta, "S": e.S}
    for name, step in (("Q", "dQ"), ("K", "dK"), ("V", "dV"), ("beta", "dbeta")):
        def loss(x, name=name):
            return loss_of(*({**args, name: x}[n] for n in ("Q", "K", "V", "beta", "S")))
        vector = name == "beta"
        np.testing.assert_allclose(flat(e[step], chunks, vector), fd_grad(loss, args[name]), rtol=1e-6, atol=1e-7,
                                   err_msg=step)
    first = e.dS[:, 0] if chunks > 1 else e.dS  # S̄ of the first chunk is ∂L/∂S₀
    np.testing.assert_allclose(first, fd_grad(lambda x: loss_of(q, k, v, beta, x), e.S), rtol=1e-6, atol=1e-7)
