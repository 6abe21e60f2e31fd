"""Chinese text as Chinese typesetting sets it, for every place the pages print it: prose
(:mod:`qkvquiz.render.html_page`) and the words inside formulas (``\\text{…}``,
:mod:`qkvquiz.render.textmath`).

* Two full-width marks in a row ("）：", "。（"): each is drawn in a full em with its ink at one
  side, so the pair shows half an em of blank between them. The first of the two is set at half
  width (the fonts' ``halt`` feature on ``span.halt``, see the stylesheet).
* A space between a number or a Latin word and a Chinese character ("到 2 位小数", "键 1") is
  tied (a no-break space), so that a line does not end between a number and its measure word.
"""

from __future__ import annotations

import html
import re

from .fonts import has_cjk

_PUNCTUATION_PAIR = re.compile("([）」』】》〉，。、；：！？])(?=[）」』】》〉（「『【《〈，。、；：！？])")
_CJK_TIE = re.compile(r"(?<=[0-9A-Za-z])[ ](?=[\u3400-\u9fff])|(?<=[\u3400-\u9fff])[ ](?=[0-9A-Za-z])")


def chinese_text_html(text: str, math_after: bool = False) -> str:
    """``text`` escaped for HTML, with its numbers tied and its pairs of marks compressed;
    ``math_after``: a formula follows, and a space before it after a Chinese character is tied
    too ("键 $1$": the number is math)."""
    text = _CJK_TIE.sub("\u00a0", text)
    if math_after and text.endswith(" ") and has_cjk(text[-2:-1]):
        text = text[:-1] + "\u00a0"
    return _PUNCTUATION_PAIR.sub(r'<span class="halt">\1</span>', html.escape(text, quote=False))
