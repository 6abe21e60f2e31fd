"""Every page a person opens, in a real browser at a phone's width (390 px, laid out as a phone
lays it out) and a desktop's (1280 px), in English and Chinese: the worksheet, the key, the
answer form, a feedback page (and one with every family's parts), and the practice page served
and static.

For each: no sideways scroll of the page itself (a wide matrix scrolls in its own box), body text
at least 12 CSS px, and where there are boxes, the box that Tab moves into visible (not under the
sticky bar) and a long entry not clipped in its box. Set QKVQUIZ_SCREENSHOT_DIR to keep a
screenshot of each page at each width.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz import practice
from qkvquiz.cli import app

from ..practice.helpers import running

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.keys import Keys  # noqa: E402

BANK = Path(__file__).resolve().parents[2] / "problem_bank"
WIDTHS = (390, 1280)
#: Entries as long as students type them: every character must stay in view in its box.
LONG_ENTRIES = ("0.10650697891", "5/sqrt(2)", "-0.4683105308")

# Text that a reader reads (not a formula's picture, whose text is transparent, nor hidden text, nor
# a formula's subscripts and superscripts, set smaller as in print): elements with text of their
# own under 12 CSS px.
SMALLEST_TEXT = """
let small = [];
for (const el of document.body.querySelectorAll('*')) {
  if (!el.offsetParent || el.closest('.math-svg, sub, sup')) continue;
  const style = getComputedStyle(el);
  if (style.color === 'rgba(0, 0, 0, 0)' || style.visibility === 'hidden') continue;
  const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  if (own && parseFloat(style.fontSize) < 12) small.push([el.tagName, el.className, style.fontSize, el.textContent.trim().slice(0, 30)]);
}
return small;
"""
# The focused element: visible in the viewport, and the topmost element at its centre (not under
# the sticky bar of buttons).
FOCUS_SEEN = """
const el = document.activeElement, r = el.getBoundingClientRect();
const x = r.left + r.width / 2, y = r.top + r.height / 2;
const inView = r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 && r.right <= window.innerWidth;
const top = document.elementFromPoint(x, y);
return {inView: inView, onTop: top === el || el.contains(top), name: el.name || el.id || el.tagName};
"""


@pytest.fixture(scope="module", params=["en", "zh"])
def pages(request, tmp_path_factory) -> dict[str, str]:
    """page kind → URL, for one language: a generated set, its feedback, a practice site and server."""
    lang = request.param
    tmp = tmp_path_factory.mktemp(f"pages-{lang}")
    runner = CliRunner()
    out = tmp / "set"
    result = runner.invoke(app, ["generate", str(BANK / "attention-basics.yaml"), "--students", "1", "--seed", "p",
                                 "--public", "--lang", lang, "--format", "md,html", "--out", str(out)])
    assert result.exit_code == 0, result.output
    key = json.loads((out / "key.json").read_text(encoding="utf-8"))
    student = key["students"][0]
    answers = dict(student["answers"])
    answers["q2.scores"] = [[2 * x for x in row] for row in answers["q2.scores"]]  # not scaled
    answers["q4.scores"] = [[0 if x == "-inf" else x for x in row] for row in answers["q4.scores"]]  # -∞ as 0
    (tmp / "subs").mkdir()
    (tmp / "subs" / "s.json").write_text(json.dumps({"student": student["student"], "answers": answers}))
    assert runner.invoke(app, ["grade", str(out / "key.json"), str(tmp / "subs"), "--out", str(tmp / "g")]).exit_code == 0
    assert runner.invoke(app, ["export", "feedback", str(tmp / "g"), "--out", str(tmp / "back")]).exit_code == 0
    (feedback,) = (tmp / "back").rglob("*.html")
    topics = practice.topics_for(["attention-basics"], lang=lang)
    site = practice.build_static(topics, 1, tmp / "site", lang=lang, seed="p")
    folder = next((out / "students").iterdir())
    with running(topics, lang=lang, seed="p", progress_path=tmp / "progress.json") as server:
        yield {
            "worksheet": (folder / "worksheet.html").as_uri(), "key": (out / "key.html").as_uri(),
            "answer-form": (folder / "answer-form.html").as_uri(), "feedback": feedback.as_uri(),
            "practice-static": site.as_uri(), "practice-served": server.url, "lang": lang,
        }


def open_at(driver, url: str, width: int) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 844 if width < 600 else 900, "deviceScaleFactor": 1, "mobile": width < 600})
    driver.get(url)
    if "practice" in url or url.endswith("index.html"):
        deadline = time.monotonic() + 20
        while not driver.execute_script("return !!document.querySelector('#problem input.entry')"):
            assert time.monotonic() < deadline, "the practice page showed no problem"
            time.sleep(0.1)


def shot(driver, name: str) -> None:
    folder = os.environ.get("QKVQUIZ_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["worksheet", "key", "answer-form", "feedback", "practice-static", "practice-served"])
def test_the_page_fits_its_screen_with_text_large_enough_to_read(browser, pages, kind, width):
    open_at(browser, pages[kind], width)
    shot(browser, f"{kind}-{pages['lang']}-{width}.png")
    viewport = browser.execute_script("return document.querySelector('meta[name=viewport]').content")
    assert viewport == "width=device-width, initial-scale=1"
    wide, shown = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert wide <= shown, f"{kind} at {width} px scrolls sideways: {wide} px wide in {shown}"
    assert browser.execute_script(SMALLEST_TEXT) == []
    if width > 600:  # a desktop: the text in a reading column, with margins
        left = browser.execute_script("return document.body.getBoundingClientRect().left + parseFloat(getComputedStyle(document.body).paddingLeft)")
        assert left >= 24


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("kind", ["answer-form", "practice-static", "practice-served"])
def test_tab_keeps_the_focused_box_in_view_and_a_long_entry_whole(browser, pages, kind, width):
    open_at(browser, pages[kind], width)
    if kind.startswith("practice"):  # the problem with the most boxes: a whole attention layer
        browser.execute_script("const s = document.getElementById('topic'); s.value = 'attention-basics/5';"
                               "s.dispatchEvent(new Event('change'))")
        deadline = time.monotonic() + 20
        while browser.execute_script("return document.querySelectorAll('#problem input.entry').length") < 20:
            assert time.monotonic() < deadline, "the practice page did not show the topic chosen"
            time.sleep(0.1)
    browser.execute_script("document.querySelectorAll('details.how').forEach(d => d.open = false); window.scrollTo(0, 0)")
    # From the page's top, as a student starts: the first box by the keyboard as well.
    browser.execute_script("document.querySelector('input.entry:not([disabled])').focus()")
    for k in range(14):  # into the next boxes one by one, down the page
        if not browser.execute_script("return document.activeElement.matches('input.entry, button')"):
            break  # past the last box and button
        seen = browser.execute_script(FOCUS_SEEN)
        assert seen["inView"] and seen["onTop"], (kind, width, k, seen)
        if browser.execute_script("return document.activeElement.classList.contains('entry')"):
            browser.execute_script("document.activeElement.value = ''")  # a saved answer the form restored
            browser.switch_to.active_element.send_keys(LONG_ENTRIES[k % len(LONG_ENTRIES)])
            clipped = browser.execute_script("const e = document.activeElement; return e.scrollWidth > e.clientWidth")
            assert not clipped, (kind, width, browser.switch_to.active_element.get_attribute("value"))
        browser.switch_to.active_element.send_keys(Keys.TAB)
    shot(browser, f"{kind}-{pages['lang']}-{width}-tabbed.png")


def test_the_worksheet_never_breaks_minus_inf_across_lines(browser, pages):
    open_at(browser, pages["worksheet"], 390)
    for width in range(300, 400, 7):  # wherever the line happens to end
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": 844, "deviceScaleFactor": 1, "mobile": True})
        lines = browser.execute_script(
            "return [...document.querySelectorAll('code')].filter(c => c.textContent === '-inf')"
            ".map(c => c.getClientRects().length)")
        assert lines and set(lines) == {1}, (width, lines)


@pytest.fixture(scope="module")
def every_family_feedback(tmp_path_factory) -> dict[str, str]:
    """lang → the URL of a feedback page with every family's parts, each answered a little off: the
    longest headings (the sheet's sentences with their formulas) and the widest exact answers."""
    import numpy as np

    from qkvquiz.core.submissions import Submission
    from qkvquiz.exchange.feedback_export import feedback_html
    from qkvquiz.families import REGISTRY
    from qkvquiz.grade import feedback as fb
    from qkvquiz.grade.grader import grade
    from qkvquiz.key import encode, key_from_json, key_to_json
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    items = [{"family": name, "ask": {s.name: 1 for s in family.steps if s.askable}} for name, family in REGISTRY.items()]
    doc = json.loads(json.dumps(key_to_json(build_worksheet(parse_spec({"title": "T", "items": items}), ["s01"], 3))))
    key = key_from_json(doc)
    answers = {}
    for part, value in doc["students"][0]["answers"].items():
        try:
            answers[part] = encode(np.asarray(value, dtype=float) + 0.37)
        except (TypeError, ValueError):  # a shape written as text
            answers[part] = value
    report = grade(key, [Submission("s01.json", "s01", answers)])
    folder = tmp_path_factory.mktemp("every-family-feedback")
    urls = {}
    for lang in ("en", "zh"):
        page = folder / f"{lang}.html"
        page.write_text(feedback_html(fb.feedback_markdown(report, report.results[0], lang=lang), title="T"),
                        encoding="utf-8")
        urls[lang] = page.as_uri()
    return urls


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_familys_feedback_fits_with_its_longest_headings(browser, every_family_feedback, lang, width):
    open_at(browser, every_family_feedback[lang], width)
    wide, shown = browser.execute_script("return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert wide <= shown, f"feedback at {width} px scrolls sideways: {wide} px wide in {shown}"
    past = browser.execute_script(
        "return [...document.querySelectorAll('h3')].filter(h => h.getBoundingClientRect().right > "
        "document.documentElement.clientWidth).map(h => h.textContent.slice(0, 60))")
    assert past == []
    assert browser.execute_script(SMALLEST_TEXT) == []
