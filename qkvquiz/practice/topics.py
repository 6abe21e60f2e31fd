"""What a student can practise: one item of a worksheet spec at a time.

A topic is a family alone (a spec of one item with the family's defaults) or one item of a spec
(bundled, ``attention-basics``, or a file). Its id is what the page sends back: the family's name
(``attention.scores``) or the spec's name and the item's number (``attention-basics/2``); the
server answers only ids of its own list, so a request never names a file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.i18n import _, check_lang, chosen
from ..families import REGISTRY
from ..spec import ItemSpec, WorksheetSpec, bundled_spec_names, find_spec, load_spec, parse_spec


class TopicError(ValueError):
    """A family, spec or file that cannot be practised; the message names it and the choices."""


@dataclass(frozen=True)
class Topic:
    id: str  # "attention.scores" or "attention-basics/2"
    spec: WorksheetSpec  # a spec of exactly one item: the problem practised
    group: str = ""  # the spec's title for an item of a spec; "" for a family alone

    @property
    def item(self) -> ItemSpec:
        return self.spec.items[0]

    @property
    def family(self) -> str:
        return self.item.family.name

    def title(self) -> str:
        """The item's title as an instructor wrote it, else the family's, in the current language."""
        item = self.item
        if not item.title or item.title == item.family.title:
            return _(item.family.title)
        return item.title


def family_topic(name: str) -> Topic:
    """The family ``name`` with its defaults, as a topic."""
    if name not in REGISTRY:
        raise TopicError(f"no family {name!r}")
    spec = parse_spec({"title": REGISTRY[name].title, "items": [{"family": name}]}, source=f"<family {name}>")
    return Topic(name, spec)


def spec_topics(spec: WorksheetSpec, name: str) -> list[Topic]:
    """Each item of ``spec`` as a topic ``name/k`` (k from 1), keeping its tolerance, credit and asks."""
    return [Topic(f"{name}/{k}", dataclasses.replace(spec, items=(item,)), spec.title)
            for k, item in enumerate(spec.items, start=1)]


def topics_for(choices: Sequence[str] = (), lang: str | None = None) -> list[Topic]:
    """The topics of ``choices`` (family names, bundled spec names, spec files), in order; none
    given: every family, then every bundled spec. ``lang`` (default: the language chosen around
    the call) overrides the specs' ``lang:``.

    Raises :class:`TopicError` (or the spec's own ``SpecError``) naming what is wrong."""
    if not choices:
        choices = [*sorted(REGISTRY), *bundled_spec_names()]
    topics: list[Topic] = []
    seen: set[str] = set()
    for choice in choices:
        for topic in _topics_of(str(choice)):
            if topic.id not in seen:
                seen.add(topic.id)
                topics.append(topic)
    lang = lang or chosen()
    return topics if lang is None else in_language(topics, lang)


def own_language(topics: Sequence[Topic]) -> str | None:
    """The language of a practice page of ``topics`` where no one chose one: the first topic's."""
    return topics[0].spec.lang if topics else None


def in_language(topics: Sequence[Topic], lang: str) -> list[Topic]:
    """``topics`` with their problems, feedback and worked steps in ``lang``."""
    code = check_lang(lang)
    out = []
    for topic in topics:
        # The spec's own text too (a bundled spec is written in both languages), and the group's title with it.
        spec = topic.spec.in_language(code)
        out.append(dataclasses.replace(topic, spec=spec, group=spec.title if topic.group else ""))
    return out


def _topics_of(choice: str) -> list[Topic]:
    if choice in REGISTRY:
        return [family_topic(choice)]
    try:
        path = find_spec(choice)
    except FileNotFoundError as exc:
        if Path(choice).suffix in (".yaml", ".yml") or "/" in choice or "\\" in choice:
            raise TopicError(str(exc)) from None  # a file was meant: it is missing
        raise TopicError(
            f"{choice!r} is neither a family nor a bundled spec, and no spec file {choice} exists; "
            f"families: {', '.join(sorted(REGISTRY))}; bundled specs: {', '.join(bundled_spec_names())}") from None
    return spec_topics(load_spec(path), path.stem)
