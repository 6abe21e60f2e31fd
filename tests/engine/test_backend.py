"""The backend switch: numpy by default, cupy on request, a clear message where it is missing.

Where CuPy and a GPU are present, a key solved with cupy equals the numpy one exactly (the
CuPy-only checks of every engine function are in test_gpu.py). Elsewhere, an array namespace
that records its calls stands in for a device backend to show that the work goes through
``xp`` and that results come back to the host unchanged.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz import worksheet
from qkvquiz.cli import app
from qkvquiz.engine.backend import BackendUnavailable, get_xp, to_numpy
from benchmarks.kernels.batching import batched, chunk_slices
from qkvquiz.core.submissions import Submission
from qkvquiz.grade.grader import grade
from qkvquiz.key import key_from_json, key_to_json
from qkvquiz.spec import parse_spec

from ..helpers import BASIC_ITEMS

runner = CliRunner()

ITEMS = BASIC_ITEMS + [
    {"family": "attention.scores", "params": {"scaled": False, "tokens": 4}},
    {"family": "attention.weights", "params": {"mask": "padding", "tokens": 4, "padded": 1}},
]
ROSTER = [f"s{i:02d}" for i in range(20)]


class Recording:
    """NumPy under another name, counting which functions the code asked it for."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str):
        self.calls[name] = self.calls.get(name, 0) + 1
        return getattr(np, name)


def key_doc(xp=np, students=ROSTER) -> dict:
    ws = worksheet.build_worksheet(parse_spec({"title": "T", "items": ITEMS}), students, "7", xp=xp)
    return json.loads(json.dumps(key_to_json(ws)))


@pytest.fixture
def no_cupy(monkeypatch):
    """CuPy missing, whatever this machine has: importing it fails."""
    monkeypatch.setitem(sys.modules, "cupy", None)


# ------------------------------------------------------------------------- choosing


def test_numpy_is_the_default_backend():
    assert get_xp() is np and get_xp("numpy") is np


def test_unknown_backend_names_the_choices():
    with pytest.raises(BackendUnavailable, match="numpy, cupy"):
        get_xp("jax")


def test_missing_cupy_says_how_to_install_it(no_cupy):
    with pytest.raises(BackendUnavailable, match=r"pip install 'qkvquiz\[gpu\]'"):
        get_xp("cupy")


def test_generate_with_missing_cupy_fails_with_the_install_hint(tmp_path, no_cupy):
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "2", "-o", str(tmp_path / "s"),
                                 "--backend", "cupy"])
    assert result.exit_code == 2
    assert "pip install 'qkvquiz[gpu]'" in result.output
    assert not (tmp_path / "s" / "key.json").exists()


def test_grade_takes_a_backend_and_refuses_a_missing_one(tmp_path, no_cupy):
    assert runner.invoke(app, ["generate", "attention-basics", "-n", "2", "-o", str(tmp_path / "s")]).exit_code == 0
    key = str(tmp_path / "s" / "key.json")
    # The key's own answers, handed in as a submission, score full marks with --backend numpy.
    doc = json.loads((tmp_path / "s" / "key.json").read_text(encoding="utf-8"))
    sub = tmp_path / "s01.json"
    sub.write_text(json.dumps({"student": "s01", "answers": doc["students"][0]["answers"]}), encoding="utf-8")
    ok = runner.invoke(app, ["grade", key, str(sub), "-o", str(tmp_path / "g"), "--backend", "numpy"])
    assert ok.exit_code == 0, ok.output
    missing = runner.invoke(app, ["grade", key, str(sub), "-o", str(tmp_path / "g2"), "--backend", "cupy"])
    assert missing.exit_code == 2 and "pip install 'qkvquiz[gpu]'" in missing.output
    assert not (tmp_path / "g2").exists()


# --------------------------------------------------------------- solving through xp


def test_a_key_solved_through_another_namespace_is_identical():
    xp = Recording()
    assert key_doc(xp) == key_doc(np)
    assert xp.calls.get("asarray", 0) > 0  # the draws went to the backend


