"""The bundled templates' compiled code is kept in the user's cache folder between runs, checked
against each template's text, and a cache that cannot be used never stops rendering."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from qkvquiz.render import template_cache
from qkvquiz.render.environment import environment
from qkvquiz.render.sandbox import FolderLoader, trusted_environment


class Recording(template_cache.QuietBytecodeCache):
    """The cache as attached, saying for each template it is asked for whether it held the
    compiled code ("hit") or the template had to be compiled ("miss")."""

    def __init__(self, cache: template_cache.QuietBytecodeCache, said: list[str]) -> None:
        super().__init__(cache.directory, cache.pattern)
        self.said = said

    def load_bytecode(self, bucket) -> None:
        super().load_bytecode(bucket)
        self.said.append("hit" if bucket.code is not None else "miss")


@pytest.fixture
def loads() -> list[str]:
    return []


def _env(folder, cache_home, monkeypatch, loads=None):
    """A trusted environment over ``folder`` with the cache under ``cache_home`` (its loads told to ``loads``)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    env = template_cache.attach(trusted_environment(loader=FolderLoader([folder]), auto_reload=False, trim_blocks=True))
    if loads is not None:
        env.bytecode_cache = Recording(env.bytecode_cache, loads)
    return env


def test_a_template_compiled_once_is_loaded_from_the_cache_by_the_next_run(tmp_path, monkeypatch, loads):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "page.md.j2").write_text("{% for i in range(3) %}{{ i }}{% endfor %}", encoding="utf-8")
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch, loads).get_template("page.md.j2").render() == "012"
    assert loads == ["miss"]
    # A new environment (as in the next run) finds the compiled code: nothing is compiled.
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch, loads).get_template("page.md.j2").render() == "012"
    assert loads == ["miss", "hit"]
    assert list((tmp_path / "cache" / "qkvquiz" / "templates").rglob("*.cache"))


def test_an_edited_template_is_compiled_anew(tmp_path, monkeypatch, loads):
    (tmp_path / "t").mkdir()
    page = tmp_path / "t" / "page.md.j2"
    page.write_text("first", encoding="utf-8")
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch, loads).get_template("page.md.j2").render() == "first"
    page.write_text("second", encoding="utf-8")
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch, loads).get_template("page.md.j2").render() == "second"
    assert loads == ["miss", "miss"]


def test_another_setup_keeps_its_own_compiled_code(tmp_path):
    plain = trusted_environment(loader=FolderLoader([tmp_path]), trim_blocks=True)
    other = trusted_environment(loader=FolderLoader([tmp_path]), trim_blocks=False)
    assert template_cache.fingerprint(plain) != template_cache.fingerprint(other)
    assert template_cache.fingerprint(plain) == template_cache.fingerprint(
        trusted_environment(loader=FolderLoader([tmp_path]), trim_blocks=True))


def test_a_damaged_cache_file_is_passed_over(tmp_path, monkeypatch, loads):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "page.md.j2").write_text("{{ 6 * 7 }}", encoding="utf-8")
    _env(tmp_path / "t", tmp_path / "cache", monkeypatch).get_template("page.md.j2")
    for cached in (tmp_path / "cache").rglob("*.cache"):
        data = cached.read_bytes()
        cached.write_bytes(data[: len(data) // 2] + b"\xff" * 7)  # the same header, a broken body
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch, loads).get_template("page.md.j2").render() == "42"
    assert loads == ["miss"]  # compiled again from the source


def test_a_cache_file_with_a_damaged_checksum_is_passed_over(tmp_path, monkeypatch, loads):
    from jinja2.bccache import bc_magic

    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "page.md.j2").write_text("{{ 6 * 7 }}", encoding="utf-8")
    _env(tmp_path / "t", tmp_path / "cache", monkeypatch).get_template("page.md.j2")
    for cached in (tmp_path / "cache").rglob("*.cache"):
        cached.write_bytes(bc_magic + b"\x80\x05not a pickle")  # the right header, then garbage
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch, loads).get_template("page.md.j2").render() == "42"
    assert loads == ["miss"]  # compiled again from the source


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_cache_folder_that_cannot_be_written_never_stops_rendering(tmp_path, monkeypatch):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "page.md.j2").write_text("ok", encoding="utf-8")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache").chmod(0o500)
    try:
        assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch).get_template("page.md.j2").render() == "ok"
    finally:
        (tmp_path / "cache").chmod(0o700)


def test_a_cache_path_that_is_a_file_never_stops_rendering(tmp_path, monkeypatch):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "page.md.j2").write_text("ok", encoding="utf-8")
    (tmp_path / "cache").write_text("not a folder", encoding="utf-8")
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch).get_template("page.md.j2").render() == "ok"
    assert _env(tmp_path / "t", tmp_path / "cache", monkeypatch).get_template("page.md.j2").render() == "ok"


def test_the_bundled_templates_use_the_cache_and_a_users_do_not(tmp_path):
    assert isinstance(environment().bytecode_cache, template_cache.QuietBytecodeCache)
    (tmp_path / "page.md.j2").write_text("x", encoding="utf-8")
    assert environment(str(tmp_path)).bytecode_cache is None


@pytest.mark.slow
def test_a_run_with_a_warm_cache_writes_the_same_key(tmp_path):
    # Two CLI runs, the first filling the cache, the second loading from it: the same files.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    outs = []
    for run in ("cold", "warm"):
        out = tmp_path / run
        proc = subprocess.run([sys.executable, "-m", "qkvquiz", "generate", "attention-basics", "-n", "2", "-o",
                               str(out), "--seed", "same"], env=env, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, proc.stderr
        outs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
                     if p.is_file() and p.suffix in (".md", ".json")})
    assert outs[0] == outs[1]
    assert list((tmp_path / "cache" / "qkvquiz" / "templates").rglob("*.cache"))
