"""WeasyPrint's drawing of text: a text drawn once, in one font, is drawn again from a record.

To draw a piece of text into a page, WeasyPrint sets its Pango layout up again, shapes the
text again (it was shaped when it was measured) and turns each glyph into PDF text operators,
one glyph at a time in Python: a fifth of the CPU time of a key's PDF. What comes out depends
only on the text, its font and its spacing, and a class's documents draw the same ``=``,
``(−1)(0)``, variable names and rows of matrices again and again. :func:`draw_text_from_records`
replaces ``draw_text`` with one that keeps, per text and font, what the glyph loop made: the
operators (the glyph strings, with their kerning), the Pango font of each run (a reference kept,
so that it stays the same font), and each glyph's width and text (what the font's subset and
its ToUnicode map need). Drawing it again replays them into the page: the same operators, in the
same order, and the same entries in the document's font tables, as WeasyPrint would make. A
record holds for a document only where each of its glyphs has, in the document's font, the
width its kerning was worked out with (a font shared by several sizes keeps the width of the
size that drew the glyph first, and a hinted face's widths change with the size); else the
text is drawn by WeasyPrint. The records go when a font face is added to the configuration
(:mod:`qkvquiz.render.text_layouts`): the same family may then be set in another face.

Only plain text is recorded: no underline or other decoration, no ellipsis, no justified line
(its spacing almost never comes again), no emoji or bitmap font, no raised glyph, no glyph
missing from the font. Anything else is drawn by WeasyPrint as before, as is everything where
WeasyPrint is not the version this was written against (the sources relied on are checked, as
in :mod:`qkvquiz.render.text_layouts`).
"""

from __future__ import annotations

import logging
from typing import Any

from qkvquiz.render.text_layouts import _font_key, _kept, sources_are

_log = logging.getLogger(__name__)

#: SHA-256 (first 16 hex digits) of the source of each function replaced or followed here.
_KNOWN_SOURCES = {
    "draw_text": "ebaf96239c6ca363",
    "draw_first_line": "1bb8eae6d88e71b1",
    "Layout.reactivate": "0b89ee097104b713",
    "Stream.add_font": "e4226e1117477217",
}
#: What besides the text and the font decides the glyphs drawn: the style entries that
#: ``Layout.set_text`` reads (with ``justify=True``, as drawing calls it).
_SPACING_KEYS = ("word_spacing", "letter_spacing", "overflow_wrap", "tab_size")
#: Texts kept per font configuration (a record is about 2 kB; a class of 100 draws about 1,100
#: different texts); past this many they are forgotten.
_TEXTS_KEPT = 5_000


class _Record:
    """One text's drawing: ``ops`` is a list of ``(run, glyph string)``, where ``run`` indexes
    ``fonts`` (the run's Pango font, a reference kept) or is -1 for "the same font goes on";
    ``glyphs`` holds, per run, each of its glyphs by id, in the order first met: its text, the
    width the glyph string's kerning was worked out with, and its own width in this font."""

    __slots__ = ("fonts", "glyphs", "ops")

    def __init__(self, fonts: list[Any], glyphs: list[dict[int, tuple[str, int, int]]], ops: list[tuple[int, str]]) -> None:
        self.fonts, self.glyphs, self.ops = fonts, glyphs, ops


#: A text of only blanks: WeasyPrint draws an empty text object for it.
_BLANK = _Record([], [], [])


def _fonts_for(stream: Any, kept: _Record) -> list[tuple[Any, float]] | None:
    """The document's fonts for the record's runs (added to it as WeasyPrint adds them), or
    None where the record does not hold for this document: a glyph whose width in the
    document's font (set by the size that drew it first, or to be set now to its own width)
    is not the one the record's kerning was worked out with."""
    found = []
    for pango_font, met in zip(kept.fonts, kept.glyphs):
        font, font_size = stream.add_font(pango_font)
        widths = font.widths
        for glyph_id, (_, used, natural) in met.items():
            if widths.get(glyph_id, natural) != used:
                return None
        found.append((font, font_size))
    return found


