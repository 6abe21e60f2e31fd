"""Text that comes from outside (rosters, submissions, file names), made safe to show.

Student ids reach Markdown, HTML, CSV, JSON and the terminal. Each output escapes them its
own way; this module holds the pieces that are about the text itself: which characters are
never legitimate in an id (controls, invisible format characters such as zero-width spaces
and right-to-left overrides, lone surrogates), how to quote an id in Markdown so that it can
never become markup, and how to print it in a terminal without sending escape sequences.
"""

from __future__ import annotations

import re
import unicodedata

MAX_ID_LENGTH = 200

# Unicode categories that never belong in an id: controls (Cc), format characters (Cf:
# zero-width space/joiner, bidi overrides such as U+202E, soft hyphen), line and paragraph
# separators (Zl, Zp), surrogates (Cs, which cannot even be written as UTF-8), private use (Co)
# and unassigned code points (Cn).
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


_KINDS = {"Cc": "a control character", "Cs": "half of a character (a surrogate)", "Co": "a private-use character"}


def char_name(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: a character named so that a person can find it."""
    name = unicodedata.name(ch, None) or _KINDS.get(unicodedata.category(ch), "an unassigned character")
    return f"U+{ord(ch):04X} {name}"


def invisible_characters(text: str) -> list[str]:
    """The distinct control, format or otherwise invisible characters in ``text``, in order."""
    seen: list[str] = []
    for ch in text:
        if unicodedata.category(ch) in _INVISIBLE and ch not in seen:
            seen.append(ch)
    return seen


def id_problem(student: str) -> str | None:
    """Why ``student`` cannot be a student id, or None when it can.

    An id is non-empty text of at most ``MAX_ID_LENGTH`` characters with no invisible
    characters and no leading or trailing space: two ids that look the same are the same id.
    """
    if not student:
        return "the student id is empty"
    if len(student) > MAX_ID_LENGTH:
        return f"the student id is {len(student)} characters long; at most {MAX_ID_LENGTH} are allowed"
    bad = invisible_characters(student)
    if bad:
        listed = ", ".join(char_name(ch) for ch in bad[:3])
        return f"the student id {student!r} contains invisible or control characters ({listed})"
    if student != student.strip():
        return f"the student id {student!r} starts or ends with a space"
    return None


def lookalike_key(text: str) -> str:
    """What two ids that a person would read as the same share: NFKC, case-folded, no invisibles.

    Fullwidth digits (``ｓ０１``), compatibility forms and zero-width characters all vanish, so
    a near-miss can be answered with "did you mean …?" instead of a bare "unknown student".
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if unicodedata.category(ch) not in _INVISIBLE).strip()


def terminal_text(text: str) -> str:
    """``text`` with every invisible character written as an escape (``\\x1b``, ``\\u202e``).

    Printing a file name or an id as-is could move the cursor, recolour the terminal or
    reverse the rest of the line; the escaped form shows exactly what is there.
    """
    if not invisible_characters(text):
        return text
    return "".join(
        ch if unicodedata.category(ch) not in _INVISIBLE else ascii(ch)[1:-1] for ch in text
    )


def md_code(text: object) -> str:
    """``text`` as a Markdown code span that no content can break out of.

    In a code span CommonMark reads everything literally (``<script>``, ``*``, ``[x](y)``);
    only a run of backticks as long as the fence could close it, so the fence is one longer
    than the longest run inside. Invisible characters are shown as escapes, which also keeps
    line breaks (a blank line would end the span) out.
    """
    body = terminal_text(str(text))
    longest, run = 0, 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    if body.startswith(("`", " ")) or body.endswith(("`", " ")):
        body = f" {body} "  # CommonMark strips one space on each side of such a span
    return f"{fence}{body}{fence}"


#: ASCII punctuation that can start Markdown syntax (emphasis, links, HTML, code, escapes,
#: tables, and ``$`` for math).
_MARKDOWN_SYNTAX = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~&$])")


def md_text(text: object) -> str:
    r"""``text`` as plain Markdown text, on one line: every character that could start Markdown
    syntax is backslash-escaped (CommonMark reads ``\*`` as ``*``), invisible characters are
    shown as escapes, and line breaks become spaces. For a person's name on a worksheet, where a
    code span (:func:`md_code`) would print it as code."""
    body = " ".join(terminal_text(str(text).replace("\r", " ").replace("\n", " ")).split())
    return _MARKDOWN_SYNTAX.sub(r"\\\1", body)
