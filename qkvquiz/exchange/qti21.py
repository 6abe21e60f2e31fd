"""A question bank as a QTI 2.1 content package: ``imsmanifest.xml`` + one ``assessmentItem``
per variant.

One ``textEntryInteraction`` per entry, a float response whose ``equal`` in the response
processing has ``toleranceMode="absolute"`` and the entry's band; −∞ entries are string
responses matched case-insensitively to the same spellings. ``SCORE`` adds each right
unmasked entry's share of its part's points; each right masked entry adds 1 to its part's
``MASKED<k>`` outcome, and a last condition adds the masked entries' share to ``SCORE``
when ``MASKED<k>`` counts all of them: exactly how ``qkvquiz grade`` counts them.
``MAXSCORE`` is the item's points.
"""

from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

from ..worksheet import Worksheet
from .question_bank import (
    INFINITY_SPELLINGS,
    Entry,
    content_package,
    entry_share,
    item_title,
    masked_share,
    number_text,
    part_boxes,
    problem_html,
    problem_texts,
    qti_identifier,
    xml_chars,
    xml_document,
)

QTI_NS = "http://www.imsglobal.org/xsd/imsqti_v2p1"
QTI_SCHEMA = "http://www.imsglobal.org/xsd/qti/qtiv2p1/imsqti_v2p1.xsd"
CP_NS = "http://www.imsglobal.org/xsd/imscp_v1p1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"

# Elements of the problem HTML kept in a QTI itemBody (all are in QTI 2.1's XHTML subset); any
# other becomes a span, and no attribute is kept.
_QTI_HTML = frozenset({"p", "div", "span", "strong", "em", "code", "pre", "ul", "ol", "li", "br", "table", "thead",
                       "tbody", "tr", "td", "th", "blockquote", "sub", "sup", "h1", "h2", "h3", "h4", "h5", "h6",
                       "hr", "b", "i"})


def _q(tag: str) -> str:
    return f"{{{QTI_NS}}}{tag}"


def _html_into(parent: ET.Element, fragment: str) -> None:
    """Copy ``fragment`` (XHTML) into ``parent`` in the QTI namespace; plain text if it is not XML."""
    try:
        root = ET.fromstring(f"<div>{xml_chars(fragment)}</div>")
    except ET.ParseError:
        ET.SubElement(parent, _q("p")).text = html.unescape(re.sub(r"<[^>]*>", "", fragment))
        return

    def copy(src: ET.Element, dst: ET.Element) -> None:
        dst.text = src.text
        for child in src:
            tag = child.tag if child.tag in _QTI_HTML else "span"
            node = ET.SubElement(dst, _q(tag))
            copy(child, node)
            node.tail = child.tail

    holder = ET.SubElement(parent, _q("div"))
    copy(root, holder)


