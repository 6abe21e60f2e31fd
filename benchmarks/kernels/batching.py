"""Bounded memory for large batches: run a batched function a chunk of instances at a time.

An engine call on N instances allocates every intermediate for all N at once (softmax of
10⁷ 4×4 score matrices is 1.3 GB per temporary). :func:`batched` keeps only the inputs,
the results and one chunk's intermediates alive, and gathers the results on the host, so
the peak memory on the device is one chunk's work whatever N is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from qkvquiz.engine.backend import to_numpy

Array = Any

DEFAULT_CHUNK = 1 << 16  # instances per call: large enough to hide per-call overhead


def chunk_slices(total: int, chunk: int) -> Iterator[slice]:
    """Consecutive slices ``[0, chunk), [chunk, 2·chunk), …`` covering ``range(total)``."""
    if chunk < 1:
        raise ValueError(f"chunk must be at least 1, got {chunk}")
    for lo in range(0, total, chunk):
        yield slice(lo, min(lo + chunk, total))


def batched(
    fn: Callable[..., Any],
    inputs: Sequence[Array],
    *,
    chunk: int = DEFAULT_CHUNK,
    xp=np,
) -> Any:
    """``fn(*inputs)`` computed ``chunk`` instances at a time; results on the host as NumPy.

    Every input has the batch as its leading axis (the same length for all). ``fn`` takes
    one slice of each input, moved to ``xp`` (a no-op for NumPy and for arrays already on
    the device), and returns an array, a tuple of arrays or a mapping of names to arrays,
    each with the chunk as its leading axis. The result has the same structure, with the
    full batch, as NumPy arrays.
    """
    if not inputs:
        raise ValueError("batched needs at least one input array")
    total = int(inputs[0].shape[0])
    for x in inputs[1:]:
        if int(x.shape[0]) != total:
            raise ValueError(
                f"every input needs the same leading (batch) length; got {total} and {x.shape[0]}"
            )
    kind = None
    outputs: list[np.ndarray] = []
    names: tuple[str, ...] = ()
    for part in chunk_slices(max(total, 1), chunk):
        part = slice(part.start, min(part.stop, total))
        result = fn(*(xp.asarray(x[part]) for x in inputs))
        if isinstance(result, Mapping):
            names, arrays = tuple(result), list(result.values())
            kind = kind or "mapping"
        elif isinstance(result, (tuple, list)):
            arrays, kind = list(result), kind or "tuple"
        else:
            arrays, kind = [result], kind or "array"
        if not outputs:
            # Allocated once, on the host: the only memory that grows with the batch.
            outputs = [np.empty((total, *a.shape[1:]), dtype=a.dtype) for a in arrays]
        for out, a in zip(outputs, arrays):
            if a.shape[0] != part.stop - part.start:
                raise ValueError(
                    f"fn must keep the batch as the leading axis: chunk of {part.stop - part.start} "
                    f"gave a result of shape {tuple(a.shape)}"
                )
            out[part] = to_numpy(a)
    if kind == "mapping":
        return dict(zip(names, outputs))
    if kind == "tuple":
        return tuple(outputs)
    return outputs[0]


class Workspace:
    """Named NumPy buffers for a chunk of instances (leading axis), reused chunk after chunk.

    A subclass's ``__init__(size, *dims)`` allocates its buffers as attributes.
    """

    def view(self: W, size: int) -> W:
        """The same buffers cut to the first ``size`` instances (a shorter last chunk)."""
        first = next(iter(vars(self).values()))
        if size == first.shape[0]:
            return self
        part = object.__new__(type(self))
        for name, buf in vars(self).items():
            setattr(part, name, buf[:size])
        return part


W = TypeVar("W", bound=Workspace)
_local = threading.local()


def thread_workspace(kind: type[W], size: int, *dims: int) -> W:
    """This thread's workspace of ``kind`` for these sizes, kept between calls: fresh buffers
    are fresh pages, and faulting them in costs as much as the arithmetic of a small batch."""
    spaces = getattr(_local, "spaces", None)
    if spaces is None:
        spaces = _local.spaces = {}
    key = (size, *dims)
    cached = spaces.get(kind)
    if cached is None or cached[0] != key:
        cached = spaces[kind] = (key, kind(size, *dims))
    return cached[1]
