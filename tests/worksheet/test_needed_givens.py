"""A worksheet shows only the givens its asked parts need: what the step graph says a step needs is
checked by redrawing every other given, and the problem text (a family's own template or the
generic one) leaves the rest out, while the key keeps them all.
"""

from __future__ import annotations

import numpy as np
import pytest

from qkvquiz.families import REGISTRY, get_family
from qkvquiz.render.markdown import worksheet_markdown
from qkvquiz.core.seeding import Draw

from ..helpers import ROSTER, solved

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