def qti_item(ws: Worksheet, item_index: int, student: int, problem: str | None = None) -> tuple[str, str]:
    """One variant of one item as a QTI 2.1 assessmentItem: (identifier, XML text)."""
    item = ws.spec.items[item_index]
    variant = ws.students[student]
    identifier = qti_identifier(f"{item.id}-{variant}")
    parts = part_boxes(ws, item_index, student)
    ET.register_namespace("", QTI_NS)
    ET.register_namespace("xsi", XSI_NS)
    root = ET.Element(_q("assessmentItem"), {
        f"{{{XSI_NS}}}schemaLocation": f"{QTI_NS} {QTI_SCHEMA}",
        "identifier": identifier, "title": f"{item_index + 1} {item_title(item)} ({variant})",
        "adaptive": "false", "timeDependent": "false",
    })
    # Each entry no mask fixes adds its share of SCORE when right. The entries a mask fixes
    # carry mask_weight of the part together (grade.checks.entry_credit): each right one adds 1 to
    # its part's MASKED<k>, and their share is added once MASKED<k> counts all of them.
    responses: list[tuple[str, Entry, float | str]] = []
    masked: list[tuple[str, int, float]] = []  # (counter, how many fixed entries, their points together)
    for k, part in enumerate(parts):
        fixed = sum(e.fixed for e in part.entries)
        if fixed:
            masked.append((f"MASKED{k + 1}", fixed, part.points * float(masked_share(part))))
        for e in part.entries:
            rid = qti_identifier(f"R{k + 1}_" + "_".join(str(i + 1) for i in e.index) if e.index else f"R{k + 1}")
            responses.append((rid, e, f"MASKED{k + 1}" if e.fixed else part.points * float(entry_share(part))))
            decl = ET.SubElement(root, _q("responseDeclaration"), identifier=rid, cardinality="single",
                                 baseType="string" if e.infinite else "float")
            ET.SubElement(ET.SubElement(decl, _q("correctResponse")), _q("value")).text = \
                INFINITY_SPELLINGS[0] if e.infinite and e.value < 0 else ("inf" if e.infinite else number_text(e.value))
    for name, value in (("SCORE", 0.0), ("MAXSCORE", sum(p.points for p in parts))):
        out = ET.SubElement(root, _q("outcomeDeclaration"), identifier=name, cardinality="single", baseType="float")
        ET.SubElement(ET.SubElement(out, _q("defaultValue")), _q("value")).text = number_text(value)
    for name, _count, _points in masked:
        out = ET.SubElement(root, _q("outcomeDeclaration"), identifier=name, cardinality="single", baseType="integer")
        ET.SubElement(ET.SubElement(out, _q("defaultValue")), _q("value")).text = "0"
    body = ET.SubElement(root, _q("itemBody"))
    text = problem if problem is not None else problem_texts(ws, student)[item_index]
    _html_into(body, problem_html(text))
    it = iter(responses)
    for part in parts:
        block = ET.SubElement(body, _q("div"))
        ET.SubElement(ET.SubElement(block, _q("p")), _q("strong")).text = part.label
        shape = part.shape or (1,)
        rows_n, cols_n = (1, shape[0]) if len(shape) == 1 else (shape[-2], shape[-1])
        cells = part.grid_cells([rid for rid, _e, _s in (next(it) for _entry in part.entries)])
        for g in range(len(cells) // (rows_n * cols_n)):
            table = ET.SubElement(block, _q("table"))
            tbody = ET.SubElement(table, _q("tbody"))
            for r in range(rows_n):
                tr = ET.SubElement(tbody, _q("tr"))
                for c in range(cols_n):
                    rid = cells[(g * rows_n + r) * cols_n + c]
                    td = ET.SubElement(tr, _q("td"))
                    if part.asked is not None and rid == "—":
                        td.text = rid  # not asked
                    else:
                        ET.SubElement(td, _q("textEntryInteraction"), responseIdentifier=rid, expectedLength="8")
    processing = ET.SubElement(root, _q("responseProcessing"))
    for rid, e, share in responses:
        cond = ET.SubElement(ET.SubElement(processing, _q("responseCondition")), _q("responseIf"))
        if e.infinite:
            test = ET.SubElement(cond, _q("or"))
            for spelling in (INFINITY_SPELLINGS if e.value < 0 else ("inf", "∞")):
                match = ET.SubElement(test, _q("stringMatch"), caseSensitive="false")
                ET.SubElement(match, _q("variable"), identifier=rid)
                ET.SubElement(match, _q("baseValue"), baseType="string").text = spelling
        else:
            test = ET.SubElement(cond, _q("and"))
            ET.SubElement(ET.SubElement(ET.SubElement(test, _q("not")), _q("isNull")), _q("variable"), identifier=rid)
            band = number_text(e.band)
            equal = ET.SubElement(test, _q("equal"), toleranceMode="absolute", tolerance=f"{band} {band}",
                                  includeLowerBound="true", includeUpperBound="true")
            ET.SubElement(equal, _q("variable"), identifier=rid)
            ET.SubElement(equal, _q("correct"), identifier=rid)
        if isinstance(share, str):  # a fixed entry: counted
            _add(cond, share, "integer", "1")
        else:
            _add(cond, "SCORE", "float", number_text(share))
    for name, count, points in masked:  # all the fixed entries of a part right: their share
        cond = ET.SubElement(ET.SubElement(processing, _q("responseCondition")), _q("responseIf"))
        match = ET.SubElement(cond, _q("match"))
        ET.SubElement(match, _q("variable"), identifier=name)
        ET.SubElement(match, _q("baseValue"), baseType="integer").text = str(count)
        _add(cond, "SCORE", "float", number_text(points))
    return identifier, xml_document(root)


def _add(parent: ET.Element, outcome: str, base_type: str, value: str) -> None:
    """``outcome`` = ``outcome`` + ``value``, in QTI 2.1 response processing."""
    total = ET.SubElement(ET.SubElement(parent, _q("setOutcomeValue"), identifier=outcome), _q("sum"))
    ET.SubElement(total, _q("variable"), identifier=outcome)
    ET.SubElement(total, _q("baseValue"), baseType=base_type).text = value


def qti_package(ws: Worksheet) -> bytes:
    """A QTI 2.1 content package (zip): ``imsmanifest.xml`` and ``items/<id>.xml`` per variant of each item."""
    ET.register_namespace("", CP_NS)
    manifest = ET.Element(f"{{{CP_NS}}}manifest", identifier=qti_identifier(f"MANIFEST-{ws.set_id or 'bank'}"))
    ET.SubElement(manifest, f"{{{CP_NS}}}organizations")
    resources = ET.SubElement(manifest, f"{{{CP_NS}}}resources")
    files: dict[str, str] = {}
    for s in range(len(ws.students)):
        problems = problem_texts(ws, s)
        for i in range(len(ws.spec.items)):
            identifier, xml = qti_item(ws, i, s, problems[i])
            href = f"items/{identifier}.xml"
            files[href] = xml
            res = ET.SubElement(resources, f"{{{CP_NS}}}resource", identifier=f"RES-{identifier}",
                                type="imsqti_item_xmlv2p1", href=href)
            ET.SubElement(res, f"{{{CP_NS}}}file", href=href)
    return content_package(manifest, files)
