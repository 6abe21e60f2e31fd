"""The review page: one self-contained document that runs exactly two scripts, the answer form's
entry parser (``answer-form/parse.js``, the grader's grammar, so a typed value is checked as the
grader will read it) and ``review/review.js``, allowed by their SHA-256 in its
Content-Security-Policy. Pictures and data come from its own server only. Its sentences come from
the gettext catalog: the template's through Jinja's i18n extension, the script's as JSON in the
form's ``data-messages`` attribute, as on the answer form.
"""

from __future__ import annotations

import json

from markupsafe import Markup

from ..core.i18n import HTML_LANG, N_, current, script_messages
from ..core.resources import templates_dir
from ..grade.scanned import CHANGES_SCORE
from ..render.form import environment, script_hash
from ..scan import cells
from ..scan.reader import OTHER_SCAN

PAGE_TEMPLATE = "review/page.html.j2"
SCRIPTS = ("answer-form/parse.js", "review/review.js")
STYLE = "review/review.css"
_CSP = ("default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; script-src {scripts}; "
        "connect-src 'self'; form-action 'none'; base-uri 'none'")

#: Why an entry is in doubt, as the page says it (the reader's words are the msgids).
REASONS: dict[str, str] = {
    cells.LOW_CONFIDENCE: N_("low confidence"),
    cells.TWO_LIKELY: N_("two readings likely"),
    cells.FAINT_TICK: N_("faint tick"),
    cells.UNCLEAR_SIGN: N_("unclear sign"),
    cells.GAP: N_("gap between digits"),
    cells.CONFLICT: N_("marks that contradict each other"),
    cells.SIGN_ALONE: N_("a sign without digits"),
    CHANGES_SCORE: N_("another likely reading changes the score"),
    OTHER_SCAN: N_("read otherwise on another scan of the page"),
}


def _asset(name: str, closing_tag: str) -> str:
    text = (templates_dir() / name).read_text(encoding="utf-8")
    if closing_tag in text.lower():
        raise ValueError(f"{name} contains {closing_tag!r} and cannot be inlined")
    return text


def review_page(title: str) -> str:
    """The whole page, in the current language."""
    scripts = [_asset(name, "</script") for name in SCRIPTS]
    messages = script_messages([templates_dir() / name for name in SCRIPTS])
    csp = _CSP.format(scripts=" ".join(script_hash(js) for js in scripts))
    return environment().get_template(PAGE_TEMPLATE).render(
        html_lang=HTML_LANG[current()], csp=Markup(csp), title=title,
        messages=json.dumps(messages, ensure_ascii=False, sort_keys=True),
        css=Markup(_asset(STYLE, "</style")), parse_js=Markup(scripts[0]), review_js=Markup(scripts[1]),
    )
