"""`generate --format pdf`: the students' worksheets, key.pdf and class.pdf, read back with
poppler-utils (pdftotext, pdfinfo, pdffonts); the answer areas and the key's math as text.

The PDF tests skip where WeasyPrint or poppler-utils are missing; the tests of the HTML they
print from, and of a missing WeasyPrint, run everywhere.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.render.markdown import key_decimals
from typer.testing import CliRunner

import qkvquiz.render.pdf as pdf_module
from qkvquiz.cli import app
from qkvquiz.generate import generate_set
from qkvquiz.render.answer_areas import answer_area_html, place_answer_areas
from qkvquiz.render.documents import key_documents, worksheet_document
from qkvquiz.render.latex import num
from qkvquiz.render.math_html import math_cache_info, math_html
from qkvquiz.render.pdf import (
    DEBIAN_PACKAGES,
    PdfUnavailable,
    pdf_available,
)
from qkvquiz.render.pdf_batch import render_pdfs
from qkvquiz.render.textmath import Unsupported, text_math_html
from qkvquiz.spec import parse_spec

from ..helpers import canary_worksheet
from .pdf_reading import Ink, ink, page_margins
from .pdf_reading import words as page_words

MINUS = "\u2212"
STUDENTS = ["ada", "s02"]
ITEMS = [
    {"family": "attention.scores", "params": {"form": "vector"}},
    {"family": "attention.weights", "params": {"tokens": 3, "mask": "causal"}, "ask": ["scores", "weights"]},
]
SPEC = parse_spec({"title": "PDF check", "items": ITEMS})
needs_pdf = pytest.mark.skipif(not pdf_available(), reason="WeasyPrint cannot run here")
runner = CliRunner()


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (poppler-utils) is not installed")
    return path


def run(*args: str) -> str:
    return subprocess.run([tool(args[0]), *args[1:]], check=True, capture_output=True, text=True).stdout


def text(pdf: Path, page: int | None = None) -> str:
    pages = ["-f", str(page), "-l", str(page)] if page else []
    return run("pdftotext", "-layout", *pages, str(pdf), "-")


def words(pdf: Path, page: int | None = None) -> str:
    return " ".join(text(pdf, page).split())


def pages(pdf: Path) -> int:
    return int(re.search(r"Pages:\s+(\d+)", run("pdfinfo", str(pdf))).group(1))


def printed(x: float) -> str:
    """A given as a worksheet prints it: integers plain, negatives with U+2212."""
    return (str(int(x)) if float(x).is_integer() else f"{x}").replace("-", MINUS)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory):
    if not pdf_available():
        pytest.skip("WeasyPrint cannot run here")
    out = tmp_path_factory.mktemp("set")
    return generate_set(SPEC, STUDENTS, out, seed="pdf", formats="md,pdf", class_pdf=True, workers=2)


# --------------------------------------------------------------------------- worksheets


@pytest.mark.slow
@needs_pdf
def test_a_worksheet_names_its_student_and_numbers_its_pages(made) -> None:
    for i, student in enumerate(made.worksheet.students):
        sheet = made.folders[student] / "worksheet.pdf"
        n = pages(sheet)
        assert 1 <= n <= 2
        all_words = words(sheet)
        assert "Name" in all_words and f"Student ID {student}" in all_words
        assert made.worksheet.codes[i] in all_words
        for page in range(1, n + 1):
            page_words = words(sheet, page)
            assert f"Page {page} of {n}" in page_words
            assert student in page_words  # the footer names the student on every page


@pytest.mark.slow
@needs_pdf
def test_every_given_number_of_the_student_can_be_found_in_their_pdf(made) -> None:
    ws = made.worksheet
    for i, student in enumerate(ws.students):
        found = words(made.folders[student] / "worksheet.pdf")
        for variant in ws.variant(i):
            for name, value in variant["givens"].items():
                for row in np.atleast_2d(value):
                    finite = [printed(x) for x in row if np.isfinite(x)]
                    assert " ".join(finite) in found, (student, name, finite)


def _horizontal_runs(drawn: Ink, y0: float, y1: float, x0: float, x1: float, least: float) -> list[tuple[int, int, int]]:
    """Each horizontal line of ink at least ``least`` points long inside the box: (y, from, to).
    A grid's rows of boxes draw such lines; letters, fraction rules and brackets do not."""
    found = []
    for x, y in sorted(drawn.dark(x0, y0, x1, y1), key=lambda d: (d[1], d[0])):
        if found and found[-1][0] == y and found[-1][2] == x:
            found[-1] = (y, found[-1][1], x + 1)
        else:
            found.append((y, x, x + 1))
    return [run for run in found if run[2] - run[1] >= least]


