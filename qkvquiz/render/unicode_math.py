"""A small part of LaTeX math written as plain Unicode text: "s = q·k/√dₖ", "Z = AV", "X̄".

Where a sentence of the worksheet has to be read without math, in a student's feedback file
(plain Markdown, read in an editor as much as in a viewer), its formulas are written as the
families write their own short sentences (:mod:`qkvquiz.render.prose_math` reads those back
into math on a page): letters and Greek letters as they are, sub- and superscripts in Unicode's
small letters where it has them (``d_k`` → dₖ, ``K^\\top`` → Kᵀ, ``A^{-1}`` → A⁻¹), else after
``_`` or ``^`` (``d_{\\text{model}}`` → d_model, ``N_{QK^\\top}`` → N_(QKᵀ)), and ``e^{z_j}`` as
exp(zⱼ); ``\\frac{a}{b}`` as a/b with brackets round a sum; ``\\sqrt{x}`` as √x;
``\\operatorname``/``\\text`` as their words; one-letter accents as combining marks (``\\bar X`` →
X̄). The commands are those of :mod:`qkvquiz.render.textmath` (the key's worked steps); anything
else raises :class:`~qkvquiz.render.textmath.Unsupported`.
"""

from __future__ import annotations

import html
import re

from .textmath import ACCENTS, BINARY, DOUBLE_STRUCK, GREEK, RELATIONS, SYMBOLS, TOKEN, Unsupported


