"""A family is a topic a student practises, declared as a small graph of named steps.

Givens are drawn for a whole batch of variants at once; each step is a function of the
givens and earlier steps (an :class:`Env`), so solving, re-running a step on a student's own
earlier values (error carried forward) and evaluating a known mistake (diagnosis) are all
the same operation: call a step function on an environment.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.seeding import Draw

Array = Any


class Env(dict):
    """Named arrays of a batch of variants (givens, then steps); attribute access for readability."""

    def __getattr__(self, name: str) -> Array:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Params(Mapping):
    """A family's resolved parameters (defaults overlaid by a spec), read as attributes."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Params({self._values!r})"


# The largest end of a range of entries (``entries: [low, high]``): far beyond hand
# computation, and far below where drawing, multiplying or printing them could overflow.
# Ranges of sizes (theory.complexity's n and d) set their own bound.
MAX_RANGE_END = 1000


@dataclass(frozen=True)
class Param:
    """One knob of a family, with its default and what values are allowed.

    A range param (default a pair) with ``integer`` set feeds integer draws: both ends must be
    whole numbers (a range such as [-1.5, 1] would otherwise draw half-integers).
    """

    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    integer: bool = False
    bound: float = 0.0  # a range param: the largest |end| allowed (0: MAX_RANGE_END)
    # A param whose values are of more than one kind (a word or a number, as ``scale``):
    # reads and checks the value itself, raising ValueError with what is allowed.
    convert: Callable[[Any], Any] | None = None

    def check(self, value: Any) -> Any:
        """Return ``value`` converted to the default's type, or raise ValueError saying what is allowed."""
        if self.convert is not None:
            return self.convert(value)
        kind = type(self.default)
        if kind is bool:
            if not isinstance(value, bool):
                raise ValueError(f"must be true or false, got {value!r}")
        elif kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"must be a whole number, got {value!r}")
        elif kind is float:
            if isinstance(value, str):
                # YAML 1.1 reads 1e-5 (no dot) as text; take it as the number it plainly is.
                try:
                    value = float(value)
                except ValueError:
                    raise ValueError(f"must be a number, got {value!r}") from None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"must be a number, got {value!r}")
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"must be a finite number, got {value!r}")
        elif kind is tuple:
            value = self._check_range(value)
        if self.choices is not None and value not in self.choices:
            allowed = ", ".join(repr(c) for c in self.choices)
            raise ValueError(f"must be one of {allowed}, got {value!r}")
        if self.low is not None and value < self.low or self.high is not None and value > self.high:
            raise ValueError(f"must be between {self.low} and {self.high}, got {value!r}")
        return value

    def _check_range(self, value: Any) -> tuple:
        what = "whole numbers" if self.integer else "finite numbers"
        if not (isinstance(value, (list, tuple)) and len(value) == 2
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
                and value[0] < value[1]):
            raise ValueError(f"must be a range [low, high] of {what} with low < high, got {value!r}")
        bound = self.bound or MAX_RANGE_END
        if any(abs(v) > bound for v in value):
            # Past this, draws overflow int64, or products lose exactness or print unreadably.
            raise ValueError(f"must be a range [low, high] with both ends between {-bound:,g} and "
                             f"{bound:,g}, got {list(value)!r}")
        if self.integer:
            if any(v != int(v) for v in value):
                raise ValueError(f"must be a range [low, high] of whole numbers (the values drawn are integers), "
                                 f"got {list(value)!r}")
            return tuple(int(v) for v in value)
        return tuple(value)


def int_range(default: tuple[int, int], help: str, bound: int = MAX_RANGE_END) -> Param:
    """A range ``[low, high]`` that whole numbers are drawn from, both ends within ±``bound``."""
    return Param(default, help, integer=True, bound=bound)


DECIMALS = Param(3, "decimals shown in the key", low=0, high=8)


# Checks a value an instructor fixes for a given (a float64 array): says what is wrong, or None.
GivenCheck = Callable[[np.ndarray], str | None]
# What a fixed value settles about the params: (value, params resolved from the spec, names of
# the params the spec wrote) → params to override; raises ValueError when the value contradicts
# a param the spec wrote.
GivenSettles = Callable[[np.ndarray, Params, frozenset], dict[str, Any]]


