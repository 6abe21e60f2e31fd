"""A practice problem: one item solved for one public seed, and its key as the grader reads it.

Practice sets are public: a problem is drawn from its seed alone, never from the instructor's
secret, so anyone with the seed can draw it again (``--seed`` reproduces a session).
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..key import Key, key_from_json, key_to_json
from ..worksheet import Worksheet, build_worksheet
from .topics import Topic

#: The one student of a practice worksheet (the grader needs an id).
PRACTICE_STUDENT = "practice"
#: What a seed may be: it travels in requests and page data, so it is short and plain.
MAX_SEED_CHARS = 40
SEED_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,%d}" % MAX_SEED_CHARS)


@dataclass(frozen=True)
class Problem:
    topic: Topic
    seed: str
    worksheet: Worksheet
    key: Key

    @property
    def code(self) -> str:
        """The variant's code, as a worksheet prints it."""
        return self.worksheet.codes[0]

    @property
    def lang(self) -> str:
        return self.worksheet.spec.lang


def new_seed() -> str:
    """A fresh public seed (random, not secret: it is shown on the page)."""
    return secrets.token_hex(4)


def check_seed(seed: str) -> str:
    if not isinstance(seed, str) or not SEED_PATTERN.fullmatch(seed):
        raise ValueError(f"a seed is 1 to {MAX_SEED_CHARS} letters, digits, '-' or '_', got {str(seed)[:60]!r}")
    return seed


def new_problem(topic: Topic, seed: str | None = None) -> Problem:
    """``topic`` drawn for ``seed`` (a fresh one if None) and solved; its key is what
    ``generate`` would write for it, read back as ``grade`` reads a key file."""
    seed = check_seed(seed) if seed is not None else new_seed()
    # Kept: a check and the worked steps of the problem on screen find it here again.
    cache_key = (topic.id, topic.spec.lang, seed)
    with _LOCK:
        hit = _CACHE.get(cache_key)
        if hit is not None and hit.topic is topic:
            _CACHE.move_to_end(cache_key)
            return hit
    ws = build_worksheet(topic.spec, [PRACTICE_STUDENT], seed, secret=None)
    problem = Problem(topic, seed, ws, key_from_json(key_to_json(ws), source=f"<practice {topic.id} {seed}>"))
    with _LOCK:
        _CACHE[cache_key] = problem
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return problem


CACHE_SIZE = 256  # problems kept; a student works on one at a time
_CACHE: OrderedDict[tuple[str, str, str], Problem] = OrderedDict()
_LOCK = threading.Lock()
