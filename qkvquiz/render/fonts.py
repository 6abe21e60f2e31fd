"""Fonts for Chinese text in PDFs: find out, before rendering, whether any font on this machine
has CJK glyphs, and say which package to install when none does.

WeasyPrint (Pango) falls back glyph by glyph through fontconfig, so the stylesheets need not
name a CJK family: any installed one is used for the characters the Latin fonts lack. Without
one, every Chinese character prints as an empty box; :func:`cjk_font_problem` turns that into
a warning (:class:`MissingCjkFont`) that names the package, before a PDF is written.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import warnings
from collections.abc import Iterable
from functools import lru_cache

#: The package that gives a Debian or Ubuntu machine CJK fonts (Noto Sans/Serif CJK).
CJK_FONT_PACKAGE = "fonts-noto-cjk"
# CJK ideographs (with extension A and compatibility forms), CJK punctuation, full-width forms.
_CJK = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff60]")


class MissingCjkFont(UserWarning):
    """A document has Chinese text and this machine has no font that can show it."""


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a character only a CJK font has."""
    return _CJK.search(text) is not None


@lru_cache(maxsize=1)
def cjk_fonts() -> tuple[str, ...] | None:
    """The font families fontconfig knows for Chinese (``fc-list :lang=zh family``); ``None``
    where fontconfig's tools are missing and it cannot be told."""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return None
    try:
        run = subprocess.run([fc_list, ":lang=zh", "family"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return tuple(sorted({line.split(",")[0].strip() for line in run.stdout.splitlines() if line.strip()}))


def cjk_font_problem(documents: Iterable[str]) -> str | None:
    """What is wrong when a document has Chinese text and no installed font has CJK glyphs."""
    if not any(has_cjk(doc) for doc in documents):
        return None
    fonts = cjk_fonts()
    if fonts:
        return None
    found = "no font with Chinese glyphs is installed" if fonts is not None else (
        "fontconfig's fc-list is missing, so no font with Chinese glyphs could be found")
    return (f"the PDFs hold Chinese text, but {found}: every Chinese character would print as an empty "
            f"box. Install one, e.g. `sudo apt-get install {CJK_FONT_PACKAGE}` (Debian, Ubuntu), then "
            f"generate again.")


def warn_if_no_cjk_font(documents: Iterable[str]) -> None:
    """Warn (:class:`MissingCjkFont`) when :func:`cjk_font_problem` finds one."""
    problem = cjk_font_problem(documents)
    if problem is not None:
        warnings.warn(problem, MissingCjkFont, stacklevel=3)