@dataclass(frozen=True)
class Given:
    """A value the student is handed.

    ``check`` says what values an instructor may fix it to (its domain, such as β in (0, 2));
    its shape is checked against the params when the worksheet is drawn. ``settles`` lets a
    fixed value decide params: a hand-written mask is an explicit mask (``mask: random``),
    so that templates, mistakes and the key all treat the problem as masked.
    """

    name: str
    symbol: str  # LaTeX, e.g. "Q"
    description: str
    check: GivenCheck | None = None
    settles: GivenSettles | None = None


def open_interval(low: float, high: float) -> GivenCheck:
    """Every entry strictly between ``low`` and ``high``."""

    def check(value: np.ndarray) -> str | None:
        if ((value > low) & (value < high)).all():
            return None
        return f"every entry must lie strictly between {low:g} and {high:g}"

    return check


def closed_interval(low: float, high: float) -> GivenCheck:
    """Every entry from ``low`` to ``high``, both included."""

    def check(value: np.ndarray) -> str | None:
        if ((value >= low) & (value <= high)).all():
            return None
        return f"every entry must lie from {low:g} to {high:g} (both included)"

    return check


def whole_at_least(minimum: int) -> GivenCheck:
    """Every entry a whole number ≥ ``minimum``."""

    def check(value: np.ndarray) -> str | None:
        if ((value == np.round(value)) & (value >= minimum)).all():
            return None
        return f"must be a whole number ≥ {minimum}"

    return check


@dataclass(frozen=True)
class Invariant:
    """A property every right value of a step has (each row of A sums to 1), with a sentence.

    ``fn(value, env, params, band, xp)`` gets a batch of values of the step (a student's own,
    leading axis = variant), the variants' givens and steps in ``env``, and ``band``: the error
    each entry of ``value`` may carry under the part's tolerance (same shape as ``value``), so
    that a rounded right answer still holds. It returns a bool per variant: True where the
    property holds. The grader says which invariants a wrong answer breaks, and carries no
    credit forward from an answer that breaks one.
    """

    name: str
    fn: Callable[[Array, Env, Params, Array, Any], Array]
    feedback: str  # says what the property is, e.g. "Each row of A must sum to 1."
    applies: Callable[[Params], bool] | None = None
    #: ``page(env, params, shape)``: the property as data a browser checks with (the static
    #: practice page), for the first variant of ``env``, a value of ``shape`` (variants first);
    #: None where it has no such form.
    page: Callable[[Env, Params, tuple[int, ...]], dict[str, Any]] | None = None

    def applies_to(self, params: Params) -> bool:
        return self.applies is None or bool(self.applies(params))

    def holds(self, value: Array, env: Env, params: Params, band: Array, xp=np) -> Array:
        return self.fn(value, env, params, band, xp)


def _per_variant(ok: Array) -> Array:
    return ok.reshape(ok.shape[0], -1).all(axis=1)


def rows_sum_to(
    target: float, name: str, feedback: str, *,
    rows: Callable[[Env, Params, Any], Array] | None = None,
    applies: Callable[[Params], bool] | None = None,
) -> Invariant:
    """Each row (last axis) sums to ``target``, within the sum of its entries' bands.

    ``rows(env, params, xp)`` picks the rows checked (bool, the value's shape less its last
    axis); by default every row. An infinite entry makes its row fail.
    """

    def check(value: Array, env: Env, params: Params, band: Array, xp: Any) -> Array:
        # Each entry may be off by its band, so the row's sum may be off by the bands' sum.
        ok = xp.abs(xp.sum(value, axis=-1) - target) <= xp.sum(band, axis=-1)
        if rows is not None:
            ok = ok | ~rows(env, params, xp)
        return _per_variant(ok)

    def page(env: Env, params: Params, shape: tuple[int, ...]) -> dict[str, Any]:
        picked = None if rows is None else np.broadcast_to(np.asarray(rows(env, params, np)), shape[:-1])[0]
        return {"kind": "rows_sum", "target": float(target),
                "rows": None if picked is None else picked.ravel().astype(bool).tolist()}

    return Invariant(name, check, feedback, applies, page)


