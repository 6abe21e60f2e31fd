"""Softmax attention forward: scores, weights, output (every mask kind), masks, swapping Q and K."""

from __future__ import annotations

import numpy as np

from ..engine.attention import apply_mask, scaled_scores, softmax
from ..engine.backend import swap
from ..engine.masks import MASK_KINDS, allowed_from_given, causal_allowed, padding_allowed
from ..seeding import Draw
from .base import DECIMALS, Env, Family, Given, Misconception, Param, Params, Step, rows_sum_to, zero_where

SATURATED = 0.95  # a row whose largest weight exceeds this teaches nothing by hand


def _check_mask_params(p: Params) -> None:
    # At least two keys must stay visible: with one, every softmax row is (1, 0, …) and there
    # is nothing to compute (and every gradient through it vanishes).
    if p.mask == "padding" and not 0 < p.padded <= p.tokens - 2:
        raise ValueError(
            f"with mask: padding, at least 2 keys must stay unpadded: padded must be from 1 to tokens − 2 "
            f"(tokens is {p.tokens}), got {p.padded}"
        )


MASK_PARAMS = {
    "mask": Param("none", "which keys each query may attend to", choices=MASK_KINDS),
    "padded": Param(1, "with mask: padding, how many trailing keys are padding", low=1, high=8),
}


def qkv_params(tokens: int = 3) -> dict[str, Param]:
    """Sizes and entry ranges of Q, K, V, shared by the families that run an attention layer."""
    return {
        "tokens": Param(tokens, "number of tokens n", low=2, high=8),
        "d_k": Param(4, "query/key dimension d_k (4 makes √d_k = 2)", low=1, high=16),
        "d_v": Param(2, "value dimension d_v", low=1, high=16),
        "entries": Param((-1, 1), "range of the integer entries of Q and K"),
        "v_entries": Param((-2, 2), "range of the integer entries of V"),
    }


QKV_GIVENS = (
    Given("Q", "Q", "queries"), Given("K", "K", "keys"), Given("V", "V", "values"),
    Given("mask", "M", "mask: 1 where the query may attend to the key"),
)


def sample_qkv(draw: Draw, p: Params) -> dict:
    """Integer Q, K (n × d_k) and V (n × d_v) per variant, drawn in that order."""
    lo, hi = p.entries
    vlo, vhi = p.v_entries
    n = p.tokens
    return {
        "Q": draw.integers(lo, hi, (n, p.d_k)),
        "K": draw.integers(lo, hi, (n, p.d_k)),
        "V": draw.integers(vlo, vhi, (n, p.d_v)),
    }


def sample_mask(draw: Draw, p: Params, n: int) -> np.ndarray:
    """A 0/1 mask per variant (1 = allowed); random masks keep at least one key per query."""
    xp = draw.xp
    if p.mask == "random":
        # Each pair allowed with probability 0.6; rows left empty get their diagonal back.
        allowed = draw.uniform(0.0, 1.0, (n, n)) < 0.6
        empty = ~allowed.any(axis=-1, keepdims=True)
        allowed = allowed | (empty & xp.eye(n, dtype=bool))
    elif p.mask == "causal":
        allowed = xp.broadcast_to(causal_allowed(n, xp=xp), (draw.size, n, n))
    elif p.mask == "padding":
        allowed = xp.broadcast_to(padding_allowed(n, n, p.padded, xp=xp), (draw.size, n, n))
    else:
        allowed = xp.ones((draw.size, n, n), dtype=bool)
    return allowed.astype(np.float64)


def not_saturated(weights, mask, xp) -> np.ndarray:
    """True per variant when no row with two or more allowed keys puts > 95 % on one key."""
    multi = (mask > 0.5).sum(axis=-1) >= 2
    return ~((weights.max(axis=-1) > SATURATED) & multi).any(axis=-1)


def masked(p: Params) -> bool:
    return p.mask != "none"


MASK_MISTAKES = (
    Misconception(
        "weights", "mask_after_softmax",
        lambda e, p, xp: softmax(e.unmasked, xp=xp) * allowed_from_given(e.mask, xp=xp),
        "The mask was applied after the softmax: masked scores must be −∞ before the softmax, "
        "so that the remaining weights of each row still sum to 1.",
        applies=masked,
    ),
    Misconception(
        "weights", "zero_not_minus_inf",
        lambda e, p, xp: softmax(xp.where(allowed_from_given(e.mask, xp=xp), e.unmasked, 0.0), xp=xp),
        "Masked scores were set to 0 instead of −∞; exp(0) = 1, so masked keys still got weight.",
        applies=masked,
    ),
)

