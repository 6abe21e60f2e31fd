"""A generated Gradescope bundle, run locally on a folder laid out as Gradescope's /autograder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from importlib import metadata as importlib_metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from typer.testing import CliRunner

from qkvquiz.cli import app
from qkvquiz.exchange.gradescope import MIN_PYTHON, VISIBILITIES

from ..helpers import make_key

ROSTER = "student,name,email,sis_id\nada,Ada Lovelace,ada@example.edu,S1\nalan,Alan Turing,alan@example.edu,S2\n"


def autograder(tmp_path: Path, roster: bool, *options: str, students: tuple[str, ...] = ("ada", "alan"),
               roster_text: str = ROSTER) -> tuple[Path, dict]:
    """An exported bundle unpacked as Gradescope lays it out (``roster=False``: one that trusts file ids)."""
    _key, doc = make_key(students=students)
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    (tmp_path / "roster.csv").write_text(roster_text, encoding="utf-8")
    args = ["export", "gradescope", str(tmp_path / "key.json"), "--out", str(tmp_path / "ag.zip"), *options]
    args += ["--roster", str(tmp_path / "roster.csv")] if roster else ["--trust-file-ids"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert os.stat(tmp_path / "ag.zip").st_mode & 0o077 == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "ag.zip") as zf:
        names = zf.namelist()
        assert {"setup.sh", "run_autograder", "key.json", "requirements.txt"} <= set(names)  # at the zip's top
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    return root, doc


def run_bundle(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"QKVQUIZ_AUTOGRADER_ROOT": str(root), "QKVQUIZ_PYTHON": sys.executable})
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300, cwd=root, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))


def check_format(doc: dict) -> None:
    """Gradescope's results.json: a score, tests with name/score/max_score/output/visibility."""
    assert isinstance(doc["score"], (int, float))
    for test in doc["tests"]:
        assert set(test) <= {"name", "score", "max_score", "output", "visibility", "status", "name_format",
                             "number", "tags", "extra_data", "output_format"}
        assert test["visibility"] in VISIBILITIES and isinstance(test["name"], str)
    assert doc["visibility"] in VISIBILITIES


