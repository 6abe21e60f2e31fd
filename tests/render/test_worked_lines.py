"""The worked solutions' longest lines (score, softmax and output rows, gradient sums and
triangular substitutions) are written in Python,
one call per matrix: they must read exactly as the Jinja macros that wrote them entry by entry,
kept below as the reference, in every language and every form a template asks for.
"""

from __future__ import annotations

import re

import jinja2
import numpy as np
import pytest

from qkvquiz.core import i18n
from qkvquiz.render import worked
from qkvquiz.render.latex import bmatrix, num, shape_text
from qkvquiz.render.environment import environment

# The macros as they were, one Jinja loop and filter call per entry.
REFERENCE = r"""{% macro score_rows(Q, K, scaled, d_k, d, mask=None, name="S", sup="") -%}
{% set by_root = scaled is sameas true %}
{% set factor = none if (scaled is sameas true or scaled is sameas false) else scaled %}
{% for i in range(Q.shape[0]) %}
{% for j in range(K.shape[0]) %}
{% if mask is not none and mask[i][j] < 0.5 %}
{% set entry %}${{ name }}_{ {{- i + 1 }}{{ j + 1 -}} }{{ sup }} = -\infty${% endset %}
- {{ _("%(score)s (masked)", score=entry) }}
{% else %}
{% set dot = (Q[i] * K[j]).sum() %}
- ${{ name }}_{ {{- i + 1 }}{{ j + 1 -}} }{{ sup }} = {% if by_root %}\frac{ {% elif factor is not none %}{{ factor|round(6)|string }}\cdot\bigl({% endif %}{% for a, b in zip(Q[i], K[j]) %}{{ "" if loop.first else " + " }}({{ a|num }})({{ b|num }}){% endfor %}{% if by_root %} }{\sqrt{ {{- d_k -}} }} = \frac{ {{- dot|num(d) -}} }{ {{- (d_k ** 0.5)|num(d) -}} }{% elif factor is not none %}\bigr) = {{ factor|round(6)|string }}\cdot({{ dot|num(d) }}){% endif %} = {{ (dot / (d_k ** 0.5) if by_root else dot * (factor if factor is not none else 1))|num(d) }}$
{% endif %}
{% endfor %}
{% endfor %}
{%- endmacro %}
{% macro softmax_rows(S, A, d, s="S", a="A", sup="") -%}
{% for i in range(S.shape[0]) %}
{% set row = S[i] %}
{% set finite = row[np.isfinite(row)] %}
{% if finite.size == 0 %}
- {{ _("Row %(row)s: every key is masked, so the weights are all 0.", row=i + 1) }}
{% else %}
{% set m = finite.max() %}
{% set ex = np.exp(row - m) %}
{% set exps %}e^{ {{- s }}_{ {{- i + 1 }}j}{{ sup }} {{ '' if m == 0 else ('- ' ~ m|num(d)) if m > 0 else ('+ ' ~ (-m)|num(d)) }}} = ({% for x in ex %}{{ x|num(d) }}{{ "" if loop.last else ",\\ " }}{% endfor %}){% endset %}
{% set weights %}{{ a }}_{ {{- i + 1 }},:}{{ sup }} = ({% for x in A[i] %}{{ x|num(d) }}{{ "" if loop.last else ",\\ " }}{% endfor %}){% endset %}
{% if m == 0 %}
- {{ _("Row %(row)s: the row maximum is 0: $%(exps)s$,\n  sum $= %(sum)s$, so $%(weights)s$.", row=i + 1, exps=exps, sum=ex.sum()|num(d), weights=weights) }}
{% else %}
- {{ _("Row %(row)s: subtract the row maximum $%(max)s$: $%(exps)s$,\n  sum $= %(sum)s$, so $%(weights)s$.", row=i + 1, max=m|num(d), exps=exps, sum=ex.sum()|num(d), weights=weights) }}
{% endif %}
{% endif %}
{% endfor %}
{%- endmacro %}
{% macro output_rows(A, V, Z, d, z="Z", sup="") -%}
{% set k = places(np.take(A, range(V.shape[0]), axis=1), V, 3, Z, d) %}
{% for i in range(A.shape[0]) %}
- ${{ z }}_{ {{- i + 1 }},:}{{ sup }} = {% for j in range(V.shape[0]) if A[i][j] != 0 %}{{ "" if loop.first else " + " }}{{ A[i][j]|num(k) }}\,{{ V[j]|bmatrix }}{% else %}0{% endfor %} = {{ Z[i]|bmatrix(d) }}$
{% endfor %}
{%- endmacro %}
"""

