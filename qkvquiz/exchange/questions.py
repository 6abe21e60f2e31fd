"""A spec as a question bank: N pre-solved variants of every item, for an LMS's own quizzes.

Each variant of an item becomes one question holding every asked part, one answer box per
entry, whose right value is the key's exact value and whose tolerance is the spec's, written
per entry as an absolute band (:meth:`Tolerance.band`: ``2 decimals`` is ±0.01, ``3 sigfigs``
and ``rel`` depend on the entry). Three formats:

- **Moodle XML** (Question bank → Import → Moodle XML): one *Embedded answers (Cloze)* question
  per variant, each entry a ``{w:NUMERICAL:=value:tolerance}`` field. Cloze weights are whole
  numbers; each entry's weight is its part's points times its share of the part as the grader
  counts it (:func:`entry_shares`), all scaled by one common factor so that they stay whole, so
  the question's mark splits as the spec's points do. An entry that is −∞ (a masked score) is a
  ``SHORTANSWER`` field accepting ``-inf``, ``−∞`` and ``-∞`` (NUMERICAL cannot hold an
  infinity).
- **Canvas** ("Import Course Content" → QTI .zip file; Canvas reads QTI 1.2 with its own
  ``question_type`` metadata): an assessment with one question group per item that draws 1 of
  its variants; a variant asking one number is a ``numerical_question`` whose range is the
  band, any other a ``fill_in_multiple_blanks_question`` whose blanks accept, as text, every
  number within the band written to the band's decimal place (:func:`accepted_texts`). Canvas
  scores such a question as (right blanks / blanks) × its points, every blank alike: its QTI
  importer (``qti_exporter`` ``fill_in_the_blank.rb``, ``process_canvas``) gives every accepted
  text the weight 100 and keeps no per-blank score, and
  ``Quizzes::QuizQuestion::FillInMultipleBlanksQuestion`` counts right blanks. So a Canvas
  question weighs every entry alike, the masked ones and the parts' points included; the
  ``setvar`` of each blank says the same equal share.
- **QTI 2.1** (a content package: ``imsmanifest.xml`` + one ``assessmentItem`` per variant):
  one ``textEntryInteraction`` per entry, a float response whose ``equal`` in the response
  processing has ``toleranceMode="absolute"`` and the entry's band; −∞ entries are string
  responses matched case-insensitively to the same spellings. ``SCORE`` adds each right
  unmasked entry's share of its part's points; each right masked entry adds 1 to its part's
  ``MASKED<k>`` outcome, and a last condition adds the masked entries' one share to ``SCORE``
  when ``MASKED<k>`` counts all of them. ``MAXSCORE`` is the item's points.

**Masked entries.** ``qkvquiz grade`` counts every entry of a part alike, except the entries a
mask fixes (−∞ scores, 0 weights of masked keys), which together carry the spec's
``credit.mask_weight`` of the part (half by default), earned only when all of them are right
(:func:`qkvquiz.grade.checks.entry_credit`): in a 4×4 causal-masked part the 6 masked entries
carry 1/2 together and each of the 10 others 1/20. QTI 2.1's response processing says exactly
that (above). A Moodle cloze question follows the weights as far as weights go: each unmasked
entry weighs 1/20 and each masked one 1/12 of the part (whole weights 3 and 5), but a cloze
question's mark is the sum of its fields' marks, each field on its own, so it cannot keep the
mask's share back until all 6 are right: with 5 of the 6 masked entries right Moodle gives 5/12
of the part and the grader none of the mask's half. With every masked entry right, or none, the
two agree. Canvas weighs every blank alike (above), so there the 6 masked entries weigh 6 units
of 16.

The problem text is the worksheet's own (the family's problem template) as HTML, with math
left as ``\\(…\\)`` and ``\\[…\\]`` for the LMS's MathJax filter. What each format would read
as its own syntax in that text (a spec title holding ``{1:NUMERICAL:=42}`` would be a live cloze
field) is escaped by one function per format (:func:`cloze_html`, :func:`canvas_html`), applied
where the question text is put together (:func:`question_html`); every XML file is written by
:func:`xml_document`.

Why one module of about 600 lines: the three formats share the bank, the numbers, each part's
boxes and weights, and the escaping rules, and each format is a hundred lines of XML that reads
best beside the rules it applies; split by format, each piece would import all of the rest.
"""

from __future__ import annotations

import html
import io
import math
import re
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from functools import reduce

import numpy as np

