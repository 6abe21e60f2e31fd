"""Array namespaces: the engine computes with ``xp`` (NumPy by default, CuPy on a GPU).

Every engine function takes ``xp`` as a keyword so that the same code runs on either
backend; results return to the host with :func:`to_numpy` for keys and rendering.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

BACKENDS = ("numpy", "cupy")
DTYPE = np.float64

#: CPU seconds of engine work below which ``--backend cupy`` keeps the work on the CPU. A device
#: pays before its first result: importing CuPy and creating the CUDA context (about a second),
#: compiling every kernel on its first use (seconds each with a cold kernel cache), and a launch
#: and a transfer per batch. The one H100 run so far saw 4 to 19 s of such costs end to end
#: (all-families × 300: 5.5 s against 1.5 s; attention-basics × 10,000: 24.5 s against 5.7 s),
#: while a class's whole engine work on the CPU is seconds (all-families × 10,000: about 2 s).
#: Below this the device cannot win; benchmarks/gpu.py measures where it does.
DEVICE_BREAK_EVEN_S = 20.0


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


def cupy_installed() -> bool:
    """Whether CuPy can be imported, found without importing it (which takes about a second)."""
    try:
        return importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):  # a broken or half-removed install
        return False


@dataclass(frozen=True)
class Placement:
    """Where a command's engine work runs, and what to tell the user about that choice."""

    xp: ModuleType
    note: str | None = None  # set when a GPU was asked for and the CPU kept the work

    @property
    def on_device(self) -> bool:
        return self.xp is not np


def place(name: str, cpu_seconds: float, *, break_even: float = DEVICE_BREAK_EVEN_S) -> Placement:
    """The backend for work that takes about ``cpu_seconds`` on the CPU, when ``name`` was asked for.

    ``numpy`` is always the CPU. ``cupy`` is the GPU only where the work is large enough to pay
    for the device's fixed costs (:data:`DEVICE_BREAK_EVEN_S`); smaller work stays on the CPU,
    without loading CuPy, and the note says so. Results are the same either way. A missing
    CuPy is reported whatever the size, so that a machine's setup is never silently wrong.
    """
    if name != "cupy" or not cupy_installed():
        return Placement(get_xp(name))  # numpy; else BackendUnavailable naming the choices or the install
    if cpu_seconds < break_even:
        return Placement(np, f"computed on the CPU: its engine work (about {_seconds(cpu_seconds)} on this "
                             f"CPU) is below what a GPU needs to win (about {_seconds(break_even)}); "
                             "CuPy was not loaded")
    return Placement(get_xp("cupy"))


class BackendNote(UserWarning):
    """What :func:`placed` says (a GPU was asked for and the CPU kept the work), where no ``notes``
    callback was given."""


def placed(xp: Any, cpu_seconds: Callable[[], float], notes: Callable[[str], None] | None = None) -> Any:
    """The array module that work asked to run on ``xp`` runs on: the one place where a library
    entry point (``generate_set``, ``grade``, ``grade_files``, ``grade_collected``) settles its
    ``xp``. ``xp`` is a name (``"numpy"``, ``"cupy"``) or a module: CuPy is weighed by
    :func:`place` (``cpu_seconds`` is asked only then), NumPy is the CPU, any other array
    namespace is used as given. ``notes`` is told why the CPU kept the work (by default a
    :class:`BackendNote` warning); BackendUnavailable where the backend asked for cannot be used."""
    if isinstance(xp, str):
        name = xp
    elif xp is np or getattr(xp, "__name__", None) == "cupy":
        name = "numpy" if xp is np else "cupy"
    else:
        return xp
    placement = place(name, cpu_seconds() if name == "cupy" else 0.0)
    if placement.note is not None:
        if notes is None:
            warnings.warn(placement.note, BackendNote, stacklevel=3)
        else:
            notes(placement.note)
    return placement.xp


def _seconds(value: float) -> str:
    return f"{value:.2g} s" if value < 10 else f"{value:.0f} s"


def to_numpy(x: Any) -> np.ndarray:
    """Bring an array (NumPy or CuPy) back to the host as a NumPy array."""
    get = getattr(x, "get", None)
    if callable(get) and not isinstance(x, np.ndarray):
        return np.asarray(get())
    return np.asarray(x)


def swap(x: Any) -> Any:
    """Transpose the last two axes (the matrix transpose of a batched array)."""
    return x.swapaxes(-1, -2)
