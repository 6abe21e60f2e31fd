"""Forms of hand-written problems: queries and keys counted apart, one token, scale choices.

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

from ..helpers import ROSTER, assert_every_mistake_told_apart, loop_delta, solved



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


# --------------------------------------------------------------------------- partial asks

from qkvquiz.grade.audit import audit_spec  # noqa: E402
from qkvquiz.grade.grader import Submission, grade  # noqa: E402
from qkvquiz.key import key_from_json, key_to_json  # noqa: E402
from qkvquiz.render.form import form_problems  # noqa: E402
from qkvquiz.render.markdown import worksheet_markdown  # noqa: E402

PARTIAL = {"family": "attention.output", "params": {"queries": 2, "keys": 3},
           "ask": {"scores": {"points": 2, "entries": [[1, 2], [1, 3]]}, "weights": {"rows": [1]}}}


def partial_key():
    spec = parse_spec({"title": "T", "items": [PARTIAL]})
    ws = build_worksheet(spec, ["a", "b"], seed=1)
    return ws, key_from_json(key_to_json(ws))


def test_a_partial_ask_keeps_its_entries_through_the_key():
    ws, key = partial_key()
    scores, weights = key.items[0].parts
    assert scores.entries == ((0, 1), (0, 2)) and scores.points == 2
    assert weights.entries == ((0, 0), (0, 1), (0, 2))
    text = worksheet_markdown(ws, 0)
    assert "Only entries (1, 2) and (1, 3) asked" in text and "Only row 1 asked" in text


def test_a_partial_part_is_graded_on_its_entries_only():
    ws, key = partial_key()
    env = ws.envs[0]
    s, a = env["scores"][0], env["weights"][0]
    # The asked entries right, everything else wrong or empty: full marks.
    scores = [[99, float(s[0, 1]), float(s[0, 2])], [None, None, None]]
    weights = [[float(x) for x in a[0]], [5, 5, 5]]
    report = grade(key, [Submission("a.json", "a", {"q1.scores": scores, "q1.weights": weights})])
    parts = {p.part: p for p in report.results[0].parts}
    assert parts["q1.scores"].verdict == "correct" and parts["q1.scores"].entries == 2
    assert parts["q1.weights"].verdict == "correct" and parts["q1.weights"].entries == 3
    # One asked entry wrong: half the points of the scores part.
    scores[0][1] = float(s[0, 1]) + 1
    report = grade(key, [Submission("a.json", "a", {"q1.scores": scores})])
    part = report.results[0].parts[0]
    assert part.verdict == "partial" and part.score == pytest.approx(1.0)
    # Only boxes outside the asked entries filled: not answered.
    report = grade(key, [Submission("a.json", "a", {"q1.scores": [[1, None, None], [1, 2, 3]]})])
    assert report.results[0].parts[0].verdict == "missing"


def test_the_form_disables_the_boxes_not_asked():
    ws, _ = partial_key()
    part = form_problems(ws, 0)[0].parts[0]
    asked = [box.asked for block in part.blocks for row in block.rows for box in row]
    assert asked == [False, True, True, False, False, False]


def test_a_spec_asking_entries_outside_the_step_is_refused():
    bad = {**PARTIAL, "ask": {"scores": {"entries": [[3, 1]]}}}
    with pytest.raises(SpecError, match="not in the step's 2×3 shape"):
        parse_spec({"title": "T", "items": [bad]})
    bad = {**PARTIAL, "ask": {"scores": {"rows": [1], "entries": [[1, 1]]}}}
    with pytest.raises(SpecError, match="either"):
        parse_spec({"title": "T", "items": [bad]})


def test_audit_null_entries_are_not_claimed_and_unneeded_givens_may_be_left_out():
    # Query 1's scores against keys 2 and 3 only; no V (the output is not claimed).
    item = {"family": "attention.output", "params": {"queries": 1, "keys": 3, "d_k": 2},
            "givens": {"Q": [[1, 2]], "K": [[1, 0], [0, 1], [1, 1]]},
            "claimed": {"scores": [None, 1.414, 2.5], "weights": [None, 0.2, None]}}
    report = audit_spec({"title": "t", "items": [item]})
    checks = {c.step: c for c in report.checks}
    # Right: s12 = 2/√2 = 1.414; wrong: s13 = 3/√2 = 2.121 (2.5 claimed); a12 = e^1.414/Σ.
    assert checks["scores"].verdict == "wrong"
    assert [w for w, _, _ in checks["scores"].wrong_entries] == ["row 1, column 3"]
    s = np.array([1, 2, 3]) / math.sqrt(2)
    a = np.exp(s) / np.exp(s).sum()
    assert checks["weights"].verdict == ("right" if abs(a[1] - 0.2) <= 0.01 else "wrong")
    # A claim that needs a given left out is refused, naming it.
    item["claimed"] = {"output": [[1, 2]]}
    with pytest.raises(SpecError, match="missing: V"):
        audit_spec({"title": "t", "items": [item]})


def test_audit_reads_a_single_token_claim_as_a_number():
    item = {"family": "attention.output", "params": {"tokens": 1, "d_k": 2, "d_v": 2},
            "givens": {"Q": [1, 1], "K": [2, 0], "V": [3, 4]},
            "claimed": {"scores": 1.414, "weights": 1, "output": [3, 5]}}
    checks = {c.step: c for c in audit_spec({"title": "t", "items": [item]}).checks}
    assert checks["scores"].verdict == "right" and checks["weights"].verdict == "right"
    assert checks["output"].verdict == "wrong"


# --------------------------------------------------------------------------- layer norm and delta edges


def test_layer_norm_of_one_row_with_stated_gamma_beta_eps_and_no_residual():
    item = {"family": "attention.layernorm", "params": {"tokens": 1, "gamma": 2, "beta": 0.5, "residual": False,
                                                         "eps": 0.01},
            "ask": ["mean", "var", "output"], "givens": {"X": [1, 2, 3, 6]}}
    ws = build_worksheet(parse_spec({"title": "T", "items": [item]}), ["a"], seed=0)
    env = ws.envs[0]
    x = [1, 2, 3, 6]
    mu = sum(x) / 4
    var = sum((v - mu) ** 2 for v in x) / 4
    y = [2 * (v - mu) / math.sqrt(var + 0.01) + 0.5 for v in x]
    np.testing.assert_allclose(env["output"][0, 0], y, rtol=1e-12)
    np.testing.assert_array_equal(env["Z"][0], 0)
    text = key_markdown(ws)
    assert r"$\gamma = 2$ and $\beta = 0.5$ for every feature" in text and "no residual" in text


def test_layer_norm_agrees_with_torch_for_stated_gamma_and_beta():
    torch = pytest.importorskip("torch")
    _, env, item = solved("attention.layernorm", {"tokens": 3, "gamma": 1.5, "beta": -1, "eps": 0.1},
                          ask=["output"])
    h = torch.tensor(env["residual"])
    y = torch.nn.functional.layer_norm(h, (h.shape[-1],), torch.full((h.shape[-1],), 1.5, dtype=torch.float64),
                                       torch.full((h.shape[-1],), -1.0, dtype=torch.float64), eps=0.1)
    np.testing.assert_allclose(env["output"], y.numpy(), rtol=1e-10, atol=1e-12)


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


# --------------------------------------------------------------------------- shapes and dimensions

import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from pathlib import Path  # noqa: E402

from qkvquiz.grade.parse import AnswerFormatError, parse_shape_text  # noqa: E402
from qkvquiz.resources import templates_dir  # noqa: E402

SHAPE_TABLE = json.loads((Path(__file__).parent.parent / "entry_cases.json").read_text(encoding="utf-8"))["shape_cases"]
SHAPE_STEPS = ["d_k", "sqrt_dk", "q_shape", "wq_shape", "scores_shape", "concat_shape", "wo_shape", "params"]


@pytest.mark.parametrize("params", [{}, {"bias": True, "heads_range": [1, 16], "tokens_range": [1, 600]}])
def test_shapes_family_matches_the_definitions(params):
    _, env, _ = solved("theory.shapes", params, ask=SHAPE_STEPS)
    for b in range(len(ROSTER)):
        dm, h, n = (int(env[x][b]) for x in ("d_model", "heads", "n"))
        dk = dm // h
        assert dk * h == dm
        # Build the arrays and read their shapes: the answers are what NumPy says.
        x = np.zeros((n, dm))
        wq = np.zeros((dm, dk))
        q = x @ wq
        heads = [q @ q.T @ q for _ in range(h)]  # each head's output is n × d_v
        concat = np.concatenate(heads, axis=-1)
        wo = np.zeros((concat.shape[1], dm))
        assert (concat @ wo).shape == (n, dm)
        assert env["d_k"][b] == dk and env["sqrt_dk"][b] == pytest.approx(math.sqrt(dk))
        assert tuple(env["q_shape"][b]) == q.shape and tuple(env["wq_shape"][b]) == wq.shape
        assert tuple(env["scores_shape"][b]) == (q @ q.T).shape
        assert tuple(env["concat_shape"][b]) == concat.shape and tuple(env["wo_shape"][b]) == wo.shape
        weights = 4 * dm * dm + (4 * dm if params.get("bias") else 0)
        assert env["params"][b] == weights


def test_shapes_family_agrees_with_torch_multihead_attention_parameter_count():
    torch = pytest.importorskip("torch")
    _, env, _ = solved("theory.shapes", {"bias": True}, ask=["params"])
    for b in range(3):
        mha = torch.nn.MultiheadAttention(int(env["d_model"][b]), int(env["heads"][b]), bias=True)
        assert sum(p.numel() for p in mha.parameters()) == env["params"][b]


def test_every_mistake_of_the_shapes_family_is_told_apart():
    _, env, item = solved("theory.shapes", {"bias": True}, ask=SHAPE_STEPS)
    n = len(ROSTER)
    names = set()
    for part in item.parts:
        for mistake in item.family.mistakes_for(part.step, item.params):
            wrong = mistake.fn(env, item.params, np)
            assert not item.tolerance.passes(wrong, env[part.step]).reshape(n, -1).all(axis=1).any(), mistake.name
            names.add((mistake.step, mistake.name))
    assert names == {(m.step, m.name) for m in item.family.misconceptions}


@pytest.mark.parametrize("case", SHAPE_TABLE, ids=[repr(c["text"]) for c in SHAPE_TABLE])
def test_shape_texts_follow_the_shared_table(case):
    if "error" in case:
        with pytest.raises(AnswerFormatError, match=re_escape(case["error"])):
            parse_shape_text(case["text"], 2)
    else:
        assert parse_shape_text(case["text"], 2) == case["value"]


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_the_form_reads_shape_texts_like_the_grader():
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    runner = """
const p = require(process.argv[1]);
const texts = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => {
  try { return {value: p.parseShape(t, 2)}; } catch (e) { return {error: e.message}; }
})));
"""
    texts = [c["text"] for c in SHAPE_TABLE] + ["[2,4)", " ( 3 , 5 ) ", "2×4 ", "２×4", "1" * 300]
    run = subprocess.run([node, "-e", runner, str(templates_dir() / "answer-form" / "parse.js")],
                         input=json.dumps(texts), capture_output=True, text=True, timeout=60, check=True)
    for text, js in zip(texts, json.loads(run.stdout), strict=True):
        try:
            py = {"value": parse_shape_text(text, 2)}
        except AnswerFormatError as exc:
            py = {"error": str(exc)}
        assert js == py, (text, js, py)


def test_shape_answers_are_graded_from_text_or_lists():
    spec = parse_spec({"title": "T", "items": [{"family": "theory.shapes",
                                                 "givens": {"d_model": 512, "heads": 8, "n": 2},
                                                 "ask": ["d_k", "sqrt_dk", "concat_shape", "wo_shape"]}]})
    ws = build_worksheet(spec, ["a"], seed=0)
    key = key_from_json(key_to_json(ws))
    answers = {"q1.d_k": 64, "q1.sqrt_dk": "8", "q1.concat_shape": "2×512", "q1.wo_shape": [512, 512]}
    parts = {p.part: p for p in grade(key, [Submission("a.json", "a", answers)]).results[0].parts}
    assert all(p.verdict == "correct" for p in parts.values()), parts
    answers = {"q1.concat_shape": "16 x 64", "q1.wo_shape": "2×4×5"}
    parts = {p.part: p for p in grade(key, [Submission("a.json", "a", answers)]).results[0].parts}
    assert parts["q1.concat_shape"].mistakes == ["stacked_tokens"]
    assert parts["q1.wo_shape"].verdict == "format" and "3 sizes" in parts["q1.wo_shape"].message
    form = form_problems(ws, 0)[0].parts
    assert [p.kind for p in form] == ["number", "number", "shape", "shape"] and form[2].shape == ()


# --------------------------------------------------------------------------- hand-written worksheets

from qkvquiz.grade.audit import audit_file, audit_markdown  # noqa: E402

HANDWRITTEN = Path(__file__).resolve().parents[2] / "examples" / "handwritten"
PLANTED = {
    "01-sdpa-basics.yaml": {"q1.scores": ["unscaled"], "q3.weights": []},
    "02-masks-cross.yaml": {"q2.weights": ["zero_not_minus_inf"], "q3.output": ["mask_after_softmax"],
                            "q4.scores": []},
    "03-multihead-shapes.yaml": {"q1.sqrt_dk": ["sqrt_d_model"], "q1.concat_shape": ["stacked_tokens"],
                                 "q2.params": ["no_output"]},
    "04-layernorm-backprop.yaml": {"q1.var": ["unbiased_variance"], "q3.dW": []},
    "05-delta-rule.yaml": {"q1.final_state": [], "q3.S_next": ["used_U"]},
    "06-ragged-chunks-cross-backprop.yaml": {"q1.X": ["no_state"], "q2.dA": ["sign"],
                                             "q3.dS": ["diagonal_only"], "q4.dK": ["skipped_softmax"]},
    "07-multihead-swap.yaml": {"q1.concat": ["stacked_tokens"], "q2.swapped": ["transposed_weights"]},
}


def test_every_hand_written_worksheet_is_transcribed():
    assert sorted(p.name for p in HANDWRITTEN.glob("*.yaml")) == sorted(PLANTED)


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_audit_flags_exactly_the_planted_wrong_claims(name):
    report = audit_file(HANDWRITTEN / name)
    wrong = {f"{c.item}.{c.step}": c.mistakes for c in report.checks if c.verdict != "right"}
    assert wrong == PLANTED[name]
    assert not report.unchecked  # every problem is stated and claimed as written
    assert len(report.checks) >= 7
    text = audit_markdown(report)
    for part in PLANTED[name]:
        assert f"## {part} (" in text and text.split(f"## {part} (", 1)[1].split("\n", 1)[0].endswith("WRONG")
    assert text.count(": WRONG") == len(PLANTED[name])


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


def test_html_worksheet_shows_boxes_for_the_asked_entries_only_and_gives_a_shape_one_box():
    from qkvquiz.render.documents import problem_areas

    ws, _ = partial_key()
    areas = dict(problem_areas(ws, 0)[0])
    scores = areas["q1.scores"]
    # Two entries asked of a matrix: two single boxes, each named by its place, and no grid.
    assert scores.count('class="boxes r1 c1"') == 2 and "answer-matrix" not in scores
    assert "q1.scores (1,2)" in scores and "q1.scores (1,3)" in scores
    spec = parse_spec({"title": "T", "items": [{"family": "theory.shapes", "ask": ["d_k", "concat_shape"]}]})
    areas = dict(problem_areas(build_worksheet(spec, ["a"], seed=0), 0)[0])
    assert "answer-scalar" in areas["q1.concat_shape"]


def test_the_key_of_a_layer_norm_without_residual_never_adds_one():
    item = {"family": "attention.layernorm", "params": {"tokens": 1, "residual": False},
            "ask": ["output"], "givens": {"X": [1, 2, 3, 6]}}
    text = key_markdown(build_worksheet(parse_spec({"title": "T", "items": [item]}), ["a"], seed=0))
    assert "No residual: $H = X$" in text and "X + Z" not in text