def zero_where(
    where: Callable[[Env, Params, Any], Array], name: str, feedback: str, *,
    applies: Callable[[Params], bool] | None = None,
) -> Invariant:
    """Entries where ``where(env, params, xp)`` is True are 0 (within their band)."""

    def check(value: Array, env: Env, params: Params, band: Array, xp: Any) -> Array:
        return _per_variant((xp.abs(value) <= band) | ~where(env, params, xp))

    def page(env: Env, params: Params, shape: tuple[int, ...]) -> dict[str, Any]:
        zero = np.broadcast_to(np.asarray(where(env, params, np)), shape)[0]
        return {"kind": "zero", "where": zero.ravel().astype(bool).tolist()}

    return Invariant(name, check, feedback, applies, page)


def transposable(rows: str, cols: str) -> Callable[[Params], bool]:
    """Whether a matrix of ``rows`` × ``cols`` (param names) can be told from its transpose.

    Transposing fits the shape only when it is square, and changes nothing when it is 1 × 1:
    the "transposed" mistakes can happen only in between.
    """
    return lambda p: p[rows] == p[cols] > 1


@dataclass(frozen=True)
class Step:
    """A named intermediate result; some steps are the parts a worksheet asks for."""

    name: str
    symbol: str  # LaTeX of the quantity, e.g. "S"
    formula: str  # LaTeX of how it is computed, e.g. "S = QK^\\top/\\sqrt{d_k}"
    prompt: str  # the question, e.g. "Compute the scaled scores"; "" for a helper step
    fn: Callable[[Env, Params, Any], Array]
    needs: tuple[str, ...] = ()  # givens and steps the function reads
    invariants: tuple[Invariant, ...] = ()  # properties every right value has
    # "number": entries are numbers; "shape": the value is a shape (rows, columns), which a
    # student may also write as one text, "2×4" or "[2, 4]" (grade.parse.parse_shape_text).
    kind: str = "number"
    # The entries a mask fixes (True), whatever else the answer gets right: −∞ scores and 0
    # weights of masked keys. Together they carry the item's credit.mask_weight of the part in the
    # per-entry credit (grade.checks.entry_credit), so that the lesson of the part decides its score.
    fixed: Callable[[Env, Params, Any], Array] | None = None
    # How far rounding moves this step when it is worked row by row, each row written rounded
    # and used for the next (a substitution): (env, params, xp, half a unit per entry) -> the
    # widths it reaches (families.rounding). None: rounding moves each entry by its half unit.
    rounded_as_worked: Callable[[Env, Params, Any, Array], Array] | None = None
    # The prompt where it depends on the params, as the worksheet's sentence does ("Compute the
    # scaled scores" where the scores are scaled, "Compute the scores" where not); else ``prompt``.
    prompt_with: Callable[[Params], str] | None = None

    def prompt_for(self, params: Params) -> str:
        """The prompt (a msgid) for a problem with ``params``: the words its worksheet uses."""
        return self.prompt_with(params) if self.prompt_with is not None else self.prompt

    @property
    def askable(self) -> bool:
        """Helper steps (no prompt) are computed but never asked."""
        return bool(self.prompt)


@dataclass(frozen=True)
class Misconception:
    """A known mistake: an alternative function for one step, with a sentence of feedback."""

    step: str
    name: str
    fn: Callable[[Env, Params, Any], Array]
    feedback: str
    # Whether the mistake can happen at all with these params (no "forgot the mask" without a mask).
    applies: Callable[[Params], bool] | None = None
    # A slip made entry by entry (a masked score written as 0): named also when only some
    # entries have it, every other entry right (grade.checks.matches_mistake).
    entrywise: bool = False
    # Whether a variant in which this mistake gives the right answer is drawn again
    # (worksheet.rejections). A mistake added after its family was published does not screen,
    # so that sets drawn before keep every student's variant; where its answer is the right one
    # it is simply never named (tests/worksheet/test_variant_stability.py holds them to it).
    screens: bool = True

    def applies_to(self, params: Params) -> bool:
        return self.applies is None or bool(self.applies(params))


