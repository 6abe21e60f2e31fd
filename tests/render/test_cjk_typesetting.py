"""Chinese pages as a typesetter reads them: every mark in a face that has it (no empty box
for "。" after a matrix), one clear word when no CJK font is installed, and Chinese
punctuation without stray spaces."""

from __future__ import annotations

import re

import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.core import i18n
from qkvquiz.core.resources import bank_dir
from qkvquiz.render.documents import key_student_document
from qkvquiz.render.fonts import has_cjk
from qkvquiz.render.math_html import math_html

#: The transparent text of a picture of math: what the picture draws, in its math face.
_PICTURE_TEXT = re.compile(r'<span class="math-svg"[^>]*>([^<]*)</span>')


def test_punctuation_after_a_displayed_matrix_is_text_not_a_picture():
    r"""The math face of the pictures has no "。": set in it, the mark printed as an empty box."""
    for mark in ("。", "，", "；", "："):
        body = math_html(r"H = \begin{bmatrix} 1 & -2 \\ 3 & 4 \end{bmatrix}" + mark, display=True, text=True)
        assert "math-svg" not in body, mark
        assert body.endswith(mark), body
    # Between matrices, the full-width comma stays with the matrix it follows.
    two = math_html(r"Q = \begin{bmatrix} 1 & 2 \end{bmatrix}，\quad K = \begin{bmatrix} 3 & 4 \end{bmatrix}。",
                    display=True, text=True)
    groups = re.findall(r'<span class="math-group">(.*?)</span>(?= <span class="math-group">|$)', two, re.S)
    assert len(groups) == 2 and groups[0].endswith("，") and groups[1].endswith("。"), two
    assert "math-svg" not in two


@pytest.mark.slow
def test_no_picture_of_math_in_a_chinese_key_holds_cjk_text():
    """A Chinese key of every family: no piece of math drawn as a picture (whose face has no
    CJK glyph) holds a Chinese character or mark."""
    spec = load_spec(bank_dir() / "all-families.yaml")
    with i18n.using("zh"):
        ws = build_worksheet(spec, ["s01"], seed=0)
        key = key_student_document(ws, 0)
    drawn = [text for text in _PICTURE_TEXT.findall(key) if has_cjk(text)]
    assert not drawn, drawn[:10]
    assert key.count("。") > 100
