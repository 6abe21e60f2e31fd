"""Moving work between qkvquiz and an LMS (Canvas, Moodle, Blackboard, Gradescope).

A layer above ``grade/`` and the worksheet: it reads keys, results and LMS downloads, and
writes what each LMS imports. Nothing below it imports it.

- :mod:`.collect`: a bulk download (zip or folder) → hand-ins matched to the roster → a report;
- :mod:`.gradebook`: results → each LMS's grade-import CSV;
- :mod:`.feedback_export`: feedback as HTML, and Moodle's feedback zip;
- :mod:`.gradescope`: an autograder bundle that grades inside Gradescope;
- :mod:`.questions`: a spec → a question bank (Moodle XML, QTI 2.1).
"""

from .collect import Collected, Handin, collect, grade_collected, grade_download

__all__ = ["Collected", "Handin", "collect", "grade_collected", "grade_download"]
