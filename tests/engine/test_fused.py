"""The fused passes (causal attention; one delta-rule chunk) equal the engine's forward and backward.

Oracles: ``engine.attention`` (causal mask, then ``attention_backward``) and
``engine.delta.chunk_forward`` + ``chunk_backward``, which are themselves checked against
loops, finite differences and torch; torch autograd directly where it is installed (for the
delta rule, of the token-by-token recurrence); and, for the CUDA kernels, each kernel's own
per-instance source compiled as C on the host (the GPU runs themselves are in test_gpu.py).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from qkvquiz.engine import delta
from qkvquiz.engine.attention import attention, attention_backward
from benchmarks.kernels.fused import INSTANCE_SOURCE, causal_attention_fwd_bwd, sized_source
from benchmarks.kernels.fused_delta import INSTANCE_SOURCE as DELTA_INSTANCE_SOURCE
from benchmarks.kernels.fused_delta import delta_chunk_fwd_bwd
from qkvquiz.engine.masks import causal_allowed

TOL = 1e-12


def inputs(batch, n, d_k, d_v, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((*batch, n, d_k)) * scale
    k = rng.standard_normal((*batch, n, d_k)) * scale
    v = rng.standard_normal((*batch, n, d_v))
    dz = rng.standard_normal((*batch, n, d_v))
    return q, k, v, dz


def engine(q, k, v, dz):
    fwd = attention(q, k, v, causal_allowed(q.shape[-2]))
    g = attention_backward(fwd, dz)
    return fwd.output, g.dq, g.dk, g.dv


def assert_matches(result, expected, tol=TOL):
    for name, got, want in zip(("output", "dq", "dk", "dv"), result, expected):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


def as_tuple(r):
    return r.output, r.dq, r.dk, r.dv


@pytest.mark.parametrize(
    "batch, n, d_k, d_v",
    [((1000,), 4, 4, 4), ((2, 3), 3, 2, 5), ((7,), 1, 3, 2), ((5,), 6, 1, 1), ((), 4, 4, 4)],
)
def test_numpy_fused_equals_the_engine(batch, n, d_k, d_v):
    q, k, v, dz = inputs(batch, n, d_k, d_v)
    assert_matches(as_tuple(causal_attention_fwd_bwd(q, k, v, dz)), engine(q, k, v, dz))


@pytest.mark.parametrize("chunk, workers", [(1, 1), (3, 1), (64, 2), (7, 3)])
def test_chunks_and_threads_do_not_change_the_result(chunk, workers):
    # 100 instances: chunk boundaries fall inside the batch and the last chunk is short.
    q, k, v, dz = inputs((100,), 4, 4, 4, seed=1)
    got = causal_attention_fwd_bwd(q, k, v, dz, chunk=chunk, workers=workers)
    assert_matches(as_tuple(got), engine(q, k, v, dz))


def test_repeated_calls_with_different_sizes_reuse_no_stale_workspace():
    a = inputs((50,), 4, 4, 4, seed=2)
    b = inputs((9,), 3, 2, 2, seed=3)
    for q, k, v, dz in (a, b, a):
        assert_matches(as_tuple(causal_attention_fwd_bwd(q, k, v, dz, chunk=16)), engine(q, k, v, dz))


def test_batch_shapes_broadcast():
    q, k, v, dz = inputs((4,), 3, 2, 2, seed=4)
    shared_k = k[:1]  # one key matrix for every instance
    got = causal_attention_fwd_bwd(q, shared_k, v, dz)
    want = engine(q, np.broadcast_to(shared_k, q.shape), v, dz)
    assert_matches(as_tuple(got), want)


def test_large_scores_stay_finite():
    # Scores of size ~10³ overflow exp without the row-max shift.
    q, k, v, dz = inputs((20,), 4, 4, 4, seed=5, scale=40.0)
    got = as_tuple(causal_attention_fwd_bwd(q, k, v, dz))
    assert all(np.isfinite(a).all() for a in got)
    assert_matches(got, engine(q, k, v, dz), tol=1e-9)


def test_first_query_sees_only_itself():
    q, k, v, dz = inputs((3,), 4, 2, 2, seed=6)
    got = causal_attention_fwd_bwd(q, k, v, dz)
    np.testing.assert_allclose(got.output[:, 0], v[:, 0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(got.dq[:, 0], 0.0, atol=1e-15)  # a lone weight of 1 has no gradient


def test_mismatched_shapes_are_refused():
    q, k, v, dz = inputs((2,), 4, 4, 4)
    with pytest.raises(ValueError, match="tokens"):
        causal_attention_fwd_bwd(q, k[:, :3], v, dz)
    with pytest.raises(ValueError, match="d_k"):
        causal_attention_fwd_bwd(q, k[..., :3], v, dz)


def test_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    q, k, v, dz = inputs((50,), 4, 4, 3, seed=7)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    s = (tq @ tk.transpose(-1, -2) / 2.0).masked_fill(~mask, float("-inf"))
    z = torch.softmax(s, dim=-1) @ tv
    z.backward(torch.tensor(dz))
    got = causal_attention_fwd_bwd(q, k, v, dz)
    want = (z.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy())
    assert_matches(as_tuple(got), want, tol=1e-10)


# ------------------------------------------------------- the CUDA kernel's arithmetic

C_PRELUDE = """
#include <math.h>
#define __device__
#define __forceinline__ static inline
"""

C_LOOP = """
void run_all(const double* q, const double* k, const double* v, const double* dz,
             double* z, double* dq, double* dk, double* dv, long long count, double c)
{
    for (long long b = 0; b < count; ++b)
        causal_attention_instance(q + b * (NT * DK), k + b * (NT * DK), v + b * (NT * DV),
                                  dz + b * (NT * DV), z + b * (NT * DV), dq + b * (NT * DK),
                                  dk + b * (NT * DK), dv + b * (NT * DV), c);
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("n, d_k, d_v", [(4, 4, 4), (3, 2, 5)])
def test_cuda_instance_source_compiled_as_c_equals_the_engine(tmp_path, n, d_k, d_v):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    src = tmp_path / "kernel.c"
    lib = tmp_path / "kernel.so"
    src.write_text(C_PRELUDE + sized_source(INSTANCE_SOURCE + C_LOOP, n, d_k, d_v), encoding="utf-8")
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src), "-lm"],
                   check=True, capture_output=True)
    run_all = ctypes.CDLL(str(lib)).run_all
    ptr = ctypes.POINTER(ctypes.c_double)
    run_all.argtypes = [ptr] * 8 + [ctypes.c_longlong, ctypes.c_double]

    q, k, v, dz = inputs((200,), n, d_k, d_v, seed=8)
    outs = [np.empty_like(v), np.empty_like(q), np.empty_like(k), np.empty_like(v)]
    args = [np.ascontiguousarray(a) for a in (q, k, v, dz)] + outs
    run_all(*(a.ctypes.data_as(ptr) for a in args), 200, 1.0 / np.sqrt(d_k))
    assert_matches(outs, engine(q, k, v, dz))


