"""The practice page served on this computer only: the standard library's HTTP server on loopback.

Why the standard library: the page asks four small JSON questions of one local user; a web
framework would add a dependency (and its own parsing of requests) for nothing we need, while
``http.server`` is maintained with Python itself and lets us see every byte we accept.

What it accepts, and nothing else (anything else is a 4xx, with no detail from inside):

- ``GET /``: the page, built once at start (its CSP allows only its own scripts and this server);
- ``POST /api/problem`` ``{"topic": ID, "seed": SEED?}``, ``/api/check`` ``{"topic", "seed",
  "answers": {part: answer}}``, ``/api/worked`` ``{"topic", "seed"}``, ``/api/progress`` ``{}``:
  ``Content-Type: application/json``, at most :data:`MAX_REQUEST_BYTES`, nested at most
  :data:`MAX_REQUEST_NESTING` deep, no key twice in an object, only these fields, a topic of its
  own list and a plain seed; the answers then go through the grader's own door.
- A whole request (its line, headers and body) arrives within :data:`REQUEST_TIMEOUT_S`
  seconds of its first byte being awaited, or the connection is cut (408 where a body was late):
  a client that trickles a byte at a time holds a thread no longer than that.
- Any other method (PUT, TRACE, CONNECT, …) is 405, and every refusal, the standard library's
  own (a request line too long, a bad header) included, carries the same security headers.
- A request whose ``Host`` is not this loopback address and port (a page of another site that
  renamed itself to 127.0.0.1: DNS rebinding), or whose ``Origin`` is another site's, is refused.

It binds 127.0.0.1 only and reads no file a request names: topics are the ones it was started with.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..core.i18n import entered, using
from ..core.inputs import JsonRefused, json_nesting, strict_json
from .checking import check
from .pages import page_html, problem_html, worked_html
from .problem import new_problem
from .progress import Progress
from .topics import Topic, in_language, own_language

HOST = "127.0.0.1"
MAX_REQUEST_BYTES = 64 * 1024  # the largest answer a problem takes is a few kilobytes of text
MAX_REQUEST_NESTING = 8  # {"answers": {part: [[[…]]]}}: the deepest answer is a stack of matrices
REQUEST_TIMEOUT_S = 15  # for a whole request, not each read (see Handler.handle_one_request)
#: Connections waiting to be accepted: a page's parallel checks (and a test's 32) are queued, not
#: reset (the standard library's default is 5).
LISTEN_BACKLOG = 128
#: Each endpoint's fields: name → whether required.
ENDPOINTS: dict[str, dict[str, bool]] = {
    "/api/problem": {"topic": True, "seed": False},
    "/api/check": {"topic": True, "seed": True, "answers": True},
    "/api/worked": {"topic": True, "seed": True},
    "/api/progress": {},
}
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff", "Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY", "Cross-Origin-Resource-Policy": "same-origin",
}


class BadRequest(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PracticeApp:
    """What the server knows: its topics, language, the student's progress, the page."""

    def __init__(self, topics: Sequence[Topic], *, lang: str | None = None, progress: Progress,
                 seed: str | None = None) -> None:
        with entered(lang, own_language(topics)) as code:
            self.topics = {t.id: t for t in in_language(topics, code)}
            self.lang = code  # each request's thread enters it (threads start in no language)
            self.progress = progress
            # --seed: the page asks for it as the first problem of each topic (a reload draws it again).
            self.page = page_html(list(self.topics.values()), mode="server", seed=seed or "").encode("utf-8")

    def topic(self, doc: Mapping[str, Any]) -> Topic:
        topic = self.topics.get(doc["topic"]) if isinstance(doc.get("topic"), str) else None
        if topic is None:
            raise BadRequest(HTTPStatus.BAD_REQUEST, "unknown topic")
        return topic

    def seed(self, doc: Mapping[str, Any]) -> str | None:
        seed = doc.get("seed")
        if seed is None:
            return None
        if not isinstance(seed, str):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "seed must be a text")
        return seed

    def problem(self, doc: Mapping[str, Any]):
        topic = self.topic(doc)
        try:
            return new_problem(topic, self.seed(doc))
        except ValueError as exc:
            raise BadRequest(HTTPStatus.BAD_REQUEST, str(exc)) from None

    def handle(self, path: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        with using(self.lang):
            if path == "/api/progress":
                return {"progress": self.progress.rows()}
            problem = self.problem(doc)
            if path == "/api/problem":
                return {"topic": problem.topic.id, "seed": problem.seed, "code": problem.code,
                        "html": problem_html(problem)}
            if path == "/api/worked":
                return {"html": worked_html(problem)}
            answers = doc["answers"]
            if not isinstance(answers, dict):
                raise BadRequest(HTTPStatus.BAD_REQUEST, "answers must be an object")
            known = {p.id for _item, p in problem.key.parts}
            if set(answers) - known:
                raise BadRequest(HTTPStatus.BAD_REQUEST, "answers name parts this problem does not have")
            try:
                result = check(problem, answers)
            except ValueError as exc:
                raise BadRequest(HTTPStatus.BAD_REQUEST, str(exc)) from None
            self.progress.record(problem.topic.family, result.right, len(result.parts),
                                 [m for p in result.parts for m in p.mistakes], title=problem.topic.title())
            return {**result.to_json(), "progress": self.progress.rows()}


def validated(path: str, doc: Any, endpoints: Mapping[str, Mapping[str, bool]] = ENDPOINTS) -> dict[str, Any]:
    """``doc`` if it is an object with exactly the fields of ``path``'s request, else BadRequest."""
    fields = endpoints[path]
    if not isinstance(doc, dict):
        raise BadRequest(HTTPStatus.BAD_REQUEST, "the request is not a JSON object")
    unknown = sorted(set(doc) - set(fields))
    if unknown:
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"unknown field {unknown[0][:40]!r}")
    missing = [name for name, required in fields.items() if required and name not in doc]
    if missing:
        raise BadRequest(HTTPStatus.BAD_REQUEST, f"missing field {missing[0]!r}")
    return doc


