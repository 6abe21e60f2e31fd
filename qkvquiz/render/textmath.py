"""A small part of LaTeX math set as HTML text: the worked steps of an answer key.

An answer key shows hundreds of expressions per student, each with the student's own
numbers (``S_{12} = \\frac{(1)(2) + (0)(-1)}{\\sqrt{2}} = 1.414``), so none of them can be
shared between students. As SVG pictures they cost a laid-out formula each in ziamath and
a parsed glyph outline per character in WeasyPrint, about ten times the cost of the same
expression as text; as text they are also searchable and copyable as they stand.

What is set as text: letters (italic), numbers, operators and relations with their
spacing, sub- and superscripts, ``\\frac`` (stacked, with a rule), ``\\sqrt`` (a radical
sign with a bar over the radicand), ``\\operatorname``/``\\text``/``\\mathrm``, Greek
letters and the symbols the templates use (∇, ∂, ⊤, ⊙, ∞ …), one-letter accents
(``\\bar X``, ``\\hat H``), LaTeX's spaces, ``\\sum`` with its limits at its side (inline
math only), and ``\\left``/``\\right`` around content that holds no fraction. Anything else
raises :class:`Unsupported`, and the caller draws the expression as a picture instead.
"""

from __future__ import annotations

import html
import re

from .cjk_text import chinese_text_html
from .fonts import has_cjk

_MINUS = "\u2212"

#: Commands that stand for one upright symbol.
SYMBOLS: dict[str, str] = {
    "nabla": "\u2207", "partial": "\u2202", "infty": "\u221e", "top": "\u22a4",
    "dots": "\u2026", "ldots": "\u2026", "cdots": "\u22ef", "prime": "\u2032",
    "Gamma": "\u0393", "Delta": "\u0394", "Theta": "\u0398", "Lambda": "\u039b",
    "Xi": "\u039e", "Pi": "\u03a0", "Sigma": "\u03a3", "Phi": "\u03a6", "Psi": "\u03a8",
    "Omega": "\u03a9", "{": "{", "}": "}", "|": "\u2016", "%": "%", "#": "#",
}
#: Symbols the serif faces lack, set from the sans face (``.tm .sy`` in the stylesheet).
SANS_SYMBOLS: dict[str, str] = {"cdots": "\u22ef", "vdots": "\u22ee", "ddots": "\u22f1"}
#: Lower-case Greek letters, set in italic like other variables.
GREEK: dict[str, str] = {
    "alpha": "\u03b1", "beta": "\u03b2", "gamma": "\u03b3", "delta": "\u03b4",
    "epsilon": "\u03f5", "varepsilon": "\u03b5", "zeta": "\u03b6", "eta": "\u03b7",
    "theta": "\u03b8", "iota": "\u03b9", "kappa": "\u03ba", "lambda": "\u03bb",
    "mu": "\u03bc", "nu": "\u03bd", "xi": "\u03be", "pi": "\u03c0", "rho": "\u03c1",
    "sigma": "\u03c3", "tau": "\u03c4", "phi": "\u03d5", "varphi": "\u03c6",
    "chi": "\u03c7", "psi": "\u03c8", "omega": "\u03c9",
}
#: Binary operators (medium space around them).
BINARY: dict[str, str] = {
    "+": "+", "-": _MINUS, "cdot": "\u22c5", "times": "\u00d7", "odot": "\u2299",
    "pm": "\u00b1", "mp": "\u2213", "*": "\u2217",
}
#: Relations (a wider space around them).
RELATIONS: dict[str, str] = {
    "=": "=", "<": "&lt;", ">": "&gt;", "le": "\u2264", "leq": "\u2264", "ge": "\u2265",
    "geq": "\u2265", "ne": "\u2260", "neq": "\u2260", "approx": "\u2248", "to": "\u2192",
    "gg": '<span class="sy">\u226b</span>', "ll": '<span class="sy">\u226a</span>', "in": "\u2208", "mid": "|", "equiv": "\u2261",
    "sim": "\u223c", "rightarrow": "\u2192", "leftarrow": "\u2190",
}
#: Function names set upright, as \operatorname would.
FUNCTIONS = frozenset({"exp", "log", "ln", "max", "min", "tanh", "sin", "cos", "det", "sup", "inf"})
#: LaTeX's math spaces.
SPACES: dict[str, str] = {
    ",": "\u2009", ":": "\u2005", ";": "\u2005", " ": " ", "quad": "\u2003",
    "qquad": "\u2003\u2003", "!": "",
}
#: One-letter accents as combining marks.
ACCENTS: dict[str, str] = {"bar": "\u0304", "hat": "\u0302", "tilde": "\u0303", "vec": "\u20d7", "dot": "\u0307"}
#: Space on each side of a binary operator (TeX's medium space is 4/18 em): THIN SPACE,
#: 0.2 em in DejaVu Serif.
BIN_SPACE = "\u2009"
#: Space on each side of a relation (TeX's thick space is 5/18 em): FOUR-PER-EM SPACE,
#: 0.25 em.
REL_SPACE = "\u2005"
_FRAC = frozenset({"frac", "dfrac", "tfrac"})
_UPRIGHT_TEXT = frozenset({"text", "textrm", "mathrm", "operatorname"})

