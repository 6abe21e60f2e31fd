"""The instructor's secret: what keeps a student with qkvquiz from regenerating the key.

Without a secret, a student's variant follows from the spec, their id and the seed alone,
and students have the tool, the spec (it is often shared) and perhaps the seed. With one,
each variant is drawn from HMAC-SHA256(secret, spec item, student id, seed)
(:func:`qkvquiz.core.seeding.variant_key`), which cannot be computed, or inverted from a
worksheet, without the secret.

The secret is text: a file made by ``qkvquiz init`` holds 64 hex digits (256 random bits);
any text of at least ``MIN_SECRET_LENGTH`` characters works, from a file or from the
environment variable ``QKVQUIZ_SECRET``. Surrounding whitespace is ignored, so a trailing
newline does not change the keys.
"""

from __future__ import annotations

import os
import secrets
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .inputs import MAX_SECRET_BYTES, InputError, read_text

SECRET_ENV = "QKVQUIZ_SECRET"
MIN_SECRET_LENGTH = 16
SECRET_BYTES = 32


class SecretError(ValueError):
    """A secret that cannot be created or used; the message says why."""


@dataclass(frozen=True)
class Secret:
    value: bytes
    source: str  # "file PATH" or "$QKVQUIZ_SECRET", for messages


def default_secret_path() -> Path:
    """``$XDG_CONFIG_HOME/qkvquiz/secret`` (``~/.config/qkvquiz/secret``): outside any course folder."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "qkvquiz" / "secret"


def create_secret(path: str | Path) -> Path:
    """Write a new random secret to ``path``, readable by its owner only (0600).

    Refuses to replace an existing file: every key made with the old secret could never be
    rebuilt. The file appears complete or not at all (written to a temporary file, then
    linked into place, which fails if the name exists). A new parent folder gets 0700.
    """
    path = Path(path).expanduser()
    if path.exists() or path.is_symlink():
        raise SecretError(f"{path} exists; a new secret would orphan every key made with it. Choose another path.")
    if not path.parent.exists():
        path.parent.mkdir(parents=True, mode=0o700)
    text = secrets.token_hex(SECRET_BYTES) + "\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, path)  # atomic, and fails if the name was taken meanwhile
        except FileExistsError:
            raise SecretError(f"{path} exists; a new secret would orphan every key made with it.") from None
        except OSError:
            # A file system without hard links: create exclusively instead.
            fd2 = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd2, "w", encoding="ascii") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
    finally:
        Path(tmp).unlink(missing_ok=True)
    return path


def _checked(text: str, where: str) -> bytes:
    value = text.strip()
    if len(value) < MIN_SECRET_LENGTH:
        raise SecretError(
            f"{where}: a secret needs at least {MIN_SECRET_LENGTH} characters (found {len(value)}); "
            "`qkvquiz init` makes a good one"
        )
    return value.encode("utf-8")


def read_secret(path: str | Path) -> Secret:
    """The secret in a file; SecretError names the file when it is missing, unreadable or short."""
    path = Path(path).expanduser()
    if not path.exists() and not path.is_symlink():
        raise SecretError(f"{path}: no such secret file (create one with `qkvquiz init {path}`)")
    try:
        # Bounded and regular files only: /dev/zero or a FIFO named as the secret must not hang.
        text = read_text(path, MAX_SECRET_BYTES, "secret")
    except InputError as exc:
        raise SecretError(str(exc)) from None
    return Secret(_checked(text, str(path)), f"file {path}")


def load_secret(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Secret | None:
    """The secret from ``path`` if given, else from ``$QKVQUIZ_SECRET`` if set, else None."""
    if path is not None:
        return read_secret(path)
    environ = os.environ if environ is None else environ
    text = environ.get(SECRET_ENV)
    if text is None or not text.strip():
        return None
    return Secret(_checked(text, f"${SECRET_ENV}"), f"${SECRET_ENV}")


def readable_by_others(path: str | Path) -> bool:
    """True when the file's group or other users may read it (POSIX permissions)."""
    if os.name != "posix":
        return False
    mode = Path(path).expanduser().stat().st_mode
    return bool(mode & (stat.S_IRGRP | stat.S_IROTH))
