"""Integrity and safety: secret keys, nothing leaks to students, hostile input never harms.

The leak rule (``test_no_student_file_shows_a_step_value_that_is_not_a_given``), stated once:
a step entry x (finite; every step of the family, helper steps included) *leaks* when one of its
renderings — ``num(x, d)`` and ``num(x, 3)`` (d = the item's ``decimals``, 3 = the sheet's
default), the fixed-width forms ``f"{x:.{d}f}"``, ``f"{x:.3f}"`` and ``f"{x:.2f}"`` (a matrix of
non-integers, or the 2 decimals students are asked for), ``repr(x)`` (as JSON or Python print
it: ``1.5``, ``2.0``) and ``f"{x:g}"`` — appears as a number token in a student file. Tokens are maximal ``-?digits(.digits)?`` runs
that touch no letter, digit, dot or underscore, so ``q1``, ``s01`` and ``EA20-EACA`` hold none.
Two kinds of rendering are exempt, because the sheet shows them for other reasons:
the renderings of the student's own givens (a step may copy a given, as masked scores copy S),
and the numbers the sheet states as prose: every integer from −K to K, where K is the largest
of the spec's array dimensions, integer params, points and the number of items
("3 tokens", "Problem 2", "query 1 may attend only to keys 2 and 3"), the points written
with 2 decimals, and any number in the spec's own prose (title, instructions, item titles). Exact dependence on step values, small integers included, is covered
separately by ``test_student_files_do_not_depend_on_any_step_value``: replacing every step
value with a random canary leaves every student file byte-for-byte the same.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import jinja2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from typer.testing import CliRunner

import qkvquiz
import qkvquiz.generate as generate_module
from qkvquiz.cli import app
from qkvquiz.cli.generate import secrecy_note
from qkvquiz.families import REGISTRY
from qkvquiz.files import read_roster, safe_name, write_atomic
from qkvquiz.core.outputs import write_set
from qkvquiz.generate import generate_set
from qkvquiz.core.submissions import MAX_NESTING, MAX_SUBMISSION_BYTES, Submission, submission_from_bytes, submission_from_json
from qkvquiz.grade.grader import grade, grade_files
from qkvquiz.grade.report import results_csv, write_reports
from qkvquiz.core.resources import templates_dir
from qkvquiz.key import key_from_json, key_to_json, load_key
from qkvquiz.render.latex import num
from qkvquiz.render.environment import environment
from qkvquiz.render.sandbox import TemplateSandbox
from qkvquiz.core.secret import SECRET_ENV, SecretError, create_secret, load_secret
from qkvquiz.core.seeding import variant_code, variant_key
from qkvquiz.spec import SpecError, load_spec, parse_spec
from qkvquiz.core.csvsafe import safe_cell
from qkvquiz.core.untrusted import md_code
from qkvquiz.worksheet import build_worksheet, solve_item

from ..helpers import BASIC_ITEMS, canary_worksheet

runner = CliRunner()
ROOT = Path(qkvquiz.__file__).resolve().parent.parent
SECRET_A = b"a" * 32
SECRET_B = b"b" * 32


def basic_spec():
    return parse_spec({"title": "Week 3", "items": BASIC_ITEMS})


def givens_of(ws):
    return [{g: env[g] for g in item.family.given_names} for item, env in zip(ws.spec.items, ws.envs)]


def same_givens(a, b) -> bool:
    return all(np.array_equal(x[k], y[k]) for x, y in zip(givens_of(a), givens_of(b)) for k in x)


# --------------------------------------------------------------------------- secret seeds


def test_the_same_secret_gives_the_same_variants_and_two_secrets_different_ones():
    ids = [f"s{i:02d}" for i in range(8)]
    first = build_worksheet(basic_spec(), ids, "fall", secret=SECRET_A)
    again = build_worksheet(basic_spec(), ids, "fall", secret=SECRET_A)
    other = build_worksheet(basic_spec(), ids, "fall", secret=SECRET_B)
    public = build_worksheet(basic_spec(), ids, "fall")
    assert same_givens(first, again) and first.codes == again.codes and first.keyed
    assert not public.keyed
    for different in (other, public):
        for x, y in zip(givens_of(first), givens_of(different)):
            # Every student's problem differs: the secret reaches each variant, not just some.
            for i in range(len(ids)):
                assert not all(np.array_equal(x[g][i], y[g][i]) for g in x)
        assert set(first.codes).isdisjoint(different.codes)


def test_a_variant_is_drawn_from_hmac_sha256_of_item_student_and_seed_under_the_secret():
    spec, ids = basic_spec(), ["ada", "alan"]
    ws = build_worksheet(spec, ids, "fall", secret=SECRET_A)
    for item, env in zip(spec.items, ws.envs):
        for i, student in enumerate(ids):
            message = "\x1f".join([item.id, item.fingerprint(), student, "fall"]).encode()
            key = int.from_bytes(hmac.new(SECRET_A, message, hashlib.sha256).digest()[:8], "little")
            alone = solve_item(item, [key])
            for g in item.family.given_names:
                np.testing.assert_array_equal(alone[g][0], env[g][i])


def test_a_student_with_the_tool_spec_and_seed_but_not_the_secret_cannot_rebuild_the_key(tmp_path):
    spec = basic_spec()
    generate_set(spec, ["ada", "alan"], tmp_path / "set", seed="fall", secret=SECRET_A)
    real = json.loads((tmp_path / "set" / "key.json").read_text(encoding="utf-8"))
    for guess in (None, SECRET_B, b""):
        attempt = key_to_json(build_worksheet(spec, ["ada", "alan"], "fall", secret=guess))
        for mine, theirs in zip(real["students"], json.loads(json.dumps(attempt))["students"]):
            assert mine["answers"] != theirs["answers"] and mine["givens"] != theirs["givens"]
    # ... while the instructor, with the secret, rebuilds exactly the same key.
    rebuilt = json.loads(json.dumps(key_to_json(build_worksheet(spec, ["ada", "alan"], "fall", secret=SECRET_A))))
    assert rebuilt == real and real["keyed"] is True


def test_the_variant_code_is_a_one_way_digest_that_says_nothing_about_the_problems():
    ids = ["ada", "alan", "grace"]
    ws = build_worksheet(basic_spec(), ids, "fall", secret=SECRET_A)
    for student, code in zip(ids, ws.codes):
        key = variant_key("Week 3", student, "fall", secret=SECRET_A)
        assert code == variant_code(key)
        digest = hashlib.sha256(key.to_bytes(8, "little") + b"code").hexdigest().upper()
        assert re.fullmatch(r"[0-9A-F]{4}-[0-9A-F]{4}", code) and code.replace("-", "") == digest[:8]
        assert code.replace("-", "") not in f"{key:016X}" + f"{key:016x}".upper()  # not the key's own bits
    # The code depends on no item: other problems, same codes; so it cannot encode the givens.
    items = [{"family": "attention.output", "params": {"tokens": 4}}]
    changed = build_worksheet(parse_spec({"title": "Week 3", "items": items}), ids, "fall", secret=SECRET_A)
    assert changed.codes == ws.codes
    # And it is keyed too: without the secret, a student cannot compute anyone's code.
    assert set(build_worksheet(basic_spec(), ids, "fall").codes).isdisjoint(ws.codes)


def test_init_writes_a_private_random_secret_and_never_replaces_one(tmp_path):
    path = tmp_path / "conf" / "secret"
    result = runner.invoke(app, ["init", str(path)])
    assert result.exit_code == 0, result.output
    text = path.read_text(encoding="utf-8")
    assert re.fullmatch(r"[0-9a-f]{64}\n", text)
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = runner.invoke(app, ["init", str(path)])
    assert again.exit_code == 2 and "exists" in again.output
    assert path.read_text(encoding="utf-8") == text
    with pytest.raises(SecretError, match="exists"):
        create_secret(path)
    other = create_secret(tmp_path / "second")
    assert other.read_text(encoding="utf-8") != text
    assert not list(tmp_path.rglob("*.tmp"))


def test_init_without_a_path_writes_to_the_config_folder_outside_any_course(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    result = runner.invoke(app, ["init"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"[0-9a-f]{64}\n", (tmp_path / "config" / "qkvquiz" / "secret").read_text(encoding="utf-8"))


def test_the_secret_comes_from_the_file_else_the_environment_and_must_not_be_short(tmp_path):
    path = create_secret(tmp_path / "s")
    from_file = load_secret(path, environ={SECRET_ENV: "x" * 20})
    assert from_file.value == path.read_text(encoding="utf-8").strip().encode() and str(path) in from_file.source
    assert load_secret(None, environ={SECRET_ENV: " " + "x" * 20 + "\n"}).value == b"x" * 20
    assert load_secret(None, environ={}) is None and load_secret(None, environ={SECRET_ENV: ""}) is None
    with pytest.raises(SecretError, match="16 characters"):
        load_secret(None, environ={SECRET_ENV: "short"})
    with pytest.raises(SecretError, match="no such secret file"):
        load_secret(tmp_path / "missing")


def test_generate_with_a_secret_file_or_variable_matches_the_library_and_says_so(tmp_path, monkeypatch):
    path = create_secret(tmp_path / "secret")
    secret = path.read_text(encoding="utf-8").strip().encode()
    monkeypatch.delenv(SECRET_ENV, raising=False)
    by_file = runner.invoke(app, ["generate", "attention-basics", "-n", "2", "--seed", "w3",
                                  "--secret-file", str(path), "--out", str(tmp_path / "f")])
    assert by_file.exit_code == 0, by_file.output
    said = " ".join(by_file.output.split())
    assert "keyed by the secret" in said and "No secret" not in said
    monkeypatch.setenv(SECRET_ENV, secret.decode())
    by_env = runner.invoke(app, ["generate", "attention-basics", "-n", "2", "--seed", "w3", "--out", str(tmp_path / "e")])
    assert by_env.exit_code == 0 and f"${SECRET_ENV}" in " ".join(by_env.output.split())
    monkeypatch.delenv(SECRET_ENV)
    plain = runner.invoke(app, ["generate", "attention-basics", "-n", "2", "--seed", "w3", "--public",
                                "--out", str(tmp_path / "p")])
    assert "No secret" in plain.output and "anyone with qkvquiz" in " ".join(plain.output.split())
    library = build_worksheet(load_spec(ROOT / "problem_bank" / "attention-basics.yaml"), ["s01", "s02"], "w3", secret=secret)
    expected = json.loads(json.dumps(key_to_json(library)))
    for folder in ("f", "e"):
        written = json.loads((tmp_path / folder / "key.json").read_text(encoding="utf-8"))
        assert written["students"] == expected["students"] and written["keyed"] is True
    assert json.loads((tmp_path / "p" / "key.json").read_text(encoding="utf-8"))["students"] != expected["students"]
    assert "reproducible by anyone" in (tmp_path / "p" / "key.md").read_text(encoding="utf-8")
    assert "reproducible by anyone" not in (tmp_path / "f" / "key.md").read_text(encoding="utf-8")


def test_the_secrecy_sentence_is_accurate_in_both_cases():
    assert "can rebuild this key" in secrecy_note("7", None) and "qkvquiz init" in secrecy_note("7", None)
    keyed = secrecy_note("7", "file s")
    assert "do not rebuild this key" in keyed and "file s" in keyed


# --------------------------------------------------------------------------- nothing leaks


def leak_specs() -> dict[str, dict]:
    """Per family: one item per askable step, and one per non-default choice of each param."""
    specs = {}
    for name, fam in REGISTRY.items():
        items = [{"family": name, "ask": [step]} for step in fam.askable_steps]
        for pname, param in fam.params.items():
            for choice in param.choices or ():
                if choice != param.default:
                    candidate = {"family": name, "params": {pname: choice}}
                    try:
                        parse_spec({"title": "probe", "items": [candidate]})
                    except SpecError:
                        continue  # a choice that needs other params changed too
                    items.append(candidate)
        specs[name] = {"title": f"Leak check {name}", "items": items}
    return specs


LEAK_SPECS = leak_specs()
LEAK_IDS = ["ada", "s02", "Zoë"]
_TOKEN = re.compile(r"(?<![\w.\-])-?\d+(?:\.\d+)?(?!\w)")


def student_files(out: Path) -> dict[str, bytes]:
    root = out / "students"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def renderings(x: float, d: int) -> set[str]:
    x = float(x)
    forms = {num(x, d), num(x, 3), f"{x:.{d}f}", f"{x:.3f}", f"{x:.2f}", repr(x), f"{x:g}"}
    return {f[1:] if re.fullmatch(r"-0(\.0*)?", f) else f for f in forms}  # -0.000 reads as 0.000


def stated_numbers(spec, ws) -> set[str]:
    """Numbers a sheet of this spec states as prose, whatever the variant (see the module docstring)."""
    ints, points, prose = [len(spec.items)], [], [spec.title, spec.instructions]
    for item, env in zip(spec.items, ws.envs):
        ints += [dim for v in env.values() for dim in np.shape(v)[1:]]
        for value in item.params.values():
            for v in value if isinstance(value, tuple) else (value,):
                if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v).is_integer():
                    ints.append(abs(int(v)))
        points += [item.points, *(p.points for p in item.parts)]
        prose += [item.title, item.intro]
    k = int(max([*ints, *(abs(p) for p in points if float(p).is_integer())]))
    # The worksheet template's fixed prose (its examples of exact forms, such as "5/3").
    prose.append((templates_dir() / "worksheet.md.j2").read_text(encoding="utf-8"))
    return {str(i) for i in range(-k, k + 1)} | {num(p, 2) for p in points} | set(_TOKEN.findall(" ".join(prose)))


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(LEAK_SPECS))
def test_no_student_file_shows_a_step_value_that_is_not_a_given(family, tmp_path):
    spec = parse_spec(LEAK_SPECS[family])
    result = generate_set(spec, LEAK_IDS, tmp_path / "set", seed="leak")
    ws = result.worksheet
    files = student_files(tmp_path / "set")
    assert files and not any(name.startswith("key") for name in files)
    stated = stated_numbers(spec, ws)
    for i, student in enumerate(ws.students):
        folder = result.folders[student].name
        tokens = {
            name: set(_TOKEN.findall(data.decode("utf-8", "replace")))
            for name, data in files.items() if name.startswith(folder + "/")
        }
        assert tokens, f"no files for {student}"
        exempt = set(stated)
        for item, env in zip(spec.items, ws.envs):
            d = int(item.params.get("decimals", 3))
            for g in item.family.given_names:
                exempt.update(*(renderings(x, d) for x in np.ravel(env[g][i]) if np.isfinite(x)))
        for item, env in zip(spec.items, ws.envs):
            d = int(item.params.get("decimals", 3))
            for step in item.family.step_names:
                for x in np.ravel(env[step][i]):
                    if not np.isfinite(x):
                        continue
                    leaked = renderings(x, d) - exempt
                    for name, found in tokens.items():
                        assert not leaked & found, (
                            f"{name}: item {item.id} step {step!r} = {float(x)!r} appears as {sorted(leaked & found)}"
                        )


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(LEAK_SPECS))
def test_student_files_do_not_depend_on_any_step_value(family, tmp_path, monkeypatch):
    spec = parse_spec(LEAK_SPECS[family])
    generate_set(spec, LEAK_IDS, tmp_path / "real", seed="leak")
    real_build = generate_module.build_worksheet
    monkeypatch.setattr(generate_module, "build_worksheet", lambda *a, **k: canary_worksheet(real_build(*a, **k)))
    generate_set(spec, LEAK_IDS, tmp_path / "canary", seed="leak")
    real, canary = student_files(tmp_path / "real"), student_files(tmp_path / "canary")
    assert real.keys() == canary.keys()
    for name in real:
        assert real[name] == canary[name], f"{name} changes when the step values change: it shows an answer"
    assert json.loads((tmp_path / "real" / "key.json").read_bytes()) != json.loads((tmp_path / "canary" / "key.json").read_bytes())


# --------------------------------------------------------------------------- untrusted files

HOSTILE_IDS = [
    "../../etc/passwd", "<script>alert(1)</script>", "😀", "Ada", "ada", "CON", "nul.txt", "`x``", "[/x] [b]y",
    "[click](javascript:alert(1))", "*bold* _it_ <img src=x onerror=alert(1)>", "..", "a/b", "a_b", "-rf", "x" * 120,
]
_SAFE_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_WINDOWS_DEVICES = {"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(1, 10)), *(f"LPT{i}" for i in range(1, 10))}


def check_folder_names(names: list[str]) -> None:
    assert len({n.lower() for n in names}) == len(names)  # unique even on case-insensitive file systems
    for n in names:
        assert _SAFE_FOLDER.fullmatch(n) and not n.endswith((".", "-")), n
        assert n.split(".")[0].upper() not in _WINDOWS_DEVICES and len(n) <= 70, n


def test_a_hostile_roster_yields_safe_unique_folders_and_escaped_markdown(tmp_path):
    roster = tmp_path / "roster.txt"
    roster.write_text("\n".join(HOSTILE_IDS) + "\n", encoding="utf-8")
    ids = read_roster(roster)
    assert ids == HOSTILE_IDS
    result = runner.invoke(app, ["generate", "attention-basics", "--roster", str(roster), "--out", str(tmp_path / "set")])
    assert result.exit_code == 0, result.output
    out = tmp_path / "set"
    folders = sorted(p.name for p in (out / "students").iterdir())
    assert len(folders) == len(ids)
    check_folder_names(folders)
    for p in out.rglob("*"):  # nothing escaped the output folder
        assert p.resolve().is_relative_to(out.resolve())
    assert not (tmp_path / "etc").exists()
    md = MarkdownIt("commonmark")  # raw HTML allowed, as many Markdown viewers do
    seen = set()
    for folder in (out / "students").iterdir():
        blank = json.loads((folder / "submission.json").read_text(encoding="utf-8"))
        seen.add(blank["student"])
        html = md.render((folder / "worksheet.md").read_text(encoding="utf-8"))
        assert "<script" not in html and "<img" not in html and "<a " not in html and "<strong>" in html
        shown = re.search(r"<strong>Student:</strong> <code>(.*?)</code>", html)
        assert shown and shown.group(1) == escapeHtml(blank["student"])
    assert seen == set(ids)  # each blank submission carries its exact id
    key_html = md.render((out / "key.md").read_text(encoding="utf-8"))
    assert "<script" not in key_html and "<img" not in key_html and "<a " not in key_html
    assert key_html.count("<h2>Student <code>") == len(ids)


@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=20, unique=True))
@settings(max_examples=60, deadline=None)
def test_folder_names_are_safe_and_unique_for_any_ids(ids):
    taken: set[str] = set()
    names = [safe_name(s, taken) for s in ids]
    check_folder_names(names)
    assert [safe_name(s, set()) for s in ids[:1]] == names[:1]  # the first id's name does not depend on others


@pytest.mark.parametrize("bad", ["s01\u200b", "s\u202e10", "s\x1b[2J", "s\u2028t", "a\x00b"])
def test_a_roster_id_with_invisible_or_control_characters_is_refused_with_its_line(bad, tmp_path):
    roster = tmp_path / "r.csv"
    roster.write_text(f"student,name\nada,Ada\n{bad},X\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: .*(invisible|control)"):
        read_roster(roster)


def test_md_code_keeps_any_text_literal():
    md = MarkdownIt("commonmark")
    for text in ["`", "a``b", "` x `", "<b>hi</b>", "*a* [l](u)", "x\n\ny", "\u202eabc", "  "]:
        html = md.renderInline(md_code(text))
        assert html.startswith("<code>") and html.endswith("</code>") and html.count("<code>") == 1, (text, html)
        assert "<b>" not in html and "\n" not in html


def test_csv_cells_are_never_formulas():
    assert safe_cell("=HYPERLINK(\"http://x\")") == "'=HYPERLINK(\"http://x\")"
    # A number stays a number (a spreadsheet reads it as one, and runs nothing).
    assert [safe_cell(s) for s in ("+1", "-2", "@a", "ada", "-cmd")] == ["+1", "-2", "'@a", "ada", "'-cmd"]


def test_yaml_is_read_with_the_safe_loader(tmp_path):
    marker = tmp_path / "pwned"
    spec = tmp_path / "evil.yaml"
    spec.write_text(f'title: !!python/object/apply:os.system ["touch {marker}"]\nitems: []\n', encoding="utf-8")
    with pytest.raises(SpecError, match="evil.yaml"):
        load_spec(spec)
    assert not marker.exists()


def test_user_templates_render_in_the_sandbox_and_override_by_name(tmp_path):
    mine = tmp_path / "mine"
    (mine / "families").mkdir(parents=True)
    assert isinstance(environment(str(mine)), TemplateSandbox)  # the bundled ones are our code: no sandbox
    (mine / "families" / "attention.scores.problem.md.j2").write_text(
        "### My problem {{ number }}: Q = {{ g.Q|bmatrix }}, exp(1) = {{ np.exp(1.0)|num(2) }}\n"
    )
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--templates", str(mine), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    sheet = (tmp_path / "o" / "students" / "s01" / "worksheet.md").read_text(encoding="utf-8")
    assert "### My problem 1: Q = " in sheet and "exp(1) = 2.72" in sheet
    assert "Problem 5" in sheet  # the other families fall back to the bundled templates


@pytest.mark.parametrize("attack", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ g.Q.tofile('OUT/x') }}",
    "{{ g.Q.dump('OUT/x') }}",
    "{{ np.save('OUT/x', g.Q) }}",
    "{{ np.lib.npyio.savetxt('OUT/x', g.Q) }}",
    "{{ np.exp.__call__ }}",
    "{{ g.Q.setflags(write=True) }}",
    "{% for i in range(10**9) %}{% endfor %}",
    "{{ 7 ** 99999999 }}",
    "{{ 'x' * 10 ** 9 }}",
    "{{ item.family.steps[0].fn.__globals__ }}",
    "{{ lipsum.__globals__['os'].system('touch OUT/x') }}",
])
def test_a_hostile_template_is_refused_with_a_clear_error(attack, tmp_path):
    mine = tmp_path / "mine" / "families"
    mine.mkdir(parents=True)
    (mine / "attention.scores.problem.md.j2").write_text(attack.replace("OUT", str(tmp_path)) + "\n", encoding="utf-8")
    result = runner.invoke(app, ["generate", "attention-basics", "-n", "1", "--templates", str(mine.parent), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "template" in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.npy").exists()
    assert not (tmp_path / "o" / "key.json").exists()


@pytest.mark.parametrize("attack", ["{{ s.weights.fill(9) }}", "{{ s.weights.__setitem__(0, 9) }}",
                                    "{{ s.weights.itemset(0, 9) }}", "{{ np.add.at(s.weights, 0, 9) }}"])
def test_a_template_cannot_change_the_solved_values(attack, tmp_path):
    mine = tmp_path / "mine" / "families"
    mine.mkdir(parents=True)
    (mine / "attention.weights.solution.md.j2").write_text(attack + "\n", encoding="utf-8")
    with pytest.raises(jinja2.TemplateError):
        generate_set(basic_spec(), ["a"], tmp_path / "o", seed=1, templates=tmp_path / "mine")
    assert not (tmp_path / "o" / "key.json").exists()


def test_html_templates_autoescape_and_markdown_templates_do_not(tmp_path):
    (tmp_path / "page.html.j2").write_text("<p>{{ student }}</p>", encoding="utf-8")
    (tmp_path / "page.md.j2").write_text("{{ m }}", encoding="utf-8")
    env = environment(str(tmp_path))
    assert env.get_template("page.html.j2").render(student="<script>x</script>") == "<p>&lt;script&gt;x&lt;/script&gt;</p>"
    assert env.get_template("page.md.j2").render(m=r"\begin{bmatrix} 1 & 2 \end{bmatrix}") == r"\begin{bmatrix} 1 & 2 \end{bmatrix}"


# --------------------------------------------------------------------------- hostile submissions


@pytest.fixture(scope="module")
def small_key():
    spec = parse_spec({"title": "T", "items": BASIC_ITEMS})
    ws = build_worksheet(spec, ["s01", "ada", "Zoë"], 3)
    return key_from_json(json.loads(json.dumps(key_to_json(ws)))), json.loads(json.dumps(key_to_json(ws)))


HOSTILE_BYTES = {
    "duplicate key": (b'{"student": "s01", "student": "ada", "answers": {}}', "appears twice"),
    "duplicate answer": (b'{"student": "s01", "answers": {"q1.scores": 1, "q1.scores": 2}}', "appears twice"),
    "NaN": (b'{"student": "s01", "answers": {"q1.scores": NaN}}', "NaN is not a JSON number"),
    "Infinity": (b'{"student": "s01", "answers": {"q1.scores": -Infinity}}', "-Infinity is not a JSON number"),
    "huge float": (b'{"student": "s01", "answers": {"q1.scores": 1e999}}', "too large"),
    "huge int": (b'{"student": "s01", "answers": {"q1.scores": ' + b"9" * 5000 + b"}}", "5000 digits"),
    "deep nesting": (b'{"student": "s01", "answers": {"q1.scores": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}", "nested"),
    "too big": (b'{"student": "s01", "pad": "' + b"x" * MAX_SUBMISSION_BYTES + b'"}', "at most"),
    "not utf-8": (b'{"student": "s\xff01", "answers": {}}', "UTF-8"),
    "not an object": (b"[1, 2, 3]", "JSON object"),
    "student a number": (b'{"student": 7, "answers": {}}', '"student"'),
    "answers a list": (b'{"student": "s01", "answers": [1]}', '"answers"'),
    "lone surrogate": (b'{"student": "s01", "answers": {"q1.scores": "1\\ud800"}}', "surrogate"),
    "key too long": (b'{"student": "s01", "answers": {"q1.scores": 1}, "x": {"' + b"k" * 20_000 + b'": 1}}', "characters"),
    "truncated": (b'{"student": "s01", "answ', "not valid JSON"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_BYTES))
def test_each_hostile_submission_is_a_clear_per_file_error(case, small_key, tmp_path):
    raw, expected = HOSTILE_BYTES[case]
    with pytest.raises(ValueError, match=re.escape(expected)) as info:
        submission_from_bytes(raw, "x.json")
    assert len(str(info.value)) < 300 and str(info.value).isprintable()
    # Through the file path too, beside a good file that is still graded.
    key, doc = small_key
    (tmp_path / "bad.json").write_bytes(raw)
    (tmp_path / "good.json").write_text(json.dumps({"student": "ada", "answers": doc["students"][1]["answers"]}), encoding="utf-8")
    report = grade_files(key, [tmp_path / "bad.json", tmp_path / "good.json"])
    assert [p.source for p in report.problems] == [str(tmp_path / "bad.json")]
    assert report.results[0].score == pytest.approx(key.points)


def test_a_byte_order_mark_is_fine(small_key):
    sub = submission_from_bytes(b'\xef\xbb\xbf{"student": "ada", "answers": {}}', "bom.json")
    assert sub.student == "ada"


@pytest.mark.parametrize("claimed, hint", [
    ("ｓ０１", "did you mean 's01'"),  # fullwidth letters and digits
    ("s01\u200b", "U+200B ZERO WIDTH SPACE"),
    ("\u202es01", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    ("ADA", "did you mean 'ada'"),
    ("Zoe\u0308", "did you mean 'Zoë'"),  # the same letter, decomposed
    ("s\x1b[31m01", "U+001B"),
])
def test_lookalike_student_ids_are_refused_with_a_hint(claimed, hint, small_key):
    key, _ = small_key
    report = grade(key, [submission_from_json({"student": claimed, "answers": {}}, "x.json")])
    assert not report.results and len(report.problems) == 1
    message = report.problems[0].message
    assert "not in the key" in message and hint in message and message.isprintable(), message


def test_grade_files_never_blocks_on_a_pipe_and_reports_folders_and_odd_names(small_key, tmp_path):
    key, doc = small_key
    paths = [tmp_path / "dir.json"]
    paths[0].mkdir()
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.json")
        paths.append(tmp_path / "pipe.json")
    odd = tmp_path / os.fsdecode(b"odd\xff\n=1+1.json")
    try:
        odd.write_text(json.dumps({"student": "s01", "answers": doc["students"][0]["answers"]}), encoding="utf-8")
        paths.append(odd)
    except (OSError, UnicodeEncodeError):  # a file system that refuses such names
        pass
    report = grade_files(key, paths)
    assert len(report.problems) == (2 if hasattr(os, "mkfifo") else 1)
    assert all("regular file" in p.message for p in report.problems)
    out = tmp_path / "grades"
    write_reports(report, out)  # the odd name can be written as UTF-8
    json.loads((out / "results.json").read_text(encoding="utf-8"))
    rows = list(csv.reader(io.StringIO((out / "results.csv").read_text(encoding="utf-8"))))
    assert len(rows) == 1 + len(report.key.students)  # every student has a row, graded or not


def test_a_file_name_cannot_become_a_spreadsheet_formula(small_key):
    key, doc = small_key
    sub = Submission('=HYPERLINK("http://evil","x").json', "ada", doc["students"][1]["answers"])
    (row,) = [r for r in csv.reader(io.StringIO(results_csv(grade(key, [sub])))) if r[0] == "ada"]
    assert row[2] == "'" + sub.source


def test_markup_in_an_unknown_student_id_does_not_break_the_command_line(small_key, tmp_path):
    _, doc = small_key
    (tmp_path / "key.json").write_text(json.dumps(doc), encoding="utf-8")
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "a.json").write_text(json.dumps({"student": "[/x] [bold]\x1b[2J", "answers": {}}), encoding="utf-8")
    (subs / "[red]b[bold].json").write_text("{", encoding="utf-8")
    result = runner.invoke(app, ["grade", str(tmp_path / "key.json"), str(subs), "--out", str(tmp_path / "g")])
    assert result.exit_code == 1, result.output
    flat = "".join(result.output.split())  # Rich wraps long lines, even inside a file name
    assert "'[/x][bold]\\x1b[2J'" in flat and "\x1b" not in result.output and "[red]b[bold].json" in flat


def test_python_callers_get_the_same_limits(small_key):
    deep: list = []
    node = deep
    for _ in range(MAX_NESTING + 5):
        node.append([])
        node = node[0]
    looped: list = [1]
    looped.append(looped)
    for doc, expected in [
        ({"student": "s01", "answers": {"q1.scores": deep}}, "nested"),
        ({"student": "s01", "answers": {"q1.scores": looped}}, "nested"),
        ({"student": "s01", "answers": {"q1.scores": float("nan")}}, "nan"),
        ({"student": "s01", "answers": {"q1.scores": 10**2000}}, "digits"),
        ({"student": "s01", "answers": {1: 2}}, "not text"),
        ({"student": "s01", "answers": {"q1.scores": object()}}, "type object"),
        ({"student": "x" * 500, "answers": {}}, "characters"),
    ]:
        with pytest.raises(ValueError, match=expected):
            submission_from_json(doc, "py")


# --------------------------------------------------------------------------- no data lost


def no_temp_files(folder: Path) -> bool:
    return not [p for p in folder.rglob("*") if p.name.endswith(".tmp")]


def test_no_module_writes_a_file_except_through_the_atomic_writers():
    # (write_pdf() with no target returns the PDF's bytes; with one, it writes a file.)
    # (Pillow's save into ``buffer``, an io.BytesIO, encodes a picture in memory: scan/crops.py.)
    pattern = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*['\"][wax]b?\+?['\"]|\.write_pdf\((?!\))|savetxt\(|\.save\((?!buffer\b)")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in (ROOT / "qkvquiz").rglob("*.py") if path.name not in ("outputs.py", "secret.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if pattern.search(line)
    ]
    assert not offenders, f"write outputs through qkvquiz.core.outputs (write_set, write_file): {offenders}"


def test_generate_never_overwrites_a_key_without_force(tmp_path):
    spec = basic_spec()
    generate_set(spec, ["a"], tmp_path, seed=1)
    before = (tmp_path / "key.json").read_bytes()
    with pytest.raises(FileExistsError, match="use force=True to replace") as refused:
        generate_set(spec, ["a", "b"], tmp_path, seed=2)
    assert "--force" not in str(refused.value)  # each interface names its own option
    assert (tmp_path / "key.json").read_bytes() == before
    cli = runner.invoke(app, ["generate", "attention-basics", "-n", "2", "--out", str(tmp_path)])
    assert cli.exit_code == 2 and (tmp_path / "key.json").read_bytes() == before
    assert "use --force to replace" in cli.output and "force=True" not in cli.output
    generate_set(spec, ["a", "b"], tmp_path, seed=2, force=True)
    assert (tmp_path / "key.json").read_bytes() != before and no_temp_files(tmp_path)


def graded_class(tmp_path: Path) -> tuple[Path, list[Path]]:
    spec = basic_spec()
    generate_set(spec, ["ada", "alan", "grace"], tmp_path / "set", seed=5)
    doc = json.loads((tmp_path / "set" / "key.json").read_text(encoding="utf-8"))
    subs = tmp_path / "subs"
    subs.mkdir()
    files = []
    for k, s in enumerate(doc["students"]):
        answers = s["answers"]
        if k == 1:
            answers = {**answers, "q1.scores": "banana"}
        files.append(subs / f"{s['student']}.json")
        files[-1].write_text(json.dumps({"student": s["student"], "answers": answers}), encoding="utf-8")
    (subs / "broken.json").write_text("{", encoding="utf-8")
    return tmp_path / "set" / "key.json", [*files, subs / "broken.json"]


def test_grading_the_same_inputs_twice_gives_byte_identical_reports(tmp_path):
    key, files = graded_class(tmp_path)
    for out in ("g1", "g2"):
        runner.invoke(app, ["grade", str(key), str(files[0].parent), "--out", str(tmp_path / out)])
    write_reports(grade_files(load_key(key), files), tmp_path / "g3")
    for name in ("results.csv", "results.json"):
        first = (tmp_path / "g1" / name).read_bytes()
        assert first == (tmp_path / "g2" / name).read_bytes() == (tmp_path / "g3" / name).read_bytes()
        assert len(first) > 100


def test_an_error_while_writing_reports_keeps_the_previous_ones_and_no_temp_file(tmp_path, monkeypatch):
    key, files = graded_class(tmp_path)
    out = tmp_path / "grades"
    write_reports(grade_files(load_key(key), files[:1]), out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    calls = []
    real_fsync = os.fsync

    def failing_fsync(fd):
        calls.append(fd)
        if len(calls) == 2:  # the CSV is written, the JSON is being written
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space"):
        write_reports(grade_files(load_key(key), files), out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


def test_an_error_while_generating_leaves_no_key_and_no_temp_file(tmp_path, monkeypatch):
    real = generate_module.worksheet_markdown

    def second_fails(ws, i, **kw):
        if i == 1:
            raise RuntimeError("disk unplugged")
        return real(ws, i, **kw)

    monkeypatch.setattr(generate_module, "worksheet_markdown", second_fails)
    with pytest.raises(RuntimeError):
        generate_set(basic_spec(), ["a", "b", "c"], tmp_path, seed=1)
    assert not (tmp_path / "key.json").exists() and no_temp_files(tmp_path)


@pytest.fixture
def ctrl_c_interrupts():
    """SIGINT raises KeyboardInterrupt, as in an interactive shell, whatever disposition the test run
    inherited (started with `cmd &` in a script, or by a CI runner, SIGINT is ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_signals_during_the_switch_wait_until_the_whole_set_is_in_place(tmp_path, monkeypatch, ctrl_c_interrupts):
    with write_set(tmp_path, {"a": False, "b": False}, anchor="a") as files:
        files.write("a", "old a")
        files.write("b", "old b")
    real_replace = os.replace
    moved = []

    def interrupted(src, dst):
        real_replace(src, dst)
        moved.append(dst)
        if len(moved) == 1:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C right after the first rename of the switch

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        with write_set(tmp_path, {"a": False, "b": False}, anchor="a") as files:
            files.write("a", "new a")
            files.write("b", "new b")
    assert len(moved) > 2  # the journal, then the old entries out and the new ones in
    assert (tmp_path / "a").read_text(encoding="utf-8") == "new a" and (tmp_path / "b").read_text(encoding="utf-8") == "new b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    monkeypatch.setattr(os, "replace", real_replace)
    write_atomic(tmp_path / "a", b"bytes")
    assert (tmp_path / "a").read_bytes() == b"bytes" and no_temp_files(tmp_path)


STALLING_DRIVER = """
import sys, time
from qkvquiz.core import outputs
real_write = outputs.OutputSet.write
calls = []
def stalling_write(self, rel, data):
    calls.append(rel)
    if len(calls) == 3:  # results.csv and .json are staged; the item analysis is being written
        print("STALLED", flush=True)
        time.sleep(60)
    return real_write(self, rel, data)
outputs.OutputSet.write = stalling_write
from qkvquiz.cli import app
app(sys.argv[1:], prog_name="qkvquiz")
"""


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_grading_run_killed_midway_leaves_the_previous_reports_intact(sig, tmp_path):
    key, files = graded_class(tmp_path)
    out = tmp_path / "grades"
    write_reports(grade_files(load_key(key), files[:1]), out)  # the previous run's reports
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", STALLING_DRIVER, "grade", str(key), *map(str, files), "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "STALLED", proc.stderr.read()
        staged = list(out.glob(".qkvquiz-staging-*"))  # really midway: the new set is half staged
        assert len(staged) == 1 and (staged[0] / "results.json").is_file()
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == (128 + sig if sig == signal.SIGTERM else -sig)
    visible = {p.relative_to(out): p.read_bytes() for p in out.rglob("*")
               if p.is_file() and not str(p.relative_to(out)).startswith(".")}
    assert visible == before
    if sig == signal.SIGTERM:
        assert sorted(p.name for p in out.iterdir()) == sorted({p.parts[0] for p in before})  # nothing hidden left
    else:  # only SIGKILL can leave the hidden staging folder; the next run removes it
        write_reports(grade_files(load_key(key), files[:2]), out)
        assert not list(out.glob(".*"))
    assert "Traceback" not in proc.stderr.read()


def test_results_csv_does_not_depend_on_the_order_of_the_files(tmp_path):
    key, files = graded_class(tmp_path)
    report = grade_files(load_key(key), list(reversed(files)))
    assert results_csv(report) == results_csv(grade_files(load_key(key), files))


def test_student_files_get_ordinary_permissions_and_the_key_stays_private(tmp_path):
    old = os.umask(0o022)
    try:
        result = generate_set(parse_spec({"title": "T", "items": [{"family": "attention.scores"}]}), ["ada"], tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE((result.folders["ada"] / "worksheet.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "key.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "key.md").stat().st_mode) == 0o600
