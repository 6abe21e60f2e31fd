"""Three questions WeasyPrint asks of every box, answered in fewer steps.

* Is the box in the normal flow? Layout asks it of each child of each block, again at each
  line and page (about 5,000 times for a key): five method calls and six style lookups each
  time. :func:`_in_normal_flow` reads the box's ``float`` and ``position`` once each and
  answers the same. (It reads them anew every time: WeasyPrint changes both in place, for a
  list marker, a footnote or a first letter.)
* Does the box have a background to lay out? WeasyPrint works it out for every box of every
  page (the colour parsed, the image list made), and nearly none does. A computed style keeps
  the answer "nothing to lay out" once worked out (WeasyPrint never changes a style's
  background, border image, mask, shadow or visibility), and such a box goes straight to its
  children, with what WeasyPrint would have done for it: its corners' radii resolved, no
  background.
* What are its margins, paddings, sizes and borders in points (``resolve_percentages``, about
  1,100 times for a key: seventeen style lookups and as many function calls each time)? For a
  style whose lengths are all absolute (no percentage, no ``calc()``) the answers do not depend
  on the containing block: they are kept by the style's lengths (read in one call each time,
  so a style changed in place is answered anew), and each box gets them in one step. Any other
  style (a percentage, a formula, collapsed table borders, a ``box-sizing`` other than
  ``content-box``) is resolved by WeasyPrint every time.

The PDF bytes are the same (tested against WeasyPrint's own). Installed only where the
functions' source is the one this was written against (WeasyPrint 70), as in
:mod:`qkvquiz.render.text_layouts`.
"""

from __future__ import annotations

import operator
import sys
from typing import Any

from qkvquiz.render.text_layouts import _KEEPS_KEYS, sources_are

_KNOWN_SOURCES = {
    "Box.is_in_normal_flow": "5f49d6ab23da7e51",
    "Box.is_floated": "6e6071b81868ea92",
    "Box.is_footnote": "3550ea0c86860187",
    "Box.is_note": "2651f1110437e2e3",
    "Box.is_absolutely_positioned": "397e0c33b3087681",
    "Box.is_running": "1c451d5c39f4a663",
    "layout_box_backgrounds": "617a870678c82755",
    "resolve_percentages": "71673078096fcf87",
    "resolve_one_percentage": "4cfaa9ad134e4f7b",
    "percentage": "ebe404ccd9da50bf",
    "adjust_box_sizing": "88f3351db0280d16",
}
#: The ``float`` and ``position`` values that take a box out of the normal flow (a float, a
#: footnote; absolute or fixed positioning), besides ``running()`` and ``note()`` positions.
_OUT_OF_FLOW = frozenset({"left", "right", "inline-start", "inline-end", "footnote", "absolute", "fixed"})
_PLACED_ELSEWHERE = ("running()", "note()")
#: The attribute a computed style keeps "no background to lay out" in.
_PLAIN_ATTRIBUTE = "qkvquiz_no_background"
#: Answers kept (one per different set of lengths: a few hundred in a class); past this
#: many they are forgotten.
_ANSWERS_KEPT = 10_000
#: The lengths ``resolve_percentages`` resolves, and the border widths it copies.
_LENGTHS = ("margin_top", "margin_right", "margin_bottom", "margin_left", "padding_top", "padding_right",
            "padding_bottom", "padding_left", "width", "min_width", "max_width", "height", "min_height",
            "max_height")
_BORDERS = ("border_top_width", "border_right_width", "border_bottom_width", "border_left_width")


def answer_box_questions() -> bool:
    """Install the three answers (once per process); whether they are in place."""
    try:
        from weasyprint.formatting_structure import boxes
        from weasyprint.layout import background, percent
    except ImportError:  # pragma: no cover - WeasyPrint missing: nothing to change
        return False
    box = boxes.Box
    if getattr(box.is_in_normal_flow, "answers_at_once", False):
        return True
    functions = {
        "Box.is_in_normal_flow": box.is_in_normal_flow, "Box.is_floated": box.is_floated,
        "Box.is_footnote": box.is_footnote, "Box.is_note": box.is_note,
        "Box.is_absolutely_positioned": box.is_absolutely_positioned, "Box.is_running": box.is_running,
        "layout_box_backgrounds": background.layout_box_backgrounds,
        "resolve_percentages": percent.resolve_percentages, "resolve_one_percentage": percent.resolve_one_percentage,
        "percentage": percent.percentage, "adjust_box_sizing": percent.adjust_box_sizing,
    }
    # No box class may answer these questions its own way.
    overridden = any(
        name in vars(cls) for cls in _subclasses(box)
        for name in ("is_in_normal_flow", "is_floated", "is_footnote", "is_note", "is_absolutely_positioned",
                     "is_running")
    )
    if not sources_are(functions, _KNOWN_SOURCES) or overridden:
        return False
    _in_normal_flow.__wrapped__ = box.is_in_normal_flow  # type: ignore[attr-defined]
    box.is_in_normal_flow = _in_normal_flow
    # layout_backgrounds, and the function itself for the children, call it by this name.
    background.layout_box_backgrounds = _backgrounds_skipping_plain_boxes(background)
    # Each layout module took resolve_percentages by name, and calls it by that name.
    original = percent.resolve_percentages
    kept = _lengths_kept(original)
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("weasyprint.") and getattr(module, "resolve_percentages", None) is original:
            module.resolve_percentages = kept
    return True


