"""Multi-head attention: split d_model into h heads, attend per head, concatenate, project.

Givens are the projected Q, K, V (n × d_model) and the output projection Wᴼ (d_model ×
d_model). Head i owns feature columns i·d_k … (i+1)·d_k − 1 with d_k = d_model/h (the
convention of :mod:`qkvquiz.engine.multihead`); each head is scaled by √d_k, and the heads'
outputs are concatenated along the features, head 1 first, before Wᴼ.

Per-head steps are stacks of shape (h, n, ·): a student answers them as a list of h matrices.
Concatenating along the tokens instead gives an (h·n) × d_k matrix, whose shape the answer
reader already refuses with a message naming the expected n × d_model; the mistake that can
be graded as a value is the same stack read row by row into n × d_model (what a reshape of
the (h, n, d_k) stack without moving the head axis does), listed below as ``stacked_tokens``.
"""

from __future__ import annotations

from ..engine.attention import scaled_scores, softmax
from ..engine.backend import swap
from ..engine.multihead import merge_heads, split_heads
from ..engine.projection import linear
from ..i18n import N_
from ..seeding import Draw
from .attention import SATURATED, WEIGHTS_INVARIANTS
from .base import DECIMALS, Env, Family, Given, Misconception, Param, Params, Step, int_range


def _check(p: Params) -> None:
    if p.d_model % p.heads:
        raise ValueError(f"d_model ({p.d_model}) must be a multiple of heads ({p.heads})")


def _sample(draw: Draw, p: Params) -> dict:
    lo, hi = p.entries
    vlo, vhi = p.v_entries
    wlo, whi = p.w_entries
    n, dm = p.tokens, p.d_model
    return {
        "Q": draw.integers(lo, hi, (n, dm)),
        "K": draw.integers(lo, hi, (n, dm)),
        "V": draw.integers(vlo, vhi, (n, dm)),
        "W_O": draw.integers(wlo, whi, (dm, dm)),
    }


def _heads_from(scores, e: Env, xp) -> dict:
    """Weights, head outputs, concatenation and output from per-head scores (h, n, n)."""
    weights = softmax(scores, xp=xp)
    heads = weights @ e.Vh
    concat = merge_heads(heads, xp=xp)
    return {"scores": scores, "weights": weights, "heads": heads, "concat": concat, "output": linear(concat, e.W_O, xp=xp)}


def _d_model_scaled(e: Env, p: Params, xp) -> dict:
    # Same per-head dot products, divided by √d_model instead of √d_k.
    return _heads_from(e.Qh @ swap(e.Kh) / p.d_model ** 0.5, e, xp)


def _stacked_tokens(e: Env, p: Params, xp) -> dict:
    # (..., h, n, d_k) stacked head under head is (..., h·n, d_k); read row by row into n × d_model.
    concat = e.heads.reshape(*e.heads.shape[:-3], p.tokens, p.d_model)
    return {"concat": concat, "output": linear(concat, e.W_O, xp=xp)}


def _accept(e: Env, p: Params, xp):
    # Every head's every row must spread its weight (no weight above 95 %), and Wᴼ must use
    # every feature of Z_cat and feed every output feature (no zero row or column).
    batch = e.weights.shape[0]
    spread = ~(e.weights.max(axis=-1) > SATURATED).reshape(batch, -1).any(axis=-1)
    used = (xp.abs(e.W_O) > 0)
    return spread & used.any(axis=-1).all(axis=-1) & used.any(axis=-2).all(axis=-1)


def _several_heads(p: Params) -> bool:
    return p.heads > 1


_D_MODEL = N_("Each head is scaled by √d_k with d_k = d_model/h, its own width, not by √d_model.")
_STACKED = (
    N_("The heads were stacked along the tokens (one under the other) and read back into n rows; "
    "concatenate each token's head outputs side by side along the features: [Z₁ | Z₂ | …].")
)

MULTIHEAD = Family(
    name="attention.multihead",
    title=N_("Multi-head attention"),
    summary="Split d_model into h heads of d_k = d_model/h, attend per head (scale √d_k), concatenate, project by Wᴼ.",
    params={
        "tokens": Param(2, "number of tokens n", low=2, high=8),
        "d_model": Param(4, "model width d_model (columns of Q, K, V)", low=2, high=32),
        "heads": Param(2, "number of heads h (d_model must be a multiple of h)", low=1, high=8),
        "entries": int_range((-1, 1), "range of the integer entries of Q and K"),
        "v_entries": int_range((-2, 2), "range of the integer entries of V"),
        "w_entries": int_range((-1, 1), "range of the integer entries of Wᴼ"),
        "decimals": DECIMALS,
    },
    givens=(
        Given("Q", "Q", "queries (already projected), one row per token"),
        Given("K", "K", "keys (already projected)"),
        Given("V", "V", "values (already projected)"),
        Given("W_O", "W^O", "output projection"),
    ),
    sample=_sample,
    steps=(
        Step("Qh", "Q^{(h)}", r"Q^{(h)} = Q_{:,\,(h-1)d_k+1 \dots h d_k}", "", lambda e, p, xp: split_heads(e.Q, p.heads, xp=xp), ("Q",)),
        Step("Kh", "K^{(h)}", r"K^{(h)} = K_{:,\,(h-1)d_k+1 \dots h d_k}", "", lambda e, p, xp: split_heads(e.K, p.heads, xp=xp), ("K",)),
        Step("Vh", "V^{(h)}", r"V^{(h)} = V_{:,\,(h-1)d_k+1 \dots h d_k}", "", lambda e, p, xp: split_heads(e.V, p.heads, xp=xp), ("V",)),
        Step(
            "scores", "S^{(h)}", r"S^{(h)} = \frac{Q^{(h)} K^{(h)\top}}{\sqrt{d_k}}", N_("Compute every head's scaled scores"),
            lambda e, p, xp: scaled_scores(e.Qh, e.Kh, xp=xp), ("Qh", "Kh"),
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
                          _D_MODEL, applies=_several_heads)
            for step in ("scores", "weights", "heads", "concat", "output")
        ),
        *(
            Misconception(step, "stacked_tokens", (lambda s: lambda e, p, xp: _stacked_tokens(e, p, xp)[s])(step),
                          _STACKED, applies=_several_heads)
            for step in ("concat", "output")
        ),
    ),
    accept=_accept,
    validate=_check,
)

FAMILIES = (MULTIHEAD,)
