"""The practice page in a real headless browser, served and static, in English and Chinese: a right
answer is marked right, planted typical mistakes get their diagnosis, a slip carried into the
next part gets carried credit, the worked steps show the variant's own numbers, and "another one
like this" draws another variant. The static site's checker agrees with the grader.

Skips where selenium, chromium or chromedriver is missing. QKVQUIZ_SCREENSHOT_DIR keeps screenshots.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from qkvquiz import practice
from qkvquiz.core import i18n
from qkvquiz.families import REGISTRY

from ..helpers import wait_for
from .helpers import as_texts, carried_value, mistake_value, part_of, right_answers, running

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

TOPICS = ["attention.output", "attention.masked"]


@pytest.fixture(scope="module", params=["en", "zh"])
def lang(request):
    return request.param


@pytest.fixture(scope="module")
def static_site(lang, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"site-{lang}")
    topics = practice.topics_for(TOPICS, lang=lang)
    return practice.build_static(topics, 4, out, lang=lang, seed="b1")


@pytest.fixture(scope="module")
def served(lang, tmp_path_factory):
    topics = practice.topics_for(TOPICS, lang=lang)
    with running(topics, lang=lang, seed="b1", progress_path=tmp_path_factory.mktemp("p") / "p.json") as server:
        yield server


@pytest.fixture(params=["server", "static"])
def page(request, browser, lang):
    """The page open in the browser, its first problem shown; returns a helper."""
    if request.param == "server":
        url = request.getfixturevalue("served").url
    else:
        url = request.getfixturevalue("static_site").as_uri()
    browser.get(url)
    browser.execute_script("window.localStorage.clear()")
    browser.refresh()
    wait_for(lambda: browser.execute_script(
        "return !!(window.qkvquizPractice && window.qkvquizPractice.current())"))
    return Page(browser, request.param, lang)


class Page:
    def __init__(self, driver, mode: str, lang: str) -> None:
        self.driver, self.mode, self.lang = driver, mode, lang

    def choose(self, topic: str) -> None:
        self.driver.execute_script(
            "var s = document.getElementById('topic'); s.value = arguments[0];"
            "s.dispatchEvent(new Event('change'));", topic)
        wait_for(lambda: self.driver.execute_script(
            "var c = window.qkvquizPractice.current(); return c && c.topic === arguments[0]", topic))

    def seed(self) -> str:
        return self.driver.find_element(By.ID, "seed").text

    def problem(self) -> practice.Problem:
        topic = self.driver.execute_script("return window.qkvquizPractice.current().topic")
        (t,) = practice.topics_for([topic], lang=self.lang)
        return practice.new_problem(t, self.seed())

    def fill(self, answers: dict) -> None:
        for part, value in answers.items():
            texts = [value] if isinstance(value, str) else np.ravel(np.array(value, dtype=object)).tolist()
            self.driver.execute_script(
                "var boxes = document.querySelectorAll('fieldset.part[data-part=\"' + arguments[0] + '\"] input.entry');"
                "arguments[1].forEach(function (t, k) { boxes[k].value = t === null ? '' : t; });", part, texts)

    def check(self) -> dict[str, dict[str, str]]:
        self.driver.execute_script("document.getElementById('summary').textContent = '';")
        self.driver.find_element(By.ID, "check").click()
        wait_for(lambda: self.driver.find_element(By.ID, "summary").text)
        out = {}
        for fieldset in self.driver.find_elements(By.CSS_SELECTOR, "fieldset.part"):
            status = fieldset.find_element(By.CSS_SELECTOR, ".part-status")
            out[fieldset.get_attribute("data-part")] = {
                "verdict": status.get_attribute("data-verdict"), "text": status.text,
                "diagnosis": " ".join(e.text for e in fieldset.find_elements(By.CSS_SELECTOR, ".diagnosis:not(.invariant)")),
                "invariants": " ".join(e.text for e in fieldset.find_elements(By.CSS_SELECTOR, ".invariant")),
                "carry": " ".join(e.text for e in fieldset.find_elements(By.CSS_SELECTOR, ".carry-note")),
            }
        return out

    def sentence(self, family: str, mistake: str) -> str:
        m = next(m for m in REGISTRY[family].misconceptions if m.name == mistake)
        with i18n.using(self.lang):
            return i18n._(m.feedback)


def screenshot(driver, name: str) -> None:
    folder = os.environ.get("QKVQUIZ_SCREENSHOT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / name))


def test_a_right_answer_is_marked_right(page):
    problem = page.problem()
    assert page.seed() == ("b1" if page.mode == "server" else "b1-1")  # --seed reproduces
    answers = right_answers(problem)
    if page.lang == "zh":  # typed on a Chinese keyboard
        first = next(iter(answers))
        answers[first][0][0] = "".join(chr(ord(c) + 0xFEE0) if c in "0123456789./-" else c for c in answers[first][0][0])
    page.fill(answers)
    marks = page.check()
    assert {m["verdict"] for m in marks.values()} == {"correct"}
    assert all(m["text"] == ("正确。" if page.lang == "zh" else "Right.") for m in marks.values())
    screenshot(page.driver, f"practice-{page.mode}-{page.lang}-right.png")


def test_unscaled_scores_are_diagnosed_and_the_weights_from_them_carried(page):
    problem = page.problem()
    scores, unscaled = mistake_value(problem, "unscaled")
    answers = right_answers(problem)
    answers[scores] = as_texts(unscaled)
    answers[part_of(problem, "weights")] = as_texts(carried_value(problem, "weights", {"scores": unscaled}))
    page.fill(answers)
    marks = page.check()
    assert marks[scores]["verdict"] in ("partial", "wrong")
    assert page.sentence("attention.output", "unscaled") in marks[scores]["diagnosis"]
    assert marks[part_of(problem, "weights")]["verdict"] == "carried"
    screenshot(page.driver, f"practice-{page.mode}-{page.lang}-diagnosis.png")


def test_softmax_over_the_wrong_axis_is_diagnosed(page):
    problem = page.problem()
    weights, wrong = mistake_value(problem, "column_softmax")
    answers = right_answers(problem)
    answers[weights] = as_texts(wrong)
    page.fill(answers)
    marks = page.check()
    assert page.sentence("attention.output", "column_softmax") in marks[weights]["diagnosis"]


def test_masking_after_the_softmax_is_diagnosed(page):
    page.choose("attention.masked")
    problem = page.problem()
    weights, wrong = mistake_value(problem, "mask_after_softmax")
    answers = right_answers(problem)
    answers[weights] = as_texts(wrong)
    page.fill(answers)
    marks = page.check()
    assert page.sentence("attention.masked", "mask_after_softmax") in marks[weights]["diagnosis"]


def test_a_slip_carried_into_the_next_part_gets_carried_credit(page):
    problem = page.problem()
    scores = part_of(problem, "scores")
    if page.mode == "server":  # any slip: the grader re-runs the step on the student's own scores
        own = problem.key.items[0].env["scores"][0].copy()
        own[1, 2] += 0.5
    else:  # the site credits work carried from a known mistake
        own = mistake_value(problem, "unscaled")[1]
    answers = right_answers(problem)
    answers[scores] = as_texts(own)
    answers[part_of(problem, "weights")] = as_texts(carried_value(problem, "weights", {"scores": own}))
    page.fill(answers)
    marks = page.check()
    assert marks[scores]["verdict"] in ("partial", "wrong")
    assert marks[part_of(problem, "weights")]["verdict"] == "carried"
    assert marks[part_of(problem, "output")]["verdict"] == "correct"


def test_the_worked_steps_show_this_variants_numbers(page):
    problem = page.problem()
    page.driver.find_element(By.ID, "show-worked").click()
    wait_for(lambda: page.driver.find_element(By.ID, "worked-body").text)
    html = page.driver.find_element(By.ID, "worked-body").get_attribute("innerHTML")
    assert page.driver.find_element(By.ID, "worked").is_displayed()
    scores = problem.key.items[0].env["scores"][0]
    for (i, j), value in np.ndenumerate(scores):  # each score worked out, ending in its own value
        line = re.search(rf"<i>S</i><sub>{i + 1}{j + 1}</sub>\s=\s.*?</li>", html)
        assert line and re.search(rf"\s=\s{value:g}</span></li>$".replace("-", "−"), line.group()), (i, j)
    screenshot(page.driver, f"practice-{page.mode}-{page.lang}-worked.png")


def test_another_one_like_this_is_another_variant(page):
    first, html = page.seed(), page.driver.find_element(By.ID, "problem").get_attribute("innerHTML")
    page.driver.find_element(By.ID, "another").click()
    wait_for(lambda: page.seed() != first)
    assert page.driver.find_element(By.ID, "problem").get_attribute("innerHTML") != html
    assert page.driver.find_element(By.ID, "worked").get_attribute("hidden")


def test_progress_is_shown_as_a_table(page):
    page.fill(right_answers(page.problem()))
    page.check()
    rows = page.driver.find_elements(By.CSS_SELECTOR, "#progress tbody tr")
    assert rows and rows[0].find_elements(By.TAG_NAME, "td")[1].text == "1"


def test_it_fits_a_phone(page):
    page.driver.set_window_size(390, 844)
    try:
        widths = page.driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
        screenshot(page.driver, f"practice-{page.mode}-{page.lang}-phone.png")
    finally:
        page.driver.set_window_size(1100, 1400)


def test_the_static_checker_agrees_with_the_grader(browser, static_site, lang):
    """Answers of many kinds checked in the browser from the site's data and by the grader."""
    browser.get(static_site.as_uri())
    wait_for(lambda: browser.execute_script("return !!(window.qkvquizPractice && window.qkvquizPractice.current())"))
    pg = Page(browser, "static", lang)
    rng = np.random.default_rng(5)
    for topic in TOPICS:
        if pg.driver.execute_script("return window.qkvquizPractice.current().topic") != topic:
            pg.choose(topic)
        for round_ in range(3):
            problem = pg.problem()
            right = right_answers(problem)
            sets = [right]
            (item,) = problem.key.items
            asked = {p.step: p.id for p in item.parts}
            for m in item.family.misconceptions:  # each mistake of an asked step (one name may be of several)
                if m.applies_to(item.params) and m.step in asked:
                    with np.errstate(all="ignore"):
                        value = np.asarray(m.fn(item.env, item.params, np))[0]
                    if np.shape(value) == np.shape(item.env[m.step][0]):
                        sets.append({**right, asked[m.step]: as_texts(value)})
            slipped = {pid: [[t if rng.random() > 0.2 else "0.1" for t in row] for row in v] for pid, v in right.items()}
            sets += [slipped, {pid: None for pid in right}, {**right, part_of(problem, "scores"): [["x"] * 3] * 3}]
            sets += planted_slips(problem, right)
            for answers in sets:
                pg.fill({pid: v if v is not None else np.full(np.shape(right[pid]), None).tolist()
                         for pid, v in answers.items()})
                sent = pg.driver.execute_script("return window.qkvquizPractice.collect()")
                checked = pg.check()
                seen = {pid: m["verdict"] for pid, m in checked.items()}
                parts = practice.check(problem, sent).parts
                graded = {p.part: p.verdict for p in parts}
                assert seen == graded, (topic, problem.seed, answers)
                # The same score: the entries a mask fixes carry the same share on the page as in the grader.
                shares = pg.driver.execute_script(SHARES)
                for p in parts:
                    if p.verdict in ("correct", "partial", "wrong", "carried"):
                        assert shares[p.part] * p.points == pytest.approx(p.score), (topic, problem.seed, p.part, answers)
                for p in parts:  # the same mistakes named (a masked score written as 0 in one entry too)
                    assert bool(checked[p.part]["diagnosis"]) == bool(p.diagnosis), (topic, problem.seed, p.part, answers)
                    # The property a wrong answer breaks, named on the static page as by the grader.
                    assert bool(checked[p.part]["invariants"]) == bool(p.invariants), (topic, problem.seed, p.part, answers)
            pg.driver.find_element(By.ID, "another").click()
            wait_for(lambda: pg.seed() != problem.seed)


