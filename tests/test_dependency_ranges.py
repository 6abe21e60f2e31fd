"""The floors CI installs (constraints/minimum.txt) are the floors pyproject.toml declares.

CI runs the suite once with the newest versions and once with ``pip install -c
constraints/minimum.txt '.[test]'``; that second run only proves what it should where every
direct dependency and every requirement of the ``test`` extra is pinned there to the lowest
version its range allows, under the same environment markers, and nothing else is pinned.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = ROOT / "constraints" / "minimum.txt"

#: (canonical name, marker as packaging writes it, "" for none)
Key = tuple[str, str]


def key_of(requirement: Requirement) -> Key:
    return canonicalize_name(requirement.name), str(requirement.marker or "")


def floor_of(specifier: SpecifierSet) -> Version | None:
    """The lowest version a range allows by its lower bounds (>=, ~=, ==), or None without one."""
    lows = [Version(s.version) for s in specifier if s.operator in (">=", "~=", "==", "===")]
    return max(lows) if lows else None


def declared(pyproject: dict) -> dict[Key, Requirement]:
    """[project].dependencies and the test extra, keyed by name and markers."""
    project = pyproject["project"]
    found: dict[Key, Requirement] = {}
    for line in [*project["dependencies"], *project["optional-dependencies"]["test"]]:
        requirement = Requirement(line)
        key = key_of(requirement)
        assert key not in found, f"{line!r} declared twice in pyproject.toml"
        found[key] = requirement
    return found


def pinned(text: str, problems: list[str]) -> dict[Key, Requirement]:
    """The constraints file's lines (comments and blank lines skipped), keyed by name and markers;
    a line that pins no single version, or pins a package a second time, goes to ``problems``."""
    found: dict[Key, Requirement] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = "" if raw.lstrip().startswith("#") else raw.split(" #", 1)[0].strip()
        if not line:
            continue
        requirement = Requirement(line)
        specs = list(requirement.specifier)
        if requirement.extras or requirement.url:
            problems.append(f"constraints line {number} ({raw!r}): pip takes no extras or URL in a constraint")
            continue
        if len(specs) != 1 or specs[0].operator != "==":
            problems.append(f"constraints line {number} ({raw!r}) pins no single version with ==")
            continue
        key = key_of(requirement)
        if key in found:
            problems.append(f"constraints line {number} ({raw!r}) pins {requirement.name} a second time")
            continue
        found[key] = requirement
    return found


def disagreements(pyproject: dict, constraints: str) -> list[str]:
    """Every way the constraints file and pyproject.toml's ranges disagree (empty when they agree)."""
    problems: list[str] = []
    wanted, have = declared(pyproject), pinned(constraints, problems)
    for key, requirement in wanted.items():
        floor = floor_of(requirement.specifier)
        if floor is None:
            problems.append(f"{requirement} has no floor (a >=, ~= or == bound) to test at")
            continue
        if floor not in requirement.specifier:
            problems.append(f"{requirement}: its floor {floor} is outside its own range")
        pin = have.get(key)
        if pin is None:
            problems.append(f"{requirement} is not pinned in constraints/minimum.txt "
                            f"(wanted: {key[0]}=={floor}{'; ' + key[1] if key[1] else ''})")
            continue
        version = Version(next(iter(pin.specifier)).version)
        if version != floor:
            problems.append(f"{requirement}: constraints/minimum.txt pins {pin}, not its floor {floor}")
    for key, pin in have.items():
        if key not in wanted:
            same_name = [str(r) for (name, _), r in wanted.items() if name == key[0]]
            problems.append(f"constraints/minimum.txt pins {pin}, which pyproject.toml does not declare"
                            + (f" with these markers (it declares {same_name})" if same_name else ""))
    return problems


def test_the_constraints_file_pins_every_floor_and_nothing_else():
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    problems = disagreements(pyproject, CONSTRAINTS.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ the check itself can fail

PROJECT = {"project": {
    "dependencies": ["numpy>=1.26; python_version<'3.13'", "numpy>=2.1; python_version>='3.13'",
                     "typer>=0.15.4,<0.29", "Jinja2>=3.1"],
    "optional-dependencies": {"test": ["pytest>=8"]},
}}
AGREEING = """# a comment
numpy==1.26.0; python_version < "3.13"
numpy==2.1; python_version >= "3.13"
typer==0.15.4
jinja2==3.1.0  # names compare as pip compares them

pytest==8.0
"""


def test_agreeing_files_pass():
    assert disagreements(PROJECT, AGREEING) == []


@pytest.mark.parametrize(("change", "complaint"), [
    (("typer==0.15.4", "typer==0.16.0"), "not its floor 0.15.4"),
    (("pytest==8.0\n", ""), "pytest>=8 is not pinned"),
    (('numpy==2.1; python_version >= "3.13"', "numpy==2.1"), "which pyproject.toml does not declare with these markers"),
    (("pytest==8.0", "pytest==8.0\nrich==13.0.0"), "rich==13.0.0, which pyproject.toml does not declare"),
    (("typer==0.15.4", "typer>=0.15.4"), "pins no single version"),
    (("typer==0.15.4", "typer==0.15.4\ntyper==0.15.4"), "a second time"),
    (("jinja2==3.1.0", "jinja2[i18n]==3.1.0"), "no extras"),
])
def test_each_disagreement_is_reported(change, complaint):
    old, new = change
    assert old in AGREEING
    problems = disagreements(PROJECT, AGREEING.replace(old, new))
    assert any(complaint in p for p in problems), problems


def test_a_range_without_a_floor_is_reported():
    project = {"project": {"dependencies": ["rich<14"], "optional-dependencies": {"test": []}}}
    assert disagreements(project, "") == ["rich<14 has no floor (a >=, ~= or == bound) to test at"]
