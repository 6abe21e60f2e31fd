"""WeasyPrint's text layouts, set up from what is shared by every text of the same font.

WeasyPrint sets up a Pango layout for every piece of text it measures or draws (a page of
the key: about a thousand), and each time makes a Pango context, looks up the language,
builds the font description and reads the font's metrics anew, though a document uses a
handful of fonts: 10% of a key's time. :func:`share_layout_setup` makes it build those once
per font (family, size, style, weight, language, direction…) and hand them to each new
layout; the layout itself is new each time, as before, so the text is measured and drawn as
before.

The change replaces ``weasyprint.text.line_break.Layout.setup`` only where its source is the
one this was written against (WeasyPrint 70); any other WeasyPrint is left as it is.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
from typing import Any

_log = logging.getLogger(__name__)

#: SHA-256 (first 16 hex digits) of the source of the ``Layout.setup`` replaced here.
_KNOWN_SETUP = "fb227a55094f41d4"
#: What makes a layout's setup: the style entries ``Layout.setup`` reads.
_FONT_KEYS = (
    "direction", "font_language_override", "lang", "font_style", "font_stretch", "font_weight", "font_size",
    "font_variant_caps", "font_variation_settings", "font_kerning", "font_variant_ligatures",
    "font_variant_position", "font_variant_numeric", "font_variant_alternates", "font_variant_east_asian",
    "font_feature_settings",
)


class _Shared:
    """The parts of a layout's setup that are the same for every text of one font."""

    __slots__ = ("context", "language", "description", "metrics")

    def __init__(self, context: Any, language: Any, description: Any, metrics: tuple[Any, ...]) -> None:
        self.context, self.language, self.description, self.metrics = context, language, description, metrics


def share_layout_setup() -> bool:
    """Install the shared setup (once per process); whether it is in place."""
    try:
        from weasyprint.text import line_break
    except ImportError:  # pragma: no cover - WeasyPrint missing: nothing to change
        return False
    layout_class = line_break.Layout
    if getattr(layout_class.setup, "shares_setup", False):
        return True
    try:
        source = inspect.getsource(layout_class.setup)
    except (OSError, TypeError):  # pragma: no cover - no source to check against
        return False
    if hashlib.sha256(source.encode()).hexdigest()[:16] != _KNOWN_SETUP:
        _log.debug("WeasyPrint's Layout.setup is not the one known: left as it is")
        return False
    layout_class.setup = _shared_setup(layout_class.setup, line_break)
    return True


def _shared_setup(original: Any, line_break: Any) -> Any:
    from weasyprint.text.fonts import font_features, get_font_description

    ffi, pango, gobject = line_break.ffi, line_break.pango, line_break.gobject
    shared: dict[tuple[Any, ...], _Shared | None] = {}  # None: set up as WeasyPrint does

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
            key = (id(style.font_config), tuple(style["font_family"]), *(style[name] for name in _FONT_KEYS))
            hash(key)
        except (TypeError, KeyError, AttributeError):
            return original(self, style)
        found = shared.get(key, _MISSING)
        if found is _MISSING:
            features = font_features(
                style["font_kerning"], style["font_variant_ligatures"], style["font_variant_position"],
                style["font_variant_caps"], style["font_variant_numeric"], style["font_variant_alternates"],
                style["font_variant_east_asian"], style["font_feature_settings"],
            )
            # A font with OpenType features asked for gets an attribute list of its own per
            # layout, which set_text may change: set up as WeasyPrint does it.
            found = shared[key] = None if features else make(style)
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


_MISSING = object()