GRAD_REFERENCE = r"""{% macro coef(x, d) -%}
{% if x < 0 %}({{ x|num(d) }}){% else %}{{ x|num(d) }}{% endif %}
{%- endmacro %}

{# row i of (coeffs · rows) / divisor as a weighted sum of the rows of `rows`; zero terms skipped #}
{% macro row_sums(label, coeffs, rows, result, d, divisor=1, divisor_tex="") -%}
{% set p = places(coeffs, rows, d, result if divisor == 1 else np.dot(coeffs, rows), d) %}
{% for i in range(result.shape[0]) %}
{% set raw = np.dot(coeffs[i], rows) %}
- ${{ label }}_{ {{- i + 1 -}} } = {% for k in range(rows.shape[0]) if coeffs[i][k] != 0 %}{{ "" if loop.first else " + " }}{{ coef(coeffs[i][k], p) }} {{ rows[k]|bmatrix(d) }}{% else %}0{% endfor %}{% if divisor != 1 and (coeffs[i] != 0).any() %} = \frac{1}{ {{- divisor_tex -}} } {{ raw|bmatrix(d) }}{% endif %} = {{ result[i]|bmatrix(d) }}$
{% endfor %}
{%- endmacro %}

{# entry (i, j) of left · rightᵀ as the dot product of row i of `left` with row j of `right` #}
{% macro dot_entries(label, left, right, result, d, mask=none) -%}
{% for i in range(result.shape[0]) %}
- {% for j in range(result.shape[1]) %}{% if mask is not none and mask[i][j] < 0.5 %}{% trans label=label, ij=(i + 1)|string ~ (j + 1) %}${{ label }}_{ {{- ij -}} } = 0$ (masked){% endtrans %}{% else %}${{ label }}_{ {{- i + 1 }}{{ j + 1 -}} } = {% for a, b in zip(left[i], right[j]) %}{{ "" if loop.first else " + " }}({{ a|num(d) }})({{ b|num(d) }}){% endfor %} = {{ result[i][j]|num(d) }}${% endif %}{{ "" if loop.last else _(";  ") }}{% endfor %}

{% endfor %}
{%- endmacro %}

{# ∇S = A ⊙ (∇A − c) with c_i = Σ_j ∇A_ij A_ij, one row at a time #}
{% macro softmax_grad_rows(A, dA, dS, d) -%}
{% for i in range(A.shape[0]) %}
{% set c = (A[i] * dA[i]).sum() %}
{% set terms %}{% for a, g in zip(A[i], dA[i]) if a != 0 %}{{ "" if loop.first else " + " }}({{ g|num(d) }})({{ a|num(d) }}){% else %}0{% endfor %}{% endset %}
{% set products %}{% for a, g in zip(A[i], dA[i]) %}{{ a|num(d) }}\cdot({{ g|num(d) }} - {{ coef(c, d) }}){{ "" if loop.last else ",\\ " }}{% endfor %}{% endset %}
- {% trans row=i + 1, terms=terms, c=c|num(d), products=products, grad=dS[i]|bmatrix(d) %}Row {{ row }}: $c_{ {{- row -}} } = {{ terms }} = {{ c }}$, so
  $\nabla S_{ {{- row -}} ,:} = ({{ products }}) = {{ grad }}${% endtrans +%}
{% endfor %}
{%- endmacro %}

{# "− a·label" written with the sign folded in: "+ 0.5 w_1" for a = −0.5 #}
{% macro minus_term(a, body, d) -%}
{{ "+" if a < 0 else "-" }}{% if a != 1 and a != -1 %} {{ (a if a > 0 else -a)|num(d) }}{% endif %}{{ body }}
{%- endmacro %}

{# forward substitution for A Y = B (A unit lower-triangular): Y_r = B_r − Σ_{s<r} A_rs Y_s.
   `bsym` is the name of row r of B given r, e.g. "\beta_{r} k_{r}" is written by bcoef="\beta", bvar="k" #}
{% macro forward_rows(label, bcoef, bvar, A, B, Y, d) -%}
{% for r in range(Y.shape[0]) %}
{% set terms = range(r)|select("in", np.flatnonzero(A[r][:r]).tolist())|list %}
- ${{ label }}_{ {{- r + 1 -}} } = {{ bcoef }}_{ {{- r + 1 -}} } {{ bvar }}_{ {{- r + 1 -}} }{% for s_ in terms %} {{ minus_term(A[r][s_], " " ~ label ~ "_{" ~ (s_ + 1) ~ "}", d) }}{% endfor %}{% if terms %} = {{ B[r]|bmatrix(d) }}{% for s_ in terms %} {{ minus_term(A[r][s_], " " ~ Y[s_]|bmatrix(d), d) }}{% endfor %}{% endif %} = {{ Y[r]|bmatrix(d) }}$
{% endfor %}
{%- endmacro %}

{# back substitution for Aᵀ Y = B: Y_i = B_i − Σ_{j>i} A_ji Y_j, from the last row up #}
{% macro back_rows(label, blabel, A, B, Y, d) -%}
{% set n = Y.shape[0] %}
{% for i in range(n - 1, -1, -1) %}
{% set terms = range(i + 1, n)|select("in", np.flatnonzero(A.T[i]).tolist())|list %}
- ${{ label }}_{ {{- i + 1 -}} } = {{ blabel }}_{ {{- i + 1 -}} }{% for j in terms %} {{ minus_term(A[j][i], " " ~ label ~ "_{" ~ (j + 1) ~ "}", d) }}{% endfor %}{% if terms %} = {{ B[i]|bmatrix(d) }}{% for j in terms %} {{ minus_term(A[j][i], " " ~ Y[j]|bmatrix(d), d) }}{% endfor %}{% endif %} = {{ Y[i]|bmatrix(d) }}$
{% endfor %}
{%- endmacro %}
"""

