"""A student's practice record, kept on their own machine and nowhere else.

One small JSON file in the user's data folder (``$XDG_DATA_HOME/qkvquiz/practice.json``, else
``~/.local/share/qkvquiz``; ``%LOCALAPPDATA%`` on Windows, ``~/Library/Application Support``
on macOS): per family, how many checks, how many parts were right of how many, and how often
each known mistake was seen. Nothing is sent anywhere. The file is read through the same door
as every other input (:func:`qkvquiz.core.inputs.read_bytes`: a regular file only, never a FIFO
that would hang the start or a device that never ends, and at most :data:`MAX_PROGRESS_BYTES`).
A file that cannot be read (edited by hand, cut short, not a regular file) is set aside and a new
record started, never a crash.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.i18n import _
from ..core.inputs import InputError, decode_text, read_bytes, shown_path
from ..core.outputs import OutputError, write_file
from ..families import REGISTRY

PROGRESS_FILE = "practice.json"
PROGRESS_FORMAT = "qkvquiz-practice-progress"
MAX_PROGRESS_BYTES = 1_000_000  # a record far larger than years of practice is not ours


def data_dir() -> Path:
    """The user's data folder for qkvquiz (not the config folder: the instructor's secret lives there)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "qkvquiz"


def default_path() -> Path:
    return data_dir() / PROGRESS_FILE


class Progress:
    """The record of one student; safe to use from the server's threads."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.Lock()
        # Where an unreadable record was moved to (None: none was), for the command to say so.
        self.set_aside: Path | None = None
        self.families: dict[str, dict[str, Any]] = self._load()

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            raw = read_bytes(self.path, MAX_PROGRESS_BYTES, "progress")
            doc = json.loads(decode_text(raw, shown_path(self.path), "progress"))
            if not isinstance(doc, dict) or doc.get("format") != PROGRESS_FORMAT:
                raise ValueError("not a progress file")
            families = {}
            for name, row in dict(doc.get("families", {})).items():
                if name in REGISTRY and isinstance(row, dict):
                    families[name] = {
                        **({"title": row["title"][:200]} if isinstance(row.get("title"), str) else {}),
                        "checks": _count(row.get("checks")), "parts": _count(row.get("parts")),
                        "right": _count(row.get("right")),
                        "mistakes": {str(k): _count(v) for k, v in dict(row.get("mistakes", {})).items()},
                    }
            return families
        except InputError:
            if not os.path.lexists(self.path):
                return {}  # no record yet
            return self._set_aside()
        except (OSError, ValueError, TypeError, AttributeError, RecursionError):
            return self._set_aside()

    def _set_aside(self) -> dict[str, dict[str, Any]]:
        """A new, empty record; the unreadable file is kept beside, under another name, for
        whoever wants to look (a link is renamed, never what it points to)."""
        aside = self.path.with_name(self.path.name + ".unreadable")
        try:
            self.path.replace(aside)
            self.set_aside = aside
        except OSError:
            pass
        return {}

    def record(self, family: str, right: int, parts: int, mistakes: Iterable[str], title: str = "") -> None:
        """One check of a problem of ``family``: ``right`` of ``parts`` parts right, ``mistakes`` seen;
        ``title``: the topic as the page's picker names it (the table names the family so)."""
        with self._lock:
            row = self.families.setdefault(family, {"checks": 0, "parts": 0, "right": 0, "mistakes": {}})
            if title:
                row["title"] = title
            row["checks"] += 1
            row["parts"] += int(parts)
            row["right"] += int(right)
            for name in mistakes:
                row["mistakes"][name] = row["mistakes"].get(name, 0) + 1
            self._save()

    def _save(self) -> None:
        doc = {"format": PROGRESS_FORMAT, "version": 1, "families": self.families}
        try:
            write_file(self.path, json.dumps(doc, indent=1, sort_keys=True), private=True)
        except OutputError:
            pass  # a read-only home: the record lives on for this session, in memory

    def rows(self) -> list[dict[str, Any]]:
        """The table the page shows, in the current language: per family, its title (as the picker
        named the topic last checked, else the family's), checks,
        parts right of parts checked, and the mistakes seen (their sentences, most seen first)."""
        with self._lock:
            return [progress_row(name, row) for name, row in sorted(self.families.items())]


def progress_row(family: str, row: dict[str, Any]) -> dict[str, Any]:
    fam = REGISTRY[family]
    sentences = {m.name: m.feedback for m in fam.misconceptions}
    seen = sorted(row["mistakes"].items(), key=lambda kv: (-kv[1], kv[0]))
    return {
        "family": family, "title": row.get("title") or _(fam.title), "checks": row["checks"], "parts": row["parts"],
        "right": row["right"],
        "mistakes": [{"name": name, "text": _(sentences[name]) if name in sentences else name, "count": n}
                     for name, n in seen],
    }


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("a count is a whole number ≥ 0")
    return value
