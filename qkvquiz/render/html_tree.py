"""Our documents' HTML read into the tree WeasyPrint's own parser would build, five times sooner.

WeasyPrint reads HTML with tinyhtml5, a complete HTML5 parser written in Python: 8% of the time
a key or worksheet takes to become a PDF (19 ms of a key's 240; 4 ms read here). The pages qkvquiz
writes use a small, well-formed part of HTML (every element closed, nested as written, the text
escaped), and for that part HTML5's tree construction comes down to nesting the elements as they
are written, with four rules of its own kept here: a ``<tr>`` written straight in a ``<table>``
gets a ``<tbody>``, white space before ``<head>`` is dropped, white space after ``</body>`` joins
the body, and the newline right after ``<pre>`` goes.

:func:`simple_html_tree` reads a document with the standard library's tokenizer (in C where it
counts: regular expressions) and builds that tree, or returns None as soon as the document leaves
the part it knows (an element it does not list, a tag closed out of order, a comment, a character
reference it does not expect, text where HTML5 would move it elsewhere): such a document is read by
tinyhtml5 as before. So a user's template never changes what a page looks like, only how soon.
tests/test_html_tree.py holds the two parsers to the same tree over every bundled document and
over random tag soup.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from typing import Any

#: Elements with no end tag.
_VOID = frozenset({"meta", "br", "hr", "img", "wbr", "col"})
#: Elements of the body whose HTML5 start tag does nothing but insert them (besides closing an
#: open ``<p>`` or ``<li>``, which is refused below, and a heading closing a heading).
_BODY = frozenset({
    "div", "p", "span", "section", "header", "footer", "main", "article", "aside", "nav", "blockquote",
    "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li", "pre", "figure", "figcaption",
    "i", "b", "em", "strong", "code", "sub", "sup", "small", "s", "u", "kbd", "var", "samp", "mark", "abbr",
    "cite", "q", "dfn", "del", "ins", "bdi", "label", "br", "hr", "img", "wbr",
    "table", "tbody", "thead", "tfoot", "tr", "td", "th", "caption", "colgroup", "col",
})
_HEAD = frozenset({"meta", "title", "style"})
#: Start tags that HTML5 lets close an open ``<p>`` (the "closes a p element in button scope" list).
_CLOSES_P = frozenset({
    "div", "p", "section", "header", "footer", "main", "article", "aside", "nav", "blockquote",
    "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "pre", "figure", "figcaption", "table", "hr", "li",
})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
#: Where each table part may stand (HTML5 moves anything else out of the table, or adds parts).
_TABLE_PARENT = {
    "tbody": {"table"}, "thead": {"table"}, "tfoot": {"table"}, "caption": {"table"}, "colgroup": {"table"},
    "col": {"colgroup"}, "tr": {"tbody", "thead", "tfoot"}, "td": {"tr"}, "th": {"tr"},
}
_TABLE_INSIDES = frozenset({"table", "tbody", "thead", "tfoot", "tr", "colgroup"})
#: Character references other than those that HTML escaping writes (which both parsers read alike).
_OTHER_REFERENCE = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|nbsp|#39|#x27);)")
#: Every "<" that starts a tag or an end tag, and those written plainly (quoted attribute values):
#: where the counts differ, a tag is written in a way the two tokenizers might read apart.
_TAG_START = re.compile(r"</?[a-zA-Z]")
_PLAIN_TAG = re.compile(
    r"""<[a-zA-Z][a-zA-Z0-9]*(?:[ \t\n\f]+[a-zA-Z_:][-a-zA-Z0-9_:.]*(?:[ \t\n\f]*=[ \t\n\f]*(?:"[^"<]*"|'[^'<]*'))?)*"""
    r"[ \t\n\f]*/?>|</[a-zA-Z][a-zA-Z0-9]*[ \t\n\f]*>"
)
_DOCTYPE = "<!DOCTYPE html>"


class _Unlike(Exception):
    """The document leaves the part of HTML read here."""


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root: ET.Element | None = None
        self.head: ET.Element | None = None
        self.body: ET.Element | None = None
        self.stack: list[ET.Element] = []
        # How many of each element are open: the checks below ask without walking the stack
        # (a deeply nested page would make that quadratic).
        self.open: Counter[str] = Counter()
        self.ended = False  # past </body>: only white space (and </html>) may follow
        self.html_ended = False

    # -- tags

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attrib: dict[str, str] = {}
        for name, value in attrs:
            attrib.setdefault(name, "" if value is None else value)  # HTML5 keeps the first
        stack = self.stack
        if self.ended:
            raise _Unlike(tag)
        if self.root is None:
            if tag != "html":
                raise _Unlike(tag)
            self.root = ET.Element(tag, attrib)
            stack.append(self.root)
            return
        current = stack[-1]
        if current is self.root:
            if tag == "head" and self.head is None:
                self.head = self._open(tag, attrib)
            elif tag == "body" and self.head is not None and self.body is None:
                self.body = self._open(tag, attrib)
            else:
                raise _Unlike(tag)
            return
        if current is self.head:
            if tag not in _HEAD:
                raise _Unlike(tag)
            self._open(tag, attrib)
            return
        if tag not in _BODY or self.body is None or current.tag in ("title", "style"):
            raise _Unlike(tag)
        if tag in _CLOSES_P and self.open["p"]:
            raise _Unlike(tag)
        if tag in _HEADINGS and current.tag in _HEADINGS:
            raise _Unlike(tag)
        if tag == "li" and current.tag not in ("ul", "ol"):
            raise _Unlike(tag)
        if tag == "tr" and current.tag == "table":
            current = self._open("tbody", {})  # as HTML5 does
        allowed = _TABLE_PARENT.get(tag)
        if (allowed is not None and current.tag not in allowed) or (allowed is None and current.tag in _TABLE_INSIDES):
            raise _Unlike(tag)
        self._open(tag, attrib)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _VOID:
            raise _Unlike(tag)  # HTML5 reads <div/> as <div>
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        stack = self.stack
        if tag == "html" and self.ended and not self.html_ended:
            self.html_ended = True
            return
        if self.ended or tag in _VOID:
            raise _Unlike(tag)
        if tag == "body" and stack[-1] is self.body:
            # HTML5 leaves the body open: what follows (white space only, here) goes into it.
            self.ended = True
            return
        if tag == "table" and stack[-1].tag in ("tbody", "thead", "tfoot") and stack[-2].tag == "table":
            self._close()  # HTML5 closes a table's open part with the table (the <tbody> a bare <tr> made)
        if stack[-1].tag != tag or stack[-1] is self.root:
            raise _Unlike(tag)
        self._close()

    def _open(self, tag: str, attrib: dict[str, str]) -> ET.Element:
        element = ET.SubElement(self.stack[-1], tag, attrib)
        if tag not in _VOID:
            self.stack.append(element)
            self.open[tag] += 1
        return element

    def _close(self) -> None:
        self.open[self.stack.pop().tag] -= 1

    # -- text

    def handle_data(self, data: str) -> None:
        if self.root is None or (self.ended or self.stack[-1] is self.root or self.stack[-1] is self.head):
            if data.strip(" \t\n\f"):
                raise _Unlike("text outside the body")
            if self.root is None or (self.head is None and self.body is None):
                return  # before <head>: HTML5 drops white space
        parent = self.body if self.ended else self.stack[-1]
        if parent is None:  # pragma: no cover - the start tag checks keep this from happening
            raise _Unlike("text")
        if parent.tag in _TABLE_INSIDES and data.strip(" \t\n\f"):
            raise _Unlike("text in a table")  # HTML5 moves it before the table
        if parent.tag == "pre" and len(parent) == 0 and parent.text is None and data.startswith("\n"):
            data = data[1:]  # HTML5 drops the newline right after <pre>
            if not data:
                return
        if len(parent):
            last = parent[-1]
            last.tail = data if last.tail is None else last.tail + data
        else:
            parent.text = data if parent.text is None else parent.text + data

    # -- the rest: read by tinyhtml5

    def handle_comment(self, data: str) -> None:
        raise _Unlike("comment")

    def handle_decl(self, decl: str) -> None:
        raise _Unlike("declaration")

    def handle_pi(self, data: str) -> None:
        raise _Unlike("processing instruction")

    def unknown_decl(self, data: str) -> None:
        raise _Unlike("declaration")


def simple_html_tree(source: str) -> ET.Element | None:
    """The ``<html>`` element of ``source`` as tinyhtml5 builds it (with ``namespace_html_elements=False``),
    or None where ``source`` is not in the part of HTML read here (see the module's text)."""
    if not source.startswith(_DOCTYPE) or "\r" in source or "\0" in source or "<!--" in source:
        return None
    body = source[len(_DOCTYPE):]
    if _OTHER_REFERENCE.search(body):
        return None
    markup = _without_styles(body)
    if markup.count("<") != len(_TAG_START.findall(markup)) or len(_TAG_START.findall(markup)) != len(
            _PLAIN_TAG.findall(markup)):
        return None  # a "<" that opens no tag, or a tag written in a way not read here
    builder = _TreeBuilder()
    try:
        builder.feed(body)
        builder.close()
    except (_Unlike, AssertionError, ValueError):
        return None
    stack = builder.stack
    # Every element closed (<html> and <body> stay open, as in HTML5): nothing that HTML5 would close
    # on its own at the end.
    if builder.root is None or builder.body is None or not builder.ended or stack != [builder.root, builder.body]:
        return None
    return builder.root


_STYLE = re.compile(r"<style\b[^>]*>.*?</style\s*>", re.DOTALL | re.IGNORECASE)


def _without_styles(html: str) -> str:
    # A stylesheet's text is not HTML ("a > b", "<" in a string): the tag checks skip it.
    return _STYLE.sub("", html) if "<style" in html else html


def tree_of(element: Any) -> list[tuple[int, str, dict[str, str], str | None, str | None]]:
    """An element and all under it as a flat list (depth, tag, attributes, text, tail): two trees
    are the same where their lists are equal."""
    out = []

    def walk(node: Any, depth: int) -> None:
        out.append((depth, node.tag, dict(node.attrib), node.text, node.tail))
        for child in node:
            walk(child, depth + 1)

    walk(element, 0)
    return out
