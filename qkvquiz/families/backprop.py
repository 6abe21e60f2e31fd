"""Backprop through attention: score gradients, the softmax backward, a whole layer, projections.

Every gradient is ∂L/∂(·) of a scalar loss L whose upstream gradient is given (∇S, ∇A, ∇Z or
∇Q). Each step reads only givens and earlier steps, so a later step can be re-run on a
student's own earlier answer (error carried forward), and each known mistake is the same step
with one slip in it.
"""

from __future__ import annotations

import dataclasses

from typing import Any

import numpy as np

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.attention import apply_mask, softmax, softmax_backward
from ..engine.backend import swap
from ..engine.masks import allowed_from_given
from ..engine.projection import linear, linear_backward, matvec, matvec_backward
from .qkv import ATTENTION_EXTRA, D_K, QK_GIVENS, ZERO_NOT_MINUS_INF, FORGOT_FACTOR, FORGOT_FACTOR_DK, FORGOT_FACTOR_DQ, MASK_PARAMS, QKV_GIVENS, SCALE_PARAMS, SIZE_PARAMS, WEIGHTS_INVARIANTS, check_mask_params, factor_shows, masked, masked_entries, n_keys, n_queries, not_saturated, qkv_params, raw_scores, sample_mask, sample_qkv, scale_from_width, scale_shows, score_factor, scores_of, square, stated_d_k, unscaled_asked
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
    rows_sum_to,
    transposable,
)

# Softmax's Jacobian has rows summing to 0 (adding a constant to a score row changes nothing),
# so every row of ∇S sums to 0.
DS_INVARIANTS = (
    rows_sum_to(0.0, "softmax_grad_rows_sum_to_zero",
                N_("Each row of ∇S must sum to 0: shifting a row of scores by a constant leaves the softmax unchanged.")),
)

GRAD_ENTRIES = int_range((-1, 1), "range of the integer entries of the upstream gradient")


def _inv_sqrt(d: int) -> float:
    return 1.0 / float(np.sqrt(d))


def _mostly_nonzero(*arrays, xp) -> np.ndarray:
    """True per variant when at least half of the entries of every array are non-zero."""
    ok = None
    for a in arrays:
        flat = a.reshape(a.shape[0], -1)
        this = (xp.abs(flat) > 1e-12).mean(axis=-1) >= 0.5
        ok = this if ok is None else ok & this
    return ok


def _rows_vary(x, xp) -> np.ndarray:
    """True per variant when no row of ``x`` is constant (a constant ∇A row gives a zero ∇S row)."""
    return ((x.max(axis=-1) - x.min(axis=-1)) > 0).all(axis=-1)


# --- backprop.scores ------------------------------------------------------------------------


