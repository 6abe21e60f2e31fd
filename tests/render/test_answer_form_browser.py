"""The answer form in a real headless browser: Debian's chromium driven by selenium.

Skips cleanly where selenium, chromium or chromedriver is missing (`.ci/run` installs them:
`apt-get install chromium chromium-driver`). The form is opened from disk (a file:// URL),
exactly as a student opens the file they were sent. Set QKVQUIZ_SCREENSHOT_DIR to keep
screenshots of the filled form (desktop and phone width).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app

from ..grade.test_entry_cases import CASES, assert_js_agrees_with_python

if importlib.util.find_spec("qkvquiz.render.html_page") is None:
    pytest.skip("the HTML renderer (qkvquiz.render.html_page) is not installed", allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

STUDENT = "ada"
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Headless, as root, and quiet: no network chatter of the browser's own.
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage", "--window-size=1100,1400",
)


def _browser_paths() -> tuple[str, str] | None:
    chrome = os.environ.get("QKVQUIZ_CHROME") or next(filter(None, map(shutil.which, BROWSERS)), None)
    driver = os.environ.get("QKVQUIZ_CHROMEDRIVER") or shutil.which("chromedriver")
    return (chrome, driver) if chrome and driver else None


def start_chrome(profile: Path, prefs: dict | None = None):
    """A headless chromium through its driver (skips where either is missing); ``profile`` a fresh folder."""
    paths = _browser_paths()
    if paths is None:
        pytest.skip("no headless browser: install chromium and chromium-driver")
    from selenium.webdriver.chrome.service import Service

    chrome, driver_path = paths
    options = webdriver.ChromeOptions()
    options.binary_location = chrome
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    if prefs:
        options.add_experimental_option("prefs", prefs)
    # An explicit driver path: selenium never looks for (or downloads) a driver of its own.
    return webdriver.Chrome(service=Service(driver_path), options=options)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    downloads = tmp_path_factory.mktemp("downloads")
    driver = start_chrome(tmp_path_factory.mktemp("chrome-profile"), {
        "download.default_directory": str(downloads), "download.prompt_for_download": False,
    })
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("class")
    roster = out / "roster.txt"
    roster.write_text(f"{STUDENT}\nalan\n", encoding="utf-8")
    result = CliRunner().invoke(app, [
        "generate", "attention-basics", "--roster", str(roster), "--format", "html",
        "--out", str(out / "set"), "--seed", "e2e",
    ])
    assert result.exit_code == 0, result.output
    key = json.loads((out / "set" / "key.json").read_text(encoding="utf-8"))
    entry = next(s for s in key["students"] if s["student"] == STUDENT)
    return {
        "form": out / "set" / "students" / STUDENT / "answer-form.html",
        "key_path": out / "set" / "key.json",
        "entry": entry,
        "shapes": {p["id"]: tuple(p["shape"]) for item in key["items"] for p in item["parts"]},
        "out": out,
    }


def open_fresh(driver, form: Path) -> None:
    """The form with nothing kept from earlier tests."""
    driver.get(form.as_uri())
    driver.execute_script("window.localStorage.clear()")
    driver.refresh()
    assert driver.execute_script("return !!window.qkvquizForm")


def boxes(driver, part: str):
    return driver.find_elements(By.CSS_SELECTOR, f'fieldset[data-part="{part}"] input.entry')


def type_into(box, text: str) -> None:
    box.clear()
    box.send_keys(text)


def key_texts(entry: dict, shapes: dict) -> dict[str, list[str]]:
    """What a student types for the key's answers, box by box: one entry as a fraction, one
    with a decimal comma, one as a root, the first −∞ as a symbol and the others as -inf."""
    texts: dict[str, list[str]] = {}
    fraction = comma = root = symbol = False
    for part, shape in shapes.items():
        values = np.ravel(np.array(entry["answers"][part], dtype=object)).tolist()
        row = []
        for v in values:
            if v in ("-inf", "inf"):
                row.append("−∞" if v == "-inf" and not symbol else v)
                symbol = symbol or v == "-inf"
                continue
            v = float(v)
            if v.is_integer():
                row.append(str(int(v)))
            elif not fraction:
                f = Fraction(v).limit_denominator(1000)  # within 1/1000 of v: inside the tolerance
                row.append(f"{f.numerator}/{f.denominator}")
                fraction = True
            elif not comma:
                row.append(f"{v:.4f}".replace(".", ","))
                comma = True
            elif not root:
                row.append(f"{v * math.sqrt(2):.6f}/√2")
                root = True
            else:
                row.append(f"{v:.4f}")
        texts[part] = row
    assert fraction and comma and root and symbol
    return texts


def wait_for_download(folder: Path, before: set[str], timeout: float = 15.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = [p for p in folder.iterdir() if p.name not in before and not p.name.endswith((".crdownload", ".tmp"))]
        if done:
            time.sleep(0.1)
            return done[0]
        time.sleep(0.1)
    raise AssertionError(f"no file was downloaded into {folder}")


def screenshot(driver, name: str) -> None:
    folder = os.environ.get("QKVQUIZ_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def test_the_page_reads_every_entry_text_as_the_grader_does(browser, generated):
    open_fresh(browser, generated["form"])
    texts = [c["text"] for c in CASES]
    readings = browser.execute_script(
        """
        return arguments[0].map(function (t) {
          try {
            var v = window.qkvquizParse.parseEntry(t);
            return {value: v === Infinity ? "inf" : v === -Infinity ? "-inf" : v};
          } catch (e) { return {error: e.message}; }
        });
        """,
        texts,
    )
    assert_js_agrees_with_python(texts, readings)


def test_typing_the_key_and_saving_scores_full_marks(browser, generated, tmp_path):
    open_fresh(browser, generated["form"])
    texts = key_texts(generated["entry"], generated["shapes"])
    for part, row in texts.items():
        found = boxes(browser, part)
        assert len(found) == len(row), part
        for box, text in zip(found, row):
            type_into(box, text)
    assert browser.find_elements(By.CSS_SELECTOR, "input.entry.bad") == []
    # The box with 5/3-style text says how it reads; nothing says what the answer is.
    screenshot(browser, "answer-form-filled.png")
    before = {p.name for p in browser.downloads.iterdir()}
    browser.find_element(By.ID, "save-answers").click()
    saved = wait_for_download(browser.downloads, before)
    doc = json.loads(saved.read_text(encoding="utf-8"))
    assert set(doc) == {"student", "variant", "set", "answers", "saved_at"}
    assert doc["set"] == json.loads(generated["key_path"].read_text(encoding="utf-8"))["set"]
    assert doc["saved_at"].endswith("Z")  # ISO 8601, UTC: the grader prefers the latest saved file
    assert (doc["student"], doc["variant"]) == (STUDENT, generated["entry"]["variant"])
    assert {k: np.ravel(np.array(v, dtype=object)).tolist() for k, v in doc["answers"].items()} == texts
    assert "Saved" in browser.find_element(By.ID, "form-status").text

    result = CliRunner().invoke(app, ["grade", str(generated["key_path"]), str(saved), "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    header, *rows = (tmp_path / "g" / "results.csv").read_text(encoding="utf-8").strip().splitlines()
    (row,) = [r for r in rows if r.split(",")[0] == STUDENT]  # the others: "(no submission)" rows
    cells = dict(zip(header.split(","), row.split(",")))
    assert cells["student"] == STUDENT and cells["variant"] == generated["entry"]["variant"]
    assert float(cells["score"]) == float(cells["total"]) == 13.0


def test_an_unreadable_box_is_marked_and_nothing_is_saved(browser, generated):
    open_fresh(browser, generated["form"])
    box = boxes(browser, "q3.weights")[4]
    type_into(box, "abc")
    assert "bad" in box.get_attribute("class").split() and box.get_attribute("aria-invalid") == "true"
    status = browser.find_element(By.CSS_SELECTOR, 'fieldset[data-part="q3.weights"] .part-status').text
    assert status == 'row 2, column 2: cannot read "abc" as a number (unknown name "abc")'
    before = {p.name for p in browser.downloads.iterdir()}
    browser.find_element(By.ID, "save-answers").click()
    assert "cannot be read" in browser.find_element(By.ID, "form-status").text
    assert browser.switch_to.active_element == box
    time.sleep(0.5)
    assert {p.name for p in browser.downloads.iterdir()} == before
    type_into(box, "0,5")
    assert "bad" not in box.get_attribute("class").split() and box.get_attribute("aria-invalid") is None


def test_work_survives_a_reload(browser, generated):
    open_fresh(browser, generated["form"])
    type_into(boxes(browser, "q4.scores")[1], "-inf")
    type_into(boxes(browser, "q2.scores")[8], "7/4")
    browser.refresh()
    assert boxes(browser, "q4.scores")[1].get_attribute("value") == "-inf"
    assert boxes(browser, "q2.scores")[8].get_attribute("value") == "7/4"
    assert boxes(browser, "q2.scores")[0].get_attribute("value") == ""
    stored = browser.execute_script(f"return window.localStorage.getItem('qkvquiz:answers:{generated['entry']['variant']}')")
    assert json.loads(stored)["answers"]["q2.scores"][2][2] == "7/4"


def test_loading_a_saved_file_restores_the_boxes(browser, generated, tmp_path):
    entry = generated["entry"]
    saved = tmp_path / "earlier.json"
    saved.write_text(json.dumps({"student": STUDENT, "variant": entry["variant"], "answers": entry["answers"]}), encoding="utf-8")
    open_fresh(browser, generated["form"])
    browser.find_element(By.ID, "load-answers").send_keys(str(saved))
    for part, answer in entry["answers"].items():
        want = [str(v) if not isinstance(v, float) else repr(v) for v in np.ravel(np.array(answer, dtype=object)).tolist()]
        got = [b.get_attribute("value") for b in boxes(browser, part)]
        assert [float(g) for g in got] == [float(w) for w in want], part
    assert "Loaded earlier.json" in browser.find_element(By.ID, "form-status").text
    # Another student's file is refused and changes nothing.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"student": "alan", "variant": "ZZZZ-ZZZZ", "answers": {"q1.scores": "1"}}), encoding="utf-8")
    first = boxes(browser, "q1.scores")[0].get_attribute("value")
    browser.find_element(By.ID, "load-answers").send_keys(str(other))
    assert "nothing was loaded" in browser.find_element(By.ID, "form-status").text
    assert boxes(browser, "q1.scores")[0].get_attribute("value") == first


def test_tab_moves_along_each_row_then_down(browser, generated):
    open_fresh(browser, generated["form"])
    first = boxes(browser, "q2.scores")[0]
    first.click()
    seen = []
    for step in range(10):
        if step:
            browser.switch_to.active_element.send_keys(Keys.TAB)
        active = browser.switch_to.active_element
        seen.append((active.get_attribute("name").split("[")[0], active.get_attribute("data-index")))
    assert seen == [("q2.scores", f"{r},{c}") for r in range(3) for c in range(3)] + [("q3.weights", "0,0")]
    # Enter moves on like Tab, so a row can be typed with one hand.
    browser.switch_to.active_element.send_keys("1", Keys.ENTER)
    assert browser.switch_to.active_element.get_attribute("data-index") == "0,1"


def test_readable_on_a_phone(browser, generated):
    open_fresh(browser, generated["form"])
    type_into(boxes(browser, "q4.scores")[1], "−∞")
    browser.set_window_size(390, 844)
    try:
        width = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width  # the page never scrolls sideways
        box = boxes(browser, "q4.scores")[0]
        assert box.size["width"] >= 44 and box.size["height"] >= 30  # big enough to tap
        screenshot(browser, "answer-form-phone.png")
    finally:
        browser.set_window_size(1100, 1400)


def test_a_stack_of_matrices_nests_as_the_grader_reads_it(browser, generated):
    # The 16 boxes of a 4×4 part, read as a 2×2×4 stack (as a multi-head part would be):
    # the saved answer nests matrix → row → column, and loading it back fills the same boxes.
    open_fresh(browser, generated["form"])
    found = boxes(browser, "q4.weights")
    texts = [f"{k}/7" for k in range(16)]
    for box, text in zip(found, texts):
        type_into(box, text)
    found[3].clear()  # an empty box is saved as null
    texts[3] = None
    saved = browser.execute_script(
        "var f = document.querySelector('fieldset[data-part=\"q4.weights\"]'); f.dataset.shape = '2,2,4';"
        "return window.qkvquizForm.collect().answers['q4.weights'];"
    )
    assert saved == np.array(texts, dtype=object).reshape(2, 2, 4).tolist()
    from qkvquiz.grade.parse import AnswerFormatError, parse_answer

    with pytest.raises(AnswerFormatError, match="^matrix 1, row 1, column 4:"):
        parse_answer(saved, (2, 2, 4))  # the grader sees the empty box where the page had it
    for box in found:
        box.clear()
    misfit = browser.execute_script("return window.qkvquizForm.fill({'q4.weights': arguments[0]})", saved)
    assert misfit == []
    assert [b.get_attribute("value") for b in found] == [t or "" for t in texts]
    wrong = browser.execute_script("return window.qkvquizForm.fill({'q4.weights': [[1, 2], [3]]})")
    assert wrong == ["q4.weights"]


def full_width(text: str) -> str:
    """What a Chinese input method types for ``text``: full-width digits and signs, −∞ as －∞."""
    text = text.replace("−", "-")
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" and not c.isalpha() else c for c in text)


def test_the_chinese_form_takes_full_width_entries_and_the_grader_scores_them(browser, tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text(f"{STUDENT}\n", encoding="utf-8")
    out = tmp_path / "zh"
    result = CliRunner().invoke(app, ["generate", "attention-basics", "--roster", str(roster), "--format", "html",
                                      "--out", str(out), "--seed", "e2e", "--lang", "zh", "--public"])
    assert result.exit_code == 0, result.output
    key = json.loads((out / "key.json").read_text(encoding="utf-8"))
    entry = key["students"][0]
    shapes = {p["id"]: tuple(p["shape"]) for item in key["items"] for p in item["parts"]}
    open_fresh(browser, out / "students" / STUDENT / "answer-form.html")
    assert browser.find_element(By.ID, "save-answers").text == "保存答案"
    texts = {part: [full_width(t) for t in row] for part, row in key_texts(entry, shapes).items()}
    assert any("／" in t for row in texts.values() for t in row) and any("－∞" in t for row in texts.values() for t in row)
    for part, row in texts.items():
        for box, text in zip(boxes(browser, part), row):
            type_into(box, text)
    assert browser.find_elements(By.CSS_SELECTOR, "input.entry.bad") == []
    box = boxes(browser, "q3.weights")[4]
    type_into(box, "０、５")
    status = browser.find_element(By.CSS_SELECTOR, 'fieldset[data-part="q3.weights"] .part-status').text
    assert status.startswith("第 2 行第 2 列：无法把“０、５”识别为数字（“、”既可能分隔两个元素"), status
    type_into(box, texts["q3.weights"][4])
    screenshot(browser, "answer-form-zh.png")
    before = {p.name for p in browser.downloads.iterdir()}
    browser.find_element(By.ID, "save-answers").click()
    saved = wait_for_download(browser.downloads, before)
    assert "已保存" in browser.find_element(By.ID, "form-status").text
    result = CliRunner().invoke(app, ["grade", str(out / "key.json"), str(saved), "--out", str(tmp_path / "g")])
    assert result.exit_code == 0, result.output
    header, row = (tmp_path / "g" / "results.csv").read_text().strip().splitlines()
    cells = dict(zip(header.split(","), row.split(",")))
    assert float(cells["score"]) == float(cells["total"]) == 13.0
    assert "8 个小题中 8 个正确" in (tmp_path / "g" / "feedback" / f"{STUDENT}.md").read_text(encoding="utf-8")


def test_legends_keep_part_ids_whole_on_a_narrow_phone(browser, tmp_path):
    # 320 px (the narrowest phones): each legend's part id on one line, and a long id pushes its
    # points to the next line instead of past the part's box.
    from qkvquiz.render.form import answer_form_html
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    spec = parse_spec({"title": "Narrow", "items": [
        {"id": "week3-causal-masked-attention", "family": "attention.masked",
         "params": {"mask": "causal", "tokens": 3}, "ask": ["scores", "weights"]},
        {"id": "q2", "family": "backprop.softmax", "ask": ["dS"]},
    ]})
    form = tmp_path / "narrow.html"
    form.write_text(answer_form_html(build_worksheet(spec, ["ada"], seed=1), 0), encoding="utf-8")
    browser.set_window_size(320, 800)
    try:
        open_fresh(browser, form)
        legends = browser.execute_script("""return [...document.querySelectorAll('fieldset.part')].map(f => {
            const legend = f.querySelector('legend'), id = legend.querySelector('code');
            return {id: id && id.textContent, lines: id ? id.getClientRects().length : 0,
                    right: legend.getBoundingClientRect().right, box: f.getBoundingClientRect().right};
        })""")
        assert [x["id"] for x in legends] == ["week3-causal-masked-attention.scores",
                                              "week3-causal-masked-attention.weights", "q2.dS"]
        for x in legends:
            assert x["lines"] == 1, x  # the id whole, on one line
            assert x["right"] <= x["box"] + 0.5, x  # nothing of the legend past its box
        screenshot(browser, "answer-form-legends-320.png")
    finally:
        browser.set_window_size(1100, 1400)
