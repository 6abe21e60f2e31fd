"""Forward families: masks, Q/K swap, multi-head, layer norm and the theory problems.

Every step is checked against an independent oracle (per-entry loops, closed forms found by
enumeration, finite differences, counting loops, torch where installed); every known
mistake must be told apart from the right answer on every accepted variant; and every
family prints a readable problem and worked solution.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qkvquiz.families import REGISTRY, get_family
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.core.tolerance import Tolerance
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.render.markdown import key_markdown
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import acceptable, build_worksheet

ROSTER = [f"s{i:02d}" for i in range(30)]
FORWARD = (
    "attention.masked", "attention.qk_swap", "attention.multihead", "attention.layernorm",
    "theory.dot_variance", "theory.softmax_jacobian", "theory.complexity",
)
# Settings that between them reach every known mistake of every family, hand-sized and larger.
SETTINGS = [
    ("attention.masked", {}),
    ("attention.masked", {"mask": "padding", "padded": 2, "tokens": 4}),
    ("attention.masked", {"mask": "causal_padding", "tokens": 5, "d_k": 8, "entries": [-2, 2]}),
    ("attention.masked", {"mask": "causal", "tokens": 3, "scale": 0.5}),
    ("attention.masked", {"mask": "causal", "tokens": 3, "d_k": 2, "stated_d_k": 16}),
    ("attention.qk_swap", {}),
    ("attention.qk_swap", {"tokens": 6, "d_k": 16, "entries": [-2, 2]}),
    ("attention.qk_swap", {"queries": 1, "keys": 3, "scale": "none"}),
    ("attention.qk_swap", {"queries": 3, "keys": 1, "scale": 0.5}),
    ("attention.qk_swap", {"d_k": 2, "stated_d_k": 16}),
    ("attention.multihead", {}),
    ("attention.multihead", {"tokens": 4, "d_model": 12, "heads": 3, "entries": [-2, 2]}),
    ("attention.multihead", {"queries": 1, "keys": 3, "scale": "none"}),
    ("attention.multihead", {"queries": 3, "keys": 2, "d_model": 6, "heads": 3, "scale": 0.5}),
    ("attention.multihead", {"queries": 2, "keys": 1, "stated_d_k": 8}),
    ("attention.layernorm", {}),
    ("attention.layernorm", {"zero_variance_row": True, "tokens": 3}),
    ("attention.layernorm", {"eps": 0.5, "d": 6, "entries": [-3, 3]}),
    ("theory.dot_variance", {}),
    ("theory.dot_variance", {"squares": False, "d_k_range": [100, 4096], "entry_var": 2.0, "pairs": 8}),
    ("theory.softmax_jacobian", {}),
    ("theory.softmax_jacobian", {"size": 6, "entries": [-3, 3]}),
    ("theory.softmax_jacobian", {"case": "saturated", "size": 4}),
    ("theory.complexity", {}),
    ("theory.complexity", {"reuse": True, "n_range": [512, 4096], "d_range": [64, 512]}),
]
TOL = Tolerance("decimals", 2)


def solved(name: str, params: dict, students=ROSTER, seed=3, ask=None):
    family = REGISTRY[name]
    item = {"family": name, "params": params, "ask": list(ask or family.askable_steps)}
    spec = parse_spec({"title": "T", "items": [item]})
    ws = build_worksheet(spec, list(students), seed=seed)
    return ws, ws.envs[0], spec.items[0]


def batch_solve(name: str, params: dict, givens: dict):
    family = get_family(name)
    p = family.resolve(params)
    return family.solve({k: np.asarray(v, dtype=np.float64) for k, v in givens.items()}, p), p


# --------------------------------------------------------------------------- oracles


def naive_softmax_rows(s):
    out = np.zeros_like(s, dtype=np.float64)
    for i, row in enumerate(s):
        allowed = [j for j, x in enumerate(row) if np.isfinite(x)]
        if not allowed:
            continue
        top = max(row[j] for j in allowed)
        total = sum(math.exp(row[j] - top) for j in allowed)
        for j in allowed:
            out[i, j] = math.exp(row[j] - top) / total
    return out


def naive_scores(q, k):
    n, m, d = q.shape[0], k.shape[0], q.shape[1]
    return np.array([[sum(q[i, t] * k[j, t] for t in range(d)) / math.sqrt(d) for j in range(m)] for i in range(n)])


def naive_matmul(a, b):
    return np.array([[sum(a[i, t] * b[t, j] for t in range(a.shape[1])) for j in range(b.shape[1])]
                     for i in range(a.shape[0])])


@pytest.mark.parametrize("mask, padded", [("causal", 1), ("padding", 1), ("padding", 2), ("causal_padding", 1)])
def test_masked_family_matches_a_per_entry_loop(mask, padded):
    _, env, _ = solved("attention.masked", {"mask": mask, "padded": padded, "tokens": 4}, ROSTER[:8])
    n = 4
    for b in range(8):
        allowed = [[("causal" not in mask or j <= i) and ("padding" not in mask or j < n - padded)
                    for j in range(n)] for i in range(n)]
        np.testing.assert_array_equal(env["mask"][b], np.array(allowed, dtype=float))
        s = naive_scores(env["Q"][b], env["K"][b])
        masked = np.where(np.array(allowed), s, -np.inf)
        a = naive_softmax_rows(masked)
        np.testing.assert_allclose(env["unmasked"][b], s, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(np.isinf(env["scores"][b]), ~np.array(allowed))
        np.testing.assert_allclose(env["weights"][b], a, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["output"][b], naive_matmul(a, env["V"][b]), rtol=1e-12, atol=1e-14)


def test_masked_family_agrees_with_torch_sdpa():
    torch = pytest.importorskip("torch")
    _, env, _ = solved("attention.masked", {"mask": "causal_padding", "tokens": 5, "padded": 2}, ROSTER[:6])
    q, k, v = (torch.tensor(env[x], dtype=torch.float64) for x in ("Q", "K", "V"))
    z = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(env["mask"] > 0.5))
    np.testing.assert_allclose(env["output"], z.numpy(), rtol=1e-10, atol=1e-10)


def test_qk_swap_family_matches_a_per_entry_loop():
    _, env, _ = solved("attention.qk_swap", {"tokens": 4}, ROSTER[:8])
    for b in range(8):
        s = naive_scores(env["Q"][b], env["K"][b])
        n = s.shape[0]
        swapped = np.array([[math.exp(s[j, i]) / sum(math.exp(s[l, i]) for l in range(n)) for j in range(n)]
                            for i in range(n)])
        a = naive_softmax_rows(s)
        np.testing.assert_allclose(env["scores"][b], s, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["weights"][b], a, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["swapped"][b], swapped, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["received"][b], [sum(a[i, j] for i in range(n)) for j in range(n)], rtol=1e-12)
        # Swapping Q and K really is softmax of K Qᵀ/√d_k.
        np.testing.assert_allclose(env["swapped"][b], naive_softmax_rows(naive_scores(env["K"][b], env["Q"][b])),
                                   rtol=1e-12, atol=1e-14)


def naive_multihead(q, k, v, w_o, h):
    n, dm = q.shape
    dk = dm // h
    heads = []
    for head in range(h):
        cols = slice(head * dk, (head + 1) * dk)
        a = naive_softmax_rows(naive_scores(q[:, cols], k[:, cols]))
        heads.append((naive_scores(q[:, cols], k[:, cols]), a, naive_matmul(a, v[:, cols])))
    concat = np.array([[heads[c // dk][2][i, c % dk] for c in range(dm)] for i in range(n)])
    return heads, concat, naive_matmul(concat, w_o)


@pytest.mark.parametrize("params", [{}, {"tokens": 3, "d_model": 6, "heads": 3}, {"tokens": 3, "d_model": 8, "heads": 1}])
def test_multihead_family_matches_a_per_head_loop(params):
    _, env, item = solved("attention.multihead", params, ROSTER[:6])
    h = item.params.heads
    for b in range(6):
        heads, concat, y = naive_multihead(env["Q"][b], env["K"][b], env["V"][b], env["W_O"][b], h)
        for i, (s, a, z) in enumerate(heads):
            np.testing.assert_allclose(env["scores"][b][i], s, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(env["weights"][b][i], a, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(env["heads"][b][i], z, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["concat"][b], concat, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(env["output"][b], y, rtol=1e-12, atol=1e-14)


def test_multihead_family_agrees_with_torch_multihead_attention():
    torch = pytest.importorskip("torch")
    _, env, _ = solved("attention.multihead", {"tokens": 4, "d_model": 8, "heads": 2}, ROSTER[:5])
    mha = torch.nn.MultiheadAttention(8, 2, bias=False, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([torch.eye(8, dtype=torch.float64)] * 3))  # Q, K, V given projected
    for b in range(5):
        with torch.no_grad():
            mha.out_proj.weight.copy_(torch.tensor(env["W_O"][b]).T)  # torch computes x Wᵀ
            y, w = mha(*(torch.tensor(env[x][b])[None] for x in ("Q", "K", "V")), average_attn_weights=False)
        np.testing.assert_allclose(env["output"][b], y[0].numpy(), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(env["weights"][b], w[0].numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("params", [{}, {"zero_variance_row": True, "tokens": 3}, {"eps": 0.5, "d": 5}])
def test_layernorm_family_matches_a_per_row_loop(params):
    _, env, item = solved("attention.layernorm", params, ROSTER[:8])
    eps = item.params.eps
    for b in range(8):
        h = env["X"][b] + env["Z"][b]
        for i, row in enumerate(h):
            d = len(row)
            mu = sum(row) / d
            var = sum((x - mu) ** 2 for x in row) / d
            xhat = [(x - mu) / math.sqrt(var + eps) for x in row]
            y = [env["gamma"][b][j] * xhat[j] + env["beta"][b][j] for j in range(d)]
            assert env["mean"][b][i] == pytest.approx(mu, rel=1e-12, abs=1e-14)
            assert env["var"][b][i] == pytest.approx(var, rel=1e-12, abs=1e-14)
            np.testing.assert_allclose(env["normalized"][b][i], xhat, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(env["output"][b][i], y, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(env["residual"][b], h)


def test_layernorm_family_agrees_with_torch_layer_norm():
    torch = pytest.importorskip("torch")
    _, env, item = solved("attention.layernorm", {"zero_variance_row": True, "tokens": 3, "d": 5}, ROSTER[:6])
    for b in range(6):
        y = torch.nn.functional.layer_norm(
            torch.tensor(env["X"][b] + env["Z"][b]), (5,), torch.tensor(env["gamma"][b]),
            torch.tensor(env["beta"][b]), eps=item.params.eps,
        )
        np.testing.assert_allclose(env["output"][b], y.numpy(), rtol=1e-10, atol=1e-10)


def test_constant_row_is_beta_and_forgetting_eps_there_is_a_different_value():
    _, env, item = solved("attention.layernorm", {"zero_variance_row": True}, ROSTER, ask=["normalized", "output"])
    family = REGISTRY["attention.layernorm"]
    assert (env["var"][:, -1] == 0).all() and (env["var"][:, :-1] > 0).all()
    np.testing.assert_array_equal(env["normalized"][:, -1], 0.0)
    np.testing.assert_array_equal(env["output"][:, -1], env["beta"])
    (forgot,) = [m for m in family.mistakes_for("output", item.params) if m.name == "eps_forgotten"]
    wrong = forgot.fn(env, item.params, np)
    assert np.isnan(wrong[:, -1]).all()  # 0/0 on the constant row
    # The tolerance never counts NaN as a number, so the grader sees a different value.
    assert not TOL.passes(wrong[:, -1], env["output"][:, -1]).any()
    assert acceptable(item, env).all()


def test_eps_forgotten_is_listed_only_where_it_can_show():
    family = REGISTRY["attention.layernorm"]
    names = lambda params: {m.name for m in family.mistakes_for("output", family.resolve(params))}  # noqa: E731
    assert "eps_forgotten" not in names({})
    assert "eps_forgotten" in names({"zero_variance_row": True})
    assert "eps_forgotten" in names({"eps": 0.5})


def test_dot_variance_closed_forms_match_exact_enumeration():
    # Var(q·k) over every sign pattern of ±√v entries (uniform, independent): the exact law.
    for d_k, v in [(1, 1.0), (2, 1.0), (3, 2.0), (4, 0.5)]:
        env, p = batch_solve("theory.dot_variance", {"entry_var": v, "squares": False, "d_k_range": [1, 4]},
                             {"d_k": [d_k], "q_samples": np.ones((1, 4, 4)), "k_samples": np.ones((1, 4, 4))})
        root = math.sqrt(v)
        dots = [sum(root * a * root * b for a, b in zip(qs, ks))
                for qs in itertools.product((-1, 1), repeat=d_k) for ks in itertools.product((-1, 1), repeat=d_k)]
        mean = sum(dots) / len(dots)
        var = sum((x - mean) ** 2 for x in dots) / len(dots)
        assert mean == pytest.approx(0, abs=1e-12)
        assert env["variance"][0] == pytest.approx(var, rel=1e-12)
        assert env["std"][0] == pytest.approx(math.sqrt(var), rel=1e-12)
        assert env["three_sigma"][0] == pytest.approx(3 * math.sqrt(var), rel=1e-12)
        scaled = [x / math.sqrt(d_k) for x in dots]
        assert env["scaled_variance"][0] == pytest.approx(sum(x * x for x in scaled) / len(scaled), rel=1e-12)


def test_dot_variance_draws_and_empirical_check():
    _, env, item = solved("theory.dot_variance", {"pairs": 6, "check_dim": 5}, ROSTER)
    d_k = env["d_k"]
    assert ((d_k >= 16) & (d_k <= 144)).all() and (np.sqrt(d_k) == np.round(np.sqrt(d_k))).all()
    assert set(np.unique(env["q_samples"])) == {-1.0, 1.0}
    for b in range(len(ROSTER)):
        dots = [sum(a * c for a, c in zip(q, k)) for q, k in zip(env["q_samples"][b], env["k_samples"][b])]
        mean = sum(dots) / len(dots)
        np.testing.assert_allclose(env["dots"][b], dots)
        assert env["sample_mean"][b] == pytest.approx(mean)
        assert env["sample_var"][b] == pytest.approx(sum((x - mean) ** 2 for x in dots) / len(dots))


def naive_softmax(z):
    top = max(z)
    e = [math.exp(x - top) for x in z]
    return [x / sum(e) for x in e]


@pytest.mark.parametrize("case", ["moderate", "saturated"])
def test_softmax_jacobian_matches_central_differences(case):
    _, env, _ = solved("theory.softmax_jacobian", {"case": case, "size": 4}, ROSTER[:8])
    h = 1e-6
    for b in range(8):
        z = list(env["z"][b])
        fd = np.zeros((4, 4))
        for k in range(4):
            up, down = z.copy(), z.copy()
            up[k] += h
            down[k] -= h
            fd[:, k] = (np.array(naive_softmax(up)) - np.array(naive_softmax(down))) / (2 * h)
        np.testing.assert_allclose(env["probs"][b], naive_softmax(z), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(env["jacobian"][b], fd, rtol=1e-6, atol=1e-9)
        assert env["largest"][b] == pytest.approx(np.abs(env["jacobian"][b]).max())
    if case == "saturated":
        assert (env["largest"] < 1e-3).all()  # the gradient all but vanishes


def test_softmax_jacobian_agrees_with_torch_autograd():
    torch = pytest.importorskip("torch")
    _, env, _ = solved("theory.softmax_jacobian", {"size": 5}, ROSTER[:6])
    for b in range(6):
        j = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, -1), torch.tensor(env["z"][b]))
        np.testing.assert_allclose(env["jacobian"][b], j.numpy(), rtol=1e-10, atol=1e-10)


class Counter:
    """Scalar multiplications, counted one by one as the algorithms run."""

    def __init__(self) -> None:
        self.count = 0

    def mul(self, a: float, b: float) -> float:
        self.count += 1
        return a * b

    def matvec(self, w, x):
        return [sum(self.mul(w[r][c], x[c]) for c in range(len(x))) for r in range(len(w))]


def counted_costs(n: int, d: int, reuse: bool) -> tuple[int, int, int]:
    rng = np.random.default_rng(n * 100 + d)
    q, k, v = (rng.standard_normal((n, d)).tolist() for _ in range(3))
    w, u, va = rng.standard_normal((d, d)).tolist(), rng.standard_normal((d, d)).tolist(), rng.standard_normal(d).tolist()
    dot = Counter()
    s = [[sum(dot.mul(q[i][t], k[j][t]) for t in range(d)) for j in range(n)] for i in range(n)]
    scores_only = dot.count
    [[sum(dot.mul(s[i][j], v[j][c]) for j in range(n)) for c in range(d)] for i in range(n)]
    add = Counter()
    if reuse:
        wq = [add.matvec(w, q[i]) for i in range(n)]
        uk = [add.matvec(u, k[j]) for j in range(n)]
        for i, j in itertools.product(range(n), range(n)):
            sum(add.mul(va[r], math.tanh(wq[i][r] + uk[j][r])) for r in range(d))
    else:
        for i, j in itertools.product(range(n), range(n)):
            a, b = add.matvec(w, q[i]), add.matvec(u, k[j])
            sum(add.mul(va[r], math.tanh(a[r] + b[r])) for r in range(d))
    return scores_only, dot.count, add.count


@pytest.mark.parametrize("reuse", [False, True])
def test_complexity_counts_match_counting_loops(reuse):
    _, env, _ = solved("theory.complexity", {"reuse": reuse}, ROSTER[:10])
    for b in range(10):
        n, d = int(env["n"][b]), int(env["d"][b])
        scores, total, additive = counted_costs(n, d, reuse)
        assert (env["dot_scores"][b], env["dot_total"][b], env["additive_scores"][b]) == (scores, total, additive)
        assert env["ratio"][b] == pytest.approx(additive / scores)


def test_complexity_large_counts_are_exact_integers():
    _, env, _ = solved("theory.complexity", {"n_range": [1000, 8192], "d_range": [100, 1024]}, ROSTER)
    n, d = env["n"].astype(np.int64), env["d"].astype(np.int64)
    assert (env["additive_scores"].astype(np.int64) == n * n * (2 * d * d + d)).all()
    assert (env["additive_scores"] < 2.0**53).all()


# ------------------------------------------------------------------- mistakes and accept


@pytest.mark.parametrize("name, params", SETTINGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SETTINGS)])
def test_every_mistake_differs_from_the_right_answer_on_accepted_variants(name, params):
    _, env, item = solved(name, params)
    family = REGISTRY[name]
    assert acceptable(item, env).all()
    for part in item.parts:
        exact = env[part.step]
        for mistake in family.mistakes_for(part.step, item.params):
            wrong = mistake.fn(env, item.params, np)
            assert wrong.shape == exact.shape, (mistake.step, mistake.name)
            with np.errstate(invalid="ignore"):
                same = item.tolerance.passes(wrong, exact).reshape(len(ROSTER), -1).all(axis=1)
            assert not same.any(), (name, part.step, mistake.name)


def test_the_settings_reach_every_known_mistake():
    reached = set()
    for name, params in SETTINGS:
        family = REGISTRY[name]
        p = family.resolve(params)
        reached |= {(name, m.step, m.name) for s in family.askable_steps for m in family.mistakes_for(s, p)}
    every = {(name, m.step, m.name) for name in FORWARD for m in REGISTRY[name].misconceptions}
    assert every <= reached, every - reached
    assert all(REGISTRY[name].misconceptions for name in FORWARD)


@pytest.mark.parametrize("name, step, mistake, params", [
    ("attention.masked", "weights", "mask_after_softmax", {}),
    ("attention.masked", "scores", "strict_triangle", {}),
    ("attention.masked", "output", "padding_rows", {"mask": "padding"}),
    ("attention.multihead", "concat", "stacked_tokens", {}),
    ("attention.multihead", "scores", "scaled_by_d_model", {}),
    ("attention.layernorm", "var", "unbiased_variance", {}),
    ("attention.qk_swap", "swapped", "transposed_weights", {}),
    ("attention.masked", "weights", "transposed", {}),
    ("attention.masked", "scores", "zero_not_minus_inf", {"mask": "padding"}),
    ("attention.weights", "weights", "transposed", {"mask": "causal"}),
    ("attention.weights", "weights", "transposed", {"tokens": 4}),
    ("attention.output", "weights", "transposed", {"mask": "random"}),
    ("backprop.attention", "scores", "zero_not_minus_inf", {"mask": "causal", "tokens": 3}),
    ("backprop.attention", "weights", "zero_not_minus_inf", {"mask": "causal", "tokens": 3}),
    ("theory.softmax_jacobian", "jacobian", "diagonal_only", {}),
    ("theory.complexity", "additive_scores", "like_dot_product", {}),
    ("theory.dot_variance", "scaled_variance", "divided_by_root", {}),
])
def test_grader_names_the_mistake_a_student_made(name, step, mistake, params):
    ws, env, item = solved(name, params, ROSTER[:4])
    key = key_from_json(key_to_json(ws))
    (m,) = [x for x in REGISTRY[name].mistakes_for(step, item.params) if x.name == mistake]
    wrong = m.fn(env, item.params, np)
    part = next(p for p in item.parts if p.step == step)
    subs = []
    for i, student in enumerate(ROSTER[:4]):
        answers = dict(key.answers[i])
        answers[part.id] = _json_safe(wrong[i])
        subs.append(Submission("x", student, answers))
    report = grade(key, subs)
    for result in report.results:
        (graded,) = [p for p in result.parts if p.part == part.id]
        assert graded.verdict != "correct"
        assert m.feedback in graded.diagnosis


def _json_safe(value):
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        x = float(arr)
        return x if np.isfinite(x) else ("-inf" if x < 0 else "inf")
    return [_json_safe(v) for v in arr]


# ------------------------------------------------------------------- rendering and CLI


@pytest.mark.parametrize("name, params", SETTINGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(SETTINGS)])
def test_key_markdown_renders_every_part(name, params):
    ws, env, item = solved(name, params, ROSTER[:2])
    text = key_markdown(ws)
    assert "Traceback" not in text and "nan" not in text.lower()
    for part in item.parts:
        assert f"`{part.id}`" in text
    if name == "theory.dot_variance" and "dots" in [p.step for p in item.parts]:
        assert "empirical check" in text


def test_multihead_rejects_a_width_that_does_not_split():
    with pytest.raises(ValueError, match="multiple of heads"):
        REGISTRY["attention.multihead"].resolve({"d_model": 6, "heads": 4})


def test_dot_variance_rejects_a_range_without_squares():
    with pytest.raises(ValueError, match="no perfect square"):
        REGISTRY["theory.dot_variance"].resolve({"d_k_range": [17, 24]})


# --------------------------------------------------------------------------- properties

floats = st.floats(-3, 3, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 6), st.integers(1, 5), st.sampled_from(["causal", "padding", "causal_padding"]),
       st.integers(0, 2**31))
def test_masked_weights_are_rows_of_a_distribution_on_allowed_keys(n, d, kind, seed):
    # n ≥ 3: padding one key must leave at least two visible.
    rng = np.random.default_rng(seed)
    p = get_family("attention.masked").resolve({"mask": kind, "tokens": n, "d_k": d, "d_v": d})
    givens = get_family("attention.masked").sample(_FakeDraw(rng, 3), p)
    env = get_family("attention.masked").solve(givens, p)
    allowed = env["mask"] > 0.5
    np.testing.assert_allclose(env["weights"].sum(-1), 1.0, rtol=1e-12)
    assert (env["weights"][~allowed] == 0).all() and (env["weights"][allowed] > 0).all()
    for b in range(3):
        np.testing.assert_allclose(env["weights"][b], naive_softmax_rows(np.where(allowed[b], env["unmasked"][b], -np.inf)),
                                   rtol=1e-12, atol=1e-14)


class _FakeDraw:
    """A Draw stand-in with continuous values, for property tests of sampling-independent math."""

    def __init__(self, rng, size: int) -> None:
        self.rng, self.size, self.xp = rng, size, np

    def integers(self, low, high, shape=()):
        return self.rng.uniform(low - 1, high + 1, (self.size, *shape))

    def uniform(self, low, high, shape=()):
        return self.rng.uniform(low, high, (self.size, *shape))

    def choice(self, options, shape=()):
        return self.rng.integers(0, options, (self.size, *shape))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 5), st.sampled_from([(4, 1), (4, 2), (6, 3), (8, 4), (6, 2)]), st.integers(0, 2**31))
def test_multihead_equals_per_head_attention_and_one_head_is_plain_attention(n, shape, seed):
    d_model, h = shape
    rng = np.random.default_rng(seed)
    g = {"Q": rng.normal(size=(2, n, d_model)), "K": rng.normal(size=(2, n, d_model)),
         "V": rng.normal(size=(2, n, d_model)), "W_O": rng.normal(size=(2, d_model, d_model))}
    env, _ = batch_solve("attention.multihead", {"tokens": n, "d_model": d_model, "heads": h}, g)
    for b in range(2):
        heads, concat, y = naive_multihead(g["Q"][b], g["K"][b], g["V"][b], g["W_O"][b], h)
        np.testing.assert_allclose(env["output"][b], y, rtol=1e-10, atol=1e-12)
    one, _ = batch_solve("attention.multihead", {"tokens": n, "d_model": d_model, "heads": 1}, g)
    plain, _ = batch_solve("attention.qk_swap", {"tokens": n, "d_k": d_model}, {"Q": g["Q"], "K": g["K"]})
    np.testing.assert_allclose(one["output"], plain["weights"] @ g["V"] @ g["W_O"], rtol=1e-10, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(2, 8), st.floats(1e-6, 1.0), st.integers(0, 2**31))
def test_layernorm_rows_are_centred_and_scaled(n, d, eps, seed):
    rng = np.random.default_rng(seed)
    g = {"X": rng.normal(size=(2, n, d)) * 3, "Z": rng.normal(size=(2, n, d)),
         "gamma": rng.normal(size=(2, d)), "beta": rng.normal(size=(2, d))}
    env, _ = batch_solve("attention.layernorm", {"tokens": n, "d": d, "eps": eps}, g)
    xhat = env["normalized"]
    np.testing.assert_allclose(xhat.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose((xhat**2).mean(-1), env["var"] / (env["var"] + eps), rtol=1e-10)
    # γ and β act per feature: undoing them gives x̂ back.
    np.testing.assert_allclose((env["output"] - g["beta"][:, None, :]) / g["gamma"][:, None, :], xhat,
                               rtol=1e-8, atol=1e-8)


@settings(max_examples=60, deadline=None)
@given(st.lists(floats, min_size=2, max_size=7))
def test_softmax_jacobian_is_symmetric_rows_sum_to_zero_and_matches_differences(z):
    env, _ = batch_solve("theory.softmax_jacobian", {"size": len(z)}, {"z": [z]})
    j = env["jacobian"][0]
    np.testing.assert_allclose(j, j.T, atol=1e-15)
    np.testing.assert_allclose(j.sum(axis=1), 0.0, atol=1e-14)
    h = 1e-6
    for k in range(len(z)):
        up, down = list(z), list(z)
        up[k] += h
        down[k] -= h
        fd = (np.array(naive_softmax(up)) - np.array(naive_softmax(down))) / (2 * h)
        np.testing.assert_allclose(j[:, k], fd, rtol=1e-5, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(1, 6), st.integers(0, 2**31))
def test_swapped_weights_normalise_columns_of_s_not_rows(n, d, seed):
    rng = np.random.default_rng(seed)
    g = {"Q": rng.normal(size=(1, n, d)), "K": rng.normal(size=(1, n, d))}
    env, _ = batch_solve("attention.qk_swap", {"tokens": n, "d_k": d}, g)
    np.testing.assert_allclose(env["weights"].sum(-1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(env["swapped"].sum(-1), 1.0, rtol=1e-12)
    # Column j of A'ᵀ is column j of S normalised down the queries.
    np.testing.assert_allclose(env["swapped"][0].T.sum(0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(env["received"].sum(-1), n, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096), st.floats(0.1, 100))
def test_dot_variance_scaling_divides_the_variance_by_d_k(d_k, v):
    env, _ = batch_solve("theory.dot_variance", {"entry_var": v, "squares": False, "d_k_range": [1, 4096]},
                         {"d_k": [d_k], "q_samples": np.ones((1, 4, 4)), "k_samples": -np.ones((1, 4, 4))})
    assert env["variance"][0] == pytest.approx(d_k * v * v, rel=1e-12)
    assert env["scaled_variance"][0] == pytest.approx(v * v, rel=1e-12)
    assert env["three_sigma"][0] == pytest.approx(3 * math.sqrt(d_k) * v, rel=1e-12)