def draw_text_from_records() -> bool:
    """Install the recorded drawing (once per process); whether it is in place."""
    try:
        from weasyprint import draw
        from weasyprint.draw import text as draw_text_module
        from weasyprint.pdf.stream import Stream
        from weasyprint.text import line_break
    except ImportError:  # pragma: no cover - WeasyPrint missing: nothing to change
        return False
    original = draw_text_module.draw_text
    if getattr(draw.draw_text, "draws_from_records", False):
        return True
    functions = {
        "draw_text": original, "draw_first_line": draw_text_module.draw_first_line,
        "Layout.reactivate": line_break.Layout.reactivate, "Stream.add_font": Stream.add_font,
    }
    if not sources_are(functions, _KNOWN_SOURCES) or draw.draw_text is not original:
        _log.debug("WeasyPrint's text drawing is not the one known: left as it is")
        return False
    replacement = _recorded(original, draw_text_module, line_break)
    # draw/__init__.py took the function by name, and calls it by that name.
    draw.draw_text = draw_text_module.draw_text = replacement
    return True


def _recorded(original: Any, module: Any, line_break: Any) -> Any:
    ffi, pango, gobject = line_break.ffi, line_break.pango, line_break.gobject
    try:
        keep = gobject.g_object_ref
    except AttributeError:  # not among the functions WeasyPrint declares: declared here
        ffi.cdef("gpointer g_object_ref (gpointer object);")
        keep = gobject.g_object_ref
    from_units = module.FROM_UNITS
    matrix_class = module.Matrix
    glyph_empty, glyph_unknown = pango.PANGO_GLYPH_EMPTY, pango.PANGO_GLYPH_UNKNOWN_FLAG
    old_pango = pango.pango_version() < 14802

    def record(stream: Any, textbox: Any) -> _Record | None:
        """What WeasyPrint 70's ``draw_first_line`` makes of this text (no ellipsis), or None
        for a text it draws in a way not recorded here. Fonts are added to ``stream``'s
        document as ``draw_first_line`` adds them; nothing is drawn."""
        layout = textbox.pango_layout
        layout.reactivate(textbox.style)
        try:
            pango.pango_layout_set_single_paragraph_mode(layout.layout, True)
            first_line, _ = layout.get_first_line()
            fonts: list[Any] = []
            glyphs: list[dict[int, tuple[str, int, int]]] = []
            ops: list[tuple[int, str]] = []
            previous_pango_font = None
            string = ""
            utf8_text = layout.text.encode()
            run = first_line.runs[0]
            while run != ffi.NULL:
                glyph_item = run.data
                run = run.next
                glyph_string = glyph_item.glyphs
                glyphs_info = glyph_string.glyphs
                num_glyphs = glyph_string.num_glyphs
                clusters = glyph_string.log_clusters
                pango_font = glyph_item.item.analysis.font
                if pango_font != previous_pango_font:
                    previous_pango_font = pango_font
                    font, font_size = stream.add_font(pango_font)
                    if old_pango or font.png or font.svg or font.colr or font.bitmap:
                        return None
                    if string:
                        ops.append((-1, string))
                    string = ""
                    # A reference of our own: the font stays alive, and the same, while recorded.
                    fonts.append(ffi.gc(ffi.cast("PangoFont *", keep(pango_font)), gobject.g_object_unref))
                    glyphs.append({})
                    ops.append((len(fonts) - 1, ""))
                met = glyphs[-1]
                string += "<"
                for i, glyph_info in enumerate(glyphs_info[0:num_glyphs]):
                    glyph_id = glyph_info.glyph
                    width = glyph_info.geometry.width
                    if glyph_id == glyph_empty:
                        string += f">{-width / font_size}<"
                        continue
                    if glyph_id & glyph_unknown:
                        return None  # a .notdef glyph: WeasyPrint warns, and draws it its way
                    t1 = clusters[i]
                    if glyph_item.item.analysis.level % 2:  # rtl
                        t2 = glyph_item.item.length if i == 0 else clusters[i - 1]
                    else:
                        t2 = glyph_item.item.length if i == num_glyphs - 1 else clusters[i + 1]
                    offset = glyph_info.geometry.x_offset / font_size
                    if glyph_info.geometry.y_offset / 1000:
                        return None  # a raised glyph: drawn with a text rise of its own
                    if offset:
                        string += f">{-offset}<"
                    string += f"{glyph_id:04x}"
                    if glyph_id not in met:
                        # The glyph's own width in this font, and the one the document's font has
                        # for it (set by the first size that drew it), which the kerning uses.
                        pango.pango_font_get_glyph_extents(pango_font, glyph_id, stream.ink_rect, stream.logical_rect)
                        natural = round(stream.logical_rect.width * 1000 * from_units / font_size)
                        used = font.widths.setdefault(glyph_id, natural)
                        start = glyph_item.item.offset
                        met[glyph_id] = (utf8_text[start + t1:start + t2].decode(), used, natural)
                    logical_width = met[glyph_id][1]
                    kerning = logical_width + offset - width * 1000 * from_units / font_size
                    if kerning:
                        string += f">{int(kerning)}<"
                if string[-1] == "<":
                    string = string[:-1]
                else:
                    string += ">"
            ops.append((-1, string))
            return _Record(fonts, glyphs, ops)
        finally:
            layout.deactivate()

    def replay(stream: Any, kept: _Record, fonts: list[tuple[Any, float]], x: float, y: float) -> None:
        if not kept.ops:
            return
        stream.set_text_matrix(*matrix_class(d=-1, e=x, f=y).values)
        pending = ""
        for run, string in kept.ops:
            if run >= 0:
                font, font_size = fonts[run]
                if pending:
                    stream.show_text(pending)
                pending = ""
                stream.set_font_size(font.hash, font_size)
                widths, to_unicode = font.widths, font.to_unicode
                for glyph_id, (text, _, natural) in kept.glyphs[run].items():
                    if glyph_id not in to_unicode:
                        to_unicode[glyph_id] = text
                    if glyph_id not in widths:
                        widths[glyph_id] = natural
            else:
                pending += string
        stream.show_text(pending)

    def draw_text(stream: Any, textbox: Any, offset_x: float, text_overflow: str, block_ellipsis: str = "none") -> None:
        style = textbox.style
        try:
            layout = textbox.pango_layout
            # A justified line (its spacing is part of the key) almost never comes again.
            if (text_overflow != "clip" or block_ellipsis != "none" or style["text_decoration_line"] != "none"
                    or style["visibility"] != "visible" or not style["font_size"] >= 1e-6
                    or layout.justification_spacing):
                return original(stream, textbox, offset_x, text_overflow, block_ellipsis)
            texts = _kept(style.font_config).drawn
            key = (layout.text, bool(textbox.text.strip()), layout.justification_spacing, *_font_key(style),
                   *(style[name] for name in _SPACING_KEYS))
            kept = texts.get(key)
        except (TypeError, LookupError, AttributeError):  # an unhashable value, or no font configuration
            return original(stream, textbox, offset_x, text_overflow, block_ellipsis)
        if kept is None:
            kept = record(stream, textbox) if key[1] else _BLANK
            if kept is None:
                return original(stream, textbox, offset_x, text_overflow, block_ellipsis)
            if len(texts) >= _TEXTS_KEPT:
                texts.clear()
            texts[key] = kept
        fonts = _fonts_for(stream, kept)
        if fonts is None:
            return original(stream, textbox, offset_x, text_overflow, block_ellipsis)
        stream.set_color(style["color"])
        stream.begin_text()
        replay(stream, kept, fonts, textbox.position_x, textbox.position_y + textbox.baseline)
        stream.end_text()
        return None

    draw_text.draws_from_records = True  # type: ignore[attr-defined]
    draw_text.__wrapped__ = original  # type: ignore[attr-defined]
    return draw_text
