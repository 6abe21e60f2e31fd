"""Where `--backend cupy` runs its work: on a GPU only where the work pays for the device.

A device costs seconds before its first result (CuPy's import, the CUDA context, each kernel's
first compilation), while a class's engine work on the CPU is often a fraction of a second. So the
command estimates its CPU work, keeps small work on the CPU without loading CuPy and says so, and
hands large work to the device. A stand-in CuPy (NumPy under CuPy's name, counting its calls)
shows which way the work went on any machine; CUDA machines run the real thing in test_gpu.py.
"""

from __future__ import annotations

import importlib.machinery
import json
import sys
import types

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.engine import backend
from qkvquiz.engine.backend import BackendUnavailable, place
from qkvquiz.grade import workload
from qkvquiz.grade.workload import grading_seconds
from qkvquiz.key import load_key
from qkvquiz.core.resources import bank_dir
from qkvquiz.spec import load_spec
from qkvquiz import worksheet
from qkvquiz.worksheet import screening_seconds

runner = CliRunner()


class StandIn(types.ModuleType):
    """NumPy posing as an installed CuPy with one CUDA device, counting the functions asked of it."""

    def __init__(self) -> None:
        super().__init__("cupy")
        self.__spec__ = importlib.machinery.ModuleSpec("cupy", None)
        self.calls = 0
        self.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(
            getDeviceCount=lambda: 1, CUDARuntimeError=RuntimeError))

    def __getattr__(self, name: str):
        self.calls += 1
        return getattr(np, name)


@pytest.fixture
def cupy(monkeypatch) -> StandIn:
    stand_in = StandIn()
    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    return stand_in


# ------------------------------------------------------------------------ the choice


def test_numpy_is_the_cpu_whatever_the_size():
    placement = place("numpy", 1e9)
    assert placement.xp is np and placement.note is None and not placement.on_device


def test_small_work_stays_on_the_cpu_and_says_why(cupy):
    placement = place("cupy", 0.3, break_even=20)
    assert placement.xp is np and not placement.on_device
    assert "computed on the CPU" in placement.note and "0.3 s" in placement.note and "20 s" in placement.note
    assert cupy.calls == 0  # nothing was asked of CuPy


def test_large_work_goes_to_the_device(cupy):
    placement = place("cupy", 25.0, break_even=20)
    assert placement.xp is cupy and placement.on_device and placement.note is None


def test_a_missing_cupy_is_reported_however_small_the_work(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailable, match=r"pip install 'qkvquiz\[gpu\]'"):
        place("cupy", 0.0)
    with pytest.raises(BackendUnavailable, match="numpy, cupy"):
        place("jax", 0.0)


# --------------------------------------------------------------------- the estimates


class Clock:
    """A clock that moves one second between readings: the estimates become counts, not timings."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_screening_estimate_scales_a_timed_probe_to_the_class(monkeypatch):
    monkeypatch.setattr(worksheet, "perf_counter", Clock())
    spec = load_spec(bank_dir() / "all-families.yaml")
    # One "second" per item's probe of PROBE candidates, scaled to the class (every draw of these
    # items is accepted about as often for any roster, so the ratio is the classes' ratio).
    small, large = screening_seconds(spec, 1_000), screening_seconds(spec, 100_000)
    assert large == pytest.approx(100 * small)
    assert small >= len(spec.items) * 1_000 / worksheet.PROBE  # at least a second per item per probe's worth


def test_the_grading_estimate_scales_a_timed_probe_to_the_submissions(tmp_path, monkeypatch):
    assert runner.invoke(app, ["generate", "backprop", "-n", "3", "-o", str(tmp_path / "s")]).exit_code == 0
    key = load_key(tmp_path / "s" / "key.json")
    monkeypatch.setattr(workload, "perf_counter", Clock())
    assert grading_seconds(key, 0) == 0.0
    assert grading_seconds(key, 100_000) == pytest.approx(1.0 / workload.PROBE * 100_000)


# ------------------------------------------------------------------------- commands


def _set(tmp_path, name: str, *extra: str):
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "4", "-o", str(tmp_path / name),
                                 "--seed", "3", *extra])
    assert result.exit_code == 0, result.output
    return result, json.loads((tmp_path / name / "key.json").read_text(encoding="utf-8"))


def test_generate_keeps_a_small_class_on_the_cpu_and_says_so(tmp_path, cupy):
    result, doc = _set(tmp_path, "gpu", "--backend", "cupy")
    assert "computed on the CPU" in result.output
    assert cupy.calls == 0
    assert doc == _set(tmp_path, "cpu")[1]


def test_generate_hands_large_work_to_the_device(tmp_path, cupy, monkeypatch):
    monkeypatch.setattr(backend.place, "__kwdefaults__", {"break_even": 0.0})
    result, doc = _set(tmp_path, "gpu", "--backend", "cupy")
    assert "computed on the CPU" not in result.output
    assert cupy.calls > 0  # the candidates were screened on the device
    assert doc == _set(tmp_path, "cpu")[1]  # and the key is the same


def test_grade_weighs_its_own_work(tmp_path, cupy, monkeypatch):
    _set(tmp_path, "s")
    doc = json.loads((tmp_path / "s" / "key.json").read_text(encoding="utf-8"))
    sub = tmp_path / "s01.json"
    sub.write_text(json.dumps({"student": doc["students"][0]["student"],
                               "answers": doc["students"][0]["answers"]}), encoding="utf-8")
    key = str(tmp_path / "s" / "key.json")
    small = runner.invoke(app, ["grade", key, str(sub), "-o", str(tmp_path / "g1"), "--backend", "cupy"])
    assert small.exit_code == 0 and "computed on the CPU" in small.output and cupy.calls == 0
    monkeypatch.setattr(backend.place, "__kwdefaults__", {"break_even": 0.0})
    large = runner.invoke(app, ["grade", key, str(sub), "-o", str(tmp_path / "g2"), "--backend", "cupy"])
    assert large.exit_code == 0 and "computed on the CPU" not in large.output and cupy.calls > 0
    assert ((tmp_path / "g1" / "results.json").read_bytes() == (tmp_path / "g2" / "results.json").read_bytes())


def test_the_library_weighs_a_gpu_as_the_commands_do(tmp_path, cupy, monkeypatch):
    """A notebook's grade_files(xp=cupy) gets the break-even the command gets: small work stays on
    the CPU (said in a warning, or to ``notes``); large work goes to the device; the same report."""
    from qkvquiz.engine.backend import BackendNote
    from qkvquiz.exchange.collect import collect, grade_collected
    from qkvquiz.grade.grader import grade_files

    _, doc = _set(tmp_path, "s")
    sub = tmp_path / "s01.json"
    sub.write_text(json.dumps({"student": doc["students"][0]["student"],
                               "answers": doc["students"][0]["answers"]}), encoding="utf-8")
    key = load_key(tmp_path / "s" / "key.json")
    with pytest.warns(BackendNote, match="computed on the CPU"):
        small = grade_files(key, [sub], xp=cupy)
    said: list[str] = []
    collected = grade_collected(key, collect([sub]), xp="cupy", notes=said.append)
    assert cupy.calls == 0 and len(said) == 1 and "computed on the CPU" in said[0]
    monkeypatch.setattr(backend.place, "__kwdefaults__", {"break_even": 0.0})
    large = grade_files(key, [sub], xp=cupy)
    assert cupy.calls > 0
    assert small.to_json() == large.to_json() == collected.to_json()
