"""Output sets: `generate` and `grade` leave exactly the previous set or exactly the new one.

Fault tests kill the real command (SIGKILL, SIGTERM) while it stages, at every rename of
the switch, and while PDF workers render; then the folder, as any reader of it sees it
(``settle``, which reading a key does), must hold one complete set, and the next run must
leave nothing hidden behind. The exhaustive in-process tests stop a switch after each of
its renames.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from qkvquiz.core import outputs
from qkvquiz.cli import app
from qkvquiz.generate import generate_set
from qkvquiz.grade.grader import grade_files
from qkvquiz.grade.report import write_reports
from qkvquiz.key import load_key
from qkvquiz.core.outputs import OutputError, SetBusy, recover, settle, write_set
from qkvquiz.spec import load_spec
from qkvquiz.core.resources import bank_dir

from ..helpers import Killed, kill_at_rename, stop_while_workers_run

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec(bank_dir() / "attention-basics.yaml")
IDS = [f"s{i:02d}" for i in range(1, 31)]
runner = CliRunner()

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals and flock")


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every visible entry below ``folder``: content hash (files) and mode. Hidden top-level
    entries (a staging folder, a journal) are not part of any set."""
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if rel.parts[0].startswith("."):
            continue
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[rel.as_posix()] = (digest, stat.S_IMODE(path.lstat().st_mode))
    return found


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def with_user_files(folder: Path) -> Path:
    """A folder of the user's that a set must never touch."""
    (folder / "submissions").mkdir(parents=True, exist_ok=True)
    (folder / "submissions" / "ada.json").write_text('{"student": "ada"}')
    return folder


@pytest.fixture(scope="module")
def sets(tmp_path_factory) -> dict[str, Path]:
    """An old and a new generated set (other seed, fewer students), and grades of 3 and of 2 files."""
    base = tmp_path_factory.mktemp("sets")
    generate_set(SPEC, IDS, with_user_files(base / "old"), seed="old")
    generate_set(SPEC, IDS[:25], with_user_files(base / "new"), seed="new")
    doc = json.loads((base / "old" / "key.json").read_text())
    subs = base / "subs"
    subs.mkdir()
    files = []
    for s in doc["students"][:3]:
        files.append(subs / f"{s['student']}.json")
        files[-1].write_text(json.dumps({"student": s["student"], "answers": s["answers"]}))
    key = load_key(base / "old" / "key.json")
    write_reports(grade_files(key, files), base / "grades-old")
    write_reports(grade_files(key, files[:2]), base / "grades-new")
    return {"base": base, "old": base / "old", "new": base / "new", "key": base / "old" / "key.json",
            "subs": files, "grades-old": base / "grades-old", "grades-new": base / "grades-new"}


def child_env() -> dict[str, str]:
    """This process's environment as it is now: the session's private config and cache homes
    (set by conftest after this module was imported), and the package on the path."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def spawn(args: list[str], **kw) -> subprocess.Popen:
    # cwd: `python -m`/`-c` put the working folder first on sys.path, before PYTHONPATH.
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_env(), cwd=ROOT, **kw)


def kill_after_staging_starts(proc: subprocess.Popen, out: Path, sig: int, delay: float) -> None:
    deadline = time.monotonic() + 60
    while not list(out.glob(".qkvquiz-staging-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    if proc.poll() is None:
        proc.send_signal(sig)
    proc.wait(timeout=60)


def assert_one_set(out: Path, old: dict, new: dict, sig: int) -> str:
    """Exactly the old set or exactly the new one, as readers see it; nothing left after the next run."""
    if sig == signal.SIGTERM:
        assert hidden(out) == [], "a SIGTERM cleans up after itself"
    settle(out)  # what reading a key does first
    got = snapshot(out)
    assert got == old or got == new, sorted(set(got) ^ set(old))[:5] or "same names, other content"
    recover(out)  # what the next run does first
    assert hidden(out) == [] and snapshot(out) == got
    return "old" if got == old else "new"


# --------------------------------------------------------------------------- generate --force, killed


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_generate_force_killed_at_random_points_leaves_the_old_set_or_the_new_one(sig, sets, tmp_path):
    old, new = snapshot(sets["old"]), snapshot(sets["new"])
    assert old != new and {k for k in old if k.startswith("submissions")} == {"submissions", "submissions/ada.json"}
    rng = random.Random(sig)
    seen = []
    # The first kill comes as staging starts (the set is surely unfinished then), the others later.
    for trial, delay in enumerate((0.0, rng.uniform(0.0, 0.3), rng.uniform(0.0, 1.5))):
        out = tmp_path / f"t{trial}"
        shutil.copytree(sets["old"], out)
        proc = spawn(["-m", "qkvquiz", "generate", "attention-basics", "-n", "25", "--seed", "new", "--force", "--public",
                      "--out", str(out)])
        kill_after_staging_starts(proc, out, sig, delay)
        assert "Traceback" not in proc.stderr.read()
        seen.append(assert_one_set(out, old, new, sig))
    assert "old" in seen  # really killed midway at least once


def switch_driver(command: list[str], stop_at: int, stall: float = 60) -> list[str]:
    """Run the CLI, stalling ``stall`` seconds right after its ``stop_at``-th rename (the journal is the 1st)."""
    code = f"""
