"""Softmax attention forward: scores, weights, output (every mask kind), masks, swapping Q and K.

What they share with multi-head attention and backprop (sizes, scales, masks, drawing Q, K and V,
the slips along the chain) is :mod:`qkvquiz.families.qkv`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.attention import apply_mask, softmax
from ..engine.backend import swap
from ..engine.masks import (
    allowed_from_given,
    causal_allowed,
    padding_allowed,
)
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
)
from .qkv import (
    ATTENTION_EXTRA,
    D_K,
    QK_GIVENS,
    COLUMN_SOFTMAX,
    EMPTY_ROWS,
    EXPLICIT_MASK_GIVEN,
    FORGOT_FACTOR,
    LATER_PARAMS,
    MASK_DESCRIPTION,
    MASK_PARAMS,
    MASK_SLIPS,
    MASKED_SCORES_FORMULA,
    NO_SCALE,
    QKV_GIVENS,
    SCALE_PARAMS,
    SIZE_PARAMS,
    SQRT_DK,
    TRANSPOSED_WEIGHTS,
    UNSCALED,
    WEIGHTS_INVARIANTS,
    attention_formula,
    chain_mistakes,
    check_mask_params,
    divides_by_sqrt_dk,
    factor_shows,
    is_kind_mask,
    mask_domain,
    masked,
    masked_chain,
    masked_entries,
    n_keys,
    n_queries,
    not_saturated,
    qkv_params,
    raw_scores,
    sample_mask,
    sample_qkv,
    scale_shows,
    scaled_raw,
    score_factor,
    scores_of,
    square,
    scale_from_width,
    stated_d_k,
    template_context,
    unscaled_asked,
)

# --- attention.scores ---------------------------------------------------------------------


def _sample_scores(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    if p.form == "vector":
        return {"Q": draw.integers(lo, hi, (p.d_k,)), "K": draw.integers(lo, hi, (p.d_k,))}
    return {"Q": draw.integers(lo, hi, (n_queries(p), p.d_k)), "K": draw.integers(lo, hi, (n_keys(p), p.d_k))}


def _scores(e: Env, p: Params, xp) -> np.ndarray:
    if p.form == "vector":
        return xp.sum(e.Q * e.K, axis=-1) * score_factor(p)
    return scores_of(e, p, xp)


def _with(p: Params, **changes) -> Params:
    return Params({**p, **changes})


def _scores_nonzero(e: Env, p: Params, xp) -> np.ndarray:
    # An all-zero score teaches nothing and hides the scaling mistakes.
    s = e.scores.reshape(e.scores.shape[0], -1)
    return (xp.abs(s) > 0).mean(axis=-1) >= 0.5


SCORES = Family(
    name="attention.scores",
    title=N_("Scaled dot-product scores"),
    summary=N_("S = QKᵀ/√dₖ for matrices, or one query against one key (optionally unscaled)."),
    params={
        "form": Param("matrix", "one query·key pair or the whole score matrix", choices=("vector", "matrix")),
        "tokens": Param(3, "number of tokens n (rows of Q and K)", low=1, high=8),
        **SIZE_PARAMS,
        "d_k": Param(4, "key dimension d_k (4 makes √d_k = 2, easy by hand)", low=1, high=16),
        "entries": int_range((-2, 2), "range of the integer entries of Q and K"),
        "scaled": Param(True, "divide by √d_k (false: the raw dot product, as scale: none)"),
        **SCALE_PARAMS,
        "decimals": DECIMALS,
    },
    givens=QK_GIVENS,
    sample=_sample_scores,
    steps=(
        Step("scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", N_("Compute the scores"), _scores, ("Q", "K"),
             prompt_with=lambda p: N_("Compute the scaled scores") if score_factor(p) != 1 else N_("Compute the scores")),
    ),
    default_ask=("scores",),
    misconceptions=(
        Misconception(
            "scores", "unscaled", lambda e, p, xp: _scores(e, _with(p, scale=NO_SCALE), xp),
            UNSCALED, applies=scale_shows,
        ),
        Misconception(
            "scores", "forgot_scale", lambda e, p, xp: _scores(e, _with(p, scale=NO_SCALE), xp),
            FORGOT_FACTOR, applies=factor_shows, screens=False,
        ),
        Misconception(
            "scores", "divided_by_d", lambda e, p, xp: _scores(e, _with(p, scale=NO_SCALE), xp) / stated_d_k(p),
            N_("The scores were divided by dₖ; the scale is 1/√dₖ."), applies=scale_shows,
        ),
        Misconception(
            "scores", "scaled_anyway", lambda e, p, xp: _scores(e, _with(p, scaled=True, scale=SQRT_DK), xp),
            N_("This problem asks for the raw dot products, without dividing by √dₖ."),
            applies=unscaled_asked,
        ),
        Misconception(
            "scores", "transposed", lambda e, p, xp: swap(_scores(e, p, xp)),
            N_("The score matrix is transposed: row i holds query i against every key (S = QKᵀ, not KQᵀ)."),
            applies=lambda p: p.form == "matrix" and square(p),
        ),
    ),
    accept=_scores_nonzero,
    extra=ATTENTION_EXTRA,
)


# --- attention.weights --------------------------------------------------------------------


def _sample_weights(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    n, m = n_queries(p), n_keys(p)
    return {"S": draw.integers(lo, hi, (n, m)), "mask": sample_mask(draw, p, n, m)}


WEIGHTS = Family(
    name="attention.weights",
    title=N_("Softmax attention weights"),
    summary=N_("A = softmax(S) row by row, with no mask, a causal, padding or explicit mask."),
    params={
        "tokens": Param(3, "number of tokens n (S is n×n)", low=1, high=8),
        **SIZE_PARAMS,
        "entries": int_range((-2, 2), "range of the integer scores"),
        **MASK_PARAMS,
        "empty_rows": EMPTY_ROWS,
        "decimals": DECIMALS,
    },
    givens=(Given("S", "S", N_("attention scores")), EXPLICIT_MASK_GIVEN),
    sample=_sample_weights,
    steps=(
        Step("unmasked", "S", "S", "", lambda e, p, xp: e.S, ("S",)),
        Step(
            "scores", r"\tilde S", MASKED_SCORES_FORMULA,
            N_("Write the masked score matrix (−∞ where masked)"),
            lambda e, p, xp: apply_mask(e.S, allowed_from_given(e.mask, xp=xp), xp=xp), ("S", "mask"),
            fixed=masked_entries,
        ),
        Step(
            "weights", "A", r"A_{ij} = \frac{e^{\tilde S_{ij}}}{\sum_{l} e^{\tilde S_{il}}}",
            N_("Compute the attention weights A, the softmax of each row of the scores"),
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS, fixed=masked_entries,
        ),
    ),
    default_ask=("weights",),
    misconceptions=(COLUMN_SOFTMAX, TRANSPOSED_WEIGHTS, *chain_mistakes(MASK_SLIPS, ("scores", "weights"), applies=masked)),
    accept=lambda e, p, xp: not_saturated(e.weights, e.mask, xp),
    validate=check_mask_params,
    extra=ATTENTION_EXTRA,
)


# --- attention.output ---------------------------------------------------------------------


def _sample_output(draw: Draw, p: Params) -> dict:
    return {**sample_qkv(draw, p), "mask": sample_mask(draw, p, n_queries(p), n_keys(p))}


OUTPUT = Family(
    name="attention.output",
    title=N_("Attention output"),
    summary=N_("Z = softmax(QKᵀ/√dₖ + mask) V, asking for any of S, A and Z."),
    params={**qkv_params(low=1), **SIZE_PARAMS, **SCALE_PARAMS, **MASK_PARAMS, "empty_rows": EMPTY_ROWS,
            "decimals": DECIMALS},
    givens=QKV_GIVENS,
    sample=_sample_output,
    steps=(
        Step("unmasked", "S", "S", "", lambda e, p, xp: scores_of(e, p, xp), ("Q", "K")),
        Step(
            "scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}",
            N_("Compute the scaled scores"),
            lambda e, p, xp: apply_mask(scores_of(e, p, xp), allowed_from_given(e.mask, xp=xp), xp=xp),
            ("Q", "K", "mask"), fixed=masked_entries,
        ),
        Step(
            "weights", "A", r"A = \operatorname{softmax}(S)", N_("Compute the attention weights row by row"),
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS, fixed=masked_entries,
        ),
        Step("output", "Z", "Z = AV", N_("Compute the output"), lambda e, p, xp: e.weights @ e.V, ("weights", "V")),
    ),
    default_ask=("scores", "weights", "output"),
    misconceptions=(
        Misconception(
            "scores", "unscaled",
            lambda e, p, xp: apply_mask(e.Q @ swap(e.K), allowed_from_given(e.mask, xp=xp), xp=xp),
            UNSCALED, applies=scale_shows,
        ),
        Misconception(
            "scores", "forgot_scale",
            lambda e, p, xp: apply_mask(e.Q @ swap(e.K), allowed_from_given(e.mask, xp=xp), xp=xp),
            FORGOT_FACTOR, applies=factor_shows, screens=False,
        ),
        Misconception(
            "scores", "scaled_anyway",
            lambda e, p, xp: apply_mask(e.Q @ swap(e.K) / np.sqrt(stated_d_k(p)), allowed_from_given(e.mask, xp=xp),
                                        xp=xp),
            N_("This problem asks for the raw dot products, without dividing by √dₖ."), applies=unscaled_asked,
        ),
        COLUMN_SOFTMAX,
        TRANSPOSED_WEIGHTS,
        *chain_mistakes(MASK_SLIPS, ("scores", "weights", "output"), applies=masked),
        Misconception(
            "output", "transposed_weights", lambda e, p, xp: swap(e.weights) @ e.V,
            N_("Used Aᵀ V: row i of Z mixes the values with query i's weights, Z = AV."), applies=square,
        ),
    ),
    accept=lambda e, p, xp: not_saturated(e.weights, e.mask, xp),
    validate=check_mask_params,
    extra=ATTENTION_EXTRA,
)



# --- attention.masked ---------------------------------------------------------------------

MASKED_KINDS = ("causal", "padding", "causal_padding")
TRIANGLES = ("lower", "upper", "strict")  # the right causal triangle, and two wrong ones


def _kind_allowed(p: Params, xp, triangle: str = "lower", pad_rows: bool = False) -> np.ndarray:
    """The (n, n) allowed pattern of a mask kind; ``triangle``/``pad_rows`` build the wrong ones.

    ``upper`` lets query i see keys j ≥ i (the future), ``strict`` hides the diagonal (j < i);
    ``pad_rows`` hides the padded *queries* (rows) instead of the padded keys (columns).
    """
    n, m = n_queries(p), n_keys(p)
    allowed = xp.ones((n, m), dtype=bool)
    if "causal" in p.mask:
        lower = causal_allowed(n, m, xp=xp)
        upper = xp.triu(xp.ones((n, m), dtype=bool))
        allowed = allowed & {"lower": lower, "upper": upper, "strict": xp.tril(lower, k=-1)}[triangle]
    if "padding" in p.mask:
        pad = padding_allowed(n, m, p.padded, xp=xp)
        allowed = allowed & (pad.T if pad_rows else pad)
    return allowed


def _settle_kind_mask(value: np.ndarray, p: Params, written: frozenset) -> dict:
    # An audit fixes every given: the kind's own mask is fine, any other is not this family's.
    if value.shape == (n_queries(p), n_keys(p)) and not is_kind_mask(value, _kind_allowed(p, np)):
        raise ValueError(f"attention.masked builds its mask from its kind: a fixed mask must be the {p.mask} "
                         f"mask of {n_queries(p)} queries and {n_keys(p)} keys; for a hand-written mask use attention.weights or "
                         "attention.output with the mask as a fixed given")
    return {}


def _sample_masked(draw: Draw, p: Params) -> dict:
    n, m = n_queries(p), n_keys(p)
    mask = draw.xp.broadcast_to(_kind_allowed(p, draw.xp), (draw.size, n, m)).astype(np.float64)
    return {**sample_qkv(draw, p), "mask": mask}


def _causal(p: Params) -> bool:
    # With one query and one key every triangle is the same single entry.
    return "causal" in p.mask and max(n_queries(p), n_keys(p)) > 1


def _padded(p: Params) -> bool:
    return "padding" in p.mask


def _wrong_kind(**how):
    """The chain with a wrong mask of the item's kind (``_kind_allowed`` options)."""
    return lambda e, p, xp: masked_chain(e, _kind_allowed(p, xp, **how), xp)