@pytest.mark.slow
@needs_pdf
def test_every_asked_part_has_its_answer_area_in_the_pdf(made) -> None:
    """On paper each asked part is its letter, its points once in the right margin level with
    the letter, and its answer cells (a comb of cells for each entry, as many combs to a row as
    its answer has columns) ending at the text's right edge; no part is named by its id, and the
    Markdown's "Answer: …, part q1.scores (1 pt)." is not repeated."""
    from collections import defaultdict

    from qkvquiz.render.printed import CELL_W, PAD_LEFT, PAD_RIGHT, part_combs

    pdf = made.folders["ada"] / "worksheet.pdf"
    sheet = words(pdf)
    assert "Answer:" not in sheet
    asked, combs = [], []
    for item, env in zip(made.worksheet.spec.items, made.worksheet.envs):
        for k, part in enumerate(item.parts):
            shape = np.shape(env[part.step][0])  # ada's answer
            assert part.id not in sheet, part.id
            asked.append((f"({chr(ord('a') + k)})", num(part.points, 2), shape[-1] if shape else 1))
            combs.append(part_combs(made.worksheet)[part.id])
    # Points print once each: in the margin, never in a heading or a caption.
    assert sheet.split().count("pt") == len(asked), sheet
    _top, right, bottom, left = page_margins()
    seen = []
    for page, drawn in zip(page_words(pdf), ink(pdf)):
        edge = page.width - right
        # A part's letter hangs at the text's left edge; a heading starts a problem.
        starts = sorted((w for w in page.words if abs(w.x_min - left) < 1
                         and (re.fullmatch(r"\([a-z]\)", w.text) or w.text == "Problem")), key=lambda w: w.y_min)
        for letter, after in zip(starts, [*starts[1:], None]):
            if letter.text == "Problem":
                continue
            end = page.height - bottom if after is None else after.y_min
            # The points stand raised, level with the letter (a box's top line too).
            margin = [w for w in page.words if w.text == "pt" and w.x_min > edge and w.level_with(letter)]
            assert len(margin) == 1, (letter, margin)
            (pt,) = margin
            number = [w for w in page.words if edge < w.x_min and w.x_max <= pt.x_min and w.level_with(pt)]
            assert len(number) == 1, (letter, number)
            # The cells: the top lines of a row of cells in the part's room, the widest row as wide
            # as a row of the answer's combs, ending at the text's right edge.
            # (A comb's top may stand a little above the points' letters.)
            lines = _horizontal_runs(drawn, min(letter.y_min, pt.y_min) - 6, end, left, edge + 2, 0.8 * CELL_W)
            assert lines, (letter, "no cells")
            # A row of cells is a chain of such lines a few points apart (the gaps at the sign, the
            # point and between combs); a fraction's rule stands alone.
            chains: dict[int, list[list[int]]] = defaultdict(list)
            for y, start, stop in lines:
                if chains[y] and start - chains[y][-1][1] <= 8:
                    chains[y][-1][1] = stop
                else:
                    chains[y].append([start, stop])
            start, stop = max((span for spans in chains.values() for span in spans), key=lambda s: s[1] - s[0])
            # (A matrix's bracket stands between its last cell and the edge.)
            bracket = 3.0 if asked[len(seen)][2] > 1 else 0.0
            assert abs(stop + bracket - edge) <= 2, (letter, stop, edge)
            width = combs[len(seen)].width_pt
            seen.append((letter.text, number[0].text, round((stop - start + PAD_LEFT + PAD_RIGHT) / width)))
    assert seen == asked