#: LaTeX as tokens: a command, an escaped character, a number, a letter, white space, any other character.
TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\.\d+|[A-Za-z]|\s+|.", re.DOTALL)


class Unsupported(ValueError):
    """The expression uses LaTeX that this module does not set as text."""


class _Parser:
    def __init__(self, latex: str, display: bool) -> None:
        self.tokens = [t for t in TOKEN.findall(latex)]
        self.i = 0
        self.display = display

    def peek(self) -> str | None:
        while self.i < len(self.tokens) and self.tokens[self.i].isspace():
            self.i += 1
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise Unsupported("unexpected end of expression")
        self.i += 1
        return tok

    def raw_group(self) -> str:
        """The text of a ``{…}`` argument as written (for \\text and \\operatorname)."""
        if self.take() != "{":
            raise Unsupported("expected {")
        depth, out = 1, []
        while self.i < len(self.tokens):
            tok = self.tokens[self.i]
            self.i += 1
            if tok == "{":
                depth += 1
            elif tok == "}":
                depth -= 1
                if depth == 0:
                    return "".join(out)
            if tok.startswith("\\") and tok[1:] not in SPACES and tok not in ("\\{", "\\}"):
                raise Unsupported(f"command {tok} inside text")
            out.append(SPACES.get(tok[1:], tok[1:]) if tok.startswith("\\") else tok)
        raise Unsupported("unclosed {")

    def sequence(self, closer: str | None = None, *, previous: str = "start") -> str:
        """Atoms up to ``closer`` (``}`` or ``\\right``) or the end; spacing by atom kind.

        ``previous`` is the kind of what stands before: ``"start"`` (nothing), or
        ``"ord"`` where the expression goes on from a matrix (``… ] + 0.5 [ … ]``).
        """
        out: list[str] = []
        while True:
            tok = self.peek()
            if tok is None:
                if closer is not None:
                    raise Unsupported(f"missing {closer}")
                break
            if tok == closer:
                break
            if tok in ("}", "\\right") and tok != closer:
                raise Unsupported(f"unbalanced {tok}")
            kind, piece = self.atom()
            # Spacing is made of Unicode spaces of fixed width, not of padded elements:
            # every element costs the PDF renderer a box, a style and a text run of its
            # own, and the key shows hundreds of operators per student.
            if kind == "bin" and previous in ("start", "open", "op"):
                kind = "ord"  # a sign: −3, (−1, = −2 (no space: it hugs its operand)
            elif kind == "bin":
                piece = f"{BIN_SPACE}{piece}{BIN_SPACE}"
            elif kind == "rel":
                # As in TeX, a relation that opens the expression has no space before it.
                piece = f"{'' if previous == 'start' else REL_SPACE}{piece}{REL_SPACE}"
            out.append(piece)
            if kind != "space":
                previous = {"bin": "op", "rel": "op", "punct": "op"}.get(kind, kind)
        return "".join(out)

    def argument(self, *, script: bool = False) -> str:
        """One argument: a ``{…}`` group or a single token; a script may be a lone operator
        (``S^+``, ``S^-``: the state after and before an update)."""
        if self.peek() == "{":
            self.take()
            inner = self.sequence("}")
            self.take()
            return inner
        kind, piece = self.base()
        if kind in ("bin", "rel") and not script:
            raise Unsupported("an operator as an argument")
        return piece.strip()

    def atom(self) -> tuple[str, str]:
        kind, piece = self.base()
        sub = sup = None
        while self.peek() in ("_", "^", "'"):
            tok = self.take()
            if tok == "'":
                piece += "\u2032"
                continue
            arg = self.argument(script=True)
            if tok == "_":
                if sub is not None:
                    raise Unsupported("double subscript")
                sub = arg
            else:
                if sup is not None:
                    raise Unsupported("double superscript")
                sup = arg
        if sub is None and sup is None:
            return ("op" if kind == "op-big" else kind), piece
        if kind in ("bin", "rel"):
            raise Unsupported("a script on an operator")
        scripts = ""
        if sub is not None and sup is not None:
            scripts = f'<span class="ss"><sup>{sup}</sup><sub>{sub}</sub></span>'
        elif sub is not None:
            scripts = f"<sub>{sub}</sub>"
        else:
            scripts = f"<sup>{sup}</sup>"
        return ("ord" if kind != "op-big" else "op"), piece + scripts

    def base(self) -> tuple[str, str]:
        tok = self.take()
        if tok == "{":
            inner = self.sequence("}")
            self.take()
            return "ord", inner
        if tok[0].isdigit() or tok[0] == ".":
            return "ord", tok
        if tok.isalpha() and len(tok) == 1:
            return "ord", f"<i>{tok}</i>"
        if tok in BINARY:
            return "bin", BINARY[tok]
        if tok in RELATIONS:
            return "rel", RELATIONS[tok]
        if tok in ("(", "["):
            return "open", tok
        if tok in (")", "]", "|", "/", "!"):
            return "ord", html.escape(tok)
        if tok in (",", ";", ":"):
            return "punct", tok
        if tok == ".":
            return "ord", "."
        if not tok.startswith("\\"):
            raise Unsupported(f"character {tok!r}")
        name = tok[1:]
        if name in SPACES:
            return "space", SPACES[name]
        if name in SANS_SYMBOLS:
            # Not in the serif faces: from the sans face, which has it.
            return "ord", f'<span class="sy">{SANS_SYMBOLS[name]}</span>'
        if name in SYMBOLS:
            return "ord", html.escape(SYMBOLS[name])
        if name in GREEK:
            return "ord", f"<i>{GREEK[name]}</i>"
        if name in BINARY:
            return "bin", BINARY[name]
        if name in RELATIONS:
            return "rel", RELATIONS[name]
        if name in FUNCTIONS:
            return "ord", f'<span class="fn">{name}</span>'
        if name == "mathbb":
            letter = self.raw_group()
            if letter not in DOUBLE_STRUCK:
                raise Unsupported(f"\\mathbb{{{letter}}}")
            return "ord", DOUBLE_STRUCK[letter]
        if name in _UPRIGHT_TEXT:
            text = self.raw_group()
            cls = "fn" if name == "operatorname" else "tx"
            # Words in a formula ("（若 …），否则为"): Chinese set as in prose.
            words = chinese_text_html(text) if has_cjk(text) else html.escape(text)
            return "ord", f'<span class="{cls}">{words}</span>'
        if name in _FRAC:
            num, den = self.argument(), self.argument()
            # A radical in the denominator needs room under the rule for its bar ("rd").
            rd = " rd" if den.startswith('\u221a<span class="rad">') else ""
            return "ord", f'<span class="tfrac{rd}"><span class="tnum">{num}</span><span class="tden">{den}</span></span>'
        if name == "sqrt":
            if self.peek() == "[":
                raise Unsupported("an n-th root")
            return "ord", f'\u221a<span class="rad">{self.argument()}</span>'
        if name in ACCENTS:
            arg = self.argument()
            letter = re.fullmatch(r"(<i>)?(\w)(</i>)?", arg)
            if letter is None:
                raise Unsupported(f"\\{name} over more than one letter")
            if name == "bar" and not letter.group(2).isascii():
                # The serif faces place no combining macron over a Greek letter (β̄ printed
                # as β and a loose bar): a short bar is drawn over it, as long as the macron
                # over a Latin capital, so that every bar of a page is one kind.
                return "ord", f'<span class="ovl"><span class="mac"></span>{arg}</span>'
            return "ord", f"{letter.group(1) or ''}{letter.group(2)}{ACCENTS[name]}{letter.group(3) or ''}"
        if name == "sum" and not self.display:
            return "op-big", '<span class="big">\u2211</span>'
        if name == "left":
            opener = self.take()
            inner = self.sequence("\\right")
            self.take()
            closer = self.take()
            if "tfrac" in inner or "big" in inner:
                # Around a fraction: delimiters two lines tall, built of their Unicode pieces.
                return "ord", _tall_delimiter(opener) + inner + _tall_delimiter(closer)
            return "ord", _delimiter(opener) + inner + _delimiter(closer)
        raise Unsupported(f"command {tok}")


