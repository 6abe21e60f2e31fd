"""Array namespaces: the engine computes with ``xp`` (NumPy by default, CuPy on a GPU).

Every engine function takes ``xp`` as a keyword so that the same code runs on either
backend; results return to the host with :func:`to_numpy` for keys and rendering.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

BACKENDS = ("numpy", "cupy")
DTYPE = np.float64


class BackendUnavailable(RuntimeError):
    """The requested array backend cannot be used on this machine."""


def get_xp(name: str = "numpy") -> ModuleType:
    """Return the array module for ``name`` ("numpy" or "cupy")."""
    if name == "numpy":
        return np
    if name == "cupy":
        try:
            import cupy  # type: ignore[import-not-found]
        except ImportError as exc:  # pragma: no cover - depends on the machine
            raise BackendUnavailable(
                "backend 'cupy' needs CuPy: pip install 'qkvquiz[gpu]' (CUDA 12) "
                "or the cupy package matching your CUDA version"
            ) from exc
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                raise BackendUnavailable("backend 'cupy': no CUDA device is visible")
        except cupy.cuda.runtime.CUDARuntimeError as exc:  # pragma: no cover
            raise BackendUnavailable(f"backend 'cupy': CUDA is not usable ({exc})") from exc
        return cupy
    raise BackendUnavailable(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")


def to_numpy(x: Any) -> np.ndarray:
    """Bring an array (NumPy or CuPy) back to the host as a NumPy array."""
    get = getattr(x, "get", None)
    if callable(get) and not isinstance(x, np.ndarray):
        return np.asarray(get())
    return np.asarray(x)


def swap(x: Any) -> Any:
    """Transpose the last two axes (the matrix transpose of a batched array)."""
    return x.swapaxes(-1, -2)
