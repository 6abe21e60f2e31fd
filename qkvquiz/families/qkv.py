"""What every attention family shares: how many queries and keys, how the scores are scaled,
masks, drawing Q, K and V, and the mistakes a mask or a transpose makes along the chain.

The forward families (:mod:`qkvquiz.families.attention`), multi-head attention and backprop
through attention all build on these, so a scale, a mask kind or a slip means the same in each.
"""

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
    Env,
    Given,
    Misconception,
    Param,
    Params,
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


def attention_formula(p: Params, step: str) -> str | None:
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

ATTENTION_EXTRA = {"context": template_context, "formula": attention_formula}


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
SCALE_FROM_WIDTH = N_("The scores were divided by the square root of Q's width (the length of a query); this "
                      "problem states dₖ for the scale: divide by √dₖ with the dₖ it gives.")


def states_other_d_k(p: Params) -> bool:
    """The problem states a d_k for the scale other than Q's width (``stated_d_k``)."""
    return divides_by_sqrt_dk(p) and int(p.get("stated_d_k") or 0) not in (0, int(p.get("d_k", 0)))


def scale_from_width(steps: tuple, names: tuple[str, ...]) -> tuple[Misconception, ...]:
    """The mistake of taking √(Q's width) for the scale where the problem states another d_k:
    each of ``names`` as the family's ``steps`` give it with ``stated_d_k`` left out. Added after
    the families were published: it names the slip and screens no variant."""
    def wrong(name: str):
        def fn(e: Env, p: Params, xp) -> Any:
            env, width = Env(e), Params({**p, "stated_d_k": 0})
            for step in steps:
                env[step.name] = step.fn(env, width, xp)
                if step.name == name:
                    return env[name]
            raise KeyError(name)
        return fn
    return tuple(Misconception(name, "scale_from_width", wrong(name), SCALE_FROM_WIDTH,
                               applies=states_other_d_k, screens=False) for name in names)


def unscaled_asked(p: Params) -> bool:
    """The problem asks for raw dot products, where dividing by √d_k would change them."""
    return not divides_by_sqrt_dk(p) and score_factor(p) == 1.0 and stated_d_k(p) != 1


def check_mask_params(p: Params) -> None:
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


def mask_domain(value: np.ndarray) -> str | None:
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


def is_kind_mask(value: np.ndarray, pattern) -> bool:
    return pattern is not None and value.shape == pattern.shape and bool((value.astype(bool) == pattern).all())


def _settle_explicit_mask(value: np.ndarray, p: Params, written: frozenset) -> dict:
    """A fixed mask is the explicit kind, unless it is the mask of the item's kind itself.

    An audit fixes every given, a no-mask or causal one included: such a mask keeps its kind.
    A mask of another shape is left to the shape check, which names the shape needed.
    """
    _check_empty_rows(value, p)
    n, m = n_queries(p), n_keys(p)
    if p.mask == EXPLICIT_MASK or value.shape != (n, m) or is_kind_mask(value, kind_mask(p, n, m=m)):
        return {}
    if "mask" in written:
        raise ValueError(f"this is not the {p.mask} mask of {n} tokens: a hand-written mask needs "
                         f"mask: {EXPLICIT_MASK} (or leave mask out)")
    return {"mask": EXPLICIT_MASK}


MASK_DESCRIPTION = N_("mask: 1 where the query may attend to the key")
EXPLICIT_MASK_GIVEN = Given("mask", "M", MASK_DESCRIPTION, check=mask_domain, settles=_settle_explicit_mask)


#: d_k of the families that draw Q and K: 4 makes √d_k = 2, easy by hand.
D_K = Param(4, "query/key dimension d_k (4 makes √d_k = 2)", low=1, high=16)
#: Q and K as the families that draw one row per token state them.
QK_GIVENS = (Given("Q", "Q", N_("queries, one row per token")), Given("K", "K", N_("keys, one row per token")))


def qkv_params(tokens: int = 3, low: int = 2) -> dict[str, Param]:
    """Sizes and entry ranges of Q, K, V, shared by the families that run an attention layer."""
    return {
        "tokens": Param(tokens, "number of tokens n", low=low, high=8),
        "d_k": D_K,
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
