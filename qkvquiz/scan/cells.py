"""Reading one page's cells: tick boxes, sign cells and digit combs, each with how sure it is.

A tick box or sign cell is cut from the page frame (:func:`qkvquiz.scan.align.page_frame`) a
little inside its printed border, so the border itself is not read as ink, and cleaned of specks
(:func:`qkvquiz.scan.ink.clean`); a digit cell is taken out whole, its strokes followed past the
border (:func:`qkvquiz.scan.ink.digit_ink`). A tick box is ticked when enough of it is ink; a
sign cell holds a minus when its ink is one flat stroke; a digit cell goes to the digit models
(:func:`judge`). Whatever falls between clear answers is a doubt, sent to review with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .align import PX_PER_PT
from .cellmap import Box, Entry
from .digits import CLASSES, classify_views, shipped_rule
from .ink import clean, digit_ink, ink_box, ink_share

#: Share of a sign or tick cell cut away at each side, inside the printed border (a digit cell
#: is taken out whole: :func:`qkvquiz.scan.ink.digit_ink`).
SIGN_INSET = 0.12
TICK_INSET = 0.2
#: A tick box with less ink than this is empty, with more than TICKED ticked; between is a doubt.
EMPTY, TICKED = 0.02, 0.07

# Reasons a reading goes to review (kept as words a program can match; the review page says them in full).
LOW_CONFIDENCE = "low confidence"
TWO_LIKELY = "two readings likely"
FAINT_TICK = "faint tick"
UNCLEAR_SIGN = "unclear sign"
GAP = "gap between digits"
CONFLICT = "marks that contradict each other"
SIGN_ALONE = "a sign without digits"


@dataclass
class CellReading:
    kind: str  # "sign", "digit", "minus_infinity", "left_blank"
    reading: str  # a digit, "blank", "minus", "ticked", "unclear"
    confidence: float
    second: str | None = None  # the next likeliest reading of a digit cell
    doubt: str | None = None
    #: How likely the second reading is: the most any network in any view gives it. With
    #: ``confidence`` it says how the cell fares under any other (SURE, SECOND) rule.
    second_confidence: float | None = None


@dataclass
class EntryReading:
    part: str
    index: tuple[int, ...]
    value: str | None  # what the submission gets: the number as text, "-inf", or None (blank)
    confidence: float
    doubts: list[str] = field(default_factory=list)
    cells: list[CellReading] = field(default_factory=list)


def cut(dark: np.ndarray, box: Box, inset: float) -> np.ndarray:
    x, y, w, h = box
    x0, x1 = int(round((x + w * inset) * PX_PER_PT)), int(round((x + w * (1 - inset)) * PX_PER_PT))
    y0, y1 = int(round((y + h * inset) * PX_PER_PT)), int(round((y + h * (1 - inset)) * PX_PER_PT))
    return clean(dark[max(y0, 0):max(y1, 1), max(x0, 0):max(x1, 1)])


def read_tick(dark: np.ndarray, box: Box, kind: str) -> CellReading:
    share = ink_share(cut(dark, box, TICK_INSET))
    if share >= TICKED:
        return CellReading(kind, "ticked", min(1.0, 0.9 + share))
    if share <= EMPTY:
        return CellReading(kind, "blank", 1.0 - share)
    return CellReading(kind, "unclear", 0.5, doubt=FAINT_TICK)


def read_sign(dark: np.ndarray, box: Box) -> CellReading:
    cell = cut(dark, box, SIGN_INSET)
    found = ink_box(cell)
    if found is None or ink_share(cell) < 0.005:
        return CellReading("sign", "blank", 1.0)
    top, bottom, left, right = found
    height, width = bottom - top, right - left
    if height <= 0.45 * width and width >= 0.25 * cell.shape[1]:
        return CellReading("sign", "minus", 0.99)
    return CellReading("sign", "unclear", 0.5, doubt=UNCLEAR_SIGN)


@dataclass
class DigitJudgement:
    """The digit model's readings of some cells and which of them are doubtful, and why."""

    classes: np.ndarray  # (n,) the reading of each cell (a class index)
    confidence: np.ndarray  # (n,) how sure: the least probability any view gives the reading
    second: np.ndarray  # (n,) the next likeliest class
    doubts: list[str | None]
    second_confidence: np.ndarray  # (n,) the most probability any view gives the next likeliest class

    @property
    def doubtful(self) -> np.ndarray:
        return np.array([d is not None for d in self.doubts], dtype=bool)


