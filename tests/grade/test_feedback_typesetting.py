"""The feedback a student gets set as well as the worksheets: tables of numbers that line up,
Chinese labels and headings with Chinese punctuation, part ids as code, and on the page
(HTML/PDF) the notation of its sentences set as the worksheet sets it."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from qkvquiz.core.i18n import using
from qkvquiz.core.submissions import Submission
from qkvquiz.core.tolerance import Tolerance
from qkvquiz.exchange.feedback_export import feedback_html, page_markdown
from qkvquiz.grade import feedback as fb
from qkvquiz.grade.grader import grade
from qkvquiz.key import encode

from ..helpers import make_key

TWO_DECIMALS = Tolerance("decimals", 2)

LAYER = [
    {"family": "attention.scores", "params": {"tokens": 3, "d_k": 4}, "points": 2},
    {"family": "attention.output", "params": {"tokens": 3, "d_k": 4, "d_v": 2},
     "ask": {"scores": 1, "weights": 2, "output": 2}},
]


def graded_layer(lang: str):
    """One student: the scores of q1 not divided by √dₖ; q2's scores right, its weights all off
    (so they neither follow from the scores nor keep their rows' sums), its output blank."""
    key, doc = make_key(LAYER, students=["s01"])
    answers = copy.deepcopy(doc["students"][0]["answers"])
    answers["q1.scores"] = encode(np.asarray(answers["q1.scores"], dtype=float) * 2)
    answers["q2.weights"] = encode(np.asarray(answers["q2.weights"], dtype=float) + 0.2)
    answers["q2.output"] = None
    report = grade(key, [Submission("s01.json", "s01", answers)], lang=lang)
    return report, fb.feedback_markdown(report, report.results[0], lang=lang)


# ----------------------------------------------------------------------------- tables


def test_the_numbers_of_a_table_are_right_aligned_and_its_row_headers_left():
    with using("en"):
        lines = fb.table(np.array([[-0.5, 1.5], [-1.5, 2.0]]), TWO_DECIMALS)
    assert lines[1] == "|---|---:|---:|"
    assert all(line.count("|") == 4 for line in lines)


def test_a_table_writes_every_number_with_the_decimals_its_finest_entry_needs():
    weights = np.array([[0.274068619, 0.274068619, 0.451862762],
                        [0.449816218, 0.449816218, 0.100367565]])
    with using("en"):
        lines = fb.table(weights, TWO_DECIMALS, bold=np.array([[True, False, False], [False, False, False]]))
    assert lines[2:] == ["| row 1 | **0.274** | 0.274 | 0.452 |", "| row 2 | 0.450 | 0.450 | 0.100 |"]
    with using("en"):
        scores = fb.table(np.array([[-1.0, -0.5], [3.5, 1.0]]), TWO_DECIMALS)
        masked = fb.table(np.array([[0.0, -np.inf], [-1.0, 2.0]]), TWO_DECIMALS)
    assert scores[2:] == ["| row 1 | −1.0 | −0.5 |", "| row 2 | 3.5 | 1.0 |"]
    assert masked[2:] == ["| row 1 | 0 | −∞ |", "| row 2 | −1 | 2 |"]  # whole numbers stay whole
    # Never finer than the tolerance asks (one digit past it), and the wrong entries' list and a
    # lone value keep their own shortest form: only the table's columns are evened.
    with using("en"):
        fine = fb.table(np.array([[0.123456789, 0.5]]), TWO_DECIMALS)
    assert fine[2] == "| row 1 | 0.123 | 0.500 |"
    assert fb.number_text(0.449816218, TWO_DECIMALS) == "0.45"


def test_not_asked_entries_do_not_set_a_tables_decimals():
    with using("en"):
        lines = fb.table(np.array([[0.5, 0.123456]]), TWO_DECIMALS, asked=np.array([[True, False]]))
    assert lines[2] == "| row 1 | 0.5 | — |"


# ----------------------------------------------------------------------------- labels, headings, ids


def test_chinese_labels_and_headings_use_chinese_punctuation():
    _report, text = graded_layer("zh")
    assert "： " not in text, [line for line in text.splitlines() if "： " in line]
    assert text.count("\n### ") == 4
    for line in text.splitlines():
        if line.startswith("### "):
            assert re.fullmatch(r"### \([a-z]\) .+（`q\d\.\w+`）", line), line
    assert "**学生**：`s01` · **变体**：`" in text
    assert "**不正确**：得 0 分" in text and "- **可能的错误**：" in text
    page = feedback_html(text)
    assert "<strong>学生</strong>：" in page and "<strong>不正确</strong>：" in page  # the bold closes
    assert "**" not in page


def test_english_labels_keep_their_colon_and_space():
    _report, text = graded_layer("en")
    assert "**Student:** `s01` · **Variant:** `" in text
    assert "**Not correct:** 0 of 2 points." in text and "- **Likely mistake:** " in text
    assert "\n### (a) Compute the scaled score matrix S = QKᵀ/√dₖ (row i: query i against every key) (`q1.scores`)\n" in text


def test_part_ids_in_running_text_are_code():
    for lang in ("en", "zh"):
        _report, text = graded_layer(lang)
        carry = [line for line in text.splitlines() if "q2.scores" in line and not line.startswith("###")]
        assert carry, text
        for line in carry:
            assert re.sub(r"`q2\.scores`", "", line).count("q2.scores") == 0, line


def test_a_part_id_inside_a_code_span_or_a_longer_name_is_left_alone():
    ids = ["q1.scores"]
    assert fb._code_ids("from your answer to q1.scores, which", ids) == "from your answer to `q1.scores`, which"
    assert fb._code_ids("under 'q1.scores'; the file has one under 'Q1.SCORES'", ids) == \
        "under `q1.scores`; the file has one under 'Q1.SCORES'"
    assert fb._code_ids("you wrote `q1.scores` and q1.scoresx", ids) == "you wrote `q1.scores` and q1.scoresx"


# ----------------------------------------------------------------------------- the page


def test_the_page_sets_the_sentences_notation_as_math_and_the_file_stays_plain_text():
    for lang in ("en", "zh"):
        _report, text = graded_layer(lang)
        assert "√dₖ" in text and "$" not in text  # the Markdown file reads as plain text
        marked = page_markdown(text)
        assert "$\\sqrt{d_k}$" in marked and "√dₖ" not in marked
        assert "$A$" in marked  # "the attention weights A", "each row of A"
        assert "(`q1.scores`)" in marked or "（`q1.scores`）" in marked  # ids stay code
        assert "(b)" in marked  # a part's letter is no variable
        tables = [line for line in marked.splitlines() if line.startswith("|")]
        assert tables and tables == [line for line in text.splitlines() if line.startswith("|")]
        page = feedback_html(text)
        assert "√dₖ" not in page and '<span class="rad"><i>d</i><sub class="i">k</sub></span>' in page
        assert "<i>A</i>" in page  # italic, as on the worksheet


def test_the_page_right_aligns_the_numbers_and_keeps_a_label_with_its_table():
    _report, text = graded_layer("en")
    page = feedback_html(text)
    assert '<td style="text-align:right">' in page
    assert '<body class="feedback">' in page
    assert "body.feedback table { break-before: avoid; break-inside: avoid; }" in page
    assert "body.feedback table + p" in page


def _exact_answers(blocks: int) -> str:
    """Parts of feedback, each a few lines of text before its exact answer, so that one label
    or another falls at the foot of a page."""
    table = ["| | col 1 | col 2 | col 3 |", "|---|---:|---:|---:|"]
    table += [f"| row {i} | 0.274 | −0.450 | 0.100 |" for i in range(1, 5)]
    out = []
    for k in range(blocks):
        out += [f"### ({'abcdefgh'[k % 8]}) Part {k}", ""]
        out += ["- row 1, column 1: you wrote 0.3, the exact value is 0.274"] * (1 + k % 7)
        out += ["", "The exact answer:", "", *table, "",
                "Tolerance: an entry counts when it is within 0.01 of the exact value.", ""]
    return "\n".join(out)


@pytest.mark.slow
def test_a_label_its_table_and_its_tolerance_share_a_page(tmp_path):
    from qkvquiz.render.html_page import markdown_to_html
    from qkvquiz.render.pdf import render_pdf

    from ..render.pdf_reading import page_texts

    def cuts(html: str, name: str) -> list[str]:
        target = tmp_path / name
        render_pdf(html, target)
        out = []
        for n, text in enumerate(page_texts(target)):
            lines = [line.strip() for line in text.splitlines() if line.strip() and "Page " not in line]
            if lines and lines[-1] == "The exact answer:":
                out.append(f"page {n + 1} ends with the label")
            if lines and lines[0].startswith(("Tolerance:", "row ")):
                out.append(f"page {n + 1} opens with {lines[0]!r}")
        return out

    with using("en"):
        markdown = _exact_answers(24)
        assert cuts(markdown_to_html(markdown), "plain.pdf")  # the document does reach the cut
        assert cuts(feedback_html(markdown), "feedback.pdf") == []


def test_quoted_text_numbers_with_an_exponent_and_words_stay_text_on_the_page():
    lines = [
        'Your answer could not be read: cannot read "x" as a shape (write rows × columns, such as 2×4).',
        "No answer under `q1.scores`; the file has one under 'Q1.SCORES': use the part id exactly.",
        "- row 1, column 2: you wrote −5.55112e-17, the exact value is 0.052",
        "无法把“b”识别为形状；σ = √Var，不是方差。",
    ]
    for line in lines:
        assert "$" not in page_markdown(line), page_markdown(line)
    assert page_markdown("the scores were not divided by √dₖ; each row of A") == \
        "the scores were not divided by $\\sqrt{d_k}$; each row of $A$"


def test_html_in_a_feedback_file_stays_text_on_its_page():
    """A feedback file quotes what students and the spec wrote; a page made from it runs no
    markup from it (an image that fetches, a script): it prints as text."""
    page = feedback_html("# Feedback: <img src=x onerror=alert(1)>\n\n<script>alert(2)</script>\n", title="t")
    assert "<img" not in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "&lt;script&gt;alert(2)&lt;/script&gt;" in page


# ----------------------------------------------------------------------------- the worksheet's notation


def test_wrong_entries_are_named_as_on_the_sheet_and_their_values_written_as_the_table_writes_them():
    _report, text = graded_layer("en")
    q1 = text.split("## Problem 1", 1)[1].split("## Problem 2", 1)[0]
    listed = re.findall(r"^- (S\S+): you wrote \S+, the exact value is (\S+)$", q1, re.MULTILINE)
    assert listed and all(re.fullmatch(r"S[₁-₉]{2}", name) for name, _value in listed), q1
    rows = [line.split(" | ")[1:] for line in q1.splitlines() if line.startswith("| row ")]
    cells = {f"S{'₁₂₃₄'[i]}{'₁₂₃₄'[j]}": cell.strip(" |*") for i, row in enumerate(rows) for j, cell in enumerate(row)}
    for name, value in listed:  # one number style in a part: "1.0" in the list where the table says "1.0"
        assert cells[name] == value, (name, value, cells)
    # On the page each name is set as math, as the key sets it, never left as "$S_{11}$".
    page = feedback_html(text)
    assert "$S_" not in page and '<i>S</i><sub>11</sub></span>: you wrote' in page


def test_an_entry_name_past_nine_keeps_its_indices_apart():
    assert fb.sheet_entry_name("S", (9, 2)) == "S₁₀,₃"
    assert fb.sheet_entry_name("A", (0, 1)) == "A₁₂"
    # A letter under an accent or after ∇ as the sheet's boxes label it; anything else in words.
    assert fb.sheet_entry_name(r"\nabla Q", (0, 1)) == "∇Q₁₂"
    assert fb.sheet_entry_name(r"\tilde S", (0, 3)) == "S\u0303₁₄"
    assert fb.sheet_entry_name(r"\bar B_K", (0, 1)) == fb.entry_name((0, 1))
    assert fb.sheet_entry_name(r"S^{(h)}", (0, 1, 1)) == fb.entry_name((0, 1, 1))


def test_an_entry_name_is_set_as_math_on_the_page_whatever_its_indices():
    # S₁₄ was set as "$S_1$₄" (the page read subscripts 0-3 only), S₁₀,₃ as "$S_{10}$,₃".
    for name, latex in (("S₁₄", "S_{14}"), ("S₁₀,₃", "S_{10,3}"), ("S\u0303₁₂", r"\tilde S_{12}"),
                        ("X\u0304₉₁", r"\bar X_{91}")):
        assert page_markdown(f"- {name}: you wrote 0, the exact value is 1") == \
            f"- \u2060${latex}$: you wrote 0, the exact value is 1"


def test_the_page_keeps_each_part_whole_and_marks_missed_entries_beyond_bold():
    _report, text = graded_layer("zh")
    page = feedback_html(text)
    body = page.split("<body", 1)[1]
    assert body.count('<section class="fb-part"><h3') == text.count("\n### ")
    assert "body.feedback section.fb-part { break-inside: avoid; }" in page
    # Missed entries (bold in the file) get a frame and a colour on the page: bold alone hardly
    # shows in a Chinese face.
    rule = page.split("body.feedback table strong {", 1)[1].split("}", 1)[0]
    assert "border:" in rule and "color:" in rule
    assert "<strong>" in body.split("<table", 1)[1]


@pytest.mark.slow
def test_every_page_of_a_feedback_pdf_names_its_student_in_the_footer(tmp_path):
    from qkvquiz.render.pdf import render_pdf

    from ..render.pdf_reading import page_texts

    with using("zh"):
        markdown = "# 反馈：注意力\n\n**学生：** `s77` · **变体：** `AB12-CD34`\n\n" + _exact_answers(24)
        render_pdf(feedback_html(markdown), tmp_path / "fb.pdf")
    texts = page_texts(tmp_path / "fb.pdf")
    assert len(texts) > 2
    assert all("s77" in t for t in texts), [t[-80:] for t in texts]


@pytest.mark.parametrize(("lang", "scaled", "unscaled"), [
    ("en", "(a) Compute the scaled score matrix S = QKᵀ/√dₖ (row i: query i against every key) (",
     "(a) Compute the score matrix S = QKᵀ (row i: query i against every key) ("),
    ("zh", "(a) 计算缩放后的注意力分数矩阵 S = QKᵀ/√dₖ（第 i 行：查询 i 与每个键的分数）（",
     "(a) 计算注意力分数矩阵 S = QKᵀ（第 i 行：查询 i 与每个键的分数）（"),
])
def test_a_part_heading_says_scaled_where_the_worksheet_does(lang, scaled, unscaled):
    # The diagnosis of that part is "not divided by √dₖ": "scaled" must not vanish from its title.
    _report, text = graded_layer(lang)
    assert "### " + scaled + "`q1.scores`" in text  # attention.scores, scaled by default
    key, doc = make_key([{"family": "attention.scores", "params": {"tokens": 2, "d_k": 4, "scale": "none"}}],
                        students=["s01"])
    answers = {pid: None for pid in doc["students"][0]["answers"]}
    report = grade(key, [Submission("s01.json", "s01", answers)], lang=lang)
    assert "### " + unscaled + "`q1.scores`" in fb.feedback_markdown(report, report.results[0], lang=lang)
