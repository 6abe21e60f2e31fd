"""WeasyPrint's system libraries, found by their Linux names first.

WeasyPrint opens each library it needs (GObject, Pango, HarfBuzz, fontconfig…) by trying a
list of names for Linux, macOS and Windows in turn, the Windows and generic ones first. For a
name that does not load as it is, cffi asks ``ctypes.util.find_library``, which on Linux runs
``ldconfig``, then ``gcc`` and ``ld`` for a name that ``ldconfig`` does not know: about 9 ms for
each name tried in vain, 0.15 s of WeasyPrint's 0.4 s import (before every PDF run can start).

While WeasyPrint imports, :func:`linux_names_first` has ``find_library`` answer a name of one
of those lists with the library's Linux file name (its soname) where that loads: the library
WeasyPrint would have found a few names later. Any other name, or one whose library does not
load under its soname, is looked up as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

#: Each library's soname on Linux, and the names WeasyPrint tries before it.
_SONAMES = {
    "libgobject-2.0.so.0": ("libgobject-2.0-0", "gobject-2.0-0", "gobject-2.0"),
    "libpango-1.0.so.0": ("libpango-1.0-0", "pango-1.0-0", "pango-1.0"),
    "libharfbuzz.so.0": ("libharfbuzz-0", "harfbuzz", "harfbuzz-0.0"),
    "libharfbuzz-subset.so.0": ("libharfbuzz-subset-0", "harfbuzz-subset", "harfbuzz-subset-0.0"),
    "libfontconfig.so.1": ("libfontconfig-1", "fontconfig-1", "fontconfig"),
    "libpangoft2-1.0.so.0": ("libpangoft2-1.0-0", "pangoft2-1.0-0", "pangoft2-1.0"),
}
_SONAME_OF = {name: soname for soname, names in _SONAMES.items() for name in names}


@cache
def _loads(soname: str) -> bool:
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


@contextmanager
def linux_names_first() -> Iterator[None]:
    """``ctypes.util.find_library`` answers WeasyPrint's library names by their sonames, for
    the time of the ``with`` block (on Linux; elsewhere nothing changes)."""
    if not sys.platform.startswith("linux"):
        yield
        return
    original = ctypes.util.find_library

    def find_library(name: str) -> str | None:
        soname = _SONAME_OF.get(name)
        if soname is not None and _loads(soname):
            return soname
        return original(name)

    ctypes.util.find_library = find_library
    try:
        yield
    finally:
        ctypes.util.find_library = original
