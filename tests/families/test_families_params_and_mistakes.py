"""Family params and mistakes: every documented param value generates or is refused by the spec,
a mistake is listed only where it can differ from the answer, the weights' invariants catch a
wrong row, and the prompts and templates fit the problem they describe.
"""

from __future__ import annotations

import numpy as np
import pytest

from qkvquiz.families import REGISTRY, Env, get_family
from qkvquiz.render.markdown import render_items
from qkvquiz.core.resources import bank_dir
from qkvquiz.spec import SpecError, load_spec, parse_spec
from qkvquiz.worksheet import GenerationError, build_worksheet


def one_item(item: dict):
    return parse_spec({"title": "t", "items": [item]})


# ------------------------------------------------------------------ saturated logits


def test_the_saturated_logit_sits_gap_above_the_largest_other_logit():
    spec = one_item({"family": "theory.softmax_jacobian", "params": {"case": "saturated", "gap": 12, "size": 4}})
    z = build_worksheet(spec, [f"s{i}" for i in range(40)], seed=0).envs[0]["z"]
    top = z.argmax(axis=-1)
    others = np.where(np.arange(4) == top[:, None], -np.inf, z).max(axis=-1)
    np.testing.assert_array_equal(z.max(axis=-1) - others, 12.0)


# ------------------------------------------------------------------ every documented param value


def _one_at_a_time(family) -> list[dict]:
    """Each param at its documented low and high and each choice, the others at their defaults."""
    out = []
    for name, param in family.params.items():
        if param.choices is not None:
            values = list(param.choices)
        elif isinstance(param.default, bool):
            values = [True, False]
        else:
            values = [v for v in (param.low, param.high) if v is not None]
            if isinstance(param.default, int):
                values = [int(v) for v in values]
        out.extend({name: v} for v in values if v != param.default)
    return out


# Settings named by a review where a listed mistake always equalled the answer.
COMBINATIONS = [
    ("attention.scores", {"form": "vector", "d_k": 1}),
    ("attention.scores", {"scaled": False, "d_k": 1}),
    ("attention.scores", {"tokens": 1, "d_k": 1}),
    ("backprop.scores", {"tokens": 1, "d_k": 1}),
    ("delta.recurrent", {"d_k": 1, "d_v": 1}),
    ("delta.recurrent", {"tokens": 1, "state": "zero"}),
    ("delta.recurrent", {"tokens": 1, "state": "zero", "d_k": 1, "d_v": 1}),
    ("delta.chunk_forward", {"d_k": 1, "d_v": 1}),
    ("delta.chunk_backward", {"d_k": 1, "d_v": 1}),
    ("backprop.projection", {"d_in": 1, "d_out": 1}),
    ("backprop.projection", {"d_in": 1, "d_out": 1, "tokens": 1}),
    ("backprop.projection", {"d_in": 1, "d_out": 1, "form": "vector"}),
    ("attention.masked", {"mask": "padding", "tokens": 4, "padded": 2}),
    ("attention.masked", {"mask": "causal_padding", "tokens": 4, "padded": 2}),
]


SETTINGS = [(name, params) for name, fam in REGISTRY.items() for params in _one_at_a_time(fam)] + COMBINATIONS


@pytest.mark.parametrize("name, params", SETTINGS, ids=[f"{n}-{p}" for n, p in SETTINGS])
def test_every_documented_param_value_generates_or_is_refused_by_the_spec(name, params):
    try:
        spec = one_item({"family": name, "params": params})
    except SpecError:
        return  # refused up front, with the field named: fine
    try:
        ws = build_worksheet(spec, [f"s{i}" for i in range(5)], seed=0)
    except GenerationError as exc:
        pytest.fail(f"{name} {params}: the spec is accepted but no variant can be drawn: {exc}")
    for student in range(5):  # every student a variant of this family, every step a finite number
        (variant,) = ws.variant(student)
        assert variant["item"].family.name == name
        for step, value in variant["steps"].items():
            assert np.isfinite(np.asarray(value, dtype=float)[~np.isinf(np.asarray(value, dtype=float))]).all(), step


