"""Delta-rule forms a teacher writes: β at its edges, a chunk of one token, and a sequence whose
last chunk is shorter than the others (ragged).

Each form is checked against the recurrence written out token by token, the engine's ragged path
and torch autograd where installed; every known mistake that applies must be told apart from the
right answer on the real entries; a ragged answer is graded, shown and printed at each chunk's
length.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from qkvquiz.engine.delta import chunked_backward, chunked_forward
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.form import form_problems
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.spec import SpecError, parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import ROSTER, loop_delta, solved

# --------------------------------------------------------------------------- β at its edges, a chunk of one token


@pytest.mark.parametrize("beta", [[0.0, 1.0], [2.0, 0.0], [2.0, 2.0]])
def test_delta_recurrent_with_beta_at_the_edges(beta):
    q, k, v, s0 = [[1, 0], [0, 1]], [[1, 0], [0, 1]], [[2, -1], [1, 1]], [[1, 2], [0, -1]]
    item = {"family": "delta.recurrent", "params": {"tokens": 2},
            "givens": {"Q": q, "K": k, "V": v, "beta": beta, "S0": s0}}
    ws = build_worksheet(parse_spec({"title": "T", "items": [item]}), ["a"], seed=0)
    final, outs = loop_delta(q, k, v, beta, s0)
    np.testing.assert_allclose(ws.envs[0]["final_state"][0], final, atol=1e-12)
    np.testing.assert_allclose(ws.envs[0]["outputs"][0], outs, atol=1e-12)
    if beta[0] == 0:  # β = 0 writes nothing: the first state is S₀
        np.testing.assert_array_equal(ws.envs[0]["states"][0, 0], s0)


def test_a_chunk_of_one_token_is_one_recurrent_step():
    _, env, _ = solved("delta.chunk_forward", {"chunk": 1, "chunks": 3}, ask=["O", "S_next"])
    for b in range(len(ROSTER)):
        q, k, v = env["Q"][b].reshape(3, -1), env["K"][b].reshape(3, -1), env["V"][b].reshape(3, -1)
        beta = env["beta"][b].reshape(3)
        final, outs = loop_delta(q, k, v, beta, env["S"][b])
        np.testing.assert_allclose(env["O"][b].reshape(3, -1), outs, atol=1e-12)
        np.testing.assert_allclose(env["S_next"][b][-1], final, atol=1e-12)
    np.testing.assert_array_equal(env["A"], 1.0)  # A = I for C = 1


def test_a_ragged_last_chunk_is_a_chunk_item_of_its_own_length():
    # Five tokens with C = 2: chunks of 2, 2 and a last one of 1, each from the state before it.
    rng = np.random.default_rng(4)
    q, k, v = (rng.integers(-1, 2, (5, 2)).astype(float) for _ in range(3))
    beta = [0.5, 1, 0, 2, 1]
    s = np.zeros((2, 2))
    final, outs = loop_delta(q, k, v, beta, s)
    got = []
    for lo, hi in ((0, 2), (2, 4), (4, 5)):
        item = {"family": "delta.chunk_forward", "params": {"chunk": hi - lo}, "ask": ["O", "S_next"],
                "givens": {"Q": q[lo:hi].tolist(), "K": k[lo:hi].tolist(), "V": v[lo:hi].tolist(),
                           "beta": beta[lo:hi], "S": s.tolist()}}
        env = build_worksheet(parse_spec({"title": "T", "items": [item]}), ["a"], seed=0).envs[0]
        got.append(env["O"][0])
        s = env["S_next"][0]
    np.testing.assert_allclose(np.concatenate(got), outs, atol=1e-12)
    np.testing.assert_allclose(s, final, atol=1e-12)


# --------------------------------------------------------------------------- a ragged last chunk


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
    from qkvquiz.render.answer_areas import problem_areas

    spec = parse_spec({"title": "T", "items": [{"family": "delta.chunk_forward",
                                                "params": {"chunks": 2, "chunk": 3, "last_chunk": 2},
                                                "ask": ["X"]}]})
    (_, area), = problem_areas(build_worksheet(spec, ["a"], seed=0), 0)[0]
    # Chunk 1 is C = 3 tokens, chunk 2 its 2 real tokens: no boxes for padding.
    assert re.findall(r"boxes r(\d) c\d", area) == ["3", "2"]
    assert ">matrix 2<" in area and "q1.X," not in area  # its place, not the internal id