LISTS_REFERENCE = r"""{% macro parts_list(parts) -%}
{% for part in parts %}
- **({{ "abcdefghijklmnopqrstuvwxyz"[loop.index0] }})** {{ _("%(prompt)s: $%(formula)s$.", prompt=part.step.prompt, formula=part.formula) }}
  {{ _("Answer: %(shape)s, part `%(id)s`\u00a0(%(points)s\u00a0pt).", shape=part.shape|shape, id=part.id, points=part.points|num(2)) }}{{ part.only }}
{% endfor %}
{%- endmacro %}
{% macro answers(parts, s, d) -%}
**{{ _("Answers.") }}**
{% for part in parts %}
- `{{ part.id }}`: ${{ part.step.symbol }} = {{ s[part.step.name]|bmatrix(d) }}$
{% endfor %}
{%- endmacro %}
"""


@pytest.fixture(scope="module")
def reference():
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, extensions=["jinja2.ext.i18n"])
    env.install_gettext_callables(lambda m: i18n._(m), lambda s, p, n: i18n.ngettext(s, p, n), newstyle=True)
    env.filters.update(num=num, bmatrix=bmatrix, shape=shape_text)
    env.globals.update(np=np, zip=zip, places=worked._adding_decimals)  # the sums' coefficient decimals
    return env.from_string(REFERENCE + LISTS_REFERENCE).module


@pytest.fixture(scope="module")
def grad_reference(reference):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, extensions=["jinja2.ext.i18n"])
    env.install_gettext_callables(lambda m: i18n._(m), lambda s, p, n: i18n.ngettext(s, p, n), newstyle=True)
    env.filters.update(num=num, bmatrix=bmatrix)
    env.globals.update(np=np, zip=zip, places=worked._adding_decimals)  # the sums' coefficient decimals
    return env.from_string(GRAD_REFERENCE).module


