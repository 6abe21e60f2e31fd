"""The typeset documents of a worksheet set: a student's worksheet with answer boxes, the
instructor's key with one student per page, and the class printout.

The problems and solutions are the family templates that the Markdown files use (a user's
``--templates`` included, rendered in the same sandbox), typeset by
:mod:`qkvquiz.render.html_page`. What only paper needs is added here, after the Markdown has
become HTML, so that the templates and the Markdown worksheet stay as they are:

* a header with a line for the name, the student id and the variant code
  (:func:`~qkvquiz.render.html_page.header_html`; the footer of every page repeats the id);
* under each asked part an answer area of the part's shape (:mod:`qkvquiz.render.answer_areas`).

A PDF of several students (the key, the class printout) is a list of documents, one per
student, that :func:`qkvquiz.render.pdf_batch.render_pdfs` lays out one by one and joins: every
student starts on a new page, and page numbers and running headers count per student.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path


from ..core.i18n import N_, _, ngettext
from ..spec_types import WorkSpace
from ..worksheet import Worksheet
from .answer_areas import (
    WHOLE_PROBLEM_PX,
    drop_answer_sentences,
    place_answer_areas,
    problem_areas,
    problem_height_px,
    work_space_html,
)
from .boxes import header_html
from .givens_in_view import GIVENS_LABEL_ATTR, PROBLEM_ANCHOR
from .html_page import html_document, markdown_body_html
from .latex import num
from .markdown import in_spec_language, render_items
from .printed import Comb, furniture_html, page_codes_style, printed_css

#: The screen worksheet's word on how answers are given (the Markdown's sentence is about
#: the submission file alone). How −∞ is written is said here and on the printed sheet, each
#: its own way (typed, or a tick box), not in a spec's instructions, which both sheets show.
HAND_IN_NOTE = N_(
    "Write each answer in its boxes, a matrix row by row, and −∞ as <code>-inf</code>; if you hand in a file, "
    "<code>submission.json</code> names the parts in the order of this sheet."
)
#: The printed sheet's word on its cells (its pages are scanned and read back).
PRINTED_NOTE = N_(
    "Write one digit to a cell, right-aligned before the printed point, and a minus sign, if any, "
    "in the light cell before the digits. Tick the box marked −∞ for minus infinity, and the box "
    "marked ∅ to leave an entry blank. Keep the corner marks and the code at the foot of each page clear. "
    "If you hand in a file instead, <code>submission.json</code> names the parts in the order of this sheet."
)


def _rendered(ws: Worksheet, student: int, kind: str, templates: str | Path | None,
              rendered: Mapping[str, Sequence[str]] | None) -> Sequence[str]:
    """The student's items rendered with their ``kind`` of template: as already rendered, else now."""
    if rendered is not None and kind in rendered:
        return rendered[kind]
    return render_items(ws, student, kind, templates=templates)


# --------------------------------------------------------------------------- worksheets


@in_spec_language
def worksheet_body_html(
    ws: Worksheet,
    student: int,
    *,
    templates: str | Path | None = None,
    work_space: WorkSpace | None = None,
    name: str = "",
    rendered: Mapping[str, Sequence[str]] | None = None,
    combs: Mapping[str, Comb | None] | None = None,
) -> str:
    """One student's worksheet as the HTML inside ``<body>``: header, instructions, each
    problem (a ``<section class="problem">``) with its answer areas (combs of cells where
    ``combs`` gives them: the printed sheet, :mod:`qkvquiz.render.printed`).

    ``work_space`` is room to work for the items that set none of their own; ``name`` (from
    the roster) is printed on the header's name line; ``rendered``: the student's problems
    already rendered (:func:`~qkvquiz.render.markdown.render_student`), if they are."""
    parts = [header_html(ws.spec.title, ws.students[student], ws.codes[student], set_id=ws.set_id, name=name)]
    if ws.spec.instructions:
        parts.append(markdown_body_html(ws.spec.instructions, text_math=True))
    parts.append('<p class="hand-in">' + _(HAND_IN_NOTE if combs is None else PRINTED_NOTE) + "</p>")
    problems = _rendered(ws, student, "problem", templates, rendered)
    all_areas = problem_areas(ws, student, work_space, combs)
    for number, (item, markdown, areas) in enumerate(zip(ws.spec.items, problems, all_areas), start=1):
        body = place_answer_areas(markdown_body_html(markdown, text_math=True), areas)
        body = drop_answer_sentences(body, [part_id for part_id, _area in areas])
        if areas:
            body = _without_heading_points(body, item.points)
        space = item.work_space or work_space
        if space is not None and space.per == "problem":
            body += work_space_html(space)
        whole = " whole" if problem_height_px(body) <= WHOLE_PROBLEM_PX else ""
        # Its id and the word over its givens, should a part open a page away from them
        # (qkvquiz/render/givens_in_view.py).
        label = html.escape(_("Given in Problem %(number)s:") % {"number": number}, quote=True)
        parts.append(f'<section class="problem{whole}" id="{PROBLEM_ANCHOR}{number}" {GIVENS_LABEL_ATTR}="{label}">'
                     f'\n{body}</section>')
    return "\n".join(parts) + "\n"


