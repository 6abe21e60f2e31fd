"""What every question-bank format shares: N pre-solved variants of every item, each part's
answer boxes with their exact values, tolerance bands and weights, the problem text as HTML, and
the XML and zip writing (the formats: :mod:`.moodle_xml`, :mod:`.qti21`, :mod:`.canvas_qti`;
the entry point: :func:`qkvquiz.exchange.questions.export_questions`).

Each variant of an item becomes one question holding every asked part, one answer box per
entry, whose right value is the key's exact value and whose tolerance is the spec's, written
per entry as an absolute band (:meth:`Tolerance.band`: ``2 decimals`` is ±0.01, ``3 sigfigs``
and ``rel`` depend on the entry).

**Masked entries.** ``qkvquiz grade`` counts every entry of a part alike, except the entries a
mask fixes (−∞ scores, 0 weights of masked keys), which together carry the spec's
``credit.mask_weight`` of the part (half by default), earned only when all of them are right
(:func:`qkvquiz.grade.checks.entry_credit`): in a 4×4 causal-masked part the 6 masked entries
carry 1/2 together and each of the 10 others 1/20. :func:`entry_shares` and
:func:`entry_weights` say so for the formats.

The problem text is the worksheet's own (the family's problem template) as HTML, with math
left as ``\\(…\\)`` and ``\\[…\\]`` for the LMS's MathJax filter. What each format would read
as its own syntax in that text is escaped by one function per format
(:func:`~qkvquiz.exchange.moodle_xml.cloze_html`, :func:`~qkvquiz.exchange.canvas_qti.canvas_html`),
applied where the question text is put together (:func:`question_html`); every XML file is
written by :func:`xml_document`.
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
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from ..core.i18n import _, entered
from ..grade.checks import fixed_entries, mask_shares
from ..render.markdown import render_items
from ..spec import ItemSpec, WorksheetSpec
from ..spec_types import MASK_WEIGHT
from ..worksheet import Worksheet, build_worksheet

MAX_VARIANTS = 1000
INFINITY_SPELLINGS = ("-inf", "−∞", "-∞")  # what a student may type for −∞ (as `qkvquiz grade` reads it)


def variant_ids(n: int) -> list[str]:
    """The pseudo-student ids the variants are drawn for: v001, v002, …"""
    if not 1 <= n <= MAX_VARIANTS:
        raise ValueError(f"variants must be from 1 to {MAX_VARIANTS}, not {n}")
    width = max(3, len(str(n)))
    return [f"v{i:0{width}d}" for i in range(1, n + 1)]


def build_bank(spec: WorksheetSpec, variants: int, seed: str | int = 0, *, secret: bytes | None = None) -> Worksheet:
    """Solve ``variants`` variants of every item of ``spec`` (the same call ``generate`` makes)."""
    return build_worksheet(spec, variant_ids(variants), seed, secret=secret)


# --------------------------------------------------------------------------- numbers and boxes


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
    # A mask fixes it (a −∞ score, a 0 weight of a masked key): the fixed entries of a part
    # together carry its mask_weight (grade.checks.entry_credit).
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
        label = f"({'abcdefghijklmnopqrstuvwxyz'[k % 26]}) {_(item.family.step(part.step).prompt_for(item.params))}"
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
    def math(content: str, options: dict) -> str:
        body = html.escape(content.strip(), quote=False)
        return f"\\[{body}\\]" if options.get("display_mode") else f"\\({body}\\)"

    md = MarkdownIt("commonmark", {"xhtmlOut": True, "html": False}).enable("table")
    md.use(dollarmath_plugin, renderer=math, allow_digits=False)
    return md.render(markdown)


def problem_texts(ws: Worksheet, student: int) -> list[str]:
    """Each item's problem text (Markdown) for one variant, without the worksheet's "Answer: …"
    lines: in a bank the boxes follow."""
    texts = render_items(ws, student, "problem")
    # The worksheet's "Answer: …, part `id`" lines speak of the submission file; here the boxes
    # follow. They start with the catalog's word for "Answer:" in the language rendered.
    with entered(None, ws.spec.lang):  # as render_items chooses
        answer = _("Answer: %(shape)s, part `%(id)s`\u00a0(%(points)s\u00a0pt).").split("%(")[0].strip()
    return [re.sub(rf"\n\s*{re.escape(answer)}[^\n]*", "", t) for t in texts]


def item_title(item: ItemSpec) -> str:
    """An item's title as a bank names it: the spec's, else its family's in the current language."""
    return item.title or _(item.family.title)


# --------------------------------------------------------------------------- XML and packages

# Characters XML 1.0 cannot hold: C0 controls but tab and line breaks, lone surrogates, U+FFFE and
# U+FFFF. ElementTree writes them as they are, so one in a spec's title (YAML's "\x01") would make
# the whole bank a file that no LMS can read.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")

def xml_chars(text: str) -> str:
    """``text`` with every character XML 1.0 cannot hold replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def xml_document(root: ET.Element) -> str:
    """``root`` as an XML file's text (declaration, indented), holding only characters XML allows."""
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + xml_chars(ET.tostring(root, encoding="unicode")) + "\n"


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
        body.append(f"<p><strong>{escape(html.escape(part.label))}</strong></p>{grid_html(part, part_cells)}")
    return "\n".join(body)


def grid_html(part: PartBoxes, cells: Sequence[str]) -> str:
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


def qti_identifier(text: str) -> str:
    """A QTI identifier (an NCName): letters, digits, '_', '-', '.', starting with a letter."""
    clean = re.sub(r"[^A-Za-z0-9_.-]", "_", text)
    return clean if clean[:1].isalpha() else f"I_{clean}"


def content_package(manifest: ET.Element, files: Mapping[str, str]) -> bytes:
    """A content package: ``imsmanifest.xml`` and the files it lists, zipped (fixed times, so the
    same bank gives the same bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(fixed_zip_entry("imsmanifest.xml"), xml_document(manifest))
        for href, xml in files.items():
            zf.writestr(fixed_zip_entry(href), xml)
    return buf.getvalue()


def fixed_zip_entry(name: str) -> zipfile.ZipInfo:
    """A zip entry with a fixed time: the same bank gives the same bytes."""
    info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    return info
