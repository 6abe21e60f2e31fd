"""One delta-rule chunk, forward and backward, in one fused pass for many tiny instances.

The same quantities as :func:`~qkvquiz.engine.delta.chunk_forward` followed by
:func:`~qkvquiz.engine.delta.chunk_backward`, for a batch of (say) 10⁶ chunks of C = 4 tokens:

    G = KKᵀ, A = I + tril(diag(β)G, −1), [U | W] = A⁻¹ diag(β)[V | K], X = U − WSᵀ,
    T = QKᵀ, P = T ⊙ M, O = QSᵀ + PX, S⁺ = S + XᵀK,

then, from Ō and S̄⁺, every line of the chunk backward (the derivation is in
:func:`~qkvquiz.engine.delta.chunk_backward`). Only O, S⁺ and the gradients of the inputs are
returned: dropping the intermediates is what makes the pass fast.

The arithmetic is the engine's, grouped differently: A⁻¹ is still never formed (both
triangular systems are solved by substitution, B_V and B_K side by side as one right-hand
side [B_V | B_K], and likewise [Ū | W̄] for the transposed solve), so the results agree with
the engine to rounding.

- NumPy: a stacked ``matmul`` of tiny matrices costs little more for 4×12 operands than
  for 4×4 (a fixed cost per matrix dominates), so products that share an operand are done
  as one product of side-by-side blocks, e.g. O = [Q | P][Sᵀ; X] and
  K̄ = [X | Ḡ + Ḡᵀ | T̄ᵀ][S̄⁺; K; Q] + diag(β)B̄_K, and a difference becomes a product with an
  identity block: X = [U | W][I; −Sᵀ]. The blocks live in per-thread workspaces, filled
  where they are computed where the layout allows; elementwise steps work on contiguous
  arrays where they can (on a 4-wide strided slot they are several times slower). β is
  broadcast once into a full-width array; each row sum is one matrix-vector product over
  every row of the block; each substitution step is one product with a row of I − (A − I),
  written over the row it solves. The batch is cut into cache-sized blocks (``chunk``
  instances) that may run on threads.
- CuPy: one CUDA thread per instance (:data:`CUDA_SOURCE`): inputs are read from global
  memory and results written once; every intermediate stays in the thread.
- Any other array namespace falls back to the engine functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from qkvquiz.engine import delta
from qkvquiz.engine.backend import swap
from .batching import Workspace, chunk_slices, thread_workspace
from .fused import CUDA_BLOCK, _flat_batch, _pool, sized_source

Array = Any

NUMPY_CHUNK = 512  # instances per block: the workspace (~3 KB an instance) stays in L2


@dataclass(frozen=True)
class FusedDeltaChunk:
    """O and S⁺ of one delta-rule chunk, and the gradients of L = ⟨Ō, O⟩ + ⟨S̄⁺, S⁺⟩."""

    o: Array  # (..., C, d_v)
    s_next: Array  # (..., d_v, d_k)
    dq: Array  # (..., C, d_k)
    dk: Array  # (..., C, d_k)
    dv: Array  # (..., C, d_v)
    dbeta: Array  # (..., C)
    ds: Array  # (..., d_v, d_k): S̄, handed to the previous chunk


def delta_chunk_fwd_bwd(
    q: Array,
    k: Array,
    v: Array,
    beta: Array,
    s: Array,
    d_o: Array,
    d_s_next: Array,
    *,
    xp=np,
    chunk: int = NUMPY_CHUNK,
    workers: int = 1,
) -> FusedDeltaChunk:
    """Forward and backward of one delta-rule chunk, fused.

    ``q``, ``k``: (..., C, d_k); ``v``, ``d_o``: (..., C, d_v); ``beta``: (..., C);
    ``s``, ``d_s_next``: (..., d_v, d_k); the leading batch shapes broadcast. ``chunk``
    (instances per block) and ``workers`` (threads) apply to the NumPy path only.
    """
    c, d_k = k.shape[-2:]
    d_v = v.shape[-1]
    if q.shape[-2:] != (c, d_k):
        raise ValueError("q and k need the same shape (C, d_k)")
    if d_o.shape[-2:] != (c, d_v) or beta.shape[-1] != c:
        raise ValueError("v and d_o need the shape (C, d_v) and beta the length C")
    if s.shape[-2:] != (d_v, d_k) or d_s_next.shape[-2:] != (d_v, d_k):
        raise ValueError("s and d_s_next need the shape (d_v, d_k)")
    if c == 0:
        raise ValueError("a delta-rule chunk needs at least one token")
    if xp is np:
        return _numpy_fused(q, k, v, beta, s, d_o, d_s_next, chunk=chunk, workers=workers)
    if getattr(xp, "__name__", "") == "cupy":
        return _cupy_fused(q, k, v, beta, s, d_o, d_s_next, xp)
    fwd = delta.chunk_forward(q, k, v, beta, s, xp=xp)
    g = delta.chunk_backward(fwd, d_o, d_s_next, xp=xp)
    return FusedDeltaChunk(fwd.o, fwd.s_next, g.dq, g.dk, g.dv, g.dbeta, g.ds)


# ----------------------------------------------------------------------------- NumPy


class _Workspace(Workspace):
    """Buffers for one block of ``size`` instances, reused block after block.

    Side-by-side blocks are single arrays so that one ``matmul`` reads them: the comments say
    what each holds, top to bottom (;) or left to right (|). Elementwise steps write
    contiguous arrays where they can (a strided 4-wide slot is several times slower), and
    the identity blocks are written once, here, and never overwritten.
    """

    def __init__(self, size: int, c: int, d_k: int, d_v: int) -> None:
        m = d_v + d_k
        self.rhs = np.empty((size, d_v + 2 * c, d_k))  # [S̄⁺; K; Q]
        self.kt = np.empty((size, d_k, c))  # Kᵀ
        self.gt = np.empty((size, 2 * c, c))  # [G; T]
        self.beta = np.empty((size, c, max(m, c)))  # βᵢ along every row i
        self.beta_strict = np.empty((size, c, c))  # βᵢ where s < i, else 0
        self.vkp = np.empty((size, c, m + c))  # [V | K | Pᵀ]
        # [· | −Q; U | W]: the solve fills the lower half (its right-hand side diag(β)[V | K]
        # first), and its right columns [−Q; W] are one operand of S̄.
        self.qy = np.empty((size, 2 * c, m))
        self.low = np.empty((size, c, c))  # A − I (strictly lower)
        self.step = np.empty((size, c, c))  # I − (A − I)
        self.step_t = np.empty((size, c, c))  # its transpose
        self.i_st = np.zeros((size, m, d_v))  # [I; −Sᵀ]
        self.i_st[:, :d_v] = np.eye(d_v)
        self.stx = np.empty((size, d_k + c, d_v))  # [Sᵀ; X]
        self.qp = np.empty((size, c, d_k + c))  # [Q | P]
        self.p = np.empty((size, c, c))  # P, then P̄ and T̄
        self.xt = np.empty((size, d_v, c))  # Xᵀ
        self.col = np.empty((size, d_k + 2 * c, d_v))  # [S̄⁺ᵀ; Ō; X̄]
        self.colt = np.empty((size, d_v, 2 * c))  # [Ō; X̄]ᵀ
        self.ot = np.empty((size, c, d_v + c))  # [Ō | T̄]
        self.sk = np.empty((size, d_v + c, d_k))  # [S; K]
        self.i_s = np.zeros((size, d_v, m))  # [I | −S]
        self.i_s[:, :, :d_v] = np.eye(d_v)
        self.z = np.empty((size, c, m))  # [Ū | W̄], solved in place into [B̄_V | B̄_K]
        self.yt = np.empty((size, m, c))  # [U | W]ᵀ
        self.a_bar = np.empty((size, c, c))  # Ā (strictly lower)
        self.rs_b = np.empty((size, c, m))  # B̄ ⊙ [V | K]
        self.rs_a = np.empty((size, c, c))  # Ā ⊙ G
        self.rsum = np.empty((size, c))  # its row sums
        self.lhs = np.empty((size, c, d_v + 2 * c))  # [X | Ḡ + Ḡᵀ | T̄ᵀ]
        self.gbar = np.empty((size, c, c))  # Ḡ
        self.bk = np.empty((size, c, d_k))  # diag(β)B̄_K





@cache
def _constants(c: int, d_k: int, d_v: int) -> tuple[np.ndarray, ...]:
    strict, causal = delta.tril_strict_mask(c), delta.causal_mask(c)
    consts = (strict, -strict, causal, np.eye(c), np.ones(d_v + d_k), np.ones(c))
    for a in consts:
        a.flags.writeable = False  # shared by every thread
    return consts


def _substitute(step: np.ndarray, y: np.ndarray, rows: range) -> None:
    """yᵢ ← Σⱼ stepᵢⱼ yⱼ for i in ``rows``, in place, one row at a time.

    With step = I − N for a strictly triangular N, row i becomes yᵢ − Σⱼ Nᵢⱼ yⱼ: a step of
    substitution when the rows N reaches (the zeros of N hide all others) are already
    solved. NumPy reads the operands before writing an overlapping output.
    """
    for i in rows:
        np.matmul(step[:, i : i + 1], y, out=y[:, i : i + 1])


def _row_sums(a: np.ndarray, ones: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Σ over the last axis of a contiguous (n, C, w) array: one matrix-vector product."""
    n, c, width = a.shape
    return np.matmul(a.reshape(n * c, width), ones, out=out.reshape(n * c))


