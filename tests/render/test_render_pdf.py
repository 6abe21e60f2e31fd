"""HTML → PDF: pages, searchable numbers, embedded fonts, page sizes, the pool, failures."""

from __future__ import annotations

import importlib.abc
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from qkvquiz.core.outputs import OutputError
from qkvquiz.render import pdf as render_pdf_module
from qkvquiz.render.boxes import answer_grid_html, header_html
from qkvquiz.render.html_page import markdown_to_html
from qkvquiz.render.pdf import (
    DEBIAN_PACKAGES,
    PdfRenderError,
    PdfUnavailable,
    pdf_available,
    render_pdf,
    weasyprint_module,
)
from qkvquiz.render.pdf_batch import render_pdfs

from .pdf_reading import page_texts, tool

pytestmark = [pytest.mark.skipif(not pdf_available(), reason="WeasyPrint cannot run here"),
              pytest.mark.slow]

MINUS = "\u2212"
STUDENT = "S20250042"

# A 6×6 causal score matrix with decimals, negatives and −∞ (the largest a sheet shows).
BIG = [
    [f"{(i + 1) * 0.37 - j * 0.91:.2f}" if j <= i else r"-\infty" for j in range(6)]
    for i in range(6)
]
BIG_LATEX = r"\begin{bmatrix}" + r" \\ ".join(" & ".join(r) for r in BIG) + r"\end{bmatrix}"

EVERY_CONSTRUCT = f"""
## 1. Attention

Given $d_k = 2$ and $$Q = \\begin{{bmatrix}} 1 & -2 \\\\ 0.5 & 3 \\end{{bmatrix}}, \\quad
K = \\begin{{bmatrix}} -1 & 0 \\\\ 2 & 1 \\end{{bmatrix}}$$
compute $S = QK^\\top/\\sqrt{{d_k}}$ and $A = \\operatorname{{softmax}}(S)$ with
$$A_{{ij}} = \\frac{{e^{{S_{{ij}}}}}}{{\\sum_{{j'=1}}^{{n}} e^{{S_{{ij'}}}}}}, \\qquad
\\nabla_S L = A \\odot \\left(\\nabla_A L - \\operatorname{{rowsum}}(\\nabla_A L \\odot A)\\right)$$

The scores with the mask: $$P = {BIG_LATEX}, \\qquad \\operatorname{{tril}}(P, -1)$$

(a) The weights $A$.

{answer_grid_html("q1.weights", (2, 2), label="A =")}

(b) The sum $\\sum_{{j=1}}^{{n}} A_{{1j}}$.

{answer_grid_html("q1.total", ())}

| part | points |
|------|--------|
| (a)  | 2      |
"""


def pdftotext(pdf: Path) -> str:
    return subprocess.run(
        [tool("pdftotext"), "-layout", str(pdf), "-"], check=True, capture_output=True, text=True
    ).stdout


def document(markdown: str = EVERY_CONSTRUCT, page_size: str = "A4") -> str:
    return markdown_to_html(
        markdown,
        title="Worksheet",
        header=header_html("Worksheet", STUDENT, "V03-117"),
        page_size=page_size,
    )


@pytest.fixture(scope="module")
def sheet(tmp_path_factory: pytest.TempPathFactory):
    target = tmp_path_factory.mktemp("pdf") / "sheet.pdf"
    return render_pdf(document(), target)


def test_every_construct_renders_on_one_page_without_warnings(sheet) -> None:
    assert sheet.path.stat().st_size > 0
    assert sheet.pages == 1
    assert sheet.warnings == ()


def test_student_id_and_every_matrix_number_can_be_found(sheet) -> None:
    text = pdftotext(sheet.path)
    assert STUDENT in text and "V03-117" in text
    for row in BIG:
        line = " ".join(
            v.replace("-", MINUS).replace(MINUS + r"\infty", MINUS + "\u221e") for v in row
        )
        assert line in " ".join(text.split()), line  # each row reads left to right
    assert f"1 {MINUS}2" in text and "0.5 3" in text


def test_drawn_math_is_searchable_through_its_invisible_text(sheet) -> None:
    words = " ".join(pdftotext(sheet.path).split())
    assert "S = QK\u1d40/\u221ad_k" in words
    assert "softmax(S)" in words and "rowsum" in words and "tril(P," in words
    assert "Page 1 of 1" in words


def test_every_font_is_embedded(sheet) -> None:
    out = subprocess.run(
        [tool("pdffonts"), str(sheet.path)], check=True, capture_output=True, text=True
    ).stdout
    fonts = out.splitlines()[2:]
    assert fonts, out
    for line in fonts:
        emb = line.split()[-5]  # columns: name type encoding emb sub uni object ID
        assert emb == "yes", line


