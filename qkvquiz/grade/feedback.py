"""One student's feedback as Markdown they can read on their own (``templates/feedback.md.j2``).

Per part: the verdict and score; where the answer is not right, the tolerance it was checked
with, the expected value (entries the student got wrong in bold), each wrong entry with what
was written, the known mistake it matches and the properties it breaks; for an answer that
could not be read, why. Numbers and notation are plain text (no LaTeX: "√dₖ", "−0.5"), so the
file reads the same in an editor and in a Markdown viewer; ``export feedback`` sets the notation as
math on its pages (:func:`qkvquiz.exchange.feedback_export.page_markdown`). Part ids named in a
sentence are code, as in the headings.
"""

from __future__ import annotations

import hashlib
import math
import re
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache
from collections.abc import Sequence
from typing import Any

import jinja2
import numpy as np

from ..core.i18n import N_, _, current, entered, kept_per_language, ngettext
from ..core.places import entry_place
from ..core.resources import templates_dir
from ..core.tolerance import Tolerance
from ..core.untrusted import md_code
from ..key import KeyItem, decode
from ..spec_types import ItemSpec
from ..render.environment import environment
from ..render.part_sentences import plain_part_sentences
from ..render.svg_math import MINUS
from ..render.textmath import Unsupported
from ..render.unicode_math import unicode_math
from .columns import NO_ANSWER, NO_ANSWER_BLANK
from .results import GradeReport, PartResult, StudentResult

MAX_LISTED = 12  # wrong entries listed one by one; the rest are counted

VERDICTS = {
    "correct": N_("Correct"),
    "partial": N_("Partly correct"),
    "wrong": N_("Not correct"),
    "carried": N_("Credited as carried forward"),
    "format": N_("Could not be read"),
    "missing": N_("Not answered"),
}


#: Places a score is written with: those of the grade summary and the exports (half up, as
#: exchange.gradebook rounds by default), so a student reads the number the gradebook shows.
SCORE_DECIMALS = 2
_SCORE_STEP = Decimal(1).scaleb(-SCORE_DECIMALS)


def points_text(x: float) -> str:
    """Points and scores as the summary and the exports write them: 2, 1.5, 0.67, 12.56."""
    # Decimal from the shortest repr: 12.555 rounds up, as the gradebook's half-up rule does.
    text = format(Decimal(repr(float(x))).quantize(_SCORE_STEP, rounding=ROUND_HALF_UP), "f")
    text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def number_text(x: float, tol: Tolerance | None = None) -> str:
    """An exact value shown one digit finer than the tolerance asks, its sign the pages' minus
    sign U+2212 (−0.25, −∞); ∞ as ∞."""
    text = _plain_number_text(x, tol)
    return MINUS + text[1:] if text.startswith("-") else text


def _plain_number_text(x: float, tol: Tolerance | None) -> str:
    if math.isinf(x):
        return "-∞" if x < 0 else "∞"
    if float(x).is_integer() and abs(x) < 2**53:
        return str(int(x))
    if tol is None:
        text = f"{x:.6g}"
    elif tol.mode == "sigfigs":
        text = f"{x:.{int(tol.value) + 1}g}"
    elif tol.mode == "rel":
        text = f"{x:.6g}"
    else:
        step = 10.0 ** -int(tol.value) if tol.mode == "decimals" else tol.value
        places = 4 if step <= 0 else max(2, min(10, -math.floor(math.log10(step)) + 1))
        text = f"{x:.{places}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


EMPTY_BOX = N_("nothing (the box is empty)")


def given_text(value: Any) -> str:
    """One entry of an answer as read (results.json's "given"): a number as the pages print
    it; the text handed in where the entry could not be read, as code ("0、21"); an empty box."""
    if value is None:
        return _(EMPTY_BOX)
    if isinstance(value, str) and value not in ("inf", "-inf"):
        return md_code(value)  # as written: a student's text, which no Markdown in it can break out of
    return number_text(float(decode(value)))


def _entry_at(given: Any, index: tuple[int, ...]) -> Any:
    for i in index:
        given = given[i]
    return given


def entry_name(index: tuple[int, ...]) -> str:
    """Where an entry sits, counting from 1: entry 3; row 2, column 3; matrix 1, row 2, column 3."""
    return entry_place([i + 1 for i in index], len(index))


