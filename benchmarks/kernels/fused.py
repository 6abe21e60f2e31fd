"""Causal attention forward and backward in one fused pass, for many tiny instances at once.

The same quantities as :func:`~qkvquiz.engine.attention.attention` with a causal mask
followed by :func:`~qkvquiz.engine.attention.attention_backward`, for a batch of (say)
10⁶ problems of n = 4 tokens:

    S = QKᵀ/√d (−∞ above the diagonal),  A = softmax(S),  Z = AV,
    ∇V = Aᵀ∇Z,  ∇S = A ⊙ (∇A − rowsum(∇A ⊙ A)) with ∇A = ∇Z Vᵀ,  ∇Q = ∇S K/√d,  ∇K = ∇Sᵀ Q/√d.

Only Z, ∇Q, ∇K and ∇V are returned: these are what a training step (or a benchmark) needs,
and dropping the intermediates is what makes the pass fast.

- NumPy: the batch is cut into cache-sized chunks; each chunk reuses one workspace, every
  elementwise step is done in place, and the matrix products are arranged so that NumPy's
  stacked ``matmul`` sees contiguous operands (a transposed right operand is about twice as
  slow for 4×4 matrices, so Kᵀ and Vᵀ are copied once). Row reductions over the short last
  axis (max, sum) are written as a few whole-array operations on its columns, which is
  several times faster than ``max(axis=-1)`` on 4-wide rows. Chunks may run on threads:
  NumPy releases the GIL inside these loops.
- CuPy: one CUDA thread per instance (:data:`CUDA_SOURCE`): the whole forward and backward
  lives in registers, so global memory is read and written once: 4·n·d doubles in and
  4·n·d out, about 1 KB per instance for n = d = 4.
- Any other array namespace falls back to the engine functions.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from qkvquiz.engine.attention import attention, attention_backward
from qkvquiz.engine.backend import swap
from .batching import Workspace, chunk_slices, thread_workspace
from qkvquiz.engine.masks import causal_allowed

Array = Any

NUMPY_CHUNK = 2048  # instances per chunk: a chunk's workspace (~10 arrays of n×n) stays in L2
CUDA_BLOCK = 256  # threads per block


@dataclass(frozen=True)
class FusedAttention:
    """Z = softmax(QKᵀ/√d, causal) V and the gradients of ⟨∇Z, Z⟩ with respect to Q, K, V."""

    output: Array  # Z: (..., n, d_v)
    dq: Array  # (..., n, d_k)
    dk: Array  # (..., n, d_k)
    dv: Array  # (..., n, d_v)


def causal_attention_fwd_bwd(
    q: Array,
    k: Array,
    v: Array,
    dz: Array,
    *,
    xp=np,
    chunk: int = NUMPY_CHUNK,
    workers: int = 1,
) -> FusedAttention:
    """Forward and backward of causal scaled dot-product attention, fused.

    ``q``, ``k``: (..., n, d_k); ``v``, ``dz``: (..., n, d_v); the leading batch shapes
    broadcast. ``chunk`` and ``workers`` (threads) apply to the NumPy path only.
    """
    n = q.shape[-2]
    if k.shape[-2] != n or v.shape[-2] != n or dz.shape[-2] != n:
        raise ValueError("causal attention needs q, k, v and dz with the same number of tokens")
    if k.shape[-1] != q.shape[-1] or dz.shape[-1] != v.shape[-1]:
        raise ValueError("q and k need the same d_k, v and dz the same d_v")
    if xp is np:
        return _numpy_fused(q, k, v, dz, chunk=chunk, workers=workers)
    if getattr(xp, "__name__", "") == "cupy":
        return _cupy_fused(q, k, v, dz, xp)
    fwd = attention(q, k, v, causal_allowed(n, xp=xp), xp=xp)
    grads = attention_backward(fwd, dz, xp=xp)
    return FusedAttention(fwd.output, grads.dq, grads.dk, grads.dv)


# ----------------------------------------------------------------------------- NumPy


def _flat_batch(arrays: tuple[Array, ...], xp) -> tuple[tuple[int, ...], list[Array]]:
    """Broadcast the batch shapes and view every array as (N, rows, cols), C-contiguous float64."""
    batch = np.broadcast_shapes(*(a.shape[:-2] for a in arrays))
    flat = []
    for a in arrays:
        a = xp.broadcast_to(xp.asarray(a, dtype=xp.float64), batch + tuple(a.shape[-2:]))
        flat.append(xp.ascontiguousarray(a).reshape((-1, *a.shape[-2:])))
    return batch, flat


class _Workspace(Workspace):
    """Buffers for one chunk of ``size`` instances, reused chunk after chunk."""

    def __init__(self, size: int, n: int, d_k: int, d_v: int) -> None:
        self.s = np.empty((size, n, n))  # S, then E = exp(S − max), then A
        self.t = np.empty((size, n, n))  # ∇A, then ∇A ⊙ A, then ∇S
        self.u = np.empty((size, n, n))  # A ⊙ rowsum(∇A ⊙ A)
        self.kt = np.empty((size, d_k, n))  # Kᵀ, contiguous
        self.vt = np.empty((size, d_v, n))  # Vᵀ, contiguous
        self.row = np.empty((size, n))  # a per-row statistic (max, then 1/sum, then rowsum)





def _row_reduce(op, m: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``op`` over the last axis, as n − 1 whole-array operations on its columns."""
    op(m[..., 0], m[..., 1], out=out)
    for j in range(2, m.shape[-1]):
        op(out, m[..., j], out=out)
    return out


