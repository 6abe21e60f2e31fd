"""Reading a student's answer: numbers, exact forms written as text, and the part's shape.

A part's answer is a number (or a string) for a scalar part and a nested list for a vector,
a matrix or a stack of matrices. Entries may be JSON numbers or strings holding an exact
form; :func:`parse_entry` reads one entry and :func:`parse_answer` checks the shape.

What an entry string may hold (spaces anywhere are ignored)::

    0.25   0,25   .5   1e-3   −2   +3          decimals, decimal comma, scientific, signs
    5/3    -inf   −∞   inf   ∞   -infinity    fractions and infinities
    sqrt(2)   √2   5/√2   5/sqrt(2)   2√3      roots (√ and a function take the next atom)
    e   pi   π   exp(1.5)   e^2   e**-1        constants, exponentials
    (1 + √5)/2   2·π   3×4   1÷8              + − * / ^ ** × · ÷ and parentheses

Typed on a Chinese keyboard: full-width digits and signs (``０．５``, ``－∞``, ``５／３``,
``（１＋√５）／２``) read as their ASCII forms, and the ideographic full stop ``。`` as a
decimal point between digits (``０。５``); the ideographic comma ``、`` (which could separate
two entries or mark decimals) is refused (:func:`normalize_width`).

``2e3`` is scientific notation (2000); ``2e`` is 2·e and ``e-1`` is e − 1. A number may be
followed directly by a name, ``√`` or ``(`` (``2√3``, ``2pi``, ``2(3+1)``), never by another
number. ``-2^2`` is −4 (the power binds first) and ``2^3^2`` is 2^9.

The text is split into tokens and read by a small recursive-descent parser that evaluates
as it goes with Python floats; nothing is passed to ``eval``. Texts longer than 200
characters or nested more than 20 levels deep are refused.

Not a wrong answer but a *format error* (:class:`AnswerFormatError`, whose message is a
sentence for the student): a missing part (``None``), a wrong shape, a ragged row, an entry
that cannot be read, NaN, a division by zero or a value too large for a float. Locations in
messages count from 1: ``entry 3`` in a list, ``row 2, column 3`` in a matrix,
``matrix 1, row 2, column 3`` in a stack of matrices.

Why one module of about 550 lines: it is the grammar of an answer, from the tokenizer through
the parser to a part's shape, and the answer form's script (``templates/answer-form/parse.js``)
mirrors it function for function, which a reader checks with both open.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable

import numpy as np

from ..core.i18n import Np_, _, ngettext
from ..core.places import entry_place

MAX_TEXT_LENGTH = 200
MAX_NESTING = 20
MAX_ENTRIES = 10_000
MAX_DEPTH = 4


class AnswerFormatError(ValueError):
    """A part's answer that cannot be read; str(e) is a sentence for the student."""


# ----------------------------------------------------------------------------- one entry

# Characters students type for the same operator; mapped before tokenising.
_SYNONYMS = str.maketrans(
    {
        "\u2212": "-",  # − minus sign
        "\u2013": "-",  # – en dash
        "\u00d7": "*",  # ×
        "\u00b7": "*",  # ·
        "\u22c5": "*",  # ⋅
        "\u00f7": "/",  # ÷
        "\u2215": "/",  # ∕ division slash
        "\u2044": "/",  # ⁄ fraction slash
    }
)

# Full-width ASCII (U+FF01 "！" … U+FF5E "～": digits, letters, ＋－＊／＾（）．，) is what a Chinese
# input method types for the ASCII character; "﹣" is the small form of the minus.
_FULL_WIDTH = str.maketrans({**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)}, "\ufe63": "-"})
# "。" means a decimal point only between digits (０。５); "、" could separate entries or mark decimals.
_IDEOGRAPHIC_STOP = re.compile(r"(?<=[0-9])\u3002(?=[0-9])")


