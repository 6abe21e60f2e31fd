"""The printed worksheet made to be read back: its combs, marks and QR codes, the cell map
``generate`` writes beside the key, and real pages filled, scanned and read back."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest

from qkvquiz.core.tolerance import Tolerance
from qkvquiz.render.printed import (
    CELL_H,
    CELL_W,
    MARGIN_BOTTOM_MM,
    MARGIN_SIDE_MM,
    MARGIN_TOP_MM,
    MARK_DIAMETER,
    MARK_INSET_MM,
    MM,
    Comb,
    GridCells,
    PageAnchors,
    decimals_for,
    grid_id,
    printed_page,
)
from qkvquiz.scan.align import PX_PER_PT
from qkvquiz.scan.cellmap import read_cellmap

Box = tuple[float, float, float, float]


def overlap(a: Box, b: Box) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def boxes_of(entry) -> list[Box]:
    return [entry.sign, *entry.digits, *([entry.minus_infinity] if entry.minus_infinity else []), entry.left_blank]


@pytest.mark.parametrize("comb", [Comb(1, 2, False), Comb(1, 2, True), Comb(3, 0, True), Comb(1, 0, False),
                                  Comb(2, 4, True)])
def test_a_combs_cells_lie_in_its_tile_apart_and_big_enough_to_read(comb):
    boxes = [comb.sign(), *comb.digit_boxes(), *([comb.minus_infinity_box()] if comb.minus_infinity else []),
             comb.left_blank_box()]
    for box in boxes:
        assert 0 < box[0] and box[0] + box[2] < comb.width_pt and 0 < box[1] and box[1] + box[3] < comb.height_pt
    for a, b in itertools.combinations(boxes, 2):
        assert not overlap(a, b), (a, b)
    # A digit cell (read whole, border to border) is about 40 × 52 pixels or more in the reader's
    # frame: the cells the digit model learnt from (qkvquiz/scan/synthetic.py, _cell_patch) are 42
    # to 60 wide and 52 to 70 tall.
    whole = [v * PX_PER_PT for v in (CELL_W, CELL_H)]
    assert whole[0] >= 40 and whole[1] >= 52, whole
    assert len(comb.digit_boxes()) == comb.integer_digits + comb.decimals
    # The point's gap parts the whole digits from the decimals.
    if comb.decimals and comb.integer_digits:
        d = comb.digit_boxes()
        gap = d[comb.integer_digits][0] - (d[comb.integer_digits - 1][0] + CELL_W)
        assert gap > 3


@pytest.mark.parametrize(("tolerance", "places"), [("2 decimals", 2), ("0 decimals", 0), ("abs 0.05", 2),
                                                   ("abs 0.5", 1), ("abs 2", 0), ("3 sigfigs", 3), ("rel 1%", 3)])
def test_the_decimals_printed_are_those_the_tolerance_asks(tolerance, places):
    assert decimals_for(Tolerance.from_spec(tolerance)) == places


def test_a_page_of_the_cell_map_comes_from_the_anchors_the_layout_gave():
    comb = Comb(1, 2, True)
    grid = GridCells("q2.scores", comb, (1, 0), 2)
    anchors = {"qkvq-mark-nw": (19.0, 19.0), "qkvq-mark-ne": (759.0, 19.0), "qkvq-mark-sw": (19.0, 1080.0),
               "qkvq-mark-se": (759.0, 1080.0), "qkvq-qr": (373.0, 1056.0),
               grid_id(grid, 2, 3): (300.0, 400.0), "p3": (1.0, 1.0)}
    page = printed_page("AB12-CD34", 2, PageAnchors((793.7, 1122.5), anchors))
    assert page.size == pytest.approx((595.275, 841.875))
    assert page.marks[0] == pytest.approx((19 * 0.75 + 6, 19 * 0.75 + 6))
    assert [e.index for e in page.entries] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    second_row = page.entries[3]
    assert second_row.sign[0] == pytest.approx(300 * 0.75 + comb.sign()[0])
    assert second_row.sign[1] == pytest.approx(400 * 0.75 + comb.height_pt + comb.sign()[1])
    assert all(e.minus_infinity is not None for e in page.entries)
    for a, b in itertools.combinations([box for e in page.entries for box in boxes_of(e)], 2):
        assert not overlap(a, b)


def test_a_page_without_its_marks_is_refused():
    from qkvquiz.render.printed import PrintedLayoutError

    with pytest.raises(PrintedLayoutError, match="qkvq-mark-se"):
        printed_page("AB12-CD34", 1, PageAnchors((793.7, 1122.5), {"qkvq-mark-nw": (1, 1), "qkvq-mark-ne": (2, 1),
                                                                 "qkvq-mark-sw": (1, 2), "qkvq-qr": (5, 5)}))


def test_a_longer_printed_sheet_is_laid_out_again_with_a_code_for_every_page():
    from types import SimpleNamespace

    from qkvquiz.render.printed import laid_out_with_page_codes, page_codes_style

    source = f"<html><head>{page_codes_style('3f9c0a12be47', 'AB12-CD34', 2)}</head><body></body></html>"
    seen = []

    def layout(html):
        seen.append(html)
        return SimpleNamespace(pages=[None] * 3)

    laid_out_with_page_codes(source, layout)
    assert len(seen) == 2 and "@page :nth(3)" not in seen[0] and "@page :nth(3)" in seen[1]
    assert seen[1].count("data-qkvquiz-page-codes") == 1 and "@page :nth(4)" not in seen[1]
    seen.clear()
    laid_out_with_page_codes(source.replace(" 2\"", " 3\""), layout)  # enough codes: laid out once
    assert len(seen) == 1
    seen.clear()
    laid_out_with_page_codes("<html></html>", layout)  # not a printed sheet
    assert len(seen) == 1


def test_only_the_printed_sheet_has_cells_and_codes_and_every_entry_has_a_grid(tmp_path):
    from qkvquiz.generate import generate_set
    from qkvquiz.render.documents import worksheet_document
    from qkvquiz.render.printed import part_combs
    from qkvquiz.spec import parse_spec

    from .printed import SMALL_SPEC

    made = generate_set(parse_spec(SMALL_SPEC, "scan-check.yaml"), ["ada", "bo"], tmp_path / "set", formats="md,html")
    assert not (tmp_path / "set" / "cellmap.json").exists()
    for name in ("worksheet.html", "answer-form.html"):
        assert "qkvq-" not in (made.folders["ada"] / name).read_text(encoding="utf-8")
    ws = made.worksheet
    combs = part_combs(ws)
    # Whole digits for the largest value over 256 variants drawn from fixed keys, right or wrong:
    # a score of 4-vectors of entries to ±3 reaches 10 unscaled; a softmax weight stays under 1.
    assert combs == {"q1.scores": Comb(2, 2, False), "q2.scores": Comb(1, 2, True),
                     "q2.weights": Comb(1, 2, False), "q3.scores": Comb(1, 2, False)}
    assert part_combs(ws) == part_combs(generate_set(parse_spec(SMALL_SPEC, "scan-check.yaml"), ["cy"],
                                                     tmp_path / "other", formats="md").worksheet)
    printed = worksheet_document(ws, 0, combs=combs)
    assert printed.count('class="qkvq-mark"') == 4 and 'id="qkvq-qr"' in printed
    assert "@page :nth(1)" in printed and "@bottom-center" in printed
    # One grid per part here (each fits one grid), its id saying the part, its first entry and size.
    assert 'id="qkvq-cells~q2.scores~0-0~2~3x3~1.2.1"' in printed
    assert 'id="qkvq-cells~q1.scores~~0~1x1~2.2.0"' in printed
    # The same cells for every student: the sheet says nothing of one student's answers.
    other = worksheet_document(ws, 1, combs=combs)
    assert re.findall(r'id="(qkvq-cells[^"]*)"', printed) == re.findall(r'id="(qkvq-cells[^"]*)"', other)


# --- real worksheets ----------------------------------------------------------------------------

STUDENTS = ["ada", "bo", "cy"]


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """The small spec's set for three students, generated and rendered once for this module."""
    from .printed import printed_set

    pytest.importorskip("pypdfium2", reason="rendering printed pages needs pypdfium2 (the scan extra)")
    return printed_set(tmp_path_factory.mktemp("printed") / "set", STUDENTS)


