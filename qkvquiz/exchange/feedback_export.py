"""Feedback for an LMS: each student's feedback as one HTML page (PDF where PDF output is
installed), and a zip laid out as Moodle's "Upload multiple feedback files in a zip" expects.

The pages are made from what ``qkvquiz grade`` wrote (``feedback/<name>.md``, named as the
student's folder, :func:`qkvquiz.files.safe_name`), through the worksheet's Markdown → HTML
(:func:`feedback_html`), with the roster's name above. The files write their notation in Unicode
("not divided by √dₖ", "the attention weights A"), which reads right as plain text; on a page it
is set as the worksheet sets it (:func:`page_markdown`): the sentences go through
:func:`qkvquiz.render.prose_math.prose_math`, as the worksheet's prompts do.

Moodle's importer (``mod/assign/feedback/file/importziplib.php``) reads, in each path part, the
``_``-separated fields ``<full name>_<participant id>_<plugin type>_<plugin>`` and files what
follows as that participant's feedback. The zip holds one folder per student,
``<Full Name>_<participant id>_assignfeedback_file/feedback.html``: the name has its ``_``
replaced by spaces, as Moodle's own download does; the plugin is the feedback-file plugin,
which is on whenever that upload is offered.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..core.i18n import entered
from ..core.inputs import InputError, read_text, shown_path
from ..files import safe_name
from ..roster import Roster, RosterEntry
from .lms_names import moodle_prefix
from .results import Results

MAX_FEEDBACK_BYTES = 5_000_000  # one feedback Markdown file (a long spec's is about 50 KB)
FEEDBACK_DIR = "feedback"
MOODLE_PLUGIN = "assignfeedback_file"
FEEDBACK_FILE = "feedback.html"


@dataclass(frozen=True)
class FeedbackPage:
    student: str
    name: str  # the file name used for the student (without extension)
    html: str


#: The feedback page's own rules, after the pages' stylesheet (templates/style.css).
FEEDBACK_CSS = """
/* Each part whole on one page where it fits: its heading, verdict, the list of entries and the
 * exact answer under it ("The exact answer:" ending a page, its matrix on the next, was the cut
 * this mends); a part taller than a page breaks as it must. */
body.feedback section.fb-part { break-inside: avoid; }
body.feedback table { break-before: avoid; break-inside: avoid; }
body.feedback table + p, body.feedback p + ul { break-before: avoid; }
/* The exact answer as the worksheet writes a matrix: in brackets, without the Markdown file's
 * row and column headers (the entries are named as on the sheet, S₂₃, in the list above). */
