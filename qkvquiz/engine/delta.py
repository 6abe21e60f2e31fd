"""The delta rule (DeltaNet): recurrent form, chunked form, and the chunk backward.

Convention (Yang et al. 2024): the state ``S`` is (..., d_v, d_k) and, token by token,

    Sₜ = Sₜ₋₁(I − βₜkₜkₜᵀ) + βₜvₜkₜᵀ = Sₜ₋₁ + βₜ(vₜ − Sₜ₋₁kₜ)kₜᵀ,    oₜ = Sₜqₜ.

Shapes: rows are tokens. ``q``, ``k``: (..., T, d_k); ``v``: (..., T, d_v); ``beta``: (..., T).
Every function takes ``xp`` (NumPy or CuPy) and works for any leading batch shape; the only
Python loops run over tokens or over the rows of one chunk, never over the batch.

Unit lower-triangular systems are solved by substitution and A⁻¹ is never formed: with
un-normalised keys cond(A) can reach 1e13, where an explicit inverse loses about 8 digits
and substitution keeps ~1e-14 relative error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import DTYPE, swap

Array = Any


# ---------------------------------------------------------------------------- masks


def tril_strict_mask(c: int, xp=np) -> Array:
    """(C, C) float mask, 1 strictly below the diagonal (r > s): the part of A built from β G."""
    return xp.tril(xp.ones((c, c), dtype=DTYPE), k=-1)


def causal_mask(c: int, xp=np) -> Array:
    """(C, C) float mask M, 1 on and below the diagonal (r ≥ s): token r sees tokens s ≤ r."""
    return xp.tril(xp.ones((c, c), dtype=DTYPE))


# ---------------------------------------------------------------- triangular solves


def _solve_shape(a: Array, b: Array) -> tuple[int, ...]:
    # Shapes only (no array math), so NumPy's shape helper serves both backends.
    return np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + tuple(b.shape[-2:])


def solve_unit_lower(a: Array, b: Array, *, xp=np) -> Array:
    """Solve A Y = B for unit lower-triangular A (..., C, C), B (..., C, n) by forward substitution.

    Row by row: y₀ = b₀, yᵢ = bᵢ − Σ_{j<i} Aᵢⱼ yⱼ. Only the strict lower triangle of ``a`` is
    read (the diagonal is taken to be 1), so the result is A⁻¹B without forming A⁻¹.
    """
    y = xp.empty(_solve_shape(a, b), dtype=xp.result_type(a, b, DTYPE))
    y[...] = b
    for i in range(1, b.shape[-2]):
        # (..., 1, i) @ (..., i, n): row i of A against the rows already solved.
        y[..., i, :] = b[..., i, :] - (a[..., i : i + 1, :i] @ y[..., :i, :])[..., 0, :]
    return y


def solve_unit_lower_transposed(a: Array, b: Array, *, xp=np) -> Array:
    """Solve Aᵀ Y = B for unit lower-triangular A by back substitution (Y = A⁻ᵀB).

    Aᵀ is unit upper-triangular with (Aᵀ)ᵢⱼ = Aⱼᵢ, so from the last row up:
    y_{C−1} = b_{C−1}, yᵢ = bᵢ − Σ_{j>i} Aⱼᵢ yⱼ (column i of A below the diagonal).
    """
    y = xp.empty(_solve_shape(a, b), dtype=xp.result_type(a, b, DTYPE))
    y[...] = b
    c = b.shape[-2]
    for i in range(c - 2, -1, -1):
        col = swap(a[..., i + 1 :, i : i + 1])  # (..., 1, C−1−i): Aⱼᵢ for j > i
        y[..., i, :] = b[..., i, :] - (col @ y[..., i + 1 :, :])[..., 0, :]
    return y


# ------------------------------------------------------------------- recurrent form


@dataclass(frozen=True)
class DeltaRecurrent:
    """The token-by-token recurrence and the state after every token."""

    q: Array
    k: Array
    v: Array
    beta: Array
    s0: Array  # (..., d_v, d_k), the state before the first token
    states: Array  # (..., T, d_v, d_k): Sₜ after token t
    outputs: Array  # (..., T, d_v): oₜ = Sₜqₜ

    @property
    def final_state(self) -> Array:
        return self.states[..., -1, :, :]


def _zero_state(q: Array, k: Array, v: Array, beta: Array, *, xp) -> Array:
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], beta.shape[:-1])
    return xp.zeros(batch + (v.shape[-1], k.shape[-1]), dtype=DTYPE)


def delta_recurrent(
    q: Array, k: Array, v: Array, beta: Array, s0: Array | None = None, *, xp=np
) -> DeltaRecurrent:
    """Sₜ = Sₜ₋₁ + βₜ(vₜ − Sₜ₋₁kₜ)kₜᵀ, oₜ = Sₜqₜ for t = 1 … T, starting from ``s0`` (zeros)."""
    if k.shape[-2] == 0:
        raise ValueError("the delta rule needs a sequence of at least one token")
    s = _zero_state(q, k, v, beta, xp=xp) if s0 is None else s0
    start = s
    states, outputs = [], []
    for t in range(k.shape[-2]):
        kt, vt, qt, bt = k[..., t, :], v[..., t, :], q[..., t, :], beta[..., t, None]
        # Sₜ₋₁kₜ is what the memory currently returns for key kₜ; the update writes the error.
        recalled = (s @ kt[..., :, None])[..., 0]
        s = s + (bt * (vt - recalled))[..., :, None] * kt[..., None, :]
        states.append(s)
        outputs.append((s @ qt[..., :, None])[..., 0])
    return DeltaRecurrent(q, k, v, beta, start, xp.stack(states, axis=-3), xp.stack(outputs, -2))


# --------------------------------------------------------------------- one chunk


@dataclass(frozen=True)
class ChunkForward:
    """Every intermediate of one chunk (length C) started from state ``s``."""

    q: Array  # (..., C, d_k)
    k: Array  # (..., C, d_k)
    v: Array  # (..., C, d_v)
    beta: Array  # (..., C)
    s: Array  # (..., d_v, d_k), state entering the chunk
    g: Array  # G = K Kᵀ
    a: Array  # A = I + tril(diag(β) G, −1)
    bk: Array  # B_K = diag(β) K
    bv: Array  # B_V = diag(β) V
    w: Array  # W = A⁻¹ B_K
    u: Array  # U = A⁻¹ B_V
    x: Array  # X = U − W Sᵀ
    t: Array  # T = Q Kᵀ
    p: Array  # P = T ⊙ M
    o: Array  # O = Q Sᵀ + P X
    s_next: Array  # S⁺ = S + Xᵀ K


def chunk_forward(q: Array, k: Array, v: Array, beta: Array, s: Array, *, xp=np) -> ChunkForward:
    """One chunk of the delta rule in matrix form (the WY representation).

    G = KKᵀ; A = I + tril(diag(β)G, −1); B_K = diag(β)K, B_V = diag(β)V;
    W = A⁻¹B_K, U = A⁻¹B_V (forward substitution); X = U − WSᵀ;
    T = QKᵀ, P = T ⊙ M; O = QSᵀ + PX; S⁺ = S + XᵀK.
    """
    c = k.shape[-2]
    g = k @ swap(k)
    a = xp.eye(c, dtype=DTYPE) + tril_strict_mask(c, xp) * (beta[..., :, None] * g)
    bk = beta[..., :, None] * k
    bv = beta[..., :, None] * v
    w = solve_unit_lower(a, bk, xp=xp)
    u = solve_unit_lower(a, bv, xp=xp)
    # Row r of X is what token r writes: its target minus what S (and earlier tokens) recall.
    x = u - w @ swap(s)
    t = q @ swap(k)
    p = t * causal_mask(c, xp)
    o = q @ swap(s) + p @ x
    s_next = s + swap(x) @ k
    return ChunkForward(q, k, v, beta, s, g, a, bk, bv, w, u, x, t, p, o, s_next)


@dataclass(frozen=True)
class ChunkGradients:
    """∂L/∂(·) of every chunk quantity, each the total over all of its uses."""

    dx: Array
    dp: Array
    dt: Array
    du: Array
    dw: Array
    dbk: Array
    dbv: Array
    da: Array  # full (C, C) matrix −A⁻ᵀW̄Wᵀ − A⁻ᵀŪUᵀ (only its strict lower part reaches β, G)
    dg: Array
    dbeta: Array
    dk: Array
    dq: Array
    dv: Array
    ds: Array  # S̄: the gradient handed to the previous chunk as its S̄⁺


def chunk_backward(fwd: ChunkForward, d_o: Array, d_s_next: Array, *, xp=np) -> ChunkGradients:
    """Reverse the chunk, given Ō = ∂L/∂O and S̄⁺ = ∂L/∂S⁺, last forward line first.

    S⁺ = S + XᵀK:      S̄ = S̄⁺,  X̄ = K S̄⁺ᵀ,  K̄ = X S̄⁺
    O = QSᵀ + PX:      Q̄ += Ō S,  S̄ += Ōᵀ Q,  P̄ = Ō Xᵀ,  X̄ += Pᵀ Ō
    P = T ⊙ M:         T̄ = P̄ ⊙ M;  T = QKᵀ:  Q̄ += T̄ K,  K̄ += T̄ᵀ Q
    X = U − WSᵀ:       Ū = X̄,  W̄ = −X̄ S,  S̄ += −X̄ᵀ W
    W = A⁻¹B_K, U = A⁻¹B_V (from dY = A⁻¹(dB − dA·Y)):
                       B̄_K = A⁻ᵀW̄,  B̄_V = A⁻ᵀŪ  (back substitution),
                       Ā = −A⁻ᵀW̄ Wᵀ − A⁻ᵀŪ Uᵀ = −B̄_K Wᵀ − B̄_V Uᵀ
    B_K = diag(β)K, B_V = diag(β)V:
                       K̄ += diag(β) B̄_K,  V̄ = diag(β) B̄_V,  β̄ᵢ = Σ_d (B̄_K)ᵢd Kᵢd + (B̄_V)ᵢd Vᵢd
    A = I + tril(diag(β)G, −1) (only r > s depends on β, G):
                       Ḡ = tril(diag(β) Ā, −1),  β̄ᵢ += Σ_{s<i} Āᵢs Gᵢs
    G = KKᵀ:           K̄ += (Ḡ + Ḡᵀ) K
    S̄ goes to the previous chunk.
    """
    f = fwd
    c = f.k.shape[-2]
    # S⁺ = S + XᵀK
    ds = d_s_next
    dx = f.k @ swap(d_s_next)
    dk = f.x @ d_s_next
    # O = QSᵀ + PX
    dq = d_o @ f.s
    ds = ds + swap(d_o) @ f.q
    dp = d_o @ swap(f.x)
    dx = dx + swap(f.p) @ d_o
    # P = T ⊙ M, T = QKᵀ
    dt = dp * causal_mask(c, xp)
    dq = dq + dt @ f.k
    dk = dk + swap(dt) @ f.q
    # X = U − WSᵀ
    du = dx
    dw = -(dx @ f.s)
    ds = ds - swap(dx) @ f.w
    # W = A⁻¹B_K, U = A⁻¹B_V: the adjoint of a solve with A is a solve with Aᵀ.
    dbk = solve_unit_lower_transposed(f.a, dw, xp=xp)
    dbv = solve_unit_lower_transposed(f.a, du, xp=xp)
    da = -(dbk @ swap(f.w)) - dbv @ swap(f.u)
    # B_K = diag(β)K, B_V = diag(β)V
    dk = dk + f.beta[..., :, None] * dbk
    dv = f.beta[..., :, None] * dbv
    dbeta = xp.sum(dbk * f.k, axis=-1) + xp.sum(dbv * f.v, axis=-1)
    # A = I + tril(diag(β)G, −1)
    strict = tril_strict_mask(c, xp)
    dg = strict * (f.beta[..., :, None] * da)
    dbeta = dbeta + xp.sum(strict * da * f.g, axis=-1)
    # G = KKᵀ
    dk = dk + (dg + swap(dg)) @ f.k
    return ChunkGradients(dx, dp, dt, du, dw, dbk, dbv, da, dg, dbeta, dk, dq, dv, ds)


# ------------------------------------------------------------ a whole sequence


@dataclass(frozen=True)
class ChunkedForward:
    """A sequence processed chunk by chunk (the last chunk may be shorter)."""

    chunk_size: int
    s0: Array  # (..., d_v, d_k)
    outputs: Array  # (..., T, d_v)
    final_state: Array  # (..., d_v, d_k)
    chunks: tuple[ChunkForward, ...]


def chunked_forward(
    q: Array,
    k: Array,
    v: Array,
    beta: Array,
    chunk_size: int,
    s0: Array | None = None,
    *,
    xp=np,
) -> ChunkedForward:
    """Run :func:`chunk_forward` on tokens [0, C), [C, 2C), …, passing S⁺ on as the next S."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    n = k.shape[-2]
    if n == 0:
        raise ValueError("the delta rule needs a sequence of at least one token")
    s = _zero_state(q, k, v, beta, xp=xp) if s0 is None else s0
    start = s
    chunks = []
    for lo in range(0, n, chunk_size):
        hi = min(lo + chunk_size, n)
        fwd = chunk_forward(
            q[..., lo:hi, :], k[..., lo:hi, :], v[..., lo:hi, :], beta[..., lo:hi], s, xp=xp
        )
        chunks.append(fwd)
        s = fwd.s_next
    outputs = xp.concatenate([c.o for c in chunks], axis=-2)
    return ChunkedForward(chunk_size, start, outputs, s, tuple(chunks))


