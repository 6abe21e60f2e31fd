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

from ..core.i18n import _, kept_per_language
from .latex import bmatrix, num, nums, shape_text

__all__ = ["score_rows", "softmax_rows", "output_rows", "row_sums", "dot_entries", "softmax_grad_rows",
           "forward_rows", "back_rows", "coef", "minus_term", "parts_list", "answers"]

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
    q_width, k_width = Q.shape[1], K.shape[1]
    q_all, k_all = nums(Q), nums(K)  # every entry's text, once (each key meets every query)
    # Every entry's products summed along their own axis: (Q[i] * K[j]).sum(), all in one call.
    dots = (np.asarray(Q)[:, None, :] * np.asarray(K)[None, :, :]).sum(axis=-1).tolist()
    lines = []
    for i in range(Q.shape[0]):
        q_texts = q_all[i * q_width:(i + 1) * q_width]
        for j in range(K.shape[0]):
            label = name + "_{" + str(i + 1) + str(j + 1) + "}" + sup
            if masked is not None and masked[i][j]:
                lines.append("- " + _("%(score)s (masked)") % {"score": "$" + label + r" = -\infty$"} + "\n")
                continue
            dot = dots[i][j]
            products = " + ".join(["(" + a + ")(" + b + ")" for a, b in zip(q_texts, k_all[j * k_width:(j + 1) * k_width])])
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
    # Each row shifted by its largest finite score and exponentiated, every row in one call (a
    # row with no finite score gets zeros here, and a sentence instead of numbers below).
    S, A = np.asarray(S, dtype=np.float64), np.asarray(A)
    finite = np.isfinite(S)
    live = finite.any(axis=1)
    top = np.where(finite, S, -np.inf).max(axis=1, initial=-np.inf)
    with np.errstate(invalid="ignore"):
        ex = np.where(live[:, None], np.exp(S - np.where(live, top, 0.0)[:, None]), 0.0)
    sums, tops, width = ex.sum(axis=1).tolist(), top.tolist(), S.shape[1]
    ex_texts, a_texts = nums(ex, d), nums(A, d)
    lines = []
    for i in range(S.shape[0]):
        if not live[i]:
            lines.append("- " + _("Row %(row)s: every key is masked, so the weights are all 0.") % {"row": i + 1} + "\n")
            continue
        m = tops[i]
        shift = "" if m == 0 else ("- " + num(m, d)) if m > 0 else ("+ " + num(-m, d))
        exps = ("e^{" + s + "_{" + str(i + 1) + "j}" + sup + " " + shift + "} = ("
                + _SEP.join(ex_texts[i * width:(i + 1) * width]) + ")")
        weights = (a + "_{" + str(i + 1) + ",:}" + sup + " = ("
                   + _SEP.join(a_texts[i * A.shape[1]:(i + 1) * A.shape[1]]) + ")")
        values = {"row": i + 1, "exps": exps, "sum": num(sums[i], d), "weights": weights}
        if m == 0:
            text = _("Row %(row)s: the row maximum is 0: $%(exps)s$,\n  sum $= %(sum)s$, so $%(weights)s$.") % values
        else:
            values["max"] = num(m, d)
            text = _("Row %(row)s: subtract the row maximum $%(max)s$: $%(exps)s$,\n  sum $= %(sum)s$, so "
                     "$%(weights)s$.") % values
        lines.append("- " + text + "\n")
    return "".join(lines)


#: At most this many decimals more than asked for a sum's coefficients (see :func:`_adding_decimals`).
_EXTRA_DECIMALS = 3


def _adding_decimals(coeffs: Any, rows: Any, row_decimals: int, total: Any, d: int) -> int:
    """How many decimals a weighted sum's coefficients are printed with, from ``d`` up: the
    fewest with which the printed terms add up to the printed ``total`` (to within its last
    digit). Rounded to ``d`` they may not: 0.62·[−1 −1] + 0.31·[1 0] printed as [−0.32 −0.62]
    (the exact weights give −0.32; the printed ones −0.31), and a reader who checks the line
    finds it wrong. ``coeffs`` may be a matrix and ``total`` its rows' sums: then one number of
    decimals for them all (a step printed at one precision)."""
    coeffs = np.asarray(coeffs, dtype=np.float64)
    rows = np.asarray(rows, dtype=np.float64)[: coeffs.shape[-1]]
    if not (np.all(np.isfinite(coeffs)) and np.all(np.isfinite(rows)) and np.all(np.isfinite(total))):
        return d
    shown_rows, shown_total = _shown(rows, row_decimals), _shown(total, d)
    for k in range(d, d + _EXTRA_DECIMALS + 1):
        if np.all(np.abs(_shown(coeffs, k) @ shown_rows - shown_total) <= 0.5 * 10.0 ** -d + 1e-9):
            return k
    return d


