"""Variables in prose are set as math, and no sentence a reader sees writes a LaTeX subscript.

A typesetter's complaint: letters in running text were upright ("the weights A", "Compute X̄",
"乘以 γ") where the formulas set them italic, and some sentences wrote raw subscripts (A_ij,
d_model). In every family's problem and solution Markdown (English and Chinese, the teacher forms
too), outside math and code, there is no Greek letter, no lone variable letter, no accented or
sub/superscripted letter and no ``X_ij``; in the plain-text sentences (mistake feedback, the
sentences the grader writes, step prompts and family summaries as printed outside the pages)
there is no ``X_ij``: they use the Unicode subscripts the pages use (Aᵢⱼ, √dₖ) or words.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qkvquiz.core import i18n
from qkvquiz.families import REGISTRY
from qkvquiz.render.form import answer_form_html, form_problems
from qkvquiz.render.markdown import key_markdown, worksheet_markdown
from qkvquiz.render.prose_math import prose_math
from qkvquiz.spec import load_spec, parse_spec
from qkvquiz.worksheet import build_worksheet

from .test_i18n_pages import FORMS, asked_all, text_of

# Math ($…$, $$…$$, one or several lines) and code spans are not prose.
NOT_PROSE = re.compile(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`", re.DOTALL)
RAW_SUBSCRIPT = re.compile(r"\b[A-Za-z∇]+_[A-Za-z0-9{]")
GREEK = re.compile(r"[\u0370-\u03ff]")
# Notation that belongs in math: combining accents (X̄, Ĥ, S̃), Unicode sub- and superscripts
# (dₖ, Wᴼ, Kᵀ, S⁺), ∇ and √.
NOTATION = re.compile(r"[\u0300-\u036f\u1d00-\u1dbf\u2070-\u209f\u2c7c\u2c7d∇√∂]")
# A letter standing alone: a variable, unless the allow-list below says it is a word.
LONE_LETTER = re.compile(r"(?<![A-Za-z0-9_\\'’])[A-Za-z](?![A-Za-z0-9])")  # not the s of "head's"
# Words of one letter: the English article "a", and "A" opening a sentence (then a lower-case
# word follows: "A query whose …", "A chunk of …"); the part letters "**(a)**".
ARTICLE_A = re.compile(r"(?:^|(?<=[.:!?] )|(?<=\*\*)|(?<=- ))A (?=[a-z])")
PART_LETTER = re.compile(r"\*\*\([a-z]\)\*\*")
# "i.e." and "e.g." are abbreviations, "key(s)" a plural; "# T" is the spec's title in these tests.
ABBREVIATIONS = re.compile(r"\b(?:i\.e\.|e\.g\.)|(?<=[a-z])\(s\)|^#+ (?:Answer key: |参考答案：)?T$", re.MULTILINE)


def prose_problems(text: str) -> list[str]:
    """What in ``text`` (Markdown) is notation set outside math: one entry per offending line."""
    found = []
    for line in NOT_PROSE.sub(" ", text).splitlines():
        prose = ABBREVIATIONS.sub(" ", PART_LETTER.sub(" ", ARTICLE_A.sub(" ", line.strip())))
        bad = RAW_SUBSCRIPT.findall(prose) + GREEK.findall(prose) + NOTATION.findall(prose)
        bad += [m for m in LONE_LETTER.findall(prose) if m != "a"]
        if bad:
            found.append(f"{bad}: {line.strip()[:160]}")
    return found


def test_the_check_tells_variables_from_words():
    assert prose_problems("A query attends to every key; the weights A sum to 1.") != []
    assert prose_problems("A query attends to every key; the weights $A$ sum to 1.") == []
    assert prose_problems("- **(a)** Compute $\\bar X$ (a matrix), i.e. the gradient.") == []
    for bad in ("Compute X̄.", "乘以 γ", "Give dₖ.", "the shape Wᴼ", "with A_ij", "the width d_model", "√2"):
        assert prose_problems(bad), bad


EVERY = [{"family": name, "ask": asked_all(name)} for name in sorted(REGISTRY)]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("items", [EVERY, FORMS], ids=["every family, every step", "teacher forms"])
def test_problem_and_solution_prose_sets_every_variable_as_math(lang, items):
    spec = parse_spec({"title": "T", "lang": lang, "items": items})
    with i18n.using(lang):
        ws = build_worksheet(spec, ["s01", "s02"], seed=7)
        pages = {"worksheet": worksheet_markdown(ws, 0), "key": key_markdown(ws)}
    found = sorted({f"{page}: {problem}" for page, text in pages.items() for problem in prose_problems(text)})
    assert not found, "\n".join(found)


BUNDLED = sorted((Path(__file__).resolve().parents[2] / "problem_bank").glob("*.yaml"))


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_the_bundled_specs_set_their_variables_as_math(path, lang):
    """Their instructions and item titles too (a title stays plain text for LMS question names
    and feedback files: its heading sets its notation as math)."""
    with i18n.using(lang):
        ws = build_worksheet(load_spec(path), ["s01"], seed=7)
        pages = {"worksheet": worksheet_markdown(ws, 0), "key": key_markdown(ws)}
    found = sorted({f"{page}: {problem}" for page, text in pages.items() for problem in prose_problems(text)})
    assert not found, "\n".join(found)


def plain_sentences() -> list[str]:
    """Every family sentence printed as plain text somewhere (feedback, terminal, LMS labels,
    the CLI's list): mistakes, prompts, summaries, titles and the givens' descriptions."""
    out = []
    for fam in REGISTRY.values():
        out += [fam.title, fam.summary]
        out += [m.feedback for m in fam.misconceptions]
        out += [s.prompt for s in fam.steps if s.prompt]
        out += [g.description for g in fam.givens]
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_plain_text_sentences_write_no_latex_subscripts(lang):
    with i18n.using(lang):
        shown = [i18n._(text) for text in plain_sentences()]
    found = sorted({text for text in shown if RAW_SUBSCRIPT.search(text) or "$" in text})
    assert not found, "\n".join(found)


def test_a_prompts_unicode_notation_becomes_inline_math_on_a_page():
    assert prose_math("Compute the weights A = softmax(S) row by row") == \
        r"Compute the weights $A = \operatorname{softmax}(S)$ row by row"
    assert prose_math("Compute X̄") == r"Compute $\bar X$"
    assert prose_math("Compute Ā (every entry, treating A as a free C×C matrix)") == \
        r"Compute $\bar A$ (every entry, treating $A$ as a free $C\times C$ matrix)"
    assert prose_math("乘以 γ 再加上 β") == r"乘以 $\gamma$ 再加上 $\beta$"
    assert prose_math("Give the scale √dₖ the scores of a head are divided by") == \
        r"Give the scale $\sqrt{d_k}$ the scores of a head are divided by"
    assert prose_math("Give the shape Wᴼ must have") == r"Give the shape $W^O$ must have"
    assert prose_math("Compute T̄ (the gradient of T = QKᵀ)") == r"Compute $\bar T$ (the gradient of $T = QK^\top$)"
    assert prose_math("lie in [−3σ, 3σ]: give 3σ") == r"lie in $[-3\sigma, 3\sigma]$: give $3\sigma$"
    # Plain text writes the delta rule's B_K as Bₖ (no capital subscripts in Unicode); a page as B_K.
    assert prose_math("Compute B̄ₖ by back substitution") == r"Compute $\bar B_K$ by back substitution"
    # Words of one letter, apostrophes, plurals and math already written stay as they are.
    for text in ("A query attends to every key.", "Compute each row's mean", "the last key(s), i.e. a mask",
                 r"Compute $\bar B_K$ now", ""):
        assert prose_math(text) == text


def test_every_prompt_is_set_as_math_in_the_answer_form():
    spec = parse_spec({"title": "Shapes", "lang": "en", "items": [{"family": "theory.shapes"}, {"family": "delta.chunk_backward"}]})
    page = answer_form_html(build_worksheet(spec, ["s01"], seed=7), 0)
    assert "Give the shape" in page and "by back substitution" in page
    shown = re.sub(r"\([a-z]\)", " ", text_of(page))  # the parts' letters (a), (b) …
    assert not prose_problems(shown)
    # A part the problem's text does not name gets its prompt printed beside its boxes.
    prompts = [part.prompt for problem in form_problems(build_worksheet(spec, ["s01"], seed=7), 0) for part in problem.parts]
    assert len(prompts) == 15
    assert not [p for p in prompts if prose_problems(re.sub(r"\([a-z]\)", " ", text_of(p)))]


def test_acronyms_in_a_title_are_words():
    assert prose_math("Scores and AV together, as a PDF for the UK") == "Scores and $AV$ together, as a PDF for the UK"


def test_exp_of_a_symbol_is_math_and_exp_of_a_number_stays_text():
    # A feedback heading writes the softmax's e^{S_ij} as exp(Sᵢⱼ) (render/unicode_math.py).
    assert prose_math("Aᵢⱼ = exp(S̃ᵢⱼ)") == r"$A_{ij} = \operatorname{exp}(\tilde S_{ij})$"
    assert prose_math("exp(0) = 1, so masked keys") == "exp(0) = 1, so masked keys"


def test_a_letter_with_a_word_below_it_is_math_and_an_identifier_is_not():
    # Plain text writes a subscript in words after "_" (Unicode has no small c): Z_cat, d_model.
    assert prose_math("Y = Z_cat Wᴼ") == r"$Y = Z_{\text{cat}}$ $W^O$"
    assert prose_math("dₖ = d_model / h") == r"$d_k = d_{\text{model}} / h$"
    assert prose_math("sample_mean of x") == "sample_mean of $x$"
