"""Softmax attention forward: scores, weights, output (every mask kind), masks, swapping Q and K."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.attention import apply_mask, softmax
from ..engine.backend import swap
from ..engine.masks import (
    MASK_KINDS,
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
    zero_where,
)

SATURATED = 0.95  # a row whose largest weight exceeds this teaches nothing by hand


EXPLICIT_MASK = "random"  # the mask kind whose mask is a given of its own, per variant


# --- how many queries and keys, and how the scores are scaled -------------------------------
#
# Self-attention has as many queries as keys (``tokens``); a hand-written problem often has
# one query against three keys, or two queries against one key (cross-attention). ``queries``
# and ``keys`` count them apart (0: ``tokens``); values always come with their keys.


def n_queries(p: Params) -> int:
    """Rows of Q (and of S, A, Z)."""
    return int(p.get("queries") or p.tokens)


def n_keys(p: Params) -> int:
    """Rows of K and V, columns of S and A."""
    return int(p.get("keys") or p.tokens)


SQRT_DK, NO_SCALE = "sqrt_dk", "none"


def _read_scale(value: object) -> str | float:
    """``scale``: sqrt_dk, none, or the positive number the raw scores QKᵀ are multiplied by."""
    if value in (SQRT_DK, NO_SCALE):
        return value  # type: ignore[return-value]
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"must be {SQRT_DK} (divide by √d_k), {NO_SCALE} (the raw dot products) or a positive "
                         f"number the raw scores QKᵀ are multiplied by (0.5 halves them), got {value!r}")
    return float(value)


def stated_d_k(p: Params) -> int:
    """The d_k the problem states: Q's width unless the instructor says otherwise (``stated_d_k``)."""
    return int(p.get("stated_d_k") or p.d_k)


def score_factor(p: Params) -> float:
    """What the raw dot products QKᵀ are multiplied by: 1/√d_k, 1, or the spec's number."""
    if not p.get("scaled", True):  # attention.scores' own switch, kept for older specs
        return 1.0
    scale = p.get("scale", SQRT_DK)
    if scale == SQRT_DK:
        return 1.0 / float(np.sqrt(stated_d_k(p)))
    return 1.0 if scale == NO_SCALE else float(scale)


def divides_by_sqrt_dk(p: Params) -> bool:
    return bool(p.get("scaled", True)) and p.get("scale", SQRT_DK) == SQRT_DK


def template_context(p: Params) -> dict:
    """What the attention templates read about sizes and scale, as ``att``."""
    has_scale = "d_k" in p  # attention.weights is handed its scores
    by_root = has_scale and divides_by_sqrt_dk(p)
    factor = score_factor(p) if has_scale else 1.0
    return {"att": {
        "n": n_queries(p), "m": n_keys(p), "cross": n_queries(p) != n_keys(p) or n_queries(p) == 1,
        "by_root": by_root, "factor": factor, "d_k": stated_d_k(p) if "d_k" in p else 0,
        # score_rows' argument: divide by √d_k (true), raw (false), or multiply by a number
        "scaled": True if by_root else (False if factor == 1 else factor),
    }}


def _formula(p: Params, step: str) -> str | None:
    """The scores' formula with the item's scale (the step's own says QKᵀ/√d_k)."""
    if "d_k" not in p or divides_by_sqrt_dk(p):
        return None  # attention.weights' scores are given, not computed
    factor = score_factor(p)
    scale = "" if factor == 1 else f"{factor:g}\\,"
    return {"scores": f"S = {scale}QK^\\top", "unmasked": f"S = {scale}QK^\\top",
            "dQ": f"\\nabla Q = {scale}\\nabla S K", "dK": f"\\nabla K = {scale}\\nabla S^\\top Q"}.get(step)


#: A formula with words in it is a message (``N_``): its words are said in the worksheet's language.
#: ``{-\infty}`` is a sign (after ``\text``, a bare ``-`` would be a minus between "else" and ∞).
MASKED_SCORES_FORMULA = N_(r"\tilde S_{ij} = S_{ij} \text{ if } M_{ij} = 1, \text{ else } {-\infty}")

