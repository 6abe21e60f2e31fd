"""Multi-head self-attention, forward and backward, on batched arrays.

Shapes: ``x`` is (..., n, d_model), rows are tokens. ``w_q``, ``w_k``: (..., d_model, h·d_k),
``w_v``: (..., d_model, h·d_v), ``w_o``: (..., h·d_v, d_out); usually d_k = d_v = d_model/h.
Head i owns the feature columns i·d_k … (i+1)·d_k − 1 of Q, K and V, and the heads' outputs
are concatenated in the same order before W_O. ``allowed`` is a boolean (..., n, n) mask,
True where query i may attend to key j, shared by every head. Weight gradients are per
batch element (see :mod:`qkvquiz.engine.projection`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .attention import (
    AttentionForward,
    AttentionGradients,
    attention,
    attention_backward,
)
from .projection import linear, linear_backward

Array = Any


def split_heads(x: Array, h: int, *, xp=np) -> Array:
    """(..., n, h·d) -> (..., h, n, d): head i takes feature columns i·d … (i+1)·d − 1."""
    *lead, n, width = x.shape
    if h < 1 or width % h:
        raise ValueError(f"cannot split {width} features into {h} equal heads")
    # Features are grouped by head (head-major), then heads move in front of the tokens.
    return x.reshape(*lead, n, h, width // h).swapaxes(-2, -3)


def merge_heads(z: Array, *, xp=np) -> Array:
    """(..., h, n, d) -> (..., n, h·d): concatenate the heads along features, head 0 first.

    The inverse of :func:`split_heads`; being a permutation of entries, each one carries
    the other's gradient back unchanged.
    """
    *lead, h, n, d = z.shape
    return z.swapaxes(-3, -2).reshape(*lead, n, h * d)


@dataclass(frozen=True)
class MultiHeadForward:
    """Every intermediate a worksheet may ask for."""

    x: Array
    w_q: Array
    w_k: Array
    w_v: Array
    w_o: Array
    heads: int
    allowed: Array | None  # (..., n, n), as given (shared by the heads)
    q: Array  # Q = X W_Q, (..., n, h·d_k)
    k: Array  # K = X W_K
    v: Array  # V = X W_V, (..., n, h·d_v)
    qh: Array  # Q split into heads, (..., h, n, d_k)
    kh: Array
    vh: Array  # (..., h, n, d_v)
    attention: AttentionForward  # per head: scores, weights, output Z_h, (..., h, n, ·)
    z_cat: Array  # concat_h(Z_h), (..., n, h·d_v)
    y: Array  # Y = Z_cat W_O


def multihead_attention(
    x: Array,
    w_q: Array,
    w_k: Array,
    w_v: Array,
    w_o: Array,
    h: int,
    allowed: Array | None = None,
    *,
    xp=np,
) -> MultiHeadForward:
    """Y = concat_h(softmax(Q_h K_hᵀ/√d_k + mask) V_h) W_O with Q = X W_Q, K = X W_K, V = X W_V."""
    q = linear(x, w_q, xp=xp)
    k = linear(x, w_k, xp=xp)
    v = linear(x, w_v, xp=xp)
    qh, kh, vh = (split_heads(a, h, xp=xp) for a in (q, k, v))
    # A head axis in front of the (n, n) mask lets one mask serve every head.
    head_mask = None if allowed is None else allowed[..., None, :, :]
    att = attention(qh, kh, vh, head_mask, xp=xp)
    z_cat = merge_heads(att.output, xp=xp)
    y = linear(z_cat, w_o, xp=xp)
    return MultiHeadForward(x, w_q, w_k, w_v, w_o, h, allowed, q, k, v, qh, kh, vh, att, z_cat, y)


@dataclass(frozen=True)
class MultiHeadGradients:
    dw_o: Array  # ∇W_O = Z_catᵀ ∇Y
    dz_cat: Array  # ∇Z_cat = ∇Y W_Oᵀ
    dz_heads: Array  # ∇Z_cat split into heads, (..., h, n, d_v)
    attention: AttentionGradients  # per head: ∇V_h, ∇A_h, ∇S_h, ∇Q_h, ∇K_h
    dq: Array  # per-head ∇Q_h concatenated, (..., n, h·d_k)
    dk: Array
    dv: Array
    dw_q: Array  # Xᵀ ∇Q
    dw_k: Array  # Xᵀ ∇K
    dw_v: Array  # Xᵀ ∇V
    dx: Array  # ∇Q W_Qᵀ + ∇K W_Kᵀ + ∇V W_Vᵀ


def multihead_attention_backward(fwd: MultiHeadForward, dy: Array, *, xp=np) -> MultiHeadGradients:
    """Gradients of the multi-head block given ∇Y, in reverse order of the forward.

    Y = Z_cat W_O:           ∇W_O = Z_catᵀ ∇Y,  ∇Z_cat = ∇Y W_Oᵀ.
    Z_cat = concat_h(Z_h):   ∇Z_h is head h's block of columns of ∇Z_cat.
    Z_h = attention(Q_h, K_h, V_h): ∇Q_h, ∇K_h, ∇V_h per head (see attention_backward).
    Q_h = head h's columns of Q: ∇Q = concat_h(∇Q_h), likewise ∇K and ∇V.
    Q = X W_Q:               ∇W_Q = Xᵀ ∇Q (likewise W_K, W_V).
    X feeds Q, K and V:      ∇X = ∇Q W_Qᵀ + ∇K W_Kᵀ + ∇V W_Vᵀ (the three paths add).
    """
    out = linear_backward(fwd.z_cat, fwd.w_o, dy, xp=xp)
    dz_heads = split_heads(out.dx, fwd.heads, xp=xp)
    att = attention_backward(fwd.attention, dz_heads, xp=xp)
    dq, dk, dv = (merge_heads(g, xp=xp) for g in (att.dq, att.dk, att.dv))
    gq = linear_backward(fwd.x, fwd.w_q, dq, xp=xp)
    gk = linear_backward(fwd.x, fwd.w_k, dk, xp=xp)
    gv = linear_backward(fwd.x, fwd.w_v, dv, xp=xp)
    return MultiHeadGradients(
        dw_o=out.dw,
        dz_cat=out.dx,
        dz_heads=dz_heads,
        attention=att,
        dq=dq,
        dk=dk,
        dv=dv,
        dw_q=gq.dw,
        dw_k=gk.dw,
        dw_v=gv.dw,
        dx=gq.dx + gk.dx + gv.dx,
    )
