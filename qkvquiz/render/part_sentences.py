"""Each asked part's sentence as its worksheet states it: "Compute the scaled score $s = …$".

A problem template lists its asked parts one per line, ``- **(a)** <sentence>.``, each followed
by its answer line; the sentences are the family's prompts, with the formula where the problem
gives one, and a few templates word their own ("Compute the scaled score $s = q\\cdot k/\\sqrt{d_k}$"
for one query and key). Whatever else shows the parts under their letters (a student's feedback)
takes the sentences from here, so that it names each part in the sheet's own words and notation,
in any language the templates are written in, rather than keeping a second copy of each.
"""

from __future__ import annotations

import re

from ..spec_types import ItemSpec
from .markdown import problem_markdown
from .textmath import Unsupported
from .unicode_math import unicode_sentence

#: A part's line in a problem: its letter in bold, then its sentence.
_PART_LINE = re.compile(r"^- \*\*\(([a-z]{1,2})\)\*\* (.+)$", re.MULTILINE)
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def part_sentences(item: ItemSpec, givens: dict, steps: dict) -> list[str] | None:
    """Each asked part's sentence (Markdown with ``$…$`` math, without its closing full stop) as
    the bundled problem template states it for this variant in the current language; None where
    the problem does not list its parts as (a), (b) … one per part."""
    found = _PART_LINE.findall(problem_markdown(item, givens, steps))
    if [letter for letter, _sentence in found] != [_LETTERS[k % 26] for k in range(len(item.parts))]:
        return None
    return [re.sub(r"\s*[.。]$", "", sentence.strip()) for _letter, sentence in found]


def plain_part_sentences(item: ItemSpec, givens: dict, steps: dict) -> list[str] | None:
    """:func:`part_sentences` with each formula in plain Unicode text ("s = q·k/√dₖ"), for what
    is read without math; None where a sentence has math that cannot be written so."""
    sentences = part_sentences(item, givens, steps)
    if sentences is None:
        return None
    try:
        return [unicode_sentence(s) for s in sentences]
    except Unsupported:
        return None