def _softmax(S):
    out = np.zeros_like(S)
    for i, row in enumerate(S):
        finite = np.isfinite(row)
        if finite.any():
            e = np.exp(row - row[finite].max())
            out[i] = e / e.sum()
    return out


CASES = [
    # (queries, keys, d_k, scaled, masked, label, sup)
    (3, 3, 4, True, None, "S", ""),
    (1, 4, 2, True, "random", "S", ""),
    (2, 3, 9, False, "causal", "S", "^{(1)}"),
    (3, 2, 4, 0.5, "empty", "T", "^{(2)}"),
    (2, 2, 3, 0.333333333, None, "S", ""),
]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}x{c[1]}-{c[3]}-{c[4]}")
def test_worked_lines_read_as_the_macros_wrote_them(reference, case, lang):
    n, m, d_k, scaled, masked, label, sup = case
    rng = np.random.default_rng(n * 10 + m)
    for trial in range(6):
        Q = rng.integers(-3, 4, (n, d_k)).astype(float) / rng.choice([1, 2, 4])
        K = rng.integers(-3, 4, (m, d_k)).astype(float)
        V = rng.normal(size=(m, 2)).round(trial % 4)
        mask = None
        if masked == "random":
            mask = (rng.random((n, m)) < 0.6).astype(float)
        elif masked == "causal":
            mask = np.tril(np.ones((n, m)))
        elif masked == "empty":
            mask = np.ones((n, m))
            mask[0] = 0  # a query with no key: an all -inf row
        S = Q @ K.T / (d_k ** 0.5 if scaled is True else 1) * (scaled if scaled not in (True, False) else 1)
        if mask is not None:
            S = np.where(mask > 0.5, S, -np.inf)
        S[0, 0] = 0.0 if trial == 1 and (mask is None or mask[0, 0] > 0.5) else S[0, 0]  # a row maximum of 0
        A = _softmax(S)
        Z = A @ V
        d = 2 + trial % 3
        with i18n.using(lang):
            assert worked.score_rows(Q, K, scaled, d_k, d, mask, label, sup) == \
                str(reference.score_rows(Q, K, scaled, d_k, d, mask, label, sup))
            assert worked.softmax_rows(S, A, d, label, "B", sup) == str(reference.softmax_rows(S, A, d, label, "B", sup))
            assert worked.output_rows(A, V, Z, d, "Y", sup) == str(reference.output_rows(A, V, Z, d, "Y", sup))


def test_templates_reach_the_worked_lines_through_the_macros():
    # A template (bundled, or a user's that imports the bundled macros) calls the macros as before.
    page = environment().from_string(
        '{% import "families/_macros.md.j2" as m %}{{ m.score_rows(Q, K, true, 2, 2) }}{{ m.softmax_rows(S, A, 2) }}')
    Q, K = np.array([[1.0, 2.0]]), np.array([[0.5, -1.0], [1.0, 1.0]])
    S = Q @ K.T / 2 ** 0.5
    A = _softmax(S)
    assert page.render(Q=Q, K=K, S=S, A=A) == worked.score_rows(Q, K, True, 2, 2) + worked.softmax_rows(S, A, 2)


def test_a_users_templates_keep_the_checked_gettext(tmp_path):
    # The bundled templates' gettext skips the %-field width check; a user's templates keep it.
    from qkvquiz.render.markdown import render_template

    (tmp_path / "wide.md.j2").write_text('{{ _("%(x)999999999d", x=1) }}', encoding="utf-8")
    with pytest.raises(jinja2.TemplateError):
        render_template(["wide.md.j2"], {}, str(tmp_path))


def _small(rng, shape, zeros=0.25):
    """Small values as a worksheet has them (halves, quarters, integers), some exactly 0, ±1."""
    values = rng.integers(-6, 7, shape) / rng.choice([1, 2, 4], shape)
    return np.where(rng.random(shape) < zeros, 0.0, values)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("seed", range(6))
