"""Layer norm as a teacher writes it: one row, γ, β and ε stated, no residual; checked against the
formula written out here and against torch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qkvquiz.render.markdown import key_markdown
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import solved


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


def test_the_key_of_a_layer_norm_without_residual_never_adds_one():
    item = {"family": "attention.layernorm", "params": {"tokens": 1, "residual": False},
            "ask": ["output"], "givens": {"X": [1, 2, 3, 6]}}
    text = key_markdown(build_worksheet(parse_spec({"title": "T", "items": [item]}), ["a"], seed=0))
    assert "No residual: $H = X$" in text and "X + Z" not in text