def _shown(values: Any, decimals: int) -> np.ndarray:
    """``values`` as :func:`num` and :func:`bmatrix` print them, rounded as text is (``%.3f`` of
    −0.6165 is −0.617, where ``np.round`` gives −0.616)."""
    arr = np.asarray(values, dtype=np.float64)
    spec = "%." + str(decimals) + "f"
    return np.array([float(spec % v) for v in arr.ravel().tolist()]).reshape(arr.shape)


def output_rows(A: Any, V: Any, Z: Any, d: int, z: str = "Z", sup: str = "") -> str:
    """``Z_i = Σ_j A_ij V_j`` for every row, the terms with a nonzero weight written out (the
    weights with the decimals that make the printed terms add up to the printed row)."""
    lines = []
    rows = [bmatrix(V[j]) for j in range(V.shape[0])]  # each value row once, not once per query
    weights = np.asarray(A).tolist()
    # One precision for the whole step (Z₁ at 3 decimals under Z₂ at 2 read as a slip): the
    # fewest with which every row's printed terms add up to its printed row.
    k = _adding_decimals(np.asarray(A)[:, :V.shape[0]], V, 3, Z, d)
    for i in range(A.shape[0]):
        terms = [num(w, k) + r"\," + rows[j] for j, w in enumerate(weights[i][:V.shape[0]]) if w != 0]
        lines.append("- $" + z + "_{" + str(i + 1) + ",:}" + sup + " = " + (" + ".join(terms) or "0")
                     + " = " + bmatrix(Z[i], d) + "$\n")
    return "".join(lines)


# ------------------------------------------------------------------ gradients and the delta rule


def coef(x: Any, d: int) -> str:
    """A coefficient in a sum: a negative one in parentheses."""
    return "(" + num(x, d) + ")" if x < 0 else num(x, d)


def row_sums(label: str, coeffs: Any, rows: Any, result: Any, d: int, divisor: Any = 1, divisor_tex: str = "") -> str:
    """Row i of ``(coeffs · rows) / divisor`` as a weighted sum of the rows of ``rows`` (zero
    terms skipped), then the result: one list item per row."""
    row_texts = [bmatrix(rows[k], d) for k in range(rows.shape[0])]
    lines = []
    # The coefficients with the decimals that make the printed terms add up to the sums printed
    # next: one precision for every row of the step.
    places = _adding_decimals(coeffs, rows, d, result if divisor == 1 else np.dot(coeffs, rows), d)
    for i in range(result.shape[0]):
        weights = coeffs[i]
        terms = [coef(weights[k], places) + " " + row_texts[k] for k in range(rows.shape[0]) if weights[k] != 0]
        scaled = ""
        if divisor != 1 and (weights != 0).any():
            scaled = r" = \frac{1}{" + divisor_tex + "} " + bmatrix(np.dot(weights, rows), d)
        lines.append("- $" + label + "_{" + str(i + 1) + "} = " + (" + ".join(terms) or "0") + scaled
                     + " = " + bmatrix(result[i], d) + "$\n")
    return "".join(lines)


def dot_entries(label: str, left: Any, right: Any, result: Any, d: int, mask: Any = None) -> str:
    """Entry (i, j) of ``left · rightᵀ`` as the dot product of row i of ``left`` with row j of
    ``right``, a row of entries per list item; a masked entry is 0."""
    l_width, r_width = left.shape[1], right.shape[1]
    left_all, right_all = nums(left, d), nums(right, d)
    separator = _(";  ")
    lines = []
    for i in range(result.shape[0]):
        entries = []
        for j in range(result.shape[1]):
            if mask is not None and mask[i][j] < 0.5:
                entries.append(_("$%(label)s_{%(ij)s} = 0$ (masked)") % {"label": label, "ij": str(i + 1) + str(j + 1)})
                continue
            pairs = zip(left_all[i * l_width:(i + 1) * l_width], right_all[j * r_width:(j + 1) * r_width])
            entries.append("$" + label + "_{" + str(i + 1) + str(j + 1) + "} = "
                           + " + ".join(["(" + a + ")(" + b + ")" for a, b in pairs])
                           + " = " + num(result[i][j], d) + "$")
        lines.append("- " + separator.join(entries) + "\n")
    return "".join(lines)


def softmax_grad_rows(A: Any, dA: Any, dS: Any, d: int) -> str:
    """``∇S = A ⊙ (∇A − c)`` with ``c_i = Σ_j ∇A_ij A_ij``, one row at a time."""
    lines = []
    for i in range(A.shape[0]):
        c = (A[i] * dA[i]).sum()
        a_texts, g_texts, c_text = nums(A[i], d), nums(dA[i], d), coef(c, d)
        nonzero = (A[i] != 0).tolist()
        terms = " + ".join(["(" + g + ")(" + a + ")" for a, g, keep in zip(a_texts, g_texts, nonzero) if keep]) or "0"
        products = _SEP.join([a + r"\cdot(" + g + " - " + c_text + ")" for a, g in zip(a_texts, g_texts)])
        values = {"row": i + 1, "terms": terms, "c": num(c, d), "products": products, "grad": bmatrix(dS[i], d)}
        lines.append("- " + _("Row %(row)s: $c_{%(row)s} = %(terms)s = %(c)s$, so\n"
                              "  $\\nabla S_{%(row)s,:} = (%(products)s) = %(grad)s$") % values + "\n")
    return "".join(lines)