# The share of the points the page gives each part (practice.js checkVariant), from the boxes as filled.
SHARES = """
var c = window.qkvquizPractice.current(), readings = {}, out = {};
document.querySelectorAll('fieldset.part').forEach(function (f) {
  readings[f.dataset.part] = window.qkvquizPractice.readPart(f, c.variant.parts[f.dataset.part]);
});
window.qkvquizPractice.checkVariant(c.variant, readings).forEach(function (r) { out[r.part] = r.share || 0; });
return out;
"""


def planted_slips(problem, right) -> list[dict]:
    """A masked score written as 0 (one, and all), one unreadable box, and the scale forgotten."""
    scores = part_of(problem, "scores")
    (item,) = problem.key.items
    masked = [tuple(i) for i in np.argwhere(np.isneginf(np.asarray(item.env["scores"][0])))]
    out = []
    if masked:
        one = [list(row) for row in right[scores]]
        one[masked[0][0]][masked[0][1]] = "0"
        every = [list(row) for row in right[scores]]
        for i, j in masked:
            every[i][j] = "0"
        out += [{**right, scores: one}, {**right, scores: every}]
    weights = part_of(problem, "weights")
    unread = [list(row) for row in right[weights]]
    unread[-1][-1] = "0、21"
    out.append({**right, weights: unread})
    m = next((m for m in item.family.mistakes_for("scores", item.params) if m.name == "unscaled"), None)
    if m is not None:
        out.append({**right, scores: as_texts(np.asarray(m.fn(item.env, item.params, np))[0])})
    return out


