"""Checking a part for the whole class at once: entries within tolerance, known mistakes, broken
invariants, and work carried correctly from the student's own earlier answers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.i18n import N_, _, ngettext
from ..engine.backend import to_numpy
from ..families import Env, Family
from ..families.rounding import entry_band, explained_by_mistake, input_width, item_allowance
from ..key import KeyItem
from ..spec import Part
from ..spec_types import MASK_WEIGHT
from .columns import Column
from .results import PartResult

CARRIED_MESSAGE = N_("Right method: this follows correctly from your own earlier answers.")


@dataclass
class PartCheck:
    """A part's answers against the key, for the whole class at once."""

    ok: np.ndarray  # bool (students, entries): entry within tolerance
    right: np.ndarray  # bool (students,): readable and every entry within tolerance
    broken: list[tuple[str, str, np.ndarray]]  # (name, sentence, bool per student) per invariant
    holds: np.ndarray  # bool (students,): readable and every invariant of the step holds
    sound: np.ndarray  # bool (students,): usable as an earlier answer for carried credit
    asked: np.ndarray | None = None  # bool (entries,): the entries a part asks, when only some
    # bool (students,): wrong by the plain tolerance and what a known mistake gives: no rounding band
    explained: np.ndarray | None = None
    # bool (students,): right only within the rounding band of the unasked steps ``free``
    rounded: np.ndarray | None = None
    free: list[str] = field(default_factory=list)
    # per student: "" or what makes a wrong answer carry no information (see :func:`uninformative`)
    empty_of: np.ndarray | None = None


def check_part(item: KeyItem, part: Part, column: Column, env: Env, xp=np) -> PartCheck:
    """Entries within tolerance and invariants of every student's answer to ``part``.

    ``env`` holds the key's values on ``xp``; the verdicts come back to the host.
    """
    n = len(column.readable)
    tol = item.tolerance_for(part.step)
    values = xp.asarray(column.values)
    asked = part.asked(tuple(column.values.shape[1:]))
    flat = None if asked is None else asked.reshape(-1)
    rounding, free = key_allowance(item, part.step, env, xp)
    with np.errstate(all="ignore"):
        ok = to_numpy(tol.passes(values, env[part.step], xp=xp)).reshape(n, -1) & column.readable[:, None]
        if flat is not None:
            ok = ok | ~flat  # entries not asked never count against an answer
        explained = np.zeros(n, dtype=bool)
        if rounding is not None:
            wide = to_numpy(tol.passes(values, env[part.step], xp=xp, extra=rounding)).reshape(n, -1)
            wide = (wide & column.readable[:, None]) | (ok if flat is None else ~flat)
            # An answer a known mistake explains keeps the plain tolerance (families.rounding).
            explained = ~ok.all(axis=1) & to_numpy(explained_by_mistake(item, part.step, env, values, flat, xp))
            plain_right = column.readable & ok.all(axis=1)
            ok = np.where(explained[:, None], ok, wide)
        right = column.readable & ok.all(axis=1)
        rounded = right & ~plain_right if rounding is not None else np.zeros(n, dtype=bool)
        broken = []
        holds_all = np.ones(n, dtype=bool)
        invariants = item.family.invariants_for(part.step, item.params)
        if invariants:
            band = xp.asarray(entry_band(tol, column.values))
            # An answer with an entry without a value (an empty or unreadable box) is not sound,
            # but the properties it breaks are not named: the box, not the method, broke them.
            judged = column.readable & ~np.isnan(column.values.reshape(n, -1)).any(axis=1)
            for inv in invariants:
                holds = to_numpy(inv.holds(values, env, item.params, band, xp)).astype(bool)
                holds_all &= holds
                broken.append((inv.name, _(inv.feedback), judged & ~holds))
    holds_all &= column.readable
    named = [s for s in free if item.family.step(s).askable]  # helper steps have no name on the sheet
    empty_of = np.where(right | ~column.readable, "", uninformative(item, column.values, env, flat))
    return PartCheck(ok, right, broken, holds_all, right | holds_all, flat, explained, rounded, named, empty_of)


