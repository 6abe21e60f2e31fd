"""What a worksheet spec is, once read: its items, parts, credit rules and work spaces.

:mod:`qkvquiz.spec` reads a spec's YAML into these types (every error named by file, item and
field); everything downstream (worksheets, keys, renderers, the grader) uses the types alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .core.i18n import DEFAULT_LANG, LangText, check_lang
from .core.tolerance import Tolerance
from .families import Family, Params


class SpecError(ValueError):
    """A spec that cannot be used; the message names the file, the item and the field."""

    def __init__(self, source: str, where: str, message: str) -> None:
        self.source, self.where, self.message = source, where, message
        super().__init__(f"{source}: {where}: {message}" if where else f"{source}: {message}")


@dataclass(frozen=True)
class Part:
    """One answer a student hands in: a step of an item."""

    id: str  # e.g. "q2.weights"
    step: str
    points: float
    tolerance: Tolerance | None = None  # this part's own tolerance; None: the item's
    # The entries asked (indices from 0, one tuple per entry); None: every entry of the step.
    entries: tuple[tuple[int, ...], ...] | None = None

    def asked(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """A bool array of ``shape``: True at the entries asked; None when every entry is."""
        if self.entries is None:
            return None
        mask = np.zeros(shape, dtype=bool)
        for index in self.entries:
            mask[index] = True
        return mask

    def entries_json(self) -> list[list[int]] | None:
        """The asked entries as the spec writes them, counting from 1."""
        return None if self.entries is None else [[i + 1 for i in index] for index in self.entries]


#: The share of a part that the entries a mask fixes carry together, unless a spec says otherwise.
MASK_WEIGHT = 0.5


@dataclass(frozen=True)
class Credit:
    """How partial answers earn points (the grader reads it)."""

    per_entry: bool = True  # proportional to the share of correct entries; False: all or nothing
    carried_forward: float = 1.0  # share of a part's points for a step right from one's own wrong inputs
    format_error: float = 0.0  # share of a part's points for an answer given but unreadable
    # Share of a part's points that the entries a mask fixes (−∞ scores, 0 weights of masked
    # keys) carry together, in a part that asks for some (grade.checks.entry_credit).
    mask_weight: float = MASK_WEIGHT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"per_entry": self.per_entry, "carried_forward": self.carried_forward,
                               "format_error": self.format_error}
        if self.mask_weight != MASK_WEIGHT:  # written only when set: keys of other specs stay as they were
            out["mask_weight"] = self.mask_weight
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Credit:
        """Read a key's credit; a key written before a setting existed gets its default. A share
        outside its range (a hand-edited key) is a ValueError naming the field: graded as it
        stands, a mask share of 7 would give a part seven times its points."""
        def share(name: str, default: float, zero_allowed: bool) -> float:
            value = raw.get(name, default)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not (0 <= value <= 1 if zero_allowed else 0 < value <= 1):
                raise ValueError(f"credit.{name} must be a share of a part ({'0' if zero_allowed else 'above 0'} "
                                 f"to 1), got {value!r}")
            return float(value)

        return cls(bool(raw.get("per_entry", True)), share("carried_forward", 1.0, True),
                   share("format_error", 0.0, True), share("mask_weight", MASK_WEIGHT, False))
CREDIT_KEYS = ("per_entry", "carried_forward", "format_error", "mask_weight")


WORK_SPACE_UNITS = {"cm": 1.0, "mm": 0.1, "in": 2.54}
#: Height of one ruled line of work space (cm).
WORK_LINE_CM = 0.8
_WORK_SPACE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(cm|mm|in|lines?)?\s*")


@dataclass(frozen=True)
class WorkSpace:
    """Blank room on the printed worksheet for working: after each part's boxes, or once
    after the problem (``per: problem``); plain (a height) or ruled (a number of lines)."""

    height_cm: float
    lines: int = 0  # ruled lines; 0: a plain box of height_cm
    per: str = "part"  # "part" | "problem"

    def css_height(self) -> str:
        return f"{self.height_cm:.2f}cm"


def parse_work_space(value: Any, where: str = "work_space") -> WorkSpace | None:
    """``4cm``, ``30mm``, ``1.5in``, ``6 lines``, a number (cm), 0 or ``none`` (no space);
    or a mapping ``{problem: 8cm}`` / ``{part: 3 lines}``. Raises ValueError saying what
    is allowed."""
    allowed = "a height such as 4cm, 30mm, 1.5in or 6 lines, or {part: …} / {problem: …}"
    per = "part"
    if isinstance(value, Mapping):
        if len(value) != 1 or next(iter(value)) not in ("part", "problem"):
            raise ValueError(f"{where}: {allowed}")
        per, value = next(iter(value.items()))
    if value is None or value is False or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{where}: {allowed}")
    text = str(value)
    match = _WORK_SPACE.fullmatch(text)
    if match is None:
        raise ValueError(f"{where}: got {text!r}; {allowed}")
    amount, unit = float(match.group(1)), match.group(2) or "cm"
    if amount == 0:
        return None
    if unit.startswith("line"):
        if not amount.is_integer() or not 1 <= amount <= 40:
            raise ValueError(f"{where}: between 1 and 40 whole lines, got {text!r}")
        return WorkSpace(amount * WORK_LINE_CM, int(amount), per)
    height = amount * WORK_SPACE_UNITS[unit]
    if not 0 < height <= 25:
        raise ValueError(f"{where}: at most 25cm (a page), got {text!r}")
    return WorkSpace(height, 0, per)


@dataclass(frozen=True)
class ItemSpec:
    id: str
    family: Family
    params: Params
    parts: tuple[Part, ...]
    tolerance: Tolerance
    credit: Credit
    title: str = ""
    intro: str = ""
    fixed: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: Room to work on the printed worksheet (layout only; see :class:`WorkSpace`).
    work_space: WorkSpace | None = None
    #: ``title`` and ``intro`` in every language written; ``title``/``intro`` are the chosen one.
    wording: Mapping[str, LangText] = field(default_factory=dict)

    def in_language(self, lang: str) -> ItemSpec:
        """This item with its title and intro in ``lang`` (English where ``lang`` is not written)."""
        if not self.wording:
            return self
        return dataclasses.replace(self, **{name: text.text(lang) for name, text in self.wording.items()})

    @property
    def points(self) -> float:
        # Rounded so that seven parts of 1/7 point add up to 1, not 0.9999999999999998.
        return round(sum(p.points for p in self.parts), 9)

    def tolerance_for(self, step: str) -> Tolerance:
        """The tolerance that ``step`` is graded with: its part's own, else the item's."""
        return graded_tolerance(self, step)

    def fingerprint(self) -> str:
        """What decides the item's variants: family, params and fixed givens (not its wording)."""
        later = self.family.later_params
        params = {k: v for k, v in self.params.items()
                  if k not in later or v != self.family.params[k].default}
        payload = {
            "family": self.family.name,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()},
            "fixed": {k: np.asarray(v).tolist() for k, v in sorted(self.fixed.items())},
        }
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class WorksheetSpec:
    title: str
    instructions: str
    items: tuple[ItemSpec, ...]
    source: str = "<spec>"
    lang: str = DEFAULT_LANG  # the language of every built-in word (``lang:``; the CLI's --lang wins)
    #: ``title`` and ``instructions`` in every language written; the fields above are in ``lang``.
    wording: Mapping[str, LangText] = field(default_factory=dict)

    @property
    def points(self) -> float:
        return sum(i.points for i in self.items)

    @property
    def named(self) -> str:
        """The title the set is known by (its variant codes derive from it): a plain title as
        written, else its English, so that translating a spec changes no student's code."""
        text = self.wording.get("title")
        return self.title if text is None else text.written

    def in_language(self, lang: str) -> WorksheetSpec:
        """This spec in ``lang``: its built-in words and its own text (English where ``lang`` is
        not written; :meth:`untranslated` names those fields)."""
        lang = check_lang(lang)
        if lang == self.lang:
            return self
        texts = {name: text.text(lang) for name, text in self.wording.items()}
        return dataclasses.replace(self, lang=lang, items=tuple(i.in_language(lang) for i in self.items), **texts)

    def untranslated(self, lang: str | None = None) -> list[str]:
        """The fields (``title``, ``q2.intro`` …) written in other languages but not ``lang``
        (default: the spec's), which are shown in English."""
        lang = self.lang if lang is None else check_lang(lang)
        fields = [(name, text) for name, text in self.wording.items()]
        fields += [(f"{i.id}.{name}", text) for i in self.items for name, text in i.wording.items()]
        return [name for name, text in fields if not text.has(lang)]


def graded_tolerance(item: Any, step: str) -> Tolerance:
    """The tolerance ``step`` of ``item`` (a spec or key item) is graded with."""
    for part in item.parts:
        if part.step == step and part.tolerance is not None:
            return part.tolerance
    return item.tolerance
