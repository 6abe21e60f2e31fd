"""WeasyPrint's text layouts: what is the same for many texts is made once.

WeasyPrint sets up a Pango layout for every piece of text it measures or draws (a page of
the key: about a thousand), and

* each time makes a Pango context, looks up the language, builds the font description and
  reads the font's metrics anew, though a document uses a handful of fonts (10% of a key's
  time). :func:`share_text_layouts` makes it build those once per font (family, size, style,
  weight, language, direction…) and hand them to each new layout.
* measures a line as often as it meets it: an inline box's content three times (its
  narrowest and widest width, then its layout), and the same ``=``, ``(−1)(0)``, row of a
  matrix or sentence of a problem in every student's document. A line's measure depends only
  on its text, its font and the room it has (for a text that may not wrap, as our math and
  matrices: text and font alone), so it is measured once and handed out again (a copy of
  WeasyPrint's result, each time).
* asks each box's style for its strut (the height and baseline of an empty line) under a
  key built anew each time; a computed style keeps its strut, and the font key used above,
  once worked out (its values do not change once computed).
* asks Pango whether a text may break inside (its line-break rules over the whole text) each
  time it meets the text; the answer, a function of the text and its language, is kept for
  short texts.

What is kept for a font configuration is forgotten when a font face is added to it (a
template's ``@font-face``): a family may then be set in another face.

All keep to what WeasyPrint itself computes: the layouts drawn are new each time, the
measures are those Pango gave, and the PDF bytes are the same. What is shared is kept per
font configuration (a weak reference: it goes with it). They are installed only where the
replaced functions' source is the one this was written against (WeasyPrint 70); any other
WeasyPrint is left as it is. (Drawing the text is :mod:`qkvquiz.render.drawn_text`'s.)
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import weakref
from typing import Any

_log = logging.getLogger(__name__)

#: SHA-256 (first 16 hex digits) of the source of each function relied on or replaced here.
_KNOWN_SOURCES = {
    "Layout.setup": "fb227a55094f41d4",
    "split_first_line": "39ad1016863ca34d",
    "first_line_metrics": "55ec5d0b58b29a8b",
    "create_layout": "6587192cc0ab3ffa",
    "Layout.set_text": "fe23ca9937dbf520",
    "Layout.deactivate": "bfec3ec8406e1c82",
    "strut": "b57885b70dd08efe",
    "can_break_text": "4f3fb5ef1c239df9",
    "get_next_break_point_from_text": "39b162a79080e236",
    "get_log_attrs": "65c1a1c4fa75ee95",
    "get_next_break_point": "329fd215c7eb5323",
}
#: What makes a layout's setup: the style entries ``Layout.setup`` reads.
_FONT_KEYS = (
    "direction", "font_language_override", "lang", "font_style", "font_stretch", "font_weight", "font_size",
    "font_variant_caps", "font_variation_settings", "font_kerning", "font_variant_ligatures",
    "font_variant_position", "font_variant_numeric", "font_variant_alternates", "font_variant_east_asian",
    "font_feature_settings",
)
#: What else a line that may not wrap is measured with: the style entries that
#: ``split_first_line`` (on its way for such a line), ``Layout.set_text`` and ``line_size`` read,
#: and ``text_decoration_line``, which decides what the setup keeps in the layout.
_LINE_KEYS = ("white_space", "letter_spacing", "word_spacing", "overflow_wrap", "tab_size", "text_decoration_line")
#: And for a line that may wrap: what ``split_first_line`` reads to break it and to hyphenate.
_WRAP_KEYS = ("word_break", "line_height", "hyphens", "hyphenate_character", "hyphenate_limit_chars",
              "hyphenate_limit_zone")
#: The white-space values of a line that does not wrap (``split_first_line`` sets no width).
_NO_WRAP = ("nowrap", "pre")
#: Lines measured and kept per font configuration (about 1 kB each); past this many they are
#: forgotten (a class of 100 meets about 6,000 different lines).
_LINES_KEPT = 20_000
#: Whether a text may break inside is kept for texts of at most this many characters, this many
#: of them.
_SHORT_TEXT = 64
_BREAKS_KEPT = 8192
#: The attributes a computed style keeps its font key (:func:`_font_key`) and its strut
#: (:func:`_kept_strut`) in.
_FONT_KEY_ATTRIBUTE = "qkvquiz_font_key"
_STRUT_ATTRIBUTE = "qkvquiz_strut"
#: The style classes that may keep it (filled by :func:`share_text_layouts`).
_KEEPS_KEYS: set[type] = set()
_MISSING = object()


class _Shared:
    """The parts of a layout's setup that are the same for every text of one font."""

    __slots__ = ("context", "description", "language", "metrics")

    def __init__(self, context: Any, language: Any, description: Any, metrics: tuple[Any, ...]) -> None:
        self.context, self.language, self.description, self.metrics = context, language, description, metrics


