"""Question banks: well-formed XML whose every answer value and tolerance is the key's."""

from __future__ import annotations

import io
import math
import re
import xml.etree.ElementTree as ET
import zipfile

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz import load_spec
from qkvquiz.cli import app
from qkvquiz.exchange.qti21 import QTI_NS
from qkvquiz.exchange.question_bank import entry_weights, number_text
from qkvquiz.exchange.questions import export_questions
from qkvquiz.core.resources import bank_dir

Q = f"{{{QTI_NS}}}"


@pytest.fixture(scope="module")
def bank():
    spec = load_spec(bank_dir() / "masking.yaml")
    return export_questions(spec, 3, "test")


def expected_entries(ws, item_index: int, student: int):
    """(value, band) of every entry of every part, from the solved variants (the key's values)."""
    item, env = ws.spec.items[item_index], ws.envs[item_index]
    out = []
    for part in item.parts:
        exact = np.asarray(env[part.step][student], dtype=np.float64)
        band = item.tolerance_for(part.step).band(exact)
        asked = part.asked(exact.shape)
        out += [(float(exact[i]), float(band[i])) for i in np.ndindex(exact.shape) if asked is None or asked[i]]
    return out


def test_number_text_round_trips():
    for x in (0.1, 1 / 3, -2.5e-7, 123456789.125, 2.0, -0.0):
        assert float(number_text(x)) == x and "e" not in number_text(x).lower()


def test_moodle_cloze_values_equal_the_key(bank):
    ws, files = bank
    root = ET.fromstring(files["questions-moodle.xml"])
    questions = [q for q in root if q.get("type") == "cloze"]
    assert len(questions) == len(ws.spec.items) * len(ws.students)
    k = 0
    for i in range(len(ws.spec.items)):
        for s in range(len(ws.students)):
            q = questions[k]
            k += 1
            text = q.find("questiontext/text").text
            fields = re.findall(r"\{(\d+):(NUMERICAL|SHORTANSWER):([^}]*)\}", text)
            expected = expected_entries(ws, i, s)
            assert len(fields) == len(expected)
            for (weight, kind, body), (value, band) in zip(fields, expected):
                assert int(weight) >= 1
                if math.isinf(value):
                    assert kind == "SHORTANSWER" and "=-inf" in body.split("~")
                else:
                    answer, tolerance = body.removeprefix("=").split(":")
                    assert float(answer) == value and float(tolerance) == band


def test_cloze_weights_follow_points():
    class P:
        def __init__(self, points, n):
            self.points, self.entries = points, [0] * n
    assert entry_weights([P(1, 3), P(2, 3)]) == [[1] * 3, [2] * 3]
    assert entry_weights([P(1.5, 2), P(1, 4)]) == [[3] * 2, [1] * 4]


def test_qti_package_well_formed_and_values_equal_the_key(bank):
    ws, files = bank
    zf = zipfile.ZipFile(io.BytesIO(files["questions-qti21.zip"]))
    manifest = ET.fromstring(zf.read("imsmanifest.xml"))
    hrefs = [r.get("href") for r in manifest.iter("{http://www.imsglobal.org/xsd/imscp_v1p1}resource")]
    assert len(hrefs) == len(ws.spec.items) * len(ws.students)
    for s in range(len(ws.students)):
        for i, item in enumerate(ws.spec.items):
            root = ET.fromstring(zf.read(f"items/{item.id}-{ws.students[s]}.xml"))
            assert root.tag == f"{Q}assessmentItem"
            decls = root.findall(f"{Q}responseDeclaration")
            expected = expected_entries(ws, i, s)
            assert len(decls) == len(expected)
            interactions = {e.get("responseIdentifier") for e in root.iter(f"{Q}textEntryInteraction")}
            assert interactions == {d.get("identifier") for d in decls}
            conditions = root.findall(f"{Q}responseProcessing/{Q}responseCondition")
            for decl, cond, (value, band) in zip(decls, conditions, expected):
                correct = decl.find(f"{Q}correctResponse/{Q}value").text
                if math.isinf(value):
                    assert decl.get("baseType") == "string" and correct == "-inf"
                else:
                    assert decl.get("baseType") == "float" and float(correct) == value
                    equal = cond.find(f".//{Q}equal")
                    assert equal.get("toleranceMode") == "absolute"
                    assert [float(t) for t in equal.get("tolerance").split()] == [band, band]
            maxscore = root.find(f"{Q}outcomeDeclaration[@identifier='MAXSCORE']/{Q}defaultValue/{Q}value").text
            assert float(maxscore) == pytest.approx(item.points)


