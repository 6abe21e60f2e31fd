"""The practice page and what goes into it: a problem with the answer form's boxes, its worked
steps as the key shows them, and the page itself (served, or written with its problems inside).

The page runs exactly two scripts, the answer form's entry parser (``answer-form/parse.js``,
the grader's grammar) and ``practice/practice.js``, allowed by the SHA-256 of their text in its
Content-Security-Policy; it loads nothing from anywhere else. Its sentences come from the
gettext catalog: the templates' through Jinja's i18n extension, the scripts' as JSON data in the
form's ``data-messages`` attribute, as on the answer form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup

from ..core.i18n import HTML_LANG, N_, _, current, entered, script_messages
from ..core.resources import templates_dir
from ..render.form import environment, form_problems, script_hash
from ..render.html_page import markdown_body_html
from ..render.markdown import render_student
from ..render.page import screen_stylesheet_text, stylesheet
from .problem import Problem
from .topics import Topic, own_language

PAGE_TEMPLATE = "practice/page.html.j2"
#: What the instructor who publishes a static site must know (``practice --static`` prints it
#: too); the static page says it to everyone who opens it.
# Translators: on the static practice page, to whoever publishes it (and to students).
ANSWERS_NOTICE = N_("This page carries every answer in its source (its checks run in the browser): "
                    "publish it for practice only, never for graded work.")
PROBLEM_TEMPLATE = "practice/problem.html.j2"
#: The page's scripts, in the order they run (parse.js first: practice.js reads with it).
SCRIPTS = ("answer-form/parse.js", "practice/practice.js")
STYLES = ("answer-form/form.css", "practice/practice.css")

# Nothing is loaded from anywhere; the served page may also talk to its own server ('self').
_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src {scripts}; {connect}"
        "form-action 'none'; base-uri 'none'")


def problem_html(problem: Problem) -> str:
    """The problem's text with a grid of boxes under each asked part (the answer form's, the
    same names and shapes), math set as text: the size of a page of many problems stays small."""
    with entered(None, problem.lang):
        problems = form_problems(problem.worksheet, 0, text_math=True)
        return environment().get_template(PROBLEM_TEMPLATE).render(problems=problems)


def worked_html(problem: Problem) -> str:
    """The worked steps of this very variant: the key's solution, rendered as key.html renders it."""
    with entered(None, problem.lang):
        (solution,) = render_student(problem.worksheet, 0, ("solution",))["solution"]
        return markdown_body_html(solution, text_math=True)


def _asset(name: str, closing_tag: str) -> str:
    text = (templates_dir() / name).read_text(encoding="utf-8")
    if closing_tag in text.lower():
        raise ValueError(f"{name} contains {closing_tag!r} and cannot be inlined")
    return text


def topic_groups(topics: Sequence[Topic]) -> list[tuple[str, list[dict[str, str]]]]:
    """The picker's groups, in order: the families alone, then each spec's items."""
    groups: dict[str, list[dict[str, str]]] = {}
    for topic in topics:
        groups.setdefault(topic.group, []).append({"id": topic.id, "title": topic.title()})
    return list(groups.items())


def page_html(topics: Sequence[Topic], *, mode: str, lang: str | None = None, seed: str = "", first: str = "",
              data: Any = None) -> str:
    """The whole page. ``mode`` is ``"server"`` (problems come from ``qkvquiz practice``) or
    ``"static"`` (``data``: every problem, key and known mistake, see :mod:`.static`). In ``lang``
    (default: the language chosen around the call, else the first topic's)."""
    with entered(lang, own_language(topics)):
        scripts = [_asset(name, "</script") for name in SCRIPTS]
        css = [_asset(name, "</style") for name in STYLES]
        csp = _CSP.format(scripts=" ".join(script_hash(js) for js in scripts),
                          connect="connect-src 'self'; " if mode == "server" else "")
        messages = script_messages([templates_dir() / name for name in SCRIPTS])
        note = (_("Your progress is kept in this browser's storage on this computer; nothing is sent anywhere.")
                if mode == "static" else
                _("Your progress is kept in a file on this computer; nothing is sent anywhere."))
        payload = "" if data is None else Markup(
            # In a <script> block only "</" could end it early: written as \u003c, still JSON.
            json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c"))
        return environment().get_template(PAGE_TEMPLATE).render(
            html_lang=HTML_LANG[current()], csp=Markup(csp), mode=mode, seed=seed,
            first=first or (topics[0].id if topics else ""),
            groups=topic_groups(topics), messages=json.dumps(messages, ensure_ascii=False, sort_keys=True),
            stylesheet=Markup(stylesheet()), screen_css=Markup(screen_stylesheet_text()), form_css=Markup(css[0]), practice_css=Markup(css[1]),
            parse_js=Markup(scripts[0]), practice_js=Markup(scripts[1]), progress_note=note, data=payload,
            answers_note=_(ANSWERS_NOTICE) if mode == "static" else "",
        )