def minus_term(a: Any, body: str, d: int) -> str:
    """``− a·body`` with the sign folded in: ``+ 0.5 w_1`` for a = −0.5, ``- w_1`` for a = 1."""
    sign = "+" if a < 0 else "-"
    if a != 1 and a != -1:
        return sign + " " + num(a if a > 0 else -a, d) + body
    return sign + body


def forward_rows(label: str, bcoef: str, bvar: str, A: Any, B: Any, Y: Any, d: int) -> str:
    """Forward substitution for ``A Y = B`` (A unit lower-triangular), row by row:
    ``Y_r = B_r − Σ_{s<r} A_rs Y_s``, the rows of B named ``bcoef_r bvar_r`` (β_r k_r)."""
    lines = []
    for r in range(Y.shape[0]):
        at = str(r + 1)
        terms = [(A[r][s], s) for s in np.flatnonzero(A[r][:r]).tolist()]
        lines.append(_substitution(label, at, bcoef + "_{" + at + "} " + bvar + "_{" + at + "}", terms, B[r], Y, Y[r], d))
    return "".join(lines)


def back_rows(label: str, blabel: str, A: Any, B: Any, Y: Any, d: int) -> str:
    """Back substitution for ``Aᵀ Y = B``, from the last row up: ``Y_i = B_i − Σ_{j>i} A_ji Y_j``."""
    n = Y.shape[0]
    lines = []
    for i in range(n - 1, -1, -1):
        at = str(i + 1)
        terms = [(A[j][i], j) for j in np.flatnonzero(A.T[i]).tolist() if j > i]
        lines.append(_substitution(label, at, blabel + "_{" + at + "}", terms, B[i], Y, Y[i], d))
    return "".join(lines)


def _substitution(label: str, at: str, start: str, terms: list[tuple[Any, int]], b_row: Any, Y: Any,
                  result: Any, d: int) -> str:
    """One line of a substitution: ``label_at = start − Σ a·label_j = b_row − Σ a·Y_j = result``
    for the ``(a, j)`` of ``terms``; with no terms, ``label_at = start = result``."""
    text = "- $" + label + "_{" + at + "} = " + start
    text += "".join([" " + minus_term(a, " " + label + "_{" + str(j + 1) + "}", d) for a, j in terms])
    if terms:
        text += " = " + bmatrix(b_row, d) + "".join([" " + minus_term(a, " " + bmatrix(Y[j], d), d) for a, j in terms])
    return text + " = " + bmatrix(result, d) + "$\n"


# ------------------------------------------------------------------ the lists every problem has


def _field(record: Any, name: str) -> Any:
    """``record.name`` as a template reads it: an attribute, else an item (a part is a dict, its step a Record)."""
    if isinstance(record, dict):
        return record[name]
    return getattr(record, name)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


class SharedParts(tuple):
    """An item's parts as the bundled templates see them: one object for a whole class in one
    language (markdown's shared frame), which nothing changes; :func:`parts_list` keeps its text."""


_PARTS_LISTS: dict[tuple[int, str], tuple[SharedParts, str]] = {}


def parts_list(parts: Any) -> str:
    """The asked parts as a list: (a), (b) … each with its prompt, formula, answer shape and points."""
    if type(parts) is not SharedParts:  # a user's templates' parts: a fresh list they may change
        return _parts_list(parts)
    return kept_per_language(_PARTS_LISTS, parts, 512, lambda: _parts_list(parts))  # the same for every student


def _parts_list(parts: Any) -> str:
    lines = []
    for index, part in enumerate(parts):
        step = _field(part, "step")
        lines.append(
            "- **(" + _LETTERS[index] + ")** "
            + _("%(prompt)s: $%(formula)s$.") % {"prompt": _field(step, "prompt"), "formula": _field(part, "formula")}
            + "\n  " + _("Answer: %(shape)s, part `%(id)s`\u00a0(%(points)s\u00a0pt).") % {
                "shape": shape_text(_field(part, "shape")), "id": _field(part, "id"),
                "points": num(_field(part, "points"), 2)}
            + str(_field(part, "only")) + "\n")
    return "".join(lines)


def answers(parts: Any, s: Any, d: int) -> str:
    """**Answers.** and each asked part's value: ``- `part`: $S = …$``."""
    lines = ["**" + _("Answers.") + "**\n"]
    for part in parts:
        step = _field(part, "step")
        lines.append("- `" + str(_field(part, "id")) + "`: $" + str(_field(step, "symbol")) + " = "
                     + bmatrix(s[_field(step, "name")], d) + "$\n")
    return "".join(lines)
