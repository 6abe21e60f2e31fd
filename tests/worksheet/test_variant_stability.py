"""A student's variant never changes with a new version of qkvquiz: the same spec, roster and seed
draw the same givens, so an instructor who regenerates a lost worksheet mid-term, or a set drawn
before an upgrade, gets the very problems the students have.

Changes that would break it and must not: a new known mistake that screens variants (it redraws
those where its answer is the right one; see ``Misconception.screens``), a new param counted in an
item's fingerprint (see ``Family.later_params``), a change to sampling or to the accept rules.
``variant_digests.txt`` holds the SHA-256 of every family's givens (its defaults, and two and three
tokens) and every bundled spec's, for a roster of 120 and one seed, as a release drew them. Where a
change is meant to draw other variants (a bug in sampling), regenerate the file and say so in the
release notes:

    python -m tests.worksheet.test_variant_stability > tests/worksheet/variant_digests.txt
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.core.resources import bank_dir
from qkvquiz.families import REGISTRY
from qkvquiz.spec import SpecError, load_spec, parse_spec
from qkvquiz.worksheet import build_worksheet

GOLDEN = Path(__file__).with_name("variant_digests.txt")
ROSTER = [f"s{i:03d}" for i in range(120)]
SEED = "term"
FORMS = ({}, {"tokens": 2}, {"tokens": 3})


def _digest(spec) -> list[str]:
    ws = build_worksheet(spec, ROSTER, seed=SEED)
    lines = []
    for item, env in zip(spec.items, ws.envs):
        for given in item.family.given_names:
            h = hashlib.sha256(np.ascontiguousarray(env[given], dtype=np.float64).tobytes()).hexdigest()[:16]
            lines.append(f"{item.id} {given} {h}")
    return lines


def cases() -> list[tuple[str, object]]:
    found: list[tuple[str, object]] = []
    for name in sorted(REGISTRY):
        for params in FORMS:
            try:
                spec = parse_spec({"title": "t", "items": [{"family": name, "params": dict(params)}]})
            except SpecError:  # a family without a token count
                continue
            found.append((f"{name} {sorted(params.items())}", spec))
    found += [(f"bank {p.stem}", p) for p in sorted(bank_dir().glob("*.yaml"))]
    return found


def digests(label: str, spec: object) -> list[str]:
    spec = load_spec(spec) if isinstance(spec, Path) else spec
    return [f"{label} | {line}" for line in _digest(spec)]


def golden() -> dict[str, list[str]]:
    by_case: dict[str, list[str]] = {}
    for line in GOLDEN.read_text(encoding="utf-8").splitlines():
        by_case.setdefault(line.split(" | ")[0], []).append(line)
    return by_case


@pytest.mark.slow
@pytest.mark.parametrize("label, spec", cases(), ids=[label for label, _ in cases()])
def test_the_same_seed_draws_the_same_variants_as_the_release_before(label, spec):
    expected = golden().get(label)
    assert expected is not None, f"{label}: not in {GOLDEN.name}; a new family or form: regenerate the file"
    assert digests(label, spec) == expected, (
        f"{label}: the same roster and seed now draw other givens; students' problems would change "
        f"(see this module's docstring)")


def test_a_mistake_that_does_not_screen_leaves_the_variants_alone(monkeypatch):
    # The mechanism itself: the transposed-weights mistake, which came after attention.weights was
    # published, would redraw the two-token variants whose weights mirror if it screened.
    from qkvquiz.families import qkv

    def drawn() -> list[str]:
        return _digest(parse_spec({"title": "t", "items": [{"family": "attention.weights", "params": {"tokens": 2}}]}))

    kept = drawn()
    family = REGISTRY["attention.weights"]
    screening = dataclasses.replace(qkv.TRANSPOSED_WEIGHTS, screens=True)
    mistakes = tuple(screening if m is qkv.TRANSPOSED_WEIGHTS else m for m in family.misconceptions)
    monkeypatch.setitem(REGISTRY, "attention.weights", dataclasses.replace(family, misconceptions=mistakes))
    assert drawn() != kept


if __name__ == "__main__":
    for label, spec in cases():
        print("\n".join(digests(label, spec)))