from ..core.i18n import _, using
from ..core.i18n import chosen as language_chosen
from ..grade.checks import fixed_entries, mask_shares
from ..spec_types import MASK_WEIGHT
from ..spec import ItemSpec, WorksheetSpec
from ..worksheet import Worksheet, build_worksheet

FORMATS = ("moodle", "qti", "canvas")
MAX_VARIANTS = 1000
INFINITY_SPELLINGS = ("-inf", "−∞", "-∞")  # what a student may type for −∞ (as `qkvquiz grade` reads it)
QTI_NS = "http://www.imsglobal.org/xsd/imsqti_v2p1"
QTI_SCHEMA = "http://www.imsglobal.org/xsd/qti/qtiv2p1/imsqti_v2p1.xsd"
CP_NS = "http://www.imsglobal.org/xsd/imscp_v1p1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"


def variant_ids(n: int) -> list[str]:
    """The pseudo-student ids the variants are drawn for: v001, v002, …"""
    if not 1 <= n <= MAX_VARIANTS:
        raise ValueError(f"variants must be from 1 to {MAX_VARIANTS}, not {n}")
    width = max(3, len(str(n)))
    return [f"v{i:0{width}d}" for i in range(1, n + 1)]


def build_bank(spec: WorksheetSpec, variants: int, seed: str | int = 0, *, secret: bytes | None = None) -> Worksheet:
    """Solve ``variants`` variants of every item of ``spec`` (the same call ``generate`` makes)."""
    return build_worksheet(spec, variant_ids(variants), seed, secret=secret)


# --------------------------------------------------------------------------- numbers


def number_text(x: float) -> str:
    """A float as plain decimal text that reads back as exactly the same float (no exponent)."""
    if float(x).is_integer() and abs(x) < 2**53:
        return str(int(x))
    text = format(Decimal(repr(float(x))), "f")
    return text


@dataclass(frozen=True)
class Entry:
    """One answer box: where it sits, its exact value and its absolute tolerance band."""

    index: tuple[int, ...]
    value: float
    band: float
    # A mask fixes it (a −∞ score, a 0 weight of a masked key): the grader counts all the fixed
    # entries of a part together as one entry (grade.checks.entry_credit).
    fixed: bool = False

    @property
    def infinite(self) -> bool:
        return math.isinf(self.value)


@dataclass(frozen=True)
class PartBoxes:
    part_id: str
    label: str  # "(a) scores"
    points: float
    shape: tuple[int, ...]
    entries: tuple[Entry, ...]  # the asked entries only, in the order of the grid
    # Which entries of ``shape`` are asked (a partial ask, or the real tokens of a shorter last
    # delta chunk); None when every entry is. The others are shown as "—" and never asked.
    asked: np.ndarray | None = None
    mask_weight: float = MASK_WEIGHT  # the share the fixed entries carry together (credit.mask_weight)

    def grid_cells(self, cells: Sequence[str]) -> list[str]:
        """``cells`` (one per asked entry) placed in the whole grid, "—" where nothing is asked."""
        if self.asked is None:
            return list(cells)
        it = iter(cells)
        return [next(it) if self.asked[idx] else "—" for idx in np.ndindex(self.shape)]


def part_boxes(ws: Worksheet, item_index: int, student: int) -> list[PartBoxes]:
    """Every asked part of one item for one variant, with each entry's value and band."""
    item, env = ws.spec.items[item_index], ws.envs[item_index]
    out = []
    for k, part in enumerate(item.parts):
        exact = np.asarray(env[part.step][student], dtype=np.float64)
        band = np.asarray(item.tolerance_for(part.step).band(exact))
        asked = part.asked(exact.shape)
        fixed = fixed_entries(item, part, env, len(ws.students))
        fixed = np.zeros(exact.shape, bool) if fixed is None else fixed[student].reshape(exact.shape)
        entries = tuple(Entry(tuple(int(i) for i in idx), float(exact[idx]), float(band[idx]), bool(fixed[idx]))
                        for idx in np.ndindex(exact.shape) if asked is None or asked[idx])
        # The step's prompt in the bank's language (export_questions enters it), as the pages say it.
        label = f"({'abcdefghijklmnopqrstuvwxyz'[k % 26]}) {_(item.family.step(part.step).prompt)}"
        out.append(PartBoxes(part.id, label, part.points, exact.shape, entries, asked, item.credit.mask_weight))
    return out


