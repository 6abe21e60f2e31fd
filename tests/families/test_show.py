"""``qkvquiz show FAMILY``: one problem and its worked solution for every kind of family, printed."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.families import REGISTRY
from qkvquiz.render.prose_math import prose_math

runner = CliRunner()


@pytest.mark.parametrize("name, args", [
    ("attention.masked", []), ("attention.masked", ["-p", "mask=causal_padding", "-p", "tokens=4"]),
    ("attention.qk_swap", []), ("attention.multihead", []), ("attention.layernorm", ["-p", "zero_variance_row=true"]),
    ("theory.dot_variance", []), ("theory.softmax_jacobian", ["-p", "case=saturated"]), ("theory.complexity", []),
    ("backprop.scores", []), ("backprop.softmax", []), ("backprop.attention", []),
    ("backprop.attention", ["-p", "mask=causal", "-p", "tokens=3"]),
    ("backprop.projection", []), ("backprop.projection", ["-p", "form=vector"]),
    ("delta.recurrent", []), ("delta.recurrent", ["-p", "tokens=3", "-p", "state=zero"]),
    ("delta.chunk_forward", []), ("delta.chunk_forward", ["-p", "chunks=2", "-p", "chunk=2"]),
    ("delta.chunk_backward", []), ("delta.chunk_backward", ["-p", "chunks=2"]),
])
def test_show_prints_a_problem_and_its_worked_solution(name, args):
    result = runner.invoke(app, ["show", name, *args])
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"Problem 1: {prose_math(REGISTRY[name].title)}" in out  # its notation as math, as in the problem
    assert "Solution" in out and "Answers" in out
    assert "{{" not in out and not re.search(r"\bnan\b", out)
    for step in REGISTRY[name].default_ask:
        assert f"q1.{step}" in out
    if "chunks=2" in args:
        assert "Chunk 2" in out or "chunk 2" in out
