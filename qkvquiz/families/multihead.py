"""Multi-head attention: split d_model into h heads, attend per head, concatenate, project.

Givens are the projected Q (n × d_model), K and V (m × d_model; m = n in self-attention,
``queries``/``keys`` count them apart for cross-attention) and the output projection Wᴼ
(d_model × d_model). Head i owns feature columns i·d_k … (i+1)·d_k − 1 with d_k = d_model/h
(the convention of :mod:`qkvquiz.engine.multihead`); each head is scaled by √d_k (or as the
item's ``scale`` says, with ``stated_d_k`` a per-head d_k the problem states), and the heads'
outputs are concatenated along the features, head 1 first, before Wᴼ.

Per-head steps are stacks of shape (h, n, ·): a student answers them as a list of h matrices.
Concatenating along the tokens instead gives an (h·n) × d_k matrix, whose shape the answer
reader already refuses with a message naming the expected n × d_model; the mistake that can
be graded as a value is the same stack read row by row into n × d_model (what a reshape of
the (h, n, d_k) stack without moving the head axis does), listed below as ``stacked_tokens``.
"""

from __future__ import annotations

from ..core.i18n import N_
from ..core.seeding import Draw
from ..engine.attention import softmax
from ..engine.backend import swap
from ..engine.multihead import merge_heads, split_heads
from ..engine.projection import linear
from .qkv import LATER_PARAMS, SATURATED, SCALE_PARAMS, SIZE_PARAMS, SQRT_DK, WEIGHTS_INVARIANTS, divides_by_sqrt_dk, factor_shows, n_keys, n_queries, raw_scores, scale_shows, scaled_raw, score_factor, stated_d_k, template_context, unscaled_asked
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


def _check(p: Params) -> None:
    if p.d_model % p.heads:
        raise ValueError(f"d_model ({p.d_model}) must be a multiple of heads ({p.heads})")