@pytest.mark.slow
def test_the_cell_map_beside_the_key_places_every_cell_inside_the_text_apart(printed):
    cellmap = printed.cellmap
    assert [s.student for s in cellmap.students] == STUDENTS
    import jsonschema

    from qkvquiz.core.resources import schemas_dir

    doc = json.loads((printed.out / "cellmap.json").read_text())
    jsonschema.validate(doc, json.loads((schemas_dir() / "cellmap.schema.json").read_text(encoding="utf-8")))
    assert (printed.out / "cellmap.json").stat().st_mode & 0o077 == 0  # private, as the key
    for page in cellmap.pages:
        w, h = page.size
        left, right = MARGIN_SIDE_MM * MM, w - MARGIN_SIDE_MM * MM
        top, bottom = MARGIN_TOP_MM * MM, h - MARGIN_BOTTOM_MM * MM
        boxes = [box for e in page.entries for box in boxes_of(e)]
        for box in boxes:  # in the text area, where the answer column is
            assert left - 0.5 <= box[0] and box[0] + box[2] <= right + 0.5, (page.page, box)
            assert top <= box[1] and box[1] + box[3] <= bottom, (page.page, box)
        for a, b in itertools.combinations(boxes, 2):
            assert not overlap(a, b), (page.page, a, b)
        # The marks in the corners, the code below the text.
        assert page.marks[0][0] < left and page.marks[3][1] > bottom and page.qr[1] > bottom
    # Every asked entry of every student has its cells on exactly one page.
    shapes = cellmap.students[0].parts
    expected = sorted((p, i) for p, shape in shapes.items() for i in np.ndindex(*shape))
    for student in cellmap.students:
        found = sorted((e.part, e.index) for page in cellmap.pages if page.variant == student.variant
                       for e in page.entries)
        assert found == expected
    # The masked part has its −∞ boxes; the others have none.
    masks = {e.part: e.minus_infinity is not None for page in cellmap.pages for e in page.entries}
    assert masks == {"q1.scores": False, "q2.scores": True, "q2.weights": False, "q3.scores": False}


