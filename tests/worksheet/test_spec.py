"""Spec files: what is accepted, and errors that name the file, the item and the field; fixed givens
shown and used, and a value outside a given's or a param's domain refused with the field named."""

import re
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.families import REGISTRY
from qkvquiz.render.markdown import render_items
from qkvquiz.core.resources import bank_dir
from qkvquiz.spec import SpecError, load_spec, parse_spec
from qkvquiz.worksheet import build_worksheet


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "week1.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_every_bundled_spec_loads_and_generates():
    specs = sorted(bank_dir().glob("*.yaml"))
    assert any(p.name == "attention-basics.yaml" for p in specs)
    for path in specs:
        spec = load_spec(path)
        ws = build_worksheet(spec, ["x", "y"], seed=3)
        assert len(ws.envs) == len(spec.items)


def test_attention_basics_has_five_items_one_masked():
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    assert len(spec.items) == 5
    assert any(item.params.get("mask", "none") != "none" for item in spec.items)


def test_ask_mapping_sets_part_points_and_list_splits_item_points():
    spec = parse_spec({"title": "t", "items": [
        {"family": "attention.output", "ask": {"weights": 2, "output": 3}},
        {"family": "attention.output", "points": 4, "ask": ["scores", "output"]},
    ]})
    assert [(p.id, p.points) for p in spec.items[0].parts] == [("q1.weights", 2.0), ("q1.output", 3.0)]
    assert [(p.id, p.points) for p in spec.items[1].parts] == [("q2.scores", 2.0), ("q2.output", 2.0)]


@pytest.mark.parametrize(
    "body, where, says",
    [
        ("items:\n  - family: attention.nope\n", "item 1 field 'family'", "known: attention."),
        ("items:\n  - family: attention.output\n    params: {tokens: 99}\n", "field 'params.tokens'", "between 1 and 8"),
        ("items:\n  - family: attention.output\n    params: {mask: diagonal}\n", "field 'params.mask'", "must be one of"),
        ("items:\n  - family: attention.output\n    params: {colour: red}\n", "field 'params.colour'", "takes: tokens"),
        ("items:\n  - family: attention.output\n    ask: [scores, loss]\n", "field 'ask'", "can ask: scores, weights, output"),
        ("items:\n  - family: attention.output\n    points: -1\n", "field 'points'", "positive number"),
        ("items:\n  - family: attention.output\n    tolerance: roughly\n", "field 'tolerance'", "decimals"),
        ("items:\n  - family: attention.output\n    givens: {W: [[1]]}\n", "field 'givens.W'", "has: Q, K, V, mask"),
        ("items:\n  - family: attention.output\n  - family: attention.output\n    id: q1\n", "item 2 field 'id'", "used twice"),
        ("items:\n  - family: attention.output\n    colour: red\n", "item 1 field 'colour'", "allowed:"),
    ],
)
def test_spec_errors_name_file_item_and_field(tmp_path, body, where, says):
    path = write(tmp_path, "title: Week 1\n" + body)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(str(path))
    assert where in message
    assert says in message


def test_item_id_and_family_named_in_param_errors(tmp_path):
    path = write(tmp_path, "title: W\nitems:\n  - family: attention.scores\n    id: warmup\n    params: {d_k: 0}\n")
    with pytest.raises(SpecError, match=r"item 1 \(warmup, attention.scores\) field 'params.d_k'"):
        load_spec(path)


def test_not_yaml_and_missing_title_are_reported(tmp_path):
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(write(tmp_path, "title: [unclosed\n"))
    with pytest.raises(SpecError, match="field 'title'"):
        load_spec(write(tmp_path, "items:\n  - family: attention.output\n"))


def test_fixed_givens_are_used_for_every_student():
    q = [[1, 0], [0, 1]]
    k = [[1, 1], [0, 2]]
    spec = parse_spec({"title": "t", "items": [
        {"family": "attention.scores", "params": {"tokens": 2, "d_k": 2}, "givens": {"Q": q, "K": k}},
    ]})
    ws = build_worksheet(spec, ["a", "b"], seed=0)
    expected = np.array(q) @ np.array(k).T / np.sqrt(2)
    np.testing.assert_allclose(ws.envs[0]["scores"], [expected, expected], rtol=1e-15)


