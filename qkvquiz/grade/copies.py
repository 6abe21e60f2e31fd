"""Copied work: answers that match another student's variant rather than the student's own.

Every submission's answers are compared, entry by entry within each part's tolerance, with
the exact values of every student's variant in the key (batched: one array call per part and
block of students, so a class of a few thousand costs students² × entries comparisons in
NumPy). Entries that are the same in every variant (a masked −∞, a 0 forced by the mask, a
fixed given's step) say nothing about whose variant a value belongs to and are left out.

A submission is flagged as a copy of classmate X when, of its answered entries that tell
variants apart, at least ``COPY_SHARE`` match X's variant and more match X's than its own,
with at least ``COPY_MIN_ENTRIES`` such entries (so that a short coincidence is not flagged).
A flagged submission earns no carried credit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..i18n import N_, _
from ..key import Key
from .grader import Column

COPY_SHARE = 0.5  # share of the answered, telling entries that must match the other variant
COPY_MIN_ENTRIES = 4  # fewer telling entries answered: never flagged
BLOCK_ELEMENTS = 1 << 22  # comparisons per array call: bounds memory for a large class
# What the student reads in their feedback: the classmate is named to the instructor only.
COPY_NOTE = N_("most answers match another student's worksheet rather than yours; they were graded against "
               "your own variant and no credit was carried forward")


@dataclass(frozen=True)
class CopyMatch:
    """A submission whose answers match another student's variant."""

    other: str  # whose variant they match
    matched: int  # telling entries that match the other student's variant
    own: int  # telling entries that match the student's own variant
    answered: int  # telling entries answered

    def flag(self) -> str:
        return _("copy of %(other)s: %(matched)s of %(answered)s answered entries match their variant, "
                 "%(own)s this student's") % {"other": self.other, "matched": self.matched,
                                              "answered": self.answered, "own": self.own}


def detect_copies(key: Key, rows: np.ndarray, columns: Mapping[str, Column]) -> dict[int, CopyMatch]:
    """Submission position -> :class:`CopyMatch` for every submission flagged as another variant's.

    ``rows`` are the key rows of the submissions, ``columns`` their answers read per part
    (:func:`qkvquiz.grade.grader.read_columns`).
    """
    n, variants = len(rows), len(key.students)
    if n == 0 or variants < 2:
        return {}
    own = np.zeros(n, dtype=np.int64)
    answered = np.zeros(n, dtype=np.int64)
    telling_parts = []
    for item, part in key.parts:
        column = columns[part.id]
        exact = item.env[part.step].reshape(variants, -1)
        telling = ~(exact == exact[:1]).all(axis=0)  # −∞ == −∞, so masked entries drop out too
        if not telling.any():
            continue
        exact = exact[:, telling]
        values = column.values.reshape(n, -1)[:, telling]
        given = column.readable[:, None] & ~np.isnan(values)  # an empty box is not an answer
        tol = item.tolerance_for(part.step)
        answered += given.sum(axis=1)
        with np.errstate(all="ignore"):
            own += (tol.passes(values, exact[rows]) & given).sum(axis=1)
        telling_parts.append((exact, values, given, tol))
    # Only a submission with an answered entry off its own variant can match another variant
    # on more entries than its own (a match with X beyond the own ones must be such an entry),
    # so the students² comparison runs for those only: exactly the same flags, far less work
    # for a class where most answers are right.
    suspects = np.flatnonzero((answered >= COPY_MIN_ENTRIES) & (own < answered))
    other = np.zeros((n, variants), dtype=np.int64)
    for exact, values, given, tol in telling_parts:
        values, given = values[suspects], given[suspects]
        block = max(1, BLOCK_ELEMENTS // max(1, exact.size))
        with np.errstate(all="ignore"):
            for lo in range(0, len(suspects), block):
                hi = min(len(suspects), lo + block)
                hits = tol.passes(values[lo:hi, None, :], exact[None, :, :]) & given[lo:hi, None, :]
                other[suspects[lo:hi]] += hits.sum(axis=2)
    other[np.arange(n), rows] = -1  # the student's own variant is not another's
    best = other.argmax(axis=1)
    matched = other[np.arange(n), best]
    flagged = (answered >= COPY_MIN_ENTRIES) & (matched >= COPY_SHARE * answered) & (matched > own)
    return {int(j): CopyMatch(key.students[int(best[j])], int(matched[j]), int(own[j]), int(answered[j]))
            for j in np.flatnonzero(flagged)}



