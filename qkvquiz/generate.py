"""The main job: a worksheet set for a class, written to a folder.

Layout of the output folder::

    key.json                      every student's givens, steps and answers (instructor only)
    key.md                        the answer key with worked solutions (instructor only)
    students/<name>/worksheet.md  the student's worksheet
    students/<name>/submission.json  a blank submission to fill in
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .files import safe_name, write_atomic
from .key import dumps, key_to_json
from .render.markdown import key_markdown, worksheet_markdown
from .spec import WorksheetSpec
from .worksheet import Worksheet, build_worksheet

FORMATS = ("md",)


@dataclass(frozen=True)
class GeneratedSet:
    worksheet: Worksheet
    out: Path
    folders: dict[str, Path]  # student id -> their folder

    @property
    def key_path(self) -> Path:
        return self.out / "key.json"


def blank_submission(ws: Worksheet, student: int) -> dict:
    """The submission a student fills in: every asked part, entries null."""
    answers = {}
    for item, env in zip(ws.spec.items, ws.envs):
        for part in item.parts:
            shape = env[part.step].shape[1:]
            answers[part.id] = np.full(shape, None, dtype=object).tolist() if shape else None
    return {"student": ws.students[student], "variant": ws.codes[student], "answers": answers}


def generate_set(
    spec: WorksheetSpec,
    students: Sequence[str],
    out: str | Path,
    *,
    seed: str | int = 0,
    secret: bytes | None = None,
    force: bool = False,
    xp=np,
    progress: Callable[[], None] | None = None,
    templates: str | Path | None = None,
) -> GeneratedSet:
    """Solve every student's variant (batched) and write worksheets, blank submissions and keys.

    ``secret`` keys every variant with HMAC-SHA256 (see :mod:`qkvquiz.secret`); ``templates``
    is a folder of templates that replace bundled ones of the same name (rendered sandboxed).
    Every file is written atomically, and key.json last: a run that stops early leaves no key.
    """
    out = Path(out)
    key_path = out / "key.json"
    if key_path.exists() and not force:
        raise FileExistsError(f"{key_path} exists; choose another folder or pass force=True (--force)")
    ws = build_worksheet(spec, students, seed, secret=secret, xp=xp)
    taken: set[str] = set()
    folders = {}
    for i, student in enumerate(ws.students):
        folder = out / "students" / safe_name(student, taken)
        folders[student] = folder
        write_atomic(folder / "worksheet.md", worksheet_markdown(ws, i, templates=templates))
        write_atomic(folder / "submission.json", dumps(blank_submission(ws, i)))
        if progress is not None:
            progress()
    write_atomic(out / "key.md", key_markdown(ws, templates=templates))
    write_atomic(key_path, dumps(key_to_json(ws)))
    return GeneratedSet(ws, out, folders)

