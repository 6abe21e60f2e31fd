"""A user's templates render here: in a worker process with a time, memory and output budget.

Jinja's sandbox decides what a template may *reach*; it cannot bound what a template *uses*:
loops nest (``range`` is capped, three of them are not), and text or arrays grow in ways no
list of checks covers. So templates from ``--templates DIR`` render in a child process that

- has ``Budget.seconds`` of wall-clock time per template, after which it is killed;
- has the same again of CPU time (``RLIMIT_CPU``: it ends itself even if this process is gone);
- may add ``Budget.memory_bytes`` to the address space it started with (``RLIMIT_AS``);
  an allocation beyond that fails (``MemoryError``), it does not take the machine's memory;
- cannot write a byte to any file (``RLIMIT_FSIZE`` of 0), nor dump core;
- stops a template whose output passes ``Budget.output_chars``.

The limits are Linux's (``resource``); elsewhere only the wall-clock time and the output
are bounded. Each error names the template (and, where the template raised it, its line).
The worker answers with JSON (text or an error), never a pickle, so whatever a template does
inside it cannot make this process run code.
"""

from __future__ import annotations

import atexit
import json
import math
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import jinja2

from ..core.i18n import current, using
from .environment import environment
from .sandbox import TemplateFailed


@dataclass(frozen=True)
class Budget:
    """What one template may use; each far above what a worksheet or key needs."""

    seconds: float = 30.0  # a key.md of 300 students renders in well under a second
    memory_bytes: int = 512 << 20  # on top of the worker's own (NumPy, Jinja, the context)
    output_chars: int = 64 << 20  # a key.md of 300 students is a few MB


BUDGET = Budget()


class TemplateBudgetError(TemplateFailed):
    """A template used more time, memory or output than its budget."""


def _limit_self(budget: Budget) -> None:
    """Limits the worker sets on itself once, right after it starts."""
    # Ctrl-C is for the process that started the worker: it stops the worker (kill, or EOF).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import resource
    except ImportError:  # not a Unix: the wall-clock timeout and the output budget still hold
        return
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write then fails with EFBIG, not a signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    try:
        with open("/proc/self/statm") as f:
            in_use = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return  # no /proc (macOS ignores RLIMIT_AS anyway)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = in_use + budget.memory_bytes
    if hard == resource.RLIM_INFINITY or cap < hard:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _cpu_budget(budget: Budget) -> None:
    """CPU time for the next template: what is used so far plus the budget."""
    try:
        import resource
    except ImportError:
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = math.ceil(used.ru_utime + used.ru_stime + budget.seconds) + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard == resource.RLIM_INFINITY or soft <= hard:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _where(exc: BaseException, folders: Sequence[Path]) -> str:
    """The innermost template line in the traceback, as "FILE, line N"; "" where there is none."""
    if isinstance(exc, jinja2.TemplateSyntaxError) and exc.filename:
        return f"{exc.filename}, line {exc.lineno}"
    roots = tuple(str(f) for f in folders)
    frames = [fr for fr in traceback.extract_tb(exc.__traceback__) if fr.filename.startswith(roots)]
    return f"{frames[-1].filename}, line {frames[-1].lineno}" if frames else ""


def _render(env: jinja2.Environment, names: list[str], context: dict[str, Any], budget: Budget) -> str:
    template = env.select_template(names)
    out, size = [], 0
    for chunk in template.generate(context):
        size += len(chunk)
        if size > budget.output_chars:
            raise TemplateBudgetError(f"{template.filename}: output passed {budget.output_chars} characters; stopped")
        out.append(chunk)
    return "".join(out)


def _serve(conn: Connection, directory: str, budget: Budget) -> None:
    """The worker: render each (names, context) it is sent, answer with JSON."""
    _limit_self(budget)
    env = environment(directory)
    folders = env.loader.folders  # type: ignore[union-attr]
    while True:
        try:
            names, context, lang = conn.recv()
        except EOFError:
            return
        _cpu_budget(budget)
        try:
            with using(lang):  # the language of the run that sent it (a long-lived worker serves several)
                reply = {"text": _render(env, names, context, budget)}
        except MemoryError:
            reply = {"error": f"used more than its memory budget ({budget.memory_bytes >> 20} MiB); stopped", "budget": True}
        except TemplateFailed as exc:
            reply = {"error": str(exc), "named": True, "budget": isinstance(exc, TemplateBudgetError)}
        except Exception as exc:  # the template's own error: report it, keep serving
            where = _where(exc, folders)
            reply = {"error": f"{type(exc).__name__}: {exc}", "where": where}
        conn.send_bytes(json.dumps(reply).encode())


