"""The package's one pool of worker processes: generate's rendering, the PDFs, grading's readers.

Built from :mod:`multiprocessing`'s public pieces (``Process``, ``Pipe``,
``connection.wait``), not on a pool class, for the one thing every user of it needs and no
standard pool offers before Python 3.14: **stopping at once**. Each worker has a pipe of its
own and does one task at a time; this process hands a task to an idle worker and reads the
results itself, in its own thread, so

- stopping is killing the workers and closing the pipes: no feeder or result thread can be
  left waiting for the rest of a message that a killed worker sent half of (which is how a
  stopped ``concurrent.futures`` pool hung, and why the old code reached into its private
  attributes);
- a worker that dies (the kernel's OOM killer, say) ends the run with an error naming it,
  instead of a wait for a result that will not come.

Workers end with the run (:func:`start_worker`): the kernel kills each when this process dies
(Linux), SIGTERM ends a worker outright and Ctrl-C, which reaches the whole process group, is
this process's to handle: leaving a :class:`Pool` by an exception kills and reaps its workers.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def fork_context() -> Any:
    """The context of forked workers, on Linux; None elsewhere.

    A fork starts a worker in milliseconds with everything imported and the parent's data (a
    solved class, compiled templates) in its memory, shared until written. Where fork is not
    the platform's safe default (macOS, Windows), callers use their in-process path or spawn.
    """
    return multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None


def start_worker(parent: int | None) -> None:
    """The first thing a worker does.

    With ``parent`` (the pid that started it): the kernel SIGKILLs this worker when that process
    dies (Linux), since a parent killed by SIGKILL runs no cleanup and its workers would go on
    rendering and writing. Then the CLI's inherited handlers are undone: SIGTERM ends the worker
    at once, and Ctrl-C, which reaches the whole process group, is the parent's to handle.
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


class WorkerDied(RuntimeError):
    """A worker process ended without answering (killed from outside, out of memory)."""


class TaskFailed(RuntimeError):
    """A task raised an exception that could not be sent back as it was."""


def _serve(conn: Connection, parent: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    start_worker(parent)
    if initializer is not None:
        initializer(*initargs)
    while True:
        try:
            task = conn.recv()
        except EOFError:  # the parent closed its end: the run is over
            return
        if task is None:
            return
        fn, args = task
        try:
            reply: tuple[bool, Any] = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - every failure goes home, where it is raised
            reply = (False, exc)
        try:
            conn.send(reply)
        except Exception as exc:  # the exception (or result) does not pickle: its text does
            conn.send((False, TaskFailed(f"{type(reply[1]).__name__}: {reply[1]}" if not reply[0] else
                                         f"a result that cannot be sent: {type(exc).__name__}: {exc}")))


class Pool:
    """``count`` worker processes, each running ``initializer(*initargs)`` once, then tasks.

    ``with Pool(...) as pool:`` starts the workers (all at once: fork copies no thread started
    later), :meth:`submit` queues a task, :meth:`completed` yields each task's id and result as
    they finish, :meth:`ordered` gives chosen tasks' results in the order asked.
    Leaving the block normally ends the idle workers; leaving it by an exception (a task's
    error, Ctrl-C, SIGTERM turned into SystemExit) kills and reaps them before it goes on.
    """

    def __init__(self, count: int, *, initializer: Callable[..., None] | None = None, initargs: tuple = (),
                 context: Any = None) -> None:
        context = context or fork_context() or multiprocessing.get_context()
        self._idle: deque[int] = deque()
        self._queue: deque[tuple[int, Callable[..., Any], tuple]] = deque()
        self._busy: dict[int, int] = {}  # worker -> the task it runs
        self._conns: list[Connection] = []
        self._processes: list[Any] = []
        self._next = 0
        try:
            for index in range(max(1, count)):
                ours, theirs = context.Pipe()
                process = context.Process(target=_serve, args=(theirs, os.getpid(), initializer, initargs),
                                          daemon=True, name=f"qkvquiz-worker-{index}")
                process.start()
                theirs.close()  # so that a worker's death reads as the end of its pipe
                self._conns.append(ours)
                self._processes.append(process)
                self._idle.append(index)
        except BaseException:
            self.kill()
            raise

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if error is None and not self._busy and not self._queue:
            self.close()
        else:
            self.kill()

    @property
    def pending(self) -> int:
        """Tasks submitted and not yet collected."""
        return len(self._queue) + len(self._busy)

    def submit(self, fn: Callable[..., Any], *args: Any) -> int:
        """Queue ``fn(*args)`` (``fn`` a module-level function); its id, counted from 0."""
        task = self._next
        self._next += 1
        self._queue.append((task, fn, args))
        self._dispatch()
        return task

    def _dispatch(self) -> None:
        while self._idle and self._queue:
            worker = self._idle.popleft()
            task, fn, args = self._queue.popleft()
            self._conns[worker].send((fn, args))
            self._busy[worker] = task

    def completed(self, *, block: bool = True) -> Iterator[tuple[int, Any]]:
        """Each task's ``(id, result)`` as it finishes; a task's exception is raised here.

        With ``block=False``, only what has finished by now, then it returns."""
        while self._busy:
            ready = wait([self._conns[w] for w in self._busy], timeout=None if block else 0)
            if not ready:
                return
            for conn in ready:
                worker = self._conns.index(conn)  # type: ignore[arg-type]
                task = self._busy.pop(worker)
                try:
                    ok, value = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    raise WorkerDied(f"a worker process ended without finishing its task ({self._end(worker)})") from None
                self._idle.append(worker)
                self._dispatch()
                if not ok:
                    raise value
                yield task, value

    def _end(self, worker: int) -> str:
        process = self._processes[worker]
        process.join(timeout=5)  # its pipe closed as it died; the exit status follows at once
        code = process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                return f"killed by signal {-code}"
            hint = " (the kernel's way when memory runs out)" if -code == signal.SIGKILL else ""
            return f"killed by {name}{hint}"
        return f"exit status {code}"

    def ordered(self, tasks: Iterable[int]) -> Iterator[Any]:
        """The results of ``tasks`` (ids from :meth:`submit`), in that order, as each is ready."""
        finished: dict[int, Any] = {}
        for task in tasks:
            while task not in finished:
                done, value = next(self.completed())
                finished[done] = value
            yield finished.pop(task)

    def close(self) -> None:
        """End the workers once their current tasks are done (normally there are none)."""
        for conn in self._conns:
            try:
                conn.send(None)
            except OSError:
                pass
        for process in self._processes:
            process.join()
        for conn in self._conns:
            conn.close()

    def kill(self) -> None:
        """Stop now: the workers killed and reaped, the pipes closed, nothing left queued."""
        self._queue.clear()
        self._busy.clear()
        for process in self._processes:
            if process.is_alive():
                process.kill()
        for process in self._processes:
            process.join()
        for conn in self._conns:
            conn.close()