def key_allowance(item: KeyItem, step: str, env: Env, xp=np, inputs_rounded: bool = False) -> tuple[Any, list[str]]:
    """The allowance of an answer to ``step`` compared with the key (:mod:`qkvquiz.families.rounding`),
    and the unasked steps in between: right within tolerance of the value some rounded unasked
    intermediates give. An asked step is held to the exact value here, but for the entries it
    does not ask; the chain checks the student's own.

    ``inputs_rounded``: the asked steps feeding it may be rounded as their tolerance asks too
    (everything the key holds may be rounded). The static practice page, which cannot re-run a
    step on a student's own earlier answers, accepts this way what the grader accepts as right
    for the student's own rounded answers."""
    by_step = {p.step: p for p in item.parts}
    steps, free = carried_inputs(item.family, step, by_step)
    # No entry asked (inputs_rounded): every entry of the input is held to its rounding.
    inputs = {s: input_width(item.tolerance_for(s), env[s], np.zeros(tuple(env[s].shape[1:]), bool)
                             if inputs_rounded else by_step[s].asked(tuple(env[s].shape[1:])), xp=xp)
              for s in steps}
    return item_allowance(item, step, env, inputs, free, xp), free


def count_sentence(correct: int | str, entries: int, per_entry: bool) -> str:
    """A part's entries within tolerance, in words of the current language ("3 of 4 entries within
    tolerance", and that the part is all or nothing where it is); ``correct`` may be a placeholder
    that a page fills in (the static practice page's ``"%(correct)s"``)."""
    if per_entry:
        message = ngettext("%(correct)s of %(entries)s entry within tolerance",
                           "%(correct)s of %(entries)s entries within tolerance", entries)
    else:
        message = ngettext("%(correct)s of %(entries)s entry within tolerance (this part is all or nothing)",
                           "%(correct)s of %(entries)s entries within tolerance (this part is all or nothing)", entries)
    return message % {"correct": correct, "entries": entries}


ZEROS, CONSTANT, GIVEN = "zeros", "constant", "given"


def uninformative(item: KeyItem, values: np.ndarray, env: Env, asked: np.ndarray | None = None) -> np.ndarray:
    """Per student: why an answer carries no information of its own, or "".

    ``"zeros"``: every finite asked entry is 0 (a single one too); ``"constant"``: every one is
    one number (of at least two); ``"given"``: it is a given of the same shape copied through. −∞ entries (masked
    scores) are left out. A later step computed from such an answer may follow from it, but it
    shows no work: no carried credit flows from it (:func:`_chain`).
    """
    n = values.shape[0]
    flat = values.reshape(n, -1)
    if asked is not None:
        flat = flat[:, asked]
    finite = np.isfinite(flat)
    counted = finite.sum(axis=1)
    low = np.where(finite, flat, np.inf).min(axis=1, initial=np.inf)
    high = np.where(finite, flat, -np.inf).max(axis=1, initial=-np.inf)
    same = (counted >= 1) & (high - low <= 1e-12 * np.maximum(1.0, np.abs(high)))
    # A single number is "one constant" only when it is 0: any other carries what it says.
    out = np.where(same & (low == 0), ZEROS, np.where(same & (counted >= 2), CONSTANT, "")).astype(object)
    for name in item.family.given_names:
        given = np.asarray(to_numpy(env[name]), dtype=np.float64)
        if given.shape != values.shape:
            continue
        g = given.reshape(n, -1) if asked is None else given.reshape(n, -1)[:, asked]
        with np.errstate(invalid="ignore"):
            copied = ((flat == g) | (~np.isfinite(flat) & ~np.isfinite(g))).all(axis=1) & (counted >= 2)
        out = np.where((out == "") & copied, GIVEN, out)
    return out


def carried_inputs(family: Family, step: str, asked: Iterable[str]) -> tuple[list[str], list[str]]:
    """For error carried forward: the asked steps that feed ``step``, and the unasked steps between.

    Walks ``needs`` back from ``step``, stopping at asked steps (the student's own values are
    used there) and at givens. Both lists are in the family's step order.
    """
    asked = set(asked)
    inputs: set[str] = set()
    between: set[str] = set()
    stack = list(family.step(step).needs)
    while stack:
        name = stack.pop()
        if name in asked:
            inputs.add(name)
        elif name in family.step_names and name not in between:
            between.add(name)
            stack.extend(family.step(name).needs)
    order = family.step_names
    return [s for s in order if s in inputs], [s for s in order if s in between]


