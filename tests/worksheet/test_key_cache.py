"""A large class's key is read from its JSON once; later reads of the very same file come from a
cache beside it, and give the same key. A changed, broken or foreign cache is never used."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from qkvquiz import key as keys
from qkvquiz import key_cache
from qkvquiz.json_rows import dumps
from qkvquiz.key import key_to_json, load_key
from qkvquiz.core.resources import bank_dir
from qkvquiz.spec import load_spec
from qkvquiz.worksheet import build_worksheet


@pytest.fixture()
def key_file(tmp_path, monkeypatch):
    monkeypatch.setattr(keys, "CACHE_FROM", 2)
    spec = load_spec(bank_dir() / "attention-basics.yaml")
    doc = key_to_json(build_worksheet(spec, ["ada", "bob", "cy"], seed="cache"))
    path = tmp_path / "set" / "key.json"
    path.parent.mkdir()
    path.write_text(dumps(doc), encoding="utf-8")
    return path


def same_key(a, b) -> None:
    assert (a.title, a.points, a.students, a.variants, a.set_id, a.lang) == (
        b.title, b.points, b.students, b.variants, b.set_id, b.lang)
    assert list(a.answers) == list(b.answers)
    assert len(a.items) == len(b.items)
    for x, y in zip(a.items, b.items):
        assert (x.id, x.family, x.params, x.tolerance, x.credit, x.parts, x.shapes, x.title) == (
            y.id, y.family, y.params, y.tolerance, y.credit, y.parts, y.shapes, y.title)
        assert list(x.env) == list(y.env)
        for name in x.env:
            assert x.env[name].dtype == y.env[name].dtype and x.env[name].tobytes() == y.env[name].tobytes()


def test_the_second_read_comes_from_the_cache_and_is_the_same_key(key_file, monkeypatch):
    first = load_key(key_file)
    cache = key_cache.cache_path(key_file)
    assert cache.is_file() and stat.S_IMODE(cache.stat().st_mode) == 0o600
    monkeypatch.setattr(keys, "key_from_json", lambda *a, **k: pytest.fail("read from JSON again"))
    second = load_key(key_file)
    same_key(first, second)
    assert isinstance(second.answers, keys._Answers)


def test_an_edited_key_is_read_from_its_json_and_cached_again(key_file):
    load_key(key_file)
    text = key_file.read_text(encoding="utf-8").replace('"title": "Attention basics', '"title": "Edited basics', 1)
    key_file.write_text(text, encoding="utf-8")
    edited = load_key(key_file)
    assert edited.title.startswith("Edited basics")
    assert load_key(key_file).title.startswith("Edited basics")


@pytest.mark.parametrize("content", [b"", b"not a zip", b"PK\x03\x04broken"])
def test_a_broken_cache_is_no_cache(key_file, content):
    first = load_key(key_file)
    key_cache.cache_path(key_file).write_bytes(content)
    same_key(load_key(key_file), first)


def test_a_cache_holding_pickled_objects_is_never_unpickled(key_file, tmp_path):
    first = load_key(key_file)
    marker = tmp_path / "ran"

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with open(key_cache.cache_path(key_file), "wb") as fh:
        np.savez(fh, meta=np.array([Boom()], dtype=object))
    same_key(load_key(key_file), first)
    assert not marker.exists()


def test_a_cache_of_another_key_file_is_not_used(key_file, tmp_path, monkeypatch):
    load_key(key_file)
    other = tmp_path / "other" / "key.json"
    other.parent.mkdir()
    text = key_file.read_text(encoding="utf-8").replace('"seed": "cache"', '"seed": "other"', 1)
    other.write_text(text, encoding="utf-8")
    os.replace(key_cache.cache_path(key_file), key_cache.cache_path(other))  # the cache of the first file
    calls = []
    real = keys.key_from_json
    monkeypatch.setattr(keys, "key_from_json", lambda *a, **k: calls.append(1) or real(*a, **k))
    load_key(other)
    assert calls == [1]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_folder_that_cannot_be_written_has_no_cache(key_file):
    key_file.parent.chmod(0o555)
    try:
        load_key(key_file)
        assert not key_cache.cache_path(key_file).exists()
    finally:
        key_file.parent.chmod(0o755)


def test_a_small_class_has_no_cache(key_file, monkeypatch):
    monkeypatch.setattr(keys, "CACHE_FROM", 1000)
    load_key(key_file)
    assert not key_cache.cache_path(key_file).exists()


def test_a_key_saved_with_a_byte_order_mark_is_cached_and_its_answers_read(key_file):
    key_file.write_bytes(b"\xef\xbb\xbf" + key_file.read_bytes())
    first = load_key(key_file)
    second = load_key(key_file)
    assert isinstance(second.answers, keys._Answers)
    same_key(first, second)


def forge(cache, change) -> None:
    """Rewrite the cache as someone who can write into the course folder could: same key.json hash,
    ``change`` applied to its metadata, the arrays as they were (and its seal as it was, if any)."""
    import json

    with np.load(cache, allow_pickle=False) as stored:
        arrays = {name: stored[name] for name in stored.files}
    meta = json.loads(arrays["meta"].tobytes().decode("utf-8"))
    change(meta)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    with open(cache, "wb") as fh:
        np.savez(fh, **arrays)


@pytest.mark.parametrize("keep_seal", [True, False])
def test_a_forged_cache_beside_an_unchanged_key_gives_no_marks_and_is_replaced(key_file, keep_seal, caplog):
    from qkvquiz.core.submissions import Submission
    from qkvquiz.grade.grader import grade

    honest = load_key(key_file)
    cache = key_cache.cache_path(key_file)
    key_bytes = key_file.read_bytes()

    def lenient(meta):  # every tolerance: anything within 1000 passes
        for item in meta["doc"]["items"]:
            item["tolerance"] = {"abs": 1000}
            for part in item["parts"]:
                part["tolerance"] = {"abs": 1000}

    forge(cache, lenient)
    if not keep_seal:
        with np.load(cache, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files if name != "seal"}
        with open(cache, "wb") as fh:
            np.savez(fh, **arrays)
    read = load_key(key_file)
    assert key_file.read_bytes() == key_bytes
    assert "ignored (not written by this user's qkvquiz)" in caplog.text
    same_key(honest, read)
    wrong = {part.id: 999 for _problem, part in read.parts}
    report = grade(read, [Submission("ada.json", "ada", wrong, variant=read.variants[0], set_id=read.set_id)])
    assert report.results[0].score == 0
    same_key(honest, load_key(key_file))  # the cache written anew is the honest one, and is read