class _PerFonts:
    """What is kept for one font configuration: shared setups, and lines measured."""

    def __init__(self) -> None:
        self.setups: dict[tuple[Any, ...], _Shared | None] = {}  # None: set up as WeasyPrint does
        self.lines: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.drawn: dict[tuple[Any, ...], Any] = {}  # texts drawn (qkvquiz.render.drawn_text)

    def forget(self) -> None:
        """All of it: a font face was added, and a family may now be set in another face."""
        self.setups.clear()
        self.lines.clear()
        self.drawn.clear()


_KEPT: weakref.WeakKeyDictionary[Any, _PerFonts] = weakref.WeakKeyDictionary()


def _kept(font_config: Any) -> _PerFonts:
    found = _KEPT.get(font_config)
    if found is None:
        found = _KEPT[font_config] = _PerFonts()
    return found


def sources_are(functions: dict[str, Any], known: dict[str, str]) -> bool:
    """Whether each function's source is the one known (SHA-256, its first 16 hex digits)."""
    try:
        digests = {name: hashlib.sha256(inspect.getsource(f).encode()).hexdigest()[:16] for name, f in functions.items()}
    except (OSError, TypeError):  # pragma: no cover - no source to check against
        return False
    return digests == known


def share_text_layouts() -> bool:
    """Install them (once per process); whether they are in place."""
    try:
        from weasyprint.layout import inline, preferred
        from weasyprint.text import fonts, line_break
    except ImportError:  # pragma: no cover - WeasyPrint missing: nothing to change
        return False
    layout_class = line_break.Layout
    if getattr(layout_class.setup, "shares_setup", False):
        return True
    functions = {
        "Layout.setup": layout_class.setup, "split_first_line": line_break.split_first_line,
        "first_line_metrics": line_break.first_line_metrics, "create_layout": line_break.create_layout,
        "Layout.set_text": layout_class.set_text, "Layout.deactivate": layout_class.deactivate,
        "strut": line_break.strut, "can_break_text": line_break.can_break_text,
        "get_next_break_point_from_text": line_break.get_next_break_point_from_text,
        "get_log_attrs": line_break.get_log_attrs, "get_next_break_point": line_break.get_next_break_point,
    }
    from weasyprint.css import computed_values, units

    if not sources_are(functions, _KNOWN_SOURCES) or inline.split_first_line is not line_break.split_first_line \
            or preferred.split_first_line is not line_break.split_first_line \
            or not all(module.strut is line_break.strut for module in (inline, computed_values, units)) \
            or not all(module.can_break_text is line_break.can_break_text for module in (inline, preferred)):
        _log.debug("WeasyPrint's text layout is not the one known: left as it is")
        return False
    from weasyprint.css import AnonymousStyle, ComputedStyle

    _KEEPS_KEYS.update((AnonymousStyle, ComputedStyle))
    layout_class.setup = _shared_setup(layout_class.setup, line_break)
    measured = _measured_once(line_break.split_first_line)
    # Each module that took the function by name calls it by that name.
    line_break.split_first_line = inline.split_first_line = preferred.split_first_line = measured
    kept_strut = _kept_strut(line_break.strut)
    line_break.strut = inline.strut = computed_values.strut = units.strut = kept_strut
    breaks = _short_texts_kept(line_break.can_break_text)
    line_break.can_break_text = inline.can_break_text = preferred.can_break_text = breaks
    fonts.FontConfiguration.add_font_face = _forgetting(fonts.FontConfiguration.add_font_face)
    return True


