"""A student's feedback names each part as the worksheet asked it: the sheet's own sentence and
formula ("(a) Compute the scaled score s = q·k/√dₖ"), in the feedback's language, written in
plain Unicode in the file and set as math on the page."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from qkvquiz.core.i18n import using
from qkvquiz.core.submissions import Submission
from qkvquiz.exchange.feedback_export import feedback_html
from qkvquiz.families import REGISTRY
from qkvquiz.grade import feedback as fb
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.markdown import render_items
from qkvquiz.render.textmath import GREEK, Unsupported
from qkvquiz.render.unicode_math import unicode_math
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

#: Every family asking every step it can, and the forms whose sentence is the template's own.
ITEMS = [{"family": name, "ask": {s.name: 1 for s in family.steps if s.askable}}
         for name, family in REGISTRY.items()] + [
    {"family": "attention.scores", "params": {"form": "vector"}},
    {"family": "attention.scores", "params": {"scale": "none"}},
    {"family": "attention.output", "params": {"scale": "none", "mask": "causal"}},
    {"family": "backprop.projection", "params": {"form": "vector"}},
]
#: A part's line on the worksheet (Markdown): its letter in bold, then its sentence.
SHEET_PART = re.compile(r"^- \*\*\(([a-z])\)\*\* (.+?)[.。]$", re.MULTILINE)
MATH = re.compile(r"\$([^$]+)\$")


@pytest.fixture(scope="module")
def graded():
    """One student with nothing answered (every part gets its heading), the worksheet and the key."""
    ws = build_worksheet(parse_spec({"title": "T", "items": ITEMS}), ["s01"], 3)
    key = key_from_json(json.loads(json.dumps(key_to_json(ws))))
    answers = {p.id: None for item in key.items for p in item.parts}
    report = grade(key, [Submission("s01.json", "s01", answers)])
    return ws, key, report


def sheet_sentences(ws, lang):
    """(part id, the worksheet's sentence as Markdown) for every asked part, read off the sheet."""
    with using(lang):
        problems = render_items(ws, 0, "problem")
    out = []
    for item, markdown in zip(ws.spec.items, problems):
        found = SHEET_PART.findall(markdown)
        assert [letter for letter, _s in found] == list("abcdefghijklmnopqrstuvwxyz"[:len(item.parts)]), markdown
        out += [(part.id, sentence) for part, (_letter, sentence) in zip(item.parts, found)]
    return out


def headings(report, lang):
    """Part id -> the words of its heading in the feedback file."""
    text = fb.feedback_markdown(report, report.results[0], lang=lang)
    found = re.findall(r"^### \([a-z]\) (.+?) ?[(（]`([^`]+)`[)）]$", text, re.MULTILINE)
    return {part: words for words, part in found}


def letters(text):
    """The letters and digits of a formula in order, without marks or case: what must be the same
    in a formula and in its plain Unicode form (Kᵀ ~ K^\\top, dₖ ~ d_k, X̄ ~ \\bar X, β ~ \\beta)."""
    text = re.sub(r"\\(?:text|operatorname|mathrm)\{([^}]*)\}", r"\1", text)
    text = re.sub(r"\\([A-Za-z]+)", lambda m: {"top": "T", **GREEK}.get(m.group(1), m.group(1)
                  if m.group(1) in ("max", "min", "exp", "log", "tanh") else ""), text)
    text = re.sub(r"\bexp\(", "e(", text)  # e^{x} is written exp(x) where x has no superscript form
    return [c.lower() for c in unicodedata.normalize("NFKD", text) if c.isalnum()]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_part_heading_is_the_worksheets_sentence_with_its_formula(graded, lang):
    ws, _key, report = graded
    heads = headings(report, lang)
    sentences = sheet_sentences(ws, lang)
    assert len(heads) == len(sentences) > 60
    for part, sentence in sentences:
        words = MATH.sub(lambda m: unicode_math(m.group(1)), sentence)
        assert heads[part] == words, (part, sentence)
        assert "$" not in heads[part] and "\\" not in heads[part], heads[part]  # plain text in the file
        # Each formula means the same in the heading: the same letters and numbers in order.
        for formula in MATH.findall(sentence):
            assert letters(unicode_math(formula)) == letters(formula), formula


@pytest.mark.parametrize(("lang", "vector", "matrix", "unscaled"), [
    ("en", "Compute the scaled score s = q·k/√dₖ",
     "Compute the scaled score matrix S = QKᵀ/√dₖ (row i: query i against every key)",
     "Compute the score matrix S = QKᵀ (row i: query i against every key)"),
    ("zh", "计算缩放后的注意力分数 s = q·k/√dₖ",
     "计算缩放后的注意力分数矩阵 S = QKᵀ/√dₖ（第 i 行：查询 i 与每个键的分数）",
     "计算注意力分数矩阵 S = QKᵀ（第 i 行：查询 i 与每个键的分数）"),
])
def test_the_scores_heading_keeps_scaled_and_the_formula(graded, lang, vector, matrix, unscaled):
    # The part whose likely mistake is "not divided by √dₖ": "scaled" and √dₖ stay in its title.
    _ws, key, report = graded
    heads = headings(report, lang)
    scores = [p.id for item in key.items if item.family.name == "attention.scores" for p in item.parts]
    assert [heads[p] for p in scores] == [matrix, vector, unscaled]


def test_on_the_page_the_headings_formula_is_math():
    ws = build_worksheet(parse_spec({"title": "T", "items": [ITEMS[-4]]}), ["s01"], 3)
    key = key_from_json(json.loads(json.dumps(key_to_json(ws))))
    report = grade(key, [Submission("s01.json", "s01", {"q1.scores": None})])
    for lang, words in (("en", "Compute the scaled score"), ("zh", "计算缩放后的注意力分数")):
        page = feedback_html(fb.feedback_markdown(report, report.results[0], lang=lang))
        heading = re.search(r"<h3>(.*?)</h3>", page, re.S).group(1)
        assert heading.startswith("(a) " + words), heading
        math = re.findall(r'<span class="math tm">(.*?)</span>(?:</span>)?', heading)
        assert math and "<i>q</i>" in math[0] and "√" in math[0] and "<sub" in math[0], heading


@pytest.mark.parametrize(("latex", "plain"), [
    (r"s = \frac{q \cdot k}{\sqrt{d_k}}", "s = q·k/√dₖ"),
    (r"S = \frac{QK^\top}{\sqrt{d_k}}", "S = QKᵀ/√dₖ"),
    (r"\nabla Q = \frac{\nabla S K}{\sqrt{d_k}}", "∇Q = (∇S K)/√dₖ"),
    (r"\hat H_{ij} = \frac{H_{ij} - \mu_i}{\sqrt{\sigma^2_i + \varepsilon}}", "Ĥᵢⱼ = (Hᵢⱼ − μᵢ)/√(σ²ᵢ + ε)"),
    (r"\mu_i = \frac{1}{d}\sum_j H_{ij}", "μᵢ = 1/d ∑ⱼ Hᵢⱼ"),
    (r"\tilde A = \operatorname{softmax}\!\left(\frac{KQ^\top}{\sqrt{d_k}}\right)", "Ã = softmax(KQᵀ/√dₖ)"),
    (r"\bar B_K = A^{-\top} \bar W", "B̄ₖ = A⁻ᵀ W̄"),
    (r"A = I + \operatorname{tril}(\operatorname{diag}(\beta) G, -1)", "A = I + tril(diag(β) G, −1)"),
    (r"S_t = S_{t-1} + \beta_t (v_t - r_t) k_t^\top", "Sₜ = Sₜ₋₁ + βₜ (vₜ − rₜ) kₜᵀ"),
    (r"A_{ij} = \frac{e^{S_{ij}}}{\sum_l e^{S_{il}}}", "Aᵢⱼ = exp(Sᵢⱼ)/(∑ₗ exp(Sᵢₗ))"),
    (r"e^{-1} + e^2", "e⁻¹ + e²"),
    (r"d_k = d_{\text{model}} / h", "dₖ = d_model / h"),
    (r"S^{(h)} = A^{(h)} V^{(h)}", "S⁽ʰ⁾ = A⁽ʰ⁾ V⁽ʰ⁾"),
    (r"\tilde S_{ij} = S_{ij} \text{ if } M_{ij} = 1, \text{ else } {-\infty}", "S̃ᵢⱼ = Sᵢⱼ if Mᵢⱼ = 1, else −∞"),
])
def test_latex_is_written_as_the_families_plain_sentences_write_it(latex, plain):
    # (an accent as a combining mark, as prose_math reads it back; Ĥ written either way here)
    assert unicodedata.normalize("NFC", unicode_math(latex)) == unicodedata.normalize("NFC", plain)


def test_math_it_cannot_write_is_refused_not_garbled():
    for latex in (r"\begin{bmatrix} 1 & 2 \end{bmatrix}", r"\frac{a}{b", r"\unknowncommand x", r"x^"):
        with pytest.raises(Unsupported):
            unicode_math(latex)


def test_an_item_the_templates_cannot_state_is_headed_by_the_familys_prompts(graded):
    # A key with no student's values to state the problem with (or a problem that lists no parts):
    # the heading falls back to the family's own words for the part, in the language asked.
    import dataclasses

    from qkvquiz.families import Env

    _ws, key, _report = graded
    item = next(i for i in key.items if i.family.name == "attention.output")
    empty = dataclasses.replace(item, env=Env({name: value[:0] for name, value in item.env.items()}))
    for lang, scores in (("en", "Compute the scaled scores"), ("zh", "计算缩放后的注意力分数")):
        with using(lang):
            assert fb.sheet_prompts(empty)[item.parts[0].id] == scores
            assert fb.sheet_prompts(item)[item.parts[0].id] == scores + ("：" if lang == "zh" else ": ") + "S = QKᵀ/√dₖ"
