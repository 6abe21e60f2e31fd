"""What every pool of forked workers does the same way (the PDF pool, the class-rendering pool,
grading's readers): a worker dies with the run, and a pool is stopped at once."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # generate needs none of concurrent.futures (3.5 ms of a run's start-up)
    from concurrent.futures import ProcessPoolExecutor

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def start_worker(parent: int | None) -> None:
    """The first thing a forked worker does.

    With ``parent`` (the pid that started it): the kernel SIGKILLs this worker when that process
    dies (Linux), since a parent killed by SIGKILL runs no cleanup and its workers would go on
    rendering and writing. Then the CLI's inherited handlers are undone: SIGTERM ends the worker
    at once (the handler would raise SystemExit, which a pool sends home as a result), and Ctrl-C,
    which reaches the whole process group, is the parent's to handle (it stops the pool).
    """
    if parent is not None:
        if sys.platform.startswith("linux"):
            try:
                ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            except (OSError, AttributeError):  # pragma: no cover - no prctl: the parent's cleanup still kills us
                pass
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool now: cancel what has not started, SIGKILL the workers, wait until they are gone."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    results = getattr(pool, "_result_queue", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=10)
    # A result over 16 KiB goes down the pipe in two writes; a worker killed between them leaves
    # half a message, and the pool's own thread waits for the rest forever (and the interpreter,
    # at exit, for that thread). With the workers gone, closing this process's end of the pipe
    # (it only ever reads it) lets that thread read the pipe's end instead.
    writer = getattr(results, "_writer", None)
    if writer is not None and not any(process.is_alive() for process in processes):
        writer.close()