def test_large_classes_are_screened_in_bounded_batches(monkeypatch):
    whole = key_doc()
    monkeypatch.setattr(worksheet, "MAX_BATCH", 5)  # fewer candidates per call than one round needs
    calls: list[tuple[int, int]] = []
    screen = worksheet._screen

    def spy(item, keys, first, count, *rest):
        calls.append((len(keys), count))
        return screen(item, keys, first, count, *rest)

    monkeypatch.setattr(worksheet, "_screen", spy)
    assert key_doc() == whole
    # At most MAX_BATCH candidates per call, except that one student's round is indivisible.
    assert all(keys * count <= max(5, count) for keys, count in calls)
    assert len(calls) > len(ITEMS) * len(ROSTER) // 5


@pytest.mark.parametrize("first_round", [1, 3, 8])
def test_the_first_rounds_size_never_changes_a_students_variant(monkeypatch, first_round):
    # Each student gets the first acceptable candidate in a fixed order, however many are
    # screened per round: the round's size is a matter of speed only.
    whole = key_doc()
    monkeypatch.setattr(worksheet, "FIRST_ROUND", first_round)
    rounds: list[int] = []
    screen = worksheet._screen

    def spy(item, keys, first, count, *rest):
        rounds.append(count)
        return screen(item, keys, first, count, *rest)

    monkeypatch.setattr(worksheet, "_screen", spy)
    assert key_doc() == whole
    assert min(rounds) == first_round
    assert first_round > 1 or max(rounds) > 1  # with rounds of one, some students needed a later round


def test_grading_through_another_namespace_gives_the_same_report():
    doc = key_doc(students=ROSTER[:6])
    key = key_from_json(doc)
    subs = []
    for i, s in enumerate(doc["students"]):
        answers = json.loads(json.dumps(s["answers"]))
        if i % 2:  # a slip in a score carries into the weights: exercises diagnosis and ECF
            answers["q3.scores"] = (np.array(answers["q3.scores"], dtype=float) * 2).tolist()
        subs.append(Submission(f"{s['student']}.json", s["student"], answers))
    xp = Recording()
    assert grade(key, subs, xp=xp).to_json() == grade(key, subs).to_json()
    assert xp.calls.get("asarray", 0) > 0


@pytest.mark.gpu
def test_key_is_identical_whichever_backend_solved_it():
    pytest.importorskip("cupy")
    try:
        cp = get_xp("cupy")
    except BackendUnavailable as exc:
        pytest.skip(str(exc))
    assert key_doc(cp) == key_doc(np)


# -------------------------------------------------------------------------- batched


def test_chunk_slices_cover_the_range_once():
    parts = list(chunk_slices(10, 4))
    assert [(p.start, p.stop) for p in parts] == [(0, 4), (4, 8), (8, 10)]
    with pytest.raises(ValueError):
        list(chunk_slices(10, 0))


def test_batched_equals_one_call_and_never_sees_more_than_a_chunk():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((103, 3, 3)), rng.standard_normal((103, 3))
    sizes: list[int] = []

    def fn(x, y):
        sizes.append(x.shape[0])
        return {"prod": x @ y[..., None], "sum": x.sum(axis=(1, 2))}

    whole = fn(a, b)
    sizes.clear()
    got = batched(fn, [a, b], chunk=10)
    assert max(sizes) == 10 and sum(sizes) == 103
    np.testing.assert_array_equal(got["prod"], whole["prod"])
    np.testing.assert_array_equal(got["sum"], whole["sum"])
    pair = batched(lambda x: (x, -x), [a], chunk=7)
    assert isinstance(pair, tuple) and np.array_equal(pair[1], -a)
    single = batched(lambda x: x * 2, [a], chunk=1000)
    assert isinstance(single, np.ndarray) and np.array_equal(single, a * 2)


def test_batched_handles_an_empty_batch_and_refuses_mismatched_inputs():
    empty = batched(lambda x: x + 1, [np.zeros((0, 2))], chunk=4)
    assert empty.shape == (0, 2)
    with pytest.raises(ValueError, match="same leading"):
        batched(lambda x, y: x, [np.zeros((3, 2)), np.zeros((4, 2))])
    with pytest.raises(ValueError, match="leading axis"):
        batched(lambda x: x.T, [np.zeros((3, 2))], chunk=3)


def test_batched_moves_chunks_through_the_backend_and_returns_numpy():
    xp = Recording()
    got = batched(lambda x: xp.exp(x), [np.zeros((5, 2))], chunk=2, xp=xp)
    assert type(got) is np.ndarray and np.array_equal(got, np.ones((5, 2)))
    assert xp.calls["asarray"] == 3 and xp.calls["exp"] == 3
    assert type(to_numpy(got)) is np.ndarray
