"""A user's templates and an instructor's spec text as an attacker would write them.

Each attack of the issue has a test: a template that escapes through a NumPy type, an
include through a link, allocation and loop bombs, raw HTML in a spec (checked in the PDF's
attachments, in what the PDF renderer fetches, and in the answer form's CSP).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import re
import shutil
import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import qkvquiz.render.worker as worker
from qkvquiz.cli import app
from qkvquiz.render.markdown import item_context, spec_view
from qkvquiz.render.sandbox import SAFE_NUMPY, FolderLoader, Record, TemplateFailed, UnsafeTemplate
from qkvquiz.spec import parse_spec
from qkvquiz.worksheet import build_worksheet

from ..helpers import BASIC_ITEMS

runner = CliRunner()
LINUX = sys.platform.startswith("linux")


def _generate(tmp_path: Path, templates: Path, *extra: str, spec: str = "attention-basics"):
    return runner.invoke(app, ["generate", spec, "-n", "1", "--templates", str(templates),
                               "--out", str(tmp_path / "o"), *extra])


def _refused(result, template: Path, expected: str = "") -> str:
    """The run failed with exit 2 and one message naming the template file, no traceback."""
    out = " ".join(result.output.split())  # Rich wraps long lines
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert str(template) in out.replace(" ", ""), out  # Rich may break the path itself
    assert expected in out, out
    return out


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    mine = tmp_path / "tpl"
    (mine / "families").mkdir(parents=True)
    return mine


def _family_template(folder: Path, text: str) -> Path:
    path = folder / "families" / "attention.scores.problem.md.j2"
    path.write_text(text + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- code from a template


@pytest.mark.parametrize("attack", [
    '{{ np.float64.tofile(np.float64(1), "OUT", sep=",", format="ANY %s") }}',
    '{{ np.int64.dump(np.int64(1), "OUT") }}',
    '{{ g.Q.dtype.type.tofile(g.Q, "OUT") }}',
    '{{ g.Q[0][0].__class__.tofile(g.Q[0][0], "OUT") }}',
    '{{ s.scores.round().tofile("OUT") }}',
    '{{ np.exp.__class__ }}',
    '{{ np.linalg.__dict__ }}',
    '{{ item.family.steps[0].fn }}',
    '{{ lipsum(1) }}',
])
def test_a_template_reaches_no_type_and_writes_no_file(attack, folder, tmp_path):
    target = tmp_path / "written.pth"
    template = _family_template(folder, attack.replace("OUT", str(target)))
    _refused(_generate(tmp_path, folder), template)
    assert not target.exists()
    assert not (tmp_path / "o" / "key.json").exists()


def test_templates_are_handed_no_type_module_or_method_that_touches_files():
    def walk(value, where):
        assert not isinstance(value, (type, types.ModuleType, np.dtype)), where
        if isinstance(value, types.SimpleNamespace):
            for name, inner in vars(value).items():
                walk(inner, f"{where}.{name}")

    walk(SAFE_NUMPY, "np")
    ws = build_worksheet(parse_spec({"title": "T", "items": BASIC_ITEMS}), ["a"], 1)
    variant = ws.variant(0)[0]
    ctx = item_context(variant["item"], 1, variant["givens"], variant["steps"])
    plain = (str, int, float, bool, type(None), np.ndarray, np.float64)

    def data(value, where):
        if isinstance(value, Record):
            assert not [n for n in dir(value) if not n.startswith("_")], where  # fields only
            for name in value:
                data(value[name], f"{where}.{name}")
        elif isinstance(value, (list, tuple)):
            for i, inner in enumerate(value):
                data(inner, f"{where}[{i}]")
        elif isinstance(value, dict):
            for name, inner in value.items():
                data(inner, f"{where}[{name!r}]")
        else:
            assert isinstance(value, plain), (where, type(value))

    data(ctx, "context")
    data(spec_view(ws.spec), "spec")


# --------------------------------------------------------------------------- includes


def test_an_include_through_a_link_out_of_the_folder_is_refused(folder, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("THE-INSTRUCTORS-SECRET", encoding="utf-8")
    link = folder / "families" / "notes.md.j2"
    link.symlink_to(secret)
    _family_template(folder, '{% include "families/notes.md.j2" %}')
    out = _refused(_generate(tmp_path, folder), link, "outside the templates folder")
    assert "THE-INSTRUCTORS-SECRET" not in out
    assert not any("THE-INSTRUCTORS-SECRET" in p.read_text(encoding="utf-8") for p in tmp_path.glob("o/**/*.md"))


def test_a_template_that_is_itself_a_link_out_or_a_linked_folder_is_refused(folder, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "attention.scores.problem.md.j2").write_text("stolen\n", encoding="utf-8")
    shutil.rmtree(folder / "families")
    (folder / "families").symlink_to(outside, target_is_directory=True)
    _refused(_generate(tmp_path, folder), folder / "families" / "attention.scores.problem.md.j2", "refused")


@pytest.mark.parametrize("name", ["../secret", "families/../../secret", "/etc/hostname", "families//x", "a\\b"])
def test_an_include_resolves_only_inside_the_folders(name, folder, tmp_path):
    (tmp_path / "secret").write_text("THE-INSTRUCTORS-SECRET", encoding="utf-8")
    template = _family_template(folder, "{% include " + repr(name) + " %}")
    out = _refused(_generate(tmp_path, folder), template, "TemplateNotFound")
    assert "THE-INSTRUCTORS-SECRET" not in out


def test_the_loader_reads_only_regular_files(tmp_path):
    (tmp_path / "fifo.md.j2").unlink(missing_ok=True)
    os.mkfifo(tmp_path / "fifo.md.j2")
    (tmp_path / "latin1.md.j2").write_bytes(b"caf\xe9")
    loader = FolderLoader([tmp_path])
    with pytest.raises(UnsafeTemplate, match="not a regular file"):
        loader.find("fifo.md.j2")
    with pytest.raises(UnsafeTemplate, match="not UTF-8"):
        loader.get_source(None, "latin1.md.j2")  # type: ignore[arg-type]
    assert loader.find("missing.md.j2") is None


# --------------------------------------------------------------------------- budgets


@pytest.mark.slow
@pytest.mark.parametrize("bomb, expected", [
    ("{{ '%0999999999d' % 1 }}", "%-format width"),
    ("{{ '%*d' % (999999999, 1) }}", "%-format width"),
    ("{{ '%0999999999d'|format(1) }}", "%-format width"),
    ("{{ 'x'|center(2000000000) }}", "width above"),
    ("{{ 'x'.ljust(2000000000) }}", "attribute 'ljust' of 'str' object is unsafe"),
    ("{{ 'x'.center(5) }}", "attribute 'center' of 'str' object is unsafe"),
    ("{{ ''|indent(2000000000, true) }}", "width above"),
    ("{{ '{:>999999999}'.format(1) }}", "format width"),
    ("{{ np.ones(250000000) }}", "more than"),
    ("{{ np.arange(0, 1e12) }}", "more than"),
    ("{{ np.arange(stop=1e12) }}", "more than"),
    ("{{ np.eye(N=100000) }}", "more than"),
    ("{{ [1]|batch(1000000000, 0)|list }}", "batches"),
    ("{{ [1]|slice(1000000000)|list }}", "slices"),
    ("{{ 'x' * 10 ** 9 }}", "repeating"),
])
def test_allocation_bombs_are_refused_with_the_template_named(bomb, expected, folder, tmp_path):
    template = _family_template(folder, bomb)
    _refused(_generate(tmp_path, folder), template, expected)


@pytest.fixture
def short_budget(monkeypatch):
    """Budgets that a test can reach in seconds; the defaults are asserted separately."""
    monkeypatch.setattr(worker, "BUDGET", worker.Budget(seconds=3.0, memory_bytes=256 << 20, output_chars=1 << 20))
    yield
    worker.close_workers()


LOOP_BOMB = "{% for i in range(100000) %}{% for j in range(100000) %}{% for k in range(100000) %}{% endfor %}{% endfor %}{% endfor %}"


@pytest.mark.slow
def test_a_loop_bomb_is_stopped_by_the_time_budget(short_budget, folder, tmp_path):
    template = _family_template(folder, LOOP_BOMB)
    _refused(_generate(tmp_path, folder), template, "time budget")


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="RLIMIT_AS is Linux's")
def test_a_growing_text_is_stopped_by_the_memory_budget(short_budget, folder, tmp_path):
    bomb = '{% set ns = namespace(s="0123456789") %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}'
    template = _family_template(folder, bomb)
    _refused(_generate(tmp_path, folder), template, "memory")


@pytest.mark.slow
def test_a_flood_of_output_is_stopped_by_the_output_budget(short_budget, folder, tmp_path):
    bomb = '{% for i in range(100000) %}{{ "x" * 1000 }}{% endfor %}'
    template = _family_template(folder, bomb)
    _refused(_generate(tmp_path, folder), template, "output passed")


@pytest.mark.slow
def test_the_worker_recovers_after_a_stopped_template(short_budget, folder, tmp_path):
    _family_template(folder, LOOP_BOMB)
    assert _generate(tmp_path, folder).exit_code == 2
    _family_template(folder, "### Mine {{ number }}: {{ g.Q|bmatrix }}")
    result = _generate(tmp_path, folder)
    assert result.exit_code == 0, result.output
    assert "### Mine 1:" in (tmp_path / "o" / "students" / "s01" / "worksheet.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_budgets_are_far_above_normal_use(folder, tmp_path):
    budget = worker.Budget()
    assert budget.seconds >= 10 and budget.memory_bytes >= 256 << 20 and budget.output_chars >= 16 << 20
    # A whole class through a user's folder: each template renders in milliseconds.
    (folder / "worksheet.md.j2").write_text("# {{ spec.title }}\n{% for p in problems %}{{ p }}\n{% endfor %}", encoding="utf-8")
    result = runner.invoke(app, ["generate", "all-families", "-n", "5", "--templates", str(folder),
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output  # no template was stopped by a budget
    worker.close_workers()


def test_a_template_error_names_the_file_and_line(folder, tmp_path):
    template = _family_template(folder, "line one\n{{ no_such_name }}")
    _refused(_generate(tmp_path, folder), template, "line 2")


# --------------------------------------------------------------------------- spec text


class _Counter(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        _Counter.hits.append(self.path)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def http_server():
    _Counter.hits = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()  # the listening socket, else left to the collector (a ResourceWarning)


def _hostile_spec(tmp_path: Path, base: str) -> tuple[Path, Path]:
    secret = tmp_path / "instructor-secret"
    secret.write_text("THE-INSTRUCTORS-SECRET", encoding="utf-8")
    items = [dict(BASIC_ITEMS[0], intro=f'Look <img src="{base}/intro.png"> <script>alert(2)</script>')]
    spec = {
        "title": "Week <b>3</b>",
        "instructions": (
            f'Notes: <a rel="attachment" href="file://{secret}">here</a>.\n'
            f'<img src="{base}/pixel.png"> ![pixel]({base}/md.png)\n\n'
            "<script>alert(1)</script> and a < b.\n"
        ),
        "items": items,
    }
    path = tmp_path / "hostile.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path, secret


def _pdf_available() -> bool:
    from qkvquiz.render.pdf import PdfUnavailable, weasyprint_module

    try:
        weasyprint_module()
    except PdfUnavailable:
        return False
    return True


@pytest.mark.slow
def test_spec_text_reaches_no_output_as_html(tmp_path, http_server):
    spec, _ = _hostile_spec(tmp_path, http_server)
    formats = "md,html,pdf" if _pdf_available() else "md,html"
    result = runner.invoke(app, ["generate", str(spec), "-n", "1", "--out", str(tmp_path / "o"), "--format", formats])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "o" / "students" / "s01"
    md = (folder / "worksheet.md").read_text(encoding="utf-8")
    assert "<script" not in md and "<img" not in md and "<a " not in md and "&lt;script>" in md
    assert "a < b" in md
    for name in ("worksheet.html", "answer-form.html"):
        page = (folder / name).read_text(encoding="utf-8")
        assert "<img" not in page and "alert(" not in page.replace("&lt;script&gt;alert(", ""), name
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page, name
        assert not re.search(r"<a [^>]*rel=", page), name
    assert (tmp_path / "o" / "key.md").read_text(encoding="utf-8").count("<script") == 0
    if "pdf" in formats:
        for pdf in (folder / "worksheet.pdf", tmp_path / "o" / "keys" / "s01.pdf"):
            raw = pdf.read_bytes()
            assert b"/EmbeddedFile" not in raw and b"THE-INSTRUCTORS-SECRET" not in raw
            if shutil.which("pdfdetach"):
                listed = subprocess.run(["pdfdetach", "-list", str(pdf)], capture_output=True, text=True)
                assert listed.stdout.startswith("0 embedded files"), listed.stdout
    assert _Counter.hits == []  # nothing was fetched while the PDFs rendered


@pytest.mark.slow
@pytest.mark.skipif(not _pdf_available(), reason="WeasyPrint or its libraries are missing")
def test_the_pdf_renderer_fetches_only_its_own_resources(tmp_path, http_server):
    from qkvquiz.render.pdf import render_pdf

    secret = tmp_path / "secret"
    secret.write_text("THE-INSTRUCTORS-SECRET", encoding="utf-8")
    pixel = base64.b64encode(bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000005000157a3a6ac0000000049454e44ae426082")).decode()
    html = (f'<p><img src="{http_server}/x.png"><img src="file://{secret}">'
            f'<a rel="attachment" href="file://{secret}">a</a>'
            f'<a rel="attachment" href="{http_server}/a.txt">b</a>'
            f'<img src="data:image/png;base64,{pixel}"></p>'
            f'<style>@import url("{http_server}/x.css"); p {{ background: url("{http_server}/bg.png") }}</style>')
    result = render_pdf(html, tmp_path / "t.pdf")
    assert _Counter.hits == []
    raw = (tmp_path / "t.pdf").read_bytes()
    assert b"/EmbeddedFile" not in raw and b"THE-INSTRUCTORS-SECRET" not in raw
    assert any("not fetched" in w for w in result.warnings)
    assert not any("data:image" in w for w in result.warnings)  # the data: picture loads


def test_the_answer_form_runs_only_its_own_scripts(tmp_path):
    spec, _ = _hostile_spec(tmp_path, "http://127.0.0.1:9")
    result = runner.invoke(app, ["generate", str(spec), "-n", "1", "--out", str(tmp_path / "o"), "--format", "html"])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "o" / "students" / "s01" / "answer-form.html").read_text(encoding="utf-8")
    (csp,) = re.findall(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    script_src = next(d for d in csp.split(";") if d.strip().startswith("script-src")).split()[1:]
    assert "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert len(scripts) == 2 and re.findall(r"<script\b", page) == ["<script", "<script"]
    hashes = ["'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" for s in scripts]
    assert sorted(script_src) == sorted(hashes)
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src


def test_errors_from_a_worker_are_template_errors(folder):
    _family_template(folder, "{{ 1/0 }}")
    with pytest.raises(TemplateFailed, match="attention.scores.problem.md.j2, line 1: ZeroDivisionError"):
        worker.render_custom(str(folder.resolve()), ["families/attention.scores.problem.md.j2"], {})
    worker.close_workers()