def _sample_scores(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    glo, ghi = p.grad_entries
    n, m = n_queries(p), n_keys(p)
    return {
        "Q": draw.integers(lo, hi, (n, p.d_k)),
        "K": draw.integers(lo, hi, (m, p.d_k)),
        "dS": draw.integers(glo, ghi, (n, m)),
    }


def _dq_from(ds, k, p: Params):
    return (ds @ k) * score_factor(p)


def _dk_from(ds, q, p: Params):
    return (swap(ds) @ q) * score_factor(p)


def _scaled(p: Params) -> bool:
    return scale_shows(p)


def _several_tokens(p: Params) -> bool:
    """Whether ∇S can be told from its transpose (square, more than one token)."""
    return square(p)


def _same_count(p: Params) -> bool:
    # Multiplying ∇S by Q instead of K fits the shapes only with as many queries as keys.
    return n_queries(p) == n_keys(p)


SCORES = Family(
    name="backprop.scores",
    title=N_("Gradients of the scores"),
    summary=N_("Given ∇S for S = QKᵀ/√dₖ: ∇Q = ∇S K/√dₖ and ∇K = ∇Sᵀ Q/√dₖ."),
    params={
        "tokens": Param(3, "number of tokens n (rows of Q and K; ∇S is n×n)", low=1, high=8),
        **SIZE_PARAMS,
        "d_k": D_K,
        **SCALE_PARAMS,
        "entries": int_range((-2, 2), "range of the integer entries of Q and K"),
        "grad_entries": GRAD_ENTRIES,
        "decimals": DECIMALS,
    },
    givens=(
        *QK_GIVENS,
        Given("dS", r"\nabla S", N_("upstream gradient ∂L/∂S")),
    ),
    sample=_sample_scores,
    steps=(
        Step("dQ", r"\nabla Q", r"\nabla Q = \frac{\nabla S K}{\sqrt{d_k}}", N_("Compute the gradient of the queries"),
             lambda e, p, xp: _dq_from(e.dS, e.K, p), ("dS", "K")),
        Step("dK", r"\nabla K", r"\nabla K = \frac{\nabla S^\top Q}{\sqrt{d_k}}", N_("Compute the gradient of the keys"),
             lambda e, p, xp: _dk_from(e.dS, e.Q, p), ("dS", "Q")),
    ),
    default_ask=("dQ", "dK"),
    misconceptions=(
        Misconception("dQ", "transposed_dS", lambda e, p, xp: _dq_from(swap(e.dS), e.K, p),
                      N_("Used ∇Sᵀ K: row i of ∇Q collects row i of ∇S (query i's scores), so ∇Q = ∇S K/√dₖ."),
                      applies=_several_tokens),
        Misconception("dQ", "unscaled", lambda e, p, xp: e.dS @ e.K,
                      N_("The factor 1/√dₖ was forgotten: S = QKᵀ/√dₖ, so every gradient through S carries it."),
                      applies=_scaled),
        Misconception("dQ", "forgot_scale", lambda e, p, xp: e.dS @ e.K, FORGOT_FACTOR_DQ, applies=factor_shows,
                      screens=False),
        Misconception("dQ", "used_Q", lambda e, p, xp: _dq_from(e.dS, e.Q, p),
                      N_("Multiplied by Q: ∂Sᵢⱼ/∂Qᵢ = Kⱼ/√dₖ, so ∇Q = ∇S K/√dₖ uses the keys."), applies=_same_count),
        Misconception("dK", "untransposed_dS", lambda e, p, xp: _dk_from(swap(e.dS), e.Q, p),
                      N_("Used ∇S Q: key j is column j of S, so ∇K = ∇Sᵀ Q/√dₖ."), applies=_several_tokens),
        Misconception("dK", "unscaled", lambda e, p, xp: swap(e.dS) @ e.Q,
                      N_("The factor 1/√dₖ was forgotten: S = QKᵀ/√dₖ, so every gradient through S carries it."),
                      applies=_scaled),
        Misconception("dK", "forgot_scale", lambda e, p, xp: swap(e.dS) @ e.Q, FORGOT_FACTOR_DK,
                      applies=factor_shows, screens=False),
        Misconception("dK", "used_K", lambda e, p, xp: _dk_from(e.dS, e.K, p),
                      N_("Multiplied by K: ∂Sᵢⱼ/∂Kⱼ = Qᵢ/√dₖ, so ∇K = ∇Sᵀ Q/√dₖ uses the queries."),
                      applies=_same_count),
    ),
    accept=lambda e, p, xp: _mostly_nonzero(e.dQ, e.dK, xp=xp),
    extra=ATTENTION_EXTRA,
)


# --- backprop.softmax -----------------------------------------------------------------------


def _sample_softmax(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    glo, ghi = p.grad_entries
    n = p.tokens
    return {"S": draw.integers(lo, hi, (n, n)), "dA": draw.integers(glo, ghi, (n, n))}


def _softmax_grad(a, da, c):
    # ∇S_ij = Σ_l ∇A_il ∂A_il/∂S_ij = A_ij (∇A_ij − Σ_l ∇A_il A_il): the Jacobian diag(a) − aaᵀ per row.
    return a * (da - c[..., None])


SOFTMAX = Family(
    name="backprop.softmax",
    title=N_("Backprop through the softmax"),
    summary=N_("Given A = softmax(S) and ∇A: ∇S = A ⊙ (∇A − rowsum(∇A ⊙ A))."),
    params={
        "tokens": Param(3, "number of tokens n (S and A are n×n)", low=2, high=8),
        "entries": int_range((-1, 1), "range of the integer scores S"),
        "grad_entries": int_range((-2, 2), "range of the integer entries of ∇A"),
        "decimals": DECIMALS,
    },
    givens=(
        Given("S", "S", N_("scores")),
        Given("dA", r"\nabla A", N_("upstream gradient ∂L/∂A")),
    ),
    sample=_sample_softmax,
    steps=(
        Step("weights", "A", r"A_{ij} = \frac{e^{S_{ij}}}{\sum_l e^{S_{il}}}", N_("Compute the weights A = softmax(S) row by row"),
             lambda e, p, xp: softmax(e.S, xp=xp), ("S",), WEIGHTS_INVARIANTS),
        Step("rowdot", "c", r"c_i = \sum_j \nabla A_{ij} A_{ij}", N_("Compute each row's weighted sum cᵢ of the upstream gradient"),
             lambda e, p, xp: xp.sum(e.dA * e.weights, axis=-1), ("dA", "weights")),
        Step("dS", r"\nabla S", r"\nabla S_{ij} = A_{ij} (\nabla A_{ij} - c_i)", N_("Compute the gradient of the scores"),
             lambda e, p, xp: _softmax_grad(e.weights, e.dA, e.rowdot), ("weights", "dA", "rowdot"), DS_INVARIANTS),
    ),
    default_ask=("dS",),
    misconceptions=(
        Misconception("weights", "column_softmax", lambda e, p, xp: softmax(e.S, axis=-2, xp=xp),
                      N_("The softmax was taken down each column; it normalises each row (one query over all keys).")),
        Misconception("rowdot", "unweighted", lambda e, p, xp: xp.sum(e.dA, axis=-1),
                      N_("The row sum must weight each ∇Aᵢⱼ by Aᵢⱼ: cᵢ = Σⱼ ∇Aᵢⱼ Aᵢⱼ.")),
        Misconception("rowdot", "column_sum", lambda e, p, xp: xp.sum(e.dA * e.weights, axis=-2),
                      N_("Summed down a column; each row of A is its own softmax, so cᵢ sums along row i.")),
        Misconception("dS", "diagonal_only", lambda e, p, xp: e.weights * e.dA,
                      N_("Only the diagonal of the softmax Jacobian was used (A ⊙ ∇A); every Aᵢₗ depends on every "
                      "Sᵢⱼ of its row, which subtracts cᵢ = Σₗ ∇Aᵢₗ Aᵢₗ.")),
        Misconception("dS", "missing_outer_A", lambda e, p, xp: e.dA - e.rowdot[..., None],
                      N_("The factor Aᵢⱼ in front was forgotten: ∇Sᵢⱼ = Aᵢⱼ (∇Aᵢⱼ − cᵢ).")),
        Misconception("dS", "unweighted_sum", lambda e, p, xp: e.weights * (e.dA - xp.sum(e.dA, axis=-1)[..., None]),
                      N_("The subtracted term weights ∇A by A: cᵢ = Σₗ ∇Aᵢₗ Aᵢₗ, not Σₗ ∇Aᵢₗ.")),
        Misconception("dS", "column_sum",
                      lambda e, p, xp: e.weights * (e.dA - xp.sum(e.dA * e.weights, axis=-2)[..., None, :]),
                      N_("The subtracted term is a row sum (each row of A is its own softmax), not a column sum.")),
    ),
    accept=lambda e, p, xp: not_saturated(e.weights, xp.ones_like(e.S), xp) & _rows_vary(e.dA, xp),
)


# --- backprop.attention ---------------------------------------------------------------------


def _sample_attention(draw: Draw, p: Params) -> dict:
    glo, ghi = p.grad_entries
    n, m = n_queries(p), n_keys(p)
    qkv = {**sample_qkv(draw, p), "mask": sample_mask(draw, p, n, m)}
    return {**qkv, "dZ": draw.integers(glo, ghi, (n, p.d_v))}


def _several_keys(p: Params) -> bool:
    # With one key every weight is 1 and ∇S = 0: the scale's slips on ∇Q and ∇K are then 0 too.
    return n_keys(p) > 1


def _scale_slip(p: Params) -> bool:
    return _scaled(p) and _several_keys(p)


def _factor_slip(p: Params) -> bool:
    return factor_shows(p) and _several_keys(p)


def _zero_filled_scores(e: Env, p: Params, xp) -> Any:
    """The scores with 0 where the mask hides a key, instead of −∞ (a known mistake)."""
    return xp.where(allowed_from_given(e.mask, xp=xp), scores_of(e, p, xp), 0.0)


def _attention_ok(e: Env, p: Params, xp) -> np.ndarray:
    # Every row that can spread its weight must also pass a non-zero gradient to its scores.
    multi = (e.mask > 0.5).sum(axis=-1) >= 2
    moving = (xp.abs(e.dS) > 1e-12).any(axis=-1)
    # With one key ∇S = 0 whatever ∇A is: a zero ∇A would make skipping the softmax look right.
    reaches = (xp.abs(e.dA) > 1e-12).reshape(e.dA.shape[0], -1).any(axis=-1)
    return not_saturated(e.weights, e.mask, xp) & ~(multi & ~moving).any(axis=-1) & reaches


ATTENTION = Family(
    name="backprop.attention",
    title=N_("Backprop through an attention layer"),
    summary=N_("Z = softmax(QKᵀ/√dₖ + mask)V given ∇Z: ∇V, ∇A, ∇S, ∇Q, ∇K (forward S, A, Z too); "
               "cross-attention and any scale."),
    params={
        # One query against one key is queries: 1, keys: 1 (∇S, ∇Q and ∇K are then 0).
        **qkv_params(tokens=2),
        **SIZE_PARAMS,
        **SCALE_PARAMS,
        "grad_entries": GRAD_ENTRIES,
        **MASK_PARAMS,
        "decimals": DECIMALS,
    },
    givens=(*QKV_GIVENS, Given("dZ", r"\nabla Z", N_("upstream gradient ∂L/∂Z"))),
    sample=_sample_attention,
    steps=(
        Step("scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}",
             N_("Compute the scaled scores"),
             lambda e, p, xp: apply_mask(scores_of(e, p, xp), allowed_from_given(e.mask, xp=xp), xp=xp),
             ("Q", "K", "mask"), fixed=masked_entries),
        Step("weights", "A", r"A = \operatorname{softmax}(S)", N_("Compute the attention weights row by row"),
             lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS, fixed=masked_entries),
        Step("output", "Z", "Z = AV", N_("Compute the output"), lambda e, p, xp: e.weights @ e.V, ("weights", "V")),
        Step("dV", r"\nabla V", r"\nabla V = A^\top \nabla Z", N_("Compute the gradient of the values"),
             lambda e, p, xp: swap(e.weights) @ e.dZ, ("weights", "dZ")),
        Step("dA", r"\nabla A", r"\nabla A = \nabla Z V^\top", N_("Compute the gradient of the weights"),
             lambda e, p, xp: e.dZ @ swap(e.V), ("dZ", "V")),
        Step("dS", r"\nabla S", r"\nabla S = A \odot \left(\nabla A - \operatorname{rowsum}(\nabla A \odot A)\right)",
             N_("Compute the gradient of the scores"),
             lambda e, p, xp: softmax_backward(e.weights, e.dA, xp=xp), ("weights", "dA"), DS_INVARIANTS,
             fixed=masked_entries),  # ∇S is 0 where A is
        Step("dQ", r"\nabla Q", r"\nabla Q = \frac{\nabla S K}{\sqrt{d_k}}", N_("Compute the gradient of the queries"),
             lambda e, p, xp: _dq_from(e.dS, e.K, p), ("dS", "K")),
        Step("dK", r"\nabla K", r"\nabla K = \frac{\nabla S^\top Q}{\sqrt{d_k}}", N_("Compute the gradient of the keys"),
             lambda e, p, xp: _dk_from(e.dS, e.Q, p), ("dS", "Q")),
    ),
    default_ask=("dV", "dA", "dS", "dQ", "dK"),
    misconceptions=(
        Misconception("scores", "unscaled",
                      lambda e, p, xp: apply_mask(raw_scores(e.Q, e.K, xp), allowed_from_given(e.mask, xp=xp), xp=xp),
                      N_("The scores were not divided by √dₖ."), applies=scale_shows),
        Misconception("scores", "forgot_scale",
                      lambda e, p, xp: apply_mask(raw_scores(e.Q, e.K, xp), allowed_from_given(e.mask, xp=xp), xp=xp),
                      FORGOT_FACTOR, applies=factor_shows, screens=False),
        Misconception("scores", "scaled_anyway",
                      lambda e, p, xp: apply_mask(raw_scores(e.Q, e.K, xp) / np.sqrt(stated_d_k(p)),
                                                  allowed_from_given(e.mask, xp=xp), xp=xp),
                      N_("This problem asks for the raw dot products, without dividing by √dₖ."), applies=unscaled_asked),
        # A masked score written as 0, in some entries or all, and the weights that follow from all.
        Misconception("scores", "zero_not_minus_inf", _zero_filled_scores, ZERO_NOT_MINUS_INF, applies=masked,
                      entrywise=True, screens=False),
        Misconception("weights", "zero_not_minus_inf", lambda e, p, xp: softmax(_zero_filled_scores(e, p, xp), xp=xp),
                      ZERO_NOT_MINUS_INF, applies=masked, screens=False),
        # Transposed products fit the shapes only with as many queries as keys (more than one).
        Misconception("dV", "untransposed_weights", lambda e, p, xp: e.weights @ e.dZ,
                      N_("Used A ∇Z: value j reaches every query i through Aᵢⱼ, so ∇V = Aᵀ∇Z sums down column j."),
                      applies=square),
        Misconception("dA", "transposed", lambda e, p, xp: e.V @ swap(e.dZ),
                      N_("∇A is transposed: ∂Zᵢ/∂Aᵢⱼ = Vⱼ, so ∇Aᵢⱼ = ∇Zᵢ·Vⱼ, i.e. ∇A = ∇Z Vᵀ."), applies=square),
        Misconception("dS", "diagonal_only", lambda e, p, xp: e.weights * e.dA,
                      N_("Only the diagonal of the softmax Jacobian was used (A ⊙ ∇A); subtract each row's "
                      "rowsum(∇A ⊙ A) before multiplying by A.")),
        Misconception("dS", "skipped_softmax", lambda e, p, xp: e.dA * allowed_from_given(e.mask, xp=xp),
                      N_("∇A was passed through as ∇S: the softmax sits between S and A and needs its own backward step.")),
        Misconception("dQ", "transposed_dS", lambda e, p, xp: _dq_from(swap(e.dS), e.K, p),
                      N_("Used ∇Sᵀ K: row i of ∇Q collects row i of ∇S, so ∇Q = ∇S K/√dₖ."), applies=square),
        Misconception("dQ", "unscaled", lambda e, p, xp: e.dS @ e.K,
                      N_("The factor 1/√dₖ was forgotten in ∇Q = ∇S K/√dₖ."), applies=_scale_slip),
        Misconception("dQ", "forgot_scale", lambda e, p, xp: e.dS @ e.K, FORGOT_FACTOR_DQ, applies=_factor_slip,
                      screens=False),
        Misconception("dQ", "skipped_softmax", lambda e, p, xp: _dq_from(e.dA * allowed_from_given(e.mask, xp=xp), e.K, p),
                      N_("∇A was used in place of ∇S: go back through the softmax first, then ∇Q = ∇S K/√dₖ.")),
        Misconception("dK", "untransposed_dS", lambda e, p, xp: _dk_from(swap(e.dS), e.Q, p),
                      N_("Used ∇S Q: key j is column j of S, so ∇K = ∇Sᵀ Q/√dₖ."), applies=square),
        Misconception("dK", "unscaled", lambda e, p, xp: swap(e.dS) @ e.Q,
                      N_("The factor 1/√dₖ was forgotten in ∇K = ∇Sᵀ Q/√dₖ."), applies=_scale_slip),
        Misconception("dK", "forgot_scale", lambda e, p, xp: swap(e.dS) @ e.Q, FORGOT_FACTOR_DK, applies=_factor_slip,
                      screens=False),
        Misconception("dK", "skipped_softmax", lambda e, p, xp: _dk_from(e.dA * allowed_from_given(e.mask, xp=xp), e.Q, p),
                      N_("∇A was used in place of ∇S: go back through the softmax first, then ∇K = ∇Sᵀ Q/√dₖ.")),
    ),
    accept=_attention_ok,
    validate=check_mask_params,
    extra=ATTENTION_EXTRA,
)


# --- backprop.projection --------------------------------------------------------------------


def _vector(p: Params) -> bool:
    return p.form == "vector"


# W (d_out × d_in, or d_in × d_out for token rows) and its transpose.
_square = transposable("d_in", "d_out")


def _sample_projection(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    glo, ghi = p.grad_entries
    if _vector(p):
        return {
            "X": draw.integers(lo, hi, (p.d_in,)),
            "W": draw.integers(lo, hi, (p.d_out, p.d_in)),
            "dQ": draw.integers(glo, ghi, (p.d_out,)),
        }
    return {
        "X": draw.integers(lo, hi, (p.tokens, p.d_in)),
        "W": draw.integers(lo, hi, (p.d_in, p.d_out)),
        "dQ": draw.integers(glo, ghi, (p.tokens, p.d_out)),
    }


def _project(e: Env, p: Params, xp):
    return matvec(e.W, e.X, xp=xp) if _vector(p) else linear(e.X, e.W, xp=xp)


def _grads(e: Env, p: Params, xp):
    return matvec_backward(e.W, e.X, e.dQ, xp=xp) if _vector(p) else linear_backward(e.X, e.W, e.dQ, xp=xp)


def _dw_reversed(e: Env, p: Params, xp):
    # The outer product the wrong way round: x ∇qᵀ (vector form), ∇Qᵀ X (matrix form).
    if _vector(p):
        return e.X[..., :, None] * e.dQ[..., None, :]
    return swap(e.dQ) @ e.X


def _dx_untransposed(e: Env, p: Params, xp):
    if _vector(p):
        return matvec(e.W, e.dQ, xp=xp)
    return e.dQ @ e.W


PROJECTION = Family(
    name="backprop.projection",
    title=N_("Backprop through a projection"),
    summary=N_("Q = XW: ∇W = Xᵀ∇Q, ∇X = ∇Q Wᵀ; or one vector q = Wx: ∇W = ∇q xᵀ, ∇x = Wᵀ∇q."),
    params={
        "form": Param("matrix", "Q = XW for a matrix of token rows, or q = Wx for one column vector",
                      choices=("matrix", "vector")),
        "tokens": Param(2, "with form: matrix, number of tokens (rows of X)", low=1, high=8),
        "d_in": Param(3, "input dimension (length of a token x)", low=1, high=16),
        "d_out": Param(3, "output dimension (length of q); equal to d_in, the transposed mistakes fit the shape",
                       low=1, high=16),
        "entries": int_range((-2, 2), "range of the integer entries of X and W"),
        "grad_entries": GRAD_ENTRIES,
        "decimals": DECIMALS,
    },
    givens=(
        Given("X", "X", N_("inputs (one row per token; one column vector x in the vector form)")),
        Given("W", "W", N_("projection weights")),
        Given("dQ", r"\nabla Q", N_("upstream gradient ∂L/∂Q")),
    ),
    sample=_sample_projection,
    steps=(
        Step("output", "Q", r"Q = XW \quad (q = Wx)", N_("Compute the projection"),
             _project, ("X", "W")),
        Step("dW", r"\nabla W", r"\nabla W = X^\top \nabla Q \quad (\nabla W = \nabla q x^\top)",
             N_("Compute the gradient of the weights"), lambda e, p, xp: _grads(e, p, xp).dw, ("X", "W", "dQ")),
        Step("dX", r"\nabla X", r"\nabla X = \nabla Q W^\top \quad (\nabla x = W^\top \nabla q)",
             N_("Compute the gradient of the input"), lambda e, p, xp: _grads(e, p, xp).dx, ("X", "W", "dQ")),
    ),
    default_ask=("dW", "dX"),
    misconceptions=(
        Misconception("output", "transposed_W",
                      lambda e, p, xp: matvec(swap(e.W), e.X, xp=xp) if _vector(p) else e.X @ swap(e.W),
                      N_("W was transposed: qᵢ = Σⱼ Wᵢⱼ xⱼ (Q = XW for token rows)."), applies=_square),
        Misconception("dW", "reversed_outer", _dw_reversed,
                      N_("The gradient is transposed: ∂qᵢ/∂Wᵢⱼ = xⱼ, so ∇W = ∇q xᵀ has W's shape "
                      "(for token rows, ∇W = Xᵀ∇Q)."), applies=_square),
        Misconception("dW", "one_token",
                      lambda e, p, xp: swap(e.X[..., :1, :]) @ e.dQ[..., :1, :],
                      N_("Only the first token was counted: W is shared by every token, so ∇W = Xᵀ∇Q sums "
                      "the outer products of all of them."), applies=lambda p: not _vector(p) and p.tokens > 1),
        Misconception("dX", "untransposed_W", _dx_untransposed,
                      N_("W must be transposed: ∂qᵢ/∂xⱼ = Wᵢⱼ, so ∇x = Wᵀ∇q (∇X = ∇Q Wᵀ for token rows)."),
                      applies=_square),
    ),
    accept=lambda e, p, xp: _mostly_nonzero(e.dW, e.dX, xp=xp),
)

# √(Q's width) taken for the scale where the problem states another d_k (the later steps carry it).
ATTENTION = dataclasses.replace(ATTENTION, misconceptions=(*ATTENTION.misconceptions,
                                                           *scale_from_width(ATTENTION.steps, ("scores",))))

FAMILIES = (SCORES, SOFTMAX, ATTENTION, PROJECTION)