class Handler(BaseHTTPRequestHandler):
    server: PracticeServer
    server_version = "qkvquiz-practice"
    #: How the terminal names this server in a line about an unexpected failure, and what the page
    #: is told then (a server built from these pieces says its own).
    name = "qkvquiz practice"
    failure = "the check failed; see the terminal"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    # A client that opens a connection and sends nothing (or half a body) is dropped, not waited for.
    timeout = REQUEST_TIMEOUT_S
    #: The JSON requests it answers (another local page, `scan review`, serves its own through this class).
    endpoints: Mapping[str, Mapping[str, bool]] = ENDPOINTS

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as two writes: without TCP_NODELAY the second waits for the
        # client's delayed ACK (40 ms on Linux), most of a check's round trip.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self) -> None:
        # The time limit is for the whole request: the socket's timeout alone applies to each
        # read, and a byte every few seconds would hold the thread for ever. When the limit
        # passes, reading is shut down (the blocked read ends; the reply can still be sent).
        self._late = False
        timer = threading.Timer(REQUEST_TIMEOUT_S, self._cut_off)
        timer.daemon = True
        timer.start()
        try:
            super().handle_one_request()
        finally:
            timer.cancel()

    def _cut_off(self) -> None:
        self._late = True
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # already closed

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (an unknown method, a line too long, a bad header)
        as ours: JSON with the security headers; a method we do not serve is 405, not 501."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            code, message = HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed"
        status = HTTPStatus(code)
        self.close_connection = True
        self._send(status, json.dumps({"error": message or status.phrase}).encode("utf-8"),
                   "application/json; charset=utf-8",
                   {"Allow": "GET, HEAD, POST"} if status == HTTPStatus.METHOD_NOT_ALLOWED else {})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        pass  # quiet: the terminal shows the URL and errors, not every request

    # ------------------------------------------------------------------ replies

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, extra: Mapping[str, str] = {}) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in {**SECURITY_HEADERS, **extra}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: HTTPStatus, doc: Any) -> None:
        self._send(status, json.dumps(doc, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        self.close_connection = True
        self._json(status, {"error": message})

    def _own_host(self) -> bool:
        host = self.headers.get("Host", "")
        port = self.server.server_address[1]
        return host in (f"{HOST}:{port}", f"localhost:{port}")

    # ------------------------------------------------------------------ requests

    def do_GET(self) -> None:
        if not self._own_host():
            return self._refuse(HTTPStatus.MISDIRECTED_REQUEST, "this server answers only at its own address")
        if self.path.split("?", 1)[0] not in ("/", "/index.html"):
            return self._refuse(HTTPStatus.NOT_FOUND, "not found")
        self._send(HTTPStatus.OK, self.server.app.page, "text/html; charset=utf-8",
                   {"Content-Security-Policy": self.server.csp})

    do_HEAD = do_GET

    def do_POST(self) -> None:
        try:
            doc = self._request()
            answer = self.server.app.handle(self.path, doc)
        except BadRequest as exc:
            return self._refuse(exc.status, exc.message)
        except Exception as exc:  # noqa: BLE001  (one line in the terminal; the page gets no detail)
            print(f"{self.name}: {self.path}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return self._refuse(HTTPStatus.INTERNAL_SERVER_ERROR, self.failure)
        self._json(HTTPStatus.OK, answer)

    def _request(self) -> dict[str, Any]:
        if not self._own_host():
            raise BadRequest(HTTPStatus.MISDIRECTED_REQUEST, "this server answers only at its own address")
        origin = self.headers.get("Origin")
        port = self.server.server_address[1]
        if origin is not None and origin not in (f"http://{HOST}:{port}", f"http://localhost:{port}"):
            raise BadRequest(HTTPStatus.FORBIDDEN, "requests from other sites are refused")
        if self.path not in self.endpoints:
            raise BadRequest(HTTPStatus.NOT_FOUND, "not found")
        kind = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
        if kind != "application/json":
            raise BadRequest(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
        if self.headers.get("Transfer-Encoding"):
            raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length, not chunks")
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length is missing") from None
        if length < 0 or length > MAX_REQUEST_BYTES:
            raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a request is at most {MAX_REQUEST_BYTES} bytes")
        try:
            raw = self.rfile.read(length)
        except (TimeoutError, OSError):
            raw = b""
            self._late = True
        if len(raw) < length:
            if self._late:
                raise BadRequest(HTTPStatus.REQUEST_TIMEOUT,
                                 f"the request did not arrive within {REQUEST_TIMEOUT_S} seconds")
            raise BadRequest(HTTPStatus.BAD_REQUEST, "the request's body is shorter than its Content-Length")
        if json_nesting(raw) > MAX_REQUEST_NESTING:  # refused before json.loads recurses into it
            raise BadRequest(HTTPStatus.BAD_REQUEST, f"the request nests deeper than {MAX_REQUEST_NESTING} levels")
        try:
            doc = strict_json(raw.decode("utf-8"))
        except JsonRefused as exc:  # a key twice: which answer counts would be a guess
            raise BadRequest(HTTPStatus.BAD_REQUEST, str(exc) if exc.key is not None else "the request is not JSON") \
                from None
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise BadRequest(HTTPStatus.BAD_REQUEST, "the request is not JSON") from None
        return validated(self.path, doc, self.endpoints)

    def _not_allowed(self) -> None:
        self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "method not allowed")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed


class PracticeServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    handler: type[Handler] = Handler

    def __init__(self, app: Any, port: int = 0) -> None:
        super().__init__((HOST, port), self.handler)
        self.app = app
        self.csp = _page_csp(app.page)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A browser that closed its connection early (a reload) is no error worth a traceback.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (ConnectionError, TimeoutError)):
            print(f"{self.handler.name}: {type(exc).__name__}: {exc}", file=sys.stderr)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"


def _page_csp(page: bytes) -> str:
    """The CSP the page states in its meta element, sent as a header as well."""
    text = page.decode("utf-8")
    start = text.index('http-equiv="Content-Security-Policy" content="') + len('http-equiv="Content-Security-Policy" content="')
    return text[start:text.index('"', start)] + "; frame-ancestors 'none'"


def serve(topics: Sequence[Topic], *, lang: str | None = None, port: int = 0, seed: str | None = None,
          progress: Progress | None = None, ready: Callable[[PracticeServer], None] | None = None) -> None:
    """Serve the practice page until interrupted; ``ready`` is called with the server once it listens.
    In ``lang`` (default: the language chosen around the call, else the first topic's)."""
    app = PracticeApp(topics, lang=lang, progress=progress or Progress(), seed=seed)
    with PracticeServer(app, port) as server:
        if ready is not None:
            ready(server)
        server.serve_forever()
