"""The longest lines of the worked solutions, written in Python: one call per matrix.

A worked solution writes every entry of a score matrix, every row of a softmax and every output
row out in full. As Jinja macros these lines cost a macro call, a loop and a filter call per
entry (40 % of rendering a class's keys); here each is one function call per matrix. The
macros of ``templates/families/_macros.md.j2`` (``score_rows``, ``softmax_rows``,
``output_rows``) call these, so a template, bundled or a user's, uses them as before; the text
is the same, sentence for sentence, in every language (the sentences are the catalog's).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..i18n import _
from .latex import bmatrix, num, nums

_SEP = ",\\ "  # between the numbers of a row written as a tuple


def score_rows(Q: Any, K: Any, scaled: Any, d_k: Any, d: int, mask: Any = None, name: str = "S",
               sup: str = "") -> str:
    """``S_ij = q_i·k_j / √d_k`` for every entry, each product written out, one list item each.

    ``scaled`` is True (divide by √d_k), False (the raw dot product) or a number the dot product
    is multiplied by; a masked entry (``mask[i][j] < 0.5``) reads ``-∞ (masked)``; ``name``
    labels the matrix and ``sup`` goes after the subscript (``S_{12}^{(1)}``).
    """
    by_root = scaled is True
    factor = None if (scaled is True or scaled is False) else scaled
    if by_root:
        root = d_k ** 0.5
        opening, closing = r"\frac{ ", " }{\\sqrt{" + str(d_k) + "}} = \\frac{"
        root_text = num(root, d)
    elif factor is not None:
        factor_text = str(round(factor, 6))
        opening = factor_text + r"\cdot\bigl("
    else:
        opening = ""
    masked = None if mask is None else np.asarray(mask) < 0.5
    width = Q.shape[1]
    q_all, k_all = nums(Q), nums(K)  # every entry's text, once (each key meets every query)
    lines = []
    for i in range(Q.shape[0]):
        q_texts = q_all[i * width:(i + 1) * width]
        for j in range(K.shape[0]):
            label = name + "_{" + str(i + 1) + str(j + 1) + "}" + sup
            if masked is not None and masked[i][j]:
                lines.append("- " + _("%(score)s (masked)") % {"score": "$" + label + r" = -\infty$"} + "\n")
                continue
            dot = (Q[i] * K[j]).sum()
            products = " + ".join(["(" + a + ")(" + b + ")" for a, b in zip(q_texts, k_all[j * width:(j + 1) * width])])
            if by_root:
                tail = closing + num(dot, d) + "}{" + root_text + "}"
                value = dot / root
            elif factor is not None:
                tail = r"\bigr) = " + factor_text + r"\cdot(" + num(dot, d) + ")"
                value = dot * factor
            else:
                tail, value = "", dot * 1
            lines.append("- $" + label + " = " + opening + products + tail + " = " + num(value, d) + "$\n")
    return "".join(lines)


def softmax_rows(S: Any, A: Any, d: int, s: str = "S", a: str = "A", sup: str = "") -> str:
    """Softmax row by row: shift by the row's maximum, exponentiate, sum, normalise.

    A row whose every score is -∞ (a query with no key to attend to) has weights 0. ``s``, ``a``
    and ``sup`` label the matrices.
    """
    lines = []
    for i in range(S.shape[0]):
        row = S[i]
        finite = row[np.isfinite(row)]
        if finite.size == 0:
            lines.append("- " + _("Row %(row)s: every key is masked, so the weights are all 0.") % {"row": i + 1} + "\n")
            continue
        m = finite.max()
        ex = np.exp(row - m)
        shift = "" if m == 0 else ("- " + num(m, d)) if m > 0 else ("+ " + num(-m, d))
        exps = ("e^{" + s + "_{" + str(i + 1) + "j}" + sup + " " + shift + "} = ("
                + _SEP.join(nums(ex, d)) + ")")
        weights = a + "_{" + str(i + 1) + ",:}" + sup + " = (" + _SEP.join(nums(A[i], d)) + ")"
        values = {"row": i + 1, "exps": exps, "sum": num(ex.sum(), d), "weights": weights}
        if m == 0:
            text = _("Row %(row)s: the row maximum is 0: $%(exps)s$,\n  sum $= %(sum)s$, so $%(weights)s$.") % values
        else:
            values["max"] = num(m, d)
            text = _("Row %(row)s: subtract the row maximum %(max)s: $%(exps)s$,\n  sum $= %(sum)s$, so "
                     "$%(weights)s$.") % values
        lines.append("- " + text + "\n")
    return "".join(lines)


def output_rows(A: Any, V: Any, Z: Any, d: int, z: str = "Z", sup: str = "") -> str:
    """``Z_i = Σ_j A_ij V_j`` for every row, the terms with a nonzero weight written out."""
    lines = []
    for i in range(A.shape[0]):
        terms = [num(A[i][j], d) + r"\," + bmatrix(V[j]) for j in range(V.shape[0]) if A[i][j] != 0]
        lines.append("- $" + z + "_{" + str(i + 1) + ",:}" + sup + " = " + (" + ".join(terms) or "0")
                     + " = " + bmatrix(Z[i], d) + "$\n")
    return "".join(lines)