# What every right A has, whatever the slip: checked on wrong answers, and no credit is carried
# forward from weights that break them.
WEIGHTS_INVARIANTS = (
    rows_sum_to(
        1.0, "rows_sum_to_one",
        "Each row of A must sum to 1 (every row with at least one allowed key): softmax normalises each row.",
        rows=lambda e, p, xp: allowed_from_given(e.mask, xp=xp).any(axis=-1),
    ),
    zero_where(
        lambda e, p, xp: ~allowed_from_given(e.mask, xp=xp), "masked_zero",
        "Masked entries of A must be 0: a masked key gets no weight.",
        applies=masked,
    ),
)

COLUMN_SOFTMAX = Misconception(
    "weights", "column_softmax",
    lambda e, p, xp: softmax(e.scores, axis=-2, xp=xp),
    "The softmax was taken down each column; it normalises each row (one query over all keys).",
)


# --- attention.scores ---------------------------------------------------------------------


def _sample_scores(draw: Draw, p: Params) -> dict:
    shape = (p.d_k,) if p.form == "vector" else (p.tokens, p.d_k)
    lo, hi = p.entries
    return {"Q": draw.integers(lo, hi, shape), "K": draw.integers(lo, hi, shape)}


def _scores(e: Env, p: Params, xp) -> np.ndarray:
    if p.form == "vector":
        s = xp.sum(e.Q * e.K, axis=-1)
        return s / np.sqrt(p.d_k) if p.scaled else s
    return scaled_scores(e.Q, e.K, scale=p.scaled, xp=xp)


def _scores_nonzero(e: Env, p: Params, xp) -> np.ndarray:
    # An all-zero score teaches nothing and hides the scaling mistakes.
    s = e.scores.reshape(e.scores.shape[0], -1)
    return (xp.abs(s) > 0).mean(axis=-1) >= 0.5


SCORES = Family(
    name="attention.scores",
    title="Scaled dot-product scores",
    summary="S = QKᵀ/√d_k for matrices, or one query against one key (optionally unscaled).",
    params={
        "form": Param("matrix", "one query·key pair or the whole score matrix", choices=("vector", "matrix")),
        "tokens": Param(3, "number of tokens n (rows of Q and K)", low=1, high=8),
        "d_k": Param(4, "key dimension d_k (4 makes √d_k = 2, easy by hand)", low=1, high=16),
        "entries": Param((-2, 2), "range of the integer entries of Q and K"),
        "scaled": Param(True, "divide by √d_k (false: the raw dot product)"),
        "decimals": DECIMALS,
    },
    givens=(Given("Q", "Q", "queries, one row per token"), Given("K", "K", "keys, one row per token")),
    sample=_sample_scores,
    steps=(
        Step("scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", "Compute the scores", _scores, ("Q", "K")),
    ),
    default_ask=("scores",),
    misconceptions=(
        Misconception(
            "scores", "unscaled", lambda e, p, xp: _scores(e, Params({**p, "scaled": False}), xp),
            "The scores were not divided by √d_k.", applies=lambda p: p.scaled,
        ),
        Misconception(
            "scores", "divided_by_d", lambda e, p, xp: _scores(e, Params({**p, "scaled": False}), xp) / p.d_k,
            "The scores were divided by d_k; the scale is 1/√d_k.", applies=lambda p: p.scaled and p.d_k != 1,
        ),
        Misconception(
            "scores", "scaled_anyway", lambda e, p, xp: _scores(e, Params({**p, "scaled": True}), xp),
            "This problem asks for the raw dot products, without dividing by √d_k.",
            applies=lambda p: not p.scaled and p.d_k != 1,
        ),
        Misconception(
            "scores", "transposed", lambda e, p, xp: swap(_scores(e, p, xp)),
            "The score matrix is transposed: row i holds query i against every key (S = QKᵀ, not KQᵀ).",
            applies=lambda p: p.form == "matrix",
        ),
    ),
    accept=_scores_nonzero,
)


