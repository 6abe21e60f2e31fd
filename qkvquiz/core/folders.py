"""Folders of submissions, walked without following a link out of the folder, into a folder,
or from the command line into a folder, and with a bound on the entries visited."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .inputs import InputError, shown_path

MAX_WALK_ENTRIES = 200_000  # files and folders looked at below one folder of submissions
MAX_WALK_DEPTH = 32  # folders inside each other below one folder of submissions


@dataclass(frozen=True)
class Skipped:
    """A path met while walking a folder and left out, and why (for a note to the user)."""

    path: Path
    reason: str


def walk_json_files(top: Path, skip_names: frozenset[str] = frozenset()) -> tuple[list[Path], list[Skipped]]:
    """``*.json`` regular files below the folder ``top``, sorted, and what was left out.

    Never followed: a link to a folder (it may lead out of ``top``, or in a circle); a link
    to a file outside ``top``. A link to a file inside ``top`` is kept (the grader dedupes by
    the resolved path). Hidden files and folders and ``__MACOSX`` (unpacked archives) are
    left out silently, as are names in ``skip_names``. More than ``MAX_WALK_ENTRIES`` entries
    or folders ``MAX_WALK_DEPTH`` deep: InputError, so ``/`` named by mistake ends quickly.
    """
    root = Path(os.path.realpath(top))
    found: list[Path] = []
    skipped: list[Skipped] = []
    seen = 0
    stack: list[tuple[Path, int]] = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            skipped.append(Skipped(folder, f"cannot list the folder ({exc.strerror or exc})"))
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_WALK_ENTRIES:
                raise InputError(shown_path(top), f"holds more than {MAX_WALK_ENTRIES:,} files and folders; "
                                                  "name the folder of submissions itself")
            name = entry.name
            if name.startswith(".") or name == "__MACOSX":
                continue
            path = Path(entry.path)
            try:
                if entry.is_symlink():
                    if _is_dir_link(path):
                        skipped.append(Skipped(path, "a link to a folder; links to folders are not followed"))
                        continue
                    if not name.lower().endswith(".json") or name in skip_names:
                        continue
                    # realpath, not Path.resolve: a link loop must not raise (it fails when read).
                    target = Path(os.path.realpath(path))
                    if not target.is_relative_to(root):
                        skipped.append(Skipped(path, "a link to a file outside the folder; not followed"))
                        continue
                    found.append(path)
                elif entry.is_dir(follow_symlinks=False):
                    if depth + 1 > MAX_WALK_DEPTH:
                        raise InputError(shown_path(top), f"folders are nested more than {MAX_WALK_DEPTH} deep")
                    stack.append((path, depth + 1))
                elif name.lower().endswith(".json") and name not in skip_names:
                    found.append(path)  # a FIFO or device named *.json is refused when read
            except OSError as exc:
                skipped.append(Skipped(path, f"cannot be looked at ({exc.strerror or exc})"))
    return sorted(found), skipped


def _is_dir_link(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:
        return False