#: Subscript digits, for an entry named as the worksheet names it (S₂₃).
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
#: A symbol the sheet writes as one letter (S, A, q, μ), maybe under an accent or after ∇ (S̃, X̄,
#: ∇Q), in plain Unicode: its entries are named with subscripts, as the sheet's boxes are. Others
#: (Z_cat, B̄ₖ, S⁽ʰ⁾) are named by row and column.
_LETTER_SYMBOL = re.compile(r"∇?[A-Za-zα-ω][\u0300-\u036f]*")


def sheet_entry_name(symbol: str, index: tuple[int, ...]) -> str:
    """An entry as the worksheet and the key name it, counting from 1: ``S₂₃`` (a comma between
    indices past 9: ``S₁₀,₃``), also under an accent or after ∇ (``S̃₁₂``, ``∇Q₂₃``, as the sheet's
    boxes are labelled); where the step's symbol is not one letter so, its place in words
    (:func:`entry_name`)."""
    try:
        plain = unicode_math(symbol)
    except Unsupported:
        plain = ""
    if not index or not _LETTER_SYMBOL.fullmatch(plain):
        return entry_name(index)
    numbers = [str(i + 1) for i in index]
    joined = ("," if any(len(n) > 1 for n in numbers) else "").join(numbers)
    return plain + joined.translate(_SUBSCRIPTS)


def table(values: np.ndarray, tol: Tolerance, bold: np.ndarray | None = None,
          asked: np.ndarray | None = None) -> list[str]:
    """A vector or matrix (or a stack of them) as Markdown tables, wrong entries in bold; with
    ``asked`` (bool), entries not asked (a partial ask, the padding of a shorter last delta
    chunk) show as "—".

    The numbers of a table are right-aligned (its row headers left) and written with one number
    of decimals: the most any of its entries needs (:func:`number_text`, no finer than the
    tolerance asks), so that a column reads evenly ("0.450" under "0.274"). Only how the table
    prints: what the grader compares is the exact value.
    """
    if values.ndim == 1:
        return table(values[None, :], tol, None if bold is None else bold[None, :],
                     None if asked is None else asked[None, :])
    if values.ndim > 2:
        out: list[str] = []
        for k in range(values.shape[0]):
            out += [_("Matrix %(k)s:") % {"k": k + 1}, ""]
            out += table(values[k], tol, None if bold is None else bold[k], None if asked is None else asked[k])
            out.append("")
        return out[:-1]
    cols = values.shape[1]
    shown = np.ones(values.shape, dtype=bool) if asked is None else np.asarray(asked, dtype=bool)
    texts = table_numbers(values, tol, shown)
    lines = ["| | " + " | ".join(_("col %(j)s") % {"j": j + 1} for j in range(cols)) + " |",
             "|---|" + "---:|" * cols]
    for i in range(values.shape[0]):
        cells = []
        for j in range(cols):
            if not shown[i, j]:
                cells.append("—")
                continue
            text = texts[i][j]
            cells.append(f"**{text}**" if bold is not None and bold[i, j] else text)
        lines.append("| " + _("row %(i)s") % {"i": i + 1} + " | " + " | ".join(cells) + " |")
    return lines


def table_numbers(values: np.ndarray, tol: Tolerance, shown: np.ndarray) -> list[list[str]]:
    """The entries of a matrix as its table writes them: each finite one with as many decimals
    as the entry of the shown ones that needs the most (as :func:`number_text` writes it alone);
    ±∞ as ∞. Where an entry needs an exponent (1e-07), each is written as on its own."""
    plain = [[_plain_number_text(float(x), tol) for x in row] for row in values]
    finite = [t for row, ok in zip(plain, shown) for t, s in zip(row, ok) if s and "∞" not in t]
    if any("e" in t for t in finite):
        places = None
    else:
        places = max((len(t) - t.index(".") - 1 for t in finite if "." in t), default=0)
    out = []
    for row, texts in zip(values, plain):
        line = []
        for x, text in zip(row, texts):
            if places is not None and "∞" not in text:
                text = f"{float(x):.{places}f}"
                if float(text) == 0:
                    text = text.lstrip("-")  # −0.000 is 0.000
            line.append(MINUS + text[1:] if text.startswith("-") else text)
        out.append(line)
    return out


