"""Per-part tolerance, format-error credit, step invariants and the guards on carried credit."""

import copy

import numpy as np
import pytest

from qkvquiz.families import get_family
from qkvquiz.families.base import Env, Params, rows_sum_to
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.core.tolerance import Tolerance
from qkvquiz.key import key_from_json
from qkvquiz.spec import SpecError, parse_spec

from ..helpers import make_key


def parts_of(report, student=0):
    return {p.part: p for p in report.results[student].parts}


def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- tolerance per part --------------------------------------------------------------------


def test_a_per_part_tolerance_applies_to_its_part_and_default_to_the_rest():
    spec = parse_spec({"title": "t", "tolerance": "3 sigfigs", "items": [
        {"family": "attention.output", "tolerance": {"default": "abs 0.05", "weights": "rel 1%"}},
        {"family": "attention.output", "tolerance": {"output": "4 decimals"}},
    ]})
    first, second = spec.items
    assert first.tolerance == Tolerance("abs", 0.05)
    assert first.tolerance_for("weights") == Tolerance("rel", 0.01)
    assert first.tolerance_for("scores") == first.tolerance_for("output") == Tolerance("abs", 0.05)
    assert second.tolerance == Tolerance("sigfigs", 3)  # no default: the spec's
    assert second.tolerance_for("output") == Tolerance("decimals", 4)


def test_one_tolerance_written_as_a_mapping_is_still_one_tolerance():
    spec = parse_spec({"title": "t", "items": [{"family": "attention.weights", "tolerance": {"mode": "rel", "value": 0.01}}]})
    assert spec.items[0].tolerance == Tolerance("rel", 0.01)
    assert spec.items[0].parts[0].tolerance is None


@pytest.mark.parametrize("tolerance, field, says", [
    ({"output": "2 decimals"}, "tolerance.output", "not an asked step"),
    ({"weights": "seven decimals"}, "tolerance.weights", "cannot read tolerance"),
    ({"weights": {"scores": "2 decimals"}}, "tolerance.weights", "must be one tolerance"),
])
def test_a_bad_per_part_tolerance_names_the_field(tolerance, field, says):
    with pytest.raises(SpecError) as err:
        parse_spec({"title": "t", "items": [{"family": "attention.weights", "ask": ["scores", "weights"],
                                             "tolerance": tolerance}]}, source="w.yaml")
    assert field in err.value.where and says in err.value.message


def test_the_key_keeps_part_tolerances_and_grades_with_them():
    items = [{"family": "attention.weights", "ask": ["scores", "weights"],
              "tolerance": {"default": "3 decimals", "weights": "abs 0.1"}}]
    key, doc = make_key(items, students=["a"])
    parts = doc["items"][0]["parts"]
    assert "tolerance" not in parts[0] and parts[1]["tolerance"] == {"mode": "abs", "value": 0.1}
    answers = copy.deepcopy(doc["students"][0]["answers"])
    weights = np.array(answers["q1.weights"], dtype=float) + 0.09  # within abs 0.1, not 3 decimals
    answers["q1.weights"] = weights.tolist()
    result = parts_of(grade(key, [Submission("a", "a", answers)]))
    assert result["q1.weights"].verdict == "correct"
    answers["q1.scores"] = [[v + 0.09 if isinstance(v, (int, float)) else v for v in row] for row in answers["q1.scores"]]
    assert parts_of(grade(key, [Submission("a", "a", answers)]))["q1.scores"].verdict != "correct"


def test_a_key_written_before_part_tolerances_and_format_credit_still_reads():
    _, doc = make_key()
    for item in doc["items"]:
        item["credit"].pop("format_error")
        for part in item["parts"]:
            assert "tolerance" not in part
    key = key_from_json(doc)
    assert all(item.credit.format_error == 0 for item in key.items)
    assert all(item.tolerance_for(p.step) == item.tolerance for item in key.items for p in item.parts)


# --- format errors -------------------------------------------------------------------------


def test_format_errors_score_zero_unless_the_spec_gives_a_share():
    for share, expected in ((None, 0.0), (0.25, 0.25)):
        item = {"family": "attention.weights", "points": 2}
        if share is not None:
            item["credit"] = {"format_error": share}
        key, doc = make_key([item], students=["a", "b"])
        bad = Submission("a", "a", {"q1.weights": [[1, 2]]})
        missing = Submission("b", "b", {})
        report = grade(key, [bad, missing])
        assert parts_of(report, 0)["q1.weights"].verdict == "format"
        assert parts_of(report, 0)["q1.weights"].score == pytest.approx(2 * expected)
        assert parts_of(report, 1)["q1.weights"].verdict == "missing"
        assert parts_of(report, 1)["q1.weights"].score == 0


def test_format_error_share_must_be_a_fraction():
    with pytest.raises(SpecError) as err:
        parse_spec({"title": "t", "credit": {"format_error": 2}, "items": [{"family": "attention.weights"}]})
    assert "format_error" in err.value.where


# --- invariants ----------------------------------------------------------------------------


def test_rows_sum_to_zero_holds_for_a_softmax_gradient_and_fails_when_perturbed():
    rng = np.random.default_rng(0)
    a = softmax(rng.normal(size=(4, 3, 3)))
    da = rng.normal(size=(4, 3, 3))
    # ∂L/∂s_ij = a_ij (da_ij − Σ_l da_il a_il), written out per row; each row sums to 0.
    ds = np.array([[[a[b, i, j] * (da[b, i, j] - sum(da[b, i, l] * a[b, i, l] for l in range(3)))
                     for j in range(3)] for i in range(3)] for b in range(4)])
    invariant = rows_sum_to(0.0, "softmax_grad_rows", "Each row of ∇S sums to 0.")
    band = np.full(ds.shape, 1e-9)
    assert invariant.holds(ds, {}, Params({}), band).tolist() == [True] * 4
    ds[2, 1, 0] += 0.1
    assert invariant.holds(ds, {}, Params({}), band).tolist() == [True, True, False, True]


