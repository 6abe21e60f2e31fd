"""YAML from outside, read with bounds: the spec, audit files, ``show -p`` parameters.

A safe loader that refuses duplicate keys (with both lines), nesting deeper than
``MAX_YAML_DEPTH`` and documents whose aliases would expand to more than ``MAX_YAML_NODES``
values (the "billion laughs" bomb), before anything is built. Errors are
:class:`~qkvquiz.core.inputs.InputError` naming the file and the line.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, SequenceNode

from .inputs import InputError, decode_text, read_bytes, shown_path

MAX_YAML_DEPTH = 32  # mappings and lists inside each other (a spec needs 6)
# Values in a YAML document, counted as written and again once its aliases are expanded. The
# pure-Python parser takes about 2 s for this many; a spec holds hundreds, an audit file with
# every given written out a few thousand.
MAX_YAML_NODES = 50_000


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with depth, alias expansion and duplicate keys checked.

    Depth is counted while composing (the composer recurses once per level, so a deep
    document would otherwise end in RecursionError). Alias expansion is measured on the
    composed node graph before any Python object is built: an alias costs what its anchor
    expands to, so a 700-byte bomb is refused without allocating its expansion.
    """

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:  # type: ignore[override]
        self._depth += 1
        self._nodes += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                mark = self.peek_event().start_mark
                raise _YamlRefused(f"mappings and lists are nested more than {MAX_YAML_DEPTH} deep", mark.line + 1)
            if self._nodes > MAX_YAML_NODES:  # stop parsing here: the rest is never scanned
                mark = self.peek_event().start_mark
                raise _YamlRefused(f"the document holds more than {MAX_YAML_NODES:,} values", mark.line + 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Node, deep: bool = False) -> Any:  # type: ignore[override]
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError) as exc:  # int("9" * 5000), a date out of range
            reason = str(exc).split(";")[0].split(": value has")[0][:120]  # Python's own advice is not for users
            raise _YamlRefused(f"the value cannot be read ({reason})", node.start_mark.line + 1) from None

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:  # type: ignore[override]
        if isinstance(node, MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base` keys are meant to be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base constructor reports it
                if first is not None:
                    lines = f"on line {line}" if first == line else f"(lines {first} and {line})"
                    raise _YamlRefused(f"the key {key!r} appears twice in one mapping {lines}; "
                                       "which one counts would be a guess", line)
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


class _YamlRefused(Exception):
    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.message, self.line = message, line


def _expansion(root: Node) -> tuple[int, int]:
    """(values, depth) of the document ``root`` once every alias is expanded; _YamlRefused past the bounds.

    Shared nodes (aliases) are measured once and counted at every use; the walk keeps its
    own stack, and a node met again while still being measured is a recursive alias.
    """
    size: dict[int, tuple[int, int]] = {}
    on_stack: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        ident = id(node)
        children: list[Node]
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        if done:
            values = 1 + sum(size[id(c)][0] for c in children)
            depth = 1 + max((size[id(c)][1] for c in children), default=0)
            on_stack.discard(ident)
            size[ident] = (values, depth)
            if values > MAX_YAML_NODES:
                raise _YamlRefused(f"its aliases expand to more than {MAX_YAML_NODES:,} values (an alias bomb?)",
                                   node.start_mark.line + 1)
            if depth > MAX_YAML_DEPTH:
                raise _YamlRefused(f"its aliases nest mappings and lists more than {MAX_YAML_DEPTH} deep",
                                   node.start_mark.line + 1)
            continue
        if ident in size:
            continue
        if ident in on_stack:
            raise _YamlRefused("an alias refers to the mapping or list that contains it", node.start_mark.line + 1)
        on_stack.add(ident)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in size)
    return size[id(root)]


def _compose_checked(text: str) -> tuple[_BoundedLoader, Node | None]:
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _expansion(node)
        return loader, node
    except BaseException:
        loader.dispose()
        raise


def load_yaml(text: str, source: str) -> Any:
    """One YAML document from ``text`` with the safe loader and the bounds above; InputError names ``source`` and the line.

    Also turned into InputError: YAML syntax errors (with their line), and values the
    constructor cannot build (an integer of more than 4,300 digits, a bad date).
    """
    try:
        loader, node = _compose_checked(text)
        try:
            return None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except _YamlRefused as exc:
        raise InputError(source, exc.message, exc.line) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = " ".join(str(p) for p in (exc.context, exc.problem) if p) or "not valid YAML"
        raise InputError(source, f"not valid YAML: {what}", None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:
        raise InputError(source, f"not valid YAML: {exc}") from None
    except (ValueError, OverflowError, RecursionError) as exc:
        # Raised by constructors (int("9" * 5000), a date out of range); the line is not known here.
        raise InputError(source, f"a value cannot be read ({type(exc).__name__}: {str(exc)[:200]})") from None


def read_yaml(path: str | os.PathLike[str], limit: int, what: str) -> Any:
    """A YAML file through every check above (size, kind, UTF-8, depth, aliases, duplicate keys)."""
    source = shown_path(path)
    return load_yaml(decode_text(read_bytes(path, limit, what), source, what), source)
