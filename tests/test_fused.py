"""The fused causal attention pass equals the engine's forward and backward.

Oracles: ``engine.attention`` (causal mask, then ``attention_backward``), which is itself
checked against loops, finite differences and torch; torch autograd directly where it is
installed; and, for the CUDA kernel, the kernel's own per-instance source compiled as C on
the host (the GPU run itself is in test_gpu.py).
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest

from qkvquiz.engine.attention import attention, attention_backward
from qkvquiz.engine.fused import INSTANCE_SOURCE, causal_attention_fwd_bwd, sized_source
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


@pytest.mark.parametrize("n, d_k, d_v", [(4, 4, 4), (3, 2, 5)])
def test_cuda_instance_source_compiled_as_c_equals_the_engine(tmp_path, n, d_k, d_v):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    src = tmp_path / "kernel.c"
    lib = tmp_path / "kernel.so"
    src.write_text(C_PRELUDE + sized_source(INSTANCE_SOURCE + C_LOOP, n, d_k, d_v))
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