@pytest.fixture(scope="module")
def every_family_site(tmp_path_factory):
    topics = practice.topics_for(sorted(REGISTRY))
    return practice.build_static(topics, 1, tmp_path_factory.mktemp("every"), lang="en", seed="every")


def test_the_static_checker_agrees_with_the_grader_on_every_family(browser, every_family_site):
    """The key's own answers and every known mistake, in every family (shapes, partial asks,
    ragged chunks), checked by the site and by the grader."""
    browser.get(every_family_site.as_uri())
    wait_for(lambda: browser.execute_script("return !!(window.qkvquizPractice && window.qkvquizPractice.current())"))
    pg = Page(browser, "static", "en")
    for family in sorted(REGISTRY):
        if pg.driver.execute_script("return window.qkvquizPractice.current().topic") != family:
            pg.choose(family)
        problem = pg.problem()
        (item,) = problem.key.items
        def typed(step, value):  # one text per box; a shape is one box, "2×4"
            if item.family.step(step).kind == "shape":
                return "×".join(str(int(v)) for v in np.ravel(value))
            return box_texts(value)

        right = {p.id: typed(p.step, item.env[p.step][0]) for p in item.parts}
        sets = [right]
        for m in item.family.misconceptions:
            if m.applies_to(item.params) and any(p.step == m.step for p in item.parts):
                with np.errstate(all="ignore"):
                    value = np.asarray(m.fn(item.env, item.params, np))[0]
                if np.shape(value) == np.shape(item.env[m.step][0]):
                    sets.append({**right, part_of(problem, m.step): typed(m.step, value)})
        for answers in sets:
            pg.fill(answers)
            sent = pg.driver.execute_script("return window.qkvquizPractice.collect()")  # what the page would send
            seen = {pid: m["verdict"] for pid, m in pg.check().items()}
            graded = {p.part: p.verdict for p in practice.check(problem, sent).parts}
            assert seen == graded, (family, sent)