# Slips of a mask's kind: (name, wrong chain, steps it changes, feedback, when it can happen).
_KIND_SLIPS = (
    ("upper_triangle", _wrong_kind(triangle="upper"), ("scores", "weights", "output"),
     N_("The causal mask keeps the lower triangle: query i may attend to keys j ≤ i, never to later tokens."),
     _causal),
    ("strict_triangle", _wrong_kind(triangle="strict"), ("scores", "weights", "output"),
     N_("The causal mask includes the diagonal: each query may attend to its own token (j ≤ i, not j < i)."),
     _causal),
    ("padding_rows", _wrong_kind(pad_rows=True), ("scores", "weights", "output"),
     N_("Padding hides the padded keys (columns of S) from every query, not the padded queries (rows)."),
     lambda p: _padded(p) and n_queries(p) == n_keys(p)),
)


def _unscaled_masked() -> tuple[Misconception, ...]:
    """The scale left out, before and after masking: √d_k (the default) or the spec's number."""
    raw = {"unmasked": lambda e, p, xp: raw_scores(e.Q, e.K, xp),
           "scores": lambda e, p, xp: apply_mask(raw_scores(e.Q, e.K, xp), allowed_from_given(e.mask, xp=xp), xp=xp)}
    # Added after attention.masked was published: they name a slip, they do not screen variants.
    return tuple(Misconception(step, name, fn, feedback, applies=applies, screens=False)
                 for step, fn in raw.items()
                 for name, feedback, applies in (("unscaled", UNSCALED, scale_shows),
                                                 ("forgot_scale", FORGOT_FACTOR, factor_shows)))


