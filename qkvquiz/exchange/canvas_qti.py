"""A question bank for Canvas ("Import Course Content" → QTI .zip file; Canvas reads QTI 1.2
with its own ``question_type`` metadata).

An assessment with one question group per item that draws 1 of its variants; a variant asking
one number is a ``numerical_question`` whose range is the band, any other a
``fill_in_multiple_blanks_question`` whose blanks accept, as text, every number within the band
written to the band's decimal place (:func:`accepted_texts`). Canvas scores such a question as
(right blanks / blanks) × its points, every blank alike: its QTI importer (``qti_exporter``
``fill_in_the_blank.rb``, ``process_canvas``) gives every accepted text the weight 100 and keeps
no per-blank score, and ``Quizzes::QuizQuestion::FillInMultipleBlanksQuestion`` counts right
blanks. So a Canvas question weighs every entry alike, the masked ones and the parts' points
included (the 6 masked entries of a 4×4 causal-masked part weigh 6 units of 16); the ``setvar``
of each blank says the same equal share.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from decimal import Decimal

from ..worksheet import Worksheet
from .question_bank import (
    INFINITY_SPELLINGS,
    Entry,
    content_package,
    item_title,
    number_text,
    part_boxes,
    problem_texts,
    qti_identifier,
    question_html,
    xml_document,
)

QTI12_NS = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"
CANVAS_CP_NS = "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"
MAX_SPELLINGS = 21  # accepted texts for one blank (a band of ±10 units in its last place)


# Canvas turns the first "[name]" of a fill-in-multiple-blanks question's text into blank "name"'s
# input box, after cleaning the HTML (which turns a character reference back into the character),
# so a "[b1_1]" in a title would take the box from the grid. A word joiner (U+2060, invisible and
# never removed by HTML cleaning) after each "[" keeps the text as it reads and matches no blank.
_CANVAS = str.maketrans({"[": "[\u2060"})


def canvas_html(fragment: str) -> str:
    """HTML in which Canvas finds no "[blank]" of a fill-in question, reading as ``fragment``."""
    return fragment.translate(_CANVAS)


def accepted_texts(entry: Entry) -> list[str]:
    """What a fill-in blank accepts for ``entry``: every number with as many decimals as the band's
    first significant place that lies within the band, each also without trailing zeros.

    Canvas compares a blank's text exactly, so the tolerance becomes a list: 0.4567 at
    ``2 decimals`` (±0.01) accepts 0.45 and 0.46. An answer written with more decimals
    than that is not accepted; −∞ accepts ``-inf``, ``−∞`` and ``-∞``.
    """
    if entry.infinite:
        return list(INFINITY_SPELLINGS if entry.value < 0 else ("inf", "∞"))
    band = entry.band
    places = 0 if band >= 1 else min(12, max(0, math.ceil(-math.log10(band)) if band > 0 else 12))
    scale = Decimal(10) ** places
    value = Decimal(repr(entry.value))
    tol = Decimal(repr(band)) * (1 + Decimal("1e-12"))
    low = math.ceil((value - tol) * scale)
    high = math.floor((value + tol) * scale)
    if high - low + 1 > MAX_SPELLINGS:  # a wide band: the nearest values only
        centre = round(value * scale)
        low, high = centre - MAX_SPELLINGS // 2, centre + MAX_SPELLINGS // 2
    texts: list[str] = []
    for k in range(low, high + 1):
        text = format(Decimal(k) / scale, f".{places}f")
        for t in (text, text.rstrip("0").rstrip(".") if "." in text else text):
            t = "0" if t in ("-0", "") else t
            if t not in texts:
                texts.append(t)
    return texts or [number_text(entry.value)]


def _q12(tag: str) -> str:
    return f"{{{QTI12_NS}}}{tag}"


def _meta(item: ET.Element, fields: dict[str, str]) -> None:
    meta = ET.SubElement(ET.SubElement(item, _q12("itemmetadata")), _q12("qtimetadata"))
    for label, entry in fields.items():
        field = ET.SubElement(meta, _q12("qtimetadatafield"))
        ET.SubElement(field, _q12("fieldlabel")).text = label
        ET.SubElement(field, _q12("fieldentry")).text = entry


def canvas_item(ws: Worksheet, item_index: int, student: int, problem: str) -> ET.Element:
    """One variant as a Canvas question: ``numerical_question`` (exact value with the band as its
    range) when the item asks one number, else ``fill_in_multiple_blanks_question`` with one
    blank per entry (Canvas shares the points equally among blanks)."""
    item = ws.spec.items[item_index]
    parts = part_boxes(ws, item_index, student)
    entries = [(k, e) for k, part in enumerate(parts) for e in part.entries]
    points = number_text(sum(p.points for p in parts))
    node = ET.Element(_q12("item"), ident=qti_identifier(f"{item.id}-{ws.students[student]}"),
                      title=f"{item_index + 1} {item_title(item)} ({ws.students[student]})")
    single = len(entries) == 1 and not entries[0][1].infinite
    _meta(node, {"question_type": "numerical_question" if single else "fill_in_multiple_blanks_question",
                 "points_possible": points})
    presentation = ET.SubElement(node, _q12("presentation"))
    blanks: list[tuple[str, Entry]] = []
    cells: list[list[str]] = []
    it = iter(entries)
    for k, part in enumerate(parts):
        cells.append([])
        for _entry in part.entries:
            _k, e = next(it)
            name = f"b{k + 1}" + "".join(f"_{i + 1}" for i in e.index)
            blanks.append((name, e))
            cells[-1].append(f"[{name}]")
    mat = ET.SubElement(ET.SubElement(presentation, _q12("material")), _q12("mattext"), texttype="text/html")
    # A numerical question has its one box below the text: no grid.
    mat.text = question_html(problem, [] if single else parts, cells, canvas_html)
    processing = ET.SubElement(node, _q12("resprocessing"))
    ET.SubElement(ET.SubElement(processing, _q12("outcomes")), _q12("decvar"), maxvalue="100", minvalue="0",
                  varname="SCORE", vartype="Decimal")
    if single:
        e = blanks[0][1]
        response = ET.SubElement(presentation, _q12("response_str"), ident="response1", rcardinality="Single")
        ET.SubElement(ET.SubElement(response, _q12("render_fib"), fibtype="Decimal"), _q12("response_label"),
                      ident="answer1")
        cond = ET.SubElement(processing, _q12("respcondition"), {"continue": "No"})
        either = ET.SubElement(ET.SubElement(cond, _q12("conditionvar")), _q12("or"))
        ET.SubElement(either, _q12("varequal"), respident="response1").text = number_text(e.value)
        both = ET.SubElement(either, _q12("and"))
        ET.SubElement(both, _q12("vargte"), respident="response1").text = number_text(e.value - e.band)
        ET.SubElement(both, _q12("varlte"), respident="response1").text = number_text(e.value + e.band)
        ET.SubElement(cond, _q12("setvar"), action="Set", varname="SCORE").text = "100"
        return node
    share = number_text(round(100 / len(blanks), 6))
    for b, (name, e) in enumerate(blanks):
        response = ET.SubElement(presentation, _q12("response_lid"), ident=f"response_{name}")
        ET.SubElement(ET.SubElement(response, _q12("material")), _q12("mattext")).text = name
        choice = ET.SubElement(response, _q12("render_choice"))
        idents = []
        for a, text in enumerate(accepted_texts(e)):
            ident = f"{b + 1}{a + 1:03d}"
            idents.append(ident)
            label = ET.SubElement(choice, _q12("response_label"), ident=ident)
            ET.SubElement(ET.SubElement(label, _q12("material")), _q12("mattext"), texttype="text/plain").text = text
        for ident in idents:  # any accepted text earns the blank's share (Canvas' own export does the same)
            cond = ET.SubElement(processing, _q12("respcondition"))
            ET.SubElement(ET.SubElement(cond, _q12("conditionvar")), _q12("varequal"),
                          respident=f"response_{name}").text = ident
            ET.SubElement(cond, _q12("setvar"), varname="SCORE", action="Add").text = share
    return node


def canvas_package(ws: Worksheet) -> bytes:
    """A Canvas "QTI .zip file" import: one assessment whose sections (one per item) each draw
    1 of the item's variants, worth the item's points."""
    ET.register_namespace("", QTI12_NS)
    ident = qti_identifier(f"qkvquiz-{ws.set_id or 'bank'}")
    root = ET.Element(_q12("questestinterop"))
    assessment = ET.SubElement(root, _q12("assessment"), ident=ident, title=ws.spec.title or "qkvquiz")
    top = ET.SubElement(assessment, _q12("section"), ident="root_section")
    problems = [problem_texts(ws, s) for s in range(len(ws.students))]
    for i, item in enumerate(ws.spec.items):
        group = ET.SubElement(top, _q12("section"), ident=qti_identifier(f"group-{item.id}"),
                              title=f"{i + 1} {item_title(item)}")
        ordering = ET.SubElement(ET.SubElement(group, _q12("selection_ordering")), _q12("selection"))
        ET.SubElement(ordering, _q12("selection_number")).text = "1"
        ext = ET.SubElement(ordering, _q12("selection_extension"))
        ET.SubElement(ext, _q12("points_per_item")).text = number_text(item.points)
        for s in range(len(ws.students)):
            group.append(canvas_item(ws, i, s, problems[s][i]))
    xml = xml_document(root)
    ET.register_namespace("", CANVAS_CP_NS)
    manifest = ET.Element(f"{{{CANVAS_CP_NS}}}manifest", identifier=f"{ident}-manifest")
    meta = ET.SubElement(manifest, f"{{{CANVAS_CP_NS}}}metadata")
    ET.SubElement(meta, f"{{{CANVAS_CP_NS}}}schema").text = "IMS Content"
    ET.SubElement(meta, f"{{{CANVAS_CP_NS}}}schemaversion").text = "1.1.3"
    ET.SubElement(manifest, f"{{{CANVAS_CP_NS}}}organizations")
    resources = ET.SubElement(manifest, f"{{{CANVAS_CP_NS}}}resources")
    href = f"{ident}/{ident}.xml"
    res = ET.SubElement(resources, f"{{{CANVAS_CP_NS}}}resource", identifier=ident, type="imsqti_xmlv1p2", href=href)
    ET.SubElement(res, f"{{{CANVAS_CP_NS}}}file", href=href)
    return content_package(manifest, {href: xml})