def _sample(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    vlo, vhi = p.v_entries
    wlo, whi = p.w_entries
    n, m, dm = n_queries(p), n_keys(p), p.d_model
    return {
        "Q": draw.integers(lo, hi, (n, dm)),
        "K": draw.integers(lo, hi, (m, dm)),
        "V": draw.integers(vlo, vhi, (m, dm)),
        "W_O": draw.integers(wlo, whi, (dm, dm)),
    }


def per_head(p: Params) -> Params:
    """The item's params as one head sees them: d_k = d_model/h, the width the scale is read from."""
    return Params({**p, "d_k": p.d_model // p.heads})


def _head_scores(e: Env, p: Params, xp):
    """Every head's scores Q⁽ʰ⁾K⁽ʰ⁾ᵀ with the item's scale (√d_k of one head by default)."""
    return scaled_raw(e.Qh, e.Kh, per_head(p), xp)


def _heads_from(scores, e: Env, xp) -> dict:
    """Weights, head outputs, concatenation and output from per-head scores (h, n, m)."""
    weights = softmax(scores, xp=xp)
    heads = weights @ e.Vh
    concat = merge_heads(heads, xp=xp)
    return {"scores": scores, "weights": weights, "heads": heads, "concat": concat, "output": linear(concat, e.W_O, xp=xp)}


def _d_model_scaled(e: Env, p: Params, xp) -> dict:
    # Same per-head dot products, divided by √d_model instead of √d_k.
    return _heads_from(e.Qh @ swap(e.Kh) / p.d_model ** 0.5, e, xp)


def _stacked_tokens(e: Env, p: Params, xp) -> dict:
    # (..., h, n, d_k) stacked head under head is (..., h·n, d_k); read row by row into n × d_model.
    concat = e.heads.reshape(*e.heads.shape[:-3], n_queries(p), p.d_model)
    return {"concat": concat, "output": linear(concat, e.W_O, xp=xp)}


def _accept(e: Env, p: Params, xp):
    # Every head's every row must spread its weight (no weight above 95 %), and Wᴼ must use
    # every feature of Z_cat and feed every output feature (no zero row or column).
    # With one key every weight is 1, and nothing is spread.
    batch = e.weights.shape[0]
    spread = ~(e.weights.max(axis=-1) > SATURATED).reshape(batch, -1).any(axis=-1)
    if n_keys(p) == 1:
        spread = xp.ones(batch, dtype=bool)
    used = (xp.abs(e.W_O) > 0)
    return spread & used.any(axis=-1).all(axis=-1) & used.any(axis=-2).all(axis=-1)


def _d_model_slip(p: Params) -> bool:
    # Only where each head divides by √d_k of its own width, and √d_model is another number.
    return p.heads > 1 and divides_by_sqrt_dk(p) and stated_d_k(per_head(p)) != p.d_model


def _d_model_slip_after(p: Params) -> bool:
    # With one key every weight is 1, whatever the scores: the slip shows in the scores only.
    return _d_model_slip(p) and n_keys(p) > 1


def _stacking_shows(p: Params) -> bool:
    # One query: the stack of h rows read into one row is [Z₁ | Z₂ | …] itself.
    return p.heads > 1 and n_queries(p) > 1


def _context(p: Params) -> dict:
    """``att`` of one head (its d_k, the scale, the counts) for the templates."""
    return template_context(per_head(p))


def _formula(p: Params, step: str) -> str | None:
    if step != "scores" or divides_by_sqrt_dk(p):
        return None
    factor = score_factor(p)
    scale = "" if factor == 1 else f"{factor:g}\\,"
    return f"S^{{(h)}} = {scale}Q^{{(h)}} K^{{(h)\\top}}"


_D_MODEL = N_("Each head is scaled by √dₖ, dₖ being its own width (the model width over h), not by the square root of the model width.")
_STACKED = (
    N_("The heads were stacked along the tokens (one under the other) and read back into n rows; "
    "concatenate each token's head outputs side by side along the features: [Z₁ | Z₂ | …].")
)

MULTIHEAD = Family(
    name="attention.multihead",
    title=N_("Multi-head attention"),
    summary=N_("Split the model width into h heads of width dₖ, attend per head (scale √dₖ), concatenate, project by Wᴼ."),
    params={
        "tokens": Param(2, "number of tokens n", low=2, high=8),
        **SIZE_PARAMS,
        "d_model": Param(4, "model width d_model (columns of Q, K, V)", low=2, high=32),
        "heads": Param(2, "number of heads h (d_model must be a multiple of h)", low=1, high=8),
        "entries": int_range((-1, 1), "range of the integer entries of Q and K"),
        "v_entries": int_range((-2, 2), "range of the integer entries of V"),
        "w_entries": int_range((-1, 1), "range of the integer entries of Wᴼ"),
        **SCALE_PARAMS,
        "decimals": DECIMALS,
    },
    givens=(
        Given("Q", "Q", N_("queries (already projected), one row per token")),
        Given("K", "K", N_("keys (already projected), one row per key")),
        Given("V", "V", N_("values (already projected), one row per key")),
        Given("W_O", "W^O", N_("output projection")),
    ),
    sample=_sample,
    steps=(
        Step("Qh", "Q^{(h)}", r"Q^{(h)} = Q_{:,\,(h-1)d_k+1 \dots h d_k}", "", lambda e, p, xp: split_heads(e.Q, p.heads, xp=xp), ("Q",)),
        Step("Kh", "K^{(h)}", r"K^{(h)} = K_{:,\,(h-1)d_k+1 \dots h d_k}", "", lambda e, p, xp: split_heads(e.K, p.heads, xp=xp), ("K",)),
        Step("Vh", "V^{(h)}", r"V^{(h)} = V_{:,\,(h-1)d_k+1 \dots h d_k}", "", lambda e, p, xp: split_heads(e.V, p.heads, xp=xp), ("V",)),
        Step(
            "scores", "S^{(h)}", r"S^{(h)} = \frac{Q^{(h)} K^{(h)\top}}{\sqrt{d_k}}", N_("Compute every head's scaled scores"),
            _head_scores, ("Qh", "Kh"),
        ),
        Step(
            "weights", "A^{(h)}", r"A^{(h)} = \operatorname{softmax}(S^{(h)})", N_("Compute every head's attention weights, row by row"),
            # Each head's rows sum to 1; with no mask the row check broadcasts over the head axis.
            lambda e, p, xp: softmax(e.scores, xp=xp), ("scores",), WEIGHTS_INVARIANTS,
        ),
        Step(
            "heads", "Z^{(h)}", r"Z^{(h)} = A^{(h)} V^{(h)}", N_("Compute every head's output"),
            lambda e, p, xp: e.weights @ e.Vh, ("weights", "Vh"),
        ),
        Step(
            "concat", r"Z_{\text{cat}}", r"Z_{\text{cat}} = [\,Z^{(1)} \mid Z^{(2)} \mid \cdots\,]",
            N_("Concatenate the heads along the features"),
            lambda e, p, xp: merge_heads(e.heads, xp=xp), ("heads",),
        ),
        Step(
            "output", "Y", r"Y = Z_{\text{cat}} W^O", N_("Apply the output projection"),
            lambda e, p, xp: linear(e.concat, e.W_O, xp=xp), ("concat", "W_O"),
        ),
    ),
    default_ask=("scores", "weights", "heads", "concat", "output"),
    misconceptions=(
        *(
            Misconception(step, "scaled_by_d_model", (lambda s: lambda e, p, xp: _d_model_scaled(e, p, xp)[s])(step),
                          _D_MODEL, applies=_d_model_slip if step == "scores" else _d_model_slip_after)
            for step in ("scores", "weights", "heads", "concat", "output")
        ),
        *(
            Misconception(step, "stacked_tokens", (lambda s: lambda e, p, xp: _stacked_tokens(e, p, xp)[s])(step),
                          _STACKED, applies=_stacking_shows)
            for step in ("concat", "output")
        ),
        Misconception(
            "scores", "unscaled", lambda e, p, xp: raw_scores(e.Qh, e.Kh, xp),
            N_("Each head's scores were not divided by √dₖ."), applies=lambda p: scale_shows(per_head(p)),
        ),
        Misconception(
            "scores", "forgot_scale", lambda e, p, xp: raw_scores(e.Qh, e.Kh, xp),
            N_("Each head's scores were not multiplied by the scale this problem gives (S⁽ʰ⁾ = scale·Q⁽ʰ⁾K⁽ʰ⁾ᵀ)."),
            applies=lambda p: factor_shows(per_head(p)), screens=False,
        ),
        Misconception(
            "scores", "scaled_anyway",
            lambda e, p, xp: scaled_raw(e.Qh, e.Kh, per_head(Params({**p, "scale": SQRT_DK})), xp),
            N_("This problem asks for each head's raw dot products, without dividing by √dₖ."),
            applies=lambda p: unscaled_asked(per_head(p)),
        ),
    ),
    accept=_accept,
    validate=_check,
    extra={"context": _context, "formula": _formula},
    later_params=LATER_PARAMS,
)

FAMILIES = (MULTIHEAD,)