import os, sys, time
real = os.replace
count = [0]
def replace(src, dst):
    real(src, dst)
    count[0] += 1
    if count[0] == {stop_at}:
        print("AT", count[0], flush=True)
        time.sleep({stall})
os.replace = replace
from qkvquiz.cli import app
app({command!r}, prog_name="qkvquiz")
"""
    return ["-c", code]


@pytest.mark.slow
def test_generate_killed_after_each_rename_of_the_switch_is_finished_by_the_reader(sets, tmp_path):
    old, new = snapshot(sets["old"]), snapshot(sets["new"])
    # The journal, then key.json, key.md, students/ out, then students/, key.md, key.json in.
    points = range(1, 8)
    procs = {}
    for k in points:  # in parallel: each stalls at its own rename
        out = tmp_path / f"k{k}"
        shutil.copytree(sets["old"], out)
        procs[k] = (out, spawn(switch_driver(["generate", "attention-basics", "-n", "25", "--seed", "new", "--public",
                                              "--force", "--out", str(out)], k)))
    for k, (out, proc) in procs.items():
        try:
            assert proc.stdout.readline().split() == ["AT", str(k)], proc.stderr.read()
            assert (out / outputs.JOURNAL).exists()
            proc.kill()
            proc.wait(timeout=30)
        finally:
            proc.kill()
            proc.wait()
        # Reading the key finishes the switch: the new key, with the new set around it.
        assert list(load_key(out / "key.json").students) == [f"s{i:02d}" for i in range(1, 26)]
        assert snapshot(out) == new and hidden(out) == []
    assert old != new


@pytest.mark.slow
def test_a_sigterm_during_the_switch_waits_until_the_new_set_is_in_place(sets, tmp_path):
    out = tmp_path / "t"
    shutil.copytree(sets["old"], out)
    proc = spawn(switch_driver(["generate", "attention-basics", "-n", "25", "--seed", "new", "--public", "--force",
                                "--out", str(out)], 3, stall=1.0))
    try:
        assert proc.stdout.readline().split() == ["AT", "3"], proc.stderr.read()
        proc.send_signal(signal.SIGTERM)  # held back until the switch is done, then obeyed
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert "Traceback" not in proc.stderr.read()
    assert snapshot(out) == snapshot(sets["new"]) and hidden(out) == []


# --------------------------------------------------------------------------- grade, killed and repeated


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_grade_killed_at_random_points_leaves_the_old_results_or_the_new_ones(sig, sets, tmp_path):
    old, new = snapshot(sets["grades-old"]), snapshot(sets["grades-new"])
    assert len([k for k in old if k.startswith("feedback/")]) == 3 and len([k for k in new if k.startswith("feedback/")]) == 2
    rng = random.Random(sig)
    for trial in range(3):
        out = tmp_path / f"g{trial}"
        shutil.copytree(sets["grades-old"], out)
        proc = spawn(["-m", "qkvquiz", "grade", str(sets["key"]), *map(str, sets["subs"][:2]), "--out", str(out)])
        kill_after_staging_starts(proc, out, sig, rng.uniform(0.0, 0.3))
        assert "Traceback" not in proc.stderr.read()
        assert_one_set(out, old, new, sig)


@pytest.mark.slow
def test_grade_killed_after_each_rename_of_the_switch_is_finished_by_the_next_run(sets, tmp_path):
    new = snapshot(sets["grades-new"])
    procs = {}
    for k in range(1, 12):  # the journal, 5 entries out, 5 in
        out = tmp_path / f"k{k}"
        shutil.copytree(sets["grades-old"], out)
        procs[k] = (out, spawn(switch_driver(["grade", str(sets["key"]), *map(str, sets["subs"][:2]),
                                              "--out", str(out)], k)))
    for k, (out, proc) in procs.items():
        try:
            assert proc.stdout.readline().split() == ["AT", str(k)], proc.stderr.read()
        finally:
            proc.kill()
            proc.wait()
        recover(out)
        assert snapshot(out) == new and hidden(out) == []


def test_a_regrade_with_fewer_files_leaves_no_stale_feedback(sets, tmp_path):
    out = tmp_path / "grades"
    key = load_key(sets["key"])
    write_reports(grade_files(key, sets["subs"]), out)
    assert len(list((out / "feedback").iterdir())) == 3
    result = runner.invoke(app, ["grade", str(sets["key"]), str(sets["subs"][0]), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert [p.name for p in (out / "feedback").iterdir()] == [f"{sets['subs'][0].stem}.md"]
    assert runner.invoke(app, ["grade", str(sets["key"]), str(sets["subs"][0]), "--out", str(out),
                               "--no-feedback"]).exit_code == 0
    assert not (out / "feedback").exists() and hidden(out) == []


# --------------------------------------------------------------------------- the switch, exhaustively


@pytest.mark.parametrize("stop_at", range(0, 11))  # the journal, 5 entries out, 5 in
def test_a_switch_stopped_after_any_rename_ends_as_one_set(stop_at, sets, tmp_path, monkeypatch):
    out = tmp_path / "grades"
    shutil.copytree(sets["grades-old"], out)
    old, new = snapshot(sets["grades-old"]), snapshot(sets["grades-new"])
    report = grade_files(load_key(sets["key"]), sets["subs"][:2])
    real = os.replace
    kill_at_rename(monkeypatch, stop_at)
    with pytest.raises(Killed):
        write_reports(report, out)
    monkeypatch.setattr(os, "replace", real)
    assert (out / outputs.JOURNAL).exists() == (stop_at > 0)  # the journal is the commit point
    settle(out)
    assert snapshot(out) == (old if stop_at == 0 else new)
    recover(out)
    assert hidden(out) == []


# --------------------------------------------------------------------------- one run at a time, errors


def test_a_second_run_into_the_same_folder_is_refused(sets, tmp_path):
    out = tmp_path / "set"
    with write_set(out, {"key.json": True}, anchor="key.json"):
        result = runner.invoke(app, ["generate", "attention-basics", "-n", "2", "--out", str(out)])
        assert result.exit_code == 2 and "another qkvquiz run is writing to" in result.output
        graded = runner.invoke(app, ["grade", str(sets["key"]), str(sets["subs"][0]), "--out", str(out)])
        assert graded.exit_code == 2 and "another qkvquiz run" in graded.output
        with pytest.raises(SetBusy):
            generate_set(SPEC, ["a"], out)
    assert sorted(p.name for p in out.iterdir()) == []  # the held set was empty; nobody else wrote


def test_a_full_disk_while_staging_names_the_path_and_leaves_the_old_set(sets, tmp_path, monkeypatch):
    out = tmp_path / "set"
    shutil.copytree(sets["old"], out)
    before = snapshot(out)
    real_open = os.open
    opened = []

    def full(path, flags, *args, **kw):
        if flags & os.O_CREAT and ".qkvquiz-staging-" in str(path):
            opened.append(path)
            if len(opened) == 7:
                raise OSError(28, "No space left on device", str(path))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", full)
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "5", "--seed", "x", "--force", "--out", str(out)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"cannot write {out}/students/s0" in result.output.replace("\n", "") and "No space left" in result.output
    assert ".qkvquiz" not in result.output
    monkeypatch.setattr(os, "open", real_open)
    assert snapshot(out) == before and hidden(out) == []


def test_an_unwritable_target_is_a_message_not_a_traceback(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--out", str(blocker / "set")])
    assert result.exit_code == 2 and f"cannot write {blocker / 'set'}" in result.output.replace("\n", "")
    assert result.exception is None or isinstance(result.exception, SystemExit)
    audit = runner.invoke(app, ["audit", str(ROOT / "examples" / "audit-example.yaml"), "--out", str(blocker / "a.md")])
    assert audit.exit_code == 2 and f"cannot write {blocker / 'a.md'}" in audit.output.replace("\n", "")
    assert blocker.read_text() == "a file where the folder should be"


def test_an_error_in_the_body_discards_the_staged_set(tmp_path):
    with write_set(tmp_path, {"a": False}, anchor="a") as files:
        files.write("a", "old")
    with pytest.raises(RuntimeError):
        with write_set(tmp_path, {"a": False}, anchor="a") as files:
            files.write("a", "new")
            raise RuntimeError("boom")
    assert (tmp_path / "a").read_text() == "old" and hidden(tmp_path) == []
    with pytest.raises(ValueError, match="not an entry"):
        with write_set(tmp_path, {"a": False}, anchor="a") as files:
            files.write("../b", "x")



# --------------------------------------------------------------------------- journals qkvquiz did not write


def test_a_malformed_journal_is_ignored_with_a_warning(tmp_path, caplog):
    with write_set(tmp_path, {"a": False}, anchor="a") as files:
        files.write("a", "old")
    (tmp_path / outputs.JOURNAL).write_text(json.dumps({"stage": "/etc", "old": "x", "owned": [], "entries": []}))
    recover(tmp_path)
    assert "not a qkvquiz switch journal" in caplog.text and "nothing it names was moved" in caplog.text
    assert (tmp_path / "a").read_text() == "old"


def plant_journal(out: Path, owned: list[str], entries: dict[str, str], stage: str = "x", seal: str | None = None):
    """What someone who can write into a course folder plants: a journal and a staging folder."""
    staging = out / f"{outputs.STAGING_PREFIX}{stage}"
    staging.mkdir()
    for name, text in entries.items():
        (staging / name).write_text(text)
    doc = {"stage": staging.name, "old": f"{outputs.OLD_PREFIX}{stage}", "owned": owned, "entries": list(entries)}
    if seal is not None:
        doc["seal"] = seal
    (out / outputs.JOURNAL).write_text(json.dumps(doc))


def test_a_planted_journal_moves_and_deletes_nothing_and_the_run_goes_on(sets, tmp_path, caplog):
    course = tmp_path / "course"
    shutil.copytree(sets["old"], course)
    (course / "submissions").mkdir(exist_ok=True)
    (course / "submissions" / "ada.json").write_text("{}")
    (course / "notes.md").write_text("mine")
    before = snapshot(course)
    plant_journal(course, ["submissions", "students", "notes.md", "key.json"], {"key.json": '{"forged": true}'},
                  seal="0" * 64)
    settle(course)  # what reading the key does first
    assert load_key(course / "key.json").students == load_key(sets["old"] / "key.json").students
    assert {k: v for k, v in snapshot(course).items() if not k.startswith(".")} == before
    assert "not written by this user's qkvquiz" in caplog.text
    # A run into the folder writes its set; the planted journal is replaced by its own and gone after.
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "3", "--public", "--force", "--out", str(course)])
    assert result.exit_code == 0, result.output
    assert (course / "submissions" / "ada.json").read_text() == "{}" and (course / "notes.md").read_text() == "mine"
    assert not (course / outputs.JOURNAL).exists()


def test_a_journal_sealed_for_another_folder_or_staging_folder_is_ignored(tmp_path, caplog, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        with write_set(out, {"key.json": False, "keys": False}, anchor="key.json") as files:
            files.write("key.json", f"{out.name} key")
    real = os.replace
    kept: dict[str, str] = {}

    def stop_after_the_journal(src, dst):  # killed right after the journal is in place
        if "journal" in kept:
            raise Killed
        real(src, dst)
        if str(dst).endswith(outputs.JOURNAL):
            kept["journal"] = Path(dst).read_text()

    monkeypatch.setattr(os, "replace", stop_after_the_journal)
    with pytest.raises(Killed):
        with write_set(a, {"key.json": False, "keys": False}, anchor="key.json") as files:
            files.write("key.json", "new a key")
    monkeypatch.setattr(os, "replace", real)
    journal = json.loads(kept["journal"])
    assert journal["seal"]
    # The same journal and a staging folder of the same name, planted in b: not ours there.
    plant_journal(b, journal["owned"], {"key.json": "forged"}, stage=journal["stage"][len(outputs.STAGING_PREFIX):],
                  seal=journal["seal"])
    recover(b)
    assert (b / "key.json").read_text() == "b key" and "not written by this user's qkvquiz" in caplog.text
    # In a, the journal is ours and finishes the switch; replayed there afterwards with a new staging
    # folder of the same name, it is not (the staging folder is another one).
    recover(a)
    assert (a / "key.json").read_text() == "new a key"
    caplog.clear()
    plant_journal(a, journal["owned"], {"key.json": "forged"}, stage=journal["stage"][len(outputs.STAGING_PREFIX):],
                  seal=journal["seal"])
    recover(a)
    assert (a / "key.json").read_text() == "new a key" and "not written by this user's qkvquiz" in caplog.text


def test_files_in_folders_already_made_get_every_check_of_the_first(tmp_path):
    # Folders are checked and made once per set; the files that follow in them, and their
    # sibling folders, are written without parsing the path again, to the same effect.
    old = os.umask(0o022)
    try:
        with write_set(tmp_path, {"students": False, "keys": True, "key.json": True}, anchor="key.json") as files:
            for name in ("a", "b", "c"):
                files.write(f"students/{name}/sheet.md", name)
                files.write(f"students/{name}/answers.json", "{}")
                files.write(f"keys/{name}/key.md", "secret " + name)
            files.write("students/b/deeper/note.md", "deep")
            for bad in ("students/a/../../escape", "students/a/..", "students/a/./..", "other/x"):
                with pytest.raises(ValueError, match="not an entry"):
                    files.write(bad, "x")
            (files.stage / "students" / "d").write_text("a file where a folder goes")
            with pytest.raises(OutputError, match=r"cannot write .*students/d"):
                files.write("students/d/sheet.md", "d")
            (files.stage / "students" / "d").unlink()
            files.write("key.json", "{}")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert [p.read_text() for p in sorted((tmp_path / "students").glob("*/sheet.md"))] == ["a", "b", "c"]
    assert (tmp_path / "students" / "b" / "deeper" / "note.md").read_text() == "deep"
    assert not (tmp_path / "escape").exists() and not (tmp_path.parent / "escape").exists()
    for name in ("a", "b", "c"):
        assert mode(tmp_path / "keys" / name) == 0o700 and mode(tmp_path / "keys" / name / "key.md") == 0o600
        assert mode(tmp_path / "students" / name) == 0o755 and mode(tmp_path / "students" / name / "sheet.md") == 0o644


def test_a_file_written_in_pieces_is_their_text_in_utf8(tmp_path):
    pieces = ["Schlüssel ", "√2 = 1.41", "\n"] * 200_000 + ["末"]  # more than one batch
    with write_set(tmp_path, {"key.md": True}, anchor="key.md") as files:
        files.write_pieces("key.md", iter(pieces))
    assert (tmp_path / "key.md").read_text(encoding="utf-8") == "".join(pieces)
    assert stat.S_IMODE((tmp_path / "key.md").stat().st_mode) == 0o600

    def failing():
        yield "a start"
        raise RuntimeError("the template failed")

    with pytest.raises(RuntimeError, match="template failed"):
        with write_set(tmp_path, {"key.md": True}, anchor="key.md") as files:
            files.write_pieces("key.md", failing())
    assert (tmp_path / "key.md").read_text(encoding="utf-8") == "".join(pieces)  # the old set stays


# --------------------------------------------------------------------------- permissions


@pytest.mark.slow
def test_everything_that_holds_an_answer_is_private_and_student_files_are_not(sets, tmp_path):
    old = os.umask(0o022)
    try:
        generate_set(SPEC, ["ada"], tmp_path / "set", formats="md,pdf", class_pdf=True, workers=1)
        write_reports(grade_files(load_key(sets["key"]), sets["subs"][:1]), tmp_path / "grades")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    out, grades = tmp_path / "set", tmp_path / "grades"
    for private in (out / "key.json", out / "key.md", out / "key.pdf", out / "keys" / "ada.pdf",
                    out / "cellmap.json", grades / "results.json", grades / "results.csv",
                    *(grades / "feedback").iterdir()):
        assert mode(private) == 0o600, private
    assert mode(out / "keys") == mode(grades / "feedback") == 0o700
    for public in (out / "class.pdf", *(out / "students" / "ada").iterdir(), grades / "item-analysis.md"):
        assert mode(public) == 0o644, public
    assert mode(out / "students") == mode(out / "students" / "ada") == mode(out) == 0o755


# --------------------------------------------------------------------------- PDF workers end with the run


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_pdf_workers_end_with_the_run(sig, sets, tmp_path):
    pytest.importorskip("weasyprint")
    out = tmp_path / "set"
    shutil.copytree(sets["old"], out)
    before = snapshot(out)
    proc = spawn(["-m", "qkvquiz", "generate", "attention-basics", "-n", "6", "--format", "pdf", "--force",
                  "--workers", "2", "--out", str(out)])
    stop_while_workers_run(proc, sig, start_within=60, running=0.3, exit_within=30, gone_within=3)
    settle(out)
    assert snapshot(out) == before
    recover(out)
    assert hidden(out) == []