body.feedback table {
  margin: 0.4em 0 0.6em 1.2em;
  border-left: 0.1em solid #000;
  border-right: 0.1em solid #000;
  background:
    linear-gradient(#000, #000) left top / 0.35em 0.1em no-repeat,
    linear-gradient(#000, #000) left bottom / 0.35em 0.1em no-repeat,
    linear-gradient(#000, #000) right top / 0.35em 0.1em no-repeat,
    linear-gradient(#000, #000) right bottom / 0.35em 0.1em no-repeat;
}
body.feedback table thead, body.feedback table td:first-child { display: none; }
body.feedback table td { padding: 0.1em 0.55em; }
/* The numbers right-aligned (Markdown's "---:"), in digits of one width. */
body.feedback td, body.feedback th { font-variant-numeric: tabular-nums; }
/* An entry the student missed: boxed and in red as well as bold, which is all but invisible in a
 * Chinese face (and "−∞" in bold is hardly bolder than in regular). */
body.feedback table strong {
  color: #b00000;
  border: 0.06em solid #b00000;
  padding: 0 0.15em;
  font-weight: bold;
}
/* Every page's footer names the student: the id in the first line under the title. */
body.feedback h1 + p > code:first-of-type { string-set: student-id content(); }
"""

#: What a page shows as written, never as math: a code span (its fence a run of backticks,
#: qkvquiz.core.untrusted.md_code), text in quotes (a student's text as the grader quotes it:
#: "banana", 'Q1.SCORES', “b”) and a number with an exponent (−5.55112e-17).
_LITERAL = re.compile(
    r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)"
    r'|"[^"\n]*"|“[^”\n]*”|「[^」\n]*」'
    r"|(?<!\w)'[^'\n]*'(?!\w)"
    r"|\d+(?:\.\d+)?e[-+−]?\d+"
)
#: A line (or list item) that opens with math: "- $S_{23}$: you wrote 2, … 1.0". The Markdown
#: parser's dollar rule looks at the character before an opening "$" to refuse "1$", and at the
#: start of a paragraph or list item that index wraps round to its last character: one ending in
#: a digit lost its math ("$S_{23}$" printed as written). A word joiner (U+2060, zero width, no
#: break) before the "$" gives it a character of its own to look at (docs/markdown-proposals.md).
_OPENING_MATH = re.compile(r"^(\s*(?:[-*+] )?)\$(?!\$)")
#: A part's letter at the start of a heading, "### (b) ": a label, not the letter b.
_PART_LETTER = re.compile(r"#{1,6} \([a-z]{1,2}\) ")
#: A word in a run of notation ("rows × columns", "√Var"): English, not math.
_WORD = re.compile(r"[A-Za-z]{3,}")


def _sentence_math(text: str) -> str:
    """:func:`~qkvquiz.render.prose_math.prose_math` on a piece of a sentence, except a run that
    holds a word (a message's "write rows × columns"), which stays text."""
    from ..render import prose_math as pm

    if not text:
        return text
    text = pm.split_accents(text)
    pieces, at = [], 0
    for start, end, latex in pm.notation_runs(text):
        if _WORD.search(re.sub(rf"(?:{'|'.join(pm.FUNCTIONS)})\(", "(", text[start:end])):
            continue
        pieces += [text[at:start], "$" + latex + "$"]
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def page_markdown(markdown: str) -> str:
    """A feedback file's Markdown as its page sets it: the notation of its sentences as inline
    math, as :func:`~qkvquiz.render.prose_math.prose_math` sets a worksheet's prompts ("√dₖ" →
    ``$\\sqrt{d_k}$``, "A" → ``$A$``); code spans, quoted text, table rows (numbers only) and a
    heading's part letter as they are."""
    out = []
    for line in markdown.split("\n"):
        if line.startswith("|"):
            out.append(line)
            continue
        lead = _PART_LETTER.match(line)
        start = lead.end() if lead else 0
        pieces, at = [line[:start]], start
        for span in _LITERAL.finditer(line, start):
            pieces += [_sentence_math(line[at:span.start()]), span.group()]
            at = span.end()
        pieces.append(_sentence_math(line[at:]))
        out.append(_OPENING_MATH.sub("\\1\u2060$", "".join(pieces)))
    return "\n".join(out)


#: Where a part of the page begins: its heading, "### (a) …" (problems are "##").
_PART_START = re.compile(r"(?=<h[23][ >])")


def part_sections(body: str) -> str:
    """The page's HTML with each part (an ``<h3>`` and what follows it up to the next heading)
    in a ``<section class="fb-part">``, which the stylesheet keeps on one page."""
    pieces = _PART_START.split(body)
    return "".join(f'<section class="fb-part">{piece}</section>' if piece.startswith("<h3") else piece
                   for piece in pieces)


def feedback_html(markdown: str, *, title: str = "", header: str = "") -> str:
    """One feedback file as a self-contained HTML page: its Markdown (:func:`page_markdown`)
    with math set as text where it can be, as the worksheet's is, and :data:`FEEDBACK_CSS`."""
    from ..render.html_page import html_document, markdown_body_html

    # The file holds what students and the spec wrote (quoted, titles): its HTML stays text.
    body = part_sections(markdown_body_html(page_markdown(markdown), text_math=True))
    return html_document(f"{header}\n{body}", title=title, extra_css=[FEEDBACK_CSS], body_class="feedback")


def feedback_markdown_path(folder: Path, student: str) -> Path | None:
    """The feedback file ``grade`` wrote for ``student``: named as their folder, or with the id's hash
    when two ids share a folder name (case-insensitively); None when there is none."""
    plain = safe_name(student, set())
    for name in (plain, safe_name(student, {plain.lower()})):
        path = folder / FEEDBACK_DIR / f"{name}.md"
        if path.is_file():
            return path
    return None


def feedback_pages(results: Results, roster: Roster | None) -> tuple[list[FeedbackPage], list[str]]:
    """Every graded student's feedback as an HTML page, and the students whose feedback file is missing;
    in the language the grading wrote (the pages' ``lang``, their words), unless the caller chose one."""
    with entered(None, results.lang):
        return _feedback_pages(results, roster)


def _feedback_pages(results: Results, roster: Roster | None) -> tuple[list[FeedbackPage], list[str]]:
    pages, missing = [], []
    taken: set[str] = set()
    for student, result in results.students.items():
        if result.score is None:
            continue
        path = feedback_markdown_path(results.folder, student)
        if path is None:
            missing.append(student)
            continue
        markdown = read_text(path, MAX_FEEDBACK_BYTES, "feedback")
        entry = roster.get(student) if roster is not None else RosterEntry(student)
        header = (f'<p class="student-name"><strong>{html.escape(entry.display_name)}</strong>'
                  f' ({html.escape(student)})</p>') if entry.name or entry.first_name or entry.last_name else ""
        page = feedback_html(markdown, title=f"{results.title}: {entry.display_name}", header=header)
        pages.append(FeedbackPage(student, safe_name(student, taken), page))
    return pages, missing


def _fixed(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0))  # same feedback, same bytes
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o600 << 16
    return info


def moodle_feedback_zip(pages: list[FeedbackPage], roster: Roster) -> tuple[bytes, list[str]]:
    """The zip for Moodle's "Upload multiple feedback files in a zip", and the students left out
    (no ``moodle_id`` in the roster: Moodle could not tell whose the file is). ValueError where
    no student has one: the zip would hold nothing."""
    left_out = []
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for page in pages:
            entry = roster.get(page.student)
            if not entry.moodle_id:
                left_out.append(page.student)
                continue
            folder = f"{moodle_prefix(entry.display_name, entry.moodle_id)}_{MOODLE_PLUGIN}"
            zf.writestr(_fixed(f"{folder}/{FEEDBACK_FILE}"), page.html)
    if pages and len(left_out) == len(pages):
        raise ValueError("no student of these results has a moodle_id in the roster, so the Moodle zip would be "
                         "empty; add the moodle_id column (Moodle's participant ids) to the roster")
    return buf.getvalue(), left_out


def render_pdfs(pages: list[FeedbackPage], folder: Path) -> list[Path]:
    """Each page as ``<folder>/<name>.pdf`` (PdfUnavailable where WeasyPrint's libraries are missing),
    then made readable by the owner only (the PDF writer creates ordinary files)."""
    import os

    from ..render.pdf import render_pdf

    written = []
    for page in pages:
        target = folder / f"{page.name}.pdf"
        folder.mkdir(parents=True, exist_ok=True)
        render_pdf(page.html, target)
        os.chmod(target, 0o600)
        written.append(target)
    return written


def check_results_folder(results: Results) -> None:
    """InputError when the results' folder has no feedback files at all (grade ran with --no-feedback)."""
    if not (results.folder / FEEDBACK_DIR).is_dir():
        raise InputError(shown_path(results.folder), "holds no feedback/ folder; run `qkvquiz grade` with feedback on")
