"""A value given to the library that cannot be used, said so that each interface names the
option its own way: a notebook reads ``formats: unknown format 'docx'`` or ``use force=True``,
the command line ``--format: unknown format 'docx'`` or ``use --force``.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

#: Options that are switched on rather than given a value: ``force=True`` in Python.
SWITCHES = frozenset({"force", "class_pdf", "allow_missing_fonts", "public"})


def python_spelling(option: str) -> str:
    """How a library call names ``option``: the parameter, or ``name=True`` for a switch."""
    return f"{option}=True" if option in SWITCHES else option


class _NamesOptions:
    """``text`` says what is wrong; each ``{name}`` in it that is not one of ``values`` is an
    option (a parameter of the library call), spelled by :meth:`spelled`. ``values`` are put in
    as they are (a path or a user's text may hold braces). ``str()`` is the library's spelling."""

    def __init__(self, text: str, **values: Any) -> None:
        self.text, self.values = text, values
        self.options = [f for _, f, _, _ in string.Formatter().parse(text) if f and f not in values]
        super().__init__(self.spelled(python_spelling))  # type: ignore[call-arg]

    def spelled(self, spell: Callable[[str], str]) -> str:
        """The message with every option named by ``spell(name)``."""
        return self.text.format(**{name: spell(name) for name in self.options}, **self.values)


class OptionError(_NamesOptions, ValueError):
    """A value of an option that cannot be used."""


class SetExists(_NamesOptions, FileExistsError):
    """The folder already holds a set, and replacing it was not asked for (the ``force`` option)."""
