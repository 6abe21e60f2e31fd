"""The residual connection and layer norm: Y = LN(X + Z) with γ, β and ε.

Each token row of H = X + Z is normalised over its d features with the biased variance
(divide by d) and ε inside the root, as in :mod:`qkvquiz.engine.layernorm`:
μ = mean(h), σ² = mean((h − μ)²), x̂ = (h − μ)/√(σ² + ε), y = γ ⊙ x̂ + β.

With ``zero_variance_row`` the last row of H is constant: σ² = 0 there, x̂ = 0/√ε = 0 and
y = β. Forgetting ε then divides 0 by 0; that mistake's value is NaN in that row, and the
tolerance never counts NaN as equal to a number, so the grader sees a different value.
Without a constant row, a small ε (the default 10⁻⁵) changes no answer at 2 decimals, so
"ε forgotten" is listed as a mistake only when it can be seen: with a constant row, or
with ε ≥ 0.1.
"""

from __future__ import annotations

import numpy as np

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.layernorm import EPS_DEFAULT, layer_norm
from .base import (
    DECIMALS,
    Env,
    Family,
    Given,
    Misconception,
    Param,
    Params,
    Step,
    int_range,
)

VISIBLE_EPS = 0.1  # from here on, leaving ε out changes answers at a couple of decimals


def _check(p: Params) -> None:
    if p.zero_variance_row and p.tokens < 2:
        raise ValueError("zero_variance_row needs tokens ≥ 2 (one constant row and at least one other)")
    if p.zero_variance_row and p.eps <= 0:
        raise ValueError("zero_variance_row needs eps > 0: without ε a constant row divides 0 by 0")


DRAWN = "drawn"


def _drawn_or_number(value: object) -> str | float:
    """``gamma`` / ``beta``: drawn per variant from their ranges, or one number for every feature."""
    if value == DRAWN:
        return DRAWN
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not abs(value) <= 1000:
        raise ValueError(f"must be {DRAWN} (integers drawn from the range) or one number between −1000 and 1000 "
                         f"for every feature (gamma: 1, beta: 0 for the plain normalisation), got {value!r}")
    return float(value)


def _sample(draw: Draw, p: Params) -> dict:
    xp = draw.xp
    lo, hi = p.entries
    n, d = p.tokens, p.d
    x = draw.integers(lo, hi, (n, d))
    z = draw.integers(lo, hi, (n, d))
    if p.zero_variance_row:
        # The last residual row becomes the constant c: Z's last row is c − X's last row, and
        # stays within `entries` when c lies in [max x + lo, min x + hi] (never empty, since
        # max x − min x ≤ hi − lo); c is drawn uniformly there.
        row = x[:, n - 1:, :]
        c_lo = row.max(axis=-1, keepdims=True) + lo
        span = row.min(axis=-1, keepdims=True) + hi - c_lo + 1
        c = c_lo + xp.floor(draw.uniform(0.0, 1.0, (1, 1)) * span)
        last = xp.arange(n) == n - 1
        z = xp.where(last[:, None], c - x, z)
    if not p.residual:
        z = xp.zeros_like(z)  # the problem normalises X itself
    glo, ghi = p.gamma_entries
    blo, bhi = p.beta_entries
    gamma, beta = draw.integers(glo, ghi, (d,)), draw.integers(blo, bhi, (d,))
    # Drawn either way, so that stating γ or β changes no other draw.
    if p.gamma != DRAWN:
        gamma = xp.full_like(gamma, p.gamma)
    if p.beta != DRAWN:
        beta = xp.full_like(beta, p.beta)
    return {"X": x, "Z": z, "gamma": gamma, "beta": beta}


def _stats(e: Env, p: Params, xp):
    return layer_norm(e.residual, e.gamma, e.beta, p.eps, xp=xp)


def _normalise(h, mean, var, eps: float, xp, *, root: bool = True):
    """(h − μ)/√(σ² + ε) per row, from given per-row μ and σ² (vectors over tokens)."""
    spread = var[..., :, None] + eps
    with np.errstate(divide="ignore", invalid="ignore"):  # ε forgotten on a constant row: 0/0
        return (h - mean[..., :, None]) / (xp.sqrt(spread) if root else spread)


def _scale_shift(xhat, e: Env):
    return e.gamma[..., None, :] * xhat + e.beta[..., None, :]


def _unbiased(e: Env, p: Params, xp):
    return e.var * (p.d / (p.d - 1))


def _accept(e: Env, p: Params, xp):
    # Every row that is not the designated constant one must have a spread to normalise.
    var = e.var[..., :-1] if p.zero_variance_row else e.var
    return (var > 1e-12).all(axis=-1)


