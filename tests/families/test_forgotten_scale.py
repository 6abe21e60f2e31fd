"""A forgotten scale is named whatever the scale is: √d_k, √(a stated d_k), or a number."""

import numpy as np
import pytest

from ..helpers import ROSTER, assert_every_mistake_told_apart, solved

SCALES = [{}, {"stated_d_k": 16}, {"scale": 0.5}, {"scale": 3}]
FORGOTTEN = {"unscaled", "forgot_scale"}


def masked_raw(q, k, mask):
    """QKᵀ with −∞ where masked, written out entry by entry."""
    n, m = q.shape[-2], k.shape[-2]
    out = np.empty(q.shape[:-2] + (n, m))
    for idx in np.ndindex(*q.shape[:-2]):
        for i in range(n):
            for j in range(m):
                dot = sum(q[idx][i, d] * k[idx][j, d] for d in range(q.shape[-1]))
                out[idx][i, j] = dot if mask is None or mask[idx][i, j] else -np.inf
    return out


def forgotten(name: str, env) -> dict[str, np.ndarray]:
    """Each scaled step as a student who left the scale out computes it (independent of the family)."""
    if name == "attention.multihead":
        return {"scores": masked_raw(env["Qh"], env["Kh"], None)}
    if name.startswith("backprop.") and "dS" in env and "dQ" in env:
        ds, q, k = env["dS"], env["Q"], env["K"]
        out = {"dQ": np.einsum("...ij,...jd->...id", ds, k), "dK": np.einsum("...ij,...id->...jd", ds, q)}
        if name == "backprop.attention":
            out["scores"] = masked_raw(q, k, env["mask"])
        return out
    mask = env.get("mask")
    out = {"scores": masked_raw(env["Q"], env["K"], mask)}
    if name == "attention.masked":
        out["unmasked"] = masked_raw(env["Q"], env["K"], None)
    if name == "attention.qk_swap":
        out = {"scores": masked_raw(env["Q"], env["K"], None)}
    return out


FAMILIES = ["attention.scores", "attention.output", "attention.masked", "attention.qk_swap", "attention.multihead",
            "backprop.scores", "backprop.attention"]


def test_every_family_with_a_scale_is_listed_here():
    from qkvquiz.families import REGISTRY

    assert sorted(n for n, f in REGISTRY.items() if "scale" in f.params) == sorted(FAMILIES)


@pytest.mark.parametrize("scale", SCALES, ids=str)
@pytest.mark.parametrize("name", FAMILIES)
def test_a_forgotten_scale_is_a_known_mistake(name, scale):
    params = {"tokens": 3, **scale}
    if name == "attention.multihead":
        params["d_model"] = 4  # each head's d_k = 2
    _, env, item = solved(name, params, students=ROSTER[:8])
    n = env["Q"].shape[0]
    found = 0
    for step, wrong in forgotten(name, env).items():
        if step not in item.family.step_names:
            continue
        right = env[step]
        differs = ~item.tolerance.passes(wrong, right).reshape(n, -1).all(axis=1)
        named = np.zeros(n, dtype=bool)
        for mistake in item.family.mistakes_for(step, item.params):
            if mistake.name in FORGOTTEN:
                named |= item.tolerance.passes(wrong, mistake.fn(env, item.params, np)).reshape(n, -1).all(axis=1)
        assert named[differs].all(), f"{name} {scale}: a forgotten scale in {step} is not named"
        found += int(differs.sum())
    assert found, "the forgotten scale never changed an answer"
    # and the new mistakes never pass for the right answer
    assert_every_mistake_told_apart([(f"{name} {scale}", item, env)], [name], require_all=False)


def test_the_audit_names_a_forgotten_number_scale():
    from qkvquiz.grade.audit import audit_markdown, audit_spec

    q, k = [[1, 0, 1, 0], [0, 2, 0, 1]], [[1, 1, 0, 0], [0, 1, 1, 1]]
    raw = (np.array(q) @ np.array(k).T).tolist()
    for params, text in (({"scale": 0.5}, "multiplied by the scale"), ({"stated_d_k": 16}, "divided by √dₖ")):
        item = {"family": "attention.masked", "params": {"tokens": 2, "mask": "causal", **params},
                "givens": {"Q": q, "K": k, "V": [[1, 0], [0, 1]]}, "claimed": {"unmasked": raw}}
        report = audit_spec({"title": "t", "items": [item]})
        assert report.checks[0].verdict == "wrong" and report.checks[0].mistakes, params
        assert text in audit_markdown(report) and "No known mistake" not in audit_markdown(report)
