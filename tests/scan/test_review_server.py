"""`qkvquiz scan review DIR`'s server: the practice server's rules (loopback, its own host and
origin, small JSON requests of exactly their fields), pictures by number only, each decision
read by the grader's parser and journaled before the answer, Done grading again."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from qkvquiz.grade.scanned import scan_and_grade
from qkvquiz.practice.server import SECURITY_HEADERS
from qkvquiz.review.server import ReviewApp, ReviewServer
from qkvquiz.scan.journal import JOURNAL_NAME, read_decisions

from ..practice.helpers import request, serving
from .scanned_set import exact_answers, make_set, scanned_page


def scan_folder(root: Path) -> Path:
    """A scan of ada's and bo's pages, written with their right answers: some are in doubt."""
    key_path, key, cellmap = make_set(root / "set")
    rng = np.random.default_rng(21)
    scans = []
    for student, variant in zip(key.students[:2], key.variants[:2]):
        for page in (1, 2):
            path = root / f"{student}-{page}.png"
            scanned_page(cellmap, variant, page, rng, answers=exact_answers(key, student), degrees=1.0).save(path)
            scans.append(path)
    out = root / "out"
    grading = scan_and_grade(key_path, scans, out)
    assert grading.review, "the random answers leave some entry in doubt"
    return out


@contextmanager
def running(app: ReviewApp):
    app.stop = lambda: None  # the test stops it
    with serving(ReviewServer(app, 0)) as server:
        yield server


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return scan_folder(tmp_path_factory.mktemp("review"))


@pytest.fixture
def server(folder):
    (folder / JOURNAL_NAME).unlink(missing_ok=True)
    with running(ReviewApp(folder)) as server:
        yield server


def test_the_page_and_pictures_are_served_with_the_practice_servers_headers(server):
    status, page, headers = request(server, "/", method="GET", with_headers=True)
    assert status == 200 and "Review the scan" in page
    csp = headers["Content-Security-Policy"]
    assert "img-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "unsafe-eval" not in csp and "script-src 'sha256-" in csp
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    conn.request("GET", "/picture/1")
    reply = conn.getresponse()
    assert reply.status == 200 and reply.getheader("Content-Type") == "image/png"
    assert reply.read().startswith(b"\x89PNG") and reply.getheader("X-Content-Type-Options") == "nosniff"
    conn.close()
    assert server.server_address[0] == "127.0.0.1"


def test_items_list_every_doubt_and_a_decision_is_journaled_before_the_answer(server, folder):
    status, doc = request(server, "/api/items", {})
    assert status == 200 and doc["items"]
    first = doc["items"][0]
    assert {"id", "student", "part", "place", "read", "reasons", "alternatives", "page", "view", "decided", "value"} <= set(first)
    assert first["reasons"] and not first["decided"]
    assert all(" 0" not in i["place"] for i in doc["items"])  # places count from 1, as the grader says them
    status, answer = request(server, "/api/decide", {"id": first["id"], "value": " −1.5 "})
    assert status == 200 and answer["decided"] and answer["value"] == "−1.5"
    decisions, _notes = read_decisions(folder)
    (decision,) = decisions.values()
    assert decision.value == "−1.5" and decision.read == first["read"] and decision.student == first["student"]
    # An empty box decides a blank entry; the last decision counts.
    status, answer = request(server, "/api/decide", {"id": first["id"], "value": ""})
    assert status == 200 and answer["value"] is None
    assert request(server, "/api/items", {})[1]["items"][0]["value"] is None


@pytest.mark.parametrize("case, expected", [
    ({"path": "/api/decide", "body": {"id": 99999, "value": "1"}}, 400),
    ({"path": "/api/decide", "body": {"id": "1", "value": "1"}}, 400),
    ({"path": "/api/decide", "body": {"id": True, "value": "1"}}, 400),
    ({"path": "/api/decide", "body": {"id": 1, "value": "1+"}}, 400),
    ({"path": "/api/decide", "body": {"id": 1, "value": "NaN"}}, 400),
    ({"path": "/api/decide", "body": {"id": 1, "value": "1" * 41}}, 400),
    ({"path": "/api/decide", "body": {"id": 1, "value": ["1"]}}, 400),
    ({"path": "/api/decide", "body": {"id": 1}}, 400),
    ({"path": "/api/decide", "body": {"id": 1, "value": "1", "student": "bo"}}, 400),
    ({"path": "/api/decide", "raw": b'{"id": 1, "id": 2, "value": "1"}'}, 400),
    ({"path": "/api/decide", "raw": b"[" * 5000 + b"]" * 5000}, 400),
    ({"path": "/api/decide", "body": {"id": 1, "value": "1"}, "headers": {"Host": "evil.example:80"}}, 421),
    ({"path": "/api/decide", "body": {"id": 1, "value": "1"}, "headers": {"Origin": "http://evil.example"}}, 403),
    ({"path": "/api/decide", "raw": b'{"id": 1, "value": "1"}', "headers": {"Content-Type": "text/plain"}}, 415),
    ({"path": "/api/check", "body": {}}, 404),
    ({"path": "/picture/0", "method": "GET"}, 404),
    ({"path": "/picture/99999", "method": "GET"}, 404),
    ({"path": "/picture/../../scan.json", "method": "GET"}, 404),
    ({"path": "/view/1/../../../etc/passwd", "method": "GET"}, 404),
    ({"path": "/scan.json", "method": "GET"}, 404),
    ({"path": "/picture/1", "method": "GET", "headers": {"Host": "attacker.test"}}, 421),
    ({"path": "/api/done", "method": "PUT", "body": {}}, 405),
    ({"path": "/api/items", "method": "TRACE"}, 405),
])
def test_anything_else_is_refused_and_nothing_is_journaled(server, folder, case, expected, capfd):
    status, doc, headers = request(server, case["path"], case.get("body"), method=case.get("method", "POST"),
                                   headers=case.get("headers"), raw=case.get("raw"), with_headers=True)
    assert status == expected, doc
    assert isinstance(doc, dict) and set(doc) == {"error"} and "Traceback" not in doc["error"]
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, (name, headers)
    assert not (folder / JOURNAL_NAME).exists()
    assert "Error" not in capfd.readouterr().err


def test_done_grades_again_on_the_decisions(server, folder):
    items = request(server, "/api/items", {})[1]["items"]
    item = items[0]
    request(server, "/api/decide", {"id": item["id"], "value": "-88.88"})
    status, doc = request(server, "/api/done", {})
    assert status == 200 and doc["decided"] == 1 and doc["open"] == len(items) - 1
    submission = json.loads((folder / "submissions" / f"{item['student']}.json").read_text())
    assert "-88.88" in json.dumps(submission)
    assert server.app.graded is not None


def test_a_folder_that_is_no_scan_is_refused_with_its_name(tmp_path):
    from qkvquiz.grade.scanned import ScanInputError

    with pytest.raises(ScanInputError, match="scan.json"):
        ReviewApp(tmp_path)
    (tmp_path / "scan.json").write_text('{"format": "qkvquiz-scan", "version": 1, "title": "t", "key": "/nope", "key_sha256": "0", '
                                        '"students": [], "review": []}')
    with pytest.raises(ScanInputError, match="nope"):
        ReviewApp(tmp_path)


def test_the_command_serves_until_done_then_prints_the_new_grades(folder, tmp_path):
    import http.client
    import socket
    import time

    from typer.testing import CliRunner

    from qkvquiz.cli import app

    (folder / JOURNAL_NAME).unlink(missing_ok=True)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("result", CliRunner().invoke(
        app, ["scan", "review", str(folder), "--no-browser", "--port", str(port)])))
    thread.start()
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("POST", "/api/done", body=b"{}", headers={"Content-Type": "application/json"})
            reply = conn.getresponse()
            assert reply.status == 200, reply.read()
            conn.close()
            break
        except ConnectionRefusedError:
            assert time.monotonic() < deadline, "the review server did not start"
            time.sleep(0.1)
    thread.join(60)
    result = outcome["result"]
    assert result.exit_code == 0, result.output
    assert f"http://127.0.0.1:{port}/" in result.output and "Graded again on the confirmed readings" in result.output
    # Not a scan folder: exit 2, named.
    refused = CliRunner().invoke(app, ["scan", "review", str(tmp_path)])
    assert refused.exit_code == 2 and "scan.json" in refused.output and "Traceback" not in refused.output


def test_a_scan_record_that_points_a_picture_elsewhere_is_refused(folder, tmp_path):
    import shutil

    from qkvquiz.grade.scanned import ScanInputError

    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    state = json.loads((copy / "scan.json").read_text())
    state["review"][0]["picture"] = "review/cells/../../../set/key.json"
    (copy / "scan.json").write_text(json.dumps(state))
    with pytest.raises(ScanInputError, match="picture"):
        ReviewApp(copy)


def test_done_says_why_it_cannot_grade_again(folder, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    app = ReviewApp(copy)
    state = json.loads((copy / "scan.json").read_text())
    key = Path(state["key"])
    saved = key.read_bytes()
    try:
        key.write_bytes(saved.replace(b'"title"', b'"title" ', 1))  # the key changed since the scan
        with running(app) as server:
            status, doc = request(server, "/api/done", {})
        assert status == 409 and "differs from the one the pages were scanned with" in doc["error"]
    finally:
        key.write_bytes(saved)


@pytest.mark.parametrize("change", [
    lambda r: r["entries"][0].update(part="q9.nothing"),
    lambda r: r["entries"][0].update(index=[0, 7]),
    lambda r: r["entries"][0].update(value=["1"]),
    lambda r: r.update(student="someone else"),
    lambda r: r.pop("entries"),
])
def test_a_tampered_side_file_is_refused_by_name(folder, tmp_path, change):
    import shutil

    from qkvquiz.grade.scanned import ScanInputError, regrade

    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    path = copy / "readings" / "ada.json"
    reading = json.loads(path.read_text())
    change(reading)
    path.write_text(json.dumps(reading))
    with pytest.raises(ScanInputError, match="ada.json"):
        regrade(copy)


def test_an_unexpected_failure_is_named_as_the_reviews_in_the_terminal(folder, capsys):
    """A server error is one line in the terminal that names `qkvquiz scan review` (not the
    practice server it is built from); the page gets no detail."""
    app = ReviewApp(folder)

    def broken(path, doc):
        raise RuntimeError("the disk is gone")

    app.handle = broken
    with running(app) as server:
        status, doc = request(server, "/api/items", {})
    assert status == 500 and "disk" not in json.dumps(doc) and "review" in doc["error"]
    said = capsys.readouterr().err
    assert "qkvquiz scan review: /api/items: RuntimeError: the disk is gone" in said
    assert "practice" not in said