@pytest.mark.slow
@needs_pdf
def test_every_font_is_embedded(made) -> None:
    for pdf in (made.folders["ada"] / "worksheet.pdf", made.out / "key.pdf", made.out / "class.pdf"):
        lines = run("pdffonts", str(pdf)).splitlines()[2:]
        assert lines
        for line in lines:
            emb = line.split()[-5]
            assert emb == "yes", line


@pytest.mark.slow
@needs_pdf
def test_a_students_pdf_shows_no_answer(made, tmp_path: Path) -> None:
    # If the sheet showed any step's value, its text would change with the step values. (The
    # printed sheet's combs are the class's, the same for every student: test_printed.py.)
    from qkvquiz.render.printed import part_combs

    ws, canary = made.worksheet, canary_worksheet(made.worksheet, seed=11)
    combs = part_combs(ws)
    jobs = [(worksheet_document(canary, i, combs=combs), tmp_path / f"{i}.pdf") for i in range(len(ws.students))]
    render_pdfs(jobs, workers=1, progress=False)
    for i, student in enumerate(ws.students):
        assert worksheet_document(canary, i) == worksheet_document(ws, i)
        assert worksheet_document(canary, i, combs=combs) == worksheet_document(ws, i, combs=combs)
        assert text(tmp_path / f"{i}.pdf") == text(made.folders[student] / "worksheet.pdf")


# --------------------------------------------------------------------------- key and class PDFs


@pytest.mark.slow
@needs_pdf
def test_the_key_gives_each_student_their_own_pages_with_their_answers(made) -> None:
    ws, key = made.worksheet, made.out / "key.pdf"
    n = pages(key)
    assert n >= 1 + len(ws.students)
    cover = words(key, 1)
    assert "Answer key: PDF check" in cover and all(s in cover for s in ws.students)
    owner = []
    for page in range(2, n + 1):
        found = words(key, page)
        # The running header names the page's student, and only that student (a student's
        # first page has none: its title block names the student).
        named = [s for s in ws.students if f"Student {s} " in found or f"Student ID {s} " in found]
        assert len(named) == 1, found[:200]
        owner.append(named[0])
    assert owner == sorted(owner, key=ws.students.index)  # roster order, one block each
    assert set(owner) == set(ws.students)
    for i, student in enumerate(ws.students):
        first = owner.index(student) + 2
        section = " ".join(words(key, p) for p in range(first, first + owner.count(student)))
        # Each student's answers: the weights, to the decimals the item asks for (its
        # tolerance), row by row; an exact integer (a masked 0, a lone 1) as an integer.
        weights = ws.variant(i)[1]["steps"]["weights"]
        d = key_decimals(ws.spec.items[1])
        for row in weights:
            assert " ".join(str(int(x)) if float(x).is_integer() else f"{x:.{d}f}" for x in row) in section


@pytest.mark.slow
@needs_pdf
def test_the_class_pdf_is_every_worksheet_each_from_a_new_page(made) -> None:
    combined = made.out / "class.pdf"
    sizes = [pages(made.folders[s] / "worksheet.pdf") for s in made.worksheet.students]
    assert pages(combined) == sum(sizes)
    first = 1
    for student, size in zip(made.worksheet.students, sizes):
        found = words(combined, first)
        assert f"Student ID {student}" in found and f"Page 1 of {size}" in found
        first += size