def _numpy_block(q, k, v, beta, s, d_o, d_s, out: tuple, w: _Workspace) -> None:
    """One block: every result written into ``out``'s slices, every temporary in ``w``."""
    o, s_next, dq, dk, dv, dbeta, ds = out
    n, c, d_k = k.shape
    d_v = v.shape[-1]
    m = d_v + d_k
    strict, neg_strict, causal, eye, ones_m, ones_c = _constants(c, d_k, d_v)
    kq = w.rhs[:, d_v:]  # [K; Q]

    # ---- forward
    np.copyto(kq[:, :c], k)
    np.copyto(kq[:, c:], q)
    np.copyto(w.kt, swap(k))
    np.matmul(kq, w.kt, out=w.gt)  # [G; T] = [K; Q]Kᵀ
    g, t = w.gt[:, :c], w.gt[:, c:]
    np.copyto(w.beta, beta[..., None])
    np.multiply(w.beta[..., :c], strict, out=w.beta_strict)
    np.multiply(g, w.beta_strict, out=w.low)  # A − I = tril(diag(β)G, −1)
    np.copyto(w.vkp[..., :d_v], v)
    np.copyto(w.vkp[..., d_v:m], k)
    y = w.qy[:, c:]
    np.multiply(w.vkp[..., :m], w.beta[..., :m], out=y)  # [B_V | B_K] = diag(β)[V | K]
    # [U | W] = A⁻¹[B_V | B_K] by forward substitution: yᵢ = bᵢ − Σ_{j<i} (A − I)ᵢⱼ yⱼ.
    np.subtract(eye, w.low, out=w.step)
    _substitute(w.step, y, range(1, c))
    st, x = w.stx[:, :d_k], w.stx[:, d_k:]
    np.copyto(st, swap(s))
    np.negative(st, out=w.i_st[:, d_v:])
    np.matmul(y, w.i_st, out=x)  # X = U − WSᵀ = [U | W][I; −Sᵀ]
    p = w.p
    np.multiply(t, causal, out=p)  # P = T ⊙ M
    np.copyto(w.qp[..., :d_k], q)
    np.copyto(w.qp[..., d_k:], p)
    np.matmul(w.qp, w.stx, out=o)  # O = QSᵀ + PX = [Q | P][Sᵀ; X]
    np.copyto(w.xt, swap(x))
    np.matmul(w.xt, k, out=s_next)
    s_next += s  # S⁺ = S + XᵀK

    # ---- backward
    o_bar, x_bar = w.col[:, d_k : d_k + c], w.col[:, d_k + c :]
    np.copyto(w.col[:, :d_k], swap(d_s))
    np.copyto(o_bar, d_o)
    np.copyto(w.vkp[..., m:], swap(p))
    np.matmul(w.vkp[..., d_v:], w.col[:, : d_k + c], out=x_bar)  # X̄ = KS̄⁺ᵀ + PᵀŌ = [K | Pᵀ][S̄⁺ᵀ; Ō]
    t_bar = w.p
    np.matmul(d_o, w.xt, out=t_bar)  # P̄ = ŌXᵀ
    t_bar *= causal  # T̄ = P̄ ⊙ M
    np.copyto(w.ot[..., :d_v], d_o)
    np.copyto(w.ot[..., d_v:], t_bar)
    np.copyto(w.sk[:, :d_v], s)
    np.copyto(w.sk[:, d_v:], k)
    np.matmul(w.ot, w.sk, out=dq)  # Q̄ = ŌS + T̄K = [Ō | T̄][S; K]
    # Ū = X̄, W̄ = −X̄S;  S̄ = S̄⁺ + ŌᵀQ − X̄ᵀW = S̄⁺ − [Ō; X̄]ᵀ[−Q; W]
    z = w.z
    np.negative(s, out=w.i_s[..., d_v:])
    np.matmul(x_bar, w.i_s, out=z)  # [Ū | W̄] = X̄[I | −S]
    np.negative(q, out=w.qy[:, :c, d_v:])
    np.copyto(w.colt, swap(w.col[:, d_k:]))
    np.matmul(w.colt, w.qy[..., d_v:], out=ds)
    np.subtract(d_s, ds, out=ds)
    # [B̄_V | B̄_K] = A⁻ᵀ[Ū | W̄] by back substitution: yᵢ = zᵢ − Σ_{j>i} (A − I)ⱼᵢ yⱼ.
    np.copyto(w.step_t, swap(w.step))
    _substitute(w.step_t, z, range(c - 2, -1, -1))
    # Ā = −B̄_V Uᵀ − B̄_K Wᵀ = −[B̄_V | B̄_K][U | W]ᵀ; only its strict lower part is used.
    np.copyto(w.yt, swap(y))
    a_bar = w.a_bar
    np.matmul(z, w.yt, out=a_bar)
    a_bar *= neg_strict
    # β̄ᵢ = Σ_d (B̄_V ⊙ V + B̄_K ⊙ K)ᵢd + Σ_{s<i} Āᵢs Gᵢs
    np.multiply(z, w.vkp[..., :m], out=w.rs_b)
    np.multiply(a_bar, g, out=w.rs_a)
    _row_sums(w.rs_b, ones_m, dbeta)
    dbeta += _row_sums(w.rs_a, ones_c, w.rsum).reshape(n, c)
    # V̄ = diag(β)B̄_V;  K̄ = XS̄⁺ + T̄ᵀQ + (Ḡ + Ḡᵀ)K + diag(β)B̄_K with Ḡ = tril(diag(β)Ā, −1)
    np.multiply(z[..., :d_v], w.beta[..., :d_v], out=dv)
    np.multiply(z[..., d_v:], w.beta[..., d_v:m], out=w.bk)
    np.multiply(a_bar, w.beta_strict, out=w.gbar)
    lhs = w.lhs
    np.copyto(lhs[..., :d_v], x)
    np.add(w.gbar, swap(w.gbar), out=lhs[..., d_v : d_v + c])
    np.copyto(lhs[..., d_v + c :], swap(t_bar))
    np.copyto(w.rhs[:, :d_v], d_s)
    np.matmul(lhs, w.rhs, out=dk)  # [X | Ḡ + Ḡᵀ | T̄ᵀ][S̄⁺; K; Q]
    dk += w.bk