def test_gradient_lines_read_as_the_macros_wrote_them(grad_reference, seed, lang):
    rng = np.random.default_rng(seed)
    n, m, w = 2 + seed % 3, 1 + seed % 4, 2 + seed % 2
    d = 2 + seed % 3
    coeffs, rows = _small(rng, (n, m)), _small(rng, (m, w))
    left, right = _small(rng, (n, w)), _small(rng, (m, w))
    mask = (rng.random((n, m)) < 0.7).astype(float)
    A = np.abs(_small(rng, (n, m), 0.3))
    A = A / np.maximum(A.sum(axis=1, keepdims=True), 1)  # rows of weights, some entries 0
    dA = _small(rng, (n, m))
    tri = np.tril(_small(rng, (n, n), 0.4), -1) + np.eye(n)  # unit lower-triangular, some zeros
    tri[n - 1, 0] = 1.0 if seed % 2 else -1.0  # a coefficient of ±1: written without its number
    B, Y = _small(rng, (n, w)), _small(rng, (n, w))
    ref = grad_reference
    with i18n.using(lang):
        for divisor, tex in ((1, ""), (2.0, "2"), (0.5, "0.5")):
            assert worked.row_sums("\\nabla q", coeffs, rows, coeffs @ rows / divisor, d, divisor, tex) == \
                str(ref.row_sums("\\nabla q", coeffs, rows, coeffs @ rows / divisor, d, divisor, tex))
        for masked in (None, mask):
            assert worked.dot_entries("\\nabla A", left, right, left @ right.T, d, masked) == \
                str(ref.dot_entries("\\nabla A", left, right, left @ right.T, d, masked))
        dS = A * (dA - (A * dA).sum(axis=1, keepdims=True))
        assert worked.softmax_grad_rows(A, dA, dS, d) == str(ref.softmax_grad_rows(A, dA, dS, d))
        assert worked.forward_rows("w", "\\beta", "k", tri, B, Y, d) == str(ref.forward_rows("w", "\\beta", "k", tri, B, Y, d))
        assert worked.back_rows("\\bar b", "\\bar w", tri, B, Y, d) == str(ref.back_rows("\\bar b", "\\bar w", tri, B, Y, d))
        for x in (-1.5, -1.0, 0.0, 0.25, 1.0, 2.0):
            assert worked.coef(x, d) == str(ref.coef(x, d))
            assert worked.minus_term(x, " w_{1}", d) == str(ref.minus_term(x, " w_{1}", d))


LIST_ITEMS = [
    {"family": "attention.output", "ask": {"scores": 0.5, "weights": {"points": 1.5, "rows": [2]}, "output": 2}},
    {"family": "attention.weights", "params": {"mask": "causal", "tokens": 3},
     "ask": {"weights": {"entries": [[1, 1], [3, 2]]}}},
    {"family": "delta.chunk_forward", "params": {"chunk": 3, "chunks": 2, "last_chunk": 2}},
    {"family": "backprop.projection", "params": {"form": "vector"}},
    {"family": "theory.shapes"},
]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_part_lists_and_answers_read_as_the_macros_wrote_them(reference, lang):
    from qkvquiz.render.markdown import item_context
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    ws = build_worksheet(parse_spec({"title": "t", "items": LIST_ITEMS}), ["ada", "bo"], "lists")
    with i18n.using(lang):
        for student in range(2):
            for variant in ws.variant(student):
                ctx = item_context(variant["item"], 1, variant["givens"], variant["steps"])
                parts, s, d = ctx["parts"], ctx["s"], ctx["d"]
                assert worked.parts_list(parts) == str(reference.parts_list(parts))
                if not variant["item"].family.name.startswith("delta."):  # those list answers by chunk
                    assert worked.answers(parts, s, d) == str(reference.answers(parts, s, d))