def rerun_on_own(family: Family, step: str, env: Env, own: Mapping[str, np.ndarray], between: Sequence[str], params,
                 xp=np) -> Any:
    """``step`` recomputed with the steps in ``own`` replaced, re-running ``between`` first (on ``xp``)."""
    return rerun_env(family, step, env, own, between, params, xp)[step]


def rerun_env(family: Family, step: str, env: Env, own: Mapping[str, np.ndarray], between: Sequence[str], params,
              xp=np) -> Env:
    """:func:`rerun_on_own`, keeping every step re-run: the centre of the rounding band."""
    redo = Env(env)
    redo.update({name: xp.asarray(value) for name, value in own.items()})
    with np.errstate(all="ignore"):
        for name in between:
            redo[name] = family.rerun(name, redo, params, xp)
        redo[step] = family.rerun(step, redo, params, xp)
    return redo


def grade_item(item: KeyItem, rows: np.ndarray, columns: Mapping[str, Column], xp=np,
               no_carry: np.ndarray | None = None) -> dict[str, list[PartResult]]:
    """Every part of one item for the students at ``rows`` of the key (in submission order).

    The comparisons, known mistakes and carried-forward re-runs run for the whole class on
    ``xp`` (NumPy or CuPy); only booleans come back to the host. ``no_carry`` (bool per
    student) marks submissions that earn no carried credit (answers of another variant).
    """
    if len(rows) == 0:
        return {part.id: [] for part in item.parts}
    host = Env({name: value[rows] for name, value in item.env.items()})
    env = host if xp is np else Env({name: xp.asarray(value) for name, value in host.items()})
    columns = _with_unasked_filled(item, columns, host)
    checks = {part.id: check_part(item, part, columns[part.id], env, xp) for part in item.parts}
    if no_carry is None:
        no_carry = np.zeros(len(rows), dtype=bool)
    chains = chain_checks(item, columns, checks, env, no_carry, xp)
    return {part.id: _part_results(item, part, columns, checks, chains[part.id], env, host, xp) for part in item.parts}


def _with_unasked_filled(item: KeyItem, columns: Mapping[str, Column], host: Env) -> dict[str, Column]:
    """Columns whose entries a part does not ask hold the key's values there.

    A later step re-run on a student's own partial answer then uses the right values for what
    was not asked, and invariants see whole rows; verdicts count only the asked entries.
    """
    out = dict(columns)
    for part in item.parts:
        asked = part.asked(item.shapes[part.id])
        if asked is None or part.id not in columns:
            continue
        column = columns[part.id]
        values = column.values.copy()
        values[:, ~asked] = host[part.step][:, ~asked]
        out[part.id] = Column(values, column.readable, column.problems, column.notes, column.raw)
    return out


@dataclass
class ChainCheck:
    """How each student's answer to a part relates to their own earlier answers."""

    accepted: np.ndarray  # bool (students,): right, or right for their own accepted earlier answers
    from_own: np.ndarray  # bool (students,): accepted only because it follows from accepted rounded values
    carried: np.ndarray  # bool (students,): wrong only because an earlier answer was wrong: carried credit
    inputs: list[str]  # part ids of the earlier answers it is computed from
    why_not: dict[int, str] = field(default_factory=dict)  # student position -> why no credit was carried


def chain_checks(item: KeyItem, columns: Mapping[str, Column], checks: Mapping[str, PartCheck], env: Env,
                 no_carry: np.ndarray, xp=np) -> dict[str, ChainCheck]:
    """Every part's :class:`ChainCheck`, in the family's step order.

    An earlier answer that is itself accepted (right, or right for the student's own accepted
    values: rounding at each step) makes a later answer computed from it correct, not carried;
    so parts are checked in step order and each one sees its inputs' verdicts.
    """
    order = sorted(item.parts, key=lambda p: item.family.step_names.index(p.step))
    by_step = {p.step: p.id for p in item.parts}
    chains: dict[str, ChainCheck] = {}
    for part in order:
        chains[part.id] = _chain(item, part, by_step, columns, checks, chains, env, no_carry, xp)
    return chains


