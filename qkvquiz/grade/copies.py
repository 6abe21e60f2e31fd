"""Copied work: answers that match another student's variant rather than the student's own.

Every submission's answers are compared, entry by entry within each part's tolerance, with
the exact values of every student's variant in the key. Entries that are the same in every
variant (a masked −∞, a 0 forced by the mask, a fixed given's step) say nothing about whose
variant a value belongs to and are left out.

A submission is flagged as a copy of classmate X when, of its answered entries that tell
variants apart, at least ``COPY_SHARE`` match X's variant and more match X's than its own,
with at least ``COPY_MIN_ENTRIES`` such entries (so that a short coincidence is not flagged).
A flagged submission earns no carried credit.

The count is not made for every pair of submission and variant (students² × entries): only
a submission with an answer off its own variant can be flagged, and a variant it could be
flagged against must match a share of its answers, so it matches at least one of the
answers that the fewest variants match (pigeonhole). Those few candidates are found in a
sorted index of each entry's exact values (an answer passes only for exact values within
its band, so the candidates lie in a window of the sorted values) and then counted with the
very rule of grading, :meth:`Tolerance.passes`, so the flags are exactly those of the
pair-by-pair count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..core.i18n import N_, _
from ..core.tolerance import SLACK
from ..key import Key
from .columns import Column

COPY_SHARE = 0.5  # share of the answered, telling entries that must match the other variant
COPY_MIN_ENTRIES = 4  # fewer telling entries answered: never flagged
PROBE_MATCHES = 3  # windows a candidate must lie in (fewer where a suspect answered fewer)
BLOCK_ELEMENTS = 1 << 22  # comparisons per array call: bounds memory for a large class
# A note on the file, which the student reads in their feedback and the instructor in the grade
# command's output: so it speaks of "this student", as every note on a file does, never "you".
# The classmate is named to the instructor only (the flag).
COPY_NOTE = N_("most answers match another student's worksheet rather than this student's own; they were "
               "graded against this student's own variant and no credit was carried forward")


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
    # on more entries than its own (a match with X beyond the own ones must be such an entry).
    suspects = np.flatnonzero((answered >= COPY_MIN_ENTRIES) & (own < answered))
    if not len(suspects):
        return {}
    # The fewest matches that flag: COPY_SHARE of the answered entries, and more than the own.
    need = np.maximum(np.ceil(COPY_SHARE * answered[suspects]).astype(np.int64), own[suspects] + 1)
    pairs = _candidate_pairs(telling_parts, suspects, answered[suspects] - need, answered[suspects], variants)
    who, other = pairs // variants, pairs % variants  # who: position in suspects
    keep = other != rows[suspects[who]]  # the student's own variant is not another's
    who, other = who[keep], other[keep]
    matched = np.zeros(len(who), dtype=np.int64)
    for exact, values, given, tol in telling_parts:
        block = max(1, BLOCK_ELEMENTS // max(1, exact.shape[1]))
        with np.errstate(all="ignore"):
            for lo in range(0, len(who), block):
                j, v = suspects[who[lo:lo + block]], other[lo:lo + block]
                matched[lo:lo + block] += (tol.passes(values[j], exact[v]) & given[j]).sum(axis=1)
    # Per suspect, the variant matched most (the first in key order among equals), if it flags.
    order = np.lexsort((other, -matched, who))
    first = order[np.r_[True, who[order][1:] != who[order][:-1]]] if len(order) else order
    flagged = first[matched[first] >= need[who[first]]]
    out = {}
    for k in flagged.tolist():
        j = int(suspects[who[k]])
        out[j] = CopyMatch(key.students[int(other[k])], int(matched[k]), int(own[j]), int(answered[j]))
    return dict(sorted(out.items()))


def _candidate_pairs(telling_parts, suspects: np.ndarray, misses: np.ndarray, answered: np.ndarray,
                     variants: int) -> np.ndarray:
    """Every (suspect, variant) that could match a suspect on enough entries, as
    ``position in suspects * variants + variant``, sorted, each once (a superset: counted after).

    A variant that flags suspect ``s`` misses at most ``misses[s]`` (answered less the matches
    needed) of its answered entries, so of any ``misses[s] + k`` of them it matches at least
    ``k``. The entries taken are the answers with the fewest candidates in the index (common
    values, a 0 or a small whole number shared by many variants, are passed over when rarer ones
    exist), ``k`` = PROBE_MATCHES where the suspect answered enough, and a variant is a candidate
    when it lies in the windows of at least ``k`` of them.
    """
    indexes = []  # per telling entry: its EntryIndex, the suspects' answers, which are given
    for exact, values, given, tol in telling_parts:
        for t in range(exact.shape[1]):
            indexes.append((_EntryIndex(exact[:, t], tol), values[suspects, t], given[suspects, t]))
    sizes = np.full((len(suspects), len(indexes)), np.iinfo(np.int64).max, dtype=np.int64)
    windows = []
    for c, (index, g, given) in enumerate(indexes):
        found = index.windows(g)
        windows.append(found)
        sizes[:, c] = np.where(given, sum(hi - lo for _place, lo, hi in found), sizes[:, c])
    k = np.minimum(PROBE_MATCHES, answered - misses)  # at least 1: a suspect needs a match
    rank = np.argsort(np.argsort(sizes, axis=1, kind="stable"), axis=1, kind="stable")
    chosen = rank < (misses + k)[:, None]  # the entries of each suspect with the fewest candidates
    found_pairs = []
    for c, (index, _g, _given) in enumerate(indexes):
        picked = np.flatnonzero(chosen[:, c])
        for ids, lo, hi in windows[c]:
            lo, hi = lo[picked], hi[picked]
            counts = hi - lo
            total = int(counts.sum())
            if total == 0:
                continue
            who = np.repeat(picked, counts)
            # The concatenated ranges lo[i] .. hi[i]: one arange, shifted per range.
            starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
            found_pairs.append(who * variants + ids[starts + np.arange(total)])
    if not found_pairs:
        return np.zeros(0, dtype=np.int64)
    pairs, hits = np.unique(np.concatenate(found_pairs), return_counts=True)
    return pairs[hits >= k[pairs // variants]]


class _EntryIndex:
    """One entry's exact values of every variant, sorted, in groups of similar band.

    An answer ``g`` passes for exact value ``x`` only when ``|g − x|`` is within ``x``'s band
    plus slack (``r``; 0 for ±∞, which only ±∞ itself passes). Variants are grouped by the
    power of two above ``r`` (one group for a fixed band; a few for relative ones), and a
    group whose ``r`` are all below ``2^e`` is searched in the window ``g ± 2^(e+1)``: a
    window at least twice as wide as any band in it, so rounding in the subtraction can never
    leave out a value that passes.
    """

    def __init__(self, exact: np.ndarray, tol) -> None:
        x = np.asarray(exact, dtype=np.float64)
        finite = np.isfinite(x)
        x0 = np.where(finite, x, 0.0)
        band = tol.band(x)
        reach = np.where(finite, band + SLACK * np.maximum(np.abs(x0), band), 0.0)
        power = np.frexp(reach)[1]  # reach < 2**power (power 0 for reach 0)
        power = np.where(reach > 0, power, np.iinfo(np.int32).min)
        self.groups = []
        for p in np.unique(power).tolist():
            members = np.flatnonzero(power == p)
            order = np.argsort(x[members], kind="stable")
            width = 0.0 if p == np.iinfo(np.int32).min else math.ldexp(1.0, p + 1)
            self.groups.append((members[order], x[members][order], width))

    def windows(self, g: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per group: its variant ids in sorted order, and per answer the range of them to check."""
        out = []
        with np.errstate(all="ignore"):
            for ids, xs, width in self.groups:
                lo = np.searchsorted(xs, g - width, side="left")
                hi = np.searchsorted(xs, g + width, side="right")
                out.append((ids, lo, np.maximum(hi, lo)))
        return out
