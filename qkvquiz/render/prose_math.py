"""A family's short sentences (step prompts, titles) with their notation set as inline math.

A prompt is printed in places without math: the labels of an LMS export, the headings of a
student's feedback file, the terminal. There it is written in Unicode ("Compute X̄", "the weights
A = softmax(S)", "Give the width dₖ of each head"), which reads right as plain text. On a page
(worksheet, key, answer form) the same letters must be italic like the formulas beside them, so
:func:`prose_math` turns each run of notation into ``$…$``: a lone letter, a Greek letter, a
letter with an accent or a Unicode sub- or superscript (X̄, Wᴼ, Qᵢ, √dₖ, βᵣGᵣₛ, QKᵀ) and the
formulas they make with ``=``, ``·``, ``/``, ``×`` and ``softmax(…)``.

English words of one letter are not notation: the article "a", and "A" opening a sentence
(a capital A followed by a lower-case word: "A query …"), the s of "key(s)" and the letters of
"i.e." and "e.g.". It is used on the families' own sentences, in the bundled catalogs (the tests
check every one of them), and on an item's title in its problem's heading ("Can Q and K be
swapped?"), which a spec also gives as plain text for LMS question names and feedback files.
"""

from __future__ import annotations

import re
from functools import lru_cache

_GREEK = {
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\varepsilon",
    "η": r"\eta", "θ": r"\theta", "λ": r"\lambda", "μ": r"\mu", "σ": r"\sigma", "τ": r"\tau",
    "ϕ": r"\phi", "φ": r"\varphi", "ω": r"\omega",
}
_ACCENTS = {"\u0304": r"\bar", "\u0303": r"\tilde", "\u0302": r"\hat"}
_SUB = dict(zip("ᵢⱼₖᵣₛₜₗₘₙₚᵥₓ₀₁₂₃₄₅₆₇₈₉", "ijkrstlmnpvx0123456789"))
_SUP = {"ᵀ": r"\top", "ᴼ": "O", "⁺": "+", "⁻": "-", "¹": "1", "²": "2", "ᴷ": "K", "ⱽ": "V"}
#: Letters whose one-letter subscript stands for a capital one in plain text (the delta rule's
#: B_K = diag(β)K and B_V = diag(β)V are written Bₖ and Bᵥ, Unicode having no capital subscripts).
_CAPITAL_SUBSCRIPTS = frozenset("B")
_OPERATORS = {"=": "=", "·": r"\cdot", "/": "/", "×": r"\times", "−": "-", "+": "+"}
#: Functions written by name, their argument in brackets: softmax(S), diag(β), exp(S̃ᵢⱼ).
FUNCTIONS = ("softmax", "diag", "exp")

_LETTER = "A-Za-z" + "".join(_GREEK)
_MARKS = "".join(_ACCENTS) + "".join(_SUB) + "".join(_SUP)
# One symbol: an optional root sign, a letter, its accent and its sub- and superscripts.
# (A comma between subscript digits parts two indices past 9, as an entry's name writes them: S₁₀,₃.)
# (A word after "_" is a subscript in words, as plain text writes one Unicode has no letters for:
# Z_cat, d_model.)
_SYMBOL = rf"√?[{_LETTER}](?:[{_MARKS}]|,(?=[₀-₉]))*(?:_[a-z]{{2,}}(?![A-Za-z0-9_]))?"
# A term: a number times symbols written side by side (3σ, βᵣGᵣₛ, QKᵀ), standing alone.
_TERM = rf"(?<![A-Za-z0-9_\\$'’])(?:\d+)?(?:{_SYMBOL})+(?![A-Za-z0-9$])"
_CALL = rf"(?:{'|'.join(FUNCTIONS)})\((?:{_TERM})\)"
_OPERAND = rf"(?:{_CALL}|{_TERM})"
_RUN = re.compile(
    rf"\[−?{_OPERAND}, −?{_OPERAND}\]"  # an interval: [−3σ, 3σ]
    rf"|−?{_OPERAND}(?:\s*[=·/×]\s*{_OPERAND})*"
)
#: The matrices of the families, for products written without a sign (AV, XW).
_MATRICES = frozenset("AKQSVWXZ")
_ARTICLE = re.compile(r"(?:^|(?<=[.:!?] ))A(?= [a-z])")


