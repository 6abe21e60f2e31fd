"""The review page in a real headless browser, with the keyboard alone: the first open entry has
the focus, Enter keeps a typed value (journaled) and moves on, a value the grader cannot read is
refused on the page, Tab and Enter show the whole page and Escape closes it, Done grades again.
In Chinese, the page speaks Chinese.

Skips where selenium, chromium or chromedriver is missing."""

from __future__ import annotations


import pytest

from qkvquiz.review.server import ReviewApp
from qkvquiz.scan.journal import JOURNAL_NAME, read_decisions

from ..helpers import wait_for
from .test_review_server import running, scan_folder

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return scan_folder(tmp_path_factory.mktemp("review-browser"))


def focused(browser):
    return browser.switch_to.active_element


def test_a_review_with_the_keyboard_alone(browser, folder):
    (folder / JOURNAL_NAME).unlink(missing_ok=True)
    app = ReviewApp(folder)
    with running(app) as server:
        browser.get(server.url)
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#items li"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#items li")
        assert len(rows) == len(app.items)
        first = rows[0].find_element(By.TAG_NAME, "input")
        wait_for(lambda: focused(browser) == first)
        # The cells' picture is loaded from the server, beside what was read.
        picture = rows[0].find_element(By.CSS_SELECTOR, "img.cells")
        wait_for(lambda: browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", picture))
        assert "read:" in rows[0].text and "why:" in rows[0].text

        # A value the grader cannot read stays on the page, with the grader's sentence; nothing is kept.
        focused(browser).send_keys(Keys.CONTROL, "a")
        focused(browser).send_keys("1+", Keys.ENTER)
        wait_for(lambda: rows[0].find_element(By.CLASS_NAME, "error").text)
        assert "cannot read" in rows[0].find_element(By.CLASS_NAME, "error").text
        assert read_decisions(folder)[0] == {}

        # Typed over and Enter: journaled, and the focus moves to the next open entry.
        focused(browser).send_keys(Keys.CONTROL, "a")
        focused(browser).send_keys("-12.5", Keys.ENTER)
        wait_for(lambda: "decided" in rows[0].get_attribute("class"))
        (decision,) = read_decisions(folder)[0].values()
        assert decision.value == "-12.5"
        if len(rows) > 1:
            wait_for(lambda: focused(browser) == rows[1].find_element(By.TAG_NAME, "input"))
            # Enter alone keeps the reading as read.
            focused(browser).send_keys(Keys.ENTER)
            wait_for(lambda: len(read_decisions(folder)[0]) == 2)
            item = list(app.items.values())[1]
            assert read_decisions(folder)[0][item.entry].value == item.read

        # The whole page: Tab to its button, Enter; Escape closes it and gives the focus back.
        row_input = rows[0].find_element(By.TAG_NAME, "input")
        row_input.click()
        focused(browser).send_keys(Keys.TAB)
        assert focused(browser).text == "Whole page"
        focused(browser).send_keys(Keys.ENTER)
        overlay = browser.find_element(By.ID, "overlay")
        wait_for(lambda: overlay.is_displayed())
        whole = browser.find_element(By.ID, "whole")
        wait_for(lambda: browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", whole))
        assert browser.execute_script("return arguments[0].naturalHeight > arguments[0].naturalWidth", whole)
        # The entry is outlined where it lies on its page.
        outline = browser.find_element(By.ID, "mark")
        assert outline.is_displayed()
        box = list(app.items.values())[0].box
        left = browser.execute_script("return arguments[0].offsetLeft / arguments[1].clientWidth", outline, whole)
        assert abs(left - box[0]) < 0.02, (left, box)
        focused(browser).send_keys(Keys.ESCAPE)
        wait_for(lambda: not overlay.is_displayed())
        assert focused(browser) == row_input

        # Done: graded again on the decisions.
        done = browser.find_element(By.ID, "done")
        browser.execute_script("arguments[0].focus()", done)
        focused(browser).send_keys(Keys.ENTER)
        wait_for(lambda: "Graded again" in browser.find_element(By.ID, "status").text, timeout=60)
        assert app.graded is not None and decision.entry in app.graded.decisions
        assert not browser.get_log("browser") or all("Content Security Policy" not in e["message"]
                                                      for e in browser.get_log("browser"))


def test_the_page_speaks_chinese(browser, folder):
    app = ReviewApp(folder, lang="zh")
    with running(app) as server:
        browser.get(server.url)
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#items li"))
        assert browser.execute_script("return document.documentElement.lang") == "zh-Hans"
        text = browser.find_element(By.TAG_NAME, "body").text
        for english in ("Review the scan", "Whole page", "read:", "why:", "Done", "low confidence", "page "):
            assert english not in text, english