#: Delimiters two lines tall, as their upper and lower pieces (U+239B–U+23A6), which the
#: serif face draws to join when set one on the other at the face's full line height.
_TALL_PIECES = {"(": ("\u239b", "\u239d"), ")": ("\u239e", "\u23a0"),
                "[": ("\u23a1", "\u23a3"), "]": ("\u23a4", "\u23a6")}


def _tall_delimiter(tok: str) -> str:
    if tok == ".":
        return ""
    if tok not in _TALL_PIECES:
        raise Unsupported(f"a tall delimiter {tok}")
    top, bottom = _TALL_PIECES[tok]
    return f'<span class="tdl"><span>{top}</span><span>{bottom}</span></span>'


#: ``\mathbb`` letters the bundled texts use, as Unicode's double-struck letters.
DOUBLE_STRUCK = {"R": "\u211d", "E": "\U0001d53c", "N": "\u2115", "Z": "\u2124", "C": "\u2102", "Q": "\u211a"}


def _delimiter(tok: str) -> str:
    if tok == ".":
        return ""
    if tok in ("(", ")", "[", "]", "|"):
        return tok
    if tok in ("\\{", "\\}"):
        return tok[1]
    if tok in ("\\|", "\\Vert"):
        return "\u2016"
    raise Unsupported(f"delimiter {tok}")


def text_math_html(latex: str, *, display: bool = False, continues: bool = False) -> str:
    """``latex`` as an HTML ``<span class="tm">``, or :class:`Unsupported`.

    ``continues``: the expression goes on from a term before it (a matrix set apart), so
    an operator that opens it is binary (``] + 0.5``), not a sign, and a relation is
    spaced on both sides.
    """
    if "\\begin" in latex or "&" in latex or "\\\\" in latex:
        raise Unsupported("an environment or an alignment")
    parser = _Parser(latex, display)
    body = parser.sequence(previous="ord" if continues else "start")
    if parser.peek() is not None:
        raise Unsupported(f"unbalanced {parser.peek()}")
    # As in TeX, a relation that ends the expression has no space after it ("$j \\le$
    # query"); letters next to each other share one italic run, and a script of letters
    # alone is italic itself (fewer elements: each costs the PDF renderer a box).
    body = _ITALIC_SCRIPT.sub(r'<\1 class="i">\2</\1>', body.removesuffix(REL_SPACE).replace("</i><i>", ""))
    return f'<span class="tm">{body}</span>'


_ITALIC_SCRIPT = re.compile(r"<(sub|sup)><i>([^<]*)</i></\1>")
