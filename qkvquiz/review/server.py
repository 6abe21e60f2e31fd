"""The review page, served on this computer only by the practice server's own pieces.

The same rules as ``qkvquiz practice`` (:mod:`qkvquiz.practice.server`): loopback only, its own
``Host`` and ``Origin`` only, JSON requests of a bounded size and depth with exactly their fields,
a whole request within its time, the same security headers on every reply. What it answers:

- ``GET /``: the page (its CSP allows its own two scripts, pictures and requests of this server);
- ``GET /picture/N`` and ``GET /view/N``: doubtful entry N's cells (PNG) and its whole page
  (JPEG), read from the scan folder's ``review/`` (N is a number of the scan's own list; a request
  names no file);
- ``POST /api/items`` ``{}``: every doubtful entry, with its decision so far;
- ``POST /api/decide`` ``{"id": N, "value": TEXT or null}``: a decision, read by the grader's own
  entry parser (``null`` or an empty text: the entry is blank), appended to the journal and made
  durable before the answer;
- ``POST /api/done`` ``{}``: grading again on the confirmed readings; the server then stops (409
  with the reason where it cannot: the key changed, the folder cannot be written).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

import numpy as np

from ..core.i18n import _, entered, using
from ..core.inputs import InputError, read_bytes
from ..core.places import where
from ..grade.parse import AnswerFormatError, parse_entry
from ..grade.scanned import CHANGES_SCORE, ReviewItem, ScanGrading, ScanInputError, load_scan, regrade
from ..practice.server import BadRequest, Handler, PracticeServer
from ..scan.journal import MAX_VALUE, Decision, append_decision, now, read_decisions
from .page import REASONS, review_page

ENDPOINTS: dict[str, dict[str, bool]] = {
    "/api/items": {},
    "/api/decide": {"id": True, "value": True},
    "/api/done": {},
}
MAX_PICTURE_BYTES = 20_000_000
_PICTURE = re.compile(r"/(picture|view)/([1-9][0-9]{0,6})")


class ReviewApp:
    """What the server knows: the scan folder, its doubtful entries, the decisions, the page."""

    def __init__(self, folder: str | Path, *, key: str | Path | None = None, lang: str | None = None,
                 feedback: bool = True, xp: Any = np) -> None:
        self.folder = Path(folder)
        self.key_path = key
        loaded, state, readings, items = load_scan(self.folder, key)
        self.feedback = feedback
        self.xp = xp
        self.items = {item.id: item for item in items}
        self.shapes = {part.id: len(item.shapes[part.id]) for item, part in loaded.parts}
        self.title = state["title"]
        self.lock = threading.Lock()  # one decision at a time: journal lines never interleave
        self.graded: ScanGrading | None = None
        self.stop: Callable[[], None] = lambda: None
        with entered(lang, loaded.lang) as code:  # the page's language, kept for every request
            self.lang = code
            self.page = review_page(self.title).encode("utf-8")

    def decisions(self) -> dict[tuple[str, str, tuple[int, ...]], Decision]:
        return read_decisions(self.folder)[0]

    def item_json(self, item: ReviewItem, decision: Decision | None) -> dict[str, Any]:
        valid = decision is not None and decision.read == item.read
        return {
            "id": item.id, "student": item.student, "part": item.part,
            "place": where(item.index, self.shapes.get(item.part, len(item.index))),
            "read": item.read, "reasons": [_(REASONS.get(r, r)) for r in item.reasons],
            "alternatives": item.alternatives if CHANGES_SCORE in item.reasons else [],
            "page": item.page, "view": bool(item.view), "box": item.box,
            "decided": valid, "value": decision.value if valid else None,
        }

    def picture(self, kind: str, number: int) -> bytes:
        item = self.items.get(number)
        rel = None if item is None else (item.picture if kind == "picture" else item.view)
        if not rel:
            raise BadRequest(HTTPStatus.NOT_FOUND, "not found")
        try:
            return read_bytes(self.folder / rel, MAX_PICTURE_BYTES, "picture", follow=False)  # never through a link
        except InputError:
            raise BadRequest(HTTPStatus.NOT_FOUND, "the picture is missing from the scan folder") from None

    def handle(self, path: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        with using(self.lang):
            if path == "/api/items":
                decisions = self.decisions()
                return {"title": self.title, "items": [self.item_json(i, decisions.get(i.entry)) for i in self.items.values()]}
            if path == "/api/decide":
                return self.decide(doc)
            try:
                with self.lock:
                    self.graded = regrade(self.folder, key=self.key_path, feedback=self.feedback, xp=self.xp)
            except (ScanInputError, OSError) as exc:  # the key changed, the folder cannot be written: said
                raise BadRequest(HTTPStatus.CONFLICT, str(exc)) from None
            summary = self.graded.summary()
            self.stop()
            return {"graded": len(self.graded.report.results), "decided": summary["decided"], "open": summary["open"]}

    def decide(self, doc: Mapping[str, Any]) -> dict[str, Any]:
        number, value = doc["id"], doc["value"]
        item = self.items.get(number) if isinstance(number, int) and not isinstance(number, bool) else None
        if item is None:
            raise BadRequest(HTTPStatus.BAD_REQUEST, "no doubtful entry has this id")
        if value is not None and not isinstance(value, str):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "value must be a text or null")
        text = None if value is None or not value.strip() else value.strip()
        if text is not None:
            if len(text) > MAX_VALUE:
                raise BadRequest(HTTPStatus.BAD_REQUEST, f"a value has at most {MAX_VALUE} characters")
            try:
                parse_entry(text)  # the grader's own reading: what it cannot read is not kept
            except AnswerFormatError as exc:
                raise BadRequest(HTTPStatus.BAD_REQUEST, str(exc)) from None
        decision = Decision(item.student, item.part, item.index, item.read, text, now())
        with self.lock:
            append_decision(self.folder, decision)
        return self.item_json(item, decision)


class ReviewHandler(Handler):
    server: ReviewServer
    server_version = "qkvquiz-review"
    name = "qkvquiz scan review"
    failure = "the review failed; see the terminal"
    endpoints = ENDPOINTS

    def do_GET(self) -> None:
        if not self._own_host():
            return self._refuse(HTTPStatus.MISDIRECTED_REQUEST, "this server answers only at its own address")
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            return self._send(HTTPStatus.OK, self.server.app.page, "text/html; charset=utf-8",
                              {"Content-Security-Policy": self.server.csp})
        found = _PICTURE.fullmatch(path)
        if found is None:
            return self._refuse(HTTPStatus.NOT_FOUND, "not found")
        try:
            body = self.server.app.picture(found.group(1), int(found.group(2)))
        except BadRequest as exc:
            return self._refuse(exc.status, exc.message)
        self._send(HTTPStatus.OK, body, "image/png" if found.group(1) == "picture" else "image/jpeg")

    do_HEAD = do_GET


class ReviewServer(PracticeServer):
    app: ReviewApp
    handler = ReviewHandler


def serve(app: ReviewApp, *, port: int = 0, ready: Callable[[ReviewServer], None] | None = None) -> None:
    """Serve the review page until the review is done or interrupted; ``ready`` is called with the
    server once it listens."""
    with ReviewServer(app, port) as server:
        # Done answers its request first, then the server stops (shutdown waits for the loop).
        app.stop = lambda: threading.Thread(target=server.shutdown, daemon=True).start()
        if ready is not None:
            ready(server)
        server.serve_forever()


__all__ = ["ENDPOINTS", "ReviewApp", "ReviewServer", "serve"]
