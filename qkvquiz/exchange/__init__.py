"""Moving work between qkvquiz and an LMS (Canvas, Moodle, Blackboard, Gradescope).

A layer above ``grade/`` and the worksheet: it reads keys, results and LMS downloads, and
writes what each LMS imports. Nothing below it imports it. From a notebook::

    from qkvquiz import load_key, load_spec
    from qkvquiz.exchange import (GradeOptions, export_grades, export_questions, grade_download,
                                  load_results, read_roster_entries)

    roster = read_roster_entries("roster.csv")
    report = grade_download(load_key("week3/key.json"), ["submissions.zip"], roster)
    text, unmatched = export_grades(load_results("week3/grades"), roster, GradeOptions("canvas"))
    ws, files = export_questions(load_spec("problem_bank/masking.yaml"), 20, seed="fall26")

- :mod:`.collect`: a bulk download (zip or folder) → hand-ins matched to the roster → a report;
- :mod:`.gradebook`: results → each LMS's grade-import CSV;
- :mod:`.feedback_export`: feedback as HTML, and Moodle's feedback zip;
- :mod:`.gradescope`: an autograder bundle that grades inside Gradescope (:mod:`.autograder`, what it runs);
- :mod:`.questions`: a spec → a question bank, one module per format (:mod:`.moodle_xml`,
  :mod:`.qti21`, :mod:`.canvas_qti`) over what they share (:mod:`.question_bank`).
"""

import importlib
from typing import Any

from ..roster import Roster, RosterEntry, read_roster_entries
from .collect import Collected, Handin, collect, grade_collected, grade_download

# The rest is imported from its module when first used (PEP 562): grading a folder of files needs
# .collect only, not the question banks' XML or the Gradescope bundle's package metadata. (.collect
# is imported here: its module would otherwise hide the function ``collect`` once loaded.)
_WHERE = {
    "feedback_pages": ".feedback_export", "moodle_feedback_zip": ".feedback_export",
    "GradeOptions": ".gradebook", "export_grades": ".gradebook",
    "build_bundle": ".gradescope",
    "export_questions": ".questions",
    "Results": ".results", "load_results": ".results",
}
__all__ = [
    "Collected", "GradeOptions", "Handin", "Results", "Roster", "RosterEntry", "build_bundle", "collect",
    "export_grades", "export_questions", "feedback_pages", "grade_collected", "grade_download", "load_results",
    "moodle_feedback_zip", "read_roster_entries",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