def _forgetting(original: Any) -> Any:
    """``FontConfiguration.add_font_face``, after which what is kept for the configuration is
    forgotten. (A document's own ``@font-face`` rules add faces to the one configuration the
    documents share; the shipped faces are added once, before the first document.)"""

    def add_font_face(self: Any, rule_descriptors: Any, url_fetcher: Any) -> Any:
        try:
            return original(self, rule_descriptors, url_fetcher)
        finally:
            found = _KEPT.get(self)
            if found is not None:
                found.forget()

    add_font_face.__wrapped__ = original  # type: ignore[attr-defined]
    return add_font_face


def _short_texts_kept(original: Any) -> Any:
    """``can_break_text``, whose answer (a function of the text and its language: Pango's
    line-break rules) is kept for short texts, the ones met again and again (a number, an
    operator, a variable); a longer text is asked anew."""
    kept = functools.lru_cache(maxsize=_BREAKS_KEPT)(original)

    def can_break_text(text: str, lang: Any) -> Any:
        if len(text) <= _SHORT_TEXT:
            return kept(text, lang)
        return original(text, lang)

    can_break_text.__wrapped__ = original  # type: ignore[attr-defined]
    return can_break_text


def _font_key(style: Any) -> tuple[Any, ...]:
    """What a style's text is set in: its font family and the entries of :data:`_FONT_KEYS`.

    Kept on the style itself (a computed style's values do not change once computed), for a
    page asks for it of the same style for each text measured, laid out and drawn. Only on
    WeasyPrint's computed styles: other style objects (an SVG text's) may change as they go."""
    try:
        return style.__dict__[_FONT_KEY_ATTRIBUTE]
    except (KeyError, AttributeError):
        pass
    key = (tuple(style["font_family"]), *(style[name] for name in _FONT_KEYS))
    if type(style) in _KEEPS_KEYS:
        style.__dict__[_FONT_KEY_ATTRIBUTE] = key
    return key


def _kept_strut(original: Any) -> Any:
    """``strut``, the height and baseline of a style's empty line, kept on the style.

    WeasyPrint looks it up in a table per font configuration, under a key it builds anew each
    time: a string of fourteen of the style's entries; a page asks for it thousands of times,
    of a few hundred styles. Only WeasyPrint's computed styles keep it (see :func:`_font_key`).
    """

    def strut(style: Any) -> Any:
        try:
            return style.__dict__[_STRUT_ATTRIBUTE]
        except (KeyError, AttributeError):
            pass
        result = original(style)
        if type(style) in _KEEPS_KEYS:
            style.__dict__[_STRUT_ATTRIBUTE] = result
        return result

    strut.__wrapped__ = original  # type: ignore[attr-defined]
    return strut


