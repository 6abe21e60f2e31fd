"""Languages: every sentence a student or an instructor reads comes from a gettext catalog.

The catalogs are ``qkvquiz/locale/<lang>/LC_MESSAGES/qkvquiz.po`` (edited by translators) and
the ``.mo`` compiled from each by Babel (``pybabel compile``, see docs/languages.md); both are in the
repository and in the wheel, and a test checks that every ``.mo`` matches its ``.po``. English
is the source language: its messages are the msgids, so ``en`` needs no catalog.

Code marks a sentence with :func:`_` (translated now, in the current language) or :func:`N_`
(a constant defined at import time, e.g. a family's misconception sentence, translated where it
is shown with ``_(text)``). Placeholders are named (``%(part)s``), so a translation can put
them in its own word order. Templates use Jinja's i18n extension (``{% trans %}``, ``_()``)
with the same catalog (:func:`install_jinja`), and the answer form's script gets the messages
it needs as JSON (:func:`script_messages`).

The current language is a context variable, set once where work enters the package: a library
entry point takes ``lang=`` and enters :func:`entered` at its top (the language given, else the one
chosen around the call, else its data's own: the key's, the spec's); a command enters it once
around its library calls. Nothing below passes a language along: deep helpers (the entry parser,
tolerance sentences) read the current one. ``None`` everywhere means "not chosen here".
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

DOMAIN = "qkvquiz"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"
DEFAULT_LANG = "en"
#: Every language shipped; a new one is a ``.po`` file (and its ``.mo``) plus its code here.
LANGUAGES: dict[str, str] = {"en": "English", "zh": "中文"}
#: Each language named in English, for the messages of the command line and the library's notes.
ENGLISH_NAMES: dict[str, str] = {"en": "English", "zh": "Chinese"}
#: The ``lang`` attribute of an HTML page in each language (simplified characters for zh).
HTML_LANG: dict[str, str] = {"en": "en", "zh": "zh-Hans"}

_current: ContextVar[str] = ContextVar("qkvquiz_lang", default=DEFAULT_LANG)


class UnknownLanguage(ValueError):
    """A language code that qkvquiz has no catalog for."""


def check_lang(lang: str) -> str:
    """``lang`` normalised (``zh-CN``, ``zh_Hans`` → ``zh``), or :class:`UnknownLanguage` naming the choices."""
    if not isinstance(lang, str):
        raise UnknownLanguage(f"a language is a code such as 'en' or 'zh', got {lang!r}")
    code = re.split(r"[-_]", lang.strip().lower(), maxsplit=1)[0]
    if code not in LANGUAGES:
        raise UnknownLanguage(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    return code


@lru_cache(maxsize=None)
def translations(lang: str) -> gettext.NullTranslations:
    """The compiled catalog of ``lang`` (English: the messages as written)."""
    lang = check_lang(lang)
    if lang == DEFAULT_LANG:
        return gettext.NullTranslations()
    # No fallback: a shipped language without its .mo is a broken install, not English.
    return gettext.translation(DOMAIN, str(LOCALE_DIR), [lang])


def current() -> str:
    """The language sentences are produced in now."""
    return _current.get()


def kept_per_language(table: dict[tuple[int, str], tuple[Any, Any]], owner: Any, limit: int,
                      make: Callable[[], Any]) -> Any:
    """``make()``, kept in ``table`` for ``owner`` (the very object, not an equal one, which the
    table holds so that its id is no other's) in the current language; a table of ``limit``
    entries is emptied before the next is added."""
    key = (id(owner), current())
    hit = table.get(key)
    if hit is not None and hit[0] is owner:
        return hit[1]
    if len(table) >= limit:
        table.clear()
    value = make()
    table[key] = (owner, value)
    return value


def chosen() -> str | None:
    """The language a caller chose around this call (:func:`using`), or None where none was
    chosen (sentences are then in :data:`DEFAULT_LANG`, and a worksheet's renderers use its
    spec's language)."""
    return _current.get(None)


@contextmanager
def using(lang: str | None) -> Iterator[str]:
    """Produce sentences in ``lang`` inside the block (``None``: keep the current language)."""
    if lang is None:
        yield current()
        return
    token = _current.set(check_lang(lang))
    try:
        yield _current.get()
    finally:
        _current.reset(token)


@contextmanager
def entered(lang: str | None, own: str | None = None) -> Iterator[str]:
    """The language of a library entry point's work, entered for the block: ``lang`` where its
    caller passed one, else the language chosen around the call (an outer entry point's, a
    command's ``--lang``), else ``own`` (the language of the data it works on, e.g. the key's),
    else the current one."""
    with using(lang or chosen() or own) as code:
        yield code


def _(message: str) -> str:
    """``message`` in the current language."""
    return translations(current()).gettext(message)


def plural_count(n: Any) -> int:
    """``n`` as the integer gettext's plural rules take: a whole number as itself, a fraction
    (1.5 points) as 2, which every shipped rule reads as the plural."""
    value = float(n)
    return int(value) if value.is_integer() else 2


def ngettext(singular: str, plural: str, n: Any) -> str:
    """The form of a message for the count ``n`` (points may be fractions) in the current language."""
    return translations(current()).ngettext(singular, plural, plural_count(n))


def N_(message: str) -> str:
    """Mark a constant for extraction; it is translated where it is shown, with ``_(message)``."""
    return message


def Np_(singular: str, plural: str) -> tuple[str, str]:
    """Mark a constant pair of plural forms for extraction (``-k Np_:1,2``); shown with ``ngettext``."""
    return singular, plural


class Translator(NamedTuple):
    """gettext and ngettext of one language, for code that holds a language explicitly."""

    lang: str
    gettext: Any
    ngettext: Any


def translator(lang: str | None = None) -> Translator:
    """The functions of ``lang`` (default: the current language)."""
    code = check_lang(lang) if lang is not None else current()
    t = translations(code)
    return Translator(code, t.gettext, t.ngettext)


def install_jinja(env: Any, trusted: bool = False) -> Any:
    """Give a Jinja environment the i18n extension, translating into the *current* language.

    The callables look the language up on every call, so one cached environment serves every
    language; newstyle gettext formats ``%(name)s`` placeholders from keyword arguments and
    escapes them where the environment autoescapes. A user's template may write any message:
    its %-fields are checked for width. ``trusted`` (the bundled templates, whose messages are
    the catalog's) gets the catalog's functions without that check.
    """
    env.add_extension("jinja2.ext.i18n")
    if trusted:
        env.install_gettext_callables(_, ngettext, newstyle=True)
    else:
        env.install_gettext_callables(
            lambda message: _(_format_checked(message)),
            lambda singular, plural, n: ngettext(_format_checked(singular), _format_checked(plural), n),
            newstyle=True,
        )
    return env


# A %-field as wide as a template could ask for; newstyle gettext formats outside the sandbox's
# own checks, so a custom template's ``_("%(x)999999999d", x=1)`` is refused here.
_WIDE_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|[0-9]{5,})|%(?:\([^)]*\))?[-#0 +]*[0-9]*\.(?:\*|[0-9]{5,})")


def _format_checked(message: str) -> str:
    if isinstance(message, str) and _WIDE_FIELD.search(message):
        from jinja2.exceptions import SecurityError

        raise SecurityError("a message with a %-field this wide (or of '*' width) is not allowed")
    return message


@lru_cache(maxsize=8)
def _script_msgids(path: str) -> tuple[str, ...]:
    """The messages a script marks with ``_("…")``, read by Babel's JavaScript extractor (the
    same one ``pybabel extract`` uses), so the script and the catalog cannot drift apart."""
    from babel.messages.extract import extract_javascript

    with open(path, "rb") as fh:
        found = [msg for _line, _func, msg, _comments in extract_javascript(fh, ["_"], [], {})]
    # A call with more arguments comes as a tuple whose first item is the msgid (None: not a literal).
    msgids = (msg[0] if isinstance(msg, tuple) else msg for msg in found)
    return tuple(dict.fromkeys(msg for msg in msgids if isinstance(msg, str)))


def script_messages(paths: list[Path], lang: str | None = None) -> dict[str, str]:
    """msgid → translation for every message the scripts at ``paths`` use, in ``lang``
    (default: current); empty for English, where a script shows its msgids as written."""
    code = check_lang(lang) if lang is not None else current()
    if code == DEFAULT_LANG:
        return {}
    t = translations(code)
    return {msgid: t.gettext(msgid) for path in paths for msgid in _script_msgids(str(path))}


class LangText(NamedTuple):
    """An instructor's text (a spec's title, instructions, an item's title or intro) in one or
    more languages: ``texts`` holds (language, text) pairs, ``en`` first, or one pair with the
    language ``""`` for a plain string, which reads the same in every language.

    English is required in a mapping: it is the text the set is known by (its variant codes come
    from the English title), and the one shown where the set's language has none
    (:meth:`text`), so that a half-translated spec still prints every field.
    """

    texts: tuple[tuple[str, str], ...]

    @classmethod
    def plain(cls, text: str) -> LangText:
        return cls((("", text),))

    @property
    def written(self) -> str:
        """The text as the set knows it: a plain string as written, else its English."""
        return self.texts[0][1]

    def has(self, lang: str) -> bool:
        """Whether ``lang`` is written (a plain string counts for every language)."""
        return any(code in ("", lang) for code, _text in self.texts)

    def text(self, lang: str | None = None) -> str:
        """The text in ``lang`` (default: the current language), else in English."""
        code = current() if lang is None else check_lang(lang)
        return next((text for key, text in self.texts if key == code), self.written)