@pytest.mark.slow
@needs_pdf
@pytest.mark.parametrize("size, points", [("letter", "612 x 792"), ("a4", "595.276 x 841.89")])
def test_page_size(size: str, points: str, tmp_path: Path) -> None:
    spec = parse_spec({"title": "Size", "items": ITEMS[:1]})
    result = generate_set(spec, ["ada"], tmp_path, formats="pdf", page_size=size)
    for pdf in (result.folders["ada"] / "worksheet.pdf", tmp_path / "keys" / "ada.pdf"):
        assert f"Page size:       {points}" in run("pdfinfo", str(pdf))


@pytest.mark.slow
@needs_pdf
def test_the_cli_renders_pdfs_with_a_progress_report_and_a_class_pdf(tmp_path: Path) -> None:
    out = tmp_path / "set"
    spec = tmp_path / "spec.yaml"
    spec.write_text("title: CLI\nitems:\n  - family: attention.scores\n    params: {form: vector}\n", encoding="utf-8")
    result = runner.invoke(app, ["generate", str(spec), "-n", "2", "--out", str(out),
                                 "--format", "pdf", "--class-pdf", "--page-size", "letter", "--workers", "1"])
    assert result.exit_code == 0, result.output
    assert (out / "class.pdf").is_file() and (out / "key.pdf").is_file()
    assert (out / "students" / "s01" / "worksheet.pdf").is_file()
    assert "612 x 792" in run("pdfinfo", str(out / "class.pdf"))


@pytest.mark.slow
@needs_pdf
def test_progress_counts_students_up_to_the_class(tmp_path: Path) -> None:
    # A user relates to "12/30" students, not to the renderer's documents (a worksheet and a
    # key per student, and the combined files).
    for class_pdf in (False, True):
        calls: list[tuple[int, int]] = []
        generate_set(SPEC, STUDENTS, tmp_path / str(class_pdf), formats="pdf", workers=1, class_pdf=class_pdf,
                     pdf_progress=lambda d, t: calls.append((d, t)))
        assert calls[-1] == (len(STUDENTS), len(STUDENTS))
        assert {t for _, t in calls} == {len(STUDENTS)}
        assert [d for d, _ in calls] == sorted(d for d, _ in calls)


# --------------------------------------------------------------------------- without WeasyPrint


def test_missing_system_libraries_stop_pdf_output_with_the_packages_to_install(tmp_path, monkeypatch) -> None:
    def missing() -> None:
        raise PdfUnavailable(pdf_module._install_hint("missing system library: libpango-1.0-0"))

    monkeypatch.setattr(pdf_module, "weasyprint_module", missing)
    out = tmp_path / "pdf"
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(out), "--format", "md,pdf"])
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert all(package in flat for package in DEBIAN_PACKAGES)
    assert not (out / "key.json").exists()
    with pytest.raises(ValueError, match="libpango"):
        generate_set(SPEC, ["ada"], tmp_path / "lib", formats="pdf")

    # Markdown and HTML need none of it, not even the weasyprint package.
    monkeypatch.setitem(sys.modules, "weasyprint", None)
    out = tmp_path / "md"
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(out), "--format", "md,html"])
    assert result.exit_code == 0, result.output
    assert {p.name for p in (out / "students" / "s01").iterdir()} >= {"worksheet.md", "worksheet.html"}


def test_class_pdf_and_page_size_are_checked_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "o"
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(out), "--class-pdf"])
    assert result.exit_code == 2 and "--class-pdf" in result.output
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(out), "--page-size", "a5"])
    assert result.exit_code == 2 and "--page-size: unknown page size 'a5'; use A4 or Letter" in result.output
    assert not out.exists()


# --------------------------------------------------------------------------- the HTML behind them


