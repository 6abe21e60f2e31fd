"""A spec as a question bank: N pre-solved variants of every item, for an LMS's own quizzes,
in three formats, one module each: Moodle XML (:mod:`.moodle_xml`), QTI 2.1 (:mod:`.qti21`) and
Canvas's QTI 1.2 (:mod:`.canvas_qti`); what they share (the variants, each part's boxes, values,
bands and weights, the problem text, XML and zip writing) is :mod:`.question_bank`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.i18n import entered
from ..spec import WorksheetSpec
from ..worksheet import Worksheet
from .canvas_qti import canvas_package
from .moodle_xml import moodle_xml
from .qti21 import qti_package
from .question_bank import build_bank

FORMATS = ("moodle", "qti", "canvas")


def export_questions(spec: WorksheetSpec, variants: int, seed: str | int = 0, formats: Sequence[str] = FORMATS,
                     *, secret: bytes | None = None, lang: str | None = None) -> tuple[Worksheet, dict[str, bytes | str]]:
    """The bank's files by name (``questions-moodle.xml``, ``questions-qti21.zip``,
    ``questions-canvas-qti.zip``) and the solved variants, in ``lang`` (default: the language
    chosen around the call, else the spec's): its built-in words and the spec's own text."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"unknown question format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    with entered(lang, spec.lang) as chosen:
        ws = build_bank(spec.in_language(chosen), variants, seed, secret=secret)
        files: dict[str, bytes | str] = {}
        if "moodle" in formats:
            files["questions-moodle.xml"] = moodle_xml(ws)
        if "qti" in formats:
            files["questions-qti21.zip"] = qti_package(ws)
        if "canvas" in formats:
            files["questions-canvas-qti.zip"] = canvas_package(ws)
    return ws, files