MASKED = Family(
    name="attention.masked",
    title=N_("Masked attention"),
    summary=N_("Causal and padding masks: the masked scores with −∞, the weights and the output."),
    params={
        "mask": Param("causal", "causal, padding (trailing keys), or both", choices=MASKED_KINDS),
        "padded": Param(1, "with padding: how many trailing tokens are padding (at most tokens − 2)", low=1, high=6),
        **qkv_params(),  # one token has nothing to mask
        **SIZE_PARAMS,
        **SCALE_PARAMS,
        "decimals": DECIMALS,
    },
    givens=(*QKV_GIVENS[:3], Given("mask", "M", MASK_DESCRIPTION, check=mask_domain, settles=_settle_kind_mask)),
    sample=_sample_masked,
    steps=(
        Step(
            "unmasked", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", N_("Compute the scaled scores, before masking"),
            lambda e, p, xp: scores_of(e, p, xp), ("Q", "K"),
        ),
        Step(
            "scores", r"\tilde S", MASKED_SCORES_FORMULA,
            N_("Write the masked score matrix (−∞ where masked)"),
            lambda e, p, xp: apply_mask(e.unmasked, allowed_from_given(e.mask, xp=xp), xp=xp),
            ("unmasked", "mask"), fixed=masked_entries,
        ),
        Step(
            "weights", "A", r"A = \operatorname{softmax}(\tilde S)", N_("Compute the attention weights row by row"),
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS, fixed=masked_entries,
        ),
        Step("output", "Z", "Z = AV", N_("Compute the output"), lambda e, p, xp: e.weights @ e.V, ("weights", "V")),
    ),
    default_ask=("scores", "weights", "output"),
    misconceptions=(
        *chain_mistakes(MASK_SLIPS + _KIND_SLIPS, ("scores", "weights", "output")),
        TRANSPOSED_WEIGHTS,
        *_unscaled_masked(),
    ),
    accept=lambda e, p, xp: not_saturated(e.weights, e.mask, xp),
    validate=check_mask_params,
    extra=ATTENTION_EXTRA,
)


