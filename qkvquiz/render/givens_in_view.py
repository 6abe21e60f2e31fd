"""Givens in view: a worksheet part that opens a page after its problem's givens gets them again.

A problem taller than a page breaks between its parts, and the part that opens the next page
("Problem 3 (continued)") has its matrices a page back, out of view. After a worksheet is laid
out, the pages of each problem and of each of its parts are read from the layout's anchors (the
``id`` of each ``section.problem`` and each part's row, written by
:func:`qkvquiz.render.documents.worksheet_body_html`); a part that opens a later page than its
problem gets a copy of the problem's displayed givens above it, on a new page, and the document
is laid out again. A document whose problems each fit where they start is laid out once.
"""

from __future__ import annotations

import html as html_lib
import re
from collections.abc import Callable
from typing import Any

#: The attribute of a problem's section that holds the word over its repeated givens
#: ("Given in Problem 3:"), in the worksheet's language.
GIVENS_LABEL_ATTR = "data-givens-label"
#: The ``id`` prefixes of a problem's section and of a part's row.
PROBLEM_ANCHOR = "problem-"
PART_ANCHOR = "part-"
#: Layouts at most, the first included: a repeat may push a later part onto a page of its own.
MAX_LAYOUTS = 3

_SECTION = re.compile(r'<section class="problem[^"]*" id="(' + PROBLEM_ANCHOR + r'\d+)" '
                      + GIVENS_LABEL_ATTR + r'="([^"]*)">')
_PART_ROW = re.compile(r'<div class="part-row[^"]*" id="(' + PART_ANCHOR + r'[^"]+)">')
_DISPLAY_OPEN = '<div class="math-display">'


def _displays(givens_html: str) -> list[str]:
    """Each ``<div class="math-display">…</div>`` of ``givens_html``, whole (its own divs counted)."""
    found, at = [], 0
    while (start := givens_html.find(_DISPLAY_OPEN, at)) >= 0:
        depth, cursor = 0, start
        for tag in re.finditer(r"<(/?)div\b[^>]*>", givens_html[start:]):
            depth += -1 if tag.group(1) else 1
            if depth == 0:
                cursor = start + tag.end()
                break
        else:
            break
        found.append(givens_html[start:cursor])
        at = cursor
    return found


def _problems(source: str) -> list[tuple[str, str, str, list[str]]]:
    """Each problem of a worksheet: its anchor, its label for repeated givens, its displayed
    givens (before its first list of parts) and its parts' anchors in order."""
    out = []
    sections = list(_SECTION.finditer(source))
    for k, section in enumerate(sections):
        end = sections[k + 1].start() if k + 1 < len(sections) else len(source)
        body = source[section.end():end]
        first_list = body.find("<ul")
        givens = "".join(_displays(body[: first_list if first_list >= 0 else 0]))
        out.append((section.group(1), html_lib.unescape(section.group(2)), givens,
                    _PART_ROW.findall(body)))
    return out


def _pages(document: Any) -> dict[str, int]:
    """The first page (from 0) of each anchor of a laid-out WeasyPrint document (its public
    ``anchors``; an element broken across pages has its anchor on each)."""
    pages: dict[str, int] = {}
    for number, page in enumerate(document.pages):
        for name in page.anchors:
            pages.setdefault(name, number)
    return pages


def parts_out_of_view(source: str, document: Any) -> list[str]:
    """The anchors of the parts that open a page after their problem's first page, in a
    problem with displayed givens, and that have no repeat of them yet."""
    pages = _pages(document)
    out = []
    for problem, _label, givens, parts in _problems(source):
        if not givens or problem not in pages:
            continue
        previous = pages[problem]
        for part in parts:
            page = pages.get(part, previous)
            if page > previous and page > pages[problem] and f'data-repeats="{part}"' not in source:
                out.append(part)
            previous = page
    return out


def with_givens_repeated(source: str, parts: list[str]) -> str:
    """``source`` with the problem's displayed givens set above each of ``parts``, on a new page."""
    for problem, label, givens, anchors in _problems(source):
        for part in anchors:
            if part in parts:
                row = re.search(r'<div class="part-row[^"]*" id="' + re.escape(part) + '">', source)
                if row is None:
                    continue
                repeat = (f'<div class="givens-repeat" data-repeats="{part}">'
                          f'<p class="givens-label">{html_lib.escape(label)}</p>{givens}</div>')
                source = source[: row.start()] + repeat + source[row.start():]
    return source


def laid_out_with_givens_in_view(source: str, lay_out: Callable[[str], Any]) -> Any:
    """``lay_out(source)``, again with the givens repeated where a part opens a page away from
    them (:func:`parts_out_of_view`), until none does or :data:`MAX_LAYOUTS` is reached."""
    document = lay_out(source)
    if GIVENS_LABEL_ATTR not in source:
        return document
    for _ in range(MAX_LAYOUTS - 1):
        parts = parts_out_of_view(source, document)
        if not parts:
            break
        source = with_givens_repeated(source, parts)
        document = lay_out(source)
    return document
