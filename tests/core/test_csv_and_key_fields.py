"""Fields at the edge of what the readers take: a CSV field longer than the csv module reads and a
key whose mask share is no share are refused with the file (and line) named, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qkvquiz import generate_set, load_key, load_spec
from qkvquiz.core.inputs import InputError
from qkvquiz.core.resources import bank_dir
from qkvquiz.exchange.gradebook import fill_moodle_worksheet
from qkvquiz.key import KeyFileError
from qkvquiz.roster import Roster, read_roster_entries, with_moodle_groups

HUGE = "a" * 200_000  # past the csv module's field limit (131,072 characters)


def test_a_roster_field_past_the_csv_limit_names_the_file_and_line(tmp_path: Path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text(f"student,email\nada,ada@example.org\nbob,{HUGE}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_roster_entries(roster)
    assert "roster.csv: line 3" in str(caught.value)


def test_a_group_list_field_past_the_csv_limit_names_the_file(tmp_path: Path) -> None:
    groups = tmp_path / "groups.csv"
    groups.write_text(f"Group name,Email address\ng1,{HUGE}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        with_moodle_groups(Roster(()), groups)
    assert "groups.csv: line 2" in str(caught.value)


def test_a_moodle_worksheet_row_past_the_csv_limit_names_its_line() -> None:
    worksheet = f'Identifier,Full name,Grade\r\nParticipant 1,Ada,\r\nParticipant 2,"{HUGE}",\r\n'
    with pytest.raises(InputError) as caught:
        fill_moodle_worksheet(worksheet, "grading.csv", [])
    assert "grading.csv: line 3" in str(caught.value)


@pytest.mark.parametrize("weight", [7, -1, 0, "x"])
def test_a_key_whose_mask_share_is_no_share_is_refused(tmp_path: Path, weight: object) -> None:
    spec = load_spec(bank_dir() / "masking.yaml")
    generate_set(spec, ["ada"], tmp_path / "set", seed="k")
    path = tmp_path / "set" / "key.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["items"][0].setdefault("credit", {})["mask_weight"] = weight
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(KeyFileError) as caught:
        load_key(path)
    assert "mask_weight" in str(caught.value)


@pytest.mark.parametrize(("doc", "said"), [
    ({}, "no 'students' field"),
    ({"students": 5, "items": []}, "field 'students': a field holds the wrong kind of value"),
    ({"students": [5], "items": []}, "student entry 1: a field holds the wrong kind of value"),
    ({"students": [], "items": [{"id": "q1"}]}, "item 1: no 'family' field"),
    ({"students": [], "items": [{"id": "q1", "family": "attention.scores", "params": {},
                                 "parts": [{"id": "q1.scores", "step": "scores", "points": "x"}]}]},
     "item 1: a field holds the wrong kind of value"),
    ({"students": [], "items": [], "points": "x"}, "field 'points': a field holds the wrong kind of value"),
])
def test_a_malformed_key_is_named_by_field_and_entry_without_python(tmp_path: Path, doc: dict, said: str) -> None:
    path = tmp_path / "key.json"
    path.write_text(json.dumps({"format": "qkvquiz-key", "version": 1, **doc}), encoding="utf-8")
    with pytest.raises(KeyFileError) as caught:
        load_key(path)
    message = str(caught.value)
    assert said in message and "key.json" in message, message
    for python in ("Error(", "object is not", "could not convert"):
        assert python not in message, message
