"""Per-student work of a large class shared among forked processes (Linux, two cores or more).

Reading and parsing the submission files and writing the feedback files are Python work per
student, independent from one student to the next. For a class of :data:`FORK_FROM` students
or more they run in a pool of forked workers: a fork starts in milliseconds with everything
imported, and the workers read their input (the class, the report) from the memory they share
with the parent, so only a chunk's bounds go out and only its result comes back.

Workers end with the run: each asks the kernel to kill it when the parent dies (even by
SIGKILL), SIGTERM ends a worker outright and Ctrl-C, which reaches the whole process group, is
the parent's to handle; on any error, Ctrl-C or SIGTERM in the parent the pool is killed and
reaped. Elsewhere (one core, macOS, Windows, a small class) the same work runs in this process.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..core.pool import Pool, cores

FORK_FROM = 1_000  # students: below this one process is quicker than starting a pool

# What the workers of the current pool work on, set before they are forked (read, never sent).
_work: tuple[Callable[[Sequence[Any]], Any], Sequence[Any]] | None = None


def forking(items: int) -> bool:
    """Whether work on ``items`` students is shared among forked workers here: on Linux, with
    more than one core, and from a process running no other thread (a fork copies only the
    calling thread, so a lock another thread held, in a notebook's kernel say, would stay held)."""
    return (sys.platform.startswith("linux") and items >= FORK_FROM and cores() > 1
            and threading.active_count() == 1)


def _run(lo: int, hi: int) -> Any:
    assert _work is not None
    fn, items = _work
    return fn(items[lo:hi])


@contextmanager
def chunks_in_workers(fn: Callable[[Sequence[Any]], Any], items: Sequence[Any], *, chunk: int = 500,
                      workers: int | None = None) -> Iterator[Callable[[], Iterator[tuple[int, int, Any]]]]:
    """Start ``fn`` on chunks of ``items`` in forked workers; inside the block the caller may
    do other work, then iterate ``results()``: ``(lo, hi, fn(items[lo:hi]))``, in order.

    The workers are forked on entering (before any other thread can start), so ``fn`` and
    ``items`` are theirs as they are now. An exception raised by ``fn`` is raised by
    ``results()``; leaving the block early (an error, Ctrl-C) kills the workers.
    """
    global _work
    bounds = [(lo, min(lo + chunk, len(items))) for lo in range(0, len(items), chunk)]
    _work = (fn, items)
    try:
        with Pool(max(1, min(workers or cores(), len(bounds)))) as pool:
            tasks = [pool.submit(_run, lo, hi) for lo, hi in bounds]

            def results() -> Iterator[tuple[int, int, Any]]:
                for (lo, hi), value in zip(bounds, pool.ordered(tasks)):
                    yield lo, hi, value

            yield results
    finally:
        _work = None