def normalize_width(text: str) -> str:
    """``text`` with what a Chinese keyboard types in place of ASCII read as ASCII; raises
    :class:`_Unreadable` for the ideographic comma and a full stop not between digits, which
    could mean more than one thing. The same step opens the answer form's parser (parse.js)."""
    text = text.translate(_FULL_WIDTH)
    if "\u3001" in text:
        raise _Unreadable(_('"、" could separate two entries or mark decimals; write each entry in its own '
                            'box, with a decimal point (0.5)'))
    text = _IDEOGRAPHIC_STOP.sub(".", text)
    if "\u3002" in text:
        raise _Unreadable(_('"。" is read as a decimal point only between two digits (0。5); write 0.5'))
    return text


# A decimal comma needs digits on both sides ("0,25"), so "1, 2" is not read as 1.2.
_NUMBER = re.compile(r"(?:[0-9]+,[0-9]+|[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# "12,288" may be a decimal comma (12.288) or a thousands separator (12288): refused, not guessed.
_GROUPED = re.compile(r"[1-9][0-9]{0,2},[0-9]{3}")
_NAME = re.compile(r"[A-Za-z]+")
_OPERATORS = ("**", "+", "-", "*", "/", "^", "(", ")", "√", "π", "∞")

_CONSTANTS: dict[str, float] = {
    "e": math.e,
    "pi": math.pi,
    "π": math.pi,
    "inf": math.inf,
    "infinity": math.inf,
    "∞": math.inf,
}
_FUNCTIONS: dict[str, Callable[[float], float]] = {
    "sqrt": math.sqrt,
    "√": math.sqrt,
    "exp": math.exp,
}

# Token kinds.
_NUM, _CONST, _FUNC, _OP, _END = "number", "constant", "function", "operator", "end"


class _Unreadable(Exception):
    """Why a text is not a number; becomes part of an AnswerFormatError message."""


def _show(text: str, limit: int = 40) -> str:
    """The student's text as quoted in a message, cut short if long."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tokenize(text: str) -> list[tuple[str, object]]:
    tokens: list[tuple[str, object]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        m = _NUMBER.match(text, i)
        if m:
            if _GROUPED.fullmatch(m.group()):
                whole, frac = m.group().split(",")
                raise _Unreadable(_(
                    '"%(text)s" could be %(point)s (decimal comma) or %(joined)s (thousands); '
                    "write %(point)s or %(joined)s"
                ) % {"text": m.group(), "point": f"{whole}.{frac}", "joined": f"{whole}{frac}"})
            value = float(m.group().replace(",", "."))
            if math.isinf(value):
                raise _Unreadable(_('"%(text)s" is too large') % {"text": m.group()})
            tokens.append((_NUM, value))
            i = m.end()
            continue
        m = _NAME.match(text, i)
        if m:
            name = m.group().lower()
            if name == "nan":
                raise _Unreadable(_('NaN means "not a number"; write the value you computed'))
            if name in _CONSTANTS:
                tokens.append((_CONST, _CONSTANTS[name]))
            elif name in _FUNCTIONS:
                tokens.append((_FUNC, name))
            else:
                raise _Unreadable(_('unknown name "%(name)s"') % {"name": _show(m.group(), 20)})
            i = m.end()
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is None:
            raise _Unreadable(_('"%(char)s" cannot be part of a number') % {"char": ch})
        if op in ("π", "∞"):
            tokens.append((_CONST, _CONSTANTS[op]))
        elif op == "√":
            tokens.append((_FUNC, op))
        else:
            tokens.append((_OP, "^" if op == "**" else op))
        i += len(op)
    tokens.append((_END, None))
    return tokens


def _checked(value: float, *operands: float) -> float:
    """Refuse results that have no value (∞ − ∞, 0·∞) or that overflowed from finite inputs."""
    if math.isnan(value):
        raise _Unreadable(_("it works out to ∞ − ∞, 0·∞ or ∞/∞, which has no value"))
    if math.isinf(value) and all(math.isfinite(x) for x in operands):
        raise _Unreadable(_("the value is too large"))
    return value


class _Parser:
    """Recursive descent over the token list, evaluating with floats.

    expr   := term (("+" | "-") term)*
    term   := factor (("*" | "/") factor | power)*      # the bare `power` is 2√3, 2π, 2(3)
    factor := ("+" | "-") factor | power
    power  := atom ("^" factor)?                         # right-associative, e^-1 allowed
    atom   := number | constant | function atom | "(" expr ")"
    """

    def __init__(self, tokens: list[tuple[str, object]]) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0

    def peek(self) -> tuple[str, object]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, object]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def is_op(self, *ops: str) -> bool:
        kind, value = self.peek()
        return kind == _OP and value in ops

    def enter(self) -> None:
        # Parentheses, roots, functions, signs and exponents each open a level.
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _Unreadable(_("it is nested more than %(levels)s levels deep") % {"levels": MAX_NESTING})

    def parse(self) -> float:
        value = self.expr()
        kind, token = self.peek()
        if kind != _END:
            raise _Unreadable(_out_of_place(kind, token))
        return value

    def expr(self) -> float:
        value = self.term()
        while self.is_op("+", "-"):
            op = self.take()[1]
            rhs = self.term()
            value = _checked(value + rhs if op == "+" else value - rhs, value, rhs)
        return value

    def term(self) -> float:
        value = self.factor()
        while True:
            if self.is_op("*", "/"):
                op = self.take()[1]
                rhs = self.factor()
                if op == "*":
                    value = _checked(value * rhs, value, rhs)
                elif rhs == 0:
                    raise _Unreadable(_("it divides by zero"))
                else:
                    value = _checked(value / rhs, value, rhs)
            elif self.peek()[0] in (_CONST, _FUNC) or self.is_op("("):
                rhs = self.power()
                value = _checked(value * rhs, value, rhs)
            else:
                return value

    def factor(self) -> float:
        if self.is_op("+", "-"):
            op = self.take()[1]
            self.enter()
            value = self.factor()
            self.depth -= 1
            return -value if op == "-" else value
        return self.power()

    def power(self) -> float:
        base = self.atom()
        if not self.is_op("^"):
            return base
        self.take()
        self.enter()
        exponent = self.factor()
        self.depth -= 1
        if base == 0 and exponent < 0:
            raise _Unreadable(_("it divides by zero"))
        try:
            value = math.pow(base, exponent)
        except OverflowError:
            raise _Unreadable(_("the value is too large")) from None
        except ValueError:
            raise _Unreadable(_("it raises a negative number to a fractional power")) from None
        return _checked(value, base, exponent)

    def atom(self) -> float:
        kind, token = self.take()
        if kind == _NUM or kind == _CONST:
            assert isinstance(token, float)
            return token
        if kind == _FUNC:
            assert isinstance(token, str)
            self.enter()
            arg = self.atom()
            self.depth -= 1
            if token in ("sqrt", "√") and arg < 0:
                raise _Unreadable(_("it takes the square root of a negative number"))
            try:
                return _checked(_FUNCTIONS[token](arg), arg)
            except OverflowError:
                raise _Unreadable(_("the value is too large")) from None
        if kind == _OP and token == "(":
            self.enter()
            value = self.expr()
            self.depth -= 1
            if not self.is_op(")"):
                raise _Unreadable(_('a "(" is not closed'))
            self.take()
            return value
        if kind == _END:
            raise _Unreadable(_("it ends too early"))
        raise _Unreadable(_out_of_place(kind, token))


def _out_of_place(kind: str, token: object) -> str:
    """Why a token cannot stand where it is, in a student's words: a number after a whole value
    ("1.2.3" reads as 1.2 then .3; "2 3") is a second number, a sign or bracket is out of place."""
    if kind in (_NUM, _CONST):
        return _("it holds two numbers (a second decimal point, or a space inside a number); "
                 "write one number per box")
    return _('the "%(token)s" is out of place') % {"token": token}


def _found(value: object, unit: str = "entries") -> str:
    """What the student handed in, in JSON words, for messages."""
    if value is None:
        return _("nothing (null)")
    if isinstance(value, bool):
        return "true" if value else "false"  # JSON's words, in every language
    if isinstance(value, numbers.Real):
        shown = repr(float(value)) if isinstance(value, (float, np.floating)) else str(value)
        return _("a single number (%(number)s)") % {"number": _show(shown)}
    if isinstance(value, str):
        return _('the text "%(text)s"') % {"text": _show(value)}
    if isinstance(value, (list, tuple)):
        return _("a list of %(count)s") % {"count": _count(len(value), unit)}
    if isinstance(value, dict):
        return _("an object ({…})")
    return _("a value of type %(type)s") % {"type": type(value).__name__}


# "3 rows": one message per unit, with the count's plural forms of each language.
_COUNTS: dict[str, tuple[str, str]] = {
    "entries": Np_("%(n)s entry", "%(n)s entries"),
    "rows": Np_("%(n)s row", "%(n)s rows"),
    "matrices": Np_("%(n)s matrix", "%(n)s matrices"),
    "blocks": Np_("%(n)s block", "%(n)s blocks"),
    "numbers": Np_("%(n)s number", "%(n)s numbers"),
    "lists": Np_("%(n)s list", "%(n)s lists"),
}


def _count(n: int, unit: str) -> str:
    singular, plural = _COUNTS[unit]
    return ngettext(singular, plural, n) % {"n": n}


# Texts already read, and their values: a class writes the same few texts ("0.5", "-inf", "1/3")
# thousands of times, and reading one is a tokenizer and a parser in Python. Only readable ones.
_TEXT_VALUES: dict[str, float] = {}
_TEXT_VALUES_MAX = 100_000


def parse_entry(x: object) -> float:
    """Read one entry: an int or float (not a bool) or a string holding an exact form.

    Returns a float (±inf allowed). Raises :class:`AnswerFormatError` for NaN, for text that
    is not a number and for anything else (null, true, a list, an object).
    """
    if type(x) is str:  # the texts of a class are few: most were read before
        value = _TEXT_VALUES.get(x)
        if value is not None:
            return value
    if isinstance(x, (bool, np.bool_)):
        raise AnswerFormatError(_("expected a number, found %(found)s") % {"found": _found(bool(x))})
    if isinstance(x, numbers.Real):
        try:
            value = float(x)
        except OverflowError:
            raise AnswerFormatError(_("the number %(number)s is too large") % {"number": _show(str(x))}) from None
        if math.isnan(value):
            raise AnswerFormatError(_('found NaN ("not a number"); write the value you computed'))
        return value
    if isinstance(x, str):
        text = x.strip()
        if not text:
            raise AnswerFormatError(_('cannot read "" as a number (the text is empty)'))
        if len(text) > MAX_TEXT_LENGTH:
            raise AnswerFormatError(
                _('cannot read "%(text)s" as a number (it is longer than %(limit)s characters)')
                % {"text": _show(text), "limit": MAX_TEXT_LENGTH}
            )
        value = _TEXT_VALUES.get(text)
        if value is not None:
            return value
        try:
            value = _Parser(_tokenize(normalize_width(text).translate(_SYNONYMS))).parse()
        except _Unreadable as why:
            raise AnswerFormatError(
                _('cannot read "%(text)s" as a number (%(why)s)') % {"text": _show(text), "why": why}
            ) from None
        if len(_TEXT_VALUES) < _TEXT_VALUES_MAX:
            _TEXT_VALUES[text] = _TEXT_VALUES[x] = value
        return value
    if isinstance(x, (list, tuple)):
        raise AnswerFormatError(_("expected a single number, found %(found)s") % {"found": _found(x)})
    raise AnswerFormatError(_("expected a number, found %(found)s") % {"found": _found(x)})


# ----------------------------------------------------------------------------- a whole part

# The children of a level, named by how many dimensions remain below them.
_UNITS = {0: "entries", 1: "rows", 2: "matrices", 3: "blocks"}
def describe_shape(shape: tuple[int, ...]) -> str:
    """The expected shape in words: ``a 3×3 matrix (a list of 3 rows of 3 numbers)``."""
    if len(shape) == 0:
        return _("a single number")
    if len(shape) == 1:
        return ngettext("a list of %(n)s number", "a list of %(n)s numbers", shape[0]) % {"n": shape[0]}
    words = {
        "dims": "×".join(str(n) for n in shape), "rows": _count(shape[-2], "rows"),
        "numbers": _count(shape[-1], "numbers"),
    }
    if len(shape) == 2:
        return _("a %(dims)s matrix (a list of %(rows)s of %(numbers)s)") % words
    if len(shape) == 3:
        return _("a %(dims)s array (a list of %(matrices)s, each %(rows)s of %(numbers)s)") % {
            **words, "matrices": _count(shape[0], "matrices")}
    return _("a %(dims)s array (a list of %(lists)s of %(matrices)s, each %(rows)s of %(numbers)s)") % {
        **words, "lists": _count(shape[0], "lists"), "matrices": _count(shape[1], "matrices")}


def _check_shape(shape: object) -> tuple[int, ...]:
    """The key's shape, not the student's: a bad one is a programming or key-file error."""
    if not isinstance(shape, (tuple, list)) or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in shape
    ):
        raise ValueError(f"shape must be a tuple of positive ints, got {shape!r}")
    shape = tuple(int(n) for n in shape)
    if len(shape) > MAX_DEPTH:
        raise ValueError(f"shape {shape} has more than {MAX_DEPTH} dimensions")
    if math.prod(shape) > MAX_ENTRIES:
        raise ValueError(f"shape {shape} has more than {MAX_ENTRIES} entries")
    return shape


def _as_list(value: object) -> object:
    return value.tolist() if isinstance(value, np.ndarray) else value


def parse_answer(value: object, shape: tuple[int, ...]) -> np.ndarray:
    """Read a part's answer into a float64 array of ``shape``.

    ``value`` is a number or string for shape ``()`` and nested lists otherwise (tuples and
    NumPy arrays are accepted too); ``None`` stands for a missing part. The shape is strict:
    ``[x]`` is read for shape ``(1,)`` but not for ``()``, and a bare number is not read as a
    list. Errors name the expected shape and what was found, e.g. ``expected a 3×3 matrix (a
    list of 3 rows of 3 numbers), found a list of 2 rows``, ``row 2 has 2 entries, expected 3;
    …`` or ``row 1, column 2: cannot read "x" as a number (unknown name "x")``.
    """
    shape = _check_shape(shape)
    value = _as_list(value)
    if shape == ():
        if value is None or isinstance(value, (list, tuple, dict)):
            raise AnswerFormatError(_("expected %(expected)s, found %(found)s") % {
                "expected": describe_shape(shape), "found": _found(value)})
        return np.asarray(parse_entry(value), dtype=np.float64)

    ndim = len(shape)
    top_unit = _UNITS[ndim - 1]
    if not isinstance(value, (list, tuple)):
        raise AnswerFormatError(_("expected %(expected)s, found %(found)s") % {
            "expected": describe_shape(shape), "found": _found(value, top_unit)})
    if len(value) != shape[0]:
        found = _("a list of %(count)s") % {"count": _count(len(value), top_unit)}
        raise AnswerFormatError(_("expected %(expected)s, found %(found)s") % {
            "expected": describe_shape(shape), "found": found})

    flat: list[float] = []

    def walk(item: object, path: list[int]) -> None:
        # Only the expected shape is walked, so an oversized answer costs no more than a right one.
        level = len(path)
        item = _as_list(item)
        n = shape[level]
        unit = _UNITS[ndim - level - 1]
        if level > 0:
            if not isinstance(item, (list, tuple)):
                raise AnswerFormatError(
                    _("%(where)s is %(found)s, expected a list of %(count)s; the answer should be %(expected)s")
                    % {"where": entry_place(path, ndim), "found": _found(item, unit),
                       "count": _count(n, "numbers" if unit == "entries" else unit),
                       "expected": describe_shape(shape)}
                )
            if len(item) != n:
                raise AnswerFormatError(
                    _("%(where)s has %(count)s, expected %(n)s; the answer should be %(expected)s")
                    % {"where": entry_place(path, ndim), "count": _count(len(item), unit), "n": n,
                       "expected": describe_shape(shape)}
                )
        assert isinstance(item, (list, tuple))
        if level < ndim - 1:
            for i, child in enumerate(item, start=1):
                walk(child, [*path, i])
            return
        for i, child in enumerate(item, start=1):  # the entries of the last level, read in this loop
            try:
                flat.append(parse_entry(child))
            except AnswerFormatError as err:
                raise AnswerFormatError(_("%(where)s: %(error)s") % {
                    "where": entry_place([*path, i], ndim), "error": err}) from None

    walk(value, [])
    return np.asarray(flat, dtype=np.float64).reshape(shape)


# ----------------------------------------------------------------------------- a shape

# What may stand between the sizes of a shape: 2×4, 2x4, 2 X 4, 2*4, 2,4, [2, 4], (2, 4).
_SHAPE_SEPARATORS = frozenset("×xX*,")
_SHAPE_BRACKETS = {"[": "]", "(": ")"}
_SHAPE_SPACES = frozenset(" \t\u00a0\u3000")  # spaces allowed between sizes (the same in parse.js)


def parse_shape_text(text: str, length: int) -> list[int]:
    """Read a shape written as one text: ``2×4``, ``2 x 4``, ``[2, 4]``, ``(2, 4)`` → [2, 4].

    Sizes are whole numbers ≥ 1, ``length`` of them (2 for rows × columns). Read character by
    character, no regular expression; the answer form's ``parseShape`` (parse.js) mirrors it
    on the shared table ``tests/entry_cases.json`` (``shape_cases``).
    """
    raw = str(text).translate(_FULL_WIDTH)  # ［２，４］ typed on a Chinese keyboard reads as [2, 4]
    body = raw.strip()
    if not body:
        raise AnswerFormatError(_('cannot read "" as a shape (the text is empty)'))
    if len(body) > MAX_TEXT_LENGTH:
        raise AnswerFormatError(_('cannot read "%(text)s" as a shape (it is longer than %(limit)s characters)')
                                % {"text": _show(body), "limit": MAX_TEXT_LENGTH})
    if body[:1] in _SHAPE_BRACKETS:
        if not body.endswith(_SHAPE_BRACKETS[body[0]]):
            raise AnswerFormatError(_('cannot read "%(text)s" as a shape (a bracket is not closed)')
                                    % {"text": _show(body)})
        body = body[1:-1]
    sizes: list[str] = [""]
    shown = _show(raw.strip())
    for ch in body:
        if ch in _SHAPE_SEPARATORS:
            sizes.append("")
        elif "0" <= ch <= "9":
            sizes[-1] += ch
        elif ch not in _SHAPE_SPACES:
            raise AnswerFormatError(_('cannot read "%(text)s" as a shape (write rows × columns, such as 2×4 or '
                                      '[2, 4]; "%(char)s" is not a size or a separator)') % {"text": shown, "char": ch})
    if any(not size for size in sizes):
        raise AnswerFormatError(_('cannot read "%(text)s" as a shape (a size is missing; write rows × columns, '
                                  'such as 2×4 or [2, 4])') % {"text": shown})
    if len(sizes) != length:
        # Two messages, not ngettext: parse.js shows the same ones from the form's catalog.
        message = (_('cannot read "%(text)s" as a shape (it has 1 size, expected %(length)s)') if len(sizes) == 1
                   else _('cannot read "%(text)s" as a shape (it has %(count)s sizes, expected %(length)s)'))
        raise AnswerFormatError(message % {"text": shown, "count": len(sizes), "length": length})
    values = [int(size) for size in sizes]
    if any(v < 1 for v in values):
        raise AnswerFormatError(_('cannot read "%(text)s" as a shape (every size is at least 1)') % {"text": shown})
    return values
