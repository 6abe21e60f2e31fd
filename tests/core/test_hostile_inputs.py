"""Hostile input: one test per attack, each ending quickly in a message that names the file.

Every case that goes through the command line must exit with status 2 and print one error
naming the file (and the line where there is one), never a traceback. Resource tests assert
bounds far above normal use (seconds where a fix takes milliseconds), not tight timings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.core.submissions import MAX_NESTING, MAX_SUBMISSION_BYTES, read_submission, submission_from_bytes
from qkvquiz.core.bounded_yaml import MAX_YAML_DEPTH, load_yaml
from qkvquiz.core.folders import walk_json_files
from qkvquiz.core.inputs import MAX_STUDENTS, InputError, json_nesting, read_bytes
from qkvquiz.key import KeyFileError, load_key
from qkvquiz.core.secret import SecretError, read_secret
from qkvquiz.spec import SpecError, load_spec

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
needs_dev_zero = pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")

SPEC = "title: T\nitems:\n  - family: attention.output\n"


def one_line_error(result, *says: str) -> str:
    """The CLI's error text, checked: status 2, no traceback, each of ``says`` in it.

    Compared without white space: the terminal wraps long paths anywhere.
    """
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.output.count("error:") == 1, result.output
    squeezed = "".join(result.output.split())
    for part in says:
        assert "".join(part.split()) in squeezed, (part, result.output)
    return " ".join(result.output.split())


def generate(*args: str):
    return runner.invoke(app, ["generate", *args])


# --------------------------------------------------------------------------- quadratic text


def test_the_nesting_check_is_linear_on_a_1mb_file_of_quote_backslash():
    # '"\' repeated made the old check rescan from every quote: minutes at this size.
    raw = b'"\\' * (MAX_SUBMISSION_BYTES // 2)
    assert len(raw) == MAX_SUBMISSION_BYTES
    start = time.perf_counter()
    with pytest.raises(ValueError, match="not valid JSON"):
        submission_from_bytes(raw, "x.json")
    assert time.perf_counter() - start < 10  # a linear pass takes well under a second


@pytest.mark.parametrize("unit", [b'"\\"', b'["\\\\', b'[', b'\\"[', b'{"\\u0022":'])
def test_other_1mb_patterns_end_quickly(unit):
    raw = unit * (MAX_SUBMISSION_BYTES // len(unit))
    start = time.perf_counter()
    with pytest.raises(ValueError):
        submission_from_bytes(raw, "x.json")
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize(("text", "depth"), [
    ('{"a": "[[[[", "b": [1]}', 2),
    ('{"a": "\\"[[[", "b": 1}', 1),  # an escaped quote does not end the string
    ('{"a": "\\\\", "b": [[1]]}', 3),  # an escaped backslash does not escape the quote
    ('[["]]]]"]]', 2),
    ("", 0),
])
def test_json_nesting_ignores_brackets_inside_strings(text, depth):
    assert json_nesting(text) == depth


def test_too_deep_json_is_refused_with_the_depth():
    raw = ("[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)).encode()
    with pytest.raises(ValueError, match=f"nested {MAX_NESTING + 1} deep"):
        submission_from_bytes(raw, "x.json")


# --------------------------------------------------------------------------- YAML


def alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    spec = tmp_path / "bomb.yaml"
    spec.write_text(alias_bomb(), encoding="utf-8")
    assert spec.stat().st_size < 1000  # 10⁹ values once expanded
    result = generate(str(spec), "-n", "1", "--public", "--out", str(tmp_path / "o"))
    one_line_error(result, "bomb.yaml", "line ", "alias")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
@pytest.mark.parametrize("text", [
    "a: [" + "1," * 499_990 + "]\n",
    "".join(f"k{i}: 1\n" for i in range(100_000)),
])
def test_a_1mb_yaml_of_tiny_values_stops_at_the_value_bound(tmp_path, text):
    path = tmp_path / "many.yaml"
    path.write_text(text, encoding="utf-8")
    assert path.stat().st_size < 1_000_000
    start = time.perf_counter()
    with pytest.raises(SpecError, match="many.yaml: line [0-9]+: the document holds more than 50,000 values"):
        load_spec(path)
    assert time.perf_counter() - start < 30  # about 3 s: parsing stops at the bound


def test_a_recursive_alias_is_refused():
    with pytest.raises(InputError, match="contains it"):
        load_yaml("a: &a [1, *a]\n", "r.yaml")


def test_aliases_that_stay_small_are_fine():
    assert load_yaml("base: &b {tokens: 3}\nitem: *b\nmerged: {<<: *b, d_k: 2}\n", "ok.yaml") == {
        "base": {"tokens": 3}, "item": {"tokens": 3}, "merged": {"tokens": 3, "d_k": 2}}


def test_aliases_cannot_build_nesting_deeper_than_the_bound():
    lines = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, MAX_YAML_DEPTH + 2)]
    with pytest.raises(InputError, match="nest"):
        load_yaml("\n".join(lines), "deep.yaml")


@pytest.mark.parametrize("text", [
    "title: T\nitems: " + "[" * 5000 + "]" * 5000 + "\n",
    "title: T\nitems:\n" + "".join("  " * i + "- \n" for i in range(1, 400)),
    "title: T\nitems: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
])
def test_deep_yaml_nesting_is_an_error_naming_the_file_not_a_recursion_error(tmp_path, text):
    spec = tmp_path / "deep.yaml"
    spec.write_text(text, encoding="utf-8")
    result = generate(str(spec), "-n", "1", "--public", "--out", str(tmp_path / "o"))
    one_line_error(result, "deep.yaml", "nested more than")


@pytest.mark.parametrize(("text", "line"), [
    ("title: T\ntitle: U\nitems:\n  - family: attention.output\n", 2),
    ("title: T\nitems:\n  - family: attention.output\n    params: {tokens: 3, tokens: 4}\n", 4),
    ("title: T\nitems:\n  - family: attention.output\n    ask: {scores: 1}\n    ask: {output: 1}\n", 5),
])
def test_a_duplicated_key_in_a_spec_is_an_error_with_its_line(tmp_path, text, line):
    path = tmp_path / "dup.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match=f"dup.yaml: line {line}: the key '.*' appears twice"):
        load_spec(path)
    one_line_error(generate(str(path), "-n", "1", "--public", "--out", str(tmp_path / "o")), "dup.yaml", "appears twice")


def test_a_duplicated_key_in_an_audit_file_is_an_error_with_its_line(tmp_path):
    path = tmp_path / "audit.yaml"
    path.write_text((ROOT / "examples" / "audit-example.yaml").read_text(encoding="utf-8") + "title: again\n")
    one_line_error(runner.invoke(app, ["audit", str(path)]), "audit.yaml: line", "'title' appears twice")


def test_a_huge_integer_in_yaml_is_a_message_with_its_line(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(SPEC + "    params: {tokens: " + "9" * 5000 + "}\n", encoding="utf-8")
    one_line_error(generate(str(path), "-n", "1", "--public", "--out", str(tmp_path / "o")),
                   "big.yaml: line 4", "cannot be read")


def test_a_deep_param_on_the_command_line_is_a_message():
    result = runner.invoke(app, ["show", "attention.output", "-p", "entries=" + "[" * 200 + "]" * 200])
    one_line_error(result, "--param entries", "nested more than")


# --------------------------------------------------------------------------- encodings


def test_a_spec_that_is_not_utf8_is_named_with_its_line(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("title: Café\nitems: []\n".encode("latin-1"))
    one_line_error(generate(str(path), "-n", "1", "--public", "--out", str(tmp_path / "o")),
                   "latin1.yaml: line 1: column 11", "not UTF-8")


def test_a_roster_that_is_not_utf8_is_named_with_its_line(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_bytes("ada\nzoë\n".encode("latin-1"))
    one_line_error(generate("attention-basics", "--roster", str(roster), "--public", "--out", str(tmp_path / "o")),
                   "roster.txt: line 2", "not UTF-8")


def test_an_audit_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "audit.yaml"
    path.write_bytes(b"title: \xff\n")
    one_line_error(runner.invoke(app, ["audit", str(path)]), "audit.yaml: line 1", "not UTF-8")


# --------------------------------------------------------------------------- file kinds and sizes


@needs_dev_zero
@pytest.mark.parametrize("role", ["spec", "roster", "secret"])
def test_dev_zero_is_refused_as_spec_roster_or_secret(tmp_path, role):
    args = {"spec": ["/dev/zero", "-n", "1"],
            "roster": ["attention-basics", "--roster", "/dev/zero"],
            "secret": ["attention-basics", "-n", "1", "--secret-file", "/dev/zero"]}[role]
    one_line_error(generate(*args, "--out", str(tmp_path / "o")), "/dev/zero", "a device, not a regular file")


@needs_dev_zero
def test_dev_zero_is_refused_as_a_key_an_audit_file_and_a_submission(tmp_path):
    one_line_error(runner.invoke(app, ["audit", "/dev/zero"]), "/dev/zero", "device")
    one_line_error(runner.invoke(app, ["grade", "/dev/zero", str(tmp_path), "--out", str(tmp_path / "g")]),
                   "/dev/zero", "device")
    with pytest.raises(ValueError, match="device"):
        read_submission("/dev/zero")


@pytest.mark.slow
@needs_fifo
@pytest.mark.parametrize("role", ["spec", "roster", "secret"])
def test_a_fifo_is_refused_without_blocking(tmp_path, role):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    args = {"spec": [str(fifo), "-n", "1", "--public"],
            "roster": ["attention-basics", "--roster", str(fifo), "--public"],
            "secret": ["attention-basics", "-n", "1", "--secret-file", str(fifo)]}[role]
    # In a child process with a timeout: a regression would block on open() forever.
    done = subprocess.run([sys.executable, "-m", "qkvquiz", "generate", *args, "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert done.returncode == 2, done.stderr
    assert "pipe (FIFO), not a regular file" in done.stderr and str(fifo) in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
@needs_fifo
def test_a_fifo_among_submissions_is_reported_and_the_rest_graded(tmp_path):
    from .test_integrity import graded_class

    key, files = graded_class(tmp_path)
    folder = files[0].parent
    os.mkfifo(folder / "x.json")
    done = subprocess.run([sys.executable, "-m", "qkvquiz", "grade", str(key), str(folder), "--out", str(tmp_path / "g")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert done.returncode == 1, done.stderr
    assert "x.json" in done.stderr and "pipe (FIFO)" in done.stderr
    assert (tmp_path / "g" / "results.csv").is_file()


def test_a_folder_is_refused_as_a_spec_or_secret(tmp_path):
    one_line_error(generate(str(tmp_path), "-n", "1", "--public", "--out", str(tmp_path / "o")), str(tmp_path), "folder")
    with pytest.raises(SecretError, match="folder"):
        read_secret(tmp_path)


def test_files_over_the_limit_are_refused_without_reading_them(tmp_path):
    spec = tmp_path / "huge.yaml"
    spec.write_text(SPEC + "# " + "x" * 1_000_000 + "\n", encoding="utf-8")
    one_line_error(generate(str(spec), "-n", "1", "--public", "--out", str(tmp_path / "o")), "huge.yaml", "at most 1,000,000")
    with pytest.raises(InputError, match="at most 10"):
        read_bytes(spec, 10, "spec")


def test_a_secret_file_is_read_only_up_to_its_limit(tmp_path):
    path = tmp_path / "secret"
    path.write_text("x" * 100_000, encoding="utf-8")
    with pytest.raises(SecretError, match=str(path)):
        read_secret(path)


def test_a_key_nested_too_deeply_is_a_key_file_error(tmp_path):
    path = tmp_path / "key.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(KeyFileError, match="nested more than"):
        load_key(path)
    path.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(KeyFileError, match="key.json: line 1: column 13"):
        load_key(path)


# --------------------------------------------------------------------------- links


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_link_to_root_on_the_command_line_is_not_walked(tmp_path):
    from .test_integrity import graded_class

    key, _ = graded_class(tmp_path)
    (tmp_path / "everything").symlink_to("/")
    one_line_error(runner.invoke(app, ["grade", str(key), str(tmp_path / "everything"), "--out", str(tmp_path / "g")]),
                   "everything is a link to the folder /", "not followed")
    assert not (tmp_path / "g").exists()


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_links_inside_a_submissions_folder_do_not_lead_out_of_it(tmp_path):
    from .test_integrity import graded_class

    key, files = graded_class(tmp_path)
    subs = files[0].parent
    outside = tmp_path / "outside"
    outside.mkdir()
    stolen = json.loads(files[0].read_text(encoding="utf-8"))
    (outside / "other.json").write_text(json.dumps(stolen), encoding="utf-8")
    (subs / "x.json").symlink_to(outside, target_is_directory=True)  # a folder link named like a file
    (subs / "dir").symlink_to(outside, target_is_directory=True)
    (subs / "file.json").symlink_to(outside / "other.json")
    (subs / "again.json").symlink_to(files[1])  # inside the folder: fine, graded once
    found, skipped = walk_json_files(subs, frozenset({"key.json"}))
    assert not any(outside in p.resolve().parents for p in found)
    assert {s.path.name for s in skipped} == {"x.json", "dir", "file.json"}
    result = runner.invoke(app, ["grade", str(key), str(subs), "--out", str(tmp_path / "g")])
    assert "skipped:" in result.output and "outside the folder" in " ".join(result.output.split())
    graded = json.loads((tmp_path / "g" / "results.json").read_text(encoding="utf-8"))
    assert all("outside" not in s["source"] for s in graded["students"])


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_read_bytes_can_refuse_a_link(tmp_path):
    (tmp_path / "real.json").write_text("{}", encoding="utf-8")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    assert read_bytes(tmp_path / "link.json", 10, "submission") == b"{}"
    with pytest.raises(InputError, match="link.json: is a link"):
        read_bytes(tmp_path / "link.json", 10, "submission", follow=False)


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_link_loop_among_submissions_is_reported_not_a_crash(tmp_path):
    from .test_integrity import graded_class

    key, files = graded_class(tmp_path)
    subs = files[0].parent
    (subs / "a.json").symlink_to(subs / "b.json")
    (subs / "b.json").symlink_to(subs / "a.json")
    (subs / "gone.json").symlink_to(tmp_path / "nowhere")
    result = runner.invoke(app, ["grade", str(key), str(subs), "--out", str(tmp_path / "g")])
    assert result.exit_code == 1, result.output
    said = "".join(result.output.split())
    assert "a.json:cannotreadthesubmissionfile" in said and (tmp_path / "g" / "results.csv").is_file()


def test_a_walk_that_meets_too_many_entries_stops_with_a_message(tmp_path, monkeypatch):
    import qkvquiz.core.folders as folders

    for i in range(30):
        (tmp_path / f"{i}.json").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(folders, "MAX_WALK_ENTRIES", 20)
    with pytest.raises(InputError, match="more than 20 files and folders"):
        walk_json_files(tmp_path)


def test_a_walk_is_bounded_in_depth(tmp_path, monkeypatch):
    import qkvquiz.core.folders as folders

    monkeypatch.setattr(folders, "MAX_WALK_DEPTH", 3)
    deep = tmp_path.joinpath(*"abcde")
    deep.mkdir(parents=True)
    with pytest.raises(InputError, match="nested more than 3 deep"):
        walk_json_files(tmp_path)


# --------------------------------------------------------------------------- sizes and ranges


def test_a_million_students_is_refused_before_anything_is_solved(tmp_path, monkeypatch):
    from qkvquiz import worksheet

    solved = []
    monkeypatch.setattr(worksheet, "solve_item", lambda item, *args, **kwargs: solved.append(item.id))
    one_line_error(generate("attention-basics", "--students", "1000000", "--public", "--out", str(tmp_path / "o")),
                   f"{MAX_STUDENTS:,}", "split the class")
    assert solved == []
    assert not (tmp_path / "o").exists()


def test_a_roster_longer_than_the_cap_is_refused(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("\n".join(f"s{i}" for i in range(MAX_STUDENTS + 1)), encoding="utf-8")
    one_line_error(generate("attention-basics", "--roster", str(roster), "--public", "--out", str(tmp_path / "o")),
                   "roster.txt", f"{MAX_STUDENTS + 1:,} ids")


def test_a_large_class_gets_a_memory_estimate_before_solving(tmp_path, monkeypatch):
    monkeypatch.setattr("qkvquiz.capacity.REPORT_FROM_STUDENTS", 3)
    monkeypatch.setattr("qkvquiz.capacity.physical_memory", lambda: 1000)
    result = generate("attention-basics", "-n", "3", "--public", "--out", str(tmp_path / "o"))
    one_line_error(result, "3 students: about", "of memory", "split the class")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("params", "field"), [
    ("{entries: [-1.0e+20, 1.0e+20]}", "params.entries"),
    ("{entries: [-100000000000000000000, 100000000000000000000]}", "params.entries"),
    ("{v_entries: [0, 1001]}", "params.v_entries"),
])
def test_ranges_that_would_overflow_later_are_refused_naming_item_and_field(tmp_path, params, field):
    path = tmp_path / "range.yaml"
    path.write_text(SPEC + f"    params: {params}\n", encoding="utf-8")
    with pytest.raises(SpecError, match=rf"range.yaml: item 1 \(q1, attention.output\) field '{field}'"):
        load_spec(path)
    one_line_error(generate(str(path), "-n", "1", "--public", "--out", str(tmp_path / "o")), field, "between -1,000 and 1,000")


def test_huge_fixed_givens_are_refused_naming_the_given(tmp_path):
    path = tmp_path / "givens.yaml"
    path.write_text("title: T\nitems:\n  - family: attention.weights\n    givens: {S: [[1.0e+300, 0], [0, 1]]}\n", encoding="utf-8")
    with pytest.raises(SpecError, match="field 'givens.S': entries must be between"):
        load_spec(path)


# --------------------------------------------------------------------------- secure by default


def test_the_first_generate_creates_the_secret_says_where_and_keys_the_set(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("QKVQUIZ_SECRET", raising=False)
    secret = tmp_path / "config" / "qkvquiz" / "secret"
    first = generate("attention-basics", "-n", "2", "--seed", "fall26", "--out", str(tmp_path / "a"))
    assert first.exit_code == 0, first.output
    said = "".join(first.output.split())
    assert f"Createdtheinstructorsecret{secret}" in said and "keyedbythesecret" in said
    assert secret.stat().st_mode & 0o077 == 0
    assert json.loads((tmp_path / "a" / "key.json").read_text(encoding="utf-8"))["keyed"] is True
    again = generate("attention-basics", "-n", "2", "--seed", "fall26", "--out", str(tmp_path / "b"))
    assert again.exit_code == 0 and "Created" not in again.output
    assert (tmp_path / "a" / "key.json").read_bytes() == (tmp_path / "b" / "key.json").read_bytes()


def test_public_makes_the_old_rebuildable_set_and_says_so(tmp_path, monkeypatch):
    from qkvquiz.key import key_to_json
    from qkvquiz.worksheet import build_worksheet

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    result = generate("attention-basics", "-n", "2", "--seed", "fall26", "--public", "--out", str(tmp_path / "p"))
    assert result.exit_code == 0, result.output
    assert "No secret (--public)" in " ".join(result.output.split())
    assert not (tmp_path / "config" / "qkvquiz" / "secret").exists()  # --public creates no secret
    doc = json.loads((tmp_path / "p" / "key.json").read_text(encoding="utf-8"))
    rebuilt = key_to_json(build_worksheet(load_spec(ROOT / "problem_bank" / "attention-basics.yaml"),
                                          ["s01", "s02"], "fall26"))
    assert doc["students"] == json.loads(json.dumps(rebuilt))["students"]
    one_line_error(generate("attention-basics", "-n", "2", "--public", "--secret-file", str(tmp_path / "s"),
                            "--out", str(tmp_path / "q")), "--public")


def test_a_bad_default_secret_is_a_message_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "qkvquiz").mkdir(parents=True)
    (tmp_path / "config" / "qkvquiz" / "secret").write_text("short\n", encoding="utf-8")
    one_line_error(generate("attention-basics", "-n", "1", "--out", str(tmp_path / "o")),
                   "secret", "at least 16 characters", "--public")


def test_a_submission_that_is_not_utf8_is_reported_with_its_line():
    with pytest.raises(ValueError, match="not UTF-8 text: line 2, column 6: byte 0xe9"):
        submission_from_bytes(b'{"student":\n "caf\xe9"}', "x.json")