ATTENTION_EXTRA = {"context": template_context, "formula": _formula}


def raw_scores(q, k, xp):
    """QKᵀ for a batch (n × d_k against m × d_k: n × m)."""
    return q @ swap(k)


def scaled_raw(q, k, p: Params, xp):
    """QKᵀ with the item's scale: divided by √d_k (as the engine divides, the default's exact
    numbers kept), or multiplied by the spec's factor (1 for none)."""
    raw = raw_scores(q, k, xp)
    if divides_by_sqrt_dk(p):
        return raw / xp.sqrt(xp.asarray(stated_d_k(p), dtype=raw.dtype))
    return raw * score_factor(p)


def scores_of(e: Env, p: Params, xp):
    """The scaled scores of ``e``'s Q and K with the item's scale."""
    return raw_scores(e.Q, e.K, xp) * score_factor(p)


SIZE_PARAMS = {
    "queries": Param(0, "number of queries, rows of Q (0: tokens); differs from keys in cross-attention",
                     low=0, high=8),
    "keys": Param(0, "number of keys and values, rows of K and V (0: tokens)", low=0, high=8),
}

SCALE_PARAMS = {
    "scale": Param(SQRT_DK, "sqrt_dk (divide QKᵀ by √d_k), none, or a number QKᵀ is multiplied by",
                   convert=_read_scale),
    "stated_d_k": Param(0, "the d_k the problem states for the scale, when it differs from Q's width (0: Q's width)",
                        low=0, high=1024),
}

# What families published before queries, keys and scale existed leave out of an item's
# fingerprint at their defaults (their specs keep their variants).
LATER_PARAMS = (*SIZE_PARAMS, *SCALE_PARAMS)

EMPTY_ROWS = Param(False, "allow a hand-written mask with a query that may attend to no key "
                          "(its weights and output are 0, as the worksheet states)")


def scale_shows(p: Params) -> bool:
    """Whether dividing by √d_k changes anything: scaled scores (the default) with d_k > 1."""
    return divides_by_sqrt_dk(p) and stated_d_k(p) != 1


def factor_shows(p: Params) -> bool:
    """The scale is a number other than 1 (``scale: 0.5``): leaving it out changes the scores.

    The √d_k case is :func:`scale_shows`; the two never hold together, so a forgotten scale is
    named by one sentence or the other.
    """
    return not divides_by_sqrt_dk(p) and score_factor(p) != 1.0


# A forgotten numeric scale, said of the scores and of the gradients through them.
FORGOT_FACTOR = N_("The scores were not multiplied by the scale this problem gives (S = scale·QKᵀ).")
FORGOT_FACTOR_DQ = N_("The scale was forgotten in ∇Q: S = scale·QKᵀ, so ∇Q = scale·∇S K.")
FORGOT_FACTOR_DK = N_("The scale was forgotten in ∇K: S = scale·QKᵀ, so ∇K = scale·∇Sᵀ Q.")
UNSCALED = N_("The scores were not divided by √dₖ.")


def unscaled_asked(p: Params) -> bool:
    """The problem asks for raw dot products, where dividing by √d_k would change them."""
    return not divides_by_sqrt_dk(p) and score_factor(p) == 1.0 and stated_d_k(p) != 1


def _check_mask_params(p: Params) -> None:
    # At least two keys must stay visible: with one, every softmax row is (1, 0, …) and there
    # is nothing to compute (and every gradient through it vanishes). Every kind with padding.
    if "padding" in p.mask and not 0 < p.padded <= n_keys(p) - 2:
        raise ValueError(
            f"with mask: {p.mask}, at least 2 keys must stay unpadded: padded must be from 1 to tokens − 2 "
            f"(tokens is {n_keys(p)}), got {p.padded}"
        )


MASK_PARAMS = {
    "mask": Param("none", "which keys each query may attend to (random: a drawn or hand-written mask)",
                  choices=MASK_KINDS),
    "padded": Param(1, "with mask: padding, how many trailing keys are padding (at most tokens − 2)", low=1, high=6),
}