def _chain(item: KeyItem, part: Part, by_step: Mapping[str, str], columns: Mapping[str, Column],
           checks: Mapping[str, PartCheck], chains: Mapping[str, ChainCheck], env: Env, no_carry: np.ndarray,
           xp=np) -> ChainCheck:
    column, check = columns[part.id], checks[part.id]
    n = len(column.readable)
    none = np.zeros(n, dtype=bool)
    steps, between = carried_inputs(item.family, part.step, by_step)
    inputs = [by_step[s] for s in steps]
    if not inputs:
        return ChainCheck(check.right.copy(), none, none.copy(), [])
    readable = column.readable & np.logical_and.reduce([columns[i].readable for i in inputs])
    redo = rerun_env(item.family, part.step, env, {s: columns[by_step[s]].values for s in steps}, between,
                     item.params, xp)
    # The student's own inputs may be off by the rounding of their last written place (the entries
    # a partial ask leaves out by their tolerance), the unasked steps in between by theirs.
    part_of = {p.id: p for p in item.parts}
    own = {s: input_width(item.tolerance_for(s), xp.asarray(columns[by_step[s]].values),
                          part_of[by_step[s]].asked(tuple(env[s].shape[1:])), env[s], xp)
           for s in steps}
    rounding = item_allowance(item, part.step, redo, own, between, xp)
    tol = item.tolerance_for(part.step)
    with np.errstate(all="ignore"):
        same = to_numpy(tol.passes(xp.asarray(column.values), redo[part.step], xp=xp, extra=rounding))
        if rounding is not None and check.explained is not None and check.explained.any():
            plain = to_numpy(tol.passes(xp.asarray(column.values), redo[part.step], xp=xp))
            same = np.where(check.explained.reshape((n,) + (1,) * (same.ndim - 1)), plain, same)
    if check.asked is not None:
        same = same.reshape(n, -1) | ~check.asked
    follows = readable & same.reshape(n, -1).all(axis=1)
    inputs_accepted = np.logical_and.reduce([chains[i].accepted for i in inputs])
    # No credit is carried from a missing or malformed earlier answer, or from one that is
    # wrong and breaks its step's invariants (weights whose rows do not sum to 1).
    inputs_sound = np.logical_and.reduce([checks[i].sound for i in inputs])
    # Zeros, one constant or a given copied through show no work: what follows from them
    # earns credit only where its entries are right on their own.
    empty = np.logical_or.reduce([_empty(checks[i], n) for i in inputs])
    from_own = follows & inputs_accepted & check.holds & ~check.right
    accepted = check.right | from_own
    carried = follows & inputs_sound & ~empty & check.holds & ~accepted & ~no_carry
    if item.credit.carried_forward <= 0:
        carried = none.copy()
    chain = ChainCheck(accepted, from_own, carried, inputs)
    if item.credit.carried_forward > 0:
        for j in np.flatnonzero(column.readable & ~accepted & ~carried).tolist():
            chain.why_not[j] = _why_not_carried(j, inputs, columns, checks, follows, check, no_carry)
    return chain


def _empty(check: PartCheck, n: int) -> np.ndarray:
    return np.zeros(n, dtype=bool) if check.empty_of is None else check.empty_of != ""


EMPTY_REASONS = {
    ZEROS: N_("no credit is carried forward from your answer to %(part)s: it is 0 in every entry, which shows "
              "no work to carry"),
    CONSTANT: N_("no credit is carried forward from your answer to %(part)s: it is one number in every entry, "
                 "which shows no work to carry"),
    GIVEN: N_("no credit is carried forward from your answer to %(part)s: it copies a given of the problem, "
              "which shows no work to carry"),
}