# Each item's part headings in each language (one problem rendered per item, not per student).
_SHEET_PROMPTS: dict[tuple[int, str], tuple[KeyItem, dict[str, str]]] = {}


def sheet_prompts(item: KeyItem) -> dict[str, str]:
    """Each part's words for its heading (part id -> text), in the current language: the
    sentence its worksheet asks it with (:mod:`qkvquiz.render.part_sentences`), formulas in
    plain Unicode ("Compute the scaled score s = q·k/√dₖ"); where the problem does not list its
    parts one by one, the family's prompt for the part."""
    return kept_per_language(_SHEET_PROMPTS, item, 64, lambda: _sheet_prompts(item))


def _sheet_prompts(item: KeyItem) -> dict[str, str]:
    sentences = None
    if all(len(item.env[name]) for name in item.env):  # a key with students: the first one's variant
        spec = ItemSpec(item.id, item.family, item.params, item.parts, item.tolerance, item.credit, title=item.title)
        values = {name: item.env[name][0] for name in item.env}
        try:
            sentences = plain_part_sentences(
                spec, {n: values[n] for n in item.family.given_names if n in values},
                {n: values[n] for n in item.family.step_names if n in values})
        except (jinja2.TemplateError, LookupError, TypeError, ValueError):
            sentences = None  # a key whose item the templates cannot state: the family's prompts
    if sentences is not None:
        return {part.id: sentence for part, sentence in zip(item.parts, sentences)}
    prompts = {}
    for part in item.parts:
        step = item.family.step(part.step)
        prompts[part.id] = _(step.prompt_for(item.params)) if step.prompt else step.name
    return prompts


def part_view(item: KeyItem, letter: str, r: PartResult) -> dict[str, Any]:
    """What the template shows for one part of one student."""
    part = next(p for p in item.parts if p.id == r.part)
    step = item.family.step(part.step)
    tol = item.tolerance_for(part.step)
    ids = [p.id for p in item.parts]  # named in running text as code: "your answer to `q5.scores`"
    view: dict[str, Any] = {
        "letter": letter, "id": r.part, "prompt": sheet_prompts(item)[r.part], "verdict": r.verdict,
        "verdict_text": _(VERDICTS[r.verdict]), "score": points_text(r.score), "points": points_text(r.points),
        "message": _code_ids(r.message, ids), "carry": _code_ids(r.carry, ids),
        "diagnosis": [_code_ids(d, ids) for d in r.diagnosis], "invariants": [_code_ids(d, ids) for d in r.invariants],
        # A missing part's own sentence (an answer under a near id), not the plain "no answer given".
        "missing_note": (_code_ids(r.message, ids) if r.verdict == "missing"
                         and r.message not in (_(NO_ANSWER), _(NO_ANSWER_BLANK)) else ""),
        "tolerance": tol.describe(), "expected": "", "expected_table": [], "wrong": [], "more": 0,
    }
    if r.verdict == "correct":
        return view
    expected = decode(r.expected)
    ok = None if r.entry_ok is None else np.asarray(r.entry_ok, dtype=bool)
    asked = part.asked(expected.shape)
    if r.verdict == "carried" and r.score >= r.points:
        # Full credit for work carried from earlier answers: nothing in it lost credit, so no
        # entry is listed or marked as missed (the sentence says what it was credited for).
        ok = None
    if expected.ndim == 0:
        view["expected"] = number_text(float(expected), tol)
    else:
        view["expected_table"] = table(expected, tol, None if ok is None else ~ok, asked)
    # An exact value in the list below is written as the table above writes it: one number
    # style in a part ("1.0" in both, never "1" beside "1.0").
    shown = None
    if expected.ndim in (1, 2):  # a stack of matrices has a table per matrix: each value on its own
        rows = expected.reshape(-1, expected.shape[-1])
        seen = np.ones(rows.shape, dtype=bool) if asked is None else np.asarray(asked, dtype=bool).reshape(rows.shape)
        shown = np.asarray(table_numbers(rows, tol, seen), dtype=object).reshape(expected.shape)
    if r.given is not None and ok is not None:
        off = ~ok if asked is None else ~ok & asked
        wrong = np.argwhere(off) if expected.ndim else ([()] if not ok else [])
        symbol = step.symbol
        for index in wrong[:MAX_LISTED]:
            index = tuple(int(i) for i in index)
            view["wrong"].append({
                "where": sheet_entry_name(symbol, index) if index else "",
                "given": given_text(_entry_at(r.given, index)),
                "expected": str(shown[index]) if shown is not None else number_text(float(expected[index]), tol),
            })
        view["more"] = max(0, len(wrong) - MAX_LISTED)
    return view


