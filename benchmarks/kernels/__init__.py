"""Fused passes for many tiny problems at once: what the engine benchmark races against torch.

No command needs them (a class's engine work is a fraction of a second; see
docs/performance.md), so they live beside the benchmarks rather than in the package. Each is
checked against the step-by-step engine to 1e-12 (tests/engine/test_fused.py), on CuPy too
where a GPU is present (tests/engine/test_gpu.py).
"""
