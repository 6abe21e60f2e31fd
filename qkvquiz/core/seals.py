"""Seals on qkvquiz's own state files: a file beside a set is obeyed only if qkvquiz wrote it.

qkvquiz leaves two kinds of state in a course folder: the switch journal of an output set
(:mod:`qkvquiz.core.outputs`, which names folders to move and delete) and the cache of a large key
(:mod:`qkvquiz.key`, which holds the expected values and tolerances). Course folders are shared,
synced and unpacked from archives, so anyone who can put a file there could plant either: a
journal that deletes ``submissions/``, a cache whose tolerances pass every answer. Each such file
therefore carries an HMAC-SHA256 made with a key that only this user's qkvquiz can read (the
*state key*, ``state-key`` beside the instructor secret, 0600, made on first use), and a file
without a valid seal is ignored.

The state key is not the instructor secret: it decides nothing about variants, and a TA who
grades without the secret still gets sealed state. A folder moved to another account or machine
loses its seals (a cache is rebuilt; a half-finished switch is left as it is, with a message).
"""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

from .secret import SecretError, create_secret, default_secret_path, read_secret

STATE_KEY_NAME = "state-key"


def state_key_path() -> Path:
    """``$XDG_CONFIG_HOME/qkvquiz/state-key`` (``~/.config/qkvquiz/state-key``)."""
    return default_secret_path().with_name(STATE_KEY_NAME)


def _state_key(*, create: bool) -> bytes | None:
    """The state key; made (when ``create``) if there is none. None where it can't be had."""
    path = state_key_path()
    if create and not (path.exists() or path.is_symlink()):
        try:
            create_secret(path)
        except (SecretError, OSError):
            pass  # made meanwhile by another run (read below), or a home we can't write (None)
    try:
        return read_secret(path).value
    except SecretError:
        return None


def _mac(key: bytes, purpose: str, parts: tuple[bytes, ...]) -> str:
    mac = hmac.new(key, purpose.encode("utf-8"), hashlib.sha256)
    for part in parts:  # each part's length first: two different splits never read alike
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.hexdigest()


def seal(purpose: str, *parts: bytes) -> str | None:
    """The seal of ``parts`` for ``purpose`` (a short name: what kind of file); None where this
    user has no state key and none can be made (the file is then written unsealed, and ignored
    when read back)."""
    key = _state_key(create=True)
    return None if key is None else _mac(key, purpose, parts)


def is_sealed(found: object, purpose: str, *parts: bytes) -> bool:
    """Whether ``found`` is the seal this user's qkvquiz made of ``parts`` for ``purpose``."""
    if not isinstance(found, str):
        return False
    key = _state_key(create=False)
    return key is not None and hmac.compare_digest(found, _mac(key, purpose, parts))