def test_a_shared_parts_list_is_kept_per_language_and_a_fresh_one_never():
    from qkvquiz.render.markdown import item_context
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    ws = build_worksheet(parse_spec({"title": "t", "items": LIST_ITEMS[:1]}), ["ada"], "lists")
    variant = ws.variant(0)[0]
    parts = item_context(variant["item"], 1, variant["givens"], variant["steps"])["parts"]
    shared = worked.SharedParts(parts)
    with i18n.using("en"):
        english = worked.parts_list(parts)
        assert worked.parts_list(shared) == english and worked.parts_list(shared) == english
    with i18n.using("zh"):
        assert worked.parts_list(shared) == worked.parts_list(parts) != english
    # A user's template may change its (fresh) list between two calls: each call reads it anew.
    parts[0] = {**parts[0], "points": 7.5}
    with i18n.using("en"):
        assert worked.parts_list(parts) != english and "7.5\u00a0pt" in worked.parts_list(parts)


_VEC = r"\\begin\{bmatrix\}([^\\]*)\\end\{bmatrix\}"
_TERM = re.compile(r"\(?(-?\d+(?:\.\d+)?)\)?\s*(?:\\,)?\s*" + _VEC)


def _sums_that_do_not_add_up(text: str) -> list[str]:
    """Lines ``c₁ [row] + c₂ [row] + … = [result]`` whose printed terms do not give the printed
    result to within its last digit."""
    wrong = []
    for line in text.splitlines():
        head, _eq, last = line.rpartition(" = ")
        terms = _TERM.findall(head.rpartition(" = ")[2])
        result = re.fullmatch(_VEC + r"\$", last.strip())
        if len(terms) < 2 or result is None:
            continue
        shown = [x.strip() for x in result.group(1).split("&")]
        total = sum(float(c) * np.array([float(x) for x in row.split("&")]) for c, row in terms)
        digits = [len(x.partition(".")[2]) for x in shown]
        if any(abs(t - float(x)) > 0.5 * 10.0 ** -k + 1e-9 for t, x, k in zip(total, shown, digits)):
            wrong.append(line)
    return wrong


def test_a_weighted_sum_adds_up_from_the_numbers_it_prints():
    """0.42·[1 0] + 0.16·[0 2] + 0.42·[2 −2] printed as [1.26 −0.52] from exact weights that
    give it: the weights are printed with the digits that make the line add up."""
    A = np.array([[0.4223, 0.1554, 0.4223]])
    V = np.array([[1.0, 0.0], [0.0, 2.0], [2.0, -2.0]])
    line = worked.output_rows(A, V, A @ V, 2)
    assert not _sums_that_do_not_add_up(line), line
    assert "0.422" in line and line.endswith(r"\begin{bmatrix} 1.27 & -0.53 \end{bmatrix}$" + "\n")
    # Where the weights rounded to the asked decimals add up, they are printed so.
    even = np.array([[0.5, 0.25, 0.25]])
    assert worked.output_rows(even, V, even @ V, 2).startswith(r"- $Z_{1,:} = 0.5\,")
    rng = np.random.default_rng(5)
    for _trial in range(40):
        coeffs = rng.normal(size=(3, 4)).round(4)
        rows = rng.integers(-3, 4, (4, 3)).astype(float)
        text = worked.row_sums("\\nabla v", coeffs, rows, coeffs @ rows, 2)
        assert not _sums_that_do_not_add_up(text), text


def test_a_step_prints_its_weights_at_one_precision_on_every_row():
    """Z₁ with weights at 3 decimals over Z₂ at 2 read as a slip: the whole step takes the fewest
    decimals with which every row's printed terms add up to its printed row."""
    V = np.array([[1.0, 0.0], [0.0, 2.0], [2.0, -2.0]])
    A = np.array([[0.2782, 0.4478, 0.274], [0.1533, 0.469, 0.3777]])
    # On its own the first row needs 3 decimals and the second adds up at 2 (0.15, 0.47, 0.38).
    assert [worked._adding_decimals(row, V, 3, row @ V, 2) for row in A] == [3, 2]
    lines = worked.output_rows(A, V, A @ V, 2).splitlines()
    for line, row in zip(lines, A):
        assert all(worked.num(w, 3) + r"\," in line for w in row), line
    assert not _sums_that_do_not_add_up("\n".join(lines))
    text = worked.row_sums("\\nabla v", A, V, A @ V, 2)
    assert "0.153" in text and "0.378" in text and not _sums_that_do_not_add_up(text), text
