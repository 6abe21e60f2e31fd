"""When a student's number counts as the exact value: four tolerance modes.

A tolerance is set per spec item and may be overridden per part; without one,
``TOLERANCE_DEFAULT`` applies: **2 decimals**. For an exact value ``x`` and an answer ``g``:

==================  =========================================================================
mode                ``g`` passes iff
==================  =========================================================================
``abs a``           ``|g − x| ≤ a``
``rel r``           ``|g − x| ≤ r·|x|``; where ``x = 0``: ``|g| ≤ floor``
``decimals p``      ``|g − x| ≤ 10^−p`` — one unit in the p-th decimal place. This covers a
                    correctly rounded answer (off by at most half a unit); what rounding the
                    steps in between adds is ``extra`` (:mod:`qkvquiz.families.rounding`).
``sigfigs s``       ``|g − x| ≤ 10^(⌊log10|x|⌋ − s + 1)`` — one unit in the s-th significant
                    digit *of the exact value*; where ``x = 0``: ``|g| ≤ floor``
==================  =========================================================================

- Every comparison is inclusive and is made against the exact value (never the answer).
- A float slack of ``1e-12·max(|x|, band)`` is added to every band so that binary rounding
  cannot fail an answer that is on the boundary in decimal: 0.25 against an exact 0.24 at
  2 decimals passes, although ``0.25 − 0.24`` is 0.010000000000000009 in binary. The slack
  scales with the band as well as with ``|x|`` so that a tiny exact value in ``rel`` or
  ``sigfigs`` mode keeps a relative band (an absolute slack of 1e-12 would let 0 pass for an
  exact 1e-13). In ``decimals`` and ``abs`` the slack stays under 1% of the band while
  ``|x| < 10^10·band``, far beyond worksheet values.
- An exact value that is ±∞ (a masked score) passes only an answer equal to it. An exact 0
  (a masked weight) is compared by an absolute band: ``10^−p`` in ``decimals``, ``a`` in
  ``abs``, ``floor`` (default 1e-9) in ``rel`` and ``sigfigs`` — never by a relative band.
- A NaN answer never passes (the parser already refuses NaN as a format error), nor does an
  infinite answer for a finite exact value.
- Counts run from 0 to 12 for ``decimals`` and from 1 to 12 for ``sigfigs``; ``abs`` and
  ``rel`` take any finite value ≥ 0. ``1e-5`` counts as 10^−5 when finding the leading digit.

In a spec a tolerance is written ``"2 decimals"``, ``"3 sigfigs"``, ``"abs 0.01"``,
``"rel 1%"``, ``"rel 0.001"`` or as a mapping ``{mode: rel, value: 0.001}`` (with an optional
``floor``); :meth:`Tolerance.from_spec` reads all of them and :meth:`Tolerance.to_json`
writes the mapping form.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import numpy as np

from .i18n import _

Mode = Literal["abs", "rel", "decimals", "sigfigs"]
MODES: tuple[str, ...] = ("abs", "rel", "decimals", "sigfigs")
FLOOR_DEFAULT = 1e-9
SLACK = 1e-12
MAX_DIGITS = 12  # beyond this the band nears float64 resolution and the slack

Array = Any

# 10^K as the double nearest to it, for K from the smallest subnormal's exponent less the
# most significant figures, up to one past the largest finite double's.
_LOWEST_POWER = -345
_POWERS_OF_TEN = np.array([float(f"1e{k}") for k in range(_LOWEST_POWER, 311)])

ALLOWED = (
    'a tolerance is written "N decimals" (e.g. "2 decimals"), "N sigfigs" (e.g. "3 sigfigs"), '
    '"abs A" (e.g. "abs 0.01"), "rel R" or "rel P%" (e.g. "rel 0.001", "rel 1%"), or as a '
    'mapping {"mode": "abs" | "rel" | "decimals" | "sigfigs", "value": number} with an '
    'optional "floor"'
)

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+\.)"
_SHORTHANDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("decimals", re.compile(r"([0-9]+)\s*(?:decimals?|decimal\s+places?|dp)", re.I)),
    (
        "sigfigs",
        re.compile(
            r"([0-9]+)\s*(?:sig\.?\s*figs?|significant\s+(?:figures?|digits?)|s\.?f\.?)", re.I
        ),
    ),
    ("abs", re.compile(r"abs(?:olute)?\s*:?\s*" + _NUM, re.I)),
    ("rel", re.compile(r"rel(?:ative)?\s*:?\s*" + _NUM + r"\s*(%?)", re.I)),
)


def _ordinal(n: int) -> str:
    """"2nd" in English; a language without suffixes translates the message without ``%(suffix)s``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    # Translators: an ordinal number (2nd, 3rd); suffix is English's st/nd/rd/th.
    return _("%(n)s%(suffix)s") % {"n": n, "suffix": suffix}


