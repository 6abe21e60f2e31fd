"""Spec files: what is accepted, and errors that name the file, the item and the field."""

from pathlib import Path

import numpy as np
import pytest

from qkvquiz.resources import bank_dir
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
    from qkvquiz.families import REGISTRY

    spec = load_spec(bank_dir() / "all-families.yaml")
    assert sorted(item.family.name for item in spec.items) == sorted(REGISTRY)
