"""WeasyPrint's library names are answered by their Linux sonames while it imports; any other
lookup is ctypes' own, and ctypes is left as it was."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from qkvquiz.render import system_libraries
from qkvquiz.render.system_libraries import linux_names_first

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sonames are Linux's")


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names that reach ctypes' own find_library (which answers None to all)."""
    asked: list[str] = []

    def original(name: str) -> None:
        asked.append(name)
        return None

    monkeypatch.setattr(ctypes.util, "find_library", original)
    return asked


def test_a_weasyprint_name_is_answered_by_the_soname_that_loads(lookups: list[str], monkeypatch) -> None:
    monkeypatch.setattr(system_libraries, "_loads", lambda soname: soname == "libpango-1.0.so.0")
    with linux_names_first():
        assert ctypes.util.find_library("libpango-1.0-0") == "libpango-1.0.so.0"
        assert ctypes.util.find_library("pango-1.0") == "libpango-1.0.so.0"
    assert lookups == []


def test_a_library_that_does_not_load_by_its_soname_is_looked_up_as_before(lookups: list[str], monkeypatch) -> None:
    monkeypatch.setattr(system_libraries, "_loads", lambda soname: False)
    with linux_names_first():
        assert ctypes.util.find_library("gobject-2.0") is None
        assert ctypes.util.find_library("ssl") is None  # a name not WeasyPrint's
    assert lookups == ["gobject-2.0", "ssl"]


def test_find_library_is_ctypes_own_again_after_the_block(lookups: list[str]) -> None:
    before = ctypes.util.find_library
    with pytest.raises(RuntimeError), linux_names_first():
        assert ctypes.util.find_library is not before
        raise RuntimeError("an import failed")
    assert ctypes.util.find_library is before


def test_the_names_are_those_weasyprint_tries_before_each_soname() -> None:
    """Read off WeasyPrint's own lists: where it changes them, the table is brought up to date."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("weasyprint")
    if spec is None or spec.origin is None:
        pytest.skip("WeasyPrint is not installed")
    from pathlib import Path

    source = (Path(spec.origin).parent / "text" / "ffi.py").read_text(encoding="utf-8")
    tried = [
        [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_dlopen"
    ]
    before_soname = {names[i]: tuple(names[:i]) for names in tried for i, n in enumerate(names) if ".so." in n}
    for soname, names in system_libraries._SONAMES.items():
        assert before_soname.get(soname) == names, soname
