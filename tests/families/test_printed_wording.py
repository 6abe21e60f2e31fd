"""What a typesetter queried on the printed worksheets and keys of the bundled specs, in English
and Chinese: punctuation after a translated prompt, singular and plural, names that agree, a
prompt that repeats its box's label, digit grouping, a rule stated twice, and "(1 pt)" broken
across lines."""

from __future__ import annotations

import re

import pytest

from qkvquiz.core import i18n
from qkvquiz.render.answer_areas import drop_answer_sentences
from qkvquiz.render.html_page import markdown_body_html
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

NBSP = "\u00a0"


def pages(items: list[dict], lang: str = "en") -> tuple[str, str]:
    """One student's worksheet and the key, as Markdown."""
    spec = parse_spec({"title": "T", "lang": lang, "items": items})
    with i18n.using(lang):
        ws = build_worksheet(spec, ["s01"], seed=7)
        return worksheet_markdown(ws, 0), key_markdown(ws)


# ------------------------------------------------------------------- 1. Chinese punctuation


@pytest.mark.parametrize("form", ["matrix", "vector"])
def test_backprop_projection_parts_use_chinese_punctuation(form):
    """"计算权重的梯度: ∇W = ∇qx⊤." had an ASCII colon and full stop after the translated prompt."""
    worksheet, key = pages([{"family": "backprop.projection", "params": {"form": form},
                             "ask": ["output", "dW", "dX"]}], "zh")
    for page in (worksheet, key):
        parts = [line for line in page.splitlines() if line.startswith("- **(")]
        assert len(parts) == 3, page
        for line in parts:
            assert "：$" in line and line.endswith("$。"), line
            assert ": $" not in line and not line.endswith("$."), line


# ---------------------------------------------------------------- 2. singular and plural


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("padded", [1, 2])
def test_padding_says_key_or_keys(padded, lang):
    worksheet, _key = pages([{"family": "attention.masked",
                              "params": {"mask": "padding", "tokens": 4, "padded": padded}}], lang)
    assert "(s)" not in worksheet
    if lang == "en":
        wanted = ("The last key is padding: no query may attend to it." if padded == 1
                  else f"The last {padded} keys are padding: no query may attend to them.")
    else:
        wanted = f"最后 {padded} 个键是填充，不能被任何查询关注。"  # no plural pronoun for one key
    assert wanted in worksheet


# ------------------------------------------------------------ 3. the empirical check's names


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_empirical_check_names_its_matrices_as_the_text_does(lang):
    """The text names the pairs (q⁽ʳ⁾, k⁽ʳ⁾) and the matrices were labelled q⁽ˢ⁾ and k⁽ˢ⁾: now
    the matrices are Q and K, and the text says that row r of each is q⁽ʳ⁾ and k⁽ʳ⁾."""
    worksheet, key = pages([{"family": "theory.dot_variance", "ask": ["dots", "sample_mean"]}], lang)
    for page in (worksheet, key):
        assert "^{(s)}" not in page
        assert re.search(r"\$\$Q = \\begin\{bmatrix\}.*\\qquad K = \\begin\{bmatrix\}", page)
        assert "$q^{(r)}$" in page and "$k^{(r)}$" in page


# ------------------------------------------------- 4. a prompt does not repeat its box's label


THEORY = [{"family": "theory.dot_variance", "ask": ["variance", "std", "three_sigma", "scaled_variance",
                                                     "dots", "sample_mean", "sample_var"]},
          {"family": "theory.softmax_jacobian", "ask": ["probs", "jacobian", "largest"]},
          {"family": "theory.complexity"}]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_theory_prompts_do_not_end_with_their_symbol_in_brackets(lang):
    """"give the upper end 3σ (3σ)", "(Var(q·k))", "(J)", "(p)", "(N_QKᵀ)": the answer's boxes are
    labelled with the symbol. A symbol a later part uses is named in the prompt itself: σ."""
    worksheet, _key = pages(THEORY, lang)
    parts = [line for line in worksheet.splitlines() if line.startswith("- **(")]
    assert len(parts) == 14
    for line in parts:
        assert not re.search(r"[(（]\$[^$]*\$[)）][.。]$", line), line
    std = "Compute its standard deviation $\\sigma$." if lang == "en" else "计算它的标准差 $\\sigma$。"
    assert any(line.endswith(std) for line in parts), parts


# ------------------------------------------------------------------ 5. digit grouping


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_complexity_key_groups_its_numbers_one_way(lang):
    """The statement said "n = 3064" and the solution "3 064"; the solution "1 126 571 520" and the
    Answers "1126571520". Now four digits stay whole and five or more are grouped, everywhere."""
    _worksheet, key = pages([{"family": "theory.complexity",
                              "params": {"n_range": [3064, 3065], "d_range": [120, 121]}}], lang)
    n = re.search(r"\$n = (\d+)\$", key).group(1)
    assert len(n) == 4
    math = " ".join(re.findall(r"\$([^$]+)\$", key))
    assert f"{n} \\cdot {n}" in math
    numbers = re.findall(r"\d+(?:\\,\d{3})*", math)
    assert [x for x in numbers if "\\," not in x and len(x) > 4] == []
    assert [x for x in numbers if "\\," in x and len(x.replace("\\,", "")) < 5] == []
    answers = key.split("**Answers.**" if lang == "en" else "**答案**")[-1]
    assert "N_{QK^\\top} = " in answers and "\\," in answers


# -------------------------------------------------------------- 6. the masking rule, once


MASKED_RULE = re.compile(r"\\tilde S_\{ij\} = S_\{ij\}")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("ask", [["scores", "weights"], ["weights"]])
def test_the_masked_score_rule_is_stated_once(ask, lang):
    worksheet, _key = pages([{"family": "attention.weights", "params": {"mask": "causal"}, "ask": ask}], lang)
    assert len(MASKED_RULE.findall(worksheet)) == 1, worksheet


# ----------------------------------------------------------------- 7. "(1 pt)" in one piece


SENTENCE = re.compile(r"Answer: .*part `[^`]+`\u00a0\(\d+(?:\.\d+)?(.)pt\)\.")


@pytest.mark.parametrize("family", ["backprop.projection", "backprop.scores", "theory.dot_variance",
                                    "theory.shapes", "attention.scores", "attention.multihead"])
def test_the_points_and_pt_are_tied(family):
    """A line broke in "(1 pt)." and left "pt)." alone, then before "(1 pt)." itself: no-break
    spaces tie the id, the points and "pt", in the templates' sentence and in the parts list
    every generic family prints."""
    worksheet, key = pages([{"family": family}])
    for page in (worksheet, key):
        spaces = SENTENCE.findall(page)
        assert spaces and set(spaces) == {NBSP}, page


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_worksheet_still_drops_the_answer_sentence_beside_its_boxes(lang):
    worksheet, _key = pages([{"family": "backprop.projection"}, {"family": "attention.weights"}], lang)
    html = markdown_body_html(worksheet)
    ids = re.findall(r"<code[^>]*>(q\d\.\w+)</code>", html)
    assert len(ids) >= 3
    with i18n.using(lang):
        dropped = drop_answer_sentences(html, ids)
    word = "Answer:" if lang == "en" else "答案："
    assert word in html and word not in dropped
