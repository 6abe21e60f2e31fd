"""The documentation stays true to the code: generated pages current, links whole, the README's
commands and example as they must be.

- docs/families.md and docs/cli.md are what docs/make_reference.py makes from the family registry
  and the command line now, so a new family, param, step, mistake or option cannot go
  undocumented (run ``python docs/make_reference.py`` and commit the pages);
- every relative link in README.md and docs/*.md points to a file or folder that exists, and a
  link with ``#anchor`` into a Markdown file to one of its headings;
- the README keeps the test command CI runs (.ci/run), stays a front door, and its Python example
  runs.
"""

from __future__ import annotations

import contextlib
import html
import importlib.util
import io
import re
import shutil
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]


def _make_reference():
    spec = importlib.util.spec_from_file_location("make_reference", DOCS / "make_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["families.md", "cli.md"])
def test_generated_page_is_current(name: str) -> None:
    expected = _make_reference().pages()[DOCS / name]
    current = (DOCS / name).read_text(encoding="utf-8")
    assert current == expected, (
        f"docs/{name} differs from what docs/make_reference.py makes from the code now: "
        "run `python docs/make_reference.py` and commit the result")


def test_every_family_and_command_is_in_the_reference() -> None:
    # Named here as well as by the page comparison, so that a failure says what is missing.
    import typer.main

    from qkvquiz.cli import app
    from qkvquiz.families import REGISTRY

    families = (DOCS / "families.md").read_text(encoding="utf-8")
    for name, family in REGISTRY.items():
        assert f"## {name}\n" in families, name
        for param in family.params:
            assert f"| `{param}` |" in families, (name, param)
    cli = (DOCS / "cli.md").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    for name, command in root.commands.items():
        assert f"## qkvquiz {name}\n" in cli, name
        for sub in getattr(command, "commands", {}):
            assert f"### qkvquiz {name} {sub}\n" in cli, (name, sub)


# --- links -------------------------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:.+?)\1", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def _prose(text: str) -> str:
    """The text without fenced code blocks and code spans, where nothing is a link or heading."""
    text = FENCE.sub("", text)
    return CODE_SPAN.sub("", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces to '-'."""
    text = html.unescape(re.sub(r"`([^`]*)`", r"\1", heading))  # code spans keep their text
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    kept = []
    for ch in text.strip().lower():
        if ch in " -_" or unicodedata.category(ch)[0] in "LNM":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    found: set[str] = set(EXPLICIT_ANCHOR.findall(text))
    seen: dict[str, int] = {}
    for _hashes, heading in HEADING.findall(text):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def _links(path: Path) -> list[str]:
    text = _prose(path.read_text(encoding="utf-8"))
    return INLINE_LINK.findall(text) + REFERENCE.findall(text)


def test_the_pages_have_links() -> None:
    # The checker must see the links it is meant to check.
    assert len(_links(README)) >= 9
    assert "docs/tutorial.md" in _links(README)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: …
            continue
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
            continue
        try:
            linked.relative_to(ROOT)
        except ValueError:
            broken.append(f"{target}: outside the repository")
            continue
        if anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {linked.relative_to(ROOT).as_posix()}")
    assert not broken, f"{page.relative_to(ROOT).as_posix()}: " + "; ".join(broken)


def test_slugs_follow_github() -> None:
    assert _slug("1. A secret") == "1-a-secret"
    assert _slug("Collect: grade a bulk download as it comes") == "collect-grade-a-bulk-download-as-it-comes"
    assert _slug("中文 / languages") == "中文--languages"
    assert _slug("attention.qk_swap") == "attentionqk_swap"
    assert _slug("feedback/&lt;student&gt;.md") == "feedbackstudentmd"


# --- the README --------------------------------------------------------------------------------


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, re.M | re.S)


def test_readme_keeps_the_test_command_ci_runs() -> None:
    # .ci/run runs "python -m pip install '.[test]' && python -m pytest -q", as the README says.
    blocks = _code_blocks(README.read_text(encoding="utf-8"), "sh")
    assert any("pip install '.[test]' && python -m pytest -q" in block for block in blocks)
    assert any("pip install . && qkvquiz generate attention-basics --students 30 --out class" in block
               for block in blocks)


def test_readme_counts_the_families() -> None:
    from qkvquiz.families import REGISTRY

    counted = re.search(r"\((\d+) families", README.read_text(encoding="utf-8"))
    assert counted and int(counted.group(1)) == len(REGISTRY), "README.md: say how many families there are"


def test_readme_stays_a_front_door() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move the detail into docs/"


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = _code_blocks(README.read_text(encoding="utf-8"), "python")
    (tmp_path / "problem_bank").mkdir()
    for spec in re.findall(r"problem_bank/[\w.-]+\.yaml", block):
        shutil.copy(ROOT / spec, tmp_path / spec)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README.md", "exec"), {"__name__": "readme_example"})
    assert "ada" in out.getvalue()
    assert (tmp_path / "notebook" / "key.json").is_file()


def test_the_reference_gives_each_command_the_usage_line_its_help_prints() -> None:
    from typer.testing import CliRunner

    from qkvquiz.cli import app

    page = (DOCS / "cli.md").read_text(encoding="utf-8")
    documented = re.findall(r"^#+ (qkvquiz [\w ]+)\n\n`([^`]+)`", page, flags=re.MULTILINE)
    assert len(documented) >= 12
    for path, line in documented:
        shown = CliRunner().invoke(app, [*path.split()[1:], "--help"]).output
        usage = " ".join(shown.split("\n\n")[0].split()).removeprefix("Usage: ")
        # Typer's releases write a required argument {spec} or SPEC: the page keeps one style.
        assert line == _make_reference().plain_usage(usage.replace("root ", "qkvquiz ", 1)), path
