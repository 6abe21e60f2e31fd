"""How large a generated set may be, and what it will cost, known before solving it.

``generate`` keeps every student's givens and steps in memory while it writes the key, so
memory grows with the class. The class is capped at :data:`qkvquiz.core.inputs.MAX_STUDENTS`, and
:func:`estimate` measures two probe students of the spec to say what the real class needs.
Measured on delta-rule (the heaviest bundled spec), 3,000 students: about 690 MB of memory at
peak and 210 MB of files, i.e. about 40 times (memory) and 13 times (files) the key's JSON per
student; the factors below round those up.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .core.inputs import MAX_STUDENTS
from .spec import WorksheetSpec

MEMORY_PER_KEY_BYTE = 45  # peak memory per byte of a student's share of key.json
FILES_PER_KEY_BYTE = 15  # bytes written (key.json, key.md, worksheets) per byte of that share
BASELINE_MEMORY = 150_000_000  # the interpreter, NumPy and the renderers
REPORT_FROM_STUDENTS = 1_000  # generate prints the estimate for classes at least this large


@dataclass(frozen=True)
class Estimate:
    students: int
    memory: int  # bytes, peak
    files: int  # bytes written

    def describe(self) -> str:
        return (f"{self.students:,} students: about {_size(self.memory)} of memory and "
                f"{_size(self.files)} of files (estimated from two probe students)")


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError


def class_size_problem(students: int) -> str | None:
    """Why a set of ``students`` cannot be generated, or None."""
    if students > MAX_STUDENTS:
        return (f"{students:,} students is more than the {MAX_STUDENTS:,} one set may hold; "
                "split the class into several sets (each with its own --out)")
    return None


def estimate(spec: WorksheetSpec, students: int, seed: str | int = 0) -> Estimate:
    """Memory and disk a set of ``students`` needs, from the key's size for two probe students."""
    from .key import key_to_json
    from .worksheet import build_worksheet

    one = len(json.dumps(key_to_json(build_worksheet(spec, ["probe-1"], seed))))
    two = len(json.dumps(key_to_json(build_worksheet(spec, ["probe-1", "probe-2"], seed))))
    share = max(two - one, 1)
    return Estimate(students, BASELINE_MEMORY + MEMORY_PER_KEY_BYTE * share * students,
                    one + FILES_PER_KEY_BYTE * share * students)


def physical_memory() -> int | None:
    """This machine's memory in bytes, where the system says (POSIX); None elsewhere."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None
