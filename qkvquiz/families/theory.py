"""Why attention looks the way it does: the variance of q·k, the softmax Jacobian, cost counts.

- ``theory.dot_variance``: with independent entries of mean 0 and variance v, each product
  q_l k_l has variance v², so Var(q·k) = d_k v² (d_k for unit variance), σ = √d_k·v, about
  99.7 % of scores lie in [−3σ, 3σ], and dividing by √dₖ divides the variance by dₖ.
  An optional empirical check hands out a few drawn pairs of ±√v vectors (mean 0, variance v
  exactly) and asks for the sample mean and variance of their dot products.
- ``theory.softmax_jacobian``: ∂p_j/∂z_k = p_j(δ_jk − p_k), i.e. J = diag(p) − ppᵀ; when one
  logit dominates, p is nearly one-hot and every entry of J is nearly 0 (gradients vanish).
- ``theory.complexity``: multiplication counts of dot-product against additive attention.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.attention import softmax
from .qkv import SATURATED
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
    whole_at_least,
)

# --- theory.dot_variance ------------------------------------------------------------------


def _square_roots(p: Params) -> tuple[int, int]:
    lo, hi = p.d_k_range
    return math.ceil(math.sqrt(lo) - 1e-9), math.floor(math.sqrt(hi) + 1e-9)


def _check_variance(p: Params) -> None:
    lo, hi = p.d_k_range
    if lo < 1 or lo != int(lo) or hi != int(hi):
        raise ValueError(f"d_k_range must hold whole numbers ≥ 1, got {list(p.d_k_range)}")
    first, last = _square_roots(p)
    if p.squares and first > last:
        raise ValueError(f"d_k_range {list(p.d_k_range)} holds no perfect square; widen it or set squares: false")


def _sample_variance(draw: Draw, p: Params) -> dict:
    if p.squares:
        first, last = _square_roots(p)
        d_k = draw.integers(first, last) ** 2
    else:
        lo, hi = p.d_k_range
        d_k = draw.integers(int(lo), int(hi))
    # Entries ±√v: mean 0 and variance exactly v, and whole numbers when v = 1.
    root = math.sqrt(p.entry_var)
    signs = lambda: 2.0 * draw.integers(0, 1, (p.pairs, p.check_dim)) - 1.0  # noqa: E731
    return {"d_k": d_k, "q_samples": root * signs(), "k_samples": root * signs()}


def _sample_var(x, xp, ddof: int = 0):
    m = x.shape[-1]
    centred = x - xp.mean(x, axis=-1, keepdims=True)
    return xp.sum(centred * centred, axis=-1) / (m - ddof)


def _variance_accept(e: Env, p: Params, xp):
    # Dot products that all agree leave nothing to average.
    return _sample_var(e.dots, xp) > 1e-12


DOT_VARIANCE = Family(
    name="theory.dot_variance",
    title=N_("Why divide by √dₖ: the variance of q·k"),
    summary=N_("Var(q·k) = dₖ·v² for independent entries of variance v; σ, the 3σ range, the variance after 1/√dₖ; an empirical check."),
    params={
        "d_k_range": int_range((16, 144), "range d_k is drawn from", bound=1_000_000),
        "squares": Param(True, "draw only perfect squares, so that σ = √d_k is a whole number"),
        "entry_var": Param(1.0, "variance v of each entry of q and k (1: unit variance)", low=0.1, high=100.0),
        "pairs": Param(4, "empirical check: how many (q, k) pairs are drawn", low=2, high=16),
        "check_dim": Param(4, "empirical check: entries per drawn vector", low=1, high=64),
        "decimals": DECIMALS,
    },
    givens=(
        Given("d_k", "d_k", N_("dimension of queries and keys"), check=whole_at_least(1)),
        Given("q_samples", "Q", N_("drawn queries for the empirical check, one per row")),
        Given("k_samples", "K", N_("drawn keys for the empirical check, one per row")),
    ),
    sample=_sample_variance,
    steps=(
        Step("variance", r"\operatorname{Var}(q \cdot k)",
             r"\operatorname{Var}(q \cdot k) = \sum_{l=1}^{d_k} \operatorname{Var}(q_l k_l) = d_k v^2",
             N_("Compute the variance of the dot product q·k"), lambda e, p, xp: e.d_k * p.entry_var ** 2, ("d_k",)),
        Step("std", r"\sigma", r"\sigma = \sqrt{\operatorname{Var}(q \cdot k)}", N_("Compute its standard deviation σ"),
             lambda e, p, xp: xp.sqrt(e.variance), ("variance",)),
        Step("three_sigma", r"3\sigma", r"3\sigma",
             N_("About 99.7 percent of the scores lie in [−3σ, 3σ]: give the upper end 3σ"),
             lambda e, p, xp: 3.0 * e.std, ("std",)),
        Step("scaled_variance", r"\operatorname{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right)",
             r"\operatorname{Var}\!\left(\frac{q \cdot k}{\sqrt{d_k}}\right) = \frac{\operatorname{Var}(q \cdot k)}{d_k}",
             N_("Compute the variance of the scaled score q·k/√dₖ"),
             lambda e, p, xp: e.variance / e.d_k, ("variance", "d_k")),
        Step("dots", "s", r"s_r = q^{(r)} \cdot k^{(r)}", N_("Compute the dot product of each drawn pair"),
             lambda e, p, xp: xp.sum(e.q_samples * e.k_samples, axis=-1), ("q_samples", "k_samples")),
        Step("sample_mean", r"\bar s", r"\bar s = \frac{1}{m}\sum_r s_r", N_("Compute their sample mean"),
             lambda e, p, xp: xp.mean(e.dots, axis=-1), ("dots",)),
        Step("sample_var", r"\hat\sigma^2", r"\hat\sigma^2 = \frac{1}{m}\sum_r (s_r - \bar s)^2",
             N_("Compute their sample variance (divide by m, the number of pairs)"),
             lambda e, p, xp: _sample_var(e.dots, xp), ("dots",)),
    ),
    default_ask=("variance", "std", "three_sigma", "scaled_variance"),
    misconceptions=(
        Misconception("variance", "one_term", lambda e, p, xp: xp.full_like(e.variance, p.entry_var ** 2),
                      N_("The dₖ products qₗ kₗ are independent, so their variances add up: dₖ of them, not one.")),
        Misconception("variance", "variance_not_squared", lambda e, p, xp: e.d_k * p.entry_var,
                      N_("Var(qₗ kₗ) = E[qₗ²]·E[kₗ²] = v·v = v², so each term contributes v², not v."),
                      applies=lambda p: p.entry_var != 1),
        Misconception("std", "no_root", lambda e, p, xp: e.variance,
                      N_("The standard deviation is the square root of the variance.")),
        Misconception("three_sigma", "three_variances", lambda e, p, xp: 3.0 * e.variance,
                      N_("The 3σ range uses the standard deviation σ = √Var, not the variance.")),
        Misconception("scaled_variance", "divided_by_root", lambda e, p, xp: e.variance / xp.sqrt(e.d_k),
                      N_("Scaling by c multiplies the variance by c²: dividing by √dₖ divides the variance by dₖ.")),
        Misconception("sample_var", "divided_by_m_minus_1", lambda e, p, xp: _sample_var(e.dots, xp, ddof=1),
                      N_("This problem's sample variance divides by m, the number of pairs, not by m − 1.")),
    ),
    accept=_variance_accept,
    validate=_check_variance,
)


# --- theory.softmax_jacobian --------------------------------------------------------------


def _sample_logits(draw: Draw, p: Params) -> dict:
    xp = draw.xp
    lo, hi = p.entries
    z = draw.integers(lo, hi, (p.size,))
    if p.case == "saturated":
        # One logit sits `gap` above the largest of the others: p is nearly one-hot.
        top = draw.choice(p.size)
        at_top = xp.arange(p.size) == top[:, None]
        rest = xp.max(xp.where(at_top, -xp.inf, z), axis=-1, keepdims=True)
        z = xp.where(at_top, rest + p.gap, z)
    return {"z": z}


def _jacobian(p_vec, xp):
    eye = xp.eye(p_vec.shape[-1], dtype=np.float64)
    return p_vec[..., :, None] * (eye - p_vec[..., None, :])


def _moderate(p: Params) -> bool:
    # Saturated, every mistaken Jacobian is as close to 0 as the right one: nothing to tell apart.
    return p.case == "moderate"


def _jacobian_accept(e: Env, p: Params, xp):
    if p.case == "saturated":
        return xp.ones(e.probs.shape[:-1], dtype=bool)
    # Not saturated, and not all logits equal (a uniform p hides which entry is which).
    return (e.probs.max(axis=-1) <= SATURATED) & (e.z.max(axis=-1) > e.z.min(axis=-1))


def _off_diagonal_plus(e: Env, p: Params, xp):
    eye = xp.eye(e.probs.shape[-1], dtype=bool)
    return xp.where(eye, e.jacobian, -e.jacobian)


SOFTMAX_JACOBIAN = Family(
    name="theory.softmax_jacobian",
    title=N_("The softmax Jacobian"),
    summary=N_("∂pⱼ/∂zₖ = pⱼ(δⱼₖ − pₖ) for given logits z, and how it vanishes when softmax saturates."),
    params={
        "size": Param(3, "number of logits n", low=2, high=8),
        "entries": int_range((-2, 2), "range of the integer logits"),
        "case": Param("moderate", "moderate logits, or saturated (one logit far above the rest)",
                      choices=("moderate", "saturated")),
        "gap": Param(12, "saturated: how far the largest logit sits above the others", low=5, high=60),
        "decimals": DECIMALS,
    },
    givens=(Given("z", "z", N_("logits")),),
    sample=_sample_logits,
    steps=(
        Step("probs", "p", r"p_j = \frac{e^{z_j}}{\sum_i e^{z_i}}", N_("Compute p = softmax(z)"),
             lambda e, p, xp: softmax(e.z, xp=xp), ("z",)),
        Step("jacobian", "J", r"J_{jk} = \frac{\partial p_j}{\partial z_k} = p_j(\delta_{jk} - p_k)",
             N_("Compute the Jacobian J (row j: pⱼ, column k: zₖ)"), lambda e, p, xp: _jacobian(e.probs, xp), ("probs",)),
        Step("largest", r"\max_{j,k} |J_{jk}|", r"\max_{j,k} |J_{jk}|", N_("Give the largest entry of J in absolute value"),
             lambda e, p, xp: xp.abs(e.jacobian).max(axis=(-2, -1)), ("jacobian",)),
    ),
    default_ask=("probs", "jacobian"),
    misconceptions=(
        Misconception("jacobian", "diagonal_only", lambda e, p, xp: _jacobian(e.probs, xp) * xp.eye(p.size),
                      N_("Every pⱼ depends on every zₖ through the sum in the denominator: off the diagonal "
                      "∂pⱼ/∂zₖ = −pⱼ pₖ, not 0."), applies=_moderate),
        Misconception("jacobian", "plus_off_diagonal", _off_diagonal_plus,
                      N_("Off the diagonal ∂pⱼ/∂zₖ = −pⱼ pₖ: raising another logit takes probability away from pⱼ."),
                      applies=_moderate),
        Misconception("jacobian", "negated", lambda e, p, xp: -e.jacobian,
                      N_("The signs are flipped: J = diag(p) − ppᵀ, positive on the diagonal (raising zⱼ raises pⱼ)."),
                      applies=_moderate),
    ),
    accept=_jacobian_accept,
)


# --- theory.complexity --------------------------------------------------------------------


def _sample_sizes(draw: Draw, p: Params) -> dict:
    nlo, nhi = p.n_range
    dlo, dhi = p.d_range
    return {"n": draw.integers(int(nlo), int(nhi)), "d": draw.integers(int(dlo), int(dhi))}


def _check_sizes(p: Params) -> None:
    for name in ("n_range", "d_range"):
        lo, hi = p[name]
        if lo < 1 or lo != int(lo) or hi != int(hi):
            raise ValueError(f"{name} must hold whole numbers ≥ 1, got {list(p[name])}")


def _additive(n, d, reuse: bool):
    # Per pair: W_a q_i (d·d), U_a k_j (d·d) and v_aᵀ tanh(·) (d). With reuse, the two
    # matrix-vector products are done once per query and once per key instead of per pair.
    if reuse:
        return 2 * n * d * d + n * n * d
    return n * n * (2 * d * d + d)


COMPLEXITY = Family(
    name="theory.complexity",
    title=N_("Cost of dot-product against additive attention"),
    summary=N_("Multiplications for the n×n scores: n²d for QKᵀ, n²(2d² + d) for additive attention (or 2nd² + n²d reusing projections)."),
    params={
        # n²d and 2nd² stay below 2⁵³, so every count is exact in float64.
        "n_range": int_range((2, 8), "range the sequence length n is drawn from", bound=100_000),
        "d_range": int_range((2, 8), "range the width d is drawn from", bound=100_000),
        "reuse": Param(False, "additive attention computes W_a q_i and U_a k_j once each, not once per pair"),
        "decimals": Param(3, "decimals shown in the key (the counts are whole numbers)", low=0, high=8),
    },
    givens=(Given("n", "n", N_("sequence length"), check=whole_at_least(1)),
            Given("d", "d", N_("width of queries, keys and values"), check=whole_at_least(1))),
    sample=_sample_sizes,
    steps=(
        Step("dot_scores", r"N_{QK^\top}", r"N_{QK^\top} = n \cdot n \cdot d",
             N_("Count the multiplications of the dot-product scores QKᵀ"),
             lambda e, p, xp: e.n * e.n * e.d, ("n", "d")),
        Step("dot_total", r"N_{\text{dot}}", r"N_{\text{dot}} = n^2 d + n^2 d = 2n^2 d",
             N_("Count the multiplications of dot-product attention, scores and AV together"),
             lambda e, p, xp: e.dot_scores + e.n * e.n * e.d, ("dot_scores", "n", "d")),
        Step("additive_scores", r"N_{\text{add}}",
             N_(r"N_{\text{add}} = n^2(2d^2 + d) \text{ per pair, or } 2nd^2 + n^2 d \text{ reusing } W_a q_i, U_a k_j"),
             N_("Count the multiplications of the additive scores"),
             lambda e, p, xp: _additive(e.n, e.d, p.reuse), ("n", "d")),
        Step("ratio", r"N_{\text{add}} / N_{QK^\top}", r"N_{\text{add}} / N_{QK^\top}",
             N_("Compute the ratio of the additive count to the QKᵀ count"),
             lambda e, p, xp: e.additive_scores / e.dot_scores, ("additive_scores", "dot_scores")),
    ),
    default_ask=("dot_scores", "dot_total", "additive_scores", "ratio"),
    misconceptions=(
        Misconception("dot_scores", "n_d_squared", lambda e, p, xp: e.n * e.d * e.d,
                      N_("There are n·n scores and each is one dot product of length d: n·n·d multiplications.")),
        Misconception("dot_scores", "one_query", lambda e, p, xp: e.n * e.d,
                      N_("Every one of the n queries is scored against all n keys: n·n dot products of d multiplications.")),
        Misconception("dot_total", "scores_only", lambda e, p, xp: e.dot_scores,
                      N_("The weighted sum AV costs another n·n·d multiplications on top of QKᵀ.")),
        Misconception("additive_scores", "like_dot_product", lambda e, p, xp: e.n * e.n * e.d,
                      N_("Each additive score first applies two d×d matrices (d² multiplications each) before vₐᵀtanh(·).")),
        Misconception("additive_scores", "one_matrix",
                      lambda e, p, xp: _additive(e.n, e.d, p.reuse) - (e.n if p.reuse else e.n * e.n) * e.d * e.d,
                      N_("Both Wₐ qᵢ and Uₐ kⱼ are d×d matrix-vector products; count d² multiplications for each.")),
        Misconception("additive_scores", "reuse_mixed_up", lambda e, p, xp: _additive(e.n, e.d, not p.reuse),
                      N_("Follow the counting convention stated: whether Wₐ qᵢ and Uₐ kⱼ are computed once "
                      "or again for every pair.")),
        Misconception("ratio", "inverted", lambda e, p, xp: e.dot_scores / e.additive_scores,
                      N_("The ratio asked is additive over dot-product; additive attention costs more, so it exceeds 1.")),
    ),
    validate=_check_sizes,
)

FAMILIES = (DOT_VARIANCE, SOFTMAX_JACOBIAN, COMPLEXITY)
