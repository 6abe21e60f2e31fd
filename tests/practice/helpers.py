"""What the practice tests share: a problem's answers as a student types them, with planted mistakes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from qkvquiz.families import Env
from qkvquiz.grade.checks import carried_inputs, rerun_on_own
from qkvquiz.key import encode
from qkvquiz.practice.problem import Problem
from qkvquiz.practice.progress import Progress
from qkvquiz.practice.server import PracticeApp, PracticeServer


def texts(value: Any) -> Any:
    """A key value as the boxes hold it: each entry a text ("-inf" for −∞), nested as the answer."""
    if isinstance(value, list):
        return [texts(v) for v in value]
    return str(value)


def right_answers(problem: Problem) -> dict[str, Any]:
    return {pid: texts(v) for pid, v in problem.key.answers[0].items()}


def part_of(problem: Problem, step: str) -> str:
    (item,) = problem.key.items
    return next(p.id for p in item.parts if p.step == step)


def mistake_value(problem: Problem, name: str) -> tuple[str, Any]:
    """(part id, the value the known mistake ``name`` gives) of the problem's one item: the mistake
    of that name in an asked step (a name may be a mistake of several steps)."""
    (item,) = problem.key.items
    asked = {p.step for p in item.parts}
    m = next(m for m in item.family.misconceptions
             if m.name == name and m.applies_to(item.params) and m.step in asked)
    return part_of(problem, m.step), np.asarray(m.fn(item.env, item.params, np))[0]


def carried_value(problem: Problem, step: str, own: dict[str, np.ndarray]) -> np.ndarray:
    """``step`` re-run on the student's own earlier values (``own``: step → value)."""
    (item,) = problem.key.items
    asked = [p.step for p in item.parts]
    steps, between = carried_inputs(item.family, step, asked)
    env = Env({k: v for k, v in item.env.items()})
    full = {s: env[s] for s in steps}
    full.update({s: np.asarray(v)[None] for s, v in own.items()})
    return np.asarray(rerun_on_own(item.family, step, env, full, between, item.params, np))[0]


def as_texts(value: np.ndarray) -> Any:
    return texts(encode(np.round(value, 6)))


@contextmanager
def serving(server: PracticeServer) -> Iterator[PracticeServer]:
    """``server`` (the practice server or one made of its pieces) answering on a thread."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def running(topics, *, lang: str = "en", progress_path=None, seed=None) -> Iterator[PracticeServer]:
    app = PracticeApp(topics, lang=lang, progress=Progress(progress_path), seed=seed)
    with serving(PracticeServer(app, 0)) as server:
        yield server


def request(server: PracticeServer, path: str, body: Any = None, *, method: str = "POST",
            headers: dict[str, str] | None = None, raw: bytes | None = None, with_headers: bool = False) -> Any:
    """(status, the reply's JSON or text), and its headers too ``with_headers``."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    sent = {"Content-Type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    kind = response.getheader("Content-Type", "")
    doc = json.loads(payload) if kind.startswith("application/json") else payload.decode()
    return (response.status, doc, dict(response.getheaders())) if with_headers else (response.status, doc)
