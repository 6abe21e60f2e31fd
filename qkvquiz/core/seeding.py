"""Reproducible per-student randomness, drawn for a whole class at once.

Each student's variant of an item comes from a 64-bit key derived from (item id, the item's
fingerprint: family, params and fixed givens; student id, seed) by SHA-256, or HMAC-SHA256
under an instructor secret, so it never depends on who else is on the roster.
From the keys, :class:`Draw` produces random numbers with a counter-based generator
(SplitMix64 applied to key ⊕ counter), vectorised over all students: sampling 300 students
is one array operation, not 300 generator objects.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def variant_key(*parts: str, secret: bytes | None = None) -> int:
    """A 64-bit key from the given strings; keyed by ``secret`` (HMAC-SHA256) when one is given."""
    message = "\x1f".join(parts).encode("utf-8")
    if secret is None:
        digest = hashlib.sha256(message).digest()
    else:
        digest = hmac.digest(secret, message, "sha256")  # hmac.new(...).digest(), in one C call
    return int.from_bytes(digest[:8], "little")


def variant_code(key: int) -> str:
    """A short code printed on a worksheet; a one-way digest of the key, so it reveals nothing."""
    digest = hashlib.sha256(key.to_bytes(8, "little") + b"code").hexdigest().upper()
    return f"{digest[:4]}-{digest[4:8]}"


def set_code(parts: Sequence[str], secret: bytes | None = None) -> str:
    """A 12-hex-digit code naming a worksheet set (what defines its problems, never its roster).

    Keyed by ``secret`` (HMAC-SHA256) when one is given, so that the code reveals nothing
    about the seed; the same spec items, seed and secret always give the same code.
    """
    message = "\x1f".join(("qkvquiz-set", *parts)).encode("utf-8")
    if secret is None:
        return hashlib.sha256(message).hexdigest()[:12]
    return hmac.new(secret, message, hashlib.sha256).hexdigest()[:12]


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


class Draw:
    """Random draws for a batch of variants, each from its own reproducible stream.

    ``Draw(keys)`` holds one 64-bit key per variant; every call consumes a fresh block of the
    counter, so the sequence of calls a family makes defines the stream. Each returned array
    has the batch as its leading axis.
    """

    def __init__(self, keys: Sequence[int] | np.ndarray, xp=np) -> None:
        self.keys = np.asarray(keys, dtype=np.uint64).reshape(-1)
        self.xp = xp
        self._counter = 0

    @classmethod
    def candidates(cls, keys: Sequence[int] | np.ndarray, first: int, count: int, xp=np) -> "Draw":
        """Draws for candidates ``first .. first+count−1`` of each key, candidate-major per key.

        Candidate j of a student has its own stream derived from (key, j), so rejection
        sampling picks the same variant for a student however many others are drawn beside.
        """
        keys = np.asarray(keys, dtype=np.uint64).reshape(-1, 1)
        j = np.arange(first, first + count, dtype=np.uint64).reshape(1, -1)
        with np.errstate(over="ignore"):
            derived = _splitmix64(keys ^ _splitmix64(j * _GOLDEN))
        return cls(derived.reshape(-1), xp)

    @property
    def size(self) -> int:
        return int(self.keys.shape[0])

    def bits(self, shape: tuple[int, ...]) -> np.ndarray:
        """Raw 64-bit words, shape (batch, *shape)."""
        count = int(np.prod(shape, dtype=np.int64))
        counters = np.arange(self._counter, self._counter + count, dtype=np.uint64)
        self._counter += count
        with np.errstate(over="ignore"):
            mixed = _splitmix64(self.keys[:, None] * _M2 ^ counters[None, :])
        return _splitmix64(mixed).reshape((self.size, *shape))

    def uniform(self, low: float, high: float, shape: tuple[int, ...] = ()) -> np.ndarray:
        """Floats in [low, high) with 53 random bits."""
        u = (self.bits(shape) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
        return self.xp.asarray(low + (high - low) * u)

    def integers(self, low: int, high: int, shape: tuple[int, ...] = ()) -> np.ndarray:
        """Integers in [low, high] (inclusive), as float64 (the engine's dtype)."""
        span = np.uint64(high - low + 1)
        return self.xp.asarray((self.bits(shape) % span).astype(np.float64) + low)

    def choice(self, options: int, shape: tuple[int, ...] = ()) -> np.ndarray:
        """Indices in [0, options), as int64."""
        return self.xp.asarray((self.bits(shape) % np.uint64(options)).astype(np.int64))