def _is_notation(run: str, start: int, text: str) -> bool:
    letters = re.sub(rf"[^{_LETTER}]", "", run)
    if "_" in run and not re.search(r"(?<![A-Za-z])[A-Za-z]_[a-z]", run):
        return False  # an identifier (sample_mean), not a letter with a word below it (Z_cat)
    if any(c in _MARKS or c in _GREEK or c in "√=·/×[(_" for c in run):
        return True
    if len(letters) == 1:
        end = start + len(run)
        plural = start >= 2 and text[start - 1:end + 1] == "(s)" and text[start - 2].isalpha()  # key(s)
        abbreviation = text[end:end + 2] in (".e", ".g") or text[max(start - 2, 0):start] in ("i.", "e.")  # i.e., e.g.
        return not (run == "a" or plural or abbreviation or _ARTICLE.match(text, start) is not None)
    # Two matrices side by side (AV, QK), not an acronym ("PDF", "UK").
    return len(letters) == 2 and all(c in _MATRICES for c in letters)


def _symbol_latex(symbol: str) -> str:
    root = symbol.startswith("√")
    body = symbol[1:] if root else symbol
    body, _, word = body.partition("_")
    letter, rest = body[0], body[1:]
    out = _GREEK.get(letter, letter)
    subs, sups = [], []
    if word:
        subs.append(rf"\text{{{word}}}")
    for mark in rest:
        if mark in _ACCENTS:
            out = f"{_ACCENTS[mark]} {out}" if len(out) == 1 else f"{_ACCENTS[mark]}{{{out}}}"
        elif mark in _SUB or mark == ",":
            subs.append(_SUB.get(mark, mark))
        else:
            sups.append(_SUP[mark])
    if letter in _CAPITAL_SUBSCRIPTS and subs in (["k"], ["v"]):
        subs = [subs[0].upper()]  # B_K, B_V: Unicode has no capital subscripts (plain text: Bₖ, Bᵥ)
    if subs:
        out += "_" + (subs[0] if len(subs) == 1 and len(subs[0]) == 1 else "{" + "".join(subs) + "}")
    if sups:
        joined = "".join(sups)
        out += "^" + (joined if len(sups) == 1 and len(joined) == 1 or joined == r"\top" else "{" + joined + "}")
    return rf"\sqrt{{{out}}}" if root else out


def _latex(run: str) -> str:
    out = []
    for token in re.finditer(rf"{'|'.join(FUNCTIONS)}|{_SYMBOL}|\d+|\s+|.", run):
        piece = token.group()
        if piece in FUNCTIONS:
            out.append(rf"\operatorname{{{piece}}}")
        elif piece.isspace():
            out.append(" ")
        elif piece in _OPERATORS:
            out.append(_OPERATORS[piece])
        elif piece[0].isdigit():
            out.append(piece)
        elif re.fullmatch(_SYMBOL, piece):
            latex = _symbol_latex(piece)
            # Two symbols side by side (Q K, \beta_r G_{rs}) need a space after a command.
            if out and re.search(r"\\[A-Za-z]+$", out[-1]) and latex[0].isalpha():
                out.append(" ")
            out.append(latex)
        else:
            out.append(piece)
    return "".join(out)


# Letters with an accent written as one character (Ā in "Compute Ā"): as letter and mark.
_PRECOMPOSED = str.maketrans({"Ā": "A\u0304", "Ō": "O\u0304", "Ū": "U\u0304", "Ḡ": "G\u0304"})


def split_accents(text: str) -> str:
    """``text`` with its letters written with an accent as one character (Ā) as letter and mark,
    the form :func:`notation_runs` reads."""
    return text.translate(_PRECOMPOSED)


def notation_runs(text: str) -> list[tuple[int, int, str]]:
    r"""Each run of notation in ``text`` (after :func:`split_accents`): where it starts and ends,
    and the LaTeX it is set in ("√dₖ" → ``\sqrt{d_k}``)."""
    return [(m.start(), m.end(), _latex(m.group())) for m in _RUN.finditer(text)
            if _is_notation(m.group(), m.start(), text)]


@lru_cache(maxsize=1024)
def prose_math(text: str) -> str:
    """``text`` with each run of notation written as inline math ($…$); the rest as it was."""
    if not text:
        return text
    if "$" in text:  # math already written stays as it is; only the prose between is looked at
        parts = re.split(r"(\$[^$]*\$)", text)
        return "".join(p if i % 2 else prose_math(p) for i, p in enumerate(parts))
    text = split_accents(text)
    pieces, at = [], 0
    for start, end, latex in notation_runs(text):
        pieces += [text[at:start], "$" + latex + "$"]
        at = end
    pieces.append(text[at:])
    return "".join(pieces)
