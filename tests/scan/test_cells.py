"""Reading one entry's cells: ticks, signs, digits, and the doubts between them."""

from __future__ import annotations

import numpy as np
import pytest

from qkvquiz.scan.align import PX_PER_PT
from qkvquiz.scan.cells import (CONFLICT, FAINT_TICK, GAP, LOW_CONFIDENCE, SIGN_ALONE, TICK_INSET, TWO_LIKELY,
                                UNCLEAR_SIGN, judge, read_entry, read_sign, read_tick)
from qkvquiz.scan.digits import CLASSES, classify
from qkvquiz.scan.ink import REACH_Y, digit_ink
from qkvquiz.scan.synthetic import handwritten, paste

from .corpus import _entry, held_out_digits

ENTRY = _entry("q1.scores", (0, 1), 40, 40, 2, 2, allow_inf=True)
SHAPE = (int(120 * PX_PER_PT), int(300 * PX_PER_PT))


def page() -> np.ndarray:
    return np.zeros(SHAPE)


def fill_box(dark, box, share):
    """Ink about ``share`` of the part of a tick box that is read (a square blot in its middle)."""
    x, y, w, h = (v * PX_PER_PT for v in box)
    inner = dark[int(y + h * TICK_INSET):int(y + h * (1 - TICK_INSET)), int(x + w * TICK_INSET):int(x + w * (1 - TICK_INSET))]
    side = int(round(np.sqrt(share * inner.size)))
    top, left = (inner.shape[0] - side) // 2, (inner.shape[1] - side) // 2
    inner[top:top + side, left:left + side] = 1.0


def write_digit(dark, box, digit: int, index: int = 0):
    pictures, labels = held_out_digits()
    picture = pictures[np.nonzero(labels == digit)[0][index]]
    ink = handwritten(picture, int(box[3] * PX_PER_PT * 0.7), np.random.default_rng(digit))
    x, y, w, h = (v * PX_PER_PT for v in box)
    paste(dark, ink, int(y + h / 2 - ink.shape[0] / 2), int(x + w / 2 - ink.shape[1] / 2))


def minus(dark, box):
    x, y, w, h = (v * PX_PER_PT for v in box)
    dark[int(y + h / 2) - 2:int(y + h / 2) + 2, int(x + w * 0.25):int(x + w * 0.75)] = 1.0


@pytest.mark.parametrize("share, reading, doubt", [(0.0, "blank", None), (0.2, "ticked", None), (0.04, "unclear", FAINT_TICK)])
def test_a_tick_box_is_empty_ticked_or_a_doubt(share, reading, doubt):
    dark = page()
    fill_box(dark, ENTRY.left_blank, share)
    got = read_tick(dark, ENTRY.left_blank, "left_blank")
    assert (got.reading, got.doubt) == (reading, doubt)


def test_a_sign_cell_holds_nothing_a_minus_or_a_doubt():
    dark = page()
    assert read_sign(dark, ENTRY.sign).reading == "blank"
    minus(dark, ENTRY.sign)
    assert read_sign(dark, ENTRY.sign).reading == "minus"
    dark = page()
    x, y, w, h = (v * PX_PER_PT for v in ENTRY.sign)
    dark[int(y + h * 0.2):int(y + h * 0.8), int(x + w / 2) - 2:int(x + w / 2) + 2] = 1.0  # a plus's upright
    minus(dark, ENTRY.sign)
    assert (read_sign(dark, ENTRY.sign).reading, read_sign(dark, ENTRY.sign).doubt) == ("unclear", UNCLEAR_SIGN)


def test_written_digits_spell_the_number_with_the_printed_point():
    dark = page()
    minus(dark, ENTRY.sign)
    for box, digit in zip(ENTRY.digits[1:], (3, 0, 7)):
        write_digit(dark, box, digit)
    got = read_entry(dark, ENTRY)
    # How sure the model is of each digit is the model's business (test_digits.py); the entry
    # itself (sign, digits, point) raises no doubt.
    assert got.value == "-3.07" and set(got.doubts) <= {LOW_CONFIDENCE, TWO_LIKELY}, got


def test_nothing_written_is_blank_and_a_minus_infinity_tick_is_minus_infinity():
    assert read_entry(page(), ENTRY).value is None
    dark = page()
    fill_box(dark, ENTRY.minus_infinity, 0.3)
    got = read_entry(dark, ENTRY)
    assert (got.value, got.doubts) == ("-inf", [])
    minus(dark, ENTRY.sign)  # −∞ ticked and a minus written: the same answer
    got = read_entry(dark, ENTRY)
    assert (got.value, got.doubts) == ("-inf", [])


def test_marks_that_contradict_each_other_go_to_review():
    dark = page()
    fill_box(dark, ENTRY.minus_infinity, 0.3)
    fill_box(dark, ENTRY.left_blank, 0.3)
    assert CONFLICT in read_entry(dark, ENTRY).doubts
    dark = page()
    write_digit(dark, ENTRY.digits[0], 4)
    fill_box(dark, ENTRY.left_blank, 0.3)
    assert CONFLICT in read_entry(dark, ENTRY).doubts


def test_a_gap_in_the_digits_and_a_lone_sign_go_to_review():
    dark = page()
    write_digit(dark, ENTRY.digits[0], 2)
    write_digit(dark, ENTRY.digits[3], 5)
    assert GAP in read_entry(dark, ENTRY).doubts
    dark = page()
    minus(dark, ENTRY.sign)
    assert SIGN_ALONE in read_entry(dark, ENTRY).doubts


def bordered_cell() -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A stretch of page with one digit cell's printed border (dark lines two pixels wide) and
    the borders of the cells beside it; the cell's (left, top, right, bottom) in pixels."""
    dark = np.zeros((120, 150))
    left, top, right, bottom = 50, 30, 100, 90
    dark[top - 1:top + 1, :] = dark[bottom - 1:bottom + 1, :] = 0.9
    for x in (0, left, right, 149):
        dark[top:bottom, max(x - 1, 0):x + 1] = 0.9
    return dark, (left, top, right, bottom)


def test_a_digit_cell_keeps_strokes_past_its_border_and_drops_the_border():
    dark, (left, top, right, bottom) = bordered_cell()
    dark[top - 12:bottom - 10, 73:77] = 1.0  # an upright written taller than the cell, through its top border
    ink = digit_ink(dark, left, top, right, bottom)
    rows = np.nonzero((ink > 0.45).any(axis=1))[0]
    ry = int(round((bottom - top) * REACH_Y))
    assert rows.min() == ry - 12 and rows.max() == ry + (bottom - top) - 11  # all of the stroke
    # The border is gone, except where the stroke crosses it.
    border_row = ink[ry - 1:ry + 1]
    assert (border_row > 0.45).sum() <= 2 * 8


def test_a_digit_cell_leaves_out_a_neighbours_tail_a_speck_and_an_empty_border():
    dark, (left, top, right, bottom) = bordered_cell()
    dark[40:80, right - 4:right + 20] = 1.0  # the next cell's digit, running over the shared border
    dark[60, 70:72] = 1.0  # a speck in the middle, thinner than any pen
    assert not (digit_ink(dark, left, top, right, bottom) > 0.45).any()
    reading = judge(classify([(digit_ink(dark, left, top, right, bottom), (bottom - top, right - left))]))
    assert CLASSES[reading.classes[0]] == "blank" and reading.doubts == [None]