def feedback_context(report: GradeReport, result: StudentResult) -> dict[str, Any]:
    by_part = {p.part: p for p in result.parts}
    items = []
    for number, item in enumerate(report.key.items, start=1):
        parts = [part_view(item, "abcdefghijklmnopqrstuvwxyz"[k % 26], by_part[p.id])
                 for k, p in enumerate(item.parts)]
        score = sum(by_part[p.id].score for p in item.parts)
        items.append({
            "number": number, "title": item_title(item), "parts": parts,
            "score": points_text(score), "points": points_text(sum(p.points for p in item.parts)),
        })
    counts = {v: sum(p.verdict == v for p in result.parts) for v in VERDICTS}
    total = result.total
    return {
        "title": report.key.title, "student": result.student, "variant": result.variant,
        "score": points_text(result.score), "total": points_text(total),
        "percent": f"{100 * result.score / total if total else 0.0:.1f}".removesuffix(".0"),
        "counts": counts, "parts": len(result.parts), "items": items, "notes": result.notes,
        "summary": summary_sentence(counts, len(result.parts)),
    }


# The clauses after the first of the summary, in its order; each a whole message.
_SUMMARY_CLAUSES = (
    ("carried", N_("%(n)s credited as carried forward")),
    ("partial", N_("%(n)s partly correct")),
    ("wrong", N_("%(n)s not correct")),
    ("format", N_("%(n)s could not be read")),
    ("missing", N_("%(n)s not answered")),
)


def summary_sentence(counts: dict[str, int], parts: int) -> str:
    """"5 of 8 parts correct, 1 partly correct, 2 not answered." in the current language."""
    sentence = ngettext("%(n)s of %(parts)s part correct", "%(n)s of %(parts)s parts correct", parts) % {
        "n": counts["correct"], "parts": parts}
    for verdict, clause in _SUMMARY_CLAUSES:
        if counts[verdict]:
            # Translators: one more clause of a list (English ", "; a list pattern, as CLDR's).
            sentence = _("%(list)s, %(item)s") % {"list": sentence, "item": _(clause) % {"n": counts[verdict]}}
    return _("%(sentence)s.") % {"sentence": sentence}


def item_title(item: KeyItem) -> str:
    """An item's title: the instructor's own as written, the family's in the current language."""
    if not item.title or item.title == item.family.title:
        return _(item.family.title)
    return item.title


#: A part's heading: its letter, its prompt and its id (in code). Chinese closes the prompt's
#: own brackets with full-width ones, so the id goes in full-width brackets too: "（`q4.scores`）".
PART_HEADING = N_("(%(letter)s) %(prompt)s (%(id)s)")


def label(text: str) -> str:
    """A bold label and what parts it from the text after it: "**Correct:** ". One that ends in
    a full-width colon keeps the colon outside the bold and no space after it ("**正确**：得 1 分"):
    Chinese puts no space after "：", and CommonMark closes no bold between "：" and a letter."""
    if text.endswith("："):
        return "**" + text[:-1] + "**："
    return "**" + text + "** "


def _code_ids(text: str, ids: Sequence[str]) -> str:
    """``text`` with each part id of ``ids`` in it as code (``q5.scores``; a quoted 'q5.scores'
    loses its quotes), outside the code spans it has already."""
    if not text or not ids:
        return text
    names = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w.`'-])(?:'({names})'|({names}))(?![\w`'-]|\.\w)")
    pieces = re.split(r"(`+[^`]*?`+)", text)
    return "".join(p if k % 2 else pattern.sub(lambda m: md_code(m.group(1) or m.group(2)), p)
                   for k, p in enumerate(pieces))


def feedback_markdown(report: GradeReport, result: StudentResult, *, lang: str | None = None) -> str:
    """The feedback file of one graded student, in ``lang`` (default: the one chosen around the
    call, else the report's, the language its sentences were graded in)."""
    with entered(lang, report.lang):
        return FeedbackWriter(report).markdown(result)


