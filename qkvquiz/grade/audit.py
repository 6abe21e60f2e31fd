"""Auditing a hand-written key: which claimed answers are wrong, the right values, and why.

An audit file is a worksheet spec whose items fix every given and add ``claimed``: the
answers the instructor believes right, step by step, in the submission format::

    items:
      - family: attention.scores
        params: {tokens: 2, d_k: 4}
        givens: {Q: [[1, 0, 1, 0], [0, 2, 0, 1]], K: [[1, 1, 0, 0], [0, 1, 1, 1]]}
        claimed:
          scores: [[1, 1], [2, 3]]

Each claimed step (any step of the family, asked or not) is solved exactly and compared
within the tolerance that step is graded with. A wrong claim gets the right value, the
entries that differ, the known mistake it matches, the invariants it breaks, and, when it
follows correctly from an earlier claimed step that is itself wrong, that earlier step.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import DEFAULT_LANG, _, current, entered, ngettext
from ..core.inputs import shown_path
from ..core.ragged import fill_absent
from ..core.untrusted import terminal_text
from ..families import Env
from ..families.rounding import entry_band, explained_by_mistake, input_width, item_allowance
from ..key import encode
from ..spec import ItemSpec, SpecError, WorksheetSpec, parse_spec, read_spec_data
from ..worksheet import solve_item
from .checks import carried_inputs, rerun_env
from .feedback import entry_name, number_text, table
from .parse import AnswerFormatError, parse_answer, parse_shape_text

CLAIMED = "claimed"
NOT_CLAIMED = "not_claimed"  # a step written with null (or null in every entry): not claimed


@dataclass
class ClaimCheck:
    """One claimed answer, checked."""

    item: str
    family: str
    step: str
    verdict: str  # right | wrong | format
    tolerance: str  # what passes, in words
    expected: Any  # the right value (JSON form)
    claimed: Any = None  # the claim as read (JSON form); None when it could not be read
    message: str = ""
    wrong_entries: list[tuple[str, str, str]] = field(default_factory=list)  # (where, claimed, right) as text
    diagnosis: list[str] = field(default_factory=list)
    mistakes: list[str] = field(default_factory=list)
    invariants: list[str] = field(default_factory=list)
    follows_from: list[str] = field(default_factory=list)  # wrong earlier claims this one follows from
    follows_own: list[str] = field(default_factory=list)  # right (rounded) earlier claims it is right for
    right_table: list[str] = field(default_factory=list)  # Markdown table of the right value, wrong entries bold

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item, "family": self.family, "step": self.step, "verdict": self.verdict,
            "tolerance": self.tolerance, "expected": self.expected, "claimed": self.claimed,
            "message": self.message, "diagnosis": self.diagnosis, "mistakes": self.mistakes,
            "invariants": self.invariants, "follows_from": self.follows_from, "follows_own": self.follows_own,
        }


@dataclass
class AuditReport:
    source: str
    title: str
    checks: list[ClaimCheck]
    unchecked: list[str]  # items with nothing claimed
    lang: str = DEFAULT_LANG  # the language of its sentences (and of its Markdown)
    # Steps written in ``claimed`` with nothing claimed (``null``, or null in every entry), as
    # "item.step": a teacher marks what the sheet does not answer; neither checked nor wrong.
    not_claimed: list[str] = field(default_factory=list)

    @property
    def wrong(self) -> list[ClaimCheck]:
        return [c for c in self.checks if c.verdict != "right"]

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "title": self.title, "checks": [c.to_json() for c in self.checks],
                "unchecked": self.unchecked, "not_claimed": self.not_claimed}


def audit_file(path: str | Path, *, lang: str | None = None) -> AuditReport:
    """Audit a YAML file; raises :class:`SpecError` naming the file, item and field when unusable.

    Read like a spec (:func:`qkvquiz.spec.read_spec_data`): size, file kind, encoding, depth,
    aliases and duplicate keys are checked, each error naming the file and the line.
    """
    return audit_spec(read_spec_data(path, "audit"), source=shown_path(path), lang=lang)


def audit_spec(data: Any, source: str = "<audit>", *, lang: str | None = None) -> AuditReport:
    """Audit a spec with claimed answers already read into Python objects; its sentences are in
    ``lang`` (default: the one chosen around the call, else the file's ``lang:``, else English)."""
    stripped = copy.deepcopy(data)
    claims: list[Any] = []
    if isinstance(stripped, Mapping) and isinstance(stripped.get("items"), list):
        for raw in stripped["items"]:
            claims.append(raw.pop(CLAIMED, None) if isinstance(raw, dict) else None)
    spec = parse_spec(stripped, source=source)
    with entered(lang, spec.lang) as chosen:
        return _audit(spec.in_language(chosen), claims, source)  # its title in that language too


def _audit(spec: WorksheetSpec, claims: list[Any], source: str) -> AuditReport:
    checks: list[ClaimCheck] = []
    unchecked: list[str] = []
    not_claimed: list[str] = []
    for index, (item, claimed) in enumerate(zip(spec.items, claims), start=1):
        where = f"item {index} ({item.id}, {item.family.name})"
        if claimed is None:
            unchecked.append(item.id)
            continue
        found = _audit_item(item, claimed, source, where)
        checks.extend(c for c in found if c.verdict != NOT_CLAIMED)
        not_claimed.extend(f"{c.item}.{c.step}" for c in found if c.verdict == NOT_CLAIMED)
    if not checks:
        what = "every claimed step is null" if not_claimed else f"no item has {CLAIMED!r} answers"
        raise SpecError(source, "", f"{what}, so there is nothing to check; "
                                    f"add `{CLAIMED}: {{step: answer}}` to the items to audit")
    return AuditReport(source, spec.title, checks, unchecked, current(), not_claimed)


def _audit_item(item: ItemSpec, claimed: Any, source: str, where: str) -> list[ClaimCheck]:
    family = item.family
    if not isinstance(claimed, Mapping) or not claimed:
        raise SpecError(source, f"{where} field {CLAIMED!r}", "must be a mapping of step: the answer you believe right")
    for step in claimed:
        if step not in family.step_names:
            raise SpecError(source, f"{where} field '{CLAIMED}.{step}'",
                            f"unknown step; {family.name} has: {', '.join(family.step_names)}")
    env = _solve_stated(item, [s for s in family.step_names if s in claimed], source, where)
    asked = {p.step: p for p in item.parts if p.entries is not None}

    # Read every claim first: a later claim may follow from an earlier one.
    read: dict[str, np.ndarray] = {}
    partial: dict[str, np.ndarray] = {}  # step -> bool, the entries claimed
    checks: dict[str, ClaimCheck] = {}
    for step in family.step_names:
        if step not in claimed:
            continue
        tol = item.tolerance_for(step)
        exact = env[step]
        check = ClaimCheck(item.id, family.name, step, "right", tol.describe(), encode(exact[0]))
        checks[step] = check
        raw_claim = claimed[step]
        if _all_null(raw_claim):  # `weights: null` or `[[null, null]]`: what the sheet does not answer
            check.verdict = NOT_CLAIMED
            continue
        try:
            if family.step(step).kind == "shape" and isinstance(raw_claim, str) and exact.ndim == 2:
                raw_claim = parse_shape_text(raw_claim, exact.shape[1])  # "2×4" for a shape
            if step in asked:  # a shorter last chunk is written at its length: the rest is not claimed
                raw_claim = fill_absent(raw_claim, exact.shape[1:], ~asked[step].asked(exact.shape[1:]))
            value, claimed_at = parse_claim(raw_claim, exact.shape[1:])
        except AnswerFormatError as exc:
            check.verdict, check.message = "format", str(exc)
            continue
        if step in asked:  # the item asks only some entries: only those are checked
            claimed_at = claimed_at & asked[step].asked(exact.shape[1:])
        if not claimed_at.any():  # every entry null or not asked: nothing to check
            check.verdict = NOT_CLAIMED
            continue
        # Entries not claimed take the exact value: later claims re-run on this one see right
        # values there, and nothing unclaimed is ever reported.
        value = np.where(claimed_at, value, exact[0])[None]
        read[step] = value
        partial[step] = claimed_at
        check.claimed = _encode_claim(value[0], claimed_at)
        # Within tolerance of what some unclaimed intermediates rounded give: rounding the steps
        # in between is right work (the grader's rule, families.rounding). A claimed step feeding
        # it is held to the exact value where claimed, to its rounding where not.
        feeding, free = carried_inputs(family, step, read)
        rounding = item_allowance(item, step, env, {s: input_width(item.tolerance_for(s), env[s], partial[s])
                                                    for s in feeding}, free)
        with np.errstate(all="ignore"):
            ok = tol.passes(value, exact)[0] | ~claimed_at
            # A claim a known mistake explains keeps the plain tolerance.
            explained = not ok.all() and bool(explained_by_mistake(item, step, env, value, claimed_at)[0])
            if rounding is not None and not explained and not ok.all():
                ok = tol.passes(value, exact, extra=rounding)[0] | ~claimed_at
                if ok.all():
                    check.message = _("right for rounded values of the unclaimed steps in between (%(steps)s): it "
                                      "differs from the exact value by more than the tolerance, but by no more than "
                                      "rounding them explains") % {
                        "steps": ", ".join(s for s in free if family.step(s).askable)}
        if ok.all():
            continue
        if _follows_from_right_claims(item, env, step, value, read, checks, claimed_at, partial, explained):
            continue
        _explain_wrong(check, item, env, value, exact, ok, claimed_at)

    _mark_carried(checks, item, env, read, partial)
    return list(checks.values())


def _explain_wrong(check: ClaimCheck, item: ItemSpec, env: Env, value: np.ndarray, exact: np.ndarray,
                   ok: np.ndarray, claimed_at: np.ndarray) -> None:
    """``check`` marked wrong, with its wrong entries, the right values, the mistakes that explain
    the claim and the invariants it breaks."""
    family, params, step = item.family, item.params, check.step
    tol = item.tolerance_for(step)
    check.verdict = "wrong"
    wrong = np.argwhere(~ok) if ok.ndim else [()]
    for index in wrong:
        index = tuple(int(i) for i in index)
        check.wrong_entries.append((entry_name(index) if index else "", number_text(float(value[0][index])),
                                    number_text(float(exact[0][index]), tol)))
    counted = int(claimed_at.sum())
    if counted == ok.size:
        message = ngettext("%(wrong)s of %(num)s entry differs from the right value",
                           "%(wrong)s of %(num)s entries differ from the right value", counted)
    else:  # null entries are not claimed
        message = ngettext("%(wrong)s of %(num)s claimed entry differs from the right value",
                           "%(wrong)s of %(num)s claimed entries differ from the right value", counted)
    check.message = message % {"wrong": len(check.wrong_entries), "num": counted}
    check.right_table = table(exact[0], tol, ~ok) if ok.ndim else []
    for mistake in family.mistakes_for(step, params):
        with np.errstate(all="ignore"):
            mistaken = mistake.fn(env, params, np)
        if mistaken.shape == value.shape and (tol.passes(value, mistaken)[0] | ~claimed_at).all():
            check.mistakes.append(mistake.name)
            check.diagnosis.append(_(mistake.feedback))
    if not claimed_at.all():
        return  # invariants are about whole rows: a partial claim is not checked against them
    band = entry_band(tol, value)
    with np.errstate(all="ignore"):
        for inv in family.invariants_for(step, params):
            if not bool(np.asarray(inv.holds(value, Env(env), params, band, np))[0]):
                check.invariants.append(_(inv.feedback))


def _mark_carried(checks: Mapping[str, ClaimCheck], item: ItemSpec, env: Env, read: Mapping[str, np.ndarray],
                  partial: Mapping[str, np.ndarray]) -> None:
    """Error carried forward within the key: a wrong claim that is right from earlier wrong claims
    names them (``follows_from``)."""
    family, params = item.family, item.params
    for step, check in checks.items():
        if check.verdict != "wrong":
            continue
        inputs, between = carried_inputs(family, step, read)
        bad = [s for s in inputs if checks[s].verdict == "wrong"]
        if not bad:
            continue
        redo = rerun_env(family, step, env, {s: read[s] for s in inputs}, between, params)
        rounding = item_allowance(item, step, redo, _own_widths(item, inputs, read, partial, env), between)
        if redo[step].shape == read[step].shape and (item.tolerance_for(step).passes(
                read[step], redo[step], extra=rounding)[0] | ~partial[step]).all():
            check.follows_from = bad


def parse_claim(raw: Any, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """A claim read for a step of ``shape``: its values and where it claims anything.

    ``null`` entries are not claimed. A claim may drop axes of length 1, as a hand-written key
    does for one token: ``1.5`` for a 1×1 score, ``[0.2, 0.8]`` for one query's weights.
    """
    squeezed = tuple(n for n in shape if n != 1)
    tries = [shape] + ([squeezed] if squeezed != shape else [])
    first: AnswerFormatError | None = None
    for target in tries:
        nulls = _nulls(raw, target)
        try:
            value = parse_answer(np.where(nulls, 0, np.array(raw, dtype=object)).tolist()
                                 if nulls is not None else raw, target)
        except AnswerFormatError as exc:
            first = first or exc
            continue
        claimed_at = np.ones(target, dtype=bool) if nulls is None else ~nulls
        return value.reshape(shape), claimed_at.reshape(shape)
    assert first is not None
    raise first


def _all_null(raw: Any) -> bool:
    """``null``, or nested lists holding nothing but ``null``: a step claimed nowhere."""
    if raw is None:
        return True
    return isinstance(raw, list) and bool(raw) and all(_all_null(r) for r in raw)


def _nulls(raw: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """Where a nested list of exactly ``shape`` holds ``null``; None when it holds none or has another shape."""
    if not shape or not isinstance(raw, list):
        return None
    try:
        grid = np.array(raw, dtype=object)
    except ValueError:
        return None
    if grid.shape != shape:
        return None
    nulls = np.equal(grid, None)
    return nulls if nulls.any() else None


def _encode_claim(value: np.ndarray, claimed_at: np.ndarray) -> Any:
    """The claim as JSON, with ``null`` where nothing is claimed."""
    encoded = np.array(encode(value), dtype=object)
    if encoded.ndim == 0:
        return encoded.item()
    encoded[~claimed_at] = None
    return encoded.tolist()


def _solve_stated(item: ItemSpec, claimed: list[str], source: str, where: str) -> Env:
    """The item solved from its givens; givens it leaves out must be ones no claim depends on.

    A hand-written problem states only what its questions need (no V when only weights are
    asked). Each given left out is filled twice with different drawn values: a claimed or asked
    step that changes between the two needs that given, and the audit says which.
    """
    family = item.family
    missing = [g for g in family.given_names if g not in item.fixed]
    if not missing:
        return solve_item(item, [0], source=source)
    from ..core.seeding import Draw

    def solved(changed: str | None) -> Env:
        # Every given left out drawn from candidate 0; ``changed`` from candidate 1 instead.
        fixed = dict(item.fixed)
        for g in missing:
            drawn = family.sample(Draw.candidates([0x5EED], int(g == changed), 1), item.params)[g]
            fixed[g] = np.asarray(drawn[0], dtype=np.float64)
        return solve_item(dataclasses.replace(item, fixed=fixed), [0], source=source)

    base = solved(None)
    needed = []
    for g in missing:
        other = solved(g)
        steps = [s for s in claimed if not np.array_equal(base[s], other[s], equal_nan=True)]
        if steps:
            needed.append(f"{g} (the claimed {', '.join(steps)} depend{'s' if len(steps) == 1 else ''} on it)")
    if needed:
        raise SpecError(source, f"{where} field 'givens'",
                        f"an audit needs every given its claims depend on; missing: {'; '.join(needed)}")
    envs = [base]
    return envs[0]


def _own_widths(item: ItemSpec, inputs: Sequence[str], read: Mapping[str, np.ndarray],
                partial: Mapping[str, np.ndarray], env: Env) -> dict[str, np.ndarray]:
    """The width of each claimed input, as the grader gives a student's own answers
    (:func:`qkvquiz.families.rounding.input_width`)."""
    return {s: input_width(item.tolerance_for(s), read[s], partial[s], env[s]) for s in inputs}


def _follows_from_right_claims(item: ItemSpec, env: Env, step: str, value: np.ndarray,
                               read: Mapping[str, np.ndarray], checks: Mapping[str, ClaimCheck],
                               claimed_at: np.ndarray, partial: Mapping[str, np.ndarray],
                               explained: bool = False) -> bool:
    """A claim off the exact value that is right for the claimant's own earlier claims, all accepted.

    Rounding each step to the asked decimals is right work: the later value is then compared
    with the step re-run on the rounded values, not with the exact one. When it matches (and
    keeps its step's invariants), the claim is marked right with a message saying so.
    """
    family, params = item.family, item.params
    inputs, between = carried_inputs(family, step, {s for s in read if s != step})
    if not inputs or any(checks[s].verdict != "right" for s in inputs):
        return False
    tol = item.tolerance_for(step)
    again = rerun_env(family, step, env, {s: read[s] for s in inputs}, between, params)
    redo = again[step]
    # The claimant's values may carry the rounding of their last written place, the unclaimed
    # steps in between theirs, unless a known mistake explains the claim.
    rounding = None if explained else item_allowance(
        item, step, again, _own_widths(item, inputs, read, partial, env), between)
    with np.errstate(all="ignore"):
        if redo.shape != value.shape or not (tol.passes(value, redo, extra=rounding)[0] | ~claimed_at).all():
            return False
        band = entry_band(tol, value)
        if claimed_at.all() and any(not bool(np.asarray(inv.holds(value, Env(env), params, band, np))[0])
               for inv in family.invariants_for(step, params)):
            return False
    listed = ", ".join(inputs)
    checks[step].follows_own = list(inputs)
    checks[step].message = _("right: it follows from the claimed %(steps)s (the claimant's rounded values, "
                             "within tolerance of the exact ones), though it differs from the exact value by more "
                             "than the tolerance") % {"steps": listed}
    return True


def audit_markdown(report: AuditReport, *, lang: str | None = None) -> str:
    """The audit as Markdown: a summary, then every wrong claim with the right value and why.

    In ``lang`` (default: the one chosen around the call, else the report's, the language its
    sentences were made in)."""
    with entered(lang, report.lang):
        return _audit_markdown(report)


def _audit_markdown(report: AuditReport) -> str:
    lines = [_("# Audit: %(title)s") % {"title": report.title}, ""]
    wrong = report.wrong
    counts = {"num": len(report.checks), "source": terminal_text(report.source), "wrong": len(wrong)}
    if wrong:
        lines.append(ngettext("%(num)s claimed answer checked in %(source)s: %(wrong)s wrong.",
                              "%(num)s claimed answers checked in %(source)s: %(wrong)s wrong.", len(report.checks))
                     % counts)
    else:
        lines.append(ngettext("%(num)s claimed answer checked in %(source)s: all right.",
                              "%(num)s claimed answers checked in %(source)s: all right.", len(report.checks)) % counts)
    if report.unchecked:
        lines.append(_("Items with nothing claimed: %(items)s.") % {"items": ", ".join(report.unchecked)})
    if report.not_claimed:
        lines.append(_("Steps not claimed (null), so not checked: %(steps)s.") % {"steps": ", ".join(report.not_claimed)})
    lines.append("")
    for c in report.checks:
        head = {"item": c.item, "step": c.step, "family": c.family}
        if c.verdict == "right" and c.follows_own:
            listed = ", ".join(f"`{s}`" for s in c.follows_own)
            lines += [_("## %(item)s.%(step)s (%(family)s): right for the claimed %(steps)s") % {**head, "steps": listed},
                      "", _("The claim follows from the claimed %(steps)s, whose rounded values are within tolerance; "
                            "it is right for them, so it is accepted.") % {"steps": listed}, ""]
            continue
        if c.verdict == "right":
            lines += [_("## %(item)s.%(step)s (%(family)s): right") % head, ""]
            if c.message:  # right for rounded values of the steps in between
                lines += [_("%(sentence)s.") % {"sentence": c.message}, ""]
            continue
        if c.verdict == "format":
            lines += [_("## %(item)s.%(step)s (%(family)s): could not be read") % head, "",
                      _("%(sentence)s.") % {"sentence": c.message}, ""]
            continue
        lines += [_("## %(item)s.%(step)s (%(family)s): WRONG") % head, "",
                  _("%(message)s; an entry counts when it is %(tolerance)s.") % {
                      "message": c.message, "tolerance": c.tolerance}, ""]
        for sentence in c.diagnosis:
            lines.append(_("- **Known mistake:** %(sentence)s") % {"sentence": sentence})
        for step in c.follows_from:
            lines.append(_("- **Follows from the wrong claimed `%(step)s`:** it is right for that value; "
                           "fix `%(step)s` and recompute.") % {"step": step})
        for sentence in c.invariants:
            lines.append(_("- **Breaks:** %(sentence)s") % {"sentence": sentence})
        if not c.diagnosis and not c.follows_from:
            lines.append(_("- No known mistake explains it."))
        lines.append("")
        for where, claimed, right in c.wrong_entries:
            if where:
                lines.append(_("- %(where)s: claimed %(claimed)s, right %(right)s") % {
                    "where": where, "claimed": claimed, "right": right})
            else:
                lines.append(_("- claimed %(claimed)s, right %(right)s") % {"claimed": claimed, "right": right})
        if c.right_table:
            lines += ["", _("The right value (wrong entries in bold):"), "", *c.right_table]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