@dataclass(frozen=True)
class ChunkedGradients:
    dq: Array  # (..., T, d_k)
    dk: Array  # (..., T, d_k)
    dv: Array  # (..., T, d_v)
    dbeta: Array  # (..., T)
    ds0: Array  # (..., d_v, d_k)
    chunks: tuple[ChunkGradients, ...]  # in chunk order


def chunked_backward(
    fwd: ChunkedForward, d_outputs: Array, d_final_state: Array | None = None, *, xp=np
) -> ChunkedGradients:
    """Backward over the chunks, last first: each chunk's S̄ is the previous chunk's S̄⁺.

    ``d_final_state`` (∂L/∂S of the final state) defaults to zero: the loss sees only outputs.
    """
    ds = xp.zeros_like(fwd.final_state) if d_final_state is None else d_final_state
    grads: list[ChunkGradients] = []
    hi = d_outputs.shape[-2]
    for chunk in reversed(fwd.chunks):
        lo = hi - chunk.k.shape[-2]
        g = chunk_backward(chunk, d_outputs[..., lo:hi, :], ds, xp=xp)
        grads.append(g)
        ds = g.ds
        hi = lo
    grads.reverse()
    return ChunkedGradients(
        dq=xp.concatenate([g.dq for g in grads], axis=-2),
        dk=xp.concatenate([g.dk for g in grads], axis=-2),
        dv=xp.concatenate([g.dv for g in grads], axis=-2),
        dbeta=xp.concatenate([g.dbeta for g in grads], axis=-1),
        ds0=ds,
        chunks=tuple(grads),
    )
