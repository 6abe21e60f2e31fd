"""Auditing a hand-written key: wrong claims are found, with the right values and the mistake."""

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.grade.audit import audit_file, audit_markdown, audit_spec
from qkvquiz.spec import SpecError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "audit-example.yaml"
Q = [[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 1, 1]]
K = [[1, 1, 0, 0], [0, 1, 1, 1], [2, 0, 0, 1]]


def scores_item(claimed, **extra):
    return {"family": "attention.scores", "params": {"tokens": 3, "d_k": 4},
            "givens": {"Q": Q, "K": K}, "claimed": claimed, **extra}


def right_scores():
    q, k = np.array(Q, float), np.array(K, float)
    return [[sum(q[i, d] * k[j, d] for d in range(4)) / 2 for j in range(3)] for i in range(3)]


def test_a_planted_wrong_claim_is_found_and_its_mistake_named():
    unscaled = (np.array(Q) @ np.array(K).T).tolist()
    report = audit_spec({"title": "t", "items": [scores_item({"scores": right_scores()}),
                                                 scores_item({"scores": unscaled})]})
    right, wrong = report.checks
    assert right.verdict == "right" and not right.wrong_entries
    assert wrong.verdict == "wrong" and wrong.mistakes == ["unscaled"]
    assert wrong.expected == right_scores()
    differ = {(i, j) for i in range(3) for j in range(3) if unscaled[i][j] != right_scores()[i][j]}
    assert len(wrong.wrong_entries) == len(differ)
    text = audit_markdown(report)
    assert "q2.scores (attention.scores): WRONG" in text and "not divided by √d_k" in text


def test_a_slip_no_mistake_explains_is_still_reported_with_the_right_value():
    claimed = right_scores()
    claimed[2][1] += 1
    check = audit_spec({"title": "t", "items": [scores_item({"scores": claimed})]}).checks[0]
    assert check.verdict == "wrong" and check.mistakes == []
    assert check.wrong_entries == [("row 3, column 2", f"{claimed[2][1]:g}", f"{right_scores()[2][1]:g}")]


def test_the_example_finds_each_planted_mistake():
    report = audit_file(EXAMPLE)
    verdicts = {f"{c.item}.{c.step}": c for c in report.checks}
    assert [k for k, c in verdicts.items() if c.verdict == "right"] == ["q2.scores", "q3.scores"]
    assert verdicts["q1.scores"].mistakes == ["unscaled"]
    assert verdicts["q2.weights"].mistakes == ["mask_after_softmax"]
    assert any("sum to 1" in s for s in verdicts["q2.weights"].invariants)
    assert verdicts["q3.weights"].verdict == "wrong" and verdicts["q3.weights"].mistakes == []
    assert verdicts["q3.output"].follows_from == ["weights"]
    assert verdicts["q4.output"].mistakes == ["transposed_weights"]


def test_an_unreadable_claim_is_a_format_finding():
    check = audit_spec({"title": "t", "items": [scores_item({"scores": [[1, 2]]})]}).checks[0]
    assert check.verdict == "format" and "3×3" in check.message


@pytest.mark.parametrize("item, field, says", [
    ({"family": "attention.scores", "params": {"tokens": 3, "d_k": 4}, "givens": {"Q": Q},
      "claimed": {"scores": right_scores()}}, "givens", "missing: K"),
    (scores_item({"weights": [[1]]}), "claimed.weights", "unknown step"),
    (scores_item([1, 2]), "claimed", "mapping of step"),
])
def test_an_unusable_audit_names_the_item_and_field(item, field, says):
    with pytest.raises(SpecError) as err:
        audit_spec({"title": "t", "items": [item]}, source="a.yaml")
    assert field in err.value.where and says in err.value.message


def test_items_without_claims_are_listed_not_checked():
    plain = {"family": "attention.weights"}
    report = audit_spec({"title": "t", "items": [plain, scores_item({"scores": right_scores()})]})
    assert report.unchecked == ["q1"] and [c.verdict for c in report.checks] == ["right"]


def test_the_audit_command_exits_1_when_a_claim_is_wrong(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["audit", str(EXAMPLE), "--out", str(tmp_path / "audit.md")])
    assert result.exit_code == 1, result.output
    assert "5 wrong" in (tmp_path / "audit.md").read_text(encoding="utf-8")
    good = tmp_path / "good.yaml"
    good.write_text(
        "title: t\nitems:\n  - family: attention.scores\n    params: {form: vector, d_k: 4}\n"
        "    givens: {Q: [1, 2, 0, 1], K: [1, 1, 1, 1]}\n    claimed: {scores: 2}\n",
        encoding="utf-8",
    )
    ok = runner.invoke(app, ["audit", str(good)])
    assert ok.exit_code == 0, ok.output
    assert "q1.scores (attention.scores): right" in ok.output
    broken = runner.invoke(app, ["audit", str(tmp_path / "missing.yaml")])
    assert broken.exit_code == 2 and "cannot read" in broken.output


def test_the_audit_example_still_loads():
    from qkvquiz.grade.audit import audit_file

    audit_file(Path(__file__).resolve().parents[2] / "examples" / "audit-example.yaml")
