"""Shapes and dimensions in multi-head attention: the questions asked before any arithmetic.

With d_model split over h heads, each head works in d_k = d_v = d_model / h. For n tokens:
per head Q, K, V are n × d_k (their projections W_Q, W_K, W_V are d_model × d_k), the
scores n × n; the heads' outputs concatenated are n × h·d_v, which Wᴼ (h·d_v × d_model)
maps back to n × d_model. The four projections hold 4·d_model² weights (plus 4·d_model
biases when counted). Shape answers are (rows, columns), written "2×4" or [2, 4].
"""

from __future__ import annotations

from ..core.i18n import N_
from ..core.seeding import Draw
from .base import (
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

SHAPE = "shape"


def _pair(a, b, xp):
    """A batch of shapes (rows, columns) from two batches of sizes."""
    return xp.stack([a * xp.ones_like(b), b * xp.ones_like(a)], axis=-1)


def _sample(draw: Draw, p: Params) -> dict:
    hlo, hhi = p.heads_range
    klo, khi = p.d_k_exponents
    nlo, nhi = p.tokens_range
    heads = draw.integers(hlo, hhi)
    d_k = 2.0 ** draw.integers(klo, khi)  # a power of two: d_model/h comes out whole, √d_k is often whole
    return {"d_model": heads * d_k, "heads": heads, "n": draw.integers(nlo, nhi)}


def _d_k(e: Env, p: Params, xp):
    return e.d_model / e.heads


def _accept(e: Env, p: Params, xp):
    # d_model must split evenly over the heads (a fixed d_model = 512 with h = 6 does not).
    return (e.d_k == xp.round(e.d_k)) & (e.heads >= 1)


def _check_params(p: Params) -> None:
    if p.heads_range[0] < 1 or p.tokens_range[0] < 1 or p.d_k_exponents[0] < 0:
        raise ValueError("heads_range and tokens_range need whole numbers ≥ 1, d_k_exponents ≥ 0")
    if p.d_k_exponents[1] > 12:
        raise ValueError("d_k_exponents: d_k = 2^e with e at most 12")


SHAPES = Family(
    name="theory.shapes",
    title=N_("Shapes and dimensions in multi-head attention"),
    summary=N_("The model width over h heads: dₖ per head, √dₖ, the shapes of Q/K/V "
               "per head, of the scores, the concatenation and Wᴼ, and the parameter count."),
    params={
        "heads_range": int_range((2, 8), "range the number of heads h is drawn from", bound=1024),
        "d_k_exponents": int_range((2, 6), "d_k per head is 2^e with e drawn from this range", bound=12),
        "tokens_range": int_range((2, 10), "range the number of tokens n is drawn from", bound=100_000),
        "bias": Param(False, "count the projections' biases in the parameter count"),
        "decimals": Param(3, "decimals shown in the key", low=0, high=8),
    },
    givens=(
        Given("d_model", r"d_{\text{model}}", N_("model width"), check=whole_at_least(1)),
        Given("heads", "h", N_("number of heads"), check=whole_at_least(1)),
        Given("n", "n", N_("number of tokens"), check=whole_at_least(1)),
    ),
    sample=_sample,
    steps=(
        Step("d_k", "d_k", r"d_k = d_{\text{model}} / h", N_("Give the width dₖ of each head"), _d_k,
             ("d_model", "heads")),
        Step("sqrt_dk", r"\sqrt{d_k}", r"\sqrt{d_k}", N_("Give the scale √dₖ the scores of a head are divided by"),
             lambda e, p, xp: xp.sqrt(e.d_k), ("d_k",)),
        Step("q_shape", r"\operatorname{shape}(Q_i)", r"n \times d_k",
             N_("Give the shape of one head's queries Qᵢ (its keys Kᵢ and values Vᵢ have the same)"),
             lambda e, p, xp: _pair(e.n, e.d_k, xp), ("n", "d_k"), kind=SHAPE),
        Step("wq_shape", r"\operatorname{shape}(W_Q^{(i)})", r"d_{\text{model}} \times d_k",
             N_("Give the shape of one head's query projection, the matrix that maps X to Qᵢ"),
             lambda e, p, xp: _pair(e.d_model, e.d_k, xp), ("d_model", "d_k"), kind=SHAPE),
        Step("scores_shape", r"\operatorname{shape}(S_i)", r"n \times n", N_("Give the shape of one head's scores Sᵢ"),
             lambda e, p, xp: _pair(e.n, e.n, xp), ("n",), kind=SHAPE),
        Step("concat_shape", r"\operatorname{shape}(\operatorname{Concat})", r"n \times h d_v",
             N_("Give the shape of the heads' outputs concatenated"),
             lambda e, p, xp: _pair(e.n, e.heads * e.d_k, xp), ("n", "heads", "d_k"), kind=SHAPE),
        Step("wo_shape", r"\operatorname{shape}(W^O)", r"h d_v \times d_{\text{model}}",
             N_("Give the shape Wᴼ must have to map the concatenation back to the model width"),
             lambda e, p, xp: _pair(e.heads * e.d_k, e.d_model, xp), ("heads", "d_k", "d_model"), kind=SHAPE),
        Step("params", "N", N_(r"N = 4\,d_{\text{model}}^2 \;(+\,4\,d_{\text{model}} \text{ with biases})"),
             N_("Count the weights of the query, key, value and output projections over all heads"),
             lambda e, p, xp: 4 * e.d_model ** 2 + (4 * e.d_model if p.bias else 0), ("d_model",)),
    ),
    default_ask=("d_k", "sqrt_dk", "q_shape", "concat_shape", "wo_shape"),
    misconceptions=(
        Misconception("d_k", "not_split", lambda e, p, xp: e.d_model,
                      N_("Each head gets 1/h of the model width: the width is split over the heads.")),
        Misconception("d_k", "times_heads", lambda e, p, xp: e.d_model * e.heads,
                      N_("The heads share the model width between them: dₖ is the model width divided by h, not multiplied by h.")),
        Misconception("sqrt_dk", "sqrt_d_model", lambda e, p, xp: xp.sqrt(e.d_model),
                      N_("A head's scores are divided by √dₖ of that head (the model width over h), not by the square root of the model width.")),
        Misconception("sqrt_dk", "no_root", lambda e, p, xp: e.d_k,
                      N_("The scale is the square root of dₖ.")),
        Misconception("q_shape", "full_width", lambda e, p, xp: _pair(e.n, e.d_model, xp),
                      N_("One head's Q has dₖ columns (the model width over h), not as many as the model width.")),
        Misconception("q_shape", "transposed", lambda e, p, xp: _pair(e.d_k, e.n, xp),
                      N_("Q has one row per token: n × dₖ.")),
        Misconception("wq_shape", "transposed", lambda e, p, xp: _pair(e.d_k, e.d_model, xp),
                      N_("X (n × model width) times head i's query projection gives n × dₖ: that projection is (model width) × dₖ.")),
        Misconception("scores_shape", "n_by_dk", lambda e, p, xp: _pair(e.n, e.d_k, xp),
                      N_("The scores pair every query with every key: n × n.")),
        Misconception("concat_shape", "stacked_tokens", lambda e, p, xp: _pair(e.heads * e.n, e.d_k, xp),
                      N_("The heads are concatenated side by side (along the features): n × h·dᵥ, not h·n × dᵥ.")),
        Misconception("concat_shape", "one_head", lambda e, p, xp: _pair(e.n, e.d_k, xp),
                      N_("Concatenating h heads of dᵥ columns gives h·dᵥ columns.")),
        Misconception("wo_shape", "per_head", lambda e, p, xp: _pair(e.d_k, e.d_model, xp),
                      N_("Wᴼ acts on all heads concatenated, h·dᵥ rows, not on one head's dᵥ.")),
        Misconception("params", "no_output", lambda e, p, xp: 3 * e.d_model ** 2 + (3 * e.d_model if p.bias else 0),
                      N_("Wᴼ is a (model width) × (model width) projection too: four matrices in all.")),
        Misconception("params", "per_head_only", lambda e, p, xp: 4 * e.d_model * e.d_k,
                      N_("The heads' projections together are (model width) × (model width) each (h heads of (model width) × dₖ).")),
    ),
    accept=_accept,
    validate=_check_params,
)

FAMILIES = (SHAPES,)