@pytest.mark.parametrize("name, params, absent", [
    ("attention.scores", {"d_k": 1}, {"unscaled", "divided_by_d"}),
    ("attention.scores", {"form": "vector", "d_k": 1}, {"unscaled", "transposed"}),
    ("attention.scores", {"tokens": 1}, {"transposed"}),
    ("attention.weights", {"tokens": 1}, {"transposed"}),
    ("attention.output", {"queries": 2, "keys": 3}, {"transposed"}),
    ("backprop.attention", {}, {"zero_not_minus_inf"}),  # no mask: nothing to write as 0
    ("attention.output", {"d_k": 1}, {"unscaled"}),
    ("backprop.scores", {"tokens": 1}, {"transposed_dS", "untransposed_dS"}),
    ("delta.recurrent", {"d_k": 1, "d_v": 1}, {"transposed_state", "left_multiplied"}),
    ("delta.recurrent", {"tokens": 1, "state": "zero"}, {"no_delta", "erase_without_beta", "left_multiplied"}),
    ("delta.chunk_forward", {"d_k": 1, "d_v": 1}, {"untransposed_state", "transposed"}),
    ("backprop.projection", {"d_in": 1, "d_out": 1}, {"transposed_W", "reversed_outer", "untransposed_W"}),
])
def test_mistakes_that_equal_the_answer_for_these_params_are_not_listed(name, params, absent):
    family = get_family(name)
    p = family.resolve(params)
    listed = {m.name for s in family.askable_steps for m in family.mistakes_for(s, p)}
    assert not listed & absent, listed & absent


def test_the_transposed_mistakes_stay_for_square_matrices_larger_than_one():
    for name, params, present in [
        ("delta.recurrent", {"d_k": 2, "d_v": 2}, "left_multiplied"),
        ("delta.chunk_forward", {"d_k": 3, "d_v": 3}, "untransposed_state"),
        ("backprop.projection", {"d_in": 2, "d_out": 2}, "untransposed_W"),
        ("attention.scores", {"tokens": 2}, "transposed"),
        ("attention.weights", {"tokens": 2}, "transposed"),
        ("attention.output", {"tokens": 3}, "transposed"),
        ("attention.masked", {"tokens": 2}, "transposed"),
    ]:
        family = get_family(name)
        p = family.resolve(params)
        assert present in {m.name for s in family.askable_steps for m in family.mistakes_for(s, p)}


# ------------------------------------------------------------------ β across students


def test_beta_still_varies_across_students_in_the_bundled_delta_chunk_backward():
    spec = load_spec(bank_dir() / "delta-rule.yaml")
    students = [f"s{i:02d}" for i in range(30)]
    ws = build_worksheet(spec, students, seed=0)
    for item, env in zip(spec.items, ws.envs):
        if item.family.name == "delta.chunk_backward" and item.params.chunk == 2:
            betas = {tuple(np.ravel(b)) for b in env["beta"]}
            assert len(betas) > 1, (item.id, betas)


def test_beta_on_columns_of_g_bar_is_listed_only_where_it_can_differ_from_forgetting_beta():
    family = get_family("delta.chunk_backward")

    def listed(**params):
        return "beta_on_columns" in {m.name for m in family.mistakes_for("dG", family.resolve(params))}

    assert not listed(chunk=2, beta="half_or_one")
    assert listed(chunk=3, beta="half_or_one")
    assert listed(chunk=2, beta="uniform")


# ------------------------------------------------------------------ the variance of q·k


def test_the_documented_lowest_entry_variance_generates_at_two_decimals():
    low = get_family("theory.dot_variance").params["entry_var"].low
    spec = parse_spec({"title": "t", "tolerance": "2 decimals",
                       "items": [{"family": "theory.dot_variance", "params": {"entry_var": low}}]})
    ws = build_worksheet(spec, [f"s{i}" for i in range(10)], seed=0)
    for student in range(10):
        (variant,) = ws.variant(student)
        d_k, steps = float(variant["givens"]["d_k"]), variant["steps"]
        # Var(q·k) = d_k σ⁴ for entries of variance σ² (independent, mean 0); scaled by 1/d_k, σ⁴.
        assert steps["variance"] == pytest.approx(d_k * low**2) and steps["scaled_variance"] == pytest.approx(low**2)
        assert round(float(steps["scaled_variance"]), 2) != 0  # still an answer at two decimals


# ------------------------------------------------------------------ invariants of the weights


@pytest.mark.parametrize("name, step, params", [
    ("attention.masked", "weights", {}),
    ("attention.masked", "weights", {"mask": "padding"}),
    ("backprop.attention", "weights", {"mask": "causal", "tokens": 3}),
    ("backprop.attention", "weights", {}),
    ("attention.qk_swap", "weights", {}),
    ("attention.qk_swap", "swapped", {}),
    ("backprop.softmax", "weights", {}),
    ("attention.multihead", "weights", {}),
])
def test_weights_that_do_not_sum_to_one_per_row_break_an_invariant(name, step, params):
    spec = one_item({"family": name, "params": params, "ask": [step]})
    ws = build_worksheet(spec, ["a", "b", "c"], seed=0)
    item, env = spec.items[0], Env(ws.envs[0])
    invariants = item.family.invariants_for(step, item.params)
    assert "rows_sum_to_one" in {i.name for i in invariants}
    right = env[step]
    band = np.full(right.shape, 0.005)
    wrong = right * 1.5  # every row now sums to 1.5
    for inv in invariants:
        assert inv.holds(right, env, item.params, band).all(), inv.name
    sums = next(i for i in invariants if i.name == "rows_sum_to_one")
    assert not sums.holds(wrong, env, item.params, band).any()


