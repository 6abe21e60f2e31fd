"""Names in scripts whose vowels are marks: a download from सती शर्मा is never graded as the
roster's सीता शर्मा. Downloads named as each LMS's code names them (tests/lms_corpus.py): Canvas
keeps letters and marks of any script in its sortable name (``[[:word:]]``), Moodle and
Gradescope keep the full name."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from qkvquiz.exchange.collect import grade_download
from qkvquiz.roster import loose_name_key, name_key, read_roster_entries

from ..helpers import make_key
from ..lms_corpus import answers_of, canvas_download, gradescope_export, moodle_download, write_zip

SITA, SATI = "सीता शर्मा", "सती शर्मा"
ROSTER = "student,name\nsita,सीता शर्मा\nzoe,Zoë Ōtake\nyuri,Юрий Гагарин\n"


@pytest.fixture(scope="module")
def class_key():
    return make_key(students=("sita", "zoe", "yuri", "sati"))


def _roster(tmp_path: Path, text: str = ROSTER):
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return read_roster_entries(path)


def _hand_in(doc: dict, student: str) -> str:
    return json.dumps(answers_of(doc, student))


def test_vowel_signs_and_spacing_marks_are_letters_of_the_name():
    assert name_key(SATI) != name_key(SITA)
    assert loose_name_key(SATI) == loose_name_key(SITA)  # what the old key did: the two collided
    # A spacing mark (ा, U+093E, category Mc) and a non-spacing one (ि, U+093F is Mc too; ु U+0941 Mn).
    assert name_key("राम") != name_key("रम") and name_key("गुप्ता") != name_key("गपत")
    assert unicodedata.category("ा") == "Mc" and unicodedata.category("ु") == "Mn"


def test_accents_of_latin_letters_are_ignored_and_other_marks_are_not():
    assert name_key("Zoë Ōtake") == name_key("zoe otake")
    assert name_key("Nguyễn") == name_key("nguyen")
    assert name_key("Йорк") != name_key("Иорк")  # й is a letter of its own, not и with an accent
    assert name_key("ＬＯＶＥＬＡＣＥ　Ａｄａ") == name_key("Lovelace, Ada")
    # Composed and decomposed forms are one name.
    assert name_key(unicodedata.normalize("NFD", SITA)) == name_key(SITA)


@pytest.mark.parametrize("lms", ["moodle", "canvas", "gradescope"])
def test_a_download_from_sati_is_not_graded_as_sita_and_the_near_name_is_said(tmp_path, class_key, lms):
    key, doc = class_key
    roster = _roster(tmp_path)
    if lms == "moodle":
        members = moodle_download([(SATI, 7001, "answers.json", _hand_in(doc, "sati"))])
    elif lms == "canvas":
        members = canvas_download([("शर्मा, सती", 701, 9001, "answers.json", _hand_in(doc, "sati"))])
    else:
        members = gradescope_export({"501": ([{"name": SATI, "sid": "X1", "email": "sati@example.edu"}],
                                             {"answers.json": _hand_in(doc, "sati")})})
    report = grade_download(key, [write_zip(tmp_path / f"{lms}.zip", members)], roster)
    assert [r.student for r in report.results] == []
    [problem] = report.problems
    if lms != "gradescope":  # Moodle and Canvas name the near roster name and why it is not taken
        assert "sita" in problem.message and "vowel signs" in problem.message


@pytest.mark.parametrize("lms", ["moodle", "canvas"])
def test_sita_herself_is_matched_by_name_in_each_download(tmp_path, class_key, lms):
    key, doc = class_key
    roster = _roster(tmp_path)
    if lms == "moodle":
        members = moodle_download([(unicodedata.normalize("NFD", SITA), 7001, "a.json", _hand_in(doc, "sita")),
                                   ("Zoe Otake", 7002, "a.json", _hand_in(doc, "zoe"))])
    else:
        members = canvas_download([("शर्मा, सीता", 701, 9001, "a.json", _hand_in(doc, "sita")),
                                   ("Otake, Zoë", 702, 9002, "a.json", _hand_in(doc, "zoe"))])
    report = grade_download(key, [write_zip(tmp_path / f"{lms}.zip", members)], roster)
    assert sorted(r.student for r in report.results) == ["sita", "zoe"], report.problems
