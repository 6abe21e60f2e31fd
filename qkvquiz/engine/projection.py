"""Linear projections, forward and backward, on batched arrays.

Rows are tokens: ``x`` is (..., n, d_in) and a weight ``w`` is (..., d_in, d_out), so that
Y = X W projects every token at once (Q = X W_Q in attention). :func:`matvec` is the
single-token, column-vector form q = W x that worksheets also use.

Weight gradients are per batch element: a ``w`` shared by every element of a batch gets
one gradient per element, and their sum over the leading axes is the gradient of the
shared weight. This keeps each generated variant's answer separate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import swap

Array = Any


def linear(x: Array, w: Array, *, xp=np) -> Array:
    """Y = X W: every token row of ``x`` (..., n, d_in) times ``w`` (..., d_in, d_out)."""
    return x @ w


@dataclass(frozen=True)
class LinearGradients:
    dx: Array  # ∇X = ∇Y Wᵀ, shape of x
    dw: Array  # ∇W = Xᵀ ∇Y, (..., d_in, d_out) per batch element


def linear_backward(x: Array, w: Array, dy: Array, *, xp=np) -> LinearGradients:
    """Gradients of Y = X W given ∇Y.

    Y_ij = Σ_k X_ik W_kj, so ∂Y_ij/∂X_ik = W_kj and ∂Y_ij/∂W_kj = X_ik. Summing over the
    outputs that each input touches: ∇X_ik = Σ_j ∇Y_ij W_kj, i.e. ∇X = ∇Y Wᵀ; and
    ∇W_kj = Σ_i X_ik ∇Y_ij, i.e. ∇W = Xᵀ ∇Y (a sum over tokens).
    """
    return LinearGradients(dx=dy @ swap(w), dw=swap(x) @ dy)


def matvec(w: Array, x: Array, *, xp=np) -> Array:
    """q = W x for a column vector: ``w`` (..., d_out, d_in), ``x`` (..., d_in) -> (..., d_out)."""
    # A trailing unit axis makes x a batched column so that matmul broadcasts the batch.
    return (w @ x[..., None])[..., 0]


@dataclass(frozen=True)
class MatvecGradients:
    dw: Array  # ∇W = ∇q xᵀ (an outer product), (..., d_out, d_in)
    dx: Array  # ∇x = Wᵀ ∇q, (..., d_in)


def matvec_backward(w: Array, x: Array, dq: Array, *, xp=np) -> MatvecGradients:
    """Gradients of q = W x given ∇q.

    q_i = Σ_j W_ij x_j, so ∂q_i/∂W_ij = x_j and ∂q_i/∂x_j = W_ij. Hence ∇W_ij = ∇q_i x_j,
    the outer product ∇q xᵀ, and ∇x_j = Σ_i W_ij ∇q_i, i.e. ∇x = Wᵀ ∇q.
    """
    dw = dq[..., :, None] * x[..., None, :]
    dx = (swap(w) @ dq[..., None])[..., 0]
    return MatvecGradients(dw=dw, dx=dx)
