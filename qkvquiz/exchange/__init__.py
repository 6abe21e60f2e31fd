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
- :mod:`.gradescope`: an autograder bundle that grades inside Gradescope;
- :mod:`.questions`: a spec → a question bank (Moodle XML, QTI 2.1, Canvas QTI).
"""

from ..roster import Roster, RosterEntry, read_roster_entries
from .collect import Collected, Handin, collect, grade_collected, grade_download
from .feedback_export import feedback_pages, moodle_feedback_zip
from .gradebook import GradeOptions, export_grades
from .gradescope import build_bundle
from .questions import export_questions
from .results import Results, load_results

__all__ = [
    "Collected", "GradeOptions", "Handin", "Results", "Roster", "RosterEntry", "build_bundle", "collect",
    "export_grades", "export_questions", "feedback_pages", "grade_collected", "grade_download", "load_results",
    "moodle_feedback_zip", "read_roster_entries",
]