def _without_heading_points(body_html: str, points: float) -> str:
    """The problem's heading without its points ("(3 points)", "（3 分）"): on the printed page
    each part's points stand in the right margin, once, as an exam sheet has them."""
    pattern = (r"\s*[(（]" + re.escape(num(points, 2)) + r"[^()（）<]*(?:<span class=\"halt\">)?[)）](?:</span>)?"
               r"(?=\s*</h3>)")
    return re.sub(pattern, "", body_html, count=1)


@in_spec_language
def worksheet_document(
    ws: Worksheet,
    student: int,
    *,
    page_size: str = "A4",
    templates: str | Path | None = None,
    work_space: WorkSpace | None = None,
    name: str = "",
    rendered: Mapping[str, Sequence[str]] | None = None,
    combs: Mapping[str, Comb | None] | None = None,
) -> str:
    """One student's worksheet as a self-contained HTML document, ready to print and to read on a
    screen (a phone's included: the screen stylesheet of :func:`html_document`). ``work_space``, ``name`` and ``rendered``: see :func:`worksheet_body_html`.

    With ``combs`` (:func:`qkvquiz.render.printed.part_combs`, the class's) it is the sheet that
    is printed and read back: answer cells, corner marks and a QR code on every page.
    """
    body = worksheet_body_html(ws, student, templates=templates, work_space=work_space, name=name, rendered=rendered,
                               combs=combs)
    extra: list[str] = []
    if combs is not None:
        # After the problems: fixed boxes repeat on every page wherever they stand, and standing
        # first they would open each page, so a page opening with a new problem would be headed
        # "Problem N (continued)" for the last one.
        body = body + furniture_html()
        extra.append(printed_css([c for c in combs.values() if c is not None]))
    document = html_document(
        body,
        title=_("%(title)s (%(student)s)") % {"title": ws.spec.title, "student": ws.students[student]},
        page_size=page_size,
        body_class="worksheet",
        extra_css=extra,
    )
    if combs is not None:  # each page's QR code (qkvquiz/render/printed.py), for the pages it will have
        codes = page_codes_style(ws.set_id, ws.codes[student], _pages_at_most(body))
        document = document.replace("</head>", codes + "\n</head>", 1)
    return document


#: A printed page's text height, less than it is (CSS px: A4 less its margins is 986; erring low).
_TEXT_HEIGHT_PX = 800.0


def _pages_at_most(body_html: str) -> int:
    """About how many pages a printed worksheet takes, erring high (each problem as tall as
    :func:`problem_height_px` says, which errs high, two pages more): the QR codes it is given from
    the start. A longer one is laid out again with more (qkvquiz/render/printed.py)."""
    sections = body_html.split('<section class="problem')
    height = 300.0 + sum(problem_height_px(section) for section in sections[1:])
    return math.ceil(height / _TEXT_HEIGHT_PX) + 2