def _numpy_block(q, k, v, dz, z, dq, dk, dv, w: _Workspace, bias: np.ndarray, c: float) -> None:
    """One chunk: every result written into the given output slices, temporaries in ``w``."""
    s, t, u, row = w.s, w.t, w.u, w.row
    np.multiply(swap(k), c, out=w.kt)  # Kᵀ/√d, contiguous: the copy and the scale in one pass
    np.matmul(q, w.kt, out=s)
    s += bias  # −∞ above the diagonal
    if s.shape[-1] > 1:
        _row_reduce(np.maximum, s, row)
        s -= row[..., None]  # the diagonal is always allowed, so every row max is finite
    np.exp(s, out=s)
    if s.shape[-1] > 1:
        _row_reduce(np.add, s, row)
        np.divide(1.0, row, out=row)
        s *= row[..., None]  # A
    else:
        s.fill(1.0)
    a = s
    np.matmul(a, v, out=z)
    np.matmul(swap(a), dz, out=dv)
    # ∇A/√d: the scale that ∇Q and ∇K both carry, taken here on the way through Vᵀ;
    # ∇S is linear in ∇A, so the scale passes straight through to ∇S/√d.
    np.multiply(swap(v), c, out=w.vt)
    np.matmul(dz, w.vt, out=t)
    t *= a
    if t.shape[-1] > 1:
        _row_reduce(np.add, t, row)
    else:
        np.copyto(row, t[..., 0])
    np.multiply(a, row[..., None], out=u)
    t -= u  # ∇S/√d
    np.matmul(t, k, out=dq)
    np.matmul(swap(t), q, out=dk)


