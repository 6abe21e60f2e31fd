"""Real printed worksheets as a scan corpus starts from them: ``generate`` writes a set with PDFs,
each worksheet page is rendered to a grey image (pypdfium2, a self-contained wheel: ``pip install
'qkvquiz[scan]'``), and the set's own ``cellmap.json`` says where the cells are. Fill the images
with :func:`tests.scan.corpus.fill_printed` and scan them with :func:`tests.scan.corpus.scan`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image

from qkvquiz.generate import generate_set
from qkvquiz.scan.cellmap import CellMap, read_cellmap
from qkvquiz.spec import parse_spec

#: A small spec: a number, a matrix, a masked matrix (−∞ boxes) and its softmax.
SMALL_SPEC = {
    "title": "Scan check",
    "tolerance": "2 decimals",
    "items": [
        {"family": "attention.scores", "params": {"form": "vector", "d_k": 4}, "points": 1},
        {"family": "attention.weights", "params": {"tokens": 3, "mask": "causal"}, "ask": {"scores": 1, "weights": 2}},
        {"family": "attention.scores", "params": {"tokens": 3, "d_k": 2}, "points": 2},
    ],
}


@dataclass(frozen=True)
class PrintedSet:
    """A generated set's cell map and every worksheet page as an unwritten grey image."""

    out: Path
    cellmap: CellMap
    pages: dict[tuple[str, int], Image.Image]  # (variant, page number) → the page at ``dpi``
    dpi: int


def rasterize(pdf: Path, dpi: int) -> list[Image.Image]:
    """Every page of a PDF rendered to a grey image at ``dpi`` (skips the test without pypdfium2)."""
    pdfium = pytest.importorskip("pypdfium2", reason="rendering printed pages needs pypdfium2 (the scan extra)")
    document = pdfium.PdfDocument(str(pdf))
    try:
        return [document[i].render(scale=dpi / 72, grayscale=True).to_pil().convert("L") for i in range(len(document))]
    finally:
        document.close()


def printed_set(out: Path, students: list[str], *, spec: dict | None = None, dpi: int = 200,
                seed: str = "scan", **options) -> PrintedSet:
    """Generate ``spec`` (default :data:`SMALL_SPEC`) as PDFs into ``out`` and render its worksheets."""
    result = generate_set(parse_spec(spec or SMALL_SPEC, "scan-check.yaml"), students, out, seed=seed,
                          formats="pdf", workers=1, **options)
    cellmap = read_cellmap(out / "cellmap.json")
    pages = {}
    for student, code in zip(result.worksheet.students, result.worksheet.codes):
        images = rasterize(result.folders[student] / "worksheet.pdf", dpi)
        pages.update(((code, n), image) for n, image in enumerate(images, start=1))
    return PrintedSet(out, cellmap, pages, dpi)
