"""Layer normalisation over the feature axis, forward and backward, on batched arrays.

Shapes: ``x`` is (..., n, d), rows are tokens (a single vector is a (1, d) array); each
row is normalised over its d features with the biased variance and ε inside the root:

    μ = mean(x),  σ² = mean((x − μ)²),  rstd = 1/√(σ² + ε),  x̂ = (x − μ)·rstd,  y = γ ⊙ x̂ + β.

``gamma`` and ``beta`` are (..., d): one vector per batch element whose leading shape
broadcasts against ``x.shape[:-2]`` ((d,) shares one γ across the batch). Their gradients
are per batch element, summed over the token axis (-2) only, with shape
``x.shape[:-2] + (d,)``; to get the gradient of a γ shared by the whole batch, sum those
over the leading axes as well. A worksheet variant is one (n, d) problem, and each
variant's ∇γ is its own answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

Array = Any

EPS_DEFAULT = 1e-5


def _rowwise(p: Array) -> Array:
    """Put a per-element (..., d) parameter against (..., n, d) rows: it is shared by the tokens."""
    return p[..., None, :]


def _check_rows(x: Array) -> None:
    if x.ndim < 2:
        raise ValueError(
            f"layer norm needs token rows (..., n, d); got shape {tuple(x.shape)} "
            "(write a single vector as a (1, d) array)"
        )


@dataclass(frozen=True)
class LayerNormForward:
    """Every intermediate a worksheet may ask for."""

    x: Array
    gamma: Array
    beta: Array
    eps: float
    mean: Array  # μ per row, (..., n, 1)
    var: Array  # biased σ² per row, (..., n, 1)
    rstd: Array  # 1/√(σ² + ε) per row, (..., n, 1)
    xhat: Array  # (x − μ)·rstd
    y: Array  # γ ⊙ x̂ + β


def layer_norm(
    x: Array, gamma: Array, beta: Array, eps: float = EPS_DEFAULT, *, xp=np
) -> LayerNormForward:
    """y = γ ⊙ (x − μ)/√(σ² + ε) + β per row. A constant row has σ² = 0, rstd = 1/√ε, y = β."""
    _check_rows(x)
    mean = xp.mean(x, axis=-1, keepdims=True)
    centred = x - mean
    # Biased variance (divide by d, not d − 1): the convention of torch.nn.LayerNorm.
    var = xp.mean(centred * centred, axis=-1, keepdims=True)
    rstd = 1.0 / xp.sqrt(var + eps)
    xhat = centred * rstd
    y = _rowwise(gamma) * xhat + _rowwise(beta)
    return LayerNormForward(x, gamma, beta, eps, mean, var, rstd, xhat, y)


@dataclass(frozen=True)
class LayerNormGradients:
    dxhat: Array  # ∇x̂ = ∇y ⊙ γ
    dx: Array
    dgamma: Array  # Σ_tokens ∇y ⊙ x̂, (..., d)
    dbeta: Array  # Σ_tokens ∇y, (..., d)


def layer_norm_backward(fwd: LayerNormForward, dy: Array, *, xp=np) -> LayerNormGradients:
    """Gradients of y = γ ⊙ x̂ + β given ∇y.

    ∇β = Σ ∇y and ∇γ = Σ ∇y ⊙ x̂ (sums over tokens); ∇x̂ = ∇y ⊙ γ.
    Per row, x̂ = (x − μ)·rstd depends on x directly and through μ and σ²:
    ∂x̂_i/∂x_j = rstd·(δ_ij − 1/d − x̂_i x̂_j/d), so
    ∇x = rstd·(∇x̂ − mean(∇x̂) − x̂ ⊙ mean(∇x̂ ⊙ x̂)).
    """
    dxhat = dy * _rowwise(fwd.gamma)
    dx = fwd.rstd * (
        dxhat
        - xp.mean(dxhat, axis=-1, keepdims=True)
        - fwd.xhat * xp.mean(dxhat * fwd.xhat, axis=-1, keepdims=True)
    )
    dgamma = xp.sum(dy * fwd.xhat, axis=-2)
    dbeta = xp.sum(dy, axis=-2)
    return LayerNormGradients(dxhat=dxhat, dx=dx, dgamma=dgamma, dbeta=dbeta)


@dataclass(frozen=True)
class ResidualLayerNormForward:
    """Y = LN(X + Z): the residual sum and the layer norm applied to it."""

    x: Array
    z: Array
    residual: Array  # H = X + Z
    norm: LayerNormForward  # LN(H), with its own intermediates
    y: Array


def residual_layer_norm(
    x: Array, z: Array, gamma: Array, beta: Array, eps: float = EPS_DEFAULT, *, xp=np
) -> ResidualLayerNormForward:
    """Y = LN(X + Z), the post-norm residual connection of a transformer block."""
    residual = x + z
    norm = layer_norm(residual, gamma, beta, eps, xp=xp)
    return ResidualLayerNormForward(x, z, residual, norm, norm.y)


@dataclass(frozen=True)
class ResidualLayerNormGradients:
    norm: LayerNormGradients  # gradients of LN(H); norm.dx is ∇H
    dresidual: Array  # ∇H
    dx: Array  # ∇X = ∇H
    dz: Array  # ∇Z = ∇H
    dgamma: Array
    dbeta: Array


def residual_layer_norm_backward(
    fwd: ResidualLayerNormForward, dy: Array, *, xp=np
) -> ResidualLayerNormGradients:
    """H = X + Z passes ∇H unchanged to both summands: ∇X = ∇Z = ∇H, with ∇H from the layer norm."""
    g = layer_norm_backward(fwd.norm, dy, xp=xp)
    return ResidualLayerNormGradients(g, g.dx, g.dx, g.dx, g.dgamma, g.dbeta)