def _why_not_carried(j: int, inputs: Sequence[str], columns: Mapping[str, Column], checks: Mapping[str, PartCheck],
                     follows: np.ndarray, check: PartCheck, no_carry: np.ndarray) -> str:
    """Why student ``j``'s wrong answer earns no carried credit, naming the earlier part and the rule."""
    if no_carry[j]:
        return _("no credit is carried forward: the answers in this file match another student's worksheet")
    for part in inputs:
        empty_of = checks[part].empty_of
        if follows[j] and empty_of is not None and empty_of[j]:
            return _(EMPTY_REASONS[empty_of[j]]) % {"part": part}
    for part in inputs:
        if not columns[part].readable[j]:
            kind = columns[part].problems.get(j, ("missing", ""))[0]
            if kind == "missing":
                return _("no credit is carried forward: it is computed from your answer to %(part)s, "
                         "which is not answered") % {"part": part}
            return _("no credit is carried forward: it is computed from your answer to %(part)s, "
                     "which could not be read") % {"part": part}
    for part in inputs:
        if not checks[part].sound[j]:
            broken = [sentence for _name, sentence, hits in checks[part].broken if hits[j]]
            if broken:
                return _("no credit is carried forward from your answer to %(part)s: it is wrong and breaks a "
                         "property every right value has (%(rule)s)") % {"part": part, "rule": broken[0].rstrip(".。")}
            return _("no credit is carried forward from your answer to %(part)s: it is wrong and breaks a "
                     "property every right value has") % {"part": part}
    if follows[j] and not check.holds[j]:
        return _("it follows from your earlier answers, but no credit is carried forward to an answer that breaks "
                 "a property of its own step")
    return _("no credit is carried forward: it does not follow from your own answers to %(parts)s either") % {
        "parts": ", ".join(inputs)}


MASKED_SHARE = N_("the %(masked)s masked entries together carry %(percent)s%% of the part")
ROUNDED_MESSAGE = N_("Right for rounded values of the steps in between that were not asked (%(steps)s): "
                     "it is off the exact value by no more than rounding them explains. Full points.")
FROM_OWN_MESSAGE = N_("Correct for your own rounded earlier answers (%(inputs)s), which were accepted: full points.")


