"""The review's decisions: one JSON line per decision, appended, never rewritten.

A person who reviews a doubtful reading confirms it or types what the cells say; each decision
is one line added to ``decisions.jsonl`` in the scan's folder, flushed to the disk before the page
hears that it is kept, so an interrupted review (Ctrl-C, a closed laptop, a power cut) loses at
most the decision being typed. The file is never rewritten: a changed mind is a later line, and
the last line for an entry wins.

A decision names its entry by student, part and index, and says which reading it decides on
(``read``): scanning the pages again keeps every decision whose entry is still read the same, and
sets aside (with a note) one whose reading changed, which a person has not seen.

The file lies in a course folder, so it is read as hostile input: at most
:data:`MAX_JOURNAL_BYTES`, a line that is not a decision (a line torn by a power cut, say) is
skipped with a note naming its line.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..core.i18n import _
from ..core.inputs import InputError, read_bytes
from ..core.outputs import append_line

JOURNAL_NAME = "decisions.jsonl"
MAX_JOURNAL_BYTES = 50_000_000  # a decision is about 150 bytes: far more than any class's doubts
MAX_VALUE = 40  # characters of a value as decided: a number as a comb of cells spells it, or −∞
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")
_FIELDS = ("student", "part", "index", "read", "value", "at")


@dataclass(frozen=True)
class Decision:
    student: str
    part: str
    index: tuple[int, ...]
    read: str | None  # the reading decided on, as the reader gave it
    value: str | None  # what the person decided: the entry's text, or None (blank)
    at: str = ""  # when (ISO 8601, UTC)

    @property
    def entry(self) -> tuple[str, str, tuple[int, ...]]:
        return (self.student, self.part, self.index)

    def line(self) -> str:
        return json.dumps({"student": self.student, "part": self.part, "index": list(self.index), "read": self.read,
                           "value": self.value, "at": self.at}, ensure_ascii=False, separators=(",", ":"))


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def append_decision(folder: str | Path, decision: Decision) -> None:
    """Add one decision to the folder's journal and make it durable before returning (never
    through a link: the journal is this folder's own file)."""
    append_line(Path(folder) / JOURNAL_NAME, decision.line())


def _optional_text(value: object) -> bool:
    return value is None or (isinstance(value, str) and 0 < len(value) <= MAX_VALUE)


def _decision(doc: object) -> Decision | None:
    if not isinstance(doc, dict) or set(doc) != set(_FIELDS):
        return None
    student, part, index, read, value, at = (doc[name] for name in _FIELDS)
    if not (isinstance(student, str) and 0 < len(student) <= 200 and isinstance(part, str) and _PART.fullmatch(part)
            and isinstance(index, list) and len(index) <= 4
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 10_000 for i in index)
            and _optional_text(read) and _optional_text(value) and isinstance(at, str) and len(at) <= 40):
        return None
    return Decision(student, part, tuple(index), read, value, at)


def read_decisions(folder: str | Path) -> tuple[dict[tuple[str, str, tuple[int, ...]], Decision], list[str]]:
    """The folder's decisions, the last for each entry, and a note per line that is not one."""
    path = Path(folder) / JOURNAL_NAME
    if not os.path.lexists(path):
        return {}, []
    try:
        raw = read_bytes(path, MAX_JOURNAL_BYTES, "decisions journal", follow=False)
    except InputError as exc:
        return {}, [_("%(problem)s; no decision of it was used") % {"problem": f"{exc.source}: {exc.message}"}]
    decisions: dict[tuple[str, str, tuple[int, ...]], Decision] = {}
    notes = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            found = _decision(json.loads(line.decode("utf-8")))
        except (UnicodeDecodeError, ValueError, RecursionError):
            found = None
        if found is None:
            notes.append(_("%(file)s, line %(line)d: not a decision (cut short by an interrupt?); skipped")
                         % {"file": path, "line": number})
            continue
        decisions[found.entry] = found
    return decisions, notes