def test_fixed_given_of_wrong_shape_names_the_field():
    spec = parse_spec({"title": "t", "items": [
        {"family": "attention.scores", "params": {"tokens": 3, "d_k": 2}, "givens": {"Q": [[1, 2]]}},
    ]})
    with pytest.raises(SpecError, match=r"field 'givens.Q'.*shape 1×2.*need 3×2"):
        build_worksheet(spec, ["a"], seed=0)


def test_explicit_allowed_pairs_mask_as_a_fixed_given():
    # "query 1 may attend only to keys 2 and 3"
    mask = [[0, 1, 1], [1, 1, 0], [1, 1, 1]]
    spec = parse_spec({"title": "t", "items": [
        {"family": "attention.weights", "params": {"mask": "random"}, "givens": {"mask": mask}},
    ]})
    ws = build_worksheet(spec, ["a", "b", "c"], seed=0)
    weights = ws.envs[0]["weights"]
    assert np.all(weights[:, 0, 0] == 0) and np.all(weights[:, 1, 2] == 0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-14)


def test_all_families_spec_holds_one_item_of_every_family():
    spec = load_spec(bank_dir() / "all-families.yaml")
    assert sorted(item.family.name for item in spec.items) == sorted(REGISTRY)


# ------------------------------------------------------------------ fixed givens and their domains


README_MASK = [[0, 1, 1], [1, 1, 0], [1, 1, 1]]
README_S = [[1, 0, 2], [0, 0, 1], [2, 1, 0]]


def one_item(item: dict):
    return parse_spec({"title": "t", "items": [item]})


def refused(item: dict, where: str, says: str = "") -> SpecError:
    with pytest.raises(SpecError) as info:
        one_item(item)
    assert f"field '{where}'" in str(info.value), str(info.value)
    assert says in str(info.value), str(info.value)
    return info.value


def test_a_fixed_mask_is_shown_to_the_student_and_used_by_the_key():
    # The README's example: mask fixed, params.mask left out.
    spec = one_item({"family": "attention.weights", "points": 2, "givens": {"S": README_S, "mask": README_MASK}})
    item = spec.items[0]
    assert item.params.mask == "random"  # the explicit kind
    assert {m.name for m in item.family.mistakes_for("weights", item.params)} >= {"mask_after_softmax",
                                                                                   "zero_not_minus_inf"}
    ws = build_worksheet(spec, ["a", "b"], seed=0)
    assert (ws.envs[0]["weights"][:, 0, 0] == 0).all() and (ws.envs[0]["weights"][:, 1, 2] == 0).all()
    problem = render_items(ws, 0, "problem")[0]
    assert "Mask (1 = may attend)" in problem and "query 1 may attend only to keys 2 and 3" in problem
    assert r"-\infty" in render_items(ws, 0, "solution")[0]


@pytest.mark.parametrize("family", ["attention.output", "backprop.attention"])
def test_a_fixed_mask_makes_the_other_attention_families_masked_too(family):
    item = one_item({"family": family, "params": {"tokens": 3}, "givens": {"mask": README_MASK}}).items[0]
    assert item.params.mask == "random"


def test_a_fixed_mask_contradicting_the_written_mask_kind_is_refused():
    refused({"family": "attention.weights", "params": {"mask": "causal"}, "givens": {"mask": README_MASK}},
            "givens.mask", "mask: random")
    # Writing the explicit kind itself is fine.
    one_item({"family": "attention.weights", "params": {"mask": "random"}, "givens": {"mask": README_MASK}})


def test_masked_attention_refuses_a_hand_written_mask_and_names_the_families_that_take_one():
    refused({"family": "attention.masked", "params": {"mask": "causal"},
             "givens": {"mask": [[1, 1, 1], [1, 1, 1], [0, 1, 1]]}},
            "givens.mask", "use attention.weights or attention.output")


