"""One student's feedback as Markdown they can read on their own (``templates/feedback.md.j2``).

Per part: the verdict and score; where the answer is not right, the tolerance it was checked
with, the expected value (entries the student got wrong in bold), each wrong entry with what
was written, the known mistake it matches and the properties it breaks; for an answer that
could not be read, why. Numbers are plain text (no LaTeX), so the file reads the same in an
editor and in a Markdown viewer.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..i18n import N_, _, ngettext, using
from ..key import KeyItem, decode
from ..render.markdown import environment
from .grader import NO_ANSWER, NO_ANSWER_BLANK, GradeReport, PartResult, StudentResult
from .parse import entry_place
from .tolerance import Tolerance

MAX_LISTED = 12  # wrong entries listed one by one; the rest are counted

VERDICTS = {
    "correct": N_("Correct"),
    "partial": N_("Partly correct"),
    "wrong": N_("Not correct"),
    "carried": N_("Credited as carried forward"),
    "format": N_("Could not be read"),
    "missing": N_("Not answered"),
}


def points_text(x: float) -> str:
    """Points as a worksheet writes them: 2, 1.5, 0.6667."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


def number_text(x: float, tol: Tolerance | None = None) -> str:
    """An exact value shown one digit finer than the tolerance asks; ±∞ as −∞/∞."""
    if math.isinf(x):
        return "−∞" if x < 0 else "∞"
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


def entry_name(index: tuple[int, ...]) -> str:
    """Where an entry sits, counting from 1: entry 3; row 2, column 3; matrix 1, row 2, column 3."""
    return entry_place([i + 1 for i in index], len(index))


def table(values: np.ndarray, tol: Tolerance, bold: np.ndarray | None = None,
          asked: np.ndarray | None = None) -> list[str]:
    """A vector or matrix (or a stack of them) as Markdown tables, wrong entries in bold; with
    ``asked`` (bool), entries not asked (a partial ask, the padding of a shorter last delta
    chunk) show as "—"."""
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
    lines = ["| | " + " | ".join(_("col %(j)s") % {"j": j + 1} for j in range(cols)) + " |", "|---" * (cols + 1) + "|"]
    for i, row in enumerate(values):
        cells = []
        for j, x in enumerate(row):
            if asked is not None and not asked[i, j]:
                cells.append("—")
                continue
            text = number_text(float(x), tol)
            cells.append(f"**{text}**" if bold is not None and bold[i, j] else text)
        lines.append("| " + _("row %(i)s") % {"i": i + 1} + " | " + " | ".join(cells) + " |")
    return lines


def part_view(item: KeyItem, letter: str, r: PartResult) -> dict[str, Any]:
    """What the template shows for one part of one student."""
    part = next(p for p in item.parts if p.id == r.part)
    step = item.family.step(part.step)
    tol = item.tolerance_for(part.step)
    view: dict[str, Any] = {
        "letter": letter, "id": r.part, "prompt": _(step.prompt) if step.prompt else step.name, "verdict": r.verdict,
        "verdict_text": _(VERDICTS[r.verdict]), "score": points_text(r.score), "points": points_text(r.points),
        "message": r.message, "carry": r.carry, "diagnosis": r.diagnosis, "invariants": r.invariants,
        # A missing part's own sentence (an answer under a near id), not the plain "no answer given".
        "missing_note": r.message if r.verdict == "missing" and r.message not in (_(NO_ANSWER), _(NO_ANSWER_BLANK)) else "",
        "tolerance": tol.describe(), "expected": "", "expected_table": [], "wrong": [], "more": 0,
    }
    if r.verdict == "correct":
        return view
    expected = decode(r.expected)
    ok = None if r.entry_ok is None else np.asarray(r.entry_ok, dtype=bool)
    asked = part.asked(expected.shape)
    if expected.ndim == 0:
        view["expected"] = number_text(float(expected), tol)
    else:
        view["expected_table"] = table(expected, tol, None if ok is None else ~ok, asked)
    if r.given is not None and ok is not None:
        given = decode(r.given)
        off = ~ok if asked is None else ~ok & asked
        wrong = np.argwhere(off) if expected.ndim else ([()] if not ok else [])
        for index in wrong[:MAX_LISTED]:
            index = tuple(int(i) for i in index)
            view["wrong"].append({
                "where": entry_name(index) if index else "",
                "given": number_text(float(given[index])),
                "expected": number_text(float(expected[index]), tol),
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


def feedback_markdown(report: GradeReport, result: StudentResult, *, lang: str | None = None) -> str:
    """The feedback file of one graded student, in ``lang`` (default: the report's, the language
    its sentences were graded in)."""
    with using(lang or report.lang):
        return environment().get_template("feedback.md.j2").render(feedback_context(report, result))