def _mask_domain(value: np.ndarray) -> str | None:
    """A fixed mask: 0/1 entries (rows with no key are checked against ``empty_rows``)."""
    if not ((value == 0) | (value == 1)).all():
        return "a mask holds only 0 (masked) and 1 (may attend)"
    if value.ndim < 2:
        return "a mask is a matrix, one row per query"
    return None


def _check_empty_rows(value: np.ndarray, p: Params) -> None:
    """A query with no key is refused unless the spec asks for it (``empty_rows: true``)."""
    if value.ndim >= 2 and not (value == 1).any(axis=-1).all() and not p.get("empty_rows", False):
        raise ValueError("every query (row of the mask) must be allowed at least one key; to ask what "
                         "happens to a fully masked query, set the param empty_rows: true (its weights and "
                         "output are then 0, and the worksheet says so)")


def kind_mask(p: Params, n: int, xp=np, m: int | None = None):
    """The (n, m) allowed pattern of a fixed mask kind (none, causal, padding); None for random."""
    m = n if m is None else m
    if p.mask == "causal":
        return causal_allowed(n, m, xp=xp)
    if p.mask == "padding":
        return padding_allowed(n, m, p.padded, xp=xp)
    if p.mask == "none":
        return xp.ones((n, m), dtype=bool)
    return None


def _is_kind_mask(value: np.ndarray, pattern) -> bool:
    return pattern is not None and value.shape == pattern.shape and bool((value.astype(bool) == pattern).all())


def _settle_explicit_mask(value: np.ndarray, p: Params, written: frozenset) -> dict:
    """A fixed mask is the explicit kind, unless it is the mask of the item's kind itself.

    An audit fixes every given, a no-mask or causal one included: such a mask keeps its kind.
    A mask of another shape is left to the shape check, which names the shape needed.
    """
    _check_empty_rows(value, p)
    n, m = n_queries(p), n_keys(p)
    if p.mask == EXPLICIT_MASK or value.shape != (n, m) or _is_kind_mask(value, kind_mask(p, n, m=m)):
        return {}
    if "mask" in written:
        raise ValueError(f"this is not the {p.mask} mask of {n} tokens: a hand-written mask needs "
                         f"mask: {EXPLICIT_MASK} (or leave mask out)")
    return {"mask": EXPLICIT_MASK}


MASK_DESCRIPTION = N_("mask: 1 where the query may attend to the key")
EXPLICIT_MASK_GIVEN = Given("mask", "M", MASK_DESCRIPTION, check=_mask_domain, settles=_settle_explicit_mask)


def qkv_params(tokens: int = 3, low: int = 2) -> dict[str, Param]:
    """Sizes and entry ranges of Q, K, V, shared by the families that run an attention layer."""
    return {
        "tokens": Param(tokens, "number of tokens n", low=low, high=8),
        "d_k": Param(4, "query/key dimension d_k (4 makes √d_k = 2)", low=1, high=16),
        "d_v": Param(2, "value dimension d_v", low=1, high=16),
        "entries": int_range((-1, 1), "range of the integer entries of Q and K"),
        "v_entries": int_range((-2, 2), "range of the integer entries of V"),
    }


QKV_GIVENS = (Given("Q", "Q", N_("queries")), Given("K", "K", N_("keys")), Given("V", "V", N_("values")), EXPLICIT_MASK_GIVEN)


def sample_qkv(draw: Draw, p: Params) -> dict:
    """Integer Q (n × d_k), K (m × d_k) and V (m × d_v) per variant, drawn in that order."""
    lo, hi = p.entries
    vlo, vhi = p.v_entries
    n, m = n_queries(p), n_keys(p)
    return {
        "Q": draw.integers(lo, hi, (n, p.d_k)),
        "K": draw.integers(lo, hi, (m, p.d_k)),
        "V": draw.integers(vlo, vhi, (m, p.d_v)),
    }


