"""Scaled dot-product attention, forward and backward, on batched arrays.

Shapes: rows are tokens. ``q``: (..., n, d_k), ``k``: (..., m, d_k), ``v``: (..., m, d_v);
``allowed``: boolean (..., n, m), True where query i may attend to key j (None: all).
Every function takes ``xp`` (NumPy or CuPy) and works for any leading batch shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import swap

Array = Any


def scaled_scores(q: Array, k: Array, *, scale: bool = True, xp=np) -> Array:
    """S = Q Kᵀ / √d_k (or Q Kᵀ when ``scale`` is False)."""
    s = q @ swap(k)
    if scale:
        s = s / xp.sqrt(xp.asarray(q.shape[-1], dtype=s.dtype))
    return s


def apply_mask(s: Array, allowed: Array | None, *, xp=np) -> Array:
    """Set disallowed scores to −∞ (so that softmax gives them weight 0)."""
    if allowed is None:
        return s
    return xp.where(allowed, s, -xp.inf)


def softmax(s: Array, *, axis: int = -1, xp=np) -> Array:
    """Stable softmax: subtract the row max; a row with no finite entry gives zeros, not NaN."""
    m = xp.max(s, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0.0)  # all −∞ row: shift by 0, exp gives zeros
    e = xp.exp(s - m)
    total = xp.sum(e, axis=axis, keepdims=True)
    return e / xp.where(total > 0, total, 1.0)


@dataclass(frozen=True)
class AttentionForward:
    """Every intermediate a worksheet may ask for."""

    q: Array
    k: Array
    v: Array
    allowed: Array | None
    scale: bool
    scores: Array  # S = QKᵀ/√d_k, masked entries −∞
    weights: Array  # A = softmax(S) per row
    output: Array  # Z = A V


def attention(
    q: Array, k: Array, v: Array, allowed: Array | None = None, *, scale: bool = True, xp=np
) -> AttentionForward:
    """Z = softmax(Q Kᵀ/√d_k + mask) V."""
    s = apply_mask(scaled_scores(q, k, scale=scale, xp=xp), allowed, xp=xp)
    a = softmax(s, xp=xp)
    return AttentionForward(q, k, v, allowed, scale, s, a, a @ v)


def softmax_backward(a: Array, da: Array, *, xp=np) -> Array:
    """∇S = A ⊙ (∇A − rowsum(∇A ⊙ A)): the softmax Jacobian diag(p) − ppᵀ applied per row."""
    return a * (da - xp.sum(da * a, axis=-1, keepdims=True))


@dataclass(frozen=True)
class AttentionGradients:
    dv: Array
    dweights: Array  # ∇A
    dscores: Array  # ∇S (zero where masked)
    dq: Array
    dk: Array


def attention_backward(fwd: AttentionForward, dz: Array, *, xp=np) -> AttentionGradients:
    """∇V = Aᵀ∇Z; ∇A = ∇Z Vᵀ; ∇S = A ⊙ (∇A − rowsum(∇A ⊙ A)); ∇Q = ∇S K/√d; ∇K = ∇Sᵀ Q/√d."""
    a = fwd.weights
    dv = swap(a) @ dz
    da = dz @ swap(fwd.v)
    ds = softmax_backward(a, da, xp=xp)
    c = 1.0 / np.sqrt(fwd.q.shape[-1]) if fwd.scale else 1.0
    return AttentionGradients(dv, da, ds, (ds @ fwd.k) * c, (swap(ds) @ fwd.q) * c)