def test_cli_questions(tmp_path):
    result = CliRunner().invoke(app, ["export", "questions", "attention-basics", "-n", "2", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "questions-moodle.xml").exists() and (tmp_path / "questions-qti21.zip").exists()
    bad = CliRunner().invoke(app, ["export", "questions", "attention-basics", "--to", "gift", "--out", str(tmp_path)])
    assert bad.exit_code == 2 and "gift" in bad.output


def test_canvas_package_blanks_accept_the_key_values(bank):
    from qkvquiz.exchange.canvas_qti import QTI12_NS, accepted_texts
    from qkvquiz.exchange.question_bank import Entry

    assert accepted_texts(Entry((), 0.4567, 0.01)) == ["0.45", "0.46"]  # within [0.4467, 0.4667]
    assert accepted_texts(Entry((), 0.5, 0.01)) == ["0.49", "0.50", "0.5", "0.51"]
    assert accepted_texts(Entry((), float("-inf"), 0.0)) == ["-inf", "−∞", "-∞"]
    ws, files = bank
    zf = zipfile.ZipFile(io.BytesIO(files["questions-canvas-qti.zip"]))
    manifest = ET.fromstring(zf.read("imsmanifest.xml"))
    href = next(manifest.iter("{http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1}resource")).get("href")
    root = ET.fromstring(zf.read(href))
    N = f"{{{QTI12_NS}}}"
    groups = root.findall(f"{N}assessment/{N}section/{N}section")
    assert len(groups) == len(ws.spec.items)
    for i, group in enumerate(groups):
        assert group.find(f"{N}selection_ordering/{N}selection/{N}selection_number").text == "1"
        items = group.findall(f"{N}item")
        assert len(items) == len(ws.students)
        for s, node in enumerate(items):
            expected = expected_entries(ws, i, s)
            kind = node.find(f".//{N}fieldentry").text
            if kind == "numerical_question":
                (value, band), = expected
                assert float(node.find(f".//{N}varequal").text) == value
                continue
            responses = node.findall(f"{N}presentation/{N}response_lid")
            assert len(responses) == len(expected)
            text = node.find(f"{N}presentation/{N}material/{N}mattext").text
            for response, (value, band) in zip(responses, expected):
                name = response.find(f"{N}material/{N}mattext").text
                assert f"[{name}]" in text
                texts = [m.text for m in response.iter(f"{N}mattext")][1:]
                if math.isinf(value):
                    assert "-inf" in texts
                else:
                    assert all(abs(float(t) - value) <= band * (1 + 1e-9) for t in texts)
                    assert any(abs(float(t) - value) <= band / 2 + 1e-12 for t in texts)  # the rounded value


def test_only_the_asked_entries_become_answer_fields():
    # A partial ask (2 of a 2×3 matrix) and a delta sequence whose last chunk is shorter (the
    # padding of chunk 2 is no question): fields for the asked entries only, "—" elsewhere.
    from qkvquiz.spec import parse_spec

    spec = parse_spec({"title": "T", "items": [
        {"family": "attention.output", "params": {"queries": 2, "keys": 3, "d_k": 4},
         "ask": {"scores": {"entries": [[1, 2], [1, 3]]}}},
        {"family": "delta.chunk_forward", "params": {"chunks": 2, "chunk": 3, "last_chunk": 2}, "ask": ["X"]},
    ]})
    ws, files = export_questions(spec, 2, "asked")
    fields = [len(expected_entries(ws, i, s)) for i in range(2) for s in range(2)]
    assert fields == [2, 2, 10, 10]
    cloze = [q.find("questiontext/text").text for q in ET.fromstring(files["questions-moodle.xml"])
             if q.get("type") == "cloze"]
    assert [len(re.findall(r"\{\d*:(?:NUMERICAL|SHORTANSWER):", t)) for t in cloze] == fields
    assert cloze[0].count("<td>—</td>") == 4 and cloze[2].count("<td>—</td>") == 2
    with zipfile.ZipFile(io.BytesIO(files["questions-qti21.zip"])) as z:
        items = sorted(n for n in z.namelist() if n.endswith(".xml") and "manifest" not in n)
        counts = [z.read(n).decode().count("textEntryInteraction ") for n in items]
    assert sorted(counts) == sorted(fields)


# ---------------------------------------------------------------- masked entries weigh as graded


@pytest.fixture(scope="module")
def causal_bank():
    """A 4×4 causal-masked attention: its scores and weights each fix 6 entries (−∞, 0)."""
    from qkvquiz.spec import parse_spec

    spec = parse_spec({"title": "T", "items": [
        {"family": "attention.masked", "params": {"mask": "causal", "tokens": 4}, "ask": {"scores": 1, "weights": 2}},
    ]})
    return export_questions(spec, 2, "causal")


def graded_units(ws, student: int):
    """Per part: the grader's fixed entries (bool per entry) and the share of the part that one
    entry no mask fixes earns, and that all the fixed entries together earn (``entry_credit``)."""
    from qkvquiz.grade.checks import entry_credit, fixed_entries

    item, env = ws.spec.items[0], ws.envs[0]
    out = []
    for part in item.parts:
        fixed = fixed_entries(item, part, env, len(ws.students))[student:student + 1]
        one = np.zeros_like(fixed)
        one[0, np.flatnonzero(~fixed[0])[0]] = True
        out.append((fixed[0], float(entry_credit(one, fixed)[0]), float(entry_credit(fixed.copy(), fixed)[0])))
    return out


def test_a_causal_part_gives_its_mask_half_as_the_grader_does(causal_bank):
    ws, _files = causal_bank
    for fixed, unmasked, masked in graded_units(ws, 0):
        assert fixed.sum() == 6 and unmasked == pytest.approx(1 / 20) and masked == pytest.approx(1 / 2)


def test_moodle_cloze_weights_give_the_masked_entries_their_share(causal_bank):
    ws, files = causal_bank
    cloze = [q.find("questiontext/text").text for q in ET.fromstring(files["questions-moodle.xml"])
             if q.get("type") == "cloze"]
    for s, text in enumerate(cloze):
        weights = [int(w) for w in re.findall(r"\{(\d+):(?:NUMERICAL|SHORTANSWER):", text)]
        units = graded_units(ws, s)
        assert len(weights) == 16 * len(units)
        for k, (fixed, unmasked, masked) in enumerate(units):
            part = np.array(weights[16 * k:16 * (k + 1)])
            assert part[~fixed].tolist() == [part[~fixed][0]] * 10  # every unmasked entry alike
            assert part[~fixed][0] / part.sum() == pytest.approx(unmasked)  # 1/20 of the part
            assert part[fixed].sum() / part.sum() == pytest.approx(masked)  # the 6 masked: half
        # The parts' points (1 and 2) split the question's mark as in the spec.
        assert sum(weights[16:]) == 2 * sum(weights[:16])


def qti_score(root: ET.Element, typed: dict[str, str | None]) -> float:
    """SCORE after running the item's response processing on the ``typed`` responses (the QTI 2.1
    expressions the exports write: and, or, not, isNull, equal, stringMatch, match, sum)."""
    decls = {d.get("identifier"): d for d in root.findall(f"{Q}responseDeclaration")}
    outcomes = {o.get("identifier"): float(o.find(f"{Q}defaultValue/{Q}value").text)
                for o in root.findall(f"{Q}outcomeDeclaration")}

    def response(rid):
        text = typed.get(rid)
        if text is None or decls[rid].get("baseType") == "string":
            return text
        try:
            return float(text)
        except ValueError:
            return None  # a float response that is no number

    def value(node):
        tag = node.tag.removeprefix(Q)
        kids = list(node)
        if tag == "and":
            return all(value(k) for k in kids)
        if tag == "or":
            return any(value(k) for k in kids)
        if tag == "not":
            return not value(kids[0])
        if tag == "isNull":
            return value(kids[0]) is None
        if tag == "variable":
            rid = node.get("identifier")
            return response(rid) if rid in decls else outcomes[rid]
        if tag == "correct":
            text = decls[node.get("identifier")].find(f"{Q}correctResponse/{Q}value").text
            return float(text) if decls[node.get("identifier")].get("baseType") == "float" else text
        if tag == "baseValue":
            return node.text if node.get("baseType") == "string" else float(node.text)
        if tag == "equal":
            assert node.get("toleranceMode") == "absolute"
            low, high = (float(t) for t in node.get("tolerance").split())
            x, y = value(kids[0]), value(kids[1])
            return x is not None and y - low <= x <= y + high
        if tag == "stringMatch":
            x, y = value(kids[0]), value(kids[1])
            return x is not None and (x.lower() == y.lower() if node.get("caseSensitive") == "false" else x == y)
        if tag == "match":
            return value(kids[0]) == value(kids[1])
        if tag == "sum":
            return sum(value(k) for k in kids)
        raise AssertionError(f"no such expression here: {tag}")

    for cond in root.findall(f"{Q}responseProcessing/{Q}responseCondition"):
        branch = cond.find(f"{Q}responseIf")
        test, *actions = list(branch)
        if value(test):
            for action in actions:
                outcomes[action.get("identifier")] = value(action[0])
    return outcomes["SCORE"]


def test_qti_scores_give_the_masked_entries_their_share_as_the_grader_does(causal_bank):
    # The response processing gives what entry_credit gives: every unmasked entry 1/20 of its part,
    # and the 6 masked entries together half of it, only when all of them are right.
    from qkvquiz.grade.checks import entry_credit

    ws, files = causal_bank
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(io.BytesIO(files["questions-qti21.zip"])) as zf:
        for s, variant in enumerate(ws.students):
            root = ET.fromstring(zf.read(f"items/{ws.spec.items[0].id}-{variant}.xml"))
            decls = root.findall(f"{Q}responseDeclaration")
            right = {d.get("identifier"): d.find(f"{Q}correctResponse/{Q}value").text for d in decls}
            units = graded_units(ws, s)
            fixed = np.concatenate([f for f, *_ in units])
            cases = [np.ones(32, bool), ~fixed, fixed, np.zeros(32, bool)]
            for j in np.flatnonzero(fixed)[[0, 6]]:  # one masked entry of each part wrong
                cases.append(np.arange(32) != j)
            cases += [rng.random(32) < 0.8 for _ in range(20)]
            for ok in cases:
                typed = {rid: right[rid] if good else "12345" for rid, good in zip(right, ok)}
                expected = sum(points * entry_credit(ok[None, 16 * k:16 * (k + 1)], f[None])[0]
                               for k, ((f, *_), points) in enumerate(zip(units, (1, 2))))
                assert qti_score(root, typed) == pytest.approx(expected)
            assert qti_score(root, {}) == 0  # nothing typed


def test_a_chinese_bank_names_its_parts_in_chinese():
    """A Chinese set's questions labelled every part with the English prompt ("(a) Compute the
    scaled score matrix"): the labels are in the bank's language, as its pages are."""
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    _ws, files = export_questions(spec, 1, "zh", lang="zh")
    moodle = files["questions-moodle.xml"]
    assert "&lt;strong&gt;(a) 计算" in moodle, moodle[:2000]  # the part's label, above its fields
    assert "(a) Compute" not in moodle
    _ws, files = export_questions(spec, 1, "en", lang="en")
    assert "(a) Compute the scaled score" in files["questions-moodle.xml"]