def _part_results(item: KeyItem, part: Part, columns: Mapping[str, Column], checks: Mapping[str, PartCheck],
                  chain: ChainCheck, env: Env, host: Env, xp=np) -> list[PartResult]:
    column, check = columns[part.id], checks[part.id]
    n = len(column.readable)
    tol = item.tolerance_for(part.step)
    pending = column.readable & ~chain.accepted  # answers that earn less than full points

    # Known mistakes: the answer matches what the mistake gives, within tolerance.
    mistakes: list[tuple[str, str, np.ndarray]] = []
    values = xp.asarray(column.values)
    for mistake in item.family.mistakes_for(part.step, item.params):
        with np.errstate(all="ignore"):
            wrong = mistake.fn(env, item.params, xp)
        if wrong.shape != column.values.shape:
            continue
        hit = to_numpy(tol.passes(values, wrong, xp=xp)).reshape(n, -1)
        if check.asked is not None:
            hit = hit | ~check.asked
        mistakes.append((mistake.name, _(mistake.feedback), pending & matches_mistake(hit, check.ok, mistake.entrywise)))

    points = part.points
    ok = check.ok if check.asked is None else check.ok[:, check.asked]  # the asked entries only
    fixed = fixed_entries(item, part, env, n, xp)
    if fixed is not None and check.asked is not None:
        fixed = fixed[:, check.asked]
    share = entry_credit(ok, fixed, item.credit.mask_weight)
    entry_score = points * share if item.credit.per_entry else np.zeros(n)
    carried_score = np.where(chain.carried, points * item.credit.carried_forward, 0.0)
    expected = encode_rows(host[part.step])
    given = encode_rows_like(column.values, host[part.step], expected)
    entry_ok = check.ok.reshape(column.values.shape).tolist()
    correct_entries = ok.sum(axis=1).tolist()
    entries = int(ok.shape[1])
    findings = [np.flatnonzero(hit).tolist() for *_about, hit in mistakes]
    broken = [np.flatnonzero(hit & pending).tolist() for *_about, hit in check.broken]

    out = []
    for j in range(n):
        r = PartResult(part.id, points, expected=expected[j], entries=entries)
        if not column.readable[j]:
            r.verdict, r.message = column.problems[j]
            if r.verdict == "format":
                r.score = points * item.credit.format_error
                r.given = column.raw.get(j)  # kept as handed in, so a regrade request can be checked
        else:
            r.given, r.entry_ok, r.correct_entries = given[j], entry_ok[j], correct_entries[j]
            r.no_work = str(check.empty_of[j]) if check.empty_of is not None else ""
            if j in column.raw:  # entries that could not be read: what was written, for a regrade request
                r.given = with_unread_texts(given[j], column.raw[j])
                r.unread_boxes = unread_boxes(column.values[j], column.raw[j])
            if chain.accepted[j]:
                r.verdict, r.score = "correct", points
                if chain.from_own[j]:
                    r.carry = _(FROM_OWN_MESSAGE) % {"inputs": ", ".join(chain.inputs)}
                elif check.rounded is not None and check.rounded[j]:
                    r.carry = _(ROUNDED_MESSAGE) % {"steps": ", ".join(check.free)}
            elif carried_score[j] > entry_score[j]:
                r.verdict, r.score, r.message = "carried", float(carried_score[j]), _(CARRIED_MESSAGE)
            else:
                r.score = float(entry_score[j])
                r.verdict = "partial" if r.score > 0 else "wrong"
                r.message = count_sentence(r.correct_entries, entries, bool(item.credit.per_entry))
                if fixed is not None and fixed[j].any() and (~fixed[j]).any() and item.credit.per_entry:
                    r.message = _("%(message)s; %(note)s") % {"message": r.message, "note": _(
                        MASKED_SHARE) % {"masked": int(fixed[j].sum()), "percent": f"{round(100 * item.credit.mask_weight, 1):g}"}}
                if chain.carried[j]:  # carried credit was less than the per-entry share
                    r.carry = _("it follows from your earlier answers, but its correct entries earn more than "
                                "carried credit")
                else:
                    r.carry = chain.why_not.get(j, "")
            if j in column.notes:
                r.message = (_("%(message)s; %(note)s") % {"message": r.message, "note": column.notes[j]}
                             if r.message else column.notes[j])
        out.append(r)
    for (name, sentence, _hit), hits in zip(mistakes, findings):
        for j in hits:
            out[j].mistakes.append(name)
            out[j].diagnosis.append(sentence)
    for (name, sentence, _hit), hits in zip(check.broken, broken):
        for j in hits:
            out[j].broken.append(name)
            out[j].invariants.append(sentence)
    return out


def matches_mistake(hit: np.ndarray, ok: np.ndarray, entrywise: bool = False) -> np.ndarray:
    """Per student: whether the answer is what a known mistake gives (``hit``: per entry, within
    tolerance of the mistake's value). A slip made entry by entry (``entrywise``: a masked score
    written as 0) is named also when only some entries have it and every other one is right."""
    if not entrywise:
        return hit.all(axis=1)
    return (hit | ok).all(axis=1) & (hit & ~ok).any(axis=1)


def fixed_entries(item: KeyItem, part: Part, env: Env, n: int, xp=np) -> np.ndarray | None:
    """bool (students, entries): the entries of ``part`` a mask fixes (its step's ``fixed``); None
    where the step has none or no variant masks any."""
    step = item.family.step(part.step)
    if step.fixed is None:
        return None
    exact = env[part.step]
    fixed = to_numpy(xp.broadcast_to(step.fixed(env, item.params, xp), exact.shape)).reshape(n, -1).astype(bool)
    return fixed if fixed.any() else None