def sample_mask(draw: Draw, p: Params, n: int, m: int | None = None) -> np.ndarray:
    """A 0/1 mask per variant (1 = allowed); random masks keep at least one key per query."""
    xp = draw.xp
    m = n if m is None else m
    if p.mask == "random":
        # Each pair allowed with probability 0.6; rows left empty get their diagonal back.
        allowed = draw.uniform(0.0, 1.0, (n, m)) < 0.6
        empty = ~allowed.any(axis=-1, keepdims=True)
        # Query i gets key i (mod m) back: the diagonal, wrapped when there are fewer keys.
        allowed = allowed | (empty & (xp.arange(m)[None, :] == (xp.arange(n) % m)[:, None]))
    else:
        allowed = xp.broadcast_to(kind_mask(p, n, xp, m=m), (draw.size, n, m))
    return allowed.astype(np.float64)


def not_saturated(weights, mask, xp) -> np.ndarray:
    """True per variant when no row with two or more allowed keys puts > 95 % on one key."""
    multi = (mask > 0.5).sum(axis=-1) >= 2
    return ~((weights.max(axis=-1) > SATURATED) & multi).any(axis=-1)


def masked(p: Params) -> bool:
    return p.get("mask", "none") != "none"


def _allowed(e: Env, xp):
    """The allowed pairs of the variants' mask, or None where the family has no mask."""
    return allowed_from_given(e["mask"], xp=xp) if "mask" in e else None


def _rows_with_a_key(e: Env, p: Params, xp):
    allowed = _allowed(e, xp)
    # Without a mask every row counts (a scalar broadcasts over any stack of rows, heads too).
    return xp.asarray(True) if allowed is None else allowed.any(axis=-1)


# What every right A has, whatever the slip: checked on wrong answers, and no credit is carried
# forward from weights that break them. Families without a mask (qk_swap, backprop.softmax,
# multihead's (h, n, n) stacks) check the row sums only.
WEIGHTS_INVARIANTS = (
    rows_sum_to(
        1.0, "rows_sum_to_one",
        N_("Each row of A must sum to 1 (every row with at least one allowed key): softmax normalises each row."),
        rows=_rows_with_a_key,
    ),
    zero_where(
        lambda e, p, xp: ~_allowed(e, xp), "masked_zero",
        N_("Masked entries of A must be 0: a masked key gets no weight."),
        applies=masked,
    ),
)


def masked_chain(e: Env, allowed, xp, *, fill: float | None = None, after: bool = False) -> dict:
    """Scores, weights and (with values V) output computed with ``allowed`` (a possibly wrong mask).

    ``fill`` puts that value at masked scores instead of −∞; ``after`` masks the weights
    after an unmasked softmax without renormalising (both are known mistakes).
    """
    if after:
        scores, weights = e.unmasked, softmax(e.unmasked, xp=xp) * allowed
    else:
        scores = apply_mask(e.unmasked, allowed, xp=xp) if fill is None else xp.where(allowed, e.unmasked, fill)
        weights = softmax(scores, xp=xp)
    out = {"scores": scores, "weights": weights}
    if "V" in e:
        out["output"] = weights @ e.V
    return out


ZERO_NOT_MINUS_INF = N_("Masked scores were set to 0 instead of −∞; exp(0) = 1, so masked keys still got weight.")

# Slips with any mask, shared by every masked family: (name, wrong chain, steps it changes, feedback).
MASK_SLIPS = (
    ("mask_after_softmax", lambda e, p, xp: masked_chain(e, _allowed(e, xp), xp, after=True),
     ("weights", "output"),
     (N_("The mask was applied after the softmax: masked scores must be −∞ before it, so that each "
      "row's remaining weights still sum to 1."))),
    ("zero_not_minus_inf", lambda e, p, xp: masked_chain(e, _allowed(e, xp), xp, fill=0.0),
     ("scores", "weights", "output"), ZERO_NOT_MINUS_INF),
)


def masked_entries(e: Env, p: Params, xp) -> Any:
    """The entries a mask fixes (True where the key is masked): −∞ scores, 0 weights (Step.fixed)."""
    return ~allowed_from_given(e.mask, xp=xp)