def test_bundle_grades_a_submission(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    entry = doc["students"][1]  # alan, who writes ada's id by mistake: Gradescope's identity wins
    hand_in = {"student": "ada", "variant": entry["variant"], "answers": entry["answers"]}
    (root / "submission" / "submission.json").write_text(json.dumps(hand_in), encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps(
        {"id": 1, "users": [{"email": "alan@example.edu", "id": 7, "name": "Alan Turing"}]}), encoding="utf-8")
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == pytest.approx(sum(p["points"] for i in doc["items"] for p in i["parts"]))
    parts = part_tests(result)
    assert len(parts) == sum(len(i["parts"]) for i in doc["items"])
    assert all(t["visibility"] == "after_due_date" and t["score"] == t["max_score"] for t in parts)
    summary = next(t for t in result["tests"] if t["name"] == "Summary")
    assert summary["visibility"] == "visible" and "'alan'" in summary["output"]


def upload(root: Path, *hand_ins: dict, users: list[dict] | None = None) -> None:
    """``hand_ins`` as the submission's files (a.json, b.json …), uploaded by ``users`` (Gradescope's
    submission_metadata.json; none written where None)."""
    for old in (root / "submission").iterdir():
        old.unlink()
    for name, hand_in in zip("abcdefgh", hand_ins):
        (root / "submission" / f"{name}.json").write_text(json.dumps(hand_in), encoding="utf-8")
    if users is not None:
        (root / "submission_metadata.json").write_text(json.dumps({"id": 1, "users": users}), encoding="utf-8")


def own_file(entry: dict) -> dict:
    """The right answers of ``entry`` (a student of the key), as that student's file."""
    return json.loads(json.dumps({"student": entry["student"], "variant": entry["variant"], "answers": entry["answers"]}))


ADA = {"email": "ada@example.edu", "id": 7, "name": "Ada Lovelace"}
ALAN = {"email": "alan@example.edu", "id": 8, "name": "Alan Turing"}


def test_export_without_a_roster_is_refused_unless_file_ids_are_trusted(tmp_path):
    _key, doc = make_key(students=("ada", "alan"))
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    args = ["export", "gradescope", str(tmp_path / "key.json"), "--out", str(tmp_path / "ag.zip")]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output
    said = " ".join(refused.output.split())
    assert "no --roster" in said and "would score as its owner" in said  # why
    assert "--roster roster.csv" in said and "--trust-file-ids" in said  # what to do
    assert not (tmp_path / "ag.zip").exists()
    trusted = CliRunner().invoke(app, [*args, "--trust-file-ids"])
    assert trusted.exit_code == 0, trusted.output
    assert "copied file scores as its owner" in " ".join(trusted.output.split())


def test_help_says_what_trusting_file_ids_means():
    shown = CliRunner().invoke(app, ["export", "gradescope", "--help"], terminal_width=200)
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", shown.output).split())
    assert "--trust-file-ids" in said
    assert "the student id written in the uploaded file decides whose variant is graded" in said
    assert "scores as its owner" in said and "not for marks" in said


@pytest.mark.slow
def test_a_trusting_bundle_grades_a_copied_file_as_its_owner_and_says_so(tmp_path):
    root, doc = autograder(tmp_path, roster=False)
    upload(root, own_file(doc["students"][0]), users=[ALAN])  # alan hands in ada's file
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == pytest.approx(sum(p["points"] for i in doc["items"] for p in i["parts"]))
    assert "Graded as student 'ada', the id written in the file." in result["output"]


@pytest.mark.slow
def test_with_a_roster_a_classmates_file_is_graded_on_the_uploaders_variant(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    upload(root, own_file(doc["students"][0]), users=[ALAN])  # ada's file, unchanged, uploaded by alan
    result = run_bundle(root)
    total = sum(p["points"] for i in doc["items"] for p in i["parts"])
    assert result["score"] < total / 2  # ada's answers, checked against alan's variant
    assert "a.json names student 'ada'" in result["output"] and "'alan'" in result["output"]


def total_points(doc: dict) -> float:
    return sum(p["points"] for i in doc["items"] for p in i["parts"])


def part_tests(result: dict) -> list[dict]:
    return [t for t in result["tests"] if "max_score" in t]


@pytest.mark.slow
def test_a_group_submission_credits_every_member_each_on_their_own_variant(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    ada, alan = doc["students"]
    upload(root, own_file(ada), own_file(alan), users=[ADA, ALAN])
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == pytest.approx(total_points(doc))
    tests = part_tests(result)
    asked = sum(len(i["parts"]) for i in doc["items"])
    assert len(tests) == 2 * asked  # each member's parts, each against their own variant
    assert {t["name"].split(" — ")[0] for t in tests} == {"ada", "alan"}
    assert all(t["score"] == t["max_score"] for t in tests)

    upload(root, own_file(ada), wrong_hand_in(alan), users=[ADA, ALAN])  # alan's answers are wrong
    result = run_bundle(root)
    alans = sum(t["score"] for t in part_tests(result) if t["name"].startswith("alan — "))
    adas = sum(t["score"] for t in part_tests(result) if t["name"].startswith("ada — "))
    assert adas == pytest.approx(total_points(doc)) and alans < adas
    assert result["score"] == pytest.approx(alans)  # the one score Gradescope holds: the lowest member's
    assert "lowest of the members' scores" in result["output"]
    scores = next(t["output"] for t in result["tests"] if t["name"] == "Score by part")  # after the due date
    assert f"ada: {total_points(doc):g} of {total_points(doc):g} points." in scores
    assert f"alan: {alans:g} of {total_points(doc):g} points." in scores


@pytest.mark.slow
def test_a_groups_one_file_counts_for_every_member_as_grade_counts_it(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    ada = doc["students"][0]
    upload(root, own_file(ada), users=[ADA, ALAN])  # one file for the group, naming ada
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == pytest.approx(total_points(doc))  # alan has the group file's result too
    assert "every member of the group gets that result" in result["output"]
    assert {t["name"].split(" — ")[0] for t in part_tests(result)} == {"ada", "alan"}
    # Several files and none naming alan: he is not credited, and the submission books 0.
    upload(root, own_file(ada), own_file(ada), users=[ADA, ALAN])
    result = run_bundle(root)
    assert result["score"] == 0 and "none names 'alan'" in result["output"]


@pytest.mark.slow
@pytest.mark.parametrize("stranger", [
    {"email": "eve@example.edu", "id": 9, "name": "Eve"},  # not in the roster
    {"email": "ada2@example.edu", "sid": "S1", "id": 9, "name": "Someone"},  # a second user matching ada
])
def test_a_group_with_a_member_the_roster_cannot_place_is_not_credited(tmp_path, stranger):
    root, doc = autograder(tmp_path, roster=True)
    upload(root, own_file(doc["students"][0]), users=[ADA, stranger])
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == 0 and "Not graded:" in result["output"]


@pytest.mark.slow
def test_a_gradescope_name_never_places_a_user_on_a_roster_entry_whose_email_is_another(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    ada = doc["students"][0]
    upload(root, own_file(ada), users=[{"email": "mallory@example.edu", "id": 9, "name": "Ada Lovelace"}])
    result = run_bundle(root)
    assert result["score"] == 0 and "mallory@example.edu is not in the roster" in result["output"]
    # A roster without emails has only the name to go by.
    (tmp_path / "names").mkdir()
    root, doc = autograder(tmp_path / "names", roster=True, roster_text="student,name\nada,Ada Lovelace\nalan,Alan Turing\n")
    upload(root, own_file(doc["students"][0]), users=[{"email": "ada.l@example.org", "id": 7, "name": "Ada Lovelace"}])
    assert run_bundle(root)["score"] == pytest.approx(total_points(doc))


def seen_before_the_due_date(result: dict) -> list:
    """All a student sees of results.json before the due date: the top-level output (where the top
    level is visible; counted either way, to be safe), the tests shown at once, and Gradescope's
    total where no scored test is held back (its rule: hidden tests hide the total)."""
    seen: list = [result["output"]]
    seen += [(t["name"], t["output"], t.get("score")) for t in result["tests"] if t["visibility"] == "visible"]
    if all(t["visibility"] == "visible" for t in result["tests"] if "score" in t):
        seen.append(result["score"])
    return seen


def one_entry_right(entry: dict) -> tuple[dict, dict]:
    """``entry``'s answers with one entry of its first matrix part wrong, and the same with it right:
    two uploads of a student searching entry by entry."""
    part = next(k for k, v in entry["answers"].items() if isinstance(v, list) and isinstance(v[0], list))
    wrong = json.loads(json.dumps(entry["answers"]))
    wrong[part][0][0] = wrong[part][0][0] + 5
    return ({"student": entry["student"], "answers": wrong}, own_file(entry))


@pytest.mark.slow
@pytest.mark.parametrize("show, leaks", [(None, False), ("after-due", False), ("total", True), ("per-part", True)])
def test_what_shows_before_the_due_date_moves_with_one_entry_only_where_show_says_so(tmp_path, show, leaks):
    root, doc = autograder(tmp_path, True, *(["--show", show] if show else []))
    seen = []
    for hand_in in one_entry_right(doc["students"][0]):
        upload(root, hand_in, users=[ADA])
        result = run_bundle(root)
        check_format(result)
        seen.append(seen_before_the_due_date(result))
    assert (seen[0] != seen[1]) == leaks
    if not leaks:  # after the due date everything shows: the total, each part's score and feedback
        later = {t["name"]: t for t in result["tests"]}
        assert later["Score by part"]["visibility"] == "after_due_date" and result["visibility"] == "after_due_date"
        assert f"T: {total_points(doc):g} of {total_points(doc):g} points." in later["Score by part"]["output"]
        assert all(t["visibility"] == "after_due_date" for t in part_tests(result))


@pytest.mark.slow
def test_show_total_gives_the_total_and_no_part_score(tmp_path):
    root, doc = autograder(tmp_path, True, "--show", "total")
    upload(root, wrong_hand_in(doc["students"][0]), users=[ADA])
    result = run_bundle(root)
    summary = result["tests"][0]
    assert summary["name"] == "Summary" and summary["visibility"] == "visible"
    assert re.match(r"T: [\d.]+ of 5 points\.", summary["output"]) and result["visibility"] == "visible"
    assert not re.search(r"\d/\d", summary["output"])  # no "q1.scores: 0.4/1"
    assert all(t["visibility"] == "after_due_date" for t in part_tests(result))


@pytest.mark.slow
def test_show_per_part_gives_each_parts_score_in_the_summary(tmp_path):
    root, doc = autograder(tmp_path, True, "--show", "per-part")
    upload(root, wrong_hand_in(doc["students"][0]), users=[ADA])
    summary = run_bundle(root)["tests"][0]
    assert re.search(r"^q1\.scores: [\d.]+/1 \(\w+\)$", summary["output"], re.MULTILINE)


@pytest.mark.slow
def test_after_due_says_which_parts_are_missing_or_unreadable_and_no_score(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    hand_in = own_file(doc["students"][0])
    parts = list(hand_in["answers"])
    del hand_in["answers"][parts[0]]
    hand_in["answers"][parts[1]] = [["not", "numbers"]]
    upload(root, hand_in, users=[ADA])
    result = run_bundle(root)
    said = result["tests"][0]["output"]
    assert f"No answer: {parts[0]}." in said and f"{parts[1]} could not be read: " in said
    assert "points" not in said and not re.search(r"\d/\d", said)
    upload(root, own_file(doc["students"][0]), users=[ADA])
    assert "Every part has a readable answer." in run_bundle(root)["tests"][0]["output"]


@pytest.mark.slow
def test_visibility_visible_implies_per_part_and_refuses_a_show_that_holds_back(tmp_path):
    root, doc = autograder(tmp_path, True, "--visibility", "visible")
    upload(root, own_file(doc["students"][0]), users=[ADA])
    result = run_bundle(root)
    assert all(t["visibility"] == "visible" for t in result["tests"]) and result["visibility"] == "visible"
    assert re.search(r"^q1\.scores: 1/1 \(correct\)$", result["tests"][0]["output"], re.MULTILINE)
    refused = CliRunner().invoke(app, ["export", "gradescope", str(tmp_path / "key.json"), "--roster",
                                       str(tmp_path / "roster.csv"), "--visibility", "visible", "--show", "total",
                                       "--out", str(tmp_path / "other.zip")])
    assert refused.exit_code == 2 and "choose show 'per-part'" in " ".join(refused.output.split())
    unknown = CliRunner().invoke(app, ["export", "gradescope", str(tmp_path / "key.json"), "--roster",
                                       str(tmp_path / "roster.csv"), "--show", "scores", "--out", str(tmp_path / "o.zip")])
    assert unknown.exit_code == 2 and "after-due, total, per-part" in unknown.output


def test_the_summary_of_a_group_is_in_the_keys_language():
    from qkvquiz.exchange.autograder import Member, submission_document
    from qkvquiz.core.submissions import Submission
    from qkvquiz.grade.grader import grade
    from qkvquiz.key import key_from_json, key_to_json
    from qkvquiz.spec import parse_spec
    from qkvquiz.worksheet import build_worksheet

    spec = parse_spec({"title": "注意力", "lang": "zh", "items": [{"family": "attention.scores"}]})
    key = key_from_json(json.loads(json.dumps(key_to_json(build_worksheet(spec, ["a", "b"], 1)))))
    report = grade(key, [Submission("a.json", "a", {}), Submission("b.json", "b", key.answers[1])])
    cfg = {"visibility": "after_due_date", "summary_visibility": "visible", "show": "after-due"}
    said = submission_document(report, [Member("a", "a"), Member("b", "b")], cfg, [])["tests"][0]["output"]
    assert said.splitlines()[1:] == [
        "分数和各部分的反馈在截止日期之后显示。",
        "小组提交：每个文件按它写明的成员的变体评分；小组只上传了一个文件时，没有文件写明的成员得到该小组文件的结果（上传了多个文件时"
        "则没有）。这份提交的分数取各成员分数中最低的一个，因为 Gradescope 给每位成员同一个分数。",
        "a — 没有答案：q1.scores。", "b — 每一部分都有可读取的答案。"]


@pytest.mark.slow
def test_bundle_wrong_answers_show_expected_only_in_hidden_tests(tmp_path):
    root, doc = autograder(tmp_path, roster=False)
    (root / "submission" / "a.json").write_text(json.dumps(wrong_hand_in(doc["students"][0])), encoding="utf-8")
    result = run_bundle(root)
    check_format(result)
    summary = next(t for t in result["tests"] if t["name"] == "Summary")
    assert "Expected" not in summary["output"] and "Expected" not in result["output"]
    assert any("Expected" in t["output"] for t in result["tests"] if t["name"] != "Summary")


@pytest.mark.slow
def test_bundle_without_a_json_file(tmp_path):
    root, _ = autograder(tmp_path, roster=False)
    (root / "submission" / "notes.txt").write_text("hi", encoding="utf-8")
    result = run_bundle(root)
    check_format(result)
    assert result["score"] == 0 and "No .json file" in result["output"]


def wrong_hand_in(entry: dict) -> dict:
    """``entry``'s answers with every 1 made a 7 (and every scalar 0): wrong in most entries."""
    answers = {k: (0 if not isinstance(v, list) else json.loads(json.dumps(v).replace("1", "7")))
               for k, v in entry["answers"].items()}
    return {"student": entry["student"], "answers": answers}


def required(root: Path, python_version: str | None = None) -> dict[str, list[Requirement]]:
    """The bundle's requirements.txt by package, only the lines whose marker holds on ``python_version``
    (all lines where None)."""
    by_name: dict[str, list[Requirement]] = {}
    for line in (root / "source" / "requirements.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            req = Requirement(line)
            if python_version is None or req.marker is None or req.marker.evaluate(
                    {"python_version": python_version, "python_full_version": python_version + ".0"}):
                by_name.setdefault(canonicalize_name(req.name), []).append(req)
    return by_name


# Runs the entry point as `python -m` does (run_autograder's way) and writes, as it exits, every
# top-level module it loaded that was not already there when the interpreter started.
IMPORT_PROBE = """
import atexit, json, runpy, sys
before, out_path = set(sys.modules), sys.argv[1]
def dump():
    loaded = {}
    for name in set(sys.modules) - before:
        top = name.split(".")[0]
        module = sys.modules.get(top)
        loaded[top] = getattr(module, "__file__", None)
    with open(out_path, "w", encoding="utf-8") as out:
        json.dump(loaded, out)
atexit.register(dump)
sys.argv = [sys.argv[0], sys.argv[2]]
runpy.run_module("qkvquiz.exchange.autograder", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_requirements_name_every_package_grading_imports_and_no_other(tmp_path):
    root, doc = autograder(tmp_path, roster=True)
    # Wrong answers and a roster: the feedback, the expected values and the roster's matching all run.
    (root / "submission" / "a.json").write_text(json.dumps(wrong_hand_in(doc["students"][0])), encoding="utf-8")
    (root / "submission_metadata.json").write_text(json.dumps(
        {"id": 1, "users": [{"email": "ada@example.edu", "id": 7, "name": "Ada Lovelace"}]}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"QKVQUIZ_AUTOGRADER_ROOT": str(root), "PYTHONPATH": str(root / "source" / "vendor")})
    loaded_path = tmp_path / "loaded.json"
    subprocess.run([sys.executable, "-c", IMPORT_PROBE, str(loaded_path), str(root / "source")], env=env,
                   cwd=root, check=True, timeout=300)
    loaded: dict[str, str | None] = json.loads(loaded_path.read_text(encoding="utf-8"))
    assert loaded["qkvquiz"].startswith(str(root / "source" / "vendor"))  # the bundle's copy, not this one
    assert json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["tests"]  # it graded

    owners = importlib_metadata.packages_distributions()
    imported, unowned = set(), []
    for name, file in loaded.items():
        if name == "qkvquiz" or name in sys.stdlib_module_names:
            continue
        if name in owners:
            imported |= {canonicalize_name(d) for d in owners[name]}
        elif file is not None:  # a module from a file no installed distribution claims
            unowned.append(f"{name} ({file})")
    assert not unowned, unowned
    assert "numpy" in imported  # the probe saw the grading run's imports
    named = set(required(root))
    assert not imported - named, f"grading imports packages requirements.txt does not name: {imported - named}"
    assert not named - imported, f"requirements.txt names packages grading never imports: {named - imported}"


@pytest.mark.slow
@pytest.mark.parametrize("python_version", ["3.10", "3.11", "3.12", "3.13"])
def test_requirements_are_ranges_one_line_per_package_on_each_python(tmp_path, python_version):
    root, _ = autograder(tmp_path, roster=False)
    text = (root / "source" / "requirements.txt").read_text(encoding="utf-8")
    assert "==" not in text.replace('python_version == "', "")  # no pin: the image's Python chooses
    assert re.search(r"^# Exported with Python \d+\.\d+\.\d+: numpy \S+", text, re.MULTILINE)  # the versions used here
    by_name = required(root, python_version)
    assert set(by_name) == set(required(root))  # every package on every supported Python
    for name, reqs in by_name.items():
        assert len(reqs) == 1, (python_version, name, [str(r) for r in reqs])  # the markers partition the Pythons
        ops = {spec.operator for spec in reqs[0].specifier}
        assert ops == {">=", "<"}, str(reqs[0])  # a floor and a cap


@pytest.mark.slow
def test_setup_sh_names_the_image_to_choose_on_an_old_python(tmp_path):
    """The base images' own Pythons (18.04: 3.6, 20.04: 3.8) where pyenv has them, else any
    older than MIN_PYTHON; setup.sh must stop before pip with the image to choose."""
    olds = [p for minor in ("3.6", "3.8") if (p := pyenv_python(minor))] or \
        [p for minor in range(6, MIN_PYTHON[1]) if (p := pyenv_python(f"3.{minor}"))][:1]
    if not olds:
        pytest.skip(f"no Python older than {MIN_PYTHON[0]}.{MIN_PYTHON[1]} under {pyenv_versions()}")
    root, _ = autograder(tmp_path, roster=False)
    for python in olds:
        bin_dir = guarded_bin(tmp_path / f"bin-{python.name}")
        (bin_dir / "python3").symlink_to(python)
        env = bare_env(bin_dir)
        env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""})  # were the check broken, pip installs nothing
        minor = subprocess.run(["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], env=env,
                               capture_output=True, text=True, check=True).stdout.strip()
        done = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode != 0
        needs = f"Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer"
        assert f"python3 is {minor}; the bundled qkvquiz needs {needs}" in done.stderr, done.stderr
        assert "Ubuntu 22.04" in done.stderr and "Configure Autograder" in done.stderr
        assert "apt-get" not in done.stderr and "pip" not in done.stdout + done.stderr  # stopped before both


def pyenv_versions() -> Path:
    return Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"


def pyenv_python(minor: str) -> Path | None:
    """The newest release of Python ``minor`` ("3.10") installed by pyenv, or None."""
    found = [p for p in pyenv_versions().glob(f"{minor}.*/bin/python{minor}")
             if re.fullmatch(rf"{re.escape(minor)}\.\d+", p.parent.parent.name)]  # no 3.10-dev or 3.10.0rc1
    return max(found, key=lambda p: int(p.parent.parent.name.rsplit(".", 1)[1]), default=None)


def guarded_bin(bin_dir: Path) -> Path:
    """A folder for the front of PATH whose apt-get fails: setup.sh must never install system
    packages from a test (it would, were python3 or its pip missing)."""
    bin_dir.mkdir(parents=True)
    (bin_dir / "apt-get").write_text("#!/bin/sh\necho 'apt-get called by setup.sh in a test' >&2\nexit 97\n")
    (bin_dir / "apt-get").chmod(0o755)
    return bin_dir


def bare_env(*bin_dirs: Path) -> dict[str, str]:
    """This environment with ``bin_dirs`` first on PATH and nothing that would choose another Python
    or another qkvquiz."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "QKVQUIZ_PYTHON", "QKVQUIZ_AUTOGRADER_ROOT")}
    env["PATH"] = os.pathsep.join([*map(str, bin_dirs), env.get("PATH", "")])
    return env


@pytest.mark.slow
def test_bundle_installs_and_grades_on_python_3_10(tmp_path):
    """Gradescope's default image (Ubuntu 22.04) in small: a Python 3.10 whose python3 and pip
    are those setup.sh finds, the bundle's setup.sh run as Gradescope runs it, then
    run_autograder on a right and a wrong upload in a folder laid out as /autograder."""
    python = pyenv_python("3.10")
    if python is None:
        pytest.skip(f"no Python 3.10 under {pyenv_versions()}")
    root, doc = autograder(tmp_path, roster=False)
    venv = tmp_path / "py310"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, timeout=120)
    env = bare_env(guarded_bin(tmp_path / "bin"), venv / "bin")  # python3 is the venv's, as if the image's
    # Without a network, fail in seconds rather than after pip's minutes of retries.
    env.update({"PIP_RETRIES": "1", "PIP_TIMEOUT": "20", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})

    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                           timeout=600, cwd=tmp_path, check=False)
    if setup.returncode != 0:
        # Our ranges failed, or no package registry answers: ask it for numpy with no range at all.
        probe = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "download", "--no-deps", "--dest",
                                str(tmp_path / "probe"), "numpy"], env=env, capture_output=True, text=True,
                               timeout=300, check=False)
        if probe.returncode != 0:
            pytest.skip(f"no package registry reachable from pip: {probe.stderr.strip()[-300:]}")
        pytest.fail(f"setup.sh failed on Python 3.10, though pip can fetch numpy:\n{setup.stdout}\n{setup.stderr}")
    versions = "import sys, numpy; print('%d.%d' % sys.version_info[:2], numpy.__version__)"
    found = subprocess.run(["python3", "-c", versions], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert found[0] == "3.10", found
    print(f"Python 3.10 resolved numpy {found[1]}")  # shown with -rP

    total = sum(p["points"] for i in doc["items"] for p in i["parts"])
    entry = doc["students"][0]
    right = {"student": entry["student"], "variant": entry["variant"], "answers": entry["answers"]}
    for hand_in, full_marks in ((right, True), (wrong_hand_in(entry), False)):
        for old in (root / "submission").iterdir():
            old.unlink()
        (root / "results" / "results.json").unlink(missing_ok=True)
        (root / "submission" / "submission.json").write_text(json.dumps(hand_in), encoding="utf-8")
        graded = subprocess.run(["bash", str(root / "source" / "run_autograder")],
                                env={**env, "QKVQUIZ_AUTOGRADER_ROOT": str(root)}, capture_output=True, text=True,
                                timeout=300, cwd=tmp_path, check=False)
        assert graded.returncode == 0, graded.stderr
        result = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
        check_format(result)
        if full_marks:
            assert result["score"] == pytest.approx(total), result["output"]
        else:
            assert result["score"] < total and any("Expected" in t["output"] for t in result["tests"])