@dataclass(frozen=True)
class Family:
    """A topic: parameters, batched sampling, the step graph and the known mistakes."""

    name: str
    title: str
    summary: str
    params: Mapping[str, Param]
    givens: tuple[Given, ...]
    sample: Callable[[Draw, Params], dict[str, Array]]
    steps: tuple[Step, ...]
    default_ask: tuple[str, ...]
    misconceptions: tuple[Misconception, ...] = ()
    # Rejects variants that are not hand-computable (returns a bool per variant).
    accept: Callable[[Env, Params, Any], Array] | None = None
    # Params that change what a given or step means, checked together after defaults.
    validate: Callable[[Params], None] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    # Params added after the family was first published: left out of an item's fingerprint
    # while at their defaults, so that specs written before them keep their variants.
    later_params: tuple[str, ...] = ()
    # The steps asked when a spec names none, where they depend on the params (else default_ask):
    # steps that are equal for some params cannot both be asked.
    default_ask_for: Callable[[Params], tuple[str, ...]] | None = None

    def __post_init__(self) -> None:
        # Params is a Mapping: a param called "keys" or "values" would read the method instead.
        # "keys" (the number of keys) is the word every attention problem uses; families read it
        # as p["keys"] (see families.attention.n_keys), never as p.keys.
        shadowed = sorted(set(self.params) & set(dir(Params)) - {"keys"})
        if shadowed:
            raise ValueError(f"family {self.name}: param name(s) {shadowed} clash with Params attributes")

    @property
    def step_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)

    @property
    def askable_steps(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps if s.askable)

    @property
    def given_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.givens)

    def givens_needed(self, steps: Iterable[str]) -> tuple[str, ...]:
        """The givens ``steps`` depend on, through the step graph's ``needs``, in the family's order.

        A worksheet prints only these: a given no asked part depends on (V when only the scores
        are asked) is left out of the problem, as an instructor writing it by hand would.
        """
        seen: set[str] = set()
        stack = list(steps)
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in self.step_names:
                stack.extend(self.step(name).needs)
        return tuple(g for g in self.given_names if g in seen)

    def asked_by_default(self, params: Params) -> tuple[str, ...]:
        """The steps a spec that names none asks, for these params."""
        return self.default_ask if self.default_ask_for is None else self.default_ask_for(params)

    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def resolve(self, overrides: Mapping[str, Any] | None = None) -> Params:
        """Defaults overlaid by ``overrides``; raises KeyError/ValueError naming the bad param."""
        values = {name: p.default for name, p in self.params.items()}
        for name, value in (overrides or {}).items():
            if name not in self.params:
                raise KeyError(name)
            values[name] = self.params[name].check(value)
        params = Params(values)
        if self.validate is not None:
            self.validate(params)
        return params

    def solve(self, givens: Mapping[str, Array], params: Params, xp=np) -> Env:
        """Every step, in order, for a batch of variants (one engine call per step)."""
        env = Env(givens)
        for s in self.steps:
            env[s.name] = s.fn(env, params, xp)
        return env

    def rerun(self, step: str, env: Mapping[str, Array], params: Params, xp=np) -> Array:
        """One step evaluated on ``env`` (e.g. a student's own earlier values)."""
        return self.step(step).fn(Env(env), params, xp)

    def mistakes_for(self, step: str, params: Params) -> tuple[Misconception, ...]:
        """The known mistakes for ``step`` that can happen with ``params``."""
        return tuple(m for m in self.misconceptions if m.step == step and m.applies_to(params))

    def invariants_for(self, step: str, params: Params) -> tuple[Invariant, ...]:
        """The properties of ``step`` that hold with ``params``."""
        return tuple(i for i in self.step(step).invariants if i.applies_to(params))