def template_markdown(report: GradeReport, result: StudentResult) -> str:
    """The feedback file rendered by ``templates/feedback.md.j2`` itself (in the current language)."""
    return environment().get_template(TEMPLATE).render(feedback_context(report, result))


# ----------------------------------------------------------------------------- a class at once

TEMPLATE = "feedback.md.j2"
#: SHA-256 of the bundled feedback.md.j2 that :class:`FeedbackWriter` writes the Markdown of.
#: Another template (an edited one) is rendered by Jinja instead, so the files are always the
#: template's; tests/grade/test_feedback_writer.py compares the two ways byte for byte.
TEMPLATE_SHA256 = "608ae5e858132efcb697910d74fc2795ed69e2d9e3939a37e2ac369241fcd593"


@lru_cache(maxsize=1)
def _template_followed() -> bool:
    try:
        text = (templates_dir() / TEMPLATE).read_bytes()
    except OSError:
        return False
    return hashlib.sha256(text).hexdigest() == TEMPLATE_SHA256


def _trans_trimmed(text: str) -> str:
    """A ``{% trans trimmed %}`` block's message: stripped, each line break with the space around it one space."""
    return re.sub(r"\s*\n\s*", " ", text.strip())


_INTRO = _trans_trimmed("""
Each entry of an answer is compared with the exact value, within the tolerance named under
each part. Below, for every part that is not fully right, the exact answer is shown with the
entries you missed in **bold**.
""")


class FeedbackWriter:
    """Every student's feedback file of one report, in the current language.

    The same Markdown as ``feedback.md.j2`` renders from :func:`feedback_context`, line for
    line (each ``{{ … }}`` of the template is one expression below, its sentences the same
    catalog messages, formatted as Jinja's newstyle gettext does: ``message % variables``),
    written by Python: what is the same for many students (a correct part, an item's title,
    the summary of the same counts) is written once and reused. While the bundled template is
    not the one this follows (:data:`TEMPLATE_SHA256`), the template renders every file.
    """

    def __init__(self, report: GradeReport) -> None:
        self.report = report
        self.lang = current()
        self.fast = _template_followed()
        self._blocks: dict[tuple, str] = {}  # a correct part's block, by part, score and remark
        self._headings: dict[tuple, str] = {}  # an item's heading, by item and score
        self._scores: dict[tuple, str] = {}  # the score line's end, by score and total
        self._summaries: dict[tuple, str] = {}
        self._items = []
        for number, item in enumerate(report.key.items, start=1):
            parts = [(p, "abcdefghijklmnopqrstuvwxyz"[k % 26]) for k, p in enumerate(item.parts)]
            self._items.append((number, item, item_title(item), parts,
                                points_text(sum(p.points for p in item.parts))))
        # The sentences every file has, in this language.
        self._title = "# " + _("Feedback: %(title)s") % {"title": report.key.title} + "\n\n" + label(_("Student:") % {})
        self._variant = " · " + label(_("Variant:") % {})
        self._note = "\n" + label(_("Note:") % {})
        self._intro = "\n" + _(_INTRO) % {} + "\n"

    def markdown(self, result: StudentResult) -> str:
        if not self.fast or current() != self.lang:
            return template_markdown(self.report, result)
        by_part = {p.part: p for p in result.parts}
        counts = {v: 0 for v in VERDICTS}
        for p in result.parts:
            if p.verdict in counts:
                counts[p.verdict] += 1
        key = (*counts.values(), len(result.parts))
        summary = self._summaries.get(key)
        if summary is None:
            summary = self._summaries[key] = str(summary_sentence(counts, len(result.parts)))
        score_key = (result.score, result.total)
        score_line = self._scores.get(score_key)
        if score_line is None:
            total, score = points_text(result.total), points_text(result.score)
            percent = f"{100 * result.score / result.total if result.total else 0.0:.1f}".removesuffix(".0")
            score_line = self._scores[score_key] = " · **" + _ngettext(
                "Score: %(score)s of %(total)s point (%(percent)s %%)",
                "Score: %(score)s of %(total)s points (%(percent)s %%)", 1 if total == "1" else 2,
                score=score, total=total, percent=percent) + "**\n\n"
        out = [self._title, md_code(result.student), self._variant, md_code(result.variant), score_line, summary, "\n"]
        for note in result.notes:
            out += [self._note, _("%(sentence)s.") % {"sentence": note}, "\n"]
        out.append(self._intro)
        for number, item, title, parts, item_points in self._items:
            item_score = sum(by_part[p.id].score for p, _letter in parts)
            heading = self._headings.get((number, item_score))
            if heading is None:
                heading = self._headings[(number, item_score)] = "\n## " + _ngettext(
                    "Problem %(number)s: %(title)s (%(score)s of %(points)s point)",
                    "Problem %(number)s: %(title)s (%(score)s of %(points)s points)", 1 if item_points == "1" else 2,
                    number=number, title=title, score=points_text(item_score), points=item_points) + "\n"
            out.append(heading)
            for part, letter in parts:
                r = by_part[part.id]
                if r.verdict == "correct":  # the same block for every student with this score and remark
                    block_key = (part.id, r.score, r.points, r.carry)
                    block = self._blocks.get(block_key)
                    if block is None:
                        block = self._blocks[block_key] = _part_markdown(part_view(item, letter, r))
                    out.append(block)
                else:
                    out.append(_part_markdown(part_view(item, letter, r)))
        return "".join(out)


