"""Practice mode: a student alone draws a fresh problem, checks answers with the grader, reads the
diagnosis and the worked steps, in Chinese or English, on their own machine.

From a notebook::

    from qkvquiz import practice

    topic = practice.topics_for(["attention.output"])[0]
    problem = practice.new_problem(topic)            # a fresh public seed; new_problem(topic, "7f3a") again
    result = practice.check(problem, {"q1.scores": [["1/2", "0", "-1/2"], ...]})
    result.parts[0].verdict, result.parts[0].diagnosis
    html = practice.worked_html(problem)

``qkvquiz practice`` serves the page (:mod:`.server`); ``qkvquiz practice --static N`` writes
a site that checks in the browser (:mod:`.static`). Progress is kept by :mod:`.progress`.
"""

from __future__ import annotations

from .checking import CheckResult, PartFeedback, check
from .pages import ANSWERS_NOTICE, page_html, problem_html, worked_html
from .problem import Problem, new_problem, new_seed
from .progress import Progress, data_dir
from .static import build_static
from .topics import Topic, TopicError, topics_for

__all__ = ["ANSWERS_NOTICE", "CheckResult", "PartFeedback", "Problem", "Progress", "Topic", "TopicError", "build_static", "check",
           "data_dir", "new_problem", "new_seed", "page_html", "problem_html", "topics_for", "worked_html"]