def entry_credit(ok: np.ndarray, fixed: np.ndarray | None = None, mask_weight: float = MASK_WEIGHT) -> np.ndarray:
    """The share of a part's points each answer earns by its entries (``ok``: bool (students,
    entries), the asked entries within tolerance).

    The one rule of per-entry credit: every entry counts alike, except the entries a mask fixes
    (``fixed``: −∞ scores, 0 weights of masked keys), which together carry ``mask_weight`` of
    the part (half by default, the spec's ``credit.mask_weight``), earned when all of them are
    right; the other entries share the rest alike (:func:`mask_shares`). So the lesson of a
    masked part decides its score: masked scores written as 0 keep no more than half of it, a
    forgotten √dₖ no more than the mask's share. The static practice page (practice.js) and QTI 2.1
    banks weigh entries the same way; Moodle's cloze and Canvas as far as their formats allow
    (exchange.moodle_xml, exchange.canvas_qti).
    """
    n, entries = ok.shape
    if not entries:
        return np.ones(n)
    if fixed is None:
        return ok.mean(axis=1)
    shares = np.array([mask_shares(int(m), int(f), float(mask_weight))
                       for m, f in zip(fixed.sum(axis=1), (~fixed).sum(axis=1))]).reshape(n, 2)
    return (ok & ~fixed).sum(axis=1) * shares[:, 1] + (ok | ~fixed).all(axis=1) * shares[:, 0]


def mask_shares(masked: int, free: int, mask_weight: Any = MASK_WEIGHT) -> tuple[Any, Any]:
    """(the share of a part its ``masked`` fixed entries carry together, the share of each of its
    ``free`` other entries): ``mask_weight`` and (1 − it) / free; all of it when no entry is free,
    every entry alike when none is masked. In the weight's own arithmetic: a Fraction gives
    Fractions (the LMS question banks' whole weights), a float floats."""
    zero, one = mask_weight * 0, mask_weight * 0 + 1
    if not masked:
        return zero, (one / free if free else zero)
    block = mask_weight if free else one
    return block, ((one - block) / free if free else zero)


def unread_boxes(values: np.ndarray, handed_in: Any) -> int:
    """How many boxes of a readable answer held something that could not be read: an entry
    without a value (NaN) where the answer as handed in has text (an empty box has none)."""
    handed = np.asarray(handed_in, dtype=object) if isinstance(handed_in, list) else None
    if handed is None or handed.shape != values.shape:
        return int(np.isnan(values).any())
    written = np.vectorize(lambda x: x is not None and not (isinstance(x, str) and not x.strip()), otypes=[bool])(handed)
    return int((np.isnan(values) & written).sum())


def with_unread_texts(given: Any, handed_in: Any) -> Any:
    """``given`` (an answer as read, ``None`` at each entry without a value) with the text
    handed in at each entry that held something unreadable ("0、21"); empty boxes stay ``None``."""
    if isinstance(given, list) and isinstance(handed_in, list) and len(given) == len(handed_in):
        return [with_unread_texts(g, h) for g, h in zip(given, handed_in)]
    if given is None and handed_in is not None and not isinstance(handed_in, list):
        return handed_in if isinstance(handed_in, str) else str(handed_in)
    return given


def encode_rows_like(values: np.ndarray, like: np.ndarray, encoded_like: list[Any]) -> list[Any]:
    """``encode_rows(values)``, where each row that is bit for bit the row of ``like`` is the very
    object of ``encoded_like`` (``encode_rows(like)``): an answer equal to the exact one is then
    written once by results.json, which encodes a part's "given" that *is* its "expected" once."""
    if values.shape != like.shape or values.dtype != np.float64 or like.dtype != np.float64 or not len(values):
        return encode_rows(values)
    n = len(values)
    bits = np.ascontiguousarray(values).reshape(n, -1).view(np.int64)
    same = (bits == np.ascontiguousarray(like).reshape(n, -1).view(np.int64)).all(axis=1)
    out = list(encoded_like)
    differ = np.flatnonzero(~same)
    if len(differ):
        for j, row in zip(differ.tolist(), encode_rows(values[differ])):
            out[j] = row
    return out


def encode_rows(values: np.ndarray) -> list[Any]:
    """:func:`qkvquiz.key.encode` of each row of a batch, in a few array calls.

    Whole numbers become ints, ±∞ the texts "inf" and "-inf", other entries floats.
    """
    out = values.astype(object)
    finite = np.isfinite(values)
    whole = finite & (values == np.round(values)) & (np.abs(values) < 2**53)
    out[whole] = values[whole].astype(np.int64).astype(object)
    out[values == np.inf] = "inf"
    out[values == -np.inf] = "-inf"
    out[np.isnan(values)] = None  # an empty box
    return out.tolist()