# --- attention.qk_swap --------------------------------------------------------------------


def _sample_qk(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    return {"Q": draw.integers(lo, hi, (n_queries(p), p.d_k)), "K": draw.integers(lo, hi, (n_keys(p), p.d_k))}


def _qk_accept(e: Env, p: Params, xp) -> np.ndarray:
    ones = xp.ones(e.weights.shape, dtype=np.float64)
    swapped = xp.ones(e.swapped.shape, dtype=np.float64)
    return not_saturated(e.weights, ones, xp) & not_saturated(e.swapped, swapped, xp)


def _check_qk(p: Params) -> None:
    if max(n_queries(p), n_keys(p)) < 2:
        raise ValueError("attention.qk_swap needs two queries or two keys at least: with one of each, "
                         "every weight is 1 whichever way the softmax is taken")


def _qk_formula(p: Params, step: str) -> str | None:
    """The swapped weights' formula with the item's scale (the step's own says /√d_k)."""
    if step != "swapped" or divides_by_sqrt_dk(p):
        return attention_formula(p, step)
    factor = score_factor(p)
    scale = "" if factor == 1 else f"{factor:g}\\,"
    return rf"\tilde A = \operatorname{{softmax}}({scale}KQ^\top) = \operatorname{{softmax}}(S^\top)"


QK_SWAP = Family(
    name="attention.qk_swap",
    title=N_("Swapping the roles of Q and K"),
    summary=N_("softmax(S) against softmax(Sᵀ): rows are normalised per query, columns are not."),
    params={
        "tokens": Param(3, "number of tokens n", low=2, high=8),
        **SIZE_PARAMS,
        "d_k": D_K,
        "entries": int_range((-1, 1), "range of the integer entries of Q and K"),
        **SCALE_PARAMS,
        "decimals": DECIMALS,
    },
    givens=QK_GIVENS,
    sample=_sample_qk,
    steps=(
        Step("scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", N_("Compute the scaled scores"),
             lambda e, p, xp: scaled_raw(e.Q, e.K, p, xp), ("Q", "K")),
        Step("weights", "A", r"A = \operatorname{softmax}(S)", N_("Compute the attention weights, softmax of each row of S"),
             lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS),
        Step(
            "swapped", r"\tilde A", r"\tilde A = \operatorname{softmax}\!\left(\frac{KQ^\top}{\sqrt{d_k}}\right) = \operatorname{softmax}(S^\top)",
            N_("Swap the roles of Q and K: compute the weights from KQᵀ, scaled as S is, again row by row"),
            lambda e, p, xp: softmax(swap(e.scores), xp=xp), ("scores",),
            (rows_sum_to(1.0, "rows_sum_to_one",
                         N_("Each row of Ã must sum to 1: softmax(Sᵀ) is still taken row by row.")),),
        ),
        Step(
            "received", "c", r"c_j = \sum_i A_{ij}", N_("Add up each column of A: the total weight each key receives"),
            lambda e, p, xp: xp.sum(e.weights, axis=-2), ("weights",),
        ),
    ),
    default_ask=("weights", "swapped", "received"),
    misconceptions=(
        COLUMN_SOFTMAX,
        Misconception(
            "swapped", "transposed_weights", lambda e, p, xp: swap(e.weights),
            N_("Swapping Q and K transposes the scores, not the weights: softmax(Sᵀ) normalises each column "
            "of S (over the queries), so it is not Aᵀ."),
        ),
        Misconception(
            "received", "columns_sum_to_one", lambda e, p, xp: xp.ones(e.weights.shape[:-2] + e.weights.shape[-1:],
                                                                    dtype=np.float64),
            N_("Only the rows of A sum to 1 (each query shares out all its attention); a key can receive "
            "more or less than 1 in total."),
            # One query: its weights are what the keys receive, never all 1 with two keys or more;
            # one key receives every query's whole weight, n in all.
        ),
        Misconception(
            "scores", "unscaled", lambda e, p, xp: raw_scores(e.Q, e.K, xp),
            UNSCALED, applies=scale_shows,
        ),
        Misconception(
            "scores", "forgot_scale", lambda e, p, xp: raw_scores(e.Q, e.K, xp),
            FORGOT_FACTOR, applies=factor_shows, screens=False,
        ),
        Misconception(
            "scores", "scaled_anyway", lambda e, p, xp: scaled_raw(e.Q, e.K, _with(p, scaled=True, scale=SQRT_DK), xp),
            N_("This problem asks for the raw dot products, without dividing by √dₖ."), applies=unscaled_asked,
        ),
    ),
    accept=_qk_accept,
    validate=_check_qk,
    extra={"context": template_context, "formula": _qk_formula},
    later_params=LATER_PARAMS,
)

# √(Q's width) taken for the scale where the problem states another d_k: a slip of the scores
# (and of S before masking); the steps after them carry it.
SCORES, OUTPUT, QK_SWAP = (dataclasses.replace(f, misconceptions=(*f.misconceptions, *scale_from_width(f.steps, ("scores",))))
                           for f in (SCORES, OUTPUT, QK_SWAP))
MASKED = dataclasses.replace(MASKED, misconceptions=(*MASKED.misconceptions,
                                                     *scale_from_width(MASKED.steps, ("unmasked", "scores"))))

FAMILIES = (SCORES, WEIGHTS, OUTPUT, MASKED, QK_SWAP)