def judge(p: np.ndarray, thresholds: tuple[float, float] | None = None) -> DigitJudgement:
    """Readings of the digit model's probabilities, (n, 11) or (views, n, 11) for the same cells
    shown in several views (:func:`qkvquiz.scan.digits.classify_views`). The reading is the class
    likeliest on average; its confidence the least any view gives it; the second the likeliest
    other class in any view. With ``thresholds`` (SURE, SECOND), the shipped rule's unless given
    (:func:`qkvquiz.scan.digits.shipped_rule`): below SURE, or another class above SECOND in any
    view, is a doubt."""
    if thresholds is None:
        thresholds = (shipped_rule().sure, shipped_rule().second)
    sure, second_most = thresholds
    views = p if p.ndim == 3 else p[None]
    rows = np.arange(views.shape[1])
    best = views.mean(axis=0).argmax(axis=1)
    confidence = views[:, rows, best].min(axis=0)
    others = views.max(axis=0)
    others[rows, best] = -1.0
    second = others.argmax(axis=1)
    second_confidence = others[rows, second]
    doubtful = in_doubt(confidence, second_confidence, (sure, second_most))
    doubts = [None if not d else LOW_CONFIDENCE if c < sure else TWO_LIKELY
              for d, c in zip(doubtful, confidence)]
    return DigitJudgement(best, confidence, second, doubts, second_confidence)


def in_doubt(confidence: np.ndarray, second_confidence: np.ndarray, thresholds: tuple[float, float]) -> np.ndarray:
    """The rule, on a judgement's two numbers (as the side file keeps them): a digit reading is
    in doubt when its confidence is below SURE or its second reading's above SECOND."""
    sure, second_most = thresholds
    return (np.asarray(confidence) < sure) | (np.asarray(second_confidence) > second_most)


def digit_cell(dark: np.ndarray, box: Box) -> tuple[np.ndarray, tuple[int, int]]:
    """A digit cell's own ink (strokes past its border followed, the border left out) and its
    height and width in pixels."""
    x, y, w, h = (v * PX_PER_PT for v in box)
    left, top, right, bottom = (int(round(v)) for v in (x, y, x + w, y + h))
    return digit_ink(dark, left, top, right, bottom), (bottom - top, right - left)


def read_digits(dark: np.ndarray, boxes: tuple[Box, ...]) -> list[CellReading]:
    judged = judge(classify_views([digit_cell(dark, box) for box in boxes]))
    return [CellReading("digit", CLASSES[b], float(c), CLASSES[s], d, float(q))
            for b, c, s, d, q in zip(judged.classes, judged.confidence, judged.second, judged.doubts,
                                     judged.second_confidence)]


def spell(sign: str, digits: list[str], integer_digits: int) -> str | None:
    """The number a sign cell and a comb of digit cells spell (blank cells left out), with the
    printed point after ``integer_digits`` cells: ``-3.07``; None when no digit is written."""
    written = [k for k, d in enumerate(digits) if d != "blank"]
    if not written:
        return None
    whole = "".join(digits[k] for k in written if k < integer_digits).lstrip("0") or "0"
    fraction = "".join(digits[k] for k in written if k >= integer_digits)
    return ("-" if sign == "minus" else "") + whole + (f".{fraction}" if fraction else "")


def read_entry(dark: np.ndarray, entry: Entry) -> EntryReading:
    """One entry's cells and the value they spell; every doubt is named."""
    sign = read_sign(dark, entry.sign)
    digits = read_digits(dark, entry.digits)
    minus_inf = read_tick(dark, entry.minus_infinity, "minus_infinity") if entry.minus_infinity else None
    left_blank = read_tick(dark, entry.left_blank, "left_blank")
    cells = [sign, *digits, *([minus_inf] if minus_inf else []), left_blank]
    doubts = [c.doubt for c in cells if c.doubt]
    written = [k for k, d in enumerate(digits) if d.reading != "blank"]
    ticked_inf = minus_inf is not None and minus_inf.reading == "ticked"
    ticked_blank = left_blank.reading == "ticked"
    value: str | None = None
    if sum((bool(written), ticked_inf, ticked_blank)) > 1:
        doubts.append(CONFLICT)
    elif ticked_inf:
        value = "-inf"  # a minus written in the sign cell as well says the same
    elif written:
        if written[-1] - written[0] + 1 != len(written):
            doubts.append(GAP)
        value = spell(sign.reading, [d.reading for d in digits], entry.integer_digits)
    elif sign.reading != "blank":
        doubts.append(SIGN_ALONE)
    confidence = min(c.confidence for c in cells)
    return EntryReading(entry.part, entry.index, value, confidence, list(dict.fromkeys(doubts)), cells)


def page_levels(frame: np.ndarray, mark_centres_px: np.ndarray, radius_px: float) -> tuple[float, float]:
    """The page's paper and black grey levels: paper is what most of the page is, black is the
    printed marks' inside."""
    white = float(np.percentile(frame, 90))
    blacks = []
    r = max(1, int(radius_px * 0.5))
    for x, y in mark_centres_px.astype(int):
        patch = frame[max(y - r, 0):y + r, max(x - r, 0):x + r]
        if patch.size:
            blacks.append(float(np.median(patch)))
    black = min(float(np.median(blacks)) if blacks else 0.0, white - 60)
    return white, black

