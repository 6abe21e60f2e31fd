"""The static site's data: bands that reproduce the grader's tolerance test, carried pairs only where
the grader gives carried credit, public seeds, escaped text, and a page that loads nothing."""

from __future__ import annotations

import base64
import gzip
import json
import re

import numpy as np
import pytest

from qkvquiz import practice
from qkvquiz.core.tolerance import Tolerance
from qkvquiz.practice.static import check_data, target


@pytest.mark.parametrize("tol", [Tolerance("decimals", 2), Tolerance("sigfigs", 3), Tolerance("abs", 0.05),
                                 Tolerance("rel", 0.01), Tolerance("decimals", 0)])
def test_a_band_accepts_exactly_what_the_tolerance_passes(tol):
    rng = np.random.default_rng(1)
    exact = np.concatenate([rng.normal(0, 3, 200), [0.0, -np.inf, np.inf, 1e-5, 0.25, 100.0]])
    stored = target(tol, exact)
    for _ in range(20):
        given = exact + rng.normal(0, 0.03, exact.shape) * rng.choice([0, 0.1, 1, 10], exact.shape)
        given[np.isinf(exact)] = np.where(rng.random(np.isinf(exact).sum()) < 0.5, exact[np.isinf(exact)], 5.0)
        x = np.array([{"inf": np.inf, "-inf": -np.inf}.get(v, v) for v in stored["values"]], dtype=float)
        band = np.array(stored["band"])
        page = np.where(np.isfinite(x), np.abs(given - np.where(np.isfinite(x), x, 0)) <= band, given == x)
        assert (page == tol.passes(given, exact)).all()


def test_carried_pairs_are_those_the_grader_credits():
    (topic,) = practice.topics_for(["attention.output"])
    problem = practice.new_problem(topic, "static-1")
    data = check_data(problem)
    weights = data["parts"]["q1.weights"]
    assert [(c["input"], data["parts"][c["input"]]["mistakes"][c["mistake"]]["name"]) for c in weights["carried"]] == \
        [("q1.scores", "unscaled")]
    # Weights from a softmax over the wrong axis break "rows sum to 1": the grader carries nothing from them.
    assert data["parts"]["q1.output"]["carried"] == []


def test_the_site_is_public_self_contained_and_escapes_spec_text(tmp_path):
    spec = tmp_path / "mine.yaml"
    spec.write_text('title: "<script>alert(1)</script>"\nitems:\n  - family: attention.scores\n'
                    '    title: "<img src=x onerror=alert(2)>"\n', encoding="utf-8")
    topics = practice.topics_for([str(spec)])
    page = practice.build_static(topics, 2, tmp_path / "site", lang="en", seed="pub").read_text(encoding="utf-8")
    assert "<script>alert" not in page and "<img src=x" not in page and "&lt;img src=x" in page
    assert "Practice problems are public" in page
    assert not re.search(r"(src|href)=[\"']?(https?:)?//", page)
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', page).group(1)
    assert csp.startswith("default-src 'none'") and "connect-src" not in csp
    assert re.findall(r"script-src ([^;]*);", csp)[0].count("sha256-") == 2
    data = json.loads(page.split('id="practice-data">', 1)[1].split("</script>", 1)[0])
    doc = json.loads(gzip.decompress(base64.b64decode(data["topics"]["mine/1"]["variants"])))
    assert [v["seed"] for v in doc["variants"]] == ["pub-1", "pub-2"]
    for v in doc["variants"]:  # a public seed alone draws it again: no secret went in
        again = practice.new_problem(topics[0], v["seed"])
        assert not again.worksheet.keyed and again.code == v["code"]


def test_a_seed_too_long_for_the_variants_seeds_is_refused_before_anything_is_solved(tmp_path):
    topics = practice.topics_for(["attention.scores"])
    with pytest.raises(ValueError, match="at most 37"):
        practice.build_static(topics, 20, tmp_path / "site", lang="en", seed="s" * 40)
    assert not (tmp_path / "site").exists()
    # The longest seed that leaves room is taken.
    assert practice.build_static(topics, 20, tmp_path / "ok", lang="en", seed="s" * 37).is_file()


def test_the_static_page_says_it_carries_every_answer_in_its_source(tmp_path):
    topics = practice.topics_for(["attention.scores"])
    page = practice.build_static(topics, 1, tmp_path / "site", lang="en", seed="pub").read_text(encoding="utf-8")
    assert practice.ANSWERS_NOTICE in page
    served = practice.page_html(topics, mode="server", lang="en")
    assert practice.ANSWERS_NOTICE not in served  # the served page checks on the student's own computer