def test_markdown_worksheet_has_no_boxes_and_html_worksheet_has_one_area_per_part(tmp_path: Path) -> None:
    result = generate_set(SPEC, ["ada"], tmp_path, formats="md,html")
    folder = result.folders["ada"]
    md = (folder / "worksheet.md").read_text(encoding="utf-8")
    assert "<div" not in md and "answer-grid" not in md
    page = (folder / "worksheet.html").read_text(encoding="utf-8")
    for item, env in zip(SPEC.items, result.worksheet.envs):
        for part in item.parts:
            shape = env[part.step].shape[1:]
            rows, cols = (shape if len(shape) == 2 else (1, shape[0]) if shape else (1, 1))
            assert f'data-part="{part.id}" data-rows="{rows}" data-cols="{cols}"' in page
    assert "Student ID" in page and result.worksheet.codes[0] in page


def test_each_area_follows_the_sentence_that_names_its_part() -> None:
    body = "<ul>\n<li>(a) Find it, part <code>q1.a</code>.</li>\n<li>(b) Part <code>q1.b</code>.</li>\n</ul>\n"
    out = place_answer_areas(body, [("q1.a", "[A]"), ("q1.b", "[B]"), ("q1.c", "[C]")])
    # In a list item, the sentence and its boxes side by side in one row.
    assert (
        '<li><div class="part-row acol-1 alab-0" id="part-q1.a"><div class="part-text">(a) Find it, part <code>q1.a</code>.</div>'
        '<div class="part-boxes">[A]</div></div></li>'
    ) in out
    assert '<code>q1.b</code>.</div><div class="part-boxes">[B]</div></div></li>' in out
    assert out.endswith('<div class="answers">[C]</div>')  # named nowhere: after the problem
    para = place_answer_areas("<p>Answer: part <code>q2.x</code>.</p><p>More.</p>", [("q2.x", "[X]")])
    assert para == "<p>Answer: part <code>q2.x</code>.</p>[X]<p>More.</p>"


def test_answer_areas_take_the_shape_of_the_part() -> None:
    def grids(area: str) -> list[tuple[int, int]]:  # (rows, columns) of each grid of boxes
        return [(int(r), int(c)) for r, c in re.findall(r'class="boxes r(\d) c(\d)"', area)]

    assert grids(answer_area_html("q.s", (), "s")) == [(1, 1)]
    assert grids(answer_area_html("q.v", (4,), "v")) == [(1, 4)]
    stack = answer_area_html("q.states", (3, 2, 2), "S_t")
    assert grids(stack) == [(2, 2)] * 3
    assert "answer-part" not in stack  # each matrix is named by its label (S₃ =), not a caption
    big_stack = answer_area_html("q.states", (2, 2, 10), "S_t")
    assert ">matrix 2, columns 9\u201310<" in big_stack and ">matrix 1<" not in big_stack
    wide = answer_area_html("q.dQ", (3, 12), r"\nabla Q")
    assert grids(wide) == [(3, 8), (3, 4)] and ">columns 9\u201312<" in wide
    assert ">columns 1\u20138<" in wide
    tall = answer_area_html("q.o", (16, 2), "o")
    assert sum(r for r, _ in grids(tall)) == 16 and ">rows 9\u201316<" in tall
    # A caption says where in its part a grid is, never the part's internal id; a part's only
    # grid has none. Its points are printed once, for the margin.
    captions = re.findall(r'<span class="answer-part">([^<]*)</span>', stack + wide + tall)
    assert captions and not any("q." in c for c in captions), captions
    single = answer_area_html("q.s", (3, 3), "S", 2)
    assert "answer-part" not in single and single.count('<span class="part-points">2 pt</span>') == 1


def test_the_key_sets_worked_steps_as_text_and_every_student_after_the_cover() -> None:
    from qkvquiz.worksheet import build_worksheet

    ws = build_worksheet(SPEC, STUDENTS, "pdf")
    docs = key_documents(ws)
    assert len(docs) == 1 + len(STUDENTS)
    assert all(s in docs[0] for s in ws.students)
    for student, doc in zip(ws.students, docs[1:]):
        assert 'class="key"' in doc and f'class="student-id">{student}<' in doc
        assert '<span class="tm">' in doc  # worked steps as text, not pictures