def _ngettext(singular: str, plural: str, n: int, **variables: Any) -> str:
    """Jinja's newstyle ``ngettext``: the form for ``n``, formatted with the variables and ``num``."""
    variables.setdefault("num", n)
    return ngettext(singular, plural, n) % variables


def _part_markdown(part: dict[str, Any]) -> str:
    """One part of ``feedback.md.j2`` (from its ``### (a)`` line to its tolerance line)."""
    out = [
        "\n### ", _(PART_HEADING) % {"letter": part["letter"], "prompt": part["prompt"], "id": md_code(part["id"])},
        "\n\n", label(_("%(verdict)s:") % {"verdict": part["verdict_text"]}),
        _ngettext("%(score)s of %(points)s point.", "%(score)s of %(points)s points.",
                  1 if part["points"] == "1" else 2, score=part["score"], points=part["points"]), "\n",
    ]
    verdict = part["verdict"]
    if verdict == "format":
        out += [_("Your answer could not be read: %(message)s.") % {"message": part["message"]}, "\n"]
    elif verdict == "missing":
        note = part["missing_note"]
        if note:
            out += [_("%(sentence)s.") % {"sentence": str(note[:1]).upper() + str(note[1:])}, "\n"]
        else:
            out += [_("No answer was given for this part.") % {}, "\n"]
    elif verdict == "carried":
        out += [_("%(message)s The value differs from the exact one only because an earlier answer did.")
                % {"message": part["message"]}, "\n"]
    elif verdict != "correct":
        out += [_("%(sentence)s.") % {"sentence": part["message"]}, "\n"]
    if part["carry"]:
        carry = str(part["carry"][:1]).upper() + str(part["carry"][1:])
        out += ["\n", carry if carry.endswith((".", "。")) else _("%(sentence)s.") % {"sentence": carry},
                "\n"]
    if verdict != "correct":
        for sentence in part["diagnosis"]:
            out += ["\n- ", label(_("Likely mistake:") % {}), str(sentence), "\n"]
        for sentence in part["invariants"]:
            out += ["\n- ", label(_("Check that fails:") % {}),
                    _("%(sentence)s Your answer does not have this property.") % {"sentence": sentence}, "\n"]
        if part["wrong"]:
            out += ["\n", _("Entries outside the tolerance:") % {}, "\n"]
            for w in part["wrong"]:
                line = (_("%(where)s: you wrote %(given)s, the exact value is %(expected)s")
                        % {"where": w["where"], "given": w["given"], "expected": w["expected"]} if w["where"] else
                        _("you wrote %(given)s, the exact value is %(expected)s")
                        % {"given": w["given"], "expected": w["expected"]})
                out += ["- ", line, "\n"]
            if part["more"]:
                out += ["- ", _("and %(n)s more") % {"n": part["more"]}, "\n"]
        if part["expected"]:
            out += ["\n", _("The exact answer is %(value)s.") % {"value": part["expected"]}, "\n"]
        elif part["expected_table"]:
            out += ["\n", _("The exact answer:") % {}, "\n\n"]
            for line in part["expected_table"]:
                out += [str(line), "\n"]
        out += ["\n", _("Tolerance: an entry counts when it is %(tolerance)s.") % {"tolerance": part["tolerance"]},
                "\n"]
    return "".join(out)