def _power_of_ten(e: int) -> str:
    """10^e written the way a worksheet would: 0.01, 1, 1e-08."""
    if 0 <= -e <= 6:
        return f"{10.0**e:.{-e}f}"
    return f"{10.0**e:g}"


def _is_real(v: object) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


@dataclass(frozen=True)
class Tolerance:
    """How close an answer must be to the exact value (see the module docstring)."""

    mode: Mode = "decimals"
    value: float = 2  # abs: the band; rel: the fraction; decimals/sigfigs: the count (int)
    floor: float = FLOOR_DEFAULT  # absolute band where the exact value is 0 (rel, sigfigs)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"tolerance mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        v = self.value
        if not _is_real(v) or not math.isfinite(float(v)):
            raise ValueError(f"tolerance value must be a finite number, got {v!r}")
        if self.mode in ("abs", "rel"):
            if float(v) < 0:
                raise ValueError(f"{self.mode} tolerance must be ≥ 0, got {v!r}")
            object.__setattr__(self, "value", float(v))
        else:
            lowest = 0 if self.mode == "decimals" else 1
            if float(v) != int(v) or not lowest <= int(v) <= MAX_DIGITS:
                raise ValueError(
                    f"{self.mode} must be a whole number from {lowest} to {MAX_DIGITS}, got {v!r}"
                )
            object.__setattr__(self, "value", int(v))
        f = self.floor
        if not _is_real(f) or not math.isfinite(float(f)) or float(f) < 0:
            raise ValueError(f"tolerance floor must be a finite number ≥ 0, got {f!r}")
        object.__setattr__(self, "floor", float(f))

    def band(self, exact: Array, *, xp: Any = np) -> Array:
        """The allowed |given − exact| per entry, before the float slack; 0 where exact is ±∞."""
        x = xp.asarray(exact, dtype=xp.float64)
        finite = xp.isfinite(x)
        ax = xp.where(finite, xp.abs(x), 0.0)
        if self.mode == "abs":
            b = xp.full(x.shape, self.value, dtype=xp.float64)
        elif self.mode == "decimals":
            b = xp.full(x.shape, float(f"1e-{int(self.value)}"), dtype=xp.float64)
        elif self.mode == "rel":
            b = xp.where(ax > 0, self.value * ax, self.floor)
        else:
            # Position of the leading digit, e = ⌊log10|x|⌋; log10 can land a hair off near
            # powers of ten, so nudge e until 10^e ≤ |x| < 10^(e+1) holds in floats. The
            # powers come from a table of correctly rounded 1eK (a float power 10.0**-5 is
            # not always the double nearest 1e-5, and an exact 1e-5 must count as 1e-5).
            tens = xp.asarray(_POWERS_OF_TEN)
            safe = xp.where(ax > 0, ax, 1.0)
            k = xp.floor(xp.log10(safe)).astype(xp.int64) - _LOWEST_POWER
            k = xp.where(tens[k] > safe, k - 1, k)
            k = xp.where(tens[k + 1] <= safe, k + 1, k)
            b = xp.where(ax > 0, tens[k - int(self.value) + 1], self.floor)
        return xp.where(finite, b, 0.0)

    def passes(self, given: Array, exact: Array, *, xp: Any = np, extra: Array | None = None) -> Array:
        """Boolean per entry: does ``given`` count as ``exact``? Shapes broadcast (any batch).

        ``extra`` widens the band per entry: what rounding the unasked steps in between may add
        (:mod:`qkvquiz.families.rounding`); an infinite exact value still needs an equal answer.
        """
        g = xp.asarray(given, dtype=xp.float64)
        x = xp.asarray(exact, dtype=xp.float64)
        finite = xp.isfinite(x)
        x0 = xp.where(finite, x, 0.0)  # keeps ∞ − ∞ out of the arithmetic below
        b = self.band(x, xp=xp)
        if extra is not None:
            b = b + xp.asarray(extra, dtype=xp.float64)
        slack = SLACK * xp.maximum(xp.abs(x0), b)
        within = xp.abs(g - x0) <= b + slack  # NaN compares False
        return xp.where(finite, within, g == x)

    def unchanged_by_rounding(self, value: Array, *, xp: Any = np) -> Array:
        """True per entry where rounding as this tolerance asks leaves ``value`` as it is.

        With ``decimals p``: a multiple of 10^−p (0.5 at 2 decimals); otherwise a whole number.
        ±∞ counts as unchanged. Nobody rounds such a value, so it carries no rounding error.
        """
        x = xp.asarray(value, dtype=xp.float64)
        finite = xp.isfinite(x)
        scaled = xp.where(finite, x, 0.0) * (10.0 ** int(self.value) if self.mode == "decimals" else 1.0)
        return ~finite | (xp.abs(scaled - xp.round(scaled)) <= 1e-9 * xp.maximum(1.0, xp.abs(scaled)))

    def describe(self) -> str:
        """One sentence stating exactly what passes."""
        if self.mode == "abs":
            if self.value == 0:
                return _("equal to the exact value (up to 1e-12·|exact| for float rounding)")
            return _("within %(value)s of the exact value, inclusive") % {"value": f"{self.value:g}"}
        if self.mode == "rel":
            return _(
                "within %(percent)s%% of the exact value (|answer − exact| ≤ %(value)s·|exact|), inclusive; "
                "where the exact value is 0, within %(floor)s"
            ) % {"percent": f"{self.value * 100:g}", "value": f"{self.value:g}", "floor": f"{self.floor:g}"}
        n = int(self.value)
        if self.mode == "decimals":
            if n == 0:
                return _("within %(step)s of the exact value (one unit in the ones place), inclusive") % {
                    "step": _power_of_ten(0)}
            return _("within %(step)s of the exact value (one unit in the %(ordinal)s decimal place), inclusive") % {
                "step": _power_of_ten(-n), "ordinal": _ordinal(n)}
        return _(
            "within one unit in the %(ordinal)s significant figure of the exact value (within %(step)s for an "
            "exact value from 1 to 10), inclusive; where the exact value is 0, within %(floor)s"
        ) % {"ordinal": _ordinal(n), "step": _power_of_ten(1 - n), "floor": f"{self.floor:g}"}

    def to_json(self) -> dict[str, Any]:
        """``{"mode": ..., "value": ...}``, plus ``"floor"`` when it is not the default."""
        out: dict[str, Any] = {"mode": self.mode, "value": self.value}
        if self.floor != FLOOR_DEFAULT:
            out["floor"] = self.floor
        return out

    @classmethod
    def from_spec(cls, obj: object) -> Tolerance:
        """Read a Tolerance, a mapping or a shorthand string; ValueError says what is allowed."""
        if isinstance(obj, Tolerance):
            return obj
        if isinstance(obj, Mapping):
            extra = set(obj) - {"mode", "value", "floor"}
            if extra or "mode" not in obj or "value" not in obj:
                what = (
                    f"unknown keys {sorted(map(str, extra))}" if extra else "missing mode or value"
                )
                raise ValueError(f"cannot read tolerance {dict(obj)!r} ({what}); {ALLOWED}")
            try:
                return cls(obj["mode"], obj["value"], obj.get("floor", FLOOR_DEFAULT))
            except ValueError as err:
                message = f"cannot read tolerance {dict(obj)!r} ({err}); {ALLOWED}"
                raise ValueError(message) from None
        if isinstance(obj, str):
            text = obj.strip()
            for mode, pattern in _SHORTHANDS:
                m = pattern.fullmatch(text)
                if not m:
                    continue
                try:
                    if mode in ("decimals", "sigfigs"):
                        return cls(mode, int(m.group(1)))
                    amount = Decimal(m.group(1))
                    if mode == "rel" and m.group(2) == "%":
                        amount /= 100  # exact in Decimal, so "rel 0.7%" is float("0.007")
                    return cls(mode, float(amount))
                except (ValueError, InvalidOperation) as err:
                    raise ValueError(f"cannot read tolerance {obj!r} ({err}); {ALLOWED}") from None
            raise ValueError(f"cannot read tolerance {obj!r}; {ALLOWED}")
        raise ValueError(f"cannot read tolerance {obj!r}; {ALLOWED}")


TOLERANCE_DEFAULT = Tolerance("decimals", 2)
