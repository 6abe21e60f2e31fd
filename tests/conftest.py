"""Shared test set-up: no test reads or writes the real instructor secret or the user's cache.

`qkvquiz generate` without --secret-file creates and uses ~/.config/qkvquiz/secret (under
$XDG_CONFIG_HOME when set), and keeps compiled templates in ~/.cache/qkvquiz (under
$XDG_CACHE_HOME); practice keeps a student's progress in ~/.local/share/qkvquiz (under
$XDG_DATA_HOME). For the whole session all three point at fresh temporary folders, and
$QKVQUIZ_SECRET is cleared, before any fixture of any scope runs.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_config_home(tmp_path_factory: pytest.TempPathFactory):
    saved = {name: os.environ.get(name) for name in ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "QKVQUIZ_SECRET")}
    os.environ["XDG_CONFIG_HOME"] = str(tmp_path_factory.mktemp("config-home"))
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("data-home"))  # practice progress
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache-home"))
    os.environ.pop("QKVQUIZ_SECRET", None)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With QKVQUIZ_SKIP_HEAVY=1 the heavy tests skip, saying why: CI runs the whole suite on
    every Python at both ends of every range, and these (the browser, the docs walk, every
    bundled spec's pages, scans), which depend on neither, once, to stay within its time."""
    if os.environ.get("QKVQUIZ_SKIP_HEAVY") != "1":
        return
    skip = pytest.mark.skip(reason="heavy, and QKVQUIZ_SKIP_HEAVY=1: CI runs it in one of its runs (.ci/run)")
    for item in items:
        if item.get_closest_marker("heavy") is not None:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    """A headless chromium for one test module, quit after it (skips where none is installed); the
    answer form's tests use their own, which also saves downloads."""
    from .render.test_answer_form_browser import start_chrome  # selenium only where a test asks

    driver = start_chrome(tmp_path_factory.mktemp("chrome-profile"))
    yield driver
    driver.quit()