# --------------------------------------------------------------------------- math as text


def test_text_math_sets_fractions_scripts_and_signs() -> None:
    out = text_math_html(r"S_{12} = \frac{(1)(-2) + (0)(3)}{\sqrt{2}} = -1.414")
    assert "<i>S</i><sub>12</sub>" in out
    # A radical in the denominator marks its fraction (room under the rule for the bar).
    assert '<span class="tfrac rd"><span class="tnum">' in out and "\u221a" in out
    assert '<span class="tfrac"><span class="tnum">' in text_math_html(r"\frac{a}{2}")
    # Spacing is text: a thin space around a binary operator, a wider one around a relation,
    # none after a sign.
    assert f"=\u2005{MINUS}1.414" in out  # a sign, not a binary minus
    assert "(1)(\u22122)\u2009+\u2009(0)(3)" in out and "\u2005=\u2005" in out
    assert "<span" not in out.replace('<span class="t', "").replace('<span class="rad"', "")  # no element per operator
    assert text_math_html("= 1").startswith('<span class="tm">=\u2005')  # a relation opening: no space before
    assert text_math_html(r"j \le") == '<span class="tm"><i>j</i>\u2005\u2264</span>'  # nor after one ending
    assert text_math_html("+ 0.5", continues=True) == '<span class="tm">\u2009+\u20090.5</span>'
    assert text_math_html("+ 0.5") == '<span class="tm">+0.5</span>'  # at the start it is a sign
    assert "<sup>\u22a4</sup>" in text_math_html(r"QK^\top")
    assert "\u2207" in text_math_html(r"\nabla_S L") and "X\u0304" in text_math_html(r"\bar X")
    # A script of letters alone is itself italic (one element, not two); a mixed one holds its own.
    assert text_math_html("d_k") == '<span class="tm"><i>d</i><sub class="i">k</sub></span>'
    assert "<sub>1<i>j</i></sub>" in text_math_html("S_{1j}")
    from qkvquiz.families.qkv import MASKED_SCORES_FORMULA

    assert text_math_html(MASKED_SCORES_FORMULA).endswith(f'<span class="tx"> else </span>{MINUS}\u221e</span>')


def test_text_math_sets_every_bundled_formula_in_the_text_face() -> None:
    """Formulas drawn as pictures ("Z = softmax(QKᵀ/√dₖ)V", the delta rule's "K̄ = XS̄⁺ + …",
    "v_a ∈ ℝᵈ") had other spacing, scripts and rules than the text math beside them: the state
    after an update (S⁺), double-struck letters and delimiters around a fraction are text now,
    and a bar over a Greek letter is the short kind that a Latin letter's macron is."""
    assert text_math_html(r"\bar S^+ = S^- + X^\top K").startswith(
        '<span class="tm"><i>S\u0304</i><sup>+</sup>\u2005=\u2005<i>S</i><sup>\u2212</sup>')
    assert "\u211d<sup class=\"i\">d</sup>" in text_math_html(r"v_a \in \mathbb{R}^{d}")
    tall = text_math_html(r"Z = \operatorname{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V")
    assert '<span class="tdl"><span>\u239b</span><span>\u239d</span></span><span class="tfrac rd">' in tall
    assert tall.count('class="tdl"') == 2 and "\u23a0" in tall
    assert text_math_html(r"\bar\beta") == '<span class="tm"><span class="ovl"><span class="mac"></span><i>\u03b2</i></span></span>'
    # Every formula of every bundled sheet and key is text (none falls back to a picture).
    from qkvquiz import build_worksheet, load_spec
    from qkvquiz.core.resources import bank_dir
    from qkvquiz.render.documents import key_student_body_html, worksheet_body_html

    for path in sorted(bank_dir().glob("*.yaml")):
        ws = build_worksheet(load_spec(path), ["ada"], seed="face")
        for page in (worksheet_body_html(ws, 0), key_student_body_html(ws, 0)):
            assert 'class="math-svg"' not in page, path.name