#: Unicode's subscript and superscript forms (the letters it has).
SUBSCRIPTS = dict(zip("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
SUPERSCRIPTS = {
    **dict(zip("0123456789+-=()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾")),
    **dict(zip("abcdefghijklmnoprstuvwxyz", "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ")),
    "A": "ᴬ", "B": "ᴮ", "D": "ᴰ", "E": "ᴱ", "G": "ᴳ", "H": "ᴴ", "I": "ᴵ", "J": "ᴶ", "K": "ᴷ", "L": "ᴸ",
    "M": "ᴹ", "N": "ᴺ", "O": "ᴼ", "P": "ᴾ", "R": "ᴿ", "T": "ᵀ", "U": "ᵁ", "V": "ⱽ", "W": "ᵂ",
    "\u22a4": "ᵀ",  # ^\top: the transpose
}
#: Letters whose capital subscript is written small, as the families' sentences write it: the
#: delta rule's B_K and B_V are Bₖ and Bᵥ (Unicode has no capital subscripts).
CAPITAL_SUBSCRIPTS = frozenset("B")
#: The plain text of binary operators and relations (the key's HTML tables give entities and
#: spans for a few; ``\cdot`` is the middle dot the families' sentences use, q·k).
_OPERATORS = {**{k: html.unescape(re.sub(r"<[^>]+>", "", v)) for k, v in {**BINARY, **RELATIONS}.items()},
              "cdot": "·"}
_SPACES = {",": " ", ":": " ", ";": " ", " ": " ", "quad": "  ", "qquad": "  ", "!": "", "\\": " "}
_UPRIGHT = frozenset({"text", "textrm", "mathrm", "operatorname"})
_FUNCTIONS = frozenset({"exp", "log", "ln", "max", "min", "tanh", "sin", "cos", "det", "sup", "inf"})
_BIG = {"sum": "∑", "prod": "∏"}
_FRACS = frozenset({"frac", "dfrac", "tfrac"})


def _scripted(text: str, table: dict[str, str], mark: str) -> str:
    """``text`` in small letters where each of its characters has one, else after ``mark``."""
    tight = text.replace(" ", "").replace("−", "-")
    if tight and all(c in table for c in tight):
        return "".join(table[c] for c in tight)
    return mark + (text if re.fullmatch(r"[A-Za-z0-9]+", text) or _bracketed(text) else f"({text})")


def _bracketed(text: str) -> bool:
    return text.startswith("(") and text.endswith(")") and text.count("(") == 1


def _compound(text: str) -> bool:
    """Whether ``text`` needs brackets as a numerator or a radicand: a sum or several terms."""
    depth, prev = 0, ""
    for c in text:
        depth += c in "([{"
        depth -= c in ")]}"
        if depth == 0 and (c == " " or (c in "+−" and prev)):
            return True
        prev = c
    return False


_COMMAND = re.compile(r"\\[A-Za-z]+")


def _delimiter(tok: str) -> str:
    return "" if tok == "." else {"\\{": "{", "\\}": "}", "\\|": "‖", "\\Vert": "‖"}.get(tok, tok)


class _Parser:
    def __init__(self, latex: str) -> None:
        self.tokens = TOKEN.findall(latex)
        self.i = 0

    def skip_space(self) -> bool:
        """Skip white space; True where it parts two atoms as written ("Z V", not the space
        that ends a command's name, "\\nabla S")."""
        start = self.i
        while self.i < len(self.tokens) and self.tokens[self.i].isspace():
            self.i += 1
        return self.i > start and not (start and _COMMAND.fullmatch(self.tokens[start - 1]))

    def peek(self) -> str | None:
        """The next token that is not white space (the space is left for :meth:`sequence`)."""
        i = self.i
        while i < len(self.tokens) and self.tokens[i].isspace():
            i += 1
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise Unsupported("unexpected end of expression")
        self.skip_space()
        self.i += 1
        return tok

    def raw_group(self) -> str:
        if self.take() != "{":
            raise Unsupported("expected {")
        depth, out = 1, []
        while self.i < len(self.tokens):
            tok = self.tokens[self.i]
            self.i += 1
            depth += tok == "{"
            depth -= tok == "}"
            if depth == 0:
                return "".join(out)
            out.append(_SPACES.get(tok[1:], tok[1:]) if tok.startswith("\\") else tok)
        raise Unsupported("unclosed {")

    def sequence(self, closer: str | None = None) -> str:
        """Atoms up to ``closer`` or the end, a space kept between two where it was written
        and after a fraction or a sum (1/d ∑ⱼ Hᵢⱼ)."""
        out: list[str] = []
        last = "start"
        while True:
            spaced = self.skip_space()
            tok = self.peek()
            if tok is None:
                if closer is not None:
                    raise Unsupported(f"missing {closer}")
                return "".join(out).strip()
            if tok == closer:
                return "".join(out).strip()
            if tok in ("}", "\\right"):
                raise Unsupported(f"unbalanced {tok}")
            piece, kind = self.atom(first=not out)
            piece = self.scripts(piece)
            if (out and kind in ("ord", "open", "frac", "big", "func") and (spaced or last in ("frac", "big"))
                    and not out[-1].endswith((" ", "(", "[", "{"))):
                out.append(" ")
            out.append(piece)
            last = kind

    def group(self) -> str:
        """One argument: a ``{…}`` group or a single token."""
        if self.peek() == "{":
            self.take()
            body = self.sequence("}")
            self.take()
            return body
        return self.atom(first=False)[0]

    def scripts(self, base: str) -> str:
        while self.peek() in ("_", "^"):
            kind = self.take()
            body = self.group()
            if kind == "_":
                letter = base.rstrip("".join(ACCENTS.values()))[-1:]
                if letter in CAPITAL_SUBSCRIPTS and body.isalpha() and body.isupper():
                    body = body.lower()
                base += _scripted(body, SUBSCRIPTS, "_")
            elif base == "e" and _scripted(body, SUPERSCRIPTS, "^").startswith("^"):
                base = f"exp({body})"  # e^(S̃ᵢⱼ) reads better as exp(S̃ᵢⱼ), in a file and on a page
            else:
                base += _scripted(body, SUPERSCRIPTS, "^")
        return base

    def atom(self, *, first: bool) -> tuple[str, str]:
        """The next atom as text and its kind: ord, op (spaced already), open, close, frac,
        big (a sum), func (a function's name) or space."""
        tok = self.take()
        if tok == "{":
            body = self.sequence("}")
            self.take()
            return body, "ord"
        if tok in ("_", "^"):
            raise Unsupported(f"a script without a base: {tok}")
        if not tok.startswith("\\"):
            if tok in "+-=<>":
                op = _OPERATORS.get(tok, tok)
                return (op, "ord") if first else (f" {op} ", "op")
            if tok in "([":
                return tok, "open"
            if tok in ")]":
                return tok, "close"
            return {"*": "∗", "'": "′"}.get(tok, tok), "ord"
        name = tok[1:]
        if name in _SPACES:
            return _SPACES[name], "space"
        if name in _FRACS:
            top, bottom = self.group(), self.group()
            top = f"({top})" if _compound(top) else top
            bottom = f"({bottom})" if _compound(bottom) or "/" in bottom else bottom
            return f"{top}/{bottom}", "frac"
        if name == "sqrt":
            body = self.group()
            return "√" + (f"({body})" if _compound(body) or "/" in body else body), "ord"
        if name in _UPRIGHT:
            return self.raw_group(), "func"
        if name == "mathbb":
            letter = self.raw_group()
            if letter not in DOUBLE_STRUCK:
                raise Unsupported(f"\\mathbb{{{letter}}}")
            return DOUBLE_STRUCK[letter], "ord"
        if name in ACCENTS:
            return self.group() + ACCENTS[name], "ord"
        if name == "left":
            opening = _delimiter(self.take())
            body = self.sequence("\\right")
            self.take()
            return opening + body + _delimiter(self.take()), "ord"
        if name in _BIG:
            return _BIG[name], "big"
        if name in _FUNCTIONS:
            return name, "func"
        if name in GREEK:
            return GREEK[name], "ord"
        if name == "cdot":  # q·k, as the families' sentences write it
            return "·", "op"
        if name in _OPERATORS:
            op = _OPERATORS[name]
            return (op, "ord") if first else (f" {op} ", "op")
        if name in SYMBOLS:
            return SYMBOLS[name], "ord"
        raise Unsupported(f"command {tok}")


def unicode_math(latex: str) -> str:
    """``latex`` (one formula, without its ``$``) as plain Unicode text, or :class:`Unsupported`."""
    if "\\begin" in latex or "&" in latex or "\\\\" in latex:
        raise Unsupported("an environment or an alignment")
    parser = _Parser(latex)
    text = parser.sequence()
    # A sign after an opening bracket, a comma or a relation is no binary operator: "(−1",
    # ", −1", "= −x".
    text = re.sub(r"([(\[{]) *([−+]) ", r"\1\2", text)
    text = re.sub(r"([,=≤≥<>→≈]) +([−+]) ", r"\1 \2", text)
    return re.sub(r" {2,}", " ", text)


#: Math in a sentence of Markdown: ``$…$`` (a worksheet's sentences have no display math).
_INLINE_MATH = re.compile(r"(?<![\\$])\$([^$\n]+?)\$(?!\$)")


def unicode_sentence(markdown: str) -> str:
    """A Markdown sentence with ``$…$`` math (a worksheet's) with each formula as plain Unicode
    text (:func:`unicode_math`); :class:`Unsupported` where one cannot be."""
    return _INLINE_MATH.sub(lambda m: unicode_math(m.group(1)), markdown)