@pytest.mark.slow
def test_the_footer_stands_clear_of_the_bottom_corner_marks(printed):
    """The student line and the page number keep at least 4 mm from the discs beside them."""
    import pypdfium2 as pdfium

    for student in STUDENTS:
        document = pdfium.PdfDocument(str(printed.out / "students" / student / "worksheet.pdf"))
        for page in document:
            width, _height = page.get_size()
            text = page.get_textpage()
            footer = [text.get_charbox(k) for k in range(text.count_chars())]
            footer = [box for box in footer if box[3] < MARGIN_BOTTOM_MM * MM and box[2] > box[0]]
            assert footer, "no footer text found"
            disc_left_edge = MARK_INSET_MM * MM + MARK_DIAMETER / 2
            disc_right_edge = width - disc_left_edge
            assert min(box[0] for box in footer) - disc_left_edge >= 4 * MM
            assert disc_right_edge - max(box[2] for box in footer) >= 4 * MM


@pytest.mark.slow
@pytest.mark.heavy
def test_real_worksheets_filled_scanned_shuffled_and_turned_read_back_to_their_students(printed):
    from qkvquiz.scan.pages import PageImage
    from qkvquiz.scan.reader import read_pages

    from .corpus import Truth, fill_printed, held_out_digits, scan
    from .test_reader import wrong_unreviewed

    digits, labels = held_out_digits()
    rng = np.random.default_rng(41)
    truth = Truth()
    filled = {key: fill_printed(image, printed.cellmap.page(*key), printed.dpi, rng, digits, labels, truth)
              for key, image in printed.pages.items()}
    keys = list(filled)
    order = rng.permutation(len(keys))
    images = []
    for n, k in enumerate(order):
        key = keys[k]
        turn = 180 if n == 1 else 0
        image = scan(filled[key], rng, degrees=float(rng.uniform(-3, 3)), scale=float(rng.uniform(0.97, 1.03)),
                     turn=turn)
        images.append(PageImage(f"{key[0]} p{key[1]}", np.asarray(image)))
    result = read_pages(printed.cellmap, images)
    variants = {s.variant: s.student for s in printed.cellmap.students}
    assert [(p.status, p.student, p.page) for p in result.pages] == [
        ("read", variants[keys[k][0]], keys[k][1]) for k in order], [p.reason for p in result.pages]
    assert [p.turned for p in result.pages].count(180) == 1
    assert result.missing_pages == {} and result.absent == []
    assert [s["student"] for s in result.submissions] == STUDENTS
    entries = [e for c in result.confidences for e in c["entries"]]
    assert len(entries) == len(truth.values)
    # The cells were found where the map puts them: a tick is read as written, and in all but a
    # rare entry not sent to review (a digit so thin that the reader's cleaning takes it for
    # specks) the cells read as holding a digit are those a digit was written in. (Cells cut in
    # the wrong places read wrong everywhere.)
    misplaced = []
    for c in result.confidences:
        for e in c["entries"]:
            if e["doubts"]:
                continue
            key = (c["variant"], e["part"], tuple(e["index"]))
            digits_read = [cell["reading"] != "blank" for cell in e["cells"] if cell["kind"] == "digit"]
            if digits_read != [label != "blank" for label in truth.cells[key][1:]]:
                misplaced.append((c["student"], e["part"], e["index"], e["value"], truth.values[key]))
            if truth.values[key] in (None, "-inf"):
                assert e["value"] == truth.values[key], (c["student"], e)
    assert len(misplaced) <= max(1, len(entries) // 50), misplaced
    # Which digit is written is the model's to say: what it reads wrong without review is a rare
    # entry, and what goes to review under half (the doubt rules send every digit the networks do
    # not all read alike to review: about 40 % of entries on the benchmark, docs/scanning.md).
    wrong = wrong_unreviewed(result, truth)
    review = sum(1 for e in entries if e["doubts"])
    assert len(wrong) <= len(entries) // 10, wrong
    assert review <= len(entries) // 2, review


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("spec_file", ["all-families.yaml", "multihead.yaml", "theory.yaml"])
def test_every_cell_of_a_bundled_spec_lies_in_the_text_and_its_blank_pages_read_as_blank(spec_file, tmp_path):
    """A stack of 8 columns of combs ran past the page's right edge: a row of combs holds what
    the text's width does. Each page of a bundled spec's printed sheet is placed and aligned, and
    with nothing written in it reads nothing."""
    from qkvquiz.core.resources import bank_dir
    from qkvquiz.generate import generate_set
    from qkvquiz.scan.pages import PageImage
    from qkvquiz.scan.reader import read_pages
    from qkvquiz.spec import load_spec

    from .printed import rasterize

    made = generate_set(load_spec(bank_dir() / spec_file), ["ada"], tmp_path / "set", formats="pdf", workers=1,
                        seed="bank")
    cellmap = read_cellmap(tmp_path / "set" / "cellmap.json")
    for page in cellmap.pages:
        w, h = page.size
        for e in page.entries:
            for box in boxes_of(e):
                assert MARGIN_SIDE_MM * MM - 0.5 <= box[0] and box[0] + box[2] <= w - MARGIN_SIDE_MM * MM + 0.5, (
                    page.page, e.part, e.index)
                assert MARGIN_TOP_MM * MM <= box[1] and box[1] + box[3] <= h - MARGIN_BOTTOM_MM * MM
    images = rasterize(made.folders["ada"] / "worksheet.pdf", 150)
    result = read_pages(cellmap, [PageImage(f"page {n}", np.asarray(image)) for n, image in enumerate(images, 1)])
    assert [(p.status, p.page) for p in result.pages] == [("read", n) for n in range(1, len(images) + 1)]
    # Nothing written reads as nothing, and sends nothing to review (no frame read as a faint tick).
    assert all(e.value is None and not e.doubts for p in result.pages for e in p.entries)


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", ["attention-basics", "masking", "all-families"])
def test_the_printed_sheet_says_to_tick_minus_infinity_and_the_screen_sheet_to_type_it(name, lang):
    """On paper −∞ is a tick box, so no word of the printed sheet asks for `-inf`; the worksheet
    read on a screen, whose boxes are typed in, still says how −∞ is written."""
    from qkvquiz.core.i18n import entered
    from qkvquiz.render.documents import worksheet_document
    from qkvquiz.render.printed import part_combs
    from qkvquiz.spec import find_spec, load_spec
    from qkvquiz.worksheet import build_worksheet

    ws = build_worksheet(load_spec(find_spec(name)), ["ada"], seed="words")
    combs = part_combs(ws)
    assert any(comb is not None and comb.minus_infinity for comb in combs.values())
    with entered(lang, ws.spec.lang):
        printed, screen = (re.sub(r"<style.*?</style>|<[^>]+>", "", html, flags=re.S)
                           for html in (worksheet_document(ws, 0, combs=combs), worksheet_document(ws, 0)))
    assert "-inf" not in printed
    assert "−∞" in printed
    assert "-inf" in screen