def entry_share(part: PartBoxes) -> Fraction:
    """The share of ``part`` one entry no mask fixes carries, as the grader weighs it
    (:func:`qkvquiz.grade.checks.mask_shares`)."""
    return entry_shares_of(part)[1]


def masked_share(part: PartBoxes) -> Fraction:
    """The share of ``part`` its fixed entries carry together (0 when it has none)."""
    return entry_shares_of(part)[0]


def entry_shares_of(part: PartBoxes) -> tuple[Fraction, Fraction]:
    """(the fixed entries' share together, each other entry's share) of ``part``, exact."""
    fixed = _fixed_count(part)
    weight = Fraction(getattr(part, "mask_weight", MASK_WEIGHT)).limit_denominator(10_000)
    return mask_shares(fixed, len(part.entries) - fixed, weight)


def entry_shares(part: PartBoxes) -> list[Fraction]:
    """Each entry's share of ``part``'s points, as the grader weighs it: the fixed entries share
    ``mask_weight`` of the part equally, the others the rest (``entry_credit``). They add up to 1."""
    block, each = entry_shares_of(part)
    fixed = _fixed_count(part)
    return [block / fixed if getattr(e, "fixed", False) else each for e in part.entries]


def _fixed_count(part: PartBoxes) -> int:
    # An entry that carries no mask flag (a bare stand-in for an Entry) is no fixed one.
    return sum(bool(getattr(e, "fixed", False)) for e in part.entries)


