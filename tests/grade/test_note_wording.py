"""Notes on a submission file are read by two people: the student in their feedback and the
instructor in `qkvquiz grade`'s output. They speak of "this student", never to "you"."""

from __future__ import annotations

import re

import pytest

from qkvquiz.core.i18n import _, using
from qkvquiz.grade.copies import COPY_NOTE

OTHER_VARIANT = ("the file names variant %(file_variant)s, but %(student)s has variant %(variant)s: it may be "
                 "another student's file or an older worksheet; it was graded against this student's key")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_copy_note_speaks_of_the_student_not_to_them(lang):
    with using(lang):
        text = _(COPY_NOTE)
    assert not re.search(r"\byou(rs?)?\b", text, re.IGNORECASE) and "你" not in text, text


def test_a_file_of_another_variant_is_said_in_chinese_to_be_graded_against_the_students_key():
    with using("zh"):
        text = _(OTHER_VARIANT)
    # 答案 alone reads "graded by this student's answers": the key is the 参考答案.
    assert text != OTHER_VARIANT and "该学生的参考答案评分" in text