@in_spec_language
def class_documents(
    ws: Worksheet,
    *,
    page_size: str = "A4",
    templates: str | Path | None = None,
    work_space: WorkSpace | None = None,
    names: Mapping[str, str] | None = None,
) -> list[str]:
    """Every student's worksheet, in roster order: the documents of the class printout."""
    names = names or {}
    return [
        worksheet_document(
            ws, i, page_size=page_size, templates=templates, work_space=work_space,
            name=names.get(ws.students[i], ""),
        )
        for i in range(len(ws.students))
    ]


# --------------------------------------------------------------------------- the key


def _seed_sentence(ws: Worksheet, n: int) -> str:
    values = {
        "seed": f"<code>{html.escape(ws.seed)}</code>",
        "students": ngettext("%(num)s student", "%(num)s students", n) % {"num": n},
        "points": ngettext("%(points)s point", "%(points)s points", 1 if ws.spec.points == 1 else 2) % {
            "points": num(ws.spec.points, 2)},
    }
    if ws.keyed:
        return _("Seed %(seed)s. %(students)s, %(points)s each.") % values
    return _("Seed %(seed)s (variants are reproducible by anyone who knows the spec and this seed). "
             "%(students)s, %(points)s each.") % values


def _key_heading(ws: Worksheet) -> str:
    return _("Answer key: %(title)s") % {"title": html.escape(ws.spec.title)}


def _roster_entry(ws: Worksheet, i: int, names: Mapping[str, str], *, link: bool) -> str:
    """One student of the key's roster: id (a link to their answers in key.html), the roster's
    name where it has one (an instructor looks for a name, not an id), and the variant."""
    sid = html.escape(ws.students[i])
    shown = f'<span class="roster-id">{sid}</span>'
    if link:
        shown = f'<a href="#student-{i + 1}">{shown}</a>'
    name = names.get(ws.students[i], "")
    if name:
        shown += f' <span class="roster-name">{html.escape(name)}</span>'
    return f'<li>{shown} <span class="roster-code">{html.escape(ws.codes[i])}</span></li>'


@in_spec_language
def key_cover_document(
    ws: Worksheet, students: Sequence[int] | None = None, *, page_size: str = "A4",
    names: Mapping[str, str] | None = None,
) -> str:
    """The key's first page: title, seed, and the students in the order their pages follow
    (with their names, where ``names`` has them: a roster's name column)."""
    chosen = range(len(ws.students)) if students is None else students
    names = names or {}
    roster = "".join(_roster_entry(ws, i, names, link=False) for i in chosen)
    order = (
        _("Each student's answers and worked steps start on a new page, in this order "
          "(student id, name, variant); the PDF's bookmarks lead to each.")
        if any(names.get(ws.students[i]) for i in chosen)
        else _("Each student's answers and worked steps start on a new page, in this order "
               "(student id, variant); the PDF's bookmarks lead to each.")
    )
    body = (
        '<header class="sheet-header">'
        f'<h1 class="sheet-title">{_key_heading(ws)}</h1></header>\n'
        f"<p>{_seed_sentence(ws, len(chosen))}</p>\n"
        f"<p>{order}</p>\n"
        f'<ol class="key-roster">{roster}</ol>\n'
    )
    return html_document(
        body, title=_("%(title)s: answer key") % {"title": ws.spec.title}, page_size=page_size, body_class="key-cover"
    )


@in_spec_language
def key_student_body_html(ws: Worksheet, student: int, *, templates: str | Path | None = None,
                          rendered: Mapping[str, Sequence[str]] | None = None) -> str:
    """One student's part of the key as HTML for inside ``<body>``; ``rendered``: the student's
    problems and solutions already rendered (:func:`~qkvquiz.render.markdown.render_student`), if they are."""
    sid = ws.students[student]
    parts = [header_html(_("%(title)s: answer key") % {"title": ws.spec.title}, sid, ws.codes[student], name_line=False, set_id=ws.set_id)]
    problems = _rendered(ws, student, "problem", templates, rendered)
    solutions = _rendered(ws, student, "solution", templates, rendered)
    for problem, solution in zip(problems, solutions):
        body = answers_under_parts(markdown_body_html(problem + chr(10) + solution, text_math=True))
        parts.append(f'<section class="key-problem">\n{body}</section>')
    return "\n".join(parts) + "\n"


