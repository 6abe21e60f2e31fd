"""Auditing a hand-written key: wrong claims are found, with the right values and the mistake."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.grade.audit import audit_file, audit_markdown, audit_spec
from qkvquiz.spec import SpecError

from ..helpers import loop_delta

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
    assert "q2.scores (attention.scores): WRONG" in text and "not divided by √dₖ" in text


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


def test_the_audit_example_finds_the_five_claims_it_says_are_wrong():
    from qkvquiz.grade.audit import audit_file

    report = audit_file(Path(__file__).resolve().parents[2] / "examples" / "audit-example.yaml")
    verdicts = {f"{c.item}.{c.step}": c.verdict for c in report.checks}
    # The file's own comments: five claims wrong on purpose, the others right.
    assert verdicts == {"q1.scores": "wrong", "q2.scores": "right", "q2.weights": "wrong", "q3.scores": "right",
                        "q3.weights": "wrong", "q3.output": "wrong", "q4.output": "wrong"}
    for check in report.wrong:  # each names where the claim differs and the right value there
        assert check.wrong_entries and all(right for _, _, right in check.wrong_entries), check.item
    explained = {f"{c.item}.{c.step}" for c in report.wrong if c.diagnosis or c.mistakes}
    assert {"q1.scores", "q2.weights"} <= explained  # not divided by √d_k; masked after the softmax


# --------------------------------------------------------------------------- claims of the forms a teacher writes


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


def test_an_audit_reads_ragged_claims():
    q = [[[1, 0], [0, 1]], [[1, 1]]]
    k = [[[1, 0], [0, 1]], [[1, 1]]]
    v = [[[1, 2], [0, 1]], [[2, 0]]]
    beta = [[1, 1], [0.5]]
    s0 = [[0, 0], [0, 0]]
    flat = lambda x: [row for chunk in x for row in chunk]  # noqa: E731
    final, outs = loop_delta(flat(q), flat(k), flat(v), [1, 1, 0.5], s0)
    claimed_o = [outs[:2].tolist(), [(outs[2] + [0, 1]).tolist()]]  # the last token's output is off by one
    item = {"family": "delta.chunk_forward", "params": {"chunk": 2, "chunks": 2, "last_chunk": 1},
            "givens": {"Q": q, "K": k, "V": v, "beta": beta, "S": s0},
            "claimed": {"O": claimed_o, "S_next": [loop_delta(q[0], k[0], v[0], [1, 1], s0)[0].tolist(),
                                                   final.tolist()]}}
    checks = {c.step: c for c in audit_spec({"title": "t", "items": [item]}).checks}
    assert checks["O"].verdict == "wrong" and [w for w, _, _ in checks["O"].wrong_entries] == ["matrix 2, row 1, column 2"]
    assert checks["S_next"].verdict == "right"


# --------------------------------------------------------------------------- hand-written worksheets


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


@pytest.mark.parametrize("null", [None, [[None, None, None]] * 3, [None, None, None]])
def test_a_step_claimed_as_null_is_not_claimed_and_the_report_says_so(tmp_path, null):
    # A transcription writes `weights: null` (or a grid of nulls) for what the sheet does not answer.
    item = {"family": "attention.output", "params": {"tokens": 3, "d_k": 4, "d_v": 2},
            "givens": {"Q": Q, "K": K, "V": [[1, 0], [0, 1], [1, 1]], "mask": [[1] * 3] * 3},
            "claimed": {"scores": right_scores(), "weights": null, "output": null}}
    report = audit_spec({"title": "t", "items": [item]})
    assert [(c.step, c.verdict) for c in report.checks] == [("scores", "right")]
    assert report.not_claimed == ["q1.weights", "q1.output"] and not report.wrong
    assert report.to_json()["not_claimed"] == ["q1.weights", "q1.output"]
    text = audit_markdown(report)
    assert "1 claimed answer checked" in text and "not claimed (null)" in text and "q1.weights, q1.output" in text
    zh = audit_markdown(report, lang="zh")
    assert "q1.weights, q1.output" in zh and "not claimed" not in zh
    path = tmp_path / "t.yaml"
    path.write_text("title: t\nitems:\n  - family: attention.output\n    params: {tokens: 3, d_k: 4, d_v: 2}\n"
                    f"    givens: {{Q: {Q}, K: {K}, V: [[1, 0], [0, 1], [1, 1]]}}\n"
                    f"    claimed: {{scores: {json.dumps(np.asarray(right_scores()).tolist())}, weights: null}}\n",
                    encoding="utf-8")
    result = CliRunner().invoke(app, ["audit", str(path)])
    assert result.exit_code == 0, result.output
    assert "q1.weights" in result.output


def test_a_file_whose_every_claim_is_null_has_nothing_to_check():
    with pytest.raises(SpecError) as err:
        audit_spec({"title": "t", "items": [scores_item({"scores": None})]})
    assert "every claimed step is null" in err.value.message


def test_the_audit_on_the_console_wraps_between_words(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    example = Path(__file__).resolve().parents[2] / "examples" / "audit-example.yaml"
    result = CliRunner().invoke(app, ["audit", str(example)])
    assert result.exit_code == 1, result.output
    assert max(len(line.rstrip()) for line in result.output.splitlines()) <= 80
    said = " ".join(result.output.split())
    assert ("masked scores must be −∞ before it, so that each row's remaining weights still sum to 1." in said)