def _shared_setup(original: Any, line_break: Any) -> Any:
    from weasyprint.text.fonts import font_features, get_font_description

    ffi, pango, gobject = line_break.ffi, line_break.pango, line_break.gobject

    def make(style: Any) -> _Shared:
        # What WeasyPrint 70's Layout.setup does before it makes the layout, kept.
        context = ffi.gc(pango.pango_font_map_create_context(style.font_config.font_map), gobject.g_object_unref)
        pango.pango_context_set_round_glyph_positions(context, False)
        pango.pango_context_set_base_dir(context, line_break.PANGO_DIRECTION[style["direction"]])
        if style["font_language_override"] != "normal":
            lang_p, lang = line_break.unicode_to_char_p(
                line_break.LST_TO_ISO.get(style["font_language_override"].lower(), style["font_language_override"])
            )
        elif style["lang"]:
            lang_p, lang = line_break.unicode_to_char_p(style["lang"])
        else:
            lang = None
            language = pango.pango_language_get_default()
        if lang:
            language = pango.pango_language_from_string(lang_p)
            pango.pango_context_set_language(context, language)
        description = get_font_description(style)
        metrics = ffi.gc(pango.pango_context_get_metrics(context, description, language), pango.pango_font_metrics_unref)
        from_units = line_break.FROM_UNITS
        values = (
            from_units * pango.pango_font_metrics_get_ascent(metrics),
            from_units * pango.pango_font_metrics_get_underline_position(metrics),
            from_units * pango.pango_font_metrics_get_strikethrough_position(metrics),
            from_units * pango.pango_font_metrics_get_underline_thickness(metrics),
            from_units * pango.pango_font_metrics_get_strikethrough_thickness(metrics),
        )
        return _Shared(context, language, description, values)

    def setup(self: Any, style: Any) -> None:
        try:
            setups = _kept(style.font_config).setups
            key = _font_key(style)
            found = setups.get(key, _MISSING)
        except (TypeError, KeyError, AttributeError):  # an unhashable value, or no font configuration
            return original(self, style)
        if found is _MISSING:
            features = font_features(
                style["font_kerning"], style["font_variant_ligatures"], style["font_variant_position"],
                style["font_variant_caps"], style["font_variant_numeric"], style["font_variant_alternates"],
                style["font_variant_east_asian"], style["font_feature_settings"],
            )
            # A font with OpenType features asked for gets an attribute list of its own per
            # layout, which set_text may change: set up as WeasyPrint does it.
            found = setups[key] = None if features else make(style)
        if found is None:
            return original(self, style)
        self.style = style
        self.first_line_direction = 0
        self.language = found.language
        self.layout = ffi.gc(pango.pango_layout_new(found.context), gobject.g_object_unref)
        pango.pango_layout_set_auto_dir(self.layout, False)
        pango.pango_layout_set_font_description(self.layout, found.description)
        if style["text_decoration_line"] != "none":
            (self.ascent, self.underline_position, self.strikethrough_position,
             self.underline_thickness, self.strikethrough_thickness) = found.metrics
        else:
            self.ascent = None
            self.underline_position = None
            self.strikethrough_position = None
        return None

    setup.shares_setup = True  # type: ignore[attr-defined]
    setup.__wrapped__ = original  # type: ignore[attr-defined]
    return setup


def _measured_once(original: Any) -> Any:
    """``split_first_line``, measuring a line once per text, font and room.

    WeasyPrint 70's ``split_first_line`` is a function of its text, the style entries named in
    :data:`_FONT_KEYS`, :data:`_LINE_KEYS` and :data:`_WRAP_KEYS`, the room (``max_width``),
    ``justification_spacing``, ``is_line_start`` and ``minimum``; ``context`` only keeps the
    hyphenation dictionaries it loads. A line that may not wrap is measured with no width set,
    before anything reads the room, ``is_line_start`` or ``minimum``: it is kept by text and
    font alone. The result is the layout (deactivated: its text and a few numbers), the first
    line's length, where the next starts, and its width, height and baseline; each caller gets
    a copy of the kept layout, with its own ``max_width`` (what an ellipsis is drawn in).
    """

    def split_first_line(text: str, style: Any, context: Any, max_width: Any, justification_spacing: Any,
                         is_line_start: bool = True, minimum: bool = False) -> Any:
        try:
            lines = _kept(style.font_config).lines
            key: tuple[Any, ...] = (text, justification_spacing, *_font_key(style), *(style[name] for name in _LINE_KEYS))
            if style["white_space"] not in _NO_WRAP:
                key = (*key, max_width, is_line_start, minimum, *(style[name] for name in _WRAP_KEYS))
            found = lines.get(key)
        except (TypeError, LookupError, AttributeError):
            return original(text, style, context, max_width, justification_spacing, is_line_start, minimum)
        if found is None:
            result = original(text, style, context, max_width, justification_spacing, is_line_start, minimum)
            layout = result[0]
            if "layout" in vars(layout):  # not deactivated: not a result to hand out again
                return result
            if len(lines) >= _LINES_KEPT:
                lines.clear()
            lines[key] = (_copy(layout), *result[1:])
            return result
        kept, *measures = found
        layout = _copy(kept)
        layout.max_width = max_width
        return (layout, *measures)

    split_first_line.__wrapped__ = original  # type: ignore[attr-defined]
    return split_first_line


def _copy(layout: Any) -> Any:
    """A deactivated layout's copy (its attributes are a string and numbers)."""
    twin = object.__new__(type(layout))
    twin.__dict__.update(vars(layout))
    return twin
