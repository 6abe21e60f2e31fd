"""The practice server: its four JSON requests answered through the grader, and everything else
refused with a 4xx (size, content type, fields, Host, Origin, paths, methods); loopback only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qkvquiz import practice
from qkvquiz.practice import checking
from qkvquiz.practice.server import MAX_REQUEST_BYTES, SECURITY_HEADERS

from .helpers import as_texts, carried_value, mistake_value, part_of, request, right_answers, running


@pytest.fixture(scope="module")
def topics():
    return practice.topics_for(["attention.output", "attention.masked"])


@pytest.fixture(scope="module")
def server(topics, tmp_path_factory):
    with running(topics, progress_path=tmp_path_factory.mktemp("progress") / "practice.json") as s:
        yield s


def new(server, topic="attention.output", seed=None):
    status, doc = request(server, "/api/problem", {"topic": topic, **({"seed": seed} if seed else {})})
    assert status == 200, doc
    return doc


def test_it_listens_on_loopback_only_and_serves_its_page_with_a_csp(server):
    assert server.server_address[0] == "127.0.0.1"
    status, page = request(server, "/", method="GET")
    assert status == 200 and "<select id=\"topic\">" in page
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1])
    conn.request("GET", "/")
    response = conn.getresponse()
    csp = response.getheader("Content-Security-Policy")
    conn.close()
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "http://" not in page.split("<script>")[0] and "https://" not in page


def test_a_problem_has_a_fresh_seed_each_time_and_a_seed_gives_it_again(server):
    a, b = new(server), new(server)
    assert a["seed"] != b["seed"] and 'data-part="q1.scores"' in a["html"]
    assert new(server, seed=a["seed"])["html"] == a["html"]


def test_check_goes_through_the_grader(server, topics, monkeypatch):
    doc = new(server, seed="srv-1")
    problem = practice.new_problem(topics[0], "srv-1")
    scores, unscaled = mistake_value(problem, "unscaled")
    answers = right_answers(problem)
    answers[scores] = as_texts(unscaled)
    answers[part_of(problem, "weights")] = as_texts(carried_value(problem, "weights", {"scores": unscaled}))
    answers[part_of(problem, "output")][0][0] = "1/0"
    calls = []
    real = checking.grade
    monkeypatch.setattr(checking, "grade", lambda *a, **k: calls.append(1) or real(*a, **k))
    status, result = request(server, "/api/check", {"topic": doc["topic"], "seed": doc["seed"], "answers": answers})
    assert status == 200 and calls == [1]
    by_part = {p["part"]: p for p in result["parts"]}
    assert by_part[scores]["verdict"] in ("partial", "wrong") and by_part[scores]["mistakes"] == ["unscaled"]
    assert by_part[scores]["diagnosis"] and by_part["q1.weights"]["verdict"] == "carried"
    assert by_part["q1.output"]["verdict"] == "partial" and "divides by zero" in by_part["q1.output"]["message"]
    assert result == {**practice.check(problem, answers).to_json(), "progress": result["progress"]}
    row = next(r for r in result["progress"] if r["family"] == "attention.output")
    assert row["checks"] >= 1 and any(m["name"] == "unscaled" for m in row["mistakes"])


def test_worked_steps_and_progress(server):
    doc = new(server, seed="srv-2")
    status, worked = request(server, "/api/worked", {"topic": doc["topic"], "seed": doc["seed"]})
    assert status == 200 and "Solution" in worked["html"]
    status, progress = request(server, "/api/progress", {})
    assert status == 200 and isinstance(progress["progress"], list)


@pytest.mark.parametrize("case, expected", [
    ({"path": "/api/check", "raw": b"x" * (MAX_REQUEST_BYTES + 1)}, 413),
    ({"path": "/api/problem", "body": {"topic": "attention.output"}, "headers": {"Content-Type": "text/plain"}}, 415),
    ({"path": "/api/problem", "body": {"topic": "attention.output"},
      "headers": {"Content-Type": "application/x-www-form-urlencoded"}}, 415),
    ({"path": "/api/problem", "body": {"topic": "attention.output", "file": "/etc/passwd"}}, 400),
    ({"path": "/api/problem", "body": {"topic": "../../etc/passwd"}}, 400),
    ({"path": "/api/problem", "body": {"topic": "attention.output", "seed": "a b/../c"}}, 400),
    ({"path": "/api/problem", "body": ["topic"]}, 400),
    ({"path": "/api/problem", "raw": b"{\"topic\": NaN}"}, 400),
    ({"path": "/api/problem", "raw": b"\xff\xfe"}, 400),
    ({"path": "/api/check", "body": {"topic": "attention.output", "seed": "s"}}, 400),
    ({"path": "/api/check", "body": {"topic": "attention.output", "seed": "s", "answers": {"q9.x": "1"}}}, 400),
    ({"path": "/api/check", "body": {"topic": "attention.output", "seed": "s", "answers": {"q1.scores": [[[[[[[[[[[[[[[[[["1"]]]]]]]]]]]]]]]]]]}}}, 400),
    ({"path": "/api/problem", "body": {"topic": "attention.output"}, "headers": {"Host": "evil.example:80"}}, 421),
    ({"path": "/api/problem", "body": {"topic": "attention.output"}, "headers": {"Origin": "http://evil.example"}}, 403),
    ({"path": "/api/secret", "body": {}}, 404),
    ({"path": "/etc/passwd", "method": "GET"}, 404),
    ({"path": "/../qkvquiz/practice/server.py", "method": "GET"}, 404),
    ({"path": "/", "method": "GET", "headers": {"Host": "attacker.test"}}, 421),
    ({"path": "/api/check", "raw": b'{"topic": "attention.output", "seed": "s", "answers": {"q1.scores": '
      + b"[" * 500 + b"]" * 500 + b"}}"}, 400),
    ({"path": "/api/problem", "raw": b"[" * 5000 + b"]" * 5000}, 400),
    ({"path": "/api/problem", "raw": b'{"topic": "attention.output", "topic": "attention.masked"}'}, 400),
    ({"path": "/api/check", "raw": b'{"topic": "attention.output", "seed": "s", "answers": {"q1.scores": "1", '
      b'"q1.scores": "2"}}'}, 400),
    ({"path": "/api/problem", "method": "PUT", "body": {}}, 405),
    ({"path": "/api/problem", "method": "TRACE"}, 405),
    ({"path": "/api/problem", "method": "CONNECT"}, 405),
    ({"path": "/", "method": "PROPFIND"}, 405),
    ({"path": "/api/problem", "method": "OPTIONS"}, 405),
])
def test_anything_but_its_own_small_requests_is_refused(server, case, expected, capfd):
    status, doc, headers = request(server, case["path"], case.get("body"), method=case.get("method", "POST"),
                                   headers=case.get("headers"), raw=case.get("raw"), with_headers=True)
    assert status == expected, doc
    assert isinstance(doc, dict) and set(doc) == {"error"} and "Traceback" not in doc["error"]
    # Every refusal, the standard library's own included, carries the security headers.
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, (name, headers)
    if expected == 405:
        assert headers.get("Allow") == "GET, HEAD, POST"
    assert "Error" not in capfd.readouterr().err  # nothing went wrong inside (a RecursionError did)


def test_the_request_line_and_headers_refused_by_the_standard_library_carry_the_headers_too(server):
    import socket

    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as conn:
        conn.sendall(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n")
        reply = conn.recv(65536).decode("latin-1")
    assert reply.startswith("HTTP/1.1 414") and "X-Content-Type-Options: nosniff" in reply


def test_progress_is_kept_in_the_users_data_folder(topics):
    folder = Path(os.environ["XDG_DATA_HOME"]) / "qkvquiz"
    assert practice.data_dir() == folder
    with running(topics) as server:
        doc = new(server, seed="srv-3")
        request(server, "/api/check", {"topic": doc["topic"], "seed": doc["seed"], "answers": {}})
    saved = json.loads((folder / "practice.json").read_text(encoding="utf-8"))
    assert saved["families"]["attention.output"]["checks"] >= 1


def test_an_unreadable_progress_file_is_set_aside(tmp_path):
    path = tmp_path / "practice.json"
    path.write_text("{not json", encoding="utf-8")
    progress = practice.Progress(path)
    assert progress.rows() == [] and (tmp_path / "practice.json.unreadable").exists()
    progress.record("attention.output", 2, 3, ["unscaled"])
    assert practice.Progress(path).rows()[0]["right"] == 2


def test_a_body_that_never_arrives_is_given_up(topics, monkeypatch):
    import socket

    from qkvquiz.practice import server as server_module

    monkeypatch.setattr(server_module.Handler, "timeout", 0.5)
    monkeypatch.setattr(server_module, "REQUEST_TIMEOUT_S", 0.5)
    with running(topics) as s:
        with socket.create_connection(("127.0.0.1", s.server_address[1]), timeout=5) as conn:
            conn.sendall(f"POST /api/progress HTTP/1.1\r\nHost: 127.0.0.1:{s.server_address[1]}\r\n"
                         "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{".encode())
            reply = conn.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 408")


def test_a_body_trickled_a_byte_at_a_time_is_cut_off_by_the_limit_on_the_whole_request(topics, monkeypatch):
    import socket

    from qkvquiz.practice import server as server_module

    # Each byte comes well within the per-read timeout; the whole request does not come within its limit.
    monkeypatch.setattr(server_module, "REQUEST_TIMEOUT_S", 1.0)
    with running(topics) as s:
        with socket.create_connection(("127.0.0.1", s.server_address[1]), timeout=10) as conn:
            conn.sendall(f"POST /api/progress HTTP/1.1\r\nHost: 127.0.0.1:{s.server_address[1]}\r\n"
                         "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n".encode())
            conn.settimeout(0.2)
            reply = b""
            for _ in range(50):  # 10 s of trickling at most
                try:
                    conn.sendall(b" ")
                    reply += conn.recv(4096)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if reply:
                    break
    assert reply.decode().startswith("HTTP/1.1 408"), reply


def test_thirty_two_checks_at_once_are_all_answered_none_reset(server):
    import threading

    doc = new(server, seed="par-1")
    body = {"topic": doc["topic"], "seed": doc["seed"], "answers": {}}
    together = threading.Barrier(32)  # 32 connections arrive at the same moment, round after round
    outcomes: list[object] = []

    def ask() -> None:
        for _round in range(4):
            together.wait()
            try:
                outcomes.append(request(server, "/api/check", body)[0])
            except OSError as exc:  # with the standard library's backlog of 5: connection reset
                outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=ask) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes == [200] * 128


@pytest.mark.parametrize("kind", ["fifo", "device", "deep"])
def test_a_progress_file_that_is_no_regular_file_is_set_aside_without_reading_it(tmp_path, kind):
    path = tmp_path / "practice.json"
    if kind == "fifo":
        os.mkfifo(path)  # opened for reading, a FIFO with no writer would wait for ever
    elif kind == "device":
        path.symlink_to("/dev/zero")  # read, /dev/zero never ends
    else:
        path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    progress = practice.Progress(path)
    assert progress.rows() == [] and os.path.lexists(tmp_path / "practice.json.unreadable")
    assert progress.set_aside == tmp_path / "practice.json.unreadable"  # for the command to say so
    progress.record("attention.output", 1, 3, [])
    assert practice.Progress(path).rows()[0]["checks"] == 1


def test_the_command_says_when_it_set_an_unreadable_progress_file_aside(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from qkvquiz.cli import app
    from qkvquiz.practice import server as server_module

    path = tmp_path / "practice.json"
    path.write_text("not json", encoding="utf-8")

    def serve_once(topics, *, lang=None, port=0, seed=None, progress=None, ready=None):
        app_ = server_module.PracticeApp(topics, lang=lang, progress=progress, seed=seed)
        with server_module.PracticeServer(app_, 0) as server:
            ready(server)  # what the command prints once it listens; then stop

    monkeypatch.setattr(server_module, "serve", serve_once)
    result = CliRunner().invoke(app, ["practice", "attention.scores", "--no-browser", "--progress-file", str(path)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"{path} could not be read as a progress file; it is kept as {path}.unreadable" in said
    assert practice.Progress(path).set_aside is None  # the unreadable file is out of the way