# Slips made entry by entry: (name, step). A masked score written as 0 is the same slip in one
# entry as in all of them, so it is named whenever the wrong entries are all that slip.
ENTRYWISE_SLIPS = frozenset({("zero_not_minus_inf", "scores")})


def _step_of(chain, step: str):
    return lambda e, p, xp: chain(e, p, xp)[step]


def chain_mistakes(slips, steps: tuple[str, ...], applies=None) -> tuple[Misconception, ...]:
    """A misconception per slip and per step of ``steps`` the slip changes.

    ``slips`` holds (name, chain, steps changed, feedback) or, with a fifth entry, its own
    ``applies``; a family without a value step lists ("scores", "weights") only.
    """
    out = []
    for slip in slips:
        name, chain, changed, feedback = slip[:4]
        when = slip[4] if len(slip) > 4 else applies
        out.extend(Misconception(step, name, _step_of(chain, step), feedback, applies=when,
                                 entrywise=(name, step) in ENTRYWISE_SLIPS)
                   for step in changed if step in steps)
    return tuple(out)


COLUMN_SOFTMAX = Misconception(
    "weights", "column_softmax",
    lambda e, p, xp: softmax(e.scores, axis=-2, xp=xp),
    N_("The softmax was taken down each column; it normalises each row (one query over all keys)."),
    # One query against one key: both softmaxes give 1.
    applies=lambda p: n_queries(p) > 1 or n_keys(p) > 1,
)


def square(p: Params) -> bool:
    """As many queries as keys (more than one): only then can a matrix be mistaken for its transpose."""
    return n_queries(p) == n_keys(p) > 1


# Aᵀ for A: each query's weights written down a column. Added after the families were published,
# so it does not screen variants (Misconception.screens): where Aᵀ lands on A within tolerance (two
# tokens whose weights happen to mirror), the answer is right either way and nothing is named.
TRANSPOSED_WEIGHTS = Misconception(
    "weights", "transposed", lambda e, p, xp: swap(e.weights),
    N_("The weight matrix is transposed: row i holds query i's weights over every key (each row sums to 1), "
       "not column i."),
    applies=square, screens=False,
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
    summary=N_("S = QKᵀ/√d_k for matrices, or one query against one key (optionally unscaled)."),
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
    givens=(Given("Q", "Q", N_("queries, one row per token")), Given("K", "K", N_("keys, one row per token"))),
    sample=_sample_scores,
    steps=(
        Step("scores", "S", r"S = \frac{QK^\top}{\sqrt{d_k}}", N_("Compute the scores"), _scores, ("Q", "K")),
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
    validate=_check_mask_params,
    extra=ATTENTION_EXTRA,
)


# --- attention.output ---------------------------------------------------------------------


def _sample_output(draw: Draw, p: Params) -> dict:
    return {**sample_qkv(draw, p), "mask": sample_mask(draw, p, n_queries(p), n_keys(p))}


OUTPUT = Family(
    name="attention.output",
    title=N_("Attention output"),
    summary=N_("Z = softmax(QKᵀ/√d_k + mask) V, asking for any of S, A and Z."),
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
    validate=_check_mask_params,
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
    if value.shape == (n_queries(p), n_keys(p)) and not _is_kind_mask(value, _kind_allowed(p, np)):
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
    givens=(*QKV_GIVENS[:3], Given("mask", "M", MASK_DESCRIPTION, check=_mask_domain, settles=_settle_kind_mask)),
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
    validate=_check_mask_params,
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
        return _formula(p, step)
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
        "d_k": Param(4, "query/key dimension d_k (4 makes √d_k = 2)", low=1, high=16),
        "entries": int_range((-1, 1), "range of the integer entries of Q and K"),
        **SCALE_PARAMS,
        "decimals": DECIMALS,
    },
    givens=(Given("Q", "Q", N_("queries, one row per token")), Given("K", "K", N_("keys, one row per token"))),
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

FAMILIES = (SCORES, WEIGHTS, OUTPUT, MASKED, QK_SWAP)