def _context() -> Any:
    # fork starts the worker in milliseconds with everything imported; elsewhere the
    # platform's default (spawn) pickles the plain-data context just as well.
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)


class RenderWorker:
    """One worker process for a folder of a user's templates, started on first use and
    started again after a template that had to be stopped."""

    def __init__(self, directory: str, budget: Budget = BUDGET) -> None:
        self.directory = directory
        self.budget = budget
        self.owner = os.getpid()
        self._process: Any = None
        self._conn: Connection | None = None

    def _start(self) -> Connection:
        if self._conn is None:
            ours, theirs = _context().Pipe()
            self._process = _context().Process(
                target=_serve, args=(theirs, self.directory, self.budget), daemon=True, name="qkvquiz-templates"
            )
            self._process.start()
            theirs.close()
            self._conn = ours
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join()
            self._process = None

    def _named(self, names: Sequence[str]) -> str:
        """The file the first existing name resolves to (what an error message names)."""
        loader = environment(self.directory).loader
        for name in names:
            try:
                path = loader.find(name)  # type: ignore[union-attr]
            except jinja2.TemplateError:
                return name
            if path is not None:
                return str(path)
        return names[0]

    def render(self, names: Sequence[str], context: dict[str, Any]) -> str:
        request = (list(names), context, current())
        try:
            self._start().send(request)
        except OSError:  # the worker is gone (killed from outside): one fresh start
            self.close()
            self._start().send(request)
        conn = self._start()
        budget = self.budget
        if not conn.poll(budget.seconds):
            self.close()
            raise TemplateBudgetError(
                f"{self._named(names)}: still rendering after {budget.seconds:g} s (the time budget); stopped"
            )
        try:
            # At most 12 bytes per character in JSON (a surrogate pair escaped), plus room.
            reply = json.loads(conn.recv_bytes(12 * budget.output_chars + (1 << 20)))
        except (EOFError, OSError):
            code = self._process.exitcode if self._process is not None else None
            self.close()
            why = {-signal.SIGXCPU: "the CPU-time budget", -signal.SIGKILL: "memory (killed)"}.get(
                code if code is not None else 0, f"exit status {code}")
            raise TemplateBudgetError(f"{self._named(names)}: the rendering process ended ({why}); stopped") from None
        if "text" in reply:
            return str(reply["text"])
        kind = TemplateBudgetError if reply.get("budget") else TemplateFailed
        if reply.get("named"):
            raise kind(reply["error"])
        where = reply.get("where") or self._named(names)
        raise kind(f"{where}: {reply['error']}")


_WORKERS: dict[str, RenderWorker] = {}


def render_custom(directory: str, names: Sequence[str], context: dict[str, Any]) -> str:
    """Render the first existing of ``names`` from ``directory`` (or the bundled templates) in
    the folder's worker; raises :class:`TemplateFailed` (or :class:`TemplateBudgetError`)
    with a message that names the template."""
    worker = _WORKERS.get(directory)
    if worker is not None and worker.owner != os.getpid():
        # A process forked from the one that started the worker (a PDF pool worker): the
        # pipe belongs to its parent, so start a worker of its own.
        worker = _WORKERS[directory] = RenderWorker(directory, BUDGET)
    if worker is None or worker.budget != BUDGET:
        if worker is not None:
            worker.close()
        worker = _WORKERS[directory] = RenderWorker(directory, BUDGET)
    return worker.render(names, context)


@atexit.register
def close_workers() -> None:
    """End every worker (also at exit; each would end by itself once this process is gone)."""
    while _WORKERS:
        worker = _WORKERS.popitem()[1]
        if worker.owner == os.getpid():
            worker.close()