# ===================================================== one delta-rule chunk, fused

DELTA_NAMES = ("o", "s_next", "dq", "dk", "dv", "dbeta", "ds")


def delta_inputs(batch, c, d_k, d_v, seed=0, key_scale=None):
    """q, k, v, β, S, Ō, S̄⁺; unit keys unless ``key_scale`` (then N(0, key_scale²) keys)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((*batch, c, d_k))
    k = rng.standard_normal((*batch, c, d_k))
    if key_scale is None:
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
    else:
        k *= key_scale
    v = rng.standard_normal((*batch, c, d_v))
    beta = rng.uniform(0.1, 1.9, (*batch, c))
    s = rng.standard_normal((*batch, d_v, d_k))
    d_o = rng.standard_normal((*batch, c, d_v))
    d_s = rng.standard_normal((*batch, d_v, d_k))
    return q, k, v, beta, s, d_o, d_s


def delta_engine(q, k, v, beta, s, d_o, d_s):
    fwd = delta.chunk_forward(q, k, v, beta, s)
    g = delta.chunk_backward(fwd, d_o, d_s)
    return fwd.o, fwd.s_next, g.dq, g.dk, g.dv, g.dbeta, g.ds


def delta_tuple(r):
    return tuple(getattr(r, name) for name in DELTA_NAMES)


def assert_delta_matches(result, expected, tol=TOL):
    for name, got, want in zip(DELTA_NAMES, result, expected):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize(
    "batch, c, d_k, d_v",
    [((1000,), 4, 4, 4), ((2, 3), 3, 2, 5), ((7,), 1, 3, 2), ((5,), 6, 1, 1), ((), 4, 4, 4), ((9,), 5, 3, 2)],
)
def test_fused_delta_chunk_equals_the_engine(batch, c, d_k, d_v):
    x = delta_inputs(batch, c, d_k, d_v)
    assert_delta_matches(delta_tuple(delta_chunk_fwd_bwd(*x)), delta_engine(*x))


@pytest.mark.parametrize("chunk, workers", [(1, 1), (3, 1), (64, 2), (7, 3)])
def test_fused_delta_blocks_and_threads_do_not_change_the_result(chunk, workers):
    # 100 instances: block boundaries fall inside the batch and the last block is short.
    x = delta_inputs((100,), 4, 4, 4, seed=1)
    got = delta_chunk_fwd_bwd(*x, chunk=chunk, workers=workers)
    assert_delta_matches(delta_tuple(got), delta_engine(*x))


def test_fused_delta_reuses_no_stale_workspace_between_sizes():
    a = delta_inputs((50,), 4, 4, 4, seed=2)
    b = delta_inputs((9,), 3, 2, 5, seed=3)
    for x in (a, b, a):
        assert_delta_matches(delta_tuple(delta_chunk_fwd_bwd(*x, chunk=16)), delta_engine(*x))


def test_fused_delta_batch_shapes_broadcast():
    q, k, v, beta, s, d_o, d_s = delta_inputs((4,), 3, 2, 2, seed=4)
    shared_s, shared_beta = s[:1], beta[0]  # one state and one β row for every instance
    got = delta_chunk_fwd_bwd(q, k, v, shared_beta, shared_s, d_o, d_s)
    want = delta_engine(q, k, v, np.broadcast_to(shared_beta, beta.shape),
                        np.broadcast_to(shared_s, s.shape), d_o, d_s)
    assert_delta_matches(delta_tuple(got), want)


def test_fused_delta_keeps_digits_on_badly_conditioned_chunks():
    # Un-normalised keys make cond(A) ~1e12 or worse: the fused pass still substitutes
    # (never forms A⁻¹), so it keeps the engine's digits where an inverse would lose ~8.
    x = delta_inputs((20,), 8, 4, 3, seed=5, key_scale=6.0)
    a = delta.chunk_forward(*x[:5]).a
    assert np.linalg.cond(a).max() > 1e12
    got, want = delta_tuple(delta_chunk_fwd_bwd(*x)), delta_engine(*x)
    for name, g, w in zip(DELTA_NAMES, got, want):
        assert np.abs(g - w).max() <= 1e-12 * np.abs(w).max(), name


def test_fused_delta_refuses_mismatched_shapes():
    q, k, v, beta, s, d_o, d_s = delta_inputs((2,), 4, 4, 3)
    with pytest.raises(ValueError, match="q and k"):
        delta_chunk_fwd_bwd(q[..., :3], k, v, beta, s, d_o, d_s)
    with pytest.raises(ValueError, match="beta"):
        delta_chunk_fwd_bwd(q, k, v, beta[..., :3], s, d_o, d_s)
    with pytest.raises(ValueError, match="d_s_next"):
        delta_chunk_fwd_bwd(q, k, v, beta, s, d_o, d_s[..., :2])


def test_fused_delta_matches_torch_autograd():
    torch = pytest.importorskip("torch")
    q, k, v, beta, s, d_o, d_s = delta_inputs((50,), 4, 3, 2, seed=7)
    tq, tk, tv, tb, ts = (torch.tensor(a, requires_grad=True) for a in (q, k, v, beta, s))
    # The recurrence token by token (not the chunk form): an independent route to O and S⁺.
    state, outs = ts, []
    for t in range(4):
        kt, vt = tk[:, t], tv[:, t]
        recalled = (state @ kt[..., None])[..., 0]
        state = state + (tb[:, t, None] * (vt - recalled))[..., None] * kt[:, None, :]
        outs.append((state @ tq[:, t, :, None])[..., 0])
    o = torch.stack(outs, dim=1)
    torch.autograd.backward([o, state], [torch.tensor(d_o), torch.tensor(d_s)])
    want = (o.detach().numpy(), state.detach().numpy(), tq.grad.numpy(), tk.grad.numpy(),
            tv.grad.numpy(), tb.grad.numpy(), ts.grad.numpy())
    assert_delta_matches(delta_tuple(delta_chunk_fwd_bwd(q, k, v, beta, s, d_o, d_s)), want, tol=1e-10)


DELTA_C_LOOP = """
void run_all(const double* q, const double* k, const double* v, const double* beta,
             const double* s, const double* d_o, const double* d_s,
             double* o, double* s_next, double* dq, double* dk, double* dv, double* dbeta,
             double* ds, long long count)
{
    for (long long b = 0; b < count; ++b)
        delta_chunk_instance(q + b * (NT * DK), k + b * (NT * DK), v + b * (NT * DV), beta + b * NT,
                             s + b * (DV * DK), d_o + b * (NT * DV), d_s + b * (DV * DK),
                             o + b * (NT * DV), s_next + b * (DV * DK), dq + b * (NT * DK),
                             dk + b * (NT * DK), dv + b * (NT * DV), dbeta + b * NT,
                             ds + b * (DV * DK));
}
"""


@pytest.mark.slow
@pytest.mark.parametrize("c, d_k, d_v", [(4, 4, 4), (3, 2, 5), (1, 3, 2), (6, 1, 1)])
def test_delta_cuda_instance_source_compiled_as_c_equals_the_engine(tmp_path, c, d_k, d_v):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    src = tmp_path / "delta.c"
    lib = tmp_path / "delta.so"
    src.write_text(C_PRELUDE + sized_source(DELTA_INSTANCE_SOURCE + DELTA_C_LOOP, c, d_k, d_v), encoding="utf-8")
    subprocess.run([compiler, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src), "-lm"],
                   check=True, capture_output=True)
    run_all = ctypes.CDLL(str(lib)).run_all
    ptr = ctypes.POINTER(ctypes.c_double)
    run_all.argtypes = [ptr] * 14 + [ctypes.c_longlong]

    x = [np.ascontiguousarray(a) for a in delta_inputs((200,), c, d_k, d_v, seed=8)]
    want = delta_engine(*x)
    outs = [np.empty_like(a) for a in want]
    run_all(*(a.ctypes.data_as(ptr) for a in x + outs), 200)
    assert_delta_matches(outs, want)