# --- attention.weights --------------------------------------------------------------------


def _sample_weights(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    return {"S": draw.integers(lo, hi, (p.tokens, p.tokens)), "mask": sample_mask(draw, p, p.tokens)}


WEIGHTS = Family(
    name="attention.weights",
    title="Softmax attention weights",
    summary="A = softmax(S) row by row, with no mask, a causal, padding or explicit mask.",
    params={
        "tokens": Param(3, "number of tokens n (S is n×n)", low=2, high=8),
        "entries": Param((-2, 2), "range of the integer scores"),
        **MASK_PARAMS,
        "decimals": DECIMALS,
    },
    givens=(Given("S", "S", "attention scores"), Given("mask", "M", "mask: 1 where the query may attend to the key")),
    sample=_sample_weights,
    steps=(
        Step("unmasked", "S", "S", "", lambda e, p, xp: e.S, ("S",)),
        Step(
            "scores", r"\tilde S", r"\tilde S_{ij} = S_{ij} \text{ if } M_{ij} = 1, \text{ else } -\infty",
            "Write the masked score matrix (−∞ where masked)",
            lambda e, p, xp: apply_mask(e.S, allowed_from_given(e.mask, xp=xp), xp=xp), ("S", "mask"),
        ),
        Step(
            "weights", "A", r"A_{ij} = \frac{e^{\tilde S_{ij}}}{\sum_{l} e^{\tilde S_{il}}}",
            "Compute the attention weights A = softmax(S̃) row by row",
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS,
        ),
    ),
    default_ask=("weights",),
    misconceptions=(COLUMN_SOFTMAX, *MASK_MISTAKES),
    accept=lambda e, p, xp: not_saturated(e.weights, e.mask, xp),
    validate=_check_mask_params,
)


# --- attention.output ---------------------------------------------------------------------


def _sample_output(draw: Draw, p: Params) -> dict:
    return {**sample_qkv(draw, p), "mask": sample_mask(draw, p, p.tokens)}


OUTPUT = Family(
    name="attention.output",
    title="Attention output",
    summary="Z = softmax(QKᵀ/√d_k + mask) V, asking for any of S, A and Z.",
    params={**qkv_params(), **MASK_PARAMS, "decimals": DECIMALS},
    givens=QKV_GIVENS,
    sample=_sample_output,
    steps=(
        Step("unmasked", "S", "S", "", lambda e, p, xp: scaled_scores(e.Q, e.K, xp=xp), ("Q", "K")),
        Step(
            "scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}",
            "Compute the scaled scores (−∞ where masked)",
            lambda e, p, xp: apply_mask(scaled_scores(e.Q, e.K, xp=xp), allowed_from_given(e.mask, xp=xp), xp=xp),
            ("Q", "K", "mask"),
        ),
        Step(
            "weights", "A", r"A = \operatorname{softmax}(S)", "Compute the attention weights row by row",
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS,
        ),
        Step("output", "Z", "Z = AV", "Compute the output", lambda e, p, xp: e.weights @ e.V, ("weights", "V")),
    ),
    default_ask=("scores", "weights", "output"),
    misconceptions=(
        Misconception(
            "scores", "unscaled",
            lambda e, p, xp: apply_mask(e.Q @ swap(e.K), allowed_from_given(e.mask, xp=xp), xp=xp),
            "The scores were not divided by √d_k.", applies=lambda p: p.d_k != 1,
        ),
        COLUMN_SOFTMAX,
        *MASK_MISTAKES,
        Misconception(
            "output", "transposed_weights", lambda e, p, xp: swap(e.weights) @ e.V,
            "Used Aᵀ V: row i of Z mixes the values with query i's weights, Z = AV.",
        ),
    ),
    accept=lambda e, p, xp: not_saturated(e.weights, e.mask, xp),
    validate=_check_mask_params,
)



# --- attention.masked ---------------------------------------------------------------------

MASKED_KINDS = ("causal", "padding", "causal_padding")
TRIANGLES = ("lower", "upper", "strict")  # the right causal triangle, and two wrong ones


def _kind_allowed(p: Params, xp, triangle: str = "lower", pad_rows: bool = False) -> np.ndarray:
    """The (n, n) allowed pattern of a mask kind; ``triangle``/``pad_rows`` build the wrong ones.

    ``upper`` lets query i see keys j ≥ i (the future), ``strict`` hides the diagonal (j < i);
    ``pad_rows`` hides the padded *queries* (rows) instead of the padded keys (columns).
    """
    n = p.tokens
    allowed = xp.ones((n, n), dtype=bool)
    if "causal" in p.mask:
        lower = causal_allowed(n, xp=xp)
        allowed = allowed & {"lower": lower, "upper": lower.T, "strict": xp.tril(lower, k=-1)}[triangle]
    if "padding" in p.mask:
        pad = padding_allowed(n, n, p.padded, xp=xp)
        allowed = allowed & (pad.T if pad_rows else pad)
    return allowed


def _sample_masked(draw: Draw, p: Params) -> dict:
    n = p.tokens
    mask = draw.xp.broadcast_to(_kind_allowed(p, draw.xp), (draw.size, n, n)).astype(np.float64)
    return {**sample_qkv(draw, p), "mask": mask}


def _masked_chain(e: Env, allowed, xp, *, fill: float | None = None, after: bool = False) -> dict:
    """Scores, weights and output computed with ``allowed`` (a possibly wrong mask).

    ``fill`` puts that value at masked scores instead of −∞; ``after`` masks the weights
    after an unmasked softmax without renormalising (both are known mistakes).
    """
    if after:
        weights = softmax(e.unmasked, xp=xp) * allowed
        return {"scores": e.unmasked, "weights": weights, "output": weights @ e.V}
    scores = apply_mask(e.unmasked, allowed, xp=xp) if fill is None else xp.where(allowed, e.unmasked, fill)
    weights = softmax(scores, xp=xp)
    return {"scores": scores, "weights": weights, "output": weights @ e.V}


def _causal(p: Params) -> bool:
    return "causal" in p.mask


def _padded(p: Params) -> bool:
    return "padding" in p.mask


# (name, how the wrong chain is computed, when it can happen, feedback)
_MASKED_MISTAKES = (
    ("mask_after_softmax", lambda e, p, xp: _masked_chain(e, allowed_from_given(e.mask, xp=xp), xp, after=True),
     None, ("weights", "output"),
     "The mask was applied after the softmax: masked scores must be −∞ before it, so that each "
     "row's remaining weights still sum to 1."),
    ("zero_not_minus_inf", lambda e, p, xp: _masked_chain(e, allowed_from_given(e.mask, xp=xp), xp, fill=0.0),
     None, ("scores", "weights", "output"),
     "Masked scores were set to 0 instead of −∞; exp(0) = 1, so masked keys still got weight."),
    ("upper_triangle", lambda e, p, xp: _masked_chain(e, _kind_allowed(p, xp, "upper"), xp),
     _causal, ("scores", "weights", "output"),
     "The causal mask keeps the lower triangle: query i may attend to keys j ≤ i, never to later tokens."),
    ("strict_triangle", lambda e, p, xp: _masked_chain(e, _kind_allowed(p, xp, "strict"), xp),
     _causal, ("scores", "weights", "output"),
     "The causal mask includes the diagonal: each query may attend to its own token (j ≤ i, not j < i)."),
    ("padding_rows", lambda e, p, xp: _masked_chain(e, _kind_allowed(p, xp, pad_rows=True), xp),
     _padded, ("scores", "weights", "output"),
     "Padding hides the padded keys (columns of S) from every query, not the padded queries (rows)."),
)


def _check_masked_params(p: Params) -> None:
    if _padded(p) and not 0 < p.padded < p.tokens:
        raise ValueError(f"padded must be between 1 and tokens − 1 ({p.tokens - 1}), got {p.padded}")


def _step_of(chain, step: str):
    return lambda e, p, xp: chain(e, p, xp)[step]


MASKED = Family(
    name="attention.masked",
    title="Masked attention",
    summary="Causal and padding masks: the masked scores with −∞, the weights and the output.",
    params={
        "mask": Param("causal", "causal, padding (trailing keys), or both", choices=MASKED_KINDS),
        "padded": Param(1, "with padding: how many trailing tokens are padding", low=1, high=7),
        **qkv_params(),
        "decimals": DECIMALS,
    },
    givens=QKV_GIVENS,
    sample=_sample_masked,
    steps=(
        Step(
            "unmasked", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", "Compute the scaled scores, before masking",
            lambda e, p, xp: scaled_scores(e.Q, e.K, xp=xp), ("Q", "K"),
        ),
        Step(
            "scores", r"\tilde S", r"\tilde S_{ij} = S_{ij} \text{ if } M_{ij} = 1, \text{ else } -\infty",
            "Write the masked score matrix (−∞ where masked)",
            lambda e, p, xp: apply_mask(e.unmasked, allowed_from_given(e.mask, xp=xp), xp=xp),
            ("unmasked", "mask"),
        ),
        Step(
            "weights", "A", r"A = \operatorname{softmax}(\tilde S)", "Compute the attention weights row by row",
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",),
        ),
        Step("output", "Z", "Z = AV", "Compute the output", lambda e, p, xp: e.weights @ e.V, ("weights", "V")),
    ),
    default_ask=("scores", "weights", "output"),
    misconceptions=tuple(
        Misconception(step, name, _step_of(chain, step), feedback, applies=applies)
        for name, chain, applies, steps, feedback in _MASKED_MISTAKES
        for step in steps
    ),
    accept=lambda e, p, xp: not_saturated(e.weights, e.mask, xp),
    validate=_check_masked_params,
)


# --- attention.qk_swap --------------------------------------------------------------------


def _sample_qk(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    return {"Q": draw.integers(lo, hi, (p.tokens, p.d_k)), "K": draw.integers(lo, hi, (p.tokens, p.d_k))}


def _qk_accept(e: Env, p: Params, xp) -> np.ndarray:
    ones = xp.ones(e.weights.shape, dtype=np.float64)
    return not_saturated(e.weights, ones, xp) & not_saturated(e.swapped, ones, xp)


QK_SWAP = Family(
    name="attention.qk_swap",
    title="Swapping the roles of Q and K",
    summary="softmax(S) against softmax(Sᵀ): rows are normalised per query, columns are not.",
    params={
        "tokens": Param(3, "number of tokens n", low=2, high=8),
        "d_k": Param(4, "query/key dimension d_k (4 makes √d_k = 2)", low=1, high=16),
        "entries": Param((-1, 1), "range of the integer entries of Q and K"),
        "decimals": DECIMALS,
    },
    givens=(Given("Q", "Q", "queries, one row per token"), Given("K", "K", "keys, one row per token")),
    sample=_sample_qk,
    steps=(
        Step("scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", "Compute the scaled scores",
             lambda e, p, xp: scaled_scores(e.Q, e.K, xp=xp), ("Q", "K")),
        Step("weights", "A", r"A = \operatorname{softmax}(S)", "Compute the attention weights, softmax of each row of S",
             lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",)),
        Step(
            "swapped", r"\tilde A", r"\tilde A = \operatorname{softmax}\!\left(\frac{KQ^\top}{\sqrt{d_k}}\right) = \operatorname{softmax}(S^\top)",
            "Swap the roles of Q and K: compute the weights from KQᵀ/√d_k, again row by row",
            lambda e, p, xp: softmax(swap(e.scores), xp=xp), ("scores",),
        ),
        Step(
            "received", "c", r"c_j = \sum_i A_{ij}", "Add up each column of A: the total weight each key receives",
            lambda e, p, xp: xp.sum(e.weights, axis=-2), ("weights",),
        ),
    ),
    default_ask=("weights", "swapped", "received"),
    misconceptions=(
        COLUMN_SOFTMAX,
        Misconception(
            "swapped", "transposed_weights", lambda e, p, xp: swap(e.weights),
            "Swapping Q and K transposes the scores, not the weights: softmax(Sᵀ) normalises each column "
            "of S (over the queries), so it is not Aᵀ.",
        ),
        Misconception(
            "received", "columns_sum_to_one", lambda e, p, xp: xp.ones(e.weights.shape[:-1], dtype=np.float64),
            "Only the rows of A sum to 1 (each query shares out all its attention); a key can receive "
            "more or less than 1 in total.",
        ),
    ),
    accept=_qk_accept,
)

FAMILIES = (SCORES, WEIGHTS, OUTPUT, MASKED, QK_SWAP)