_KEY_ANSWER = re.compile(r'<li class="tb">\u2022[ \u00a0]<code class="part-id">([^<]+)</code>:\s*(?:\u200b)?(.*?)</li>', re.DOTALL)


def answers_under_parts(body_html: str) -> str:
    """A key's problem with each part's answer in a frame under the part, as an exam key sets
    its solutions, rather than in an "Answers." list after the worked solution (which a long
    solution put a page away from its parts). Left as it is where a part's answer or its part
    cannot be found (a user's template that writes them otherwise)."""
    heading = "<p><strong>" + html.escape(_("Answers."), quote=False) + "</strong></p>\n<ul>"
    start = body_html.find(heading)
    end = body_html.find("</ul>", start)
    if start < 0 or end < 0:
        return body_html
    answers = _KEY_ANSWER.findall(body_html[start:end])
    if not answers:
        return body_html
    out = body_html[:start]
    for part_id, answer in answers:
        code = f'<code class="part-id">{part_id}</code>'
        at = out.find(code)
        close = out.find("</li>", at)
        opening = out.rfind("<li", 0, at)
        if at < 0 or close < 0 or not out.startswith('<li class="pi">', opening):
            return body_html
        # "ka": the item holds its answer and is kept whole (a class, not a :has() rule, which
        # costs the renderer a search under every item).
        out = (out[:opening] + '<li class="pi ka">' + out[opening + len('<li class="pi">'):close]
               + f'<div class="key-answer">{answer}</div>' + out[close:])
    return out + body_html[end + len("</ul>"):].lstrip("\n")


@in_spec_language
def key_student_document(
    ws: Worksheet, student: int, *, page_size: str = "A4", templates: str | Path | None = None,
    rendered: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """One student's part of the key: their problems, answers and worked steps.

    Every page of it names the student at the top and in the footer; ``rendered``: see
    :func:`key_student_body_html`.
    """
    sid = ws.students[student]
    return html_document(
        key_student_body_html(ws, student, templates=templates, rendered=rendered),
        title=_("%(title)s: answer key (%(student)s)") % {"title": ws.spec.title, "student": sid},
        page_size=page_size,
        body_class="key",
    )


@in_spec_language
def key_html_document(
    ws: Worksheet, *, page_size: str = "A4", templates: str | Path | None = None,
    rendered: Sequence[Mapping[str, Sequence[str]]] | None = None,
    names: Mapping[str, str] | None = None,
) -> str:
    """The whole key as one page for a browser (``key.html``): the cover's roster, each
    entry a link to the student's answers below, with the student's name where ``names`` (a
    roster's name column) has one; printed, each student starts a page.
    ``rendered``: every student's problems and solutions already rendered, if they are."""
    roster = "".join(_roster_entry(ws, i, names or {}, link=True) for i in range(len(ws.students)))
    cover = (
        '<header class="sheet-header">'
        f'<h1 class="sheet-title">{_key_heading(ws)}</h1></header>\n'
        f"<p>{_seed_sentence(ws, len(ws.students))}</p>\n"
        f'<ol class="key-roster">{roster}</ol>\n'
    )
    students = "".join(
        f'<article class="key-student" id="student-{i + 1}">\n'
        f"{key_student_body_html(ws, i, templates=templates, rendered=rendered[i] if rendered else None)}</article>\n"
        for i in range(len(ws.students))
    )
    return html_document(
        cover + students,
        title=_("%(title)s: answer key") % {"title": ws.spec.title},
        page_size=page_size,
        extra_css=[".key-student { break-before: page; }"],
        body_class="key key-html",
    )


@in_spec_language
def key_documents(
    ws: Worksheet,
    students: Sequence[int] | None = None,
    *,
    page_size: str = "A4",
    templates: str | Path | None = None,
    names: Mapping[str, str] | None = None,
) -> list[str]:
    """The documents of ``key.pdf``: the cover, then each student's answers (roster order)."""
    chosen = range(len(ws.students)) if students is None else students
    return [
        key_cover_document(ws, chosen, page_size=page_size, names=names),
        *(key_student_document(ws, i, page_size=page_size, templates=templates) for i in chosen),
    ]