def test_masked_weights_with_weight_on_a_masked_key_break_the_masked_zero_invariant():
    spec = one_item({"family": "attention.masked", "params": {"mask": "causal"}, "ask": ["weights"]})
    ws = build_worksheet(spec, ["a", "b"], seed=0)
    item, env = spec.items[0], Env(ws.envs[0])
    (zero,) = [i for i in item.family.invariants_for("weights", item.params) if i.name == "masked_zero"]
    leaked = env["weights"].copy()
    leaked[:, 0, 1] = 0.2  # query 1 may not see key 2
    assert not zero.holds(leaked, env, item.params, np.full(leaked.shape, 0.005)).any()


# ------------------------------------------------------------------ one list of mask mistakes


def test_every_family_lists_each_mistake_once_per_step():
    for family in REGISTRY.values():
        pairs = [(m.step, m.name) for m in family.misconceptions]
        assert len(pairs) == len(set(pairs)), family.name


@pytest.mark.parametrize("d_k, listed", [(1, False), (4, True)])
def test_unscaled_scores_are_listed_alike_in_scores_and_output(d_k, listed):
    for name in ("attention.scores", "attention.output"):
        family = get_family(name)
        names = {m.name for m in family.mistakes_for("scores", family.resolve({"d_k": d_k}))}
        assert ("unscaled" in names) is listed, name


def test_an_explicit_mask_in_attention_output_lists_the_mask_slips_on_every_step():
    family = get_family("attention.output")
    p = family.resolve({"mask": "random"})
    for step, slips in [("scores", {"zero_not_minus_inf"}), ("weights", {"zero_not_minus_inf", "mask_after_softmax"}),
                        ("output", {"zero_not_minus_inf", "mask_after_softmax"})]:
        assert slips <= {m.name for m in family.mistakes_for(step, p)}, step
    assert not {m.name for m in family.mistakes_for("weights", family.resolve({}))} & {"mask_after_softmax"}


# ------------------------------------------------------------------ the scores template


def _problem_and_solution(item: dict) -> tuple[str, str]:
    ws = build_worksheet(one_item(item), ["a"], seed=0)
    return render_items(ws, 0, "problem")[0], render_items(ws, 0, "solution")[0]


def test_scores_problem_shows_the_part_points_and_the_vector_form_answers_s():
    problem, solution = _problem_and_solution({"family": "attention.scores", "points": 2, "params": {"form": "vector"}})
    assert "`q1.scores`\u00a0(2\u00a0pt)" in problem  # the id, points and "pt" tied
    assert "$s = " in solution and "S_{" not in solution and "$S = " not in solution
    problem, _ = _problem_and_solution({"family": "attention.scores", "points": 3})
    assert "`q1.scores`\u00a0(3\u00a0pt)" in problem  # the id, points and "pt" tied


# ------------------------------------------------------------------ layer norm's constant row


def test_the_constant_row_keeps_z_within_its_entries():
    spec = one_item({"family": "attention.layernorm", "params": {"zero_variance_row": True, "tokens": 3}})
    env = build_worksheet(spec, [f"s{i:02d}" for i in range(60)], seed=0).envs[0]
    assert env["Z"].min() >= -2 and env["Z"].max() <= 2
    last = env["residual"][:, -1, :]
    assert (last == last[:, :1]).all()
    assert len(np.unique(last[:, 0])) > 1  # the constant itself still varies


# ------------------------------------------------------------------ prompts fit every problem


def test_prompts_without_a_mask_say_nothing_of_masking():
    for name, step in [("attention.weights", "weights"), ("attention.output", "scores"),
                       ("backprop.attention", "scores")]:
        prompt = get_family(name).step(step).prompt
        assert "mask" not in prompt and "−∞" not in prompt and "S̃" not in prompt, (name, prompt)
    problem, _ = _problem_and_solution({"family": "attention.output"})
    assert r"\infty" not in problem and "mask" not in problem
    problem, _ = _problem_and_solution({"family": "attention.weights"})
    assert r"\tilde S = S" in problem  # the formula's S̃ is defined


def test_prompts_with_a_mask_say_where_minus_infinity_goes():
    for name in ("attention.output", "backprop.attention"):
        problem, _ = _problem_and_solution({"family": name, "params": {"mask": "causal", "tokens": 3}})
        assert r"-\infty" in problem, name
    problem, _ = _problem_and_solution({"family": "attention.weights", "params": {"mask": "causal"}})
    assert r"-\infty" in problem
