"""In a student's feedback PDF each part stays on one page: its heading, what was wrong and the
exact answer's matrix under it, read from the PDF's text as a reader of the page would."""

from __future__ import annotations

import re

import numpy as np
import pytest

from qkvquiz.core.i18n import _, using
from qkvquiz.core.submissions import Submission
from qkvquiz.exchange.feedback_export import feedback_html
from qkvquiz.grade import feedback as fb
from qkvquiz.grade.grader import grade
from qkvquiz.key import encode

from ..helpers import make_key
from ..render.pdf_reading import page_texts

pytestmark = pytest.mark.slow

#: Twelve short parts (one entry wrong in each), three or so to a page.
ITEMS = [{"family": "attention.output", "params": {"tokens": 4, "d_k": 4, "d_v": 3},
          "ask": {"scores": 1, "weights": 1, "output": 1}}] * 4


def _one_entry_off(value):
    a = np.asarray(value, dtype=float).copy()
    a.flat[0] += 0.5
    return encode(a)


def feedback_file(lang: str) -> str:
    key, doc = make_key(ITEMS, students=["s01"])
    answers = {pid: _one_entry_off(v) for pid, v in doc["students"][0]["answers"].items()}
    report = grade(key, [Submission("s01.json", "s01", answers)])
    return fb.feedback_markdown(report, report.results[0], lang=lang)


def exact_rows(markdown: str) -> dict[str, list[str]]:
    """Part id -> the rows of its exact answer's table, each row's numbers as one text."""
    out = {}
    for block in re.split(r"\n(?=### )", markdown)[1:]:
        part = re.search(r"`([^`]+)`[)）]\n", block).group(1)
        table = [line for line in block.splitlines() if line.startswith("|")][2:]  # past header and rule
        out[part] = [" ".join(c.strip(" *") for c in line.split("|")[2:-1]) for line in table]
    return out


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize(("lang", "filler"), [("en", 0), ("en", 5), ("zh", 2)])
def test_each_parts_exact_answer_matrix_is_on_the_page_of_its_heading(tmp_path, lang, filler):
    from qkvquiz.render.pdf import render_pdf

    markdown = feedback_file(lang)
    with using(lang):
        label = _squeezed(_("The exact answer:"))
    rows = exact_rows(markdown)
    assert len(rows) == 12 and all(len(r) == 4 for r in rows.values())
    # Lines of text before the first problem move every part down the pages: with each amount
    # some part starts near a page's foot.
    markdown = markdown.replace("\n## Problem 1", "\n" + "A line of text before the problems.\n\n" * filler
                                + "\n## Problem 1", 1)
    pdf = tmp_path / "feedback.pdf"
    render_pdf(feedback_html(markdown, title="t"), pdf)
    pages = [_squeezed(t) for t in page_texts(pdf)]
    assert len(pages) >= 4
    # Each heading in the sheet's words and notation, as the PDF's text has it.
    scaled = {"en": "(a) Compute the scaled scores: S = QK⊤/√dk", "zh": "(a) 计算缩放后的注意力分数：S = QK⊤/√dk"}[lang]
    assert sum(text.count(scaled) for text in pages) == 4, pages[0][:400]
    for part, table in rows.items():
        heading = re.compile(rf"[(（]{re.escape(part)}[)）]")
        on = [k for k, text in enumerate(pages) if heading.search(text)]
        assert len(on) == 1, (part, on)
        # The part's text on its page: from its heading to the next heading (or the page's end).
        rest = re.split(r"\([a-z]\) ", heading.split(pages[on[0]], 1)[1])[0]
        assert label in rest, (part, on[0] + 1, rest[:300])
        for row in table:
            assert row in rest, (part, on[0] + 1, row, rest)