@pytest.mark.parametrize(
    ("page_size", "points"), [("A4", (595.28, 841.89)), ("Letter", (612.0, 792.0))]
)
def test_page_size(tmp_path: Path, page_size: str, points: tuple[float, float]) -> None:
    # The size passed to the PDF writer wins over the one written into the document.
    result = render_pdf(
        document("Hello $x$.", page_size="A4"), tmp_path / "p.pdf", page_size=page_size
    )
    info = subprocess.run(
        [tool("pdfinfo"), str(result.path)], check=True, capture_output=True, text=True
    )
    size = next(line for line in info.stdout.splitlines() if line.startswith("Page size:"))
    width, height = (float(v) for v in size.split()[2:5:2])
    assert (width, height) == pytest.approx(points, abs=0.5)


def test_a_matrix_is_never_split_across_pages(tmp_path: Path) -> None:
    filler = "\n\n".join(f"Line {i} of text that fills the page." for i in range(34))
    html = document(filler + "\n\n$$P = " + BIG_LATEX + "$$\n\nAfter.\n")
    result = render_pdf(html, tmp_path / "split.pdf")
    assert result.pages == 2
    # Every entry as the page writes it (a minus sign, −∞); each has two decimals or is −∞,
    # so none of them is a word of the filler lines.
    entries = {v.replace("-", MINUS).replace(MINUS + r"\infty", MINUS + "\u221e") for row in BIG for v in row}
    holding = [entries & set(text.split()) for text in page_texts(result.path)]
    assert len(holding) == 2
    assert sorted(len(found) for found in holding) == [0, len(entries)], holding  # the whole matrix lives on one page


def test_pool_renders_every_job_in_order_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    jobs = [(document(f"Student {i}: $x_{i}$"), tmp_path / f"s{i}.pdf") for i in range(3)]
    results = render_pdfs(jobs, workers=2, progress=False)
    assert [r.path for r in results] == [target for _, target in jobs]
    assert all(r.pages == 1 and r.warnings == () for r in results)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s0.pdf", "s1.pdf", "s2.pdf"]
    assert "Student 2" in pdftotext(tmp_path / "s2.pdf")


def test_pool_failure_names_the_document(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder should be", encoding="utf-8")
    jobs = [(document("ok"), tmp_path / f"ok{i}.pdf") for i in range(2)]
    jobs.append((document("bad"), blocked / "bad.pdf"))
    with pytest.raises(PdfRenderError, match="bad.pdf"):
        render_pdfs(jobs, workers=2, progress=False)


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "out.pdf"
    target.write_bytes(b"old")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)  # the new file is written, then cannot be made durable
    with pytest.raises(OutputError, match="out.pdf.*No space left"):
        render_pdf(document("new"), target)
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.pdf"]


def test_jobs_writing_the_same_file_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="same PDF"):
        render_pdfs([("a", tmp_path / "x.pdf"), ("b", tmp_path / "x.pdf")], progress=False)


def test_unknown_page_size_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="A4 or Letter"):
        render_pdf("<p>x</p>", tmp_path / "x.pdf", page_size="A3")


class _MissingLibrary(importlib.abc.MetaPathFinder):
    """Makes ``import weasyprint`` fail the way it does without Pango."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name == "weasyprint":
            raise OSError("cannot load library 'libpango-1.0-0': no such file")
        return None


@pytest.mark.parametrize("failure", ["no-package", "no-library"])
def test_missing_weasyprint_names_the_packages_to_install(monkeypatch, failure: str) -> None:
    for name in [m for m in sys.modules if m == "weasyprint" or m.startswith("weasyprint.")]:
        monkeypatch.delitem(sys.modules, name)
    if failure == "no-package":
        monkeypatch.setitem(sys.modules, "weasyprint", None)
    else:
        monkeypatch.setattr(sys, "meta_path", [_MissingLibrary(), *sys.meta_path])
    weasyprint_module.cache_clear()
    try:
        with pytest.raises(PdfUnavailable) as error:
            weasyprint_module()
        message = str(error.value)
        assert all(package in message for package in DEBIAN_PACKAGES)
        assert "Markdown and HTML output work" in message
        assert not pdf_available()
    finally:
        weasyprint_module.cache_clear()


def test_a_shared_image_cache_serves_the_next_document(tmp_path: Path) -> None:
    cache: dict = {}
    first = render_pdf(document("Scores $S = QK^\\top$."), tmp_path / "a.pdf", image_cache=cache)
    cached = len(cache)
    second = render_pdf(document("Again $S = QK^\\top$."), tmp_path / "b.pdf", image_cache=cache)
    assert cached > 0 and len(cache) == cached  # the second document parsed no new picture
    assert first.warnings == second.warnings == ()
    assert "S = QK\u1d40" in pdftotext(second.path)


def test_the_missing_subset_library_note_is_not_a_warning_about_the_document() -> None:
    # Where libharfbuzz-subset is missing WeasyPrint says so for every font of every document;
    # weasyprint_module() tells the machine's owner once, and documents stay warning-free.
    log = logging.getLogger("weasyprint")
    with render_pdf_module._collect_warnings() as warnings:
        log.warning('Using fontTools instead of HarfBuzz-Subset for font "%s". Install it.', "DejaVu Serif")
        log.warning("Ignored `foo: bar` at 1:2, unknown property.")
    assert warnings == ["Ignored `foo: bar` at 1:2, unknown property."]