@pytest.mark.parametrize("family, params, mask", [
    # An audit fixes every given: the mask of the item's own kind keeps that kind.
    ("attention.weights", {"mask": "causal"}, [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
    ("attention.output", {}, [[1, 1, 1], [1, 1, 1], [1, 1, 1]]),
    ("backprop.attention", {"tokens": 4, "mask": "padding", "padded": 1}, [[1, 1, 1, 0]] * 4),
    ("attention.masked", {"mask": "causal"}, [[1, 0, 0], [1, 1, 0], [1, 1, 1]]),
    ("attention.masked", {"mask": "causal_padding", "tokens": 4, "padded": 2},
     [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0]]),
])
def test_a_fixed_mask_equal_to_the_kinds_own_mask_keeps_the_kind(family, params, mask):
    item = one_item({"family": family, "params": params, "givens": {"mask": mask}}).items[0]
    assert item.params.mask == params.get("mask", "none")


@pytest.mark.parametrize("mask, says", [
    ([[5, -3, 0.2], [1, 1, 0], [1, 1, 1]], "only 0 (masked) and 1"),
    ([[0, 0, 0], [1, 1, 0], [1, 1, 1]], "at least one key"),
    ([1, 0, 1], "matrix"),
])
def test_a_fixed_mask_outside_its_domain_is_refused(mask, says):
    refused({"family": "attention.weights", "givens": {"mask": mask}}, "givens.mask", says)


@pytest.mark.parametrize("family, givens, says", [
    ("delta.recurrent", {"beta": [5, -3]}, "from 0 to 2"),
    ("delta.recurrent", {"beta": [1, 2.01]}, "from 0 to 2"),
    ("delta.chunk_forward", {"beta": [0.5, 2.5, 1]}, "from 0 to 2"),
    ("delta.chunk_backward", {"beta": [-0.5, 1]}, "from 0 to 2"),
    ("theory.dot_variance", {"d_k": -4}, "whole number ≥ 1"),
    ("theory.dot_variance", {"d_k": 2.5}, "whole number ≥ 1"),
    ("theory.complexity", {"n": 0}, "whole number ≥ 1"),
    ("theory.complexity", {"d": 1.5}, "whole number ≥ 1"),
])
def test_fixed_givens_outside_their_domain_are_refused(family, givens, says):
    (name,) = givens
    refused({"family": family, "givens": givens}, f"givens.{name}", says)


def test_fixed_givens_inside_their_domain_are_used():
    spec = one_item({"family": "delta.recurrent", "params": {"tokens": 2}, "givens": {"beta": [0.5, 1.5]}})
    ws = build_worksheet(spec, ["a", "b"], seed=0)
    np.testing.assert_array_equal(ws.envs[0]["beta"], [[0.5, 1.5], [0.5, 1.5]])
    spec = one_item({"family": "theory.dot_variance", "givens": {"d_k": 64}})
    assert (build_worksheet(spec, ["a"], seed=0).envs[0]["std"] == 8).all()


# ------------------------------------------------------------------ fields checked


@pytest.mark.parametrize("item, where, says", [
    ({"family": ["attention.output"]}, "family", "one family name"),
    ({"family": "attention.output", "ask": {}}, "ask", "non-empty"),
    ({"family": "attention.output", "ask": {"scores": float("nan")}}, "ask.scores", "positive"),
    ({"family": "attention.layernorm", "params": {"eps": float("nan")}}, "params.eps", "finite"),
    ({"family": "attention.layernorm", "params": {"eps": float("inf")}}, "params.eps", "finite"),
    ({"family": "theory.dot_variance", "params": {"entry_var": float("nan")}}, "params.entry_var", "finite"),
    ({"family": "attention.output", "params": {"entries": [-1.5, 1]}}, "params.entries", "whole numbers"),
    ({"family": "attention.output", "params": {"entries": [float("-inf"), 1]}}, "params.entries", "range"),
    ({"family": "theory.complexity", "params": {"n_range": [2.5, 8]}}, "params.n_range", "whole numbers"),
    ({"family": "attention.output", "points": 10, "ask": {"scores": 1}}, "points", "ask"),
    ({"family": "attention.output", "points": float("inf")}, "points", "positive"),
    # Too many points to count in hundredths exactly: refused, not an OverflowError from the split.
    ({"family": "attention.output", "points": 1e307, "ask": ["scores", "output"]}, "points", "up to"),
])
def test_spec_mistakes_are_refused_naming_the_field(item, where, says):
    refused(item, where, says)


def test_whole_valued_ranges_are_read_as_integers():
    item = one_item({"family": "attention.output", "params": {"entries": [-2.0, 2.0]}}).items[0]
    assert item.params.entries == (-2, 2) and all(type(v) is int for v in item.params.entries)


def test_points_with_an_ask_list_still_split_evenly():
    item = one_item({"family": "attention.output", "points": 3, "ask": ["scores", "weights", "output"]}).items[0]
    assert [p.points for p in item.parts] == [1.0, 1.0, 1.0]


# ------------------------------------------------------------------ padding leaves two keys


@pytest.mark.parametrize("kind", ["padding", "causal_padding"])
def test_masked_attention_refuses_padding_that_leaves_one_key(kind):
    refused({"family": "attention.masked", "params": {"mask": kind, "tokens": 4, "padded": 3}},
            "params", "at least 2 keys")
    one_item({"family": "attention.masked", "params": {"mask": kind, "tokens": 4, "padded": 2}})


def test_bundled_specs_load_with_a_title_and_known_families():
    paths = sorted(Path(bank_dir()).glob("*.yaml"))
    assert len(paths) >= 8
    for path in paths:
        spec = load_spec(path)
        assert spec.title.strip() and spec.items, path.name
        assert all(item.family.name in REGISTRY for item in spec.items), path.name


# ------------------------------------------------------------------ points that add up


@pytest.mark.parametrize("points, parts, shares", [
    (3, 3, [1, 1, 1]),
    (3, 2, [1.5, 1.5]),          # an even split in halves
    (2, 3, [1, 0.5, 0.5]),       # not 0.67 three times: halves, the extra to the first part
    (5, 3, [2, 2, 1]),           # whole points where they reach
    (1, 3, [0.5, 0.25, 0.25]),   # quarters where halves do not reach
    (2, 5, [0.4] * 5),           # an even split exact in hundredths
    (0.3, 1, [0.3]),             # one part takes the problem's points as written
])
def test_a_list_of_steps_splits_points_into_shares_that_add_up(points, parts, shares):
    steps = ["residual", "mean", "var", "normalized", "output"][:parts]
    item = one_item({"family": "attention.layernorm", "points": points, "ask": steps}).items[0]
    assert [p.points for p in item.parts] == shares
    assert sum(Decimal(str(p.points)) for p in item.parts) == Decimal(str(points))


def test_points_that_no_printed_share_splits_are_refused_with_the_field_named():
    refused({"family": "attention.layernorm", "points": 0.03,
             "ask": ["residual", "mean", "var", "normalized"]}, "points", "4 asked parts")
    refused({"family": "attention.output", "points": 1.001, "ask": ["scores", "output"]}, "points", "hundredths")


_PRINTED_POINTS = re.compile(r"\(([0-9.]+)\s*pt\)")


def test_printed_part_points_add_up_to_the_problem_on_every_bundled_spec():
    """What a person adds on paper: the parts' printed points, against the problem's."""
    for path in sorted(bank_dir().glob("*.yaml")):
        spec = load_spec(path)
        ws = build_worksheet(spec, ["x"], seed=1)
        for item, text in zip(spec.items, render_items(ws, 0, "problem")):
            printed = [Decimal(p) for p in _PRINTED_POINTS.findall(text.replace("\u00a0", " "))]
            assert len(printed) == len(item.parts), (path.name, item.id, text)
            assert sum(printed) == Decimal(str(item.points)), (path.name, item.id, printed)