def _numpy_fused(q, k, v, beta, s, d_o, d_s, *, chunk: int, workers: int) -> FusedDeltaChunk:
    if chunk < 1 or workers < 1:
        raise ValueError("chunk and workers must be at least 1")
    # β gets a unit trailing axis so that every input is a batch of matrices.
    batch, (q, k, v, beta, s, d_o, d_s) = _flat_batch((q, k, v, beta[..., None], s, d_o, d_s), np)
    beta = beta[..., 0]
    total, c, d_k = k.shape
    d_v = v.shape[-1]
    outs = (
        np.empty((total, c, d_v)),  # O
        np.empty((total, d_v, d_k)),  # S⁺
        np.empty((total, c, d_k)),  # Q̄
        np.empty((total, c, d_k)),  # K̄
        np.empty((total, c, d_v)),  # V̄
        np.empty((total, c)),  # β̄
        np.empty((total, d_v, d_k)),  # S̄
    )
    parts = list(chunk_slices(total, chunk))
    workers = max(1, min(workers, len(parts)))

    def run(group: list[slice]) -> None:
        space = thread_workspace(_Workspace, min(chunk, total), c, d_k, d_v)
        for p in group:
            _numpy_block(q[p], k[p], v[p], beta[p], s[p], d_o[p], d_s[p],
                         tuple(a[p] for a in outs), space.view(p.stop - p.start))

    if workers == 1:
        run(parts)
    else:
        size = -(-len(parts) // workers)
        list(_pool(workers).map(run, [parts[i : i + size] for i in range(0, len(parts), size)]))
    return FusedDeltaChunk(*(a.reshape(batch + a.shape[1:]) for a in outs))


# ------------------------------------------------------------------------------ CUDA

# One instance, written once for both compilers: NVRTC compiles it for the GPU, and the
# tests compile the same text as C on the host to check it where no GPU is present.
# NT (= C), DK, DV are compile-time constants, so every loop unrolls. Row-major storage:
# element (r, e) of a (rows, cols) matrix sits at r * cols + e.
INSTANCE_SOURCE = r"""
__device__ __forceinline__ void delta_chunk_instance(
    const double* __restrict__ q, const double* __restrict__ k,
    const double* __restrict__ v, const double* __restrict__ beta,
    const double* __restrict__ s, const double* __restrict__ d_o,
    const double* __restrict__ d_s,
    double* __restrict__ o, double* __restrict__ s_next, double* __restrict__ dq,
    double* __restrict__ dk, double* __restrict__ dv, double* __restrict__ dbeta,
    double* __restrict__ ds)
{
    double g[NT][NT];  /* G = K K^T, read where s < r */
    double l[NT][NT];  /* A - I: l[r][s] = beta_r G_rs for s < r */
    double p[NT][NT];  /* P = (Q K^T) (.) M, read where s <= r */
    double u[NT][DV];  /* U = A^-1 B_V */
    double w[NT][DK];  /* W = A^-1 B_K */
    double x[NT][DV];  /* X = U - W S^T */

    /* ---- forward */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int c = 0; c <= r; ++c) {
            double gg = 0.0, tt = 0.0;
#pragma unroll
            for (int e = 0; e < DK; ++e) {
                gg += k[r * DK + e] * k[c * DK + e];
                tt += q[r * DK + e] * k[c * DK + e];
            }
            g[r][c] = gg;
            l[r][c] = beta[r] * gg;
            p[r][c] = tt;
        }
    }
    /* [U | W] = A^-1 diag(beta)[V | K], forward substitution: y_r = b_r - sum_{j<r} l_rj y_j. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = beta[r] * v[r * DV + f];
#pragma unroll
            for (int j = 0; j < r; ++j) acc -= l[r][j] * u[j][f];
            u[r][f] = acc;
        }
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = beta[r] * k[r * DK + e];
#pragma unroll
            for (int j = 0; j < r; ++j) acc -= l[r][j] * w[j][e];
            w[r][e] = acc;
        }
    }
    /* X = U - W S^T. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = u[r][f];
#pragma unroll
            for (int e = 0; e < DK; ++e) acc -= w[r][e] * s[f * DK + e];
            x[r][f] = acc;
        }
    }
    /* O = Q S^T + P X. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = 0.0;
#pragma unroll
            for (int e = 0; e < DK; ++e) acc += q[r * DK + e] * s[f * DK + e];
#pragma unroll
            for (int j = 0; j <= r; ++j) acc += p[r][j] * x[j][f];
            o[r * DV + f] = acc;
        }
    }
    /* S+ = S + X^T K. */
#pragma unroll
    for (int f = 0; f < DV; ++f) {
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = s[f * DK + e];
#pragma unroll
            for (int r = 0; r < NT; ++r) acc += x[r][f] * k[r * DK + e];
            s_next[f * DK + e] = acc;
        }
    }

    /* ---- backward */
    double bv[NT][DV]; /* U-bar = X-bar, solved in place into B_V-bar */
    double bk[NT][DK]; /* W-bar = -X-bar S, solved in place into B_K-bar */
    double tb[NT][NT]; /* T-bar = (O-bar X^T) (.) M, read where s <= r */
    /* X-bar = K S+bar^T + P^T O-bar. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = 0.0;
#pragma unroll
            for (int e = 0; e < DK; ++e) acc += k[r * DK + e] * d_s[f * DK + e];
#pragma unroll
            for (int i = r; i < NT; ++i) acc += p[i][r] * d_o[i * DV + f];
            bv[r][f] = acc;
        }
    }
    /* T-bar; then Q-bar = O-bar S + T-bar K. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int c = 0; c <= r; ++c) {
            double acc = 0.0;
#pragma unroll
            for (int f = 0; f < DV; ++f) acc += d_o[r * DV + f] * x[c][f];
            tb[r][c] = acc;
        }
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = 0.0;
#pragma unroll
            for (int f = 0; f < DV; ++f) acc += d_o[r * DV + f] * s[f * DK + e];
#pragma unroll
            for (int j = 0; j <= r; ++j) acc += tb[r][j] * k[j * DK + e];
            dq[r * DK + e] = acc;
        }
    }
    /* W-bar = -X-bar S;  S-bar = S+bar + O-bar^T Q - X-bar^T W. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = 0.0;
#pragma unroll
            for (int f = 0; f < DV; ++f) acc -= bv[r][f] * s[f * DK + e];
            bk[r][e] = acc;
        }
    }
#pragma unroll
    for (int f = 0; f < DV; ++f) {
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = d_s[f * DK + e];
#pragma unroll
            for (int r = 0; r < NT; ++r)
                acc += d_o[r * DV + f] * q[r * DK + e] - bv[r][f] * w[r][e];
            ds[f * DK + e] = acc;
        }
    }
    /* [B_V-bar | B_K-bar] = A^-T [U-bar | W-bar], back substitution:
       y_r = z_r - sum_{j>r} l_jr y_j, from the last row up. */
#pragma unroll
    for (int r = NT - 2; r >= 0; --r) {
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = bv[r][f];
#pragma unroll
            for (int j = r + 1; j < NT; ++j) acc -= l[j][r] * bv[j][f];
            bv[r][f] = acc;
        }
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = bk[r][e];
#pragma unroll
            for (int j = r + 1; j < NT; ++j) acc -= l[j][r] * bk[j][e];
            bk[r][e] = acc;
        }
    }
    /* A-bar_rc = -(B_V-bar U^T + B_K-bar W^T)_rc for c < r;  G-bar_rc = beta_r A-bar_rc (kept in l);
       beta-bar_r = B_V-bar_r . v_r + B_K-bar_r . k_r + sum_{c<r} A-bar_rc G_rc;  V-bar = diag(beta) B_V-bar. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
        double db = 0.0;
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            db += bv[r][f] * v[r * DV + f];
            dv[r * DV + f] = beta[r] * bv[r][f];
        }
#pragma unroll
        for (int e = 0; e < DK; ++e) db += bk[r][e] * k[r * DK + e];
#pragma unroll
        for (int c = 0; c < r; ++c) {
            double ab = 0.0;
#pragma unroll
            for (int f = 0; f < DV; ++f) ab -= bv[r][f] * u[c][f];
#pragma unroll
            for (int e = 0; e < DK; ++e) ab -= bk[r][e] * w[c][e];
            db += ab * g[r][c];
            l[r][c] = beta[r] * ab;
        }
        dbeta[r] = db;
    }
    /* K-bar = X S+bar + T-bar^T Q + diag(beta) B_K-bar + (G-bar + G-bar^T) K. */
#pragma unroll
    for (int r = 0; r < NT; ++r) {
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = beta[r] * bk[r][e];
#pragma unroll
            for (int f = 0; f < DV; ++f) acc += x[r][f] * d_s[f * DK + e];
#pragma unroll
            for (int i = r; i < NT; ++i) acc += tb[i][r] * q[i * DK + e];
#pragma unroll
            for (int c = 0; c < r; ++c) acc += l[r][c] * k[c * DK + e];
#pragma unroll
            for (int i = r + 1; i < NT; ++i) acc += l[i][r] * k[i * DK + e];
            dk[r * DK + e] = acc;
        }
    }
}
"""

KERNEL_NAME = "delta_chunk_fwd_bwd"

CUDA_SOURCE = INSTANCE_SOURCE + r"""
extern "C" __global__ void delta_chunk_fwd_bwd(
    const double* __restrict__ q, const double* __restrict__ k,
    const double* __restrict__ v, const double* __restrict__ beta,
    const double* __restrict__ s, const double* __restrict__ d_o,
    const double* __restrict__ d_s,
    double* __restrict__ o, double* __restrict__ s_next, double* __restrict__ dq,
    double* __restrict__ dk, double* __restrict__ dv, double* __restrict__ dbeta,
    double* __restrict__ ds, const long long count)
{
    /* One thread per instance; instance b's matrices start at b * (rows * cols). */
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= count) return;
    delta_chunk_instance(q + b * (NT * DK), k + b * (NT * DK), v + b * (NT * DV), beta + b * NT,
                         s + b * (DV * DK), d_o + b * (NT * DV), d_s + b * (DV * DK),
                         o + b * (NT * DV), s_next + b * (DV * DK), dq + b * (NT * DK),
                         dk + b * (NT * DK), dv + b * (NT * DV), dbeta + b * NT,
                         ds + b * (DV * DK));
}
"""


@cache
def _cuda_kernel(cupy_module, c: int, d_k: int, d_v: int):
    # Compiled once per size (CuPy also caches the binary on disk).
    return cupy_module.RawKernel(sized_source(CUDA_SOURCE, c, d_k, d_v), KERNEL_NAME)


def _cupy_fused(q, k, v, beta, s, d_o, d_s, cp) -> FusedDeltaChunk:
    batch, (q, k, v, beta, s, d_o, d_s) = _flat_batch((q, k, v, beta[..., None], s, d_o, d_s), cp)
    total, c, d_k = k.shape
    d_v = v.shape[-1]
    shapes = ((c, d_v), (d_v, d_k), (c, d_k), (c, d_k), (c, d_v), (c,), (d_v, d_k))
    outs = tuple(cp.empty((total, *shape), dtype=cp.float64) for shape in shapes)
    if total:
        kernel = _cuda_kernel(cp, c, d_k, d_v)
        blocks = (total + CUDA_BLOCK - 1) // CUDA_BLOCK
        kernel((blocks,), (CUDA_BLOCK,), (q, k, v, beta, s, d_o, d_s, *outs, np.int64(total)))
    return FusedDeltaChunk(*(a.reshape(batch + a.shape[1:]) for a in outs))