def test_weights_invariants_rows_sum_to_one_where_allowed_and_masked_entries_are_zero():
    family = get_family("attention.weights")
    params = family.resolve({"mask": "random"})
    checks = {inv.name: inv for inv in family.invariants_for("weights", params)}
    assert set(checks) == {"rows_sum_to_one", "masked_zero"}
    assert set(i.name for i in family.invariants_for("weights", family.resolve({}))) == {"rows_sum_to_one"}
    mask = np.array([[[1, 1, 0], [0, 0, 0], [1, 1, 1]]] * 3, dtype=float)  # query 2 may attend to nothing
    right = np.array([[0.5, 0.5, 0], [0, 0, 0], [0.2, 0.3, 0.5]])
    values = np.stack([right, right, right])
    values[1, 2] = [0.2, 0.3, 0.6]  # a row summing to 1.1
    values[2, 0] = [0.4, 0.5, 0.1]  # weight on a masked key
    band = np.full(values.shape, 0.01)
    env = Env({"mask": mask})
    assert checks["rows_sum_to_one"].holds(values, env, params, band).tolist() == [True, False, True]
    assert checks["masked_zero"].holds(values, env, params, band).tolist() == [True, True, False]


def test_a_wrong_answer_is_told_which_invariant_it_breaks():
    key, doc = make_key([{"family": "attention.weights", "params": {"mask": "causal"}}], students=["a"])
    answers = copy.deepcopy(doc["students"][0]["answers"])
    answers["q1.weights"][0] = [0.5, 0.5, 0.5]
    result = parts_of(grade(key, [Submission("a", "a", answers)]))["q1.weights"]
    assert result.broken == ["rows_sum_to_one", "masked_zero"]
    assert any("sum to 1" in s for s in result.invariants) and any("Masked" in s for s in result.invariants)


# --- carried forward -----------------------------------------------------------------------


def test_carried_credit_runs_through_a_step_that_was_not_asked():
    key, doc = make_key([{"family": "attention.output", "ask": ["scores", "output"]}], students=["a"])
    env = key.items[0].env
    q, k, v = env["Q"][0], env["K"][0], env["V"][0]
    unscaled = q @ k.T  # forgot 1/√d_k; the weights in between were never asked
    answers = {"q1.scores": unscaled.tolist(), "q1.output": (softmax(unscaled) @ v).tolist()}
    result = parts_of(grade(key, [Submission("a", "a", answers)]))
    assert result["q1.scores"].mistakes == ["unscaled"]
    assert result["q1.output"].verdict == "carried" and result["q1.output"].score == result["q1.output"].points


def test_no_carried_credit_from_weights_that_break_their_invariants():
    key, doc = make_key([{"family": "attention.output", "ask": ["weights", "output"]}], students=["a", "b"])
    env = key.items[0].env
    subs = []
    for s, (name, row) in enumerate((("a", [0.0, 0.0, 0.0]), ("b", None))):
        w = np.array(env["weights"][s])
        w[0] = row if row is not None else w[0][::-1]  # a: a row of zeros; b: a row reversed (sums to 1)
        subs.append(Submission(name, name, {"q1.weights": w.tolist(), "q1.output": (w @ env["V"][s]).tolist()}))
    report = grade(key, subs)
    a, b = parts_of(report, 0), parts_of(report, 1)
    assert a["q1.weights"].broken == ["rows_sum_to_one"]
    assert a["q1.output"].verdict in ("partial", "wrong")
    if b["q1.weights"].verdict != "correct":
        assert b["q1.output"].verdict in ("carried", "correct")


def test_no_carried_credit_to_an_answer_that_breaks_its_own_invariants():
    key, doc = make_key([{"family": "attention.weights", "params": {"mask": "causal"}, "ask": ["scores", "weights"]}],
                        students=["a"])
    s, mask = key.items[0].env["S"][0], key.items[0].env["mask"][0]
    zeroed = np.where(mask > 0.5, s, 0.0)  # masked scores written as 0, not −∞
    answers = {"q1.scores": zeroed.tolist(), "q1.weights": softmax(zeroed).tolist()}
    weights = parts_of(grade(key, [Submission("a", "a", answers)]))["q1.weights"]
    assert weights.mistakes == ["zero_not_minus_inf"]
    assert "masked_zero" in weights.broken
    assert weights.verdict != "carried"


def test_softmax_gradient_rows_sum_to_zero_invariant_on_backprop_families():
    """The key's own ∇S satisfies the invariant; a ∇S with a row shifted off zero breaks it."""
    import numpy as np

    from qkvquiz.families import get_family
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    for name in ("backprop.softmax", "backprop.attention"):
        family = get_family(name)
        spec = parse_spec({"title": "t", "items": [{"family": name, "ask": ["dS"]}]})
        ws = build_worksheet(spec, ["a", "b", "c"], seed=0)
        env, item = ws.envs[0], spec.items[0]
        (invariant,) = family.step("dS").invariants
        band = item.tolerance.band(env["dS"])
        assert invariant.fn(env["dS"], env, item.params, band, np).all()
        broken = env["dS"].copy()
        broken[:, 0, :] += 0.5
        assert not invariant.fn(broken, env, item.params, band, np).any()
