"""A small real set for the scan command's tests: a key made by `generate`, its cell map laid out
for the key's own parts and shapes (tests/scan/corpus.py `layout`), and scans of its pages written
with chosen answers (each student's exact ones, rounded as the cells ask) or random ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from qkvquiz.generate import generate_set
from qkvquiz.key import Key, load_key
from qkvquiz.scan.cellmap import CellMap, write_cellmap
from qkvquiz.spec import parse_spec

from .corpus import Truth, draw_page, held_out_digits, layout, scan

STUDENTS = ["ada", "bo", "cy"]
SPEC = {"title": "Scores and weights", "items": [
    {"family": "attention.output", "params": {"tokens": 2, "d_k": 4}, "ask": {"scores": 1, "weights": 1}}]}
DPI = 150


def make_set(folder: Path, seed: str = "scan") -> tuple[Path, Key, CellMap]:
    """A set of three students in ``folder`` with its cell map beside the key."""
    generate_set(parse_spec(SPEC), STUDENTS, folder, seed=seed, formats="md")
    key = load_key(folder / "key.json")
    parts = {part.id: item.shapes[part.id] for item, part in key.parts}
    cellmap = layout(key.set_id, list(zip(key.students, key.variants)), parts, pages=2)
    write_cellmap(cellmap, folder / "cellmap.json")
    return folder / "key.json", key, cellmap


def rounded(value) -> str:
    text = "-inf" if value == "-inf" else f"{float(value):.2f}"
    return "0.00" if text == "-0.00" else text


def exact_answers(key: Key, student: str) -> dict[tuple[str, tuple[int, ...]], str | None]:
    """Each entry of the student's exact answers as the cells take it: two decimals."""
    answers = key.answers[key.index(student)]
    out = {}
    for part, answer in answers.items():
        array = np.array(answer, dtype=object)
        for index in np.ndindex(*array.shape):
            out[(part, tuple(int(i) for i in index))] = rounded(array[index])
    return out


def scanned_page(cellmap: CellMap, variant: str, page: int, rng: np.random.Generator, *, answers=None,
                 truth: Truth | None = None, **how) -> Image.Image:
    digits, labels = held_out_digits()
    printed = next(p for p in cellmap.pages if p.variant == variant and p.page == page)
    drawn = draw_page(printed, cellmap.set_id, DPI, rng, digits, labels, truth or Truth(), answers=answers)
    return scan(drawn, rng, **how)
