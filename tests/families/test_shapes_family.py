"""The shapes family (theory.shapes): its answers are the shapes NumPy gives, its parameter count is
torch's, every mistake is told apart, and a shape is graded from a text or a list.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.form import form_problems
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import ROSTER, solved

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
