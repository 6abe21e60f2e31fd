"""The worked solutions' longest lines (score, softmax and output rows) are written in Python,
one call per matrix: they must read exactly as the Jinja macros that wrote them entry by entry,
kept below as the reference, in every language and every form a template asks for.
"""

from __future__ import annotations

import jinja2
import numpy as np
import pytest

from qkvquiz import i18n
from qkvquiz.render import worked
from qkvquiz.render.latex import bmatrix, num
from qkvquiz.render.markdown import environment

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
- {{ _("Row %(row)s: subtract the row maximum %(max)s: $%(exps)s$,\n  sum $= %(sum)s$, so $%(weights)s$.", row=i + 1, max=m|num(d), exps=exps, sum=ex.sum()|num(d), weights=weights) }}
{% endif %}
{% endif %}
{% endfor %}
{%- endmacro %}
{% macro output_rows(A, V, Z, d, z="Z", sup="") -%}
{% for i in range(A.shape[0]) %}
- ${{ z }}_{ {{- i + 1 }},:}{{ sup }} = {% for j in range(V.shape[0]) if A[i][j] != 0 %}{{ "" if loop.first else " + " }}{{ A[i][j]|num(d) }}\,{{ V[j]|bmatrix }}{% else %}0{% endfor %} = {{ Z[i]|bmatrix(d) }}$
{% endfor %}
{%- endmacro %}
"""


@pytest.fixture(scope="module")
def reference():
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, extensions=["jinja2.ext.i18n"])
    env.install_gettext_callables(lambda m: i18n._(m), lambda s, p, n: i18n.ngettext(s, p, n), newstyle=True)
    env.filters.update(num=num, bmatrix=bmatrix)
    env.globals.update(np=np, zip=zip)
    return env.from_string(REFERENCE).module


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
