"""The bundled templates compiled once per install, not once per run.

Compiling the 47 bundled templates (parse, generate Python, compile it) takes about half a
second, more than rendering a small class. Jinja's bytecode cache keeps each compiled template
in the user's cache folder (``$XDG_CACHE_HOME/qkvquiz``, ``~/.cache/qkvquiz``), checked against
the template's source (SHA-1 of its text) on every load, so an edited template is compiled anew.

The compiled code also depends on how the environment is set up (options, extensions, the i18n
functions, Jinja's and Python's versions): each such setup gets a folder of its own, named by a
fingerprint of those and of the modules that make the environment. Only the bundled templates
use this cache (a user's templates render in the sandbox, compiled in its worker). A cache that
cannot be read or written (no home folder, a read-only disk, a damaged file) is passed over:
the template is compiled as before.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import jinja2
from jinja2.bccache import Bucket, FileSystemBytecodeCache

# The modules whose code decides how a bundled template compiles (options, extensions, gettext).
_SETUP_MODULES = ("environment.py", "markdown.py", "sandbox.py", "template_cache.py")


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/qkvquiz`` (``~/.cache/qkvquiz``)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "qkvquiz"


def fingerprint(env: jinja2.Environment) -> str:
    """What compiled code depends on besides the template's own text, as a short hash."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _SETUP_MODULES:
        digest.update((here / name).read_bytes())
    digest.update((here.parent / "core" / "i18n.py").read_bytes())
    options = (jinja2.__version__, sys.version, type(env).__qualname__, sorted(env.extensions),
               getattr(env, "newstyle_gettext", None), env.trim_blocks, env.lstrip_blocks,
               env.keep_trailing_newline, env.newline_sequence, env.optimized)
    digest.update(repr(options).encode("utf-8"))
    return digest.hexdigest()[:16]


class QuietBytecodeCache(FileSystemBytecodeCache):
    """Jinja's file cache, where any failure to read or write means "compile it here"."""

    def load_bytecode(self, bucket: Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except (OSError, EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()  # unreadable or damaged (its checksum is a pickle): compiled from the source instead

    def dump_bytecode(self, bucket: Bucket) -> None:
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
            super().dump_bytecode(bucket)
        except OSError:
            pass  # a read-only or full disk: the next run compiles again


def bytecode_cache(env: jinja2.Environment) -> QuietBytecodeCache | None:
    """The cache for ``env``'s setup, or None where there is no cache folder to be had."""
    try:
        return QuietBytecodeCache(str(cache_root() / "templates" / fingerprint(env)), "%s.cache")
    except (OSError, RuntimeError):  # no home folder (Path.home() raises RuntimeError)
        return None


def attach(env: Any) -> Any:
    """``env`` with the cache, once its setup (extensions, globals) is final."""
    env.bytecode_cache = bytecode_cache(env)
    return env
