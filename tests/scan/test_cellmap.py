"""The cell map: written and read back unchanged, valid by its schema, hostile maps refused by name."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest

from qkvquiz.core.resources import schemas_dir
from qkvquiz.scan.cellmap import CellMapError, cellmap_document, cellmap_from_bytes, cellmap_json, read_cellmap, write_cellmap

from .corpus import layout

SET = "3f9c0a12be47"
PEOPLE = [("ada", "AB12-CD34"), ("bo", "EF56-GH78")]
PARTS = {"q1.scores": (2, 2), "q2.norm": ()}


def sample():
    return layout(SET, PEOPLE, PARTS, pages=2)


def test_a_written_map_reads_back_the_same(tmp_path):
    cellmap = sample()
    write_cellmap(cellmap, tmp_path / "cellmap.json")
    again = read_cellmap(tmp_path / "cellmap.json")
    assert again.set_id == SET
    assert again.students == cellmap.students
    assert again.pages == tuple(type(p)(**{**p.__dict__}) for p in cellmap.pages)
    assert again.page("EF56-GH78", 2).entries == cellmap.page("EF56-GH78", 2).entries
    assert again.student("AB12-CD34").parts == {"q1.scores": (2, 2), "q2.norm": ()}


def test_the_schema_accepts_what_is_written():
    schema = json.loads((schemas_dir() / "cellmap.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(json.loads(cellmap_json(sample())), schema)


def _broken(change):
    doc = cellmap_document(sample())
    change(doc)
    return json.dumps(doc).encode()


def _set(path, value):
    def change(doc):
        target = doc
        for step in path[:-1]:
            target = target[step]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return change


CASES = [
    ("not this format", _set(["format"], "qkvquiz-key"), 'field "format"'),
    ("a later version", _set(["version"], 2), 'field "version"'),
    ("no set", _set(["set"], KeyError), 'field "set" is missing'),
    ("a set code of the wrong form", _set(["set"], "../../etc"), 'field "set"'),
    ("a box off its page", _set(["pages", 0, "entries", 0, "sign"], [590, 10, 18, 22]), "page 1 of AB12-CD34, entry 1, field \"sign\""),
    ("a box of no area", _set(["pages", 1, "qr"], [10, 10, 0, 5]), 'page 2 of AB12-CD34, field "qr"'),
    ("a box of text", _set(["pages", 0, "entries", 0, "digits", 0], "here"), 'field "digits"'),
    ("marks out of order", _set(["pages", 0, "marks", "centres"], [[500, 30], [30, 30], [30, 800], [500, 800]]),
     'field "centres"'),
    ("three marks", _set(["pages", 0, "marks", "centres"], [[30, 30], [500, 30], [30, 800]]), 'field "centres"'),
    ("a part no student has", _set(["pages", 0, "entries", 0, "part"], "q9.other"), "entry 1, field \"part\""),
    ("an index outside the shape", _set(["pages", 0, "entries", 0, "index"], [2, 0]), 'field "index"'),
    ("a comb of the wrong length", _set(["pages", 0, "entries", 0, "decimals"], 3), 'field "digits"'),
    ("a page beyond the student's count", _set(["pages", 0, "page"], 3), 'page 1, field "page"'),
    ("a variant not in the list", _set(["pages", 0, "variant"], "ZZZZ-ZZZZ"), 'page 1, field "variant"'),
    ("a student twice", _set(["students", 1, "student"], "ada"), 'student 2, field "student"'),
    ("a page twice", _set(["pages", 1, "page"], 1), 'page 2, field "page"'),
    ("a shape of text", _set(["students", 0, "parts", "q2.norm"], "2x2"), 'student 1, field "parts"'),
    ("an id with an invisible character", _set(["students", 0, "student"], "ada\u200b"), 'student 1, field "student"'),
    ("a boolean page number", _set(["pages", 0, "page"], True), 'page 1, field "page"'),
    ("an integer past any float", _set(["pages", 0, "entries", 0, "sign"], [10**400, 10, 18, 22]), 'field "sign"'),
]


@pytest.mark.parametrize("name, change, where", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_map_is_refused_naming_the_place(name, change, where):
    with pytest.raises(CellMapError) as caught:
        cellmap_from_bytes(_broken(change), "maps/cellmap.json")
    message = str(caught.value)
    assert message.startswith("maps/cellmap.json: ")
    assert where in message, message


@pytest.mark.parametrize("text, words", [
    (b'{"format": "qkvquiz-cellmap", "format": "x"}', "appears twice"),
    (b'{"format": NaN}', "not a JSON number"),
    (b"[" * 50 + b"]" * 50, "nested"),
    (b"\xff\xfe", "UTF-8"),
    (b'{"format": "qkvquiz-cellmap"', "not valid JSON"),
    (b"[]", "is not an object"),
])
def test_text_that_is_no_map_is_refused(text, words):
    with pytest.raises(CellMapError) as caught:
        cellmap_from_bytes(text, "cellmap.json")
    assert words in str(caught.value)


def test_a_folder_is_not_read_as_a_map(tmp_path):
    with pytest.raises(CellMapError) as caught:
        read_cellmap(tmp_path)
    assert str(tmp_path) in str(caught.value)


def test_the_written_text_keeps_one_page_per_line():
    text = cellmap_json(sample())
    assert len(text.splitlines()) == 2 + len(sample().pages)
    assert json.loads(text) == json.loads(json.dumps(copy.deepcopy(cellmap_document(sample()))))