def _subclasses(cls: type) -> list[type]:
    found, stack = [], list(cls.__subclasses__())
    while stack:
        sub = stack.pop()
        found.append(sub)
        stack.extend(sub.__subclasses__())
    return found


def _in_normal_flow(self: Any) -> bool:
    style = self.style
    position = style["position"]
    return style["float"] not in _OUT_OF_FLOW and position not in _OUT_OF_FLOW and position[0] not in _PLACED_ELSEWHERE


_in_normal_flow.answers_at_once = True  # type: ignore[attr-defined]


def _backgrounds_skipping_plain_boxes(background: Any) -> Any:
    original = background.layout_box_backgrounds
    resolve_radii_percentages = background.resolve_radii_percentages
    from weasyprint.draw.color import get_color

    def plain(style: Any) -> bool:
        """Whether WeasyPrint 70's ``layout_box_backgrounds`` would find nothing to lay out for
        a box of this style: no border image, no mask border, no shadow, and (visible) no
        image and a transparent colour."""
        try:
            return style.__dict__[_PLAIN_ATTRIBUTE]
        except (KeyError, AttributeError):
            pass
        answer = (
            style["border_image_source"][0] == "none" and style["mask_border_source"][0] == "none"
            and not style["box_shadow"]
            and (style["visibility"] == "hidden" or (
                all(kind == "none" for kind, _ in style["background_image"])
                and get_color(style, "background_color").alpha == 0))
        )
        if type(style) in _KEEPS_KEYS:
            style.__dict__[_PLAIN_ATTRIBUTE] = answer
        return answer

    def layout_box_backgrounds(page: Any, box: Any, get_image_from_uri: Any, layout_children: bool = True,
                               style: Any = None) -> None:
        if style is not None or box is page or not plain(box.style):
            return original(page, box, get_image_from_uri, layout_children, style)
        resolve_radii_percentages(box)
        if layout_children:
            for child in box.all_children():
                layout_box_backgrounds(page, child, get_image_from_uri)
        box.background = None
        return None

    layout_box_backgrounds.__wrapped__ = original  # type: ignore[attr-defined]
    return layout_box_backgrounds


def _absolute(value: Any) -> bool:
    """Whether ``percentage`` turns this computed length into the same number whatever the
    containing block: none, auto, or points (no percentage, no formula)."""
    return value is None or value == "auto" or getattr(value, "unit", None) == "px"


def _lengths_kept(original: Any) -> Any:
    # The style entries the answer depends on, read in one call: the lengths, the border
    # widths, border-collapse and box-sizing.
    entries = operator.itemgetter(*_LENGTHS, *_BORDERS, "border_collapse", "box_sizing")
    answers: dict[tuple[Any, ...], dict[str, Any] | None] = {}

    def resolve_percentages(box: Any, containing_block: Any) -> None:
        try:
            key = entries(box.style)
            kept = answers.get(key, False)
        except (TypeError, KeyError, AttributeError):  # a value that does not hash, a style without one
            return original(box, containing_block)
        if kept:
            box.__dict__.update(kept)
            return None
        original(box, containing_block)
        if kept is False:
            if len(answers) >= _ANSWERS_KEPT:
                answers.clear()
            absolute = key[-2] != "collapse" and key[-1] == "content-box" and all(map(_absolute, key[:len(_LENGTHS)]))
            answers[key] = {name: getattr(box, name) for name in (*_LENGTHS, *_BORDERS)} if absolute else None
        return None

    resolve_percentages.__wrapped__ = original  # type: ignore[attr-defined]
    return resolve_percentages