def entry_weights(parts: Sequence[PartBoxes]) -> list[list[int]]:
    """Whole-number weights per entry proportional to (part points × the entry's share of its
    part, :func:`entry_shares`), all scaled by one factor and divided by their common divisor."""
    shares = [[Fraction(p.points).limit_denominator(10_000) * s for s in entry_shares(p)] for p in parts]
    flat = [s for row in shares for s in row]
    denominator = reduce(lambda a, b: a * b // math.gcd(a, b), (s.denominator for s in flat), 1)
    common = reduce(math.gcd, [int(s * denominator) for s in flat if s], 0) or 1
    return [[max(int(s * denominator) // common, 0) for s in row] for row in shares]


# --------------------------------------------------------------------------- problem text


def problem_html(markdown: str) -> str:
    """The problem's Markdown as HTML (XHTML-style void tags), math as ``\\(…\\)`` / ``\\[…\\]`` text."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.dollarmath import dollarmath_plugin

    def math(content: str, options: dict) -> str:
        body = html.escape(content.strip(), quote=False)
        return f"\\[{body}\\]" if options.get("display_mode") else f"\\({body}\\)"

    md = MarkdownIt("commonmark", {"xhtmlOut": True, "html": False}).enable("table")
    md.use(dollarmath_plugin, renderer=math, allow_digits=False)
    return md.render(markdown)


def _problems(ws: Worksheet, student: int) -> list[str]:
    from ..render.markdown import render_items

    texts = render_items(ws, student, "problem")
    # The worksheet's "Answer: …, part `id`" lines speak of the submission file; here the boxes
    # follow. They start with the catalog's word for "Answer:" in the language rendered.
    with using(ws.spec.lang if language_chosen() is None else None):  # as render_items chooses
        answer = _("Answer: %(shape)s, part `%(id)s`\u00a0(%(points)s\u00a0pt).").split("%(")[0].strip()
    return [re.sub(rf"\n\s*{re.escape(answer)}[^\n]*", "", t) for t in texts]


# --------------------------------------------------------------------------- escaping per format

# Characters XML 1.0 cannot hold: C0 controls but tab and line breaks, lone surrogates, U+FFFE and
# U+FFFF. ElementTree writes them as they are, so one in a spec's title (YAML's "\x01") would make
# the whole bank a file that no LMS can read.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

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

# Canvas turns the first "[name]" of a fill-in-multiple-blanks question's text into blank "name"'s
# input box, after cleaning the HTML (which turns a character reference back into the character),
# so a "[b1_1]" in a title would take the box from the grid. A word joiner (U+2060, invisible and
# never removed by HTML cleaning) after each "[" keeps the text as it reads and matches no blank.
_CANVAS = str.maketrans({"[": "[\u2060"})


def xml_chars(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def xml_document(root: ET.Element) -> str:
    """``root`` as an XML file's text (declaration, indented), holding only characters XML allows."""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + xml_chars(ET.tostring(root, encoding="unicode")) + "\n"


def cloze_html(fragment: str) -> str:
    """HTML (text and attribute values alike) in which Moodle's cloze parser finds no field and
    no "{#N}" placeholder, and that a browser shows exactly as ``fragment``."""
    return fragment.translate(_CLOZE)


def canvas_html(fragment: str) -> str:
    """HTML in which Canvas finds no "[blank]" of a fill-in question, reading as ``fragment``."""
    return fragment.translate(_CANVAS)


def question_html(problem: str, parts: Sequence[PartBoxes], cells: Sequence[Sequence[str]],
                  escape: Callable[[str], str]) -> str:
    """A question's text: the problem (Markdown), then each part's label and its grid of ``cells``.

    Every piece of text goes through the format's ``escape``: the problem holds the spec's title
    and intro as well as the family's text, and none of it may be read as the format's syntax.
    The cells (Moodle's fields, Canvas's blanks) do not: they are the only syntax of the format
    the text is meant to hold. The grid's own markup holds none of the escaped characters.
    """
    body = [escape(problem_html(problem))]
    for part, part_cells in zip(parts, cells):
        body.append(f"<p><strong>{escape(html.escape(part.label))}</strong></p>{_grid_html(part, part_cells)}")
    return "\n".join(body)


# --------------------------------------------------------------------------- Moodle XML


def _cloze_field(weight: int, entry: Entry) -> str:
    if entry.infinite:
        spellings = INFINITY_SPELLINGS if entry.value < 0 else ("inf", "∞")
        return "{" + f"{weight}:SHORTANSWER:" + "~".join(f"={s}" for s in spellings) + "}"
    return "{" + f"{weight}:NUMERICAL:={number_text(entry.value)}:{number_text(entry.band)}" + "}"


def _grid_html(part: PartBoxes, cells: Sequence[str]) -> str:
    """The answer boxes of one part laid out as its shape: a row, a grid, or one grid per leading index."""
    if not part.shape:
        return f"<p>{cells[0]}</p>"
    cells = part.grid_cells(cells)
    shape = part.shape
    rows_n, cols_n = (1, shape[0]) if len(shape) == 1 else (shape[-2], shape[-1])
    per_grid = rows_n * cols_n
    out = []
    for g in range(len(cells) // per_grid):
        chunk = cells[g * per_grid:(g + 1) * per_grid]
        rows = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in chunk[r * cols_n:(r + 1) * cols_n]) + "</tr>"
                       for r in range(rows_n))
        out.append(f"<table>{rows}</table>")
    return "".join(out)


def moodle_xml(ws: Worksheet) -> str:
    """The bank as Moodle XML: a category per item, one cloze question per variant."""
    quiz = ET.Element("quiz")
    title = ws.spec.title or "qkvquiz"
    problems = [_problems(ws, s) for s in range(len(ws.students))]
    for i, item in enumerate(ws.spec.items):
        category = ET.SubElement(quiz, "question", type="category")
        ET.SubElement(ET.SubElement(category, "category"), "text").text = \
            f"$course$/top/{_slash_free(title)}/{i + 1} {_slash_free(_item_title(item))}"
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


def _package(manifest: ET.Element, files: Mapping[str, str]) -> bytes:
    """A content package: ``imsmanifest.xml`` and the files it lists, zipped (fixed times, so the
    same bank gives the same bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(_fixed("imsmanifest.xml"), xml_document(manifest))
        for href, xml in files.items():
            zf.writestr(_fixed(href), xml)
    return buf.getvalue()


def _slash_free(text: str) -> str:
    return text.replace("/", "∕").strip() or "untitled"  # "/" separates Moodle's category levels


# --------------------------------------------------------------------------- QTI 2.1

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


def _ident(text: str) -> str:
    """A QTI identifier (an NCName): letters, digits, '_', '-', '.', starting with a letter."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", text)
    return clean if clean[:1].isalpha() else f"I_{clean}"


def qti_item(ws: Worksheet, item_index: int, student: int, problem: str | None = None) -> tuple[str, str]:
    """One variant of one item as a QTI 2.1 assessmentItem: (identifier, XML text)."""
    item = ws.spec.items[item_index]
    variant = ws.students[student]
    identifier = _ident(f"{item.id}-{variant}")
    parts = part_boxes(ws, item_index, student)
    ET.register_namespace("", QTI_NS)
    ET.register_namespace("xsi", XSI_NS)
    root = ET.Element(_q("assessmentItem"), {
        f"{{{XSI_NS}}}schemaLocation": f"{QTI_NS} {QTI_SCHEMA}",
        "identifier": identifier, "title": f"{item_index + 1} {_item_title(item)} ({variant})",
        "adaptive": "false", "timeDependent": "false",
    })
    # Each entry no mask fixes adds its share of SCORE when right. The entries a mask fixes carry
    # mask_weight of the part together (grade.checks.entry_credit): each right one adds 1 to its
    # part's MASKED<k>, and their share is added once MASKED<k> counts all of them.
    responses: list[tuple[str, Entry, float | str]] = []
    masked: list[tuple[str, int, float]] = []  # (counter, how many fixed entries, the unit's points)
    for k, part in enumerate(parts):
        fixed = sum(e.fixed for e in part.entries)
        if fixed:
            masked.append((f"MASKED{k + 1}", fixed, part.points * float(masked_share(part))))
        for e in part.entries:
            rid = _ident(f"R{k + 1}_" + "_".join(str(i + 1) for i in e.index) if e.index else f"R{k + 1}")
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
    text = problem if problem is not None else _problems(ws, student)[item_index]
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
    for name, count, points in masked:  # all the fixed entries of a part right: their one unit
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
    manifest = ET.Element(f"{{{CP_NS}}}manifest", identifier=_ident(f"MANIFEST-{ws.set_id or 'bank'}"))
    ET.SubElement(manifest, f"{{{CP_NS}}}organizations")
    resources = ET.SubElement(manifest, f"{{{CP_NS}}}resources")
    files: dict[str, str] = {}
    for s in range(len(ws.students)):
        problems = _problems(ws, s)
        for i in range(len(ws.spec.items)):
            identifier, xml = qti_item(ws, i, s, problems[i])
            href = f"items/{identifier}.xml"
            files[href] = xml
            res = ET.SubElement(resources, f"{{{CP_NS}}}resource", identifier=f"RES-{identifier}",
                                type="imsqti_item_xmlv2p1", href=href)
            ET.SubElement(res, f"{{{CP_NS}}}file", href=href)
    return _package(manifest, files)


def _fixed(name: str) -> zipfile.ZipInfo:
    """A zip entry with a fixed time: the same bank gives the same bytes."""
    info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info


# --------------------------------------------------------------------------- Canvas (QTI 1.2)

QTI12_NS = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"
CANVAS_CP_NS = "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"
MAX_SPELLINGS = 21  # accepted texts for one blank (a band of ±10 units in its last place)


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
    node = ET.Element(_q12("item"), ident=_ident(f"{item.id}-{ws.students[student]}"),
                      title=f"{item_index + 1} {_item_title(item)} ({ws.students[student]})")
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
    ident = _ident(f"qkvquiz-{ws.set_id or 'bank'}")
    root = ET.Element(_q12("questestinterop"))
    assessment = ET.SubElement(root, _q12("assessment"), ident=ident, title=ws.spec.title or "qkvquiz")
    top = ET.SubElement(assessment, _q12("section"), ident="root_section")
    problems = [_problems(ws, s) for s in range(len(ws.students))]
    for i, item in enumerate(ws.spec.items):
        group = ET.SubElement(top, _q12("section"), ident=_ident(f"group-{item.id}"),
                              title=f"{i + 1} {_item_title(item)}")
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
    return _package(manifest, {href: xml})


def export_questions(spec: WorksheetSpec, variants: int, seed: str | int = 0, formats: Sequence[str] = FORMATS,
                     *, secret: bytes | None = None, lang: str | None = None) -> tuple[Worksheet, dict[str, bytes | str]]:
    """The bank's files by name (``questions-moodle.xml``, ``questions-qti21.zip``,
    ``questions-canvas-qti.zip``) and the solved variants, in ``lang`` (default: the spec's
    language): its built-in words and the spec's own text."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown question format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    with using(lang or spec.lang) as chosen:
        ws = build_bank(spec.in_language(chosen), variants, seed, secret=secret)
        files: dict[str, bytes | str] = {}
        if "moodle" in formats:
            files["questions-moodle.xml"] = moodle_xml(ws)
        if "qti" in formats:
            files["questions-qti21.zip"] = qti_package(ws)
        if "canvas" in formats:
            files["questions-canvas-qti.zip"] = canvas_package(ws)
    return ws, files


def _item_title(item: ItemSpec) -> str:
    """An item's title as a bank names it: the spec's, else its family's in the current language."""
    return item.title or _(item.family.title)