_WRONG_XHAT = {
    "unbiased_variance": (
        lambda e, p, xp: _normalise(e.residual, e.mean, _unbiased(e, p, xp), p.eps, xp),
        lambda p: p.d > 1,
        N_("Layer norm uses the biased variance, dividing by d (the number of features), not d − 1."),
    ),
    "eps_forgotten": (
        lambda e, p, xp: _normalise(e.residual, e.mean, e.var, 0.0, xp),
        lambda p: p.zero_variance_row or p.eps >= VISIBLE_EPS,
        N_("ε goes inside the root, √(σ² + ε); it is what keeps a constant row (σ² = 0) from dividing 0 by 0."),
    ),
    "no_square_root": (
        lambda e, p, xp: _normalise(e.residual, e.mean, e.var, p.eps, xp, root=False),
        None,
        N_("Divide by the standard deviation √(σ² + ε), not by the variance."),
    ),
}


def _mistakes() -> tuple[Misconception, ...]:
    out = [
        Misconception("var", "unbiased_variance", _unbiased, _WRONG_XHAT["unbiased_variance"][2],
                      applies=_WRONG_XHAT["unbiased_variance"][1]),
    ]
    for name, (xhat, applies, feedback) in _WRONG_XHAT.items():
        out.append(Misconception("normalized", name, xhat, feedback, applies=applies))
        out.append(Misconception("output", name, (lambda f: lambda e, p, xp: _scale_shift(f(e, p, xp), e))(xhat),
                                 feedback, applies=applies))
    return tuple(out)


LAYERNORM = Family(
    name="attention.layernorm",
    title=N_("Residual connection and layer norm"),
    summary=N_("Y = LN(X + Z) row by row: mean, biased variance, (h − μ)/√(σ² + ε), then γ and β."),
    params={
        "tokens": Param(2, "number of tokens n (rows)", low=1, high=8),
        "d": Param(4, "features per token d", low=2, high=16),
        "entries": int_range((-2, 2), "range of the integer entries of X and Z"),
        "gamma_entries": int_range((1, 2), "range of the integer entries of γ"),
        "beta_entries": int_range((-1, 1), "range of the integer entries of β"),
        "gamma": Param(DRAWN, "γ: drawn (from gamma_entries) or one number for every feature, such as 1",
                       convert=_drawn_or_number),
        "beta": Param(DRAWN, "β: drawn (from beta_entries) or one number for every feature, such as 0",
                      convert=_drawn_or_number),
        "residual": Param(True, "add the sublayer's output Z first (false: normalise X itself, Z = 0)"),
        "eps": Param(EPS_DEFAULT, "ε added to the variance inside the root", low=0.0, high=1.0),
        "zero_variance_row": Param(False, "make the last row of X + Z constant (σ² = 0)"),
        "decimals": DECIMALS,
    },
    givens=(
        Given("X", "X", N_("input to the sublayer, one row per token")),
        Given("Z", "Z", N_("the sublayer's output")),
        Given("gamma", r"\gamma", N_("gain")),
        Given("beta", r"\beta", N_("bias")),
    ),
    sample=_sample,
    steps=(
        Step("residual", "H", "H = X + Z", N_("Add the residual"), lambda e, p, xp: e.X + e.Z, ("X", "Z")),
        Step(
            "mean", r"\mu", r"\mu_i = \frac{1}{d}\sum_j H_{ij}", N_("Compute each row's mean"),
            lambda e, p, xp: _stats(e, p, xp).mean[..., 0], ("residual",),
        ),
        Step(
            "var", r"\sigma^2", r"\sigma^2_i = \frac{1}{d}\sum_j (H_{ij} - \mu_i)^2",
            N_("Compute each row's variance (divide by d)"),
            lambda e, p, xp: _stats(e, p, xp).var[..., 0], ("residual",),
        ),
        Step(
            "normalized", r"\hat H", r"\hat H_{ij} = \frac{H_{ij} - \mu_i}{\sqrt{\sigma^2_i + \varepsilon}}",
            N_("Normalise each row"),
            lambda e, p, xp: _normalise(e.residual, e.mean, e.var, p.eps, xp), ("residual", "mean", "var"),
        ),
        Step(
            "output", "Y", r"Y_{ij} = \gamma_j \hat H_{ij} + \beta_j", N_("Scale by γ and shift by β"),
            lambda e, p, xp: _scale_shift(e.normalized, e), ("normalized", "gamma", "beta"),
        ),
    ),
    default_ask=("residual", "mean", "var", "normalized", "output"),
    misconceptions=_mistakes(),
    accept=_accept,
    validate=_check,
)

FAMILIES = (LAYERNORM,)
