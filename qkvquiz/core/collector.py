"""CPython's cycle collector, tuned in this one place.

Our objects hold no reference cycles worth looking for: a class's key, files, answers and
results are millions of small lists, dicts and texts freed by reference counting, and rendering
makes a great many short-lived containers. The collector, which runs every few hundred new
containers and walks the older ones again and again as the heap grows, would spend a large share
of the time finding nothing. So:

- reading, grading, reporting and writing a key pause it (:func:`collector_paused`);
- a worker process that renders (``generate``'s pool, the PDF workers) moves what it inherited
  out of its sight and collects young objects less often (:func:`settle_worker`), and so does a
  batch of PDFs rendered in this process (:func:`rendering_collector`);
- the command skips the last collection as the process ends (:func:`skip_final_collection`).

None of it changes a result.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Young-generation threshold while rendering: a page allocates hundreds of thousands of
#: objects, and the default (700) runs the collector thousands of times per page (6% fewer
#: instructions per student in ``generate``'s workers).
RENDERING_THRESHOLD = (50_000, 20, 100)


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection inside the block; the collector is as it was after it (nests)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def settle_worker() -> None:
    """For a rendering worker that has just started: everything made so far (the solved
    worksheet, compiled templates, WeasyPrint) lives as long as the worker, so it leaves the
    collector's sight, without a collection first (a full pass over the inherited heap cost each
    worker 20 ms, a tenth of a small class's rendering, and wrote to every page the fork shares);
    young objects are collected less often (:data:`RENDERING_THRESHOLD`)."""
    gc.freeze()
    gc.set_threshold(*RENDERING_THRESHOLD)


@contextmanager
def rendering_collector() -> Iterator[None]:
    """The workers' collector settings (:func:`settle_worker`) for rendering in this process;
    the settings before it are restored after."""
    threshold = gc.get_threshold()
    settle_worker()
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def skip_final_collection() -> None:
    """As the process ends: what the run made (a class's worksheets, results) is freed as the
    interpreter shuts down, without the collector's last pass over every object first (50 to
    90 ms after a class of 300); a reference cycle left over goes back with the process."""
    gc.freeze()