@pytest.mark.parametrize("latex", [
    r"\begin{bmatrix} a \end{bmatrix}", r"\sqrt[3]{x}", r"\mathbb{F}", r"\left\{\frac{a}{b}\right\}",
    r"x^{a}^{b}", r"\unknowncommand", r"{x",
])
def test_text_math_refuses_what_it_cannot_set(latex: str) -> None:
    with pytest.raises(Unsupported):
        text_math_html(latex)


def test_math_html_falls_back_to_a_picture_for_what_text_cannot_set() -> None:
    assert 'class="math-svg"' in math_html(r"\sqrt[3]{x}", text=True)
    assert 'class="math-svg"' not in math_html(r"x_1 = \frac{1}{2}", text=True)
    before = math_cache_info().misses
    math_html(r"x_9 = \frac{7}{2}", text=True)
    assert math_cache_info().misses == before  # text needs no picture


def test_matrices_side_by_side_may_wrap_between_them_but_never_inside() -> None:
    latex = r"Q = \begin{bmatrix} 1 & -2 \end{bmatrix}, \qquad K = \begin{bmatrix} 3 \end{bmatrix}."
    groups = math_html(latex, display=True).split(' <span class="math-group">')
    assert len(groups) == 2  # the only place a line may break is between the two
    for group in groups:
        assert group.count('class="bmat"') == 1
    assert groups[0].endswith("</span></span>,</span>")  # the comma stays with Q's matrix
    assert "math-group" not in math_html(latex)  # inline math is never cut


@pytest.mark.slow
@needs_pdf
def test_each_student_has_a_key_pdf_of_their_own_and_combined_files_are_on_request(made, tmp_path: Path) -> None:
    for student in made.worksheet.students:
        own = made.out / "keys" / f"{made.folders[student].name}.pdf"
        text = run("pdftotext", str(own), "-")
        # The title block names the student ("Student ID s02"); the running head of any later page too.
        assert re.search(rf"Student (ID )?{student}\b", text), text[:200]
        assert not any(re.search(rf"Student (ID )?{other}\b", text) for other in made.worksheet.students if other != student)
    spec = parse_spec({"title": "Alone", "items": ITEMS[:1]})
    result = generate_set(spec, ["ada"], tmp_path / "alone", formats="pdf")
    assert (tmp_path / "alone" / "keys" / "ada.pdf").is_file()
    assert not (tmp_path / "alone" / "key.pdf").exists() and not (tmp_path / "alone" / "class.pdf").exists()
    assert result.folders["ada"].joinpath("worksheet.pdf").is_file()


def test_a_keys_answers_stand_in_a_frame_under_their_parts() -> None:
    """A key listed the answers after a problem's worked solution, which a long solution put a
    page away from the parts: each answer now stands framed under its part, as an exam key
    keeps a solution with its question; the worked steps follow the parts."""
    from qkvquiz.render.documents import answers_under_parts, key_student_body_html
    from qkvquiz.worksheet import build_worksheet

    ws = build_worksheet(SPEC, STUDENTS, "key")
    body = key_student_body_html(ws, 0)
    assert "<strong>Answers.</strong>" not in body
    for item in ws.spec.items:
        for part in item.parts:
            code = f'<code class="part-id">{part.id}</code>'
            item_html = body[body.rfind('<li class="pi', 0, body.index(code)):]
            item_html = item_html[: item_html.index("</li>")]
            assert code in item_html and '<div class="key-answer">' in item_html, part.id
    # A template that writes its answers otherwise is left as it is.
    odd = "<ul>\n<li class=\"pi\">(a) part <code class=\"part-id\">q1.x</code></li>\n</ul>\n<p><strong>Answers.</strong></p>\n<ul>\n<li>x = 1</li>\n</ul>\n"
    assert answers_under_parts(odd) == odd