def box_texts(value) -> list | str | None:
    """A value as the boxes hold it: a text per entry, None (an empty box) where it has no value."""
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        x = float(arr)
        return None if np.isnan(x) else ("-inf" if x == -np.inf else "inf" if x == np.inf else repr(round(x, 9)))
    return [box_texts(v) for v in arr]


def test_served_and_static_pages_word_a_check_alike_in_sentences(page):
    """One source of words for both modes: the grader's clauses as sentences, the parser's words a
    student understands, and the property a wrong answer breaks named on both pages."""
    problem = page.problem()
    answers = right_answers(problem)
    scores, weights, output = (part_of(problem, s) for s in ("scores", "weights", "output"))
    answers[scores] = [["1.2.3", *answers[scores][0][1:]], *answers[scores][1:]]
    answers[weights] = [["0.9"] * len(row) for row in answers[weights]]  # rows that do not sum to 1
    answers[output] = np.full(np.shape(answers[output]), None).tolist()
    page.fill(answers)
    marks = page.check()
    with i18n.using(page.lang):
        two = i18n._("it holds two numbers (a second decimal point, or a space inside a number); write one number per box")
        rows = next(i18n._(inv.feedback) for inv in REGISTRY["attention.output"].step("weights").invariants)
    if page.lang == "en":
        assert marks[scores]["text"] == (
            'Not right yet. 8 of 9 entries within tolerance; row 1, column 1: cannot read "1.2.3" as a number '
            f"({two}); it counts as a wrong entry.")
        assert marks[output]["text"] == "Not answered."
        if page.mode == "server":  # the grader's clause on carried work, as a sentence
            assert marks[weights]["carry"].startswith("No credit is carried forward: ")
    assert two in marks[scores]["text"] and "unexpected" not in marks[scores]["text"]
    assert rows in marks[weights]["invariants"]
    # The progress table names the topic as the picker does.
    picked = page.driver.execute_script("var s = document.getElementById('topic'); return s.options[s.selectedIndex].text")
    titles = [row.find_elements(By.TAG_NAME, "td")[0].text
              for row in page.driver.find_elements(By.CSS_SELECTOR, "#progress tbody tr")]
    assert picked.strip() in titles, titles
