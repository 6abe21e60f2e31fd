"""The one CSV writer of every CSV qkvquiz writes (exports, results, item analysis): no cell of it can run as a spreadsheet formula.

An export's cells come from many places: the roster (names, ids, emails), results (flags,
feedback) and, for Moodle's worksheet, every cell of a file an instructor downloaded. A
spreadsheet that opens the file evaluates a cell starting with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return (``=HYPERLINK(…)`` can send the sheet's data to a URL; ``=cmd|…`` runs a
program in old Excel), so each such cell gets a leading apostrophe, which spreadsheets read as
"text" (OWASP's CSV-injection rule). Two kinds of cell stay as they are, because an LMS must read
them back as what they are:

- a plain number (``-1.5``, ``7,25``, ``+3``, ``1e-3``): Moodle's importers read a grade with
  ``unformat_float``, which turns ``'-1.5`` into no grade at all; a bare number runs nothing;
- a lone ``-``: Moodle's grading worksheet writes it for "no date", and it runs nothing either.

This module depends on nothing else of qkvquiz, so any layer may use it.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal

# What makes a spreadsheet read a cell as a formula: OWASP's list, and the fullwidth forms that
# East Asian spreadsheets (and Excel with an IME) read as the same operators.
FORMULA_STARTS = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
# Characters a reader may drop before it looks at a cell's first character (LibreOffice trims
# spaces; a quote is dropped by readers that unquote loosely).
_LEADING = " \t\r\n\u00a0\""
# Where a spreadsheet may start a new cell inside ours: a file opened with another delimiter
# (";" in much of Europe, tabs) or read by a reader that does not honour quotes splits a cell
# there, and "x;=cmd|…" would have its second half begin a cell.
_SPLITS = ",;\t\r\n"
# A number as spreadsheets and Moodle's unformat_float read it: a sign, digits with one decimal
# point or comma, an exponent. Nothing else (no "1+2", no "1-2": those are formulas).
_NUMBER = re.compile(r"[-+]?(?:\d+(?:[.,]\d*)?|[.,]\d+)(?:[eE][-+]?\d+)?")
_LATER_CELL = re.compile(f"(?<=[{re.escape(_SPLITS)}])([{re.escape(_LEADING)}]*)([^{re.escape(_SPLITS)}]+)")


def _runs(piece: str) -> bool:
    """Whether ``piece``, read as the start of a cell, is a formula to a spreadsheet."""
    if piece[:1] in ("\t", "\r"):
        return True
    body = piece.lstrip(_LEADING)
    if body[:1] not in FORMULA_STARTS:
        return False
    return not (body.rstrip() == "-" or _NUMBER.fullmatch(body.rstrip()))


def safe_cell(value: object) -> str:
    """``value`` as the text of one CSV cell that no spreadsheet runs (see the module docstring).

    Numbers (int, float, Decimal) are written as they are; any other value as ``str(value)``,
    with an apostrophe before the cell and before every later piece that could start a cell.
    """
    if value is None:
        return ""
    if isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    if not text:
        return text

    def later(m: re.Match[str]) -> str:
        lead, piece = m.group(1), m.group(2)
        return lead + "'" + piece if _runs(piece) else m.group(0)

    rest = _LATER_CELL.sub(later, text) if any(c in text for c in _SPLITS) else text
    return "'" + rest if _runs(text) else rest


def csv_text(rows: Iterable[Sequence[object]], *, quote_all: bool = False, lineterminator: str = "\r\n") -> str:
    """``rows`` as CSV text, every cell through :func:`safe_cell`.

    ``quote_all``: quote every cell (Blackboard wants it); else only those that need it.
    ``lineterminator``: ``\\r\\n`` as RFC 4180 and the LMS importers expect; ``\\n`` for files
    read by people and diffs.
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator=lineterminator, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL)
    for row in rows:
        writer.writerow([safe_cell(cell) for cell in row])
    return buf.getvalue()