def _numpy_fused(q, k, v, dz, *, chunk: int, workers: int) -> FusedAttention:
    if chunk < 1 or workers < 1:
        raise ValueError("chunk and workers must be at least 1")
    batch, (q, k, v, dz) = _flat_batch((q, k, v, dz), np)
    total, n, d_k = q.shape
    d_v = v.shape[-1]
    z, dv = np.empty((total, n, d_v)), np.empty((total, n, d_v))
    dq, dk = np.empty((total, n, d_k)), np.empty((total, n, d_k))
    bias = np.where(causal_allowed(n), 0.0, -np.inf)
    c = 1.0 / math.sqrt(d_k)
    parts = list(chunk_slices(total, chunk))
    workers = max(1, min(workers, len(parts)))

    def run(group: list[slice]) -> None:
        space = thread_workspace(_Workspace, min(chunk, total), n, d_k, d_v)
        with np.errstate(all="ignore"):  # exp(−∞) = 0 is intended
            for p in group:
                _numpy_block(q[p], k[p], v[p], dz[p], z[p], dq[p], dk[p], dv[p],
                             space.view(p.stop - p.start), bias, c)

    if workers == 1:
        run(parts)
    else:
        # Contiguous runs of chunks per thread; each thread owns its workspace.
        size = -(-len(parts) // workers)
        list(_pool(workers).map(run, [parts[i:i + size] for i in range(0, len(parts), size)]))
    shape = lambda a: a.reshape(batch + a.shape[1:])  # noqa: E731
    return FusedAttention(shape(z), shape(dq), shape(dk), shape(dv))


@lru_cache(maxsize=None)
def _pool(workers: int) -> ThreadPoolExecutor:
    # Kept for the life of the process, so that each thread keeps its workspace.
    return ThreadPoolExecutor(workers, thread_name_prefix="qkvquiz-fused")


def default_workers() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


# ------------------------------------------------------------------------------ CUDA

# One instance, written once for both compilers: NVRTC compiles it for the GPU, and the
# tests compile the same text as C on the host to check it where no GPU is present.
# NT, DK, DV are the sizes (compile-time constants, so every loop unrolls into registers).
INSTANCE_SOURCE = r"""
__device__ __forceinline__ void causal_attention_instance(
    const double* __restrict__ q, const double* __restrict__ k,
    const double* __restrict__ v, const double* __restrict__ dz,
    double* __restrict__ z, double* __restrict__ dq,
    double* __restrict__ dk, double* __restrict__ dv, const double c)
{
    double a[NT][NT];  /* weights; only j <= i is ever read (causal) */
    double ds[NT][NT]; /* gradient of the scores, already times c = 1/sqrt(d_k) */

    /* Forward, one query row at a time: S_ij = c q_i.k_j for j <= i, A = softmax, Z = AV. */
#pragma unroll
    for (int i = 0; i < NT; ++i) {
        double m = 0.0;
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            double s = 0.0;
#pragma unroll
            for (int e = 0; e < DK; ++e) s += q[i * DK + e] * k[j * DK + e];
            s *= c;
            a[i][j] = s;
            m = (j == 0 || s > m) ? s : m;
        }
        double total = 0.0;
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            a[i][j] = exp(a[i][j] - m); /* the row max is subtracted: no overflow */
            total += a[i][j];
        }
        const double inv = 1.0 / total;
#pragma unroll
        for (int j = 0; j <= i; ++j) a[i][j] *= inv;
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = 0.0;
#pragma unroll
            for (int j = 0; j <= i; ++j) acc += a[i][j] * v[j * DV + f];
            z[i * DV + f] = acc;
        }
    }

    /* dV_j = sum_{i >= j} A_ij dZ_i  (dV = A^T dZ). */
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int f = 0; f < DV; ++f) {
            double acc = 0.0;
#pragma unroll
            for (int i = j; i < NT; ++i) acc += a[i][j] * dz[i * DV + f];
            dv[j * DV + f] = acc;
        }
    }

    /* dA_ij = dZ_i.v_j;  dS_ij = A_ij (dA_ij - sum_l A_il dA_il), times c for dQ and dK. */
#pragma unroll
    for (int i = 0; i < NT; ++i) {
        double da[NT];
        double r = 0.0;
#pragma unroll
        for (int j = 0; j <= i; ++j) {
            double acc = 0.0;
#pragma unroll
            for (int f = 0; f < DV; ++f) acc += dz[i * DV + f] * v[j * DV + f];
            da[j] = acc;
            r += a[i][j] * acc;
        }
#pragma unroll
        for (int j = 0; j <= i; ++j) ds[i][j] = c * (a[i][j] * (da[j] - r));
    }

    /* dQ_i = sum_{j <= i} dS_ij k_j;  dK_j = sum_{i >= j} dS_ij q_i. */
#pragma unroll
    for (int i = 0; i < NT; ++i) {
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = 0.0;
#pragma unroll
            for (int j = 0; j <= i; ++j) acc += ds[i][j] * k[j * DK + e];
            dq[i * DK + e] = acc;
        }
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
#pragma unroll
        for (int e = 0; e < DK; ++e) {
            double acc = 0.0;
#pragma unroll
            for (int i = j; i < NT; ++i) acc += ds[i][j] * q[i * DK + e];
            dk[j * DK + e] = acc;
        }
    }
}
"""

KERNEL_NAME = "causal_attention_fwd_bwd"

CUDA_SOURCE = INSTANCE_SOURCE + r"""
extern "C" __global__ void causal_attention_fwd_bwd(
    const double* __restrict__ q, const double* __restrict__ k,
    const double* __restrict__ v, const double* __restrict__ dz,
    double* __restrict__ z, double* __restrict__ dq,
    double* __restrict__ dk, double* __restrict__ dv,
    const long long count, const double c)
{
    /* One thread per instance; instance b's matrices start at b * (rows * cols). */
    const long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= count) return;
    causal_attention_instance(q + b * (NT * DK), k + b * (NT * DK), v + b * (NT * DV),
                              dz + b * (NT * DV), z + b * (NT * DV), dq + b * (NT * DK),
                              dk + b * (NT * DK), dv + b * (NT * DV), c);
}
"""


def sized_source(source: str, n: int, d_k: int, d_v: int) -> str:
    """``source`` with the sizes defined as compile-time constants."""
    return f"#define NT {n}\n#define DK {d_k}\n#define DV {d_v}\n" + source


@lru_cache(maxsize=None)
def _cuda_kernel(cupy_module, n: int, d_k: int, d_v: int):
    # Compiled once per size (CuPy also caches the binary on disk).
    return cupy_module.RawKernel(sized_source(CUDA_SOURCE, n, d_k, d_v), KERNEL_NAME)


def _cupy_fused(q, k, v, dz, cp) -> FusedAttention:
    batch, (q, k, v, dz) = _flat_batch((q, k, v, dz), cp)
    total, n, d_k = q.shape
    d_v = v.shape[-1]
    z, dv = cp.empty((total, n, d_v), dtype=cp.float64), cp.empty((total, n, d_v), dtype=cp.float64)
    dq, dk = cp.empty((total, n, d_k), dtype=cp.float64), cp.empty((total, n, d_k), dtype=cp.float64)
    if total:
        kernel = _cuda_kernel(cp, n, d_k, d_v)
        blocks = (total + CUDA_BLOCK - 1) // CUDA_BLOCK
        kernel((blocks,), (CUDA_BLOCK,),
               (q, k, v, dz, z, dq, dk, dv, np.int64(total), np.float64(1.0 / math.sqrt(d_k))))
    shape = lambda a: a.reshape(batch + a.shape[1:])  # noqa: E731
    return FusedAttention(shape(z), shape(dq), shape(dk), shape(dv))
