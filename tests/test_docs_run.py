"""The documentation runs as written: every shell and Python block of the user's pages, in the
order a newcomer reads them (README, then the tutorial, specs, security, languages, practice,
the LMS loop, paper read back),
run in one fresh folder holding only the repository's inputs (problem_bank/, examples/), with a
home of its own (so the first ``generate`` creates the secret, as it would).

A block's line runs as a shell command and must exit 0, or the status its comment announces
("exits 2"). Not run: installing (pip, venv, apt), the developer's tools (pytest, pybabel,
benchmarks), ``qkvquiz practice`` without ``--static`` and ``qkvquiz scan review`` (servers that
wait for a browser), and PDF commands where WeasyPrint's libraries are missing (and there the
pages that read PDFs back, :data:`PDF_PAGES`, are not run at all). ``docs/lms.md`` makes its own sample
downloads (a documented Python block) from the tutorial's set; ``docs/install.md`` needs a
machine's packages and is not run here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", "docs/tutorial.md", "docs/specs.md", "docs/security.md", "docs/languages.md",
         "docs/practice.md", "docs/lms.md", "docs/scanning.md"]
#: Pages whose blocks go on from a PDF a block before them wrote (scanning.md scans printed sheets).
PDF_PAGES = {"docs/scanning.md"}
NOT_RUN = re.compile(r"pip install|python3? -m venv|\. \.venv/bin/activate|^sudo |apt-get|brew |pybabel|"
                     r"python -m pytest|python benchmarks/|python tools/")
ANNOUNCED = re.compile(r"#.*\bexits (\d)\b")


def blocks(page: str) -> list[tuple[str, str]]:
    """The page's ``sh`` and ``python`` blocks, in order, and its ``yaml`` blocks that hold an audit
    file (``claimed:``), which are audited."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = re.findall(r"^```(sh|python|yaml)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return [(kind, body) for kind, body in found if kind != "yaml" or "claimed:" in body]


def commands(body: str) -> list[str]:
    """A shell block's commands: continuation lines joined, comment lines and what is not run left out."""
    joined = re.sub(r"\s*\\\n\s*", " ", body)
    out = []
    for line in joined.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p for p in line.split(" && ") if not NOT_RUN.search(p.strip())]
        if parts:
            out.append(" && ".join(parts))
    return out


def _skipped(command: str, pdf: bool) -> bool:
    if re.match(r"qkvquiz practice\b", command) and "--static" not in command:
        return True  # a server
    if re.match(r"qkvquiz scan review\b", command):
        return True  # a server
    return not pdf and bool(re.search(r"--format \S*pdf|--pdf\b", command))


@pytest.mark.slow
@pytest.mark.heavy
def test_every_documented_command_runs_in_order_in_a_fresh_folder(tmp_path):
    from qkvquiz.render.pdf import pdf_available

    pdf = pdf_available()
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    for folder in ("problem_bank", "examples"):
        shutil.copytree(ROOT / folder, work / folder)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "XDG_CACHE_HOME": str(home / ".cache"), "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
           f"{os.environ.get('PATH', '')}", "COLUMNS": "100"}
    env.pop("QKVQUIZ_SECRET", None)
    ran = 0
    for page in PAGES:
        if page in PDF_PAGES and not pdf:
            continue
        for n, (kind, body) in enumerate(blocks(page), start=1):
            where = f"{page}, block {n}"
            if kind == "python":
                done = subprocess.run([sys.executable, "-c", body], cwd=work, env=env, capture_output=True, text=True)
                assert done.returncode == 0, f"{where}:\n{body}\n{done.stdout}\n{done.stderr}"
                ran += 1
                continue
            if kind == "yaml":
                audit = work / f"audit-example-{n}.yaml"
                audit.write_text(body, encoding="utf-8")
                body = f"qkvquiz audit {audit.name}  # exits 1: a claim is wrong on purpose"
            for command in commands(body):
                if _skipped(command, pdf):
                    continue
                announced = ANNOUNCED.search(command)
                expected = int(announced.group(1)) if announced else 0
                done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True)
                assert done.returncode == expected, (
                    f"{where}: `{command}` exited {done.returncode}, not {expected}\n{done.stdout}\n{done.stderr}")
                ran += 1
    assert ran >= 25


def test_the_commands_of_a_block_are_read_as_a_shell_reads_them():
    body = ("python3 -m venv .venv && . .venv/bin/activate && pip install . && qkvquiz generate x --out c\n"
            "# a comment\nqkvquiz init a && qkvquiz generate y \\\n        --out z   # note\nsudo apt-get install p\n")
    assert commands(body) == ["qkvquiz generate x --out c", "qkvquiz init a && qkvquiz generate y --out z   # note"]
    assert _skipped("qkvquiz practice attention.output", pdf=True)
    assert not _skipped("qkvquiz practice attention-basics --static 5 --out s", pdf=True)
    assert _skipped("qkvquiz scan review paper/scan --no-browser", pdf=True)
    assert not _skipped("qkvquiz scan paper/key.json scans/stack1.pdf --out paper/scan", pdf=True)
    assert _skipped("qkvquiz generate a --format md,pdf --out p", pdf=False)
