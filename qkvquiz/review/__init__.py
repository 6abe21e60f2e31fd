"""The review of a scan: a local page where a person settles the readings the scanner doubts.

``qkvquiz scan review DIR`` serves it (:func:`qkvquiz.review.server.serve`); the decisions go to
the scan folder's journal (:mod:`qkvquiz.scan.journal`) and grading runs again on them
(:func:`qkvquiz.grade.scanned.regrade`). Above ``practice``: the page is served by the practice
server's own pieces, with their safety rules.
"""
