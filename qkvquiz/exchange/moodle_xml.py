"""A question bank as Moodle XML (Question bank → Import → Moodle XML).

One *Embedded answers (Cloze)* question per variant, each entry a
``{w:NUMERICAL:=value:tolerance}`` field. Cloze weights are whole numbers; each entry's weight is
its part's points times its share of the part as the grader counts it
(:func:`~qkvquiz.exchange.question_bank.entry_shares`), all scaled by one common factor so that
they stay whole, so the question's mark splits as the spec's points do. An entry that is −∞ (a
masked score) is a ``SHORTANSWER`` field accepting ``-inf``, ``−∞`` and ``-∞`` (NUMERICAL cannot
hold an infinity).

A Moodle cloze question follows the grader's weights as far as weights go: in a 4×4
causal-masked part each unmasked entry weighs 1/20 and each of the 6 masked ones 1/12 of the part
(whole weights 3 and 5), but a cloze question's mark is the sum of its fields' marks, each field
on its own, so it cannot keep the mask's share back until all 6 are right: with 5 of the 6 masked
entries right Moodle gives 5/12 of the part and the grader none of the mask's half. With every
masked entry right, or none, the two agree.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..worksheet import Worksheet
from .question_bank import (
    INFINITY_SPELLINGS,
    Entry,
    entry_weights,
    item_title,
    number_text,
    part_boxes,
    problem_texts,
    question_html,
    xml_document,
)

# Moodle's cloze parser (question/type/multianswer/questiontype.php) finds each field with
# ANSWER_REGEX, "{" weight ":" TYPE ":" answers "}", run with /s on the question text as stored;
# a question then shows subquestion N wherever the stored text holds "{#N}". Inside a field, "~"
# separates answers, "#" starts feedback, "=" / "%n%" give the credit and ":" the tolerance. None of
# it can begin without a raw "{", so "{" and "}" become character references, which the regex
# never sees as braces while the browser (and MathJax, reading the page's text) shows them as
# written; "~" too, so no text of ours reads as an answer list even if a field were opened. "#"
# stays: every character reference is spelt with one, and outside a field it means nothing.
# (Import parses the file as written; a question later edited and saved in Moodle may have its
# references written back as braces by the HTML editor, and the save parses them again.)
_CLOZE = str.maketrans({"{": "&#123;", "}": "&#125;", "~": "&#126;"})



def cloze_html(fragment: str) -> str:
    """HTML (text and attribute values alike) in which Moodle's cloze parser finds no field and
    no "{#N}" placeholder, and that a browser shows exactly as ``fragment``."""
    return fragment.translate(_CLOZE)


def _cloze_field(weight: int, entry: Entry) -> str:
    if entry.infinite:
        spellings = INFINITY_SPELLINGS if entry.value < 0 else ("inf", "∞")
        return "{" + f"{weight}:SHORTANSWER:" + "~".join(f"={s}" for s in spellings) + "}"
    return "{" + f"{weight}:NUMERICAL:={number_text(entry.value)}:{number_text(entry.band)}" + "}"


def moodle_xml(ws: Worksheet) -> str:
    """The bank as Moodle XML: a category per item, one cloze question per variant."""
    quiz = ET.Element("quiz")
    title = ws.spec.title or "qkvquiz"
    problems = [problem_texts(ws, s) for s in range(len(ws.students))]
    for i, item in enumerate(ws.spec.items):
        category = ET.SubElement(quiz, "question", type="category")
        ET.SubElement(ET.SubElement(category, "category"), "text").text = \
            f"$course$/top/{_slash_free(title)}/{i + 1} {_slash_free(item_title(item))}"
        for s, variant in enumerate(ws.students):
            parts = part_boxes(ws, i, s)
            weights = entry_weights(parts)
            fields = [[_cloze_field(wi, e) for wi, e in zip(w, part.entries)] for part, w in zip(parts, weights)]
            q = ET.SubElement(quiz, "question", type="cloze")
            ET.SubElement(ET.SubElement(q, "name"), "text").text = f"{i + 1} {item.family.name} {variant}"
            text = ET.SubElement(q, "questiontext", format="html")
            ET.SubElement(text, "text").text = question_html(problems[s][i], parts, fields, cloze_html)
            ET.SubElement(ET.SubElement(q, "generalfeedback", format="html"), "text").text = ""
            ET.SubElement(q, "penalty").text = "0"
            ET.SubElement(q, "hidden").text = "0"
            ET.SubElement(q, "idnumber").text = f"{ws.set_id or 'bank'}-{item.id}-{variant}"
    return xml_document(quiz)


def _slash_free(text: str) -> str:
    return text.replace("/", "∕").strip() or "untitled"  # "/" separates Moodle's category levels
