"""Rendering at class scale gives the same text as rendering one number and one student at a time.

The bundled templates render in a plain Jinja environment (they are our own code); a user's
templates keep the sandbox. Numbers are formatted through a memo and matrices in one pass:
both must write exactly what the one-number-at-a-time formatting below writes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import jinja2
import numpy as np
import pytest

from qkvquiz import build_worksheet, load_spec
from qkvquiz.render.latex import bmatrix, num
from qkvquiz.render.markdown import (
    environment,
    key_markdown,
    render_items,
    render_student,
    render_template,
    worksheet_markdown,
)
from qkvquiz.render.sandbox import TemplateSandbox
from qkvquiz.core.resources import bank_dir

from ..helpers import stop_while_workers_run

# ------------------------------------------------------------------ the reference formatting
# num and bmatrix as they were written first, one number at a time with NumPy's own round.


def reference_num(x, decimals=3):
    x = float(x)
    if np.isinf(x):
        return r"-\infty" if x < 0 else r"\infty"
    if x.is_integer():
        return str(int(x))
    text = f"{x:.{decimals}f}"
    if float(text) == 0:
        return "0"
    if float(text) == x:
        text = text.rstrip("0")
    return text


def _reference_fixed(x, decimals):
    if np.isinf(x):
        return reference_num(x)
    if float(x).is_integer():  # an exact integer as the worked steps write it (−2, not −2.0)
        return str(int(x)) if x else "0"
    text = f"{x:.{decimals}f}"
    return text.replace("-", "") if float(text) == 0 else text


def reference_bmatrix(value, decimals=3):
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        return reference_num(arr, decimals)
    finite = arr[np.isfinite(arr)]
    same_width = bool(finite.size) and not np.all(finite == np.round(finite))
    if same_width:
        decimals = next((k for k in range(1, decimals) if np.all(np.round(finite, k) == finite)), decimals)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim > 2:
        return ",\\ ".join(reference_bmatrix(a, decimals) for a in arr)
    rows = r" \\ ".join(
        " & ".join(reference_num(v, decimals) if not same_width else _reference_fixed(v, decimals) for v in r)
        for r in arr
    )
    return r"\begin{bmatrix} " + rows + r" \end{bmatrix}"


SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e308, -1e308, 5e-324, -5e-324, 2.0**52, 2.0**53 + 2, 0.5, -0.5,
           1.5, 2.5, -2.5, 0.125, 0.0625, 1.0005, 2.675, -0.0004, 0.0004, 0.00049999, 1e-9, -1e-9, 123456789.125,
           1e15 + 0.5, 3.0, -7.0, 0.1, 0.2, 0.3]


def _sample(rng: np.random.Generator, size: int) -> np.ndarray:
    """Values as exercises have them (small integers, halves, thirds, exps) and as they never should."""
    kinds = [
        lambda n: rng.normal(size=n) * 10.0 ** rng.integers(-12, 13, n),
        lambda n: rng.integers(-20, 21, n).astype(float),
        lambda n: rng.integers(-40, 41, n) / rng.choice([2, 4, 8, 10, 100, 1000], n),
        lambda n: np.exp(rng.normal(size=n)),
        lambda n: rng.integers(-3, 4, n) / 3,
        lambda n: rng.choice(SPECIAL, n),
    ]
    return np.concatenate([k(size) for k in kinds])


@pytest.mark.slow
def test_num_writes_what_one_number_at_a_time_writes():
    rng = np.random.default_rng(17)
    values = _sample(rng, 20_000)
    for decimals in (0, 1, 2, 3, 4, 6, 9):
        for x in values.tolist():
            assert num(x, decimals) == reference_num(x, decimals), (x, decimals)
            assert num(x, decimals) == reference_num(x, decimals), (x, decimals)  # the second time, from the memo
    with np.errstate(over="ignore"):  # the largest specials become float32 infinities
        for x in SPECIAL:
            assert num(np.float64(x)) == reference_num(x)
            assert num(np.float32(x)) == reference_num(np.float32(x))
    assert num(-0.0) == num(0.0) == "0"
    assert num(-0.0004) == "0" and num(-0.0004, 4) == "-0.0004"
    assert num(7) == "7" and num(True) == "1"


def test_num_keeps_its_errors():
    with pytest.raises(ValueError):
        num(0.5, 2.0)  # a float of decimals is refused by the format, memo or not
    with pytest.raises(ValueError):
        num(0.5, -1)
    assert num(3.0, 2.0) == "3"  # an integer needs no decimals


@pytest.mark.slow
def test_bmatrix_writes_what_entry_by_entry_formatting_writes():
    rng = np.random.default_rng(3)
    values = _sample(rng, 4_000)
    shapes = [(1,), (3,), (2, 2), (3, 4), (4, 1), (1, 5), (2, 2, 3), (0,), (0, 3), (3, 0), (2, 0, 2)]
    for trial in range(3_000):
        shape = shapes[trial % len(shapes)]
        size = int(np.prod(shape))
        mode = trial % 4
        if mode == 0:  # mixed values
            arr = rng.choice(values, size)
        elif mode == 1:  # all integers, perhaps with infinities
            arr = rng.choice([-2.0, 0.0, -0.0, 1.0, 5.0, np.inf, -np.inf], size)
        elif mode == 2:  # halves and quarters: fewer decimals than asked
            arr = rng.integers(-8, 9, size) / rng.choice([2, 4], size)
        else:  # nearly zero, of both signs (−0 must never show)
            arr = rng.choice([-0.0001, 0.0001, -0.00049, 0.25, -0.0, 1e-12, -1e-12, np.nan], size)
        arr = arr.reshape(shape)
        with np.errstate(over="ignore"):  # values near the float range overflow times 10^k, both ways alike
            for decimals in (0, 1, 2, 3, 4, 8, 9):
                assert bmatrix(arr, decimals) == reference_bmatrix(arr, decimals), (arr, decimals)
            assert bmatrix(arr.tolist()) == reference_bmatrix(arr.tolist())
    assert bmatrix(np.float64(2.5)) == reference_bmatrix(2.5) == "2.5"
    assert bmatrix([1.0, 2.0], np.int64(2)) == reference_bmatrix([1.0, 2.0], np.int64(2))
    assert bmatrix([1.5, 2.25], np.int64(3)) == reference_bmatrix([1.5, 2.25], np.int64(3))


# ------------------------------------------------------------------ environments


def test_bundled_templates_render_without_the_sandbox_and_a_users_with_it(tmp_path):
    bundled = environment()
    assert type(bundled) is jinja2.Environment  # plain Jinja: no sandbox, nothing of ours overridden
    assert environment() is bundled  # compiled once per process
    (tmp_path / "page.md.j2").write_text("{{ x|num(2) }}", encoding="utf-8")
    assert isinstance(environment(str(tmp_path)), TemplateSandbox)
    # The bundled templates see the same pure-math np as a user's: a copied template renders alike.
    assert bundled.globals["np"] is environment(str(tmp_path)).globals["np"]
    assert "lipsum" not in bundled.globals
    assert render_template(["page.md.j2"], {"x": 2.345}, str(tmp_path)) == "2.35"  # in the worker, sandboxed


def test_a_users_template_is_still_refused_what_the_sandbox_refuses(tmp_path):

    (tmp_path / "evil.md.j2").write_text("{{ ''.__class__.__mro__ }}", encoding="utf-8")
    with pytest.raises(jinja2.TemplateError):
        render_template(["evil.md.j2"], {}, str(tmp_path))


def test_bundled_html_templates_still_autoescape():
    env = environment()
    assert env.autoescape("answer-form.html.j2") and not env.autoescape("key.md.j2")


# ------------------------------------------------------------------ one render per student


@pytest.fixture(scope="module")
def basics():
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    return build_worksheet(spec, ["ada", "bo", "cy"], "fast")


def test_a_students_problems_render_once_for_the_worksheet_and_the_key(basics):
    ws = basics
    rendered = [render_student(ws, i) for i in range(len(ws.students))]
    for i, texts in enumerate(rendered):
        assert texts["problem"] == render_items(ws, i, "problem")
        assert texts["solution"] == render_items(ws, i, "solution")
        assert worksheet_markdown(ws, i, problems=texts["problem"]) == worksheet_markdown(ws, i)
    assert key_markdown(ws, rendered=rendered) == key_markdown(ws)
    assert key_markdown(ws, [2, 0], rendered=[rendered[2], rendered[0]]) == key_markdown(ws, [2, 0])


@pytest.mark.parametrize("spec_name", ["attention-basics", "delta-rule"])
def test_what_a_template_sees_shares_no_memory_with_the_solved_worksheet(spec_name):
    from qkvquiz.render.markdown import item_context

    ws = build_worksheet(load_spec(bank_dir() / f"{spec_name}.yaml"), ["a", "b"], 3)
    stored = [a for env in ws.envs for a in env.values()]
    for number, variant in enumerate(ws.variant(1), start=1):
        ctx = item_context(variant["item"], number, variant["givens"], variant["steps"])
        for name, value in [*ctx["g"].items(), *ctx["s"].items()]:
            for array in value if isinstance(value, list) else [value]:  # a padded sequence: its chunks
                assert isinstance(array, (np.ndarray, np.float64)), name
                assert not any(np.shares_memory(array, a) for a in stored), name
                expected = variant["givens"].get(name, variant["steps"].get(name))
                if not isinstance(value, list):
                    np.testing.assert_array_equal(array, expected)


# ------------------------------------------------------------------ a class in a pool of processes


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def class_spec():
    return load_spec(bank_dir() / "attention-basics.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_class_rendered_in_a_pool_writes_the_same_files_as_one_process(class_spec, tmp_path, lang):
    from qkvquiz.generate import POOL_MIN_STUDENTS, generate_set

    ids = [f"p{i:03d}" for i in range(POOL_MIN_STUDENTS + 9)]
    ticks = []
    generate_set(class_spec, ids, tmp_path / "one", seed=5, workers=1, lang=lang)
    generate_set(class_spec, ids, tmp_path / "pool", seed=5, workers=2, progress=lambda: ticks.append(1), lang=lang)
    one, pool = _tree(tmp_path / "one"), _tree(tmp_path / "pool")
    assert len(one) == 2 * len(ids) + 2 and one == pool
    assert ("答案" in one["key.md"].decode()) == (lang == "zh")  # key.md, written in its own thread, in the set's language
    assert len(ticks) == len(ids)  # every student is told once


@pytest.mark.parametrize("n, workers", [(64, 2), (73, 2), (300, 2), (301, 3), (5000, 16), (1, 1)])
def test_a_classs_chunks_cover_it_in_order_and_the_last_are_small(n, workers):
    from qkvquiz.generate import _STUDENTS_PER_CHUNK, _chunks

    chunks = _chunks(n, workers)
    assert [i for start, end in chunks for i in range(start, end)] == list(range(n))
    sizes = [end - start for start, end in chunks]
    assert max(sizes) <= _STUDENTS_PER_CHUNK and sizes == sorted(sizes, reverse=True)
    # What one worker may render alone at the end is a few students, not a whole chunk.
    assert sum(sizes[-workers:]) <= 4 * workers


def test_texts_arriving_in_order_are_read_as_they_come_and_a_failure_stops_the_reader():
    import threading

    from qkvquiz.generate import _Abandoned, _Arriving

    arriving, seen, reading = _Arriving(), [], threading.Event()

    def read():
        for item in arriving:
            seen.append(item)
            reading.set()

    reader = threading.Thread(target=read)
    reader.start()
    arriving.extend([1, 2])
    assert reading.wait(5)
    arriving.extend([3])
    arriving.finish()
    reader.join(5)
    assert seen == [1, 2, 3] and not reader.is_alive() and list(arriving) == [1, 2, 3]

    stopped = _Arriving()
    stopped.extend(["a"])
    items = iter(stopped)
    assert next(items) == "a"
    stopped.abandon()
    with pytest.raises(_Abandoned):
        next(items)


@pytest.mark.slow
def test_a_failure_in_the_pool_leaves_the_previous_set(class_spec, tmp_path, monkeypatch):
    import qkvquiz.generate as generate

    ids = [f"p{i:03d}" for i in range(generate.POOL_MIN_STUDENTS + 9)]
    generate.generate_set(class_spec, ids[:3], tmp_path / "o", seed=5)
    before = _tree(tmp_path / "o")
    real = generate.render_student

    def fails_for_one(ws, i, **kwargs):  # the forked workers inherit this
        if ws.students[i] == ids[40]:
            raise RuntimeError("the disk caught fire")
        return real(ws, i, **kwargs)

    monkeypatch.setattr(generate, "render_student", fails_for_one)
    with pytest.raises(RuntimeError, match="caught fire"):
        generate.generate_set(class_spec, ids, tmp_path / "o", seed=6, force=True, workers=2)
    assert _tree(tmp_path / "o") == before
    assert not [p for p in (tmp_path / "o").iterdir() if p.name.startswith(".qkvquiz")]


# ------------------------------------------------------------------ key.json's text


def _reference_dump(obj, depth=0):
    """dumps as first written: one JSONEncoder call per leaf, a Python check per entry."""
    import json
    from collections.abc import Mapping

    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    leaves = (int, float, str, bool, type(None))

    def nested(value):
        return type(value) not in leaves and isinstance(value, (list, Mapping))

    pad, inner = "  " * depth, "  " * (depth + 1)
    if type(obj) not in leaves and isinstance(obj, Mapping) and obj:
        body = ",\n".join(f"{inner}{encode(str(k))}: {_reference_dump(v, depth + 1)}" for k, v in obj.items())
        return "{\n" + body + "\n" + pad + "}"
    if isinstance(obj, list) and any(nested(v) for v in obj):
        return "[\n" + ",\n".join(inner + _reference_dump(v, depth + 1) for v in obj) + "\n" + pad + "]"
    return encode(obj)


def test_key_json_text_is_what_it_was(class_spec):
    import json

    from qkvquiz.json_rows import dumps
    from qkvquiz.key import key_to_json

    ws = build_worksheet(class_spec, ["ada", "Zoë", "a\"b", "x\\y"], "fast")
    doc = key_to_json(ws)
    assert dumps(doc) == _reference_dump(doc) + "\n"
    odd = {"a": [], "b": {}, "c": [[], [1, [2, {"k": None}]], (1, 2), "t"], "d": [True, False, None, 1.5, -0.0],
           "e": [[1.0, "inf"], ["-inf", 2]], "é": "ü\n\t\"", "f": [{"x": [[1, 2], [3, 4]]}, [[[1], [2]], [[3], [4]]]],
           7: "seven", "g": [float(2**60), 10**30, -3]}
    assert dumps(odd) == _reference_dump(odd) + "\n"
    assert json.loads(dumps(odd))["f"][1] == [[[1], [2]], [[3], [4]]]
    for bad in ({"x": float("nan")}, {"x": [1, object()]}):
        with pytest.raises((ValueError, TypeError)) as got:
            dumps(bad)
        with pytest.raises(got.type, match=str(got.value).split(" at ")[0][:30]):
            _reference_dump(bad)


@pytest.mark.parametrize("spec_file", sorted(p.name for p in bank_dir().glob("*.yaml")))
def test_key_text_equals_the_key_document_written_out(spec_file):
    from qkvquiz.json_rows import dumps
    from qkvquiz.key import key_text, key_to_json

    ws = build_worksheet(load_spec(bank_dir() / spec_file), ["ada", "bo", "cy", "dee"], "text")
    assert key_text(ws) == dumps(key_to_json(ws)) == _reference_dump(key_to_json(ws)) + "\n"


# ------------------------------------------------------------------ the trusted environment is Jinja's


@pytest.mark.parametrize("expression", [
    "d.a", "d['a']", "d.items is defined", "d.keys()|list|length", "d.get('a')", "d.missing is defined",
    "r.name", "r['name']", "r.missing is defined", "r._fields is defined", "r.__class__ is defined",
    "a.shape", "a.sum()", "(a * a).sum()", "a[1]", "np.exp(0.0)", "zip([1], [2])|list", "range(3)|list",
    "'%05.1f' % 2.25", "'{:>4}'.format(7)", "s.upper()", "s.missing is defined", "[1, 2].missing is defined",
    "(1.5).is_integer()", "none is none", "lst|map(attribute='k')|list",
])
def test_the_bundled_environment_reads_values_as_jinja_does(expression):

    from qkvquiz.render.sandbox import Record

    values = dict(d={"a": 1, "items": 2}, r=Record(name="ada", points=2), a=np.array([1.0, 2.0, 3.0]),
                  s="text", lst=[{"k": 1}, {"k": 2}])
    ours = environment().from_string("{{ " + expression + " }}")
    plain = jinja2.Environment(undefined=jinja2.StrictUndefined)
    plain.globals.update(np=environment().globals["np"], zip=zip)
    assert ours.render(values) == plain.from_string("{{ " + expression + " }}").render(values)


def test_an_undefined_entry_is_still_an_error_in_the_bundled_environment():

    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ d.nothing + 1 }}").render(d={"a": 1})


def test_generating_does_not_load_numpy_extras():
    import subprocess
    import sys

    # Counted after numpy's own import: numpy 1.26 (our floor below Python 3.13) loads numpy.polynomial
    # itself; 2.x leaves it for first use.
    code = ("import sys, numpy; before = set(sys.modules); import qkvquiz.generate, qkvquiz.render.markdown; "
            "print(sorted(m for m in ('numpy.f2py', 'numpy.testing', 'numpy.polynomial', 'unittest', 'concurrent.futures') "
            "if m in sys.modules and m not in before))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ------------------------------------------------------------------ the pool ends with the run

@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; the pool forks on Linux only")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_rendering_workers_end_with_the_run_and_the_old_set_stays(sig, class_spec, tmp_path):
    from pathlib import Path

    from qkvquiz.generate import generate_set
    from qkvquiz.core.outputs import recover, settle

    out = tmp_path / "set"
    generate_set(class_spec, ["ada", "bo"], out, seed=1)
    before = _tree(out)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-m", "qkvquiz", "generate", "attention-basics", "-n", "3000", "--seed", "new", "--force",
         "--public", "--workers", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)})
    stop_while_workers_run(proc, sig, start_within=120, running=0.5, exit_within=60, gone_within=5)
    settle(out)
    recover(out)  # a SIGKILL leaves its staging folder for the next run to remove
    assert _tree(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".qkvquiz")]


@pytest.mark.slow
def test_a_full_disk_in_a_rendering_worker_names_the_path(class_spec, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from qkvquiz.cli import app
    from qkvquiz.generate import POOL_MIN_STUDENTS

    real_open = os.open

    def full(path, flags, *args, **kw):  # the forked workers inherit it
        if flags & os.O_CREAT and ".qkvquiz-staging-" in str(path) and str(path).endswith("s050/worksheet.md"):
            raise OSError(28, "No space left on device", str(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", full)
    out = tmp_path / "set"
    result = CliRunner().invoke(app, ["generate", "attention-basics", "-n", str(POOL_MIN_STUDENTS + 36), "--public",
                                      "--workers", "2", "--out", str(out)])
    monkeypatch.setattr(os, "open", real_open)
    assert result.exit_code == 2 and "Traceback" not in result.output
    text = result.output.replace("\n", "")
    assert f"cannot write {out}/students/s050/worksheet.md" in text and "No space left" in text
    assert not out.exists() or not [p for p in out.iterdir() if p.name != ".qkvquiz-lock"]


def test_a_column_of_arrays_is_written_as_each_array_alone():
    from qkvquiz.json_rows import _dump, row_texts as _texts
    from qkvquiz.key import encode

    rng = np.random.default_rng(11)
    for shape in [(), (1,), (3,), (2, 2), (1, 3), (3, 1), (2, 3, 2), (2, 1, 2, 2), (0,), (2, 0)]:
        for kind in range(3):
            column = rng.normal(size=(5, *shape)) * 10.0 ** rng.integers(-3, 20)
            if kind == 1:
                column = np.round(column)
            if kind == 2:
                column.flat[:: 3] = np.inf
                column.flat[1:: 4] = -np.inf
            values = encode(column)
            for depth in (0, 4, 5):
                assert _texts(values, shape, depth) == [_dump(v, depth) for v in values], (shape, kind, depth)


def test_html_pages_from_generate_equal_pages_built_alone(class_spec, tmp_path):
    # generate hands the problems it rendered for the Markdown to the HTML pages (and the PDFs'
    # documents): the pages are those the library builds from nothing.
    from qkvquiz.generate import generate_set
    from qkvquiz.render.documents import key_html_document, worksheet_document

    result = generate_set(class_spec, ["ada", "bo"], tmp_path / "set", seed="html", formats="md,html")
    ws = result.worksheet
    for i, student in enumerate(ws.students):
        page = (result.folders[student] / "worksheet.html").read_text(encoding="utf-8")
        assert page == worksheet_document(ws, i)
    assert (tmp_path / "set" / "key.html").read_text(encoding="utf-8") == key_html_document(ws)


def test_documents_of_one_layout_are_written_as_dump_writes_them():
    from qkvquiz.json_rows import Dumped, _dump, dumped
    from qkvquiz.json_rows import same_layout as _same_layout

    docs = [{"student": sid, "variant": "AB-1", "givens": {"q1": {"Q": dumped([[1, 2], [3, 4.5]], 5)}, "q2": {}},
             "answers": {"q1.a": dumped(-0.25 * k, 4), "é\n": dumped([k, "inf"], 4)}}
            for k, sid in enumerate(["ada", "Zoë", 'a"b', "x\\y\x00"])]
    fast = _same_layout(docs, 1)
    assert type(fast) is Dumped and fast == _dump(docs, 1)
    assert _same_layout([], 1) == []
    odd = [*docs[:2], {**docs[2], "variant": None}]  # a value that is not a text: left to _dump
    assert _same_layout(odd, 1) is odd
